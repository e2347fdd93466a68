"""Matplotlib figures for the report (Agg backend, PNG files, fixed metadata so the files are
byte-stable). A figure with nothing to draw is not drawn: the functions return None and the
report says why instead of showing empty axes. Every text is drawn as it reads (:func:`plain`):
never as matplotlib's math. A title is drawn whole: wrapped onto as many lines as it needs to
fit the figure's width (:func:`fit_title`), never cut at the figure's edge."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from med_evals.commands.report.document import MISSING  # noqa: E402
from med_evals.outputs.text import terminal  # noqa: E402

DPI = 100
#: Figures fit the report's 1,180-pixel column at this DPI.
MAX_WIDTH_IN = 11.5
#: the fewest characters a title's lines are wrapped at
MIN_WRAP = 12
_PNG = {"Software": None}  # no matplotlib version in the file: same input, same bytes


def _finite(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def plain(text: str) -> str:
    """Figure text as it reads: controls visible (a label from a log may hold any), and ``$``
    escaped, so no model name is read as matplotlib's math (which may fail to parse)."""
    return terminal(text, one_line=True).replace("$", r"\$")


def _wrap(text: str, width: int) -> str:
    text = plain(text)
    return "\n".join(textwrap.wrap(text, width)) or text


def _inside(fig: plt.Figure, text: Text) -> bool:
    box = text.get_window_extent(fig.canvas.get_renderer())
    return box.x0 >= -0.5 and box.x1 <= fig.bbox.width + 0.5


def fit_title(
    fig: plt.Figure, text: Text, title: str, width: int,
    layout: Callable[[], object] | None = None,
) -> None:
    """Wrap ``title`` at ``width`` characters, and at fewer while the laid-out ``text`` runs
    past either edge of ``fig`` (``layout``: lays the figure out again; None where the title's
    left and right do not depend on the layout, as a figure's ``suptitle``, centred on the
    figure, whose height alone the layout makes room for), so the title is shown whole however
    long it is and however narrow the figure."""
    while True:
        text.set_text(_wrap(title, width))
        if layout is not None:
            layout()
        if _inside(fig, text) or width <= MIN_WRAP:
            return
        width = max(MIN_WRAP, int(width * 0.8))


def grouped_bars(
    path: Path,
    groups: Sequence[str],
    series: dict[str, list[float]],
    title: str,
    ylabel: str,
    errors: dict[str, list[tuple[float, float]]] | None = None,
    ylim: tuple[float, float] | None = (0, 1.05),
    reference: float | None = None,
) -> Path | None:
    """One bar group per ``groups`` entry, one bar per series (legend beside the axes, never on
    the bars), optional interval whiskers; a missing value is marked, not drawn as 0. None
    (nothing drawn) when no value is present."""
    if not any(_finite(v) for values in series.values() for v in values):
        return None
    n = max(1, len(series))
    width_in = min(MAX_WIDTH_IN, max(6.0, 0.55 * len(groups) * n + 4.5))
    fig, ax = plt.subplots(figsize=(width_in, 4.4))
    width = 0.8 / n
    x = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        pos = x + (i - (n - 1) / 2) * width
        vals = [v if _finite(v) else 0.0 for v in values]
        yerr = None
        if errors and name in errors:
            pairs = list(zip(vals, errors[name], strict=True))
            lo = [v - e[0] if _finite(e[0]) else 0.0 for v, e in pairs]
            hi = [e[1] - v if _finite(e[1]) else 0.0 for v, e in pairs]
            yerr = [[max(0.0, a) for a in lo], [max(0.0, b) for b in hi]]
        ax.bar(pos, vals, width, label=_wrap(name, 34), yerr=yerr, capsize=3)
        for p, v in zip(pos, values, strict=True):
            if not _finite(v):
                ax.text(p, 0.02, MISSING, ha="center", va="bottom", fontsize=9, color="#57606a")
    if reference is not None:
        ax.axhline(reference, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(x, [_wrap(g, 18) for g in groups], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fit_title(fig, ax.set_title("", fontsize=10), title, 90, fig.tight_layout)
    fig.savefig(path, dpi=DPI, metadata=_PNG)
    plt.close(fig)
    return path


def confusion_panels(
    path: Path,
    panels: list[tuple[str, list[list[int]]]],
    labels: Sequence[str],
    title: str,
    ncols: int = 4,
) -> Path | None:
    """Confusion matrices as titled panels, wrapped ``ncols`` to a row, with room between rows
    for the titles. None when there is no panel or no panel counts anything."""
    panels = [(name, m) for name, m in panels if np.asarray(m).sum() > 0]
    if not panels:
        return None
    ncols = max(1, min(ncols, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.8 * ncols, 3.0 * nrows + 0.8), squeeze=False,
        layout="constrained",
    )
    for ax in axes.flat:
        ax.axis("off")
    ticks = [plain(lab) for lab in labels]
    for ax, (name, matrix) in zip(axes.flat, panels, strict=False):
        arr = np.asarray(matrix)
        ax.axis("on")
        ax.imshow(arr, cmap="Blues", vmin=0, vmax=max(1, arr.max()))
        for (a, b), v in np.ndenumerate(arr):
            color = "white" if v > arr.max() / 2 else "black"
            ax.text(b, a, str(v), ha="center", va="center", fontsize=9, color=color)
        ax.set_title(_wrap(name, 30), fontsize=7.5)
        ax.set_xticks(range(len(labels)), ticks, fontsize=7)
        ax.set_yticks(range(len(labels)), ticks, fontsize=7)
    fit_title(fig, fig.suptitle("", fontsize=10), title + " (rows: truth, columns: prediction)",
              120)
    fig.savefig(path, dpi=DPI, metadata=_PNG)
    plt.close(fig)
    return path
