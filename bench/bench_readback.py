"""Reading a large run back: wall time and peak memory of ``med-evals report``, ``baseline`` and
``regress`` over one 10,000-sample log (issue 42: no slower and no larger after the house moved).

Makes the log once (``--log-dir``, kept between calls): ``med_evals/medreqal`` over a synthetic
file in MedREQAL's exact schema (bench/synthetic.py, the paper's label proportions) with an
instant mock model whose replies are realistic in length, BERTScore off (generation scoring is
not what is read back). Then each command runs in its own process, ``--repeat`` times, and the
bench prints its median wall time, its median CPU time (user + system, the child's: less
sensitive to other processes on a shared machine) and its largest peak resident set size (the
child's ``ru_maxrss``). Only the command line is used, so the same bench measures the code
before and after a refactoring.

    python bench/bench_readback.py [--n 10000] [--log-dir /tmp/med_evals_readback] [--repeat 3]
        [--readers]

``--readers`` also times the readers alone over the same log, each in its own process: ours
(``med_evals.logs.runs.load_all``: the header, then the samples a chunk at a time) and
Inspect's data frames (``inspect_ai.analysis.evals_df`` and ``samples_df`` with their default
columns: the header and the sample summaries, which hold no reply, no message sent and no model
call), the figures behind what ``med_evals.logs.runs`` reads through Inspect and what not.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import random, sys
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from synthetic import verdict_reply

rng = random.Random(0)
def outputs(input, tools, tool_choice, config):
    out = ModelOutput.from_content("mockllm/instant", verdict_reply(rng))
    out.usage = ModelUsage(input_tokens=120, output_tokens=70, total_tokens=190)
    return out

csv, log_dir = sys.argv[1], sys.argv[2]
[log] = inspect_eval("med_evals/medreqal", task_args={"data_file": csv, "bertscore": False},
                     model=get_model("mockllm/instant", custom_outputs=outputs),
                     log_dir=log_dir, display="none", max_connections=64)
assert log.status == "success", log.error
print(len(log.samples), "samples")
"""

MEASURE = r"""
import resource, subprocess, sys, time
start = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - start
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(rc, wall, use.ru_utime + use.ru_stime, use.ru_maxrss)
"""


#: --readers: each reader alone over the log (its path the first argument)
READERS = {
    "reader": "import sys\nfrom med_evals.logs.runs import load_all\n"
                         "assert load_all(sys.argv[1:]).runs",
    "evals_df + samples_df": "import sys\nfrom inspect_ai.analysis import evals_df, samples_df\n"
                             "evals_df(sys.argv[1], quiet=True)\n"
                             "assert len(samples_df(sys.argv[1], quiet=True))",
}


def make_log(n: int, log_dir: Path) -> Path:
    logs = sorted(log_dir.glob("*.eval"))
    if logs:
        return logs[-1]
    sys.path.insert(0, str(Path(__file__).parent))
    from synthetic import medreqal_csv

    csv = medreqal_csv(log_dir / "medreqal_synthetic.csv", rows_wanted=n)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(csv), str(log_dir)], capture_output=True, text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).parent)),
    )
    if out.returncode:
        sys.exit(f"making the log failed:\n{out.stderr[-3000:]}")
    print(f"made the log: {out.stdout.strip()} in {time.perf_counter() - start:.0f} s")
    return sorted(log_dir.glob("*.eval"))[-1]


def measure(command: list[str], repeat: int) -> tuple[float, float, float]:
    """Median wall seconds, median CPU seconds (user + system: less sensitive than wall time to
    other processes on a shared machine) and the largest peak RSS (MB) of ``command`` over
    ``repeat`` runs."""
    walls, cpus, peaks = [], [], []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True,
                             text=True, check=True)
        rc, wall, cpu, rss = out.stdout.split()
        if rc not in ("0", "1"):  # report 0; regress 0 or 1 (a pass or a regression)
            sys.exit(f"{' '.join(command)}: exit {rc}\n{out.stderr[-2000:]}")
        walls.append(float(wall))
        cpus.append(float(cpu))
        peaks.append(int(rss) / 1024)
    return statistics.median(walls), statistics.median(cpus), max(peaks)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--log-dir", default=str(Path(tempfile.gettempdir()) / "med_evals_readback"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--readers", action="store_true",
                    help="also time our reader and inspect_ai.analysis's frames alone")
    args = ap.parse_args()
    log_dir = Path(args.log_dir) / str(args.n)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = make_log(args.n, log_dir)
    work = Path(tempfile.mkdtemp(prefix="med_evals_readback_"))
    baseline = work / "baseline.json"
    cli = [sys.executable, "-m", "med_evals.commands.cli"]
    try:
        import med_evals.commands.cli  # noqa: F401
    except ImportError:  # the package before the house of issue 42
        cli = [sys.executable, "-m", "med_evals.cli"]
    subprocess.run([*cli, "baseline", str(log), "-o", str(baseline)], check=True,
                   capture_output=True)
    print(f"log: {log} ({log.stat().st_size / 1e6:.1f} MB, {args.n} samples)")
    for name, command in (
        ("report", [*cli, "report", str(log), "--out", str(work / "report")]),
        ("baseline", [*cli, "baseline", str(log), "-o", str(work / "b2.json")]),
        ("regress", [*cli, "regress", "--baseline", str(baseline), str(log)]),
    ):
        print(line(name, *measure(command, args.repeat), args.repeat))
    if args.readers:
        for name, code in READERS.items():
            print(line(name, *measure([sys.executable, "-c", code, str(log)], args.repeat),
                       args.repeat))


def line(name: str, wall: float, cpu: float, peak: float, repeat: int) -> str:
    return (f"{name:22} {wall:6.2f} s (median of {repeat}), CPU {cpu:6.2f} s  peak RSS "
            f"{peak:7.1f} MB")


if __name__ == "__main__":
    main()
