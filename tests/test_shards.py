"""One evaluation split into sample ranges over several processes (Inspect's ``--limit a-b``,
one process each, into one log folder: docs/performance.md) reads back as one run: the report,
the baseline and the gate give the numbers of the same evaluation run whole. And the
recommended run settings (``--no-log-realtime``) change no logged number."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import get_model

from med_evals.regress import decide, make_baseline, regress
from med_evals.report import build_report
from med_evals.runs import load_runs
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import replying
from .oncology_support import oncology_module
from .support import N_BOOT


def _reader(text: str) -> str:
    right = "NEGATIVE" if "did not meet" in text else "POSITIVE"
    return right if len(text) % 5 else ("POSITIVE" if right == "NEGATIVE" else "I am unsure")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same 60 samples (30 trials, two conditions) run whole, as two shards, and whole with
    the recommended settings."""
    with oncology_module(tmp_path_factory, "shards", copies=5) as (tmp, _):
        model = get_model("mockllm/reader", custom_outputs=replying(_reader))
        task = oncology_rct(condition="title_abstract,counterfactual")
        for name, limits in (("whole", [None]), ("sharded", [(0, 35), (35, 60)])):
            for limit in limits:
                inspect_eval(task, model=model, limit=limit, display="none",
                             log_dir=str(tmp / name), log_samples=True)
        inspect_eval(task, model=model, display="none", log_dir=str(tmp / "recommended"),
                     log_realtime=False)  # RECOMMENDED in bench/bench_peers.py
    return tmp


@pytest.mark.slow
def test_shards_read_back_as_one_run(runs):
    [whole], _ = load_runs([runs / "whole"])
    [sharded], _ = load_runs([runs / "sharded"])
    assert len(sharded.provenance["shards"]) == 2
    assert sharded.values == whole.values and len(whole.values) == 60
    for cond, values in whole.by_condition().items():
        assert sharded.headline_values(sharded.by_condition()[cond]) == whole.headline_values(
            values)
    # the headline metrics of the merged run are the whole run's logged ones
    assert sharded.metrics == {k: v for k, v in whole.metrics.items() if k in sharded.metrics}
    assert sharded.metrics
    # each sample's viewer link opens the shard's log that holds it
    from inspect_ai.log import read_eval_log

    from med_evals.pairs import viewer_url

    held = {str(sm.id): path for path in sharded.provenance["shards"]
            for sm in read_eval_log(path).samples or []}
    for sid in sharded.values:
        url = viewer_url(sharded, sid, 1, str(runs / "sharded"))
        assert url is not None and Path(held[sid]).name in url
    # its tokens are every shard's (the report's and the baseline's usage figures)
    from med_evals.usage import run_usage, total_usage

    def tokens(run):
        values = list(run.values.values())
        total = total_usage(run.usage().roles)
        assert total is not None
        # the roles read with the logs are what their headers, read again, say
        assert total == total_usage(run_usage(run.logs(), run.study, values).roles)
        return total.input_tokens, total.output_tokens

    assert tokens(sharded) == tokens(whole) and tokens(whole)[0] > 0


@pytest.mark.slow
def test_report_baseline_and_gate_see_one_run(runs, tmp_path):
    a = build_report([runs / "whole"], tmp_path / "a", n_boot=10)
    b = build_report([runs / "sharded"], tmp_path / "b", n_boot=10)
    assert [(r.condition, r.n, r.values) for r in a.headline] == [
        (r.condition, r.n, r.values) for r in b.headline]
    assert not b.warnings  # no "samples also in" merge warnings: one run
    md = b.markdown.read_text()
    [sharded], _ = load_runs([runs / "sharded"])
    assert ", ".join(Path(p).name for p in sharded.provenance["shards"]) in md  # both named
    base_whole, base_sharded = make_baseline([runs / "whole"]), make_baseline([runs / "sharded"])
    assert len(base_sharded["runs"]) == 1  # not refused as two runs of one setup
    assert base_sharded["runs"][0]["samples"] == base_whole["runs"][0]["samples"]
    rows, _ = regress(base_whole, [runs / "sharded"], n_boot=N_BOOT)
    gated = [r for r in rows if r.test.startswith("headline")]
    assert gated and all(r.old == r.new for r in gated)
    assert all("n=30" in r.test for r in gated)
    assert decide(rows).code == 0


def test_overlapping_ranges_are_not_merged():
    """Two logs whose samples overlap are two runs (the gate refuses them as such), never one."""
    from med_evals.runs import Run, merge_shards

    def run(ids, limit):
        return Run(f"{limit}.eval", "oncology_rct", "m", {i: {} for i in ids},
                   {"task_args": {}, "limit": limit})

    merged, notes = merge_shards([run(["1", "2"], [0, 2]), run(["2", "3"], [1, 3])])
    assert len(merged) == 2 and not notes
    merged, notes = merge_shards([run(["1", "2"], 2), run(["3", "4"], 4)])  # --limit N: whole
    assert len(merged) == 2 and not notes


@pytest.mark.slow
def test_the_recommended_settings_change_no_logged_number(runs):
    from inspect_ai.log import read_eval_log

    [default], _ = load_runs([runs / "whole"])
    [recommended], _ = load_runs([runs / "recommended"])
    assert recommended.values == default.values and recommended.metrics == default.metrics
    a, b = (read_eval_log(r.path) for r in (default, recommended))
    assert a.results is not None and b.results is not None
    assert a.results.model_dump(exclude={"completed_at"}) == b.results.model_dump(
        exclude={"completed_at"})
    # every sample and its events are in the log (report, regress, replay, eval-retry)
    assert len(b.samples or []) == len(a.samples or []) == 60
    assert [len(s.events) for s in b.samples or []] == [len(s.events) for s in a.samples or []]


@pytest.fixture(scope="module")
def mixes(tmp_path_factory):
    """Shards of the same 60 samples that do not make one whole run: one shard forgotten (a
    gap), shards run at two temperatures, and whole runs that differ in one setting each."""
    with oncology_module(tmp_path_factory, "mixes", copies=5) as (tmp, _):
        model = get_model("mockllm/reader", custom_outputs=replying(_reader))
        task = oncology_rct(condition="title_abstract,counterfactual")
        runs = {
            "whole": [dict()],
            "gap": [dict(limit=(0, 20)), dict(limit=(40, 60))],
            "temps": [dict(limit=(0, 35), temperature=0.0), dict(limit=(35, 60), temperature=0.5)],
            "top_p": [dict(top_p=0.5)],
            "seed": [dict(seed=7)],
            "system": [dict(system_message="Answer tersely.")],
            "epochs": [dict(epochs=2)],
        }
        for name, settings in runs.items():
            for kw in settings:
                inspect_eval(task, model=model, display="none", log_dir=str(tmp / name), **kw)
    return tmp


@pytest.mark.slow
def test_a_forgotten_shard_is_a_partial_run_everywhere(mixes, tmp_path, capsys):
    from med_evals.cli import main as cli_main

    [gap], _ = load_runs([mixes / "gap"])
    assert len(gap.provenance["shards"]) == 2 and len(gap.values) == 40
    assert gap.partial == ("40 of 60 samples (samples 21-40 not run: shards --limit 1-20, "
                           "--limit 41-60)")
    # the report: the row is marked, the warning says what is missing
    result = build_report([mixes / "gap"], tmp_path / "r", n_boot=10)
    assert {r.label for r in result.headline} == {"mockllm/reader (partial)"}
    [warning] = [w for w in result.warnings if "partial run" in w]
    assert warning.startswith("oncology_rct / mockllm/reader (")
    assert warning.endswith(") is a partial run: 40 of 60 samples (samples 21-40 not run: "
                            "shards --limit 1-20, --limit 41-60); its row is marked (partial)")
    # the gate: undecided, never a pass on the 40 samples it has
    baseline = tmp_path / "b.json"
    assert cli_main(["baseline", str(mixes / "whole"), "-o", str(baseline)]) == 0
    capsys.readouterr()
    assert cli_main(["regress", "--n-boot", "200", "--baseline", str(baseline),
                     str(mixes / "gap")]) == 3
    out = capsys.readouterr().out
    assert ("undecided: oncology_rct / mockllm/reader: partial run: 40 of 60 samples (samples "
            "21-40 not run: shards --limit 1-20, --limit 41-60); 20 sample(s) of the baseline "
            "run are not in it: not compared (give every shard's log, or finish the run)") in out
    # diff names it too
    from med_evals.diff import diff_runs, format_text

    [whole_log] = _logs(mixes / "whole")
    text = format_text(diff_runs(whole_log, str(mixes / "gap"), n_boot=10))
    assert "warning: oncology_rct / mockllm/reader (" in text
    assert "is a partial run: 40 of 60" in text


@pytest.mark.slow
def test_two_setups_are_never_one_run(mixes, tmp_path):
    """Shards at two temperatures are two (partial) runs in the report and the baseline alike,
    and every generation setting tells runs apart, in the report's labels and the gate."""
    temps, _ = load_runs([mixes / "temps"])
    assert len(temps) == 2 and all(r.partial for r in temps)
    result = build_report([mixes / "temps"], tmp_path / "r", n_boot=10)
    assert {r.label for r in result.headline} == {
        "mockllm/reader, --temperature=0.0 (partial)",
        "mockllm/reader, --temperature=0.5 (partial)"}
    assert len(make_baseline([mixes / "temps"])["runs"]) == 2
    # each setting: its own row in the report, "setup changed" naming it at the gate
    base = make_baseline([mixes / "whole"])
    expected = {
        "top_p": ("--top-p=0.5", "generation.top_p null -> 0.5"),
        "seed": ("--seed=7", "generation.seed null -> 7"),
        "system": ("--system-message=Answer tersely.",
                   "generation.system_message null -> Answer tersely."),
        "epochs": ("--epochs=2", "eval.epochs 1 -> 2"),
    }
    for name, (label, change) in expected.items():
        result = build_report([mixes / "whole", mixes / name], tmp_path / name, n_boot=10)
        labels = {r.label for r in result.headline}
        assert len(labels) == 2 and any(label in x for x in labels), (name, labels)
        rows, _ = regress(base, [mixes / name], n_boot=N_BOOT)
        assert [r.verdict for r in rows] == ["setup changed"], name
        assert change in rows[0].detail, (name, rows[0].detail)


def _logs(folder):
    from med_evals.runs import expand_log_paths

    return expand_log_paths([folder])
