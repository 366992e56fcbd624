"""A fake evaluator that compiles and times apart (sleeps, no GPU): the compile farm and the
asynchronous session on CPU workers, in tests and in the throughput experiment's dry run."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterator, Mapping, Sequence

from autotune.distributed.farm import Compiled
from autotune.types import Candidate, Result, Source, Status

Seconds = Callable[[Mapping[str, Any]], float]


def _timed_out(candidate: Candidate, deadline_s: float) -> Result:
    return Result(key=candidate.key, status=Status.COMPILE_TIMEOUT, compile_s=deadline_s,
                  error=f"compile exceeded {deadline_s:g} s", source=Source.MEASURED)


class FakeCompiler:
    """Sleeps `compile_s(params)` (no longer than the deadline) and hands on a token artifact."""

    def __init__(self, compile_s: Seconds) -> None:
        self.compile_s = compile_s

    def compile(self, candidate: Candidate, deadline_s: float) -> Compiled:
        seconds = float(self.compile_s(candidate.params))
        time.sleep(min(seconds, deadline_s))
        if seconds > deadline_s:
            return Compiled(candidate.key, None, deadline_s, failure=_timed_out(candidate, deadline_s))
        return Compiled(candidate.key, f"compiled {candidate.key}".encode(), seconds)

    def close(self) -> None:
        pass


class FakeTimer:
    """Times a config: sleeps `bench_s` and answers `cost(params)` ms; compiles itself when asked
    to evaluate outright (no farm), within `deadline_s`."""

    description = "fake evaluator with separate compile and timing (no GPU)"

    def __init__(self, cost: Callable[[Mapping[str, Any]], float], compile_s: Seconds, bench_s: float,
                 deadline_s: float) -> None:
        self.cost, self.compiler, self.bench_s, self.deadline_s = cost, FakeCompiler(compile_s), bench_s, deadline_s

    def time_compiled(self, candidate: Candidate, compiled: Compiled) -> Result:
        if compiled.artifact != f"compiled {candidate.key}".encode():
            raise ValueError(f"artifact for {compiled.key} handed to {candidate.key}")
        time.sleep(self.bench_s)
        ms = float(self.cost(candidate.params))
        return Result(key=candidate.key, status=Status.OK, median_ms=ms, min_ms=ms, max_ms=ms, repetitions=10,
                      compile_s=compiled.compile_s, bench_s=self.bench_s, rel_error=0.0, source=Source.MEASURED)

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        for candidate in candidates:
            compiled = self.compiler.compile(candidate, self.deadline_s)
            yield compiled.failure or self.time_compiled(candidate, compiled)

    def baselines(self) -> dict[str, Result]:
        return {}

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class FakeFarmFactory:
    """Builds FakeTimers (GPU workers) and FakeCompilers (compile workers); the functions must
    be picklable by reference (module-level) or frozen dataclasses."""

    cost: Callable[[Mapping[str, Any]], float]
    compile_s: Seconds
    bench_s: float = 0.01
    compile_timeout_s: float = 60.0
    compile_timeout_factor: float = 10.0

    rebenchmarks: ClassVar[bool] = False
    description: ClassVar[str] = FakeTimer.description

    def compiler(self) -> FakeCompiler:
        return FakeCompiler(self.compile_s)

    def __call__(self) -> FakeTimer:
        return FakeTimer(self.cost, self.compile_s, self.bench_s, self.compile_timeout_s)
