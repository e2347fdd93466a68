"""``med-evals build medreqal``: a MedREQAL-style CSV from Cochrane reviews' PubMed records.

Reads efetch XML and saved PubMed pages, keeps the latest version of each review, runs the two
Table 6 prompts as Inspect tasks (logs in ``log_dir``), and writes a CSV in MedREQAL's schema
(``background, objective, conclusion, question, verdict, label, strength, category``) followed by
``pmid, doi, review_id, review_version, publication_date, title, category_model``. Beside it:
``<out>.skipped.csv`` (every record left out, with its reason), ``<out>.build.json`` (counts,
model, logs) and, on request, ``<out>.validation.csv`` for a human check of a random sample.
"""

from __future__ import annotations

import csv
import json
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from inspect_ai import eval as inspect_eval
from inspect_ai.model import Model
from inspect_ai.scorer import Score

from med_evals.data.builders.medreqal_tasks import (
    categories_task,
    questions_task,
    sample_results,
)
from med_evals.data.builders.prompts import consolidate_renal
from med_evals.data.builders.pubmed import Review, Skipped
from med_evals.data.builders.sources import read_sources, select_reviews, why_nothing_read
from med_evals.data.dates import check_iso
from med_evals.outputs.files import check_file, make_folder, write_text, write_with
from med_evals.outputs.text import csv_cell
from med_evals.scorers.medreqal import NEI, REFUTED, SUPPORTED

SCHEMA = (
    "background",
    "objective",
    "conclusion",
    "question",
    "verdict",
    "label",
    "strength",
    "category",
)
EXTRA = (
    "pmid",
    "doi",
    "review_id",
    "review_version",
    "publication_date",
    "title",
    "category_model",
)
#: MedREQAL's label codes (its README): SUPPORTED 0, NOT ENOUGH INFORMATION 1, REFUTED 2.
LABEL_CODE = {SUPPORTED: "0", NEI: "1", REFUTED: "2"}
VALIDATION_COLUMNS = (
    "pmid",
    "review_id",
    "objective",
    "conclusion",
    "question",
    "label",
    "category",
    "question_correct",
    "label_correct",
    "rater",
    "comment",
)

NOT_AFTER = "published on or before the cut-off"
NO_DATE = "no publication date (a cut-off is set)"
MODEL_ERROR = "model call failed"
UNPARSED = "reply not QUESTION/LABEL with one of the three labels, after a retry"
LIMIT = "beyond --limit"


class NoSourceRead(ValueError):
    """None of the sources holds a readable PubMed record: nothing to build from."""


@dataclass
class BuildResult:
    csv: Path
    rows: int
    skipped: list[Skipped]
    logs: list[str]
    validation: Path | None = None

    def skipped_counts(self) -> dict[str, int]:
        return dict(Counter(s.reason for s in self.skipped).most_common())


def beside(out: Path, suffix: str) -> Path:
    """``data/new.csv`` -> ``data/new.<suffix>``."""
    return out.with_name(f"{out.stem}.{suffix}")


def after_cutoff(
    reviews: Iterable[Review], published_after: str
) -> tuple[list[Review], list[Skipped]]:
    """Reviews published strictly after the cut-off; a review without a date is left out."""
    cutoff = check_iso(published_after, "published_after")
    kept, skipped = [], []
    for r in reviews:
        if r.publication_date and r.publication_date > cutoff:
            kept.append(r)
        else:
            reason = NOT_AFTER if r.publication_date else NO_DATE
            skipped.append(
                Skipped(
                    reason,
                    r.source,
                    r.pmid,
                    r.review_id,
                    f"{r.publication_date or 'no date'} vs {cutoff}",
                )
            )
    return kept, skipped


def _run(
    task: Any,
    scorer_name: str,
    model: str | Model,
    log_dir: str | None,
    display: str | None,
    model_args: dict[str, Any] | None,
) -> tuple[dict[str, Score | str], str]:
    """Run one task through ``inspect_ai.eval``; per-sample results and the log's location."""
    (log,) = inspect_eval(
        task,
        model=model,
        model_args=model_args or {},
        log_dir=log_dir,
        display=cast(Any, display),
        fail_on_error=False,
    )  # type: ignore[arg-type]
    return sample_results(log, scorer_name), log.location


def build_medreqal(
    sources: Sequence[str | Path],
    model: str | Model,
    out: str | Path,
    *,
    published_after: str | None = None,
    log_dir: str | None = None,
    validation_sheet: int = 0,
    seed: int = 0,
    retries: int = 1,
    limit: int | None = None,
    model_args: dict[str, Any] | None = None,
    display: str | None = None,
    echo: Callable[[str], None] = print,
) -> BuildResult:
    """Build a MedREQAL-style CSV at ``out``; see the module docstring for what lands beside it.

    Args:
        sources: efetch XML files, saved PubMed pages, or directories of them.
        model: Any Inspect model (``openai/gpt-3.5-turbo-0125`` is the paper's).
        out: The CSV to write.
        published_after: Keep only reviews published after this ISO date (a model's cut-off).
        log_dir: Where Inspect writes the two tasks' logs (default: Inspect's).
        validation_sheet: Also write this many randomly chosen rows for a human rater.
        seed: Seed of the validation sample.
        retries: Extra asks for a reply that does not parse (the issue's "retried once").
        limit: At most this many reviews (oldest first), for a cheap trial run.

    Raises:
        NoSourceRead: no source holds a readable PubMed record (before any model call).
        FileNotFoundError: a source does not exist.
    """
    out = check_file(out, "--out", make_parent=True)  # before any work
    reviews, skipped = read_sources(sources)
    if not reviews:
        raise NoSourceRead(
            "no PubMed record could be read from --source: "
            + why_nothing_read(sources, skipped)
        )
    make_folder(out.parent, "--out")
    kept, more = select_reviews(reviews)
    skipped += more
    if published_after:
        kept, more = after_cutoff(kept, published_after)
        skipped += more
    if limit is not None and len(kept) > limit:
        skipped += [Skipped(LIMIT, r.source, r.pmid, r.review_id) for r in kept[limit:]]
        kept = kept[:limit]
    logs: list[str] = []
    generated: dict[str, tuple[str, str]] = {}
    if kept:
        results, location = _run(
            questions_task(kept, retries), "question_label", model, log_dir, display, model_args
        )
        logs.append(location)
        for r in kept:
            res = results.get(r.pmid, "no result")
            if isinstance(res, str):
                skipped.append(Skipped(MODEL_ERROR, r.source, r.pmid, r.review_id, res[:200]))
            elif res.value != 1 or not res.metadata:
                skipped.append(
                    Skipped(UNPARSED, r.source, r.pmid, r.review_id, (res.explanation or "")[:200])
                )
            else:
                generated[r.pmid] = (res.metadata["question"], res.metadata["label"])
    categories: dict[str, str] = {}
    if generated:
        task = categories_task({p: q for p, (q, _) in generated.items()})
        results, location = _run(task, "category", model, log_dir, display, model_args)
        logs.append(location)
        categories = {p: str(s.answer) for p, s in results.items() if isinstance(s, Score)}
    rows = [
        _row(r, *generated[r.pmid], categories.get(r.pmid, "")) for r in kept if r.pmid in generated
    ]
    # the question set is read back by the medreqal task: written as it is; the lists beside
    # it are for people (a spreadsheet): formulas neutralised
    _write_csv(out, (*SCHEMA, *EXTRA), rows, for_people=False)
    _write_csv(
        beside(out, "skipped.csv"),
        ("reason", "pmid", "review_id", "source", "detail"),
        [asdict(s) for s in skipped],
    )
    result = BuildResult(out, len(rows), skipped, logs)
    if validation_sheet:
        result.validation = write_validation_sheet(
            rows, beside(out, "validation.csv"), validation_sheet, seed
        )
    summary = {
        "csv": str(out),
        "rows": len(rows),
        "model": str(model),
        "published_after": published_after,
        "skipped": result.skipped_counts(),
        "uncategorised": sum(1 for r in rows if not r["category"]),
        "logs": logs,
        "labels": dict(Counter(r["verdict"] for r in rows)),
    }
    write_text(beside(out, "build.json"), json.dumps(summary, indent=2) + "\n")
    echo(f"wrote {out}: {len(rows)} questions {summary['labels']}")
    echo(f"skipped {len(skipped)} (listed in {beside(out, 'skipped.csv')}):")
    for reason, n in result.skipped_counts().items():
        echo(f"  {n:6d}  {reason}")
    return result


def _row(r: Review, question: str, label: str, category: str) -> dict[str, str]:
    return {
        "background": r.sections.get("background", ""),
        "objective": r.sections["objectives"],
        "conclusion": r.sections["conclusions"],
        "question": question,
        "verdict": label,
        "label": LABEL_CODE[label],
        "strength": "",  # MedREQAL's strength labels come from a prompt the paper does not print
        "category": consolidate_renal(category, question) if category else "",
        "pmid": r.pmid,
        "doi": r.doi,
        "review_id": r.review_id,
        "review_version": str(r.version) if r.review_id else "",
        "publication_date": r.publication_date,
        "title": r.title,
        "category_model": category,
    }


def _write_csv(
    path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]], for_people: bool = True
) -> None:
    """Rows as CSV, written whole (:mod:`med_evals.outputs.files`); ``for_people``: a table for a
    spreadsheet, its text cells that would run as formulas neutralised
    (:func:`med_evals.outputs.text.csv_cell`)."""
    def write(f) -> None:  # noqa: ANN001 - a text file
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: csv_cell(v) for k, v in row.items()} if for_people else row)

    write_with(path, write, "--out", newline="")


def write_validation_sheet(
    rows: Sequence[dict[str, str]], path: Path, n: int, seed: int = 0
) -> Path:
    """``n`` rows drawn at random (``seed``) with empty columns for a rater: was the question a
    fair rewording of the objective, and does the label follow from the conclusion?"""
    picked = sorted(random.Random(seed).sample(range(len(rows)), min(n, len(rows))))
    _write_csv(
        path,
        VALIDATION_COLUMNS,
        (
            {**{k: rows[i].get(k, "") for k in VALIDATION_COLUMNS}, "label": rows[i]["verdict"]}
            for i in picked
        ),
    )
    return path
