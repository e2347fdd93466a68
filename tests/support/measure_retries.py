"""What Inspect's retry and timeout flags do against a faulty provider: measured, not assumed.

Runs ``inspect eval med_evals/oncology_rct`` on the 6-trial fixture (``title_abstract``) against
the local fake OpenAI-compatible server (loopback only), once per scenario, and prints a
markdown table: requests the server received per sample, wall time, the log's status and the
samples scored ERROR. The figures in docs/ci.md come from this command:

    python -m tests.support.measure_retries [--only NAME,...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inspect_ai.log import list_eval_logs, read_eval_log

from .fake_openai import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "datasets" / "fixtures" / "oncology_trials_fixture.csv"
INSPECT = str(Path(sys.executable).parent / "inspect")
LIMIT_S = 150

#: key: (server fault, inspect eval flags)
SCENARIOS: dict[str, tuple[dict, list[str]]] = {
    "ok": ({}, []),  # no fault: the run's own time (Inspect's start-up included)
    "500": ({"error_rate": 1.0, "error_code": 500}, ["--max-retries", "0"]),
    "429": ({"error_rate": 1.0, "error_code": 429}, ["--max-retries", "0"]),
    "500-retry": ({"error_rate": 1.0, "error_code": 500}, ["--max-retries", "2"]),
    # the OpenAI client's own retries (2 by default) off: -M max_retries=0
    "500-client0": (
        {"error_rate": 1.0, "error_code": 500},
        ["--max-retries", "0", "-M", "max_retries=0"],
    ),
    "hang": (
        {"hang_rate": 1.0, "hang_seconds": 60},
        ["--attempt-timeout", "2", "--max-retries", "0"],
    ),
    "hang-retry": (
        {"hang_rate": 1.0, "hang_seconds": 60},
        ["--attempt-timeout", "2", "--max-retries", "2"],
    ),
    "hang-timeout": (
        {"hang_rate": 1.0, "hang_seconds": 60},
        ["--timeout", "5", "--max-retries", "0"],
    ),
    "mixed": (
        {"error_rate": 0.3, "hang_rate": 0.05, "hang_seconds": 60, "seed": 3},
        ["--max-retries", "5", "--attempt-timeout", "30", "--timeout", "120"],
    ),
}


def run(name: str, fault: dict, flags: list[str], tmp: Path) -> dict:
    logs = tmp / name.replace(" ", "_").replace(",", "")
    with FakeOpenAIServer(**fault) as server:
        cmd = [
            INSPECT, "eval", "med_evals/oncology_rct", "-T", f"trials_file={FIXTURE}",
            "--model", "openai-api/fake/fake", "--model-base-url", server.base_url,
            "--log-dir", str(logs), "--display", "plain", *flags,
        ]  # fmt: skip
        env = dict(os.environ, FAKE_API_KEY="sk-fake")
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=LIMIT_S)
            finished = f"{time.monotonic() - start:.1f} s (exit {proc.returncode})"
        except subprocess.TimeoutExpired:
            finished = f"not done after {LIMIT_S} s (killed)"
        counts = dict(server.counts)
    infos = list_eval_logs(str(logs))
    status, errors = "no log", "-"
    if infos:
        log = read_eval_log(infos[0].name)
        status = log.status
        preds = [s.scores["trial_outcome"].value["prediction"] for s in log.samples or []]
        errors = f"{preds.count('ERROR')}/{len(preds)}"
    per_sample = counts.get("requests", 0) / 6
    return {
        "scenario": name,
        "fault": ", ".join(f"{k}={v}" for k, v in fault.items()),
        "flags": " ".join(flags),
        "requests per sample": f"{per_sample:.1f}",
        "wall": finished,
        "status": status,
        "ERROR": errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help=f"comma-separated keys of {', '.join(SCENARIOS)} (default: all)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(SCENARIOS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            fault, flags = SCENARIOS[name]
            rows.append(run(name, fault, flags, Path(tmp)))
            print(rows[-1], file=sys.stderr, flush=True)
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
