"""Exit codes of every ``med-evals`` command, and the error a command raises to use one.

One table, here, for the code and the docs (``docs/exit_codes.md`` prints it; ``regress
--help`` shows it too):

====  =========================================================================================
0     done: the command did what was asked (``regress``: every gated metric was tested and
      none regressed)
1     the command ran and what it checked or ran failed: ``regress``, a regression beyond
      sampling noise; ``fetch``, the source still failed after the retries; ``compare``, the
      model's server could not be reached, or a run did not complete; ``run``, a shard did not
      finish; ``report``, some study runs could not be shown (listed)
2     usage or input error, before any work: a bad argument, a missing, empty, unreadable or
      malformed input (log, baseline, table, replay file), an output path that cannot be
      written or that names an input, nothing to work on (an empty folder, no matching log,
      no question built)
3     ``regress``: the gate cannot decide: a run that did not finish, nothing matched the
      baseline, a changed setup, a partial run, a baseline run without a new run, a gated
      metric that could not be tested
====  =========================================================================================

A traceback means a bug in med_evals, never bad input.
"""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
UNDECIDED = 3

TABLE: tuple[tuple[int, str], ...] = (
    (OK, "done (regress: every gated metric tested, none regressed)"),
    (FAILED, "what the command checked or ran failed: regress, a regression beyond sampling "
     "noise; fetch, the source still failed after its retries; compare, the model's server "
     "could not be reached, or a run did not complete; run, a shard did not finish; report, "
     "some study runs could not be shown"),
    (USAGE, "usage or input error, before any work: bad argument; missing, empty, unreadable "
     "or malformed input; output path that cannot be written; nothing to work on"),
    (UNDECIDED, "regress: the gate cannot decide (unfinished run, nothing matched the baseline, "
     "changed setup, partial run, baseline run without a new run, untested gated metric)"),
)


def table_text() -> str:
    """The table as plain text, for ``--help`` epilogs."""
    return "exit codes:\n" + "\n".join(f"  {code}  {what}" for code, what in TABLE)


class CommandError(Exception):
    """A problem a ``med-evals`` command reports as one line on stderr, with ``code``.

    ``med_evals.commands.cli.main`` catches it (and
    :class:`med_evals.inspect_internals.compat.InputError`, code 2) and
    prints ``med-evals <command>: error: <message>``.
    """

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code
