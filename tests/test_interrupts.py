"""A SIGTERM acts as Ctrl-C while a command's runs go (med_evals.commands.interrupts), also in a
process
started with SIGINT ignored (a background job of a script), which dropped it and ran on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from med_evals.commands.interrupts import sigterm_as_ctrl_c

SHOW_SIGINT = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


@pytest.fixture
def sigint_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_sigterm_is_a_ctrl_c_even_where_sigint_was_ignored(sigint_ignored):
    with pytest.raises(KeyboardInterrupt), sigterm_as_ctrl_c():
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0.1)  # let the handler run
        pytest.fail("the SIGTERM did not interrupt")
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_process_started_inside_gets_a_handled_sigint(sigint_ignored):
    """``med-evals run``'s shards: stopped by a SIGINT, which they inherited ignored."""
    def child() -> str:
        return subprocess.run([sys.executable, "-c", SHOW_SIGINT], capture_output=True,
                              text=True, check=True).stdout.strip()

    assert child() == "False"  # the ignore is inherited
    with sigterm_as_ctrl_c():
        assert child() == "True"


def test_a_handler_set_by_someone_else_is_left_alone():
    def mine(signum, frame):  # noqa: ANN001
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with sigterm_as_ctrl_c():
            assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)
