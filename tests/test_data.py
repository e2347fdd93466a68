import pytest

from med_evals.data.datasets import (
    DatasetError,
    fetch,
    git_blob_sha1_of,
    load_manifest,
    read_csv_checked,
    sha256_of,
)
from med_evals.tasks.oncology_rct import read_trials

from .oncology_support import FIXTURE_CSV, install_fixture


def test_every_manifest_pins_revision_checksum_and_licence():
    for name in [
        "oncology-rct-250-counterfactual",
        "oncology-rct-250",
        "healthfc",
        "medreqal",
        "medevidence",
    ]:
        m = load_manifest(name)
        assert len(m.revision) == 40 and m.license and m.citation
        for spec in m.files.values():
            assert spec.url and m.revision in spec.url
            assert spec.sha256 or spec.git_blob_sha1


def test_git_blob_id_matches_git(tmp_path):
    f = tmp_path / "x.txt"
    f.write_bytes(b"hello\n")
    assert git_blob_sha1_of(f) == "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object


def test_fetch_from_local_dir_verifies(tmp_path, monkeypatch):
    data = install_fixture(tmp_path, monkeypatch)
    got = fetch("oncology-rct-250-counterfactual", "trials.csv")
    assert (
        got.origin == "local"
        and got.path == data / "oncology-rct-250-counterfactual" / "trials.csv"
    )
    assert got.provenance()["sha256"] == sha256_of(FIXTURE_CSV)


def test_checksum_mismatch_names_the_file(tmp_path, monkeypatch):
    data = install_fixture(tmp_path, monkeypatch)
    path = data / "oncology-rct-250-counterfactual" / "trials.csv"
    path.write_text(path.read_text().replace("Fixture trial 1", "Fixture trial X"))
    with pytest.raises(DatasetError, match=r"checksum mismatch for .*trials\.csv: sha256"):
        fetch("oncology-rct-250-counterfactual", "trials.csv")


def test_missing_file_in_data_dir(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    with pytest.raises(
        DatasetError, match=r"missing file: .*'trials.csv' is not in the data directory"
    ):
        fetch("oncology-rct-250-counterfactual", "trials.csv", data_dir=tmp_path / "elsewhere")


def test_download_failure_is_clear_and_leaves_no_partial_file(tmp_path, monkeypatch):
    import med_evals.data.datasets as data_mod

    def refuse(url, dest, timeout=60.0):
        raise OSError("network unreachable")

    monkeypatch.setattr(data_mod, "_download", refuse)
    with pytest.raises(DatasetError, match="could not download .* MED_EVALS_DATA_DIR"):
        fetch("oncology-rct-250-counterfactual", "trials.csv")


def test_bad_cached_download_is_removed(tmp_path, monkeypatch):
    import med_evals.data.datasets as data_mod

    def corrupt(url, dest, timeout=60.0):
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("not the file")

    monkeypatch.setattr(data_mod, "_download", corrupt)
    with pytest.raises(DatasetError, match="checksum mismatch"):
        fetch("oncology-rct-250-counterfactual", "trials.csv")
    cached = data_mod.cache_dir() / "oncology-rct-250-counterfactual"
    assert not any(p.is_file() for p in cached.rglob("*"))


def _write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_missing_column_names_file_and_column(tmp_path):
    p = _write(tmp_path, "a,b\n1,2\n")
    with pytest.raises(DatasetError, match=r"t\.csv: missing column\(s\) 'c'"):
        read_csv_checked(p, ["a", "c"])


def test_unknown_label_names_row_and_column(tmp_path):
    p = _write(tmp_path, "id,label\n1,POSITIVE\n2,NEGATIVE\n3,Positive\n")
    with pytest.raises(
        DatasetError, match=r"t\.csv: row 3, column 'label': unknown label 'Positive'"
    ):
        read_csv_checked(p, ["label"], labels={"label": ["POSITIVE", "NEGATIVE"]})


def test_empty_value_names_row_and_column(tmp_path):
    p = _write(tmp_path, "id,q\n1,x\n2,\n")
    with pytest.raises(DatasetError, match=r"row 2, column 'q': empty value"):
        read_csv_checked(p, ["q"], non_empty=["q"])


def test_malformed_and_undecodable_files(tmp_path):
    p = _write(tmp_path, 'a,b\n1,"unterminated\n')
    with pytest.raises(DatasetError, match="malformed CSV"):
        read_csv_checked(p, ["a"])
    q = tmp_path / "latin1.csv"
    q.write_bytes("a\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(DatasetError, match="not UTF-8"):
        read_csv_checked(q, ["a"])


def test_alias(tmp_path):
    p = _write(tmp_path, "verdicts\nSUPPORTED\n")
    df = read_csv_checked(p, ["verdict"], aliases={"verdict": ["verdicts"]})
    assert df["verdict"].tolist() == ["SUPPORTED"]


def test_trials_target_must_be_inverse(tmp_path):
    import pandas as pd

    df = pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)
    df.loc[4, "target_label"] = df.loc[4, "Annotation_accept"]  # NEGATIVE, not inverted
    p = tmp_path / "t.csv"
    df.to_csv(p, index=False)
    with pytest.raises(
        DatasetError, match=r"row 5, column 'target_label': 'NEGATIVE' is not the inverse"
    ):
        read_trials(p)


def test_trials_bad_date(tmp_path):
    p = _write(tmp_path, FIXTURE_CSV.read_text().replace("7/4/12", "July 2012"))
    with pytest.raises(DatasetError, match=r"row 2, column 'date': unrecognised date 'July 2012'"):
        read_trials(p)


def test_unbalanced_quote_in_a_trials_csv_names_its_line(tmp_path):
    """A quote opened by mistake at the start of trial 2's date field (line 3) pairs with the
    next quote in the file: the data rows shift, and what was reported was a wrong column."""
    lines = FIXTURE_CSV.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace(",7/4/12,", ',"7/4/12,', 1)
    p = tmp_path / "trials.csv"
    p.write_text("".join(lines))
    with pytest.raises(DatasetError) as err:
        read_trials(p)
    message = str(err.value)
    assert message.startswith(f"{p}: malformed CSV: line 3: the quoted field that opens there")
    assert "an unbalanced quote on line 3" in message and "column" not in message


def test_a_quote_that_swallows_the_rest_of_the_file(tmp_path):
    p = _write(tmp_path, 'a,date,c\n1,2020,x\n2,"2021,y\n3,2022,z\n4,2023,w\n')
    with pytest.raises(
        DatasetError,
        match=r"malformed CSV: line 3: a quote opens a field there and is never closed, so the "
        r"field swallows the rest of the file \(lines 3-5\)",
    ):
        read_csv_checked(p, ["a"])


def test_a_record_with_too_few_or_too_many_fields(tmp_path):
    short = _write(tmp_path, "a,b,c\n1,2,3\n4,5\n")
    with pytest.raises(DatasetError, match=r"the record on line 3 has 2 fields, the header has 3"):
        read_csv_checked(short, ["a"], non_empty=["c"])
    # a stray quote closed by a later one turns three records into one short record
    merged = _write(tmp_path, 'a,b,c\n1,"2,3\n4,5,6\n7,8"\n')
    with pytest.raises(
        DatasetError,
        match=r"the record on line 2 has 2 fields, the header has 3; a quoted field opens on "
        r"line 2 and runs to line 4: an unbalanced quote on line 2\?",
    ):
        read_csv_checked(merged, ["a"])


def test_quoted_fields_over_several_lines_are_legitimate(tmp_path, shared_datasets):
    p = _write(tmp_path, 'a,b\n1,"first line\nsecond, with a comma\nthird ""quoted"""\n2,x\n')
    df = read_csv_checked(p, ["a", "b"], non_empty=["b"])
    assert df["b"].tolist() == ['first line\nsecond, with a comma\nthird "quoted"', "x"]
    # HealthFC's evidence sentences span lines; every shared copy reads as before
    for path, rows in [
        ("healthfc/Datensatz.csv", 750),
        ("oncology-rct-250-counterfactual/trials.csv", 250),
        ("oncology-rct-250/trials_with_predictions.csv", 250),
        ("medevidence/manual_284-data_spreadsheet.csv", 284),
    ]:
        assert len(read_csv_checked(shared_datasets / path, [])) == rows


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ("{yes: 4, no: 3}", "expected_labels key True is a YAML bool, not a label: quote it"),
        ("{'yes': 4, off: 3}", "expected_labels key False is a YAML bool, not a label"),
        ("{'yes': 4, 'no': -1}", "expected_labels 'no': -1 is not a count"),
        ("{'yes': 4, 'no': true}", "expected_labels 'no': True is not a count"),
        ("[yes, no]", "expected_labels must be label: count pairs"),
    ],
)
def test_a_manifests_labels_are_text_and_counts(tmp_path, labels, says):
    """YAML 1.1 reads an unquoted ``yes: 4`` as ``True: 4``: a manifest's published label counts
    with a boolean key are refused, saying to quote it (issue 37)."""
    (tmp_path / "toy.yaml").write_text(
        "name: toy\nrevision: abc\nsource: https://example.org\nlicense: CC0\n"
        "files: {data.csv: {sha256: '00'}}\n" f"expected_labels: {labels}\n")
    with pytest.raises(DatasetError) as got:
        load_manifest("toy", tmp_path)
    assert says in str(got.value) and str(tmp_path / "toy.yaml") in str(got.value)
    (tmp_path / "toy.yaml").write_text(
        "name: toy\nrevision: abc\nsource: https://example.org\nlicense: CC0\n"
        "files: {data.csv: {sha256: '00'}}\nexpected_labels: {'yes': 4, 'no': 3}\n")
    assert load_manifest("toy", tmp_path).extra["expected_labels"] == {"yes": 4, "no": 3}
