"""``med-evals studies``: each study's conditions, headline numbers and metric sets, from the
registry (:data:`med_evals.tasks.STUDIES`); ``--fingerprints``: each study's version and the
fingerprint of what its code does now, beside the recorded one
(:mod:`med_evals.study.fingerprint`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from med_evals.outputs.exit_codes import FAILED, OK, CommandError
from med_evals.tasks import STUDIES

#: how a headline number of ours is marked (a spec's reason may begin with it already)
OURS = "ours"


def whose(headline: Mapping[str, Any]) -> str:
    """``paper``, or ``ours: <why>`` for a headline number of ours (``ours`` alone without a
    reason), never ``ours: ours: ...`` where the spec's reason already begins with ``ours:``."""
    if headline["source"] == "paper":
        return "paper"
    why = str(headline.get("why") or "").strip()
    if why.lower().startswith(f"{OURS}:"):
        why = why[len(OURS) + 1:].strip()
    return f"{OURS}: {why}" if why else OURS


def studies_command(tasks: Sequence[str] = (), as_json: bool = False,
                    fingerprints: bool = False) -> int:
    """Print ``tasks`` (default: every study, in the registry's order); an unknown name is a
    :class:`CommandError` (exit 2). ``fingerprints``: exit 1 when a study's code does something
    other than its recorded fingerprint says."""
    from med_evals.study.fingerprint import catalogue

    names = list(tasks) or list(STUDIES)
    unknown = [n for n in names if n not in STUDIES]
    if unknown:
        raise CommandError(f"{unknown[0]}: not a study (studies: {', '.join(STUDIES)})")
    if fingerprints:
        from med_evals.study.fingerprint import fingerprint

        changed = 0
        for name in names:
            study, now = STUDIES[name], fingerprint(STUDIES[name])
            changed += now != study.fingerprint_recorded
            print(f"{name:14} version {study.version:8} fingerprint {now}"
                  + ("" if now == study.fingerprint_recorded
                     else f"  (recorded: {study.fingerprint_recorded or 'none'})"))
        return FAILED if changed else OK
    found = [catalogue(STUDIES[n]) for n in names]
    if as_json:
        print(json.dumps(found, indent=1))
        return OK
    for c in found:
        print(f"{c['task']}: {c['title']}, version {c['version']}")
        if c["conditions"]:
            print(f"  conditions: {', '.join(c['conditions'])}")
        for h in c["headline"]:
            print(f"  headline {h['name']}: {h['display']} over {h['over']} ({whose(h)})")
        for name, s in c["label sets"].items():
            print(f"  label set {name}: {', '.join(s['labels'])}")
            print(f"    -T metrics=headline logs: {', '.join(s['headline metrics'])}")
            print(f"    -T metrics=full logs:     {', '.join(s['full metrics'])}")
    return OK
