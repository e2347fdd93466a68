"""Whether the server of a served model answers at all, asked once before a run.

Inspect retries a request that cannot connect, with waits that grow from 3 s to 30 minutes,
and by default without end: a run on a server that is not there (a wrong port, a misspelt
host, a server not started yet) printed nothing for minutes and never ended. One plain HTTP
``HEAD`` of the model's base URL, before any sample, tells those apart from a server that is
there: any HTTP answer, an error status included (404, 405, 501 ...), means something listens
and answers; a refused connection, an unknown host or no answer within :data:`PROBE_SECONDS`
is named in one line (:func:`unreachable`). Nothing is generated, so a paid API is not charged,
and the server sends no body.

Which URL (:func:`served_url`): only one the user gave, never a provider SDK's default (the
public API of OpenAI, Anthropic, Google is not probed). That is the provider's ``base_url``
(``-M base_url=``, ``--model-base-url``, ``<SERVICE>_BASE_URL`` for ``openai-api/``,
``GOOGLE_BASE_URL``, ...), the URL given to ``vllm/`` (``-M base_url=``, ``-M port=``,
``VLLM_BASE_URL``), and ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` (then
``INSPECT_EVAL_MODEL_BASE_URL``, as Inspect's providers read them) for ``openai/`` and
``anthropic/``, whose SDKs read them. An in-process model (``mockllm/``, ``replay/``,
``embedded/``, ``hf/``) has none.

The probe goes through the environment's proxy settings as the providers' HTTP clients do
(``HTTPS_PROXY``, ``NO_PROXY``). What it cannot judge (a TLS failure: the provider's client
may be set up to trust the server) passes: the run's own limits (``--timeout``,
``--max-retries``) still end it. ``MED_EVALS_SKIP_PROBE=1`` turns the probe before a task's
run off (:func:`probe_skipped`): for a server that comes up after the run starts, or one the
providers reach in a way this probe cannot (a SOCKS proxy).
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlparse

from med_evals.inspect_internals.compat import InputError, vllm_given_url

#: seconds the probe waits to connect, and then for the first byte of an answer
PROBE_SECONDS = 10.0
#: the environment variable that turns the probe before a task's run off (``1``)
SKIP_PROBE = "MED_EVALS_SKIP_PROBE"
#: the server URL a provider's SDK reads from the environment when the provider keeps none
#: (Inspect's ``model_base_url``: these, then ``INSPECT_EVAL_MODEL_BASE_URL``); vLLM's is read
#: by Inspect's provider itself, without the fallback
ENV_URLS = {
    "openai": ("OPENAI_BASE_URL", "INSPECT_EVAL_MODEL_BASE_URL"),
    "anthropic": ("ANTHROPIC_BASE_URL", "INSPECT_EVAL_MODEL_BASE_URL"),
    "vllm": ("VLLM_BASE_URL",),
}
#: the hosted routes of those providers (Azure, Bedrock, Vertex), whose URLs come from elsewhere
_HOSTED = ("is_azure", "is_bedrock", "is_vertex")


def served_url(api: Any, provider: str | None = None) -> str | None:
    """The ``http(s)://`` server URL the user gave a model's API (see the module's docstring),
    or None: an in-process model, or a provider whose SDK picks its default URL itself.
    ``provider``: the model's provider (``openai``); by default read from the API."""
    if provider is None:
        provider = str(getattr(api, "qualified_model_name", None) or "").split("/")[0]
    url = getattr(api, "base_url", None) or vllm_given_url(api)
    if not url and provider in ENV_URLS and not any(
        callable(getattr(api, name, None)) and getattr(api, name)() for name in _HOSTED
    ):
        url = next((os.environ[v] for v in ENV_URLS[provider] if os.environ.get(v)), None)
    if not isinstance(url, str):
        return None
    parts = urlparse(url)
    return url if parts.scheme in ("http", "https") and parts.hostname else None


def probe_skipped() -> bool:
    """Whether ``MED_EVALS_SKIP_PROBE`` turns the probe off (``1``; ``0`` or unset: on); any
    other value is one line."""
    value = os.environ.get(SKIP_PROBE, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise InputError(
        f"{SKIP_PROBE}={os.environ[SKIP_PROBE]}: give 1 to run without probing the model's "
        "server first, or 0 (or leave it unset) to probe it"
    )


def unreachable(url: str, timeout: float = PROBE_SECONDS) -> str | None:
    """Why nothing answers at ``url`` (``connection refused``, ``unknown host gpu-01``, ``no
    answer within 10 s``), or None when something answered or the probe cannot tell."""
    host = urlparse(url).hostname or url
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # an answer: 401, 404, 405 ... the server is there
    except urllib.error.URLError as ex:
        return _why(ex.reason, host, timeout)
    except OSError as ex:  # a timeout while reading the answer, a reset connection
        return _why(ex, host, timeout)


def _why(reason: Any, host: str, timeout: float) -> str | None:
    if isinstance(reason, ssl.SSLError | ssl.CertificateError):
        return None  # TLS: the provider's own client may be set up to accept it
    if isinstance(reason, TimeoutError | socket.timeout):
        return f"no answer within {timeout:g} s"
    if isinstance(reason, socket.gaierror):
        return f"unknown host {host}"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, OSError) and reason.errno in (
        errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ECONNRESET, errno.ETIMEDOUT,
    ):
        return reason.strerror.lower() if reason.strerror else str(reason)
    return None
