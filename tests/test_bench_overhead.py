"""experiments.bench_overhead's report, on fake sessions of the same configs that differ the way
the variants do: building ahead and loading the compile workers' code lower each config's
benchmark time, a shorter timing target makes the timings noisier."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings, SilentReporter
from autotune.session_options import SessionOptions
from autotune.strategies import get_strategy
from conftest import hashed_cost
from experiments import bench_overhead
from experiments.session_pairs import random_sessions, wall_s

BUDGET = 24


class CostedEvaluator(FakeEvaluator):
    """Each config's benchmark time is `bench_s`; with `noise`, a config's time moves by up to that
    share, deterministically (a hash of the config)."""

    def __init__(self, bench_s: float, noise: float = 0.0) -> None:
        super().__init__(hashed_cost)
        self.bench_s, self.noise = bench_s, noise

    def evaluate(self, candidates):
        for result in super().evaluate(candidates):
            wobble = (hashed_cost({"k": result.key}) - 0.6) * 2 * self.noise if self.noise else 0.0
            yield replace(result, median_ms=result.median_ms * (1 + wobble), bench_s=self.bench_s)


def _session(db, task, options: dict, evaluator: FakeEvaluator) -> int:
    cache = Cache.open(db, create=True)
    try:
        settings = SessionSettings("random", 7, BUDGET, fresh=True, generation_size=8, mode="gpu")
        return Session(task, evaluator, get_strategy("random")(task.space, seed=7), settings, cache,
                       reporter=SilentReporter(), options=options).run().session_id
    finally:
        cache.close()


def _rows(text: str) -> dict[str, list[str]]:
    return {cells[0].strip(): [c.strip() for c in cells[1:]]
            for cells in (line.split("|")[1:-1] for line in text.splitlines() if re.match(r"\| build", line))}


def test_the_report_reads_each_variant_from_its_recorded_options(triton_task, tmp_path):
    db = tmp_path / "overhead.db"
    baseline, ahead, short, loaded, compiled = bench_overhead.VARIANTS
    # an older session, recorded before the switch was: it matches no variant
    _session(db, triton_task, {"timing_target_ms": 250.0}, CostedEvaluator(0.5))
    _session(db, triton_task, {"build_ahead": False, "timing_target_ms": 250.0}, CostedEvaluator(0.3))
    _session(db, triton_task, {"build_ahead": True, "timing_target_ms": 250.0}, CostedEvaluator(0.2))
    _session(db, triton_task, {"build_ahead": True, "timing_target_ms": short.timing_ms, "build_from_worker": False},
             CostedEvaluator(0.1, noise=0.5))
    _session(db, triton_task, {"build_ahead": True, "timing_target_ms": short.timing_ms, "build_from_worker": True},
             CostedEvaluator(0.04, noise=0.5))
    _session(db, triton_task, {"build_ahead": True, "timing_target_ms": short.timing_ms, "build_from_worker": True,
                               "compile_ahead": True, "compile_caches": "empty"}, CostedEvaluator(0.032, noise=0.5))
    text = bench_overhead.report(db)
    rows = _rows(text)
    assert list(rows) == [baseline.name, ahead.name, short.name, loaded.name, compiled.name]
    sessions, _ = random_sessions(db)
    by_id = {s["id"]: s for s in sessions}
    for name, bench_s in ((baseline.name, 0.3), (ahead.name, 0.2), (short.name, 0.1), (loaded.name, 0.04),
                          (compiled.name, 0.032)):
        row = rows[name]
        measured = BUDGET + 1  # and the default config, measured free of the budget
        assert row[2] == row[3] == str(measured)  # every config ran correctly
        assert float(row[5]) == pytest.approx(measured * bench_s, abs=0.05)
        session = by_id[int(row[0])]
        assert float(row[7]) == pytest.approx(measured / wall_s(session), rel=0.01)
        assert row[1] == ("empty" if name == compiled.name else "not recorded")  # as each session recorded it
    # the same configs in the same order: the same ten fastest, unless the timings are noisy
    assert rows[ahead.name][9] == "10 of 10"
    assert int(rows[short.name][9].split()[0]) < 10


def test_the_report_reads_its_own_database_at_its_own_shape(triton_task, tmp_path, monkeypatch):
    """The shipped data beside the database (here a baseline-variant session in ./data/shipped.db)
    and sessions at another shape are not part of the pair that was run."""
    monkeypatch.chdir(tmp_path)
    baseline, _, short, loaded, _ = bench_overhead.VARIANTS
    (tmp_path / "data").mkdir()
    _session(tmp_path / "data" / "shipped.db", triton_task, {"build_ahead": False, "timing_target_ms": 250.0},
             CostedEvaluator(0.3))
    db = tmp_path / "pair.db"
    for variant, bench_s in ((short, 0.1), (loaded, 0.04)):
        _session(db, triton_task, {"build_ahead": True, "timing_target_ms": variant.timing_ms,
                                   "build_from_worker": variant.from_worker}, CostedEvaluator(bench_s))
    here = ("softmax-triton", "64x1000", "float16")
    assert list(_rows(bench_overhead.report(db, here))) == [short.name, loaded.name]
    assert "--shape 64x1000" in bench_overhead.report(db, here)
    with pytest.raises(SystemExit, match="no session of this experiment's variants at softmax-triton 128x1000"):
        bench_overhead.report(db, ("softmax-triton", "128x1000", "float16"))


def test_a_database_without_the_variants_is_refused_in_one_line(triton_task, tmp_path):
    db = tmp_path / "other.db"
    _session(db, triton_task, {"timing_target_ms": 250.0}, CostedEvaluator(0.5))
    with pytest.raises(SystemExit, match="no session of this experiment's variants"):
        bench_overhead.report(db)


@pytest.mark.parametrize("switch", ["build_ahead", "build_from_worker", "compile_ahead"])
def test_the_switch_is_kept_in_the_stored_options_even_when_off(switch):
    stored = SessionOptions(**{switch: False}).to_record()
    assert stored[switch] is False
    assert SessionOptions.from_record(stored)[switch] is False
    assert switch not in SessionOptions().to_record()  # replay and interpreter sessions: not said


def test_variants_are_chosen_by_number_and_a_bad_list_is_refused(capsys):
    import argparse

    parser = argparse.ArgumentParser(prog="bench_overhead")
    assert bench_overhead._chosen("3,4", parser) == list(bench_overhead.VARIANTS[2:4])
    for bad in ("0", str(len(bench_overhead.VARIANTS) + 1), "x", ""):
        with pytest.raises(SystemExit):
            bench_overhead._chosen(bad, parser)
        assert "--variants" in capsys.readouterr().err


def test_each_variant_of_a_pair_compiles_into_empty_caches_of_its_own(tmp_path, monkeypatch):
    """Sharing the on-disk compile caches, the second variant would find the first's configs built."""
    import os
    import subprocess

    from autotune.evaluators.gpu_process import COMPILE_CACHES, compile_caches_state
    from experiments import session_pairs

    seen = []

    def run(command, check, cwd, env):
        assert compile_caches_state(env) == "empty"
        for name in COMPILE_CACHES:  # what the variant compiles stays in its own caches
            Path(env[name]).mkdir(parents=True, exist_ok=True)
            (Path(env[name]) / "kernel.bin").write_bytes(b"x")
        assert compile_caches_state(env) == "warm"
        seen.append((command, {name: env[name] for name in COMPILE_CACHES}, env.get("SWITCH")))

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "shared"))
    session_pairs.run_pair(tmp_path / "pair.db", ["softmax"], [["--timing-ms", "25"], ["--timing-ms", "250"]],
                           [{"SWITCH": "0"}, {"SWITCH": "1"}])
    assert [s[2] for s in seen] == ["0", "1"] and [s[0][-1] for s in seen] == ["25", "250"]
    first, second = (s[1] for s in seen)
    assert all(first[name] != second[name] for name in COMPILE_CACHES)
    assert not Path(first["TRITON_CACHE_DIR"]).exists()  # removed after its variant
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "shared")  # the environment restored


def test_the_compile_caches_state_reads_the_caches_workers_would_use(tmp_path, monkeypatch):
    from autotune.evaluators.gpu_process import compile_caches_state

    triton, inductor = tmp_path / "triton", tmp_path / "inductor"
    env = {"TRITON_CACHE_DIR": str(triton), "TORCHINDUCTOR_CACHE_DIR": str(inductor)}
    assert compile_caches_state(env) == "empty"  # not there yet
    (inductor / "a" / "b").mkdir(parents=True)
    assert compile_caches_state(env) == "empty"  # folders hold nothing compiled
    (inductor / "a" / "b" / "module.py").write_text("")
    assert compile_caches_state(env) == "warm"
    monkeypatch.setattr(Path, "home", lambda: tmp_path / "home")  # unset: Triton's default under home
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert compile_caches_state({}) == "empty"
    (tmp_path / "home" / ".triton" / "cache").mkdir(parents=True)
    (tmp_path / "home" / ".triton" / "cache" / "k.cubin").write_bytes(b"")
    assert compile_caches_state({}) == "warm"


def test_a_pair_is_compared_on_one_gpu(triton_task, tmp_path):
    """The same variant recorded later on another GPU does not stand in for this GPU's: each
    GPU's report pairs its own sessions, and a database of two GPUs, neither the shipped data's,
    is refused in one line without a device named."""
    import sqlite3

    _, _, short, loaded, _ = bench_overhead.VARIANTS
    db = tmp_path / "pair.db"
    for variant, bench_s in ((short, 0.1), (loaded, 0.04), (loaded, 0.4)):
        _session(db, triton_task, {"build_ahead": True, "timing_target_ms": variant.timing_ms,
                                   "build_from_worker": variant.from_worker}, CostedEvaluator(bench_s))
    with sqlite3.connect(db) as conn:  # the last session, as if measured on another card
        conn.execute("UPDATE sessions SET device = 'NVIDIA H200' WHERE id = (SELECT MAX(id) FROM sessions)")
    conn.close()
    with pytest.raises(SystemExit, match="several devices"):
        bench_overhead.report(db)
    here = _rows(bench_overhead.report(db, device="cpu"))
    assert list(here) == [short.name, loaded.name]
    assert float(here[loaded.name][5]) == pytest.approx((BUDGET + 1) * 0.04, abs=0.05)  # this GPU's, not the later
    other = bench_overhead.report(db, device="NVIDIA H200")
    assert list(_rows(other)) == [loaded.name] and "Device: NVIDIA H200" in other
    assert [s["device"] for s in random_sessions(db, device="cpu")[0]] == ["cpu", "cpu"]
