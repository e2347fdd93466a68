"""The vllm/, openai-api/ and anthropic/ provider paths, against a local fake server only."""

import pytest

from med_evals.tasks.oncology_rct import oncology_rct

from ..oncology_support import install_fixture
from ..support.evals import inspect_eval
from ..support.fake_openai import FakeOpenAIServer

SYSTEM_START = "You will be provided with information about a randomized controlled oncology"


def _reply(user_text: str) -> str:
    """POSITIVE for even-length inputs, NEGATIVE otherwise: known per sample."""
    return "POSITIVE" if len(user_text) % 2 == 0 else "NEGATIVE"


@pytest.fixture
def fixture_data(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)


def _run(model, tmp_path, **kw):
    task = oncology_rct(condition="title_abstract,doi_only")
    (log,) = inspect_eval(
        task, model=model, log_dir=str(tmp_path / "logs"), display="none", max_retries=0, **kw
    )
    assert log.status == "success", log.error
    expected = {s.id: _reply(s.input) for s in task.dataset}
    got = {s.id: s.output.completion for s in log.samples}
    assert got == expected
    for s in log.samples:
        v = s.scores["trial_outcome"].value
        assert v["prediction"] == expected[s.id] and v["correct"] == int(expected[s.id] == s.target)
    return log


def _chat_requests(server):
    return [b for p, b in server.requests if p.endswith("/chat/completions")]


@pytest.mark.parametrize("via", ["env", "model_arg"])
def test_vllm_provider_against_a_running_server(fixture_data, tmp_path, monkeypatch, via):
    pytest.importorskip("openai")
    # Inspect keeps one server URL per base model for the process: a fresh name per case
    name = f"Qwen/Qwen2.5-7B-Instruct-{via}"
    with FakeOpenAIServer(_reply, model=name) as server:
        if via == "env":
            monkeypatch.setenv("VLLM_BASE_URL", f"{server.url}/v1")
            kw = {}
        else:
            monkeypatch.delenv("VLLM_BASE_URL", raising=False)
            kw = {"model_base_url": f"{server.url}/v1"}  # --model-base-url
        monkeypatch.setenv("VLLM_API_KEY", "local-key")
        _run(f"vllm/{name}", tmp_path, **kw)
    chats = _chat_requests(server)
    assert len(chats) == 12
    for body in chats:
        assert body["model"] == name
        assert body["temperature"] == 0  # the study's settings, as sent on the wire
        assert body.get("max_tokens", body.get("max_completion_tokens")) == 500
        assert body["messages"][0]["role"] == "system"
        assert body["messages"][0]["content"].startswith(SYSTEM_START)
        assert "seed" not in body


def test_openai_api_provider_against_a_running_server(fixture_data, tmp_path, monkeypatch):
    pytest.importorskip("openai")
    with FakeOpenAIServer(_reply) as server:
        monkeypatch.setenv("LOCAL_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("LOCAL_API_KEY", "local-key")
        _run("openai-api/local/fake-model", tmp_path, temperature=0.5, max_tokens=7)
    chats = _chat_requests(server)
    assert len(chats) == 12
    assert {b["model"] for b in chats} == {"fake-model"}
    assert {b["temperature"] for b in chats} == {0.5}  # Inspect's flags override the defaults
    assert {b.get("max_tokens", b.get("max_completion_tokens")) for b in chats} == {7}


def test_anthropic_provider_against_a_local_server(fixture_data, tmp_path, monkeypatch):
    pytest.importorskip("anthropic")
    with FakeOpenAIServer(_reply) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "local-key")
        _run("anthropic/claude-opus-4-5-20251101", tmp_path)
    bodies = [b for p, b in server.requests if p.endswith("/messages")]
    assert len(bodies) == 12
    for body in bodies:
        assert body["model"] == "claude-opus-4-5-20251101"
        assert body["max_tokens"] == 500
        # Anthropic's API version of anthropic>=2 rejects sampling parameters: Inspect drops
        # temperature (with a warning), so the study's temperature 0 cannot be sent
        assert "temperature" not in body
        system = body["system"] if isinstance(body["system"], str) else body["system"][0]["text"]
        assert system.startswith(SYSTEM_START)


def test_google_provider_against_a_local_server(fixture_data, tmp_path, monkeypatch):
    pytest.importorskip("google.genai")
    with FakeOpenAIServer(_reply) as server:
        monkeypatch.setenv("GOOGLE_BASE_URL", server.url)
        monkeypatch.setenv("GOOGLE_API_KEY", "local-key")
        _run("google/gemini-3-flash-preview", tmp_path)
    bodies = [(p, b) for p, b in server.requests if ":generateContent" in p]
    assert len(bodies) == 12
    for path, body in bodies:
        assert "gemini-3-flash-preview" in path
        config = body.get("generationConfig", {})
        assert config.get("temperature") == 0 and config.get("maxOutputTokens") == 500
        system = "".join(p["text"] for p in body["systemInstruction"]["parts"])
        assert system.startswith(SYSTEM_START)
