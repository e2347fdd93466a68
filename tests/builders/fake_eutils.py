"""A local fake of NCBI E-utilities (``esearch.fcgi``, ``efetch.fcgi``) for the fetch tests.

It serves invented Cochrane records, answers GET and POST, pages esearch by ``retstart`` and
``retmax``, filters by ``mindate``/``maxdate``, and can fail on purpose: ``fail_429`` answers the
next N requests with HTTP 429 (``Retry-After: 0``), ``broken_after`` answers every efetch after
the first N with HTTP 500 (an outage that outlasts the client's retries), and ``faults`` lists
broken answers to give, one per request, before answering properly (see :data:`FAULTS`). Test
code only: it is not part of the package.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORD = """<PubmedArticle><MedlineCitation Status="MEDLINE" Owner="NLM">
<PMID Version="1">{pmid}</PMID><Article PubModel="Electronic">
<Journal><JournalIssue CitedMedium="Internet"><PubDate><Year>{y}</Year><Month>{m}</Month>
<Day>{d}</Day></PubDate></JournalIssue><ISOAbbreviation>Cochrane Database Syst Rev</ISOAbbreviation>
</Journal><ArticleTitle>Invented review {pmid}.</ArticleTitle>
<ELocationID EIdType="doi" ValidYN="Y">10.1002/14651858.CD{cd}.pub2</ELocationID>
<Abstract><AbstractText Label="OBJECTIVES" NlmCategory="OBJECTIVE">To assess invented
intervention {pmid}.</AbstractText><AbstractText Label="AUTHORS' CONCLUSIONS"
NlmCategory="CONCLUSIONS">Invented intervention {pmid} may help.</AbstractText></Abstract>
</Article></MedlineCitation></PubmedArticle>"""


#: Broken answers ``faults`` can give: a 200 with an HTML page, an empty 200, XML cut off in
#: the middle, a reply missing one of the records asked for; a line that is not an HTTP status
#: line, a body shorter than its Content-Length, a connection closed without a reply, and no
#: answer for ``hang_s`` seconds.
FAULTS = ("html", "empty", "truncated", "missing", "badstatus", "short", "reset", "hang")
HTML = b"<!DOCTYPE html><html><body><h1>Service unavailable</h1>Try again later.</body></html>"


@dataclass
class FakeEUtils:
    """Records: PMID -> ISO publication date."""

    records: dict[str, str]
    fail_429: int = 0
    broken_after: int | None = None
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    efetch_ok: int = 0
    #: (endpoint or "", fault) pairs given in order, one per matching request ("" any endpoint)
    faults: list[tuple[str, str]] = field(default_factory=list)
    hang_s: float = 1.0

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                url = urllib.parse.urlparse(self.path)
                self._answer(url.path, dict(urllib.parse.parse_qsl(url.query)))

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(size).decode()
                url = urllib.parse.urlparse(self.path)
                self._answer(url.path, dict(urllib.parse.parse_qsl(body)))

            def _answer(self, path: str, params: dict[str, str]) -> None:
                endpoint = path.rsplit("/", 1)[-1]
                fault = fake.next_fault(endpoint)
                if fault in ("badstatus", "short", "reset", "hang"):
                    fake.requests.append((endpoint, params))
                    self._broken(fault)
                    return
                status, headers, body = fake.handle(endpoint, params)
                if fault == "html":
                    headers, body = {"Content-Type": "text/html"}, HTML
                elif fault == "empty":
                    body = b""
                elif fault == "truncated":
                    body = body[: len(body) // 2]
                elif fault == "missing":
                    start = body.find(b"<PubmedArticle>")
                    end = body.find(b"</PubmedArticle>") + len(b"</PubmedArticle>")
                    body = body[:start] + body[end:]
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _broken(self, fault: str) -> None:
                if fault == "badstatus":
                    self.wfile.write(b"garbage instead of a status line\r\n\r\n")
                elif fault == "short":
                    self.wfile.write(
                        b"HTTP/1.0 200 OK\r\nContent-Length: 1000\r\n\r\n<PubmedArticleSet>"
                    )
                elif fault == "hang":
                    time.sleep(fake.hang_s)
                self.close_connection = True  # "reset": closed without a word

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/entrez/eutils/"

    def __enter__(self) -> FakeEUtils:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def next_fault(self, endpoint: str) -> str | None:
        for i, (where, fault) in enumerate(self.faults):
            if where in ("", endpoint):
                del self.faults[i]
                return fault
        return None

    def count(self, endpoint: str) -> int:
        return sum(1 for e, _ in self.requests if e == endpoint)

    def handle(self, endpoint: str, params: dict[str, str]) -> tuple[int, dict, bytes]:
        self.requests.append((endpoint, params))
        if self.fail_429 > 0:
            self.fail_429 -= 1
            return 429, {"Retry-After": "0"}, b'{"error":"API rate limit exceeded"}'
        if endpoint == "esearch.fcgi":
            return self._esearch(params)
        if endpoint == "efetch.fcgi":
            if self.broken_after is not None and self.efetch_ok >= self.broken_after:
                return 500, {}, b"internal error"
            self.efetch_ok += 1
            return self._efetch(params)
        return 404, {}, b"unknown endpoint"

    def _esearch(self, params: dict[str, str]) -> tuple[int, dict, bytes]:
        if params.get("db") != "pubmed" or "Cochrane Database Syst Rev" not in params["term"]:
            return 400, {}, b"bad query"
        lo, hi = params["mindate"].replace("/", "-"), params["maxdate"].replace("/", "-")
        hits = sorted((p for p, d in self.records.items() if lo <= d <= hi), key=int)
        start, size = int(params.get("retstart", 0)), int(params.get("retmax", 20))
        result = {
            "count": str(len(hits)),
            "retmax": str(size),
            "retstart": str(start),
            "idlist": hits[start : start + size],
        }
        return (
            200,
            {"Content-Type": "application/json"},
            json.dumps({"header": {"type": "esearch"}, "esearchresult": result}).encode(),
        )

    def _efetch(self, params: dict[str, str]) -> tuple[int, dict, bytes]:
        parts = ['<?xml version="1.0" ?>\n<PubmedArticleSet>']
        for pmid in params["id"].split(","):
            y, m, d = self.records[pmid].split("-")
            parts.append(RECORD.format(pmid=pmid, y=y, m=m, d=d, cd=pmid[-6:]))
        parts.append("</PubmedArticleSet>\n")
        return 200, {"Content-Type": "text/xml"}, "\n".join(parts).encode()
