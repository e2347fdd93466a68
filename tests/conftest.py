"""Shared test fixtures: offline mock models and the shared dataset copies."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from inspect_ai.model import ModelOutput, ModelUsage

from med_evals.data import git_blob_sha1_of, sha256_of

# the test processes share the cores (pytest-xdist: one per core): OpenMP's idle threads in
# torch (BERTScore, the embedded model) sleep instead of spinning on a core another process
# needs, as the embedded runtime sets it when it imports torch first (docs/models.md)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "datasets" / "fixtures"
SHARED_DATASETS = Path(os.environ.get("MED_EVALS_SHARED_DATA", REPO.parent / "shared" / "datasets"))


def install_dataset(tmp: Path, monkeypatch, name: str, files: dict[str, Path]) -> Path:
    """Lay ``files`` (manifest name -> source) out as dataset ``name`` in a data directory,
    behind a manifest that pins their checksums, and point the loader at both.

    Returns the dataset's folder in the data directory.
    """
    data = tmp / "data" / name
    data.mkdir(parents=True)
    for target, source in files.items():
        shutil.copy(source, data / target)
    manifests = tmp / "manifests"
    manifests.mkdir()
    manifest = {
        "name": name,
        "local_dir": name,
        "revision": "fixture",
        "source": {"repository": "tests"},
        "license": "test fixture",
        "files": {
            t: {"sha256": sha256_of(data / t), "git_blob_sha1": git_blob_sha1_of(data / t)}
            for t in files
        },
    }
    (manifests / f"{name}.yaml").write_text(yaml.safe_dump(manifest))
    monkeypatch.setenv("MED_EVALS_MANIFEST_DIR", str(manifests))
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(tmp / "data"))
    return data


def mock_output(text: str | None, model: str = "mockllm/model") -> ModelOutput:
    """A mock reply that carries ``usage`` (offline, mockllm would fetch a tokenizer)."""
    out = ModelOutput.from_content(model=model, content=text or "")
    out.usage = ModelUsage(input_tokens=10, output_tokens=1, total_tokens=11)
    return out


def replying(fn: Callable[[str], str | None]) -> Callable:
    """A ``custom_outputs`` callable for mockllm: reply = fn(last user message text)."""

    def outputs(input, tools, tool_choice, config) -> ModelOutput:  # noqa: A002
        return mock_output(fn(input[-1].text))

    return outputs


def pytest_collection_modifyitems(config, items) -> None:
    """Files that hold slow tests run first (otherwise in collection order): pytest-xdist's
    ``--dist loadfile`` gives each file to one worker, so the long files start early and the
    short ones fill the end, instead of a long file starting last while the other worker idles."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # a stable sort


@pytest.fixture
def shared_datasets() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"shared dataset copies not found at {SHARED_DATASETS}")
    return SHARED_DATASETS


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path_factory):
    """No test reads the user's data or cache directories, and a run without ``log_dir`` logs
    under pytest's temporary folder (Inspect's default is ``./logs``)."""
    monkeypatch.delenv("MED_EVALS_DATA_DIR", raising=False)
    monkeypatch.setenv("MED_EVALS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path_factory.mktemp("logs")))
