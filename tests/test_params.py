"""Task parameters are checked as Inspect passes them (``-T`` values are read as YAML)."""

import inspect as pyinspect
from datetime import date, datetime

import pandas as pd
import pytest
import yaml

from med_evals.data.datasets import DatasetError
from med_evals.study.params import (
    Choice,
    Directory,
    File,
    Flag,
    Integer,
    IsoDate,
    Number,
    Pairs,
    ParamError,
    Paths,
    Shard,
    ShardOf,
    Text,
    check_params,
)
from med_evals.tasks.counterfactual import counterfactual_build, counterfactual_judges
from med_evals.tasks.healthfc import healthfc
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import CONDITIONS, GROUPS, oncology_rct

from .oncology_support import FIXTURE_CSV

TASKS = [oncology_rct, medreqal, healthfc, medevidence, counterfactual_build, counterfactual_judges]


def one(check, value):
    return check_params("t", {"x": value, "unknown": {}}, x=check).x


def bad(check, value) -> str:
    with pytest.raises(ParamError) as err:
        one(check, value)
    return str(err.value)


def test_inspect_reads_dates_numbers_and_lists_as_yaml():
    # what `-T name=value` hands a task (inspect_ai._util.config.parse_cli_args: yaml.safe_load)
    assert yaml.safe_load("2021-01-01") == date(2021, 1, 1)
    assert yaml.safe_load("abc") == "abc" and yaml.safe_load("3") == 3
    assert yaml.safe_load("") is None and yaml.safe_load("true") is True


def test_dates_as_parsed_or_typed():
    for value in (date(2021, 1, 1), datetime(2021, 1, 1, 12), "2021-01-01", " 2021-01-01 "):
        assert one(IsoDate(), value) == "2021-01-01"
    assert one(IsoDate(), None) is None
    for value in (2021, "01/01/2021", "2021-13-01", [date(2021, 1, 1)]):
        assert "must be a date as YYYY-MM-DD" in bad(IsoDate(), value)


def test_booleans_only_true_or_false():
    assert [one(Flag(), v) for v in (True, False, "true", "FALSE")] == [True, False, True, False]
    for value in ("maybe", "yes", 1, 0, None):
        assert "true or false" in bad(Flag(), value)
    assert bad(Flag(), "maybe") == "t: -T x=maybe: must be true or false"


def test_integers_only_integers():
    assert [one(Integer(), v) for v in (3, "3", "-2")] == [3, 3, -2]
    for value in ("abc", 1.5, True, "1e3", None):
        assert "integer" in bad(Integer(), value)
    assert "at least 1" in bad(Integer(minimum=1), 0)
    assert one(Integer(optional=True), None) is None
    assert one(Number(minimum=0, maximum=1), "0.5") == 0.5
    assert "between 0 and 1" in bad(Number(minimum=0, maximum=1), 2)
    assert "must be a number" in bad(Number(), True)


def test_enumerations_list_their_values():
    assert one(Choice(values=("250", "284")), 250) == "250"
    msg = bad(Choice(values=("five", "three")), "four")
    assert msg == "t: -T x=four: unknown x 'four'; choose from five, three"
    many = Choice(values=CONDITIONS, groups=GROUPS, many=True)
    assert one(many, "study, doi_only") == ["study", "doi_only"]
    assert one(many, ["title_only", "doi_only"]) == ["title_only", "doi_only"]
    assert "is empty; choose from title_abstract" in bad(many, None)
    assert "(or a group: study, appendix" in bad(many, "nosuch")


def test_flip_pairs_name_known_conditions_in_the_run():
    pairs = Pairs(values=CONDITIONS, groups=GROUPS, within="c")
    c = Choice(values=CONDITIONS, groups=GROUPS, many=True)
    def values(p, c):
        return {"p": p, "c": c, "unknown": {}}

    got = check_params("t", values("title_abstract:doi_only", "study"), p=pairs, c=c)
    assert got.p == ["title_abstract:doi_only"]
    with pytest.raises(ParamError, match="names an unknown condition 'nosuch'; choose from"):
        check_params("t", values("title_abstract:nosuch", "all"), p=pairs, c=c)
    with pytest.raises(ParamError, match="'title_abstract' is not a pair a:b"):
        check_params("t", values("title_abstract", "all"), p=pairs, c=c)
    with pytest.raises(ParamError, match="compares doi_only, not in this run; add doi_only"):
        check_params("t", values("title_abstract:doi_only", "title_abstract"), p=pairs, c=c)


def test_a_shard_is_i_of_n():
    # -T shard=2/8 arrives as the string "2/8" (YAML), -T shard=3 as the integer 3
    assert yaml.safe_load("2/8") == "2/8"
    assert one(ShardOf(), "2/8") == Shard(2, 8) and str(Shard(2, 8)) == "2/8"
    assert one(ShardOf(), " 1 / 1 ") == Shard(1, 1) and one(ShardOf(), None) is None
    assert bad(ShardOf(), "3/2") == ("t: -T x=3/2: there is no shard 3 of 2; i counts from 1 to "
                                     "N (1/2 to 2/2)")
    assert bad(ShardOf(), "0/4") == ("t: -T x=0/4: there is no shard 0 of 4; i counts from 1 to "
                                     "N (1/4 to 4/4)")
    assert bad(ShardOf(), "1/0") == "t: -T x=1/0: N must be at least 1 (i/N: shard i of N)"
    for value in ("x", 3, "2/8/1", "a/b", "2-8"):
        assert bad(ShardOf(), value) == (f"t: -T x={value}: must be i/N, shard i of N counted "
                                         "from 1, e.g. 2/8")


@pytest.mark.parametrize("task_fn", [t for t in TASKS if t is not counterfactual_judges],
                         ids=lambda t: t.__name__)
def test_every_evaluation_task_checks_its_shard(task_fn, tmp_path, monkeypatch):
    """One line for a shard that does not exist, before any data is read (the data directory
    is empty here)."""
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(tmp_path))
    name = task_fn.__name__
    for value, problem in (
        ("3/2", "there is no shard 3 of 2; i counts from 1 to N (1/2 to 2/2)"),
        ("0/4", "there is no shard 0 of 4; i counts from 1 to N (1/4 to 4/4)"),
        ("x", "must be i/N, shard i of N counted from 1, e.g. 2/8"),
    ):
        with pytest.raises(ParamError) as err:
            task_fn(shard=value)
        assert str(err.value) == f"{name}: -T shard={value}: {problem}"


def test_paths(tmp_path):
    assert one(Directory(), str(tmp_path)) == str(tmp_path)
    assert one(File(), str(FIXTURE_CSV)) == str(FIXTURE_CSV)
    assert bad(File(), str(tmp_path)).endswith("is a directory, not a file")
    assert bad(File(), str(tmp_path / "no.csv")).endswith("does not exist")
    assert bad(Directory(), str(FIXTURE_CSV)).endswith("is a file, not a directory")
    assert bad(Directory(), str(tmp_path / "nowhere")).endswith("does not exist")
    assert one(Paths(), f"{tmp_path},{FIXTURE_CSV}") == [str(tmp_path), str(FIXTURE_CSV)]
    assert "does not exist" in bad(Paths(), [str(tmp_path / "gone.eval")])
    assert one(Text(), 7) == "7" and one(Text(), "") is None
    assert "single value" in bad(Text(), ["a", "b"])


def test_every_parameter_needs_exactly_one_check():
    with pytest.raises(TypeError, match=r"no check for \['y'\]"):
        check_params("t", {"x": 1, "y": 2, "unknown": {}}, x=Integer())
    with pytest.raises(TypeError, match=r"a check but no parameter for \['z'\]"):
        check_params("t", {"x": 1, "unknown": {}}, x=Integer(), z=Integer())
    with pytest.raises(TypeError, match=r"must end with \*\*unknown"):
        check_params("t", {"x": 1}, x=Integer())


def test_an_unknown_parameter_names_the_closest_one():
    msg = "t: -T conditon=doi_only: unknown parameter; did you mean -T condition?"
    with pytest.raises(ParamError, match=msg.replace("?", r"\?")):
        check_params("t", {"condition": "x", "unknown": {"conditon": "doi_only"}},
                     condition=Text())  # fmt: skip
    with pytest.raises(ParamError, match="-T zzz=1: unknown parameter; the parameters are a, b"):
        check_params("t", {"a": 1, "b": 2, "unknown": {"zzz": 1}}, a=Integer(), b=Integer())


#: a misspelling of one parameter of each task, and the parameter it should name
MISSPELT = {
    "oncology_rct": ("conditon", "condition"),
    "medreqal": ("promt", "prompt"),
    "healthfc": ("evidense", "evidence"),
    "medevidence": ("label", "labels"),
    "counterfactual_build": ("max_outcome_changes", "max_outcome_change"),
    "counterfactual_judges": ("judges", "judge"),
}


@pytest.mark.parametrize("task_fn", TASKS, ids=lambda t: t.__name__)
def test_every_task_refuses_an_unknown_parameter(task_fn, tmp_path, monkeypatch):
    """Inspect drops a parameter the task's signature does not name, with a warning, and runs
    the defaults; every task takes **unknown, so the misspelling stops it before any data is
    read (the data directory is empty here)."""
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(tmp_path))
    wrong, right = MISSPELT[task_fn.__name__]
    params = pyinspect.signature(task_fn).parameters
    assert params["unknown"].kind is pyinspect.Parameter.VAR_KEYWORD and right in params
    with pytest.raises(ParamError) as err:
        task_fn(**{wrong: "x"})
    assert str(err.value) == (
        f"{task_fn.__name__}: -T {wrong}=x: unknown parameter; did you mean -T {right}?"
    )


def test_the_log_records_the_same_task_args_as_before(tmp_path):
    """**unknown adds nothing to the task_args Inspect records (the report and the gate read
    them): every named parameter with its value, and the passed ones as passed."""
    from .support.evals import inspect_eval

    (log,) = inspect_eval(
        "med_evals/oncology_rct", task_args={"trials_file": str(FIXTURE_CSV), "seed": 3},
        model="mockllm/model", limit=1, log_dir=str(tmp_path), display="none",
    )  # fmt: skip
    named = [p for p in pyinspect.signature(oncology_rct).parameters if p != "unknown"]
    assert list(log.eval.task_args) == named
    assert log.eval.task_args["seed"] == 3 and log.eval.task_args["condition"] == "title_abstract"
    assert log.eval.task_args_passed == {"trials_file": str(FIXTURE_CSV), "seed": 3}


@pytest.mark.parametrize("task_fn", TASKS, ids=lambda t: t.__name__)
def test_every_task_checks_every_parameter(task_fn, tmp_path, monkeypatch):
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(tmp_path))  # empty: nothing is downloaded
    with pytest.raises(DatasetError):  # the defaults pass the checks, then the data is missing
        task_fn()
    for name, param in pyinspect.signature(task_fn).parameters.items():
        if param.kind is pyinspect.Parameter.VAR_KEYWORD:
            continue
        # a mapping is no valid value of any parameter
        with pytest.raises(ParamError, match=f"-T {name}="):
            task_fn(**{name: {"a": 1}})


def test_documented_values_as_typed(tmp_path):
    csv = str(FIXTURE_CSV)
    with pytest.raises(ParamError, match="-T condition=: is empty; choose from"):
        oncology_rct(condition=None, trials_file=csv)
    with pytest.raises(ParamError, match="-T seed=abc: must be an integer"):
        oncology_rct(seed="abc", trials_file=csv)
    with pytest.raises(ParamError, match="-T evidence=maybe: must be true or false"):
        healthfc(evidence="maybe")
    for task_fn in (oncology_rct, medreqal, healthfc, medevidence):
        with pytest.raises(ParamError, match="-T metrics=all: unknown metrics 'all'; choose "
                           "from headline, full"):
            task_fn(metrics="all")
    with pytest.raises(ParamError, match="unknown condition 'nosuch'"):
        oncology_rct(flip_pairs="title_abstract:nosuch", condition="all", trials_file=csv)
    with pytest.raises(ParamError, match="-T trials_file=.*: is a directory, not a file"):
        oncology_rct(trials_file=str(tmp_path))
    header_only = tmp_path / "trials.csv"
    header_only.write_text(FIXTURE_CSV.read_text().splitlines()[0] + "\n")
    with pytest.raises(DatasetError, match=r"trials\.csv: no data rows \(the file holds a header"):
        oncology_rct(trials_file=str(header_only))


def published_after_expected(csv, cutoff: date) -> set[int]:
    """Trials whose date (month/day/two-digit year, the dataset's format) is after ``cutoff``."""
    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    dates = pd.to_datetime(df["date"], format="%m/%d/%y", errors="coerce").fillna(
        pd.to_datetime(df["date"], format="%Y-%m-%d", errors="coerce")
    )
    assert dates.notna().all()
    return {i for i, d in zip(df.index, dates, strict=True) if d.date() > cutoff}


@pytest.mark.parametrize("value", [date(2021, 1, 1), "2021-01-01"])
def test_published_after_keeps_exactly_the_later_trials(value):
    task = oncology_rct(condition="title_only", published_after=value, trials_file=str(FIXTURE_CSV))
    kept = {s.metadata["trial"] for s in task.dataset}
    assert kept == published_after_expected(FIXTURE_CSV, date(2021, 1, 1)) and kept
    assert task.metadata["published_after"] == "2021-01-01"


def test_published_after_on_the_study_data(shared_datasets):
    csv = shared_datasets / "oncology-rct-250-counterfactual" / "trials.csv"
    task = oncology_rct(
        condition="doi_only", published_after=date(2021, 1, 1), data_dir=str(shared_datasets)
    )
    kept = {s.metadata["trial"] for s in task.dataset}
    expected = published_after_expected(csv, date(2021, 1, 1))
    assert kept == expected and 0 < len(kept) < 250
    assert task.metadata["n_trials"] == len(expected)
