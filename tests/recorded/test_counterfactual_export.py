"""``med-evals export-counterfactuals`` on logs and outputs it cannot use: each unreadable log
named with its path and reason, one error line, exit 2, nothing written or lost."""

from __future__ import annotations

import shutil

from med_evals.commands.cli import main as cli_main

from ..oncology_support import FIXTURE_CSV


def test_unreadable_logs_are_named_with_path_and_reason(tmp_path, capsys):
    garbage = tmp_path / "garbage.eval"
    garbage.write_bytes(b"not a zip file at all")
    cut = tmp_path / "cut.json"
    cut.write_text('{"version": 2, "status": "succ')
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    missing = tmp_path / "missing.eval"
    out = tmp_path / "trials.csv"
    rc = cli_main(
        ["export-counterfactuals", str(garbage), str(cut), str(empty), str(missing),
         "--out", str(out)]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and not out.exists()
    assert f"skipped: {garbage}: unreadable log (not a complete .eval file: truncated, or not " \
        "an Inspect log" in "\n".join(err)
    assert any(line.startswith(f"skipped: {cut}: unreadable log (not a complete JSON log (")
               for line in err)
    assert f"skipped: {empty}: a folder with no Inspect log in it" in err
    assert f"skipped: {missing}: unreadable log (no such file)" in err
    assert err[-1] == (
        "med-evals export-counterfactuals: error: no accepted rewrite in the logs (4 skipped, "
        "listed above); nothing written"
    )


def test_outputs_that_cannot_be_written_or_read_are_one_line(tmp_path, capsys):
    log = tmp_path / "x.eval"
    log.write_bytes(b"")
    for out, message in [
        (tmp_path / "no" / "t.csv", f"--out {tmp_path / 'no' / 't.csv'}: the folder "
                                    f"{tmp_path / 'no'} does not exist"),
        (tmp_path, f"--out {tmp_path}: is a folder; name the file to write"),
    ]:
        assert cli_main(["export-counterfactuals", str(log), "--out", str(out)]) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line == f"med-evals export-counterfactuals: error: {message}"
    # an existing output that is not a CSV: its rows are kept, so it is read first, and refused
    broken = tmp_path / "broken.csv"
    shutil.copy(FIXTURE_CSV, broken)
    broken.write_text(broken.read_text().replace(",7/4/12,", ',"7/4/12,', 1))
    before = broken.read_bytes()
    assert cli_main(["export-counterfactuals", str(log), "--out", str(broken)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"{broken}: malformed CSV: line 3" in line
    assert broken.read_bytes() == before  # nothing lost
