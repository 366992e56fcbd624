"""The held-out study on more than one GPU: each device's runs are planned, limited and
reported apart, so no run is judged against another GPU's Helion quick."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune import cli
from autotune.errors import UserError
from autotune.experiment import ExperimentOptions
from experiments.heldout import definition as d
from experiments.heldout import runner
from experiments.heldout.data import load_runs, recorded_keys
from autotune.experiment_devices import slug
from experiments.heldout.devices import device_to_read, report_folder, study_devices

from heldout_records import HELDOUT_DIR, HELION_JOB_S, SOFTMAX

OTHER = "NVIDIA H200"


@pytest.fixture
def two_gpus(heldout_db, tmp_path) -> Path:
    """The fixture's study with its softmax cold runs recorded on another GPU, the rest on the
    study's own."""
    db = tmp_path / "two.db"
    shutil.copy(heldout_db, db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE sessions SET device = ?", (d.DEVICE,))
        conn.execute("UPDATE sessions SET device = ? WHERE shape = ? AND json_extract(options, '$.experiment.arm') = ?",
                     (OTHER, json.dumps(list(SOFTMAX.dims)), d.COLD))
    conn.close()
    return db


def _keys(runs) -> set:
    return {run.key for run in runs}


def test_each_gpus_runs_are_read_apart(two_gpus):
    everything, own, other = (load_runs(two_gpus, None, device) for device in (None, d.DEVICE, OTHER))
    assert other and all(run.problem == SOFTMAX and run.arm == d.COLD for run in other)
    assert not any(run.problem == SOFTMAX and run.arm == d.COLD for run in own)
    assert _keys(own) | _keys(other) == _keys(everything) and not _keys(own) & _keys(other)
    counted = study_devices(two_gpus, None)
    assert set(counted) == {d.DEVICE, OTHER} and counted[OTHER] >= len(other)


def test_the_runner_plans_limits_and_skips_by_the_gpus_own_runs(two_gpus):
    """On the other GPU, Helion quick at the softmax shape is still to run (its run is the study
    device's) and the cold run there is recorded; the study's device is the other way round.
    The cold run's search limit comes from the same GPU's Helion quick, or the default where that
    GPU has none yet."""
    plan = runner.Plan(problems=(SOFTMAX,), arms=(d.HELION_QUICK, d.COLD), strategies=("pattern",), seeds=(1,),
                       helion_seeds=(1,), shipped=None, limit_to_target=True)
    quiet = SimpleNamespace(print=lambda *a: None)
    on_other = runner.pending_jobs(runner.replace(plan, device=OTHER), two_gpus, quiet)
    on_own = runner.pending_jobs(runner.replace(plan, device=d.DEVICE), two_gpus, quiet)
    assert [job.arm for job in on_other] == [d.HELION_QUICK]
    assert [job.arm for job in on_own] == [d.COLD]
    assert on_own[0].seconds < HELION_JOB_S / 5  # from this device's Helion quick
    other_cold = runner.pending_jobs(runner.replace(plan, device=OTHER, arms=(d.COLD,), again=True), two_gpus, quiet)
    assert [job.seconds for job in other_cold] == [d.SECONDS]  # no Helion quick on that GPU yet
    assert recorded_keys(two_gpus, None, OTHER) == {run.key for run in load_runs(two_gpus, None, OTHER)}


def test_the_runner_refuses_a_device_other_than_its_gpu(monkeypatch):
    monkeypatch.setattr("autotune.device.device_name", lambda index=0: OTHER)
    assert runner.recording_gpu(None) == OTHER == runner.recording_gpu(OTHER)
    with pytest.raises(UserError, match="this machine's GPU is 'NVIDIA H200'"):
        runner.recording_gpu(d.DEVICE)


@pytest.mark.parametrize("recorded, wanted, read", [
    (Counter({"cpu": 3}), None, "cpu"),  # the only one
    (Counter({OTHER: 9, d.DEVICE: 2}), None, d.DEVICE),  # the study's own among several, not the most
    (Counter({OTHER: 9, d.DEVICE: 2}), OTHER, OTHER),
])
def test_which_gpus_runs_a_figure_reads(recorded, wanted, read):
    assert device_to_read(recorded, wanted) == read


@pytest.mark.parametrize("recorded, wanted, message", [
    (Counter({OTHER: 1}), d.DEVICE, "no heldout session was recorded on 'NVIDIA H100 80GB HBM3'"),
    (Counter({OTHER: 1, "cpu": 1}), None, "several devices .* name one with --device"),
])
def test_a_choice_the_data_cannot_make_is_refused(recorded, wanted, message):
    with pytest.raises(UserError, match=message):
        device_to_read(recorded, wanted)


def test_another_gpus_report_goes_to_a_folder_of_its_own(tmp_path):
    default = ExperimentOptions(folder=tmp_path, db=tmp_path / "x.db", out=tmp_path / "report")
    assert slug(OTHER) == "nvidia-h200" and slug(d.DEVICE) == "nvidia-h100-80gb-hbm3"
    assert report_folder(default, OTHER) == tmp_path / "report-nvidia-h200"
    assert report_folder(default, d.DEVICE) == report_folder(default, None) == tmp_path / "report"
    chosen = ExperimentOptions(folder=tmp_path, db=tmp_path / "x.db", out=tmp_path / "mine")
    assert report_folder(chosen, OTHER) == tmp_path / "mine"


def test_the_report_reads_one_gpu_and_says_which(two_gpus, tmp_path):
    for device, out in ((OTHER, tmp_path / "other"), (None, tmp_path / "own")):
        args = ["experiment", "report", str(HELDOUT_DIR), "--db", str(two_gpus), "--shipped", "none", "--out", str(out)]
        assert cli.main(args + (["--device", device] if device else [])) == 0
    other, own = (json.loads((tmp_path / name / "results.json").read_text()) for name in ("other", "own"))
    assert (other["device"], own["device"]) == (OTHER, d.DEVICE)
    text = (tmp_path / "other" / "README.md").read_text()
    assert f"was recorded on {OTHER}" in text and f"sessions on {d.DEVICE} (" in text
    own_text = (tmp_path / "own" / "README.md").read_text()
    assert f"was recorded on {d.DEVICE}" in own_text and f"sessions on {OTHER} (" in own_text
    # the other GPU's report holds its cold runs alone, with no Helion quick there to be judged against;
    # the study's own has Helion quick at the shape, and no cold run
    (shape,) = other["problems"]
    assert shape["shape"] == SOFTMAX.shape and shape["helion_ms"] is None
    assert {arm["arm"] for arm in shape["arms"]} == {d.COLD}
    own_shape = next(p for p in own["problems"] if p["shape"] == SOFTMAX.shape)
    assert own_shape["helion_ms"] is not None and d.COLD not in {arm["arm"] for arm in own_shape["arms"]}
