"""Which records go into a build: the files and directories named, read as PubMed XML or saved
pages, then one record per review (the latest version), without withdrawn reviews and records
lacking Objectives or Authors' conclusions; every record left out is a :class:`Skipped` with its
reason.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from pathlib import Path

from bs4 import MarkupResemblesLocatorWarning

from med_evals.data.builders.pubmed import (
    DUPLICATE,
    EARLIER_VERSION,
    NO_CONCLUSIONS,
    NO_OBJECTIVES,
    UNREADABLE,
    WITHDRAWN,
    Review,
    Skipped,
    parse_html,
    parse_xml,
)

SUFFIXES = (".xml", ".html", ".htm")


def source_files(paths: Iterable[str | Path]) -> list[Path]:
    """The files named, and the ``.xml``/``.html``/``.htm`` files under the directories named."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix.lower() in SUFFIXES))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"source {p} does not exist")
    return out


def read_file(path: Path) -> list[Review | Skipped]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as ex:
        return [Skipped(UNREADABLE, str(path), detail=str(ex))]
    if "<PubmedArticle" in text:
        return parse_xml(text, str(path))
    if re.search(r"<html|abstract-content|heading-title", text, re.IGNORECASE):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
            return parse_html(text, str(path))
    return [Skipped(UNREADABLE, str(path), detail="no <PubmedArticle> and no PubMed page markup")]


def read_sources(paths: Iterable[str | Path]) -> tuple[list[Review], list[Skipped]]:
    reviews: list[Review] = []
    skipped: list[Skipped] = []
    for f in source_files(paths):
        for item in read_file(f):
            (reviews if isinstance(item, Review) else skipped).append(item)  # type: ignore[arg-type]
    return reviews, skipped


def why_nothing_read(paths: Iterable[str | Path], skipped: list[Skipped], shown: int = 5) -> str:
    """Each source named and why no record came from it, in one line (for the error raised
    when none of the sources holds a readable PubMed record)."""
    reasons: dict[str, list[str]] = {}
    for s in skipped:
        reasons.setdefault(s.source, []).append(s.detail or s.reason)
    parts = []
    for p in map(Path, paths):
        if p.is_dir():
            files = [f for f in p.rglob("*") if f.suffix.lower() in SUFFIXES]
            if not files:
                parts.append(f"{p}/ (no {', '.join(SUFFIXES)} file in it)")
                continue
            bad = [str(f) for f in sorted(files)]
        else:
            bad = [str(p)]
        for f in bad:
            why = reasons.get(f, ["no record"])
            text = why[0][:120] if len(why) == 1 else f"{len(why)} malformed records"
            parts.append(f"{f} ({text})")
    more = f" and {len(parts) - shown} more" if len(parts) > shown else ""
    return "; ".join(parts[:shown]) + more


def select_reviews(reviews: list[Review]) -> tuple[list[Review], list[Skipped]]:
    """One record per PMID and per review (the latest version: highest ``.pubN``, then the later
    date, then the higher PMID), then withdrawn reviews and records lacking Objectives or
    Authors' conclusions are skipped."""
    skipped: list[Skipped] = []
    by_pmid: dict[str, Review] = {}
    for r in reviews:
        if r.pmid in by_pmid:
            skipped.append(
                Skipped(
                    DUPLICATE,
                    r.source,
                    r.pmid,
                    r.review_id,
                    f"also read from {by_pmid[r.pmid].source}",
                )
            )
        else:
            by_pmid[r.pmid] = r
    latest: dict[str, Review] = {}
    for r in by_pmid.values():
        key = r.review_id or f"pmid:{r.pmid}"
        if key not in latest:
            latest[key] = r
            continue
        old, new = sorted(
            (latest[key], r), key=lambda x: (x.version, x.publication_date, int(x.pmid))
        )
        latest[key] = new
        skipped.append(
            Skipped(
                EARLIER_VERSION,
                old.source,
                old.pmid,
                old.review_id,
                f"version {old.version}; kept version {new.version} (PMID {new.pmid})",
            )
        )
    kept: list[Review] = []
    for r in latest.values():
        reason = (
            WITHDRAWN
            if r.withdrawn
            else NO_OBJECTIVES
            if not r.sections.get("objectives")
            else NO_CONCLUSIONS
            if not r.sections.get("conclusions")
            else None
        )
        if reason:
            skipped.append(Skipped(reason, r.source, r.pmid, r.review_id, r.title[:120]))
        else:
            kept.append(r)
    kept.sort(key=lambda r: (r.publication_date, int(r.pmid)))
    return kept, skipped
