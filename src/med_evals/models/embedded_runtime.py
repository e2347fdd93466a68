"""The runtimes behind ``embedded/<model>``: transformers (batched) and llama-cpp-python.

A runtime is loaded once per process for each (GGUF file, runtime, dtype, threads) and shared by
every task and model instance that names it (:func:`load_runtime`). Both run on the calling
thread; :mod:`med_evals.models.embedded` calls them from one dedicated model thread.

The transformers runtime reads a llama-architecture GGUF (SmolLM2's) itself, at each load and
with nothing cached: transformers' GGUF reader for the metadata and tensor table, the
configuration built from that metadata as transformers' GGUF loader builds it, gguf's
de-quantiser and tensor names, llama.cpp's query/key permutation undone (as transformers' own
loader does; ``tests/models/test_embedded.py`` checks the configuration, tokens and weights are
equal). About 3 s here, against about 20 s for transformers' own GGUF loader (its reader parses
every vocabulary entry, twice), which GGUFs of other architectures go through.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from inspect_ai.model import GenerateConfig

from med_evals.inspect_internals.compat import PrerequisiteError

DEFAULT_MAX_TOKENS = 256
DTYPES = ("float32", "bfloat16")

#: called after each decoding step with the number of tokens generated so far per row
StepCallback = Callable[[int], None]


@dataclass(frozen=True)
class Request:
    messages: list[dict[str, str]]
    config: GenerateConfig
    #: the reply is the most probable of these strings (empty: generate freely)
    choices: tuple[str, ...] = ()


@dataclass
class Generation:
    text: str
    input_tokens: int
    output_tokens: int
    stop_reason: Literal["stop", "max_tokens"]
    #: with choices: each choice's log-probability as the whole reply (end of turn included)
    choice_logprobs: dict[str, float] | None = None


def batch_key(request: Request) -> tuple[Any, ...] | None:
    """Requests with equal keys can share one ``generate`` call; ``None``: never batched.

    Sampled requests (temperature > 0) run alone, each seeded by ``--seed``, so a sampled reply
    does not depend on which other requests were waiting at the same time. Choice requests run
    alone too: their cost is the prompt, which is fastest unpadded (one prompt per forward pass).
    """
    config = request.config
    if config.temperature or request.choices:
        return None
    return (config.max_tokens or DEFAULT_MAX_TOKENS, tuple(config.stop_seqs or ()))


@contextlib.contextmanager
def _quiet_transformers(transformers: Any) -> Iterator[None]:
    """No progress bars (``Loading weights: ...``, one line per update without a terminal)
    while a model loads; transformers' setting is restored afterwards."""
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()


@dataclass(frozen=True)
class GgufLayout:
    """A GGUF's metadata and, for each tensor, where its data lie in the file and how."""

    metadata: dict[str, Any]
    #: GGUF tensor name -> (ggml type, absolute offset, numpy dtype, shape of the stored data)
    tensors: dict[str, tuple[int, int, str, tuple[int, ...]]]

    @property
    def architecture(self) -> str:
        return str(self.metadata["general.architecture"])


def read_gguf_layout(gguf: Path) -> GgufLayout:
    """The GGUF's metadata and tensor table, read by transformers' GGUF reader, which skips the
    vocabulary (0.03 s here; gguf's own reader turns every token into an object: 5 s)."""
    import gguf as gg
    from transformers.integrations.gguf.reader import GgufHeader, read_gguf_metadata

    metadata, _ = read_gguf_metadata(str(gguf))
    header = GgufHeader.from_file(str(gguf))
    floats = {gg.GGMLQuantizationType.F32: "<f4", gg.GGMLQuantizationType.F16: "<f2"}
    tensors = {}
    for t in header.tensors:
        qtype = gg.GGMLQuantizationType(t.ggml_type)
        if qtype in floats:  # values: read as they are
            dtype, shape = floats[qtype], tuple(t.shape)
        else:  # blocks: bytes per row, as gguf's de-quantiser takes them
            dtype, shape = "|u1", tuple(gg.quant_shape_to_byte_shape(t.shape, qtype))
        tensors[t.name] = (t.ggml_type, header.data_start + t.offset, dtype, shape)
    return GgufLayout(metadata, tensors)


def llama_config(layout: GgufLayout, transformers: Any) -> Any:
    """The configuration transformers' GGUF loader makes of a llama GGUF (its
    ``load_gguf_checkpoint``: the same tables and steps) from the metadata read here: the same
    configuration (tested) without its 6-s parse of the whole file."""
    from transformers.modeling_gguf_pytorch_utils import (
        GGUF_CONFIG_DEFAULTS_MAPPING,
        GGUF_TO_TRANSFORMERS_MAPPING,
    )

    renames = GGUF_TO_TRANSFORMERS_MAPPING["config"]
    values: dict[str, Any] = {"tie_word_embeddings": "output.weight" not in layout.tensors}
    for key, value in GGUF_CONFIG_DEFAULTS_MAPPING.get("llama", {}).items():
        values.setdefault(key, value)
    for key, value in layout.metadata.items():
        prefix, _, rest = key.partition(".")
        name = renames.get(prefix, {}).get(rest)
        if name is not None and name != -1:
            values[name] = value
    return transformers.AutoConfig.for_model(**values)


def _is_plain_llama(layout: GgufLayout) -> bool:
    """A llama GGUF that transformers reads as llama (it reads Mistral's as ``mistral``)."""
    name = str(layout.metadata.get("general.name", ""))
    return layout.architecture == "llama" and "mistral" not in name


def unpermute_qk(weights: Any, n_head: int) -> Any:
    """Undo llama.cpp's permutation of a query or key projection (rows interleaved per head for
    its rotary layout), as transformers' GGUF loader does (``LlamaTensorProcessor``)."""
    dim = weights.shape[0] // n_head // 2
    return weights.reshape(n_head, dim, 2, *weights.shape[1:]).swapaxes(2, 1).reshape(weights.shape)


def load_gguf_model(gguf: Path, config: Any, dtype: Any, layout: GgufLayout) -> Any:
    """The causal LM of a llama GGUF, its weights de-quantised to float32 and cast to ``dtype``:
    its tensors read where ``layout`` says they are, gguf's de-quantiser and tensor names,
    :func:`unpermute_qk`. The same weights as transformers' GGUF loader (tested), in seconds
    instead of about 20 s."""
    import gguf as gg
    import numpy as np
    import torch
    import transformers

    cls = transformers.LlamaForCausalLM
    names = gg.get_tensor_name_map(gg.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    with torch.device("meta"):  # the parameter names only: nothing is allocated
        wanted = list(cls(config).state_dict())
    state = {}
    for name in wanted:
        base, _, suffix = name.rpartition(".")
        gname = names.get_name(base)
        entry = layout.tensors.get(f"{gname}.{suffix}")
        if entry is None:
            if name == "lm_head.weight" and config.tie_word_embeddings:
                continue  # the embedding matrix, tied
            raise ValueError(f"{gguf.name}: no tensor for {name} ({gname}.{suffix})")
        qtype, offset, stored, shape = entry
        data = np.memmap(gguf, np.dtype(stored), "r", offset, shape)
        weights = gg.dequantize(data, gg.GGMLQuantizationType(qtype))
        if gname.endswith(".attn_q"):
            weights = unpermute_qk(weights, config.num_attention_heads)
        elif gname.endswith(".attn_k"):
            weights = unpermute_qk(weights, config.num_key_value_heads)
        state[name] = torch.from_numpy(np.array(weights, dtype=np.float32)).to(dtype)
    return cls.from_pretrained(None, config=config, state_dict=state, dtype=dtype)


class TransformersRuntime:
    """transformers + torch on the GGUF's weights de-quantised to float32 (read from the GGUF at
    each load), run in ``dtype``; greedy requests are decoded together, left-padded, in one
    ``generate`` call; choice requests are scored one at a time (:meth:`choose`)."""

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
        with _quiet_transformers(transformers):
            # local files only: the weights ship in a package, and a run must never reach the Hub
            kw = {"gguf_file": gguf.name, "local_files_only": True}
            layout = read_gguf_layout(gguf)
            if _is_plain_llama(layout):
                # AutoTokenizer parses the GGUF's metadata again to choose a class (5 s here);
                # for a llama GGUF it chooses this one (the same tokens, tested)
                self.tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(
                    gguf.parent, **kw
                )
                config = llama_config(layout, transformers)
                self.model = load_gguf_model(gguf, config, getattr(torch, dtype), layout)
            else:  # transformers' GGUF loader: about 30 s for a model of this size
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, **kw)
                self.model = transformers.AutoModelForCausalLM.from_pretrained(
                    gguf.parent, dtype=getattr(torch, dtype), **kw
                )
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos])
        # rows that finish early are filled with `pad` up to the longest row; a pad that is not
        # an end-of-sequence token lets each row's own length be read back (trailing pads)
        special = [self.tokenizer.pad_token_id, *self.tokenizer.all_special_ids]
        self.pad = next(i for i in special if i is not None and i not in self.eos)

    def generate(
        self, requests: Sequence[Request], on_step: StepCallback | None = None
    ) -> list[Generation]:
        """Greedy replies to requests of one :func:`batch_key`, one sampled reply, or the
        chosen replies of choice requests (one at a time)."""
        if requests[0].choices:
            return [self.choose(r) for r in requests]
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

    def choose(self, request: Request) -> Generation:
        """The choice that is the most probable whole reply: each choice's tokens as the chat
        template writes an assistant reply, end of turn included, scored after one pass over
        the prompt (its cache shared by the choices). Ties go to the earlier choice."""
        torch = self.torch
        prompt, conts = self._choice_tokens(request.messages, request.choices)
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
            first = out.logits[0, -1].float().log_softmax(-1)
            logprobs = [float(first[c[0]]) for c in conts]
            width = max(len(c) for c in conts)
            if width > 1:
                cache = out.cache
                cache.batch_repeat_interleave(len(conts))
                # right-padded: a choice's own tokens never attend to the padding after them
                rows = [c[:-1] + [self.pad] * (width - len(c)) for c in conts]
                later = self.model(input_ids=torch.tensor(rows), cache=cache).logits
                later = later.float().log_softmax(-1)
                for i, c in enumerate(conts):
                    logprobs[i] += sum(float(later[i, j - 1, c[j]]) for j in range(1, len(c)))
        best = max(range(len(conts)), key=lambda i: logprobs[i])  # the first of equal ones
        scores = dict(zip(request.choices, logprobs, strict=True))
        return Generation(request.choices[best], len(prompt), len(conts[best]), "stop", scores)

    def _choice_tokens(
        self, messages: list[dict[str, str]], choices: Sequence[str]
    ) -> tuple[list[int], list[list[int]]]:
        """The prompt's tokens and each choice's reply tokens up to its end of turn."""
        template = self.tokenizer.apply_chat_template

        def tokens(msgs: list[dict[str, str]], **kw: Any) -> list[int]:
            return list(template(msgs, return_dict=True, **kw)["input_ids"])

        prompt = tokens(messages, add_generation_prompt=True)
        conts = []
        for choice in choices:
            full = tokens([*messages, {"role": "assistant", "content": choice}])
            rest = full[len(prompt) :]
            ends = [i for i, t in enumerate(rest) if t in self.eos]
            if full[: len(prompt)] != prompt or not ends:
                raise ValueError(
                    f"embedded: the chat template does not write the reply {choice!r} after the "
                    "prompt and end its turn: choices cannot be scored with this model"
                )
            conts.append(rest[: ends[0] + 1])
        return prompt, conts

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
            from llama_cpp import (
                Llama,  # inspect-evals-lint: ignore[external_dependencies] -- the import name of llama-cpp-python, declared in the llama-cpp extra (uninstalled, the lint cannot map the name to it)  # noqa: E501
            )
        except ImportError:
            raise PrerequisiteError(
                "runtime=llama_cpp needs llama-cpp-python: pip install llama-cpp-python"
            ) from None
        self.llm = Llama(model_path=str(gguf), n_ctx=4096, n_threads=threads, verbose=False)

    def generate(
        self, requests: Sequence[Request], on_step: StepCallback | None = None
    ) -> list[Generation]:
        if any(r.choices for r in requests):
            raise PrerequisiteError("embedded: choices need runtime=transformers")
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
