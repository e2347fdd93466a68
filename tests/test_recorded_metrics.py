"""Recorded numbers: replayed runs log exactly the metrics recorded for them (first recorded
before the speed-ups of issue 16, so that no speed-up, refactor or move changes a number).

``tests/fixtures/recorded_metrics.json`` holds every logged metric of four deterministic
runs (MedREQAL-schema with one and three epochs, HealthFC-schema, the oncology study's five
conditions), recorded with the code as it was without the performance work of issue 16 (the
score table, the one-step prompt-and-generate solver, the slimmer sample metadata), from a copy
of the tree with those changes reverted. The data are synthetic (generated here from a seed,
never rows of a real dataset) and the replies come from a deterministic function of the prompt:
valid labels in several spellings, two labels (invalid), no label, empty replies and provider
failures (``ERROR``), evidence mentions.

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
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

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


def replay_model(reply: Callable[[str, int], str | None]) -> Any:
    """mockllm whose reply depends only on the prompt and how often it was asked before."""
    calls: Counter[str] = Counter()

    def outputs(input, tools, tool_choice, config) -> ModelOutput:  # noqa: A002
        text = "\n".join(m.text for m in input)
        calls[text] += 1
        content = reply(text, calls[text])
        if content is None:
            raise RuntimeError("HTTP 500 from provider (replayed)")
        out = ModelOutput.from_content(model="mockllm/replay", content=content)
        out.usage = ModelUsage(input_tokens=100, output_tokens=50, total_tokens=150)
        return out

    return get_model("mockllm/replay", custom_outputs=outputs)


def _tasks(
    tmp: Path, metrics: str = "full"
) -> dict[str, tuple[Callable[[], Task], Callable[[str, int], str | None], int]]:
    from med_evals.tasks.healthfc import healthfc
    from med_evals.tasks.medreqal import medreqal
    from med_evals.tasks.oncology_rct import oncology_rct

    med = medreqal_csv(tmp / "medreqal.csv")
    hfc = healthfc_csv(tmp / "healthfc.csv")
    onc = oncology_csv(tmp / "trials.csv")
    return {
        "medreqal": (
            lambda: medreqal(data_file=str(med), bertscore=False, metrics=metrics),
            verdict_reply,
            1,
        ),
        "medreqal_3_epochs": (
            lambda: medreqal(data_file=str(med), bertscore=False, epochs=3, metrics=metrics),
            verdict_reply,
            3,
        ),
        "healthfc": (
            lambda: healthfc(data_file=str(hfc), bertscore=False, metrics=metrics),
            verdict_reply,
            1,
        ),
        "oncology_rct_study": (
            lambda: oncology_rct(condition="study", trials_file=str(onc), metrics=metrics),
            outcome_reply,
            1,
        ),
    }


def logged_metrics(log: Any) -> dict[str, float]:
    """Every logged metric as ``scorer|reducer|metric key`` -> value."""
    out: dict[str, float] = {}
    for s in log.results.scores:
        for key, m in s.metrics.items():
            out[f"{s.name}|{s.reducer}|{key}"] = m.value
    return out


def replay(run: str, tmp: Path, metrics: str = "full") -> dict[str, float]:
    make, reply, epochs = _tasks(tmp, metrics)[run]
    [log] = inspect_eval(
        make(),
        model=replay_model(reply),
        epochs=epochs if epochs > 1 else None,
        max_retries=0,
        # one sample at a time: each prompt's replies come in epoch order
        max_samples=1 if epochs > 1 else None,
        display="none",
        log_dir=str(tmp / "logs"),
        # only the metrics are compared: writing each sample into the log (most of a replay's
        # time) changes none of them
        log_samples=False,
    )
    assert log.status == "success", log.error
    return logged_metrics(log)


def _same(a: float, b: float) -> bool:
    return a == b or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )


@pytest.mark.filterwarnings("ignore:.*counts differ from the published dataset")
@pytest.mark.parametrize(
    "run",
    [
        pytest.param("medreqal", marks=pytest.mark.slow),
        pytest.param("medreqal_3_epochs", marks=pytest.mark.slow),
        "healthfc",  # the fast subset's recorded-number check
        pytest.param("oncology_rct_study", marks=pytest.mark.slow),
    ],
)
def test_replayed_metrics_equal_the_recorded_ones(run: str, tmp_path: Path) -> None:
    recorded = json.loads(RECORDED.read_text())[run]
    now = replay(run, tmp_path)
    assert sorted(now) == sorted(recorded)
    differ = {k: (recorded[k], now[k]) for k in recorded if not _same(recorded[k], now[k])}
    assert not differ
    # the replay is not degenerate: it has invalid replies, errors and both kinds of sample
    counts = {k.split("|")[-1]: v for k, v in now.items()}
    if run == "oncology_rct_study":
        assert counts["title_abstract/n_invalid"] > 0 and counts["title_abstract/n_error"] > 0
    else:
        assert counts["predicted_invalid"] > 0 and counts["predicted_error"] > 0
        assert 0 < counts["accuracy_all"] < 1


@pytest.mark.filterwarnings("ignore:.*counts differ from the published dataset")
@pytest.mark.slow
@pytest.mark.parametrize("run", ["medreqal", "oncology_rct_study"])
def test_the_default_headline_log_is_a_short_part_of_the_full_set(run: str, tmp_path: Path) -> None:
    recorded = json.loads(RECORDED.read_text())[run]
    short = replay(run, tmp_path, metrics="headline")
    assert set(short) < set(recorded)
    assert all(_same(recorded[k], v) for k, v in short.items())
    names = {k.split("|")[-1] for k in short}
    if run == "oncology_rct_study":  # 5 conditions x 3 headline numbers + 2 flip rates
        assert len(short) == 17 and "doi_only/macro_f1_valid" in names
        assert "title_abstract~counterfactual" in names and "doi_only/n_total" not in names
    else:
        assert names == {"accuracy_all", "macro_f1_all", "valid_rate", "rouge_l_mean",
                         "bertscore_f1_mean"}


def main() -> None:
    import tempfile

    if "--write" not in sys.argv:
        sys.exit("usage: python -m tests.test_recorded_metrics --write")
    out = {}
    for run in _tasks(Path(tempfile.mkdtemp())):
        out[run] = replay(run, Path(tempfile.mkdtemp()))
        print(f"{run}: {len(out[run])} metrics")
    RECORDED.parent.mkdir(exist_ok=True)
    RECORDED.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
