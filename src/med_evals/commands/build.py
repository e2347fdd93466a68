"""``med-evals build medreqal``: a MedREQAL-style CSV from Cochrane reviews (the paper's Table 6
prompts, run through Inspect with a model); the work is
:func:`~med_evals.data.builders.medreqal_build.build_medreqal`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from med_evals.outputs.exit_codes import USAGE, CommandError


def model_args(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``-M key=value`` values as model arguments; one without ``=`` is a
    :class:`CommandError` (exit 2)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise CommandError(f"-M expects key=value, not {pair!r}", USAGE)
        out[key] = value
    return out


def build_medreqal_command(source: Sequence[str], model: str, out: str,
                           published_after: str | None = None, log_dir: str | None = None,
                           validation_sheet: int = 0, seed: int = 0, limit: int | None = None,
                           model_arg: Sequence[str] | None = None) -> int:
    """Build the questions into ``out``; a missing source, a bad model or ``-M``, or no
    question built (each record's reason counted, listed in ``skipped.csv``): exit 2."""
    from med_evals.data.builders.medreqal_build import beside, build_medreqal
    from med_evals.inspect_internals.compat import PrerequisiteError

    try:
        result = build_medreqal(
            list(source),
            model,
            out,
            published_after=published_after,
            log_dir=log_dir,
            validation_sheet=validation_sheet,
            seed=seed,
            limit=limit,
            model_args=model_args(model_arg),
        )
    except PrerequisiteError as ex:  # e.g. a provider's package or API key missing
        raise CommandError(str(ex.message), USAGE) from None
    except (OSError, ValueError, RuntimeError) as ex:  # a missing source, a bad model name
        raise CommandError(str(ex), USAGE) from None
    if not result.rows:
        counts = ", ".join(f"{n} {why}" for why, n in result.skipped_counts().items())
        raise CommandError(
            f"no question built: every record was left out ({counts}; listed in "
            f"{beside(result.csv, 'skipped.csv')})",
            USAGE,
        )
    return 0
