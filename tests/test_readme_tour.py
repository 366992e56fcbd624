"""The README's tour, run as a newcomer runs it: in a clean checkout on a CPU machine, every
command succeeds and the checkout is left as it was (`git status` clean, the shipped data
untouched).  The commands are read from the README itself, so the two cannot drift apart."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from autotune.cli import main
from conftest import REPO

TOUR_HEADING = "## A short tour"


def tour_commands(readme: str) -> list[list[str]]:
    """The shell lines of the first bash block after the tour's heading, comments dropped and
    continuation lines joined."""
    start = readme.index(TOUR_HEADING)
    block = re.search(r"```bash\n(.*?)```", readme[start:], re.S)
    assert block, "the tour has no bash block"
    text = block.group(1).replace("\\\n", " ")
    return [words for line in text.splitlines() if (words := shlex.split(line, comments=True))]


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def checkout(tmp_path, monkeypatch, shipped_db) -> Path:
    """A clean checkout holding what the tour touches: the shipped batches, the recorded Kernel
    Tuner files and the repository's ignore rules, committed (the data linked, not copied), and
    the database built from the batches (linked: the tour only reads it)."""
    folder = tmp_path / "checkout"
    (folder / "data").mkdir(parents=True)
    shutil.copy(REPO / ".gitignore", folder / ".gitignore")
    for name in ("batches", "benchmark_hub"):
        (folder / "data" / name).symlink_to(REPO / "data" / name)
    (folder / "data" / "shipped.db").symlink_to(shipped_db)  # git-ignored, as the real one
    _git(folder, "init", "-q")
    _git(folder, "add", "-A")
    _git(folder, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "checkout")
    monkeypatch.chdir(folder)
    return folder


def test_the_tour_runs_in_a_clean_checkout_and_leaves_it_clean(checkout, capsys):
    commands = tour_commands((REPO / "README.md").read_text())
    assert len(commands) >= 10, "the tour lost its commands"
    for words in commands:
        if words[:2] == ["mkdir", "-p"]:
            for folder in words[2:]:
                (checkout / folder).mkdir(parents=True, exist_ok=True)
            continue
        assert words[0] == "autotune", f"the tour runs only autotune commands: {words}"
        code = main(words[1:])
        captured = capsys.readouterr()
        assert code == 0, (words, captured.err[-2000:])
    assert _git(checkout, "status", "--porcelain") == ""  # the shipped data untouched, nothing left behind
    assert (checkout / "user.db").exists()  # where the tour's sessions went
