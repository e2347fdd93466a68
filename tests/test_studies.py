"""The study specs: one place per fact, and a version that moves with what makes the numbers."""

import dataclasses

import pytest

from med_evals.study import fingerprint as studies
from med_evals.study.fingerprint import fingerprint
from med_evals.tasks import HEALTHFC, MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT, STUDIES, spec


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_version_is_bumped_with_prompt_parser_metric_or_pin(name):
    study = STUDIES[name]
    assert fingerprint(study) == study.fingerprint_recorded, (
        f"a prompt, parse, number or dataset pin of {name} changed: bump its version in its "
        f"task module's SPEC and record fingerprint_recorded={fingerprint(study)!r} "
        "(med-evals studies --fingerprints prints them)"
    )


def test_the_fingerprint_follows_behaviour_not_source_text(monkeypatch):
    """Equal behaviour written differently keeps the fingerprint; a changed prompt, parse,
    number or pin changes it."""
    from med_evals.scorers.oncology_rct import headline_numbers, parse_outcome_lenient
    from med_evals.solvers import oncology_rct as prompts
    from med_evals.tasks import oncology_conditions

    base = fingerprint(ONCOLOGY_RCT)
    # the same functions, rewritten (another object, other source): nothing changes
    same = dataclasses.replace(
        ONCOLOGY_RCT,
        compute=lambda values, labels: dict(headline_numbers(values, labels)),
        parser=lambda reply: ONCOLOGY_RCT.parser(reply),
    )
    assert fingerprint(same) == base
    # another parse, another number
    assert fingerprint(dataclasses.replace(ONCOLOGY_RCT, parser=parse_outcome_lenient)) != base

    def rounded(values, labels):
        out = dict(headline_numbers(values, labels))
        out["macro_f1_valid"] = round(out["macro_f1_valid"], 1)
        return out

    assert fingerprint(dataclasses.replace(ONCOLOGY_RCT, compute=rounded)) != base
    # a prompt: the system prompt, or one condition's template
    with monkeypatch.context() as m:
        m.setattr(prompts, "ONCOLOGY_SYSTEM_PROMPT", prompts.ONCOLOGY_SYSTEM_PROMPT + " ")
        assert fingerprint(ONCOLOGY_RCT) != base
    doi_only = oncology_conditions.CONDITIONS["doi_only"]
    with monkeypatch.context() as m:
        m.setitem(oncology_conditions.CONDITIONS, "doi_only",
                  dataclasses.replace(doi_only, template="doi: {doi}"))
        assert fingerprint(ONCOLOGY_RCT) != base
    # a dataset pin
    real = studies.load_manifest
    monkeypatch.setattr(
        studies, "load_manifest", lambda name: dataclasses.replace(real(name), revision="0" * 40)
    )
    assert fingerprint(ONCOLOGY_RCT) != base


def test_spec_lookup_and_labels():
    assert spec("med_evals/oncology_rct") is ONCOLOGY_RCT
    assert MEDEVIDENCE.labels({"labels": "three"}) == ("higher", "lower", "uncertain")
    assert len(MEDEVIDENCE.labels()) == 5 and len(MEDEVIDENCE.labels({"labels": "five"})) == 5
    assert MEDREQAL.labels() == ("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION")
    with pytest.raises(KeyError, match="not a med_evals study"):
        spec("nosuch")


def test_verdict_studies_share_the_definition_and_log_their_own_name():
    assert HEALTHFC.headline == MEDREQAL.headline and HEALTHFC.compute == MEDREQAL.compute
    # each task's headline metric is its own study's, as the log records it (HealthFC's logged
    # "medreqal" before)
    from med_evals.inspect_internals.compat import registry_params

    for study in (MEDREQAL, HEALTHFC):
        assert registry_params(study.metric_set(False)[0]) == {"study": study.task}


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

    assert ONCOLOGY_RCT.conditions == tuple(CONDITIONS)
    assert MEDEVIDENCE.conditions == ("closed_book", "evidence")
    from med_evals.solvers.medreqal import PROMPTS

    # MedREQAL's and HealthFC's conditions: the prompt templates of a run of several
    assert MEDREQAL.conditions == HEALTHFC.conditions == tuple(PROMPTS) == (
        "chat", "mistral", "alpaca")


#: the number each paper leads with: the oncology study summarises performance "using F1-score
#: (and accuracy)" over valid replies; MedEvidence, MedREQAL and HealthFC lead with accuracy
PRIMARY = {
    "oncology_rct": "macro_f1_valid",
    "medevidence": "accuracy_all",
    "medreqal": "accuracy_all",
    "healthfc": "accuracy_all",
}


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_the_primary_number_leads_and_the_valid_rate_follows(name):
    names = [h.name for h in STUDIES[name].headline]
    assert names[0] == PRIMARY.get(name, names[0]) and names[-1] == "valid_rate"
    assert names[0] != "valid_rate"


def _logged_order(metrics, values):
    from med_evals.scorers.classification import metric_values

    return list(metric_values(metrics, values))


@pytest.mark.parametrize("full", [False, True], ids=["headline", "full"])
def test_the_logged_metrics_start_with_the_primary_number(full):
    """Inspect logs a scorer's metrics in order and the viewer's score column is the first:
    it showed the oncology valid rate, so models looked ranked by validity."""
    from med_evals.scorers.medevidence import effect_metrics, effect_value
    from med_evals.scorers.medreqal import verdict_metrics
    from med_evals.scorers.oncology_rct import outcome_metrics, outcome_value

    def oncology(conditions):
        return {
            f"{c}-{i}": dict(outcome_value(r, "POSITIVE", c, i))
            for c in conditions
            for i, r in enumerate(["POSITIVE", "NEGATIVE", "maybe"])
        }

    one = _logged_order(outcome_metrics(ONCOLOGY_RCT, full=full), oncology(["title_abstract"]))
    assert one[:3] == ["macro_f1_valid", "accuracy_valid", "valid_rate"]
    two = _logged_order(
        outcome_metrics(ONCOLOGY_RCT, full=full), oncology(["title_abstract", "doi_only"])
    )
    assert two[0] == "title_abstract/macro_f1_valid"
    def labelled(labels):
        return {
            str(i): {"prediction": p, "target": labels[0], "valid": p != "INVALID",
                     "correct": int(p == labels[0]), "condition": "evidence"}
            for i, p in enumerate([labels[0], labels[1], "INVALID"])
        }  # fmt: skip

    accuracy_first = ["accuracy_all", "macro_f1_all", "valid_rate"]
    replies = ["**Answer**: Higher", "**Answer**: Lower", "Higher"]
    effect_values = {
        str(i): effect_value(r, "higher", "five", "evidence", "high") for i, r in enumerate(replies)
    }
    effect = _logged_order(effect_metrics(MEDEVIDENCE, full=full, label_set="five"), effect_values)
    assert effect[:3] == accuracy_first
    verdict = _logged_order(verdict_metrics(MEDREQAL, full=full)[:1], labelled(MEDREQAL.labels()))
    assert verdict == accuracy_first  # the first metric: the headline (ROUGE-L etc. after it)


def test_medevidence_macro_f1_is_marked_ours():
    f1 = MEDEVIDENCE.headline_by_name("macro_f1_all")
    assert f1.source == "ours" and "authors" in f1.why
    assert MEDEVIDENCE.headline_by_name("accuracy_all").source == "paper"
    assert all(h.why for s in STUDIES.values() for h in s.headline if h.source == "ours")


def test_the_registry_holds_every_task_in_the_papers_order():
    """One explicit registry (no import by name): the oncology study and its counterfactual
    tools, MedEvidence, MedREQAL, HealthFC; the studies with headline numbers are the report's
    sections, in that order; the Inspect entry point and the package export the same tasks."""
    import med_evals
    from med_evals import _registry
    from med_evals.study.spec import TASKS

    order = ["oncology_rct", "counterfactual_build", "counterfactual_judges", "medevidence",
             "medreqal", "healthfc"]
    assert list(TASKS)[:6] == order
    assert list(STUDIES)[:4] == ["oncology_rct", "medevidence", "medreqal", "healthfc"]
    assert all(TASKS[name].headline for name in STUDIES)
    assert not TASKS["counterfactual_build"].headline
    assert not TASKS["counterfactual_judges"].headline
    exported = [n for n in med_evals.__all__ if n != "__version__"]
    assert sorted(exported) == sorted(TASKS)
    assert [n for n in vars(_registry) if n in TASKS] == list(TASKS)
    # the report's sections follow the registry
    from med_evals.commands.report.build import SECTIONS

    assert [t for t in SECTIONS if t in STUDIES] == list(STUDIES)[:4]


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_the_headline_function_returns_the_headline_as_floats_in_its_order(name):
    """The logged headline metric and Study.headline_values (report, gate) both read the spec's
    compute: its numbers are exactly the headline's, in its order, as floats."""
    study = STUDIES[name]
    values = list(study.probe.values(None))
    numbers = study.compute(values, study.labels())
    assert list(numbers) == [h.name for h in study.headline]
    assert all(type(v) is float for v in numbers.values())
    assert study.headline_values(values) == numbers
