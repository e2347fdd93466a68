"""The wheel carries the runtime data (manifests, subsets, the published tables it may ship)
and no test-only code, and finds its data from an installed copy outside the checkout, a
report's published rows included. (.ci/run installs the wheel into a fresh virtual environment
and runs a task and a report with it.)"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # a wheel build and fresh interpreters
PACKAGE_DATA = REPO / "src" / "med_evals" / "data" / "manifests"


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
    # MedREQAL's published tables (CC BY 4.0) ship; the oncology Table 1 (no licence) only as
    # the manifest it is fetched by
    for name in ("medreqal-table2-published.csv", "medreqal-table3-published.csv",
                 "published.yaml"):
        assert f"med_evals/data/published_tables/{name}" in names
    assert "med_evals/data/manifests/oncology-table1.yaml" in names
    assert not [n for n in names if "oncology-table1-published" in n or "table_manuscript" in n]


def test_installed_copy_reads_its_own_data_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import med_evals, sys\n"
        "from med_evals.data.datasets import load_manifest, manifest_dir\n"
        "from med_evals.data.subsets import load_subset\n"
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



def test_installed_copy_reports_the_shipped_published_tables(wheel, tmp_path):
    """A report built by the installed copy, outside the checkout and without any reference
    folder, shows MedREQAL's published rows: they come from the wheel."""
    from inspect_ai.model import get_model

    from med_evals.tasks.medreqal import medreqal
    from tests.conftest import replying

    from .support.evals import inspect_eval

    logs = tmp_path / "logs"
    inspect_eval(
        medreqal(data_file=str(REPO / "datasets/fixtures/medreqal_fixture.csv"), bertscore=False),
        model=get_model("mockllm/a", custom_outputs=replying(lambda t: "LABEL: SUPPORTED.")),
        display="none",
        log_dir=str(logs),
    )
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import med_evals\n"
        "from med_evals.commands.report import build_report\n"
        f"assert med_evals.__file__.startswith({str(site)!r}), med_evals.__file__\n"
        f"r = build_report([{str(logs)!r}], 'report', n_boot=10)\n"
        "print(r.markdown.read_text())\n"
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
    lines = out.stdout.splitlines()
    assert "| Mixtral-8x7B (published) | 62.0 | 34.8 | 21.1 | 85.6 | — | not named in the paper |" \
        in lines
    assert "| gold (published) | 543 | 186 | 2057 | — | — |" in lines
