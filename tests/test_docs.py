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
