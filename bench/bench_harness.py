"""Harness speed: the MedREQAL task and its scoring against bare Inspect, same size, same logging.

Prints ratios measured in one run, so the noise of a shared machine cancels out:

- overhead: 2,786 samples through ``med_evals/medreqal`` (parser, classification metrics,
  ROUGE-L, evidence mentions; BERTScore excluded) with an instant in-process model, against a
  bare Inspect task (generate + a trivial scorer) over the same prompts. Target <= 1.25.
- concurrency: the same pair against a local OpenAI-compatible server that adds 200 ms to each
  request, at 32 connections. Target <= 1.25. Also the speed-up over the oncology study's own
  runner (one call at a time with a 0.5 s pause), measured on a few sequential calls and
  extrapolated to 2,786.
- cache: the MedREQAL run (and bare Inspect) again against the same server with Inspect's
  cache, counting the server's requests. Target >= 10x.
- settings: log buffering, sample logging and connections, timed on the server.

Both tasks are warmed up, then run interleaved (bare, medreqal, medreqal, bare, ...) ``--repeats``
times; the ratio of best times, the median pair ratio and every pair are printed.

    python bench/bench_harness.py [--n 2786] [--repeats 3] [--skip concurrency,cache,settings]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageSystem,
    ChatMessageUser,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

from med_evals.solvers.verdict_prompts import render
from med_evals.tasks.medreqal import medreqal

# the test-only fake server lives in tests/support (not shipped); synthetic data beside this file
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic import medreqal_csv, verdict_reply  # noqa: E402

from tests.support.fake_openai import FakeOpenAIServer  # noqa: E402


def instant_model():
    rng = random.Random(0)

    def outputs(input, tools, tool_choice, config):  # noqa: A002
        out = ModelOutput.from_content("mockllm/instant", verdict_reply(rng))
        out.usage = ModelUsage(input_tokens=120, output_tokens=70, total_tokens=190)
        return out

    return get_model("mockllm/instant", custom_outputs=outputs)


def med_task(csv: Path, n: int) -> Task:
    task = medreqal(data_file=str(csv), bertscore=False)
    task.dataset = MemoryDataset(list(task.dataset)[:n], name=task.dataset.name)
    return task


def bare_task(med: Task) -> Task:
    """Same prompts (the messages the task's prompt solver builds), generate + a trivial scorer."""
    samples = []
    for s in med.dataset:
        system, user = render("chat", s.metadata["question"])
        messages = [ChatMessageSystem(content=system), ChatMessageUser(content=user)]
        samples.append(Sample(id=s.id, input=messages, target=s.target))
    return Task(dataset=MemoryDataset(samples, name="bare"), solver=generate(), scorer=includes())


def timed(task: Task, model, log_dir: Path, **kw) -> float:
    start = time.perf_counter()
    [log] = inspect_eval(task, model=model, log_dir=str(log_dir), display="none", **kw)
    elapsed = time.perf_counter() - start
    if log.status != "success" or log.results.completed_samples != len(task.dataset):
        sys.exit(f"run failed: {log.status} {log.error}")
    return elapsed


def pair(
    csv: Path, n: int, model, tmp: Path, repeats: int, **kw
) -> tuple[float, float, list[float]]:
    """Interleaved runs (bare, med, med, bare, ...) after a warm-up of each.

    Returns the best time of each and the ratio of every adjacent (bare, med) pair: on a shared
    machine the median pair ratio and the ratio of best times bracket the true figure.
    """
    timed(bare_task(med_task(csv, 20)), model, tmp / "warm_bare", **kw)
    timed(med_task(csv, 20), model, tmp / "warm_med", **kw)
    med_times, bare_times = [], []
    for i in range(repeats):
        runs = [("bare", bare_task(med_task(csv, n))), ("med", med_task(csv, n))]
        for kind, task in runs if i % 2 == 0 else runs[::-1]:
            t = timed(task, model, tmp / f"{kind}{i}", **kw)
            (bare_times if kind == "bare" else med_times).append(t)
    ratios = [m / b for m, b in zip(med_times, bare_times, strict=True)]
    return min(med_times), min(bare_times), ratios


def describe(med: float, bare: float, ratios: list[float]) -> str:
    return (
        f"medreqal {med:.1f} s, bare Inspect {bare:.1f} s (best of {len(ratios)}); ratio of "
        f"best times {med / bare:.2f}, median pair ratio {statistics.median(ratios):.2f} "
        f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)})"
    )


def study_runner_seconds_per_call(base_url: str, calls: int = 5) -> float:
    """The study's loop: one request at a time, then time.sleep(0.5)."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="local")
    start = time.perf_counter()
    for _ in range(calls):
        client.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "Title: x"}], temperature=0
        )
        time.sleep(0.5)
    return (time.perf_counter() - start) / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2786)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--skip", default="", help="comma-separated: overhead,concurrency,cache,settings"
    )
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="med_evals_bench_"))
    os.environ.setdefault("INSPECT_CACHE_DIR", str(tmp / "inspect_cache"))
    csv = medreqal_csv(tmp / "medreqal_synthetic.csv")
    print(f"{args.n} samples; machine load average {os.getloadavg()[0]:.1f}")

    if "overhead" not in skip:
        med, bare, ratios = pair(csv, args.n, instant_model(), tmp / "instant", args.repeats)
        print(
            f"overhead (instant model): {describe(med, bare, ratios)} (target <= 1.25); "
            f"{1000 * bare / args.n:.1f} ms/sample bare",
            flush=True,
        )

    if not skip >= {"concurrency", "cache", "settings"}:
        os.environ["FAKE_API_KEY"] = "local"
        with FakeOpenAIServer(
            reply=lambda t: verdict_reply(random.Random(len(t))), latency=0.2
        ) as server:
            model = get_model("openai-api/fake/fake", base_url=server.base_url)
            if "concurrency" not in skip:
                med, bare, ratios = pair(
                    csv, args.n, model, tmp / "served", args.repeats, max_connections=32
                )
                per_call = study_runner_seconds_per_call(server.base_url)
                study = per_call * args.n
                print(
                    f"concurrency (200 ms server, 32 connections): {describe(med, bare, ratios)} "
                    f"(target <= 1.25); latency-bound ideal {args.n * 0.2 / 32:.1f} s"
                )
                print(
                    f"study runner (sequential + 0.5 s pause): {per_call:.2f} s/call -> "
                    f"{study / 60:.1f} min for {args.n}; speed-up {study / med:.0f}x",
                    flush=True,
                )
            if "cache" not in skip:
                for name, make in [
                    ("medreqal", lambda: med_task(csv, args.n)),
                    ("bare Inspect", lambda: bare_task(med_task(csv, args.n))),
                ]:
                    tag = name.split()[0]
                    before = len(server.requests)
                    first = timed(
                        make(), model, tmp / f"{tag}_cache1", max_connections=32, cache=True
                    )
                    called = len(server.requests) - before
                    second = timed(
                        make(), model, tmp / f"{tag}_cache2", max_connections=32, cache=True
                    )
                    again = len(server.requests) - before - called
                    print(
                        f"cache, {name}: first {first:.1f} s ({called} requests), re-run "
                        f"{second:.1f} s ({again} requests), {first / second:.1f}x faster "
                        f"(target >= 10x); re-run {1000 * second / args.n:.1f} ms/sample",
                        flush=True,
                    )
            if "settings" not in skip:
                rows = []
                print("settings (200 ms server):", flush=True)
                for label, kw in [
                    ("default (32 connections)", {"max_connections": 32}),
                    ("64 connections", {"max_connections": 64}),
                    ("128 connections", {"max_connections": 128}),
                    ("log_buffer=500", {"max_connections": 64, "log_buffer": 500}),
                    ("no sample logging", {"max_connections": 64, "log_samples": False}),
                ]:
                    t = timed(med_task(csv, args.n), model, tmp / f"set{len(rows)}", **kw)
                    rows.append((label, t))
                    print(f"  {label:28} {t:7.1f} s", flush=True)
                best = min(rows, key=lambda r: r[1])
                print(f"  fastest: {best[0]}")
    print(f"(median load average now {statistics.median(os.getloadavg()):.1f})")


if __name__ == "__main__":
    main()
