"""What med_evals relies on in Inspect's private API, one test per name
(``src/med_evals/inspect_internals/compat.py``): each imports the name through ``compat`` and
checks the behaviour the package uses, so a release of Inspect that moves, renames or changes
one fails here first, naming it.

The frames the exception hook reads (``parse_cli_args``, ``_resolve_role_model``,
``eval_set``) are checked by running Inspect's command line into each
(``tests/test_errors.py``); ``openai_batcher`` and ``local_server`` are pinned in detail by
``tests/test_batch.py`` and ``tests/test_bench_vllm.py``.
"""

from __future__ import annotations

import datetime

import pytest
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig, ModelCost, ModelInfo, get_model, set_model_info
from inspect_ai.scorer import includes
from inspect_ai.solver import Generate, TaskState, generate, solver

from med_evals.inspect_internals import compat
from med_evals.scorers.classification import macro_f1_all, valid_rate
from med_evals.scorers.generation import generation, rouge_l_mean

from ..conftest import mock_output
from ..support.evals import inspect_eval


def run(tsk: Task | object, tmp_path, **kwargs):
    """One eval of ``tsk`` on mockllm (every reply ``yes``, with usage), its log."""
    [log] = inspect_eval(
        tsk, model="mockllm/model", log_dir=str(tmp_path), display="none",
        model_args={"custom_outputs": lambda *a: mock_output("yes")}, **kwargs,
    )
    assert log.status == "success", log.error
    return log


def test_prerequisite_error_is_the_class_inspect_raises():
    """Our ``except PrerequisiteError`` clauses catch Inspect's own (a required role not bound)
    and InputError is one, so Inspect's command line prints it without a traceback."""
    with pytest.raises(compat.PrerequisiteError) as info:
        get_model(role="no_such_role", required=True)
    assert "no_such_role" in str(info.value.message)
    assert isinstance(compat.InputError("bad"), compat.PrerequisiteError)


def test_terminate_sample_error_ends_one_sample_as_an_operator_limit(tmp_path):
    @solver
    def stop_a():
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            if state.sample_id == "a":
                raise compat.TerminateSampleError("stopped by the test")
            return await generate(state)

        return solve

    log = run(Task(dataset=[Sample(input="x", id="a"), Sample(input="y", id="b")],
                   solver=stop_a(), scorer=includes()), tmp_path)
    a, b = sorted(log.samples or [], key=lambda s: str(s.id))
    assert a.error is None and a.limit is not None
    assert (a.limit.type, a.limit.reason) == ("operator", "stopped by the test")
    assert b.limit is None and b.output.completion == "yes"


def test_registry_find_lists_the_providers_and_tasks():
    import med_evals  # noqa: F401 - registers the tasks and providers

    providers = {compat.registry_unqualified_name(compat.registry_info(o))
                 for o in compat.registry_find(lambda i: i.type == "modelapi")}
    assert {"mockllm", "openai", "replay", "embedded"} <= providers
    tasks = {compat.registry_info(o).name for o in compat.registry_find(lambda i: i.type == "task")}
    assert {"med_evals/oncology_rct", "med_evals/medreqal"} <= tasks


def test_registry_params_are_the_arguments_a_metric_was_made_with():
    assert compat.registry_params(macro_f1_all(["A", "B"])) == {"labels": ["A", "B"]}
    assert compat.registry_params(valid_rate()) == {}


def test_registry_unqualified_name_is_the_name_the_log_gives(tmp_path):
    """The study's scorer name in a log (``Study.scorer_name``) and a metric's name in the
    report: a package's registry name without the package."""
    scorer = generation(bertscore=False)
    assert compat.registry_info(scorer).name == "med_evals/generation"
    log = run(Task(dataset=[Sample(input="x", metadata={"reference": "yes"})], scorer=scorer),
              tmp_path)
    [score] = log.results.scores
    assert score.name == compat.registry_unqualified_name(scorer) == "generation"
    assert set(score.metrics) == {"rouge_l_mean", "bertscore_f1_mean"}
    assert score.metrics["rouge_l_mean"].value == 1.0  # "yes" against "yes"


def test_scorer_metrics_are_the_declared_metrics():
    names = [compat.registry_unqualified_name(m) for m in
             compat.scorer_metrics(generation(bertscore=False))]
    assert names == ["rouge_l_mean", "bertscore_f1_mean"]


def test_with_metrics_changes_one_scorers_metrics_in_the_log(tmp_path):
    scorer = compat.with_metrics(generation(bertscore=False), [rouge_l_mean()])
    assert [compat.registry_unqualified_name(m) for m in compat.scorer_metrics(scorer)] == [
        "rouge_l_mean"]
    log = run(Task(dataset=[Sample(input="x", target="yes", metadata={"reference": "no"})],
                   scorer=[scorer, includes()]), tmp_path)
    metrics = {s.name: set(s.metrics) for s in log.results.scores}
    assert metrics == {"generation": {"rouge_l_mean"}, "includes": {"accuracy", "stderr"}}
    # the factory's own declaration is untouched: the next scorer it makes has both
    assert len(compat.scorer_metrics(generation(bertscore=False))) == 2


def test_sample_active_is_the_running_sample(tmp_path):
    @solver
    def record():
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            active = compat.sample_active()
            assert active is not None
            state.metadata["seen"] = [str(active.sample.id), int(active.epoch), active.task]
            return state

        return solve

    assert compat.sample_active() is None
    log = run(Task(name="probe", dataset=[Sample(input="x", id="s1")], solver=record(),
                   epochs=2), tmp_path)
    seen = sorted(s.metadata["seen"][:2] for s in log.samples or [])
    assert seen == [["s1", 1], ["s1", 2]]
    assert {s.metadata["seen"][2] for s in log.samples or []} == {"probe"}


def test_active_generate_config_is_the_runs(tmp_path):
    @solver
    def record():
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            state.metadata["attempt_timeout"] = compat.active_generate_config().attempt_timeout
            return state

        return solve

    assert compat.active_generate_config() == GenerateConfig()
    log = run(Task(dataset=[Sample(input="x")], solver=record()), tmp_path, attempt_timeout=7)
    assert [s.metadata["attempt_timeout"] for s in log.samples or []] == [7]


def test_active_model_is_the_model_under_evaluation_while_the_task_is_built(tmp_path):
    seen = []

    @task
    def probe_task():
        seen.append(str(compat.active_model()))
        return Task(dataset=[Sample(input="x")], solver=generate())

    assert compat.active_model() is None  # outside a run: none, and none is created
    run(probe_task, tmp_path)
    assert seen == ["mockllm/model"]


def test_inspect_command_is_inspects_command_line():
    commands = compat.inspect_command().commands
    assert {"eval", "eval-set", "eval-retry", "score", "view"} <= set(commands)


def test_inspect_eval_command_parses_inspect_evals_flags():
    """``med-evals run`` parses the flags it hands ``inspect eval`` with Inspect's own command:
    a known flag parses, an unknown one is click's usage error."""
    import click

    command = compat.inspect_eval_command()
    ctx = command.make_context("eval", ["med_evals/healthfc", "--max-connections", "4"],
                               resilient_parsing=False)
    assert ctx.params["max_connections"] == 4
    with pytest.raises(click.UsageError):
        command.make_context("eval", ["med_evals/healthfc", "--no-such-flag"])


def test_inspect_main_is_what_python_m_inspect_ai_runs():
    """The shard processes run the function ``python -m inspect_ai`` runs (read from the
    entry module's source, which is not imported here)."""
    import importlib.util
    from pathlib import Path

    main = compat.inspect_main()
    spec = importlib.util.find_spec("inspect_ai.__main__")
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text(encoding="utf-8")
    assert "from ._cli.main import main" in source and "main()" in source
    assert callable(main) and (main.__module__, main.__name__) == ("inspect_ai._cli.main", "main")


def test_parse_cli_config_reads_task_arguments_as_inspect_does():
    """Each ``-T`` value read as YAML: a date is a date (the tasks' date parameters take one)."""
    assert compat.parse_cli_config(["n=2", "name=x", "flag=true", "when=2020-01-02"], None) == {
        "n": 2, "name": "x", "flag": True, "when": datetime.date(2020, 1, 2)}


def test_parse_model_role_cli_args_reads_roles_as_inspect_does():
    assert compat.parse_model_role_cli_args(["grader=mockllm/model"]) == {
        "grader": "mockllm/model"}


def test_openai_batcher_is_inspects_batch_client():
    batcher = compat.openai_batcher()
    assert batcher.__name__ == "OpenAIBatcher" and callable(batcher._parse_jsonl_line)


def test_local_server_builds_the_vllm_serve_command_line():
    server = compat.local_server()
    assert server._server_arg_to_cli_key("tensor_parallel_size") == "tensor-parallel-size"
    assert callable(server.configure_devices)


def test_database_model_info_never_creates_the_provider():
    """Inspect's public ``get_model_info`` creates the provider for a name its database does
    not know (a replay model reads its recording: here a missing file, an error); the direct
    lookup returns None, and a custom entry (``set_model_info``) with its prices."""
    missing = "replay/no-such-recording.jsonl"
    assert compat.database_model_info(missing) is None
    cost = ModelCost(input=1.0, output=2.0, input_cache_write=0.0, input_cache_read=0.0)
    set_model_info("replay/med-evals-compat-test", ModelInfo(cost=cost))
    info = compat.database_model_info("replay/med-evals-compat-test")
    assert info is not None and info.cost == cost


def test_vllm_url_given_reads_the_providers_url_before_it_connects(monkeypatch):
    pytest.importorskip("openai")
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    name = "vllm/Qwen/Qwen2.5-7B-Instruct"
    assert compat.vllm_url_given(get_model(name, memoize=False).api) is False
    given = get_model(name, base_url="http://gpu:8000/v1", memoize=False)
    assert compat.vllm_url_given(given.api) is True
    assert compat.vllm_url_given(object()) is None  # a provider keeping it elsewhere


def test_without_merged_shards_hides_shards_a_newer_finished_merged_log_covers(tmp_path):
    """The viewer's rule: a shard log under ``<name>.shards/<k>/`` is left out of the listing
    when ``<name>.eval`` is listed, finished and newer; a shard newer than it stays."""
    import os

    from inspect_ai.log import EvalLogInfo

    def info(name: str, mtime: float) -> EvalLogInfo:
        return EvalLogInfo(name=str(tmp_path / name), type="eval", size=1, mtime=mtime,
                           task="t", task_id="i", suffix=None)

    listing = [info("x.shards/1/a.eval", 1.0), info("x.shards/2/b.eval", 3.0),
               info("x.eval", 2.0)]
    merged = tmp_path / "x.eval"
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec, write_eval_log

    write_eval_log(EvalLog(status="success", eval=EvalSpec(
        created="2026-01-01T00:00:00+00:00", task="t", dataset=EvalDataset(), model="m",
        config=EvalConfig())), str(merged))
    assert os.path.exists(merged)
    kept = [os.path.relpath(i.name, tmp_path) for i in compat.without_merged_shards(listing)]
    assert kept == ["x.shards/2/b.eval", "x.eval"]
