"""The report's abstention table: each cell counted by hand and equal to the logged metric of
a ``-T metrics=full`` run (one function: ``abstention_of``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from med_evals.commands.report import build_report
from med_evals.commands.report.document import fmt

from ..medevidence_support import install_medevidence
from .support import logged, replay_run
from .test_same_numbers import md_tables

FIXTURES = Path(__file__).resolve().parents[2] / "datasets" / "fixtures"

#: HealthFC fixture claim -> reply; gold N S R N R S, predicted N S S INVALID R N
REPLIES = {
    "green tea": "LABEL: NOT ENOUGH INFORMATION",
    "zinc": "LABEL: SUPPORTED",
    "magnetic bracelets": "LABEL: SUPPORTED",
    "cranberry": "Possibly, for some women.",
    "homeopathy": "REFUTED.",
    "physiotherapy": "Not enough information.",
}
COLUMNS = ("coverage", "selective accuracy", "abstention recall", "over-abstention")


def abstention_tables(markdown: Path, title: str) -> list[list[dict[str, str]]]:
    return [rows for section, caption, rows in md_tables(markdown.read_text(encoding="utf-8"))
            if section == title and caption.startswith("Abstention")]


def test_healthfc_table_counted_by_hand(tmp_path: Path) -> None:
    from med_evals.tasks.healthfc import healthfc

    def reply(text: str, sid: str, epoch: int) -> str:
        return next(r for claim, r in REPLIES.items() if claim in text)

    with pytest.warns(UserWarning, match="counts differ"):
        task = healthfc(data_file=str(FIXTURES / "healthfc_fixture.csv"), bertscore=False,
                        metrics="full")
    log = replay_run(task, reply, "openai/gpt-test", tmp_path / "run")
    result = build_report([tmp_path / "run" / "logs"], tmp_path / "report", n_boot=20)
    [[row]] = abstention_tables(result.markdown, "HealthFC (Vladika et al. 2024)")
    # committed S, S, R (2 right) of 6; gold NEI 2, abstained 1; gold S/R 4, abstained 1
    hand = {"coverage": 3 / 6, "selective accuracy": 2 / 3, "abstention recall": 1 / 2,
            "over-abstention": 1 / 4}
    assert {c: row[c] for c in COLUMNS} == {c: fmt(v) for c, v in hand.items()}
    assert (row["n"], row["committed"], row["abstained"]) == ("6", "3", "2")
    keys = ("coverage", "selective_accuracy", "abstention_recall", "over_abstention")
    assert [row[c] for c in COLUMNS] == [fmt(logged(log, k)) for k in keys]
    caption = next(c for _, c, _ in md_tables(result.markdown.read_text())
                   if c.startswith("Abstention"))
    assert caption == "Abstention (abstaining: NOT ENOUGH INFORMATION)"  # how: the note below
    # shown in its own table, not again among the other metrics
    others = [rows for _, c, rows in md_tables(result.markdown.read_text())
              if c.startswith("Other metrics")]
    assert others and not any("coverage" in r for rows in others for r in rows)


def test_medevidence_table_per_condition_and_scheme(tmp_path: Path, monkeypatch) -> None:
    from med_evals.tasks.medevidence import medevidence

    install_medevidence(tmp_path / "data", monkeypatch)
    # gold (five): no difference, lower, insufficient data, higher, uncertain effect
    replay_run(medevidence(condition="evidence,closed_book"),
               lambda text, sid, epoch: ("**Answer**: insufficient data" if sid.endswith("-0")
                                         else "**Answer**: lower"),
               "openai/gpt-five", tmp_path / "five")
    replay_run(medevidence(labels="three"),
               lambda text, sid, epoch: "**Answer**: uncertain", "openai/gpt-three",
               tmp_path / "three")
    result = build_report([tmp_path / "five" / "logs", tmp_path / "three" / "logs"],
                          tmp_path / "report", n_boot=20)
    [rows] = abstention_tables(result.markdown, "MedEvidence (Polzak et al. 2026)")
    by = {(r["run"].split(" ")[0], r["condition"]): r for r in rows}
    # five classes, each condition: ids ...-0 (gold no difference; 90000002-0 gold higher)
    # answer insufficient data, the other three lower: committed 3 (1 right: gold lower),
    # abstained 2 (both on committed gold: over-abstention 2/3), gold abstentions 2 unmet
    caption = next(c for _, c, _ in md_tables(result.markdown.read_text())
                   if c.startswith("Abstention"))
    assert caption == ("Abstention (abstaining: uncertain effect, insufficient data "
                       "(five labels); uncertain (three labels))")
    five = by[("openai/gpt-five", "evidence")]
    assert [five[c] for c in COLUMNS] == [fmt(3 / 5), fmt(1 / 3), fmt(0.0), fmt(2 / 3)]
    assert by[("openai/gpt-five", "closed_book")]["coverage"] == fmt(3 / 5)
    # three labels: every reply uncertain; gold uncertain 3 of 5
    three = by[("openai/gpt-three", "evidence")]
    assert [three[c] for c in COLUMNS] == [fmt(0.0), "—", fmt(1.0), fmt(1.0)]
