import math

import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

from med_evals.cli import main as cli_main
from med_evals.data import DatasetError
from med_evals.recorded import read_recorded, score_recorded
from med_evals.tasks.oncology_rct import read_trials

from .oncology_support import FIXTURE_CSV


def _study_numbers(truth: pd.Series, raw: pd.Series) -> dict:
    """The counterfactual study's rules (run_evaluation.py, analyze_results.py), re-derived
    independently: no text is ERROR, any other reply stripped and upper-cased must be a label;
    valid only, macro-F1, Wald intervals with z = 1.96 clipped to [0, 1]."""
    parsed = raw.fillna("").map(lambda r: r.strip().upper() if r != "" else "ERROR")
    parsed = parsed.where(parsed.isin(["POSITIVE", "NEGATIVE", "ERROR"]), "INVALID")
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
    assert (
        by["counterfactual"]["n_error"] == 1 and by["counterfactual"]["strict"]["accuracy"] == 1.0
    )
    assert (by["doi_only"]["n_invalid"], by["doi_only"]["n_error"]) == (1, 0)
    with pytest.raises(DatasetError, match="no ground_truth column"):
        read_recorded(p)
