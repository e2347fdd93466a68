"""``med-evals report``: paper-style tables and figures from our tasks' logs, for any mix of
runs (studies, models, conditions, epochs, task arguments). Reads logs only; never calls a model.

Each study (:data:`med_evals.studies.STUDIES`) has its section (:data:`SECTIONS`). The report is
written into a temporary folder beside ``out_dir`` and moved into place only once complete, so
a failure leaves no half-written report.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from med_evals.logs import load_runs
from med_evals.report import medevidence, oncology, verdict
from med_evals.report.context import Context
from med_evals.report.document import Document
from med_evals.report.runs import Group, ReportError, check_comparable, group_runs, run_labels
from med_evals.report.tables import (
    HeadlineRow,
    generic_section,
    provenance_tables,
)
from med_evals.studies import HEALTHFC, MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT, STUDIES, Study

#: Paired bootstrap resamples: enough for a 95% interval's first decimal, quick on CI.
N_BOOT = 200

Section = Callable[[Context, Study, Sequence[Group]], None]
#: the section of each study (HealthFC shares MedREQAL's); a study without one gets the generic
#: section (headline, comparisons)
SECTIONS: dict[str, Section] = {
    ONCOLOGY_RCT.task: oncology.section,
    MEDEVIDENCE.task: medevidence.section,
    MEDREQAL.task: verdict.section,
    HEALTHFC.task: verdict.section,
}
OUTPUTS = ("report.md", "report.html", "figures")

__all__ = ["N_BOOT", "ReportError", "ReportResult", "build_report"]


@dataclass
class ReportResult:
    markdown: Path
    html: Path
    figures: list[Path]
    skipped: list[str]
    warnings: list[str] = field(default_factory=list)
    #: every headline number the report shows, one row per run label (and condition)
    headline: list[HeadlineRow] = field(default_factory=list)
    #: what the report could not show and why (a published table that could not be had)
    notes: list[str] = field(default_factory=list)


def build_report(
    logs: Sequence[str | Path],
    out_dir: str | Path,
    allow_mixed: bool = False,
    reference: str | Path | None = None,
    n_boot: int = N_BOOT,
) -> ReportResult:
    """Write ``report.md``, ``report.html`` (self-contained) and PNG figures to ``out_dir``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out} is a file, not a folder for the report")
    runs, skipped = load_runs(logs)
    if not runs:
        raise ReportError("no usable log: " + ("; ".join(skipped) or "no log files found"))
    warnings = check_comparable(runs, allow_mixed)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    # mkdtemp makes the folder private (0700); the report is the user's, like any file they
    # write: their umask decides, as for the files inside it
    tmp.chmod(0o777 & ~_umask())
    try:
        fig_dir = tmp / "figures"
        fig_dir.mkdir()
        doc = Document("med_evals report")
        ctx = Context(doc, fig_dir, reference, n_boot, warnings)
        groups = group_runs(runs, ctx.warnings)
        models = {g.label for gs in groups.values() for g in gs}
        doc.p(
            f"{len(runs)} runs ({len(models)} run labels: model, and the task arguments that "
            f"differ between runs of a study); {len(skipped)} logs skipped. — marks a missing "
            "value.",
            "note",
        )
        for study in STUDIES.values():
            if study.task in groups:
                SECTIONS.get(study.task, generic_section)(ctx, study, groups[study.task])
        if ctx.warnings:
            doc.h2("Warnings")
            for w in ctx.warnings:
                doc.p(w, "warn")
        doc.h2("What produced each run")
        provenance_tables(doc, runs, run_labels(runs))
        if skipped:
            doc.h2("Logs skipped")
            for s in skipped:
                doc.p(s)
        (tmp / "report.md").write_text(doc.markdown(tmp), encoding="utf-8")
        (tmp / "report.html").write_text(doc.html(), encoding="utf-8")
        _move_into_place(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figs = [out / "figures" / p.name for p in ctx.figures]
    return ReportResult(
        out / "report.md", out / "report.html", figs, skipped, ctx.warnings, ctx.headline,
        ctx.notes,
    )


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it
    os.umask(mask)
    return mask


def _move_into_place(tmp: Path, out: Path) -> None:
    """Replace the report's own outputs in ``out`` (other files there are left alone)."""
    if not out.exists():
        os.replace(tmp, out)
        tmp.mkdir()  # the caller removes it
        return
    old = out / "figures"
    if old.exists():
        shutil.rmtree(old)
    os.replace(tmp / "figures", old)
    for name in OUTPUTS[:2]:
        os.replace(tmp / name, out / name)
