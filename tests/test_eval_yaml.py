"""``src/med_evals/eval.yaml``, the listing the field's register and lint read, against the tasks'
own registry: the registered ``@task`` functions, the study specs (``med_evals.tasks.STUDIES``:
title, version, dataset, headline numbers), the dataset manifests (citation, pinned commit,
expected rows) and, where the shared copies are present, the samples each task builds. A change
to a task that the listing does not follow fails here."""

from __future__ import annotations

import pytest
import yaml
from inspect_ai.model import get_model

import med_evals
from med_evals.data.datasets import load_manifest
from med_evals.inspect_internals.compat import (
    registry_find,
    registry_info,
    registry_unqualified_name,
    scorer_metrics,
)
from med_evals.tasks import TASKS
from med_evals.tasks import counterfactual as cf

from .conftest import REPO

EVAL_YAML = REPO / "src" / "med_evals" / "eval.yaml"
#: the fields inspect_evals' register and the lint (eval_yaml) require of the listing
REQUIRED = ("title", "description", "group", "contributors", "tasks")
#: the tools beside the studies (specs without headline numbers): their scorer's factory
TOOLS = {
    "counterfactual_build": lambda: cf.rewrite_check(0.02, 0.55, 0.2),
    "counterfactual_judges": cf.plausibility_judge,  # judge=rate default
}


def listing() -> dict:
    return yaml.safe_load(EVAL_YAML.read_text(encoding="utf-8"))


def entries() -> dict[str, dict]:
    return {t["name"]: t for t in listing()["tasks"]}


def words(text: str) -> str:
    return " ".join(str(text).split())


def test_the_listing_has_what_the_register_reads():
    data = listing()
    assert [f for f in REQUIRED if not data.get(f)] == []
    assert all(isinstance(c, str) and c for c in data["contributors"])
    for task in data["tasks"]:
        missing = {"name", "dataset", "dataset_samples", "metrics", "paper", "version"} - set(task)
        assert not missing, (task.get("name"), missing)
        assert isinstance(task["dataset_samples"], int) and task["dataset_samples"] > 0


def test_the_tasks_are_the_registered_tasks_in_the_papers_order():
    registered = {
        registry_unqualified_name(o) for o in registry_find(lambda i: i.type == "task")
        if registry_info(o).name.startswith("med_evals/")
    }
    names = list(entries())
    assert set(names) == registered == set(med_evals.__all__) - {"__version__"}
    assert names == list(TASKS)  # the papers' order, as the registry holds them


@pytest.mark.parametrize("task", list(TASKS))
def test_a_task_is_listed_as_its_spec_says(task):
    spec, entry = TASKS[task], entries()[task]
    assert (entry["title"], entry["version"]) == (spec.title, spec.version)
    assert (entry["dataset"],) == spec.datasets
    if spec.headline:
        assert entry["metrics"] == [h.name for h in spec.headline]


@pytest.mark.parametrize("task", list(TOOLS))
def test_a_tool_is_listed_as_its_task_says(task, set_model_roles):
    make_scorer = TOOLS[task]
    entry = entries()[task]
    with set_model_roles(grader=get_model("mockllm/grader")):
        declared = [registry_unqualified_name(m) for m in scorer_metrics(make_scorer())]
    assert entry["metrics"] == declared


@pytest.mark.parametrize("task", list(entries()))
def test_the_dataset_pins_the_paper_and_the_samples(task):
    entry = entries()[task]
    manifest = load_manifest(entry["dataset"])
    assert words(entry["paper"]) == words(manifest.citation)
    expected = manifest.extra.get("expected_rows")
    if expected is not None:  # one sample per row at the defaults (the data's check: below)
        assert entry["dataset_samples"] == expected


def test_the_external_assets_are_the_datasets_pins():
    pins = {
        (load_manifest(name).source["repository"], load_manifest(name).revision)
        for name in {t["dataset"] for t in listing()["tasks"]}
    }
    listed = {(a["source"], a["commit"]) for a in listing()["external_assets"]}
    assert listed == pins
    assert {a["state"] for a in listing()["external_assets"]} == {"pinned"}


@pytest.mark.parametrize("task", list(entries()))
def test_the_task_builds_the_listed_samples(task, shared_datasets, set_model_roles):
    """The task at its defaults, reading the shared copies (the tools with a grader bound: the
    studies refuse a role they do not read)."""
    dataset = entries()[task]["dataset"]
    if not (shared_datasets / load_manifest(dataset).local_dir).is_dir():
        pytest.skip(f"no shared copy of {dataset}")
    data_dir = str(shared_datasets)
    if task in TOOLS:
        with set_model_roles(grader=get_model("mockllm/grader")):
            built = getattr(cf, task)(data_dir=data_dir)
    else:
        built = getattr(med_evals, task)(data_dir=data_dir)
    assert len(built.dataset) == entries()[task]["dataset_samples"]
