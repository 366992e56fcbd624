"""Reports regenerate byte for byte from the shipped batches: the database is built from
`data/batches/` (into a temporary folder) and each report's own command writes it again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autotune.cli import main
from autotune.store.batches import batch_folders
from conftest import REPO

BATCHES = REPO / "data" / "batches"
# report folder -> the command's arguments (each report's header names it)
REPORTS = {
    "experiments/softmax_study/report": ["experiment", "report", "experiments/softmax_study"],
    "experiments/seed_study/report": ["experiment", "report", "experiments/seed_study", "--dtype", "all"],
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A directory that looks like the repository's root to a report: the batches and the
    experiments linked, the shipped database built here on first use."""
    root = tmp_path_factory.mktemp("checkout")
    (root / "data").mkdir()
    os.symlink(BATCHES, root / "data" / "batches")
    os.symlink(REPO / "experiments", root / "experiments")
    return root


@pytest.mark.skipif(not batch_folders(BATCHES), reason="no shipped batches")
@pytest.mark.parametrize("folder", list(REPORTS))
def test_a_report_regenerates_byte_for_byte(folder, checkout, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(checkout)
    out = tmp_path / "report"
    assert main([*REPORTS[folder], "--out", str(out)]) == 0
    capsys.readouterr()
    for name in ("README.md", "results.json"):  # the figures are pictures of results.json
        assert (out / name).read_text() == (REPO / folder / name).read_text(), f"{folder}/{name} differs"
