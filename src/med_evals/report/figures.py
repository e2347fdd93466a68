"""Matplotlib figures for the report (Agg backend, PNG files)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def grouped_bars(
    path: Path,
    groups: list[str],
    series: dict[str, list[float]],
    title: str,
    ylabel: str,
    errors: dict[str, list[tuple[float, float]]] | None = None,
    ylim: tuple[float, float] | None = (0, 1.05),
    reference: float | None = None,
) -> Path:
    """One bar group per ``groups`` entry, one bar per series, optional interval whiskers."""
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(groups) * max(1, len(series)) / 2 + 3), 4.2))
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        vals = [0 if v is None or math.isnan(v) else v for v in values]
        yerr = None
        if errors and name in errors:
            lo = [
                max(0, v - e[0]) if not math.isnan(e[0]) else 0
                for v, e in zip(vals, errors[name], strict=True)
            ]
            hi = [
                max(0, e[1] - v) if not math.isnan(e[1]) else 0
                for v, e in zip(vals, errors[name], strict=True)
            ]
            yerr = [lo, hi]
        ax.bar(
            x + (i - (len(series) - 1) / 2) * width, vals, width, label=name, yerr=yerr, capsize=3
        )
    if reference is not None:
        ax.axhline(reference, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(x, groups, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ylim:
        ax.set_ylim(*ylim)
    if len(series) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def confusion_panels(
    path: Path,
    panels: list[tuple[str, list[list[int]]]],
    labels: list[str],
    title: str,
    ncols: int = 5,
) -> Path:
    """Confusion matrices as titled panels, wrapped ``ncols`` to a row."""
    ncols = max(1, min(ncols, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 2.5 * nrows + 0.6), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    ticks = [lab[:3] for lab in labels]
    for ax, (name, matrix) in zip(axes.flat, panels, strict=False):
        arr = np.asarray(matrix)
        ax.axis("on")
        ax.imshow(arr, cmap="Blues", vmin=0, vmax=max(1, arr.max()))
        for (a, b), v in np.ndenumerate(arr):
            ax.text(
                b,
                a,
                str(v),
                ha="center",
                va="center",
                fontsize=9,
                color="white" if v > arr.max() / 2 else "black",
            )
        ax.set_title(name, fontsize=8)
        ax.set_xticks(range(len(labels)), ticks, fontsize=7)
        ax.set_yticks(range(len(labels)), ticks, fontsize=7)
    fig.suptitle(title + " (rows: truth, columns: prediction)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
