"""The report on real mixes of runs: random mixes of replayed runs (studies, conditions, models,
epochs, task arguments, a cancelled log) complete, and every headline number equals the log's;
plus the mixes the issue names (the identifier-pull crash, runs differing only in a task
argument, overlapping logs, runs with no valid reply, published rows, a failed build)."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log, write_eval_log

from med_evals.commands.report import build as build_module
from med_evals.commands.report import build_report
from med_evals.tasks.healthfc import healthfc
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.oncology_rct import oncology_rct

from ..medevidence_support import install_medevidence
from ..oncology_support import install_fixture
from .support import logged, replay_run, same
from .test_same_numbers import md_tables

FIXTURES = Path(__file__).resolve().parents[2] / "datasets" / "fixtures"
ONCOLOGY_CONDITIONS = ["title_abstract", "study", "counterfactual,counterfactual_doi", "doi_only"]


def _coin(*parts: object) -> float:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16) / 2**32


def oncology_reply(style: str):
    def reply(text: str, sid: str, epoch: int) -> str | None:
        if style == "invalid":
            return "Positive, I think."
        if style == "follower":
            return "NEGATIVE" if "did not meet" in text else "POSITIVE"
        u = _coin(style, sid, epoch)
        return None if u < 0.1 else "maybe" if u < 0.3 else "POSITIVE" if u < 0.7 else "NEGATIVE"

    return reply


def label_reply(labels: list[str], style: str):
    def reply(text: str, sid: str, epoch: int) -> str:
        u = _coin(style, sid, epoch)
        return "no idea" if u < 0.2 else labels[int(u * 1000) % len(labels)]

    return reply


def make_run(rng: random.Random, tmp: Path, i: int, monkeypatch) -> str:
    """One random replayed run into ``tmp/run<i>``; returns its study."""
    model = rng.choice(["openai/model-a", "anthropic/model-b", "google/model-c"])
    epochs = rng.choice([1, 1, 2])
    study = rng.choice(["oncology_rct", "oncology_rct", "medevidence", "healthfc"])
    out = tmp / f"run{i}"
    if study == "oncology_rct":
        install_fixture(out / "data", monkeypatch)
        task = oncology_rct(condition=rng.choice(ONCOLOGY_CONDITIONS), seed=rng.choice([0, 0, 1]))
        reply = oncology_reply(rng.choice(["follower", "invalid", f"noise{i}"]))
    elif study == "medevidence":
        install_medevidence(out / "data", monkeypatch)
        scheme = rng.choice(["five", "three"])
        task = medevidence(condition=rng.choice(["evidence", "evidence,closed_book"]),
                           labels=scheme)
        words = ["higher", "lower", "no difference"] if scheme == "five" else ["higher", "lower"]
        answers = [f"**Answer**: {w}" for w in words]
        reply = label_reply(answers, f"me{i}")
    else:
        with pytest.warns(UserWarning, match="counts differ"):
            task = healthfc(data_file=str(FIXTURES / "healthfc_fixture.csv"), bertscore=False,
                            evidence=rng.choice([True, False]))
        reply = label_reply(["LABEL: SUPPORTED", "LABEL: REFUTED"], f"hf{i}")
    replay_run(task, reply, model, out, epochs=epochs)
    return study


def _values(path: Path) -> list[dict]:
    log = read_eval_log(str(path))
    return [next(iter(s.scores.values())).value for s in log.samples or [] if s.scores]


def expected(log_name: str, logs: dict[str, Path], condition: str, name: str) -> float:
    """The headline metric ``name`` of ``condition`` as the log itself recorded it."""
    conds = {str(v.get("condition") or "") for v in _values(logs[log_name])}
    log = read_eval_log(str(logs[log_name]), header_only=True)
    return logged(log, f"{condition}/{name}" if len(conds) > 1 else name)


# seeds whose mixes cover: two models on oncology, counterfactual pairs, 2 epochs, both
# MedEvidence schemes, HealthFC with and without evidence, and a merge of overlapping logs
@pytest.mark.parametrize("seed", [306, 350])
@pytest.mark.slow
def test_random_mixes_complete_with_the_logs_numbers(seed, tmp_path, monkeypatch):
    rng = random.Random(seed)
    n_runs = rng.randint(4, 6)
    for i in range(n_runs):
        make_run(rng, tmp_path, i, monkeypatch)
    logs = {p.name: p for p in tmp_path.glob("run*/logs/*.eval")}
    cancelled = read_eval_log(str(next(iter(sorted(logs.values())))))
    cancelled.status = "cancelled"
    write_eval_log(cancelled, str(tmp_path / "run0" / "logs" / "cancelled.eval"))

    result = build_report([tmp_path / f"run{i}" / "logs" for i in range(n_runs)],
                          tmp_path / "report", n_boot=10)
    md = result.markdown.read_text()
    assert any("status cancelled" in s for s in result.skipped)
    cells = {c for _, _, rows in md_tables(md) for r in rows for c in r.values()}
    assert not cells & {"nan", "NaN", "N/A", "None", ""}  # one missing-value mark: —
    assert result.headline
    for row in result.headline:
        # the newest log of the row's label holding its condition gave every sample of it
        with_cond = [name for name in row.logs
                     if row.condition in {str(v.get("condition") or "") for v in
                                          _values(logs[name])}]
        newest = max(with_cond, key=lambda n: (
            read_eval_log(str(logs[n]), True).eval.created, logs[n].stat().st_mtime))
        for name, value in row.values.items():
            assert same(value, expected(newest, logs, row.condition, name)), (row, name)


@pytest.mark.slow
def test_identifier_pull_with_runs_of_different_conditions(tmp_path, monkeypatch):
    """The README's job for one model plus a condition=study run for another (the crash)."""
    install_fixture(tmp_path / "data", monkeypatch)
    replay_run(oncology_rct(), oncology_reply("follower"), "embedded/smollm2-135m", tmp_path / "a")
    replay_run(oncology_rct(condition="study"), oncology_reply("follower"), "openai/gpt-x",
               tmp_path / "b")
    result = build_report([tmp_path / "a" / "logs", tmp_path / "b" / "logs"], tmp_path / "out",
                          n_boot=10)
    md = result.markdown.read_text()
    pull = md.split("Identifier pull")[1].split("\n\n")[1]
    assert "openai/gpt-x (replayed)" in pull and "smollm2" not in pull
    assert {r.label for r in result.headline} == {
        "embedded/smollm2-135m (replayed)", "openai/gpt-x (replayed)"}


def test_runs_differing_in_a_task_argument_are_told_apart(tmp_path):
    for evidence in (True, False):
        with pytest.warns(UserWarning):
            task = healthfc(data_file=str(FIXTURES / "healthfc_fixture.csv"), bertscore=False,
                            evidence=evidence)
        replay_run(task, label_reply(["LABEL: SUPPORTED"], "x"), "vllm/m", tmp_path / "runs",
                   name=f"m-{evidence}")
    result = build_report([tmp_path / "runs" / "logs"], tmp_path / "out", n_boot=10)
    assert {r.label for r in result.headline} == {
        "vllm/m (replayed), evidence=true", "vllm/m (replayed), evidence=false"}
    md = result.markdown.read_text()
    assert "| vllm/m (replayed), evidence=true | 6 |" in md


def test_overlap_keeps_the_newer_log_and_says_so(tmp_path, monkeypatch):
    install_fixture(tmp_path / "data", monkeypatch)
    replay_run(oncology_rct(), oncology_reply("invalid"), "openai/m", tmp_path / "r", name="old")
    new = replay_run(oncology_rct(), oncology_reply("follower"), "openai/m", tmp_path / "r",
                     name="new")
    result = build_report([tmp_path / "r" / "logs"], tmp_path / "out", n_boot=10)
    [row] = result.headline
    assert row.values["valid_rate"] == 1.0 == logged(new, "valid_rate")
    [warning] = result.warnings
    assert "the newer log's values" in warning and Path(new.location).name in warning
    assert "earlier values were kept" not in result.markdown.read_text()


def test_no_valid_reply_says_so_instead_of_drawing_or_testing(tmp_path, monkeypatch):
    install_fixture(tmp_path / "data", monkeypatch)
    replay_run(oncology_rct(condition="counterfactual,counterfactual_doi"),
               oncology_reply("invalid"), "openai/m", tmp_path / "r")
    result = build_report([tmp_path / "r" / "logs"], tmp_path / "out",
                          reference=tmp_path / "no-reference", n_boot=10)
    md = result.markdown.read_text()
    assert "McNemar exact p" in md and "| no valid prediction |" in md
    assert "1.000" not in md.split("Identifier pull")[1].split("\n\n")[1]
    assert "no valid prediction in any run, nothing to draw" in md
    assert "no valid prediction in any run, no confusion matrix" in md
    assert {p.name.split(".")[0] for p in result.figures} == {"oncology_valid_rates"}


def test_published_rows_only_for_present_conditions(tmp_path, monkeypatch, shared_datasets):
    install_fixture(tmp_path / "data", monkeypatch)
    replay_run(oncology_rct(condition="doi_only"), oncology_reply("follower"), "openai/m",
               tmp_path / "r")
    result = build_report([tmp_path / "r" / "logs"], tmp_path / "out",
                          reference=shared_datasets.parent / "reference", n_boot=10)
    md = result.markdown.read_text()
    assert "| doi_only | GPT-5.2 (published) | 100.0 | 0.67 (0.61-0.73) |" in md
    assert "Baseline" not in md and "title_abstract | GPT-5.2" not in md


def test_a_failed_build_leaves_no_half_written_report(tmp_path, monkeypatch):
    install_fixture(tmp_path / "data", monkeypatch)
    replay_run(oncology_rct(), oncology_reply("follower"), "openai/m", tmp_path / "r")

    def boom(*args):
        raise RuntimeError("figure failed")

    monkeypatch.setitem(build_module.SECTIONS, "oncology_rct", boom)
    with pytest.raises(RuntimeError, match="figure failed"):
        build_report([tmp_path / "r" / "logs"], tmp_path / "out", n_boot=10)
    assert not (tmp_path / "out").exists()  # nor any build folder (it was inside)


def test_runs_that_differ_only_in_model_options_get_their_own_labels():
    """An embedded run with -M choices=... and one without are two runs of one model: their
    labels say so (they were merged into one group, the newer log's values winning)."""
    from med_evals.logs.labels import run_labels
    from med_evals.logs.runs import Run

    def run(model_args):
        return Run("x.eval", "oncology_rct", "embedded/smollm2-135m", {},
                   {"task_args": {"condition": "title_abstract"}, "model_args": model_args})

    free, chosen, again = run({}), run({"choices": "POSITIVE,NEGATIVE"}), run({})
    labels = run_labels([free, chosen, again])
    assert labels[id(chosen)] == "embedded/smollm2-135m, -M choices=POSITIVE,NEGATIVE"
    assert labels[id(free)] == labels[id(again)] == "embedded/smollm2-135m, -M choices=—"
    # the same options: no label added
    assert run_labels([free, again])[id(free)] == "embedded/smollm2-135m"
