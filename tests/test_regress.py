import json
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import get_model

from med_evals.cli import main as cli_main
from med_evals.regress import make_baseline, read_baseline, regress
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import replying
from .oncology_support import big_fixture_csv, install_fixture


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 120-trial corpus (the fixture's 6 trials repeated) and runs of four 'models'."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("regress")
    install_fixture(tmp, mp, csv=big_fixture_csv(tmp))

    def reader(wrong_every: int):
        count = {"n": 0}

        def reply(text):
            count["n"] += 1
            right = "NEGATIVE" if "did not meet" in text else "POSITIVE"
            if wrong_every and count["n"] % wrong_every == 0:
                return "NEGATIVE" if right == "POSITIVE" else "POSITIVE"
            return right

        return reply

    dirs = {}
    for name, wrong_every, cond in [
        ("baseline", 10, "title_abstract"),
        ("same", 10, "title_abstract"),
        ("slightly", 9, "title_abstract"),
        ("worse", 3, "title_abstract"),
        ("other_setup", 10, "abstract_only"),
    ]:
        d = tmp / name
        model = get_model("mockllm/reader", custom_outputs=replying(reader(wrong_every)))
        inspect_eval(
            oncology_rct(condition=cond),
            model=model,
            display="none",
            log_dir=str(d),
            max_connections=1,
        )
        dirs[name] = d
    mp.undo()
    return dirs


def test_same_and_noise_level_changes_pass(runs, tmp_path):
    baseline = make_baseline([runs["baseline"]])
    assert len(baseline["runs"][0]["samples"]) == 120
    rows, notes = regress(baseline, [runs["same"]], n_boot=300)
    assert notes == [] and {r.verdict for r in rows} <= {"ok", "info"}
    acc = next(r for r in rows if r.metric == "accuracy_valid")
    assert acc.old == acc.new == pytest.approx(108 / 120)
    rows, _ = regress(baseline, [runs["slightly"]], n_boot=300)
    assert not [r for r in rows if r.verdict == "REGRESSION"]


def test_a_real_drop_is_a_regression(runs):
    rows, _ = regress(make_baseline([runs["baseline"]]), [runs["worse"]], n_boot=300)
    verdicts = {r.metric: r.verdict for r in rows}
    # the oncology headline: the study's metrics over valid predictions, and the valid rate
    assert set(verdicts) == {"valid_rate", "accuracy_valid", "macro_f1_valid"}
    assert verdicts["accuracy_valid"] == "REGRESSION"
    assert verdicts["macro_f1_valid"] == "REGRESSION"
    assert verdicts["valid_rate"] == "ok"
    acc = next(r for r in rows if r.metric == "accuracy_valid")
    assert "paired bootstrap n=120" in acc.test


def test_changed_setup_is_reported_not_a_regression(runs):
    rows, _ = regress(make_baseline([runs["baseline"]]), [runs["other_setup"]], n_boot=100)
    assert [r.verdict for r in rows] == ["setup changed"]
    assert "task_args" in rows[0].detail


def test_cli_gate_exit_codes(runs, tmp_path, capsys):
    path = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(runs["baseline"]), "-o", str(path)]) == 0
    assert read_baseline(path)["format"] == 2
    assert json.loads(path.read_text())["runs"][0]["task"] == "oncology_rct"
    assert cli_main(["regress", "--baseline", str(path), str(runs["same"])]) == 0
    assert cli_main(["regress", "--baseline", str(path), str(runs["worse"])]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "old" in out and "diff" in out
    assert "gated for oncology_rct: valid_rate, accuracy_valid, macro_f1_valid" in out


def test_cli_refuses_a_run_that_did_not_complete(runs, tmp_path, capsys):
    from inspect_ai.log import read_eval_log, write_eval_log

    from med_evals.logs import expand_log_paths

    path = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(runs["baseline"]), "-o", str(path)]) == 0
    log = read_eval_log(expand_log_paths([runs["same"]])[0])
    log.status = "error"
    failed = tmp_path / "failed.eval"
    write_eval_log(log, str(failed))
    assert cli_main(["regress", "--baseline", str(path), str(failed)]) == 3
    err = capsys.readouterr().err
    assert "run did not complete (status error)" in err


def test_a_log_directory_expands_to_local_paths_that_exist(runs):
    from med_evals.logs import expand_log_paths

    [path] = expand_log_paths([runs["same"]])
    assert not path.startswith("file:") and Path(path).is_file()
