"""The bootstraps behind the report's intervals, ``diff``, ``regress`` and ``power``: wall time,
peak memory and a digest of every number, over one synthetic run.

Times :func:`~med_evals.stats.intervals.bootstrap_interval` (plain, and clustered by source),
:func:`~med_evals.stats.intervals.bootstrap_difference` (two runs, paired) and
:func:`~med_evals.stats.intervals.bootstrap_se` of the MedREQAL headline function (accuracy,
macro-F1, valid rate) over ``--n`` samples (the paper's label proportions, 70% right, 5%
invalid, sources of 4 samples on average), ``--n-boot`` resamples, seed 0, in this process.
Each line prints the median wall and CPU time of ``--repeat`` calls (CPU time: this process's,
the figure to compare on a shared machine), the peak memory one more call
allocated (``tracemalloc``, in a call of its own: it slows every allocation) and a digest of
its numbers (``repr`` of every float): the same bench before and after a change of the
bootstrap's code shows whether the numbers moved.

    python bench/bench_bootstrap.py [--n 10000] [--n-boot 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from med_evals.stats.intervals import bootstrap_difference, bootstrap_interval, bootstrap_se
from med_evals.tasks import MEDREQAL

LABELS = ("SUPPORTED", "NOT ENOUGH INFORMATION", "REFUTED")
WEIGHTS = (543, 2057, 186)


def run_values(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    gold = random.Random(0).choices(LABELS, WEIGHTS, k=n)
    out = []
    for g in gold:
        u = rng.random()
        pred = "INVALID" if u < 0.05 else g if u < 0.75 else rng.choice(LABELS)
        out.append({"prediction": pred, "target": g, "valid": pred != "INVALID",
                    "correct": int(pred == g)})
    return out


def digest(result: Any) -> str:
    return hashlib.sha256(repr(result).encode()).hexdigest()[:12]


def measure(name: str, call: Callable[[], Any], repeat: int) -> None:
    walls, cpus = [], []
    result = None
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        result = call()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    # the peak in a call of its own: tracemalloc slows every allocation
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"{name:<28} {statistics.median(walls):7.2f} s wall {statistics.median(cpus):7.2f} s cpu"
          f"  peak {peak / 2**20:6.1f} MiB  numbers {digest(result)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    a, b = run_values(args.n, 1), run_values(args.n, 2)
    sources = [f"r{i // 4}" for i in random.Random(3).sample(range(args.n), args.n)]
    fn = MEDREQAL.headline_values
    print(f"{args.n} samples, {args.n_boot} resamples, seed 0, median of {args.repeat}")
    measure("bootstrap_interval", lambda: bootstrap_interval(fn, a, args.n_boot), args.repeat)
    measure("bootstrap_interval clusters",
            lambda: bootstrap_interval(fn, a, args.n_boot, clusters=sources), args.repeat)
    measure("bootstrap_difference", lambda: bootstrap_difference(fn, a, b, args.n_boot),
            args.repeat)
    measure("bootstrap_se", lambda: bootstrap_se(fn, a, args.n_boot), args.repeat)


if __name__ == "__main__":
    main()
