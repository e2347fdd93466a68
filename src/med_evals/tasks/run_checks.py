"""What every task checks once its samples are built, before Inspect runs any of them.

- A replayed model (``--model replay/<file>``) must have a record for at least one sample of
  the task (:func:`med_evals.models.replay.check_covers`): a recording of another task, or with
  other sample ids, stops the run with one line instead of failing every sample.
- A run of no sample says so. ``--limit 0`` (or a selection that keeps nothing) reaches no code
  of the task: Inspect slices the dataset after building it, runs nothing, writes a log with
  status ``success`` and no results, and exits 0; its ``(0 samples)`` header is the only sign,
  and ``--display none`` hides it. Nothing of ours can stop that run: the task never sees
  ``--limit``, and Inspect catches every exception a hook raises. So the task registers an
  Inspect hook (:class:`NoSampleNotice`) that prints, at the end of the run, one line on stderr
  for each med_evals log that ran no sample. It is registered when a task is first built, not
  when the package is imported: Inspect announces the registered hooks ("hooks enabled") when
  it starts, and this one should not be announced on every run of every Inspect task.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from inspect_ai.dataset import Sample
from inspect_ai.hooks import Hooks, RunEnd, hooks
from inspect_ai.log import EvalLog

from med_evals.models.replay import check_covers

PREFIX = "med_evals/"


def before_run(task: str, samples: Sequence[Sample], model_called: bool = True) -> None:
    """The checks every task makes on its samples (see the module's docstring);
    ``model_called=False`` for a task whose solver never calls the model under evaluation."""
    if model_called:
        check_covers(task, [str(s.id) for s in samples])
    _register_no_sample_notice()


def no_sample_message(log: EvalLog) -> str | None:
    """The line for a finished med_evals log that ran no sample (None for any other log)."""
    spec = log.eval
    if not spec.task.startswith(PREFIX) or log.status != "success":
        return None
    if spec.dataset.sample_ids or (log.results and log.results.total_samples):
        return None
    limit = spec.config.limit
    empty_range = isinstance(limit, list | tuple) and len(limit) == 2 and limit[0] >= limit[1]
    why = f"--limit {limit}" if limit == 0 or empty_range else "no sample selected"
    task = spec.task.removeprefix(PREFIX)
    return f"med_evals: {task}: 0 samples ({why}): nothing was evaluated; log {log.location}"


class NoSampleNotice(Hooks):
    """Prints :func:`no_sample_message` on stderr at the end of a run, whatever the display."""

    async def on_run_end(self, data: RunEnd) -> None:
        for log in data.logs:
            message = no_sample_message(log)
            if message:
                print(message, file=sys.stderr, flush=True)


_registered = False


def _register_no_sample_notice() -> None:
    global _registered
    if not _registered:
        hooks(name="no_sample_notice", description="says when a med_evals run ran no sample")(
            NoSampleNotice
        )
        _registered = True
