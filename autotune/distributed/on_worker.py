"""What runs inside a Dask worker process: evaluations, calibration, baselines and whole jobs.

A worker builds one evaluator per factory (a GPU evaluator binds the kernel and starts its
compile and benchmark processes, seconds of work) and reuses it for every later task; it is
closed when the driver says so.  Every task first marks its process as one that may not open
a tuning database: results go back to the session's process, the single writer.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Sequence

from autotune.store.guard import allow_database, forbid_writes_in_this_process
from autotune.types import Candidate, Result

WORKER_REASON = "it is a distributed worker; results go back to the session's process, which alone writes"

_evaluators: dict[Hashable, Any] = {}
_locks: dict[Hashable, threading.Lock] = {}
_locks_guard = threading.Lock()


class TaskFailed(Exception):
    """A task raised on a worker: says which worker, so a retry can go elsewhere."""

    def __init__(self, worker: str, message: str) -> None:
        super().__init__(worker, message)
        self.worker, self.message = worker, message

    def __str__(self) -> str:
        return f"{self.worker}: {self.message}"


def worker_name() -> str:
    from distributed import get_worker

    return str(get_worker().name)


def worker_label(factory: Any = None) -> str:
    """Which worker measured: its name, and for a GPU its device and host ('gpu0 NVIDIA H100 @node3')."""
    describe = getattr(factory, "device_label", None)
    if describe is None:
        return worker_name()
    return f"{worker_name()} {describe()} @{socket.gethostname()}"


@contextlib.contextmanager
def _reraised_with_worker() -> Iterator[None]:
    try:
        yield
    except Exception as error:  # noqa: BLE001 - any failure is the worker's, reported with its name
        raise TaskFailed(worker_name(), f"{type(error).__name__}: {error}") from None


@contextlib.contextmanager
def _evaluator(factory: Callable[[], Any]) -> Iterator[Any]:
    """This worker's evaluator for `factory`, built on first use; one task at a time uses it.
    An evaluator that raised is closed and dropped, so the next task builds a fresh one."""
    forbid_writes_in_this_process(WORKER_REASON)
    key = (worker_name(), factory)  # per worker: several may share a process (threads, in tests)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        evaluator = _evaluators.get(key)
        if evaluator is None:
            evaluator = _evaluators[key] = factory()
        try:
            yield evaluator
        except BaseException:
            _evaluators.pop(key, None)
            with contextlib.suppress(Exception):
                evaluator.close()
            raise


def evaluate(candidates: Sequence[Candidate], factory: Callable[[], Any],
             sink: str | None = None) -> tuple[str, list[Result]]:
    """Evaluate a batch here; every result says which worker measured it.  With `sink` (a Dask
    queue's name), each result is also put there as soon as it is known, so the driver records
    it before the batch ends."""
    with _reraised_with_worker():
        label = worker_label(factory)
        queue = _queue(sink)
        results = []
        try:
            with _evaluator(factory) as evaluator:
                for result in evaluator.evaluate(list(candidates)):
                    results.append(replace(result, measured_on=label))
                    if queue is not None:
                        with contextlib.suppress(Exception):  # the batch's return value still carries it
                            queue.put(results[-1])
        finally:
            if queue is not None:  # drops this worker's hold; the driver holds the queue until it is done
                with contextlib.suppress(Exception):
                    queue.close()
        return label, results


def _queue(name: str | None) -> Any:
    if name is None:
        return None
    from distributed import Queue

    return Queue(name)


def rebenchmark(candidates: Sequence[Candidate], factory: Callable[[], Any]) -> tuple[str, dict[str, Result]]:
    with _reraised_with_worker():
        label = worker_label(factory)
        with _evaluator(factory) as evaluator:
            results = evaluator.rebenchmark(list(candidates))
            return label, {key: replace(result, measured_on=label) for key, result in results.items()}


def baselines(_: Any, factory: Callable[[], Any]) -> dict[str, Result]:
    with _reraised_with_worker():
        with _evaluator(factory) as evaluator:
            return evaluator.baselines()


def close_evaluators(factory: Hashable) -> int:
    """Close this worker process's evaluators for `factory` (run on every worker when the driver closes)."""
    closed = 0
    for key in [key for key in _evaluators if key[1] == factory]:
        evaluator = _evaluators.pop(key, None)
        if evaluator is not None:
            closed += 1
            with contextlib.suppress(Exception):
                evaluator.close()
    return closed


def run_job(job: Callable[[Path], dict]) -> tuple[str, dict | None, str, bytes | None]:
    """Run a whole job against a private temporary database; return (worker, summary, error,
    the database's bytes).  A job that raises is reported with whatever it recorded so far."""
    forbid_writes_in_this_process(WORKER_REASON)
    label = worker_label()
    folder = Path(tempfile.mkdtemp(prefix="autotune-job-"))
    path = folder / "job.db"
    summary, error = None, ""
    try:
        with allow_database(path):
            try:
                summary = job(path)
            except Exception as raised:  # noqa: BLE001 - a failed job is reported, never fatal
                error = f"{type(raised).__name__}: {raised}\n{traceback.format_exc()[-2000:]}"
        return label, summary, error, _database_bytes(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _database_bytes(path: Path) -> bytes | None:
    """The whole database in one file (its write-ahead log folded in), or None if none was made."""
    if not path.exists():
        return None
    from autotune.store.cache import checkpoint

    checkpoint(path)
    return path.read_bytes()
