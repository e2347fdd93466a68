"""The study specs: one place per fact, and a version that moves with what makes the numbers."""

import dataclasses

import pytest

from med_evals import data
from med_evals.studies import HEALTHFC, MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT, STUDIES, spec


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_version_is_bumped_with_prompt_parser_metric_or_pin(name):
    study = STUDIES[name]
    assert study.fingerprint() == study.fingerprint_recorded, (
        f"a prompt, parser, metric definition or dataset pin of {name} changed: bump its version "
        f"in studies.py and record fingerprint_recorded={study.fingerprint()!r} "
        "(python -m med_evals.studies prints them)"
    )


def test_fingerprint_sees_parser_metric_and_pin_changes(monkeypatch):
    base = ONCOLOGY_RCT.fingerprint()
    other_parser = dataclasses.replace(
        ONCOLOGY_RCT, parser="med_evals.scorers.labels:parse_outcome_lenient"
    )
    assert other_parser.fingerprint() != base
    other_metric = dataclasses.replace(ONCOLOGY_RCT, compute="med_evals.studies:label_headline")
    assert other_metric.fingerprint() != base
    real = data.load_manifest

    def repinned(name):
        m = real(name)
        return dataclasses.replace(m, revision="0" * 40)

    monkeypatch.setattr(data, "load_manifest", repinned)
    assert ONCOLOGY_RCT.fingerprint() != base


def test_spec_lookup_and_labels():
    assert spec("med_evals/oncology_rct") is ONCOLOGY_RCT
    assert MEDEVIDENCE.labels({"labels": "three"}) == ("higher", "lower", "uncertain")
    assert len(MEDEVIDENCE.labels()) == 5 and len(MEDEVIDENCE.labels({"labels": "five"})) == 5
    assert MEDREQAL.labels() == ("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION")
    with pytest.raises(KeyError, match="not a med_evals study"):
        spec("nosuch")


def test_verdict_studies_share_one_headline_definition():
    # the verdict scorer logs headline("medreqal") for both tasks: the definitions must agree
    assert HEALTHFC.headline == MEDREQAL.headline and HEALTHFC.compute == MEDREQAL.compute


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_headline_values_cover_each_headline(name):
    study = STUDIES[name]
    labels = study.labels()
    values = [
        {"prediction": labels[0], "target": labels[0], "valid": True, "correct": 1},
        {"prediction": "INVALID", "target": labels[1], "valid": False, "correct": 0},
    ]
    numbers = study.headline_values(values)
    assert list(numbers) == [h.name for h in study.headline]
    assert numbers["valid_rate"] == 0.5
    assert all(h.source in ("paper", "ours") for h in study.headline)


def test_conditions_come_from_the_task_modules():
    from med_evals.tasks.oncology_rct import CONDITIONS

    assert ONCOLOGY_RCT.conditions() == tuple(CONDITIONS)
    assert MEDEVIDENCE.conditions() == ("closed_book", "evidence")
    assert MEDREQAL.conditions() == ()
