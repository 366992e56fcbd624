"""Runs the softmax study on a GPU machine: one job per (shape, method), each recorded.

A job is a picklable callable of a database path (what `autotune.distributed.jobs.run_jobs`
spreads over GPUs).  Jobs already recorded are skipped unless `--again`, so a study
interrupted at any point is continued by running the same command again.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from autotune.errors import UserError
from autotune.experiment import ExperimentOptions, execute_jobs

from . import definition as d


@dataclass(frozen=True)
class TuneJob:
    """Tune one of our kernels at one shape with the study's strategy and seeds."""

    kernel: str
    shape: str
    dtype: str
    budget: int
    seconds: float

    @property
    def method(self) -> str:
        return d.method_of(self.kernel)

    def __call__(self, db_path: Path) -> dict[str, Any]:
        strategy = d.STRATEGY_FOR.get(self.kernel, d.STRATEGY)
        outcome = _tune(db_path, kernel=self.kernel, shape=self.shape, dtype=self.dtype, strategy=strategy,
                        budget=self.budget, seconds=self.seconds, seed_from=d.SEED_FROM,
                        experiment={"method": self.method})
        return {"session": outcome.session_id, "evaluations": outcome.evaluations}


@dataclass(frozen=True)
class HelionQuickJob:
    """Helion's own quick autotune, run natively and timed; its winner is then re-timed by our
    harness (one recorded evaluation), so every figure of the report uses one timer."""

    shape: str
    dtype: str

    method = d.HELION_QUICK

    def __call__(self, db_path: Path) -> dict[str, Any]:
        from autotune.baselines.helion_native import QUICK, pick_params, run_native
        from autotune.kernels import get_kernel, parse_dtype, parse_shape

        spec = get_kernel(d.HELION_KERNEL)
        shape, dtype = parse_shape(self.shape, spec.rank), parse_dtype(self.dtype)
        with tempfile.TemporaryDirectory() as scratch:
            native_run = run_native(spec, shape, dtype, Path(scratch) / "helion_quick", effort=QUICK)
        pick = pick_params(spec, shape, dtype, "cuda", native_run.config)
        tags = {"method": self.method, "helion_wall_s": round(native_run.wall_s, 3),
                "helion_configs": native_run.configs}
        if pick.past_thread_limit:
            tags["helion_pick_past_thread_limit"] = pick.past_thread_limit
        # The pick is a --config (evaluated in generation 0, after the default, where the report
        # reads it) and the fixed strategy's one config, so the session proposes nothing else.
        outcome = _tune(db_path, kernel=d.HELION_KERNEL, shape=self.shape, dtype=self.dtype, strategy="fixed",
                        budget=1, seconds=None, seed_from="", configs=(json.dumps(pick.params),),
                        strategy_options=(("configs", {self.method: pick.params}),), experiment=tags,
                        thread_limit=pick.thread_limit)
        return {"session": outcome.session_id, "helion_wall_s": native_run.wall_s,
                "helion_configs": native_run.configs}


Job = Callable[[Path], dict[str, Any]]


def _tune(db_path: Path, *, kernel: str, shape: str, dtype: str, strategy: str, budget: int, seconds: float | None,
          seed_from: str, experiment: dict[str, Any], configs: tuple[str, ...] = (),
          strategy_options: tuple[tuple[str, Any], ...] = (), thread_limit: bool = True) -> Any:
    """One session through the same path as `autotune tune` (a grid over budget is sampled)."""
    from autotune.tuning import TuneRequest, run_tune

    tags = {"study": d.STUDY, "job_started": round(time.time(), 3), **experiment}
    request = TuneRequest(
        kernel=kernel, shape=shape, dtype=dtype, strategy=strategy, budget=budget, seconds=seconds, seed=0,
        generation_size=None, db=Path(db_path), replay=False,
        space=None, fresh=False, compile_workers=None, compile_timeout_s=d.COMPILE_TIMEOUT_S, seed_from=seed_from,
        configs=configs, experiment=tuple(tags.items()), grid_sample=strategy == "grid",
        strategy_options=strategy_options, thread_limit=thread_limit,
    )
    return run_tune(request, Console(width=150))


def plan(options: ExperimentOptions) -> list[Any]:
    """Every job of the study for the chosen shapes, Helion's quick autotune first per shape."""
    shapes = options.shapes or d.SHAPES
    known = d.SHAPES + d.LONG_ROWS + d.JUDGING_LONG_ROWS
    unknown = [s for s in shapes if s not in known]
    if unknown:
        raise UserError(f"shape(s) {', '.join(unknown)} are not in the study (its shapes: {', '.join(known)})")
    methods = (d.HELION_QUICK, *map(d.method_of, d.TUNED_KERNELS))
    unknown = [m for m in options.methods if m not in methods]
    if unknown:
        raise UserError(f"method(s) {', '.join(unknown)} are not in the study (its methods: {', '.join(methods)})")
    budget = options.budget or d.BUDGET
    seconds = options.seconds or d.SECONDS
    jobs: list[Any] = []
    for shape in shapes:
        jobs.append(HelionQuickJob(shape, options.dtype))
        jobs += [TuneJob(kernel, shape, options.dtype, budget, seconds) for kernel in d.TUNED_KERNELS]
    return [job for job in jobs if not options.methods or job.method in options.methods]


def recorded_jobs(db: Path, dtype: str, device: str | None = None) -> set[tuple[str, str]]:
    """(shape, method) pairs the database already holds a finished study session for, on
    `device` (the GPU recording now; None: on any)."""
    from .data import study_sessions

    if not db.exists():
        return set()
    return {(shape, method) for (shape, method) in study_sessions(db, dtype, device)}


def run(options: ExperimentOptions, console: Any) -> None:
    from autotune.experiment_devices import recording_gpu
    from autotune.tuning import gpu_available

    jobs = plan(options)  # refuses unknown shapes before anything else
    if not gpu_available():
        raise UserError("experiment run measures on a GPU and this machine has none; `autotune experiment report "
                        f"{options.folder}` regenerates the report from {options.db}")
    if not options.again:
        done = recorded_jobs(options.db, options.dtype, recording_gpu())
        skipped = [job for job in jobs if (job.shape, job.method) in done]
        jobs = [job for job in jobs if (job.shape, job.method) not in done]
        if skipped:
            console.print(f"{len(skipped)} job(s) already recorded in {options.db} (use --again to repeat them)")
    execute_jobs(jobs, options, console, describe=lambda job: f"{job.method} at {job.shape} {options.dtype}")
