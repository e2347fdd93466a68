"""Synthetic claims in HealthFC's CSV schema (made up, no real row), and a deterministic reply to
each: for the tests that run HealthFC at its published size (750 claims) without its licensed
file."""

from __future__ import annotations

import csv
import random
import zlib
from pathlib import Path

#: HealthFC's columns (``Datensatz.csv``) and its published label counts (label code, count)
COLUMNS = ("en_claim", "en_explanation", "en_top_sentences", "de_claim", "de_explanation",
           "de_top_sentences", "label", "de_verdict", "de_title", "authors", "date", "url")
COUNTS = ((0, 202), (1, 423), (2, 125))
WORDS = ("tea coffee zinc vitamin exercise sleep sugar salt garlic honey fasting yoga massage "
         "probiotics magnesium omega melatonin aspirin ginger turmeric walking sauna cold "
         "pressure pain memory weight heart skin joints colds migraine anxiety").split()
LABELS = ("SUPPORTED", "NOT ENOUGH INFORMATION", "REFUTED")


def healthfc_csv(path: Path, n: int = 750, seed: int = 0) -> Path:
    """``n`` made-up claims in HealthFC's schema, labels in its published proportions."""
    rng = random.Random(seed)
    codes = [code for code, count in COUNTS for _ in range(round(count * n / 750))]
    codes = (codes + [1] * n)[:n]
    rng.shuffle(codes)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for i, code in enumerate(codes):
            a, b = rng.sample(WORDS, 2)
            claim = f"Claim {i + 1}: does {a} help against {b}?"
            text = " ".join(rng.choice(WORDS) for _ in range(30)) + "."
            writer.writerow({
                "en_claim": claim, "en_explanation": text, "en_top_sentences": text[:80],
                "de_claim": claim, "de_explanation": text, "de_top_sentences": text[:80],
                "label": code, "de_verdict": "", "de_title": f"Titel {i + 1}",
                "authors": "test", "date": "2024-01-01", "url": f"https://example.org/{i + 1}",
            })
    return path


def verdict_reply(text: str) -> str:
    """A reply with a label that depends only on the claim's text (the same in every process)."""
    return f"{LABELS[zlib.crc32(text.encode()) % 3]}. The evidence is mixed."
