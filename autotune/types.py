"""The values that flow between strategies, the session, evaluators and the cache."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

Params = dict[str, Any]


class Status(str, enum.Enum):
    """How one evaluation ended.  Only OK results have a time."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    OUT_OF_RESOURCES = "out_of_resources"  # shared memory or registers over the limit
    COMPILE_TIMEOUT = "compile_timeout"
    RUN_TIMEOUT = "run_timeout"
    CRASH = "crash"  # the process died or the CUDA context broke (illegal address, ...)
    WRONG_RESULT = "wrong_result"  # NaN, unwritten output or relative error over tolerance
    INVALID = "invalid"  # not a point of the space (rejected before compiling)
    NOT_RECORDED = "not_recorded"  # replay only: the cache has no measurement for it

    @property
    def failed(self) -> bool:
        return self is not Status.OK


class Source(str, enum.Enum):
    """Where a result came from."""

    MEASURED = "measured"  # timed on a GPU in this session
    REUSED = "reused"  # an earlier measurement for the same fingerprint and config
    REPLAYED = "replayed"  # answered from the cache by the replay evaluator


@dataclass(frozen=True)
class Candidate:
    """A config ready to evaluate: the point of the space and its normalised native form."""

    params: Params
    native: Mapping[str, Any]
    key: str


@dataclass(frozen=True)
class Result:
    """The outcome of evaluating one candidate."""

    key: str
    status: Status
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    repetitions: int = 0
    compile_s: float | None = None
    bench_s: float | None = None  # wall seconds spent timing it (for simulated GPU time)
    rel_error: float | None = None
    error: str = ""
    source: Source = Source.MEASURED
    samples_ms: tuple[float, ...] = field(default=(), repr=False)
    measured_on: str = ""  # which worker (GPU and host) measured it, when spread over several
    checked: str = ""  # how the accuracy-checked output was poisoned (autotune.evaluators.poison)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.median_ms is not None and math.isfinite(self.median_ms)

    @property
    def objective(self) -> float:
        """What strategies minimise: the median time, infinite for any failure."""
        return self.median_ms if self.ok else math.inf

    def as_source(self, source: Source) -> "Result":
        return replace(self, source=source)
