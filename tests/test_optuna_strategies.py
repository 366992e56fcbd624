"""The Optuna strategies ("tpe", "gp"): parameter mapping, bookkeeping with the study, and search quality."""

from __future__ import annotations

import math
import statistics
import sys

import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.strategies.optuna_search import GPSearch, OptunaSearch, TPESearch
from autotune.strategies.random_search import RandomSearch
from autotune.types import Result, Status
from conftest import hashed_cost
from search_spaces import Choice, Integer, InvalidConfig, Ordinal, PowerOfTwo, ProductLimit, SearchSpace, params_key
from search_spaces.parameters import _same


def odd_space() -> SearchSpace:
    """Every awkward value a Choice can hold, an unsorted Ordinal and a constraint."""
    params = (
        PowerOfTwo(name="block", low=16, high=1024, default_value=64),
        Integer(name="stages", low=-2, high=5, default_value=1),
        Ordinal(name="ord", choices=(64, 16, 32), default_value=16),
        Choice(name="flag", choices=(None, True, False), default_value=None),
        Choice(name="perm", choices=((0, 1, 2), (2, 1, 0), (1, 0, 2)), default_value=(0, 1, 2)),
        Choice(name="mixed", choices=(0, False, 1, True, "1", 1.5), default_value=False),
        Choice(name="policy", choices=("", "first", "last"), default_value=""),
        Choice(name="only", choices=("pointer",), default_value="pointer"),
    )
    default = {p.name: p.default for p in params}
    return SearchSpace(kernel="odd", family="triton", parameters=params, default=default,
                       constraints=(ProductLimit(names=("block", "ord"), limit=2**14),))


def ok(params, ms: float) -> Result:
    return Result(key=params_key(params), status=Status.OK, median_ms=ms)


def failed(params, status: Status = Status.COMPILE_ERROR) -> Result:
    return Result(key=params_key(params), status=status, error="boom")


def states_by_key(strategy: OptunaSearch) -> dict[str, TrialState]:
    trials = strategy.study.get_trials(deepcopy=False)
    return {params_key(strategy.decode(t.params)): t.state for t in trials if "rejected" not in t.user_attrs}


# -- the parameter mapping ---------------------------------------------------------------------


def assert_round_trip(space: SearchSpace) -> None:
    strategy = TPESearch(space)
    for axis, parameter in zip(strategy.axes, space.parameters):
        expected = {PowerOfTwo: IntDistribution, Integer: IntDistribution, Ordinal: IntDistribution,
                    Choice: CategoricalDistribution}[type(parameter)]
        assert type(axis.distribution) is expected, parameter.name
        encoded = [axis.encode(v) for v in parameter.values()]
        assert len({repr(e) for e in encoded}) == len(encoded), parameter.name  # injective
        for value, code in zip(parameter.values(), encoded):
            internal = axis.distribution.to_internal_repr(code)
            assert axis.distribution._contains(internal)
            back = axis.decode(axis.distribution.to_external_repr(internal))
            assert _same(back, value) and type(back) is type(value), (parameter.name, value, back)
        if isinstance(parameter, (PowerOfTwo, Integer, Ordinal)):
            assert encoded == sorted(encoded), parameter.name  # the model sees the order


def test_round_trip_of_every_helion_value(helion_task):
    assert_round_trip(helion_task.space)
    axes = {a.name: a for a in TPESearch(helion_task.space).axes}
    assert axes["block_sizes[0]"].distribution == IntDistribution(0, 6)  # exponents of 1..64
    assert axes["pid_type"].distribution.choices == ("flat", "persistent_blocked", "persistent_interleaved")


def test_round_trip_of_awkward_choices():
    space = odd_space()
    assert_round_trip(space)
    axes = {a.name: a for a in TPESearch(space).axes}
    assert axes["flag"].distribution.choices == (None, True, False)  # plain values, told apart
    assert axes["perm"].distribution.choices == (0, 1, 2)  # lists go by index
    assert axes["mixed"].distribution.choices == tuple(range(6))  # 0 == False, 1 == True: by index
    assert axes["ord"].distribution == IntDistribution(0, 2)


def test_awkward_values_survive_the_study():
    """Seeds (enqueued), warm starts (added trials) and the model's own draws decode to points of the space."""
    space = odd_space()
    seeds = [{"perm": [2, 1, 0], "mixed": True, "flag": False}, {"mixed": 1, "flag": True, "ord": 64}]
    strategy = TPESearch(space, seed=1, seeds=seeds, n_startup_trials=4)
    known = space.complete({"perm": [1, 0, 2], "mixed": "1", "flag": None, "stages": -2})
    strategy.warm_start([(known, ok(known, 0.5))])
    first = strategy.ask(2)
    assert first == [space.complete(s) for s in seeds]
    assert type(first[0]["mixed"]) is bool and type(first[1]["mixed"]) is int
    strategy.tell([(p, ok(p, 1.0 + i)) for i, p in enumerate(first)])
    for _ in range(5):
        batch = strategy.ask(6)
        for point in batch:
            assert space.violations(point) == [] and list(point) == space.names
        strategy.tell([(p, ok(p, hashed_cost(p))) for p in batch])
    done = [strategy.decode(t.params) for t in strategy.study.get_trials(states=(TrialState.COMPLETE,))]
    assert known in done and all(p in done for p in first)


# -- bookkeeping ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_failures_are_told_as_fail(name, helion_task):
    space = helion_task.space
    strategy = get_strategy(name)(space, seed=0)
    bad_default = space.default
    strategy.warm_start([(bad_default, failed(bad_default, Status.CRASH))])
    batch = strategy.ask(6)
    statuses = [Status.OK, Status.COMPILE_ERROR, Status.OK, Status.OUT_OF_RESOURCES, Status.WRONG_RESULT,
                Status.INVALID]
    results = [ok(p, 0.25 * (i + 1)) if s is Status.OK else failed(p, s)
               for i, (p, s) in enumerate(zip(batch, statuses))]
    strategy.tell(list(zip(batch, results)))
    states = states_by_key(strategy)
    assert states[params_key(bad_default)] is TrialState.FAIL
    for point, result in zip(batch, results):
        assert states[params_key(point)] is (TrialState.COMPLETE if result.ok else TrialState.FAIL)
    complete = strategy.study.get_trials(states=(TrialState.COMPLETE,))
    assert sorted(t.value for t in complete) == [0.25, 0.75]
    assert strategy.study.best_value == 0.25
    # telling a result twice changes nothing
    strategy.tell([(batch[1], ok(batch[1], 0.01))])
    assert states_by_key(strategy)[params_key(batch[1])] is TrialState.FAIL


def test_warm_start_results_are_added_as_finished_trials(helion_task):
    space = helion_task.space
    strategy = TPESearch(space, seed=0)
    other = space.complete({"num_warps": 8, "pid_type": "persistent_blocked"})
    strategy.warm_start([(space.default, ok(space.default, 0.42)), (other, failed(other))])
    trials = strategy.study.get_trials()
    assert [(t.state, t.value, t.user_attrs) for t in trials] == [
        (TrialState.COMPLETE, 0.42, {"known": True}), (TrialState.FAIL, None, {"known": True})]
    points = [p for _ in range(5) for p in strategy.ask(8)]
    assert space.default not in points and other not in points


def test_rejected_draws_are_failed_and_never_returned():
    """On a space of 72 points the model soon repeats itself: those draws are FAIL, the strategy still drains it."""
    params = (Ordinal(name="a", choices=(256, 512, 1024), default_value=256),
              PowerOfTwo(name="w", low=1, high=32, default_value=4),
              Integer(name="s", low=1, high=4, default_value=1))
    space = SearchSpace(kernel="k", family="triton", parameters=params, default={"a": 256, "w": 4, "s": 1},
                        constraints=(ProductLimit(names=("a",), limit=16, per=("w",), per_scale=32),))
    valid = [p for p in (dict(a=a, w=w, s=s) for a in (256, 512, 1024) for w in (1, 2, 4, 8, 16, 32)
                         for s in (1, 2, 3, 4)) if not space.violations(p)]
    strategy = TPESearch(space, seed=4, n_startup_trials=5)
    points = []
    while batch := strategy.ask(5):
        points += batch
        strategy.tell([(p, ok(p, hashed_cost(p))) for p in batch])
    assert sorted(map(params_key, points)) == sorted(map(params_key, valid))
    assert strategy.ask(3) == []
    rejected = [t for t in strategy.study.get_trials() if "rejected" in t.user_attrs]
    assert rejected and all(t.state is TrialState.FAIL for t in rejected)
    assert {t.user_attrs["rejected"] for t in rejected} == {"repeat", "invalid"}


def test_no_repeats_on_the_helion_space(helion_task):
    space = helion_task.space
    strategy = TPESearch(space, seed=7)
    strategy.warm_start([(space.default, ok(space.default, 1.0))])
    points = []
    for _ in range(12):
        batch = strategy.ask(16)
        points += batch
        # a cost with one sharp optimum: the model keeps drawing next to it
        strategy.tell([(p, ok(p, 0.1 + abs(math.log2(p["num_warps"]) - 2) + p["num_stages"])) for p in batch])
    keys = [params_key(p) for p in points] + [params_key(space.default)]
    assert len(points) == 192 and len(set(keys)) == len(keys)
    assert all(space.violations(p) == [] for p in points)


def test_seeds_come_first_and_are_validated(helion_task):
    space = helion_task.space
    seeds = [{"num_warps": 8}, {"num_warps": 2, "num_stages": 3}, {}]  # {} is the default: already known
    strategy = TPESearch(space, seed=0, seeds=seeds)
    strategy.warm_start([(space.default, ok(space.default, 1.0))])
    assert strategy.ask(2) == [space.complete(seeds[0]), space.complete(seeds[1])]
    assert space.default not in strategy.ask(16)
    with pytest.raises(InvalidConfig):
        TPESearch(space, seeds=[{"num_warps": 3}])
    with pytest.raises(InvalidConfig):
        TPESearch(space, seeds=[{"warps": 4}])
    with pytest.raises(TypeError):
        TPESearch(space, temperature=2)


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_deterministic_for_a_seed(name, helion_task):
    space = helion_task.space

    def run(seed: int) -> list:
        strategy = get_strategy(name)(space, seed=seed, n_startup_trials=4)
        strategy.warm_start([(space.default, ok(space.default, hashed_cost(space.default)))])
        batches = []
        for _ in range(4 if name == "tpe" else 2):
            batch = strategy.ask(5)
            batches.append(batch)
            strategy.tell([(p, ok(p, hashed_cost(p))) for p in batch])
        return batches

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_gp_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="torch and scipy"):
        GPSearch(odd_space())


def test_a_session_with_tpe(helion_task, tmp_db):
    space = helion_task.space
    strategy = TPESearch(space, seed=0)
    settings = SessionSettings(strategy="tpe", seed=0, budget=30, mode="fake")
    outcome = Session(helion_task, FakeEvaluator(hashed_cost), strategy, settings, tmp_db).run()
    assert outcome.exit_reason == "budget" and outcome.evaluations == 30
    trials = strategy.study.get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 31  # the default config (warm start) and the 30 evaluations
    assert min(t.value for t in trials) == outcome.best[1].median_ms


# -- search quality --------------------------------------------------------------------------------


def smooth_space() -> tuple[SearchSpace, callable]:
    params = (PowerOfTwo(name="x", low=1, high=1024, default_value=1),
              PowerOfTwo(name="y", low=1, high=1024, default_value=1),
              Integer(name="z", low=0, high=20, default_value=0))
    space = SearchSpace(kernel="bowl", family="triton", parameters=params, default={"x": 1, "y": 1, "z": 0})

    def cost(p) -> float:  # squared distance to (x=128, y=8, z=13), in log2 for the powers of two
        return 0.1 + (math.log2(p["x"]) - 7) ** 2 + (math.log2(p["y"]) - 3) ** 2 + (p["z"] - 13) ** 2 / 4

    return space, cost


def best_after(strategy, cost, evaluations: int, generation: int = 4) -> float:
    strategy.warm_start([(strategy.space.default, ok(strategy.space.default, cost(strategy.space.default)))])
    done = 0
    while done < evaluations:
        batch = strategy.ask(min(generation, evaluations - done))
        strategy.tell([(p, ok(p, cost(p))) for p in batch])
        done += len(batch)
    return strategy.best()[1].median_ms


def test_tpe_beats_random_on_a_smooth_bowl():
    space, cost = smooth_space()
    tpe = [best_after(TPESearch(space, seed=s), cost, 40) for s in range(5)]
    rnd = [best_after(RandomSearch(space, seed=s), cost, 40) for s in range(5)]
    assert statistics.median(tpe) < statistics.median(rnd)


def test_gp_beats_random_on_a_smooth_bowl():
    space, cost = smooth_space()
    rnd = [best_after(RandomSearch(space, seed=s), cost, 30) for s in range(5)]
    assert best_after(GPSearch(space, seed=0), cost, 30) < statistics.median(rnd)
