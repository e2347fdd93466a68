"""The import graph runs one way, and nothing is imported by its name as a string.

Layers, lowest first (a module imports only from its own layer or lower ones, at the top of the
file or inside a function alike; imports only for type checking are not counted). A package's
modules share its layer, but for the few named apart (a longer name wins):

0. base: ``inspect_internals/`` (what the package reaches of Inspect's internals), ``outputs/``
   (files written whole, text escaped for where it goes, the exit codes), ``logs.files`` (which log
   files a path names), ``data/`` (the dataset loader, subsets, reference texts, published
   tables, MedREQAL's sources), ``study.spec``, ``study.params``, ``study.shards`` (the spec's
   shape, the task parameters, shards) and ``stats/`` (intervals, power, trivial rows, ranking,
   clustered intervals: handed a spec, never importing one), ``models.batching``
1. ``solvers/`` (the papers' prompts) and ``models/`` (providers)
2. ``scorers/`` (parsers, scorers, metrics: handed a spec, never importing one)
3. ``study.checks`` (what a task checks before its run), ``study.fingerprint`` (a spec's
   behaviour), ``study.task`` (the one task builder), ``data.builders`` (the MedREQAL builder:
   its prompts' parsers are the scorers')
4. ``tasks/`` (each study's task and its ``SPEC``; the registry of specs in the papers' order)
5. ``logs/`` (runs read back, comparability, labels, pairs, usage) and ``stats.standing`` (the
   statistics core over runs read back: intervals, trivial rows, what a pair detects, ranks)
6. ``commands/`` (one module per command, ``report/``)
7. ``commands.cli`` (the one parser), ``_registry``, ``__init__`` (the tasks, exported)

Within a layer, the units' graph has no cycle.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "med_evals"

LAYERS: dict[str, int] = {
    **dict.fromkeys(
        ["inspect_internals", "outputs", "logs.files", "data", "study", "study.spec",
         "study.params", "study.shards", "stats", "models.batching"],
        0,
    ),
    "solvers": 1,
    "models": 1,
    "scorers": 2,
    "study.checks": 3,
    "study.fingerprint": 3,
    "study.task": 3,
    "data.builders": 3,
    "tasks": 4,
    "logs": 5,
    "stats.standing": 5,
    "commands": 6,
    "commands.cli": 7,
    "_registry": 7,
    "__init__": 7,
}


def unit(module: str) -> str:
    """The longest name in :data:`LAYERS` that ``module`` is or is inside
    (``med_evals.logs.runs`` -> ``logs``; ``med_evals.logs.files`` -> ``logs.files``)."""
    parts = module.split(".")[1:] or ["__init__"]
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in LAYERS:
            return name
    return parts[0]


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] or ["med_evals"]
    return ".".join(parts)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports inside ``if TYPE_CHECKING:`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.Import | ast.ImportFrom):
                        lines.add(sub.lineno)
    return lines


def imports() -> dict[str, set[str]]:
    """module -> the med_evals modules it imports (anywhere in the file, but for typing)."""
    out: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_only(tree)
        found: set[str] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("med_evals")}
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.level:
                    raise AssertionError(f"{module}: relative import of {node.module}")
                if node.module.startswith("med_evals"):
                    found.add(node.module)
                    # "from med_evals.scorers import verdict" imports the module verdict
                    found |= {f"{node.module}.{a.name}" for a in node.names
                              if (SRC.parent / node.module.replace(".", "/") / a.name).is_dir()
                              or (SRC.parent / node.module.replace(".", "/")
                                  / f"{a.name}.py").is_file()}
        out[module] = found
    return out


def test_every_module_has_a_layer():
    missing = sorted({unit(m) for m in imports()} - set(LAYERS))
    assert not missing, f"add these to LAYERS (and to the docstring): {missing}"


def test_no_upward_import():
    upward = [
        f"{m} (layer {LAYERS[unit(m)]}) imports {i} (layer {LAYERS[unit(i)]})"
        for m, found in imports().items()
        for i in sorted(found)
        if LAYERS[unit(i)] > LAYERS[unit(m)]
    ]
    assert not upward, "\n".join(upward)


def test_no_cycle_between_folders():
    edges: dict[str, set[str]] = defaultdict(set)
    for m, found in imports().items():
        for i in found:
            if unit(i) != unit(m):
                edges[unit(m)].add(unit(i))

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        for nxt in edges[a]:
            if nxt == b or (nxt not in seen and reaches(nxt, b, seen | {nxt})):
                return True
        return False

    cycles = sorted(f"{a} <-> {b}" for a in list(edges) for b in edges[a] if reaches(b, a, {b}))
    assert not cycles, cycles


@pytest.mark.parametrize("needle", ["importlib.import_module", "__import__(", '":"'])
def test_nothing_is_imported_by_a_string(needle):
    """No ``importlib.import_module``/``__import__``, and no ``"module:NAME"`` references: every
    task and spec is registered by an import a reader (and an IDE) can follow."""
    hits = []
    for path in SRC.rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if needle in line and (needle != '":"' or "med_evals." in line):
                hits.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert not hits, hits


def test_the_rules_catch_what_they_forbid(tmp_path, monkeypatch):
    """The checks above fail on an upward import and on a loop between folders."""
    fake = {"med_evals.scorers.x": {"med_evals.tasks.y"}, "med_evals.tasks.y": set()}
    monkeypatch.setattr(f"{__name__}.imports", lambda: fake)
    with pytest.raises(AssertionError, match="scorers.x .layer 2. imports med_evals.tasks.y"):
        test_no_upward_import()
    fake2 = {"med_evals.tasks.a": {"med_evals.data.builders.b"},
             "med_evals.data.builders.b": {"med_evals.tasks.a"}}
    monkeypatch.setattr(f"{__name__}.imports", lambda: fake2)
    with pytest.raises(AssertionError, match="builders <-> tasks"):
        test_no_cycle_between_folders()


REPO = SRC.parents[1]
COMPAT = SRC / "inspect_internals" / "compat.py"


def private_inspect_imports(text: str, where: str = "") -> list[str]:
    """Imports of a private name of Inspect in ``text``: a module ``inspect_ai.<...>`` with a
    part starting with ``_`` (``inspect_ai._util.error``, ``inspect_ai.log._samples``), or a
    name starting with ``_`` imported from Inspect."""
    found = []
    for node in ast.walk(ast.parse(text, where)):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods, names = [node.module], [a.name for a in node.names]
        else:
            continue
        for mod in mods:
            parts = mod.split(".")
            if parts[0] != "inspect_ai":
                continue
            if any(p.startswith("_") for p in parts[1:]) or any(n.startswith("_") for n in names):
                found.append(f"{where}:{node.lineno}: {mod}")
    return found


def test_private_inspect_names_are_imported_only_in_compat():
    """CONTRIBUTING's rule, for the package, its tests and its benchmarks: Inspect's private
    API is reached through med_evals.inspect_internals.compat only, so a release that moves it
    changes one file."""
    hits = []
    for folder in (SRC, REPO / "tests", REPO / "bench"):
        for path in sorted(folder.rglob("*.py")):
            # hidden folders are not ours: bench_peers.py installs lm-eval in bench/.lm-eval-venv
            if path != COMPAT and not any(p.startswith(".") for p in path.relative_to(REPO).parts):
                hits += private_inspect_imports(path.read_text(), str(path.relative_to(REPO)))
    assert not hits, "import these through med_evals.inspect_internals.compat:\n" + "\n".join(hits)


def test_the_private_import_rule_catches_each_form():
    assert private_inspect_imports("from inspect_ai._util.error import PrerequisiteError")
    assert private_inspect_imports("import inspect_ai._cli.main")
    assert private_inspect_imports("def f():\n    from inspect_ai.log._samples import x\n")
    assert private_inspect_imports("from inspect_ai.model import _private")
    assert not private_inspect_imports("from inspect_ai.model import get_model")
    assert private_inspect_imports(COMPAT.read_text())  # _compat itself does


COMPAT_TESTS = REPO / "tests" / "inspect_internals" / "test_compat.py"
#: the reason every private import of compat gives the field's lint, on the import's lines
PRIVATE_REASON = re.compile(
    r"# inspect-evals-lint: ignore\[private_api_imports\] -- "
    r"no public API in inspect_ai \d+\.\d+\.\d+: \S"
)


def compat_private_imports() -> list[tuple[str, str]]:
    """(name compat exposes it by, the import's source lines) of each private import of
    compat: the imported name at the top of the module, the enclosing function's name for an
    import inside a function (``openai_batcher`` imports ``OpenAIBatcher``)."""
    text = COMPAT.read_text(encoding="utf-8")
    lines = text.splitlines()
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef):
                visit(child, child.name)
            elif isinstance(child, ast.ImportFrom) and private_inspect_imports(ast.unparse(child)):
                source = "\n".join(lines[child.lineno - 1 : child.end_lineno])
                found.extend((function or a.asname or a.name, source) for a in child.names)
            else:
                visit(child, function)

    visit(ast.parse(text), None)
    return found


def test_each_private_import_says_why_and_has_its_test():
    """Each private import of compat carries the lint's suppression with its reason (no public
    API in that Inspect release, and what it is for), and tests/inspect_internals/test_compat.py
    checks the name's behaviour (it calls ``compat.<name>``): a new private import without
    either fails here."""
    imports = compat_private_imports()
    assert len(imports) >= 10, imports  # the parse found them
    tests = COMPAT_TESTS.read_text(encoding="utf-8")
    unexplained = [name for name, source in imports if not PRIVATE_REASON.search(source)]
    untested = sorted({name for name, _ in imports if f"compat.{name}" not in tests})
    assert not unexplained, f"suppress with the reason: {unexplained}"
    assert not untested, f"add a test to {COMPAT_TESTS.name}: {untested}"


def test_the_compat_rule_catches_an_untested_or_unexplained_import(tmp_path, monkeypatch):
    empty = tmp_path / "test_compat.py"
    empty.write_text("", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.COMPAT_TESTS", empty)
    with pytest.raises(AssertionError, match="add a test to test_compat.py: .*active_model"):
        test_each_private_import_says_why_and_has_its_test()
    bare = tmp_path / "compat.py"
    bare.write_text("from inspect_ai._util.error import PrerequisiteError\n" * 10,
                    encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.COMPAT", bare)
    with pytest.raises(AssertionError, match="suppress with the reason: .*PrerequisiteError"):
        test_each_private_import_says_why_and_has_its_test()
