"""Reproducible experiments: a folder that knows how to run itself and how to report.

An experiment folder (for example `experiments/softmax_study/`) is a Python package whose
`__init__.py` defines

    run(options: ExperimentOptions, console) -> None      # on a GPU machine: measure, record
    report(options: ExperimentOptions, console) -> Path   # anywhere: regenerate from the database

Everything `run` measures goes into the database, so `report` needs nothing else: the
report of a study measured on one machine regenerates on any other from `cache.db`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, Sequence

from rich.rule import Rule

from autotune.errors import UserError


@dataclass(frozen=True)
class ExperimentOptions:
    folder: Path
    db: Path  # the user's database: `run` records here; reports read it with the shipped data
    out: Path  # where the report (Markdown and PNGs) is written
    dtype: str = "float16"
    shapes: tuple[str, ...] = ()  # a subset of the study's shapes; empty: all
    methods: tuple[str, ...] = ()  # run only these of the study's methods (report rows); empty: all
    budget: int | None = None  # per tuning session; None: the study's own
    seconds: float | None = None  # per tuning session; None: the study's own
    workers: str | None = None  # spread whole jobs over a Dask cluster (see autotune.distributed)
    again: bool = False  # run jobs already recorded once more
    deadline_at: float | None = None  # time.monotonic() by which the run stops (see execute_jobs)
    shipped: Path | None = Path("data/shipped.db")  # the shipped measurements, read beside `db`
    device: str | None = None  # a report: the GPU whose runs it reads (None: the study's choice)


class DeadlineReached(KeyboardInterrupt):
    """The run's wall-clock budget (`--deadline`) ran out.  A KeyboardInterrupt, so the job in
    progress stops as it would on Ctrl-C: its session is recorded as interrupted and its
    processes are stopped; the same command runs what is left (each study skips what it
    has recorded)."""

    def __init__(self, interrupted: str | None = None, not_started: Sequence[str] = ()) -> None:
        super().__init__(interrupted, tuple(not_started))
        self.interrupted, self.not_started = interrupted, tuple(not_started)

    def __str__(self) -> str:
        parts = []
        if self.interrupted:
            parts.append(f"interrupted {self.interrupted} (what it measured is recorded; the same command runs "
                         "what is left)")
        if self.not_started:
            parts.append(f"{len(self.not_started)} not started: {', '.join(self.not_started)}")
        return "deadline reached: " + ("; ".join(parts) or "nothing was left to run")


def experiment_tags(session_options: dict[str, Any]) -> dict[str, Any]:
    """A session's experiment tags as a dict.  Older scripts tagged a session with the study's
    name alone (a string); that reads as {"study": name}."""
    tags = session_options.get("experiment")
    if isinstance(tags, dict):
        return tags
    return {"study": tags} if isinstance(tags, str) and tags else {}


@dataclass(frozen=True)
class LoadedExperiment:
    """An experiment package with its two functions, taken once when it was loaded.

    Why not the package itself: Python sets every submodule it imports on its package, so once
    a `report.py` beside the package's `report()` is imported (an `__init__.py` that imports it
    lazily does so on its first report), `package.report` is that module, and a second report in
    the same process would call a module."""

    module: ModuleType
    run: Callable[[ExperimentOptions, Any], None]
    report: Callable[[ExperimentOptions, Any], Path]

    @property
    def name(self) -> str:
        return self.module.__name__


def load_experiment(folder: str | Path) -> LoadedExperiment:
    """Import the experiment package at `folder`; a clear error if it is not one."""
    path = Path(folder)
    init = path / "__init__.py"
    if not path.is_dir():
        raise UserError(f"no experiment folder {str(folder)!r}")
    if not init.is_file():
        raise UserError(f"{folder} is not an experiment: it has no __init__.py defining run() and report()")
    dotted = _importable_name(path)
    if dotted is not None:  # e.g. experiments.softmax_study: its jobs pickle by reference (Dask workers)
        module = importlib.import_module(dotted)
    else:
        module = _load_private(path, init)
    functions = {name: protocol_function(module, name) for name in ("run", "report")}
    missing = [name for name, function in functions.items() if function is None]
    if missing:
        raise UserError(f"{folder} is not an experiment: its __init__.py lacks {' and '.join(missing)}()")
    return LoadedExperiment(module, **functions)  # type: ignore[arg-type]  # both checked above


def protocol_function(module: ModuleType, name: str) -> Callable[..., Any] | None:
    """The package's `name()`; where its submodule of that name shadows it (imported since, see
    `LoadedExperiment`), that submodule's own `name()`, which such a package's function calls."""
    found = getattr(module, name, None)
    if isinstance(found, ModuleType) and found.__name__ == f"{module.__name__}.{name}":
        found = getattr(found, name, None)
    return found if callable(found) else None


def _importable_name(path: Path) -> str | None:
    """The dotted name under which `path` imports (from sys.path or an installed package), if any."""
    top = path.resolve()
    if not (top / "__init__.py").is_file():
        return None
    while (top.parent / "__init__.py").is_file():  # climb to the outermost package
        top = top.parent
    parts = path.resolve().relative_to(top.parent).parts
    if not all(part.isidentifier() for part in parts):
        return None
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    locations = [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []
    return ".".join(parts) if top in locations else None


def _load_private(path: Path, init: Path) -> ModuleType:
    """A folder outside the import path: loaded under a private name (one per folder, so two
    folders with the same name never collide) and, where Dask is installed, pickled by value so
    its jobs can still travel to workers."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    name = f"_autotune_experiment_{path.name.replace('-', '_')}_{digest}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(path)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            del sys.modules[name]
            raise
        try:
            import cloudpickle
        except ImportError:
            pass
        else:
            cloudpickle.register_pickle_by_value(module)
    return module


def execute_jobs(jobs: Sequence[Callable[[Path], Any]], options: ExperimentOptions, console: Any,
                 describe: Callable[[Any], str], noun: str = "job", *,
                 skip: Callable[[Any], str | None] | None = None,
                 finished: Callable[[Any, Any], None] | None = None) -> None:
    """Run an experiment's jobs (each `job(db_path) -> summary`): one after another into
    `options.db`, or spread over `options.workers` (each into a private database merged home).
    One job failing never stops the others.

    With `options.deadline_at`, no job starts after it and the job still running then is
    interrupted; DeadlineReached says which, and which never started.  A researcher with a
    fixed GPU allocation (a batch job's time limit) gets everything finished so far recorded
    and a command that continues where this one stopped, instead of a kill mid-write.  A job
    that says how long it is expected to take (`expected_s`: a study's estimate from its
    recorded runs) is not started where that would run past the deadline: its minutes would
    be spent only to be interrupted.  The jobs after it still start if they fit.

    `skip(job)`, asked before each job, gives a reason not to start it (None: start it), and
    `finished(job, outcome)` hears of each job that ended: a study can stop a series whose
    outcome the jobs already run have decided (pruning).  Both apply to jobs run here."""
    console.print(f"{len(jobs)} {noun}(s) to run")
    if options.workers and (skip is not None or finished is not None):
        raise UserError("this experiment's pruning applies to jobs run on this machine; run it without --workers")
    if options.workers:
        if options.deadline_at is not None:
            raise UserError("--deadline applies to jobs run on this machine; with --workers, stop the cluster's "
                            "jobs with Ctrl-C (each finished job is already merged home)")
        from autotune.distributed.jobs import run_jobs

        for job, outcome in zip(jobs, run_jobs(list(jobs), options.db, options.workers)):
            console.print(f"{describe(job)}: {outcome}")
        return
    left_out: list[str] = []  # not started: expected to run past the deadline
    for number, job in enumerate(jobs, start=1):
        if options.deadline_at is not None and time.monotonic() >= options.deadline_at:
            raise DeadlineReached(not_started=left_out + [describe(j) for j in jobs[number - 1:]])
        reason = skip(job) if skip is not None else None
        if reason is not None:
            console.print(f"{noun} {number}/{len(jobs)}: {describe(job)}: not started: {reason}")
            continue
        if not _fits(job, options.deadline_at):
            console.print(f"{noun} {number}/{len(jobs)}: {describe(job)}: not started, expected to take "
                          f"{job.expected_s:.0f} s with {options.deadline_at - time.monotonic():.0f} s left "
                          "before the deadline")
            left_out.append(describe(job))
            continue
        title = f"{noun} {number}/{len(jobs)}: {describe(job)}"
        # A rule spans the console; piped output is rendered very wide (autotune.cli): a plain line there.
        console.print(Rule(title) if getattr(console, "is_terminal", False) else title)
        try:
            with _interrupted_at(options.deadline_at):
                outcome = job(options.db)
        except DeadlineReached:
            raise DeadlineReached(describe(job), left_out + [describe(j) for j in jobs[number:]]) from None
        except Exception as error:  # one job failing must not lose the others
            console.print(f"[red]{noun} failed[/red]: {type(error).__name__}: {error}")
            continue
        console.print(f"recorded: {outcome}")
        if finished is not None:
            try:
                finished(job, outcome)
            except Exception as error:  # reading a job back must not stop the others either
                console.print(f"[red]after {describe(job)}[/red]: {type(error).__name__}: {error}")
    if left_out:
        raise DeadlineReached(not_started=left_out)


def _fits(job: Any, deadline_at: float | None) -> bool:
    """Whether the job can be expected to end before the deadline; so where either is unknown."""
    expected = getattr(job, "expected_s", None)
    return deadline_at is None or expected is None or time.monotonic() + expected <= deadline_at


@contextlib.contextmanager
def _interrupted_at(deadline_at: float | None) -> Iterator[None]:
    """Raise DeadlineReached in this (the main) thread at `deadline_at`, through a real-time
    timer: the job may be blocked in a wait on its worker processes, which a signal interrupts."""
    if deadline_at is None:
        yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise DeadlineReached()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(deadline_at - time.monotonic(), 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
