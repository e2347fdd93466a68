"""Reading runs back (issue 44, items 1 and 12): the gate sees every message a run sent, and a
log is read within bounds, one record at a time.

- A changed system prompt is a changed setup (exit 3) naming the message, for the oncology
  study (its system message comes from Inspect's ``system_message()`` solver, never in a
  sample's input: the gate passed it) and for MedREQAL (whose prompt is in each sample's input);
  a baseline recorded before the gate compared the messages sent still gates, a note naming what
  it did not record. The stored CI baseline (format 2) still passes on the stored replay.
- A log with a record over the read limit is named in one line (``report``: skipped, exit 1;
  ``baseline`` and ``regress``: exit 2), and the record is never read; under a higher limit the
  same log reads. The limit is lowered here to 1 MB so that the padded fixture stays small.
- Read a chunk of records at a time, a log gives the values, texts, tokens and order that a
  whole read of it gives.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import pytest
from inspect_ai.event import ModelEvent
from inspect_ai.log import EvalLog, EvalSample, read_eval_log, write_eval_log
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    ModelOutput,
    get_model,
)

import med_evals.logs.files as files_module
from med_evals.commands.cli import main
from med_evals.logs.files import expand_log_paths, read_header, read_samples
from med_evals.logs.runs import changed_messages, load_run, run_of, sent_messages

from .conftest import FIXTURES, REPO, replying
from .oncology_support import follower, install_fixture
from .support.evals import inspect_eval

NB = ["--n-boot", "100"]
ONCOLOGY_REPLAY = REPO / "datasets" / "ci" / "oncology_rct-smoke-doi_only-replay.jsonl"


def _one_log(folder: Path) -> str:
    [log] = expand_log_paths([folder])
    return log


def _last_lines(capsys) -> list[str]:
    return capsys.readouterr().out.strip().splitlines()


def _undecided(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("undecided:")]


# --- B. the gate compares every message sent ------------------------------------------------


def test_a_changed_system_prompt_of_the_oncology_study_is_a_changed_setup(
    tmp_path, monkeypatch, capsys
):
    """The oncology study adds its system message with Inspect's ``system_message()`` solver:
    it is in no sample's input, and a changed word passed the gate (exit 0). It is in the
    messages the log records as sent: exit 3, the line naming the system message. Its user
    template is in each sample's input (the study whose prompt is in its samples, since
    MedREQAL's is rendered by its solver): a changed word is exit 3 naming the user message."""
    from med_evals.solvers import oncology_rct as prompts
    from med_evals.tasks.oncology_rct import oncology_rct

    install_fixture(tmp_path / "data", monkeypatch)
    model = get_model("mockllm/reader", custom_outputs=replying(follower))

    def run(name: str) -> str:
        inspect_eval(oncology_rct(), model=model, display="none", log_dir=str(tmp_path / name))
        return str(tmp_path / name)

    baseline = tmp_path / "baseline.json"
    assert main(["baseline", run("before"), "-o", str(baseline)]) == 0
    recorded = json.loads(baseline.read_text())["runs"][0]
    assert {len(sent) for sent in recorded["sent"].values()} == {2}  # system and user
    capsys.readouterr()
    assert main(["regress", *NB, "--baseline", str(baseline), run("same")]) == 0
    assert _last_lines(capsys)[-1].startswith("pass: 3 gated metric(s) tested")

    word = "randomized controlled oncology trial"
    system = prompts.ONCOLOGY_SYSTEM_PROMPT
    assert word in system
    monkeypatch.setattr(prompts, "ONCOLOGY_SYSTEM_PROMPT",
                        prompts.ONCOLOGY_SYSTEM_PROMPT.replace(word, "randomized oncology trial"))
    changed = run("system_changed")
    assert main(["regress", *NB, "--baseline", str(baseline), changed]) == 3
    lines = _last_lines(capsys)
    assert _undecided(lines) == [
        "undecided: oncology_rct / mockllm/reader: setup changed (prompt: the input sent differs "
        "on 6 of 6 shared samples of condition title_abstract (e.g. title_abstract-000): the "
        "system message): not compared; record a new baseline"]
    assert lines[-1].startswith("UNDECIDED: the gate cannot decide")

    # the study's user template is in each sample's input (its trial's text in the condition's
    # layout): a changed word of it is a changed setup too, naming the user message
    from dataclasses import replace

    from med_evals.tasks.oncology_conditions import CONDITIONS

    monkeypatch.setattr(prompts, "ONCOLOGY_SYSTEM_PROMPT", system)
    cond = CONDITIONS["title_abstract"]
    monkeypatch.setitem(CONDITIONS, "title_abstract",
                        replace(cond, template=cond.template.replace("Abstract:", "Summary:")))
    assert main(["regress", *NB, "--baseline", str(baseline), run("user_changed")]) == 3
    assert _undecided(_last_lines(capsys)) == [
        "undecided: oncology_rct / mockllm/reader: setup changed (prompt: the input sent differs "
        "on 6 of 6 shared samples of condition title_abstract (e.g. title_abstract-000): the "
        "user message): not compared; record a new baseline"]

    # a baseline recorded before the messages sent were (no "sent"): read as not recorded, not
    # as a change; it gates what it holds, and the note says what it could not compare
    old = json.loads(baseline.read_text())
    del old["runs"][0]["sent"]
    old_path = tmp_path / "old-baseline.json"
    old_path.write_text(json.dumps(old))
    assert main(["regress", *NB, "--baseline", str(old_path), changed]) == 0
    out = capsys.readouterr()
    assert ("note: the baseline (format 3) did not record messages sent: not compared (record a "
            "new baseline to gate them)") in out.out + out.err


def test_a_changed_prompt_in_the_samples_names_the_message_that_changed(
    tmp_path, monkeypatch, capsys
):
    """MedREQAL's prompt (its chat variant: a system and a user message around the question,
    the sample's input, rendered by the study's solver): a changed word in either is a changed
    setup, the line naming which message."""
    from med_evals.solvers import medreqal as prompts
    from med_evals.tasks.medreqal import medreqal

    model = get_model("mockllm/reader", custom_outputs=replying(lambda text: "LABEL: SUPPORTED ."))
    data = str(FIXTURES / "medreqal_fixture.csv")

    def run(name: str) -> str:
        inspect_eval(medreqal(data_file=data, bertscore=False), model=model, display="none",
                     log_dir=str(tmp_path / name))
        return str(tmp_path / name)

    baseline = tmp_path / "baseline.json"
    assert main(["baseline", run("before"), "-o", str(baseline)]) == 0
    n = len(json.loads(baseline.read_text())["runs"][0]["samples"])
    system, user = prompts.PROMPTS["chat"]
    for name, variant, which in (
        ("system", (system.replace("best knowledge", "knowledge"), user), "the system message"),
        ("user", (system, user.replace("Briefly explain", "Explain")), "the user message"),
    ):
        with monkeypatch.context() as m:
            m.setitem(prompts.PROMPTS, "chat", variant)
            changed = run(name)
        capsys.readouterr()
        assert main(["regress", *NB, "--baseline", str(baseline), changed]) == 3
        assert _undecided(_last_lines(capsys)) == [
            f"undecided: medreqal / mockllm/reader: setup changed (prompt: the input sent "
            f"differs on {n} of {n} shared samples (e.g. medreqal-1): {which}): not "
            "compared; record a new baseline"]


#: A MedREQAL baseline recorded by the code before a sample's input became the question alone
#: (its input digests are of the rendered Table 7 messages): ``tests/support/old_baseline.py``
#: run on the fixture with that code, its data file's folder written ``{FIXTURES}``
OLD_MEDREQAL_BASELINE = (
    Path(__file__).parent / "fixtures" / "medreqal-baseline-before-input-move.json")


def test_a_medreqal_baseline_recorded_when_the_input_held_the_prompt_still_gates(
    tmp_path, monkeypatch, capsys
):
    """The baseline's input digests are of the messages its samples held then (the chat
    variant's system and user message); a run after the move holds the question alone, and
    sends the same messages: the same prompt, passed (the first call's messages' digest equals
    the recorded input's). A changed word of the template still exits 3 naming the message."""
    from med_evals.solvers import medreqal as prompts
    from med_evals.tasks.medreqal import medreqal
    from tests.support.old_baseline import replies

    baseline = tmp_path / "old-baseline.json"
    baseline.write_text(OLD_MEDREQAL_BASELINE.read_text().replace("{FIXTURES}", str(FIXTURES)))
    recorded = json.loads(baseline.read_text())["runs"][0]
    model = get_model("mockllm/reader", custom_outputs=replies)

    def run(name: str) -> str:
        inspect_eval(medreqal(data_file=str(FIXTURES / "medreqal_fixture.csv"), bertscore=False),
                     model=model, display="none", log_dir=str(tmp_path / name))
        return str(tmp_path / name)

    after = run("after")
    texts = load_run(_one_log(Path(after))).samples
    n = len(texts)
    # the input is the question now: its digest is not the recorded one, the first call's is
    assert n == 12
    assert all(texts[sid]["input_sha"] != sha for sid, sha in recorded["inputs"].items())
    assert {sid: t["call_sha"] for sid, t in texts.items()} == recorded["inputs"]
    assert main(["regress", *NB, "--baseline", str(baseline), after]) == 0
    assert _undecided(_last_lines(capsys)) == []

    system, user = prompts.PROMPTS["chat"]
    with monkeypatch.context() as m:
        m.setitem(prompts.PROMPTS, "chat", (system, user.replace("Briefly explain", "Explain")))
        changed = run("changed")
    assert main(["regress", *NB, "--baseline", str(baseline), changed]) == 3
    assert _undecided(_last_lines(capsys)) == [
        f"undecided: medreqal / mockllm/reader: setup changed (prompt: the input sent differs on "
        f"{n} of {n} shared samples (e.g. medreqal-1): the user message): not compared; record "
        "a new baseline"]
    # recorded before the messages sent were too: the input digest alone still tells
    old = json.loads(baseline.read_text())
    del old["runs"][0]["sent"]
    baseline.write_text(json.dumps(old))
    assert main(["regress", *NB, "--baseline", str(baseline), after]) == 0
    capsys.readouterr()
    assert main(["regress", *NB, "--baseline", str(baseline), changed]) == 3
    assert _undecided(_last_lines(capsys)) == [
        f"undecided: medreqal / mockllm/reader: setup changed (prompt: the input sent differs on "
        f"{n} of {n} shared samples (e.g. medreqal-1)): not compared; record a new baseline"]


def test_the_stored_oncology_replay_with_a_changed_system_prompt_is_undecided(
    tmp_path, monkeypatch, capsys, shared_datasets
):
    """Issue 44's case as it was reported: a baseline of ``oncology_rct -T condition=doi_only
    -T subset=smoke`` with the stored replay, one word of the system prompt changed, the same
    replay again: ``regress`` said ``pass``, exit 0; now exit 3 naming the system message."""
    from med_evals.solvers import oncology_rct as prompts
    from med_evals.tasks.oncology_rct import oncology_rct

    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(shared_datasets))
    model = f"replay/{ONCOLOGY_REPLAY}"

    def run(name: str) -> str:
        inspect_eval(oncology_rct(condition="doi_only", subset="smoke"), model=model,
                     display="none", log_dir=str(tmp_path / name))
        return str(tmp_path / name)

    baseline = tmp_path / "baseline.json"
    assert main(["baseline", run("before"), "-o", str(baseline)]) == 0
    monkeypatch.setattr(prompts, "ONCOLOGY_SYSTEM_PROMPT",
                        prompts.ONCOLOGY_SYSTEM_PROMPT.replace("Do not output", "Never output"))
    changed = run("changed")
    capsys.readouterr()
    assert main(["regress", *NB, "--baseline", str(baseline), changed]) == 3
    assert _undecided(_last_lines(capsys)) == [
        f"undecided: oncology_rct / {model}: setup changed (prompt: the input sent differs on 20 "
        "of 20 shared samples of condition doi_only (e.g. doi_only-017): the system message): "
        "not compared; record a new baseline"]


def test_the_stored_ci_baseline_still_gates_the_stored_replay(
    tmp_path, monkeypatch, capsys, shared_datasets
):
    """``.ci/run``'s gate: the stored MedEvidence baseline (format 2: no input digests, no
    messages sent) against the stored replay passes, and the note names what it did not
    record."""
    from med_evals.tasks.medevidence import medevidence

    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(shared_datasets))
    monkeypatch.chdir(REPO)  # the baseline names the replay file by its path in the checkout
    inspect_eval(medevidence(subset="smoke"),
                 model="replay/datasets/ci/medevidence-smoke-replay.jsonl", display="none",
                 log_dir=str(tmp_path / "gate"))
    capsys.readouterr()
    assert main(["regress", "--baseline", "datasets/ci/medevidence-smoke-baseline.json",
                 str(tmp_path / "gate")]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[-1].startswith("pass: 3 gated metric(s) tested, 0 regressions")
    [note] = [line for line in (out.out + out.err).splitlines() if "did not record" in line]
    assert "inputs, messages sent" in note


def _call(messages, reply: str, role: str | None = None) -> ModelEvent:
    output = ModelOutput.from_content("mockllm/model", reply)
    return ModelEvent(model="mockllm/model", role=role, input=messages, tools=[],
                      tool_choice="none", config=GenerateConfig(), output=output)


def test_the_messages_sent_are_every_call_of_the_model_under_test_as_logged():
    """Each message the model under test was sent, once (a second call resends the first's
    messages and the model's own reply: neither is listed again), an attachment resolved to
    the text it stands for, a grader's call (its role's) left out."""
    system = ChatMessageSystem(content="Classify the trial.")
    user = ChatMessageUser(content="attachment://abc")
    first = _call([system, user], "POSITIVE")
    reply = ChatMessageAssistant(content="POSITIVE", id=first.output.message.id)
    follow = ChatMessageUser(content="Are you sure?")
    second = _call([system, user, reply, follow], "POSITIVE")
    grader = _call([ChatMessageUser(content="Grade this.")], "5", role="grader")
    sample = EvalSample(id=1, epoch=1, input="x", target="y", events=[first, grader, second],
                        attachments={"abc": "Title: a trial"})
    resolved = EvalSample(id=1, epoch=1, input="x", target="y", events=[
        _call([system, ChatMessageUser(content="Title: a trial")], "POSITIVE")])
    sent = sent_messages(sample)
    assert [m.split()[0] for m in sent] == ["system", "user", "user"]
    assert sent[:2] == sent_messages(resolved)  # the attachment's text, not its reference
    assert sent_messages(EvalSample(id=1, epoch=1, input="x", target="y", events=[grader])) == []


def test_changed_messages_names_each_message_that_differs():
    old = ["system aaa", "user bbb"]
    assert changed_messages(old, old) == []
    assert changed_messages(old, ["system aaa", "user ccc"]) == ["the user message"]
    assert changed_messages(old, ["system zzz", "user ccc"]) == ["the system message",
                                                                 "the user message"]
    assert changed_messages(old, ["user zzz", "user bbb"]) == ["message 1 (system -> user)"]
    assert changed_messages(["user a", "user b"], ["user a", "user c"]) == ["user message 2"]
    assert changed_messages(old, ["user bbb"]) == ["the number of messages (2 -> 1)"]


# --- C. bounded reads -----------------------------------------------------------------------


@pytest.fixture
def oncology_logs(tmp_path, monkeypatch) -> Path:
    """Folders ``logs`` and ``other``, each with one finished run of the oncology study (6
    fixture trials; two evals)."""
    from med_evals.tasks.oncology_rct import oncology_rct

    install_fixture(tmp_path / "data", monkeypatch)
    model = get_model("mockllm/reader", custom_outputs=replying(follower))
    for name in ("logs", "other"):
        inspect_eval(oncology_rct(), model=model, display="none", log_dir=str(tmp_path / name))
    return tmp_path / "logs"


#: the padding put into one record: 3 MB against a limit lowered to 1 MB
PADDING = 3_000_000


def _padded(log: EvalLog, where: str) -> EvalLog:
    if where == "sample":
        assert log.samples
        log.samples[0].metadata["padding"] = "x" * PADDING
    else:
        log.eval.metadata = {**(log.eval.metadata or {}), "padding": "x" * PADDING}
    return log


def _over(size: int, then: str = "") -> str:
    """What the line says of a record of ``size`` bytes over a 1 MB limit."""
    return (f"holds {size / 10**6:,.1f} MB, more than the 1 MB read at once "
            f"(MED_EVALS_READ_LIMIT_MB={math.ceil(size / 10**6) + 1} reads it{then})")


def _record_size(log: Path, record: str) -> int:
    with zipfile.ZipFile(log) as z:
        return z.getinfo(record).file_size


def test_a_record_over_the_read_limit_is_named_and_never_read(
    oncology_logs, tmp_path, monkeypatch, capsys
):
    """A sample record padded to 3 MB under a 1 MB limit: the report shows the other run and
    skips the log naming it and the record (exit 1), ``baseline`` and ``regress`` stop in one
    line (exit 2), and no sample of it is read; under a limit it fits, the same log gates."""
    log = Path(_one_log(oncology_logs))
    good = tmp_path / "baseline.json"
    assert main(["baseline", str(oncology_logs), "-o", str(good)]) == 0
    write_eval_log(_padded(read_eval_log(str(log)), "sample"), str(log))
    record = next(n for n in zipfile.ZipFile(log).namelist() if n.startswith("samples/"))
    why = f"{log}: unreadable log ({record} {_over(_record_size(log, record))})"
    read: list[str] = []
    real = files_module.read_eval_log_samples_by_id

    def spy(path, keys, **kw):
        read.append(str(path))
        return real(path, keys, **kw)

    monkeypatch.setattr(files_module, "read_eval_log_samples_by_id", spy)
    monkeypatch.setenv("MED_EVALS_READ_LIMIT_MB", "1")
    capsys.readouterr()
    other = tmp_path / "other"
    assert main(["report", str(oncology_logs), str(other), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert f"skipped: {why}\n" in err
    assert err.splitlines()[-1] == (
        "med-evals report: error: the report shows 1 run; 1 study run(s) could not be shown (an "
        "unreadable log, a run that did not finish, or a study log without scores): listed "
        "above as skipped")
    assert read == [_one_log(other)]
    read.clear()
    for argv in (["regress", *NB, "--baseline", str(good), str(oncology_logs)],
                 ["baseline", str(oncology_logs), "-o", str(tmp_path / "b2.json")]):
        assert main(argv) == 2
        assert capsys.readouterr().err == (
            f"med-evals {argv[0]}: error: {why}: the gate reads every sample of a run; read it "
            "again or give its logs without it\n")
    assert read == []  # the padded record, nor any other of its log, was read
    monkeypatch.setenv("MED_EVALS_READ_LIMIT_MB", "10")
    assert main(["regress", *NB, "--baseline", str(good), str(oncology_logs)]) == 0
    assert read == [str(log)]


def test_a_header_or_a_json_log_over_the_read_limit_is_named(
    oncology_logs, tmp_path, monkeypatch, capsys
):
    """A padded header (read for every log, of any task) and a ``.json`` log (Inspect reads one
    whole) over the limit: unreadable, named in one line (exit 2: the report has nothing else
    to show); a bad limit is one line, exit 2."""
    log = Path(_one_log(oncology_logs))
    full = read_eval_log(str(log))
    padded_header = tmp_path / "header" / log.name
    padded_header.parent.mkdir()
    write_eval_log(_padded(full.model_copy(deep=True), "header"), str(padded_header))
    as_json = tmp_path / "json" / log.name.replace(".eval", ".json")
    as_json.parent.mkdir()
    write_eval_log(_padded(full.model_copy(deep=True), "sample"), str(as_json))
    monkeypatch.setenv("MED_EVALS_READ_LIMIT_MB", "1")
    header = _over(_record_size(padded_header, "header.json"))
    whole = _over(as_json.stat().st_size, "; or convert it: inspect log convert --to eval "
                  "--output-dir <folder> <log>")
    for folder, why in (
        (padded_header.parent, f"{padded_header}: unreadable log (header.json {header})"),
        (as_json.parent, f"{as_json}: unreadable log (this .json log (Inspect reads one whole) "
                         f"{whole})"),
    ):
        capsys.readouterr()
        assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 2
        assert capsys.readouterr().err == f"med-evals report: error: no usable log: {why}\n"
    monkeypatch.setenv("MED_EVALS_READ_LIMIT_MB", "a lot")
    assert main(["report", str(oncology_logs), "--out", str(tmp_path / "report")]) == 2
    assert capsys.readouterr().err == (
        "med-evals report: error: MED_EVALS_READ_LIMIT_MB=a lot: expected a number of megabytes "
        "above 0\n")
    monkeypatch.setenv("MED_EVALS_READ_LIMIT_MB", "10")
    assert load_run(str(as_json)).values == load_run(str(log)).values


def test_reading_a_chunk_at_a_time_gives_what_a_whole_read_gives(tmp_path):
    """MedREQAL with three epochs (reduced by Inspect, texts picked by the reduced label):
    samples read two at a time come in Inspect's order, and the run read from them holds the
    values, texts, tokens and calls of the run read from the whole log."""
    from med_evals.tasks.medreqal import medreqal

    replies = iter(["LABEL: SUPPORTED .", "LABEL: REFUTED .", "no label"] * 1000)
    model = get_model("mockllm/reader", custom_outputs=replying(lambda text: next(replies)))
    inspect_eval(medreqal(data_file=str(FIXTURES / "medreqal_fixture.csv"), bertscore=False),
                 model=model, display="none", log_dir=str(tmp_path), epochs=3)
    path = _one_log(tmp_path)
    whole = read_eval_log(path)
    assert whole.samples and whole.eval.config.epochs == 3
    chunked = list(read_samples(path, read_header(path), chunk=2))
    assert [(s.id, s.epoch) for s in chunked] == [(s.id, s.epoch) for s in whole.samples]
    streamed, in_memory = load_run(path), run_of(whole, path)
    assert streamed.values == in_memory.values and streamed.others == in_memory.others
    assert streamed.samples == in_memory.samples
    assert {t["epochs"] for t in streamed.samples.values()} == {3}
    assert streamed.roles == in_memory.roles and streamed.paid == in_memory.paid
    assert streamed.roles and streamed.roles[0].calls == len(whole.samples)
