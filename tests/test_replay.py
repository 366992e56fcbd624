"""End-to-end replay: record a 'measuring' session into db A, replay it from A into db B."""

from __future__ import annotations

import pytest

from autotune.cache import Cache
from autotune.errors import UserError
from autotune.evaluators.fake import FakeEvaluator
from autotune.evaluators.replay import ReplayEvaluator
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.task import bind_recorded
from autotune.tuning import choose_recorded_space
from autotune.types import Source, Status
from conftest import all_counts, hashed_cost

BUDGET = 24
SEED = 11


def _run(task, evaluator, journal, *, seed, mode, cache=None, budget=BUDGET, generation_size=None):
    strategy = get_strategy("random")(task.space, seed=seed)
    settings = SessionSettings(strategy="random", seed=seed, budget=budget, mode=mode,
                               generation_size=generation_size)
    return Session(task, evaluator, strategy, settings, journal, cache=cache).run()


@pytest.fixture
def recorded(helion_task, tmp_path):
    """db A: a measuring session (fake evaluator, mode 'gpu') on the CPU-bound Helion softmax."""
    path = tmp_path / "a.db"
    db = Cache.open(path, create=True)
    outcome = _run(helion_task, FakeEvaluator(hashed_cost, baselines={"torch.softmax": 0.33}), db, seed=SEED,
                   mode="gpu", generation_size=10)
    db.close()
    return path, outcome


def _replay_parts(helion_task, path_a):
    cache = Cache.open(path_a)
    record = choose_recorded_space(cache, helion_task.spec, helion_task.shape, helion_task.dtype, None)
    task = bind_recorded(helion_task.spec, record, cache.aliases(record.fingerprint))
    evaluator = ReplayEvaluator(cache.measurements(record.fingerprint),
                                cache.baselines(fingerprint=record.fingerprint), description="replay")
    return cache, task, evaluator


def test_replay_reproduces_the_recorded_session(helion_task, recorded, tmp_path):
    path_a, original = recorded
    before = all_counts(path_a)
    cache, task, evaluator = _replay_parts(helion_task, path_a)
    assert task.fingerprint == helion_task.fingerprint
    assert task.space == helion_task.space
    journal = Cache.open(tmp_path / "b.db", create=True)
    replayed = _run(task, evaluator, journal, seed=SEED, mode="replay", cache=cache, generation_size=10)

    assert replayed.best[0].key == original.best[0].key
    assert replayed.best[1].median_ms == original.best[1].median_ms
    assert replayed.evaluations == original.evaluations == BUDGET
    assert evaluator.not_recorded == 0
    assert replayed.baselines["torch.softmax"].median_ms == 0.33

    rows_a = Cache.open(path_a).session_evaluations(original.session_id)
    rows_b = [r for r in journal.session_evaluations(replayed.session_id) if r.generation >= 0]
    final = [r for r in journal.session_evaluations(replayed.session_id) if r.generation < 0]
    # the replay also answers the final re-benchmark (top 5 and the default) from the recording
    assert 1 <= len(final) <= 6 and all(r.result.source is Source.REPLAYED for r in final)
    assert replayed.best[0].key in {r.candidate.key for r in final}
    assert [r.candidate.key for r in rows_b] == [r.candidate.key for r in rows_a]
    assert [r.result.median_ms for r in rows_b] == [r.result.median_ms for r in rows_a]
    assert [r.candidate.native for r in rows_b] == [r.candidate.native for r in rows_a]
    assert all(r.result.source is Source.REPLAYED for r in rows_b)
    session_b = journal.session(replayed.session_id)
    assert session_b["mode"] == "replay" and session_b["space_fingerprint"] == helion_task.fingerprint
    assert session_b["best_key"] == original.best[0].key
    assert journal.get_space(helion_task.fingerprint).space == helion_task.space
    # the shipped measurements are untouched: nothing was written to A
    assert all_counts(path_a) == before
    journal.close()
    cache.close()


def test_replay_with_another_seed_reports_unrecorded_configs(helion_task, recorded, tmp_path):
    path_a, original = recorded
    before = all_counts(path_a)
    cache, task, evaluator = _replay_parts(helion_task, path_a)
    journal = Cache.open(tmp_path / "b.db", create=True)
    replayed = _run(task, evaluator, journal, seed=SEED + 1, mode="replay", cache=cache)
    rows = journal.session_evaluations(replayed.session_id)
    not_recorded = [r for r in rows if r.result.status is Status.NOT_RECORDED]
    assert evaluator.not_recorded == len(not_recorded) > 0
    assert replayed.status_counts["not_recorded"] == len(not_recorded)
    assert replayed.evaluations == BUDGET  # unrecorded configs count against the budget
    assert all(r.result.source is Source.REPLAYED for r in rows)
    recorded_keys = set(Cache.open(path_a).measurements(helion_task.fingerprint))
    for row in rows:
        assert (row.result.status is Status.NOT_RECORDED) == (row.candidate.key not in recorded_keys)
    # the default config was recorded, so it is always answered
    assert rows[0].generation == 0 and rows[0].result.status is Status.OK
    assert all_counts(path_a) == before
    journal.close()
    cache.close()


def test_choose_recorded_space_explains_what_is_missing(helion_task, triton_task, recorded):
    path_a, _ = recorded
    cache = Cache.open(path_a)
    with pytest.raises(UserError, match="no recorded measurements"):
        choose_recorded_space(cache, triton_task.spec, triton_task.shape, triton_task.dtype, None)
    with pytest.raises(UserError, match="no recorded measurements"):
        choose_recorded_space(cache, helion_task.spec, (64, 999), helion_task.dtype, None)
    with pytest.raises(UserError, match="no recorded space"):
        choose_recorded_space(cache, helion_task.spec, helion_task.shape, helion_task.dtype, "ffffffffff")
    prefix = helion_task.fingerprint[:8]
    assert choose_recorded_space(cache, helion_task.spec, helion_task.shape, helion_task.dtype,
                                 prefix).fingerprint == helion_task.fingerprint
    cache.close()


def test_choose_recorded_space_refuses_data_from_other_kernel_source(helion_task, tmp_path):
    import dataclasses

    db = Cache.open(tmp_path / "old.db", create=True)
    old_identity = dataclasses.replace(helion_task.identity, source_hash="0" * 24)
    old_task = dataclasses.replace(helion_task, identity=old_identity)
    _run(old_task, FakeEvaluator(hashed_cost), db, seed=1, mode="gpu", budget=3)
    with pytest.raises(UserError, match="different version"):
        choose_recorded_space(db, helion_task.spec, helion_task.shape, helion_task.dtype, None)
    db.close()
