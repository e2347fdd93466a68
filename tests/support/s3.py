"""An S3-protocol server on loopback for tests of logs on S3: moto's server mode.

:func:`s3_server` starts :class:`moto.server.ThreadedMotoServer` on ``127.0.0.1`` (a free
port), points every AWS client at it through the standard environment variables
(``AWS_ENDPOINT_URL``, dummy ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``,
``AWS_DEFAULT_REGION``; a user's own AWS profile, config and credential files are hidden) and
yields an :class:`S3` handle. Inspect reaches it as it would reach AWS: its file functions go
through fsspec's s3fs, whose botocore client reads ``AWS_ENDPOINT_URL`` (botocore 1.31 and
later; checked by the tests, which would otherwise find no log).

What moto's server mode checks (moto 5, read in ``moto/core/authorization.py`` and tried here):
by default **nothing** (``INITIAL_NO_AUTH_ACTION_COUNT`` is infinite: any key, any secret, any
signature). With a count of 0 (the ``INITIAL_NO_AUTH_ACTION_COUNT`` environment variable of a
server process, or at run time ``POST /moto-api/reset-auth`` with the count, as
:meth:`S3.require_auth` does) every request must come from an access key of moto's own IAM
(``InvalidAccessKeyId`` otherwise), be signed with its secret (``SignatureDoesNotMatch``)
and be allowed by the user's IAM policy.

s3fs keeps one ``S3FileSystem`` per set of arguments (fsspec's instance cache), built with the
environment of its first use: :func:`fresh_clients` drops them when a test changes the
endpoint or the keys.

:attr:`S3.requests` records each request the server answers (its method and path, and the
status), from the line werkzeug's server logs for it before it sends the response: a test counts
what a command sent (a refused request retried would show twice) instead of timing it, which a
loaded machine would slow.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from . import free_port

#: AWS settings that would send a client elsewhere than the server, or sign with a user's keys
_HIDDEN = (
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL_S3", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "FSSPEC_S3", "FSSPEC_S3_ENDPOINT_URL",
)
DUMMY_KEY = "testing"


def fresh_clients() -> None:
    """Forget s3fs's cached filesystems (each holds the endpoint and keys it was made with)."""
    from s3fs import S3FileSystem

    S3FileSystem.clear_instance_cache()


@dataclass
class S3:
    """The running server: its endpoint and a few helpers (boto3 and fsspec, as a user would)."""

    endpoint: str
    #: (method and path, status) of each request answered, in order (a test clears it)
    requests: list[tuple[str, int]] = field(default_factory=list)

    def client(self, service: str = "s3"):  # noqa: ANN201 - a boto3 client
        """A client with the keys in the environment now (boto3's default session keeps the
        first ones it found)."""
        import boto3

        return boto3.session.Session().client(service, endpoint_url=self.endpoint)

    def make_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def put(self, uri: str, data: bytes) -> None:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        self.client().put_object(Bucket=bucket, Key=key, Body=data)

    def keys(self, uri: str) -> list[str]:
        """Object keys under an ``s3://bucket/prefix`` (sorted)."""
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        found = self.client().list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        return sorted(o["Key"] for o in found)

    def download(self, uri: str, dest: Path) -> Path:
        """Every object under ``uri`` copied into ``dest`` (fsspec's ``get``, recursive)."""
        import fsspec

        fs, root = fsspec.core.url_to_fs(uri)
        dest.mkdir(parents=True, exist_ok=True)
        fs.get(root.rstrip("/") + "/", str(dest) + "/", recursive=True)
        return dest

    def iam_user(self, name: str = "ci") -> tuple[str, str]:
        """An IAM user of moto's allowed everything: (access key id, secret). Made while auth is
        off (moto's default)."""
        iam = self.client("iam")
        iam.create_user(UserName=name)
        policy = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName=name, PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    @contextmanager
    def require_auth(self) -> Iterator[None]:
        """Every request checked (key known to moto's IAM, signature, policy) inside the block;
        moto's default (nothing checked) after it."""
        import requests

        def count(n: str) -> None:
            r = requests.post(f"{self.endpoint}/moto-api/reset-auth", data=n.encode(), timeout=5)
            r.raise_for_status()

        count("0")
        try:
            yield
        finally:
            count("inf")


class _Requests(logging.Handler):
    """werkzeug's line per request, as (method and path, status); its warnings and errors to
    stderr (nothing else is printed)."""

    #: ``"GET /bucket?list-type=2 HTTP/1.1" 403 -`` (the request in ANSI colours by status)
    LINE = re.compile(r'"(?:\x1b\[[\d;]*m)*([A-Z]+ .+?) HTTP/[\d.]+(?:\x1b\[[\d;]*m)*" (\d{3}) ')

    def __init__(self, requests: list[tuple[str, int]]) -> None:
        super().__init__()
        self.requests = requests

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        found = self.LINE.search(text)
        if found and record.levelno == logging.INFO:
            self.requests.append((found.group(1), int(found.group(2))))  # atomic: thread-safe
        elif record.levelno >= logging.WARNING:
            print(text.rstrip(), file=sys.stderr)


@contextmanager
def _werkzeug_lines(requests: list[tuple[str, int]]) -> Iterator[None]:
    """werkzeug's log (each request, at INFO) into ``requests`` while the server runs; the
    logger as it was after it."""
    log = logging.getLogger("werkzeug")
    saved = (log.level, log.propagate, log.handlers[:])
    log.setLevel(logging.INFO)
    log.propagate = False
    log.handlers = [_Requests(requests)]  # before the first request: werkzeug adds no handler
    try:
        yield
    finally:
        log.setLevel(saved[0])
        log.propagate = saved[1]
        log.handlers = saved[2]


@contextmanager
def _threaded(requests: list[tuple[str, int]]) -> Iterator[str]:
    """moto's server in a thread of this process (``ThreadedMotoServer``), each request it
    answers recorded in ``requests``: its endpoint."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    with _werkzeug_lines(requests):
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@contextmanager
def s3_server() -> Iterator[S3]:
    """moto's S3 on ``127.0.0.1`` (a thread of this process) and the AWS environment pointing
    at it (see the module)."""
    requests: list[tuple[str, int]] = []
    with _threaded(requests) as endpoint, _aws_env(endpoint):
        yield S3(endpoint, requests)


@contextmanager
def _aws_env(endpoint: str) -> Iterator[None]:
    mp = pytest.MonkeyPatch()
    try:
        for name in _HIDDEN:
            mp.delenv(name, raising=False)
        nowhere = str(Path(os.devnull))
        mp.setenv("AWS_CONFIG_FILE", nowhere)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", nowhere)
        mp.setenv("AWS_ENDPOINT_URL", endpoint)
        mp.setenv("AWS_ACCESS_KEY_ID", DUMMY_KEY)
        mp.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_KEY)
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask an instance for keys
        fresh_clients()
        yield
    finally:
        fresh_clients()
        mp.undo()
