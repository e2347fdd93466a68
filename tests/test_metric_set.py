"""A metric added to a study's metric set reaches the log, the report and the gate with no other
edit (CONTRIBUTING.md, "Add a metric"): the test adds one, Cohen's kappa over valid replies, to
the oncology study's set and finds it, with scikit-learn's value, in all three."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from inspect_ai.model import get_model
from inspect_ai.scorer import Metric, SampleScore, metric
from sklearn.metrics import cohen_kappa_score

from med_evals.commands.regress import make_baseline, regress
from med_evals.commands.report import build_report
from med_evals.commands.report.document import fmt
from med_evals.scorers.classification import per_condition
from med_evals.tasks import ONCOLOGY_RCT
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import replying
from .oncology_support import install_fixture
from .support.evals import inspect_eval


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


@pytest.mark.slow
def test_a_baseline_outlives_a_new_metric_but_not_a_changed_prompt(tmp_path, monkeypatch, capsys):
    """Issue 37: a baseline recorded before a metric is added (and the version bumped, as
    CONTRIBUTING asks) still gates the same replies (exit 0); one recorded before a prompt
    change exits 3 naming the prompt. The gate compares what its numbers depend on (the inputs
    sent, the study code's behaviour, the settings), not the task's version."""
    from dataclasses import replace

    from med_evals.commands.cli import main
    from med_evals.tasks.oncology_conditions import CONDITIONS

    install_fixture(tmp_path / "data", monkeypatch)
    model = get_model("mockllm/reader", custom_outputs=replying(_reply))

    def run(name: str) -> str:
        inspect_eval(oncology_rct(), model=model, display="none", log_dir=str(tmp_path / name))
        return str(tmp_path / name)

    baseline = tmp_path / "baseline.json"
    assert main(["baseline", run("before"), "-o", str(baseline)]) == 0
    # a metric added to the full set, and the version bumped
    original = ONCOLOGY_RCT.metrics

    def with_kappa(study, full=True, label_set=None, **options):  # noqa: ANN001
        return [*original(study, full, label_set, **options), cohen_kappa_valid()]

    object.__setattr__(ONCOLOGY_RCT, "metrics", with_kappa)
    object.__setattr__(ONCOLOGY_RCT, "version", "2.2.0")
    try:
        after = run("metric_added")
    finally:
        object.__setattr__(ONCOLOGY_RCT, "metrics", original)
        object.__setattr__(ONCOLOGY_RCT, "version", "2.1.0")
    capsys.readouterr()
    assert main(["regress", "--n-boot", "100", "--baseline", str(baseline), after]) == 0
    assert "pass: 3 gated metric(s) tested" in capsys.readouterr().out
    # the prompt changed: the same replies, but not the same question put
    cond = CONDITIONS["title_abstract"]
    monkeypatch.setitem(CONDITIONS, "title_abstract",
                        replace(cond, template=cond.template.replace("Title:", "TITLE:")))
    changed = run("prompt_changed")
    assert main(["regress", "--n-boot", "100", "--baseline", str(baseline), changed]) == 3
    out = capsys.readouterr().out
    assert ("undecided: oncology_rct / mockllm/reader: setup changed (prompt: the input sent "
            "differs on 6 of 6 shared samples of condition title_abstract (e.g. ") in out
