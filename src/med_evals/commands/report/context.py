"""What a study section writes into: the document, the figure folder and the report's state."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from med_evals.commands.report.document import Document
from med_evals.commands.report.tables import HeadlineRow


@dataclass
class Context:
    doc: Document
    figures_dir: Path
    #: ``--reference``: the folder of published tables that are not shipped (None: the default)
    reference: str | Path | None
    n_boot: int
    warnings: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    #: every headline row the report shows (for tests and the CLI: the logged numbers)
    headline: list[HeadlineRow] = field(default_factory=list)
    #: what the report could not show and why (a published table that could not be had)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        """Say in the report (before the table it concerns) and on the console what is missing."""
        self.doc.p(text, "warn")
        if text not in self.notes:
            self.notes.append(text)

    def add_figure(self, path: Path | None, caption: str, empty: str) -> None:
        """Show a figure, or say why there is none (``path`` None: nothing to draw)."""
        self.doc.figure(path, caption, empty)
        if path is not None:
            self.figures.append(path)
