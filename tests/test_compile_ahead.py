"""Compiling the next generation ahead (autotune/evaluators/compile_ahead.py,
autotune/next_generation.py): on the GPU evaluator's orchestration, driven by the fake
workers, and on the session, whose guesses must be what the strategy asks next without
changing what it asks."""

from __future__ import annotations

import time

import pytest

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.types import Status
from tests.conftest import hashed_cost
from tests.test_gpu_orchestration import candidate, read_log
from tests.test_gpu_orchestration import fake_evaluator as plain_evaluator


class Guesses:
    """A guess that answers fixed candidates and remembers what it was shown."""

    def __init__(self, *candidates, fail: bool = False) -> None:
        self.candidates, self.fail, self.calls = list(candidates), fail, []

    def __call__(self, results, outstanding):
        self.calls.append(({r.key for r in results}, list(outstanding)))
        if self.fail:
            raise RuntimeError("the strategy's copy failed")
        return self.candidates


def fake_evaluator(compile_workers: int, compile_ahead: bool = True, **timeouts: float):
    return plain_evaluator(compile_workers, compile_ahead=compile_ahead, **timeouts)  # off by default


@pytest.fixture
def log(tmp_path, monkeypatch):
    """Where the fake workers log what they did (read_log)."""
    path = tmp_path / "gpu.log"
    monkeypatch.setenv("FAKE_GPU_LOG", str(path))
    return path


def warm(gpu, workers: int) -> None:
    assert all(r.ok for r in gpu.evaluate([candidate(f"warm{i}") for i in range(workers)]))


def straggling_generation():
    """Three quick configs and one whose compile takes a second: the GPU then waits on it alone."""
    return [candidate("slow", compile_s=1.0)] + [candidate(k, compile_s=0.02, bench_s=0.02) for k in "abc"]


def test_the_next_generation_compiles_while_the_slowest_compile_runs_and_is_taken_over(log):
    gpu = fake_evaluator(4, compile_timeout_s=10.0)
    guess = Guesses(candidate("n1", ms=2.0, compile_s=0.6), candidate("n2", ms=3.0, compile_s=0.6),
                    candidate("unasked", compile_s=0.05), candidate("c"))  # "c": this generation's, never sent
    try:
        warm(gpu, 4)
        first = {r.key: r for r in gpu.evaluate(straggling_generation(), guess=guess)}
        started = time.monotonic()
        second = {r.key: r for r in gpu.evaluate([candidate("n1", ms=2.0, compile_s=0.6),
                                                   candidate("n2", ms=3.0, compile_s=0.6),
                                                   candidate("new", compile_s=0.02)])}
        took = time.monotonic() - started
        counts = dict(+gpu.ahead.counts)  # the counts above zero
    finally:
        gpu.close()
    assert all(r.ok for r in first.values()) and set(first) == {"slow", "a", "b", "c"}
    assert guess.calls == [({"a", "b", "c"}, ["slow"])]  # once, when only the slow compile was left
    assert {k: (r.status, r.median_ms) for k, r in second.items()} == {
        "n1": (Status.OK, 2.0), "n2": (Status.OK, 3.0), "new": (Status.OK, 1.0)}
    assert took < 0.5, f"the second generation compiled its guessed configs again ({took:.2f} s)"
    intervals = read_log(log)
    compiles = {key: (start, end) for key, start, end in intervals["compile"]}
    assert [key for key, _, _ in intervals["compile"]].count("n1") == 1  # compiled once, ahead
    assert compiles["n1"][0] < compiles["slow"][1] and compiles["n2"][0] < compiles["slow"][1]
    # nothing of theirs used the GPU before a generation asked for them
    runs = {key: start for key, start, _ in intervals["run"] + intervals["bench"]}
    assert min(runs["n1"], runs["n2"]) >= started and "unasked" not in runs
    assert [key for key, _, _ in intervals["skip"]] == ["unasked"]  # its worker was let go
    assert counts == {"guessed": 3, "used": 2, "dropped": 1}


def test_a_worker_compiling_a_config_no_generation_asked_for_is_let_go_when_its_compile_ends(log):
    gpu = fake_evaluator(3, compile_timeout_s=10.0)
    try:
        warm(gpu, 3)
        list(gpu.evaluate(straggling_generation(), guess=Guesses(candidate("unasked", compile_s=1.2))))
        # asked for other configs while "unasked" still compiles; one of them outlasts that compile
        second = {r.key: r.ok for r in gpu.evaluate([candidate("x", compile_s=1.5), candidate("y")])}
        third = {r.key: r.median_ms for r in gpu.evaluate([candidate(f"z{i}", ms=1 + i) for i in range(3)])}
        counts = dict(+gpu.ahead.counts)
    finally:
        gpu.close()
    assert second == {"x": True, "y": True} and third == {"z0": 1, "z1": 2, "z2": 3}
    intervals = read_log(log)
    assert [key for key, _, _ in intervals["skip"]] == ["unasked"]
    assert "unasked" not in {key for key, _, _ in intervals["run"] + intervals["bench"]}
    assert counts == {"guessed": 1, "dropped": 1}


def test_a_config_that_failed_to_compile_ahead_is_answered_without_compiling_again(log):
    gpu = fake_evaluator(3, compile_timeout_s=10.0)
    try:
        warm(gpu, 3)
        list(gpu.evaluate(straggling_generation(), guess=Guesses(candidate("bad", "compile_error"))))
        (bad,) = gpu.evaluate([candidate("bad", "compile_error")])
    finally:
        gpu.close()
    assert bad.status is Status.COMPILE_ERROR and "bad tile" in bad.error
    assert [key for key, _, _ in read_log(log)["compile"]].count("bad") == 1


def test_an_early_stop_drops_what_was_compiled_ahead_and_the_evaluator_goes_on():
    gpu = fake_evaluator(3, compile_timeout_s=60.0)
    guess = Guesses(candidate("long", compile_s=30.0))
    try:
        warm(gpu, 3)
        stream = gpu.evaluate(straggling_generation(), guess=guess)
        while not guess.calls:
            next(stream)
        stream.close()  # the session ran out of time
        assert gpu.ahead.jobs == {} and gpu.ahead.counts["dropped"] == 1
        started = time.monotonic()
        again = {r.key: r.median_ms for r in gpu.evaluate([candidate(f"n{i}", ms=1 + i) for i in range(3)])}
        assert time.monotonic() - started < 10  # no worker still busy with the dropped 30 s compile
    finally:
        gpu.close()
    assert again == {"n0": 1, "n1": 2, "n2": 3}


@pytest.mark.parametrize("switched_off", [False, True])
def test_a_failing_guess_costs_nothing_and_the_switch_turns_guessing_off(switched_off):
    gpu = fake_evaluator(3, compile_ahead=not switched_off, compile_timeout_s=10.0)
    guess = Guesses(fail=True)
    try:
        warm(gpu, 3)
        results = list(gpu.evaluate(straggling_generation(), guess=guess))
        counts = dict(+gpu.ahead.counts)  # the counts above zero
    finally:
        gpu.close()
    assert sorted(r.key for r in results if r.ok) == ["a", "b", "c", "slow"]
    assert (len(guess.calls), counts) == ((0, {}) if switched_off else (1, {"guess_failed": 1}))


def test_re_timing_drops_the_compiles_ahead():
    gpu = fake_evaluator(3, compile_timeout_s=60.0)
    try:
        warm(gpu, 3)
        list(gpu.evaluate(straggling_generation(), guess=Guesses(candidate("long", compile_s=30.0))))
        assert len(gpu.ahead.jobs) == 1  # still compiling after the generation
        gpu.rebenchmark([candidate("a")])
        assert gpu.ahead.jobs == {}
    finally:
        gpu.close()


# -- the session's guess --------------------------------------------------------------------------
class GuessingEvaluator(FakeEvaluator):
    """Asks the session's guess at the end of each generation, with its last config still out."""

    compiles_ahead = True

    def __init__(self) -> None:
        super().__init__(hashed_cost)
        self.generations: list[list[str]] = []
        self.guesses: list[list[str]] = []

    def evaluate(self, candidates, guess=None):
        self.generations.append([c.key for c in candidates])
        results = list(super().evaluate(candidates))
        if guess is not None and results:
            self.guesses.append([c.key for c in guess(results[:-1], [results[-1].key])])
        yield from results


def run_session(task, strategy: str, evaluator, tmp_path, budget: int = 48) -> list[tuple[str, float]]:
    settings = SessionSettings(strategy, 3, budget, generation_size=8, mode="gpu")
    db = Cache.open(tmp_path / f"{strategy}-{type(evaluator).__name__}.db", create=True)
    outcome = Session(task, evaluator, get_strategy(strategy)(task.space, seed=3), settings, db).run()
    return [(row.candidate.key, row.result.median_ms) for row in db.session_evaluations(outcome.session_id)]


def test_a_random_search_is_guessed_exactly_and_guessing_changes_nothing(triton_task, tmp_path):
    guessing = GuessingEvaluator()
    assert run_session(triton_task, "random", guessing, tmp_path) == \
        run_session(triton_task, "random", FakeEvaluator(hashed_cost), tmp_path)
    # a random search reads no results: each guess is the next generation (the last: within the budget)
    asked = guessing.generations[2:]  # after the default config and the first generation
    assert len(asked) >= 3 and guessing.guesses[:len(asked)] == asked


def test_a_pattern_walk_is_guessed_from_what_is_known_and_left_as_it_was(triton_task, tmp_path):
    guessing = GuessingEvaluator()
    assert run_session(triton_task, "pattern-ties", guessing, tmp_path, budget=80) == \
        run_session(triton_task, "pattern-ties", FakeEvaluator(hashed_cost), tmp_path, budget=80)
    pairs = list(zip(guessing.guesses, guessing.generations[2:]))  # guessed during the one before
    hits = sum(set(guess) == set(asked) for guess, asked in pairs)
    assert len(pairs) >= 4 and hits >= len(pairs) // 2, pairs
