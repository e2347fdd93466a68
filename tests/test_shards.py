"""One evaluation split into sample ranges over several processes (Inspect's ``--limit a-b``,
one process each, into one log folder: docs/performance.md) reads back as one run: the report,
the baseline and the gate give the numbers of the same evaluation run whole. And the
recommended run settings (``--no-log-realtime --no-score-display``) change no logged number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inspect_ai.model import get_model

from med_evals.commands.regress import decide, make_baseline, regress
from med_evals.commands.report import build_report
from med_evals.logs.runs import load_runs
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import replying
from .oncology_support import FIXTURE_CSV, oncology_module
from .support import N_BOOT
from .support.evals import inspect_eval


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
                     log_realtime=False, score_display=False)  # bench_peers' RECOMMENDED
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

    from med_evals.logs.pairs import viewer_url

    held = {str(sm.id): path for path in sharded.provenance["shards"]
            for sm in read_eval_log(path).samples or []}
    for sid in sharded.values:
        url = viewer_url(sharded, sid, 1, str(runs / "sharded"))
        assert url is not None and Path(held[sid]).name in url
    # its tokens are every shard's (the report's and the baseline's usage figures)
    from med_evals.logs.usage import run_usage, total_usage

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
    from med_evals.logs.runs import Run, merge_shards

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
    from med_evals.commands.cli import main as cli_main

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
    from med_evals.commands.diff import diff_runs, format_text

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
    from med_evals.logs.runs import expand_log_paths

    return expand_log_paths([folder])


# --- shards by task parameter (-T shard=i/N: med_evals.study.shards) ------------------------------


def _crc_reply(labels):
    """A reply naming one of ``labels``, chosen by the prompt's text (the same in every run)."""
    import zlib

    return lambda text: labels[zlib.crc32(text.encode()) % len(labels)]


def _whole_and_shards(make, n: int, model, tmp: Path, **eval_kw) -> tuple[Path, Path]:
    """``make()`` run whole into ``tmp/whole``, and ``make(shard=i/n)`` for each shard into
    ``tmp/sharded`` (one eval call, one log each)."""
    [whole] = inspect_eval(make(), model=model, display="none", log_dir=str(tmp / "whole"),
                           **eval_kw)
    shards = inspect_eval([make(shard=f"{i}/{n}") for i in range(1, n + 1)], model=model,
                          display="none", log_dir=str(tmp / "sharded"), **eval_kw)
    assert whole.status == "success" and [s.status for s in shards] == ["success"] * n
    return tmp / "whole", tmp / "sharded"


def _read_back_as_the_whole_run(whole_dir: Path, sharded_dir: Path, n: int):
    """The shards' logs read back as one whole run whose numbers are the unsharded run's."""
    from inspect_ai.log import read_eval_log

    [whole], _ = load_runs([whole_dir])
    [sharded], _ = load_runs([sharded_dir])
    assert sharded.partial is None and whole.partial is None
    assert len(sharded.provenance["shards"]) == n
    assert sharded.values == whole.values
    assert sharded.headline_values() == whole.headline_values()
    for cond, values in whole.by_condition().items():
        assert sharded.headline_values(sharded.by_condition()[cond]) == whole.headline_values(
            values)
    assert sharded.metrics and json.dumps(sharded.metrics, sort_keys=True) == json.dumps(
        {k: v for k, v in whole.metrics.items() if k in sharded.metrics}, sort_keys=True)
    assert sharded.task_args == whole.task_args  # the merged run names no shard
    assert sharded.setup == whole.setup
    # each shard's log says which shard it is and how big the whole partition is
    records = [read_eval_log(p, header_only=True).eval.metadata["shard"]
               for p in sharded.provenance["shards"]]
    assert [r["shard"] for r in records] == [f"{i}/{n}" for i in range(1, n + 1)]
    assert {r["partition_samples"] for r in records} == {len(whole.values)}
    assert sum(r["samples"] for r in records) == len(whole.values)
    return whole, sharded


@pytest.fixture(scope="module")
def by_param(tmp_path_factory):
    """The oncology study (30 trials, two conditions) run whole and as 4 shards by parameter;
    then shard 2 once more, shards 3 and 4 at another temperature, into folders of their own."""
    with oncology_module(tmp_path_factory, "by-param", copies=5) as (tmp, _):
        model = get_model("mockllm/reader", custom_outputs=replying(_reader))

        def make(**kw):
            return oncology_rct(condition="title_abstract,counterfactual", **kw)

        _whole_and_shards(make, 4, model, tmp)
        inspect_eval(make(shard="2/4"), model=model, display="none", log_dir=str(tmp / "again"))
        inspect_eval([make(shard="3/4"), make(shard="4/4")], model=model, display="none",
                     log_dir=str(tmp / "warm"), temperature=0.5)
    return tmp


def _shard_logs(folder: Path) -> dict[str, Path]:
    from inspect_ai.log import read_eval_log

    return {read_eval_log(str(p), header_only=True).eval.task_args["shard"]: p
            for p in sorted(folder.glob("*.eval"))}


def _folder(tmp: Path, name: str, logs) -> Path:
    import shutil

    out = tmp / name
    out.mkdir()
    for log in logs:
        shutil.copy(log, out / log.name)
    return out


@pytest.mark.slow
def test_oncology_shards_by_parameter_read_back_as_the_whole_run(by_param, tmp_path):
    """Every condition of a trial is in one shard (the flip rates pair them), the shards are
    the trials round-robin, and report, baseline and gate see the whole run."""
    from inspect_ai.log import read_eval_log

    whole, sharded = _read_back_as_the_whole_run(by_param / "whole", by_param / "sharded", 4)
    assert len(whole.values) == 60
    trials = {}
    for shard, path in _shard_logs(by_param / "sharded").items():
        samples = read_eval_log(str(path)).samples or []
        trials[shard] = {s.metadata["trial"] for s in samples}
        per_trial = {t: {s.metadata["condition"] for s in samples if s.metadata["trial"] == t}
                     for t in trials[shard]}
        assert all(c == {"title_abstract", "counterfactual"} for c in per_trial.values())
    order = sorted(set().union(*trials.values()))
    assert trials == {f"{i}/4": set(order[i - 1::4]) for i in range(1, 5)}
    # the flip rate pairs each trial's two conditions: merged, it is the whole run's
    assert sharded.metrics["title_abstract~counterfactual"] == whole.metrics[
        "title_abstract~counterfactual"]
    a = build_report([by_param / "whole"], tmp_path / "a", n_boot=10)
    b = build_report([by_param / "sharded"], tmp_path / "b", n_boot=10)
    assert [(r.label, r.condition, r.n, r.values) for r in a.headline] == [
        (r.label, r.condition, r.n, r.values) for r in b.headline]
    assert not b.warnings
    base = make_baseline([by_param / "whole"])
    assert make_baseline([by_param / "sharded"])["runs"][0]["samples"] == base["runs"][0][
        "samples"]
    rows, _ = regress(base, [by_param / "sharded"], n_boot=N_BOOT)
    assert decide(rows).code == 0 and all(r.old == r.new for r in rows if r.old == r.old)


@pytest.mark.slow
def test_missing_shards_are_named_everywhere(by_param, tmp_path, capsys):
    from med_evals.commands.cli import main as cli_main
    from med_evals.commands.diff import diff_runs, format_text

    logs = _shard_logs(by_param / "sharded")
    gap = _folder(tmp_path, "gap", [logs["1/4"], logs["3/4"]])
    [run], _ = load_runs([gap])
    assert run.partial == "30 of 60 samples (shards 2/4 and 4/4 missing)"
    [single], _ = load_runs([logs["2/4"]])  # one shard alone: the others named
    assert single.partial == "16 of 60 samples (shards 1/4, 3/4 and 4/4 missing)"
    result = build_report([gap], tmp_path / "r", n_boot=10)
    assert {r.label for r in result.headline} == {"mockllm/reader (partial)"}
    [warning] = [w for w in result.warnings if "partial run" in w]
    assert warning.endswith(") is a partial run: 30 of 60 samples (shards 2/4 and 4/4 "
                            "missing); its row is marked (partial)")
    baseline = tmp_path / "b.json"
    assert cli_main(["baseline", str(by_param / "whole"), "-o", str(baseline)]) == 0
    capsys.readouterr()
    assert cli_main(["regress", "--n-boot", "200", "--baseline", str(baseline), str(gap)]) == 3
    assert ("undecided: oncology_rct / mockllm/reader: partial run: 30 of 60 samples (shards "
            "2/4 and 4/4 missing); 30 sample(s) of the baseline run are not in it: not "
            "compared (give every shard's log, or finish the run)") in capsys.readouterr().out
    [whole_log] = _logs(by_param / "whole")
    text = format_text(diff_runs(whole_log, str(gap), n_boot=10))
    assert "is a partial run: 30 of 60 samples (shards 2/4 and 4/4 missing)" in text


@pytest.mark.slow
def test_a_shard_given_twice_merges_nothing(by_param, tmp_path, capsys):
    from med_evals.commands.cli import main as cli_main

    logs = _shard_logs(by_param / "sharded")
    [again] = _shard_logs(by_param / "again").values()
    twice = _folder(tmp_path, "twice", [*logs.values(), again])
    runs, _ = load_runs([twice])
    assert len(runs) == 5 and all(r.partial for r in runs)
    names = ", ".join(sorted([logs["2/4"].name, again.name]))
    for r in runs:
        assert r.partial.endswith(f"; not merged: shard 2/4 has 2 logs ({names}); keep one log "
                                  "of each shard"), r.partial
    one = next(r for r in runs if r.task_args["shard"] == "1/4")
    assert one.partial.startswith("16 of 60 samples (shards 2/4, 3/4 and 4/4 missing)")
    result = build_report([twice], tmp_path / "r", n_boot=10)
    assert {r.label for r in result.headline} == {
        f"mockllm/reader, shard={i}/4 (partial)" for i in range(1, 5)}
    # the baseline refuses the two logs of one shard; the gate cannot decide
    assert cli_main(["baseline", str(twice), "-o", str(tmp_path / "b.json")]) == 2
    assert "two runs of oncology_rct / mockllm/reader with the same task arguments and setup" in (
        capsys.readouterr().err)
    base = make_baseline([by_param / "whole"])
    rows, _ = regress(base, [twice], n_boot=N_BOOT)
    assert decide(rows).code == 3


@pytest.mark.slow
def test_a_killed_shard_leaves_a_partial_run(by_param, tmp_path):
    """A shard killed mid-way (its log ``started`` with half its samples, as a kill leaves it):
    its run is partial, the shard named missing and its log as not finished; the gate cannot
    decide."""
    from inspect_ai.log import read_eval_log, write_eval_log

    logs = _shard_logs(by_param / "sharded")
    folder = _folder(tmp_path, "killed", logs.values())
    killed = folder / logs["3/4"].name
    log = read_eval_log(str(killed))
    log.samples = (log.samples or [])[:7]
    log.status, log.results, log.reductions = "started", None, None
    write_eval_log(log, str(killed))
    [run], skipped = load_runs([folder])
    assert run.partial == "46 of 60 samples (shard 3/4 missing)"
    assert skipped == [f"{killed}: run did not complete (status started) and no finished log "
                       "of this eval was given"]
    result = build_report([folder], tmp_path / "r", n_boot=10)
    assert {r.label for r in result.headline} == {"mockllm/reader (partial)"}
    rows, _ = regress(make_baseline([by_param / "whole"]), [folder], n_boot=N_BOOT)
    assert decide(rows).code == 3


@pytest.mark.slow
def test_shards_of_two_setups_are_two_runs(by_param, tmp_path):
    logs = _shard_logs(by_param / "sharded")
    warm = _shard_logs(by_param / "warm")
    mixed = _folder(tmp_path, "mixed", [logs["1/4"], logs["2/4"], warm["3/4"], warm["4/4"]])
    runs, _ = load_runs([mixed])
    assert sorted(r.partial for r in runs) == [
        "28 of 60 samples (shards 1/4 and 2/4 missing)",
        "32 of 60 samples (shards 3/4 and 4/4 missing)"]
    result = build_report([mixed], tmp_path / "r", n_boot=10)
    assert {r.label for r in result.headline} == {
        "mockllm/reader, --temperature=0.0 (partial)",
        "mockllm/reader, --temperature=0.5 (partial)"}
    rows, _ = regress(make_baseline([by_param / "whole"]), [mixed], n_boot=N_BOOT)
    assert decide(rows).code == 3


def test_the_partition_is_round_robin_by_item():
    from med_evals.study.params import Shard
    from med_evals.study.shards import shard_items

    items = [("a", 1), ("a", 2), ("b", 1), ("c", 1), ("b", 2), ("d", 1), ("e", 1)]
    key = lambda it: it[0]  # noqa: E731
    parts = [shard_items(items, Shard(i, 2), key) for i in (1, 2)]
    assert parts == [[("a", 1), ("a", 2), ("c", 1), ("e", 1)],
                     [("b", 1), ("b", 2), ("d", 1)]]
    assert shard_items(items, Shard(1, 1), key) == items


def test_more_shards_than_items_is_one_line():
    from med_evals.study.params import ParamError

    with pytest.raises(ParamError) as err:
        oncology_rct(trials_file=str(FIXTURE_CSV), shard="7/8")
    assert str(err.value) == ("oncology_rct: -T shard=7/8: the run has 6 trial(s) after its "
                              "other selections, so at most 6 shard(s); shard 7 would be empty")


@pytest.mark.slow
def test_medevidence_shards_keep_a_questions_conditions(tmp_path, monkeypatch):
    from med_evals.tasks.medevidence import medevidence

    from .medevidence_support import install_medevidence

    install_medevidence(tmp_path / "data", monkeypatch)
    reply = _crc_reply(["**Answer**: Higher", "**Answer**: Lower", "**Answer**: No Difference",
                        "I cannot tell."])
    model = get_model("mockllm/crc", custom_outputs=replying(reply))
    whole, sharded = _read_back_as_the_whole_run(*_whole_and_shards(
        lambda **kw: medevidence(condition="evidence,closed_book", **kw), 2, model, tmp_path),
        2)
    assert len(whole.values) == 10


@pytest.mark.slow
def test_medreqal_shards_read_back_as_the_whole_run(tmp_path):
    import warnings

    from med_evals.tasks.medreqal import medreqal

    from .support.healthfc_claims import verdict_reply

    model = get_model("mockllm/crc", custom_outputs=replying(verdict_reply))
    fixture = Path(__file__).parents[1] / "datasets" / "fixtures" / "medreqal_fixture.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's counts are not the paper's
        whole, _ = _read_back_as_the_whole_run(*_whole_and_shards(
            lambda **kw: medreqal(data_file=str(fixture), bertscore=False, **kw), 3, model,
            tmp_path), 3)
    assert len(whole.values) == 12 and "rouge_l" in str(whole.values)


@pytest.mark.slow
def test_healthfc_shards_read_back_as_the_whole_run(tmp_path):
    from med_evals.tasks.healthfc import healthfc

    from .support.healthfc_claims import healthfc_csv, verdict_reply

    claims = healthfc_csv(tmp_path / "claims.csv", n=30)
    model = get_model("mockllm/crc", custom_outputs=replying(verdict_reply))
    with pytest.warns(UserWarning, match="30 rows, not 750"):
        whole, _ = _read_back_as_the_whole_run(*_whole_and_shards(
            lambda **kw: healthfc(data_file=str(claims), bertscore=False, **kw), 4, model,
            tmp_path), 4)
    assert len(whole.values) == 30


@pytest.mark.slow
def test_a_plain_study_of_the_builder_takes_shards(tmp_path):
    """A plain study built with the one task builder (the toy study) takes -T shard=i/N by
    its spec's item, and its shards read back as the whole run."""
    import sys

    from med_evals.study.spec import STUDIES, TASKS, register

    mp = pytest.MonkeyPatch()
    here = Path(__file__).parent / "studies"
    mp.setenv("MED_EVALS_MANIFEST_DIR", str(here / "manifests"))
    mp.setenv("MED_EVALS_DATA_DIR", str(here / "data"))
    name = f"{__package__}.studies.toy_yesno"
    imported = name in sys.modules  # then its study is registered only if still in STUDIES
    try:
        from .studies import toy_yesno

        if "toy_yesno" not in TASKS:
            register(toy_yesno.SPEC)
        model = get_model("mockllm/crc", custom_outputs=replying(_crc_reply(
            ["yes", "No.", "maybe", "I cannot say"])))
        whole, _ = _read_back_as_the_whole_run(*_whole_and_shards(
            toy_yesno.toy_yesno, 3, model, tmp_path), 3)
        assert len(whole.values) == 10
    finally:  # as before: a module imported here is imported afresh (and registered) later
        STUDIES.pop("toy_yesno", None)
        TASKS.pop("toy_yesno", None)
        if not imported:
            sys.modules.pop(name, None)
            parent = sys.modules.get(name.rsplit(".", 1)[0])
            if parent is not None and hasattr(parent, "toy_yesno"):
                delattr(parent, "toy_yesno")
        mp.undo()


# --- Inspect's shard layout (<name>.shards/<k>/ and the merged <name>.eval) ---------------------


def _layout(tmp: Path, logs: dict[str, Path], name: str = "oncology_rct-rKEY") -> Path:
    """The shard logs placed as ``med-evals run`` places them: ``<name>.shards/<k>/``."""
    import shutil

    for shard, log in logs.items():
        folder = tmp / f"{name}.shards" / shard.split("/")[0]
        folder.mkdir(parents=True)
        shutil.copy(log, folder / log.name)
    return tmp / f"{name}.shards"


def _viewer_listing(folder: Path) -> list[str]:
    """What ``inspect view`` lists of a folder: Inspect's listing with the shard logs its
    finished merged log covers left out (Inspect's ``without_merged_shards``)."""
    from inspect_ai.log import list_eval_logs

    from med_evals.inspect_internals.compat import without_merged_shards

    return sorted(Path(i.name.removeprefix("file://")).relative_to(folder).as_posix()
                  for i in without_merged_shards(list_eval_logs(str(folder))))


@pytest.mark.slow
def test_the_merged_log_of_a_shard_set(by_param, tmp_path):
    """The 4 shards in Inspect's layout and the merged log written beside them: the viewer
    lists one run; report, baseline and gate read the numbers of the flat layout; the merged
    log read alone is that run too, its metrics Inspect's recomputed over every sample."""
    from inspect_ai.log import read_eval_log

    from med_evals.commands.merge_shards import merge_shard_set
    from med_evals.outputs.exit_codes import CommandError

    shards = _layout(tmp_path / "logs", _shard_logs(by_param / "sharded"))
    assert len(_viewer_listing(tmp_path / "logs")) == 4  # no merged log yet: every shard shown
    with pytest.raises(CommandError, match="shard folder 5: no log"):
        merge_shard_set(str(shards), count=5)  # a shard of the run has no folder
    merged = merge_shard_set(str(shards), count=4)
    assert merged == str(tmp_path / "logs" / "oncology_rct-rKEY.eval")
    assert _viewer_listing(tmp_path / "logs") == ["oncology_rct-rKEY.eval"]
    log = read_eval_log(merged)
    [whole_log] = [read_eval_log(str(p)) for p in (by_param / "whole").glob("*.eval")]
    assert log.status == "success" and "shard" not in log.eval.task_args
    assert "shard" not in (log.eval.metadata or {})
    assert sorted(map(str, log.eval.dataset.sample_ids or [])) == sorted(
        map(str, whole_log.eval.dataset.sample_ids or []))
    assert log.eval.dataset.samples == 60 and len(log.samples or []) == 60
    ledger = log.eval.shards.ledger if log.eval.shards else []
    assert [(e.shard, e.status, e.samples) for e in ledger] == [
        (str(i), "success", n) for i, n in enumerate((16, 16, 14, 14), 1)]  # 30 trials
    logs = _shard_logs(by_param / "sharded")
    assert [e.log for e in ledger] == [logs[f"{i}/4"].name for i in range(1, 5)]
    # Inspect's recomputed metrics and reductions are the whole run's
    assert log.results and whole_log.results
    assert [(s.name, {k: m.value for k, m in s.metrics.items()}) for s in log.results.scores] == [
        (s.name, {k: m.value for k, m in s.metrics.items()}) for s in whole_log.results.scores]
    assert log.stats.model_usage == whole_log.stats.model_usage
    # readers: the shards, merged as in the flat layout; the merged log not read twice
    [flat], _ = load_runs([by_param / "sharded"])
    [run], skipped = load_runs([tmp_path / "logs"])
    assert run.values == flat.values and run.metrics == flat.metrics
    assert len(run.logs()) == 4 and run.partial is None
    assert [s.split(": ")[0] for s in skipped] == [merged]
    a = build_report([by_param / "sharded"], tmp_path / "a", n_boot=10)
    b = build_report([tmp_path / "logs"], tmp_path / "b", n_boot=10)
    assert [(r.label, r.condition, r.n, r.values) for r in a.headline] == [
        (r.label, r.condition, r.n, r.values) for r in b.headline]
    base = make_baseline([by_param / "sharded"])
    assert make_baseline([tmp_path / "logs"])["runs"][0]["samples"] == base["runs"][0]["samples"]
    rows, _ = regress(base, [tmp_path / "logs"], n_boot=N_BOOT)
    assert decide(rows).code == 0 and all(r.old == r.new for r in rows if r.old == r.old)
    # the merged log alone (copied elsewhere) is the whole run
    [alone], _ = load_runs([merged])
    assert alone.values == flat.values and alone.partial is None
    assert alone.headline_values() == flat.headline_values()


@pytest.mark.slow
def test_a_killed_shard_leaves_no_merged_log(by_param, tmp_path):
    from inspect_ai.log import read_eval_log, write_eval_log

    from med_evals.commands.merge_shards import merge_shard_set
    from med_evals.outputs.exit_codes import CommandError

    logs = _shard_logs(by_param / "sharded")
    shards = _layout(tmp_path / "logs", logs)
    [killed] = (shards / "3").glob("*.eval")
    log = read_eval_log(str(killed))
    log.status, log.samples = "started", (log.samples or [])[:5]
    write_eval_log(log, str(killed))
    with pytest.raises(CommandError, match=r"not merged: shard folder 3: .*status started"):
        merge_shard_set(str(shards))
    from med_evals.commands.cli import main as cli_main

    assert cli_main(["merge-shards", str(shards)]) == 1  # the command: exit 1, nothing written
    assert not (tmp_path / "logs" / "oncology_rct-rKEY.eval").exists()
    assert len(_viewer_listing(tmp_path / "logs")) == 4
