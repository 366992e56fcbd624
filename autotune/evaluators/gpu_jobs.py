"""What a generation on the GPU evaluator (gpu_generation.py) keeps per config in flight, and
how a benchmark worker's reply becomes a result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.types import Candidate, Result, Status

COMPILE, WAITING, RUN = "compile", "waiting", "run"  # a compile job's stages


@dataclass
class Job:
    """A config on a compile worker, from dispatch until it ran (then queued for timing)."""

    candidate: Candidate
    stage: str
    deadline: float | None  # none while it waits for its grant: the wait is ours, not the config's
    compile_s: float | None = None
    generated: Any = None  # where its compile left the generated host function (generated_module.py)
    retry: bool = False  # its benchmark process died: timed alone, with no other config built meanwhile
    limit: tuple[float, str] | None = None  # the compile limit it was given and why (the limit adapts)


@dataclass
class BenchJob:
    """The config the benchmark worker is timing, and when that must end."""

    candidate: Candidate
    compile_s: float | None
    started: float
    deadline: float
    ran: Job | None = None  # the job it came from, queued again if the process dies under it


def result_from_reply(key: str, reply: dict[str, Any], compile_s: float | None) -> Result:
    """A benchmark worker's reply (or a stand-in for a lost one) as a Result."""
    return Result(
        key=key, status=Status(reply["status"]), median_ms=reply.get("median_ms"), min_ms=reply.get("min_ms"),
        max_ms=reply.get("max_ms"), repetitions=reply.get("repetitions", 0), compile_s=compile_s,
        bench_s=reply.get("bench_s"), rel_error=reply.get("rel_error"), error=reply.get("error", ""),
        samples_ms=tuple(reply.get("samples_ms", ())), checked=reply.get("checked", ""),
    )
