"""A local OpenAI-compatible server for tests and benchmarks (loopback only).

It answers ``POST /v1/chat/completions``, ``POST /v1/responses`` and ``GET /v1/models`` (and
Anthropic's ``/v1/messages`` and Gemini's ``:generateContent`` in their own shapes), optionally
after a fixed latency, and can be told to fail: answer 429 or 500 to a share of requests, or hang
(never answer) on another share, each decided by a seeded generator so runs repeat; ``fail``
fails chosen requests deterministically (by their last user message). Every request is counted,
so a test can check that no sample was lost or sent twice.

It also serves the OpenAI Batch API as Inspect's ``OpenAIBatcher`` uses it
(``inspect_ai/model/_providers/_openai_batch.py``): ``POST /v1/files`` (a multipart upload of
the JSONL input, ``purpose=batch``), ``POST /v1/batches`` (``input_file_id``, ``endpoint``,
``completion_window``), ``GET /v1/batches/{id}`` (polled until ``completed``) and
``GET /v1/files/{id}/content`` (the output and error JSONL files), plus
``POST /v1/batches/{id}/cancel``. Each input line is answered exactly as the same request would
be answered directly (same reply, same ``fail``, same injected error share); a failed line goes
to the batch's error file, in one of two shapes (``batch_errors``):

- ``"response"`` (default): what OpenAI writes for a request that failed with an HTTP error:
  ``{"response": {"status_code": 500, "body": {"error": {...}}}, "error": null}`` (shown in
  openai/openai-openapi#302);
- ``"error"``: the line's ``error`` object, ``{"code": 500, "message": ...}``, with the HTTP
  status as ``code``: the shape Inspect's ``_parse_jsonl_line`` turns into a per-request error.

``reject_batches=True`` fails every batch as a whole (status ``failed`` with ``errors.data``,
one entry per line, as OpenAI reports an invalid input file).

    with FakeOpenAIServer(reply=lambda messages: "POSITIVE", latency=0.2) as server:
        ...  # --model openai-api/fake -M base_url=server.base_url  (or OPENAI_BASE_URL)
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[str], str]
#: the HTTP status a request with this last user message fails with, or None
Fail = Callable[[str], int | None]

BATCH_ERROR_SHAPES = ("response", "error")


def echo_label(text: str) -> str:
    """Default reply: a POSITIVE/NEGATIVE reading of the last user message."""
    return "NEGATIVE" if "did not meet" in text or "not significantly" in text else "POSITIVE"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def _last_user(body: dict[str, Any]) -> str:
    if "contents" in body:  # Gemini: contents[].parts[].text
        users = [c for c in body["contents"] if c.get("role", "user") == "user"]
        return "".join(p.get("text", "") for p in users[-1].get("parts", [])) if users else ""
    if "input" in body and "messages" not in body:  # Responses API: input items (or a string)
        items = body["input"]
        if isinstance(items, str):
            return items
        users = [i for i in items if i.get("role") == "user"]
        return _text(users[-1].get("content")) if users else ""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return _text(users[-1]["content"]) if users else ""


def _all_text(body: dict[str, Any]) -> str:
    """Every message text of a chat or Responses request (for word-count usage)."""
    items = body.get("messages") or body.get("input") or []
    if isinstance(items, str):
        return items
    return " ".join(_text(m.get("content")) for m in items if isinstance(m, dict))


def _multipart(content_type: str, data: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (file name, bytes)."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + data)
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        out[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return out


class _Listening(ThreadingHTTPServer):
    """A threaded HTTP server whose listen queue holds a burst of new connections: Python's
    default (``request_queue_size = 5``) drops the connection attempts of a client that opens
    hundreds at once (a peer in ``bench/bench_peers.py`` at 128 or 1,000 connections), which
    the kernel retries after 1, 3, 7 ... s: a stall of the server's making, not the client's."""

    request_queue_size = 4096  # the kernel caps it at net.core.somaxconn


class FakeOpenAIServer:
    def __init__(
        self,
        reply: Reply = echo_label,
        latency: float = 0.0,
        error_rate: float = 0.0,
        hang_rate: float = 0.0,
        hang_seconds: float = 30.0,
        seed: int = 0,
        port: int = 0,
        host: str = "127.0.0.1",
        model: str = "fake-model",
        error_code: int | None = None,
        fail: Fail | None = None,
        word_usage: bool = False,
        no_usage: Callable[[str], bool] | None = None,
        batch_polls: int = 1,
        batch_errors: str = "response",
        reject_batches: bool = False,
    ) -> None:
        """``fail``: requests whose last user message it maps to a status fail with it, directly
        or inside a batch. ``word_usage``: usage counts words (prompt: every message; completion:
        the reply) instead of the fixed 10 + 1 tokens; ``no_usage``: chat replies to requests
        whose last user message it maps to True carry no ``usage`` (a provider that reports
        usage on some calls only). ``batch_polls``: status polls a batch answers
        ``in_progress`` before ``completed``."""
        if batch_errors not in BATCH_ERROR_SHAPES:
            raise ValueError(f"batch_errors must be one of {BATCH_ERROR_SHAPES}")
        self.reply, self.latency, self.model = reply, latency, model
        self.error_code = error_code  # every injected error has this code (default: 429 or 500)
        self.fail, self.word_usage, self.no_usage = fail, word_usage, no_usage
        self.batch_polls, self.batch_errors = batch_polls, batch_errors
        self.reject_batches = reject_batches
        self.requests: list[tuple[str, dict[str, Any]]] = []
        #: the body of every request that arrived inside a batch input file
        self.batch_lines: list[dict[str, Any]] = []
        self.error_rate, self.hang_rate, self.hang_seconds = error_rate, hang_rate, hang_seconds
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.authorization: list[str] = []
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._polls: Counter[str] = Counter()
        self._ids = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def _send_bytes(self, code: int, data: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                if code == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                self._send_bytes(code, json.dumps(body).encode(), "application/json")

            def _read(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    self.rfile.readline()
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length", "0")))

            def do_GET(self) -> None:  # noqa: N802
                with server._lock:
                    server.requests.append((self.path, {}))
                path = self.path.split("?")[0].rstrip("/")
                if path == "/_counts":  # for benchmarks in another process: what was served
                    with server._lock:
                        self._send(200, dict(server.counts))
                elif path.endswith("/models"):
                    card = {"id": server.model, "object": "model", "max_model_len": 8192}
                    self._send(200, {"object": "list", "data": [card]})
                elif "/batches/" in path:
                    batch = server._poll(path.rsplit("/", 1)[-1])
                    self._send(200, batch) if batch else self._not_found()
                elif "/files/" in path and path.endswith("/content"):
                    data = server.files.get(path.split("/")[-2])
                    if data is None:
                        self._not_found()
                    else:
                        self._send_bytes(200, data, "application/octet-stream")
                else:
                    self._not_found()

            def _not_found(self) -> None:
                self._send(404, {"error": {"message": "not found", "type": "invalid_request"}})

            def do_POST(self) -> None:  # noqa: N802
                data = self._read()
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/files"):  # batch input upload (multipart)
                    fields = _multipart(self.headers.get("Content-Type", ""), data)
                    name, content = fields.get("file", (None, b""))
                    purpose = fields.get("purpose", (None, b""))[1].decode()
                    with server._lock:
                        server.requests.append((self.path, {"purpose": purpose}))
                    self._send(200, server._add_file(content, name or "input.jsonl", purpose))
                    return
                body = json.loads(data or b"{}")
                with server._lock:
                    server.requests.append((self.path, body))
                if path.endswith("/batches"):
                    self._send(200, server._create_batch(body))
                    return
                if "/batches/" in path and path.endswith("/cancel"):
                    batch = server._cancel(path.split("/")[-2])
                    self._send(200, batch) if batch else self._not_found()
                    return
                with server._lock:
                    server.authorization.append(self.headers.get("Authorization", ""))
                    roll = server._rng.random()
                    server.counts["requests"] += 1
                if roll < server.hang_rate:
                    with server._lock:
                        server.counts["hung"] += 1
                    time.sleep(server.hang_seconds)
                    return
                code = server._failure(roll - server.hang_rate, body)
                if code is not None:
                    self._send(code, server._error_body(code))
                    return
                if server.latency:
                    time.sleep(server.latency)
                text = server.reply(_last_user(body))
                with server._lock:
                    server.counts["ok"] += 1
                if self.path.endswith("/messages"):
                    self._send(200, server._anthropic(body, text))
                elif ":generateContent" in self.path:
                    self._send(200, server._gemini(text))
                elif path.endswith("/responses"):
                    self._send(200, server._responses(body, text))
                else:
                    self._send(200, server._chat(body, text))

        self.host = host
        self._httpd = _Listening((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # --- answers ------------------------------------------------------------------------------

    def _failure(self, roll: float, body: dict[str, Any]) -> int | None:
        """The status this request fails with (``fail`` first, then the injected share)."""
        code = self.fail(_last_user(body)) if self.fail else None
        if code is None and roll < self.error_rate:
            code = self.error_code or (429 if roll < self.error_rate / 2 else 500)
        if code is not None:
            with self._lock:
                self.counts[str(code)] += 1
        return code

    @staticmethod
    def _error_body(code: int) -> dict[str, Any]:
        kind = "rate_limit" if code == 429 else "server_error" if code >= 500 else "invalid_request"
        return {"error": {"message": f"injected {code}", "type": kind, "param": None, "code": None}}

    def _usage(self, body: dict[str, Any], text: str) -> tuple[int, int]:
        if not self.word_usage:
            return 10, 1
        return len(_all_text(body).split()), len(text.split())

    def _chat(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        prompt, completion = self._usage(body, text)
        if self.no_usage is not None and self.no_usage(_last_user(body)):
            with self._lock:
                self.counts["no_usage"] += 1
            return {k: v for k, v in self._chat_body(body, text, prompt, completion).items()
                    if k != "usage"}
        return self._chat_body(body, text, prompt, completion)

    def _chat_body(
        self, body: dict[str, Any], text: str, prompt: int, completion: int
    ) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _responses(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        prompt, completion = self._usage(body, text)
        return {
            "id": "resp_fake",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body.get("model", "fake"),
            "output": [
                {
                    "type": "message",
                    "id": "msg_fake",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            },
        }

    @staticmethod
    def _anthropic(body: dict[str, Any], text: str) -> dict[str, Any]:
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }

    @staticmethod
    def _gemini(text: str) -> dict[str, Any]:
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 1,
                "totalTokenCount": 11,
            },
            "modelVersion": "fake",
        }

    # --- the Batch API ------------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}-fake{self._ids}"

    def _add_file(self, content: bytes, name: str, purpose: str) -> dict[str, Any]:
        file_id = self._next_id("file")
        with self._lock:
            self.files[file_id] = content
            self.counts["files"] += 1
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }

    def _batch_line(self, line: dict[str, Any], endpoint: str) -> tuple[bool, dict[str, Any]]:
        """Answer one input line as the same request would be answered directly:
        (succeeded, output line)."""
        body = line["body"]
        with self._lock:
            self.batch_lines.append(body)
            self.counts["batch_lines"] += 1
            roll = self._rng.random()
        out: dict[str, Any] = {"id": self._next_id("batch_req"), "custom_id": line["custom_id"]}
        code = self._failure(roll, body)
        if code is not None:
            if self.batch_errors == "response":
                response = {"status_code": code, "request_id": "req_fake"}
                out |= {"response": response | {"body": self._error_body(code)}, "error": None}
            else:
                out |= {"response": None, "error": {"code": code, "message": f"injected {code}"}}
            return False, out
        text = self.reply(_last_user(body))
        with self._lock:
            self.counts["ok"] += 1
        if endpoint.endswith("/responses"):
            answer = self._responses(body, text)
        else:
            answer = self._chat(body, text)
        out |= {
            "response": {"status_code": 200, "request_id": "req_fake", "body": answer},
            "error": None,
        }
        return True, out

    def _create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        batch_id = self._next_id("batch")
        endpoint = body.get("endpoint", "/v1/chat/completions")
        raw = self.files.get(body.get("input_file_id", ""), b"")
        lines = [json.loads(x) for x in raw.decode().splitlines() if x.strip()]
        now = int(time.time())
        batch: dict[str, Any] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": body.get("input_file_id"),
            "completion_window": body.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 24 * 3600,
            "completed_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        with self._lock:
            self.counts["batches"] += 1
            self.batches[batch_id] = batch
        if self.reject_batches:
            errors = [
                {
                    "code": "invalid_request",
                    "line": i + 1,
                    "message": "injected rejection",
                    "param": None,
                }
                for i in range(len(lines))
            ]
            batch["_final"] = {
                "status": "failed",
                "failed_at": now,
                "request_counts": None,
                "errors": {"object": "list", "data": errors},
            }
            return self._public(batch)
        results = [self._batch_line(line, endpoint) for line in lines]
        final: dict[str, Any] = {"status": "completed", "completed_at": now}
        for ok, key in ((True, "output_file_id"), (False, "error_file_id")):
            chosen = [json.dumps(out) for succeeded, out in results if succeeded is ok]
            if chosen:
                content = ("\n".join(chosen) + "\n").encode()
                final[key] = self._add_file(content, f"{batch_id}_{key}.jsonl", "batch_output")[
                    "id"
                ]
        done = sum(ok for ok, _ in results)
        final["request_counts"] = {
            "total": len(lines),
            "completed": done,
            "failed": len(lines) - done,
        }
        batch["_final"] = final
        return self._public(batch)

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _poll(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            self.counts["batch_polls"] += 1
            self._polls[batch_id] += 1
            if batch["status"] in ("validating", "in_progress"):
                if self._polls[batch_id] > self.batch_polls:
                    batch.update(batch.pop("_final"))
                else:
                    batch["status"], batch["in_progress_at"] = "in_progress", int(time.time())
            return self._public(batch)

    def _cancel(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            self.counts["batch_cancels"] += 1
            if batch["status"] in ("validating", "in_progress"):
                batch.pop("_final", None)
                batch["status"], batch["cancelled_at"] = "cancelled", int(time.time())
            return self._public(batch)

    def paths(self, since: int = 0) -> Counter[str]:
        """Requests per endpoint from the ``since``-th on, ids shown as ``{id}``
        (``/v1/batches/{id}``)."""
        out: Counter[str] = Counter()
        for path, _ in self.requests[since:]:
            parts = path.split("?")[0].rstrip("/").split("/")
            out["/".join("{id}" if "-fake" in p else p for p in parts)] += 1
        return out

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The server root (Anthropic's base URL)."""
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{shown}:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return f"{self.url}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def main() -> None:
    """Serve from the command line: ``python -m tests.support.fake_openai``."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--error-rate", type=float, default=0.0)
    p.add_argument("--hang-rate", type=float, default=0.0)
    p.add_argument("--seconds", type=float, default=600, help="stop after this long")
    a = p.parse_args()
    with FakeOpenAIServer(
        latency=a.latency, error_rate=a.error_rate, hang_rate=a.hang_rate, port=a.port
    ) as s:
        print(s.base_url, flush=True)
        time.sleep(a.seconds)


if __name__ == "__main__":
    main()
