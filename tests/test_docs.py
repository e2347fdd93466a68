"""What the README and the docs say of each study is what its registered spec says (issue 37):
conditions and headline numbers are written in code once; a doc that drifts fails here.
``med-evals studies`` prints the rest (each metric set) from the registry."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from med_evals.commands.cli import main
from med_evals.study.fingerprint import catalogue
from med_evals.tasks import STUDIES, healthfc, medevidence, medreqal, oncology_rct

ROOT = Path(__file__).resolve().parents[1]
TASKS = {"oncology_rct": oncology_rct.oncology_rct, "medevidence": medevidence.medevidence,
         "medreqal": medreqal.medreqal, "healthfc": healthfc.healthfc}
#: the doc of each study (HealthFC's is MedREQAL's)
DOCS = {"oncology_rct": "oncology_rct.md", "medevidence": "medevidence.md",
        "medreqal": "medreqal.md", "healthfc": "medreqal.md"}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_condition_is_in_the_readme_the_docs_and_the_task_docstring(name):
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8"),
             DOCS[name]: (ROOT / "docs" / DOCS[name]).read_text(encoding="utf-8"),
             "the @task docstring": inspect.getdoc(TASKS[name]) or ""}
    for condition in STUDIES[name].conditions:
        for where, text in texts.items():
            assert f"{condition}" in text, f"{name}: condition {condition} not in {where}"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_headline_number_is_defined_in_numbers_md(name):
    text = (ROOT / "docs" / "numbers.md").read_text(encoding="utf-8")
    for h in STUDIES[name].headline:
        assert f"`{h.name}`" in text, f"{name}: headline {h.name} not in docs/numbers.md"


def test_the_studies_command_prints_the_registry(capsys):
    assert main(["studies", "--json"]) == 0
    import json

    printed = json.loads(capsys.readouterr().out)
    assert printed == [catalogue(s) for s in STUDIES.values()]
    assert main(["studies", "medreqal"]) == 0
    out = capsys.readouterr().out
    assert "headline accuracy_all: Accuracy over all samples (no label = wrong) (ours: our " \
           "choice of denominator)" in out
    assert main(["studies", "medreqall"]) == 2
    assert "medreqall: not a study" in capsys.readouterr().err


def test_the_studies_command_prints_each_fingerprint_and_fails_on_a_changed_one(capsys,
                                                                                monkeypatch):
    import dataclasses

    from med_evals.study.fingerprint import fingerprint

    assert main(["studies", "--fingerprints"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(STUDIES)
    onc = STUDIES["oncology_rct"]
    assert lines[0] == (f"oncology_rct   version {onc.version:8} fingerprint "
                        f"{onc.fingerprint_recorded}")
    # a study whose code does something else than its recorded fingerprint says: exit 1
    changed = dataclasses.replace(onc, fingerprint_recorded="0" * 16)
    monkeypatch.setitem(STUDIES, "oncology_rct", changed)
    assert main(["studies", "oncology_rct", "--fingerprints"]) == 1
    assert capsys.readouterr().out.strip().endswith(
        f"fingerprint {fingerprint(onc)}  (recorded: {'0' * 16})")


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a markdown file's headings (lower case, punctuation but ``-`` and
    ``_`` dropped, spaces as ``-``)."""
    import re

    out = set()
    for line in text.splitlines():
        if m := re.match(r"#+ (.*)", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def test_every_relative_link_of_the_docs_names_a_file_and_heading_that_exist():
    """A link moved with its text (the README's diaries went to docs/performance.md) must
    still point somewhere: each relative link's file exists, and its ``#anchor`` is a heading
    of that file."""
    import re

    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(
                    path.read_text(encoding="utf-8")):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_readme_reads_in_five_minutes():
    """An inspect_evals README: Overview, Usage, Options, Datasets, Scoring, an Evaluation
    Report, in about 150 lines (issue 43); the measurement diaries live in
    docs/performance.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    for want in ("Overview", "Usage", "Options", "Datasets", "Scoring", "Evaluation Report"):
        assert any(h.startswith(want) for h in headings), want


def _documented_command_lines() -> list[tuple[str, list[str]]]:
    """Every ``med-evals ...`` line of a code block in the README, CONTRIBUTING.md and
    docs/*.md (continued lines joined, comments dropped; a synopsis with ``[...]`` left out):
    (where, its arguments)."""
    import re
    import shlex

    found = []
    for path in [ROOT / "README.md", ROOT / "CONTRIBUTING.md",
                 *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.strip()
                if line.startswith("med-evals ") and "[" not in line.split("#")[0]:
                    found.append((f"{path.name}: {line}", shlex.split(line, comments=True)[1:]))
    return found


@pytest.mark.parametrize("where, argv", _documented_command_lines(), ids=lambda x: str(x)[:60])
def test_every_documented_command_line_parses(where, argv):
    """The CLI against the docs: each command line they show is one the parser takes (every
    flag exists, each value has its type); for ``med-evals run`` the flags after the task are
    ``inspect eval``'s, checked by Inspect's own parser as the command checks them."""
    from med_evals.commands.cli import parser, run_options
    from med_evals.commands.run import inspect_params, task_spec

    try:
        args = parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: med-evals does not take this command line")
    if args.command == "run":
        _, _, flags = run_options(args)
        inspect_params(task_spec(args.task), flags)


def test_the_docs_show_a_line_of_every_command():
    from med_evals.commands.cli import COMMANDS

    shown = {argv[0] for _, argv in _documented_command_lines()}
    # diff is shown as its synopsis (docs/reports.md), studies and score-recorded in prose
    assert shown >= {c.name for c in COMMANDS} - {"diff", "studies", "score-recorded"}, shown
