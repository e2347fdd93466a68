"""Helpers shared by the tests."""

import contextlib
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

#: the ``inspect`` command of the environment the tests run in (for subprocesses)
INSPECT = str(Path(sys.executable).parent / "inspect")


def free_port() -> int:
    """A TCP port nothing listens on (bound, then released): for a server that takes no port 0
    (``inspect view``, moto's)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: bootstrap resamples for the regression gate in tests, fewer than ``med-evals regress``'s
#: default 1,000: no decision the tests make hangs on the interval's last digit
#: (``test_n_boot_is_an_option`` checks the default)
N_BOOT = 200
#: the same, as ``med-evals regress`` arguments
NB = ("--n-boot", str(N_BOOT))


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail with ``TimeoutError`` (raised in the main thread by ``SIGALRM``) instead of hanging
    past ``seconds``: for a test of something that used to hang."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
