"""The probe of a served model's server before a run: ``med-evals compare``, and every task
(``inspect eval`` on an unreachable model printed its header, then nothing for minutes)."""

import os
import socket
import subprocess
import time
from types import SimpleNamespace

import pytest
from inspect_ai.log import list_eval_logs
from inspect_ai.model import get_model

from med_evals.inspect_internals.compat import InputError
from med_evals.models.reach import probe_skipped, served_url, unreachable
from med_evals.tasks.counterfactual import counterfactual_judges
from med_evals.tasks.oncology_rct import oncology_rct

from ..oncology_support import install_fixture
from ..support import INSPECT, free_port
from ..support.evals import inspect_eval
from ..support.fake_openai import FakeOpenAIServer

#: the tail of the line a run on an unreachable server stops with
NOTHING_RUN = "nothing was run (MED_EVALS_SKIP_PROBE=1 runs without this check)"


def test_nothing_listening_is_a_refused_connection():
    assert unreachable(f"http://127.0.0.1:{free_port()}/v1") == "connection refused"


def test_any_http_answer_is_a_server_that_is_there():
    with FakeOpenAIServer() as server:  # HEAD: 501 (the fake serves GET and POST), an answer
        assert unreachable(server.base_url) is None
        assert unreachable(f"{server.base_url}/models") is None
        assert server.requests == []  # the probe is no request the fake records


def test_a_server_that_takes_the_connection_and_never_answers():
    with socket.socket() as listener:  # the kernel completes the connection; nobody reads
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert unreachable(f"http://127.0.0.1:{port}/v1", timeout=0.5) == "no answer within 0.5 s"


def test_an_unknown_host_is_named():
    # .invalid never resolves (RFC 2606)
    assert unreachable("http://no-such-host.invalid:8000/v1") == (
        "unknown host no-such-host.invalid"
    )


def test_only_an_http_base_url_is_probed():
    assert served_url(SimpleNamespace(base_url="http://gpu-01:8000/v1")) == "http://gpu-01:8000/v1"
    assert served_url(SimpleNamespace(base_url=None)) is None  # in process, or the SDK's default
    assert served_url(SimpleNamespace()) is None
    assert served_url(SimpleNamespace(base_url="unix:///run/x.sock")) is None


URL = "http://10.0.0.5:8000/v1"


@pytest.mark.parametrize(
    ("model", "args", "env", "url"),
    [
        ("openai-api/local/x", {}, {"LOCAL_BASE_URL": URL, "LOCAL_API_KEY": "k"}, URL),
        ("openai-api/local/x", {"base_url": URL, "api_key": "k"}, {}, URL),
        ("vllm/some-model-env", {}, {"VLLM_BASE_URL": URL}, URL),
        ("vllm/some-model-arg", {"base_url": URL}, {}, URL),
        ("vllm/some-model-port", {"port": 8001}, {}, "http://localhost:8001/v1"),
        ("vllm/some-model-none", {}, {}, None),  # Inspect starts the server: nothing to probe
        ("openai/gpt-4o", {}, {"OPENAI_BASE_URL": URL, "OPENAI_API_KEY": "k"}, URL),
        ("openai/gpt-4o", {}, {"OPENAI_API_KEY": "k"}, None),  # the SDK's default URL
        ("anthropic/claude-opus-4-5", {}, {"ANTHROPIC_BASE_URL": URL, "ANTHROPIC_API_KEY": "k"},
         URL),
        ("anthropic/claude-opus-4-5", {"base_url": URL}, {"ANTHROPIC_API_KEY": "k"}, URL),
        ("anthropic/claude-opus-4-5", {}, {"ANTHROPIC_API_KEY": "k"}, None),
        ("google/gemini-2.5-pro", {}, {"GOOGLE_BASE_URL": URL, "GOOGLE_API_KEY": "k"}, URL),
        ("google/gemini-2.5-pro", {}, {"GOOGLE_API_KEY": "k"}, None),
        ("mockllm/model", {}, {}, None),
    ],
)
def test_the_url_probed_is_the_one_the_user_gave(model, args, env, url, monkeypatch):
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_BASE_URL", "VLLM_BASE_URL",
                "INSPECT_EVAL_MODEL_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    provider = model.split("/")[0]
    if provider in ("openai", "openai-api", "vllm"):
        pytest.importorskip("openai")
    if provider in ("anthropic", "google"):
        pytest.importorskip({"anthropic": "anthropic", "google": "google.genai"}[provider])
    api = get_model(model, memoize=False, **args).api
    assert served_url(api) == url
    assert served_url(api, provider) == url


def test_the_switch_is_one_or_zero(monkeypatch):
    monkeypatch.delenv("MED_EVALS_SKIP_PROBE", raising=False)
    assert probe_skipped() is False
    for value, skipped in (("1", True), ("true", True), ("0", False), ("", False)):
        monkeypatch.setenv("MED_EVALS_SKIP_PROBE", value)
        assert probe_skipped() is skipped
    monkeypatch.setenv("MED_EVALS_SKIP_PROBE", "maybe")
    with pytest.raises(InputError) as err:
        probe_skipped()
    assert str(err.value) == (
        "MED_EVALS_SKIP_PROBE=maybe: give 1 to run without probing the model's server first, "
        "or 0 (or leave it unset) to probe it"
    )


# --- every task, before its run ---------------------------------------------------------------


@pytest.fixture
def fixture_data(tmp_path, monkeypatch):
    pytest.importorskip("openai")
    install_fixture(tmp_path, monkeypatch)
    monkeypatch.delenv("MED_EVALS_SKIP_PROBE", raising=False)
    monkeypatch.setenv("LOCAL_API_KEY", "local-key")


def _closed() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there


def test_a_task_on_an_unreachable_model_stops_before_its_run(fixture_data, tmp_path):
    """The task is built inside the run (``inspect eval``, or ``eval()`` given the task
    function), where it sees the model it will call."""
    url = _closed()
    model = get_model("openai-api/local/x", base_url=url, memoize=False)
    start = time.monotonic()
    with pytest.raises(InputError) as err:
        inspect_eval(oncology_rct, task_args={"condition": "title_abstract"}, model=model,
                     display="none", log_dir=str(tmp_path / "logs"))
    assert time.monotonic() - start < 10
    assert str(err.value) == (
        f"oncology_rct: --model openai-api/local/x: cannot reach {url} (connection refused); "
        + NOTHING_RUN
    )
    assert not list_eval_logs(str(tmp_path / "logs"))


def test_a_grader_on_an_unreachable_server_stops_the_run(fixture_data, tmp_path):
    """counterfactual_judges never calls the model under evaluation: its graders are probed,
    each server once, and the first that does not answer is named."""
    url = _closed()
    with FakeOpenAIServer() as up, pytest.raises(InputError) as err:
        inspect_eval(
            counterfactual_judges, task_args={"judge": "rate"},
            model=get_model("openai-api/local/never-called", base_url=_closed(), memoize=False),
            model_roles={
                "grader": get_model("openai-api/local/g1", base_url=up.base_url, memoize=False),
                "grader_2": get_model("openai-api/local/g2", base_url=url, memoize=False),
            },
            display="none", log_dir=str(tmp_path / "logs"),
        )
    assert str(err.value) == (
        f"counterfactual_judges: --model-role grader_2=openai-api/local/g2: cannot reach {url} "
        f"(connection refused); {NOTHING_RUN}"
    )


def test_a_run_on_a_server_that_answers_sends_it_only_the_models_requests(fixture_data, tmp_path):
    with FakeOpenAIServer() as server:
        [log] = inspect_eval(
            oncology_rct, task_args={"condition": "title_abstract"},
            model=get_model("openai-api/local/x", base_url=server.base_url, memoize=False),
            display="none", log_dir=str(tmp_path / "logs"),
        )
    assert log.status == "success"
    assert [p for p, _ in server.requests] == ["/v1/chat/completions"] * len(log.samples)


@pytest.mark.slow
def test_the_probe_is_skipped_on_request(fixture_data, tmp_path, monkeypatch):
    """With the probe off the run goes to the server: each request fails (a connection error,
    scored ERROR as the study scored a failed call), as before the probe."""
    monkeypatch.setenv("MED_EVALS_SKIP_PROBE", "1")
    model = get_model("openai-api/local/x", base_url=_closed(), max_retries=0, memoize=False)
    [log] = inspect_eval(oncology_rct, task_args={"condition": "title_abstract"}, model=model,
                         display="none", log_dir=str(tmp_path / "logs"), max_retries=0,
                         timeout=5, limit=1)
    [sample] = log.samples
    assert sample.scores["trial_outcome"].explanation == (
        "provider error: APIConnectionError: Connection error."
    )


def _inspect_eval(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    proc = subprocess.run(
        [INSPECT, "eval", *args, "--log-dir", "logs"], cwd=tmp_path, capture_output=True,
        text=True, timeout=150,
        env={**os.environ, "COLUMNS": "300", "PYTHONWARNINGS": "ignore::UserWarning"},
    )
    return proc, time.monotonic() - start


@pytest.mark.slow
def test_inspect_eval_on_an_unreachable_model_is_one_line_within_seconds(fixture_data, tmp_path,
                                                                         monkeypatch):
    """It printed its header, then nothing for 300 s and more (Inspect retries a refused
    connection without end); now one line, exit 1, no log. Most of the time is Inspect's start
    (15-20 s on the shared 2-core machine, as for any run); the probe of a refused port takes
    milliseconds."""
    url = _closed()
    monkeypatch.setenv("LOCAL_BASE_URL", url)
    proc, took = _inspect_eval(tmp_path, "med_evals/oncology_rct", "--model",
                               "openai-api/local/x")
    assert proc.returncode == 1, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        f"med_evals: oncology_rct: --model openai-api/local/x: cannot reach {url} (connection "
        f"refused); {NOTHING_RUN}"
    ]
    assert not proc.stdout.strip()  # no header: the task is refused before the run starts
    assert took < 90, took
    assert not list_eval_logs(str(tmp_path / "logs"))


@pytest.mark.slow
def test_inspect_eval_with_an_unreachable_grader_is_one_line(fixture_data, tmp_path,
                                                            monkeypatch):
    url = _closed()
    monkeypatch.setenv("LOCAL_BASE_URL", url)
    proc, took = _inspect_eval(tmp_path, "med_evals/counterfactual_judges", "-T", "judge=rate",
                               "--model", "mockllm/model", "--model-role",
                               "grader=openai-api/local/g")
    assert proc.returncode == 1, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        f"med_evals: counterfactual_judges: --model-role grader=openai-api/local/g: cannot reach "
        f"{url} (connection refused); {NOTHING_RUN}"
    ]
    assert took < 90, took
