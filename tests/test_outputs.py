"""What med_evals writes is written whole or not at all, and an output that cannot be written is
one line and exit 2 before any work (src/med_evals/outputs/files.py, report/build.py).

Kills are real: a forked child runs the command with one system call (``os.replace`` or
``os.fsync``) replaced by a SIGKILL of itself at the k-th call, for every k, and the test reads
what the kill left. The cross-filesystem, read-only and full-disk cases run on tmpfs mounts the
test makes (as root; skipped with the reason where mounting is not allowed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai.model import get_model

from med_evals.commands.cli import main as cli_main
from med_evals.commands.report import build_report
from med_evals.outputs.files import write_text
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import replying
from .oncology_support import follower as _follower
from .oncology_support import install_fixture
from .support.evals import inspect_eval


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """Two models' runs of two oncology conditions (figures to draw)."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("outputs")
    install_fixture(tmp / "onc", mp)
    for name, fn in (("follower", _follower), ("contrarian", lambda t: "NEGATIVE")):
        inspect_eval(
            oncology_rct(condition="title_abstract,counterfactual"),
            model=get_model(f"mockllm/{name}", custom_outputs=replying(fn)),
            display="none",
            log_dir=str(tmp / "logs"),
        )
    mp.undo()
    return tmp / "logs"


def _killed_at(call: str, k: int, action: Callable[[], object]) -> bool:
    """Run ``action`` in a forked child whose ``os.<call>`` SIGKILLs the child at its k-th
    call (0-based); True when the child was killed, False when it finished first."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            real, count = getattr(os, call), [0]

            def patched(*args, **kwargs):
                if count[0] == k:
                    os.kill(os.getpid(), signal.SIGKILL)
                count[0] += 1
                return real(*args, **kwargs)

            setattr(os, call, patched)
            action()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


def _shown(report: Path) -> list[str]:
    return re.findall(r"\]\((figures/[^)]+)\)", (report / "report.md").read_text())


def _exports(report: Path, name: str = "report.md") -> list[str]:
    return re.findall(r"\]\((tables/[^)]+)\)", (report / name).read_text())


def _whole(report: Path) -> None:
    """A report that a reader can open: both files complete, every figure report.md shows and
    every table export each file links."""
    html = (report / "report.html").read_text()
    assert html.rstrip().endswith("</html>")
    md = (report / "report.md").read_text()
    assert md.startswith("# med_evals report") and "## What produced each run" in md
    shown = _shown(report)
    assert shown and all((report / f).stat().st_size > 1000 for f in shown)
    linked = _exports(report) + re.findall(r'href="(tables/[^"]+)"', html)
    assert linked and all((report / f).stat().st_size > 0 for f in linked)


# --- one file ---------------------------------------------------------------------------


def test_a_kill_while_writing_a_file_leaves_the_old_one_and_the_next_write_cleans_up(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text("old")
    assert _killed_at("fsync", 0, lambda: write_text(path, "new" * 1000))
    assert path.read_text() == "old"
    [left] = [p for p in tmp_path.iterdir() if p != path]
    assert left.name.startswith(".baseline.json.") and left.name.endswith(".tmp")
    write_text(path, "newer")
    assert path.read_text() == "newer" and list(tmp_path.iterdir()) == [path]


def test_a_written_file_gets_the_users_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        write_text(tmp_path / "a.csv", "x")
        assert (tmp_path / "a.csv").stat().st_mode & 0o777 == 0o640
        (tmp_path / "a.csv").chmod(0o604)
        write_text(tmp_path / "a.csv", "y")  # an existing file keeps its mode
        assert (tmp_path / "a.csv").stat().st_mode & 0o777 == 0o604
    finally:
        os.umask(old)


@pytest.mark.slow
def test_a_kill_during_baseline_keeps_the_earlier_baseline(logs, tmp_path, capsys):
    """Before: a kill during ``baseline -o`` over an earlier baseline left a 0-byte file (4 of
    5 kills), and ``regress`` then exited 2."""
    base = tmp_path / "base.json"
    follower = [str(p) for p in logs.glob("*.eval")]
    assert cli_main(["baseline", follower[0], "-o", str(base)]) == 0
    before = base.read_bytes()
    for k in range(3):
        if not _killed_at("fsync", k, lambda: cli_main(["baseline", *follower, "-o", str(base)])):
            break
        assert base.read_bytes() == before
    capsys.readouterr()
    assert cli_main(["regress", "--n-boot", "100", "--allow-absent", "--baseline", str(base),
                     follower[0]]) == 0


# --- the report -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_kill_at_any_step_of_report_leaves_a_whole_report(logs, tmp_path):
    """Before: 2 of 3 kills during ``report --out DIR`` over an earlier report left report.md
    and report.html without figures/, and hidden build folders that were never removed."""
    out, earlier = tmp_path / "report", tmp_path / "earlier"
    # the earlier report differs from the next (fewer runs): its figures have other names
    build_report(sorted(logs.glob("*.eval"))[:1], earlier, n_boot=10)
    old_md = (earlier / "report.md").read_text()
    for k in range(20):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(earlier, out)
        if not _killed_at("replace", k, lambda: build_report([logs], out, n_boot=10)):
            break
        _whole(out)
        md = (out / "report.md").read_text()
        assert md == old_md or _shown(out) != re.findall(r"\]\((figures/[^)]+)\)", old_md)
    else:
        pytest.fail("build_report still renaming after 20 steps")
    assert k >= 3  # at least: a figure, report.html, report.md
    # a kill before any rename leaves our build folder: the next run removes it
    assert _killed_at("replace", 0, lambda: build_report([logs], out, n_boot=10))
    assert [p for p in out.iterdir() if p.name.startswith(".med-evals-report-")]
    build_report([logs], out, n_boot=10)
    assert sorted(p.name for p in out.iterdir()) == ["figures", "report.html", "report.md",
                                                      "tables"]
    assert sorted(f"figures/{p.name}" for p in (out / "figures").iterdir()) == sorted(_shown(out))
    # one folder of exports: the one report.md links
    assert [f"tables/{p.name}" for p in (out / "tables").iterdir()] == sorted(
        {f.rsplit("/", 1)[0] for f in _exports(out)})


def test_other_files_in_the_report_folder_are_left_alone(logs, tmp_path):
    out = tmp_path / "report"
    (out / "figures").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (out / "figures" / "my-plot.png").write_bytes(b"mine")
    (out / "figures" / "oncology_f1_by_condition.png").write_bytes(b"an older report's")
    (out / "tables" / "0123456789ab").mkdir(parents=True)  # an older report's exports
    (out / "tables" / "mine").mkdir()
    (out / "tables" / "mine.tex").write_text("mine")
    (out / "report.md").write_text("![old](figures/oncology_f1_by_condition.png)\n"
                                   "[CSV](tables/0123456789ab/01-x.csv)\n")
    r = build_report([logs], out, n_boot=10)
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "tables" / "mine.tex").read_text() == "mine"
    assert {p.name for p in (out / "tables").iterdir()} == {
        "mine", "mine.tex", r.tables[0][0].parent.name}
    assert (out / "figures" / "my-plot.png").read_bytes() == b"mine"
    assert not (out / "figures" / "oncology_f1_by_condition.png").exists()  # the old report's
    assert {p.name for p in (out / "figures").iterdir()} == {"my-plot.png", *(
        p.name for p in r.figures)}
    assert all(re.fullmatch(r"[a-z_0-9]+\.[0-9a-f]{12}\.png", p.name) for p in r.figures)


# --- other filesystems, read-only and full disks ------------------------------------------


@pytest.fixture
def mount(tmp_path) -> Iterator[Callable[..., Path]]:
    """``mount(name, size="4m", ro=False)``: a tmpfs mounted at ``tmp_path/name``, unmounted
    after the test; skips the test where this process may not mount."""
    made: list[Path] = []

    def make(name: str, size: str = "8m", ro: bool = False) -> Path:
        point = tmp_path / name
        point.mkdir()
        opts = f"size={size}" + (",ro" if ro else "")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(point)],
                              capture_output=True, text=True)
        if proc.returncode:
            pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or 'not root'})")
        made.append(point)
        return point

    yield make
    for point in reversed(made):
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def _report_cmd(logs: Path, out: Path, capsys) -> tuple[int, str]:
    code = cli_main(["report", str(logs), "--out", str(out)])
    return code, capsys.readouterr().err


@pytest.mark.slow
def test_report_onto_another_filesystem_replaces_the_earlier_report(logs, tmp_path, mount):
    """Before: over an earlier report on a mount point, or a link to a folder on another
    filesystem, ``[Errno 18] Invalid cross-device link``, exit 1, and the earlier figures/
    deleted."""
    volume = mount("volume")
    first = sorted(logs.glob("*.eval"))[:1]
    for out in (volume, tmp_path / "link"):
        if out.name == "link":
            (volume / "shared").mkdir()
            out.symlink_to(volume / "shared")
        build_report(first, out, n_boot=10)
        old = set(_shown(out))
        build_report([logs], out, n_boot=10)  # before: OSError, errno 18 (EXDEV)
        _whole(out)
        assert set(_shown(out)) != old
        assert not [p for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_a_full_disk_keeps_the_earlier_report(logs, tmp_path, mount, capsys):
    disk = mount("small", size="600k")
    first = sorted(logs.glob("*.eval"))[:1]
    build_report(first, disk / "report", n_boot=10)
    before = {p.relative_to(disk): p.read_bytes() for p in disk.rglob("*") if p.is_file()}
    fill = disk / "fill"  # the disk filled, then 32 kB freed: a probe fits, the report not
    fd = os.open(fill, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(fill, max(0, fill.stat().st_size - 32 * 1024))
    code, err = _report_cmd(logs, disk / "report", capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "No space left on device" in err and "earlier report there is unchanged" in err
    fill.unlink()
    after = {p.relative_to(disk): p.read_bytes() for p in disk.rglob("*") if p.is_file()}
    assert after == before


def _read_only_cases(logs: Path, ro: Path, tmp_path: Path) -> list[list[str]]:
    log = str(sorted(logs.glob("*.eval"))[0])
    table = tmp_path / "recorded.csv"
    pd.DataFrame({"model": ["m"], "condition": ["title_abstract"], "trial": [0],
                  "reply": ["POSITIVE"], "ground_truth": ["POSITIVE"]}).to_csv(table, index=False)
    return [
        ["report", str(logs), "--out", str(ro / "report")],
        ["report", str(logs), "--out", str(ro)],
        ["baseline", log, "-o", str(ro / "b.json")],
        ["flip-rate", log, "--pair", "title_abstract:counterfactual", "--out", str(ro / "f.csv")],
        ["score-recorded", str(table), "--out", str(ro / "s.csv")],
        ["export-counterfactuals", log, "--out", str(ro / "t.csv")],
        ["recorded-to-replay", str(table), "--by-row", "--out", str(ro / "replays")],
        ["subset", "make", "oncology_rct", "mine", "--size", "3", "--out", str(ro / "subsets")],
    ]


def test_outputs_on_a_read_only_filesystem_are_one_line_and_exit_2(logs, tmp_path, mount,
                                                                   capsys):
    """Before: PermissionError / OSError tracebacks (report: after building the whole report
    for 24 s), exit 1."""
    ro = mount("ro", ro=True)
    for argv in _read_only_cases(logs, ro, tmp_path):
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1, (argv, err)
        flag = "-o" if "-o" in argv else "--out"
        assert err.startswith(f"med-evals {' '.join(argv[:2]) if argv[0] == 'subset' else argv[0]}"
                              f": error: {flag} {ro}"), (argv, err)
        assert "Read-only file system" in err, (argv, err)


def test_an_output_folder_that_is_a_file_or_missing_is_one_line(logs, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    log = str(sorted(logs.glob("*.eval"))[0])
    cases = [
        (["report", log, "--out", str(a_file)], f"--out {a_file}: is a file, not a folder"),
        (["report", log, "--out", str(a_file / "sub")],
         f"--out {a_file / 'sub'}: {a_file} is a file, not a folder"),
        (["baseline", log, "-o", str(tmp_path)], f"-o {tmp_path}: is a folder; name the file"),
        (["flip-rate", log, "--out", str(tmp_path / "no" / "f.csv")],
         f"--out {tmp_path / 'no' / 'f.csv'}: the folder {tmp_path / 'no'} does not exist"),
    ]
    for argv, message in cases:
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (argv, err)


# --- CSV tables for people -----------------------------------------------------------------


def test_csv_tables_for_people_neutralise_formulas(tmp_path, capsys):
    table = tmp_path / "recorded.csv"
    model = '=HYPERLINK("http://x.invalid","open")'
    pd.DataFrame({"model": [model, model], "condition": ["title_abstract"] * 2,
                  "trial": [0, 1], "reply": ["POSITIVE", "@SUM(1)"],
                  "ground_truth": ["POSITIVE", "NEGATIVE"]}).to_csv(table, index=False)
    out = tmp_path / "scored.csv"
    assert cli_main(["score-recorded", str(table), "--out", str(out)]) == 0
    written = pd.read_csv(out, dtype=str, keep_default_na=False)
    cells = [c for col in written.columns for c in written[col]]
    assert "'" + model in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "@") or
                (c[:1] == "-" and not re.fullmatch(r"-[0-9.]+", c))]
    assert json.dumps(model) not in capsys.readouterr().err


def test_cleanup_never_touches_a_live_writers_temp_file(tmp_path):
    """A temporary file of a process that still runs (another write of the same file) is left."""
    from med_evals.outputs.files import temp_name

    live = tmp_path / f"{temp_name('.b.json.')}abcd1234.tmp"
    live.write_text("in progress")
    write_text(tmp_path / "b.json", "x")
    assert live.exists()
    shutil.rmtree(tmp_path)


# --- the terminal ---------------------------------------------------------------------------


def test_control_characters_from_a_log_never_reach_the_terminal(logs, tmp_path, capsys):
    """Before: ESC and OSC sequences in a model name (colour, window title, clear screen)
    reached stdout and stderr of regress, baseline, flip-rate and report's warnings."""
    from inspect_ai.log import read_eval_log, write_eval_log

    hostile = "mockllm/\x1b[31mred\x1b]0;owned\x07\x1b[2J\u202egpj.exe"
    log = read_eval_log(str(sorted(logs.glob("*.eval"))[0]))
    log.eval.model = hostile
    log.eval.task_id = "hostile"
    path = tmp_path / "hostile.eval"
    write_eval_log(log, str(path))
    log.eval.task_id = "hostile-again"  # the same label twice: the report warns of the merge
    again = tmp_path / "again.eval"
    write_eval_log(log, str(again))
    base = tmp_path / "b.json"
    commands = [
        ["baseline", str(path), "-o", str(base)],
        ["regress", "--n-boot", "100", "--baseline", str(base), str(path)],
        ["flip-rate", str(path), "--pair", "title_abstract:counterfactual"],
        ["report", str(path), str(again), "--out", str(tmp_path / "r")],
        ["baseline", str(path), str(tmp_path / "nowhere\x1b[2J"), "-o", str(base)],
    ]
    for argv in commands:
        cli_main(argv)
        out, err = capsys.readouterr()
        for text in (out, err):
            assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, argv
        assert "\\x1b" in out + err, argv


def test_flip_rate_names_an_unknown_condition_and_the_closest(logs, capsys):
    """Before: ``--pair title_abstract:counterfactul`` said no log holds the pair."""
    log = str(sorted(logs.glob("*.eval"))[0])
    for pair, message in [
        ("title_abstract:counterfactul", "--pair title_abstract:counterfactul: unknown condition "
         "'counterfactul'; did you mean counterfactual?"),
        ("title-abstract:counterfactual", "--pair title-abstract:counterfactual: unknown "
         "condition 'title-abstract'; did you mean title_abstract?"),
        ("title_abstract", "--pair: a condition pair is written 'a:b', got 'title_abstract'"),
    ]:
        assert cli_main(["flip-rate", log, "--pair", pair]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize(("name", "what"), [("figures", "figures"), ("tables", "table exports")])
def test_a_file_where_the_report_puts_a_folder_is_one_line(logs, tmp_path, capsys, name, what):
    out = tmp_path / "report"
    out.mkdir()
    (out / name).write_text("mine")
    assert cli_main(["report", str(sorted(logs.glob("*.eval"))[0]), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"med-evals report: error: --out {out}: {out / name} is a file, not the "
                       f"report's {what} folder")
    assert (out / name).read_text() == "mine" and not (out / "report.md").exists()


# --- an output onto an input ----------------------------------------------------------------


def test_an_output_onto_an_input_log_is_refused_before_anything_is_written(logs, tmp_path,
                                                                            capsys):
    """Before: ``baseline L -o L/x.eval`` (x.eval one of the logs read) and ``flip-rate ...
    --out L/x.eval`` overwrote the log, exit 0."""
    folder = tmp_path / "L"
    shutil.copytree(logs, folder)
    log = sorted(folder.glob("*.eval"))[0]
    linked = tmp_path / "link.eval"
    linked.symlink_to(log)
    table = tmp_path / "recorded.csv"
    pd.DataFrame({"model": ["m"], "condition": ["title_abstract"], "trial": [0],
                  "reply": ["POSITIVE"], "ground_truth": ["POSITIVE"]}).to_csv(table, index=False)
    before = {p: p.read_bytes() for p in [*folder.glob("*.eval"), table]}
    in_folder = f"is an input log (in the folder {folder} given); name another file"
    cases = [
        (["baseline", str(folder), "-o", str(log)], f"-o {log}: {in_folder}"),
        (["baseline", str(log), "-o", str(log)], f"-o {log}: is an input log; name another"),
        (["baseline", str(log), "-o", str(linked)], f"-o {linked}: is an input log; name"),
        (["flip-rate", str(folder), "--out", str(log)], f"--out {log}: {in_folder}"),
        (["export-counterfactuals", str(folder), "--out", str(log)], f"--out {log}: {in_folder}"),
        (["report", str(log), "--out", str(log)], f"--out {log}: is an input log; name"),
        (["score-recorded", str(table), "--out", str(table)],
         f"--out {table}: is an input table; name another file"),
        (["recorded-to-replay", str(table), "--by-row", "--out", str(table)],
         f"--out {table}: is an input table; name another file"),
    ]
    for argv, message in cases:
        assert cli_main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert err.startswith(f"med-evals {argv[0]}: error: {message}"), (argv, err)
        assert err.count("\n") == 1 and not out, (argv, err)
    assert {p: p.read_bytes() for p in before} == before
    # a new file beside the logs, and a report into the log folder, are outputs like any other
    assert cli_main(["baseline", str(folder), "-o", str(folder / "b.json")]) == 0
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]


def test_model_names_differing_by_an_invisible_character_print_apart(logs, tmp_path, capsys):
    """Before: ``openai/gpt-4o`` and ``openai/gpt\\u200b-4o`` (a zero-width space) printed
    alike on the console and in the report: two runs that read as one model (issue 44)."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from med_evals.outputs.text import html_text, markdown_text

    names = ["openai/gpt-4o", "openai/gpt\u200b-4o"]
    paths = []
    for name, source in zip(names, sorted(logs.glob("*.eval")), strict=True):
        log = read_eval_log(str(source))
        log.eval.model = name
        paths.append(str(tmp_path / f"{len(paths)}.eval"))
        write_eval_log(log, paths[-1])
    assert cli_main(["baseline", *paths, "-o", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert out.endswith(": oncology_rct / openai/gpt-4o (12 samples), oncology_rct / "
                        "openai/gpt\\u200b-4o (12 samples)\n"), out
    assert cli_main(["flip-rate", *paths]) == 0
    table = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[0] for line in table[1:]) == ["openai/gpt-4o",
                                                             "openai/gpt\\u200b-4o"]
    assert cli_main(["report", *paths, "--out", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    for text, shown in ((md, markdown_text(names[1])), (html, html_text(names[1]))):
        assert "\u200b" not in text and shown in text and "openai/gpt-4o" in text
