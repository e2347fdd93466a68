"""med_evals beside its peers on the same work: HealthFC's 750 claims (``--study healthfc``,
default) or 10,000 questions in MedREQAL's schema (``--study medreqal --n 10000``: synthetic
rows of the paper's label proportions and lengths, ``bench/synthetic.py``), the same Table 7
messages, at most 256 output tokens, against the same local OpenAI-compatible server.

Runners, each a process of its own (timed from outside: wall time, user + system CPU and peak
RSS from ``os.wait4``), run interleaved round by round so the noise of a shared machine falls on
all of them alike:

- ``suite``: ``inspect eval med_evals/healthfc -T bertscore=false --display none`` (Inspect's
  defaults otherwise);
- ``suite-recommended``: the same with the run settings docs/performance.md recommends
  (``--no-log-realtime --no-score-display``);
- ``suite-sharded``: the recommended run as two processes at once, ``--limit 1-375`` and
  ``--limit 376-750`` into one log folder (Inspect's own sample ranges; ``med-evals report``,
  ``baseline`` and ``regress`` read the two logs as one run); CPU is the sum, RSS the larger;
- ``suite-processes``: ``med-evals run med_evals/<study> --processes P`` (``--processes``,
  default 2): ``-T shard=i/P`` in P processes with the recommended settings, one merged run;
  CPU is the whole process tree's;
- any suite runner with Inspect flags after a colon, to measure a setting:
  ``suite-recommended:--log-buffer 100``, ``suite-recommended:--no-score-display``;
- ``bare-inspect``: a bare Inspect task over the same messages, ``generate()`` and
  ``includes()``, ``--display none``;
- ``lm-eval``: lm-evaluation-harness (pinned, :data:`LM_EVAL`, installed into a virtual
  environment of the bench's own, ``bench/.lm-eval-venv``) with ``local-chat-completions``,
  ``num_concurrent`` = the connections, the same system message and user messages, a regex
  filter and exact match, ``--log_samples``. Skipped, and said so, when it cannot be installed
  or run (``--no-lm-eval`` skips it on purpose).

Scenarios (``--scenarios``): ``0.2@32``, ``0.2@128`` (a 200 ms server at 32 and 128
connections: the shape of an API run), ``2@256``, ``2@1000`` (a 2 s server at 256 and 1,000
connections: a large API or vLLM run). For each runner and scenario the bench prints the wall
time of every round, their median, CPU, peak RSS, the requests the server saw, and the ratio of
the median wall time to lm-eval's and to the latency bound (claims x latency / connections).

``--slope`` also runs every runner with 5 claims (start-up) and prints the wall time and CPU
per further claim, ``(full - five) / 745``, and the memory slope (MB per 1,000 claims), the
suite's beside bare Inspect's and lm-eval's.

    python bench/bench_peers.py [--rounds 3] [--scenarios 0.2@32,0.2@128,2@256,2@1000]
        [--runners suite,suite-recommended,suite-sharded,bare-inspect,lm-eval] [--slope]
        [--n 750] [--study healthfc|medreqal] [--processes 2] [--data-dir DIR] [--no-lm-eval]

    python bench/bench_peers.py --study medreqal --n 10000 --scenarios 0.2@32,0.2@128 \
        --runners suite-recommended,suite-processes,bare-inspect,lm-eval --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # synthetic.py, beside this file
from synthetic import data_dir as find_data_dir  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: the peer, pinned (the version the issue measured)
LM_EVAL = "lm-eval[api]==0.4.13"
LM_EVAL_VENV = REPO / "bench" / ".lm-eval-venv"
BIN = Path(sys.executable).parent
ALL_RUNNERS = ("suite", "suite-recommended", "suite-sharded", "suite-processes", "bare-inspect",
               "lm-eval")
RECOMMENDED = ("--no-log-realtime", "--no-score-display")

SERVER = textwrap.dedent(
    """
    import random, sys, time
    sys.path.insert(0, {repo!r}); sys.path.insert(0, {bench!r})
    from synthetic import verdict_reply
    from tests.support.fake_openai import FakeOpenAIServer
    with FakeOpenAIServer(reply=lambda t: verdict_reply(random.Random(len(t))),
                          latency={latency}) as s:
        print(s.base_url, flush=True)
        time.sleep(36000)
    """
)

BARE_TASK = textwrap.dedent(
    """
    import json
    from inspect_ai import Task, task
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate


    @task
    def bare():
        rows = [json.loads(line) for line in open({claims!r}, encoding="utf-8")]
        samples = [
            Sample(id=r["id"], target=r["target"],
                   input=[ChatMessageSystem(content=r["system"]),
                          ChatMessageUser(content=r["user"])])
            for r in rows
        ]
        return Task(dataset=samples, solver=generate(), scorer=includes(),
                    config=GenerateConfig(temperature=0.0, max_tokens=256))
    """
)

LM_EVAL_TASK = textwrap.dedent(
    """
    task: healthfc_table7
    dataset_path: json
    dataset_kwargs:
      data_files:
        test: {claims}
    test_split: test
    output_type: generate_until
    doc_to_text: "{{{{user}}}}"
    doc_to_target: "{{{{target}}}}"
    generation_kwargs:
      until: []
      max_gen_toks: 256
      temperature: 0
      do_sample: false
    filter_list:
      - name: label
        filter:
          - function: regex
            regex_pattern: "(SUPPORTED|REFUTED|NOT ENOUGH INFORMATION)"
          - function: take_first
    metric_list:
      - metric: exact_match
    """
)


@dataclass
class Result:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    failed: str = ""


def study_args(study: str, n: int, data_dir: str, out: Path) -> list[str]:
    """The suite's task arguments for the study's data: HealthFC's claims from the data
    folder, or a synthetic MedREQAL file of ``n`` rows written into ``out``."""
    if study == "healthfc":
        return ["-T", f"data_dir={data_dir}"]
    from synthetic import medreqal_csv

    file = out / "medreqal_synthetic.csv"
    if not file.exists():
        medreqal_csv(file, rows_wanted=max(n, 2786))
    return ["-T", f"data_file={file}"]


def claims_file(study: str, n: int, study_task_args: list[str], out: Path) -> Path:
    """The items as the suite sends them (its own loader and Table 7 messages, the task built
    with :func:`study_args`' arguments), as JSONL."""
    from med_evals.tasks.healthfc import healthfc
    from med_evals.tasks.medreqal import medreqal

    kwargs = dict(a.split("=", 1) for a in study_task_args[1::2])
    task = {"healthfc": healthfc, "medreqal": medreqal}[study](
        **kwargs, generation_scoring=False)
    path = out / "claims.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for sample in list(task.dataset)[:n]:
            system, user = (m.text for m in sample.input)  # type: ignore[union-attr]
            f.write(json.dumps({"id": sample.id, "system": system, "user": user,
                                "target": sample.target}) + "\n")
    return path


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    """The fake server in a process of its own (on a free port), and its base URL."""
    code = SERVER.format(repo=str(REPO), bench=str(REPO / "bench"), latency=latency)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def bench_env(tmp: Path) -> dict[str, str]:
    """The runners' environment: the fake server's keys, a cache of the run's own, offline."""
    return {**os.environ, "FAKE_API_KEY": "local", "OPENAI_API_KEY": "local",
            "INSPECT_CACHE_DIR": str(tmp / "cache"), "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def served(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_counts", timeout=10) as r:
        return int(json.load(r).get("requests", 0))


def ensure_lm_eval(skip: bool) -> tuple[Path | None, str]:
    """The lm-eval executable of the bench's own virtual environment (made on first use), or
    None and why not."""
    if skip:
        return None, "skipped (--no-lm-eval)"
    exe = LM_EVAL_VENV / "bin" / "lm_eval"
    if exe.exists():
        return exe, ""
    print(f"installing {LM_EVAL} into {LM_EVAL_VENV} (once) ...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(LM_EVAL_VENV)], check=True)
        pip = [str(LM_EVAL_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True, capture_output=True)
        subprocess.run([*pip, LM_EVAL], check=True, capture_output=True, text=True)
    except (subprocess.CalledProcessError, OSError) as ex:
        why = getattr(ex, "stderr", "") or str(ex)
        shutil.rmtree(LM_EVAL_VENV, ignore_errors=True)
        return None, f"skipped: {LM_EVAL} could not be installed ({why.strip()[-300:]})"
    return (exe, "") if exe.exists() else (None, "skipped: no lm_eval executable after install")


def commands(runner: str, n: int, limit: int | None, base_url: str, conn: int, work: Path,
             claims: Path, lm_eval: Path | None, study_task_args: list[str],
             study: str = "healthfc", processes: int = 2) -> list[list[str]]:
    """The command line(s) of one run (two for the sharded suite); ``runner:FLAGS`` adds Inspect
    flags to a suite runner's command."""
    runner, _, extra_text = runner.partition(":")
    extra = extra_text.split()
    logs = work / "logs"
    inspect = [str(BIN / "inspect"), "eval"]
    common = ["--model", "openai-api/fake/fake", "--model-base-url", base_url,
              "--max-connections", str(conn), "--display", "none", "--log-dir", str(logs)]
    task_args = ["-T", "bertscore=false", *study_task_args]
    suite = [*inspect, f"med_evals/{study}", *task_args, *common, *extra]
    count = limit or n
    if runner == "suite-processes":
        # med-evals run gives every shard --no-log-realtime --display none; -T shard=i/P after
        # the other selections: --limit cannot be combined with it, so the data is cut instead
        return [[str(BIN / "med-evals"), "run", f"med_evals/{study}", "--processes",
                 str(processes), *task_args[:2], *limit_args(study_task_args, count, work),
                 *common, *extra]]
    if runner == "suite":
        return [[*suite, "--limit", str(count)]]
    if runner == "suite-recommended":
        return [[*suite, *RECOMMENDED, "--limit", str(count)]]
    if runner == "suite-sharded":
        half = (count + 1) // 2
        return [[*suite, *RECOMMENDED, "--limit", f"1-{half}"],
                [*suite, *RECOMMENDED, "--limit", f"{half + 1}-{count}"]]
    if runner == "bare-inspect":
        file = work / "bare.py"
        file.write_text(BARE_TASK.format(claims=str(claims)))
        # relative: Inspect lists a task file given by an absolute path as a glob pattern
        return [[*inspect, file.name, *common, "--limit", str(count)]]
    if runner == "lm-eval":
        assert lm_eval is not None
        tasks = work / "lm_tasks"
        tasks.mkdir(exist_ok=True)
        (tasks / "healthfc_table7.yaml").write_text(LM_EVAL_TASK.format(claims=str(claims)))
        system = json.loads(claims.read_text(encoding="utf-8").splitlines()[0])["system"]
        args = (f"model=fake,base_url={base_url}/chat/completions,num_concurrent={conn},"
                "max_retries=3,tokenized_requests=False,tokenizer_backend=None")
        return [[str(lm_eval), "--model", "local-chat-completions", "--model_args", args,
                 "--tasks", "healthfc_table7", "--include_path", str(tasks),
                 "--apply_chat_template", "--system_instruction", system, "--batch_size", "1",
                 "--limit", str(count), "--log_samples", "--output_path", str(work / "lm_out")]]
    raise ValueError(runner)


def limit_args(study_task_args: list[str], count: int, work: Path) -> list[str]:
    """The study's data cut to its first ``count`` items, for a runner that cannot take
    ``--limit`` (``med-evals run``: shards partition the whole run)."""
    kind, value = study_task_args[1].split("=", 1)
    if kind == "data_file":
        import csv

        with open(value, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))[:count]
        cut = work / "cut.csv"
        with open(cut, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return ["-T", f"data_file={cut}"]
    if count >= 750:  # HealthFC: all of it
        return study_task_args
    raise SystemExit("suite-processes runs HealthFC's 750 claims whole (--n 750, no --slope)")


def run(cmds: list[list[str]], env: dict[str, str], cwd: Path
        ) -> tuple[float, float, float, str]:
    """Wall seconds, user + system CPU seconds (all processes), peak RSS in MB (the largest),
    and the error output of a command that failed ('' if none)."""
    start = time.perf_counter()
    procs = [subprocess.Popen(c, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for c in cmds]
    cpu, rss, failed = 0.0, 0.0, ""
    for p in procs:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read() if p.stderr else ""
        cpu += usage.ru_utime + usage.ru_stime
        rss = max(rss, usage.ru_maxrss / 1024)
        if p.returncode:
            failed = f"exit {p.returncode}: {err.strip()[-400:]}"
    return time.perf_counter() - start, cpu, rss, failed


def bench(args: argparse.Namespace) -> None:
    data_dir = find_data_dir(args.data_dir)
    tmp = Path(tempfile.mkdtemp(prefix="med_evals_peers_"))
    study_task_args = study_args(args.study, args.n, data_dir, tmp)
    claims = claims_file(args.study, args.n, study_task_args, tmp)
    runners = [r for r in args.runners.split(",") if r]
    lm_eval, why = ensure_lm_eval(args.no_lm_eval) if "lm-eval" in runners else (None, "")
    if "lm-eval" in runners and lm_eval is None:
        print(f"lm-eval: {why}")
        runners.remove("lm-eval")
    env = bench_env(tmp)
    sizes = [("full", None)] + ([("five", 5)] if args.slope else [])
    print(f"{args.study}: {args.n} items; runners: {', '.join(runners)}; {args.rounds} round(s); "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for scenario in args.scenarios.split(","):
        latency, conn = float(scenario.split("@")[0]), int(scenario.split("@")[1])
        server, base_url = start_server(latency)
        results: dict[tuple[str, str], Result] = {}
        try:
            for rnd in range(args.rounds):
                order = runners if rnd % 2 == 0 else list(reversed(runners))
                for size, limit in sizes:
                    for runner in order:
                        # no "@" or "." in the folder: Inspect reads "file.py@task" specs
                        safe = scenario.replace("@", "at").replace(".", "p")
                        tag = "".join(c if c.isalnum() else "_" for c in runner)
                        work = tmp / f"{safe}-{tag}-{size}-{rnd}"
                        work.mkdir(parents=True)
                        before = served(base_url)
                        cmds = commands(runner, args.n, limit, base_url, conn, work, claims,
                                        lm_eval, study_task_args, args.study, args.processes)
                        wall, cpu, rss, failed = run(cmds, env, work)
                        res = results.setdefault((runner, size), Result())
                        res.wall.append(wall)
                        res.cpu.append(cpu)
                        res.rss_mb.append(rss)
                        res.requests.append(served(base_url) - before)
                        res.failed = res.failed or failed
                        print(f"  {scenario} round {rnd + 1} {size:4} {runner:18} {wall:6.1f} s "
                              f"wall {cpu:6.1f} s CPU {rss:6.0f} MB", flush=True)
        finally:
            server.terminate()
        report(scenario, latency, conn, args.n, runners, results, args.slope)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"(load average now {os.getloadavg()[0]:.1f})")


def report(scenario: str, latency: float, conn: int, n: int, runners: list[str],
           results: dict[tuple[str, str], Result], slope: bool) -> None:
    bound = n * latency / min(conn, n)
    peer = results.get(("lm-eval", "full"))
    peer_wall = statistics.median(peer.wall) if peer and not peer.failed else None
    print(f"\n{scenario}: {latency:g} s server, {conn} connections, {n} claims; latency bound "
          f"{bound:.1f} s")
    print(f"{'runner':18} {'wall (s), each round':28} {'median':>7} {'CPU (s)':>8} "
          f"{'RSS (MB)':>9} {'requests':>9} {'/ lm-eval':>9} {'/ bound':>8}")
    for runner in runners:
        r = results[(runner, "full")]
        if r.failed:
            print(f"{runner:18} failed: {r.failed}")
            continue
        med = statistics.median(r.wall)
        rounds = " / ".join(f"{w:.1f}" for w in r.wall)
        vs_peer = f"{med / peer_wall:.2f}" if peer_wall else "—"
        print(f"{runner:18} {rounds:28} {med:7.1f} {statistics.median(r.cpu):8.1f} "
              f"{max(r.rss_mb):9.0f} {statistics.median(r.requests):9.0f} {vs_peer:>9} "
              f"{med / bound:8.1f}")
    if not slope:
        return
    print(f"{'runner':18} {'start-up (s)':>13} {'ms per claim':>13} {'CPU ms/claim':>13} "
          f"{'MB / 1,000':>11}")
    for runner in runners:
        full, five = results[(runner, "full")], results.get((runner, "five"))
        if full.failed or five is None or five.failed:
            continue
        extra = n - 5
        wall_ms = 1000 * (statistics.median(full.wall) - statistics.median(five.wall)) / extra
        cpu_ms = 1000 * (statistics.median(full.cpu) - statistics.median(five.cpu)) / extra
        mem = 1000 * (max(full.rss_mb) - max(five.rss_mb)) / extra
        print(f"{runner:18} {statistics.median(five.wall):13.1f} {wall_ms:13.1f} "
              f"{cpu_ms:13.1f} {mem:11.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=750, help="items (default: HealthFC's 750)")
    ap.add_argument("--study", choices=("healthfc", "medreqal"), default="healthfc",
                    help="healthfc (the claims of the data folder) or medreqal (synthetic rows)")
    ap.add_argument("--processes", type=int, default=2, help="suite-processes' processes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scenarios", default="0.2@32,0.2@128,2@256,2@1000",
                    help="latency@connections, comma-separated")
    ap.add_argument("--runners", default=",".join(ALL_RUNNERS))
    ap.add_argument("--slope", action="store_true", help="also the 5-claim runs (start-up)")
    ap.add_argument("--data-dir", default=None, help="folder holding healthfc/ (default "
                    "$MED_EVALS_DATA_DIR, else ../shared/datasets)")
    ap.add_argument("--no-lm-eval", action="store_true", help="skip the lm-eval peer")
    bench(ap.parse_args())


if __name__ == "__main__":
    main()
