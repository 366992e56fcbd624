"""Runs the seed study on a GPU machine: one job per cell, each recorded as one session.

A job binds its cell's kernel on the GPU only when it runs (the largest cells' inputs are
gigabytes), plans with `experiments.heuristic_seeds` (default, rule seeds, Helion's own
seeds, the grid) and measures and records with it (one session of the `fixed` strategy),
tagging the session with the study and the cell.  A job is a picklable callable of a database path (what
`autotune.distributed.jobs.run_jobs` spreads over GPUs).  Cells already recorded are skipped
unless `--again`, so a study cut short is continued by running the same command again; a cell
cut short keeps every config it measured and, run again, measures only the rest.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.errors import UserError
from autotune.experiment import ExperimentOptions, execute_jobs
from experiments import heuristic_seeds as hs

from . import definition as d

GRID_AXES = {"m": d.GRID_M, "k": d.GRID_K, "warps": d.GRID_WARPS, "stages": d.GRID_STAGES}


def bind(kernel: str, shape: str, dtype: str, device: str) -> Any:
    """The cell's tuning task.  On "meta" nothing is allocated (shapes only): the kernel is
    bound on CPU tensors of stride 0 (one element each, however large the shape), so the
    space, facts and seeds are those of a CPU binding and any machine can check the plan.
    (Tensors on torch's meta device bind with torch 2.13 but not with 2.11, whose Inductor
    refuses to lower a reduction on them.)  A run binds on the GPU, where Helion's space (and
    its default) may differ from the CPU's."""
    import torch

    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.task import TuningTask, bind_live, signature
    from search_spaces.fingerprint import SpaceIdentity, source_hash
    from search_spaces.helion_space import space_from_bound

    spec = get_kernel(kernel)
    dims, torch_dtype = parse_shape(shape, spec.rank), parse_dtype(dtype, spec.dtypes)
    if device != "meta":
        task = bind_live(spec, dims, torch_dtype, device)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()  # the inputs (gigabytes) are gone; leave their memory to the evaluator
        return task
    m, k, n = dims  # the family's inputs: x [M, K], w [K, N]
    inputs = tuple(torch.empty((1, 1), dtype=torch_dtype).expand(size) for size in ((m, k), (k, n)))
    bound = spec.helion_kernel.bind(inputs)
    space, codec = space_from_bound(spec.name, bound)
    identity = SpaceIdentity(space=space, signature=signature(dims, dtype), source_hash=source_hash(spec.source_text()))
    return TuningTask(spec=spec, shape=dims, dtype=dtype, space=space, codec=codec, identity=identity, bound=bound)


@dataclass(frozen=True)
class CellJob:
    """Measure one cell: the default, the rule seeds, Helion's seeds and the grid (capped at
    `budget` points when given), then torch and torch.compile; one recorded session."""

    cell: d.Cell
    budget: int | None = None

    @property
    def name(self) -> str:
        return self.cell.name

    def plan(self, device: str) -> dict[str, Any]:
        task = bind(self.cell.kernel, self.cell.shape, self.cell.dtype, device)
        return hs.plan_task(task, self.budget, d.GRID_SEED, hs.Grid(**GRID_AXES))

    def tags(self, item: dict[str, Any]) -> dict[str, Any]:
        """The session's `options["experiment"]`: what the report finds the cell by."""
        helion_seeds = sum(label.startswith(d.HELION_SEED) for label, _, _ in item["candidates"])
        return {"study": d.STUDY, "cell": self.cell.name, "kernel": self.cell.kernel, "shape": self.cell.shape,
                "dtype": self.cell.dtype, "regime": self.cell.regime, "table": self.cell.table,
                "grid": {**{axis: list(values) for axis, values in GRID_AXES.items()}, "sample": self.budget},
                "helion_seeds": helion_seeds, "job_started": round(time.time(), 3)}

    def __call__(self, db_path: Path, *, device: str = "cuda", evaluator: Any = None) -> dict[str, Any]:
        """`device` and `evaluator` are for tests (a CPU binding and a fake evaluator)."""
        item = self.plan(device)
        settings = argparse.Namespace(db=str(db_path), compile_workers=None, compile_timeout=d.COMPILE_TIMEOUT_S)
        measured = hs.measure(item, settings, tags=self.tags(item), evaluator=evaluator)
        results = measured["results"]
        return {"configs": len(results), "ok": sum(r.ok for r in results.values()),
                "resumed": measured["resumed"], "wall_s": round(measured["wall_s"], 1)}


def select_cells(options: ExperimentOptions) -> list[d.Cell]:
    """The cells of `--dtype` (or every cell for `--dtype all`), filtered by `--shapes`."""
    dtypes = sorted({cell.dtype for cell in d.CELLS})
    cells = [c for c in d.CELLS if options.dtype in (c.dtype, d.ALL_DTYPES)]
    if not cells:
        raise UserError(f"{d.STUDY} has no {options.dtype} cells: use --dtype {' or '.join(dtypes)} "
                        f"(or {d.ALL_DTYPES})")
    known = sorted({c.shape for c in cells})
    unknown = [s for s in options.shapes if s not in known]
    if unknown:
        raise UserError(f"shape(s) {', '.join(unknown)} are not in the study's {options.dtype} cells "
                        f"(its shapes: {', '.join(known)})")
    kernels = sorted({c.kernel for c in cells})
    unknown = [k for k in options.methods if k not in kernels]
    if unknown:  # the seed study's methods are its kernels
        raise UserError(f"{', '.join(unknown)}: not kernels of the study's {options.dtype} cells "
                        f"(its kernels: {', '.join(kernels)})")
    return [c for c in cells if (not options.shapes or c.shape in options.shapes)
            and (not options.methods or c.kernel in options.methods)]


def plan(options: ExperimentOptions) -> list[CellJob]:
    """One job per selected cell, in the study's order (nothing is bound yet)."""
    return [CellJob(cell, options.budget) for cell in select_cells(options)]


def recorded_cells(db: Path, dtype: str, device: str | None = None) -> set[str]:
    """Names of the cells the database already holds a finished study session for, on `device`
    (the GPU recording now; None: on any)."""
    from .data import study_sessions

    if not db.exists():
        return set()
    return set(study_sessions(db, dtype, device))


def send_by_value() -> None:
    """Let the jobs travel to Dask workers: `autotune experiment` imports this study under a
    private module name that no worker can import, so its classes are pickled by value."""
    import sys

    import cloudpickle  # Dask's own pickler, installed with it

    cloudpickle.register_pickle_by_value(sys.modules[__package__])


def run(options: ExperimentOptions, console: Any) -> None:
    from autotune.experiment_devices import recording_gpu
    from autotune.tuning import gpu_available

    jobs = plan(options)  # refuses unknown dtypes and shapes before anything else
    if not gpu_available():
        raise UserError("experiment run measures on a GPU and this machine has none; `autotune experiment report "
                        f"{options.folder} --dtype {options.dtype}` regenerates the report from {options.db}")
    if not options.again:
        done = recorded_cells(options.db, options.dtype, recording_gpu())
        skipped = [job for job in jobs if job.name in done]
        jobs = [job for job in jobs if job.name not in done]
        if skipped:
            console.print(f"{len(skipped)} cell(s) already recorded in {options.db} (use --again to repeat them)")
    if options.workers:
        send_by_value()
    execute_jobs(jobs, options, console, describe=lambda job: f"{job.name} ({job.cell.regime})",
                 noun="cell")
