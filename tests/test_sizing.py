"""``med-evals power``: the items a gate needs to detect a chosen drop, from a baseline; the
numbers by hand, the table's lines exactly, bad input one line with exit 2."""

import json
import math
from pathlib import Path

import pytest
from scipy.stats import norm

from med_evals.commands.cli import main
from med_evals.stats.intervals import bootstrap_se
from med_evals.tasks import MEDREQAL

C = norm.ppf(0.975) + norm.ppf(0.80)
NEI = "NOT ENOUGH INFORMATION"


def baseline(tmp_path, right: int, n: int) -> str:
    """A baseline holding one MedREQAL run on n samples, the first ``right`` answered right,
    every reply valid (the shape ``med-evals baseline`` writes)."""
    samples = {}
    for i in range(n):
        gold = ("SUPPORTED", "REFUTED", NEI)[i % 3]
        pred = gold if i < right else ("REFUTED" if gold != "REFUTED" else "SUPPORTED")
        samples[f"q{i:03d}"] = {"prediction": pred, "target": gold, "valid": True}
    data = {"format": 3, "runs": [{"task": "medreqal", "model": "vllm/m", "setup": {},
                                   "samples": samples}]}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_items_for_a_drop_of_five_points(tmp_path, capsys):
    """Accuracy 0.8 on 250: detects 0.108 now, needs c^2 (q - d^2) / d^2 = 1,091 items for a
    drop of 0.05 (q = 2p(1-p) + d(2p-1) = 0.35); the valid rate at 1: c^2 (1 - d) / d = 150;
    macro-F1: c sqrt(2) se now, n (now / d)^2 items."""
    path = baseline(tmp_path, 200, 250)
    assert main(["power", "--baseline", path, "--detect", "0.05", "--n-boot", "100"]) == 0
    out = capsys.readouterr().out.splitlines()
    p, n, d = 0.8, 250, 0.05
    m, lin = n + C * C, C * C * (2 * p - 1)
    now = (lin + math.sqrt(lin * lin + 8 * C * C * m * p * (1 - p))) / (2 * m)
    samples = json.loads(Path(path).read_text(encoding="utf-8"))["runs"][0]["samples"]
    values = [samples[k] for k in sorted(samples)]
    se = bootstrap_se(MEDREQAL.headline_values, values, 100)["macro_f1_all"]
    f1 = MEDREQAL.headline_values(values)["macro_f1_all"]
    f1_now = C * math.sqrt(2) * se
    assert out[0] == ("Items a gate needs to detect a drop of 0.05 (5 points) with 80% power at "
                      "α = 0.05 (two-sided; c = 2.8016), from each baseline run "
                      "(docs/numbers.md):")
    assert out[2].split() == ["task", "model", "condition", "metric", "baseline", "n",
                              "detects", "now", "items", "for", "0.05"]
    rows = [line.split() for line in out[4:7]]
    assert rows == [
        ["medreqal", "vllm/m", "—", "Accuracy", "0.800", "250", f"{now:.3f}", "1,091"],
        ["medreqal", "vllm/m", "—", "Macro-F1", f"{f1:.3f}", "250", f"{f1_now:.3f}",
         f"{math.ceil(n * (f1_now / d) ** 2):,}"],
        ["medreqal", "vllm/m", "—", "Valid", "rate", "1.000", "250", f"{C * C / m:.3f}", "150"],
    ]
    assert round(now, 3) == 0.108


def test_a_drop_no_gate_detects_says_why(tmp_path, capsys):
    path = baseline(tmp_path, 3, 30)  # accuracy 0.1: a drop of 0.2 is more than it has
    assert main(["power", "--baseline", path, "--detect", "0.2"]) == 0
    out = capsys.readouterr().out.splitlines()
    [acc] = [line for line in out if " Accuracy " in line]
    assert acc.split()[-1] == "—"
    assert ("- no size: medreqal / vllm/m Accuracy: a drop of 0.2 from an accuracy of 0.1"
            in out)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--detect", "0"], "--detect 0.0: a drop between 0 and 1 (0.05 is 5 points)"),
        (["--detect", "1.5"], "--detect 1.5: a drop between 0 and 1"),
        (["--detect", "nan"], "--detect nan: a drop between 0 and 1"),
        (["--detect", "0.05", "--n-boot", "10"], "--n-boot 10: at least 100 resamples"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, args, says):
    path = baseline(tmp_path, 3, 30)
    assert main(["power", "--baseline", path, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("med-evals power: error: ") and says in err


def test_a_missing_baseline_is_one_line(tmp_path, capsys):
    assert main(["power", "--baseline", str(tmp_path / "none.json"), "--detect", "0.05"]) == 2
    assert capsys.readouterr().err == (
        f"med-evals power: error: baseline {tmp_path / 'none.json'}: no such file\n")
