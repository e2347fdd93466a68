"""Inspect's ``--batch`` (the OpenAI Batch API) against a local fake server: same scores, same
metrics, same judge numbers as direct calls; what a failed request inside a batch does.

Inspect's OpenAI batcher (``inspect_ai/model/_providers/_openai_batch.py``, on top of
``util/file_batcher.py`` and ``util/batch.py``) uploads the requests as JSONL
(``POST /v1/files``), creates a batch (``POST /v1/batches``), polls ``GET /v1/batches/{id}``
every ``tick`` seconds and reads the output and error files (``GET /v1/files/{id}/content``).
``BatchConfig(tick=..., send_delay=...)`` keeps the rounds short here.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx2
import pytest
from inspect_ai.log import EvalLog
from inspect_ai.model import BatchConfig, GenerateConfig, Model, get_model

from med_evals.inspect_internals.compat import openai_batcher
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import FIXTURES
from .oncology_support import install_fixture
from .support.evals import inspect_eval
from .support.fake_openai import FakeOpenAIServer

MEDREQAL_FIXTURE = FIXTURES / "medreqal_fixture.csv"
#: one batch per round: sent when its 12 requests are queued (a partial one after 5 s), polled
#: every 50 ms (Inspect's defaults: 100 requests or 15 s, a 15 s tick)
FAST = BatchConfig(size=12, send_delay=5, tick=0.05)
BATCH_ENDPOINTS = {"/v1/files", "/v1/batches", "/v1/batches/{id}", "/v1/files/{id}/content"}
#: the oncology fixture's trial 1 (0-based): its title_abstract input names it
FAILING_TRIAL = "Gastric Cancer"
CHAT = "/v1/chat/completions"


def oncology_reply(text: str) -> str:
    """POSITIVE for even-length inputs, NEGATIVE otherwise: known per sample."""
    return "POSITIVE" if len(text) % 2 == 0 else "NEGATIVE"


VERDICTS = ("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION")
AGREEMENT = ("agrees", "partly agrees", "contradicts")


def medreqal_reply(text: str) -> str:
    """A verdict for a question, an agreement verdict for the judge's prompt: known per text."""
    if "Conclusion of the review:" in text:
        return json.dumps({"verdict": AGREEMENT[len(text) % 3], "reason": "by length"})
    return f"LABEL: {VERDICTS[len(text) % 3]}. The review's trials point this way."


def fail_trial(text: str) -> int | None:
    return 500 if FAILING_TRIAL in text else None


def _key(value: Any) -> Any:
    """A comparable form (NaN equals NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, dict):
        return {k: _key(v) for k, v in value.items()}
    return value


def sample_scores(log: EvalLog) -> dict[Any, dict[str, Any]]:
    assert log.samples is not None
    return {
        s.id: {name: (_key(sc.value), sc.answer) for name, sc in (s.scores or {}).items()}
        for s in log.samples
    }


def metrics(log: EvalLog) -> dict[tuple[str, str], Any]:
    assert log.results is not None
    return {
        (score.name, name): _key(m.value)
        for score in log.results.scores
        for name, m in score.metrics.items()
    }


@pytest.fixture
def oncology_data(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "local-dummy")


def run_oncology(server: FakeOpenAIServer, tmp_path, model: str, **kw: Any) -> EvalLog:
    (log,) = inspect_eval(
        oncology_rct(condition="title_abstract,doi_only", metrics="full"),
        model=model,
        model_base_url=server.base_url,  # a fresh model instance per server (Inspect memoizes)
        model_args={"max_retries": 0},  # no SDK retries: one attempt, direct or batched
        log_dir=str(tmp_path / "logs"),
        display="none",
        max_retries=0,
        **kw,
    )
    assert log.status == "success", log.error
    return log


@pytest.mark.slow
def test_oncology_scores_and_metrics_equal_under_batch(oncology_data, tmp_path, monkeypatch):
    """The study's OpenAI model (gpt-5: Inspect sends it to the Responses API, ``/v1/responses``
    batches); MedREQAL's test below batches chat completions."""
    model = "openai/gpt-5.2-2025-12-11"
    with FakeOpenAIServer(oncology_reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        direct = run_oncology(server, tmp_path, model)
        assert set(server.paths()) == {"/v1/responses"} and server.counts["batches"] == 0
        mark = len(server.requests)
        batched = run_oncology(server, tmp_path, model, batch=FAST)
        seen = server.paths(mark)
    assert set(seen) == BATCH_ENDPOINTS | {"/v1/responses"}
    # the one direct call: Inspect's probe for reasoning summaries (once per model instance)
    [probe] = [b for p, b in server.requests[mark:] if p.endswith("/responses")]
    assert probe["input"] == "Please say 'hello, world'"
    assert server.counts["batches"] == 1 and len(server.batch_lines) == 12
    assert {line["model"] for line in server.batch_lines} == {"gpt-5.2-2025-12-11"}
    assert sample_scores(batched) == sample_scores(direct)
    assert metrics(batched) == metrics(direct) and len(metrics(direct)) == 78
    assert batched.stats.model_usage == direct.stats.model_usage  # usage read from the batch


def parse_line_as_intended(self: Any, line_data: dict[str, Any]) -> tuple[str, Any]:
    """Inspect's ``_parse_jsonl_line`` with a failed request's line parsed into the error the
    SDK raises for the same HTTP status on a direct call (what Inspect's code means to do)."""
    response = line_data.get("response") or {}
    error = line_data.get("error")
    if error is None and response.get("status_code", 200) == 200:
        return openai_batcher()._parse_jsonl_line(self, line_data)
    status = response.get("status_code") if error is None else error.get("code")
    body = response.get("body") if error is None else {"error": error}
    http = httpx2.Response(
        status if isinstance(status, int) else 500,
        json=body,
        request=httpx2.Request("POST", f"https://api.openai.com{self.endpoint}"),
    )
    return line_data["custom_id"], self._openai_client._make_status_error_from_response(http)


def error_lines(custom_id: str, status: int) -> list[dict[str, Any]]:
    """A failed request's line in a batch's error file, in both shapes the fake writes."""
    lines = []
    for shape in ("response", "error"):
        server = FakeOpenAIServer(fail=lambda t: status, batch_errors=shape)
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        ok, line = server._batch_line(
            {"custom_id": custom_id, "body": body}, "/v1/chat/completions"
        )
        assert not ok
        lines.append(line)
    return lines


def test_inspect_cannot_parse_a_failed_line_of_a_batch():
    """Inspect 0.3.285's ``OpenAIBatcher._parse_jsonl_line`` raises on a failed request's line
    (it should return that request's error): OpenAI's shape (``response.status_code`` 500, the
    error in ``response.body``, ``error`` null) goes to ``ChatCompletion.model_validate``; the
    ``error`` object becomes an ``httpx2.Response`` without a request, which the SDK's error
    constructor cannot read. The corrected parser returns the SDK's ``InternalServerError``."""
    import pydantic
    from openai import AsyncOpenAI, InternalServerError
    from openai.types.chat import ChatCompletion

    client = AsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    batcher = openai_batcher()(client, FAST, {}, ChatCompletion)
    response_shape, error_shape = error_lines("req-1", 500)
    with pytest.raises(pydantic.ValidationError):
        batcher._parse_jsonl_line(response_shape)
    with pytest.raises(RuntimeError, match="request instance has not been set"):
        batcher._parse_jsonl_line(error_shape)
    for line in (response_shape, error_shape):
        custom_id, error = parse_line_as_intended(batcher, line)
        assert custom_id == "req-1" and isinstance(error, InternalServerError)
        assert error.status_code == 500


@pytest.mark.slow
def test_a_failed_request_inside_a_batch(oncology_data, tmp_path, monkeypatch):
    """Direct: the failing trial's one sample is ERROR, counted apart. Inside a batch (its line
    in the error file as OpenAI writes it) Inspect fails every request of that batch ("failed
    (obtaining results)"): all 12 samples ERROR (``test_inspect_cannot_parse_a_failed_line_of_a_
    batch`` shows why, and what the corrected parser returns)."""
    model = "openai/gpt-4o-mini"
    with FakeOpenAIServer(oncology_reply, fail=fail_trial) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        direct = run_oncology(server, tmp_path, model)
        batched = run_oncology(server, tmp_path, model, batch=FAST)
    assert server.counts["batches"] == 1 and server.counts["500"] == 2  # one per run
    scores, numbers = sample_scores(direct), metrics(direct)
    assert [k for k, v in scores.items() if v["trial_outcome"][1] == "ERROR"] == [
        "title_abstract-001"
    ]
    assert numbers[("trial_outcome", "title_abstract/n_error")] == 1
    assert numbers[("trial_outcome", "title_abstract/n_valid")] == 5
    assert numbers[("trial_outcome", "doi_only/n_error")] == 0
    # Inspect as it is: one failed line takes its whole batch with it
    assert {v["trial_outcome"][1] for v in sample_scores(batched).values()} == {"ERROR"}
    for condition in ("title_abstract", "doi_only"):
        assert metrics(batched)[("trial_outcome", f"{condition}/n_error")] == 6
    samples = batched.samples or []
    assert all(
        "ValidationError" in (s.scores["trial_outcome"].explanation or "")  # type: ignore[index]
        for s in samples
    )


@pytest.mark.slow
def test_a_rejected_batch_scores_every_sample_error(oncology_data, tmp_path, monkeypatch):
    """A batch OpenAI fails as a whole (status ``failed``, ``errors.data``): Inspect fails each
    request with its entry's message; the samples are ERROR, counted apart, none lost."""
    with FakeOpenAIServer(oncology_reply, reject_batches=True) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        log = run_oncology(server, tmp_path, "openai/gpt-4o-mini", batch=FAST)
    scores = sample_scores(log)
    assert len(scores) == 12 and {v["trial_outcome"][1] for v in scores.values()} == {"ERROR"}
    samples = log.samples or []
    assert all(
        "injected rejection" in (s.scores["trial_outcome"].explanation or "")  # type: ignore[index]
        for s in samples
    )
    assert server.counts["requests"] == 0  # nothing went direct


@pytest.mark.slow
def test_max_connections_caps_the_samples_in_flight_and_so_each_batch(
    oncology_data, tmp_path, monkeypatch
):
    """Under ``--batch`` Inspect runs up to 10,000 samples at once, unless ``--max-connections``
    is given: then that many (``_eval/task/run.py``), so a batch holds at most that many
    requests and the batches follow one another (each a batch window)."""
    with FakeOpenAIServer(oncology_reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        config = BatchConfig(size=4, send_delay=5, tick=0.05)
        log = run_oncology(server, tmp_path, "openai/gpt-4o-mini", batch=config, max_connections=4)
    # 12 requests queued together would go in one batch (the batcher adds every queued request
    # up to max_size, 50,000 for OpenAI, and sends once it holds ``size``): four at a time here
    sizes = [batch["request_counts"]["total"] for batch in server.batches.values()]
    assert sizes == [4, 4, 4] and len(sample_scores(log)) == 12


def run_medreqal(server: FakeOpenAIServer, tmp_path, grader: str | Any, **kw: Any) -> EvalLog:
    (log,) = inspect_eval(
        medreqal,
        task_args={"data_file": str(MEDREQAL_FIXTURE), "bertscore": False, "judge": True},
        model="openai/gpt-4o-mini",
        model_base_url=server.base_url,
        model_roles={"grader": grader},
        log_dir=str(tmp_path / "logs"),
        display="none",
        max_retries=0,
        **kw,
    )
    assert log.status == "success", log.error
    return log


@pytest.mark.slow
def test_medreqal_and_its_judge_equal_under_batch(tmp_path, monkeypatch):
    """The verdicts, ROUGE-L and the judge's agreement shares are the same batched. The grader
    batches only with a batch setting of its own (a role model does not inherit ``--batch``);
    then its calls are a second batch, sent after the first one's replies."""
    monkeypatch.setenv("OPENAI_API_KEY", "local-dummy")

    def grader(batch: BatchConfig | None = None) -> Any:
        config = GenerateConfig(batch=batch)
        return get_model("openai/gpt-4o", config=config, memoize=False)

    with pytest.warns(UserWarning, match="counts differ"), FakeOpenAIServer(medreqal_reply) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        direct = run_medreqal(s, tmp_path, grader())
        assert s.counts["batches"] == 0 and s.counts["requests"] == 24  # 12 questions, 12 judged
        mark = len(s.requests)
        inherited = run_medreqal(s, tmp_path, grader(), batch=FAST)
        chats = [b["model"] for p, b in s.requests[mark:] if p.endswith("/chat/completions")]
        assert chats == ["gpt-4o"] * 12 and s.counts["batches"] == 1  # the grader went direct
        mark, lines = len(s.requests), len(s.batch_lines)
        batched = run_medreqal(s, tmp_path, grader(FAST), batch=FAST)
        assert not [p for p, _ in s.requests[mark:] if p.endswith("/chat/completions")]
        assert s.counts["batches"] == 3  # the model's batch, then the grader's
        models = [b["model"] for b in s.batch_lines[lines:]]
        assert models == ["gpt-4o-mini"] * 12 + ["gpt-4o"] * 12
    numbers = metrics(direct)
    assert {("conclusion_agreement", k) for k in ("agrees", "contradicts", "n")} <= set(numbers)
    assert numbers[("conclusion_agreement", "judge_failures")] == 0
    for run in (inherited, batched):
        assert sample_scores(run) == sample_scores(direct)
        assert metrics(run) == numbers


def test_a_grader_role_from_the_cli_can_batch(monkeypatch) -> None:
    """``--model-role 'grader={model: openai/gpt-4o, batch: {...}}'`` gives the grader its own
    batch setting (the form docs/models.md shows)."""
    from med_evals.inspect_internals.compat import parse_model_role_cli_args

    monkeypatch.setenv("OPENAI_API_KEY", "local-dummy")
    roles = parse_model_role_cli_args(
        ("grader={model: openai/gpt-4o, batch: {size: 500, tick: 60}}",)
    )
    grader = roles["grader"]
    assert isinstance(grader, Model)
    assert grader.config.batch == BatchConfig(size=500, tick=60)


def test_fake_batch_api_answers_like_direct_calls() -> None:
    """The fake's batch lines get the replies, failures and usage of direct calls."""
    from openai import OpenAI

    def fail(text: str) -> int | None:
        return 503 if text == "bad" else None

    with FakeOpenAIServer(str.upper, fail=fail, word_usage=True) as server:
        client = OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        lines = [
            {
                "custom_id": f"r{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": text}]},
            }
            for i, text in enumerate(["ok", "bad"])
        ]
        data = "".join(json.dumps(x) + "\n" for x in lines).encode()
        upload = client.files.create(file=("in.jsonl", data), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert client.batches.retrieve(batch.id).status == "in_progress"
        done = client.batches.retrieve(batch.id)
        assert done.status == "completed" and done.request_counts is not None
        assert (done.request_counts.completed, done.request_counts.failed) == (1, 1)
        assert done.output_file_id and done.error_file_id
        out = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
        err = [json.loads(x) for x in client.files.content(done.error_file_id).text.splitlines()]
        direct = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "ok"}]
        )
        cancelled = client.batches.cancel(batch.id)
    assert [o["custom_id"] for o in out] == ["r0"] and [e["custom_id"] for e in err] == ["r1"]
    body = out[0]["response"]["body"]
    assert body["choices"][0]["message"]["content"] == direct.choices[0].message.content == "OK"
    assert direct.usage is not None and body["usage"] == direct.usage.model_dump(exclude_none=True)
    assert err[0]["error"] is None and err[0]["response"]["status_code"] == 503
    assert err[0]["response"]["body"]["error"]["message"] == "injected 503"
    assert cancelled.status == "completed"  # a finished batch stays finished
    assert server.counts["503"] == 1 and server.counts["requests"] == 1
