from collections import Counter

import pandas as pd
import pytest

from med_evals.data.datasets import DatasetError
from med_evals.data.subsets import draw_stratified, key_hash, load_subset
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.oncology_rct import oncology_rct


def test_draw_keeps_strata_shares_and_is_seeded():
    strata = {str(i): ("A" if i < 60 else "B" if i < 90 else "C") for i in range(100)}
    ids = draw_stratified(strata, 20, seed=3)
    assert len(ids) == 20 == len(set(ids))
    assert Counter(strata[i] for i in ids) == {"A": 12, "B": 6, "C": 2}
    assert draw_stratified(strata, 20, seed=3) == ids and draw_stratified(strata, 20, seed=4) != ids
    assert draw_stratified(strata, 500) == sorted(strata, key=int)


def test_stored_subsets_are_stratified_and_sized():
    smoke, ci = load_subset("oncology_rct", "smoke"), load_subset("oncology_rct", "ci")
    assert (len(smoke.ids), len(ci.ids)) == (20, 100)
    assert smoke.revision == "1ddaa9fc5a2b6f7da64714859bf51a7b9a70dc77"
    assert len(load_subset("medevidence", "smoke").ids) == 20
    assert len(load_subset("oncology_rct", "compare").ids) == 12  # the main job's trials
    with pytest.raises(DatasetError, match="no subset 'nightly' for task oncology_rct"):
        load_subset("oncology_rct", "nightly")


def test_subset_selects_the_stored_trials(shared_datasets):
    task = oncology_rct(
        condition="title_only,doi_only", subset="smoke", data_dir=str(shared_datasets)
    )
    trials = {s.metadata["trial"] for s in task.dataset}
    assert {str(t) for t in trials} == set(load_subset("oncology_rct", "smoke").ids)
    assert len(task.dataset) == 40
    labels = Counter(s.target for s in task.dataset if s.metadata["condition"] == "title_only")
    assert labels == {"POSITIVE": 12, "NEGATIVE": 8}
    me = medevidence(subset="ci", data_dir=str(shared_datasets))
    assert len(me.dataset) == 100


@pytest.mark.parametrize("name", ["smoke", "ci", "compare"])
def test_stored_oncology_subsets_are_the_draws_they_say(shared_datasets, name):
    """Each stored subset is what ``med-evals subset make`` draws with its seed and size."""
    import yaml

    from med_evals.data.subsets import subset_path
    from med_evals.tasks.oncology_rct import subset_source

    stored = yaml.safe_load(subset_path("oncology_rct", name).read_text(encoding="utf-8"))
    revision, strata, _ = subset_source(str(shared_datasets))
    assert stored["revision"] == revision
    assert draw_stratified(strata, stored["size"], seed=stored["seed"]) == [
        str(i) for i in stored["ids"]
    ]


def test_subset_detects_drifted_data(shared_datasets, tmp_path):
    df = pd.read_csv(
        shared_datasets / "oncology-rct-250-counterfactual" / "trials.csv",
        dtype=str,
        keep_default_na=False,
    )
    first = int(load_subset("oncology_rct", "smoke").ids[0])
    df.loc[first, "doi"] = "10.9999/changed"
    path = tmp_path / "trials.csv"
    df.to_csv(path, index=False)
    assert key_hash("10.9999/changed") != load_subset("oncology_rct", "smoke").hashes[str(first)]
    with pytest.raises(DatasetError, match=f"item {first} no longer holds the data"):
        oncology_rct(trials_file=str(path), subset="smoke")


def test_verdict_task_subsets(shared_datasets):
    from med_evals.tasks.healthfc import healthfc

    task = healthfc(subset="smoke", data_dir=str(shared_datasets), generation_scoring=False)
    assert len(task.dataset) == 20
    assert Counter(s.target for s in task.dataset) == {
        "NOT ENOUGH INFORMATION": 11,
        "SUPPORTED": 6,
        "REFUTED": 3,
    }
    # MedREQAL's file is not on this machine: its subsets are drawn where it is, and asking
    # for one that was never drawn says how
    with pytest.raises(DatasetError, match="med-evals subset make medreqal smoke"):
        load_subset("medreqal", "smoke")


@pytest.mark.slow
def test_counterfactual_tasks_take_the_oncology_subsets(shared_datasets, tmp_path):
    """The builder and the judges run on the same stored trials as oncology_rct."""
    from med_evals.tasks.counterfactual import counterfactual_build, counterfactual_judges

    smoke = set(load_subset("oncology_rct", "smoke").ids)
    from inspect_ai.model import get_model

    from .conftest import mock_output
    from .support.evals import inspect_eval

    grader = get_model(
        "mockllm/grader",
        custom_outputs=lambda *a: mock_output('{"rating": 4, "reason": "coherent"}'),
    )
    [build] = inspect_eval(  # the builder needs its grader bound, so it is built by eval
        counterfactual_build,
        task_args={"subset": "smoke", "data_dir": str(shared_datasets)},
        model="mockllm/model",
        model_roles={"grader": grader},
        display="none",
        log_dir=str(tmp_path / "logs"),
    )
    assert {str(s.metadata["trial"]) for s in build.samples} == smoke
    assert build.eval.metadata["input"]["subset"] == "smoke"
    [log] = inspect_eval(
        counterfactual_judges,
        task_args={"subset": "smoke", "data_dir": str(shared_datasets)},
        model="mockllm/model",
        model_roles={"grader": grader},
        display="none",
        log_dir=str(tmp_path / "logs"),
    )
    assert log.status == "success"
    assert {str(int(str(s.id).removeprefix("rate-"))) for s in log.samples} == smoke


def test_subset_make_writes_to_the_users_folder_and_the_task_reads_it(
    shared_datasets, tmp_path, monkeypatch, capsys
):
    """Before: ``subset make oncology_rct big --size 1000`` capped to 250 silently and wrote
    into the installed package (site-packages for a wheel user)."""
    from med_evals.commands.cli import main as cli_main
    from med_evals.data.subsets import stored_subset_dir

    mine = tmp_path / "mine"
    monkeypatch.setenv("MED_EVALS_SUBSET_DIR", str(mine))
    stored_before = sorted(p.name for p in stored_subset_dir().iterdir())
    data = ["--data-dir", str(shared_datasets)]
    assert cli_main(["subset", "make", "oncology_rct", "big", "--size", "1000", *data]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("med-evals subset make: error: --size 1000: the oncology_rct data "
                           "(revision 1ddaa9fc5a2b6f7da64714859bf51a7b9a70dc77) holds 250 "
                           "items; a subset is at most all of them")
    assert cli_main(["subset", "make", "oncology_rct", "smoke", "--size", "5", *data]) == 2
    assert "is a stored subset shipped with med_evals" in capsys.readouterr().err
    assert cli_main(["subset", "make", "oncology_rct", "nightly", "--size", "7", *data]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {mine / 'oncology_rct-nightly.yaml'}: 7 ")
    assert sorted(p.name for p in stored_subset_dir().iterdir()) == stored_before
    task = oncology_rct(subset="nightly", data_dir=str(shared_datasets))
    assert len(task.dataset) == 7
    assert "nightly" in load_subset("oncology_rct", "nightly").name
    # another folder: read from there with MED_EVALS_SUBSET_DIR
    other = tmp_path / "other"
    assert cli_main(["subset", "make", "oncology_rct", "weekly", "--size", "4", "--out",
                     str(other), *data]) == 0
    assert f"MED_EVALS_SUBSET_DIR={other}" in capsys.readouterr().out
    with pytest.raises(DatasetError, match="no subset 'weekly'"):
        load_subset("oncology_rct", "weekly")
    monkeypatch.setenv("MED_EVALS_SUBSET_DIR", str(other))
    assert len(load_subset("oncology_rct", "weekly").ids) == 4
