"""One setup model (med_evals.logs.comparable): what makes two runs comparable, for the report, the
shards
and the gate alike."""

from __future__ import annotations

from med_evals.logs.comparable import legacy_view, not_recorded, setup_changes, setup_of
from med_evals.logs.labels import run_labels
from med_evals.logs.runs import Run


def _prov(**extra) -> dict:  # noqa: ANN003
    return {"task_args": {"condition": "title_abstract", "data_dir": "/x", "subset": "smoke"},
            "revision": "r1", "data_checksum": "c1", "prompt": None, "task_version": "2.0.0",
            "generation": {"temperature": 0.0, "max_tokens": 500, "max_retries": 3,
                           "timeout": 30, "max_connections": 8},
            "eval_config": {"epochs": 1, "epochs_reducer": ["majority_label"],
                            "fail_on_error": True, "log_buffer": 4},
            "model_roles": {}, **extra}


def test_how_a_call_is_made_is_not_the_setup():
    a = setup_of(_prov())
    b = setup_of(_prov(generation={"temperature": 0.0, "max_tokens": 500, "max_retries": 9,
                                   "attempt_timeout": 60, "batch": True, "cache": True},
                       eval_config={"epochs": 1, "epochs_reducer": ["majority_label"],
                                    "log_buffer": 100, "max_tasks": 9},
                       task_args={"condition": "title_abstract", "subset": "ci",
                                  "data_dir": "/y", "metrics": "full"}))
    assert setup_changes(a, b) == []


def test_every_reply_changing_setting_and_role_is_a_change():
    a = setup_of(_prov())
    cases = {
        "generation.top_p null -> 0.9": _prov(generation={"temperature": 0.0, "max_tokens": 500,
                                                         "top_p": 0.9}),
        "generation.reasoning_effort null -> high": _prov(
            generation={"temperature": 0.0, "max_tokens": 500, "reasoning_effort": "high"}),
        "eval.message_limit null -> 3": _prov(eval_config={"epochs": 1, "message_limit": 3,
                                                           "epochs_reducer": ["majority_label"]}),
        "model_roles.grader null -> openai/gpt-4o": _prov(model_roles={"grader": "openai/gpt-4o"}),
        "task_version 2.0.0 -> 2.1.0": _prov(task_version="2.1.0"),
    }
    for change, prov in cases.items():
        assert setup_changes(a, setup_of(prov)) == [change]
    graders = [setup_of(_prov(model_roles={"grader": m})) for m in ("openai/gpt-4o", "o/b")]
    assert setup_changes(*graders) == ["model_roles.grader openai/gpt-4o -> o/b"]


def test_the_report_labels_name_a_grader_that_differs():
    def run(path: str, grader: str) -> Run:
        return Run(path, "oncology_rct", "m", {}, _prov(model_roles={"grader": grader},
                                                        created=path))

    a, b = run("a", "openai/gpt-4o"), run("b", "anthropic/claude")
    labels = run_labels([a, b])
    assert labels[id(a)] == "m, --model-role grader=openai/gpt-4o"
    assert labels[id(b)] == "m, --model-role grader=anthropic/claude"


def test_a_format_2_baseline_is_compared_on_its_own_fields():
    """A baseline recorded before every setting was kept: its 8 fields are compared (with the
    new run's provenance seen as such a baseline saw it); the rest is named as not recorded,
    never as a change."""
    prov = _prov(generation={"temperature": 0.0, "max_tokens": 500, "seed": 1})
    old = {"dataset_revision": "r1", "data_checksum": "c1", "prompt": None,
           "task_version": "2.0.0", "task_args": {"condition": "title_abstract"},
           "scorer_settings": None, "temperature": 0.0, "max_tokens": 500}
    assert legacy_view(prov) == old
    assert setup_changes(old, legacy_view(prov)) == []
    assert not_recorded(old, setup_of(prov)) == ["generation", "eval", "model_roles"]
    hotter = _prov(generation={"temperature": 0.7, "max_tokens": 500})
    assert setup_changes(old, legacy_view(hotter)) == ["temperature 0.0 -> 0.7"]


def test_the_code_is_compared_by_behaviour_not_by_version():
    """A log recording its study's behaviour (labels, parser, value function, each gated
    number's compute) is compared on it: another version with the same behaviour is the same
    setup; a changed parser is named. Against a baseline from a log without it, the version is
    not compared either way (named as not recorded)."""
    behaviour = {"labels": ["POSITIVE", "NEGATIVE"], "parser": "p1", "values": "v1",
                 "metrics": {"accuracy_valid": "a1"}}
    a = setup_of(_prov(behaviour=behaviour, task_version="2.0.0"))
    b = setup_of(_prov(behaviour=behaviour, task_version="2.1.0"))
    assert "task_version" not in a and setup_changes(a, b) == []
    c = setup_of(_prov(behaviour={**behaviour, "parser": "p2"}))
    assert setup_changes(a, c) == ["behaviour.parser p1 -> p2"]
    d = setup_of(_prov(behaviour={**behaviour, "metrics": {"accuracy_valid": "a2"}}))
    assert setup_changes(a, d) == ["behaviour.metrics.accuracy_valid a1 -> a2"]
    old_log = setup_of(_prov())
    assert setup_changes(old_log, a) == [] and not_recorded(old_log, a) == ["behaviour"]


def test_todays_studies_have_the_behaviour_of_the_last_format_2_versions():
    """The code behind a stored format-2 baseline (datasets/ci's MedEvidence baseline, at
    2.1.0): today's studies, a version later where a metric was added, read as of that version;
    a changed parser does not."""
    from med_evals.logs.comparable import LEGACY_BEHAVIOUR, legacy_version
    from med_evals.tasks import spec

    for task, (version, _) in LEGACY_BEHAVIOUR.items():
        study = spec(task)
        for name in study.label_sets:
            args = {study.label_arg: name} if study.label_arg else {}
            prov = {"task": task, "task_version": "9.9.9", "behaviour": study.behaviour(args)}
            assert legacy_version(prov) == version, (task, name)
            changed = {**prov["behaviour"], "parser": "another"}
            assert legacy_version({**prov, "behaviour": changed}) == "9.9.9"
    assert legacy_version({"task": "medevidence", "task_version": "2.2.0"}) == "2.2.0"


def _verdict_setup(**args) -> dict:  # noqa: ANN003
    """The setup of a MedREQAL run as its log records it (the default run: ROUGE-L and
    BERTScore against the reference), with ``args`` as task arguments and the verdict
    scorer's options following them as the task passes them."""
    task_args = {"prompt": "chat", "generation_scoring": True, "bertscore": True,
                 "bertscore_model": None, "judge": False, **args}
    options = {"reference_key": "reference" if task_args["generation_scoring"] else None,
               "bertscore_model": "sentence-transformers/all-MiniLM-L6-v2",
               "bertscore_layers": 6, "bertscore_rescale": False, "bertscore_batch_size": 64,
               "bertscore": task_args["bertscore"]}
    settings = {"verdict": options}
    if task_args["judge"]:
        settings["conclusion_agreement"] = {"reference_field": "reference"}
    return setup_of(_prov(task_args=task_args, scorer_settings=settings))


def test_the_gate_compares_what_its_gated_numbers_depend_on():
    """``-T bertscore=false`` and ``-T generation_scoring=false`` change only the generation
    scores (never gated): for the gate the same setup, each difference named apart; the
    report still tells the runs apart (setup_changes). An option of the study's scorer that is
    not a generation score's, and any other field, is compared; another scorer's settings
    (the agreement judge's) are not."""
    from med_evals.logs.comparable import gate_changes, gated_view

    default = _verdict_setup()
    off = _verdict_setup(bertscore=False)
    assert setup_changes(default, off) == [
        "task_args.bertscore true -> false", "scorer_settings.verdict.bertscore true -> false"]
    assert gate_changes(default, off, "verdict") == ([], setup_changes(default, off))
    none = _verdict_setup(generation_scoring=False)
    assert gate_changes(default, none, "verdict")[0] == []
    assert "scorer_settings.verdict.reference_key reference -> null" in gate_changes(
        default, none, "verdict")[1]
    assert gated_view(default, "verdict") == gated_view(none, "verdict")
    # a judge beside the study's scorer: its settings are not the gated numbers'
    judged = _verdict_setup(judge=True)
    assert gate_changes(default, judged, "verdict")[0] == ["task_args.judge false -> true"]
    # what the gated numbers do depend on is still a change
    parsed = _verdict_setup()
    parsed["scorer_settings"]["verdict"]["parser"] = "lenient"
    assert gate_changes(default, parsed, "verdict")[0] == [
        "scorer_settings.verdict.parser null -> lenient"]
    hotter = setup_of(_prov(generation={"temperature": 0.7, "max_tokens": 500}))
    assert gate_changes(setup_of(_prov()), hotter, "verdict")[0] == [
        "generation.temperature 0.0 -> 0.7"]
    # a format-2 baseline's fields: the same view
    legacy = legacy_view(_prov(task_args={"condition": "x", "bertscore": True}))
    legacy_off = legacy_view(_prov(task_args={"condition": "x", "bertscore": False}))
    assert gate_changes(legacy, legacy_off, "verdict") == (
        [], ["task_args.bertscore true -> false"])


def test_the_generation_only_options_are_the_verdict_scorers_own():
    """Every option the gate leaves out is a parameter of the verdict scorer and every task
    argument one of MedREQAL's and HealthFC's: a renamed option cannot silently become gated
    or ungated."""
    import inspect

    from med_evals.logs.comparable import GENERATION_ONLY_ARGS, GENERATION_ONLY_OPTIONS
    from med_evals.scorers.medreqal import verdict
    from med_evals.tasks.healthfc import healthfc
    from med_evals.tasks.medreqal import medreqal

    assert GENERATION_ONLY_OPTIONS <= set(inspect.signature(verdict).parameters)
    for task in (medreqal, healthfc):
        assert GENERATION_ONLY_ARGS <= set(inspect.signature(task).parameters), task
