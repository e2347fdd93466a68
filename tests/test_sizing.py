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
#: the one-sided test's: z_{0.95} + z_{0.80} (``--margin``)
C1 = norm.ppf(0.95) + norm.ppf(0.80)
NEI = "NOT ENOUGH INFORMATION"


def baseline(tmp_path, right: int, n: int, task: str = "medreqal") -> str:
    """A baseline holding one MedREQAL (or HealthFC) run on n samples, the first ``right``
    answered right, every reply valid (the shape ``med-evals baseline`` writes)."""
    samples = {}
    for i in range(n):
        gold = ("SUPPORTED", "REFUTED", NEI)[i % 3]
        pred = gold if i < right else ("REFUTED" if gold != "REFUTED" else "SUPPORTED")
        samples[f"q{i:03d}"] = {"prediction": pred, "target": gold, "valid": True}
    data = {"format": 3, "runs": [{"task": task, "model": "vllm/m", "setup": {},
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
        (["--margin", "1"], "--margin 1.0: a drop between 0 and 1 (0.05 is 5 points)"),
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


def _gate_drop(n: int, p: float, c: float) -> float:
    """The drop a gate on n samples of a baseline at p detects (rules out, with the one-sided
    c), by hand: d^2 (n + c^2) = c^2 (2p(1-p) + d(2p - 1)) solved for d."""
    m, lin = n + c * c, c * c * (2 * p - 1)
    return (lin + math.sqrt(lin * lin + 8 * c * c * m * p * (1 - p))) / (2 * m)


def test_items_for_a_margin(tmp_path, capsys):
    """``--margin 0.05`` (the equivalence gate's, ``regress --margin``): accuracy 0.8 on 250
    rules out drops larger than the one-sided figure now, and needs c1^2 (q - m^2) / m^2 =
    860 items (q = 2p(1-p) + m(2p-1) = 0.35, c1 = z_0.95 + z_0.80 = 2.4865); the valid rate
    at 1: c1^2 (1 - m) / m = 118."""
    path = baseline(tmp_path, 200, 250)
    assert main(["power", "--baseline", path, "--margin", "0.05", "--n-boot", "100"]) == 0
    out = capsys.readouterr().out.splitlines()
    p, n, m = 0.8, 250, 0.05
    q = 2 * p * (1 - p) + m * (2 * p - 1)
    assert out[0] == ("Items a gate needs to rule out a drop larger than 0.05 (5 points; "
                      "`med-evals regress --margin 0.05`) with 80% power at α = 0.05 (one-sided; "
                      "c = 2.4865) for a new run as good as each baseline run (docs/numbers.md):")
    assert out[2].split()[-6:] == ["rules", "out", "now", "items", "for", "0.05"]
    acc, _, valid = (line.split() for line in out[4:7])
    assert acc == ["medreqal", "vllm/m", "—", "Accuracy", "0.800", "250",
                   f"{_gate_drop(n, p, C1):.3f}", f"{math.ceil(C1 * C1 * (q - m * m) / m**2):,}"]
    assert acc[-1] == "860"
    assert valid[-2:] == [f"{C1 * C1 / (n + C1 * C1):.3f}", f"{math.ceil(C1**2 * (1 - m) / m)}"]
    assert valid[-1] == "118"
    assert not [line for line in out if "no subset" in line]  # MedREQAL has 2,786


def test_a_size_larger_than_the_dataset_says_no_subset_can_be(tmp_path, capsys):
    """HealthFC has 750 claims (its published count): a gate needing 1,091 of them for a drop
    of 0.05 cannot be had from any subset; the line says what all 750 detect (before: 1,091,
    as if a subset could be drawn)."""
    path = baseline(tmp_path, 200, 250, task="healthfc")
    assert main(["power", "--baseline", path, "--detect", "0.05", "--n-boot", "100"]) == 0
    out = capsys.readouterr().out.splitlines()
    [acc] = [line for line in out if " Accuracy " in line and line.startswith("healthfc")]
    assert acc.endswith("  1,091 > 750")
    assert (f"- no subset is that large: healthfc / vllm/m Accuracy: 1,091 items, but the "
            f"healthfc dataset has 750 (its published count): no subset of it can be that "
            f"large; a gate on all 750 detects drops of at least {_gate_drop(750, 0.8, C):.3f}"
            in out)
    # the valid rate's 150 fit
    [valid] = [line for line in out if " Valid rate " in line and line.startswith("healthfc")]
    assert valid.endswith("  150")


def test_power_reads_a_baseline_not_a_binary_file(tmp_path, capsys):
    bad = tmp_path / "weights.bin"
    bad.write_bytes(bytes(range(256)))
    assert main(["power", "--baseline", str(bad), "--detect", "0.05"]) == 2
    assert capsys.readouterr().err == (
        f"med-evals power: error: baseline {bad}: not a med-evals baseline (not UTF-8 text: a "
        "binary file); record it with `med-evals baseline`\n")
