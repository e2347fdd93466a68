"""Run at the start of every Python process a test starts (``tests/conftest.py`` puts this
folder first on the ``PYTHONPATH`` those processes inherit): the ``anthropic`` package is not
importable there, as in an install without the ``anthropic`` extra.

Inspect imports its Anthropic provider, and with it the ``anthropic`` package, for every sample
whenever the package can be found (``inspect_ai.model._assistant_internal``), whatever the
model: about 1.8 s of each ``inspect`` and shard process's start-up on a 2-core machine, and
none of those processes calls an Anthropic model. Tests of the Anthropic provider run inside
the test process, which this does not touch; a test whose processes need the package is
marked ``children_with_anthropic``.
"""

import importlib.machinery
import os
import sys

# importlib.util.find_spec("anthropic") is None, `import anthropic` an ImportError
sys.modules.setdefault("anthropic", None)  # type: ignore[arg-type]

# then the sitecustomize this one shadows, if the interpreter has one
_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.origin:
    with open(_spec.origin, encoding="utf-8") as _f:
        exec(compile(_f.read(), _spec.origin, "exec"), {"__name__": "sitecustomize",  # noqa: S102
                                                        "__file__": _spec.origin})
