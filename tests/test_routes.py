"""CONTRIBUTING's routes are the ones a number takes at run time.

For every study, CONTRIBUTING.md ("The two routes of a number") lists two routes, each at most
two files: **a reply to its per-sample value** (the study's scorer reading one reply, down to the
parser that decides its label) and **the logged metric to its formula** (the logged ``headline``
metric, down to the function that computes each headline number). Each test here builds the
study's real task on its fixture, runs the task's own scorer on one of its samples and the
task's own metric on score values, and records, with Python's profiler, the package's functions
on the call stack at the moment the route's last function starts: that stack, read outermost
first, must be the route the table lists, hop for hop (comprehensions and lambdas aside; a
function defined inside another is named by the one a reader goes to, e.g. the ``@scorer``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest
from inspect_ai.model import ModelName, ModelOutput
from inspect_ai.scorer import SampleScore, Score, Target
from inspect_ai.solver import TaskState
from inspect_ai.util import registry_create

import med_evals
from med_evals.inspect_internals.compat import registry_unqualified_name, scorer_metrics
from med_evals.tasks import STUDIES

from .conftest import FIXTURES, install_dataset
from .medevidence_support import install_medevidence
from .oncology_support import install_fixture

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(med_evals.__file__).parent
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
#: at most this many files on a route
MAX_FILES = 2
TOY = ROOT / "tests" / "studies"


def routes() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """CONTRIBUTING's table: (study, route, [(file, function), ...]) per row."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    section = text.split("## The two routes of a number", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        hops = [tuple(h.strip("` ").split(":", 1)) for h in cells[2].split("->")]
        out.append((cells[0].strip("` "), cells[1], hops))
    return out


def _named(frame: FrameType) -> tuple[str, str] | None:
    """(file under src/med_evals or tests/, the function a reader goes to) of a frame of ours;
    None for a frame of another package or a comprehension/lambda."""
    path = Path(frame.f_code.co_filename).resolve()
    if path.is_relative_to(PACKAGE):
        where = path.relative_to(PACKAGE).as_posix()
    elif path.is_relative_to(TOY):
        where = path.relative_to(ROOT).as_posix()
    else:
        return None
    name = frame.f_code.co_qualname.split(".<locals>.", 1)[0]
    if name.startswith("<"):
        return None
    return where, name


def stack_at(run: Callable[[], Any], target: CodeType) -> list[tuple[str, str]]:
    """Our functions on the stack, outermost first, when ``target`` starts while ``run``
    runs (each function once, in the order first met)."""
    found: list[tuple[str, str]] | None = None

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal found
        if event == "call" and found is None and frame.f_code is target:
            frames = []
            f: FrameType | None = frame
            while f is not None:
                frames.append(f)
                f = f.f_back
            named = [n for n in map(_named, reversed(frames)) if n is not None]
            found = [n for i, n in enumerate(named) if n not in named[:i]]

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    assert found is not None, f"{target.co_qualname} was never called"
    return found


def _code(where: str, name: str) -> CodeType:
    """The code object of ``file:function`` (a module's function, or a class's method)."""
    dotted = where.removesuffix(".py").replace("/", ".")
    module = dotted if where.startswith("tests/") else f"med_evals.{dotted}"
    obj: Any = sys.modules.get(module) or __import__(module, fromlist=["_"])
    for part in name.split("."):
        obj = getattr(obj, part)
    while hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
    return obj.__code__


# --- the studies' real tasks on their fixtures ---------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _registries_restored():
    """The toy study registers itself when imported: the registries (and the module, so that
    a later import registers it again) are as they were after this file's tests."""
    from med_evals.study.spec import TASKS

    studies, tasks = dict(STUDIES), dict(TASKS)
    yield
    for registry, was in ((STUDIES, studies), (TASKS, tasks)):
        registry.clear()
        registry.update(was)
    sys.modules.pop(f"{__package__}.studies.toy_yesno", None)
    if (package := sys.modules.get(f"{__package__}.studies")) is not None:
        vars(package).pop("toy_yesno", None)


def _task(study: str, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    if study == "oncology_rct":
        install_fixture(tmp, monkeypatch)
        from med_evals.tasks.oncology_rct import oncology_rct

        return oncology_rct(metrics="full")
    if study == "medevidence":
        install_medevidence(tmp, monkeypatch)
        from med_evals.tasks.medevidence import medevidence

        return medevidence(condition="closed_book,evidence", metrics="full")
    if study == "medreqal":
        from med_evals.tasks.medreqal import medreqal

        return medreqal(data_file=str(FIXTURES / "medreqal_fixture.csv"), bertscore=False)
    if study == "healthfc":
        from med_evals.tasks.healthfc import healthfc

        return healthfc(data_file=str(FIXTURES / "healthfc_fixture.csv"), bertscore=False)
    if study == "toy_yesno":
        install_dataset(tmp, monkeypatch, "toy-yesno",
                        {"questions.csv": TOY / "data" / "toy-yesno" / "questions.csv"})
        from .studies import toy_yesno

        return toy_yesno.toy_yesno()
    # a plain study: its registered task at its defaults, on its fixture in datasets/fixtures/
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(FIXTURES))
    return registry_create("task", f"med_evals/{study}")


def _score_one(task: Any, reply: str) -> Callable[[], Any]:
    """The task's own scorer on its first sample, the model having replied ``reply``."""
    sample = task.dataset[0]
    scorer = task.scorer[0]
    state = TaskState(
        model=ModelName("mockllm/model"), sample_id=sample.id, epoch=1, input=sample.input,
        messages=[], metadata=dict(sample.metadata or {}),
        output=ModelOutput.from_content("mockllm/model", reply),
    )
    return lambda: asyncio.run(scorer(state, Target(sample.target)))


def _logged_metric(task: Any, name: str) -> Callable[[Any], Any]:
    """The task's logged metric ``name`` (from the task's metric set, else its scorer's)."""
    metrics = task.metrics or scorer_metrics(task.scorer[0])
    [metric] = [m for m in metrics if registry_unqualified_name(m) == name]
    return metric


def _metric_run(task: Any, study: str, name: str = "headline") -> Callable[[], Any]:
    """The task's logged metric ``name`` over score values its study's value function made."""
    spec = STUDIES.get(study) or _toy_spec()
    values = list(spec.probe.values(None))
    scores = [SampleScore(score=Score(value=dict(v)), sample_id=str(i))
              for i, v in enumerate(values)]
    metric = _logged_metric(task, name)
    return lambda: metric(scores)


def _toy_spec() -> Any:
    from .studies import toy_yesno

    return toy_yesno.SPEC


ROUTES = routes()


def test_every_study_has_both_routes_of_each_headline_number():
    listed = {(s, r.partition(": ")[0]) for s, r, _ in ROUTES}
    for name in [*STUDIES, "toy_yesno"]:
        assert (name, "a reply") in listed, name
        assert (name, "headline") in listed, name


@pytest.mark.parametrize(("study", "route", "hops"), ROUTES,
                         ids=[f"{s}:{r}" for s, r, _ in ROUTES])
def test_the_route_is_the_call_stack(study, route, hops, tmp_path, monkeypatch):
    assert len({where for where, _ in hops}) <= MAX_FILES, hops
    task = _task(study, tmp_path, monkeypatch)
    kind, _, what = route.partition(": ")
    if kind == "a reply":
        run = _score_one(task, what.strip("`"))
    elif kind == "headline":
        run = _metric_run(task, study)
    else:  # "metric: `rouge_l_mean`": another logged metric of the study's headline set
        run = _metric_run(task, study, what.strip("`"))
    target = _code(*hops[-1])
    assert stack_at(run, target) == [tuple(h) for h in hops]


def test_the_check_catches_a_route_that_is_not_taken(tmp_path, monkeypatch):
    """A hop the computation does not pass through, or a formula it never calls, fails."""
    task = _task("oncology_rct", tmp_path, monkeypatch)
    run = _metric_run(task, "oncology_rct")
    taken = stack_at(run, _code("scorers/classification.py", "accuracy_codes"))
    assert ("scorers/oncology_rct.py", "headline_numbers") in taken
    assert ("scorers/classification.py", "label_headline") not in taken
    with pytest.raises(AssertionError, match="never called"):
        stack_at(run, _code("scorers/classification.py", "label_headline"))
