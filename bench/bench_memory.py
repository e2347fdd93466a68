"""Peak memory of a full MedREQAL run with BERTScore (target <= 2 GB).

Runs ``med_evals/medreqal`` over a synthetic file in MedREQAL's exact schema (2,786 rows, the
paper's label counts, realistic text lengths) with an instant model and the default offline
BERTScore encoder, in a child process, and prints the child's peak resident set size.

    python bench/bench_memory.py [--n 2786]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import random, sys
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import MemoryDataset
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from synthetic import verdict_reply
from med_evals.tasks.medreqal import medreqal

rng = random.Random(0)
def outputs(input, tools, tool_choice, config):
    out = ModelOutput.from_content("mockllm/instant", verdict_reply(rng))
    out.usage = ModelUsage(input_tokens=120, output_tokens=70, total_tokens=190)
    return out

csv, n, log_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
task = medreqal(data_file=csv)
task.dataset = MemoryDataset(list(task.dataset)[:n], name=task.dataset.name)
[log] = inspect_eval(task, model=get_model("mockllm/instant", custom_outputs=outputs),
                     log_dir=log_dir, display="none")
assert log.status == "success", log.error
print(len(log.samples), "samples;", {k: round(v.value, 4) for s in log.results.scores
      for k, v in s.metrics.items() if "bertscore" in k or "rouge" in k})
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2786)
    args = ap.parse_args()
    from synthetic import medreqal_csv

    tmp = Path(tempfile.mkdtemp(prefix="med_evals_mem_"))
    csv = medreqal_csv(tmp / "medreqal_synthetic.csv")
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(csv), str(args.n), str(tmp / "logs")],
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).parent)),
    )
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(out.stderr[-3000:])
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB
    print(out.stdout.strip())
    print(
        f"full MedREQAL run with BERTScore: {elapsed:.0f} s wall, peak RSS {peak_mb:.0f} MB "
        f"(target <= 2048 MB); load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
