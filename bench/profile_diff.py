"""Where a task's extra time goes: the difference of two cProfile files, function by function.

``bench_harness.py --profile DIR`` writes ``DIR/bare.prof`` (bare Inspect) and ``DIR/task.prof``
(the suite's task) for the same samples and settings. This prints:

- the total profiled time of each and the difference;
- the difference attributed to areas (by the file that defines each function: the suite's own
  code, Inspect's metric computation, its log writing, pydantic, scikit-learn, ...), from each
  function's own time;
- the cumulative time of a few entry points (metric refreshes, scoring, log writes) in each;
- the functions whose own time differs most.

    python bench/profile_diff.py DIR [--top 40]
"""

from __future__ import annotations

import argparse
import pstats
from collections import defaultdict
from pathlib import Path

#: (area, substring of a function's file path), first match wins
AREAS = (
    ("med_evals scorers and metrics", "med_evals/scorers/"),
    ("med_evals studies", "med_evals/tasks/__init__.py"),
    ("med_evals solvers", "med_evals/solvers/"),
    ("med_evals other", "med_evals/"),
    ("inspect: metrics and reduction", "inspect_ai/_eval/task/results.py"),
    ("inspect: metrics and reduction", "inspect_ai/scorer/_reducer"),
    ("inspect: metrics and reduction", "inspect_ai/scorer/_metric"),
    ("inspect: log recorders", "inspect_ai/log/_recorders/"),
    ("inspect: log model and condense", "inspect_ai/log/"),
    ("inspect: events and transcript", "inspect_ai/event/"),
    ("inspect: events and transcript", "inspect_ai/log/_transcript"),
    ("inspect: model and providers", "inspect_ai/model/"),
    ("inspect: registry", "inspect_ai/_util/registry"),
    ("inspect: other", "inspect_ai/"),
    ("scikit-learn", "sklearn/"),
    ("scipy", "scipy/"),
    ("numpy", "numpy/"),
    ("pydantic", "pydantic"),
    ("rouge / nltk / rapidfuzz", "rouge_score/"),
    ("rouge / nltk / rapidfuzz", "nltk/"),
    ("json / serialisation", "json"),
    ("sqlite (buffer database)", "sqlite"),
    ("asyncio / anyio", "asyncio/"),
    ("asyncio / anyio", "anyio/"),
    ("http client", "httpx"),
    ("http client", "httpcore"),
    ("http client", "openai/"),
)

#: entry points whose cumulative time is shown: (label, file substring, function name)
ENTRY_POINTS = (
    ("live metric refresh (eval_results during the run)", "_eval/task/run.py", "compute"),
    ("eval_results (refreshes + final)", "_eval/task/results.py", "eval_results"),
    ("reduce_scores", "inspect_ai/scorer/_reducer/reducer.py", "reduce_scores"),
    ("metric functions (call_metric)", "_eval/task/results.py", "call_metric"),
    ("scorers (task_score / score)", "inspect_ai/scorer/_score.py", ""),
    ("sample summaries / condense", "inspect_ai/log/_condense.py", ""),
    ("log recorder writes", "inspect_ai/log/_recorders/", "log_sample"),
    ("buffer database", "log/_recorders/buffer/database.py", ""),
)


def area_of(filename: str) -> str:
    for area, part in AREAS:
        if part in filename:
            return area
    return "builtins / other" if filename.startswith("~") else "other: " + Path(filename).name


def _stats(path: Path) -> dict[tuple[str, int, str], tuple[int, int, float, float, dict]]:
    return pstats.Stats(str(path)).stats  # type: ignore[attr-defined, no-any-return]


def _total(stats: dict) -> float:
    return sum(v[2] for v in stats.values())


def _cumulative(stats: dict, file_part: str, func: str) -> float:
    """Largest cumulative time among matching functions (nested calls are not double-counted)."""
    hits = [
        v[3]
        for (f, _, name), v in stats.items()
        if file_part in f and (not func or name == func)
    ]
    return max(hits, default=0.0)


def print_difference(bare_path: Path, task_path: Path, top: int = 30) -> None:
    bare, task = _stats(bare_path), _stats(task_path)
    tb, tt = _total(bare), _total(task)
    print(f"profiled time: bare {tb:.1f} s, task {tt:.1f} s, difference {tt - tb:+.1f} s")

    by_area: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for i, stats in enumerate((bare, task)):
        for (f, _, _), v in stats.items():
            by_area[area_of(f)][i] += v[2]
    print("\nown time by area (bare, task, difference):")
    rows = sorted(by_area.items(), key=lambda kv: -(kv[1][1] - kv[1][0]))
    for area, (b, t) in rows:
        if abs(t - b) >= 0.05 or t >= 0.5:
            print(f"  {area:40} {b:7.2f} {t:7.2f} {t - b:+7.2f}")

    print("\ncumulative time of entry points (bare, task):")
    for label, part, func in ENTRY_POINTS:
        b, t = _cumulative(bare, part, func), _cumulative(task, part, func)
        print(f"  {label:52} {b:7.2f} {t:7.2f}")

    keys = set(bare) | set(task)
    diffs = []
    for k in keys:
        b = bare.get(k, (0, 0, 0.0, 0.0, {}))
        t = task.get(k, (0, 0, 0.0, 0.0, {}))
        diffs.append((t[2] - b[2], b[1], t[1], b[2], t[2], k))
    diffs.sort(key=lambda d: -d[0])
    print(f"\nfunctions with the largest extra own time (top {top}):")
    print(f"  {'extra s':>8} {'calls bare':>10} {'calls task':>10}  function")
    for d, nb, nt, _, _, (f, line, name) in diffs[:top]:
        where = f if f.startswith("~") else "/".join(Path(f).parts[-3:])
        print(f"  {d:+8.2f} {nb:10d} {nt:10d}  {name} ({where}:{line})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    print_difference(args.dir / "bare.prof", args.dir / "task.prof", args.top)


if __name__ == "__main__":
    main()
