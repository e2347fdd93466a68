"""``med-evals report``: paper-style tables and figures from our tasks' logs, for any mix of
runs (studies, models, conditions, epochs, task arguments). Reads logs only; never calls a model.

Each study (:data:`med_evals.tasks.STUDIES`) has its section (:data:`SECTIONS`). The report
is
built in a folder of its own inside ``out_dir`` and moved into place only once complete
(:func:`replace_report`), so a failure or a kill leaves a whole report, never a half-written one.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inspect_ai.model import ModelCost

from med_evals.commands.report import (
    differences,
    exports,
    judges,
    medevidence,
    medreqal,
    oncology_rct,
    summary,
)
from med_evals.commands.report.context import Context
from med_evals.commands.report.document import Document
from med_evals.commands.report.tables import (
    HeadlineRow,
    generic_section,
    provenance_tables,
)
from med_evals.commands.report.usage import usage_section
from med_evals.logs.labels import Group, ReportError, check_comparable, group_runs, run_labels
from med_evals.logs.runs import Run, load_selected, select_logs
from med_evals.outputs.exit_codes import CommandError
from med_evals.outputs.files import check_folder, make_folder, stale_entries, temp_name, umask
from med_evals.stats.intervals import N_BOOT  # the report's resamples: diff's too
from med_evals.stats.standing import entries, headline_intervals
from med_evals.tasks import HEALTHFC, MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT, STUDIES, Study

Section = Callable[[Context, Study, Sequence[Group]], None]
#: the section of each study (HealthFC shares MedREQAL's); a study without one gets the generic
#: section (headline, comparisons)
SECTIONS: dict[str, Section] = {
    ONCOLOGY_RCT.task: oncology_rct.section,
    MEDEVIDENCE.task: medevidence.section,
    MEDREQAL.task: medreqal.section,
    HEALTHFC.task: medreqal.section,
}

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
    #: the study runs the report could not show (an unreadable log, a run that did not
    #: finish, a study log without scores): ``med-evals report`` then exits 1
    not_shown: list[str] = field(default_factory=list)
    #: the runs it shows
    shown: int = 0
    #: every table's exports: (CSV, LaTeX) in ``tables/`` (:mod:`med_evals.commands.report.exports`)
    tables: list[tuple[Path, Path]] = field(default_factory=list)
    #: every model the runs shown name (the model under test and each role's): the console
    #: names a ``--prices`` entry that matches none (``med-evals report``)
    models: list[str] = field(default_factory=list)


def build_report(
    logs: Sequence[str | Path],
    out_dir: str | Path,
    allow_mixed: bool = False,
    reference: str | Path | None = None,
    n_boot: int = N_BOOT,
    prices: Mapping[str, ModelCost] | None = None,
) -> ReportResult:
    """Write ``report.md``, ``report.html`` (self-contained) and PNG figures to ``out_dir``
    (see :func:`replace_report` for how an earlier report there is replaced). ``prices``:
    model name -> Inspect ``ModelCost`` for the tokens and cost (``--prices``)."""
    try:
        out = check_folder(out_dir, "--out")  # before any log is read
    except CommandError as ex:
        raise ReportError(str(ex)) from None
    selection = select_logs(logs)
    loaded = load_selected(selection)
    judging, unreadable = judges.judge_runs(selection)  # counterfactual_judges: no study
    runs, skipped = loaded.runs, _not_judging(loaded.skipped, judging) + unreadable
    if not runs and not judging:
        raise ReportError("no usable log: " + ("; ".join(skipped) or "no log files found"))
    warnings = check_comparable(runs, allow_mixed)
    made = not out.exists()
    try:
        make_folder(out)
    except CommandError as ex:
        raise ReportError(str(ex)) from None
    clean_stale(out)
    tmp = _temp_folder(out)
    done = False
    try:
        fig_dir = tmp / "figures"
        fig_dir.mkdir()
        doc = Document("med_evals report")
        ctx = Context(doc, fig_dir, reference, n_boot, warnings)
        groups = group_runs(runs, ctx.warnings)
        models = {g.label for gs in groups.values() for g in gs}
        doc.p(
            f"{len(runs)} runs ({len(models)} run labels: model, and the task arguments and "
            "settings that differ between runs of a study); "
            + (f"{len(judging)} runs of a task that only judges (under 'Judges'); "
               if judging else "")
            + f"{len(skipped)} logs skipped. — marks a missing value.",
            "note",
        )
        if loaded.not_shown:
            doc.p(not_shown_line(len(runs), loaded.not_shown) + ": listed under 'Logs "
                  "skipped' at the end", "warn")
        summary.section(doc, groups, primary_interval(groups, n_boot))
        for study in STUDIES.values():
            if study.task in groups:
                SECTIONS.get(study.task, generic_section)(ctx, study, groups[study.task])
                differences.section(ctx, study, groups[study.task])  # where two runs differ
        judges.section(doc, judges.judged(runs, run_labels(runs), judging), prices)
        usage_section(doc, runs, run_labels(runs), prices)
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
        names = _name_figures_by_content(doc)
        written = exports.write_exports(doc, tmp)  # every table as CSV and LaTeX, linked
        (tmp / "report.md").write_text(doc.markdown(tmp), encoding="utf-8")
        (tmp / "report.html").write_text(doc.html(), encoding="utf-8")
        replace_report(tmp, out)
        done = True
    except OSError as ex:  # no space left, a permission lost midway: the old report is kept
        raise ReportError(f"--out {out}: cannot write the report ({ex.strerror or ex}); "
                          "an earlier report there is unchanged") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if made and not done and not any(out.iterdir()):
            out.rmdir()  # a folder made for a report that failed: nothing is left of it
    figs = [out / "figures" / name for name in names]
    tables = [(out / csv, out / tex) for csv, tex in zip(written[::2], written[1::2], strict=True)]
    return ReportResult(
        out / "report.md", out / "report.html", figs, skipped, ctx.warnings, ctx.headline,
        ctx.notes, loaded.not_shown, len(runs), tables,
        [m for run in [*runs, *judging] for m in (run.model, *(r.model for r in run.roles or []))],
    )


def _not_judging(skipped: Sequence[str], judging: Sequence[Run]) -> list[str]:
    """The skipped lines but those of the judging tasks' logs the report shows."""
    shown = {f"{r.path}: " for r in judging}
    return [s for s in skipped if not any(s.startswith(p) for p in shown)]


def not_shown_line(shown: int, not_shown: Sequence[str]) -> str:
    """``the report shows 1 run; 4 study runs could not be shown (unreadable, unfinished or
    without scores)``: the summary of a report that left runs out."""
    runs = "run" if shown == 1 else "runs"
    return (f"the report shows {shown} {runs}; {len(not_shown)} study run(s) could not be shown "
            "(an unreadable log, a run that did not finish, or a study log without scores)")


def primary_interval(
    groups: Mapping[str, Sequence[Group]], n_boot: int
) -> summary.IntervalOf:
    """The summary's interval of a headline row's number: the headline table's own
    (:func:`med_evals.stats.standing.headline_intervals`, the same samples and resamples)."""

    def interval(row: HeadlineRow, name: str) -> tuple[float, float] | None:
        study = STUDIES[row.task]
        found = [e for e in entries(groups[row.task], row.condition) if e.label == row.label]
        if not found:
            return None
        return headline_intervals(study, found[0], n_boot)[name].interval

    return interval


#: our build folders inside ``--out``: ``.med-evals-report-<host>-<pid>-<random>``
TEMP_PREFIX = ".med-evals-report-"
#: a figure as this module names it: ``<name>.<first 12 hex digits of its sha256>.png``
FIGURE_NAME = re.compile(r"^[A-Za-z0-9_]+\.[0-9a-f]{12}\.png$")
#: a figure that report.md shows: ``![caption](figures/<file>)``
FIGURE_LINK = re.compile(r"\]\((figures/[^)\s]+)\)")


def _temp_folder(out: Path) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=temp_name(TEMP_PREFIX), dir=out))
    # mkdtemp makes the folder private (0700); the report is the user's, like any file they
    # write: their umask decides, as for the files inside it
    tmp.chmod(0o777 & ~umask())
    return tmp


def clean_stale(out: Path) -> None:
    """Remove build folders of ours that a killed ``med-evals report`` left in ``out``."""
    for entry in stale_entries(out, TEMP_PREFIX):
        shutil.rmtree(entry, ignore_errors=True)


def _name_figures_by_content(doc: Document) -> list[str]:
    """Rename each figure of ``doc`` to ``<name>.<sha256 prefix>.png`` (its blocks follow): a
    new report's figures never take the names an earlier report's use, so report.md always
    shows the figures it was built with. Same content, same name (the PNGs are deterministic)."""
    names = []
    for i, block in enumerate(doc.blocks):
        if block[0] != "img":
            continue
        path: Path = block[1]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        named = path.with_name(f"{path.stem}.{digest}.png")
        path.rename(named)
        doc.blocks[i] = (block[0], named, *block[2:])
        names.append(named.name)
    return names


def _linked(markdown: Path) -> tuple[set[str], set[str]]:
    """The figure files (``figures/...``) and table exports (``tables/...``) a report.md
    shows; none if it cannot be read."""
    try:
        text = markdown.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set(), set()
    return {Path(m).name for m in FIGURE_LINK.findall(text)}, exports.linked(text)


def replace_report(tmp: Path, out: Path) -> None:
    """Put the complete report built in ``tmp`` (a folder inside ``out``: the same
    filesystem, so every step is a rename, also when ``out`` is a mount point or a link to
    another filesystem) in place of an earlier one; other files in ``out`` are left alone.

    The steps, each a rename a kill cannot split, in an order that keeps a whole report at
    every moment: (1) the new figures are added to ``out/figures`` under names of their own
    (:func:`_name_figures_by_content`), and the new table exports, one folder named by their
    content (:func:`med_evals.commands.report.exports.write_exports`), to ``out/tables``, beside the
    old report's; (2) report.html (figures embedded) replaces the old one; (3) report.md,
    which shows the new figures and links the new exports, replaces the old one; (4) only then
    the figures and exports no report.md shows any more are removed: those the old report.md
    showed, and any of ours a killed run left. A kill between (2) and (3) leaves a new
    report.html beside the old report.md, each whole with its own figures and exports; a kill
    elsewhere leaves the old report or the new one, and at worst unused files and a build
    folder, which the next run removes."""
    fig_out, tab_out = out / "figures", out / exports.FOLDER
    for folder, what in ((fig_out, "figures"), (tab_out, "table exports")):
        if folder.exists() and not folder.is_dir():
            raise ReportError(f"--out {out}: {folder} is a file, not the report's {what} folder")
    old_figures, old_tables = _linked(out / "report.md")
    fig_out.mkdir(exist_ok=True)
    tab_out.mkdir(exist_ok=True)
    new_figures = sorted(p.name for p in (tmp / "figures").iterdir())
    for name in new_figures:
        os.replace(tmp / "figures" / name, fig_out / name)
    built = tmp / exports.FOLDER
    new_tables = sorted(p.name for p in built.iterdir()) if built.is_dir() else []
    for name in new_tables:
        if not (tab_out / name).exists():  # else: the same exports, named by their content
            os.replace(built / name, tab_out / name)
    os.replace(tmp / "report.html", out / "report.html")
    os.replace(tmp / "report.md", out / "report.md")
    for entry in fig_out.iterdir():
        ours = entry.name in old_figures or FIGURE_NAME.match(entry.name)
        if ours and entry.name not in new_figures and entry.is_file():
            entry.unlink(missing_ok=True)
    for entry in tab_out.iterdir():
        ours = entry.name in old_tables or exports.EXPORT_NAME.match(entry.name)
        if ours and entry.name not in new_tables and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
