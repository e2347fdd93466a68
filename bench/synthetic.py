"""Synthetic data and replies of realistic size, for benchmarks (no real rows are used).

:func:`medreqal_csv` writes a CSV in MedREQAL's exact schema with the paper's row and label
counts (2,786 rows: 543 SUPPORTED, 186 REFUTED, 2,057 NEI) and texts of typical length, so the
task runs its full path on it (``-T data_file=...``). :func:`verdict_reply` gives a reply of the
length the paper's models wrote (a label line and a few sentences of explanation).
"""

from __future__ import annotations

import csv
import os
import random
from pathlib import Path

#: the shared dataset copies beside a checkout (../shared/datasets)
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def data_dir(given: str | None) -> str:
    """The benches' data folder: ``--data-dir``, else ``$MED_EVALS_DATA_DIR``, else
    :data:`SHARED_DATA`."""
    return given or os.environ.get("MED_EVALS_DATA_DIR") or str(SHARED_DATA)

LABELS = (("SUPPORTED", 0, 543), ("NOT ENOUGH INFORMATION", 1, 2057), ("REFUTED", 2, 186))
CATEGORIES = (
    "cancer",
    "cardiovascular",
    "cognitive and mental health",
    "immune system and infections",
    "pregnancy and childbirth",
    "neonatal care",
    "gastroenterology",
    "endocrinology",
    "musculoskeletal",
    "respiratory",
    "neurology",
    "kidney and urology",
    "public health",
    "dentistry",
)
WORDS = (
    "patients trial randomised evidence treatment placebo outcome risk reduction mortality "
    "quality studies review analysis participants intervention control effect significant "
    "confidence interval adverse events months therapy dose compared usual care children adults "
    "hospital symptoms improvement moderate certainty low high data follow-up primary secondary"
).split()


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def _text(rng: random.Random, sentences: int, words: int) -> str:
    return " ".join(_sentence(rng, rng.randint(words - 5, words + 5)) for _ in range(sentences))


def medreqal_csv(path: Path, seed: int = 0, rows_wanted: int | None = None) -> Path:
    """A synthetic MedREQAL file: 2,786 rows, the paper's label counts, realistic lengths; or
    ``rows_wanted`` rows in the paper's label proportions (10,000 for the peers' scale bench)."""
    rng = random.Random(seed)
    rows = []
    total = sum(count for _, _, count in LABELS)
    for i, (verdict, code, count) in enumerate(LABELS):
        if rows_wanted is not None:  # the last label takes what rounding leaves
            count = (round(rows_wanted * count / total) if i < len(LABELS) - 1
                     else rows_wanted - len(rows))
        for _ in range(count):
            question = _sentence(rng, 14)[:-1] + "?"
            rows.append(
                {
                    "background": _text(rng, 4, 22),
                    "objective": "To assess " + _sentence(rng, 16).lower(),
                    "conclusion": _text(rng, 3, 24),
                    "question": question,
                    "verdict": verdict,
                    "label": code,
                    "strength": rng.choice(("LOW", "MEDIUM", "HIGH")),
                    "category": rng.choice(CATEGORIES),
                }
            )
    rng.shuffle(rows)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def verdict_reply(rng: random.Random) -> str:
    """A reply like the paper's models': a label line and an explanation of ~60 words."""
    label = rng.choice(("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"))
    return f"LABEL: {label}. " + _text(rng, 3, 20)
