"""The oncology study's identifier controls and its trial dates.

The outlook's controls give each trial an identifier that is *not* its own: another trial's DOI
(a seeded derangement, so no trial keeps its own), a synthetic DOI that keeps the real prefix,
journal pattern and year, or an identifier with no relation to any trial.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, datetime

import pandas as pd


def parse_trial_date(value: str) -> date:
    """The dataset's dates are month/day/two-digit-year (``11/20/21``); ISO is accepted too."""
    for fmt in ("%m/%d/%y", "%m/%d/%Y", "%Y-%m-%d"):
        try:
            return datetime.strptime(value.strip(), fmt).date()
        except ValueError:
            continue
    raise ValueError(f"unrecognised date {value!r}")


def seeded_derangement(n: int, seed: int) -> list[int]:
    """A permutation with no fixed point: trial i gets trial perm[i]'s DOI."""
    if n < 2:
        raise ValueError("a derangement needs at least two trials")
    rng = random.Random(seed)
    while True:
        perm = list(range(n))
        rng.shuffle(perm)
        if all(i != p for i, p in enumerate(perm)):
            return perm


_ISSN = re.compile(r"\d{4}-\d{3}[\dX]")
_DIGITS = re.compile(r"\d+")


def synthetic_doi(doi: str, year: int, rng: random.Random, taken: set[str]) -> str:
    """A made-up DOI with the real registrant prefix, journal pattern and year.

    The prefix (``10.xxxx/``), letters, punctuation, ISSNs (``1470-2045``) and digit runs that
    spell the publication year (``21`` or ``2021``) are kept; every other digit is redrawn, so
    ``10.1200/JCO.21.01436`` becomes e.g. ``10.1200/JCO.21.73019``. Never a DOI in ``taken``.
    """
    prefix, slash, suffix = doi.partition("/")
    if not slash:
        raise ValueError(f"not a DOI: {doi!r}")
    keep = {str(year), f"{year % 100:02d}"}
    protected = [m.span() for m in _ISSN.finditer(suffix)]

    def redraw(m: re.Match[str]) -> str:
        run = m.group(0)
        if run in keep or any(a <= m.start() < b for a, b in protected):
            return run
        return "".join(rng.choice("0123456789") for _ in run)

    for _ in range(1000):
        candidate = prefix + "/" + _DIGITS.sub(redraw, suffix)
        if candidate not in taken:
            return candidate
    raise ValueError(f"could not make a synthetic DOI for {doi!r}")


def irrelevant_identifier(rng: random.Random) -> str:
    """An identifier with no relation to any trial (a random 12-hex-digit token)."""
    return "".join(rng.choice("0123456789ABCDEF") for _ in range(12))


@dataclass(frozen=True)
class Controls:
    shuffled_doi: list[str]
    synthetic_doi: list[str]
    identifier: list[str]


def make_controls(df: pd.DataFrame, seed: int) -> Controls:
    dois = df["doi"].tolist()
    perm = seeded_derangement(len(dois), seed)
    rng = random.Random(seed)
    taken = set(dois)
    synthetic = []
    for doi, d in zip(dois, df["date"], strict=True):
        s = synthetic_doi(doi, parse_trial_date(d).year, rng, taken)
        taken.add(s)
        synthetic.append(s)
    return Controls(
        shuffled_doi=[dois[p] for p in perm],
        synthetic_doi=synthetic,
        identifier=[irrelevant_identifier(rng) for _ in dois],
    )
