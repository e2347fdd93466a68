"""A local OpenAI-compatible chat server for tests and benchmarks (loopback only).

It answers ``POST /v1/chat/completions`` and ``GET /v1/models``, optionally after a fixed
latency, and can be told to fail: answer 429 or 500 to a share of requests, or hang (never
answer) on another share, each decided by a seeded generator so runs repeat. Every request is
counted, so a test can check that no sample was lost or sent twice.

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[str], str]


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
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return _text(users[-1]["content"]) if users else ""


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
        model: str = "fake-model",
        error_code: int | None = None,
    ) -> None:
        self.reply, self.latency, self.model = reply, latency, model
        self.error_code = error_code  # every injected error has this code (default: 429 or 500)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.error_rate, self.hang_rate, self.hang_seconds = error_rate, hang_rate, hang_seconds
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.authorization: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if code == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:  # noqa: N802
                with server._lock:
                    server.requests.append((self.path, {}))
                if self.path.rstrip("/").endswith("/models"):
                    card = {"id": server.model, "object": "model", "max_model_len": 8192}
                    self._send(200, {"object": "list", "data": [card]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append((self.path, body))
                    server.authorization.append(self.headers.get("Authorization", ""))
                    roll = server._rng.random()
                    server.counts["requests"] += 1
                if roll < server.hang_rate:
                    with server._lock:
                        server.counts["hung"] += 1
                    time.sleep(server.hang_seconds)
                    return
                if roll < server.hang_rate + server.error_rate:
                    code = server.error_code or (
                        429 if roll < server.hang_rate + server.error_rate / 2 else 500
                    )
                    with server._lock:
                        server.counts[str(code)] += 1
                    self._send(code, {"error": {"message": f"injected {code}", "type": "fault"}})
                    return
                if server.latency:
                    time.sleep(server.latency)
                text = server.reply(_last_user(body))
                with server._lock:
                    server.counts["ok"] += 1
                if self.path.endswith("/messages"):
                    self._send(200, server._anthropic(body, text))
                    return
                if ":generateContent" in self.path:
                    self._send(200, server._gemini(text))
                    return
                self._send(
                    200,
                    {
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
                        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
                    },
                )

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

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

    @property
    def url(self) -> str:
        """The server root (Anthropic's base URL)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

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
