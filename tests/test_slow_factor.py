"""experiments.slow_factor's report, on two sessions of a fake evaluator that cuts slow configs
short the way the GPU benchmark worker does."""

from __future__ import annotations

import math
import re
from dataclasses import replace

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.evaluators.timing import TimingOptions, repetitions
from autotune.session import Session, SessionSettings, SilentReporter
from autotune.strategies import get_strategy
from conftest import hashed_cost
from experiments import slow_factor

ESTIMATE_BIAS = 1.04  # the fake estimate reads 4% slow


class CuttingEvaluator(FakeEvaluator):
    """Full timing costs 20 runs of the kernel, an estimate 5; which one a config gets is
    decided by the worker's rule (`timing.repetitions`) against the fastest timed so far."""

    def __init__(self, factor: float) -> None:
        super().__init__(hashed_cost)
        self.options = TimingOptions(target_ms=1.0, min_reps=20, max_reps=20, graph_below_ms=0.0, slow_factor=factor)
        self.fastest: float | None = None

    def evaluate(self, candidates):
        for result in super().evaluate(candidates):
            estimate = result.median_ms * ESTIMATE_BIAS
            if repetitions(estimate, self.fastest, self.options) == 0:
                yield replace(result, median_ms=estimate, repetitions=slow_factor.ESTIMATE_REPS,
                              bench_s=estimate * 5 / 1000)
                continue
            self.fastest = min(result.median_ms, self.fastest or math.inf)
            yield replace(result, repetitions=20, bench_s=result.median_ms * 20 / 1000)


def _session(db, task, factor: float) -> None:
    cache = Cache.open(db, create=True)
    try:
        settings = SessionSettings("random", 5, 60, fresh=True, generation_size=10, mode="gpu")  # measure again
        Session(task, CuttingEvaluator(factor), get_strategy("random")(task.space, seed=5), settings, cache,
                reporter=SilentReporter(), options={"slow_factor": None if math.isinf(factor) else factor}).run()
    finally:
        cache.close()


def test_the_report_compares_full_timing_with_estimates_of_the_same_configs(triton_task, tmp_path):
    db = tmp_path / "ab.db"
    _session(db, triton_task, math.inf)
    _session(db, triton_task, 3.0)
    text = slow_factor.report(db)
    full_row, cut_row = (line.split("|")[1:-1] for line in text.splitlines() if re.match(r"\| \d+ \|", line))
    assert full_row[1].strip() == "inf" and full_row[4].strip() == "0"  # nothing cut under full timing
    assert cut_row[1].strip() == "3.0" and int(cut_row[4]) > 0
    assert float(cut_row[5]) < float(full_row[5])  # less benchmark time
    # the cut configs' estimates read exactly the fake's bias, and none of them is near the fastest
    assert f"(quartiles) {ESTIMATE_BIAS:.3f}" in text and f"range {ESTIMATE_BIAS:.3f}-{ESTIMATE_BIAS:.3f}" in text
    nearest = float(re.search(r"the fastest of those is ([\d.]+)x", text).group(1))
    assert nearest > 3.0 / ESTIMATE_BIAS
    assert "10 of 10; same fastest config: True" in text
