"""Versions follow behaviour: a study's fingerprint, and what a study is for ``med-evals studies``.

Each study's spec (:class:`med_evals.study.spec.Study`) is written beside its task
(``tasks/<study>.py``: ``SPEC``) and registered in the papers' order by :mod:`med_evals.tasks`;
this module fingerprints each one's behaviour so that its version follows what it does.

Versioning by behaviour: :func:`fingerprint` hashes what a study *does* on fixed inputs (its
:class:`~med_evals.study.spec.Probe`): the rendered prompts and targets of made-up samples under
every condition and variant, with the generation settings; its parser's labels for a fixed set
of replies under each label set; every number of its full metric set, its headline and its
generation means over fixed score values; its headline definitions; and its dataset pins. A
reflowed docstring or a moved function changes nothing; a changed prompt, parse, number or pin
changes the fingerprint, and ``tests/test_studies.py`` then fails until the version is bumped
and the new fingerprint recorded (``med-evals studies --fingerprints`` prints them).
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from med_evals.data.datasets import load_manifest
from med_evals.scorers.classification import metric_values
from med_evals.study.spec import STUDIES, Probe, Study, plain_numbers


def _number(x: Any) -> Any:
    """A number as the fingerprint sees it (:func:`med_evals.study.spec.plain_numbers`)."""
    return plain_numbers(x)


def behaviour(study: Study) -> list[Any]:
    """What :func:`fingerprint` hashes: the study's behaviour on its probe (see the module's
    docstring), as plain data."""
    probe: Probe = study._part("probe")
    out: list[Any] = [
        ["headline", [(h.name, h.over, h.source) for h in study.headline]],
        ["inputs", list(probe.prompts())],
    ]
    for name, label_set in study.label_sets.items():
        args = {study.label_arg: name} if study.label_arg else {}
        values = list(probe.values(name))
        conditions: dict[str, list[Any]] = {}
        for v in values:
            conditions.setdefault(str(v.get("condition", "")), []).append(v)
        numbers = metric_values(
            study.metric_set(True, args), {str(i): v for i, v in enumerate(values)}
        )
        out += [
            ["labels", name, list(label_set.labels)],
            ["parsed", name, [study.parse(r, name) for r in probe.replies]],
            ["values", name, values],
            ["headline_values", name,
             {c: study.headline_values(vs, args) for c, vs in conditions.items()}],
            ["means", name, study.mean_values(values)],
            ["metrics", name, list(numbers.items())],
        ]
    for dataset in study.datasets:
        m = load_manifest(dataset)
        pins = {f: (s.sha256, s.git_blob_sha1) for f, s in sorted(m.files.items())}
        # other pinned sources (the Hugging Face copy of MedREQAL) count too; the published
        # label counts, which only check the data these pins fix, do not (they moved into the
        # manifests after the fingerprints were recorded; expected_rows was hashed from the
        # first fingerprint on and stays)
        extra = {k: v for k, v in m.extra.items() if k != "expected_labels"}
        out.append(["dataset", dataset, m.revision, pins, extra])
    return _number(out)  # type: ignore[no-any-return]


def fingerprint(study: Study) -> str:
    """A hash of :func:`behaviour`: changes exactly when a prompt, parse, number or pin does."""
    text = json.dumps(behaviour(study), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@cache
def fingerprints() -> dict[str, str]:
    return {name: fingerprint(s) for name, s in STUDIES.items()}


def catalogue(study: Study) -> dict[str, Any]:
    """What a study is, from its registered spec (``med-evals studies`` prints it; the README and
    docs name conditions and headline numbers that tests/test_docs.py checks against it): its
    conditions, label sets, headline numbers (what each is over, the paper's or ours) and the
    metrics of each metric set by their registry names."""
    from med_evals.inspect_internals.compat import registry_unqualified_name

    sets: dict[str, Any] = {}
    for name in study.label_sets:
        args = {study.label_arg: name} if study.label_arg else {}
        sets[name] = {
            "labels": list(study.label_sets[name].labels),
            "headline metrics": [registry_unqualified_name(m)
                                 for m in study.metric_set(False, args)],
            "full metrics": [registry_unqualified_name(m) for m in study.metric_set(True, args)],
        }
    return {
        "task": study.task,
        "title": study.title,
        "version": study.version,
        "conditions": list(study.conditions),
        "headline": [{"name": h.name, "display": h.display, "over": h.over,
                      "source": h.source, **({"why": h.why} if h.why else {})}
                     for h in study.headline],
        "label sets": sets,
        "datasets": list(study.datasets),
    }
