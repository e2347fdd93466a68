"""Publication dates as PubMed writes them, to ISO ``YYYY-MM-DD``."""

from __future__ import annotations

import re
from datetime import date, datetime

_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_ISO = re.compile(r"^\s*(\d{4})[-/. ](\d{1,2})(?:[-/. ](\d{1,2}))?\b")
_US = re.compile(r"^\s*(\d{1,2})/(\d{1,2})/(\d{4})\b")
_WORDS = re.compile(r"^\s*(\d{4})(?:\s+([A-Za-z]{3})[a-z]*\.?(?:\s+(\d{1,2})\b)?)?")


def parse_date(text: str) -> str:
    """``2020 May 12``, ``2020 May``, ``2019 Jan-Feb``, ``2020``, ``2020/05/12``, ``2020-05-12``,
    ``05/12/2020`` (month first, as PubMed's ``citation_date``) and ``2020 May 12;5(5):CD0..``
    to ISO; a date without its day or month gets the earliest (so a cut-off test never takes a
    review as later than it may be). ``""`` when there is no date."""
    text = (text or "").strip()
    y = m = d = None
    if match := _ISO.match(text):
        y, m, d = int(match[1]), int(match[2]), int(match[3] or 1)
    elif match := _US.match(text):
        m, d, y = int(match[1]), int(match[2]), int(match[3])
    elif match := _WORDS.match(text):
        y = int(match[1])
        m = _MONTHS.get((match[2] or "").lower(), 1) if match[2] else 1
        d = int(match[3]) if match[3] else 1
    if y is None:
        return ""
    try:
        return date(y, m or 1, d or 1).isoformat()
    except ValueError:
        return ""


def check_iso(value: str | date, what: str = "date") -> str:
    """``value`` as ``YYYY-MM-DD`` (an ISO string, or a date as Inspect parses ``-T x=2024-01-01``),
    else a ValueError naming ``what``."""
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    try:
        return date.fromisoformat(value).isoformat()
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a date as YYYY-MM-DD, not {value!r}") from None
