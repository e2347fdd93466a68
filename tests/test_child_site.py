"""The processes a test starts run without the ``anthropic`` package (tests/conftest.py,
``_children_without_anthropic``), the test process and a marked test's processes with it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

FIND = "import importlib.util; print(importlib.util.find_spec('anthropic') is not None)"


def _child_finds_anthropic() -> bool:
    out = subprocess.run([sys.executable, "-c", FIND], capture_output=True, text=True,
                         check=True).stdout
    return out.strip() == "True"


def test_the_processes_a_test_starts_do_not_find_anthropic():
    assert importlib.util.find_spec("anthropic") is not None  # installed: the test process has it
    assert not _child_finds_anthropic()
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run([sys.executable, "-c", "import anthropic"], capture_output=True,
                       check=True)


@pytest.mark.children_with_anthropic
def test_a_marked_tests_processes_find_it():
    assert _child_finds_anthropic()
