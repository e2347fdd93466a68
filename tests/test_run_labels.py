"""Run labels: the model, and the task and model arguments that may change replies."""

from __future__ import annotations

from med_evals.logs.labels import DISPLAY_ONLY_MODEL_ARGS, group_runs, run_labels
from med_evals.logs.runs import Run


def _run(path: str, model_args: dict | None = None, **task_args) -> Run:  # noqa: ANN003
    return Run(
        path=path,
        task="oncology_rct",
        model="embedded/smollm2-135m",
        values={f"{path}-1": {"condition": "title_abstract", "prediction": "POSITIVE",
                              "target": "POSITIVE", "valid": True}},
        provenance={"task_args": {"condition": "title_abstract", **task_args},
                    "model_args": model_args or {}, "created": path},
    )


def test_display_only_model_args_are_left_out_of_labels():
    assert "progress" in DISPLAY_ONLY_MODEL_ARGS
    # compare.py passes -M progress=30.0 to the embedded model; a run by hand has none
    runs = [_run("a", {"progress": 30.0}), _run("b"), _run("c", {"progress": 0})]
    labels = run_labels(runs)
    assert set(labels.values()) == {"embedded/smollm2-135m"}
    groups = group_runs(runs, [])["oncology_rct"]
    assert [g.label for g in groups] == ["embedded/smollm2-135m"] and len(groups[0].runs) == 3


def test_model_args_that_may_change_replies_stay_in_labels():
    runs = [
        _run("a", {"progress": 30.0, "choices": "POSITIVE,NEGATIVE"}),
        _run("b", {"progress": 30.0}),
        _run("c", {"dtype": "bfloat16"}),
    ]
    labels = [run_labels(runs)[id(r)] for r in runs]
    assert labels == [
        "embedded/smollm2-135m, -M choices=POSITIVE,NEGATIVE, -M dtype=—",
        "embedded/smollm2-135m, -M choices=—, -M dtype=—",
        "embedded/smollm2-135m, -M choices=—, -M dtype=bfloat16",
    ]
    assert not any("progress" in label for label in labels)
