"""experiments.compile_ahead_replay: the moment a recorded generation's GPU had nothing left to
time, and the re-run that asks the session's guesses there."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autotune.databases import open_for_reading
from conftest import record_fake_session
from experiments import compile_ahead_replay as replay
from experiments.compile_ahead_replay import Moment, guess_moment


def _row(key: str, compile_s: float | None, created: float | None):
    return SimpleNamespace(candidate=SimpleNamespace(key=key), created=created,
                           result=SimpleNamespace(compile_s=compile_s))


def test_the_moment_is_when_every_config_compiled_so_far_was_timed_and_the_rest_still_compile():
    rows = [_row("a", 0.1, 100.3), _row("b", 0.2, 100.4), _row("c", 0.3, 100.5), _row("d", 2.0, 102.2)]
    # with two known (100.4) "c" had compiled (100.3) but was not yet timed: the GPU was busy
    assert guess_moment(rows, 100.0) == Moment(frozenset("abc"), ("d",), pytest.approx(1.7))


def test_no_moment_where_the_gpu_was_busy_until_the_last_config_or_a_row_lacks_its_time():
    quick = [_row(k, 0.1, 100.2 + 0.1 * i) for i, k in enumerate("abcd")]
    assert guess_moment(quick, 100.0) is None
    assert guess_moment([_row("a", 0.1, None), _row("b", 2.0, 102.0)], 100.0) is None
    assert guess_moment([_row("a", 0.1, 100.2)], 100.0) is None  # one config: nothing to guess beside it


def test_a_rerun_pairs_each_guess_with_the_generation_after_it(helion_task, tmp_path, monkeypatch):
    """A random search reads no results, so wherever there is a moment its guess is the next
    generation: every config of every generation read is named, none unused."""
    path = tmp_path / "r.db"
    session = record_fake_session(helion_task, path, strategy="random", budget=40, seed=2)
    last_out = lambda rows, started: Moment(frozenset(r.candidate.key for r in rows[:-1]),  # noqa: E731
                                            (rows[-1].candidate.key,), 0.5)
    monkeypatch.setattr(replay, "guess_moment", last_out)
    cache = open_for_reading(path)
    try:
        reading = replay.read_run(cache, cache.session(session))
    finally:
        cache.close()
    assert reading.generations >= 2 and reading.moments == reading.generations
    assert reading.named == reading.next_configs > 0 and reading.unused == 0
    assert reading.window_s == pytest.approx(0.5 * reading.generations)
    text = replay.report([reading], "random", path)
    assert f"the guesses named {reading.named} of the {reading.next_configs} configs" in text
    assert "| 100% | 100% | 0 |" in text


def test_one_gpus_runs_are_read(tmp_path, capsys):
    """A moment's window depends on its GPU's speed, so the reading takes one GPU's runs: the one
    named, or refuses in one line where two GPUs recorded runs and neither is the shipped data's."""
    import sqlite3

    import torch

    from autotune.store.cache import Cache
    from autotune.kernels import get_kernel
    from autotune.task import bind_live
    from heldout_records import SOFTMAX, costs_for, record_run

    path = tmp_path / "two.db"
    cache = Cache.open(path, create=True)
    task = bind_live(get_kernel(SOFTMAX.kernel), SOFTMAX.dims, torch.float16, "cpu")
    for seed in (1, 2):
        record_run(cache, task, arm="cold", strategy="pattern", seed=seed, setup_s=1.0, costs=costs_for(task, []),
                   worker_built=True)
    cache.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET device = 'NVIDIA H200' WHERE id = (SELECT MAX(id) FROM sessions)")
    conn.close()
    cache = open_for_reading(path)
    try:
        on_cpu, on_other = (replay.worker_built_runs(cache, "pattern", device=d) for d in ("cpu", "NVIDIA H200"))
        assert len(on_cpu) == len(on_other) == 1 and on_cpu[0]["id"] < on_other[0]["id"]
        assert len(replay.worker_built_runs(cache, "pattern")) == 2
    finally:
        cache.close()
    with pytest.raises(SystemExit) as refused:
        replay.main(["--db", str(path), "--strategy", "pattern", "--out", str(tmp_path / "r.md")])
    assert refused.value.code == 2 and "several devices" in capsys.readouterr().err
    assert not (tmp_path / "r.md").exists()
    replay.main(["--db", str(path), "--strategy", "pattern", "--out", str(tmp_path / "r.md"), "--device", "NVIDIA H200"])
    text = (tmp_path / "r.md").read_text()
    assert "recorded runs on NVIDIA H200" in text and "1/1: session" in capsys.readouterr().out
