"""The asynchronous session loop in this process, with an evaluator whose results come back in
a shuffled order: told in ask order the strategy sees the same session whatever the order;
told in completion order it does not wait; the budget, the clock and the per-generation lines
hold as in the synchronous loop."""

from __future__ import annotations

import random
import time
from typing import Any, Sequence

import pytest

from autotune.store.cache import Cache
from autotune.evaluators.base import InOrder, is_asynchronous
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings, SilentReporter
from autotune.strategies import get_strategy
from autotune.types import Candidate, Result
from conftest import hashed_cost
from search_spaces.space import canonical_json


class Shuffled:
    """Results come back in an order drawn from `seed`; `held` keys come back only once nothing
    else is left (a slow compile)."""

    description = "shuffled fake"

    def __init__(self, seed: int, held: Sequence[str] = (), slots: int = 4) -> None:
        self.inner, self.rng, self.held, self._slots = FakeEvaluator(hashed_cost), random.Random(seed), set(held), slots
        self.out: list[Candidate] = []
        self.cancelled = 0

    def slots(self) -> int:
        return self._slots

    def submit(self, candidates: Sequence[Candidate]) -> None:
        self.out.extend(candidates)

    def poll(self, timeout: float) -> list[Result]:
        ready = [c for c in self.out if canonical_json(c.params) not in self.held] or self.out
        if not ready:
            return []
        pick = self.rng.choice(ready)
        self.out.remove(pick)
        return list(self.inner.evaluate([pick]))

    def cancel(self) -> None:
        self.cancelled += len(self.out)
        self.out.clear()

    def evaluate(self, candidates):
        return self.inner.evaluate(candidates)

    def baselines(self) -> dict[str, Result]:
        return {}

    def close(self) -> None:
        pass


class Told:
    def __init__(self, inner: Any) -> None:
        self.inner, self.told, self.asked = inner, [], []

    def ask(self, n: int) -> list:
        points = self.inner.ask(n)
        self.asked.append([canonical_json(p) for p in points])
        return points

    def tell(self, observations) -> None:
        self.told += [(canonical_json(p), r.median_ms) for p, r in observations]
        self.inner.tell(observations)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Lines(SilentReporter):
    def __init__(self) -> None:
        self.generations: list[int] = []

    def generation_finished(self, summary) -> None:
        self.generations.append(summary.generation)


def run(task, evaluator, tmp_path, name: str, *, order: str = "ask", budget: int | None = 40,
        seconds: float | None = None, strategy: str = "pattern") -> tuple[Any, Told, Lines]:
    options = {"initial_population": 6} if strategy == "pattern" else {}
    told = Told(get_strategy(strategy)(task.space, seed=7, **options))
    settings = SessionSettings(strategy=strategy, seed=7, budget=budget, seconds=seconds, mode="gpu",
                               tell_order=order, in_flight=5)
    lines = Lines()
    outcome = Session(task, evaluator, told, settings, Cache.open(tmp_path / f"{name}.db", create=True),
                      reporter=lines).run()
    return outcome, told, lines


def test_told_in_ask_order_the_session_is_the_same_whatever_order_results_come_back_in(triton_task, tmp_path):
    reference = run(triton_task, InOrder(FakeEvaluator(hashed_cost)), tmp_path, "ref")
    for seed in (1, 2, 3):
        outcome, told, lines = run(triton_task, Shuffled(seed), tmp_path, f"s{seed}")
        assert told.told == reference[1].told and told.asked == reference[1].asked
        assert outcome.evaluations == 40 == reference[0].evaluations and outcome.exit_reason == "budget"
        assert lines.generations == sorted(lines.generations) == reference[2].generations  # a line each, in order


def test_told_in_completion_order_a_held_config_is_told_last_and_nothing_waits(triton_task, tmp_path):
    reference = run(triton_task, InOrder(FakeEvaluator(hashed_cost)), tmp_path, "ref")
    held = reference[1].asked[1][0]
    _outcome, told, _lines = run(triton_task, Shuffled(1, held=[held]), tmp_path, "c", order="completion")
    keys = [key for key, _ in told.told]
    assert keys[-1] == held and len(keys) == len(set(keys))  # every result told once, the held one last
    asked_later = {key for generation in told.asked[2:] for key in generation}
    assert len(asked_later) >= 20  # generations were asked while it was out
    _outcome, in_order, _lines = run(triton_task, Shuffled(1, held=[held]), tmp_path, "a")
    assert [key for key, _ in in_order.told] == [key for key, _ in reference[1].told]  # ask order: it waited


def test_the_clock_stops_the_session_and_cancels_what_is_out(triton_task, tmp_path):
    class Slow(Shuffled):
        def poll(self, timeout: float) -> list[Result]:
            time.sleep(0.3)  # some 24 valid configs in the space: far more than 2 s of these
            return super().poll(timeout)

    evaluator = Slow(1)
    started = time.monotonic()
    outcome, told, _lines = run(triton_task, evaluator, tmp_path, "t", budget=None, seconds=2.0, strategy="random")
    assert outcome.exit_reason == "seconds" and time.monotonic() - started < 10
    assert told.told and evaluator.cancelled > 0 and len(told.told) == len({key for key, _ in told.told})


def test_only_an_evaluator_with_the_four_methods_is_asynchronous():
    assert is_asynchronous(Shuffled(1)) and is_asynchronous(InOrder(FakeEvaluator(hashed_cost)))
    assert not is_asynchronous(FakeEvaluator(hashed_cost))


@pytest.mark.parametrize("order", ["ask", "completion"])
def test_a_strategy_that_runs_dry_is_asked_again_once_everything_is_told(order, triton_task, tmp_path):
    outcome, told, _lines = run(triton_task, Shuffled(4), tmp_path, order, order=order, budget=None, seconds=30)
    assert outcome.exit_reason in ("strategy finished", "strategy exhausted")
    assert sorted(key for key, _ in told.told) == sorted({key for generation in told.asked for key in generation})
