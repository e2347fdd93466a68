"""Reading Cochrane records from efetch XML and saved PubMed pages, and choosing which to keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from med_evals.data.builders import pubmed, sources
from med_evals.data.builders.pubmed import Review, Skipped, parse_html, parse_xml
from med_evals.data.builders.sources import read_sources, select_reviews
from med_evals.data.dates import parse_date

FIXTURES = Path(__file__).parent / "fixtures"
XML = FIXTURES / "cochrane_efetch.xml"


@pytest.fixture(scope="module")
def records() -> dict[str, Review | Skipped]:
    return {r.pmid: r for r in parse_xml(XML.read_text(encoding="utf-8"), str(XML))}


def test_structured_abstract_full_sections(records) -> None:
    r = records["90000001"]
    assert isinstance(r, Review)
    assert r.review_id == "CD099001" and r.version == 2
    assert r.doi == "10.1002/14651858.CD099001.pub2"
    assert r.publication_date == "2021-03-10"  # ArticleDate, the electronic publication
    assert set(r.sections) >= {
        "background",
        "objectives",
        "search methods",
        "main results",
        "conclusions",
    }
    # text inside and after inline markup is kept
    assert r.sections["objectives"] == (
        "To assess the effects of Lactobacillus and Saccharomyces boulardii probiotics on "
        "diarrhoea in older adults taking antibiotics, compared with placebo."
    )
    assert r.sections["main results"].endswith("I2 = 31%.")
    assert r.sections["conclusions"].startswith("Probiotics probably reduce antibiotic-associated")
    assert r.sections["background"].startswith("Antibiotics disturb the gut flora of people aged ≥")


def test_odd_unicode_as_written_and_nlm_categories(records) -> None:
    r = records["90000008"]
    # no Label attributes: sections come from NlmCategory
    assert r.sections["objectives"] == (
        "To compare hyaluronate 0.1%\u2009eye drops (≤\u00a04 times daily) with saline in adults "
        "with Sjögren’s syndrome – “naïve” to treatment – on tear break\u2010up time (µs, "
        "α\u2010level 0.05)."
    )
    assert "(Ω\u2011scores) and \ufeffat high risk" in r.sections["conclusions"]


def test_curly_apostrophe_label(records) -> None:
    assert records["90000009"].sections["conclusions"].startswith("Regular inhaled")


def test_unstructured_abstract_with_inline_headings(records) -> None:
    r = records["90000006"]
    assert r.sections["objectives"] == (
        "To determine whether bladder training reduces incontinence episodes in women."
    )
    assert r.sections["conclusions"].startswith("There is not enough evidence")
    assert r.publication_date == "2019-01-01"  # MedlineDate "2019 Jan-Feb": the earliest day


def test_withdrawn_and_missing_sections(records) -> None:
    assert records["90000003"].withdrawn
    assert "objectives" not in records["90000004"].sections  # an editorial, unstructured
    assert "conclusions" not in records["90000005"].sections


def test_malformed_record_is_skipped_not_fatal(records) -> None:
    bad = records["90000007"]
    assert isinstance(bad, Skipped) and bad.reason == pubmed.MALFORMED
    assert "not well-formed" in bad.detail
    # the records after it are read
    assert isinstance(records["90000008"], Review)


def test_truncated_file() -> None:
    text = XML.read_text(encoding="utf-8")
    cut = text[: text.index('<PMID Version="1">90000009')]
    got = parse_xml(cut, "cut.xml")
    assert isinstance(got[-1], Skipped) and got[-1].detail == "no closing </PubmedArticle>"
    assert sum(isinstance(r, Review) for r in got) == 7


def test_html_page() -> None:
    path = FIXTURES / "pubmed_90000010.html"
    (r,) = parse_html(path.read_text(encoding="utf-8"), str(path))
    assert isinstance(r, Review)
    assert r.pmid == "90000010" and r.review_id == "CD099008" and r.version == 2
    assert r.title == "Exercise for depression in older people"
    assert r.publication_date == "2023-03-15"
    assert r.sections["objectives"] == (
        "To assess whether supervised aerobic exercise reduces depressive symptoms in people "
        "aged 60 or over, compared with usual care."
    )
    assert r.sections["conclusions"].endswith("the effect is moderate.")
    assert r.sections["main results"] == "Nine trials; standardised mean difference \u22120.41."


def test_html_page_without_pmid() -> None:
    (s,) = parse_html("<html><body><h1 class='heading-title'>x</h1></body></html>", "x.html")
    assert isinstance(s, Skipped) and s.reason == pubmed.MALFORMED


def test_read_and_select_everything() -> None:
    reviews, skipped = read_sources([FIXTURES])
    kept, more = select_reviews(reviews)
    skipped += more
    assert [r.pmid for r in kept] == ["90000006", "90000001", "90000008", "90000010", "90000009"]
    reasons = {s.pmid: s.reason for s in skipped}
    assert reasons == {
        "90000002": sources.EARLIER_VERSION,  # CD099001 version 1; .pub2 is in the input
        "90000011": sources.EARLIER_VERSION,  # CD099006 version 1 (HTML); .pub2 is in the XML
        "90000003": sources.WITHDRAWN,
        "90000004": sources.NO_OBJECTIVES,
        "90000012": sources.NO_OBJECTIVES,
        "90000005": sources.NO_CONCLUSIONS,
        "90000007": pubmed.MALFORMED,
    }


def test_latest_version_wins_whatever_the_order(tmp_path) -> None:
    a = Review(
        "1",
        "a",
        doi="10.1002/14651858.CD000001.pub3",
        publication_date="2020-01-01",
        sections={"objectives": "o", "conclusions": "c"},
    )
    b = Review(
        "2",
        "b",
        doi="10.1002/14651858.CD000001.pub10",
        publication_date="2021-01-01",
        sections={"objectives": "o", "conclusions": "c"},
    )
    for order in ([a, b], [b, a]):
        kept, skipped = select_reviews(order)
        assert [r.pmid for r in kept] == ["2"] and skipped[0].pmid == "1"


def test_duplicate_pmid_and_unreadable_file(tmp_path) -> None:
    (tmp_path / "a.xml").write_text(XML.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "b.xml").write_text(XML.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "notes.html").write_text("just some notes", encoding="utf-8")
    (tmp_path / "latin1.xml").write_bytes("<PubmedArticle>caf\xe9".encode("latin-1"))
    reviews, skipped = read_sources([tmp_path])
    kept, more = select_reviews(reviews)
    reasons = [s.reason for s in skipped + more]
    assert reasons.count(sources.DUPLICATE) == 8  # every readable record of the second copy
    assert reasons.count(pubmed.MALFORMED) == 2
    assert reasons.count(sources.UNREADABLE) == 2
    with pytest.raises(FileNotFoundError):
        read_sources([tmp_path / "missing"])


@pytest.mark.parametrize(
    "text, iso",
    [
        ("2020 May 12", "2020-05-12"),
        ("2020 May", "2020-05-01"),
        ("2019 Jan-Feb", "2019-01-01"),
        ("2020", "2020-01-01"),
        ("2020/05/12", "2020-05-12"),
        ("05/12/2020", "2020-05-12"),
        ("2023 Mar 15;3(3):CD099008.", "2023-03-15"),
        ("2021 Feb 30", ""),
        ("", ""),
    ],
)
def test_parse_date(text: str, iso: str) -> None:
    assert parse_date(text) == iso
