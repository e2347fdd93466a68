import hashlib
import json

import pytest
from inspect_ai.model import get_model

from med_evals.data.datasets import sha256_of
from med_evals.models.replay import ReplayError, read_recording, recording_sha256
from med_evals.tasks.oncology_rct import oncology_rct

from ..conftest import replying
from ..oncology_support import install_fixture
from ..support.evals import inspect_eval


@pytest.fixture
def fixture_data(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)


def _reply(text: str) -> str:
    # deterministic, varied: valid, lower-case (invalid under the strict rule) and empty
    n = len(text) % 3
    return ["POSITIVE", "negative", ""][n]


def _metrics(log):
    return {name: m.value for s in log.results.scores for name, m in s.metrics.items()}


def _scores(log):
    return {(s.id, s.epoch): s.scores["trial_outcome"].value for s in log.samples}


def _run(model, tmp_path, name, **kw):
    (log,) = inspect_eval(
        oncology_rct(condition="title_abstract,title_only"),
        model=model,
        log_dir=str(tmp_path / name),
        display="none",
        **kw,
    )
    assert log.status == "success", log.error
    return log


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_replaying_a_log_reproduces_its_scores_and_metrics(fixture_data, tmp_path):
    mock = get_model("mockllm/model", custom_outputs=replying(_reply))
    original = _run(mock, tmp_path, "orig", epochs=2)
    assert original.samples[0].output.completion in ("POSITIVE", "negative", "")

    replays = [_run(f"replay/{original.location}", tmp_path, f"r{i}", epochs=2) for i in (1, 2)]
    for replayed in replays:
        assert _scores(replayed) == _scores(original)
        assert _metrics(replayed) == pytest.approx(_metrics(original), nan_ok=True)
        assert replayed.eval.model == f"replay/{original.location}"
    # a directory of logs is a recording too
    from_dir = _run(f"replay/{tmp_path / 'orig'}", tmp_path, "dir", epochs=2)
    assert _scores(from_dir) == _scores(original)


def test_jsonl_replay_serves_replies_by_task_sample_and_epoch(fixture_data, tmp_path):
    task = oncology_rct(condition="title_abstract")
    ids = [s.id for s in task.dataset]
    rows = [
        {
            "task": "med_evals/oncology_rct",
            "id": i,
            "epoch": e,
            "reply": "POSITIVE" if e == 1 else "NEGATIVE",
        }
        for i in ids
        for e in (1, 2)
    ]
    rows[0] = {"task": "oncology_rct", "id": ids[0], "epoch": 1, "reply": None, "error": "HTTP 500"}
    path = _write_jsonl(tmp_path / "replies.jsonl", rows)
    (log,) = inspect_eval(
        oncology_rct(condition="title_abstract"),
        model=f"replay/{path}",
        epochs=2,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success"
    by_key = {(s.id, s.epoch): s for s in log.samples}
    assert by_key[(ids[1], 1)].output.completion == "POSITIVE"
    assert by_key[(ids[1], 2)].output.completion == "NEGATIVE"
    # a recorded failure is replayed as a failure: scored ERROR, counted apart
    assert by_key[(ids[0], 1)].scores["trial_outcome"].value["prediction"] == "ERROR"
    assert "HTTP 500" in by_key[(ids[0], 1)].scores["trial_outcome"].explanation
    assert by_key[(ids[0], 2)].scores["trial_outcome"].value["prediction"] == "NEGATIVE"


@pytest.mark.parametrize("provider_errors", ["score", "raise"])
def test_a_missing_record_stops_the_run(fixture_data, tmp_path, provider_errors):
    task = oncology_rct(condition="title_abstract", provider_errors=provider_errors)
    ids = [s.id for s in task.dataset]
    path = _write_jsonl(
        tmp_path / "partial.jsonl", [{"id": i, "reply": "POSITIVE"} for i in ids[1:]]
    )
    (log,) = inspect_eval(
        task, model=f"replay/{path}", log_dir=str(tmp_path / "logs"), display="none"
    )
    assert log.status == "error"
    assert f"no record for call 1 of task 'oncology_rct', sample '{ids[0]}', epoch 1" in (
        log.error.message
    )
    assert str(path) in log.error.message


def test_a_second_epoch_without_record_stops_the_run(fixture_data, tmp_path):
    task = oncology_rct(condition="title_abstract")
    path = _write_jsonl(
        tmp_path / "r.jsonl", [{"id": s.id, "reply": "NEGATIVE"} for s in task.dataset]
    )
    (log,) = inspect_eval(
        task, model=f"replay/{path}", epochs=2, log_dir=str(tmp_path / "l"), display="none"
    )
    assert log.status == "error"
    assert "epoch 2 (no record)" in log.error.message


def test_records_of_another_task_do_not_match(fixture_data, tmp_path):
    task = oncology_rct(condition="title_abstract")
    rows = [{"task": "medreqal", "id": s.id, "reply": "POSITIVE"} for s in task.dataset]
    path = _write_jsonl(tmp_path / "other.jsonl", rows)
    (log,) = inspect_eval(task, model=f"replay/{path}", log_dir=str(tmp_path / "l"), display="none")
    assert log.status == "error"
    assert "task 'oncology_rct'" in log.error.message


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "line 2: not JSON"),
        ('{"reply": "POSITIVE"}', "line 2: no 'id'"),
        ('{"id": "a"}', "line 2: no 'reply'"),
        ('{"id": "a", "reply": 3}', "line 2: 'reply' must be a string or null"),
        ('{"id": "a", "reply": "x", "epoch": "one"}', "line 2: 'epoch' must be an integer"),
    ],
)
def test_bad_jsonl_lines_are_named(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "ok", "reply": "POSITIVE"}\n' + line + "\n")
    with pytest.raises(ReplayError, match=message):
        read_recording(path)


def test_unreadable_recordings(tmp_path):
    with pytest.raises(ReplayError, match="not found"):
        read_recording(tmp_path / "nope.jsonl")
    (tmp_path / "x.csv").write_text("a\n")
    with pytest.raises(ReplayError, match="a .jsonl file, an Inspect log or a directory"):
        read_recording(tmp_path / "x.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReplayError, match="no Inspect logs"):
        read_recording(tmp_path / "empty")


def test_jsonl_usage_is_carried(tmp_path):
    path = _write_jsonl(
        tmp_path / "u.jsonl",
        [{"id": 7, "reply": "POSITIVE", "usage": {"input_tokens": 120, "output_tokens": 2}}],
    )
    (rec,) = read_recording(path)[("*", "7", 1)]
    assert rec.output.completion == "POSITIVE"
    assert (rec.output.usage.input_tokens, rec.output.usage.total_tokens) == (120, 122)


def test_a_file_that_is_not_utf8_is_named_with_its_line(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"id": "a", "reply": "x"}\n{"id": "b", "reply": "POSIT\xe9VE"}\n')
    with pytest.raises(ReplayError, match=r"latin\.jsonl: line 2: not UTF-8 text \(byte 0xe9\)"):
        read_recording(path)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b'\xef\xbb\xbf{"id": "a", "reply": "x"}\r\n')  # Windows editors write these
    assert list(read_recording(bom)) == [("*", "a", 1)]


@pytest.mark.parametrize("text", ["", "\n \n"])
def test_an_empty_file_is_refused(tmp_path, text):
    path = tmp_path / "empty.jsonl"
    path.write_text(text)
    with pytest.raises(ReplayError, match=r"empty\.jsonl: no record \(the file is empty or blank"):
        read_recording(path)


def test_a_recording_for_no_sample_of_the_task_stops_it_before_the_run(fixture_data, tmp_path):
    """Built by name under the replayed model (as `inspect eval` builds it), the task checks
    that the recording serves at least one of its samples; a Task built in Python before the
    model is known cannot, and fails sample by sample (test_records_of_another_task_...)."""
    ids = [s.id for s in oncology_rct(condition="title_abstract").dataset]
    rows = [{"task": "medreqal", "id": i, "reply": "POSITIVE"} for i in ids]
    other = _write_jsonl(tmp_path / "other.jsonl", rows)
    with pytest.raises(ReplayError, match="has no record for task 'oncology_rct': its records "
                       "are for medreqal"):  # fmt: skip
        inspect_eval("med_evals/oncology_rct", model=f"replay/{other}", display="none",
                     log_dir=str(tmp_path / "l"))  # fmt: skip
    partial = _write_jsonl(tmp_path / "one.jsonl", [{"id": ids[0], "reply": "POSITIVE"}])
    (log,) = inspect_eval("med_evals/oncology_rct", model=f"replay/{partial}", display="none",
                          log_dir=str(tmp_path / "l"), limit=1)  # fmt: skip
    assert log.status == "success"  # one recorded sample is enough to start


def test_a_replay_named_for_its_model_records_its_file_and_sha256(fixture_data, tmp_path):
    """``replay/<name> -M file=<file>`` (what ``med-evals compare`` runs): the run is named
    ``replay/<name>`` (the viewer's list shows it), the file is in the model args, and each
    replayed call names the file and its sha256; ``replay/<file>`` replays the same."""
    ids = [s.id for s in oncology_rct(condition="title_abstract").dataset]
    rows = [{"id": i, "reply": "POSITIVE", "model": "gpt-x"} for i in ids[1:]]
    usage = {"input_tokens": 7, "output_tokens": 1, "reasoning_tokens": 3}
    rows.append({"id": ids[0], "reply": "NEGATIVE", "usage": usage})
    path = _write_jsonl(tmp_path / "gpt-x.jsonl", rows)
    named, by_file = inspect_eval(
        oncology_rct(condition="title_abstract"),
        model=[get_model("replay/gpt-x", file=str(path)), f"replay/{path}"],
        log_dir=str(tmp_path / "logs"), display="none", max_tasks=2,
    )
    assert named.eval.model == "replay/gpt-x" and named.eval.model_args == {"file": str(path)}
    assert by_file.eval.model == f"replay/{path}" and not by_file.eval.model_args
    for log in (named, by_file):
        calls = [e.call.request for s in log.samples for e in s.events if e.event == "model"]
        assert len(calls) == len(ids)
        assert {(c["replay"], c["sha256"]) for c in calls} == {(str(path), sha256_of(path))}
        # the one call that recorded usage is counted, as recorded; the others have none
        (counted,) = log.stats.model_usage.values()
        assert (counted.input_tokens, counted.output_tokens, counted.reasoning_tokens) == (7, 1, 3)
    assert _scores(named) == _scores(by_file)


def test_a_folder_of_logs_is_hashed_by_its_logs(tmp_path):
    (tmp_path / "a.eval").write_bytes(b"one")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_bytes(b"two")
    (tmp_path / "notes.txt").write_text("not a log")
    lines = "".join(f"{name}\t{sha256_of(tmp_path / name)}\n" for name in ("a.eval", "sub/b.json"))
    want = hashlib.sha256(lines.encode()).hexdigest()
    assert recording_sha256(tmp_path) == want
    (tmp_path / "notes.txt").write_text("changed")  # not a log: not part of the recording
    assert recording_sha256(tmp_path) == want
    (tmp_path / "a.eval").write_bytes(b"ONE")
    assert recording_sha256(tmp_path) != want


@pytest.mark.parametrize(("usage", "says"), [
    ("7", "'usage' must be an object"),
    ({"input_tokens": "many"}, "'usage' counts must be integers"),
])
def test_a_bad_usage_is_named_with_its_line(tmp_path, usage, says):
    path = _write_jsonl(tmp_path / "u.jsonl", [{"id": 1, "reply": "POSITIVE", "usage": usage}])
    with pytest.raises(ReplayError, match=f"u.jsonl: line 1: {says}"):
        read_recording(path)
