"""``medreqal -T source=hf``: the Hugging Face copy's layout, loaded offline from a local copy."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from med_evals.data.datasets import DatasetError
from med_evals.data.hf import hf_copy, medreqal_file, published_after_rows
from med_evals.tasks.medreqal import medreqal

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "datasets" / "fixtures" / "medreqal_fixture.csv"
REVISION = "7772a8f67465050791c306855d3705060451939e"
CARD = """---
dataset_info:
  features:
  - name: question
    dtype: string
  - name: background
    dtype: string
  - name: objective
    dtype: string
  - name: conclusion
    dtype: string
  - name: verdicts
    dtype: string
  - name: strength
    dtype: string
  - name: label
    dtype: int64
  - name: category
    dtype: string
  splits:
  - name: train
    num_examples: {n}
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
---
# A local stand-in for lavita/MedREQAL (invented rows from the med_evals fixture)
"""


def hf_layout(root: Path, edit=None) -> Path:
    """The Hugging Face copy's layout: a card and ``data/train-*.parquet`` with ``verdicts`` and
    an integer ``label``, in the card's column order."""
    df = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False).rename(
        columns={"verdict": "verdicts"}
    )
    df["label"] = df["label"].astype("int64")
    df = df[
        [
            "question",
            "background",
            "objective",
            "conclusion",
            "verdicts",
            "strength",
            "label",
            "category",
        ]
    ]
    if edit:
        df = edit(df)
    (root / "data").mkdir(parents=True)
    df.to_parquet(root / "data" / "train-00000-of-00001.parquet", index=False)
    (root / "README.md").write_text(CARD.format(n=len(df)), encoding="utf-8")
    return root


@pytest.fixture
def manifest(tmp_path, monkeypatch):
    # the tests of the Hugging Face copy need `datasets` (imported here, not when collected)
    pytest.importorskip("datasets")

    def install(repo: Path) -> None:
        manifests = tmp_path / "manifests"
        manifests.mkdir()
        spec = {
            "name": "medreqal",
            "revision": "test",
            "source": {"repository": "tests"},
            "license": "test",
            "files": {"MedREQAL.csv": {"sha256": "0" * 64}},
            "hf": {"repo": str(repo), "revision": REVISION, "split": "train"},
        }
        (manifests / "medreqal.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
        monkeypatch.setenv("MED_EVALS_MANIFEST_DIR", str(manifests))
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")

    return install


def test_source_hf_loads_the_copy(tmp_path, manifest) -> None:
    manifest(hf_layout(tmp_path / "hf"))
    path, provenance = hf_copy("medreqal")
    assert provenance["origin"] == "huggingface" and provenance["revision"] == REVISION
    task = medreqal(source="hf", bertscore=False)
    assert len(task.dataset) == 12
    first = task.dataset[0]
    assert first.target == "SUPPORTED"
    assert first.metadata["reference"]["category"] == "cognitive and mental health"
    assert task.metadata["data"]["repository"].endswith("hf")
    # exported once; the second load reads the cached CSV
    assert hf_copy("medreqal")[0] == path


def test_source_hf_gets_the_csv_checks(tmp_path, manifest) -> None:
    def disagree(df: pd.DataFrame) -> pd.DataFrame:
        df.loc[2, "verdicts"] = "SUPPORTED"  # its label code says NOT ENOUGH INFORMATION
        return df

    manifest(hf_layout(tmp_path / "hf", disagree))
    with pytest.raises(DatasetError, match="row 3, column 'verdict'"):
        medreqal(source="hf", bertscore=False)


def test_source_choices(tmp_path, manifest) -> None:
    manifest(tmp_path / "nothing-here")
    with pytest.raises(ValueError, match="source= must be one of github, hf"):
        medreqal_file("gitlab", "medreqal", "MedREQAL.csv", None, None)
    with pytest.raises(ValueError, match="leave out -T data_file"):
        medreqal_file("hf", "medreqal", "MedREQAL.csv", None, str(FIXTURE))
    with pytest.raises(DatasetError, match="could not load the Hugging Face dataset"):
        hf_copy("medreqal")


def test_published_after_needs_the_date_column() -> None:
    df = pd.DataFrame(
        {"question": ["a", "b", "c"], "publication_date": ["2023-12-31", "2024-01-02", ""]}
    )
    assert list(published_after_rows(df, "2024-01-01", Path("x.csv"))["question"]) == ["b"]
    with pytest.raises(DatasetError, match="needs a 'publication_date' column"):
        published_after_rows(df.drop(columns="publication_date"), "2024-01-01", Path("x.csv"))
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        published_after_rows(df, "January 2024", Path("x.csv"))
    with pytest.raises(DatasetError, match="publication_date"):
        medreqal(data_file=str(FIXTURE), published_after="2024-01-01", bertscore=False)
