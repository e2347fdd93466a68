import math

import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

from med_evals.commands.cli import main as cli_main
from med_evals.commands.score_recorded import read_recorded, score_recorded
from med_evals.data.datasets import DatasetError
from med_evals.scorers.oncology_rct import invert_outcome, outcome_value
from med_evals.tasks.oncology_rct import read_trials

from ..oncology_support import FIXTURE_CSV


def _study_numbers(truth: pd.Series, raw: pd.Series) -> dict:
    """The counterfactual study's rules (run_evaluation.py, analyze_results.py), re-derived
    independently for a recorded table: each reply stripped and upper-cased must be a label, a
    blank one included (the study stored replies stripped; a blank recording is INVALID unless
    the study's own parse says ERROR, and this table has no parse column); valid only,
    macro-F1, Wald intervals with z = 1.96 clipped to [0, 1]."""
    parsed = raw.fillna("").map(lambda r: r.strip().upper())
    parsed = parsed.where(parsed.isin(["POSITIVE", "NEGATIVE"]), "INVALID")
    valid = parsed.isin(["POSITIVE", "NEGATIVE"])
    yt, yp = truth[valid], parsed[valid]
    cm = confusion_matrix(yt, yp, labels=["POSITIVE", "NEGATIVE"])
    tp, fn, fp, tn = cm[0, 0], cm[0, 1], cm[1, 0], cm[1, 1]

    def ci(p, n):
        se = math.sqrt(p * (1 - p) / n)
        return (max(0, p - 1.96 * se), min(1, p + 1.96 * se))

    acc = accuracy_score(yt, yp)
    f1 = f1_score(yt, yp, average="macro", labels=["POSITIVE", "NEGATIVE"])
    return {
        "pct_valid": valid.mean() * 100,
        "accuracy": acc,
        "accuracy_ci": ci(acc, len(yt)),
        "f1": f1,
        "f1_ci": ci(f1, len(yt)),
        "sensitivity": tp / (tp + fn),
        "sensitivity_ci": ci(tp / (tp + fn), tp + fn),
        "specificity": tn / (tn + fp),
        "specificity_ci": ci(tn / (tn + fp), tn + fp),
        "n_invalid": int((parsed == "INVALID").sum()),
        "n_error": int((parsed == "ERROR").sum()),
    }


def test_recorded_replies_scored_by_the_counterfactual_studys_rules(shared_datasets):
    """The replies come from the group's earlier paper (GPT-3.5 / GPT-4o / o1, section
    conditions); what is reproduced is the counterfactual study's analysis applied to them, not
    that paper's own (positive-class F1, Wald n = 250 unclipped, "NEGATIVE." read as NEGATIVE)."""
    path = shared_datasets / "oncology-rct-250" / "trials_with_predictions.csv"
    results = score_recorded(read_recorded(path))
    assert len(results) == 12  # 3 models x 4 section conditions
    assert {r["condition"] for r in results} == {
        "conclusion_only",
        "methods_conclusion",
        "methods_results_conclusion",
        "title_abstract",
    }
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    suffix = {"conclusion_only": "conclusion"}
    for r in results:
        col = f"{r['model']}_{suffix.get(r['condition'], r['condition'])}_response_raw"
        want = _study_numbers(raw["Annotation_accept"], raw[col])
        s = r["strict"]
        assert 100 * r["valid_rate"] == pytest.approx(want["pct_valid"])
        assert (r["n_invalid"], r["n_error"]) == (want["n_invalid"], want["n_error"])
        for ours, theirs in [
            ("accuracy", "accuracy"),
            ("macro_f1", "f1"),
            ("sensitivity", "sensitivity"),
            ("specificity", "specificity"),
        ]:
            assert s[ours] == pytest.approx(want[theirs], abs=1e-12)
            assert s[f"{ours}_wald"] == pytest.approx(want[f"{theirs}_ci"], abs=1e-12)
    # "NEGATIVE." in GPT-3.5's title+abstract replies is invalid under the study's rule
    gpt35 = next(
        r
        for r in results
        if r["model"] == "gpt35turbo_temp100" and r["condition"] == "title_abstract"
    )
    assert gpt35["n_invalid"] == 1 and gpt35["lenient"]["n_valid"] == 250


def test_score_recorded_command(shared_datasets, tmp_path, capsys):
    path = shared_datasets / "oncology-rct-250" / "trials_with_predictions.csv"
    assert cli_main(["score-recorded", str(path), "--out", str(tmp_path / "t.csv")]) == 0
    t = pd.read_csv(tmp_path / "t.csv")
    row = t[(t.Model == "o1_temp100") & (t.Condition == "title_abstract")].iloc[0]
    assert row["Valid predictions (%)"] == 100.0
    assert "Accuracy (95% CI)" in capsys.readouterr().out


def test_long_table_with_ground_truth_from_trials(tmp_path):
    trials = read_trials(FIXTURE_CSV)
    table = pd.DataFrame(
        {
            "trial_idx": [0, 1, 2, 0, 1, 2],
            "vendor": ["x"] * 6,
            "condition": ["baseline"] * 3 + ["counterfactual"] * 3,
            "raw_output": ["POSITIVE", "NEGATIVE", "Positive.", "NEGATIVE", "POSITIVE", ""],
        }
    )
    # whitespace only is a reply (the study strips it to "" and parses it INVALID)
    table = pd.concat(
        [
            table,
            pd.DataFrame(
                {"trial_idx": [2], "vendor": ["x"], "condition": ["doi_only"], "raw_output": ["  "]}
            ),
        ],
        ignore_index=True,
    )
    p = tmp_path / "predictions.csv"
    table.to_csv(p, index=False)
    replies = read_recorded(p, trials)
    # counterfactual targets are inverted
    assert replies["target"].tolist() == [
        "POSITIVE",
        "NEGATIVE",
        "POSITIVE",
        "NEGATIVE",
        "POSITIVE",
        "NEGATIVE",
        "POSITIVE",
    ]
    by = {r["condition"]: r for r in score_recorded(replies)}
    assert by["title_abstract"]["n_valid"] == 2 and by["title_abstract"]["n_invalid"] == 1
    # a blank recording is INVALID (no parse column says ERROR): see the test below
    assert (by["counterfactual"]["n_invalid"], by["counterfactual"]["n_error"]) == (1, 0)
    assert by["counterfactual"]["strict"]["accuracy"] == 1.0
    assert (by["doi_only"]["n_invalid"], by["doi_only"]["n_error"]) == (1, 0)
    with pytest.raises(DatasetError, match="no ground_truth column"):
        read_recorded(p)


def _predictions_csv(tmp_path, with_parse: bool = True):
    """A long table in the schema of the study's results/predictions.csv, written as the study's
    run_evaluation.py writes it: the reply stripped (a whitespace-only reply becomes ""), None
    for a call that returned no text (written as an empty field), parsed_output beside it."""

    def parse(raw):  # run_evaluation.parse_output
        if raw is None:
            return "ERROR"
        text = raw.strip().upper()
        return text if text in ("POSITIVE", "NEGATIVE") else "INVALID"

    truth = read_trials(FIXTURE_CSV)["Annotation_accept"]
    doi_only = ["POSITIVE", "", "NEGATIVE", "", "Positive.", "NEGATIVE"]  # Gemini's blanks
    counterfactual = ["NEGATIVE", None, "POSITIVE", "NEGATIVE", "POSITIVE", "NEGATIVE"]
    rows = []
    for cond, replies in (("doi_only", doi_only), ("counterfactual", counterfactual)):
        for i, raw in enumerate(replies):
            gt = truth[i] if cond == "doi_only" else invert_outcome(truth[i])
            rows.append(
                {"trial_idx": i, "vendor": "gemini", "model": "gemini-3-flash-preview",
                 "condition": cond, "raw_output": raw, "parsed_output": parse(raw),
                 "ground_truth": gt}
            )  # fmt: skip
    df = pd.DataFrame(rows)
    if not with_parse:
        df = df.drop(columns="parsed_output")
    path = tmp_path / ("predictions.csv" if with_parse else "no_parse.csv")
    df.to_csv(path, index=False)
    return path, df


def test_blank_recorded_replies_follow_the_studys_parse(tmp_path):
    """Gemini's doi_only blanks: the study's analysis counts them INVALID (7 / 0 in its
    Table 1 counts), not ERROR; a row the study parsed ERROR (no text came back) stays ERROR."""
    path, df = _predictions_csv(tmp_path)
    by = {r["condition"]: r for r in score_recorded(read_recorded(path))}
    for cond, r in by.items():  # the study's own counts, from its parse column
        parsed = df[df.condition == cond]["parsed_output"]
        assert (r["n_invalid"], r["n_error"]) == (
            int((parsed == "INVALID").sum()),
            int((parsed == "ERROR").sum()),
        )
    assert (by["doi_only"]["n_invalid"], by["doi_only"]["n_error"]) == (3, 0)
    assert (by["counterfactual"]["n_invalid"], by["counterfactual"]["n_error"]) == (0, 1)
    assert by["doi_only"]["n_valid"] == 3 and by["doi_only"]["valid_rate"] == 0.5
    # without the study's parse, a blank recording is INVALID
    bare, _ = _predictions_csv(tmp_path, with_parse=False)
    by = {r["condition"]: r for r in score_recorded(read_recorded(bare))}
    assert (by["counterfactual"]["n_invalid"], by["counterfactual"]["n_error"]) == (1, 0)
    # a live run's rule is unchanged: an empty reply is ERROR, whitespace INVALID
    assert outcome_value("", "POSITIVE", "doi_only", 0)["prediction"] == "ERROR"
    assert outcome_value("  ", "POSITIVE", "doi_only", 0)["prediction"] == "INVALID"


def _cli_error(capsys, argv, code=2):
    """The command's one line on stderr (and the exit code asserted)."""
    assert cli_main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_score_recorded_bad_tables_and_outputs_are_one_line(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    header = tmp_path / "header.csv"
    header.write_text("trial_idx,condition,raw_output,ground_truth\n")
    cmd = ["score-recorded"]
    line = _cli_error(capsys, [*cmd, str(empty)])
    assert line == f"med-evals score-recorded: error: {empty}: malformed CSV: the file is empty " \
        "(no header, no rows)"
    assert "no data rows" in _cli_error(capsys, [*cmd, str(header)])
    line = _cli_error(capsys, [*cmd, str(FIXTURE_CSV)])  # the trials, not recorded replies
    assert f"{FIXTURE_CSV}: not a table of recorded replies" in line
    bad_trial = tmp_path / "bad_trial.csv"
    bad_trial.write_text("trial_idx,condition,raw_output,ground_truth\n0,doi_only,POSITIVE,"
                         "POSITIVE\nseven,doi_only,NEGATIVE,POSITIVE\n")
    line = _cli_error(capsys, [*cmd, str(bad_trial)])
    assert "row 2, column 'trial': 'seven' is not a trial index" in line
    assert "missing" in _cli_error(capsys, [*cmd, str(tmp_path / "missing.csv")])
    good, _ = _predictions_csv(tmp_path)
    line = _cli_error(capsys, [*cmd, str(good), "--out", str(tmp_path / "no" / "t.csv")])
    assert line.endswith(f"the folder {tmp_path / 'no'} does not exist")
    line = _cli_error(capsys, [*cmd, str(good), "--out", str(tmp_path)])
    assert line.endswith(f"--out {tmp_path}: is a folder; name the file to write")


def test_recorded_to_replay_bad_tables_and_outputs_are_one_line(tmp_path, capsys):
    good, _ = _predictions_csv(tmp_path)
    cmd = ["recorded-to-replay", "--by-row"]
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    line = _cli_error(capsys, [*cmd, str(good), "--out", str(a_file)])
    assert line.endswith(f"--out {a_file}: is a file, not a folder")
    line = _cli_error(capsys, [*cmd, str(good), "--out", str(tmp_path / "no" / "r")])
    assert line.endswith(f"the folder {tmp_path / 'no'} does not exist")
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    assert "the file is empty" in _cli_error(capsys, [*cmd, str(empty), "--out", str(tmp_path)])
    assert cli_main([*cmd, str(good), "--out", str(tmp_path / "r")]) == 0
