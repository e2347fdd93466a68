"""A stand-in for ``vllm serve``, for tests of what Inspect's vllm provider starts: it records
the command line it was given and answers as an OpenAI-compatible server on the ``--host`` and
``--port`` it was given (tests/support/fake_openai.py), until it is killed.

    python -m tests.support.fake_vllm serve <model> --host H --api-key K --port P [...]

:func:`fake_vllm` puts an executable ``vllm`` that runs this module first on ``PATH``, and an
empty ``vllm`` package first on ``sys.path`` (Inspect checks that vllm imports before it starts
the server), and gives the file the command lines are written to (one JSON list per line).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ARGV_FILE = "FAKE_VLLM_ARGV"


def main(argv: list[str]) -> None:
    from .fake_openai import FakeOpenAIServer

    with open(os.environ[ARGV_FILE], "a", encoding="utf-8") as f:
        f.write(json.dumps(argv) + "\n")
    model = argv[1]
    host = argv[argv.index("--host") + 1]
    port = int(argv[argv.index("--port") + 1])
    with FakeOpenAIServer(model=model, host=host, port=port):
        while True:
            time.sleep(60)


@contextmanager
def fake_vllm(tmp: Path) -> Iterator[Path]:
    """``vllm`` on ``PATH`` and importable, both this stand-in; yields the command-line file."""
    root = Path(__file__).resolve().parents[2]
    bin_dir, pkg_dir = tmp / "bin", tmp / "pkg"
    (pkg_dir / "vllm").mkdir(parents=True)
    (pkg_dir / "vllm" / "__init__.py").write_text('"""The tests\' stand-in for vLLM."""\n')
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} -m tests.support.fake_vllm \"$@\"\n")
    exe.chmod(0o755)
    argv_file = tmp / "vllm-argv.jsonl"
    argv_file.write_text("")
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        mp.setenv("PYTHONPATH", os.pathsep.join(
            [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]))
        mp.setenv(ARGV_FILE, str(argv_file))
        mp.delenv("VLLM_BASE_URL", raising=False)
        mp.syspath_prepend(str(pkg_dir))
        sys.modules.pop("vllm", None)
        yield argv_file
    finally:
        mp.undo()
        sys.modules.pop("vllm", None)


if __name__ == "__main__":
    main(sys.argv[1:])
