"""A SIGTERM stops a command's runs as Ctrl-C does, in any process that runs them.

``kill``, ``timeout`` and a job scheduler's time limit send SIGTERM, whose default ends the
process at once and leaves every log ``started``. While :func:`sigterm_as_ctrl_c` is active a
SIGTERM raises SIGINT instead: Inspect cancels its runs and closes each log as ``cancelled``
(``asyncio.run`` turns the first SIGINT into the cancellation of its main task), and a command
waiting on processes of its own gets ``KeyboardInterrupt`` and stops them.

That SIGINT must reach Python's handler. A process started with SIGINT ignored (a background
job of a non-interactive shell: ``med-evals compare ... &`` in a batch script) would drop it and
run on, and the processes it starts would inherit the ignore: so SIGINT has Python's default
handler while the block runs (a process started inside inherits the default action, which
Python turns into its handler), and its earlier setting afterwards.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While the block runs, a SIGTERM raises SIGINT, and SIGINT has Python's default handler
    (see the module's docstring). A SIGTERM handler someone else set is left alone, as is a
    call from a thread other than the main one (only it can set handlers)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    sigint = signal.getsignal(signal.SIGINT)
    if sigint in (signal.SIG_IGN, signal.SIG_DFL, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if sigint in (signal.SIG_IGN, signal.SIG_DFL):
            signal.signal(signal.SIGINT, sigint)
