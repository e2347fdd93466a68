"""The oncology fixture dataset, installed behind a manifest that pins its checksum."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import yaml

from med_evals.data import git_blob_sha1_of, sha256_of

from .conftest import FIXTURES

FIXTURE_CSV = FIXTURES / "oncology_trials_fixture.csv"


def install_fixture(tmp: Path, monkeypatch, csv: Path = FIXTURE_CSV) -> Path:
    """Lay ``csv`` out as the oncology dataset in a data dir with a matching manifest."""
    data = tmp / "data" / "oncology-rct-250-counterfactual"
    data.mkdir(parents=True)
    shutil.copy(csv, data / "trials.csv")
    manifests = tmp / "manifests"
    manifests.mkdir()
    manifest = {
        "name": "oncology-rct-250-counterfactual",
        "local_dir": "oncology-rct-250-counterfactual",
        "revision": "fixture",
        "source": {"repository": "tests"},
        "license": "test fixture",
        "files": {
            "trials.csv": {
                "sha256": sha256_of(data / "trials.csv"),
                "git_blob_sha1": git_blob_sha1_of(data / "trials.csv"),
            }
        },
    }
    (manifests / "oncology-rct-250-counterfactual.yaml").write_text(yaml.safe_dump(manifest))
    monkeypatch.setenv("MED_EVALS_MANIFEST_DIR", str(manifests))
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(tmp / "data"))
    return tmp / "data"


def big_fixture_csv(tmp: Path, copies: int = 20) -> Path:
    """A larger corpus in the same schema: the fixture's trials repeated, DOIs made unique."""
    base = pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)
    big = pd.concat([base] * copies, ignore_index=True)
    big["doi"] = [f"{d}.{i}" for i, d in enumerate(big["doi"])]
    big[big.columns[0]] = range(len(big))
    path = tmp / "trials_big.csv"
    big.to_csv(path, index=False)
    return path
