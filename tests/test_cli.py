"""The command line's own surface: grouped ``--help`` and ``--version``."""

from __future__ import annotations

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
