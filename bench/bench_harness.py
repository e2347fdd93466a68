"""Harness speed: the MedREQAL task and its scoring against bare Inspect, same size, same logging.

Prints ratios measured in one run, so the noise of a shared machine cancels out:

- overhead: 2,786 samples through ``med_evals/medreqal`` (parser, classification metrics,
  ROUGE-L, evidence mentions; BERTScore excluded) with an instant in-process model, against a
  bare Inspect task (generate + a trivial scorer) over the same prompts. Target <= 1.25.
- concurrency: the same pair against a local OpenAI-compatible server that adds 200 ms to each
  request, at 32 connections. Target <= 1.25. Also the speed-up over the oncology study's own
  runner (one call at a time with a 0.5 s pause), measured on a few sequential calls and
  extrapolated to 2,786.
- cache: the MedREQAL run again against the same server with Inspect's cache. Target >= 10x.
- settings: log buffering, sample logging and connections, timed on the server.

    python bench/bench_harness.py [--n 2786] [--skip concurrency,cache,settings]
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
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

from med_evals.devtools.fake_openai import FakeOpenAIServer
from med_evals.devtools.synthetic import medreqal_csv, verdict_reply
from med_evals.tasks.medreqal import medreqal


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
    """Same prompts (the solver's messages), generate + a trivial scorer."""
    samples = [Sample(id=s.id, input=s.input, target=s.target) for s in med.dataset]
    return Task(dataset=MemoryDataset(samples, name="bare"), solver=generate(), scorer=includes())


def timed(task: Task, model, log_dir: Path, **kw) -> float:
    start = time.perf_counter()
    [log] = inspect_eval(task, model=model, log_dir=str(log_dir), display="none", **kw)
    elapsed = time.perf_counter() - start
    if log.status != "success" or log.results.completed_samples != len(task.dataset):
        sys.exit(f"run failed: {log.status} {log.error}")
    return elapsed


def pair(csv: Path, n: int, model, tmp: Path, repeats: int, **kw) -> tuple[float, float]:
    """Interleaved runs (bare, med, bare, med ...); the best time of each."""
    med_times, bare_times = [], []
    for i in range(repeats):
        bare_times.append(timed(bare_task(med_task(csv, n)), model, tmp / f"bare{i}", **kw))
        med_times.append(timed(med_task(csv, n), model, tmp / f"med{i}", **kw))
    return min(med_times), min(bare_times)


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
    ap.add_argument("--repeats", type=int, default=2)
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
        med, bare = pair(csv, args.n, instant_model(), tmp / "instant", args.repeats)
        print(
            f"overhead (instant model): medreqal {med:.1f} s, bare Inspect {bare:.1f} s, "
            f"ratio {med / bare:.2f} (target <= 1.25); "
            f"{1000 * bare / args.n:.1f} ms/sample bare"
        )

    if not skip >= {"concurrency", "cache", "settings"}:
        os.environ["FAKE_API_KEY"] = "local"
        with FakeOpenAIServer(
            reply=lambda t: verdict_reply(random.Random(len(t))), latency=0.2
        ) as server:
            model = get_model("openai-api/fake/fake", base_url=server.base_url)
            if "concurrency" not in skip:
                med, bare = pair(csv, args.n, model, tmp / "served", 1, max_connections=32)
                per_call = study_runner_seconds_per_call(server.base_url)
                study = per_call * args.n
                print(
                    f"concurrency (200 ms server, 32 connections): medreqal {med:.1f} s, bare "
                    f"{bare:.1f} s, ratio {med / bare:.2f} (target <= 1.25); latency-bound "
                    f"ideal {args.n * 0.2 / 32:.1f} s"
                )
                print(
                    f"study runner (sequential + 0.5 s pause): {per_call:.2f} s/call -> "
                    f"{study / 60:.1f} min for {args.n}; speed-up {study / med:.0f}x"
                )
            if "cache" not in skip:
                first = timed(
                    med_task(csv, args.n), model, tmp / "cache1", max_connections=32, cache=True
                )
                second = timed(
                    med_task(csv, args.n), model, tmp / "cache2", max_connections=32, cache=True
                )
                print(
                    f"cache: first {first:.1f} s, re-run {second:.1f} s, "
                    f"{first / second:.1f}x faster (target >= 10x)"
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
