"""The papers' published tables: MedREQAL's shipped with the package (every number checked
against the paper's text and the shared reference copies), the oncology study's Table 1
fetched from its pinned source or a local folder, and a note in the report when it cannot be
had: never silently nothing."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pandas as pd
import pytest
import yaml
from inspect_ai.model import get_model

from med_evals.commands.cli import main as cli_main
from med_evals.commands.report import build_report
from med_evals.data import published
from med_evals.data.datasets import packaged_manifest_dir
from med_evals.outputs.text import markdown_text
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

from ..conftest import REPO, replying
from ..oncology_support import install_fixture
from ..support.evals import inspect_eval

PAPER = REPO.parent / "shared" / "papers" / "medreqal-2024.txt"
SHARED_REFERENCE = REPO.parent / "shared" / "reference"
MEDREQAL_FIXTURE = REPO / "datasets" / "fixtures" / "medreqal_fixture.csv"
TABLE1 = "oncology-table1-published.csv"


def _paper_table(text: str, header: str) -> dict[str, list[str]]:
    """Rows of the tab-separated table under ``header`` in the paper's text: name -> cells."""
    lines = text.splitlines()
    start = lines.index(header)
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        name, *cells = line.split("\t")
        rows[name] = cells
    return rows


def test_shipped_medreqal_tables_are_the_papers_numbers():
    cat = published.catalogue()
    for name, header in [
        ("medreqal-table2-published.csv", "\tAcc\tF1\tR-L\tBSc"),
        ("medreqal-table3-published.csv", "\tSup.\tRef.\tNEI"),
    ]:
        entry = cat[name]
        assert "CC BY 4.0" in entry["license"] and "ACL 2024" in entry["source"]
        shipped = pd.read_csv(published.packaged_dir() / name, dtype=str)
        columns = list(entry["columns"].values())
        assert list(shipped.columns) == ["model", *columns]
        if PAPER.is_file():  # every number as printed
            printed = _paper_table(PAPER.read_text(encoding="utf-8"), header)
            assert header.split("\t")[1:] == list(entry["columns"])
            assert sorted(entry["printed_as"][n] for n in printed) == sorted(shipped["model"])
            for paper_name, cells in printed.items():
                row = shipped[shipped.model == entry["printed_as"][paper_name]].iloc[0]
                assert [row[c] for c in columns] == cells, paper_name
        if (SHARED_REFERENCE / name).is_file():  # and the shared copy's
            shared = pd.read_csv(SHARED_REFERENCE / name, dtype=str)
            pd.testing.assert_frame_equal(shipped, shared)
    if not PAPER.is_file():
        pytest.skip(f"{PAPER} not found: checked the schema only")


def test_the_oncology_table_is_pinned_not_shipped():
    manifest = yaml.safe_load((packaged_manifest_dir() / "oncology-table1.yaml").read_text())
    assert manifest["source"]["path"] == "results/table_manuscript.csv"
    assert manifest["revision"] == "1ddaa9fc5a2b6f7da64714859bf51a7b9a70dc77"
    assert manifest["revision"] in manifest["files"][TABLE1]["url"]
    assert not (published.packaged_dir() / TABLE1).exists()
    if (SHARED_REFERENCE / TABLE1).is_file():
        from med_evals.data.datasets import sha256_of

        assert sha256_of(SHARED_REFERENCE / TABLE1) == manifest["files"][TABLE1]["sha256"]


@pytest.fixture(scope="module")
def medreqal_logs(tmp_path_factory) -> Path:
    logs = tmp_path_factory.mktemp("medreqal") / "logs"
    model = get_model("mockllm/a", custom_outputs=replying(lambda t: "LABEL: SUPPORTED. Yes."))
    inspect_eval(
        medreqal(data_file=str(MEDREQAL_FIXTURE), bertscore=False),
        model=model,
        display="none",
        log_dir=str(logs),
    )
    return logs


def test_report_shows_the_shipped_tables_without_any_reference_folder(
    medreqal_logs, tmp_path, monkeypatch
):
    """An empty reference folder (as a user without ../shared has): MedREQAL's published rows
    still show, from the package."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("MED_EVALS_REFERENCE_DIR", str(empty))
    r = build_report([medreqal_logs], tmp_path / "out", n_boot=10)
    lines = r.markdown.read_text().splitlines()
    assert "| Mixtral-8x7B (published) | 62.0 | 34.8 | 21.1 | 85.6 | — | not named in the paper |" \
        in lines
    assert "| gold (published) | 543 | 186 | 2057 | — | — |" in lines
    assert r.notes == []


@pytest.fixture(scope="module")
def oncology_logs(tmp_path_factory) -> Path:
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("onc")
    install_fixture(tmp, mp)
    model = get_model("mockllm/m", custom_outputs=replying(lambda t: "POSITIVE"))
    inspect_eval(oncology_rct(), model=model, display="none", log_dir=str(tmp / "logs"))
    mp.undo()
    return tmp / "logs"


def test_oncology_table_missing_from_the_folder_is_a_note(oncology_logs, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    assert cli_main(["report", str(oncology_logs), "--out", str(out), "--reference",
                     str(empty)]) == 0  # fmt: skip
    md = (out / "report.md").read_text()
    assert "(published)" not in md
    note = (
        "The oncology study's Table 1 is not shown beside ours: it is not shipped with med_evals "
        f"(it has no licence), and there is no {TABLE1} in {empty} (--reference). To show it, "
        "save https://github.com/windisch-paul/llm_memory/blob/1ddaa9fc5a2b6f7da64714859bf51a7b9"
        "a70dc77/results/table_manuscript.csv (sha256 3f850a35"
    )
    assert note in md
    err = capsys.readouterr().err
    assert f"note: {note}" in err


def test_oncology_table_downloaded_from_its_pinned_source_and_cached(
    oncology_logs, tmp_path, monkeypatch
):
    """No folder: the table comes from its pinned URL (here a file:// copy of the shared one)
    into the cache, verified; an unreachable source is a note naming the failure."""
    shared = SHARED_REFERENCE / TABLE1
    if not shared.is_file():
        pytest.skip(f"{shared} not found")
    monkeypatch.delenv("MED_EVALS_REFERENCE_DIR", raising=False)
    monkeypatch.setattr(published, "checkout_reference_dir", lambda: None)
    manifests = tmp_path / "manifests"
    shutil.copytree(packaged_manifest_dir(), manifests)
    spec = yaml.safe_load((manifests / "oncology-table1.yaml").read_text())
    for url, expect in [(f"file://{tmp_path}/gone.csv", "not shown"), (shared.as_uri(), "rows")]:
        spec["files"][TABLE1]["url"] = url
        (manifests / "oncology-table1.yaml").write_text(yaml.safe_dump(spec))
        monkeypatch.setenv("MED_EVALS_MANIFEST_DIR", str(manifests))
        r = build_report([oncology_logs], tmp_path / expect, n_boot=10)
        md = r.markdown.read_text()
        if expect == "rows":
            assert "| title_abstract | Claude Opus 4.5 (published) | 100.0 |" in md
            assert r.notes == []
            cached = Path(os.environ["MED_EVALS_CACHE_DIR"]) / "oncology-table1"
            assert len(list(cached.rglob(TABLE1))) == 1
        else:
            [note] = r.notes
            assert "it could not be downloaded (" in note and "gone.csv" in note
            # as report.md writes every text: escaped for Markdown (med_evals.outputs.text)
            assert markdown_text(note, one_line=False) in md and "(published)" not in md


def test_report_folder_follows_the_umask(oncology_logs, tmp_path, capsys):
    """The report folder is the user's, like the files in it: made with their umask (tempfile
    made it 0700)."""
    for mask, mode in [(0o022, 0o755), (0o002, 0o775), (0o077, 0o700)]:
        old = os.umask(mask)
        try:
            r = build_report([oncology_logs], tmp_path / f"out{mask:o}", n_boot=10)
        finally:
            os.umask(old)
        assert stat.S_IMODE(r.markdown.parent.stat().st_mode) == mode, oct(mask)
        assert stat.S_IMODE(r.markdown.stat().st_mode) == mode & 0o666
    # --out naming a file: one line, exit 2, before any work
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    assert cli_main(["report", str(oncology_logs), "--out", str(a_file)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == f"med-evals report: error: --out {a_file}: is a file, not a folder"
    assert a_file.read_text() == "x"
