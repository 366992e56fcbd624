"""Helion's own autotuner, run natively, as a baseline method.

Why in the package: studies compare our sessions with what Helion's built-in autotune finds
and how long it takes.  The run is timed wall-clock, its per-config timeline is read from
Helion's own CSV log (the `autotune_log` setting), and its pick is re-timed with our harness
(`retime`), so every figure of a report uses one timer.  The autotune call is injectable, so
everything but Helion's search itself runs on a CPU in tests.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autotune.types import Result

QUICK = "quick"  # Helion's `autotune_effort` levels: "none", "quick", "full"

# (the Helion kernel with the effort and log set, its inputs) -> the helion.Config it picked
Autotune = Callable[[Any, tuple], Any]


def helion_autotune(kernel: Any, inputs: tuple) -> Any:
    """Helion's own search, forced even when its cache holds an answer (GPU only)."""
    return kernel.autotune(inputs, force=True)


@dataclass(frozen=True)
class NativeAutotune:
    """One native run: its wall time, Helion's pick (native form) and, for every config it
    finished, (seconds since its start, ms; inf for a failure), in time order."""

    kernel: str
    effort: str
    wall_s: float
    config: dict[str, Any]
    timeline: tuple[tuple[float, float], ...]

    @property
    def configs(self) -> int:
        return len(self.timeline)

    def to_record(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "effort": self.effort, "wall_s": self.wall_s, "config": self.config,
                "timeline": [list(point) for point in self.timeline], "configs": self.configs}


def native_kernel(spec: Any, effort: str, log_stem: Path) -> Any:
    """A fresh Helion kernel of `spec`'s function with the given effort, logging each config to
    `{log_stem}.csv` (a fresh one: the registered kernel keeps its settings and caches)."""
    import helion

    if spec.family != "helion":
        raise ValueError(f"{spec.name} is a {spec.family} kernel: Helion's autotune runs Helion kernels only")
    original = spec.helion_kernel
    return helion.kernel(original.fn, static_shapes=original.settings.static_shapes, autotune_effort=effort,
                         autotune_log=str(log_stem))


def run_native(spec: Any, shape: tuple[int, ...], dtype: Any, log_stem: Path, *, effort: str = QUICK,
               device: str = "cuda", seed: int = 0, autotune: Autotune = helion_autotune,
               clock: Callable[[], float] = time.time) -> NativeAutotune:
    """Run Helion's autotune of `spec` at one shape natively and time it."""
    from autotune.task import build_inputs
    from search_spaces.helion_space import to_native

    kernel = native_kernel(spec, effort, log_stem)
    inputs = build_inputs(spec, shape, dtype, device, seed)
    started = clock()
    config = autotune(kernel, inputs)
    wall_s = clock() - started
    return NativeAutotune(kernel=spec.name, effort=effort, wall_s=wall_s, config=to_native(config),
                          timeline=read_log(Path(f"{log_stem}.csv")))


def read_log(path: Path) -> tuple[tuple[float, float], ...]:
    """(seconds since the search started, ms or inf) for each finished config of Helion's CSV
    log, in time order; () when it wrote none."""
    if not path.exists():
        return ()
    timeline = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get("status") == "started":
                continue
            ms = float(row["perf_ms"]) if row.get("status") == "ok" and row.get("perf_ms") else float("inf")
            timeline.append((float(row["timestamp_s"]), ms))
    return tuple(sorted(timeline))


@dataclass(frozen=True)
class HelionPick:
    """Helion's pick as a point of our space: its params, the task bound in the space it is a
    point of, and, where that is the space without our elements-per-thread limit, why the
    space with the limit refused it (None otherwise)."""

    params: dict[str, Any]
    task: Any
    past_thread_limit: str | None = None

    @property
    def thread_limit(self) -> bool:
        """Whether the pick is a point of the space with our limit (what a session records)."""
        return self.past_thread_limit is None


def pick_params(spec: Any, shape: tuple[int, ...], dtype: Any, device: str, pick: dict[str, Any]) -> HelionPick:
    """Helion's pick as a point of the kernel's space; where it lies past our elements-per-thread
    limit (a limit of our searches, not of Helion's), its point in the space without the limit
    (`thread_limit=False`): Helion's answer is re-timed whatever it is, and a pick past the limit
    is not dropped from a study.  Anything else that does not fit is raised (InvalidConfig)."""
    from autotune.task import bind_live
    from search_spaces.space import InvalidConfig

    task = bind_live(spec, shape, dtype, device)
    try:
        return HelionPick(task.codec.params_of(pick), task)
    except InvalidConfig as refused:
        task = bind_live(spec, shape, dtype, device, thread_limit=False)
        return HelionPick(task.codec.params_of(pick), task, str(refused))


def retime(task: Any, evaluator: Any, config: dict[str, Any]) -> Result | None:
    """Helion's pick timed by our harness (one interleaved re-benchmark); raises InvalidConfig
    when it is not a config of our space.  None when the evaluator gave no timing for it."""
    candidate = task.candidate_from_native(config)
    return evaluator.rebenchmark([candidate]).get(candidate.key)
