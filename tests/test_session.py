"""The session loop with the fake evaluator, on the CPU-bound Helion softmax and the Triton space."""

from __future__ import annotations

import itertools
import time
from collections import Counter

import pytest

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.strategies.base import Strategy
from autotune.types import Source, Status
from conftest import hashed_cost, table_count


def run_session(task, db: Cache, *, strategy="random", seed=0, budget=20, cost=hashed_cost, fake=None,
                mode="gpu", fresh=False, seconds=None, generation_size=None, strategy_options=None, **fake_kwargs):
    fake = fake or FakeEvaluator(cost, **fake_kwargs)
    options = dict(strategy_options or {})
    if strategy == "grid" and "budget" not in options:
        options["budget"] = budget
    strat = get_strategy(strategy)(task.space, seed=seed, **options)
    settings = SessionSettings(strategy=strategy, seed=seed, budget=budget, seconds=seconds, fresh=fresh,
                               generation_size=generation_size, mode=mode)
    outcome = Session(task, fake, strat, settings, db).run()
    return outcome, fake


def keys_in_order(db: Cache, session_id: int) -> list[str]:
    return [r.candidate.key for r in db.session_evaluations(session_id)]


@pytest.fixture(params=["helion", "triton"])
def task(request, helion_task, triton_task):
    return helion_task if request.param == "helion" else triton_task


# -- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [dict(budget=0), dict(budget=-3), dict(budget=None),
                                    dict(budget=None, seconds=0), dict(budget=5, seconds=-1.0)])
def test_settings_refuse_bad_budgets(kwargs):
    with pytest.raises(ValueError):
        SessionSettings(strategy="random", seed=0, **kwargs)


# -- budget and bookkeeping --------------------------------------------------------------------


@pytest.mark.parametrize("budget, generation_size", [(20, None), (5, None), (10, 3)])
def test_budget_is_honoured_exactly(task, tmp_db, budget, generation_size):
    outcome, fake = run_session(task, tmp_db, budget=budget, generation_size=generation_size)
    assert outcome.evaluations == budget
    assert outcome.exit_reason == "budget"
    rows = tmp_db.session_evaluations(outcome.session_id)
    assert sum(r.generation == 0 for r in rows) == 1  # the default config, free of budget
    assert sum(r.generation > 0 for r in rows) == budget
    assert rows[0].generation == 0 and rows[0].candidate.key == task.default_candidate().key
    assert len(fake.calls) == budget + 1
    if generation_size:
        sizes = Counter(r.generation for r in rows if r.generation > 0)
        expected = [generation_size] * (budget // generation_size) + ([budget % generation_size] if budget % generation_size else [])
        assert [sizes[g] for g in sorted(sizes)] == expected
    assert [g.generation for g in outcome.generations] == list(range(len(outcome.generations)))


def test_a_generation_limit_ends_the_search_after_that_many_generations(task, tmp_db):
    """`generations` (what a re-run of a recorded session stops at) ends the search once that many
    generations are told, before the budget: generation 0 and then exactly three."""
    strat = get_strategy("random")(task.space, seed=0)
    settings = SessionSettings(strategy="random", seed=0, budget=40, generation_size=4, generations=3)
    outcome = Session(task, FakeEvaluator(hashed_cost), strat, settings, tmp_db).run()
    assert outcome.exit_reason == "generations"
    assert sorted({r.generation for r in tmp_db.session_evaluations(outcome.session_id)} - {-1}) == [0, 1, 2, 3]
    assert outcome.evaluations == 12


def test_no_config_key_is_evaluated_twice(task, tmp_db):
    outcome, fake = run_session(task, tmp_db, budget=40, generation_size=7)
    keys = keys_in_order(tmp_db, outcome.session_id)
    assert len(keys) == len(set(keys)) == 41
    assert len(fake.calls) == len(set(fake.calls)) == 41


def test_every_evaluation_is_recorded(task, tmp_path):
    path = tmp_path / "t.db"
    db = Cache.open(path, create=True)
    outcome, fake = run_session(task, db, budget=12, baselines={"torch.softmax": 0.42})
    assert table_count(path, "evaluations") == 13
    assert table_count(path, "evaluations", "session_id = ? AND source = 'measured'", (outcome.session_id,)) == 13
    rows = db.session_evaluations(outcome.session_id)
    assert [r.candidate.key for r in rows] == fake.calls  # in evaluation order
    for row in rows:
        assert row.result.median_ms == pytest.approx(hashed_cost(row.candidate.params))
        assert task.space.violations(row.candidate.params) == []
    # the session row and the outcome agree with the rows
    session = db.session(outcome.session_id)
    best_row = min(rows, key=lambda r: r.result.median_ms)
    assert session["exit_reason"] == "budget" and session["best_key"] == best_row.candidate.key
    assert outcome.best[0].key == best_row.candidate.key
    assert session["evaluations"] == 13 and session["failures"] == 0
    assert session["space_fingerprint"] == task.fingerprint and session["mode"] == "gpu"
    assert db.get_space(task.fingerprint).space == task.space
    assert db.baselines(session_id=outcome.session_id)["torch.softmax"].median_ms == 0.42
    assert outcome.baselines["torch.softmax"].median_ms == 0.42
    # every asked point is remembered as an alias of its normalised config
    aliases = db.aliases(task.fingerprint)
    assert {task.candidate(point).key for point, _native in aliases.values()} == {r.candidate.key for r in rows}
    db.close()


def test_injected_failures_are_recorded_and_the_session_goes_on(triton_task, tmp_db):
    def cost(params):
        if params["num_warps"] == 32:
            return Status.COMPILE_ERROR
        if params["num_stages"] == 4:
            return Status.CRASH
        return hashed_cost(params)

    space = triton_task.space
    outcome, fake = run_session(triton_task, tmp_db, strategy="grid", budget=1000, cost=cost)
    every = [dict(zip(space.names, combo)) for combo in itertools.product(*(p.values() for p in space.parameters))]
    every = [p for p in every if not space.violations(p)]
    expected = Counter("compile_error" if p["num_warps"] == 32 else "crash" if p["num_stages"] == 4 else "ok"
                       for p in every)
    rows = tmp_db.session_evaluations(outcome.session_id)
    assert Counter(r.result.status.value for r in rows) == expected
    assert outcome.status_counts == expected
    assert outcome.evaluations == len(every) - 1  # the whole grid; the default was generation 0
    assert outcome.exit_reason == "strategy finished"
    for row in rows:
        if row.result.status is not Status.OK:
            assert row.result.median_ms is None and row.result.error.startswith("injected")
    session = tmp_db.session(outcome.session_id)
    assert session["failures"] == expected["compile_error"] + expected["crash"]
    assert outcome.best[1].ok and outcome.best[0].params["num_warps"] != 32
    assert outcome.best[1].median_ms == min(hashed_cost(p) for p in every if p["num_warps"] != 32
                                            and p["num_stages"] != 4)


def test_a_failing_default_config_does_not_stop_the_session(helion_task, tmp_db):
    default_key = helion_task.default_candidate().key
    fake = FakeEvaluator(lambda p: Status.WRONG_RESULT if helion_task.candidate(p).key == default_key
                         else hashed_cost(p))
    outcome, _ = run_session(helion_task, tmp_db, budget=6, fake=fake)
    assert outcome.default[1].status is Status.WRONG_RESULT
    assert outcome.evaluations == 6 and outcome.best is not None and outcome.best[0].key != default_key


# -- reuse ---------------------------------------------------------------------------------------


def test_reuse_skips_the_evaluator_for_measured_configs(task, tmp_db):
    first, fake1 = run_session(task, tmp_db, seed=4, budget=15)
    second, fake2 = run_session(task, tmp_db, seed=4, budget=15)
    assert fake2.calls == []
    rows1 = tmp_db.session_evaluations(first.session_id)
    rows2 = tmp_db.session_evaluations(second.session_id)
    assert [r.candidate.key for r in rows2] == [r.candidate.key for r in rows1]
    assert all(r.result.source is Source.REUSED for r in rows2)
    assert [r.result.median_ms for r in rows2] == [r.result.median_ms for r in rows1]
    assert second.evaluations == 15 and second.best[0].key == first.best[0].key
    # reused rows are not measurements: the measured history is unchanged
    assert sum(len(v) for v in tmp_db.measurements(task.fingerprint).values()) == 16


def test_reuse_measures_only_new_configs(task, tmp_db):
    first, _ = run_session(task, tmp_db, seed=4, budget=10)
    second, fake = run_session(task, tmp_db, seed=9, budget=25)
    measured_before = {r.candidate.key for r in tmp_db.session_evaluations(first.session_id)}
    rows = tmp_db.session_evaluations(second.session_id)
    reused = {r.candidate.key for r in rows if r.result.source is Source.REUSED}
    measured = {r.candidate.key for r in rows if r.result.source is Source.MEASURED}
    assert reused == {r.candidate.key for r in rows} & measured_before
    assert task.default_candidate().key in reused
    assert set(fake.calls) == measured and len(fake.calls) == len(measured)
    assert not measured & measured_before


def test_fresh_measures_again(task, tmp_db):
    first, _ = run_session(task, tmp_db, seed=4, budget=8)
    again, fake = run_session(task, tmp_db, seed=4, budget=8, fresh=True, cost=lambda p: 2 * hashed_cost(p))
    rows = tmp_db.session_evaluations(again.session_id)
    assert len(fake.calls) == 9 and all(r.result.source is Source.MEASURED for r in rows)
    key = rows[-1].candidate.key
    assert tmp_db.lookup(task.fingerprint, key).median_ms == pytest.approx(2 * hashed_cost(rows[-1].candidate.params))
    assert [len(v) for v in tmp_db.measurements(task.fingerprint).values()] == [2] * 9


def test_only_measuring_runs_reuse(triton_task, tmp_db):
    run_session(triton_task, tmp_db, seed=4, budget=8)
    again, fake = run_session(triton_task, tmp_db, seed=4, budget=8, mode="fake")
    assert len(fake.calls) == 9


# -- determinism -----------------------------------------------------------------------------------


def test_random_strategy_is_deterministic_for_a_seed(task, tmp_path):
    sequences = []
    for name, seed in (("a", 21), ("b", 21), ("c", 22)):
        db = Cache.open(tmp_path / f"{name}.db", create=True)
        outcome, _ = run_session(task, db, seed=seed, budget=18)
        sequences.append(keys_in_order(db, outcome.session_id))
        db.close()
    assert sequences[0] == sequences[1]
    assert sequences[0] != sequences[2]
    assert sequences[0][0] == sequences[2][0]  # both start from the default config


# -- time budget -----------------------------------------------------------------------------------


def test_seconds_budget_stops_between_generations(triton_task, tmp_db):
    started = time.monotonic()
    outcome, fake = run_session(triton_task, tmp_db, budget=None, seconds=0.5, delay_s=0.05, generation_size=1)
    elapsed = time.monotonic() - started
    assert outcome.exit_reason == "seconds"
    assert 1 <= outcome.evaluations < 60
    assert elapsed < 5
    assert len(tmp_db.session_evaluations(outcome.session_id)) == outcome.evaluations + 1
    assert tmp_db.session(outcome.session_id)["exit_reason"] == "seconds"


def test_seconds_budget_stops_inside_a_generation(triton_task, tmp_db):
    started = time.monotonic()
    outcome, fake = run_session(triton_task, tmp_db, budget=None, seconds=0.5, delay_s=0.05)
    assert outcome.exit_reason == "seconds"
    assert 1 <= outcome.evaluations < 16  # the first generation (16 configs, 0.8 s) was cut short
    assert time.monotonic() - started < 5
    assert len(tmp_db.session_evaluations(outcome.session_id)) == outcome.evaluations + 1


# -- strategies that misbehave -------------------------------------------------------------------


class _Scripted(Strategy):
    """Proposes a fixed list of generations, then nothing."""

    name = "scripted"

    def __init__(self, space, generations):
        super().__init__(space, 0)
        self.generations = list(generations)
        self.told = []

    def ask(self, n):
        return self.generations.pop(0)[:n] if self.generations else []

    def tell(self, observations):
        self.told.append(list(observations))
        super().tell(observations)


def _scripted_session(task, db, generations, budget=50):
    fake = FakeEvaluator(hashed_cost)
    strategy = _Scripted(task.space, generations)
    settings = SessionSettings(strategy="scripted", seed=0, budget=budget, mode="gpu")
    return Session(task, fake, strategy, settings, db).run(), fake, strategy


def test_repeated_and_invalid_proposals_are_not_evaluated(triton_task, tmp_db):
    space = triton_task.space
    default = dict(space.default)
    p1 = {**default, "num_warps": 2}
    p2 = {**default, "num_warps": 4}
    invalid = {**default, "num_warps": 3}
    outcome, fake, strategy = _scripted_session(triton_task, tmp_db, [[p1, p1, default, invalid], [p2, p1]])
    assert fake.calls == [triton_task.candidate(p).key for p in (default, p1, p2)]
    assert outcome.evaluations == 2 and outcome.exit_reason == "strategy finished"
    # every proposal is answered, repeats from the session's own results, the invalid one as INVALID
    gen1 = strategy.told[1]
    assert [r.status for _, r in gen1].count(Status.INVALID) == 1
    assert len(gen1) == 4
    assert {r.key for p, r in gen1 if p == p1} == {triton_task.candidate(p1).key}
    assert len(strategy.told[2]) == 2
    assert not any(r.status is Status.INVALID for r in tmp_db.session_evaluations(outcome.session_id)
                   for r in [r.result])


def test_a_strategy_that_only_repeats_ends_the_session(triton_task, tmp_db):
    default = dict(triton_task.space.default)
    outcome, fake, _ = _scripted_session(triton_task, tmp_db, [[default]] * 10)
    assert outcome.exit_reason == "strategy exhausted"
    assert outcome.evaluations == 0 and len(fake.calls) == 1


def test_points_normalising_to_one_config_are_evaluated_once(helion_task, tmp_db):
    import random

    rng = random.Random(5)
    pairs = []
    while len(pairs) < 3:
        point = helion_task.space.sample(rng)
        candidate = helion_task.candidate(point)
        if candidate.params != point and candidate.key != helion_task.default_candidate().key:
            pairs.append((point, candidate))
    generations = [[pairs[0][0], pairs[0][1].params, pairs[1][0]], [pairs[1][1].params, pairs[2][0]],
                   [pairs[2][1].params, pairs[0][0]]]
    outcome, fake, strategy = _scripted_session(helion_task, tmp_db, generations)
    expected = [helion_task.default_candidate().key] + list(dict.fromkeys(c.key for _, c in pairs))
    assert fake.calls == expected
    keys = keys_in_order(tmp_db, outcome.session_id)
    assert keys == expected
    assert outcome.evaluations == len(expected) - 1
    # the strategy hears back about every raw point it proposed, with its config's result
    told = [(p, r) for batch in strategy.told[1:] for p, r in batch]
    assert len(told) == 7
    for point, result in told:
        assert result.key == helion_task.candidate(point).key and result.ok
