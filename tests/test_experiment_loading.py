"""Loading an experiment folder: its run() and report() are found once, and stay found when a
submodule of the same name is imported later (Python sets each imported submodule on its package)."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import pytest

from autotune.errors import UserError
from autotune.experiment import ExperimentOptions, load_experiment

REPO = Path(__file__).resolve().parents[1]


def _lazy_experiment(folder: Path) -> Path:
    """An experiment whose __init__ imports its report.py only when report() is called."""
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent('''
        def run(options, console):
            return None

        def report(options, console):
            from .report import report as write_report
            return write_report(options, console)
    '''))
    (folder / "report.py").write_text(textwrap.dedent('''
        CALLS = []

        def report(options, console):
            CALLS.append(options.out)
            return options.out / "README.md"
    '''))
    return folder


def test_a_lazily_imported_report_module_does_not_hide_the_report_function(tmp_path):
    folder = _lazy_experiment(tmp_path / "lazy_study")
    options = ExperimentOptions(folder=folder, db=tmp_path / "user.db", out=tmp_path / "out")
    experiment = load_experiment(folder)
    # The first report imports report.py, which Python then sets on the package as `report`.
    assert experiment.report(options, None) == tmp_path / "out" / "README.md"
    assert not callable(getattr(experiment.module, "report"))
    assert experiment.report(options, None) == tmp_path / "out" / "README.md"
    # Loaded again in the same process, it is still an experiment: report.py's own report().
    again = load_experiment(folder)
    assert again.report(options, None) == tmp_path / "out" / "README.md"
    calls = importlib.import_module(f"{again.module.__name__}.report").CALLS
    assert calls == [tmp_path / "out"] * 3


def test_the_heldout_experiment_loads_after_its_report_module_was_imported():
    importlib.import_module("experiments.heldout.report")
    experiment = load_experiment(REPO / "experiments" / "heldout")
    assert experiment.name == "experiments.heldout"
    assert experiment.report.__module__ == "experiments.heldout.report"  # the function the package's delegates to
    assert callable(experiment.run)


def test_a_folder_without_report_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "half_study"
    folder.mkdir()
    (folder / "__init__.py").write_text("def run(options, console):\n    return None\n")
    with pytest.raises(UserError, match=r"lacks report\(\)$"):
        load_experiment(folder)


def _recording_experiment(folder: Path) -> Path:
    """An experiment whose report() records the device and folder it was asked for."""
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent('''
        ASKED = []

        def run(options, console):
            return None

        def report(options, console):
            ASKED.append((options.device, options.out))
            return options.out / "README.md"
    '''))
    return folder


def test_a_report_reads_the_gpu_it_names_or_the_one_a_run_measured_on(tmp_path, monkeypatch):
    """`experiment report --device` reaches the study; a report of another GPU than the shipped
    data's goes to its own folder unless --out says otherwise; the report after `experiment run`
    on a GPU machine reads that GPU's sessions."""
    from autotune import cli
    from autotune.commands import experiment as command
    from autotune.experiment_devices import SHIPPED_DEVICE

    folder = _recording_experiment(tmp_path / "device_study")
    base = ["--db", str(tmp_path / "user.db"), "--shipped", "none"]
    assert cli.main(["experiment", "report", str(folder), *base]) == 0
    assert cli.main(["experiment", "report", str(folder), *base, "--device", SHIPPED_DEVICE]) == 0
    assert cli.main(["experiment", "report", str(folder), *base, "--device", "NVIDIA H200"]) == 0
    assert cli.main(["experiment", "report", str(folder), *base, "--device", "NVIDIA H200",
                     "--out", str(tmp_path / "mine")]) == 0
    monkeypatch.setattr(command, "gpu_available", lambda: True)
    monkeypatch.setattr(command, "recording_gpu", lambda named=None: "NVIDIA H200")
    assert cli.main(["experiment", "run", str(folder), *base]) == 0
    asked = load_experiment(folder).module.ASKED
    assert asked == [(None, folder / "report"), (SHIPPED_DEVICE, folder / "report"),
                     ("NVIDIA H200", folder / "report-nvidia-h200"), ("NVIDIA H200", tmp_path / "mine"),
                     ("NVIDIA H200", folder / "report-nvidia-h200")]
