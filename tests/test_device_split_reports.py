"""experiments.timing_budget and experiments.compile_floor read one GPU's sessions: a database
holding two GPUs' sessions is split by device, each report names its GPU and goes to a file of
its own, and a choice the data cannot make is refused in one line with nothing written."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.store.cache import Cache
from autotune.errors import UserError
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings, SilentReporter
from autotune.strategies import get_strategy
from conftest import hashed_cost
from experiments import compile_floor, timing_budget

SAMPLES = 120  # over timing_budget.FULL_AT_LEAST: every measurement counts as fully timed


class SampledEvaluator(FakeEvaluator):
    """The fake evaluator, each measurement carrying SAMPLES samples of its time and compiling
    in `compile_s`."""

    def __init__(self, compile_s: float) -> None:
        super().__init__(hashed_cost, compile_s=compile_s)

    def evaluate(self, candidates):
        for result in super().evaluate(candidates):
            yield replace(result, samples_ms=(result.median_ms,) * SAMPLES) if result.ok else result


def _session(db: Path, task, seed: int, compile_s: float) -> int:
    cache = Cache.open(db, create=True)
    try:
        settings = SessionSettings("random", seed, 24, fresh=True, generation_size=8, mode="gpu")
        return Session(task, SampledEvaluator(compile_s), get_strategy("random")(task.space, seed=seed), settings,
                       cache, reporter=SilentReporter()).run().session_id
    finally:
        cache.close()


@pytest.fixture
def two_gpus(triton_task, tmp_path) -> tuple[Path, int, int]:
    """Three GPU sessions: two on this machine's 'cpu' device, the last as if on an H200."""
    db = tmp_path / "two.db"
    here = _session(db, triton_task, 1, compile_s=0.01)
    _session(db, triton_task, 2, compile_s=0.01)
    there = _session(db, triton_task, 3, compile_s=3.0)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET device = 'NVIDIA H200' WHERE id = ?", (there,))
    conn.close()
    return db, here, there


def test_timing_budget_reads_one_gpus_sessions(two_gpus):
    from autotune.databases import open_for_reading

    db, here, there = two_gpus
    cache = open_for_reading(db, None)
    try:
        with pytest.raises(UserError, match="several devices"):
            timing_budget.measurements(cache)
        device, sessions = timing_budget.measurements(cache, "NVIDIA H200")
        assert device == "NVIDIA H200" and list(sessions) == [there]
        device, sessions = timing_budget.measurements(cache, "cpu")
        assert device == "cpu" and here in sessions and there not in sessions and len(sessions) == 2
    finally:
        cache.close()
    assert all(len(samples) == SAMPLES for rows in sessions.values() for _, samples in rows)


def test_timing_budget_writes_another_gpus_report_apart_and_refuses_an_undecided_choice(two_gpus, tmp_path, capsys):
    db, _, _ = two_gpus
    out = tmp_path / "reports"
    assert timing_budget.main(["--db", str(db), "--device", "NVIDIA H200", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["timing_budget-nvidia-h200.json", "timing_budget-nvidia-h200.md"]
    text = (out / "timing_budget-nvidia-h200.md").read_text()
    assert "in 1 GPU sessions, all recorded on NVIDIA H200" in text and '--device "NVIDIA H200"' in text
    capsys.readouterr()
    with pytest.raises(SystemExit):
        timing_budget.main(["--db", str(db), "--out", str(tmp_path / "none")])
    assert "several devices" in capsys.readouterr().err and not (tmp_path / "none").exists()


def test_compile_floor_reads_one_gpus_sessions(two_gpus, tmp_path, capsys):
    db, here, there = two_gpus
    device, rows = compile_floor.recorded_rows(db, "NVIDIA H200")
    assert device == "NVIDIA H200" and {r.session for r in rows} == {there}
    assert {r.compile_s for r in rows} == {3.0}  # the H200 session's compile times, not this machine's
    device, rows = compile_floor.recorded_rows(db, "cpu")
    assert here in {r.session for r in rows} and there not in {r.session for r in rows}
    device, text = compile_floor.report(db, "NVIDIA H200")
    assert "1 GPU sessions with at least 16 timed configs, all recorded on NVIDIA H200" in text
    assert "The longest compile of any of them: 3.00 s" in text
    out = tmp_path / "floor.md"
    with pytest.raises(SystemExit):
        compile_floor.main(["--db", str(db), "--out", str(out)])
    assert "several devices" in capsys.readouterr().err and not out.exists()
    with pytest.raises(SystemExit):
        compile_floor.main(["--db", str(tmp_path / "missing.db"), "--out", str(out)])
    assert "no such database" in capsys.readouterr().err and not out.exists()
    assert not (tmp_path / "missing.db").exists()


def test_a_report_after_measuring_reads_the_gpu_that_measured(monkeypatch, tmp_path):
    from autotune.experiment_devices import SHIPPED_DEVICE, report_device, report_folder, report_stem

    monkeypatch.setattr("autotune.device.device_name", lambda index=0: "NVIDIA H200")
    assert report_device(None, measured_here=True) == "NVIDIA H200"
    assert report_device(None, measured_here=False) is None  # the data decides
    assert report_device("NVIDIA H100 80GB HBM3", measured_here=True) == "NVIDIA H100 80GB HBM3"
    assert report_stem("compile_floor", "NVIDIA H200") == "compile_floor-nvidia-h200"
    assert report_folder(tmp_path, "NVIDIA H200") == tmp_path / "report-nvidia-h200"
    assert report_folder(tmp_path, SHIPPED_DEVICE) == report_folder(tmp_path, None) == tmp_path / "report"
