"""experiments.compile_deadline's report, on two fake sessions: one where a tightened compile
limit stopped the slowest compiles, one with the fixed limit where they finished."""

from __future__ import annotations

from dataclasses import replace

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings, SilentReporter
from autotune.strategies import get_strategy
from autotune.types import Result, Status
from conftest import hashed_cost
from experiments import compile_deadline

SLOW_COMPILE = 0.85  # configs whose hashed cost is over this compile for 30 s


class CompilingEvaluator(FakeEvaluator):
    """Compile time grows with the hashed cost; with `limit_s`, slower compiles time out."""

    def __init__(self, limit_s: float | None) -> None:
        super().__init__(hashed_cost)
        self.limit_s = limit_s

    def evaluate(self, candidates):
        for result in super().evaluate(candidates):
            compile_s = 30.0 if result.median_ms > SLOW_COMPILE else 1.0
            if self.limit_s is not None and compile_s > self.limit_s:
                yield Result(key=result.key, status=Status.COMPILE_TIMEOUT, error=(
                    f"compile did not finish within {self.limit_s:g} s (10x this session's median compile time of "
                    f"1.00 s, at least 10 s); worker killed"))
            else:
                yield replace(result, compile_s=compile_s)


def _session(db, task, factor: float | None, limit_s: float | None) -> None:
    cache = Cache.open(db, create=True)
    try:
        settings = SessionSettings("random", 7, 50, fresh=True, generation_size=10, mode="gpu")
        Session(task, CompilingEvaluator(limit_s), get_strategy("random")(task.space, seed=7), settings, cache,
                reporter=SilentReporter(), options={"compile_timeout_factor": factor}).run()
    finally:
        cache.close()


def test_the_report_shows_what_the_tightened_limit_stopped(triton_task, tmp_path):
    db = tmp_path / "cd.db"
    _session(db, triton_task, 10.0, 10.0)
    _session(db, triton_task, None, None)
    text = compile_deadline.report(db)
    tight_row, fixed_row = (line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| 1 ")
                            or line.startswith("| 2 "))
    timeouts = int(tight_row[4])
    assert "(10 s)" in tight_row[1] and timeouts > 0 and int(fixed_row[4]) == 0
    assert int(tight_row[3]) + timeouts == int(fixed_row[3])  # the same configs; only the stopped ones differ
    assert (f"stopped by a compile timeout in the default session: {timeouts}; of those, ran correctly under the "
            f"fixed limit: {timeouts}, compiling in 30.0-30.0 s") in text
    fastest_stopped = float(text.split("the fastest of them is ")[1].split("x")[0])
    assert fastest_stopped * float(fixed_row[6]) > SLOW_COMPILE
