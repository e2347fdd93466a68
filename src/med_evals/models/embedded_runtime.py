"""The runtimes behind ``embedded/<model>``: transformers (batched) and llama-cpp-python.

A runtime is loaded once per process for each (GGUF file, runtime, dtype, threads) and shared by
every task and model instance that names it (:func:`load_runtime`). Both run on the calling
thread; :mod:`med_evals.models.embedded` calls them from one dedicated model thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from inspect_ai.model import GenerateConfig

from med_evals._compat import PrerequisiteError
from med_evals.data import cache_dir

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 256
DTYPES = ("float32", "bfloat16")

#: called after each decoding step with the number of tokens generated so far per row
StepCallback = Callable[[int], None]


@dataclass(frozen=True)
class Request:
    messages: list[dict[str, str]]
    config: GenerateConfig


@dataclass
class Generation:
    text: str
    input_tokens: int
    output_tokens: int
    stop_reason: Literal["stop", "max_tokens"]


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def batch_key(config: GenerateConfig) -> tuple[Any, ...] | None:
    """Requests with equal keys can share one ``generate`` call; ``None``: never batched.

    Sampled requests (temperature > 0) run alone, each seeded by ``--seed``, so a sampled reply
    does not depend on which other requests were waiting at the same time.
    """
    if config.temperature:
        return None
    return (config.max_tokens or DEFAULT_MAX_TOKENS, tuple(config.stop_seqs or ()))


class TransformersRuntime:
    """transformers + torch on the GGUF de-quantised to float32 (converted once, cached), run in
    ``dtype``; several requests are decoded together, left-padded, in one ``generate`` call."""

    def __init__(self, gguf: Path, threads: int | None, dtype: str) -> None:
        if "torch" not in sys.modules:
            # OpenMP's idle threads sleep instead of spinning: on a few shared cores (Inspect's
            # own thread included) spinning threads slowed decoding up to 10x (docs/models.md)
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import torch
        import transformers

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        stat = gguf.stat()
        tag = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
        cached = cache_dir() / "embedded" / f"{gguf.stem}-{tag.hexdigest()[:12]}"
        auto_tok, auto_lm = transformers.AutoTokenizer, transformers.AutoModelForCausalLM
        # local files only: the weights ship in a package, and a run must never reach the Hub
        if not (cached / "config.json").is_file():
            self._convert(gguf, cached, auto_tok, auto_lm)
        self.tokenizer = auto_tok.from_pretrained(cached, local_files_only=True)
        self.model = auto_lm.from_pretrained(
            cached, dtype=getattr(torch, dtype), local_files_only=True
        )
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos])
        # rows that finish early are filled with `pad` up to the longest row; a pad that is not
        # an end-of-sequence token lets each row's own length be read back (trailing pads)
        special = [self.tokenizer.pad_token_id, *self.tokenizer.all_special_ids]
        self.pad = next(i for i in special if i is not None and i not in self.eos)

    @staticmethod
    def _convert(gguf: Path, cached: Path, auto_tok: Any, auto_lm: Any) -> None:
        import torch

        kw = {"gguf_file": gguf.name, "local_files_only": True}
        tokenizer = auto_tok.from_pretrained(gguf.parent, **kw)
        model = auto_lm.from_pretrained(gguf.parent, dtype=torch.float32, **kw)
        tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
        # the weights are plain float32 now; transformers still flags them as GGUF-quantised
        # and refuses to save them until the flag is dropped
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if cached.exists():  # another process converted it meanwhile
            shutil.rmtree(tmp)
            return
        tmp.replace(cached)
        logger.warning(
            "embedded: converted %s to float32 once and cached it in %s (%.0f MB); later runs "
            "load it from there (set MED_EVALS_CACHE_DIR to move it; delete it to reclaim the "
            "space)",
            gguf.name,
            cached,
            _size_mb(cached),
        )

    def generate(
        self, requests: Sequence[Request], on_step: StepCallback | None = None
    ) -> list[Generation]:
        """Greedy replies to requests of one :func:`batch_key`, or one sampled reply."""
        torch = self.torch
        config = requests[0].config
        prompts = [
            self.tokenizer.apply_chat_template(
                r.messages, add_generation_prompt=True, return_dict=True
            )["input_ids"]
            for r in requests
        ]
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self.pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        max_new = config.max_tokens or DEFAULT_MAX_TOKENS
        kwargs: dict[str, Any] = {"max_new_tokens": max_new, "pad_token_id": self.pad}
        if config.temperature:
            if len(requests) != 1:
                raise ValueError("sampled requests are generated one at a time")
            kwargs.update(do_sample=True, temperature=config.temperature)
            if config.top_p is not None:
                kwargs["top_p"] = config.top_p
            if config.top_k is not None:
                kwargs["top_k"] = config.top_k
            torch.manual_seed(config.seed if config.seed is not None else 0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if config.stop_seqs:
            kwargs.update(stop_strings=config.stop_seqs, tokenizer=self.tokenizer)
        if on_step is not None:
            kwargs["stopping_criteria"] = [_OnStep(on_step, width)]
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        return [
            self._reply(row[width:].tolist(), len(p), max_new, config)
            for row, p in zip(out, prompts, strict=True)
        ]

    def _reply(self, new: list[int], n_in: int, max_new: int, config: GenerateConfig) -> Generation:
        n = len(new)
        while n and new[n - 1] == self.pad:  # the padding after a row that finished early
            n -= 1
        text = self.tokenizer.decode(new[:n], skip_special_tokens=True)
        stopped = bool(n) and new[n - 1] in self.eos
        for s in config.stop_seqs or []:
            if s in text:
                text, stopped = text.split(s, 1)[0], True
        return Generation(text, n_in, n, "stop" if stopped or n < max_new else "max_tokens")


class _OnStep:
    """A stopping criterion that never stops: it reports progress after each decoding step."""

    def __init__(self, callback: StepCallback, width: int) -> None:
        import torch

        self.callback, self.width, self.torch = callback, width, torch

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        self.callback(input_ids.shape[1] - self.width)
        torch = self.torch
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class LlamaCppRuntime:
    """llama-cpp-python on the quantised GGUF; the chat template comes from its metadata."""

    def __init__(self, gguf: Path, threads: int | None, dtype: str) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise PrerequisiteError(
                "runtime=llama_cpp needs llama-cpp-python: pip install llama-cpp-python"
            ) from None
        self.llm = Llama(model_path=str(gguf), n_ctx=4096, n_threads=threads, verbose=False)

    def generate(
        self, requests: Sequence[Request], on_step: StepCallback | None = None
    ) -> list[Generation]:
        return [self._one(r.messages, r.config) for r in requests]

    def _one(self, messages: list[dict[str, str]], config: GenerateConfig) -> Generation:
        res = self.llm.create_chat_completion(
            messages=messages,  # type: ignore[arg-type]
            temperature=config.temperature or 0.0,
            top_p=config.top_p if config.top_p is not None else 1.0,
            top_k=config.top_k if config.top_k is not None else 40,
            max_tokens=config.max_tokens or DEFAULT_MAX_TOKENS,
            stop=config.stop_seqs or None,
            seed=config.seed if config.seed is not None else 0,
        )
        choice, usage = res["choices"][0], res["usage"]  # type: ignore[index]
        return Generation(
            choice["message"]["content"] or "",
            usage["prompt_tokens"],
            usage["completion_tokens"],
            "max_tokens" if choice["finish_reason"] == "length" else "stop",
        )


Runtime = TransformersRuntime | LlamaCppRuntime
_loaded: dict[tuple[str, str, int | None, str], Runtime | Exception] = {}
_loading = threading.Lock()


def load_runtime(gguf: Path, runtime: str, threads: int | None, dtype: str) -> Runtime:
    """The runtime for these settings, loaded on first use and shared by the whole process.

    A failed load is remembered and raised again (as a ``PrerequisiteError``) without retrying.
    """
    key = (str(gguf.resolve()), runtime, threads, dtype)
    with _loading:
        if key not in _loaded:
            cls = TransformersRuntime if runtime == "transformers" else LlamaCppRuntime
            try:
                _loaded[key] = cls(gguf, threads, dtype)
            except Exception as ex:  # noqa: BLE001 - kept and raised for every request
                _loaded[key] = ex
        got = _loaded[key]
    if isinstance(got, PrerequisiteError):
        raise got
    if isinstance(got, Exception):
        raise PrerequisiteError(f"embedded: could not load {gguf.name}: {got!r}") from got
    return got
