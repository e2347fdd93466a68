"""A plain new study built with the one task builder (tests/studies/toy_yesno.py: one module,
its manifest and data beside it, and this test: 4 files) reaches the log, the report, diff and
the gate with no other edit (issues 37, 42; CONTRIBUTING.md, "Add a study")."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai.model import get_model

from med_evals.commands.diff import diff_runs
from med_evals.commands.regress import decide, make_baseline, regress
from med_evals.commands.report import build_report
from med_evals.study.params import ParamError
from med_evals.study.spec import STUDIES, TASKS

from .conftest import replying
from .support import N_BOOT
from .support.evals import inspect_eval

HERE = Path(__file__).parent / "studies"
ANSWERS = {"aspirin": "no", "exercise": "Yes.", "vitamin D": "maybe", "smoking": "yes",
           "antibiotics": "no", "Mediterranean": "yes", "melatonin": "yes", "statins": "yes",
           "homeopathy": "I cannot say", "acupuncture": "maybe"}


def _knows(text: str) -> str:
    return next(a for k, a in ANSWERS.items() if k in text)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy study imported (it registers itself) and run by two models: one right on 7 of
    10 questions (one reply names no label), one that always says maybe."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MED_EVALS_MANIFEST_DIR", str(HERE / "manifests"))
    mp.setenv("MED_EVALS_DATA_DIR", str(HERE / "data"))
    from .studies import toy_yesno

    logs = tmp_path_factory.mktemp("toy") / "logs"
    try:
        runs = inspect_eval(
            toy_yesno.toy_yesno(), display="none", log_dir=str(logs),
            model=[get_model("mockllm/knows", custom_outputs=replying(_knows)),
                   get_model("mockllm/maybe", custom_outputs=replying(lambda _: "Maybe"))])
        yield toy_yesno, runs, logs
    finally:
        STUDIES.pop("toy_yesno", None)
        TASKS.pop("toy_yesno", None)
        mp.undo()


def test_the_toy_study_is_four_files_and_few_lines():
    files = [p for p in HERE.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sorted(p.name for p in files) == ["questions.csv", "toy-yesno.yaml", "toy_yesno.py"]
    assert len((HERE / "toy_yesno.py").read_text().splitlines()) <= 80


def test_it_reaches_the_log_report_diff_and_gate(toy, tmp_path):
    module, (knows, maybe), logs = toy
    assert knows.status == maybe.status == "success"
    logged = {k: m.value for s in knows.results.scores for k, m in s.metrics.items()}
    # gold: 4 yes, 3 no, 3 maybe; "knows" is right on 7 (melatonin wrong, homeopathy invalid)
    assert logged["accuracy_all"] == pytest.approx(0.8)
    assert logged["valid_rate"] == pytest.approx(0.9)
    # the report: the generic section, the headline as logged
    report = build_report([logs], tmp_path / "report", n_boot=10)
    rows = {r.label: r.values for r in report.headline if r.task == "toy_yesno"}
    assert rows["mockllm/knows"]["accuracy_all"] == logged["accuracy_all"]
    assert rows["mockllm/maybe"]["accuracy_all"] == pytest.approx(0.3)
    assert "Toy yes/no/maybe (tests)" in report.markdown.read_text()
    # diff: the pair's discordant counts
    result = diff_runs(knows.location, maybe.location, n_boot=10)
    [c] = result["comparisons"]
    assert c["n_paired"] == 10
    assert (c["mcnemar"]["a_only"], c["mcnemar"]["b_only"]) == (6, 1)
    # the gate: a baseline of both runs gates them again
    rows, _ = regress(make_baseline([logs]), [logs], n_boot=N_BOOT)
    assert decide(rows).code == 0 and {r.task for r in rows} == {"toy_yesno"}


def test_its_fingerprint_and_parameters(toy):
    from med_evals.study.fingerprint import fingerprint

    module = toy[0]
    assert fingerprint(module.SPEC) == module.SPEC.fingerprint_recorded
    with pytest.raises(ParamError, match="-T subst=ci: unknown parameter; did you mean -T subset"):
        module.toy_yesno(subst="ci")
