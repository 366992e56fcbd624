"""Recorded runs of the held-out experiment for its tests: sessions recorded through the session
loop with fake evaluators, tagged as the runner tags them (imported by the test_heldout* modules)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Callable

import torch

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.kernels import get_kernel
from autotune.seeds import collect_seeds, heuristic_provenance
from autotune.session import Session, SessionSettings
from autotune.session_options import SessionOptions
from autotune.strategies import get_strategy, strategy_names, strategy_source
from autotune.task import bind_live
from autotune.types import Result, Status
from conftest import REPO, hashed_cost
from experiments.heldout import definition as d
from search_spaces.space import canonical_json


HELDOUT_DIR = REPO / "experiments" / "heldout"
SOFTMAX = d.Problem("softmax", "32768x1000", "float16")
MATMUL = d.Problem("matmul-l2norm", "16384x1024x2048", "bfloat16")
RETIMED = 1.01  # the fixture's re-benchmark reads every config 1% slower than its search-time reading
HELION_JOB_S, HELION_WALL_S = 100.0, 90.0
# Helion's own log: (s since its search began, ms in its timer).  Scaled to our re-timing of its
# pick (1.4 ms x 1.01), its first reading is over 2% slower than the pick, unscaled it is not.
HELION_LOG = [[2.0, 1.35], [4.0, None], [9.0, 1.3]]


class Retiming(FakeEvaluator):
    def rebenchmark(self, candidates):
        out = {}
        for result in self.evaluate(candidates):
            out[result.key] = Result(key=result.key, status=Status.OK, median_ms=result.median_ms * RETIMED,
                                     min_ms=result.median_ms, max_ms=result.median_ms * 1.02, repetitions=10)
        return out


def costs_for(task, special: list[tuple[dict, float]]) -> Callable[[dict], float]:
    """Search configs cost 1.1-2.1 ms; the special points (normalised) cost what they are given."""
    lookup = {canonical_json(task.candidate(p).params): ms for p, ms in special}
    return lambda params: lookup.get(canonical_json(dict(params)), 1.0 + hashed_cost(params))


def record_run(cache, task, *, arm, strategy, seed, setup_s, seeds=(), seed_from="default", costs, budget=6,
            extra=None, fixed=None, interrupt=None, timing_ms=d.TIMING_MS, source=None, seconds=None,
            worker_built=None, compiled_ahead=None) -> None:
    tags = {"study": d.STUDY, "arm": arm, "strategy": strategy, "seed": seed, **(extra or {})}
    sources = [s for s in seed_from.split(",") if s]
    options = SessionOptions(seed_from=seed_from, seeds=tuple(o for o, _ in seeds), fresh=True,
                             heuristics=heuristic_provenance(task, sources).get("heuristics"), experiment=tags,
                             timing_target_ms=timing_ms, build_from_worker=worker_built,
                             compile_ahead=compiled_ahead,
                             strategy_source=source or (strategy_source(strategy) if strategy in strategy_names(retired=True) else None))
    if fixed is not None:
        made = get_strategy("fixed")(task.space, seed=seed, configs={d.HELION_QUICK: fixed})
    else:
        made = get_strategy(strategy)(task.space, seed=seed)
    settings = SessionSettings(strategy if fixed is None else "fixed", seed, budget, seconds=seconds,
                               generation_size=3, mode="gpu")
    evaluator = Retiming(costs, delay_s=0.004, interrupt_after=interrupt)
    tags["job_started"] = round(time.time() - setup_s, 3)
    try:
        Session(task, evaluator, made, settings, cache, options=options.but(experiment=tags), seeds=list(seeds)).run()
    except KeyboardInterrupt:
        assert interrupt is not None


def record_study(path: Path) -> Path:
    """The fixture's database at `path`: Helion quick, cold and warm runs at a softmax shape and a
    matmul cell, one cut short, and a session of no study (tests/conftest.py's `heldout_db`)."""
    cache = Cache.open(path, create=True)
    for problem in (SOFTMAX, MATMUL):
        task = bind_live(get_kernel(problem.kernel), problem.dims, getattr(torch, problem.dtype), "cpu")
        default_key = task.default_candidate().key
        heuristic = [seed for seed in collect_seeds(task, None, ["heuristic"])
                     if task.candidate(seed[1]).key != default_key]  # the default is measured anyway
        assert heuristic, problem.label
        cached = [("cache", task.space.sample(random.Random(11)))]
        pick = task.space.sample(random.Random(7))
        # The softmax seed lands between 2% and 5% of the best found (1.02 re-timed): within 5%, never 2%.
        seeded = 1.07 if problem is SOFTMAX else 1.05
        costs = costs_for(task, [(task.space.default, 1.5), (pick, 1.4), (heuristic[0][1], seeded), (cached[0][1], 1.02)])
        record_run(cache, task, arm=d.HELION_QUICK, strategy=d.NATIVE, seed=1, setup_s=0.5, seeds=[("user", pick)],
                seed_from="", costs=costs, budget=1, fixed=pick,
                extra={"helion_job_s": HELION_JOB_S, "helion_wall_s": HELION_WALL_S, "helion_configs": 3,
                       "helion_timeline": HELION_LOG})
        for seed in (1, 2, 3) if problem is SOFTMAX else (1,):
            record_run(cache, task, arm=d.COLD, strategy="pattern", seed=seed, setup_s=1.0, costs=costs)
        for seed in (1, 2):
            record_run(cache, task, arm=d.WARM_HEURISTIC, strategy="pattern", seed=seed, setup_s=1.0, seeds=heuristic,
                    seed_from="default,heuristic", costs=costs, seconds=600.0 + seed,  # the budget ends them first
                    extra={"seeds": d.seeds_version(problem, d.WARM_HEURISTIC)})
        if problem is SOFTMAX:  # the budget ends it at the default, slower than Helion's pick, long before 20 s
            record_run(cache, task, arm=d.COLD, strategy="evolution", seed=1, setup_s=1.0, costs=costs, budget=1)
        if problem is SOFTMAX:  # set-up of 30 s: within Helion's fifth (20 s) it is not, nor its tenth
            for seed in (1, 2):
                record_run(cache, task, arm=d.WARM_CACHE, strategy="evolution", seed=seed, setup_s=30.0, seeds=cached,
                        seed_from="default,cache", costs=costs, seconds=0.01,  # the limit ends them first
                        extra={"cache_from": ["1024x1024"], "seeds": d.SEEDS_VERSION[d.WARM_CACHE]})
        else:  # cut short: never counted, and planned again
            record_run(cache, task, arm=d.COLD, strategy="pattern", seed=3, setup_s=1.0, costs=costs, interrupt=3)
    # not this study's, or not finished: never read
    other = bind_live(get_kernel("softmax"), SOFTMAX.dims, torch.float16, "cpu")
    Session(other, Retiming(lambda p: 0.01), get_strategy("random")(other.space, seed=0),
            SessionSettings("random", 0, 3, mode="gpu"), cache).run()
    cache.close()
    return path


def fake_run(requests: list) -> Callable[[Any], Any]:
    """Stands in for `autotune tune`: records a small fake session into the request's database."""
    def run(request):
        requests.append(request)
        task = bind_live(get_kernel(request.kernel), tuple(map(int, request.shape.split("x"))), torch.float16, "cpu")
        cache = Cache.open(request.db, create=True)
        options = SessionOptions(seed_from=request.seed_from, fresh=request.fresh, experiment=dict(request.experiment),
                                 timing_target_ms=request.timing_target_ms, early_setups=request.seed % 2 == 1)
        try:
            return Session(task, FakeEvaluator(hashed_cost), get_strategy("random")(task.space, seed=request.seed),
                           SessionSettings("random", request.seed, 2, mode="gpu"), cache, options=options).run()
        finally:
            cache.close()
    return run


def helion_log_and_pick(kernel) -> Any:
    """Stands in for Helion's search at the end of one: its CSV log written, its pick returned."""
    import csv

    import helion

    with open(f"{kernel.settings.autotune_log}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["timestamp_s", "config_index", "status", "perf_ms"])
        writer.writerows([["0.5", 0, "ok", "0.3"]])
    return helion.Config(block_sizes=[8], num_warps=4)


def small_study(tmp_path) -> tuple[d.Problem, Any, Path, Cache]:
    """A small Triton softmax problem, its task on the CPU and a fresh database for its runs."""
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
    db = tmp_path / "h.db"
    return problem, task, db, Cache.open(db, create=True)
