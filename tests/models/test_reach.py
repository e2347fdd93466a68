"""The probe of a served model's server before a run (``med-evals compare``)."""

import socket
from types import SimpleNamespace

from med_evals.models.reach import served_url, unreachable

from ..support import free_port
from ..support.fake_openai import FakeOpenAIServer


def test_nothing_listening_is_a_refused_connection():
    assert unreachable(f"http://127.0.0.1:{free_port()}/v1") == "connection refused"


def test_any_http_answer_is_a_server_that_is_there():
    with FakeOpenAIServer() as server:  # GET /v1: 404, an answer
        assert unreachable(server.base_url) is None
        assert unreachable(f"{server.base_url}/models") is None  # 200


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
