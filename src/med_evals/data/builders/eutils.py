"""``med-evals fetch cochrane``: Cochrane reviews' PubMed records through NCBI E-utilities.

``esearch`` lists the PMIDs of the Cochrane Database of Systematic Reviews published in a date
range (paged; a range with more hits than one search may return is halved until each half fits),
``efetch`` writes their XML in batches. Requests are spaced to NCBI's limits (3 a second, 10 with
an API key), failures (HTTP 429 and 5xx, dropped or reset connections, a reply that is not HTTP
or stops short, a timeout, NCBI's "rate limit" replies, and a reply that does not validate) are
retried with back-off (``Retry-After`` honoured), each retry announced on stderr. Each efetch
batch is validated before it is written: it must parse as XML (lxml) and hold one record for
each PMID asked for, so an HTML error page, an empty body or truncated XML is never stored. The
ID list is cached under ``OUT/.cache`` and each batch is written atomically, so a second run
resumes where the first stopped (a batch file left there that does not validate is fetched
again) and a finished one only reads the disk.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from lxml import etree  # type: ignore[import-untyped]

from med_evals.data.dates import check_iso
from med_evals.outputs.files import check_folder, make_folder, write_bytes, write_text

DEFAULT_BASE_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/"
API_KEY_ENV = "NCBI_API_KEY"
JOURNAL_TERM = '"Cochrane Database Syst Rev"[ta]'
#: PubMed's esearch returns at most the first 10,000 hits of a query.
MAX_HITS = 9999
RETRY_STATUS = {429, 500, 502, 503, 504}
#: Seconds without an answer before the user is told the client is still waiting.
PATIENCE = 5.0

#: Checks a reply's body: None when it is what was asked for, else why not (the request is then
#: retried like a 5xx).
Validator = Callable[[bytes], str | None]


class EUtilsError(RuntimeError):
    """A request that still failed after every retry (the message names it)."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _short(ex: BaseException) -> str:
    """A network failure in a few words (``IncompleteRead`` prints its whole partial body)."""
    if isinstance(ex, http.client.IncompleteRead):
        return f"reply cut short ({len(ex.partial)} bytes read)"
    if isinstance(ex, http.client.BadStatusLine) and not isinstance(ex, ConnectionError):
        return f"not an HTTP reply (status line {str(ex)[:60]!r})"
    if isinstance(ex, urllib.error.URLError) and isinstance(ex.reason, BaseException):
        return _short(ex.reason)
    if isinstance(ex, TimeoutError):
        return "no answer (timed out)"
    return f"{type(ex).__name__}: {ex}"[:200]


@dataclass
class EUtils:
    """A small E-utilities client: rate limit, retries with back-off, nothing else."""

    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    tool: str = "med_evals"
    email: str | None = None
    retries: int = 5
    backoff: float = 1.0
    timeout: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    #: where retries and waits are announced (one line each; default stderr)
    echo: Callable[[str], None] = _stderr
    #: seconds without an answer before saying that the client is still waiting
    patience: float = PATIENCE

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

    def request(
        self, endpoint: str, params: dict[str, str], validate: Validator | None = None
    ) -> bytes:
        """POST ``params`` (plus tool, email, api_key) to ``endpoint``; the body of the reply.

        A reply that ``validate`` rejects is retried like an HTTP 5xx; after the last retry an
        :class:`EUtilsError` names the endpoint, the attempts and the last problem."""
        params = {**params, "tool": self.tool}
        if self.email:
            params["email"] = self.email
        if self.api_key:
            params["api_key"] = self.api_key
        data = urllib.parse.urlencode(params).encode()
        url = urllib.parse.urljoin(self.base_url, endpoint)
        name = endpoint.removesuffix(".fcgi")
        total = self.retries + 1
        last = ""
        for attempt in range(total):
            self._wait_turn()
            delay = self.backoff * 2**attempt
            waiting = threading.Timer(
                self.patience,
                self.echo,
                [
                    f"waiting for {name}... attempt {attempt + 1}/{total}, "
                    f"{self.timeout:g} s timeout"
                ],
            )
            waiting.daemon = True
            waiting.start()
            try:
                with urllib.request.urlopen(url, data=data, timeout=self.timeout) as resp:
                    body = resp.read()
                if body.lstrip().startswith(b'{"error"'):
                    last = body[:200].decode("utf-8", "replace")  # "API rate limit exceeded"
                else:
                    problem = validate(body) if validate else None
                    if problem is None:
                        return body
                    last = f"invalid reply: {problem}"
            except urllib.error.HTTPError as ex:
                if ex.code not in RETRY_STATUS:
                    raise EUtilsError(f"{name}: HTTP {ex.code} {ex.reason}") from ex
                last = f"HTTP {ex.code}"
                retry_after = ex.headers.get("Retry-After") if ex.headers else None
                if retry_after and retry_after.strip().isdigit():
                    delay = float(retry_after)
            except (OSError, http.client.HTTPException) as ex:
                # URLError, timeouts, resets; BadStatusLine, IncompleteRead, RemoteDisconnected
                last = _short(ex)
            finally:
                waiting.cancel()
            if attempt < self.retries:
                self.echo(
                    f"{name}: {last} (attempt {attempt + 1}/{total}); "
                    f"retrying in {delay:g} s"
                )
                self.sleep(delay)
        raise EUtilsError(f"{name} failed {total} times; last: {last}")

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
            validate=check_esearch,
        )
        result = json.loads(body)["esearchresult"]
        return int(result["count"]), [str(i) for i in result.get("idlist", [])]

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
        """The PubMed XML of ``ids``, validated (:func:`check_batch`) before it is returned."""
        return self.request(
            "efetch.fcgi",
            {"db": "pubmed", "id": ",".join(ids), "retmode": "xml", "rettype": "abstract"},
            validate=lambda body: check_batch(body, ids),
        )


def check_esearch(body: bytes) -> str | None:
    """None when ``body`` is an esearch JSON reply with a count, else what is wrong."""
    try:
        result = json.loads(body)["esearchresult"]
        int(result["count"])
        list(result.get("idlist", []))
    except (ValueError, KeyError, TypeError):
        return f"not an esearch JSON result: {_excerpt(body)}"
    return None


def _excerpt(body: bytes) -> str:
    if not body.strip():
        return "empty body"
    return repr(body[:80].decode("utf-8", "replace"))


_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


def check_batch(body: bytes, ids: list[str]) -> str | None:
    """None when ``body`` is a complete efetch reply for ``ids``: well-formed XML (lxml), a
    ``PubmedArticleSet`` holding one ``PubmedArticle`` (or ``PubmedBookArticle``) for each PMID
    asked for; else what is wrong (an HTML page, an empty body, truncated XML, missing records)."""
    if not body.strip():
        return "empty body"
    try:
        root = etree.fromstring(body, _PARSER)
    except etree.XMLSyntaxError as ex:
        return f"not well-formed XML ({ex}); starts {_excerpt(body)}"
    if root.tag != "PubmedArticleSet":
        return f"root element <{root.tag}>, not <PubmedArticleSet>; starts {_excerpt(body)}"
    found: list[str] = []
    for record in root:
        if record.tag in ("PubmedArticle", "PubmedBookArticle"):
            pmid = record.find(".//PMID")
            found.append((pmid.text or "").strip() if pmid is not None else "")
    missing = sorted(set(ids) - set(found), key=lambda p: int(p) if p.isdigit() else 0)
    if missing or len(found) != len(ids):
        more = f", missing PMIDs {', '.join(missing[:5])}" if missing else ""
        more += " ..." if len(missing) > 5 else ""
        return f"{len(found)} records for the {len(ids)} PMIDs asked for{more}"
    return None


def _write_atomic(path: Path, data: bytes) -> None:
    write_bytes(path, data, "--out")


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
    timeout: float | None = None,
    retries: int | None = None,
) -> dict:
    """Write the PubMed XML of every Cochrane review published from ``start`` to ``end``
    (inclusive) to ``out`` as ``pubmed-NNNNN.xml`` batches; returns a summary (also written to
    ``out/fetch.json``). Rerunning with the same arguments resumes an interrupted fetch."""
    start, end = check_iso(start, "--from"), check_iso(end, "--to")
    if start > end:
        raise ValueError(f"--from {start} is after --to {end}")
    out = check_folder(out, "--out")  # before any request
    make_folder(out / ".cache", "--out")
    if client is None:
        client = EUtils(base_url=base_url or DEFAULT_BASE_URL, api_key=api_key, email=email)
        if timeout is not None:
            client.timeout = timeout
        if retries is not None:
            client.retries = retries
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
    fetched = reused = refetched = 0
    with _progress(len(batches), progress) as bar:
        task = bar.add_task("efetch", total=len(batches))
        for n, batch in enumerate(batches, 1):
            digest = hashlib.sha256(",".join(batch).encode()).hexdigest()[:12]
            path = out / f"pubmed-{n:05d}-{digest}.xml"
            if path.is_file():
                problem = check_batch(path.read_bytes(), batch)
                if problem is None:
                    reused += 1
                    bar.advance(task)
                    continue
                client.echo(f"{path}: not a complete efetch reply ({problem}); fetching it again")
                refetched += 1
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
        "refetched": refetched,
        "rate_per_second": client.rate,
    }
    write_text(out / "fetch.json", json.dumps(summary, indent=2) + "\n")
    return summary
