"""Faults: a flaky provider, secrets, and bad inputs. Loopback only, bounded. (A killed run and
its retry: tests/test_gate_retry.py.)"""

import zipfile
from collections import Counter
from pathlib import Path

import pytest
from inspect_ai.model import get_model

from med_evals.commands.report import build_report
from med_evals.data.datasets import DatasetError, read_csv_checked
from med_evals.scorers.oncology_rct import parse_outcome_lenient, parse_outcome_strict
from med_evals.tasks.oncology_rct import oncology_rct, read_trials

from .conftest import replying
from .oncology_support import FIXTURE_CSV, big_fixture_csv, install_fixture
from .support.evals import inspect_eval
from .support.fake_openai import FakeOpenAIServer

SECRET = "sk-test-DO-NOT-LEAK-0123456789"


@pytest.fixture
def big_corpus(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch, csv=big_fixture_csv(tmp_path, copies=10))  # 60 trials
    monkeypatch.setenv("FAKE_API_KEY", SECRET)
    return tmp_path


@pytest.mark.slow
def test_flaky_provider_loses_and_duplicates_nothing(big_corpus):
    with FakeOpenAIServer(error_rate=0.2, hang_rate=0.02, hang_seconds=15, seed=1) as server:
        [log] = inspect_eval(
            oncology_rct(metrics="full"),
            model="openai-api/fake/fake",
            model_base_url=server.base_url,
            display="none",
            log_dir=str(big_corpus / "logs"),
            max_retries=3,
            attempt_timeout=2,
            timeout=60,
            max_connections=16,
        )
        counts = dict(server.counts)
    assert log.status == "success"
    ids = [s.id for s in log.samples]
    assert len(ids) == 60 == len(set(ids))  # none lost, none duplicated
    preds = Counter(s.scores["trial_outcome"].value["prediction"] for s in log.samples)
    assert sum(preds.values()) == 60 and set(preds) <= {"POSITIVE", "NEGATIVE", "ERROR"}
    assert counts["429"] + counts["500"] > 0 and counts["requests"] > 60  # faults were injected
    m = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    assert m["n_error"] == preds["ERROR"] and m["n_total"] == 60


@pytest.mark.slow
def test_api_keys_never_reach_logs_or_reports(big_corpus, tmp_path):
    with FakeOpenAIServer() as server:
        inspect_eval(
            oncology_rct(condition="title_only,doi_only"),
            model="openai-api/fake/fake",
            model_base_url=server.base_url,
            display="none",
            log_dir=str(tmp_path / "logs"),
            limit=20,
        )
        assert server.authorization and all(SECRET in a for a in server.authorization)
    build_report([tmp_path / "logs"], tmp_path / "report", n_boot=50)
    texts = []
    for path in (tmp_path / "logs").glob("*.eval"):
        with zipfile.ZipFile(path) as z:
            texts += [z.read(n).decode("utf-8", "replace") for n in z.namelist()]
    texts += [p.read_text(errors="replace") for p in (tmp_path / "report").rglob("*.md")]
    texts += [p.read_text(errors="replace") for p in (tmp_path / "report").rglob("*.html")]
    assert texts and not any(SECRET in t for t in texts)


# --- a corpus of bad inputs: each a clear error or an explicit invalid count --------------------


def _variant(tmp_path, name, transform) -> Path:
    path = tmp_path / name
    path.write_bytes(transform(FIXTURE_CSV.read_bytes()))
    return path


BAD_FILES = [
    (
        "truncated.csv",
        lambda b: b[: len(b) // 2],
        "malformed CSV|row .*: empty value|unknown label",
    ),
    (
        "latin1.csv",
        lambda b: b.decode().replace("Adjuvant", "Adjuvänt").encode("latin-1"),
        "not UTF-8",
    ),
    (
        "duplicate_doi.csv",
        lambda b: b.replace(b"10.1056/NEJMoa1990002", b"10.1200/JCO.19.90001"),
        "duplicate DOI",
    ),
    (
        "empty_title.csv",
        lambda b: b.replace(b"Drug B plus Chemotherapy in Advanced Gastric Cancer,", b","),
        "row 2, column 'title': empty value",
    ),
    (
        "label_out_of_range.csv",
        lambda b: b.replace(b",NEGATIVE,,,", b",MAYBE,,,", 1),
        "column 'Annotation_accept': unknown label 'MAYBE'",
    ),
    ("empty.csv", lambda b: b"", "malformed CSV"),
]


@pytest.mark.parametrize("name,transform,message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_trial_files_give_clear_errors(tmp_path, name, transform, message):
    with pytest.raises(DatasetError, match=message):
        read_trials(_variant(tmp_path, name, transform))


def test_bad_label_values_in_generic_reader(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("question,label\nq1,0\nq2,7\n")
    with pytest.raises(DatasetError, match="row 2, column 'label': unknown label '7'"):
        read_csv_checked(p, ["question", "label"], labels={"label": ["0", "1", "2"]})


HUGE = "POSITIVE " + "x" * 1_000_000
CONTROL = "".join(chr(c) for c in range(1, 32)) * 10


def test_pathological_replies_are_counted_invalid(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    assert parse_outcome_strict(HUGE) == "INVALID" and parse_outcome_lenient(HUGE) == "POSITIVE"
    assert (
        parse_outcome_strict(CONTROL) == "INVALID" and parse_outcome_lenient(CONTROL) == "INVALID"
    )
    replies = iter([HUGE, CONTROL, "\x00NEGATIVE", "POSITIVE", "", "NEGATIVE"])
    model = get_model("mockllm/model", custom_outputs=replying(lambda t: next(replies)))
    [log] = inspect_eval(
        oncology_rct(metrics="full"),
        model=model,
        display="none",
        log_dir=str(tmp_path / "logs"),
        max_connections=1,
    )
    m = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    assert log.status == "success"
    assert (m["n_valid"], m["n_invalid"], m["n_error"]) == (2, 3, 1)
