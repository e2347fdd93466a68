"""The command line's own surface: the one parser (every command's arguments, each calling the
function of the module named after it), grouped ``--help`` and ``--version``."""

from __future__ import annotations

from pathlib import Path

import pytest

from med_evals import __version__
from med_evals.commands.cli import COMMAND_GROUPS, main
from med_evals.tasks import STUDIES


def test_help_lists_every_command_once_in_its_group(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    titles = [f"{title}:" for title in COMMAND_GROUPS]
    assert [line for line in out.splitlines() if line in titles] == titles  # in this order
    listed = [line.split()[0] for line in out.split(titles[0], 1)[1].splitlines()
              if line.startswith("  ") and not line.startswith("   ")]
    every = [c for cs in COMMAND_GROUPS.values() for c in cs]
    assert sorted(listed) == sorted(every) and len(listed) == len(set(listed))
    assert "other:" not in out  # every command has a group


def test_version_names_the_package_inspect_and_each_studys_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"med-evals {__version__} (inspect-ai 0.3.")
    for name, study in STUDIES.items():
        assert f"{name} {study.version}" in out


SRC = Path(__file__).resolve().parents[1] / "src" / "med_evals"


def test_no_private_argparse_attribute():
    """The help groups come from the command table, not argparse's private ``_choices_actions``
    (issue 42): nothing of argparse whose name starts with ``_`` is used."""
    import re

    used = []
    for path in sorted((SRC / "commands").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"argparse\._|\._choices_actions|\._actions\b|\._subparsers|"
                         r"\._option_string_actions|\._positionals|\._optionals", line):
                used.append(f"{path.name}:{n}: {line.strip()}")
    assert not used, used


#: a command line of each command, and the arguments its function is called with
CALLS = [
    (["compare", "--model", "none", "--recorded", "gpt4o_temp100", "-M", "a=1"], (), {
        "model": "none", "model_args": ["a=1"], "recorded": "gpt4o_temp100",
        "condition": "title_abstract", "subset": "compare", "max_tokens": None, "timeout": 120,
        "max_retries": 2, "log_dir": None, "out": None, "data_dir": None, "reference": None,
        "prices": None}),
    (["run", "healthfc", "--processes", "2", "--model", "x/y", "--log-dir", "l"],
     ("healthfc", ["--model", "x/y"]), {"processes": 2, "log_dir": "l"}),
    (["merge-shards", "l/x.shards", "--count", "4"], ("l/x.shards", 4), {}),
    (["report", "a", "b", "--out", "r", "--allow-mixed"], (["a", "b"], "r"),
     {"allow_mixed": True, "reference": None, "prices": None}),
    (["flip-rate", "a", "--pair", "x:y"], (["a"],), {"pairs": ["x:y"], "out": None}),
    (["studies", "healthfc", "--json"], (["healthfc"],), {"as_json": True,
                                                         "fingerprints": False}),
    (["diff", "a", "b", "--limit", "3"], ("a", "b"), {"condition": None, "limit": 3,
                                                      "n_boot": 200, "as_json": False}),
    (["baseline", "a", "-o", "b.json"], (["a"], "b.json"), {"prices": None}),
    (["regress", "a", "--baseline", "b.json", "--n-boot", "200", "--allow-absent"],
     (["a"], "b.json"), {"allow_untested": False, "allow_absent": True, "n_boot": 200,
                         "all_metrics": False, "prices": None, "margin": None}),
    (["power", "--baseline", "b.json", "--detect", "0.05"], ("b.json", 0.05), {"n_boot": 200,
                                                                    "margin": None}),
    (["subset", "make", "healthfc", "nightly", "--size", "10"], ("healthfc", "nightly", 10),
     {"out": None, "seed": 0, "version": 1, "data_dir": None}),
    (["fetch", "cochrane", "--from", "2024-01-01", "--to", "2024-02-01", "--out", "o",
      "--no-progress"], ("2024-01-01", "2024-02-01", "o"),
     {"base_url": None, "api_key": None, "email": None, "batch_size": 200, "progress": False,
      "timeout": None, "retries": None}),
    (["build", "medreqal", "--source", "s", "--model", "m/x", "--out", "o.csv", "-M", "k=v"],
     (["s"], "m/x", "o.csv"), {"published_after": None, "log_dir": None,
                               "validation_sheet": 0, "seed": 0, "limit": None,
                               "model_arg": ["k=v"]}),
    (["score-recorded", "t.csv", "--with-trials"], ("t.csv",),
     {"with_trials": True, "data_dir": None, "out": None}),
    (["recorded-to-replay", "t.csv", "--out", "r", "--by-row"], ("t.csv", "r"),
     {"data_dir": None, "by_row": True}),
    (["export-counterfactuals", "a", "--out", "o.csv"], (["a"], "o.csv"), {}),
]


@pytest.mark.parametrize("argv, args, kwargs", CALLS, ids=[" ".join(c[0][:2]) for c in CALLS])
def test_each_command_calls_the_function_of_the_module_named_after_it(argv, args, kwargs,
                                                                       monkeypatch):
    """``med-evals X Y`` calls ``med_evals.commands.x.x_y_command`` with its arguments, and
    returns what it returns (a command's module is named after the command)."""
    import importlib

    words = [w.replace("-", "_") for w in argv[:2 if argv[0] in ("subset", "fetch", "build")
                                               else 1]]
    module = importlib.import_module(f"med_evals.commands.{words[0]}")
    name = f"{'_'.join(words)}_command"
    seen = []
    monkeypatch.setattr(module, name, lambda *a, **k: seen.append((a, k)) or 7)
    assert main(argv) == 7
    assert seen == [(args, kwargs)]


def test_every_command_is_in_a_call_above():
    from med_evals.commands.cli import COMMANDS

    names = {" ".join([c.name, s.name]) if s else c.name
             for c in COMMANDS for s in (c.subcommands or (None,))}
    assert names == {" ".join(a[:2]) if a[0] in ("subset", "fetch", "build") else a[0]
                     for a, _, _ in CALLS}


def test_an_error_names_the_command_and_its_sub_command(capsys):
    assert main(["subset", "make", "healthfc", "x", "--size", "0", "--out", "/nonexistent/x"]) \
        == 2
    assert capsys.readouterr().err.startswith("med-evals subset make: error: ")


def test_studies_marks_a_number_of_ours_once(capsys):
    """issue 44 item 8: "ours: ours:" where the spec's reason already says whose it is."""
    from med_evals.commands.studies import whose

    assert main(["studies", "medevidence"]) == 0
    out = capsys.readouterr().out
    assert "ours: ours" not in out
    assert "(ours: the authors' code computes accuracy, not macro-F1)" in out
    assert whose({"source": "paper"}) == "paper"
    assert whose({"source": "ours"}) == "ours"
    assert whose({"source": "ours", "why": "ours: a choice"}) == "ours: a choice"
    assert whose({"source": "ours", "why": "a choice"}) == "ours: a choice"
