"""``fetch cochrane`` against a local fake E-utilities server: paging, 429, resume, rate limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from med_evals.commands.cli import main
from med_evals.data.builders.eutils import EUtils, EUtilsError, fetch_cochrane
from med_evals.data.builders.sources import read_sources, select_reviews
from tests.builders.fake_eutils import FakeEUtils

RECORDS = {str(40000000 + i): f"2024-0{1 + i % 6}-1{i % 9}" for i in range(7)}
RECORDS["39999999"] = "2017-12-31"  # outside the range


def client(fake: FakeEUtils, sleeps: list[float] | None = None, **kw) -> EUtils:
    return EUtils(
        base_url=fake.base_url,
        backoff=0.0,
        sleep=(sleeps.append if sleeps is not None else lambda s: None),
        **kw,
    )


def xml_ids(out: Path) -> list[str]:
    reviews, skipped = read_sources([out])
    assert not skipped
    return sorted(r.pmid for r in reviews)


def test_paging_and_batches(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("NCBI_API_KEY", raising=False)
    with FakeEUtils(dict(RECORDS)) as fake:
        summary = fetch_cochrane(
            "2018-01-01",
            "2024-12-31",
            tmp_path,
            client=client(fake),
            page_size=3,
            batch_size=2,
            progress=False,
        )
    assert fake.count("esearch.fcgi") == 3  # 7 hits, 3 a page
    assert fake.count("efetch.fcgi") == 4  # 7 PMIDs, 2 a batch
    assert summary["pmids"] == 7 and summary["batches"] == 4 and summary["fetched"] == 4
    assert xml_ids(tmp_path) == sorted(p for p in RECORDS if p != "39999999")
    first = fake.requests[0][1]
    assert first["term"] == '"Cochrane Database Syst Rev"[ta]' and first["datetype"] == "pdat"
    assert (first["mindate"], first["maxdate"]) == ("2018/01/01", "2024/12/31")
    assert json.loads((tmp_path / "fetch.json").read_text())["pmids"] == 7
    kept, _ = select_reviews(read_sources([tmp_path])[0])
    assert len(kept) == 7  # the fake's records parse as whole reviews


def test_429_then_success(tmp_path) -> None:
    sleeps: list[float] = []
    with FakeEUtils(dict(RECORDS), fail_429=2) as fake:
        fetch_cochrane(
            "2018-01-01", "2024-12-31", tmp_path, client=client(fake, sleeps), progress=False
        )
    assert [e for e, _ in fake.requests[:3]] == ["esearch.fcgi"] * 3  # two 429s, then served
    assert 0.0 in sleeps  # Retry-After: 0 was honoured
    assert len(xml_ids(tmp_path)) == 7


def test_gives_up_after_retries(tmp_path) -> None:
    with (
        FakeEUtils(dict(RECORDS), fail_429=100) as fake,
        pytest.raises(EUtilsError, match="HTTP 429"),
    ):
        fetch_cochrane(
            "2018-01-01", "2024-12-31", tmp_path, client=client(fake, retries=2), progress=False
        )
    assert fake.count("esearch.fcgi") == 3


def test_resume_after_interruption(tmp_path) -> None:
    with FakeEUtils(dict(RECORDS), broken_after=2) as fake:
        with pytest.raises(EUtilsError, match="HTTP 500"):
            fetch_cochrane(
                "2018-01-01",
                "2024-12-31",
                tmp_path,
                client=client(fake, retries=1),
                batch_size=2,
                progress=False,
            )
        assert len(list(tmp_path.glob("pubmed-*.xml"))) == 2
        assert not list(tmp_path.glob(".*.part"))  # nothing half-written
        fake.broken_after = None
        fake.requests.clear()
        summary = fetch_cochrane(
            "2018-01-01", "2024-12-31", tmp_path, client=client(fake), batch_size=2, progress=False
        )
        assert fake.count("esearch.fcgi") == 0  # the ID list came from the cache
        assert fake.count("efetch.fcgi") == 2  # only the two missing batches
        assert (summary["fetched"], summary["reused"]) == (2, 2)
        assert len(xml_ids(tmp_path)) == 7
        fake.requests.clear()  # a finished fetch asks the server nothing
        summary = fetch_cochrane(
            "2018-01-01", "2024-12-31", tmp_path, client=client(fake), batch_size=2, progress=False
        )
    assert summary["fetched"] == 0 and fake.requests == []


def test_large_range_is_split(tmp_path) -> None:
    with FakeEUtils(dict(RECORDS)) as fake:
        summary = fetch_cochrane(
            "2024-01-01", "2024-12-31", tmp_path, client=client(fake), max_hits=3, progress=False
        )
    assert summary["pmids"] == 7
    assert fake.count("esearch.fcgi") > 3  # halves searched until each fits


def test_rate_limit_and_api_key(monkeypatch) -> None:
    monkeypatch.delenv("NCBI_API_KEY", raising=False)
    now = [0.0]
    sleeps: list[float] = []
    with FakeEUtils(dict(RECORDS)) as fake:

        def sleep(s: float) -> None:
            sleeps.append(s)
            now[0] += s

        c = EUtils(base_url=fake.base_url, sleep=sleep, clock=lambda: now[0])
        assert c.rate == 3.0
        for _ in range(3):
            c.esearch_page('"Cochrane Database Syst Rev"[ta]', "2018-01-01", "2024-12-31", 0, 1)
        assert sleeps == pytest.approx([1 / 3, 1 / 3])  # requests are instant: each waits 1/3 s
        monkeypatch.setenv("NCBI_API_KEY", "secret")
        keyed = EUtils(base_url=fake.base_url, sleep=lambda s: None)
        assert keyed.rate == 10.0
        keyed.esearch_page('"Cochrane Database Syst Rev"[ta]', "2018-01-01", "2024-12-31", 0, 1)
    assert fake.requests[-1][1]["api_key"] == "secret"
    assert "api_key" not in fake.requests[0][1]


def test_cli_fetch(tmp_path, capsys) -> None:
    with FakeEUtils(dict(RECORDS)) as fake:
        rc = main(
            [
                "fetch",
                "cochrane",
                "--from",
                "2018-01-01",
                "--to",
                "2024-12-31",
                "--out",
                str(tmp_path),
                "--base-url",
                fake.base_url,
                "--no-progress",
            ]
        )
    assert rc == 0
    assert "7 PMIDs in 1 batches" in capsys.readouterr().out
    assert (
        main(
            [
                "fetch",
                "cochrane",
                "--from",
                "2024-13-01",
                "--to",
                "2024-12-31",
                "--out",
                str(tmp_path),
            ]
        )
        == 2  # a bad date is a usage error (exit_codes.py)
    )


def test_invalid_batches_are_retried_and_never_written(tmp_path) -> None:
    """An HTML page, an empty body, truncated XML or a reply missing a record is retried like a
    5xx; only a batch that parses and holds every PMID asked for is written."""
    said: list[str] = []
    faults = [("efetch.fcgi", f) for f in ("html", "empty", "truncated", "missing")]
    with FakeEUtils(dict(RECORDS), faults=faults) as fake:
        summary = fetch_cochrane(
            "2018-01-01",
            "2024-12-31",
            tmp_path,
            client=client(fake, echo=said.append),
            batch_size=4,
            progress=False,
        )
    assert fake.count("efetch.fcgi") == 2 + 4  # two batches, four broken answers retried
    assert summary["fetched"] == 2 and xml_ids(tmp_path) == sorted(set(RECORDS) - {"39999999"})
    problems = " ".join(said)
    assert "invalid reply: not well-formed XML" in problems  # the HTML page
    assert "invalid reply: empty body" in problems
    assert "invalid reply: 3 records for the 4 PMIDs asked for, missing PMIDs 40000000" in problems
    assert all("attempt" in line and "retrying in" in line for line in said)


def test_network_faults_are_retried_and_announced(tmp_path) -> None:
    """A line that is not HTTP, a short body, a reset connection and a server that does not
    answer are retried like a 5xx (no traceback), each retry and each long wait said aloud."""
    said: list[str] = []
    faults = [("esearch.fcgi", "hang"), ("esearch.fcgi", "badstatus")]
    faults += [("efetch.fcgi", f) for f in ("short", "reset")]
    with FakeEUtils(dict(RECORDS), faults=faults, hang_s=1.5) as fake:
        c = client(fake, echo=said.append, timeout=0.6)
        c.patience = 0.2
        summary = fetch_cochrane("2018-01-01", "2024-12-31", tmp_path, client=c, progress=False)
    assert summary["pmids"] == 7 and len(xml_ids(tmp_path)) == 7
    text = "\n".join(said)
    assert "waiting for esearch... attempt 1/6, 0.6 s timeout" in text
    assert "esearch: no answer (timed out) (attempt 1/6)" in text
    assert "esearch: not an HTTP reply" in text and "(attempt 2/6)" in text
    assert "efetch: reply cut short" in text
    assert "efetch: RemoteDisconnected" in text or "efetch: not an HTTP reply" in text


def test_a_batch_that_stays_invalid_is_an_error_and_not_written(tmp_path) -> None:
    with (
        FakeEUtils(dict(RECORDS), faults=[("efetch.fcgi", "html")] * 10) as fake,
        pytest.raises(EUtilsError, match=r"efetch failed 3 times; last: invalid reply"),
    ):
        fetch_cochrane(
            "2018-01-01",
            "2024-12-31",
            tmp_path,
            client=client(fake, retries=2, echo=lambda line: None),
            progress=False,
        )
    assert not list(tmp_path.glob("pubmed-*.xml")) and not list(tmp_path.glob(".*.part"))


def test_rerun_fetches_a_bad_batch_file_again(tmp_path) -> None:
    """A batch file left by an older version (an HTML page stored as a batch) or cut short is
    fetched again on a rerun, and the rerun says so."""
    with FakeEUtils(dict(RECORDS)) as fake:
        fetch_cochrane(
            "2018-01-01", "2024-12-31", tmp_path, client=client(fake), batch_size=4, progress=False
        )
        first, second = sorted(tmp_path.glob("pubmed-*.xml"))
        first.write_bytes(b"<html><body>Service unavailable</body></html>")
        second.write_bytes(second.read_bytes()[:-40])
        said: list[str] = []
        fake.requests.clear()
        summary = fetch_cochrane(
            "2018-01-01",
            "2024-12-31",
            tmp_path,
            client=client(fake, echo=said.append),
            batch_size=4,
            progress=False,
        )
    assert fake.count("efetch.fcgi") == 2
    assert (summary["fetched"], summary["reused"], summary["refetched"]) == (2, 0, 2)
    assert len(xml_ids(tmp_path)) == 7
    assert sum("fetching it again" in line for line in said) == 2
    assert str(first) in said[0] and "root element <html>" in said[0]


def test_cli_fetch_failure_is_one_line_exit_1(tmp_path, capsys) -> None:
    args = ["fetch", "cochrane", "--from", "2018-01-01", "--to", "2024-12-31"]
    with FakeEUtils(dict(RECORDS), faults=[("efetch.fcgi", "empty")] * 10) as fake:
        rc = main(
            [*args, "--out", str(tmp_path), "--base-url", fake.base_url, "--no-progress",
             "--retries", "1"]
        )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert err[-1].startswith("med-evals fetch cochrane: error: efetch failed 2 times; last: ")
    assert "empty body" in err[-1] and err[-1].endswith("(rerun the same command to resume)")
    assert [line for line in err if "error" in line] == [err[-1]]
    assert not list(tmp_path.glob("pubmed-*.xml"))
    # a bad date is a usage error
    assert main([*args[:3], "2024-13-01", *args[4:], "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
