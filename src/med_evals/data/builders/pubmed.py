"""Cochrane review abstracts from PubMed: efetch XML and saved PubMed pages (BeautifulSoup, lxml).

Each ``<PubmedArticle>`` or page becomes a :class:`Review` (sections by ``Label`` or
``NlmCategory``, the full text of each, inline markup's text included, characters as written) or,
when it cannot be read, a :class:`Skipped` with its reason: a malformed record never stops a
build. Which records are kept is decided in :mod:`med_evals.data.builders.sources`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from bs4 import BeautifulSoup, Tag
from lxml import etree  # type: ignore[import-untyped]

from med_evals.data.dates import parse_date

WITHDRAWN = "withdrawn"
NO_OBJECTIVES = "no Objectives section"
NO_CONCLUSIONS = "no Authors' conclusions section"
MALFORMED = "malformed record"
EARLIER_VERSION = "earlier version of a review in the input"
DUPLICATE = "same PMID read twice"
UNREADABLE = "not a PubMed XML or HTML file"

_SECTION_LABELS = {
    "BACKGROUND": "background",
    "OBJECTIVE": "objectives",
    "OBJECTIVES": "objectives",
    "AIMS": "objectives",
    "SEARCH METHODS": "search methods",
    "SEARCH STRATEGY": "search methods",
    "SELECTION CRITERIA": "selection criteria",
    "DATA COLLECTION AND ANALYSIS": "data collection and analysis",
    "MAIN RESULTS": "main results",
    "AUTHORS' CONCLUSIONS": "conclusions",
    "AUTHORS CONCLUSIONS": "conclusions",
    "AUTHOR'S CONCLUSIONS": "conclusions",
    "CONCLUSIONS": "conclusions",
    "CONCLUSION": "conclusions",
}
_NLM_CATEGORIES = {
    "BACKGROUND": "background",
    "OBJECTIVE": "objectives",
    "CONCLUSIONS": "conclusions",
}
_INLINE_HEADING = re.compile(
    r"(?:^|(?<=[.!?)\]]\s))("
    + "|".join(sorted(map(re.escape, _SECTION_LABELS), key=len)[::-1])
    + r")\s*:\s*",
    re.IGNORECASE,
)
_CD = re.compile(r"(CD\d{6})(?:\.pub(\d+))?", re.IGNORECASE)
_WITHDRAWN_TEXT = re.compile(
    r"^\s*(?:this review (?:has been|was|is) withdrawn|reason for withdrawal)", re.IGNORECASE
)


@dataclass
class Review:
    """One PubMed record of a Cochrane review; ``sections`` maps section name to its full text."""

    pmid: str
    source: str
    title: str = ""
    sections: dict[str, str] = field(default_factory=dict)
    doi: str = ""
    publication_date: str = ""  # ISO; a partial date is filled with its earliest day
    withdrawn: bool = False

    @property
    def review_id(self) -> str:
        m = _CD.search(self.doi)
        return m.group(1).upper() if m else ""

    @property
    def version(self) -> int:
        m = _CD.search(self.doi)
        return int(m.group(2)) if m and m.group(2) else 1


@dataclass(frozen=True)
class Skipped:
    reason: str
    source: str
    pmid: str = ""
    review_id: str = ""
    detail: str = ""


def text_of(el: Tag) -> str:
    """All the text of an element, inline markup's and the text after it included; runs of ASCII
    whitespace become one space, every other character stays as written."""
    return re.sub(r"[ \t\r\n]+", " ", el.get_text()).strip()


def _attr(el: Tag, name: str) -> str | None:
    value = el.get(name)
    return None if value is None else str(value)


def _canonical(label: str | None, category: str | None) -> str | None:
    key = " ".join((label or "").replace("’", "'").upper().rstrip(":").split())
    if key in _SECTION_LABELS:
        return _SECTION_LABELS[key]
    return _NLM_CATEGORIES.get((category or "").upper())


def _add(sections: dict[str, str], name: str | None, text: str) -> None:
    if name and text:
        sections[name] = f"{sections[name]} {text}" if name in sections else text


def split_inline_headings(text: str) -> dict[str, str]:
    """An unstructured abstract that still writes ``Objectives: ...`` inline, split at the headings
    of a Cochrane abstract; {} when it has none."""
    parts = _INLINE_HEADING.split(text)
    sections: dict[str, str] = {}
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        _add(sections, _canonical(heading, None), body.strip())
    return sections


def _is_withdrawn(title: str, sections: dict[str, str], pub_types: Iterable[str]) -> bool:
    if title.upper().lstrip("[ ").startswith("WITHDRAWN"):
        return True
    if any("retracted publication" in t.lower() or "withdrawn" in t.lower() for t in pub_types):
        return True
    return any(_WITHDRAWN_TEXT.match(t) for t in sections.values())


# --- efetch XML -----------------------------------------------------------------------------

_RECORD_START = re.compile(r"<PubmedArticle[\s>]")
_PMID = re.compile(r"<PMID[^>]*>\s*(\d+)\s*</PMID>")


def _record_chunks(text: str) -> Iterator[str]:
    starts = [m.start() for m in _RECORD_START.finditer(text)]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        yield text[start:end]


def parse_xml_record(chunk: str, source: str) -> Review | Skipped:
    """One ``<PubmedArticle>``; anything that is not well-formed XML is a :class:`Skipped`."""
    pmid_m = _PMID.search(chunk)
    pmid = pmid_m.group(1) if pmid_m else ""
    close = chunk.rfind("</PubmedArticle>")
    if close < 0:
        return Skipped(MALFORMED, source, pmid, detail="no closing </PubmedArticle>")
    chunk = chunk[: close + len("</PubmedArticle>")]
    try:
        etree.fromstring(chunk.encode("utf-8"))
    except etree.XMLSyntaxError as ex:
        return Skipped(MALFORMED, source, pmid, detail=f"not well-formed XML: {ex}")
    soup = BeautifulSoup(chunk, "lxml-xml")
    citation = soup.find("MedlineCitation")
    pmid_el = citation.find("PMID") if citation else None
    if not pmid_el or not text_of(pmid_el).isdigit():
        return Skipped(MALFORMED, source, pmid, detail="no PMID")
    review = Review(pmid=text_of(pmid_el), source=source)
    title = soup.find("ArticleTitle")
    review.title = text_of(title) if title else ""
    abstract = soup.find("Abstract")
    texts = abstract.find_all("AbstractText") if abstract else []
    for el in texts:
        name = _canonical(_attr(el, "Label"), _attr(el, "NlmCategory"))
        _add(review.sections, name, text_of(el))
    if not review.sections and len(texts) == 1:
        review.sections = split_inline_headings(text_of(texts[0]))
    doi = soup.find("ELocationID", EIdType="doi") or soup.find("ArticleId", IdType="doi")
    review.doi = text_of(doi) if doi else ""
    review.publication_date = _xml_date(soup)
    pub_types = [text_of(t) for t in soup.find_all("PublicationType")]
    review.withdrawn = _is_withdrawn(review.title, review.sections, pub_types)
    return review


def _xml_date(soup: BeautifulSoup) -> str:
    """The electronic publication date (``ArticleDate``), else the journal issue's date, else the
    date the record entered PubMed."""
    issue = soup.find("JournalIssue")
    for el in (
        soup.find("ArticleDate"),
        issue.find("PubDate") if issue else None,
        soup.find("PubMedPubDate", PubStatus="pubmed"),
    ):
        if not el:
            continue
        medline = el.find("MedlineDate")
        parts = [el.find(k) for k in ("Year", "Month", "Day")]
        text = text_of(medline) if medline else " ".join(text_of(p) for p in parts if p)
        date = parse_date(text)
        if date:
            return date
    return ""


def parse_xml(text: str, source: str) -> list[Review | Skipped]:
    return [parse_xml_record(chunk, source) for chunk in _record_chunks(text)]


# --- saved PubMed pages ---------------------------------------------------------------------


def _meta(soup: BeautifulSoup, *names: str) -> str:
    for name in names:
        el = soup.find("meta", attrs={"name": name})
        if el and str(el.get("content", "")).strip():
            return str(el["content"]).strip()
    return ""


def parse_html(text: str, source: str) -> list[Review | Skipped]:
    """A saved PubMed abstract page (``pubmed.ncbi.nlm.nih.gov/<PMID>/``)."""
    soup = BeautifulSoup(text, "lxml")
    pmid = _meta(soup, "citation_pmid", "ncbi_uid", "uid")
    current = soup.find(class_="current-id")
    if not pmid and current:
        pmid = text_of(current)
    if not pmid.isdigit():
        return [Skipped(MALFORMED, source, detail="no PMID on the page")]
    review = Review(pmid=pmid, source=source)
    heading = soup.find(class_="heading-title")
    review.title = text_of(heading) if heading else _meta(soup, "citation_title")
    abstract = soup.find(id="eng-abstract") or soup.find(class_="abstract-content")
    paragraphs = abstract.find_all("p") if abstract else []
    for p in paragraphs:
        sub = p.find(class_="sub-title")
        label = text_of(sub) if sub else None
        if sub:
            sub.extract()
        _add(review.sections, _canonical(label, None), text_of(p))
    if not review.sections and abstract:
        review.sections = split_inline_headings(text_of(abstract))
    doi = _meta(soup, "citation_doi")
    doi_link = soup.select_one(".identifier.doi a, .identifier.doi .id-link")
    review.doi = doi or (text_of(doi_link) if doi_link else "")
    cit = soup.find(class_="cit")
    review.publication_date = parse_date(
        _meta(soup, "citation_publication_date", "citation_date") or (text_of(cit) if cit else "")
    )
    pub_types = [text_of(t) for t in soup.select(".publication-type")]
    review.withdrawn = _is_withdrawn(review.title, review.sections, pub_types)
    return [review]
