"""The MedEvidence fixture, installed behind a manifest that pins its checksum."""

from __future__ import annotations

from pathlib import Path

from .conftest import FIXTURES, install_dataset

FIXTURE_JSONL = FIXTURES / "medevidence_fixture.jsonl"


def install_medevidence(tmp: Path, monkeypatch, jsonl: Path = FIXTURE_JSONL) -> Path:
    return install_dataset(tmp, monkeypatch, "medevidence", {"manual_250-abstract.jsonl": jsonl})
