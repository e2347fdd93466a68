"""The MedEvidence fixture, installed behind a manifest that pins its checksum."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from med_evals.data import sha256_of

from .conftest import FIXTURES

FIXTURE_JSONL = FIXTURES / "medevidence_fixture.jsonl"


def install_medevidence(tmp: Path, monkeypatch, jsonl: Path = FIXTURE_JSONL) -> Path:
    data = tmp / "data" / "medevidence"
    data.mkdir(parents=True)
    shutil.copy(jsonl, data / "manual_250-abstract.jsonl")
    manifests = tmp / "manifests"
    manifests.mkdir()
    manifest = {
        "name": "medevidence",
        "revision": "fixture",
        "source": {"repository": "tests"},
        "license": "test fixture",
        "files": {"manual_250-abstract.jsonl": {"sha256": sha256_of(jsonl)}},
    }
    (manifests / "medevidence.yaml").write_text(yaml.safe_dump(manifest))
    monkeypatch.setenv("MED_EVALS_MANIFEST_DIR", str(manifests))
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(tmp / "data"))
    return data
