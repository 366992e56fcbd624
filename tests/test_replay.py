"""End-to-end replay: record a 'measuring' session into db A, replay it from A into db B."""

from __future__ import annotations

import pytest

from autotune.store.cache import Cache
from autotune.errors import UserError
from autotune.evaluators.fake import FakeEvaluator
from autotune.evaluators.replay import ReplayEvaluator
from autotune.session import Session, SessionSettings
from autotune.simulation.oracle import Oracle
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
    """The replay's pieces as `autotune tune --replay` builds them: one oracle, the recorded sample."""
    cache = Cache.open(path_a)
    record = choose_recorded_space(cache, helion_task.spec, helion_task.shape, helion_task.dtype, None)
    oracle = Oracle.from_cache(cache, record.fingerprint, record.space.names)
    task = bind_recorded(helion_task.spec, record, cache.aliases(record.fingerprint), oracle)
    evaluator = ReplayEvaluator(oracle, cache.baselines(fingerprint=record.fingerprint), description="replay")
    return cache, task, evaluator


def test_replay_answers_every_config_from_the_recording(helion_task, recorded, tmp_path):
    path_a, original = recorded
    before = all_counts(path_a)
    cache, task, evaluator = _replay_parts(helion_task, path_a)
    rows_a = Cache.open(path_a).session_evaluations(original.session_id)
    recorded_rows = {r.candidate.key: r for r in rows_a if r.generation >= 0}
    assert task.fingerprint == helion_task.fingerprint
    assert task.identity.space == helion_task.space  # recorded as the whole space ...
    # ... but the strategy is offered exactly the recorded configs, one point each
    assert task.sample == {"points": len(recorded_rows), "valid": len(recorded_rows), "left_out": 0}
    assert {task.candidate(p).key for p in task.space.members} == set(recorded_rows)
    journal = Cache.open(tmp_path / "b.db", create=True)
    budget = len(recorded_rows)  # every recorded config once (the default is free of budget)
    replayed = _run(task, evaluator, journal, seed=SEED, mode="replay", cache=cache, budget=budget,
                    generation_size=10)

    assert evaluator.not_recorded == 0 and replayed.status_counts["not_recorded"] == 0
    assert (replayed.evaluations, replayed.exit_reason) == (budget - 1, "strategy finished")  # all but the default
    # it saw every recorded config, so it found the recorded best, with the recorded time
    assert replayed.best[0].key == original.best[0].key
    assert replayed.best[1].median_ms == original.best[1].median_ms
    assert replayed.baselines["torch.softmax"].median_ms == 0.33

    rows_b = [r for r in journal.session_evaluations(replayed.session_id) if r.generation >= 0]
    final = [r for r in journal.session_evaluations(replayed.session_id) if r.generation < 0]
    # the replay also answers the final re-benchmark (top 5 and the default) from the recording
    assert 1 <= len(final) <= 6 and all(r.result.source is Source.REPLAYED for r in final)
    assert replayed.best[0].key in {r.candidate.key for r in final}
    assert {r.candidate.key for r in rows_b} == set(recorded_rows)
    for row in rows_b:  # each answered with what was measured for it, and its recorded native config
        assert row.result.median_ms == recorded_rows[row.candidate.key].result.median_ms
        assert row.candidate.native == recorded_rows[row.candidate.key].candidate.native
    assert all(r.result.source is Source.REPLAYED for r in rows_b)
    session_b = journal.session(replayed.session_id)
    assert session_b["mode"] == "replay" and session_b["space_fingerprint"] == helion_task.fingerprint
    assert session_b["best_key"] == original.best[0].key
    assert journal.get_space(helion_task.fingerprint).space == helion_task.space
    # the shipped measurements are untouched: nothing was written to A
    assert all_counts(path_a) == before
    journal.close()
    cache.close()


@pytest.mark.parametrize("strategy", ["random", "pattern", "evolution"])
def test_replay_with_any_seed_proposes_only_recorded_configs(helion_task, recorded, tmp_path, strategy):
    """Before, a replay with another seed than the recording's proposed points nobody measured
    and most answers were not_recorded; now its strategy sees only the recorded sample."""
    path_a, _ = recorded
    before = all_counts(path_a)
    journal = Cache.open(tmp_path / "b.db", create=True)
    for seed in (SEED + 1, 3, 7):
        cache, task, evaluator = _replay_parts(helion_task, path_a)
        settings = SessionSettings(strategy=strategy, seed=seed, budget=12, mode="replay")
        outcome = Session(task, evaluator, get_strategy(strategy).from_task(task, seed=seed), settings, journal,
                          cache=cache).run()
        rows = journal.session_evaluations(outcome.session_id)
        assert evaluator.not_recorded == 0 and outcome.status_counts["not_recorded"] == 0
        assert rows and all(r.result.status is not Status.NOT_RECORDED for r in rows)
        cache.close()
    assert all_counts(path_a) == before
    journal.close()


def test_a_seed_outside_the_sample_is_answered_not_recorded(helion_task, recorded, tmp_path):
    """Seeds (--seed-from, --config) may name configs outside the recorded sample: those are
    answered not_recorded and counted, not refused and not silently dropped."""
    import random

    path_a, _ = recorded
    cache, task, evaluator = _replay_parts(helion_task, path_a)
    rng = random.Random(5)
    outside = next(p for p in (helion_task.space.sample(rng) for _ in range(1000))
                   if task.candidate(p).key not in evaluator.oracle)
    assert not task.space.is_member(outside)
    journal = Cache.open(tmp_path / "b.db", create=True)
    settings = SessionSettings(strategy="random", seed=SEED + 1, budget=6, mode="replay")
    outcome = Session(task, evaluator, get_strategy("random")(task.space, seed=SEED + 1), settings, journal,
                      cache=cache, seeds=[("user", outside)]).run()
    rows = [r for r in journal.session_evaluations(outcome.session_id) if r.generation >= 0]
    unrecorded = [r for r in rows if r.result.status is Status.NOT_RECORDED]
    assert evaluator.not_recorded == len(unrecorded) == 1
    assert unrecorded[0].generation == 0 and unrecorded[0].candidate.key == task.candidate(outside).key
    assert outcome.evaluations == 6  # the unrecorded seed counts against the budget
    assert all(r.result.status is Status.OK for r in rows if r is not unrecorded[0])
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
