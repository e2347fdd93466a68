import json
import math
import os
import zipfile
from pathlib import Path

import pytest
from inspect_ai.model import get_model

from med_evals.commands.cli import main as cli_main
from med_evals.commands.regress import decide, make_baseline, read_baseline, regress
from med_evals.outputs.exit_codes import table_text
from med_evals.tasks import spec
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import replying
from .oncology_support import big_fixture_csv, install_fixture
from .support import N_BOOT, NB
from .support.evals import inspect_eval

#: each run's 'model' (a wrong reply every N calls; -1: no reply parses) and condition
RUNS = {
    "baseline": (10, "title_abstract"),
    "same": (10, "title_abstract"),
    "slightly": (9, "title_abstract"),
    "worse": (3, "title_abstract"),
    "other_setup": (10, "abstract_only"),
    "invalid": (-1, "title_abstract"),  # no reply parses to a label
}


#: trials in the runs' corpus (the fixture's 6, repeated)
N_TRIALS = 60

#: where install_fixture points the loader
ENV = ("MED_EVALS_MANIFEST_DIR", "MED_EVALS_DATA_DIR")


class _Runs(dict):
    """Log folders of the runs in :data:`RUNS`, each run made when a test first asks for it
    (a test reading two runs does not wait for six) and kept for the module."""

    def __init__(self, tmp: Path) -> None:
        super().__init__()
        self.tmp = tmp
        with pytest.MonkeyPatch.context() as mp:  # one dataset for every run
            install_fixture(tmp, mp, csv=big_fixture_csv(tmp, copies=N_TRIALS // 6))
            self.env = {k: os.environ[k] for k in ENV}

    def __missing__(self, name: str) -> Path:
        wrong_every, cond = RUNS[name]
        with pytest.MonkeyPatch.context() as mp:
            for k, v in self.env.items():
                mp.setenv(k, v)
            reply = (lambda text: "I cannot tell") if wrong_every < 0 else reader(wrong_every)
            model = get_model("mockllm/reader", custom_outputs=replying(reply))
            inspect_eval(
                oncology_rct(condition=cond),
                model=model,
                display="none",
                log_dir=str(self.tmp / name),
                max_connections=1,
            )
        self[name] = self.tmp / name
        return self[name]


def reader(wrong_every: int):
    count = {"n": 0}

    def reply(text):
        count["n"] += 1
        right = "NEGATIVE" if "did not meet" in text else "POSITIVE"
        if wrong_every and count["n"] % wrong_every == 0:
            return "NEGATIVE" if right == "POSITIVE" else "POSITIVE"
        return right

    return reply


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 60-trial corpus (the fixture's 6 trials repeated) and the runs of :data:`RUNS` on it
    (four 'models', one in another setup), each made on first use."""
    return _Runs(tmp_path_factory.mktemp("regress"))


@pytest.mark.slow
def test_same_and_noise_level_changes_pass(runs, tmp_path):
    baseline = make_baseline([runs["baseline"]])
    assert len(baseline["runs"][0]["samples"]) == N_TRIALS
    rows, notes = regress(baseline, [runs["same"]], n_boot=N_BOOT)
    assert notes == [] and {r.verdict for r in rows} <= {"ok", "info"}
    acc = next(r for r in rows if r.metric == "accuracy_valid")
    assert acc.old == acc.new == pytest.approx(0.9)  # one wrong in 10
    rows, _ = regress(baseline, [runs["slightly"]], n_boot=N_BOOT)
    assert not [r for r in rows if r.verdict == "REGRESSION"]


@pytest.mark.slow
def test_a_real_drop_is_a_regression(runs):
    rows, _ = regress(make_baseline([runs["baseline"]]), [runs["worse"]], n_boot=N_BOOT)
    verdicts = {r.metric: r.verdict for r in rows}
    # the oncology headline: the study's metrics over valid predictions, and the valid rate
    assert set(verdicts) == {"valid_rate", "accuracy_valid", "macro_f1_valid"}
    assert verdicts["accuracy_valid"] == "REGRESSION"
    assert verdicts["macro_f1_valid"] == "REGRESSION"
    assert verdicts["valid_rate"] == "ok"
    acc = next(r for r in rows if r.metric == "accuracy_valid")
    assert f"paired bootstrap n={N_TRIALS}" in acc.test


def test_changed_setup_is_reported_not_a_regression(runs):
    baseline = make_baseline([runs["baseline"]])
    baseline["runs"][0]["setup"]["generation"]["temperature"] = 0.7
    rows, _ = regress(baseline, [runs["same"]], n_boot=100)
    assert [r.verdict for r in rows] == ["setup changed"]
    assert rows[0].detail == "changed: generation.temperature 0.7 -> 0.0"


def test_conditions_are_gated_one_by_one(runs):
    """A run of another condition: the baseline's condition is untested (not in the new run),
    the new condition is shown and not gated (the baseline has none to compare with): conditions
    are a per-sample dimension, not a setup."""
    rows, _ = regress(make_baseline([runs["baseline"]]), [runs["other_setup"]], n_boot=100)
    verdicts = {(r.metric.split("/")[0], r.verdict) for r in rows}
    assert verdicts == {("title_abstract", "untested"), ("abstract_only", "info")}
    assert {r.detail for r in rows if r.verdict == "info"} == {
        "condition 'abstract_only' not in the baseline: not gated"}


@pytest.mark.slow
def test_cli_gate_exit_codes(runs, tmp_path, capsys):
    path = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(runs["baseline"]), "-o", str(path)]) == 0
    assert read_baseline(path)["format"] == 3
    assert json.loads(path.read_text())["runs"][0]["task"] == "oncology_rct"
    assert cli_main(["regress", *NB, "--baseline", str(path), str(runs["same"])]) == 0
    same = capsys.readouterr().out.splitlines()
    # identical replies: the pair never differs, so it detects nothing itself; the gate says
    # what the baseline alone lets it detect (med-evals power's rule: a baseline at accuracy
    # p = 0.9, the new run's errors independent of it)
    from scipy.stats import norm

    c = norm.ppf(0.975) + norm.ppf(0.80)

    def alone(p: float, n: int = N_TRIALS) -> float:
        m, lin = n + c * c, c * c * (2 * p - 1)
        return (lin + math.sqrt(lin * lin + 8 * c * c * m * p * (1 - p))) / (2 * m)

    assert ("  oncology_rct / mockllm/reader accuracy_valid: the pair detects no drop of any "
            f"size (the runs never disagree on the {N_TRIALS} samples); from the baseline "
            f"alone, a gate on these {N_TRIALS} samples detects drops of at least "
            f"{100 * alone(0.9):.1f} points ({alone(0.9):.3f}; the new run's errors "
            "independent of the baseline's)") in same
    assert round(alone(0.9), 3) == 0.198
    assert cli_main(["regress", *NB, "--baseline", str(path), str(runs["worse"])]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "old" in out and "diff" in out
    names = ", ".join(h.name for h in spec("oncology_rct").headline)
    assert f"gated for oncology_rct: {names} (headline metrics, paired bootstrap)" in out
    # what the gate detects on the 60 trials compared: accuracy (every reply valid in both)
    # from the trials the two runs differ on, c * sqrt(q / (n + c^2)); macro-F1 from the
    # paired bootstrap's se; the valid rate never differs (from the baseline alone, at 1:
    # c^2 / (n + c^2))
    from med_evals.stats.intervals import bootstrap_difference

    old = json.loads(path.read_text())["runs"][0]["samples"]
    new = make_baseline([runs["worse"]])["runs"][0]["samples"]
    ids = sorted(old)
    right = {k: [int(v[i]["prediction"] == v[i]["target"]) for i in ids]
             for k, v in (("old", old), ("new", new))}
    differ = sum(a != b for a, b in zip(right["old"], right["new"], strict=True))
    c = norm.ppf(0.975) + norm.ppf(0.80)
    mde = c * math.sqrt(differ / N_TRIALS / (N_TRIALS + c * c))
    se = bootstrap_difference(spec("oncology_rct").headline_values, [new[i] for i in ids],
                              [old[i] for i in ids], n_boot=N_BOOT)["macro_f1_valid"]["se"]
    lines = out.splitlines()
    i = lines.index("what each gate can detect (80% power, α = 0.05, on the samples compared, "
                    "at their observed differences; where too few differ, from the baseline "
                    "alone, as `med-evals power` sizes a gate; docs/numbers.md):")
    who = "  oncology_rct / mockllm/reader"
    valid = c * c / (N_TRIALS + c * c)
    assert alone(1.0) == pytest.approx(valid)
    assert lines[i + 1:i + 4] == [
        f"{who} macro_f1_valid: this gate detects drops of at least {100 * c * se:.1f} points "
        f"({c * se:.3f}; 2.80 × the paired bootstrap's standard error {se:.3f})",
        f"{who} accuracy_valid: this gate detects drops of at least {100 * mde:.1f} points "
        f"({mde:.3f}; from the discordance: {differ} of {N_TRIALS} samples differ)",
        f"{who} valid_rate: the pair detects no drop of any size (the runs never disagree on "
        f"the {N_TRIALS} samples); from the baseline alone, a gate on these {N_TRIALS} "
        f"samples detects drops of at least {100 * valid:.1f} points ({valid:.3f}; the new "
        "run's errors independent of the baseline's)",
    ]
    assert 10 < differ < 30


def test_cli_refuses_a_run_that_did_not_complete(runs, tmp_path, capsys):
    from inspect_ai.log import read_eval_log, write_eval_log

    from med_evals.logs.runs import expand_log_paths

    path = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(runs["baseline"]), "-o", str(path)]) == 0
    log = read_eval_log(expand_log_paths([runs["same"]])[0])
    log.status = "error"
    failed = tmp_path / "failed.eval"
    write_eval_log(log, str(failed))
    assert cli_main(["regress", *NB, "--baseline", str(path), str(failed)]) == 3
    out = capsys.readouterr().out
    assert "run did not complete (status error)" in out


def test_a_log_directory_expands_to_local_paths_that_exist(runs):
    from med_evals.logs.runs import expand_log_paths

    [path] = expand_log_paths([runs["same"]])
    assert not path.startswith("file:") and Path(path).is_file()


def _save(baseline, path):
    path.write_text(json.dumps(baseline))
    return str(path)


def _last_lines(capsys):
    out = capsys.readouterr().out.strip().splitlines()
    return [line for line in out
            if line.startswith(("undecided", "UNDECIDED", "pass", "FAIL", "accepted"))]


def test_a_changed_setup_is_undecided_naming_the_fields(runs, tmp_path, capsys):
    baseline = make_baseline([runs["baseline"]])
    baseline["runs"][0]["setup"]["behaviour"]["parser"] = "0123456789abcdef"
    baseline["runs"][0]["setup"]["generation"]["top_p"] = 0.9
    path = _save(baseline, tmp_path / "b.json")
    assert cli_main(["regress", *NB, "--baseline", path, str(runs["same"])]) == 3
    lines = _last_lines(capsys)
    parser = make_baseline([runs["same"]])["runs"][0]["setup"]["behaviour"]["parser"]
    assert lines[0] == (
        "undecided: oncology_rct / mockllm/reader: setup changed (behaviour.parser "
        f"0123456789abcdef -> {parser}, generation.top_p 0.9 -> null): not compared; record a "
        "new baseline"
    )
    assert lines[-1].startswith("UNDECIDED")


def test_a_baseline_run_of_each_setup_is_matched_before_a_changed_setup(runs):
    """A baseline holding one model in two setups: each new run is compared with its own."""
    baseline = make_baseline([runs["baseline"], runs["other_setup"]])
    rows, notes = regress(baseline, [runs["other_setup"]], n_boot=50)
    assert {r.verdict for r in rows} <= {"ok", "info", "absent"} and rows
    # the baseline run no new run was compared with: undecided, unless accepted
    [absent] = [r for r in rows if r.verdict == "absent"]
    assert "no new run in the logs given was compared with it" in absent.detail
    assert decide(rows).code == 3
    assert any(line.startswith("undecided: oncology_rct / mockllm/reader: baseline run no new "
                               "run in the logs given was compared with it (")
               and line.endswith("(--allow-absent accepts it)") for line in decide(rows).lines)
    assert decide(rows, allow_absent=True).code == 0
    assert not notes


def test_nothing_matching_the_baseline_is_undecided(runs, tmp_path, capsys):
    baseline = make_baseline([runs["baseline"]])
    baseline["runs"][0]["task"] = "medreqal"
    path = _save(baseline, tmp_path / "b.json")
    assert cli_main(["regress", *NB, "--baseline", path, str(runs["same"])]) == 3
    [line, *_] = _last_lines(capsys)
    assert line.startswith("undecided: oncology_rct / mockllm/reader: no baseline run of task "
                           "oncology_rct (") and line.endswith("): not gated")


@pytest.mark.slow
def test_a_run_without_a_baseline_beside_a_matched_one_is_undecided(runs, tmp_path, capsys):
    """Today a note and exit 0: the run of a task the baseline lacks (here an oncology log
    relabelled as a MedREQAL run, its scores as the verdict scorer's) is not gated."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from med_evals.logs.runs import expand_log_paths

    path = _save(make_baseline([runs["baseline"]]), tmp_path / "b.json")
    log = read_eval_log(expand_log_paths([runs["same"]])[0])
    log.eval.task, log.eval.task_id = "med_evals/medreqal", "relabelled"
    for red in log.reductions or []:
        red.scorer = "verdict"
    for sample in log.samples:
        sample.scores = {"verdict": sample.scores["trial_outcome"]}
    write_eval_log(log, str(tmp_path / "other.eval"))
    assert cli_main(["regress", *NB, "--baseline", path, str(runs["same"]),
                     str(tmp_path / "other.eval")]) == 3
    lines = _last_lines(capsys)
    assert lines[0] == (f"undecided: medreqal / mockllm/reader: no baseline run of task medreqal "
                        f"({tmp_path}/other.eval): not gated")
    assert lines[-1].startswith("UNDECIDED: the gate cannot decide (3 gated metric(s) tested")


@pytest.mark.slow
def test_a_study_log_that_cannot_be_used_beside_a_good_one_is_undecided(runs, tmp_path, capsys):
    """Today a note and exit 0: a MedEvidence log without its scores (here an oncology log
    relabelled) is a run the gate did not compare."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from med_evals.logs.runs import expand_log_paths

    path = _save(make_baseline([runs["baseline"]]), tmp_path / "b.json")
    log = read_eval_log(expand_log_paths([runs["same"]])[0])
    log.eval.task = "med_evals/medevidence"
    log.eval.task_id = "relabelled"
    write_eval_log(log, str(tmp_path / "other.eval"))
    assert cli_main(["regress", *NB, "--baseline", path, str(runs["same"]),
                     str(tmp_path / "other.eval")]) == 3
    [line, _] = _last_lines(capsys)
    assert line.startswith("undecided: medevidence / mockllm/reader: ")
    assert line.endswith("other.eval: no 'effect_direction' scores")


@pytest.mark.slow
def test_untested_metrics_say_why(runs):
    rows, _ = regress(make_baseline([runs["baseline"]]), [runs["invalid"]], n_boot=50)
    by = {r.metric: r for r in rows}
    assert by["valid_rate"].verdict == "REGRESSION"  # 1.0 -> 0.0
    for name in ("accuracy_valid", "macro_f1_valid"):
        assert by[name].verdict == "untested" and math.isnan(by[name].new)
        assert by[name].detail == (
            "untested: no valid replies in the new run (0 of 60 shared samples)"
        )
    rows, _ = regress(make_baseline([runs["invalid"]]), [runs["baseline"]], n_boot=50)
    assert {r.metric: r.detail for r in rows}["accuracy_valid"] == (
        "untested: no valid replies in the baseline (0 of 60 shared samples)"
    )


def test_untested_metrics_are_undecided_unless_accepted(runs, tmp_path, capsys):
    """Both runs without a valid reply: the valid rate is tested (equal), the metrics over valid
    replies cannot be. Today: "untested ... +nan to +nan" and exit 0."""
    path = _save(make_baseline([runs["invalid"]]), tmp_path / "b.json")
    assert cli_main(["regress", *NB, "--baseline", path, str(runs["invalid"])]) == 3
    lines = _last_lines(capsys)
    assert lines[0].startswith("undecided: 2 gated metric(s) untested: oncology_rct / ")
    assert "mockllm/reader accuracy_valid (no valid replies in the baseline (0 of 60 shared " \
        "samples); no valid replies in the new run (0 of 60 shared samples))" in lines[0]
    assert lines[0].endswith("(--allow-untested accepts them)")
    assert cli_main(["regress", "--allow-untested", "--baseline", path,
                     str(runs["invalid"])]) == 0
    lines = _last_lines(capsys)
    assert lines[0].startswith("accepted (--allow-untested): 2 untested gated metric(s)")
    assert lines[-1].startswith("pass: 1 gated metric(s) tested")


def test_no_shared_samples_is_untested_even_when_accepted(runs, tmp_path, capsys):
    baseline = make_baseline([runs["baseline"]])
    baseline["runs"][0]["samples"] = {
        f"other-{sid}": v for sid, v in baseline["runs"][0]["samples"].items()
    }
    path = _save(baseline, tmp_path / "b.json")
    for flags in ([], ["--allow-untested"]):
        assert cli_main(["regress", *flags, "--baseline", path, str(runs["same"])]) == 3
        out = capsys.readouterr().out
        assert out.count("untested     headline, paired bootstrap n=0 untested: no shared "
                         "samples") == 3
        assert "UNDECIDED: the gate cannot decide (0 gated metric(s) tested" in out


def test_input_errors_are_one_line_with_exit_2(runs, tmp_path, capsys):
    good = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(runs["baseline"]), "-o", str(good)]) == 0
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "bad.json").write_text('{"format": 2, "runs": [')
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "norun.json").write_text('{"format": 2, "runs": []}')
    from med_evals.logs.runs import expand_log_paths

    [log] = expand_log_paths([runs["same"]])
    truncated = tmp_path / "truncated" / "cut.eval"
    truncated.parent.mkdir()
    truncated.write_bytes(Path(log).read_bytes()[:2000])
    cases = [
        (["regress", *NB, "--baseline", str(tmp_path / "missing.json"), str(runs["same"])],
         "baseline {t}/missing.json: no such file"),
        (["regress", *NB, "--baseline", str(tmp_path / "empty.json"), str(runs["same"])],
         "baseline {t}/empty.json: the file is empty"),
        (["regress", *NB, "--baseline", str(tmp_path / "bad.json"), str(runs["same"])],
         "baseline {t}/bad.json: not JSON (Expecting value: line 1 column 24 (char 23))"),
        (["regress", *NB, "--baseline", str(tmp_path / "list.json"), str(runs["same"])],
         "baseline {t}/list.json: not a med-evals baseline (a JSON object); record it with "
         "`med-evals baseline`"),
        (["regress", *NB, "--baseline", str(tmp_path / "norun.json"), str(runs["same"])],
         "baseline {t}/norun.json: holds no run ('runs' missing or empty); record it with "
         "`med-evals baseline`"),
        (["regress", *NB, "--baseline", str(good), str(tmp_path / "nowhere")],
         "{t}/nowhere: no such file or folder"),
        (["regress", *NB, "--baseline", str(good), str(tmp_path / "empty")],
         "{t}/empty: no Inspect log (.eval or .json) in this folder"),
        (["baseline", str(tmp_path / "empty"), "-o", str(tmp_path / "b.json")],
         "{t}/empty: no Inspect log (.eval or .json) in this folder"),
        (["baseline", str(runs["same"]), "-o", str(tmp_path / "no" / "b.json")],
         "-o {t}/no/b.json: the folder {t}/no does not exist"),
    ]
    for argv, message in cases:
        assert cli_main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.err == f"med-evals {argv[0]}: error: {message.format(t=tmp_path)}\n"
    assert not (tmp_path / "no").exists()
    for argv in (["baseline", str(truncated.parent), "-o", str(tmp_path / "b.json")],
                 ["regress", "--baseline", str(good), str(truncated.parent)]):
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"med-evals {argv[0]}: error: {truncated}: unreadable log (")
        assert err.count("\n") == 1 and "Traceback" not in err
    assert zipfile.is_zipfile(log)


def test_baseline_refuses_a_run_that_did_not_complete(runs, tmp_path, capsys):
    from inspect_ai.log import read_eval_log, write_eval_log

    from med_evals.logs.runs import expand_log_paths

    log = read_eval_log(expand_log_paths([runs["same"]])[0])
    log.status = "error"
    failed = tmp_path / "failed.eval"
    write_eval_log(log, str(failed))
    assert cli_main(["baseline", str(failed), "-o", str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"med-evals baseline: error: a baseline is recorded from finished runs only: {failed}: "
        "run did not complete (status error) and no finished log of this eval was given\n"
    )
    assert not (tmp_path / "b.json").exists()


@pytest.mark.slow
def test_a_killed_log_beside_the_finished_log_of_its_eval_is_ignored(runs, tmp_path, capsys):
    """The shape ``inspect eval-retry`` leaves (tests/test_gate_retry.py makes it for real): the
    killed log (status started) and the finished one share the eval's task_id."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from med_evals.logs.runs import expand_log_paths

    path = _save(make_baseline([runs["baseline"]]), tmp_path / "b.json")
    [finished] = expand_log_paths([runs["same"]])
    killed = read_eval_log(finished)
    killed.status = "started"
    killed.eval.created = "2000-01-01T00:00:00+00:00"
    killed.samples = killed.samples[:30]
    write_eval_log(killed, str(tmp_path / "killed.eval"))
    killed_path = str(tmp_path / "killed.eval")
    assert cli_main(["regress", *NB, "--baseline", path, finished, killed_path]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"note: {tmp_path}/killed.eval: ignored (status started): the finished log of the same "
        f"eval (task_id {killed.eval.task_id}) is {finished}\n"
    )
    assert "pass: 3 gated metric(s) tested" in captured.out


def test_regress_help_shows_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli_main(["regress", "--help"])
    out = capsys.readouterr().out
    assert table_text() in out and "docs/exit_codes.md" in out


def _subcommands(capsys, argv):
    """The sub-commands ``med-evals ARGV --help`` lists (its ``{a,b,...}``)."""
    import re

    with pytest.raises(SystemExit):
        cli_main([*argv, "--help"])
    found = re.search(r"\{([a-z,-]+)\}", capsys.readouterr().out)
    return found.group(1).split(",") if found else []


def test_every_command_is_in_the_exit_code_table(capsys):
    from med_evals.commands.cli import COMMAND_GROUPS

    text = (Path(__file__).parents[1] / "docs" / "exit_codes.md").read_text()
    names = []
    for name in [c for cs in COMMAND_GROUPS.values() for c in cs]:  # every command: test_cli
        names += [f"{name} {sub}" for sub in _subcommands(capsys, [name])] or [name]
    assert {"regress", "baseline", "subset make", "fetch cochrane", "build medreqal"} <= set(names)
    for name in names:
        assert f"| `med-evals {name}" in text, name
    for command in ("`inspect eval`", "`inspect eval-set`"):
        assert command in text


def test_n_boot_is_an_option(runs, tmp_path, capsys, monkeypatch):
    """``regress`` resamples 1,000 times unless told; fewer than 100 is a usage error."""
    import med_evals.commands.regress as regress_module

    seen = []
    real = regress_module.regress

    def spy(baseline, logs, n_boot=1000, all_metrics=False, prices=None, usage=None,
            models=None, margin=None):
        seen.append(n_boot)
        return real(baseline, logs, n_boot=100, all_metrics=all_metrics)

    monkeypatch.setattr(regress_module, "regress", spy)
    path = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(runs["baseline"]), "-o", str(path)]) == 0
    assert cli_main(["regress", "--baseline", str(path), str(runs["same"])]) == 0
    assert cli_main(["regress", "--n-boot", "300", "--baseline", str(path), str(runs["same"])]) == 0
    assert seen == [1000, 300]
    capsys.readouterr()
    assert cli_main(["regress", "--n-boot", "50", "--baseline", str(path), str(runs["same"])]) == 2
    err = capsys.readouterr().err
    assert err == "med-evals regress: error: --n-boot 50: at least 100 resamples\n"


def _log_of(folder: Path) -> str:
    from med_evals.logs.runs import expand_log_paths

    [log] = expand_log_paths([folder])
    return log


@pytest.mark.slow
def test_two_runs_of_one_model_and_setup_are_never_gated_against_each_other(
    runs, tmp_path, capsys
):
    """Two runs of the same model and setup with different results (one whose replies never
    parse): before, ``baseline A B`` then ``regress A B`` compared both new runs with the
    first baseline run and failed on valid_rate (exit 1)."""
    a, b = runs["baseline"], runs["invalid"]
    out = tmp_path / "b.json"
    assert cli_main(["baseline", str(a), str(b), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and _log_of(a) in err and _log_of(b) in err
    assert "two runs of oncology_rct / mockllm/reader with the same task arguments" in err
    assert not out.exists()
    # a baseline that holds both anyway (recorded apart, joined): each new run is compared with
    # the baseline run recorded from its own log, never with the other's
    both = make_baseline([a])
    both["runs"] += make_baseline([b])["runs"]
    rows, notes = regress(both, [a, b], n_boot=N_BOOT)
    assert notes == [] and {r.verdict for r in rows} <= {"ok", "info", "untested"}
    assert not [r for r in rows if r.verdict == "REGRESSION"]
    valid = [r for r in rows if r.metric == "valid_rate"]
    assert sorted((r.old, r.new) for r in valid) == [(0.0, 0.0), (1.0, 1.0)]
    # a baseline of A, then A and B: A is compared with its own record, B with nothing
    path = _save(make_baseline([a]), tmp_path / "a.json")
    assert cli_main(["regress", *NB, "--baseline", path, str(a), str(b)]) == 3
    lines = _last_lines(capsys)
    assert lines[0] == ("undecided: oncology_rct / mockllm/reader: every baseline run of task "
                        f"oncology_rct is compared with another new run ({_log_of(b)}): "
                        "not gated")
    # one baseline run (from a log of another name: another machine) and two new runs it
    # could stand for: undecided, naming both
    elsewhere = make_baseline([a])
    elsewhere["runs"][0]["log"] = "elsewhere.eval"
    path = _save(elsewhere, tmp_path / "e.json")
    assert cli_main(["regress", *NB, "--baseline", path, str(a), str(b)]) == 3
    lines = _last_lines(capsys)
    ambiguous = [line for line in lines if "cannot tell which to compare" in line]
    assert len(ambiguous) == 2
    assert all(Path(_log_of(a)).name in line and Path(_log_of(b)).name in line
               for line in ambiguous)
    assert lines[-1].startswith("UNDECIDED")


def test_runs_are_matched_one_to_one():
    """A new run takes the baseline run of its own model and setup; a run of another model
    falls back to a baseline run of the same setup only when no other run has taken it."""
    from med_evals.commands.regress import match_runs
    from med_evals.logs.runs import Run

    def run(model: str, condition: str, path: str) -> Run:
        prov = {"task_args": {"condition": condition}, "prompt": "p", "revision": "r"}
        return Run(path, "oncology_rct", model, {}, prov)

    def base(r: Run) -> dict:
        return {"task": r.task, "model": r.model, "task_args": r.task_args,
                "setup": r.setup, "log": Path(r.path).name, "samples": {}}

    old = [run("m1", "x", "o1.eval"), run("m2", "x", "o2.eval")]
    new = [run("m2", "x", "n2.eval"), run("m3", "x", "n3.eval"), run("m1", "x", "n1.eval")]
    m = match_runs([base(r) for r in old], new)
    assert m.pairs == {0: 1, 2: 0} and 1 not in m.ambiguous  # m3: both taken, no baseline
    m = match_runs([base(old[0])], [new[1]])
    assert m.pairs == {0: 0}  # the setup alone (a replay file moved) when nothing else wants it
    m = match_runs([base(old[0])], [new[1], run("m4", "x", "n4.eval")])
    assert m.pairs == {} and set(m.ambiguous) == {0, 1}


@pytest.mark.slow
def test_a_log_whose_samples_cannot_be_read_stops_the_gate(runs, tmp_path, capsys, monkeypatch):
    """A log whose header reads but whose samples do not (a corrupted sample record; a store
    that drops between the header and the samples) is never filed as another task's log: the
    gate and the baseline exit 2 naming it, the report exits 1 and says how many runs it
    could not show."""
    import shutil

    from .support.corrupt import corrupt_sample

    good = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(runs["baseline"]), "-o", str(good)]) == 0
    logs = tmp_path / "logs"
    logs.mkdir()
    [log] = [Path(p) for p in _logs_in(runs["same"])]
    bad = logs / log.name
    shutil.copy(log, bad)
    corrupt_sample(bad)
    capsys.readouterr()
    for argv in (["regress", *NB, "--baseline", str(good), str(logs)],
                 ["baseline", str(logs), "-o", str(tmp_path / "b2.json")]):
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"med-evals {argv[0]}: error: {bad}: unreadable log (")
        assert err.endswith("): the gate reads every sample of a run; read it again or give its "
                            "logs without it\n")
        assert err.count("\n") == 1
    assert not (tmp_path / "b2.json").exists()
    # the report shows what it could read, says what it could not, and exits 1
    shutil.copytree(runs["slightly"], logs, dirs_exist_ok=True)
    assert cli_main(["report", str(logs), "--out", str(tmp_path / "report")]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "med-evals report: error: the report shows 1 run; 1 study run(s) could not be shown (an "
        "unreadable log, a run that did not finish, or a study log without scores): listed "
        "above as skipped")
    assert f"skipped: {bad}: unreadable log (" in err
    md = (tmp_path / "report" / "report.md").read_text()
    assert "the report shows 1 run; 1 study run(s) could not be shown" in md

    # a store that drops between the header and the samples: the same, from the same code
    import med_evals.logs.files as files_module

    def dropping(path, keys, **kw):
        raise ConnectionError("Connection was closed before we received a valid response")

    monkeypatch.setattr(files_module, "read_eval_log_samples_by_id", dropping)
    assert cli_main(["regress", *NB, "--baseline", str(good), str(runs["same"])]) == 2
    assert capsys.readouterr().err == (
        f"med-evals regress: error: {log}: unreadable log (Connection was closed before we "
        "received a valid response): the gate reads every sample of a run; read it again or "
        "give its logs without it\n")


def _logs_in(folder: Path) -> list[str]:
    from med_evals.logs.runs import expand_log_paths

    return expand_log_paths([folder])


def _format_2(baseline: dict, version: str) -> dict:
    """``baseline`` as a release before format 3 recorded it: 8 setup fields, ``version``."""
    from med_evals.logs.comparable import LEGACY_FIELDS

    run = baseline["runs"][0]
    prov = {"task_version": version, **run["setup"]}
    setup = {k: prov.get(k) for k in LEGACY_FIELDS if k not in ("temperature", "max_tokens")}
    setup["task_args"] = {k: v for k, v in run["task_args"].items()
                          if k not in ("data_dir", "metrics", "subset", "shard")}
    gen = run["setup"]["generation"]
    setup.update(temperature=gen.get("temperature"), max_tokens=gen.get("max_tokens"))
    return {"format": 2, "runs": [{**run, "setup": setup}]}


def test_a_format_2_baseline_of_the_last_version_to_write_it_still_gates(runs, monkeypatch):
    """A version bump (a metric added) leaves a stored format-2 baseline gating where the new
    run's behaviour is that of the baseline's version (med_evals.logs.comparable.LEGACY_BEHAVIOUR),
    with
    a note; an older version, or another behaviour, is a changed setup naming the version."""
    from med_evals.logs import comparable as setup_module
    from med_evals.logs.runs import load_runs
    from med_evals.study.spec import digest

    baseline = make_baseline([runs["baseline"]])
    (run,), _ = load_runs([runs["same"]])
    today = run.provenance["task_version"]
    behaviour = digest(run.provenance["behaviour"])
    monkeypatch.setitem(setup_module.LEGACY_BEHAVIOUR, "oncology_rct",
                        ("1.9.0", frozenset({behaviour})))
    rows, notes = regress(_format_2(baseline, "1.9.0"), [runs["same"]], n_boot=100)
    assert {r.metric: r.verdict for r in rows if r.test.startswith("headline")} == {
        "valid_rate": "ok", "accuracy_valid": "ok", "macro_f1_valid": "ok"}
    assert f"oncology_rct {today} is compared with the baseline's 1.9.0" in "\n".join(notes)
    rows, _ = regress(_format_2(baseline, "1.8.0"), [runs["same"]], n_boot=100)
    assert [(r.verdict, r.detail) for r in rows] == [
        ("setup changed", f"changed: task_version 1.8.0 -> {today}")]
    monkeypatch.setitem(setup_module.LEGACY_BEHAVIOUR, "oncology_rct",
                        ("1.9.0", frozenset({"another"})))
    rows, _ = regress(_format_2(baseline, "1.9.0"), [runs["same"]], n_boot=100)
    assert [(r.verdict, r.detail) for r in rows] == [
        ("setup changed", f"changed: task_version 1.9.0 -> {today}")]


# --- the equivalence gate (--margin), issue 44 item 2 --------------------------------------


def _hand(values: list[dict]) -> dict[str, float]:
    """The oncology headline by hand: accuracy over valid replies counted, the valid rate,
    macro-F1 over valid replies by scikit-learn."""
    from sklearn.metrics import f1_score

    valid = [v for v in values if v["valid"]]
    labels = ["POSITIVE", "NEGATIVE"]
    return {
        "macro_f1_valid": float(f1_score([v["target"] for v in valid],
                                         [v["prediction"] for v in valid], labels=labels,
                                         average="macro", zero_division=0)),
        "accuracy_valid": sum(v["prediction"] == v["target"] for v in valid) / len(valid),
        "valid_rate": len(valid) / len(values),
    }


def _hand_bounds(old: dict, new: dict, n_boot: int = N_BOOT) -> dict[str, tuple]:
    """Per headline number of new - old over the shared samples, by hand: (the one-sided 95%
    lower bound, the 95% interval's ends): the 5th, 2.5th and 97.5th percentiles of the
    differences over ``n_boot`` paired resamples (numpy's default_rng(0), the n positions
    drawn with replacement, the same positions in both runs)."""
    import numpy as np

    ids = sorted(set(old) & set(new))
    o, nw = [old[i] for i in ids], [new[i] for i in ids]
    rng = np.random.default_rng(0)
    diffs: dict[str, list[float]] = {}
    for _ in range(n_boot):
        idx = rng.integers(0, len(ids), len(ids))
        a, b = _hand([nw[i] for i in idx]), _hand([o[i] for i in idx])
        for k in a:
            diffs.setdefault(k, []).append(a[k] - b[k])
    return {k: (float(np.percentile(v, 5)), *map(float, np.percentile(v, [2.5, 97.5])))
            for k, v in diffs.items()}


def _c1_alone_at_1(n: int) -> float:
    """The margin a gate on n samples rules out from a baseline at a valid rate of 1 alone
    (80% power, one-sided at 0.05; a run m worse, errors independent: discordance q = m, so
    m^2 n = c^2 (m - m^2)): c^2 / (n + c^2), c = z_0.95 + z_0.80."""
    from scipy.stats import norm

    c = norm.ppf(0.95) + norm.ppf(0.80)
    return c * c / (n + c * c)


@pytest.mark.slow
def test_the_equivalence_gate_pass_undecided_and_regression_by_hand(runs, tmp_path, capsys):
    """``--margin``: pass only when the one-sided 95% paired bound of new - old rules out a
    drop larger than the margin, undecided (3) when it does not, a regression (1) as without
    it. The baseline (wrong on every 10th trial) and a run wrong on every 9th differ on 12 of
    the 60 trials (6 each way): accuracy and macro-F1 are judged on the paired bootstrap's 5th
    percentile (by hand below); the valid rate never differs (every reply valid), so it is
    judged from the baseline alone: the margin 60 samples of a baseline at 1 rule out,
    c^2 / (n + c^2) = 0.093."""
    path = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(runs["baseline"]), "-o", str(path)]) == 0
    old = json.loads(path.read_text())["runs"][0]["samples"]
    new = make_baseline([runs["slightly"]])["runs"][0]["samples"]
    hand = _hand_bounds(old, new)
    acc, f1 = hand["accuracy_valid"][0], hand["macro_f1_valid"][0]
    valid = _c1_alone_at_1(N_TRIALS)
    assert round(valid, 3) == 0.093 and -0.15 < min(acc, f1) and max(acc, f1) < -0.05
    who = "oncology_rct / mockllm/reader"
    capsys.readouterr()

    # pass: every bound above -0.15, the valid rate's 0.093 below it
    assert cli_main(["regress", *NB, "--margin", "0.15", "--baseline", str(path),
                     str(runs["slightly"])]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "pass: 3 gated metric(s) tested, each no worse than its baseline by more than 0.15 "
        "(one-sided 95% paired bootstrap; 1 from the baseline alone, too few samples "
        "differing), 0 regressions")
    row = next(line for line in out.splitlines() if " accuracy_valid " in line)
    lo, hi = hand["accuracy_valid"][1:]
    assert row.endswith(f"no worse     headline, paired bootstrap n={N_TRIALS} 95% CI of diff "
                        f"{lo:+.3f} to {hi:+.3f}; one-sided 95% lower bound {acc:+.3f} vs "
                        "margin -0.150")

    # undecided: 0.05 is not ruled out by the pair, nor by the baseline alone for the valid rate
    assert cli_main(["regress", *NB, "--margin", "0.05", "--baseline", str(path),
                     str(runs["slightly"])]) == 3
    assert _last_lines(capsys) == [
        f"undecided: {who} macro_f1_valid: a drop larger than the margin 0.05 is not ruled "
        f"out (one-sided 95% lower bound of new - old {f1:+.3f}); `med-evals power --margin "
        "0.05` sizes a subset that can",
        f"undecided: {who} accuracy_valid: a drop larger than the margin 0.05 is not ruled "
        f"out (one-sided 95% lower bound of new - old {acc:+.3f}); `med-evals power --margin "
        "0.05` sizes a subset that can",
        f"undecided: {who} valid_rate: the runs never disagree on the {N_TRIALS} samples: the "
        f"paired interval shows nothing, and from the baseline alone a gate on these "
        f"{N_TRIALS} samples rules out drops larger than {valid:.3f} only (80% power), not "
        "0.05; `med-evals power --margin 0.05` sizes a subset that can",
        "UNDECIDED: the gate cannot decide (3 gated metric(s) tested, no regression among "
        "them)",
    ]

    # an identical rerun of 60 trials: none of the pair's own, the baseline alone decides, by
    # the figure `med-evals power --margin` prints for the baseline (macro-F1's from its
    # bootstrap se: the same resamples)
    assert cli_main(["regress", *NB, "--margin", "0.05", "--baseline", str(path),
                     str(runs["same"])]) == 3
    lines = [x for x in _last_lines(capsys) if "the paired interval shows nothing" in x]
    assert len(lines) == 3
    assert cli_main(["power", "--baseline", str(path), "--margin", "0.05"]) == 0
    sized = {line.split()[3]: line.split()[6] for line in capsys.readouterr().out.splitlines()
             if line.startswith("oncology_rct ")}
    assert f"rules out drops larger than {sized['Macro-F1']} only" in lines[0]
    assert f"rules out drops larger than {sized['Accuracy']} only" in lines[1]

    # a regression, as without --margin: the run wrong on every 3rd trial (20 of 60)
    worse = make_baseline([runs["worse"]])["runs"][0]["samples"]
    bounds = _hand_bounds(old, worse)
    assert bounds["accuracy_valid"][2] < 0 and bounds["macro_f1_valid"][2] < 0
    assert cli_main(["regress", *NB, "--margin", "0.15", "--baseline", str(path),
                     str(runs["worse"])]) == 1
    assert _last_lines(capsys)[-1] == (
        f"FAIL: 2 regression(s) beyond sampling noise (95% paired bootstrap): {who} "
        f"macro_f1_valid, {who} accuracy_valid")


def test_a_margin_must_be_a_share(runs, tmp_path, capsys):
    path = _save(make_baseline([runs["baseline"]]), tmp_path / "b.json")
    for bad in ("0", "1", "-0.1", "nan"):
        assert cli_main(["regress", "--margin", bad, "--baseline", path,
                         str(runs["same"])]) == 2
        assert capsys.readouterr().err == (
            f"med-evals regress: error: --margin {float(bad)}: a drop between 0 and 1 (0.02 "
            "is 2 points)\n")


# --- the samples compared, and what the gated numbers depend on (issue 44 item 3) ----------


@pytest.mark.slow
def test_old_new_and_diff_are_the_compared_samples_values(runs, tmp_path, capsys):
    """A baseline on 45 of the 60 trials (another subset) and a new run of all 60: the
    interval is over the 45 both scored, and so are old, new and diff (before: the new run's
    number over its 60 beside an interval over 45), said in a note."""
    baseline = make_baseline([runs["baseline"]])
    ids = sorted(baseline["runs"][0]["samples"])
    keep = ids[:45]
    baseline["runs"][0]["samples"] = {k: baseline["runs"][0]["samples"][k] for k in keep}
    path = _save(baseline, tmp_path / "b.json")
    new = make_baseline([runs["slightly"]])["runs"][0]["samples"]
    on_40 = _hand([new[k] for k in keep])
    on_60 = _hand(list(new.values()))
    old_40 = _hand([baseline["runs"][0]["samples"][k] for k in keep])
    assert on_40["accuracy_valid"] != on_60["accuracy_valid"]
    assert cli_main(["regress", *NB, "--baseline", path, str(runs["slightly"])]) == 0
    got = capsys.readouterr()
    row = next(line for line in got.out.splitlines() if " accuracy_valid " in line)
    o, n = old_40["accuracy_valid"], on_40["accuracy_valid"]
    assert f"  {o:8.4f} {n:8.4f} {n - o:+8.4f}  ok           headline, paired bootstrap n=45 " \
        in row
    assert ("note: oncology_rct / mockllm/reader: old, new and diff of condition "
            "title_abstract are over the 45 samples both runs scored (the baseline run has "
            "45, the new run 60), as the interval is; each log's own numbers are over all of "
            "its samples") in got.err.splitlines()


@pytest.fixture(scope="module")
def verdict_runs(tmp_path_factory):
    """MedREQAL on its fixture, one reader, three ways: ``-T bertscore=false`` (ROUGE-L only),
    ``-T generation_scoring=false`` (no generation score) and ``-T bertscore=false`` with
    another prompt variant (what the gated numbers do depend on)."""
    from med_evals.tasks.medreqal import medreqal

    tmp = tmp_path_factory.mktemp("verdict")
    data = str(Path(__file__).parent.parent / "datasets" / "fixtures" / "medreqal_fixture.csv")

    def reply(text: str) -> str:
        return "LABEL: NOT ENOUGH INFORMATION" if "?" in text[-200:] else "LABEL: SUPPORTED"

    out = {}
    for name, args in (("rouge", {"bertscore": False}),
                       ("none", {"generation_scoring": False}),
                       ("alpaca", {"bertscore": False, "prompt": "alpaca"})):
        inspect_eval(medreqal(data_file=data, **args),
                     model=get_model("mockllm/reader", custom_outputs=replying(reply)),
                     display="none", log_dir=str(tmp / name))
        out[name] = tmp / name
    return out


@pytest.mark.slow
def test_generation_scoring_settings_do_not_change_the_setup_the_gate_compares(
    verdict_runs, tmp_path, capsys
):
    """``-T bertscore=false`` or ``-T generation_scoring=false`` changes only ROUGE-L and
    BERTScore, never gated: a baseline of one gates the other (before: "setup changed", exit
    3), the difference named in a note; the gated numbers are the same. A prompt variant, which
    they do depend on, is still a changed setup."""
    path = tmp_path / "b.json"
    assert cli_main(["baseline", str(verdict_runs["rouge"]), "-o", str(path)]) == 0
    capsys.readouterr()
    assert cli_main(["regress", *NB, "--baseline", str(path), str(verdict_runs["none"])]) == 0
    got = capsys.readouterr()
    assert ("note: medreqal / mockllm/reader: differs from its baseline run in what no gated "
            "number depends on (scorer_settings.verdict.bertscore false -> true, "
            "scorer_settings.verdict.reference_key reference -> null, task_args.bertscore "
            "false -> true, task_args.generation_scoring true -> false): gated; the "
            "generation means beside them are not comparable") in got.err.splitlines()
    assert got.out.splitlines()[-1] == ("pass: 3 gated metric(s) tested, 0 regressions beyond "
                                        "sampling noise (95% paired bootstrap)")
    rows = {line.split()[2]: line.split()[3:6] for line in got.out.splitlines()
            if line.startswith("medreqal ")}
    assert {k: v[2] for k, v in rows.items() if k != "rouge_l_mean"} == {
        "accuracy_all": "+0.0000", "macro_f1_all": "+0.0000", "valid_rate": "+0.0000"}
    assert cli_main(["regress", *NB, "--baseline", str(path), str(verdict_runs["alpaca"])]) == 3
    [line, _] = _last_lines(capsys)
    assert line.startswith("undecided: medreqal / mockllm/reader: setup changed (prompt chat "
                           "-> alpaca, task_args.prompt chat -> alpaca")


def test_a_log_given_as_the_baseline_says_so(runs, tmp_path, capsys):
    """``--baseline`` naming an Inspect log (.eval or .json): one line saying what it is and
    how to record a baseline from it (before: a UTF-8 decode error)."""
    from inspect_ai.log import read_eval_log, write_eval_log

    [log] = _logs_in(runs["same"])
    as_json = tmp_path / "run.json"
    write_eval_log(read_eval_log(log), str(as_json))
    for path, what in ((log, ".eval"), (str(as_json), ".json")):
        for argv in (["regress", "--baseline", path, str(runs["same"])],
                     ["power", "--baseline", path, "--detect", "0.05"]):
            assert cli_main(argv) == 2
            assert capsys.readouterr().err == (
                f"med-evals {argv[0]}: error: baseline {path}: this is an Inspect log ({what}), "
                f"not a baseline; record a baseline from it with `med-evals baseline {path} -o "
                "baseline.json`\n")
