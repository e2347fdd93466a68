"""Which files a list of log paths names: folders expanded to the Inspect logs inside them.

Kept apart from :mod:`med_evals.logs` (which reads runs of the studies) so that a task-side tool
(:mod:`med_evals.tasks.counterfactual_export`) can list logs without importing the studies.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from inspect_ai.log import list_eval_logs


class LogPathError(ValueError):
    """A path given as logs that does not exist, or a folder holding no Inspect log."""


def expand_log_paths(paths: Iterable[str | Path], strict: bool = False) -> list[str]:
    """Log files, with directories expanded to the Inspect logs inside them (as local paths:
    Inspect lists them as ``file://`` URIs, which ``Path`` cannot stat).

    With ``strict``, a path that does not exist or a folder without any Inspect log raises
    :class:`LogPathError` naming it."""
    out: list[str] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = [_local(info.name) for info in list_eval_logs(str(p))]
            if strict and not found:
                raise LogPathError(f"{p}: no Inspect log (.eval or .json) in this folder")
            out += found
        elif strict and not p.exists():
            raise LogPathError(f"{p}: no such file or folder")
        else:
            out.append(str(p))
    return out


def _local(name: str) -> str:
    parsed = urlparse(name)
    return url2pathname(parsed.path) if parsed.scheme == "file" else name
