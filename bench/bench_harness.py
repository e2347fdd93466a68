"""Harness speed: a verdict task (MedREQAL or HealthFC) against bare Inspect, same prompts.

Prints ratios measured in one run, so the noise of a shared machine cancels out:

- overhead: ``--n`` samples through ``med_evals/medreqal`` (``--study medreqal``, default: 2,786
  synthetic rows in MedREQAL's schema) or ``med_evals/healthfc`` (``--study healthfc``: the 750
  real claims, read from ``--data-dir``, default ``$MED_EVALS_DATA_DIR`` or ../shared/datasets)
  with the task's full scoring (parser, classification metrics, ROUGE-L, evidence mentions;
  BERTScore excluded), an instant in-process model, against a bare Inspect task (``generate()``
  + ``includes()``) over the same Table 7 messages. Target <= 1.15.
- concurrency: the same pair against a local OpenAI-compatible server that adds 200 ms to each
  request, at 32 connections. Target <= 1.15. Also the speed-up over the oncology study's own
  runner (one call at a time with a 0.5 s pause), measured on a few sequential calls and
  extrapolated to ``--n``.
- cache: the task (and bare Inspect) again against the same server with Inspect's cache,
  counting the server's requests. Target >= 10x.
- settings: log buffering, sample logging and connections, timed on the server.

Both tasks are warmed up, then run interleaved (bare, task, task, bare, ...) ``--repeats``
times; the ratio of best times, the median pair ratio and every pair are printed.

``--profile DIR`` instead runs one pair (after the warm-up) under cProfile, writes
``DIR/{bare,task}.prof`` and prints the functions whose own time differs most between them
(``bench/profile_diff.py`` prints more of the same files).

    python bench/bench_harness.py [--study medreqal,healthfc] [--n 2786] [--repeats 3]
        [--skip concurrency,cache,settings] [--profile DIR --server]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

from med_evals.tasks.healthfc import healthfc
from med_evals.tasks.medreqal import medreqal

# the test-only fake server lives in tests/support (not shipped); synthetic data beside this file
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from profile_diff import print_difference  # noqa: E402
from synthetic import data_dir as find_data_dir  # noqa: E402
from synthetic import medreqal_csv, verdict_reply  # noqa: E402

from tests.support.fake_openai import FakeOpenAIServer  # noqa: E402


def instant_model():
    rng = random.Random(0)

    def outputs(input, tools, tool_choice, config):  # noqa: A002
        out = ModelOutput.from_content("mockllm/instant", verdict_reply(rng))
        out.usage = ModelUsage(input_tokens=120, output_tokens=70, total_tokens=190)
        return out

    return get_model("mockllm/instant", custom_outputs=outputs)


def _first(task: Task, n: int) -> Task:
    task.dataset = MemoryDataset(list(task.dataset)[:n], name=task.dataset.name)
    return task


def task_factory(study: str, tmp: Path, data_dir: str | None) -> Callable[[int], Task]:
    """``make(n)``: the study's task on its first ``n`` samples, BERTScore off."""
    tmp.mkdir(parents=True, exist_ok=True)
    if study == "medreqal":
        csv = medreqal_csv(tmp / "medreqal_synthetic.csv")
        return lambda n: _first(medreqal(data_file=str(csv), bertscore=False), n)
    if study == "healthfc":
        return lambda n: _first(healthfc(data_dir=data_dir, bertscore=False), n)
    raise SystemExit(f"unknown study {study!r} (medreqal, healthfc)")


def bare_task(task: Task) -> Task:
    """The same messages (each sample's input: the Table 7 prompt, rendered when the task is
    built), generate + a trivial scorer."""
    samples = [Sample(id=s.id, input=s.input, target=s.target) for s in task.dataset]
    return Task(dataset=MemoryDataset(samples, name="bare"), solver=generate(), scorer=includes())


#: CPU seconds of this process (all threads) in the last :func:`timed` run
LAST_CPU = [0.0]


def timed(task: Task, model, log_dir: Path, **kw) -> float:
    """Wall seconds of one run (its CPU seconds in ``LAST_CPU[0]``).

    The previous run's garbage is collected first, so that no run pays for another's.
    """
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    [log] = inspect_eval(task, model=model, log_dir=str(log_dir), display="none", **kw)
    elapsed = time.perf_counter() - start
    LAST_CPU[0] = time.process_time() - cpu
    if log.status != "success" or log.results.completed_samples != len(task.dataset):
        sys.exit(f"run failed: {log.status} {log.error}")
    return elapsed


def warm_up(make: Callable[[int], Task], model, tmp: Path, **kw) -> None:
    timed(bare_task(make(20)), model, tmp / "warm_bare", **kw)
    timed(make(20), model, tmp / "warm_task", **kw)


class Pair:
    """Times of interleaved runs: wall and CPU seconds of each task and bare run."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {"task": [], "bare": []}
        self.cpu: dict[str, list[float]] = {"task": [], "bare": []}

    def ratios(self, kind: str = "wall") -> list[float]:
        times = self.wall if kind == "wall" else self.cpu
        return [t / b for t, b in zip(times["task"], times["bare"], strict=True)]

    def describe(self, name: str) -> str:
        w, c = self.wall, self.cpu
        return (
            f"{name} {min(w['task']):.1f} s, bare Inspect {min(w['bare']):.1f} s (best of "
            f"{len(w['task'])}); ratio of best times {min(w['task']) / min(w['bare']):.2f}, "
            f"median pair ratio {statistics.median(self.ratios()):.2f} (pairs: "
            f"{', '.join(f'{r:.2f}' for r in self.ratios())}); CPU seconds {min(c['task']):.1f} "
            f"vs {min(c['bare']):.1f}, ratio of least {min(c['task']) / min(c['bare']):.2f}, "
            f"median pair {statistics.median(self.ratios('cpu')):.2f}"
        )


def pair(make: Callable[[int], Task], n: int, model, tmp: Path, repeats: int, **kw) -> Pair:
    """Interleaved runs (bare, task, task, bare, ...) after a warm-up of each.

    On a shared machine the median pair ratio and the ratio of best times bracket the true
    figure; the process's CPU seconds are less sensitive to other processes' load.
    """
    warm_up(make, model, tmp, **kw)
    out = Pair()
    for i in range(repeats):
        runs = [("bare", bare_task(make(n))), ("task", make(n))]
        for kind, task in runs if i % 2 == 0 else runs[::-1]:
            out.wall[kind].append(timed(task, model, tmp / f"{kind}{i}", **kw))
            out.cpu[kind].append(LAST_CPU[0])
    return out


def profile_pair(
    make: Callable[[int], Task], n: int, model, tmp: Path, out: Path, **kw
) -> None:
    """One bare run and one task run under cProfile (after a warm-up); print the difference."""
    out.mkdir(parents=True, exist_ok=True)
    warm_up(make, model, tmp, **kw)
    for kind, task in [("bare", bare_task(make(n))), ("task", make(n))]:
        prof = cProfile.Profile(time.process_time)  # CPU time: less noise from other load
        prof.enable()
        t = timed(task, model, tmp / f"profile_{kind}", **kw)
        prof.disable()
        prof.dump_stats(out / f"{kind}.prof")
        print(f"{kind}: {t:.1f} s under cProfile (load average {os.getloadavg()[0]:.1f})")
    print_difference(out / "bare.prof", out / "task.prof", top=30)


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


def served_model(server: FakeOpenAIServer):
    os.environ["FAKE_API_KEY"] = "local"
    return get_model("openai-api/fake/fake", base_url=server.base_url)


def fake_server() -> FakeOpenAIServer:
    """The local OpenAI-compatible server: 200 ms per request, a verdict reply."""
    return FakeOpenAIServer(reply=lambda t: verdict_reply(random.Random(len(t))), latency=0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--study", default="medreqal", help="medreqal, healthfc, or both comma-separated"
    )
    ap.add_argument("--n", type=int, default=None, help="samples (default: all of the study's)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data-dir", default=None, help="HealthFC: folder holding healthfc/")
    ap.add_argument(
        "--skip", default="", help="comma-separated: overhead,concurrency,cache,settings"
    )
    ap.add_argument("--profile", type=Path, default=None, help="profile one pair into DIR")
    ap.add_argument("--server", action="store_true", help="--profile against the 200 ms server")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="med_evals_bench_"))
    os.environ.setdefault("INSPECT_CACHE_DIR", str(tmp / "inspect_cache"))
    data_dir = find_data_dir(args.data_dir)
    for study in args.study.split(","):
        make = task_factory(study, tmp / study, data_dir)
        n = args.n or len(make(10**6).dataset)
        print(f"{study}: {n} samples; load average {os.getloadavg()[0]:.1f}", flush=True)
        if args.profile:
            out = args.profile / study if "," in args.study else args.profile
            if args.server:
                with fake_server() as server:
                    model = served_model(server)
                    profile_pair(make, n, model, tmp / study, out, max_connections=32)
            else:
                profile_pair(make, n, instant_model(), tmp / study, out)
            continue
        bench_study(study, make, n, args.repeats, set(args.skip.split(",")), tmp / study)
    print(f"(median load average now {statistics.median(os.getloadavg()):.1f})")


def bench_study(
    name: str, make: Callable[[int], Task], n: int, repeats: int, skip: set[str], tmp: Path
) -> None:
    if "overhead" not in skip:
        p = pair(make, n, instant_model(), tmp / "instant", repeats)
        print(
            f"overhead (instant model): {p.describe(name)} (target <= 1.15); "
            f"{1000 * min(p.wall['bare']) / n:.1f} ms/sample bare; "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    if skip >= {"concurrency", "cache", "settings"}:
        return
    with fake_server() as server:
        model = served_model(server)
        if "concurrency" not in skip:
            p = pair(make, n, model, tmp / "served", repeats, max_connections=32)
            per_call = study_runner_seconds_per_call(server.base_url)
            study = per_call * n
            print(
                f"concurrency (200 ms server, 32 connections): {p.describe(name)} "
                f"(target <= 1.15); latency-bound ideal {n * 0.2 / 32:.1f} s; "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            print(
                f"study runner (sequential + 0.5 s pause): {per_call:.2f} s/call -> "
                f"{study / 60:.1f} min for {n}; speed-up {study / min(p.wall['task']):.0f}x",
                flush=True,
            )
        if "cache" not in skip:
            for label, build in [
                (name, lambda: make(n)),
                ("bare Inspect", lambda: bare_task(make(n))),
            ]:
                tag = label.split()[0]
                before = len(server.requests)
                first = timed(build(), model, tmp / f"{tag}_cache1", max_connections=32, cache=True)
                called = len(server.requests) - before
                second = timed(
                    build(), model, tmp / f"{tag}_cache2", max_connections=32, cache=True
                )
                again = len(server.requests) - before - called
                print(
                    f"cache, {label}: first {first:.1f} s ({called} requests), re-run "
                    f"{second:.1f} s ({again} requests), {first / second:.1f}x faster "
                    f"(target >= 10x); re-run {1000 * second / n:.1f} ms/sample",
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
                t = timed(make(n), model, tmp / f"set{len(rows)}", **kw)
                rows.append((label, t))
                print(f"  {label:28} {t:7.1f} s", flush=True)
            best = min(rows, key=lambda r: r[1])
            print(f"  fastest: {best[0]}")


if __name__ == "__main__":
    main()
