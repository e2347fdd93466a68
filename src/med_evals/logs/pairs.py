"""Two runs of a study, sample by sample: which samples they share, where they differ, and what
each sample shows (for the report's "where two runs differ" lists and ``med-evals diff``).

For every two runs of a study on the same samples (per condition) the samples are paired
(:func:`pairs`: the samples both scored, with the same target; runs with different label sets
are not compared) and judged right or wrong by the same function (:func:`correct`: the label
equals the target). :func:`differences` sorts them: right only in A, right only in B (their
counts are McNemar's discordant counts, ``a_only`` and ``b_only`` of
:func:`~med_evals.stats.intervals.mcnemar_exact`, the report's paired comparisons' test) and wrong
in both. Each sample shows its id, the gold label, both labels, the start of the input
(:func:`input_start`: the trial's title, the question or the claim), both replies and, for a
local log, a link opening the sample in Inspect's log viewer (:func:`viewer_url`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from med_evals.logs.files import is_remote, log_folder, log_name
from med_evals.logs.labels import Group, ordered_conditions
from med_evals.logs.runs import Run
from med_evals.solvers import medevidence as medevidence_prompts
from med_evals.solvers import medreqal as verdict_prompts
from med_evals.solvers import oncology_rct as oncology_prompts
from med_evals.stats.intervals import mcnemar_exact
from med_evals.study.spec import Study
from med_evals.tasks import HEALTHFC, MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT

#: samples shown per list (right only in A, right only in B, wrong in both) of each pair
LIMIT = 50
#: characters of a reply shown in a row (the whole reply is behind the toggle in report.html)
REPLY_START = 120
#: characters of the input shown in a row
INPUT_START = 160
#: Inspect's log viewer as ``inspect view`` serves it by default
VIEWER = "http://127.0.0.1:7575"
#: where a study's input holds the text that identifies a sample: the templates around it, each
#: with the field's name, tried in turn (MedEvidence: the question inside the authors' prompt;
#: oncology: the trial's title, in the conditions that show one; MedREQAL and HealthFC: the
#: question or claim inside each prompt variant's instruction, HealthFC's before its evidence).
INPUT_FIELD: dict[str, tuple[tuple[str, str], ...]] = {
    ONCOLOGY_RCT.task: ((oncology_prompts.TITLE_ABSTRACT, "title"),),
    MEDEVIDENCE.task: ((medevidence_prompts.HEADER, "question"),),
    MEDREQAL.task: tuple((t, "question") for t in verdict_prompts.user_templates()),
    HEALTHFC.task: tuple((t, "question") for t in verdict_prompts.user_templates(evidence=True)),
}


def correct(value: Mapping[str, Any]) -> int:
    """1 when the sample's label is its target: the correctness of :func:`paired_rows`'s test."""
    return int(value["prediction"] == value["target"])


def shorten(text: str, n: int) -> str:
    """``text`` on one line (runs of blanks and line breaks as one space), cut to ``n``
    characters with ``…``."""
    one = " ".join(str(text).split())
    return one if len(one) <= n else one[: n - 1].rstrip() + "…"


def input_start(study: Study, text: str, n: int = INPUT_START) -> str:
    """The start of a sample's input: the field :data:`INPUT_FIELD` names where the input
    holds it (a trial's title, MedEvidence's question, MedREQAL's question, HealthFC's claim),
    else the input itself. The study's templates are tried in turn: the first whose text before
    and after the field are both in the input gives the field; else the first whose text before
    it is (the end cut off with the input, :data:`med_evals.logs.runs.INPUT_CHARS`), to the input's
    end."""
    partial = None
    for template, name in INPUT_FIELD.get(study.task, ()):
        found = _field(template, name, text)
        if found is not None and found[1]:
            return shorten(found[0], n)
        if found is not None and partial is None:
            partial = found[0]
    return shorten(text if partial is None else partial, n)


def _field(template: str, name: str, text: str) -> tuple[str, bool] | None:
    """(the field ``name`` of ``template`` in ``text``, whether its end was found): the text
    between the template's words around the field; None where the words before it are not in
    ``text``."""
    before, found, after = template.partition("{" + name + "}")
    before, after = before.rsplit("}", 1)[-1], after.split("{", 1)[0]  # the text around it
    start = text.find(before) if found else -1
    if start < 0:
        return None
    rest = text[start + len(before) :]
    end = rest.find(after) if after else -1
    return (rest[:end], True) if end >= 0 else (rest, not after)


# --- which samples ------------------------------------------------------------------------


@dataclass
class Pair:
    """Two runs (report groups) on one condition's paired samples (``keys``, sorted)."""

    a: Group
    b: Group
    condition: str
    keys: list[str]
    va: list[dict[str, Any]]
    vb: list[dict[str, Any]]


def pairs(study: Study, groups: Sequence[Group]) -> list[Pair]:
    """Every two runs and each condition they share, paired as
    :func:`~med_evals.commands.report.tables.paired_rows` pairs them: the samples both scored with
    the same target; runs whose label sets differ are not compared."""
    out = []
    for a, b in itertools.combinations(groups, 2):
        if study.labels(a.task_args) != study.labels(b.task_args):
            continue
        ca, cb = a.conditions(), b.conditions()
        for cond in ordered_conditions(study, set(ca) & set(cb)):
            keys = [k for k in sorted(set(ca[cond]) & set(cb[cond]))
                    if ca[cond][k]["target"] == cb[cond][k]["target"]]
            if keys:
                out.append(Pair(a, b, cond, keys, [ca[cond][k] for k in keys],
                                [cb[cond][k] for k in keys]))
    return out


@dataclass
class Differences:
    """A pair's samples by correctness: right only in A, right only in B, wrong in both."""

    pair: Pair
    a_only: list[str]
    b_only: list[str]
    both_wrong: list[str]
    #: :func:`mcnemar_exact` on the pair's correctness; None when no sample of either run has
    #: a valid prediction (as :func:`paired_rows`: no test)
    test: dict[str, Any] | None
    #: of the samples wrong in both, those whose two labels differ
    labels_differ: int


def differences(pair: Pair) -> Differences:
    a_only, b_only, both = [], [], []
    for k, x, y in zip(pair.keys, pair.va, pair.vb, strict=True):
        if correct(x) and not correct(y):
            a_only.append(k)
        elif correct(y) and not correct(x):
            b_only.append(k)
        elif not correct(x):
            both.append(k)
    test = None
    if any(v["valid"] for v in pair.va + pair.vb):
        test = mcnemar_exact([correct(v) for v in pair.va], [correct(v) for v in pair.vb])
    a_vals, b_vals = dict(zip(pair.keys, pair.va, strict=True)), dict(
        zip(pair.keys, pair.vb, strict=True))
    differ = sum(a_vals[k]["prediction"] != b_vals[k]["prediction"] for k in both)
    return Differences(pair, a_only, b_only, both, test, differ)


# --- what each sample shows ---------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A sample's reply as the log holds it (:attr:`med_evals.logs.runs.Run.samples`)."""

    text: str
    #: the whole reply's length (``text`` may be cut: :data:`med_evals.logs.runs.REPLY_CHARS`)
    chars: int
    epoch: int
    epochs: int

    def short(self, n: int = REPLY_START) -> str:
        prefix = f"[epoch {self.epoch}/{self.epochs}] " if self.epochs > 1 else ""
        return prefix + (shorten(self.text, n) if self.text.strip() else "(no reply)")

    def full(self) -> str:
        more = self.chars - len(self.text)
        return self.text + (f"\n… ({more:,} more characters in the log)" if more > 0 else "")


@dataclass(frozen=True)
class SampleRow:
    sample: str
    gold: str
    label_a: str
    label_b: str
    input: str
    reply_a: Reply | None
    reply_b: Reply | None
    #: the sample in Inspect's log viewer (None: the log is not local, or has no samples)
    view_a: str | None
    view_b: str | None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sample": self.sample, "gold": self.gold,
                               "label_a": self.label_a, "label_b": self.label_b,
                               "input": self.input}
        for side, reply, view in (("a", self.reply_a, self.view_a),
                                  ("b", self.reply_b, self.view_b)):
            out[f"reply_{side}"] = reply.text if reply else None
            out[f"reply_{side}_chars"] = reply.chars if reply else None
            out[f"epoch_{side}"] = reply.epoch if reply else None
            out[f"epochs_{side}"] = reply.epochs if reply else None
            out[f"view_{side}"] = view
        return out


def origins(group: Group) -> dict[str, Run]:
    """sample id -> the run whose value the group kept (the newest log: runs are oldest first,
    as :func:`~med_evals.logs.labels.group_runs` merges them)."""
    out: dict[str, Run] = {}
    for run in group.runs:
        for sid in run.values:
            out[sid] = run
    return out


def viewer_folder(runs: Iterable[Run]) -> str | None:
    """The folder ``inspect view --log-dir`` is given for the links: the deepest folder
    holding every local log (absolute, no ``..``: the viewer refuses those); None when no log
    is local."""
    folders = [log_folder(r.path) for r in runs if not is_remote(r.path)]
    return os.path.commonpath(folders) if folders else None


def viewer_url(run: Run, sample: str, epoch: int, root: str | None) -> str | None:
    """The sample in Inspect's log viewer (``inspect view --log-dir <root>`` on its default
    port): ``#/logs/<log, relative to root>/samples/sample/<id>/<epoch>/``, each part
    percent-encoded, as the viewer builds its own sample links."""
    path = (run.samples.get(sample) or {}).get("log") or run.path  # a shard's own log
    if root is None or is_remote(path):
        return None
    rel = os.path.relpath(os.path.join(log_folder(path), log_name(path)), root)
    path = "/".join(quote(part, safe="") for part in rel.split(os.sep))
    return f"{VIEWER}/#/logs/{path}/samples/sample/{quote(sample, safe='')}/{epoch}/"


def sample_rows(study: Study, pair: Pair, ids: Sequence[str], root: str | None) -> list[SampleRow]:
    """The rows of ``ids`` (samples of ``pair``)."""
    runs_a, runs_b = origins(pair.a), origins(pair.b)
    ca, cb = pair.a.values, pair.b.values
    rows = []
    for sid in ids:
        ra, rb = runs_a[sid], runs_b[sid]
        ta, tb = ra.samples.get(sid), rb.samples.get(sid)
        text = (ta or tb or {}).get("input", "")
        rows.append(SampleRow(
            sid, str(ca[sid]["target"]), str(ca[sid]["prediction"]), str(cb[sid]["prediction"]),
            input_start(study, text) if text else "",
            _reply(ta), _reply(tb),
            viewer_url(ra, sid, ta["epoch"], root) if ta else None,
            viewer_url(rb, sid, tb["epoch"], root) if tb else None,
        ))
    return rows


def _reply(entry: Mapping[str, Any] | None) -> Reply | None:
    if entry is None:
        return None
    return Reply(entry["reply"], entry["reply_chars"], entry["epoch"], entry["epochs"])

def count(n: int, what: str = "sample") -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def shown(count: int, limit: int) -> str:
    """``all shown`` or ``first 50 shown, 70 more``."""
    return "all shown" if count <= limit else f"first {limit} shown, {count - limit:,} more"
