"""The wheel carries the runtime data (manifests, subsets) and no test-only code, and finds its
data from an installed copy outside the checkout. (.ci/run installs the wheel into a fresh
virtual environment and runs a task with it.)"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DATA = REPO / "src" / "med_evals" / "manifests"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a clean copy of the sources (setuptools' build/ folder keeps stale files)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO / "src", src / "src", ignore=junk)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         str(src), "-w", str(out)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    [whl] = out.glob("med_evals-*.whl")
    return whl


def test_wheel_ships_manifests_and_subsets_not_test_servers(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = sorted(PACKAGE_DATA.rglob("*.yaml"))
    assert len(data) >= 5 + 6  # five manifests, six stored subsets at least
    for path in data:
        assert f"med_evals/{path.relative_to(REPO / 'src' / 'med_evals')}" in names
    assert not [n for n in names if "devtools" in n or n.startswith(("tests/", "bench/"))]
    assert not [n for n in names if "fixtures" in n or n.startswith("datasets/")]


def test_installed_copy_reads_its_own_data_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import med_evals, sys\n"
        "from med_evals.data import load_manifest, manifest_dir\n"
        "from med_evals.subsets import load_subset\n"
        f"assert med_evals.__file__.startswith({str(site)!r}), med_evals.__file__\n"
        f"assert str(manifest_dir()).startswith({str(site)!r})\n"
        "print(load_manifest('medreqal').revision, len(load_subset('oncology_rct', 'smoke').ids))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MED_EVALS_")}
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    revision, n = out.stdout.split()
    assert len(revision) == 40 and n == "20"

