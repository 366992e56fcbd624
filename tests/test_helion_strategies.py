"""Helion's own searches (helion-pattern, helion-lfbo) driven through our session, on CPU.

The session's FakeEvaluator replaces Helion's benchmark, so the searches run end to end
on the CPU-bound Helion softmax from conftest.
"""

from __future__ import annotations

import random

import pytest

from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.strategies.helion_search import HelionSearchError
from autotune.types import Result, Status
from conftest import table_count
from search_spaces.space import params_key

NAMES = ["helion-pattern", "helion-lfbo"]


def cost(params) -> float | Status:
    """Prefers num_warps=16 and a long reduction loop; some configs fail."""
    if params["num_stages"] == 2:
        return Status.COMPILE_ERROR
    if params["num_warps"] == 32:
        return Status.RUN_TIMEOUT
    loop = params["reduction_loops[0]"] or 2048  # None: the whole row in one tile
    return 1.0 + abs(params["num_warps"] - 16) / 16 + 64 / loop + 0.01 * params["block_sizes[0]"]


def run(task, tmp_path, name, *, seed=1, budget=40, effort="quick", db="s.db"):
    from autotune.store.cache import Cache

    strategy = get_strategy(name).from_task(task, seed=seed, budget=budget, effort=effort)
    fake = FakeEvaluator(cost)
    cache = Cache.open(tmp_path / db, create=True)
    try:
        settings = SessionSettings(strategy=name, seed=seed, budget=budget, mode="fake")
        outcome = Session(task, fake, strategy, settings, cache).run()
    finally:
        cache.close()
    return outcome, fake, strategy


@pytest.mark.parametrize("name", NAMES)
def test_session_with_a_helion_search(name, helion_task, tmp_path):
    settings_before = helion_task.bound.settings.to_dict()
    random.seed(99)
    outcome, fake, strategy = run(helion_task, tmp_path, name)
    assert random.random() == random.Random(99).random()  # Helion's reseeding did not leak out
    assert outcome.exit_reason == "budget" and outcome.evaluations == 40
    assert len(fake.calls) == 41 == len(set(fake.calls))  # the default (generation 0) + 40, no repeats
    db = tmp_path / "s.db"
    assert table_count(db, "evaluations", "session_id = ?", [outcome.session_id]) == 41
    assert table_count(db, "evaluations", "session_id = ? AND generation > 0", [outcome.session_id]) == 40
    assert outcome.status_counts["ok"] < 41 and outcome.best[1].objective <= outcome.default[1].objective
    assert not strategy.helion_thread.is_alive()
    assert strategy.ask(8) == []  # done
    assert helion_task.bound.settings.to_dict() == settings_before  # the search ran on a copy


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_configs(name, helion_task, tmp_path):
    first = run(helion_task, tmp_path, name, db="a.db")[1].calls
    second = run(helion_task, tmp_path, name, db="b.db")[1].calls
    assert first == second


def test_full_effort_depends_on_the_seed(helion_task, tmp_path):
    """Full effort starts from a random population of 100 drawn with the seed."""
    outcome, first, strategy = run(helion_task, tmp_path, "helion-pattern", effort="full", budget=20, db="a.db")
    assert strategy.helion_kwargs["initial_population"] == 100 and strategy.helion_kwargs["copies"] == 5
    again = run(helion_task, tmp_path, "helion-pattern", effort="full", budget=20, db="b.db")[1]
    other = run(helion_task, tmp_path, "helion-pattern", seed=2, effort="full", budget=20, db="c.db")[1]
    assert outcome.evaluations == 20 and first.calls == again.calls != other.calls


def test_ask_splits_a_batch_and_waits_for_every_result(helion_task):
    strategy = get_strategy("helion-pattern").from_task(helion_task, seed=0, budget=200)
    default = helion_task.space.default
    strategy.warm_start([(default, Result(key="d", status=Status.OK, median_ms=2.0))])
    seed_batch = strategy.ask(8)  # Helion's initial population: the default (known) and a coverage config
    assert seed_batch and default not in seed_batch
    strategy.tell([(p, Result(key=params_key(p), status=Status.OK, median_ms=1.9)) for p in seed_batch])
    first = strategy.ask(3)  # the first generation of neighbours is larger than 3
    assert len(first) == 3
    second = strategy.ask(100)  # the rest of Helion's batch, still waiting on the first three
    assert second and not {params_key(p) for p in first} & {params_key(p) for p in second}
    strategy.tell([(p, Result(key=params_key(p), status=Status.OK, median_ms=1.5)) for p in second])
    assert strategy.ask(5) == []  # nothing new until the first three are told
    strategy.tell([(p, Result(key=params_key(p), status=Status.CRASH)) for p in first])
    assert strategy.ask(5)  # Helion moved on to its next generation
    strategy.close()
    assert not strategy.helion_thread.is_alive() and strategy.ask(5) == []


@pytest.mark.parametrize("name", NAMES)
def test_an_exception_in_helion_surfaces_in_ask(name, helion_task, tmp_path, monkeypatch):
    strategy = get_strategy(name).from_task(helion_task, seed=0, budget=40)
    calls = []

    def boom(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # after Helion's initial population
            raise KeyError("boom from inside Helion")

    monkeypatch.setattr(strategy.search, "rebenchmark_population", boom)
    default = helion_task.space.default
    strategy.warm_start([(default, Result(key="d", status=Status.OK, median_ms=2.0))])
    batch = strategy.ask(1000)
    assert batch
    strategy.tell([(p, Result(key=params_key(p), status=Status.OK, median_ms=1.0 + i / 100))
                   for i, p in enumerate(batch)])
    with pytest.raises(HelionSearchError, match="boom from inside Helion"):
        strategy.ask(4)
    assert not strategy.helion_thread.is_alive()


def test_an_exception_in_helion_ends_the_session(helion_task, tmp_path, monkeypatch):
    strategy = get_strategy("helion-lfbo").from_task(helion_task, seed=0, budget=10)

    def boom(*args, **kwargs):
        raise RuntimeError("broken surrogate")

    monkeypatch.setattr(strategy.search, "_fit_surrogate", boom)
    from autotune.store.cache import Cache

    cache = Cache.open(tmp_path / "e.db", create=True)
    settings = SessionSettings(strategy="helion-lfbo", seed=0, budget=10, mode="fake")
    with pytest.raises(HelionSearchError, match="LFBOTreeSearch failed: RuntimeError: broken surrogate"):
        Session(helion_task, FakeEvaluator(cost), strategy, settings, cache).run()
    cache.close()


@pytest.mark.parametrize("name", NAMES)
def test_needs_a_live_helion_task(name, triton_task, helion_task):
    cls = get_strategy(name)
    with pytest.raises(ValueError, match="needs the Helion kernel bound"):
        cls.from_task(triton_task, seed=0, budget=10)
    with pytest.raises(ValueError, match="needs the Helion kernel bound"):
        cls(helion_task.space, seed=0)
    with pytest.raises(ValueError, match="effort"):
        cls.from_task(helion_task, seed=0, budget=10, effort="max")
    with pytest.raises(TypeError):
        cls.from_task(helion_task, seed=0, budget=10, temperature=3)


@pytest.mark.parametrize("name", NAMES)
def test_helion_ends_its_search_before_a_large_budget(name, helion_task, tmp_path):
    outcome, fake, strategy = run(helion_task, tmp_path, name, budget=10_000)
    assert outcome.exit_reason == "strategy finished" and 40 < outcome.evaluations < 10_000
    assert len(fake.calls) == len(set(fake.calls)) == outcome.evaluations + 1
    assert strategy.best_config is not None and not strategy.helion_thread.is_alive()


def test_seeds_the_session_evaluates_first_count_against_the_budget(helion_task, tmp_path):
    import inspect

    if "seeds" not in inspect.signature(Session.__init__).parameters:
        pytest.skip("this session has no seeds")
    from autotune.store.cache import Cache

    seeds = [("heuristic", {**helion_task.space.default, "num_warps": 8}),
             ("cache", {**helion_task.space.default, "num_stages": 4})]
    strategy = get_strategy("helion-pattern").from_task(helion_task, seed=0, budget=20)
    fake = FakeEvaluator(cost)
    cache = Cache.open(tmp_path / "seeds.db", create=True)
    settings = SessionSettings(strategy="helion-pattern", seed=0, budget=20, mode="fake")
    outcome = Session(helion_task, fake, strategy, settings, cache, seeds=seeds).run()
    cache.close()
    assert outcome.exit_reason == "budget" and outcome.evaluations == 20
    assert len(fake.calls) == len(set(fake.calls)) == 21  # the free default, 2 seeds, 18 of Helion's
    assert not strategy.helion_thread.is_alive()  # Helion saw its budget run out and finished


def test_a_silent_helion_thread_times_out_in_ask(helion_task, monkeypatch):
    import time

    strategy = get_strategy("helion-pattern").from_task(helion_task, seed=0, budget=10)
    strategy.wait_timeout_s = 0.5
    monkeypatch.setattr(strategy.search, "_autotune", lambda: time.sleep(2.0))
    with pytest.raises(HelionSearchError, match="gave no batch in 0.5 s"):
        strategy.ask(4)
    with pytest.raises(HelionSearchError):
        strategy.ask(4)  # the failure stays
