"""Run one function over many items on a Dask cluster: outcomes as they complete, and an item
whose worker died run once more on another worker.

This is flow control, not scheduling: Dask picks the worker for every task.  At most as many
tasks are in flight as the cluster has worker threads, so the next item waits here rather than
in a busy worker's queue, and a worker that dies takes with it only the item it was running.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

ATTEMPTS = 2  # the first run and one retry elsewhere
DIED, CANCELLED = "worker process died", "cancelled"


@dataclass(frozen=True)
class Failed:
    """An item that could not be run: what happened on each attempt, in one line."""

    message: str
    worker_died: bool  # the last attempt ended with its worker's death


def run_on_cluster(client: Any, fn: Callable[..., Any], items: Sequence[Any], *extra: Any,
                   retry_on_error: bool = True) -> Iterator[tuple[int, Any]]:
    """Yield (item index, fn(item, *extra) or Failed) as tasks complete, in any order.

    A task whose worker died is submitted once more, preferring the workers that have not
    failed it (any worker where there is no other); with `retry_on_error`, so is a task that
    raised.  Closing the iterator early cancels the tasks still in flight.
    """
    from distributed import as_completed

    waiting: deque[tuple[int, list[tuple[str, str]]]] = deque((i, []) for i in range(len(items)))
    running: dict[Any, tuple[int, list[tuple[str, str]]]] = {}  # future -> (index, failed attempts)
    completed = as_completed()
    try:
        while waiting or running:
            slots = max(1, sum(client.nthreads().values())) - len(running)
            while waiting and slots > 0:
                index, history = waiting.popleft()
                future = client.submit(fn, items[index], *extra, pure=False, **_elsewhere(client, history))
                running[future] = (index, history)
                completed.add(future)
                slots -= 1
            future = next(completed)
            index, history = running.pop(future)
            if future.status == "finished":
                yield index, future.result()
                continue
            worker, what, died = _failure(future)
            history = [*history, (worker, what)]
            if len(history) < ATTEMPTS and what != CANCELLED and (died or retry_on_error):
                waiting.appendleft((index, history))  # before new items: it has waited longest
            else:
                yield index, Failed(_describe(history), worker_died=died)
    finally:
        if running:
            client.cancel(list(running))
        completed.clear()  # drop its hold on finished futures, so their results are released now


def _elsewhere(client: Any, history: list[tuple[str, str]]) -> dict[str, Any]:
    """Submit options that steer a retry away from the workers that failed it."""
    if not history:
        return {}
    failed = {worker for worker, _ in history}
    others = [address for address, info in client.scheduler_info()["workers"].items()
              if str(info.get("name")) not in failed]
    # Loose: should every other worker die meanwhile, the task may still run on a restarted one.
    return {"workers": others, "allow_other_workers": True} if others else {}


def _failure(future: Any) -> tuple[str, str, bool]:
    """(worker name, what happened, whether the worker died) for a task that did not finish."""
    from distributed.scheduler import KilledWorker

    from autotune.distributed.on_worker import TaskFailed

    if future.status == "cancelled":
        return "?", CANCELLED, False
    error = future.exception()
    if isinstance(error, KilledWorker):
        worker = str(getattr(error.last_worker, "name", None) or getattr(error.last_worker, "address", "?"))
        return worker, DIED, True
    if isinstance(error, TaskFailed):
        return error.worker, error.message, False
    return "?", f"{type(error).__name__}: {error}", False


def _describe(history: list[tuple[str, str]]) -> str:
    deaths = [worker for worker, what in history if what == DIED]
    if len(deaths) == len(history) == ATTEMPTS:
        return f"the worker died twice while running it (on {deaths[0]}, then on {deaths[1]})"
    attempts = "; then ".join(f"{what} on {worker}" for worker, what in history)
    return f"failed on {len(history)} attempt(s): {attempts}"[:4000]
