"""Throughput of the embedded model through Inspect's model API, one request at a time and with
several in flight (as Inspect sends them during an eval).

    python bench/bench_embedded.py                       # concurrency 1 and 8, 8 prompts
    python bench/bench_embedded.py --concurrency 1,4,8 --max-tokens 64 -M dtype=bfloat16

Prints: the first call (it includes loading the model), then for each concurrency the output
tokens per second over the same oncology-like prompts (the study's system prompt and a
~300-token title and abstract; generation stops at the end-of-sequence token or at
``--max-tokens``), whether the replies are the same as at concurrency 1 (greedy: they should
be), and the machine's load average (other processes share the CPU; compare figures taken under
similar load).

``--fixtures`` runs the prompts of the shipped fixtures (datasets/fixtures: oncology title and
abstract, MedEvidence evidence and closed book, MedREQAL and HealthFC chat prompts) in float32
and bfloat16, one at a time and batched, and prints the time of each and which replies differ
from float32 one at a time (the check behind the provider's default dtype).

It drives ``get_model("embedded/...")`` only, so it also measures older versions of the provider:
``PYTHONPATH=/path/to/old/src python bench/bench_embedded.py``.

``--main-job N`` times the README's main job (``med-evals compare``, in a subprocess, with
``MED_EVALS_DATA_DIR`` as set or ``../shared/datasets``) N times, each with an empty
``MED_EVALS_CACHE_DIR`` (nothing of the model is cached anyway), printing the whole command's
time, the command's evaluation line (Inspect's eval, model load included; the embedded run's
own time from its log) and the load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, get_model

from med_evals.solvers.oncology_rct import ONCOLOGY_SYSTEM_PROMPT

FIXTURES = Path(__file__).resolve().parents[1] / "datasets" / "fixtures"

ABSTRACT = (
    "Background: Adjuvant therapy after resection of stage III colon cancer is standard. We "
    "assessed whether adding an oral multikinase inhibitor to capecitabine and oxaliplatin "
    "improves disease-free survival. Methods: In this randomised, double-blind, phase 3 trial, "
    "patients aged 18 years or older with resected stage III colon adenocarcinoma were assigned "
    "1:1 to the inhibitor or placebo for 12 months with standard chemotherapy. The primary "
    "endpoint was disease-free survival in the intention-to-treat population. Findings: {n} "
    "patients were enrolled. At a median follow-up of 48 months, 3-year disease-free survival was "
    "{a}% with the inhibitor and {b}% with placebo (hazard ratio 0.{h}; p={p}). Grade 3 or worse "
    "adverse events occurred in 41% and 28% of patients. Interpretation: The addition of the "
    "inhibitor to adjuvant chemotherapy {verdict} disease-free survival in stage III colon cancer."
)


def prompts(n: int) -> list[list[ChatMessageSystem | ChatMessageUser]]:
    """``n`` oncology-like prompts of slightly different lengths."""
    out = []
    for i in range(n):
        better = i % 2 == 0
        abstract = ABSTRACT.format(
            n=800 + 17 * i,
            a=74 + i % 5,
            b=69 if better else 75,
            h=78 if better else 97,
            p="0.004" if better else "0.71",
            verdict="significantly improved" if better else "did not improve",
        )
        title = f"Adjuvant multikinase inhibition in colon cancer ({'trial ' * (i % 3)}{i})"
        out.append(
            [
                ChatMessageSystem(content=ONCOLOGY_SYSTEM_PROMPT),
                ChatMessageUser(content=f"Title: {title}\n\nAbstract: {abstract}"),
            ]
        )
    return out


def fixture_prompts() -> list[list[ChatMessageSystem | ChatMessageUser]]:
    """The model input of every shipped fixture sample (the tasks' own prompt code)."""
    from med_evals.solvers.medreqal import prompt_messages
    from med_evals.tasks import healthfc, medevidence, medreqal, oncology_rct

    trials = oncology_rct.read_trials(FIXTURES / "oncology_trials_fixture.csv")
    out = [
        [ChatMessageSystem(content=ONCOLOGY_SYSTEM_PROMPT), ChatMessageUser(content=str(s.input))]
        for s in oncology_rct.build_samples(trials, ["title_abstract"])
    ]
    for q in medevidence.read_questions(FIXTURES / "medevidence_fixture.jsonl"):
        for condition in medevidence.CONDITIONS:
            sample = medevidence.record_to_sample(q, condition, "five")
            out.append(list(sample.input))  # type: ignore[arg-type]
    for q in medreqal.read_medreqal(FIXTURES / "medreqal_fixture.csv")["question"]:
        out.append(prompt_messages("chat", q))
    for q in healthfc.read_healthfc(FIXTURES / "healthfc_fixture.csv")["en_claim"]:
        out.append(prompt_messages("chat", q))
    return out


async def compare_fixtures(name: str, max_tokens: int, model_args: dict[str, str]) -> None:
    """Replies and time per dtype, one at a time and batched, against float32 one at a time."""
    batch = fixture_prompts()
    config = GenerateConfig(temperature=0, max_tokens=max_tokens)
    reference: list[str] = []
    for dtype in ("float32", "bfloat16"):
        for size in (1, 8):
            model = get_model(name, **{**model_args, "dtype": dtype, "batch_size": size})
            await model.generate(batch[0], config=GenerateConfig(temperature=0, max_tokens=1))
            seconds, n_in, n_out, replies = await run(model, batch, config, len(batch))
            reference = reference or replies
            differ = [i for i, (a, b) in enumerate(zip(reference, replies, strict=True)) if a != b]
            print(
                f"{dtype}, batch_size {size}: {len(batch)} fixture prompts, {n_in} tokens in, "
                f"{n_out} out in {seconds:.1f} s = {n_out / seconds:.1f} output tokens/s; "
                f"replies as float32 one at a time: {len(batch) - len(differ)}/{len(batch)}; "
                f"load average {os.getloadavg()[0]:.2f}"
            )
            for i in differ:
                a, b = reference[i], replies[i]
                pairs = enumerate(zip(a, b, strict=False))
                at = next((k for k, (x, y) in pairs if x != y), min(len(a), len(b)))
                print(
                    f"  prompt {i}: from character {at}: {a[at : at + 50]!r} vs {b[at : at + 50]!r}"
                )


async def run(model, batch, config: GenerateConfig, concurrency: int):  # noqa: ANN001, ANN201
    """(seconds, input tokens, output tokens, replies) with ``concurrency`` calls in flight."""
    limit = asyncio.Semaphore(concurrency)

    async def one(messages):  # noqa: ANN001, ANN202
        async with limit:
            return await model.generate(messages, config=config)

    started = time.monotonic()
    outs = await asyncio.gather(*(one(m) for m in batch))
    seconds = time.monotonic() - started
    n_in = sum(o.usage.input_tokens for o in outs if o.usage)
    n_out = sum(o.usage.output_tokens for o in outs if o.usage)
    return seconds, n_in, n_out, [o.completion for o in outs]


def main_job(rounds: int) -> None:
    """The README's main job, ``rounds`` times, each as on a fresh machine (an empty cache)."""
    import re
    import subprocess
    import sys
    import tempfile

    env = dict(os.environ)
    shared = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    env.setdefault("MED_EVALS_DATA_DIR", str(shared))
    for r in range(1, rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            env["MED_EVALS_CACHE_DIR"] = str(Path(tmp) / "cache")
            before = os.getloadavg()[0]
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "med_evals.commands.cli", "compare", "--log-dir",
                 str(Path(tmp) / "logs")],
                env=env, capture_output=True, text=True, check=False,
            )
            seconds = time.monotonic() - started
            lines = done.stdout.splitlines()
            line = next((x for x in lines if x.startswith("evaluation:")), "")
            if done.returncode:
                line = f"failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}"
            print(
                f"run {r}: command {seconds:.0f} s; {re.sub(' for all runs', '', line)}; "
                f"load average {before:.2f} -> {os.getloadavg()[0]:.2f}",
                flush=True,
            )


async def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--model", default="embedded/smollm2-135m")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--concurrency", default="1,8", help="comma-separated, e.g. 1,4,8")
    ap.add_argument("--fixtures", action="store_true", help="dtype and batching check")
    ap.add_argument("-M", dest="model_args", action="append", default=[], help="key=value")
    ap.add_argument("--main-job", type=int, metavar="N", help="time med-evals compare N times")
    args = ap.parse_args()
    model_args = dict(kv.split("=", 1) for kv in args.model_args)
    if args.main_job:
        main_job(args.main_job)
        return

    print(f"load average before: {os.getloadavg()[0]:.2f}  cpus: {os.cpu_count()}")
    if args.fixtures:
        await compare_fixtures(args.model, args.max_tokens, model_args)
        return
    started = time.monotonic()
    model = get_model(args.model, **model_args)
    batch = prompts(args.prompts)
    await model.generate(batch[0], config=GenerateConfig(temperature=0, max_tokens=1))
    loaded = time.monotonic() - started
    print(f"{args.model} {model_args or ''}: first call (includes the load) {loaded:.1f} s")

    config = GenerateConfig(temperature=0, max_tokens=args.max_tokens)
    reference: list[str] | None = None
    for c in (int(x) for x in args.concurrency.split(",")):
        seconds, n_in, n_out, replies = await run(model, batch, config, c)
        reference = reference or replies
        same = sum(a == b for a, b in zip(reference, replies, strict=True))
        print(
            f"concurrency {c}: {len(batch)} calls in {seconds:.1f} s, {n_in} tokens in, "
            f"{n_out} out = {n_out / seconds:.1f} output tokens/s "
            f"({(n_in + n_out) / seconds:.0f} tokens/s in+out); "
            f"replies as at concurrency {args.concurrency.split(',')[0]}: {same}/{len(batch)}; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
    print("replies:", [r[:40] for r in reference or []])


if __name__ == "__main__":
    asyncio.run(main())
