"""The studies' tasks, one module per study (and the modules they share).

:func:`discover` imports every module of this package: each ``@task`` registers with Inspect
and each study's spec registers itself (:func:`med_evals.spec.register`, directly or through
:func:`med_evals.tasks.label_study.label_study`), so a new study's module needs no line
anywhere else (CONTRIBUTING.md, "Add a study").
"""

from __future__ import annotations

import importlib
import pkgutil


def discover() -> list[str]:
    """Import every module of this package (the package's one import by name: the modules are
    found on disk, so a new study registers by existing); returns their names."""
    names = [info.name for info in pkgutil.iter_modules(__path__)]
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return names
