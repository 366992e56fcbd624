"""A compile farm: configs compiled on CPU-only workers, timed on GPU workers.

Why: on a GPU worker, compiling competes with timing for the host's cores and a long compile
holds a GPU slot; on a farm, any number of compile workers (on this host and others) compile
while the GPU workers only time.  A factory takes part by having a `compiler()` method that
builds, on a compile worker, an object with `compile(candidate, deadline_s) -> Compiled`, and
by building GPU-side evaluators with `time_compiled(candidate, compiled) -> Result`.  The
artifact (the compiled Triton cache folder for the config, or the generated module) is bytes
that Dask moves from the compile worker to the GPU worker that times it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from autotune.distributed import on_worker
from autotune.types import Candidate, Result


@dataclass(frozen=True)
class Compiled:
    """What a compile worker hands on: the artifact, or the failure that ends the config there."""

    key: str
    artifact: bytes | None
    compile_s: float
    failure: Result | None = None  # compile error or timeout: timed by nobody
    compiled_on: str = ""


@dataclass(frozen=True)
class CompilerOf:
    """Names a factory's compiler, so a compile worker builds it once and keeps it."""

    factory: Any

    def __call__(self) -> Any:
        return self.factory.compiler()


def can_farm(factory: Any) -> bool:
    return callable(getattr(factory, "compiler", None))


def compile_config(candidate: Candidate, factory: Any, deadline_s: float) -> Compiled:
    """Runs on a compile worker: compile one config within `deadline_s` seconds."""
    with on_worker._reraised_with_worker():
        with on_worker._evaluator(CompilerOf(factory)) as compiler:
            return replace(compiler.compile(candidate, deadline_s), compiled_on=on_worker.worker_name())


def time_config(candidate: Candidate, compiled: Compiled, factory: Callable[[], Any]) -> Result:
    """Runs on a GPU worker: time (and check) a config compiled elsewhere."""
    with on_worker._reraised_with_worker():
        label = on_worker.worker_label(factory)
        if compiled.failure is not None:
            return replace(compiled.failure, measured_on=label)
        with on_worker._evaluator(factory) as evaluator:
            result = evaluator.time_compiled(candidate, compiled)
        return replace(result, compile_s=compiled.compile_s, measured_on=label)
