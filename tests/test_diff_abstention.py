"""``med-evals diff``: each side's abstention numbers on the paired samples, counted by hand, as
the exact text line and in the JSON."""

from __future__ import annotations

import json

import pytest

from med_evals.commands.cli import main as cli_main
from med_evals.tasks.healthfc import healthfc

from .conftest import FIXTURES
from .report.support import replay_run
from .report.test_abstention import REPLIES


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("diff_abstention")
    with pytest.warns(UserWarning, match="counts differ"):
        task = healthfc(data_file=str(FIXTURES / "healthfc_fixture.csv"), bertscore=False)
    a = replay_run(task, lambda t, s, e: next(r for c, r in REPLIES.items() if c in t),
                   "model-a", tmp / "a")
    b = replay_run(task, lambda t, s, e: "LABEL: SUPPORTED", "model-b", tmp / "b")
    return a.location, b.location


def test_text_line(logs, capsys):
    assert cli_main(["diff", *logs, "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    # A (gold N S R N R S, predicted N S S INVALID R N): committed 3 of 6, 2 right; gold NEI
    # 2, abstained 1; gold S/R 4, abstained 1. B: SUPPORTED for all: committed 6, 2 right.
    assert ("  abstention (NOT ENOUGH INFORMATION), A / B: coverage 0.500 / 1.000, selective "
            "accuracy 0.667 / 0.333, abstention recall 0.500 / 0.000, over-abstention 0.250 / "
            "0.000\n") in out


def test_json(logs, capsys):
    assert cli_main(["diff", *logs, "--json", "--n-boot", "20"]) == 0
    [c] = json.loads(capsys.readouterr().out)["comparisons"]
    assert c["abstention"] == {
        "abstaining": ["NOT ENOUGH INFORMATION"],
        "a": {"coverage": 0.5, "selective_accuracy": pytest.approx(2 / 3),
              "abstention_recall": 0.5, "over_abstention": 0.25},
        "b": {"coverage": 1.0, "selective_accuracy": pytest.approx(1 / 3),
              "abstention_recall": 0.0, "over_abstention": 0.0},
    }
