"""``med-evals fetch cochrane``: PubMed XML of the Cochrane reviews published in a date range,
through NCBI's E-utilities, for ``med-evals build medreqal``; the work is
:func:`~med_evals.data.builders.eutils.fetch_cochrane` (resumable: a batch already there is
kept)."""

from __future__ import annotations

from med_evals.outputs.exit_codes import FAILED, USAGE, CommandError


def fetch_cochrane_command(start: str, end: str, out: str, base_url: str | None = None,
                           api_key: str | None = None, email: str | None = None,
                           batch_size: int = 200, progress: bool = True,
                           timeout: float | None = None, retries: int | None = None) -> int:
    """Fetch (or resume) every batch into ``out``; a bad date or range, or an ``out`` that
    cannot be written: exit 2; the source still failing after its retries: exit 1."""
    from med_evals.data.builders.eutils import EUtilsError, fetch_cochrane

    try:
        summary = fetch_cochrane(
            start,
            end,
            out,
            base_url=base_url,
            api_key=api_key,
            email=email,
            batch_size=batch_size,
            progress=progress,
            timeout=timeout,
            retries=retries,
        )
    except ValueError as ex:  # a bad date or range
        raise CommandError(str(ex), USAGE) from None
    except EUtilsError as ex:
        raise CommandError(f"{ex} (rerun the same command to resume)", FAILED) from None
    except OSError as ex:  # --out cannot be written
        raise CommandError(f"cannot write under {out}: {ex}", USAGE) from None
    again = f", {summary['refetched']} fetched again" if summary["refetched"] else ""
    print(
        f"{summary['pmids']} PMIDs in {summary['batches']} batches under {out} "
        f"({summary['fetched']} fetched, {summary['reused']} already there{again})"
    )
    return 0
