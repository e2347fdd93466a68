"""The report's figures show their titles whole (issue 38): a title longer than the figure is
wide, or a figure one panel wide, wraps onto more lines instead of running past the edge."""

from __future__ import annotations

import pytest

from med_evals.commands.report import figures

LONG = ("Macro-F1 over valid predictions by condition (95% Wald intervals), every run of the "
        "study with its model name and the task arguments that differ: openai/gpt-4.1 (replayed)")


@pytest.fixture
def drawn(monkeypatch):
    """The figures the functions draw, kept open to be measured."""
    kept: list = []
    close = figures.plt.close
    monkeypatch.setattr(figures.plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)


def _inside(fig) -> bool:
    """Everything drawn (titles, labels, legends) within the figure's edges."""
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    width, height = fig.get_size_inches()
    return box.x0 >= -0.01 and box.y0 >= -0.01 and box.x1 <= width + 0.01 \
        and box.y1 <= height + 0.01


def test_a_long_title_is_whole_on_the_narrowest_bar_chart(tmp_path, drawn):
    assert figures.grouped_bars(tmp_path / "a.png", ["c1"], {"m": [0.5]}, LONG, "y")
    [fig] = drawn
    title = fig.axes[0].get_title()
    assert title.replace("\n", " ") == LONG and title.count("\n") >= 1
    assert _inside(fig)


def test_the_confusion_grid_title_is_whole_on_one_panel(tmp_path, drawn):
    panels = [("title_abstract · a model", [[1, 2], [3, 4]])]
    assert figures.confusion_panels(tmp_path / "b.png", panels, ["POSITIVE", "NEGATIVE"],
                                    "Confusion matrices of valid predictions")
    [fig] = drawn
    title = fig.texts[0].get_text()  # the suptitle
    assert title.replace("\n", " ") == ("Confusion matrices of valid predictions (rows: truth, "
                                        "columns: prediction)")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["POSITIVE", "NEGATIVE"]
    assert _inside(fig)
