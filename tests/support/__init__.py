"""Helpers shared by the tests."""

import socket
import sys
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
