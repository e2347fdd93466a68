"""Where a verdict sample keeps its reference material: one record in its metadata.

MedREQAL and HealthFC samples carry what their scorers and prompts need besides the question
under one metadata key, :data:`REFERENCE`, as a dict:

- MedREQAL: ``text`` (the review's authors' conclusion), ``category``, ``strength``;
- HealthFC: ``text`` (the claim's explanation), ``url`` and, with ``-T evidence=true``,
  ``evidence`` (the sentences the prompt shows).

One nested record rather than top-level strings: every time Inspect builds a sample's summary
(four times per sample) it shortens each top-level metadata *string* with ``textwrap`` (about
0.2 ms for a 600-character conclusion), while a nested record of under 1 KB is copied as it is
(about 10 microseconds); a longer one is left out of the summary only, never out of the sample
(docs/performance.md). Readers also accept flat metadata (``{"reference": "text", ...}``), so
the scorers work on any dataset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the metadata key holding the reference record
REFERENCE = "reference"


def reference_record(text: str, **fields: str) -> dict[str, dict[str, str]]:
    """Sample metadata holding one reference record: ``{"reference": {"text": ..., **fields}}``."""
    return {REFERENCE: {"text": text, **fields}}


def reference_fields(metadata: Mapping[str, Any] | None, key: str = REFERENCE) -> Mapping[str, Any]:
    """The record under ``key``; flat metadata (no record there) is its own record."""
    metadata = metadata or {}
    record = metadata.get(key)
    return record if isinstance(record, Mapping) else metadata


def reference_text(metadata: Mapping[str, Any] | None, key: str = REFERENCE) -> str:
    """The reference text: the record's ``text``, or a plain string stored under ``key``."""
    value = (metadata or {}).get(key)
    if isinstance(value, Mapping):
        value = value.get("text")
    return str(value or "")
