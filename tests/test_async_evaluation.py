"""The asynchronous session and the compile farm on fake workers: a slow compile holds nobody,
what the strategy is told is the same run after run (ask order), compile workers hand their
artifacts to GPU workers, a dying worker costs only its configs in flight, and 1 to 8 GPU
workers give the same session.

Most clusters here are of threads in this process (fast to start on a busy machine); the
tests that kill a worker use worker processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from autotune.store.cache import Cache  # noqa: E402
from autotune.distributed import on_worker  # noqa: E402
from autotune.distributed.cluster import parse_workers, start_local_cluster  # noqa: E402
from autotune.distributed.evaluator import distributed_evaluator  # noqa: E402
from autotune.distributed.fake_farm import FakeFarmFactory  # noqa: E402
from autotune.evaluators.base import InOrder  # noqa: E402
from autotune.evaluators.fake import FakeEvaluator  # noqa: E402
from autotune.session import Session, SessionSettings, SilentReporter  # noqa: E402
from autotune.strategies import get_strategy  # noqa: E402
from autotune.types import Status  # noqa: E402
from distributed_fakes import SlowCompile, collect_results, generation_of, hashed_cost, quick_compile_s  # noqa: E402
from search_spaces.space import canonical_json  # noqa: E402

SEED, BUDGET, WINDOW = 3, 30, 4
OPTIONS = {"initial_population": 6}


@pytest.fixture(scope="module")
def threads():
    """Eight GPU workers and two compile workers, threads of this process."""
    from distributed import Client

    names = {f"gpu{i}": {} for i in range(8)} | {f"compile{i}": {} for i in range(2)}
    roles = {name: {"compile": 1} if name.startswith("compile") else {"gpu": 1} for name in names}
    cluster = start_local_cluster(names, roles, in_process=True)
    client = Client(cluster)
    client.wait_for_workers(10, timeout=60)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(autouse=True)
def _workers_in_this_process_may_leave_writes_alone(monkeypatch):
    monkeypatch.setattr(on_worker, "forbid_writes_in_this_process", lambda reason: None)


class Told:
    """A strategy wrapper that remembers what it was told, in order, and when."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.told, self.asked = inner, [], []

    def ask(self, n: int) -> list:
        points = self.inner.ask(n)
        self.asked.append([canonical_json(p) for p in points])
        return points

    def tell(self, observations) -> None:
        now = time.monotonic()
        self.told += [(canonical_json(p), r.status.value, r.median_ms, now) for p, r in observations]
        self.inner.tell(observations)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Arrivals(SilentReporter):
    def __init__(self) -> None:
        self.order: list[tuple[str, float]] = []

    def result(self, candidate, result) -> None:
        self.order.append((canonical_json(candidate.params), time.monotonic()))


def session(task, evaluator, db: Path, *, order: str = "ask", budget: int = BUDGET, window: int | None = WINDOW,
            seconds: float | None = None) -> tuple[Any, Told, Arrivals, Cache]:
    strategy = Told(get_strategy("pattern")(task.space, seed=SEED, **OPTIONS))
    settings = SessionSettings(strategy="pattern", seed=SEED, budget=budget, seconds=seconds, mode="gpu",
                               tell_order=order, in_flight=window)
    journal, arrivals = Cache.open(db, create=True), Arrivals()
    try:
        outcome = Session(task, evaluator, strategy, settings, journal, reporter=arrivals).run()
    finally:
        evaluator.close()
    return outcome, strategy, arrivals, journal


def told(strategy: Told) -> list[tuple[str, str, float | None]]:
    return [entry[:3] for entry in strategy.told]


@pytest.fixture(scope="module")
def reference(triton_task, tmp_path_factory):
    """The same session in this process, one config at a time: what every cluster must match."""
    outcome, strategy, _arrivals, _journal = session(triton_task, InOrder(FakeEvaluator(hashed_cost)),
                                                     tmp_path_factory.mktemp("ref") / "r.db")
    return outcome, strategy


# -- what the strategy is told: the same order, run after run, whatever the workers ---------------
@pytest.mark.parametrize("gpus, farm", [(1, False), (2, True), (4, False), (8, True)])
def test_the_same_session_on_1_2_4_8_gpu_workers_with_or_without_a_farm(gpus, farm, reference, triton_task,
                                                                       threads, tmp_path):
    factory = FakeFarmFactory(hashed_cost, quick_compile_s, bench_s=0.005)
    evaluator = distributed_evaluator(threads, factory, gpus=gpus, farm=farm, reference=triton_task.default_candidate())
    assert evaluator.pipeline.farm is farm and len(evaluator.calibration) == gpus
    outcome, strategy, _arrivals, journal = session(triton_task, evaluator, tmp_path / "d.db")
    expected_outcome, expected = reference
    assert told(strategy) == told(expected) and len(strategy.asked) >= 4  # same results, same order
    assert strategy.asked == expected.asked
    assert outcome.best[0].key == expected_outcome.best[0].key and outcome.evaluations == BUDGET
    rows = journal.session_evaluations(outcome.session_id)
    used = {row.result.measured_on for row in rows if row.generation > 0}
    assert used <= {f"gpu{i}" for i in range(gpus)} and (len(used) >= 2 if gpus > 1 else used == {"gpu0"})


def test_two_runs_with_other_timings_tell_the_same_order(reference, triton_task, threads, tmp_path):
    """Compile times that reverse which configs come back first change nothing the strategy sees."""
    runs = []
    for index, compile_s in enumerate([quick_compile_s, SlowCompile(victim="none", seconds=0.0)]):
        evaluator = distributed_evaluator(threads, FakeFarmFactory(hashed_cost, compile_s, bench_s=0.005), gpus=3)
        _outcome, strategy, arrivals, _journal = session(triton_task, evaluator, tmp_path / f"{index}.db")
        runs.append((told(strategy), [key for key, _ in arrivals.order]))
    (told_one, arrived_one), (told_two, arrived_two) = runs
    assert told_one == told_two == told(reference[1])
    assert sorted(arrived_one) == sorted(arrived_two)


# -- a slow compile holds nobody -------------------------------------------------------------------
def _victim(reference) -> str:
    return reference[1].asked[1][0]  # the first config of the second generation


def test_a_slow_compile_does_not_hold_the_others_and_they_are_told_first(reference, triton_task, threads,
                                                                          tmp_path):
    victim = _victim(reference)
    factory = FakeFarmFactory(hashed_cost, SlowCompile(victim=victim, seconds=2.0), bench_s=0.005)
    evaluator = distributed_evaluator(threads, factory, gpus=2, farm=True)
    outcome, strategy, arrivals, _journal = session(triton_task, evaluator, tmp_path / "s.db", order="completion")
    arrived = [key for key, _ in arrivals.order]
    told_keys = [entry[0] for entry in strategy.told]
    victim_arrived = dict(arrivals.order)[victim]
    before = [entry for entry in strategy.told if entry[3] < victim_arrived]
    asked_after = {key for generation in strategy.asked[2:] for key in generation}
    assert len(before) >= 10 and asked_after & {entry[0] for entry in before}  # later generations, told first
    assert arrived.index(victim) >= 10 and told_keys.index(victim) >= 10
    assert outcome.evaluations == BUDGET and all(entry[1] == "ok" for entry in strategy.told)


def test_in_ask_order_a_slow_compile_still_holds_no_evaluation(reference, triton_task, threads, tmp_path):
    """Telling waits for the slow config; measuring does not: the configs after it come back first."""
    victim = _victim(reference)
    factory = FakeFarmFactory(hashed_cost, SlowCompile(victim=victim, seconds=1.5), bench_s=0.005)
    evaluator = distributed_evaluator(threads, factory, gpus=2, farm=True)
    _outcome, strategy, arrivals, _journal = session(triton_task, evaluator, tmp_path / "a.db", window=8)
    arrived = [key for key, _ in arrivals.order]
    after_victim = reference[1].asked[1][1:]
    assert all(arrived.index(key) < arrived.index(victim) for key in after_victim)
    assert told(strategy) == told(session(triton_task, InOrder(FakeEvaluator(hashed_cost)), tmp_path / "b.db",
                                          window=8)[1])


def test_the_compile_deadline_adapts_to_the_sessions_compile_times(triton_task, threads, tmp_path):
    """After 16 quick compiles a config that compiles for long is cut at the floor, 5 s, not 60 s."""
    candidates = generation_of(triton_task, 20)
    victim = canonical_json(candidates[-1].params)
    factory = FakeFarmFactory(hashed_cost, SlowCompile(victim=victim, seconds=30.0), bench_s=0.0)
    evaluator = distributed_evaluator(threads, factory, gpus=2, farm=True)
    try:
        evaluator.submit(candidates[:-1])
        results = collect_results(evaluator, len(candidates) - 1, 20.0)
        started = time.monotonic()
        evaluator.submit(candidates[-1:])
        (slow,) = collect_results(evaluator, 1, 20.0)
    finally:
        evaluator.close()
    assert all(r.ok for r in results)
    assert slow.status is Status.COMPILE_TIMEOUT and slow.compile_s == 5.0 and time.monotonic() - started < 10


# -- helpers and small rules -------------------------------------------------------------------------


def test_workers_with_compile_workers():
    spec = parse_workers("local:2+compile:3")
    assert (spec.kind, spec.count, spec.compilers, spec.text) == ("local", 2, 3, "local:2+compile:3")
    assert parse_workers("local-gpus+compile:8").compilers == 8
    with pytest.raises(ValueError, match="compile"):
        parse_workers("local:2+compile:0")


def test_a_bad_tell_order_or_window_is_refused():
    with pytest.raises(ValueError, match="tell_order"):
        SessionSettings(strategy="random", seed=1, budget=4, tell_order="random")
    with pytest.raises(ValueError, match="in_flight"):
        SessionSettings(strategy="random", seed=1, budget=4, in_flight=0)
