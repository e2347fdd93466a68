"""One shard's process of ``med-evals run``: Inspect's command line, run in this process as
``python -m inspect_ai`` runs it, with three things more.

``python -m med_evals.commands.shard_process PARENT_PID eval TASK -T shard=2/8 ...``

- **It ends with the command that started it** (pid ``PARENT_PID``): on Linux the kernel sends
  it :data:`ORPHANED` when its parent ends, however it ends (``prctl(PR_SET_PDEATHSIG)``, set
  here before Inspect starts, and kept across nothing else: no ``exec`` follows); elsewhere a
  thread looks at its parent every :data:`WATCH` seconds. Then it stops as Ctrl-C stops
  ``inspect eval`` (each log closed as ``cancelled``, its samples kept for a resume), and if
  that takes more than :data:`GRACE` seconds it is killed. A run killed with SIGKILL used to
  leave its shards running and paying for calls that an immediate re-run paid again.
- **A SIGTERM stops it as Ctrl-C does** (:func:`~med_evals.commands.interrupts.sigterm_as_ctrl_c`),
  and SIGINT has Python's handler even where the command was started with it ignored.
- **An error Inspect prints through its console is printed on stderr too**, as plain text: a
  ``PrerequisiteError`` (a missing API key or base URL, a model Inspect cannot start) ends
  ``inspect eval`` with its message printed through its rich console, which ``--display none``
  (the command's fastest setting) silences: the shard ended with exit 1 and no word of why.

It keeps open what the command handed it (the folder's lock: :mod:`med_evals.commands.lock`),
so the lock is held until the last process of the run has ended.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

#: ``prctl``'s option that sets the signal a process gets when its parent ends (linux/prctl.h)
PR_SET_PDEATHSIG = 1
#: the signal a shard gets when its command ends
ORPHANED = getattr(signal, "SIGUSR1", signal.SIGTERM)
#: seconds an orphaned shard has to close its log as Ctrl-C closes it, before it is killed
GRACE = 60.0
#: seconds between two looks at the parent where the kernel does not send :data:`ORPHANED`
WATCH = 1.0


#: whether :func:`_orphaned` has run: it acts once
_stopping = threading.Event()


def _orphaned(signum: int, frame: FrameType | None) -> None:
    """Stop as one Ctrl-C stops Inspect; killed if still running after :data:`GRACE` s.

    Once only: :data:`ORPHANED` came twice to a shard whose command was killed, and the second
    SIGINT is a second Ctrl-C to Inspect (asyncio's runner raises ``KeyboardInterrupt`` at once,
    click prints "Aborted!") that ends the shard before its log is closed as ``cancelled``
    (found with ``tests/test_run_lock.py``'s killed command, its logs left ``started``)."""
    if _stopping.is_set():
        return
    _stopping.set()
    timer = threading.Timer(GRACE, lambda: os.kill(os.getpid(), signal.SIGKILL))
    timer.daemon = True
    timer.start()
    signal.raise_signal(signal.SIGINT)


def end_with_parent(parent: int) -> None:
    """:data:`ORPHANED` when process ``parent`` ends (at once if it already has)."""
    signal.signal(ORPHANED, _orphaned)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(ORPHANED), 0, 0, 0) != 0:  # pragma: no cover
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    else:  # pragma: no cover - not Linux: look at the parent now and then
        def watch() -> None:
            while os.getppid() == parent:
                threading.Event().wait(WATCH)
            os.kill(os.getpid(), ORPHANED)

        threading.Thread(target=watch, name="med-evals-shard-parent", daemon=True).start()
    if os.getppid() != parent:  # it ended before the signal was set
        os.kill(os.getpid(), ORPHANED)


def plain(message: str) -> str:
    """A message written in rich markup (``[bold]...[/bold]``), as plain text."""
    from rich.errors import MarkupError
    from rich.text import Text

    try:
        return Text.from_markup(message).plain.strip()
    except MarkupError:
        return message.strip()


def main(argv: Sequence[str] | None = None) -> int:
    from med_evals.commands.interrupts import sigterm_as_ctrl_c
    from med_evals.inspect_internals.compat import PrerequisiteError, inspect_main

    args = list(sys.argv[1:] if argv is None else argv)
    parent, inspect_args = int(args[0]), args[1:]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # the signals that stop a shard, delivered whatever mask it inherited (a blocked signal
    # stays blocked across fork and exec): after tests/test_interrupts.py and
    # tests/test_main_job.py in one test process, a run's orphaned shards did not stop on the
    # SIGINT they raised and were killed after GRACE, their logs never closed; unblocked
    # here, they close as cancelled (which earlier state blocked it was not found)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, ORPHANED})
    end_with_parent(parent)
    sys.argv = ["inspect", *inspect_args]
    with sigterm_as_ctrl_c():
        try:
            inspect_main()()
        except PrerequisiteError as ex:
            print(plain(str(getattr(ex, "message", ex))), file=sys.stderr, flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
