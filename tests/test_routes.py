"""CONTRIBUTING.md's routes from each ``@task`` to the line that computes each headline number
are followed in the code, not trusted (issue 37): every hop leads to the next (its name is in the
hop's source, or the hop calls the spec field the study's ``SPEC`` sets to it), every route spans
at most four files, and its last hop computes the number."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from med_evals.tasks import STUDIES

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "med_evals"
ROW = re.compile(r"^\| `(\w+)`[^|]*\| (.+?) \| (`[^|]+`) \|$")
HOP = re.compile(r"`([\w/.]+\.py):([\w.]+)`")
#: what a last hop's source must hold: the computation itself
COMPUTES = ("accuracy_score(", "np.divide(", "np.mean(", "/ len(")
MAX_FILES = 4


def routes() -> list[tuple[str, str, list[tuple[str, str]]]]:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        found = ROW.match(line)
        if found:
            study, numbers, route = found.groups()
            out.append((study, numbers, HOP.findall(route)))
    return out


def _module(path: str):  # noqa: ANN202 - a module
    file = ROOT / path if path.startswith("tests/") else SRC / path
    if path.startswith("tests/"):
        name = path.removesuffix(".py").replace("/", ".")
    else:
        name = "med_evals." + path.removesuffix(".py").replace("/", ".")
    spec = importlib.util.find_spec(name)
    assert spec is not None and Path(spec.origin or "") == file, (path, spec)
    return importlib.import_module(name)


def _function(path: str, qualname: str):  # noqa: ANN202 - a function or method
    obj = _module(path)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return inspect.unwrap(obj)


def _source(path: str, qualname: str) -> str:
    """The source of a module-level function or a class's method, read from the file (a
    decorated ``@metric`` or ``@scorer`` is Inspect's wrapper at run time)."""
    file = ROOT / path if path.startswith("tests/") else SRC / path
    text = file.read_text(encoding="utf-8")
    nodes: list[ast.AST] = list(ast.parse(text).body)
    node = None
    for part in qualname.split("."):
        node = next(n for n in nodes if isinstance(n, ast.FunctionDef | ast.ClassDef)
                    and n.name == part)
        nodes = list(getattr(node, "body", []))
    return ast.get_source_segment(text, node) or ""


def _study(name: str):  # noqa: ANN202 - the spec
    if name == "toy_yesno":  # the test-only study: its own spec (the registry may not hold it)
        from tests.studies import toy_yesno

        return toy_yesno.SPEC
    return STUDIES[name]


def _links(source: str, here: str, nxt: object, nxt_name: str, study: object) -> bool:
    if re.search(rf"\b{re.escape(nxt_name)}\b", source):
        return True
    fields = re.findall(r"\b(?:self|study)\.(\w+)\(", source)
    return any(inspect.unwrap(getattr(study, f, None) or (lambda: None)) is nxt
               for f in fields)


ROUTES = routes()


def test_every_study_has_routes():
    named = {study for study, _, _ in ROUTES}
    assert {"oncology_rct", "medevidence", "medreqal", "healthfc", "toy_yesno"} <= named
    from med_evals.tasks.label_study import label_metrics

    for name, study in STUDIES.items():
        if study.metrics is label_metrics and name != "toy_yesno":
            continue  # built with label_study: the toy study's route is its route
        listed = {n.strip("` ") for s, numbers, _ in ROUTES if s == name
                  for n in numbers.split(",")}
        assert {h.name for h in study.headline} <= listed, name


@pytest.mark.parametrize(("study", "numbers", "hops"), ROUTES,
                         ids=[f"{s}:{n}" for s, n, _ in ROUTES])
def test_the_route_is_followed_in_the_code(study, numbers, hops, monkeypatch):
    monkeypatch.setenv("MED_EVALS_MANIFEST_DIR", str(ROOT / "tests" / "studies" / "manifests"))
    spec = _study(study)
    assert len({path for path, _ in hops}) <= MAX_FILES, hops
    for (path, name), (nxt_path, nxt_name) in zip(hops, hops[1:], strict=False):
        source = _source(path, name)
        nxt = _function(nxt_path, nxt_name)
        assert _links(source, name, nxt, nxt_name.split(".")[-1], spec), (
            f"{path}:{name} does not lead to {nxt_path}:{nxt_name}")
    last = _source(*hops[-1])
    assert any(marker in last for marker in COMPUTES), hops[-1]


def test_the_check_catches_a_broken_hop():
    """A hop that does not lead to the next, or a spec field set to another function, fails."""
    spec = _study("oncology_rct")
    source = _source("study/spec.py", "Study.headline_values")
    # headline_values calls self.compute: the oncology spec's compute is headline_numbers ...
    numbers = _function("scorers/oncology_rct.py", "headline_numbers")
    assert _links(source, "Study.headline_values", numbers, "headline_numbers", spec)
    # ... not MedEvidence's or the label studies' label_headline
    label = _function("scorers/classification.py", "label_headline")
    assert not _links(source, "Study.headline_values", label, "label_headline", spec)
    assert not _links(_source("scorers/classification.py", "accuracy_codes"), "accuracy_codes",
                      numbers, "headline_numbers", spec)
