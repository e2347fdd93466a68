"""``med-evals fetch cochrane``: Cochrane reviews' PubMed records through NCBI E-utilities.

``esearch`` lists the PMIDs of the Cochrane Database of Systematic Reviews published in a date
range (paged; a range with more hits than one search may return is halved until each half fits),
``efetch`` writes their XML in batches. Requests are spaced to NCBI's limits (3 a second, 10 with
an API key), failures (HTTP 429 and 5xx, connection errors, NCBI's "rate limit" replies) are
retried with back-off (``Retry-After`` honoured). The ID list is cached under ``OUT/.cache`` and
each batch is written atomically, so a second run resumes where the first stopped and a finished
one costs one look at the disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from med_evals.builders.dates import check_iso

DEFAULT_BASE_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/"
API_KEY_ENV = "NCBI_API_KEY"
JOURNAL_TERM = '"Cochrane Database Syst Rev"[ta]'
#: PubMed's esearch returns at most the first 10,000 hits of a query.
MAX_HITS = 9999
RETRY_STATUS = {429, 500, 502, 503, 504}


class EUtilsError(RuntimeError):
    """A request that still failed after every retry (the message names it)."""


@dataclass
class EUtils:
    """A small E-utilities client: rate limit, retries with back-off, nothing else."""

    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    tool: str = "med_evals"
    email: str | None = None
    retries: int = 5
    backoff: float = 1.0
    timeout: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if self.api_key is None:
            self.api_key = os.environ.get(API_KEY_ENV) or None
        self.rate = 10.0 if self.api_key else 3.0
        self._next = 0.0
        self._lock = threading.Lock()
        if not self.base_url.endswith("/"):
            self.base_url += "/"

    def _wait_turn(self) -> None:
        with self._lock:
            now = self.clock()
            if now < self._next:
                self.sleep(self._next - now)
                now = self._next
            self._next = now + 1.0 / self.rate

    def request(self, endpoint: str, params: dict[str, str]) -> bytes:
        """POST ``params`` (plus tool, email, api_key) to ``endpoint``; the body of the reply."""
        params = {**params, "tool": self.tool}
        if self.email:
            params["email"] = self.email
        if self.api_key:
            params["api_key"] = self.api_key
        data = urllib.parse.urlencode(params).encode()
        url = urllib.parse.urljoin(self.base_url, endpoint)
        last = ""
        for attempt in range(self.retries + 1):
            self._wait_turn()
            delay = self.backoff * 2**attempt
            try:
                with urllib.request.urlopen(url, data=data, timeout=self.timeout) as resp:
                    body = resp.read()
                if not body.lstrip().startswith(b'{"error"'):
                    return body
                last = body[:200].decode("utf-8", "replace")  # e.g. "API rate limit exceeded"
            except urllib.error.HTTPError as ex:
                if ex.code not in RETRY_STATUS:
                    raise EUtilsError(f"{endpoint}: HTTP {ex.code} {ex.reason}") from ex
                last = f"HTTP {ex.code}"
                retry_after = ex.headers.get("Retry-After") if ex.headers else None
                if retry_after and retry_after.strip().isdigit():
                    delay = float(retry_after)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as ex:
                last = str(ex)
            if attempt < self.retries:
                self.sleep(delay)
        raise EUtilsError(f"{endpoint} failed {self.retries + 1} times; last: {last}")

    def esearch_page(
        self, term: str, mindate: str, maxdate: str, retstart: int, retmax: int
    ) -> tuple[int, list[str]]:
        body = self.request(
            "esearch.fcgi",
            {
                "db": "pubmed",
                "term": term,
                "datetype": "pdat",
                "mindate": mindate.replace("-", "/"),
                "maxdate": maxdate.replace("-", "/"),
                "retstart": str(retstart),
                "retmax": str(retmax),
                "retmode": "json",
            },
        )
        try:
            result = json.loads(body)["esearchresult"]
            return int(result["count"]), [str(i) for i in result.get("idlist", [])]
        except (ValueError, KeyError) as ex:
            raise EUtilsError(f"esearch: unexpected reply {body[:200]!r}") from ex

    def search(
        self, term: str, start: str, end: str, page_size: int = 5000, max_hits: int = MAX_HITS
    ) -> list[str]:
        """Every PMID for ``term`` published from ``start`` to ``end`` (ISO dates, inclusive)."""
        count, ids = self.esearch_page(term, start, end, 0, page_size)
        if count > max_hits and start != end:
            d0, d1 = date.fromisoformat(start), date.fromisoformat(end)
            mid = d0 + (d1 - d0) // 2
            left = self.search(term, start, mid.isoformat(), page_size, max_hits)
            right = self.search(
                term, (mid + timedelta(days=1)).isoformat(), end, page_size, max_hits
            )
            return sorted(set(left) | set(right), key=int)
        while len(ids) < min(count, max_hits + 1):
            _, page = self.esearch_page(term, start, end, len(ids), page_size)
            if not page:
                break
            ids.extend(page)
        return sorted(set(ids), key=int)

    def efetch(self, ids: list[str]) -> bytes:
        return self.request(
            "efetch.fcgi",
            {"db": "pubmed", "id": ",".join(ids), "retmode": "xml", "rettype": "abstract"},
        )


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _progress(total: int, enabled: bool):  # rich ships with Inspect
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(TextColumn("efetch"), BarColumn(), MofNCompleteColumn(), disable=not enabled)


def fetch_cochrane(
    start: str,
    end: str,
    out: str | Path,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    email: str | None = None,
    batch_size: int = 200,
    page_size: int = 5000,
    max_hits: int = MAX_HITS,
    progress: bool = True,
    client: EUtils | None = None,
) -> dict:
    """Write the PubMed XML of every Cochrane review published from ``start`` to ``end``
    (inclusive) to ``out`` as ``pubmed-NNNNN.xml`` batches; returns a summary (also written to
    ``out/fetch.json``). Rerunning with the same arguments resumes an interrupted fetch."""
    start, end = check_iso(start, "--from"), check_iso(end, "--to")
    if start > end:
        raise ValueError(f"--from {start} is after --to {end}")
    out = Path(out)
    (out / ".cache").mkdir(parents=True, exist_ok=True)
    client = client or EUtils(base_url=base_url or DEFAULT_BASE_URL, api_key=api_key, email=email)
    key = hashlib.sha256(f"{JOURNAL_TERM}|{start}|{end}|{client.base_url}".encode()).hexdigest()
    cached = out / ".cache" / f"esearch-{key[:16]}.json"
    if cached.is_file():
        ids = json.loads(cached.read_text())["ids"]
    else:
        ids = client.search(JOURNAL_TERM, start, end, page_size, max_hits)
        _write_atomic(
            cached,
            json.dumps({"term": JOURNAL_TERM, "from": start, "to": end, "ids": ids}).encode(),
        )
    batches = [ids[i : i + batch_size] for i in range(0, len(ids), batch_size)]
    fetched = reused = 0
    with _progress(len(batches), progress) as bar:
        task = bar.add_task("efetch", total=len(batches))
        for n, batch in enumerate(batches, 1):
            digest = hashlib.sha256(",".join(batch).encode()).hexdigest()[:12]
            path = out / f"pubmed-{n:05d}-{digest}.xml"
            if path.is_file():
                reused += 1
            else:
                _write_atomic(path, client.efetch(batch))
                fetched += 1
            bar.advance(task)
    summary = {
        "term": JOURNAL_TERM,
        "from": start,
        "to": end,
        "pmids": len(ids),
        "batches": len(batches),
        "fetched": fetched,
        "reused": reused,
        "rate_per_second": client.rate,
    }
    (out / "fetch.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
