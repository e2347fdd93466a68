"""Recorded numbers: replayed runs log exactly the metrics recorded for them (first recorded
before the speed-ups of issue 16, so that no speed-up, refactor or move changes a number).

``tests/fixtures/recorded_metrics.json`` holds every logged metric of deterministic runs of
every task: MedREQAL-schema with one and three epochs, HealthFC-schema and the oncology study's
five conditions (recorded with the code as it was without the performance work of issue 16, from
a copy of the tree with those changes reverted), and MedEvidence under both label sets and both
conditions, ``counterfactual_build`` and ``counterfactual_judges`` (both judges, a jury of two),
recorded before the house of issue 42 moved any module. Beside each run's metrics,
``samples/<run>`` holds a digest of every per-sample record (each score's value and answer, the
epoch reductions, the sample and score metadata keys) and the task's metadata keys and
``behaviour``: a move or refactoring changes none of them. The data are synthetic (generated
here from a seed, never rows of a real dataset) and the replies come from a deterministic
function of the prompt: valid labels in several spellings, two labels (invalid), no label, empty
replies and provider failures (``ERROR``), evidence mentions; the graders' likewise.

Each test replays one run and compares every metric with the recorded value to the last digit
(``==`` on the floats; NaN equals NaN), and the metric names too, so a metric can neither change
nor disappear. Regenerate the fixture only for an intended change of a number:
``python -m tests.test_recorded_metrics --write``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import random
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from inspect_ai import Task
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from .conftest import install_dataset
from .support.evals import inspect_eval

RECORDED = Path(__file__).parent / "fixtures" / "recorded_metrics.json"
ONCOLOGY_FIXTURE = (
    Path(__file__).parents[1] / "datasets" / "fixtures" / "oncology_trials_fixture.csv"
)

WORDS = (
    "patients trial randomised evidence treatment placebo outcome risk reduction mortality "
    "quality studies review analysis participants intervention control effect significant "
    "confidence interval adverse events months therapy dose compared usual care children adults"
).split()
CATEGORIES = ("cancer", "Cognitive and mental health", "neonatal care", "public health")
LABEL_CODE = {"SUPPORTED": 0, "NOT ENOUGH INFORMATION": 1, "REFUTED": 2}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def medreqal_csv(path: Path, n: int = 240, seed: int = 1) -> Path:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        verdict = rng.choice(["SUPPORTED"] * 2 + ["REFUTED"] + ["NOT ENOUGH INFORMATION"] * 4)
        rows.append(
            {
                "background": _text(rng, 30),
                "objective": "To assess " + _text(rng, 10).lower(),
                "conclusion": _text(rng, rng.randint(20, 60)),
                "question": f"Q{i}: " + _text(rng, 12)[:-1] + "?",
                "verdict": verdict,
                "label": LABEL_CODE[verdict],
                # a few rows without strength or category: left out of the per-group metrics
                "strength": rng.choice(("LOW", "MEDIUM", "HIGH", "high", "")),
                "category": rng.choice(CATEGORIES + ("",)),
            }
        )
    return _write(path, rows)


def healthfc_csv(path: Path, n: int = 150, seed: int = 2) -> Path:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        verdict = rng.choice(["SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"])
        rows.append(
            {
                "en_claim": f"C{i}: " + _text(rng, 10)[:-1] + "?",
                # some claims have no explanation: left out of ROUGE-L, counted
                "en_explanation": "" if i % 17 == 0 else _text(rng, rng.randint(20, 50)),
                "en_top_sentences": _text(rng, 25),
                "label": LABEL_CODE[verdict],
                "url": f"https://example.org/{i}",
            }
        )
    return _write(path, rows)


def oncology_csv(path: Path, copies: int = 12) -> Path:
    base = pd.read_csv(ONCOLOGY_FIXTURE, dtype=str, keep_default_na=False)
    big = pd.concat([base] * copies, ignore_index=True)
    big["doi"] = [f"{d}.{i}" for i, d in enumerate(big["doi"])]
    big[big.columns[0]] = range(len(big))
    big.to_csv(path, index=False)
    return path


EFFECTS = ("higher", "lower", "no difference", "uncertain effect", "insufficient data")


def medevidence_jsonl(path: Path, reviews: int = 30, seed: int = 3) -> Path:
    """MedEvidence's 250-question schema: reviews, each with questions and source abstracts."""
    rng = random.Random(seed)
    lines = []
    for r in range(reviews):
        sources = [{"article_id": f"8{r:03d}{k}", "content": _text(rng, rng.randint(20, 60)),
                    "title": _text(rng, 6)[:-1], "date": rng.choice(("2001-02-03", ""))}
                   for k in range(rng.randint(1, 3))]
        questions = [{"question_id": q, "question": f"R{r}Q{q}: " + _text(rng, 12)[:-1] + "?",
                      "answer": rng.choice(EFFECTS),
                      "evidence_quality": rng.choice(("high", "moderate", "low", "very low", "")),
                      "fulltext_required": "no", "comment": "",
                      "relevant_sources": [s["article_id"] for s in sources
                                           if rng.random() < 0.7]}
                     for q in range(rng.randint(1, 4))]
        lines.append(json.dumps({"original_review": f"9{r:07d}", "question_data": questions,
                                 "sources": sources}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def effect_reply(text: str, call: int) -> str | None:
    rng = random.Random(_seed(text, call))
    kind = rng.random()
    label = rng.choice(EFFECTS + ("uncertain",))
    if kind < 0.55:
        return f"**Answer**: {label}\n**Rationale**: {_text(rng, 12)}"
    if kind < 0.70:
        return f"<think>{_text(rng, 8)}</think>\n**Answer**: {label.title()}"
    if kind < 0.80:
        return f"Answer: {label}"  # the authors' grading: invalid; lenient: a label
    if kind < 0.88:
        return f"**Answer**: higher or lower\n{_text(rng, 5)}"
    if kind < 0.94:
        return ""
    return None


def _field(prompt: str, name: str) -> str:
    found = re.search(rf"\[{name}\] (.*?)(?:\n\n\[|\n\nReturn)", prompt, re.DOTALL)
    return found.group(1) if found else ""


def rewrite_reply(text: str, call: int) -> str | None:
    """A builder's rewrite of one trial: flips the results, some misbehave (deterministic)."""
    rng = random.Random(_seed(text, call))
    kind = rng.random()
    fields = {k: _field(text, k) for k in ("introduction", "methods", "results", "conclusions")}
    found = re.search(r"Title: (.*)\n", text)
    fields["title"] = found.group(1) if found else ""
    if kind < 0.10:
        return "Sorry, I cannot help with that."
    if kind < 0.15:
        return None
    for k in ("results", "conclusions"):
        t = fields[k]
        if "did not meet" in t or "not significantly" in t:
            t = t.replace("not significantly", "significantly").replace("did not meet", "met")
        else:
            t = t.replace("significantly", "not significantly").replace(" met ", " did not meet ")
        fields[k] = t + ("" if kind < 0.8 else " " + _text(rng, 30))
    if kind > 0.92:
        fields["methods"] = "METHODS: " + _text(rng, 20)
    return json.dumps(fields)


def grader_reply(text: str, call: int) -> str | None:
    """A grader: the flip check's label, a rating or a pick (deterministic in the prompt)."""
    rng = random.Random(_seed(text, call) ^ 0x5EED)
    kind = rng.random()
    if "Edited:" in text or '"edited"' in text:
        pick = rng.choice("AB")
        return rng.choice((f'{{"edited": "{pick}"}}', f"Edited: {pick}", "I cannot tell."))
    if "Rating" in text or '"rating"' in text:
        n = rng.randint(1, 5)
        if kind < 0.1:
            return "No rating."
        return rng.choice((f'{{"rating": {n}, "reason": "{_text(rng, 6)}"}}', f"Rating: {n}"))
    if kind < 0.1:
        return "I cannot tell."
    return "NEGATIVE" if ("did not meet" in text or "not significantly" in text) else "POSITIVE"


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _seed(text: str, call: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{call}|{text}".encode()).digest()[:8], "big")


def verdict_reply(text: str, call: int) -> str | None:
    """A deterministic reply to a prompt (None: the provider fails)."""
    rng = random.Random(_seed(text, call))
    kind = rng.random()
    label = rng.choice(("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"))
    body = _text(rng, rng.randint(15, 50))
    if rng.random() < 0.15:
        body += rng.choice((" A Cochrane review agrees.", " Meta-analyses differ.", " Reviews."))
    if kind < 0.55:
        return f"LABEL: {label}. {body}"
    if kind < 0.70:
        return f"{label.capitalize()}. {body}"
    if kind < 0.78:
        return f"{body} The verdict is: {label.lower()}"
    if kind < 0.84:
        return f"SUPPORTED or REFUTED? {body}"  # two labels: invalid
    if kind < 0.90:
        return body  # no label: invalid
    if kind < 0.95:
        return ""  # no reply: ERROR
    return None


def outcome_reply(text: str, call: int) -> str | None:
    rng = random.Random(_seed(text, call))
    kind = rng.random()
    if kind < 0.70:
        return rng.choice(("POSITIVE", "NEGATIVE"))
    if kind < 0.80:
        return rng.choice((" negative\n", "Positive"))
    if kind < 0.88:
        return "**POSITIVE**"
    if kind < 0.94:
        return ""
    return None


def replay_model(reply: Callable[[str, int], str | None], name: str = "replay") -> Any:
    """mockllm whose reply depends only on the prompt and how often it was asked before."""
    calls: Counter[str] = Counter()

    def outputs(input, tools, tool_choice, config) -> ModelOutput:  # noqa: A002
        text = "\n".join(m.text for m in input)
        calls[text] += 1
        content = reply(text, calls[text])
        if content is None:
            raise RuntimeError("HTTP 500 from provider (replayed)")
        out = ModelOutput.from_content(model=f"mockllm/{name}", content=content)
        out.usage = ModelUsage(input_tokens=100, output_tokens=50, total_tokens=150)
        return out

    return get_model(f"mockllm/{name}", custom_outputs=outputs)


@dataclass(frozen=True)
class Recorded:
    """One recorded run: its task, the model's replies, epochs and the graders' replies."""

    #: the task, built here; or (a task function, its arguments), built by Inspect inside the
    #: run (a task whose scorer binds a model role)
    make: Callable[[], Task] | tuple[Callable[..., Task], dict[str, Any]]
    reply: Callable[[str, int], str | None]
    epochs: int = 1
    #: role -> replies of a grader (a jury: several)
    roles: dict[str, Callable[[str, int], str | None]] = field(default_factory=dict)


def _tasks(tmp: Path, monkeypatch: pytest.MonkeyPatch, metrics: str = "full") -> dict[
        str, Recorded]:
    from med_evals.tasks.counterfactual import counterfactual_build, counterfactual_judges
    from med_evals.tasks.healthfc import healthfc
    from med_evals.tasks.medevidence import medevidence
    from med_evals.tasks.medreqal import medreqal
    from med_evals.tasks.oncology_rct import oncology_rct

    med = medreqal_csv(tmp / "medreqal.csv")
    hfc = healthfc_csv(tmp / "healthfc.csv")
    onc = oncology_csv(tmp / "trials.csv")
    install_dataset(tmp, monkeypatch, "medevidence",
                    {"manual_250-abstract.jsonl": medevidence_jsonl(tmp / "medevidence.jsonl")})
    both = "closed_book,evidence"
    jury = {"grader": grader_reply, "grader_2": lambda t, c: grader_reply(t + "|2", c)}
    return {
        "medreqal": Recorded(
            lambda: medreqal(data_file=str(med), bertscore=False, metrics=metrics),
            verdict_reply),
        "medreqal_3_epochs": Recorded(
            lambda: medreqal(data_file=str(med), bertscore=False, epochs=3, metrics=metrics),
            verdict_reply, 3),
        "healthfc": Recorded(
            lambda: healthfc(data_file=str(hfc), bertscore=False, metrics=metrics),
            verdict_reply),
        "oncology_rct_study": Recorded(
            lambda: oncology_rct(condition="study", trials_file=str(onc), metrics=metrics),
            outcome_reply),
        "medevidence": Recorded(
            lambda: medevidence(condition=both, metrics=metrics), effect_reply),
        "medevidence_three": Recorded(
            lambda: medevidence(condition=both, labels="three", metrics=metrics), effect_reply),
        "counterfactual_build": Recorded(
            (counterfactual_build, {"trials_file": str(onc)}), rewrite_reply,
            roles={"grader": grader_reply}),
        "counterfactual_judges_rate": Recorded(
            (counterfactual_judges, {"judge": "rate", "trials_file": str(onc),
                                     "metrics": metrics}), grader_reply,
            roles=jury),
        "counterfactual_judges_paired": Recorded(
            (counterfactual_judges, {"judge": "paired", "trials_file": str(onc),
                                     "metrics": metrics}),
            grader_reply,
            roles=jury),
    }


def logged_metrics(log: Any) -> dict[str, float]:
    """Every logged metric as ``scorer|reducer|metric key`` -> value."""
    out: dict[str, float] = {}
    for s in log.results.scores:
        for key, m in s.metrics.items():
            out[f"{s.name}|{s.reducer}|{key}"] = m.value
    return out


def _plain(x: Any) -> Any:
    """JSON-ready data: NaN as text (so a digest of it is stable)."""
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def _sha(data: Any) -> str:
    text = json.dumps(_plain(data), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def logged_samples(log: Any) -> dict[str, Any]:
    """Digests of every per-sample record of a log (scores, reductions, metadata keys) and the
    task's metadata keys and recorded behaviour."""
    records = sorted(
        (
            str(s.id), s.epoch,
            {k: [v.value, v.answer, sorted(v.metadata or {})] for k, v in (s.scores or {}).items()},
            sorted(s.metadata or {}),
        )
        for s in log.samples
    )
    reductions = sorted(
        (r.scorer, r.reducer or "", str(x.sample_id), x.value, x.answer)
        for r in log.reductions or [] for x in r.samples
    )
    metadata = log.eval.metadata or {}
    return {
        "n": len(records),
        "samples": _sha(records),
        "reductions": _sha(reductions),
        "metadata_keys": sorted(metadata),
        "behaviour": _sha(metadata.get("behaviour")),
    }


def replay(run: str, tmp: Path, monkeypatch: pytest.MonkeyPatch, metrics: str = "full",
           samples: bool = True) -> tuple[dict[str, float], dict[str, Any] | None]:
    """The run's logged metrics, and with ``samples`` the digests of its sample records."""
    r = _tasks(tmp, monkeypatch, metrics)[run]
    task, task_args = r.make if isinstance(r.make, tuple) else (r.make(), None)
    [log] = inspect_eval(
        task,
        task_args=task_args or {},
        model=replay_model(r.reply),
        model_roles={role: replay_model(fn, role) for role, fn in r.roles.items()} or None,
        epochs=r.epochs if r.epochs > 1 else None,
        max_retries=0,
        # one sample at a time: each prompt's replies come in epoch order
        max_samples=1 if r.epochs > 1 else None,
        display="none",
        log_dir=str(tmp / "logs"),
        # without the samples' digests only the metrics are compared: writing each sample
        # into the log (most of a replay's time) changes none of them
        log_samples=samples,
    )
    assert log.status == "success", log.error
    return logged_metrics(log), logged_samples(log) if samples else None


def _same(a: float, b: float) -> bool:
    return a == b or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )


SLOW = pytest.mark.slow


@pytest.mark.filterwarnings("ignore:.*counts differ from the published dataset")
@pytest.mark.parametrize(
    "run",
    [
        pytest.param("medreqal", marks=SLOW),
        pytest.param("medreqal_3_epochs", marks=SLOW),
        "healthfc",  # the fast subset's recorded-number check
        pytest.param("oncology_rct_study", marks=SLOW),
        pytest.param("medevidence", marks=SLOW),
        "medevidence_three",
        pytest.param("counterfactual_build", marks=SLOW),
        pytest.param("counterfactual_judges_rate", marks=SLOW),
        "counterfactual_judges_paired",
    ],
)
def test_replayed_metrics_equal_the_recorded_ones(run: str, tmp_path: Path, monkeypatch) -> None:
    stored = json.loads(RECORDED.read_text())
    recorded = stored[run]
    now, samples = replay(run, tmp_path, monkeypatch)
    assert sorted(now) == sorted(recorded)
    differ = {k: (recorded[k], now[k]) for k in recorded if not _same(recorded[k], now[k])}
    assert not differ
    # every per-sample record, the reductions and the metadata keys are the recorded ones
    assert samples == stored[f"samples/{run}"]
    # the replay is not degenerate: it has invalid replies, errors and both kinds of sample
    counts = {k.split("|")[-1]: v for k, v in now.items()}
    if run == "oncology_rct_study":
        assert counts["title_abstract/n_invalid"] > 0 and counts["title_abstract/n_error"] > 0
    elif run.startswith("medevidence"):
        assert counts["closed_book/INVALID"] > 0 and counts["evidence/ERROR"] > 0
        assert 0 < counts["closed_book/accuracy_all"] < 1
    elif run == "counterfactual_build":
        assert counts["accepted"] > 0 and counts["rejected"] > 0 and counts["errors"] > 0
    elif run.startswith("counterfactual_judges"):
        assert len(counts) > 4
    else:
        assert counts["predicted_invalid"] > 0 and counts["predicted_error"] > 0
        assert 0 < counts["accuracy_all"] < 1


@pytest.mark.filterwarnings("ignore:.*counts differ from the published dataset")
@pytest.mark.slow
@pytest.mark.parametrize("run", ["medreqal", "oncology_rct_study", "counterfactual_judges_rate",
                                 "counterfactual_judges_paired"])
def test_the_default_headline_log_is_a_short_part_of_the_full_set(run: str, tmp_path: Path,
                                                                   monkeypatch) -> None:
    recorded = json.loads(RECORDED.read_text())[run]
    short, _ = replay(run, tmp_path, monkeypatch, metrics="headline", samples=False)
    assert set(short) < set(recorded)
    assert all(_same(recorded[k], v) for k, v in short.items())
    names = {k.split("|")[-1] for k in short}
    if run.startswith("counterfactual_judges"):  # a jury of two: the jury's numbers only
        # (issue 44: a jury run's console summary listed every grader's: 40 and 25 lines)
        assert not any(n.startswith("grader") for n in names)
        assert {"jury/kappa", "jury/alpha", "judge_failures", "n"} <= names
        assert len(short) == (16 if run.endswith("rate") else 13)
    elif run == "oncology_rct_study":  # 5 conditions x 3 headline numbers + 2 flip rates
        assert len(short) == 17 and "doi_only/macro_f1_valid" in names
        assert "title_abstract~counterfactual" in names and "doi_only/n_total" not in names
    else:
        assert names == {"accuracy_all", "macro_f1_all", "valid_rate", "rouge_l_mean",
                         "bertscore_f1_mean"}


def main() -> None:
    import tempfile

    if "--write" not in sys.argv:
        sys.exit("usage: python -m tests.test_recorded_metrics --write")
    out: dict[str, Any] = {}
    mp = pytest.MonkeyPatch()
    for run in _tasks(Path(tempfile.mkdtemp()), mp):
        out[run], out[f"samples/{run}"] = replay(run, Path(tempfile.mkdtemp()), mp)
        print(f"{run}: {len(out[run])} metrics, {out[f'samples/{run}']['n']} sample records")
    mp.undo()
    RECORDED.parent.mkdir(exist_ok=True)
    RECORDED.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
