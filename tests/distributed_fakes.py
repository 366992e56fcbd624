"""Costs for the distributed tests, picklable by reference and importable in a Dask worker
without torch: a hashed cost, one that kills its worker process, one that opens the cache."""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from search_spaces.space import canonical_json


def hashed_cost(params: Mapping[str, Any]) -> float:
    """The same deterministic cost as conftest.hashed_cost, in [0.1, 1.1) ms."""
    digest = hashlib.sha256(canonical_json(dict(params)).encode()).hexdigest()
    return 0.1 + int(digest[:12], 16) / 16**12


@dataclass(frozen=True)
class KillsItsWorker:
    """Kills the worker process (os._exit) that evaluates `victim`: on its first attempt only, or
    every time.  Each kill appends a line to `marker`, so a test can count them."""

    victim: str  # canonical JSON of the victim's params
    marker: str
    every_time: bool = False
    log: str = ""  # when set, every evaluation appends its params here (a line each), the victim's too

    def __call__(self, params: Mapping[str, Any]) -> float:
        if self.log:
            with Path(self.log).open("a") as out:
                out.write(canonical_json(dict(params)) + "\n")
        if canonical_json(dict(params)) == self.victim:
            marker = Path(self.marker)
            if self.every_time or not marker.exists():
                with marker.open("a") as out:
                    out.write(f"killed pid {os.getpid()}\n")
                os._exit(1)
        return hashed_cost(params)


@dataclass(frozen=True)
class OpensTheCache:
    """A cost that tries to open a tuning database from inside a worker (a second writer)."""

    path: str

    def __call__(self, params: Mapping[str, Any]) -> float:
        from autotune.store.cache import Cache

        Cache.open(self.path, create=True).close()
        return hashed_cost(params)


@dataclass(frozen=True)
class RecordsASession:
    """A whole job: records a session of `rows` evaluations of a toy space into the database it
    is given; with `fail_after`, raises once that many rows are recorded."""

    seed: int
    rows: int
    fail_after: int | None = None

    @property
    def name(self) -> str:
        return f"job {self.seed}"

    def __call__(self, db_path: Path) -> dict:
        from autotune.store.cache import Cache
        from autotune.types import Candidate, Result, Status
        from search_spaces import Ordinal, SearchSpace, SpaceIdentity

        space = SearchSpace(kernel="toy", family="triton", default={"x": 0},
                            parameters=(Ordinal(name="x", choices=tuple(range(16)), default_value=0),))
        identity = SpaceIdentity(space=space, signature={"shape": [8], "dtype": "float16"}, source_hash="t" * 24,
                                 versions={"python": "3"}, device="toy device")
        cache = Cache.open(db_path, create=True)
        try:
            cache.put_space(identity)
            session = cache.start_session(kernel="toy", shape=(8,), dtype="float16", strategy="random",
                                          seed=self.seed, budget=self.rows, seconds=None,
                                          fingerprint=identity.fingerprint, device="toy device",
                                          versions={"python": "3"}, mode="gpu", options={})
            for i in range(self.rows):
                if self.fail_after is not None and i == self.fail_after:
                    raise ValueError(f"{self.name} fails on purpose")
                candidate = Candidate(params={"x": i}, native={"x": i}, key=f"k{i}")
                cache.record(session, identity.fingerprint, 1, i, candidate,
                             Result(key=candidate.key, status=Status.OK, median_ms=1.0 + i, min_ms=1.0, max_ms=2.0))
            cache.end_session(session, "budget", None)
        finally:
            cache.close()
        return {"seed": self.seed, "rows": self.rows}


class _RebenchmarkingFake:
    """A fake evaluator that can also re-time configs (as the GPU evaluator does at the end)."""

    def __init__(self) -> None:
        from autotune.evaluators.fake import FakeEvaluator

        self.inner = FakeEvaluator(hashed_cost)
        self.description = self.inner.description

    def evaluate(self, candidates):
        return self.inner.evaluate(candidates)

    def baselines(self):
        return {}

    def rebenchmark(self, candidates):
        from autotune.types import Result, Status

        return {c.key: Result(key=c.key, status=Status.OK, median_ms=hashed_cost(c.params) * 1.01, min_ms=0.0,
                              max_ms=2.0, repetitions=3) for c in candidates}

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class RebenchmarkingFakeFactory:
    rebenchmarks = True
    description = "fake evaluator that re-times"

    def __call__(self) -> _RebenchmarkingFake:
        return _RebenchmarkingFake()


def dies(item: Any, marker: str) -> None:
    """A task that kills its worker process, leaving a line in `marker` each time."""
    with Path(marker).open("a") as out:
        out.write(f"killed pid {os.getpid()} on {item}\n")
    os._exit(1)


def quick_compile_s(params: Mapping[str, Any]) -> float:
    """A fake compile time in [0.01, 0.03) s, fixed by the config."""
    return 0.01 + 0.02 * (hashed_cost(params) - 0.1)


@dataclass(frozen=True)
class SlowCompile:
    """Compiles `victim` (canonical JSON) in `seconds`, every other config quickly; each start
    and end of the victim's compile appends a timestamped line to `log`, when given."""

    victim: str
    seconds: float
    log: str = ""

    def __call__(self, params: Mapping[str, Any]) -> float:
        if canonical_json(dict(params)) != self.victim:
            return quick_compile_s(params)
        if self.log:
            import time

            with Path(self.log).open("a") as out:
                out.write(f"start {time.time()}\n")
        return self.seconds


@dataclass(frozen=True)
class KillsItsCompileWorker:
    """A compile time that kills the compile worker compiling `victim`, on its first attempt
    only (or every time); each kill appends a line to `marker`, every compile its params to `log`."""

    victim: str
    marker: str
    log: str = ""
    every_time: bool = False

    def __call__(self, params: Mapping[str, Any]) -> float:
        if self.log:
            with Path(self.log).open("a") as out:
                out.write(canonical_json(dict(params)) + "\n")
        if canonical_json(dict(params)) == self.victim:
            marker = Path(self.marker)
            if self.every_time or not marker.exists():
                with marker.open("a") as out:
                    out.write(f"killed pid {os.getpid()}\n")
                os._exit(1)
        return quick_compile_s(params)


def generation_of(task: Any, count: int) -> list:
    """`count` configs of `task`, the same ones every run (the throughput experiment's generation)."""
    from experiments.distributed_throughput import generation

    return generation(task, count, seed=5)


def collect_results(evaluator: Any, count: int, deadline_s: float) -> list:
    """Poll an asynchronous evaluator until `count` results came back, failing past the deadline."""
    results, deadline = [], time.monotonic() + deadline_s
    while len(results) < count and time.monotonic() < deadline:
        results += evaluator.poll(0.05)
    assert len(results) == count, f"{len(results)} of {count} results within {deadline_s} s"
    return results
