"""A full MedREQAL run against a vLLM server: samples/s, output tokens/s, time for 2,786.

The run is ``med_evals/medreqal`` as the study scores it (Table 7 chat prompt, temperature 0, at
most 256 output tokens, the label parser, ROUGE-L; BERTScore off unless ``--bertscore``) on
2,786 synthetic questions in MedREQAL's schema and lengths (``bench/synthetic.py``), or on the
real CSV (``--data-file ../shared/datasets/medreqal/MedREQAL.csv``), against ``vllm/<model>``:

- ``VLLM_BASE_URL`` (or ``--base-url``) set: a running server (``vllm serve ...``); the server's
  own flags apply, ``-M`` server arguments are not used;
- else Inspect's vllm provider starts ``vllm serve <model>`` on this machine (vLLM installed),
  passing each ``-M key=value`` as ``--key value`` (``-M tensor_parallel_size=2`` ->
  ``--tensor-parallel-size 2``; ``-M devices=0,1`` sets ``CUDA_VISIBLE_DEVICES`` and the tensor
  parallel size to the number of devices: ``inspect_ai/model/_providers/vllm.py``,
  ``_util/local_server.py``). **Bound to 127.0.0.1** unless ``-M host=...`` says otherwise:
  Inspect's own default is ``0.0.0.0`` (every interface: the server, and its API key in the
  process list, open to the network), which this script never takes silently.

``--processes N`` times the run as N processes against one running server (``med-evals run
--processes N``: one shard each, the recommended settings), each with ``--max-connections``:
where the evaluating host's CPU, not the GPU, limits samples/s (docs/models.md).

``--max-connections`` defaults to 256: vLLM batches the requests in flight (its
``max-num-seqs`` is 256 by default), and Inspect's default (adaptive, 10 to 100, or the vllm
provider's 10) leaves most of a GPU's batch empty: docs/models.md.

A warm-up run (``--warmup`` samples, default 16) starts the server and fills its caches; the
timed run follows. The figures come from the timed run's log: samples/s and output tokens/s over
the time between its first sample's start and its last sample's end (Inspect's ``started_at`` /
``completed_at``; output tokens from the log's model usage), the wall time of the whole call
beside them, and the time for all 2,786 questions at that rate. The last line,
``RESULT {...}``, holds the same figures as JSON, with the log's path.

    python bench/bench_vllm.py --model Qwen/Qwen2.5-7B-Instruct --max-connections 256
    python bench/bench_vllm.py --model meta-llama/Llama-3.1-8B-Instruct -M tensor_parallel_size=2
    VLLM_BASE_URL=http://gpu:8000/v1 python bench/bench_vllm.py --model Qwen/Qwen2.5-7B-Instruct
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog

from med_evals.tasks.medreqal import medreqal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import medreqal_csv  # noqa: E402

#: MedREQAL's questions (the paper's count; the synthetic file has as many)
FULL = 2786
#: where Inspect's vllm provider binds a server it starts, unless -M host=... says otherwise
LOCAL_HOST = "127.0.0.1"
#: what docs/models.md expects of one GPU with a 7-8B model in bf16 at 256 requests in flight
#: (on paper, from published benchmarks: not measured here): GPU name -> (output tokens/s,
#: samples/s) ranges
EXPECTED = {
    "H200": ((3300, 9000), (15, 90)),
    "H100": ((3000, 8100), (14, 80)),
}


def expected(gpu: str) -> str:
    """docs/models.md's expected figures for the GPU ``nvidia-smi`` names, or why none."""
    for name, ((t0, t1), (s0, s1)) in EXPECTED.items():
        if name in gpu:
            return (f"expected on one {name} (docs/models.md, on paper): {t0:,}-{t1:,} output "
                    f"tokens/s, {s0}-{s1} samples/s")
    return "no expected figure for this GPU in docs/models.md"


def server_args(items: list[str], started_here: bool) -> dict[str, Any]:
    """The ``-M`` arguments, with ``host`` 127.0.0.1 when Inspect starts the server here and
    ``-M host=`` does not say otherwise (:data:`LOCAL_HOST`)."""
    args = model_args(items)
    if started_here:
        args.setdefault("host", LOCAL_HOST)
    return args


def model_args(items: list[str]) -> dict[str, Any]:
    """``-M key=value`` pairs, values read as YAML (``2`` an int, ``true`` a bool)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"-M {item!r}: expected key=value")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _time(stamp: str | None) -> datetime:
    if not stamp:
        raise ValueError("a sample without start or end time")
    return datetime.fromisoformat(stamp)


def figures(log: EvalLog, wall: float) -> dict[str, Any]:
    """Throughput of a run from its log: samples/s and output tokens/s over the samples' span."""
    return figures_of(log.samples or [], wall, str(log.location),
                      f"status {log.status}: {log.error}")


def figures_of(samples: list[Any], wall: float, location: str, why: str = "") -> dict[str, Any]:
    """:func:`figures` over the samples of one run or of its shards' logs together."""
    done = [s for s in samples if s.error is None]
    if not done:
        raise SystemExit(f"no sample completed ({why})")
    start = min(_time(s.started_at) for s in samples)
    end = max(_time(s.completed_at) for s in samples)
    span = (end - start).total_seconds()
    usage = [u for s in done for u in s.model_usage.values()]
    output_tokens = sum(u.output_tokens for u in usage)
    input_tokens = sum(u.input_tokens for u in usage)
    per_second = len(done) / span
    return {
        "samples": len(done),
        "failed_samples": len(samples) - len(done),
        "span_s": round(span, 3),
        "wall_s": round(wall, 3),
        "samples_per_s": round(per_second, 3),
        "output_tokens": output_tokens,
        "input_tokens": input_tokens,
        "output_tokens_per_s": round(output_tokens / span, 1),
        "output_tokens_per_sample": round(output_tokens / len(done), 1),
        "full_run_s": round(FULL / per_second, 1),
        "log": location,
    }


def gpus() -> str:
    """The GPUs ``nvidia-smi`` lists, or a note that it is absent."""
    if not shutil.which("nvidia-smi"):
        return "no nvidia-smi on this machine"
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    return "; ".join(out.stdout.strip().splitlines()) or out.stderr.strip()


def run(args: argparse.Namespace, data_file: Path, limit: int | None, log_dir: Path) -> EvalLog:
    started_here = not (args.base_url or os.environ.get("VLLM_BASE_URL"))
    (log,) = inspect_eval(
        medreqal(data_file=str(data_file), bertscore=args.bertscore),
        model=f"vllm/{args.model}",
        model_base_url=args.base_url,
        model_args=server_args(args.M, started_here),
        max_connections=args.max_connections,
        limit=limit,
        log_dir=str(log_dir),
        display="none",
        log_samples=True,
    )
    if log.status != "success":
        raise SystemExit(f"run failed: {log.status} {log.error}")
    return log


def run_processes(args: argparse.Namespace, data_file: Path, server: str, log_dir: Path,
                  ) -> tuple[list[Any], float, str]:
    """The suite in ``--processes`` processes against one running server (``med-evals run``:
    ``-T shard=i/N`` each, the recommended settings): the samples of every shard's log, the
    wall time, and the log folder."""
    import csv
    import subprocess

    from inspect_ai.log import list_eval_logs, read_eval_log

    file = data_file
    if args.limit:  # shards partition the whole run: the data is cut instead of --limit
        with open(data_file, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))[: args.limit]
        file = log_dir.parent / "timed.csv"
        with open(file, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    folder = log_dir / "processes"
    cmd = [str(Path(sys.executable).parent / "med-evals"), "run", "med_evals/medreqal",
           "--processes", str(args.processes), "-T", f"data_file={file}",
           "-T", f"bertscore={str(args.bertscore).lower()}", "--model", f"vllm/{args.model}",
           "--model-base-url", server, "--max-connections", str(args.max_connections),
           "--log-dir", str(folder)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"med-evals run failed (exit {done.returncode}): {done.stderr[-2000:]}")
    # the shards' logs (med-evals run's merged log beside them holds the same samples again:
    # known from its header, and not read)
    shard_logs = [info.name for info in list_eval_logs(str(folder))
                  if not read_eval_log(info.name, header_only=True).eval.shards]
    samples = [s for name in shard_logs for s in read_eval_log(name).samples or []]
    return samples, wall, str(folder)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="served model name")
    ap.add_argument(
        "-M",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="model/server argument, e.g. tensor_parallel_size=2 (repeatable)",
    )
    ap.add_argument(
        "--max-connections",
        type=int,
        default=256,
        help="requests in flight (vLLM batches them; default 256)",
    )
    ap.add_argument(
        "--data-file",
        type=Path,
        default=None,
        help="a MedREQAL CSV (default: 2,786 synthetic rows in its schema)",
    )
    ap.add_argument("--limit", type=int, default=None, help="questions of the timed run")
    ap.add_argument("--warmup", type=int, default=16, help="questions of the warm-up run (0: none)")
    ap.add_argument("--base-url", default=None, help="a running server (default $VLLM_BASE_URL)")
    ap.add_argument("--log-dir", type=Path, default=None, help="default: a temporary folder")
    ap.add_argument("--bertscore", action="store_true", help="also score BERTScore (CPU)")
    ap.add_argument("--processes", type=int, default=1,
                    help="the timed run as N processes against one running server (med-evals "
                    "run --processes N: one shard each); needs --base-url or VLLM_BASE_URL")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="med_evals_bench_vllm_"))
    log_dir = args.log_dir or tmp / "logs"
    data_file = args.data_file or medreqal_csv(tmp / "medreqal_synthetic.csv")
    server = args.base_url or os.environ.get("VLLM_BASE_URL")
    if server:
        where = f"running server {server}"
        if args.M:
            where += f" (its own flags apply; -M {' '.join(args.M)} not passed to it)"
    else:
        where = f"vllm serve {args.model} started here, server args {server_args(args.M, True)}"
    gpu = gpus()
    print(f"model vllm/{args.model}; {where}", flush=True)
    print(f"data {data_file}; max connections {args.max_connections}; GPUs: {gpu}", flush=True)

    if args.warmup:
        start = time.perf_counter()
        run(args, data_file, args.warmup, log_dir)
        print(
            f"warm-up: {args.warmup} questions in {time.perf_counter() - start:.1f} s "
            "(with server start-up when started here)",
            flush=True,
        )
    if args.processes > 1:
        if not server:  # each process would start a server of its own on the one GPU
            raise SystemExit("--processes needs a running server (--base-url or "
                             "VLLM_BASE_URL): each process would start its own vllm serve")
        samples, wall, folder = run_processes(args, data_file, server, log_dir)
        out = figures_of(samples, wall, folder, "the shards' logs")
    else:
        start = time.perf_counter()
        log = run(args, data_file, args.limit, log_dir)
        out = figures(log, time.perf_counter() - start)
    out |= {
        "processes": args.processes,
        "model": args.model,
        "max_connections": args.max_connections,
        "model_args": model_args(args.M),
        "server": server or "started here",
        "expected": expected(gpu),
    }
    print(
        f"samples: {out['samples']} ({out['failed_samples']} failed) in {out['span_s']:.1f} s "
        f"from first start to last end; wall {out['wall_s']:.1f} s"
    )
    print(f"samples/s: {out['samples_per_s']:.2f}")
    print(out["expected"])
    print(
        f"output tokens/s: {out['output_tokens_per_s']:.1f} ({out['output_tokens']} output "
        f"tokens, {out['output_tokens_per_sample']:.1f} per sample; {out['input_tokens']} input)"
    )
    print(
        f"time for {FULL:,} questions: {out['full_run_s']:.1f} s "
        f"({out['full_run_s'] / 60:.1f} min) at this rate"
    )
    print("RESULT " + json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
