"""Where the CPU of one suite run goes: ``inspect eval med_evals/healthfc`` on the 750 claims (or
``--study medreqal --n 10000``: 10,000 synthetic questions in MedREQAL's schema) against the
local 200 ms server at 32 connections, sampled by py-spy while it holds the GIL (so only
Python's own CPU time is counted, not threads waiting), each sample attributed to the first of
:data:`AREAS` that a frame of its stack belongs to (the order is the table's: start-up first,
then Inspect's log side, our scorer, the OpenAI client, events, the model layer, the runner).
pydantic is counted across all areas too (validation and serialisation inside any of them).

    pip install py-spy
    python bench/attribute_cpu.py [--settings=--no-log-realtime] [--n 750] [--rate 200]
    python bench/attribute_cpu.py --study medreqal --n 10000 --settings=--no-log-realtime
    python bench/attribute_cpu.py --stacks FILE   # attribute a py-spy raw file already recorded

The figures in docs/performance.md ("Where the CPU goes") come from this script.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import BIN, bench_env, commands, start_server, study_args  # noqa: E402
from synthetic import data_dir as find_data_dir  # noqa: E402

#: (area, pattern of a frame in py-spy's raw output): the first area any frame matches
AREAS: tuple[tuple[str, str], ...] = (
    ("start-up: imports, entry points, task and model set-up",
     r"_find_and_load|ensure_entry_points|platform_init|init_hooks|resolve_tasks|eval_init"),
    ("realtime sample buffer (SQLite, for inspect view during the run)",
     r"_recorders/buffer|SampleBufferDatabase"),
    ("log writing and compression (.eval zip, zstd)",
     r"_recorders/eval|zipfile|zstandard|write_eval_log|_zip_writestr|log_sample"),
    ("sample condensing (attachments, de-duplication)", r"_condense|condense_sample"),
    ("our scorer and metrics (med_evals, ROUGE-L, scikit-learn)",
     r"med_evals/scorers/|rouge_score|nltk|rapidfuzz|sklearn|call_metric|compute_eval_scores"),
    ("OpenAI client: request and response models, HTTP", r"openai/|httpx|httpcore|h11"),
    ("events and transcript records", r"inspect_ai/event/|_transcript"),
    ("model layer (Inspect's generate, retries, cache)", r"inspect_ai/model/"),
    ("task runner and scheduler (Inspect)", r"inspect_ai/_eval/"),
    ("display", r"rich/|textual|_display"),
)


def attribute(stacks: Path, rate: float) -> list[tuple[str, float, float]]:
    """(area, seconds, share) per area, then pydantic's seconds and share across all."""
    counts: Counter[str] = Counter()
    pydantic = total = 0
    for line in stacks.read_text(encoding="utf-8").splitlines():
        stack, _, n_text = line.rpartition(" ")
        n = int(n_text)
        total += n
        frames = stack.split(";")
        area = next((a for a, pat in AREAS if any(re.search(pat, f) for f in frames)), "other")
        counts[area] += n
        pydantic += n * any("pydantic" in f for f in frames)
    rows = [(a, n / rate, n / total) for a, n in counts.most_common()]
    rows.append(("pydantic (inside the areas above)", pydantic / rate, pydantic / total))
    rows.append(("sampled in all", total / rate, 1.0))
    return rows


def record(args: argparse.Namespace) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="med_evals_cpu_"))
    server, base_url = start_server(0.2)
    out = tmp / "stacks.txt"
    # bench_peers' "suite" runner, under py-spy
    task_args = study_args(args.study, args.n, find_data_dir(args.data_dir), tmp)
    [suite] = commands("suite", args.n, None, base_url, 32, tmp, tmp / "claims.jsonl", None,
                       task_args, args.study)
    cmd = [str(BIN / "py-spy"), "record", "--gil", "-r", str(args.rate), "-f", "raw", "-o",
           str(out), "--", sys.executable, *suite, *shlex.split(args.settings)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=bench_env(tmp))
    finally:
        server.terminate()
    if done.returncode:
        raise SystemExit(f"py-spy or the run failed (exit {done.returncode}):\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=750)
    ap.add_argument("--study", choices=("healthfc", "medreqal"), default="healthfc")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--settings", default="", help="extra inspect eval options")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--stacks", type=Path, default=None, help="attribute this raw file")
    args = ap.parse_args()
    stacks = args.stacks or record(args)
    settings = args.settings or "Inspect defaults"
    print(f"{args.study}: {args.n} items, settings: {settings} ({stacks})")
    for area, seconds, share in attribute(stacks, args.rate):
        print(f"{seconds:7.1f} s {100 * share:5.1f}%  {area}")


if __name__ == "__main__":
    main()
