"""``med-evals fetch cochrane`` and ``med-evals build medreqal``: argument parsing only; the work
is done by :func:`~med_evals.data.builders.eutils.fetch_cochrane` and
:func:`~med_evals.data.builders.medreqal_build.build_medreqal`, which the tests call directly."""

from __future__ import annotations

import argparse
from typing import Any


def _fetch_cochrane(args: argparse.Namespace) -> int:
    from med_evals.data.builders.eutils import EUtilsError, fetch_cochrane
    from med_evals.outputs.exit_codes import FAILED, USAGE, CommandError

    try:
        summary = fetch_cochrane(
            args.start,
            args.end,
            args.out,
            base_url=args.base_url,
            api_key=args.api_key,
            email=args.email,
            batch_size=args.batch_size,
            progress=not args.no_progress,
            timeout=args.timeout,
            retries=args.retries,
        )
    except ValueError as ex:  # a bad date or range
        raise CommandError(str(ex), USAGE) from None
    except EUtilsError as ex:
        raise CommandError(f"{ex} (rerun the same command to resume)", FAILED) from None
    except OSError as ex:  # --out cannot be written
        raise CommandError(f"cannot write under {args.out}: {ex}", USAGE) from None
    again = f", {summary['refetched']} fetched again" if summary["refetched"] else ""
    print(
        f"{summary['pmids']} PMIDs in {summary['batches']} batches under {args.out} "
        f"({summary['fetched']} fetched, {summary['reused']} already there{again})"
    )
    return 0


def _model_args(pairs: list[str] | None) -> dict[str, Any]:
    from med_evals.outputs.exit_codes import USAGE, CommandError

    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise CommandError(f"-M expects key=value, not {pair!r}", USAGE)
        out[key] = value
    return out


def _build_medreqal(args: argparse.Namespace) -> int:
    from med_evals.data.builders.medreqal_build import beside, build_medreqal
    from med_evals.inspect_internals.compat import PrerequisiteError
    from med_evals.outputs.exit_codes import USAGE, CommandError

    try:
        result = build_medreqal(
            args.source,
            args.model,
            args.out,
            published_after=args.published_after,
            log_dir=args.log_dir,
            validation_sheet=args.validation_sheet,
            seed=args.seed,
            limit=args.limit,
            model_args=_model_args(args.M),
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


def add_builder_commands(sub: Any) -> None:
    """Register ``fetch`` and ``build`` on the ``med-evals`` subparsers."""
    p = sub.add_parser("fetch", help="download source records for a dataset builder")
    kinds = p.add_subparsers(dest="fetch_command", required=True)
    q = kinds.add_parser(
        "cochrane", help="PubMed XML of Cochrane reviews published in a date range (E-utilities)"
    )
    q.add_argument("--from", dest="start", required=True, help="first publication date, ISO")
    q.add_argument("--to", dest="end", required=True, help="last publication date, ISO")
    q.add_argument("--out", required=True, help="directory for the XML batches (resumable)")
    q.add_argument("--base-url", default=None, help="E-utilities base URL (default: NCBI's)")
    q.add_argument("--api-key", help="NCBI API key (default $NCBI_API_KEY): 10 requests/s, not 3")
    q.add_argument("--email", help="contact address sent to NCBI with each request")
    q.add_argument("--batch-size", type=int, default=200, help="PMIDs per efetch (default 200)")
    q.add_argument(
        "--timeout", type=float, default=None, help="seconds to wait for each reply (default 30)"
    )
    q.add_argument(
        "--retries", type=int, default=None, help="retries of a failed request (default 5)"
    )
    q.add_argument("--no-progress", action="store_true", help="no progress bar")
    q.set_defaults(func=_fetch_cochrane)

    p = sub.add_parser("build", help="build a dataset with a model (runs Inspect tasks)")
    kinds = p.add_subparsers(dest="build_command", required=True)
    q = kinds.add_parser(
        "medreqal", help="MedREQAL-style CSV from Cochrane reviews (Table 6 prompts)"
    )
    q.add_argument(
        "--source", action="append", required=True, help="efetch XML / PubMed page, or a folder"
    )
    q.add_argument("--model", required=True, help="Inspect model, PROVIDER/MODEL")
    q.add_argument("-M", action="append", help="model argument key=value (repeatable)")
    q.add_argument("--out", required=True, help="CSV to write")
    q.add_argument("--published-after", help="only reviews published after this ISO date")
    q.add_argument("--log-dir", help="Inspect log directory (default: Inspect's)")
    q.add_argument(
        "--validation-sheet", type=int, default=0, metavar="N", help="N random rows to check"
    )
    q.add_argument("--seed", type=int, default=0, help="seed of the validation sample")
    q.add_argument("--limit", type=int, help="at most this many reviews (a trial run)")
    q.set_defaults(func=_build_medreqal)
