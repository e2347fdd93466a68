"""bench/bench_vllm.py against the local fake OpenAI server (as ``VLLM_BASE_URL``): the figures
it prints are there and agree with the log it ran."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from .support.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_vllm", ROOT / "bench" / "bench_vllm.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_vllm", module)
    spec.loader.exec_module(module)
    return module


def verdict_reply(text: str) -> str:
    """A reply of the paper's length (bench/synthetic.py), the same for the same question."""
    synthetic = importlib.import_module("synthetic")  # bench/, on the path once bench is loaded
    return synthetic.verdict_reply(random.Random(len(text)))


@pytest.mark.slow
def test_bench_vllm_prints_figures_consistent_with_its_log(tmp_path, monkeypatch, capsys):
    bench = load_bench()
    name = "Qwen/Qwen2.5-7B-Instruct-bench"  # Inspect keeps one server per base model name
    with FakeOpenAIServer(verdict_reply, latency=0.05, model=name, word_usage=True) as server:
        monkeypatch.setenv("VLLM_BASE_URL", server.base_url)
        monkeypatch.setenv("VLLM_API_KEY", "local-key")
        argv = f"--model {name} --limit 24 --warmup 4 --max-connections 8 -M tensor_parallel_size=2"
        result = bench.main([*argv.split(), "--log-dir", str(tmp_path / "logs")])
        chats = [b for p, b in server.requests if p.endswith("/chat/completions")]
    printed = capsys.readouterr().out
    assert len(chats) == 4 + 24 and {b["model"] for b in chats} == {name}
    assert {b.get("max_tokens", b.get("max_completion_tokens")) for b in chats} == {256}
    assert "-M tensor_parallel_size=2 not passed to it" in printed  # a running server
    (line,) = [x for x in printed.splitlines() if x.startswith("RESULT ")]
    assert json.loads(line[len("RESULT ") :]) == result
    assert result["model_args"] == {"tensor_parallel_size": 2}

    # the figures, recomputed from the log the script names
    log = read_eval_log(result["log"])
    assert log.samples is not None and len(log.samples) == result["samples"] == 24
    replies = {s.id: s.output.completion for s in log.samples}
    words = sum(len(r.split()) for r in replies.values())  # the fake counts words as tokens
    assert result["output_tokens"] == words == log.stats.model_usage[f"vllm/{name}"].output_tokens
    assert result["output_tokens_per_sample"] == round(words / 24, 1)
    span = result["span_s"]
    assert 24 * 0.05 / 8 <= span <= result["wall_s"]  # at least the server's latency, 8 at a time
    # span_s is rounded to 1 ms, samples_per_s to 0.001/s and output_tokens_per_s to 0.1/s: each
    # figure within what those roundings allow (a 0.4 s span's 0.5 ms is 0.13%)
    lo, hi = span - 0.0005, span + 0.0005
    assert 24 / hi - 0.0005 <= result["samples_per_s"] <= 24 / lo + 0.0005
    assert words / hi - 0.05 <= result["output_tokens_per_s"] <= words / lo + 0.05
    # full_run_s is rounded to 0.1 s (samples_per_s to 0.001/s): within that rounding
    assert result["full_run_s"] == pytest.approx(2786 / result["samples_per_s"], rel=1e-3,
                                                 abs=0.051)
    for label, key in [("samples/s", "samples_per_s"), ("output tokens/s", "output_tokens_per_s")]:
        match = re.search(rf"^{label}: ([\d.]+)", printed, re.MULTILINE)
        assert match and float(match.group(1)) == pytest.approx(result[key], abs=0.01)
    match = re.search(r"^time for 2,786 questions: ([\d.]+) s", printed, re.MULTILINE)
    assert match and float(match.group(1)) == pytest.approx(result["full_run_s"], abs=0.1)


def test_model_args_are_typed_and_checked():
    bench = load_bench()
    assert bench.model_args(["tensor_parallel_size=2", "enforce_eager=true", "dtype=bfloat16"]) == {
        "tensor_parallel_size": 2,
        "enforce_eager": True,
        "dtype": "bfloat16",
    }
    with pytest.raises(SystemExit, match="expected key=value"):
        bench.model_args(["tensor_parallel_size"])


def test_inspect_passes_tensor_parallel_size_to_vllm_serve():
    """What ``-M`` does when Inspect starts ``vllm serve`` itself (vllm is not installed here, so
    the command line is checked at the functions that build it)."""
    from med_evals.inspect_internals.compat import local_server

    server = local_server()
    configure_devices = server.configure_devices
    assert server._server_arg_to_cli_key("tensor_parallel_size") == "tensor-parallel-size"
    args, env = configure_devices({"devices": "0,1"}, parallel_size_param="tensor_parallel_size")
    assert args == {"tensor_parallel_size": 2} and env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    args, _ = configure_devices({"devices": "0,1", "tensor_parallel_size": 1})
    assert args["tensor_parallel_size"] == 1  # an explicit size wins


@pytest.mark.slow
def test_a_server_inspect_starts_is_bound_to_loopback(tmp_path, capsys):
    """Inspect's vllm provider binds a server it starts to 0.0.0.0 by default; the bench passes
    ``-M host=127.0.0.1`` unless told otherwise. The stand-in ``vllm`` records the command line
    Inspect ran (tests/support/fake_vllm.py): it carries ``--host 127.0.0.1``."""
    from .support.fake_vllm import fake_vllm

    bench = load_bench()
    name = "Qwen/Qwen2.5-7B-Instruct-local"
    with fake_vllm(tmp_path) as argv_file:
        result = bench.main(["--model", name, "--limit", "3", "--warmup", "0",
                             "--max-connections", "4", "--log-dir", str(tmp_path / "logs")])
        [argv] = [json.loads(line) for line in argv_file.read_text().splitlines()]
    assert argv[:2] == ["serve", name]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert result["samples"] == 3 and result["server"] == "started here"
    printed = capsys.readouterr().out
    assert "server args {'host': '127.0.0.1'}" in printed
    assert "no expected figure for this GPU in docs/models.md" in printed  # no GPU here


def test_expected_figures_name_the_gpu():
    bench = load_bench()
    assert bench.expected("NVIDIA H200, 143771 MiB") == (
        "expected on one H200 (docs/models.md, on paper): 3,300-9,000 output tokens/s, "
        "15-90 samples/s")
    assert bench.server_args(["host=0.0.0.0"], True) == {"host": "0.0.0.0"}  # said otherwise
    assert bench.server_args([], False) == {}  # a running server: its own flags


@pytest.mark.slow
def test_the_suite_in_two_processes_against_one_server(tmp_path, monkeypatch, capsys):
    """``--processes 2``: med-evals run's two shards against the one running server; the figures
    are over both shards' samples."""
    bench = load_bench()
    name = "Qwen/Qwen2.5-7B-Instruct-procs"
    with FakeOpenAIServer(verdict_reply, latency=0.01, model=name, word_usage=True) as server:
        monkeypatch.setenv("VLLM_BASE_URL", server.base_url)
        monkeypatch.setenv("VLLM_API_KEY", "local-key")
        result = bench.main(["--model", name, "--limit", "12", "--warmup", "0",
                             "--max-connections", "4", "--processes", "2",
                             "--log-dir", str(tmp_path / "logs")])
        chats = [b for p, b in server.requests if p.endswith("/chat/completions")]
    assert result["samples"] == 12 == len(chats) and result["processes"] == 2
    # each shard's log in its folder of Inspect's shard layout, the merged log beside them
    folder = tmp_path / "logs" / "processes"
    assert len(list(folder.glob("*.shards/*/*.eval"))) == 2
    assert len(list(folder.glob("*.eval"))) == 1
    assert "samples/s: " in capsys.readouterr().out
    monkeypatch.delenv("VLLM_BASE_URL")
    with pytest.raises(SystemExit, match="--processes needs a running server"):
        bench.main(["--model", name, "--warmup", "0", "--processes", "2",
                    "--log-dir", str(tmp_path / "x")])
