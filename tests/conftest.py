"""Shared test fixtures: offline mock models and the shared dataset copies."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from inspect_ai.model import ModelOutput, ModelUsage

from med_evals.data.datasets import git_blob_sha1_of, sha256_of

# the test processes share the cores (pytest-xdist: one per core): torch (BERTScore, the
# embedded model) runs one thread per process, as a thread of its own waiting for a core the
# other process holds stalls the rest at each of its joins; idle OpenMP threads sleep instead of
# spinning (as the embedded runtime sets it when it imports torch first: docs/models.md)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# a user's own subsets (`med-evals subset make`) are read before the stored ones: the tests
# read an empty folder of their own, never the user data folder of whoever runs them
os.environ.setdefault("MED_EVALS_SUBSET_DIR", tempfile.mkdtemp(prefix="med-evals-subsets-"))


def _quiet_consoles_render_nothing() -> None:
    """A quiet rich console (``Console(quiet=True)``, what Inspect's ``display="none"`` makes
    of the console) prints nothing, but rich renders every renderable before it discards it:
    for an in-process eval, Inspect's final results panel, every metric of every scorer laid
    out in nested tables (a fifth of the CPU of the replay-heavy test files: 116-124 s with it,
    94 s without, ``tests/test_recorded_metrics.py``, ``test_shards.py`` and
    ``scorers/test_metric_epochs.py`` in one process). Here a quiet console's ``print`` returns
    at once: what reaches a stream is the same (nothing). The commands the tests run in a
    subprocess render as a user's do."""
    import rich.console

    render_and_print = rich.console.Console.print

    def print_unless_quiet(self: rich.console.Console, *args, **kwargs) -> None:
        if not self.quiet:
            render_and_print(self, *args, **kwargs)

    rich.console.Console.print = print_unless_quiet  # type: ignore[method-assign]


_quiet_consoles_render_nothing()

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


#: the files that load torch models (the embedded model, BERTScore's encoder): one worker runs
#: them all, so torch, transformers and the models are imported and loaded in one process only
TORCH_FILES = frozenset({
    "tests/models/test_embedded.py",
    "tests/test_main_job.py",
    "tests/tasks/test_medreqal.py",
    "tests/tasks/test_healthfc.py",
    "tests/scorers/test_generation.py",
})
TORCH_SCOPE = "torch models"


def scope_of(nodeid: str) -> str:
    """The unit pytest-xdist hands a test to: its file, or all of :data:`TORCH_FILES`."""
    path = nodeid.split("::", 1)[0]
    return TORCH_SCOPE if path in TORCH_FILES else path


def pytest_collection_modifyitems(config, items) -> None:
    """The units with the most slow tests run first (otherwise in collection order): each unit
    goes to one worker (:func:`pytest_xdist_make_scheduler`), so the long ones start early and
    the short ones fill the end, instead of a long one starting last while the other worker
    idles."""
    slow = Counter(scope_of(item.nodeid) for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[scope_of(item.nodeid)])  # a stable sort


def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's ``--dist loadfile`` with :data:`TORCH_FILES` as one unit, and the units in
    the order :func:`pytest_collection_modifyitems` left them (xdist would otherwise reorder
    them by their number of tests)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class TorchTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    config.option.loadscopereorder = False
    return TorchTogether(config, log)


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


#: put first on the PYTHONPATH of the processes a test starts: ``anthropic`` not importable there
CHILD_SITE = Path(__file__).parent / "support" / "child_site"


@pytest.fixture(autouse=True)
def _children_without_anthropic(monkeypatch, request):
    """The Python processes a test starts (``inspect``, ``med-evals``, shards) run as in an
    install without the ``anthropic`` extra (``tests/support/child_site/sitecustomize.py``:
    Inspect imports that package for every sample wherever it is installed, about 1.8 s of each
    process; none of them calls an Anthropic model). The test process itself keeps it."""
    if request.node.get_closest_marker("children_with_anthropic"):
        return
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(CHILD_SITE), *filter(None, [os.environ.get("PYTHONPATH")])]))
