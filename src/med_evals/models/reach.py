"""Whether the server of a served model answers at all, asked once before a run.

Inspect retries a request that cannot connect, with waits that grow from 3 s to 30 minutes,
and by default without end: a run on a server that is not there (a wrong port, a misspelt
host, a server not started yet) printed nothing for minutes and never ended. One plain HTTP
``GET`` of the model's base URL, before any sample, tells those apart from a server that is
there: any HTTP answer, an error status included, means something listens and answers; a
refused connection, an unknown host or no answer within :data:`PROBE_SECONDS` is named in one
line (:func:`unreachable`). Nothing is generated, so a paid API is not charged.

The probe goes through the environment's proxy settings as the providers' HTTP clients do
(``HTTPS_PROXY``, ``NO_PROXY``). What it cannot judge (a TLS failure: the provider's client
may be set up to trust the server) passes: the run's own limits (``--timeout``,
``--max-retries``) still end it.
"""

from __future__ import annotations

import errno
import socket
import ssl
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlparse

#: seconds the probe waits to connect, and then for the first byte of an answer
PROBE_SECONDS = 10.0


def served_url(api: Any) -> str | None:
    """The ``http(s)://`` base URL a model's API sends its requests to (``-M base_url=``,
    ``--model-base-url``, ``OPENAI_BASE_URL`` and the like), or None: an in-process model, or a
    provider whose SDK picks its default URL itself."""
    url = getattr(api, "base_url", None)
    if not isinstance(url, str):
        return None
    parts = urlparse(url)
    return url if parts.scheme in ("http", "https") and parts.hostname else None


def unreachable(url: str, timeout: float = PROBE_SECONDS) -> str | None:
    """Why nothing answers at ``url`` (``connection refused``, ``unknown host gpu-01``, ``no
    answer within 10 s``), or None when something answered or the probe cannot tell."""
    host = urlparse(url).hostname or url
    request = urllib.request.Request(url, method="GET")
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
