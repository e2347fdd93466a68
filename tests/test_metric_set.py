"""A metric added to a study's metric set reaches the log, the report and the gate with no other
edit (CONTRIBUTING.md, "Add a metric"): the test adds one, Cohen's kappa over valid replies, to
the oncology study's set and finds it, with scikit-learn's value, in all three."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import get_model
from inspect_ai.scorer import Metric, SampleScore, metric
from sklearn.metrics import cohen_kappa_score

from med_evals.regress import make_baseline, regress
from med_evals.report import build_report
from med_evals.report.document import fmt
from med_evals.scorers.classification import per_condition
from med_evals.studies import ONCOLOGY_RCT
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import replying
from .oncology_support import install_fixture


@metric
def cohen_kappa_valid() -> Metric:
    """Cohen's kappa between target and prediction over valid replies (the test's metric)."""

    def kappa(values: list) -> float:
        valid = [v for v in values if v["valid"]]
        if not valid:
            return math.nan
        return float(cohen_kappa_score([v["target"] for v in valid],
                                       [v["prediction"] for v in valid]))

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return per_condition(scores, kappa, "cohen_kappa_valid")

    return compute


@pytest.fixture
def kappa_in_the_set() -> Iterator[None]:
    """The oncology spec's metric set with the new metric at its end (the full set only)."""
    original = ONCOLOGY_RCT.metrics

    def with_kappa(study, full=True, label_set=None, **options):  # noqa: ANN001
        return [*original(study, full, label_set, **options), *([cohen_kappa_valid()] if full
                                                               else [])]

    object.__setattr__(ONCOLOGY_RCT, "metrics", with_kappa)  # the spec is frozen
    try:
        yield
    finally:
        object.__setattr__(ONCOLOGY_RCT, "metrics", original)


def _reply(text: str) -> str:
    if "Exercise Counseling" in text:
        return "I cannot tell"  # invalid: left out of the kappa
    right = "NEGATIVE" if "did not meet" in text else "POSITIVE"
    return "POSITIVE" if "Drug B plus" in text else right  # one wrong


@pytest.mark.slow
def test_a_metric_added_to_a_set_reaches_log_report_and_gate(
    kappa_in_the_set, tmp_path, monkeypatch
):
    install_fixture(tmp_path / "data", monkeypatch)
    [log] = inspect_eval(
        oncology_rct(metrics="full"),
        model=get_model("mockllm/reader", custom_outputs=replying(_reply)),
        display="none",
        log_dir=str(tmp_path / "logs"),
    )
    valid = [s.scores["trial_outcome"].value for s in log.samples]
    valid = [v for v in valid if v["valid"]]
    want = cohen_kappa_score([v["target"] for v in valid], [v["prediction"] for v in valid])
    assert 0 < len(valid) < len(log.samples) and not math.isnan(want)
    # the log
    logged = {k: m.value for s in log.results.scores for k, m in s.metrics.items()}
    assert logged["cohen_kappa_valid"] == pytest.approx(want, abs=1e-12)
    # the report: the section renders the rest of the set
    report = build_report([tmp_path / "logs"], tmp_path / "report", n_boot=10)
    md = report.markdown.read_text()
    [table] = [block for block in md.split("\n\n") if "cohen\\_kappa\\_valid" in block
               or "cohen_kappa_valid" in block]
    assert fmt(logged["cohen_kappa_valid"]) in table
    # the gate: printed beside the gated headline (information, never gated)
    rows, _ = regress(make_baseline([tmp_path / "logs"]), [tmp_path / "logs"], n_boot=100,
                      all_metrics=True)
    [row] = [r for r in rows if r.metric == "cohen_kappa_valid"]
    assert row.old == row.new == pytest.approx(want, abs=1e-12) and row.verdict == "info"
    assert {r.verdict for r in rows if r.test.startswith("headline")} == {"ok"}
