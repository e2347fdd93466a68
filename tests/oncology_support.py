"""The oncology fixture dataset, installed behind a manifest that pins its checksum."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from .conftest import FIXTURES, install_dataset

FIXTURE_CSV = FIXTURES / "oncology_trials_fixture.csv"


def install_fixture(tmp: Path, monkeypatch, csv: Path = FIXTURE_CSV) -> Path:
    """Lay ``csv`` out as the oncology dataset in a data dir with a matching manifest."""
    install_dataset(tmp, monkeypatch, "oncology-rct-250-counterfactual", {"trials.csv": csv})
    return tmp / "data"


def follower(text: str) -> str:
    """A reply that follows the abstract: NEGATIVE where it says the trial did not meet its
    endpoint, else POSITIVE (right on every fixture trial, counterfactuals included)."""
    return "NEGATIVE" if "did not meet" in text else "POSITIVE"


@contextmanager
def oncology_module(
    tmp_path_factory: pytest.TempPathFactory, name: str, copies: int | None = None
) -> Iterator[tuple[Path, pytest.MonkeyPatch]]:
    """A module fixture's folder ``name`` with the oncology fixture installed in it (``copies``:
    :func:`big_fixture_csv`'s larger corpus instead), and the monkeypatch that points the loader
    there (for more datasets); undone on leaving, a failed set-up included."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp(name)
    install_fixture(tmp / "onc", mp, FIXTURE_CSV if copies is None else
                    big_fixture_csv(tmp, copies))
    try:
        yield tmp, mp
    finally:
        mp.undo()


def big_fixture_csv(tmp: Path, copies: int = 20) -> Path:
    """A larger corpus in the same schema: the fixture's trials repeated, DOIs made unique."""
    base = pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)
    big = pd.concat([base] * copies, ignore_index=True)
    big["doi"] = [f"{d}.{i}" for i, d in enumerate(big["doi"])]
    big[big.columns[0]] = range(len(big))
    path = tmp / "trials_big.csv"
    big.to_csv(path, index=False)
    return path
