"""Run one function over many items on a Dask cluster: outcomes as they complete, and an item
whose worker died run once more on another worker (possibly shrunk to what is still owed).

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


class ClusterStream:
    """Runs `fn(item, *extra)` for every item on the cluster, at most one task per worker thread
    in flight, and hands back outcomes as they complete (`next_outcome`).

    A task whose worker died is submitted once more, preferring the workers that have not
    failed it (any worker where there is no other); with `retry_on_error`, so is a task that
    raised.  `retry_item(index, item)` may shrink what a retry runs (a batch without the
    configs whose results already came back), or return None when nothing is left to run
    (the item then ends as Failed); `items[index]` is what was last submitted.
    `close()` cancels what is still in flight.
    """

    def __init__(self, client: Any, fn: Callable[..., Any], items: Sequence[Any], *extra: Any,
                 retry_on_error: bool = True, retry_item: Callable[[int, Any], Any] | None = None,
                 workers: Sequence[str] | None = None) -> None:
        self.client, self.fn, self.extra = client, fn, extra
        self.workers = list(workers) if workers else None  # only these addresses (a role's workers)
        self.items = list(items)
        self.retry_on_error, self.retry_item = retry_on_error, retry_item
        self._waiting: deque[tuple[int, list[tuple[str, str]]]] = deque((i, []) for i in range(len(self.items)))
        self._running: dict[Any, tuple[int, list[tuple[str, str]]]] = {}  # future -> (index, failed attempts)

    @property
    def finished(self) -> bool:
        return not self._waiting and not self._running

    def next_outcome(self, timeout: float | None = None) -> tuple[int, Any] | None:
        """Start what may start, then (item index, fn's value or Failed) of a task that ended,
        waiting at most `timeout` seconds (None: until one ends); None if none ended (or one
        was only resubmitted)."""
        from distributed import wait

        self._submit()
        if not self._running:
            return None
        done = [future for future in self._running if future.done()]
        if not done:
            try:
                wait(list(self._running), timeout=timeout, return_when="FIRST_COMPLETED")
            except TimeoutError:
                return None
            done = [future for future in self._running if future.done()]
        return self._settle(done[0]) if done else None

    def close(self) -> None:
        if self._running:
            self.client.cancel(list(self._running))
        self._running.clear()
        self._waiting.clear()

    def _submit(self) -> None:
        if not self._waiting:  # asking the scheduler for its threads is a round trip: not on every poll
            return
        slots = max(1, sum(self.client.nthreads().values())) - len(self._running)
        while self._waiting and slots > 0:
            index, history = self._waiting.popleft()
            options = ({"workers": self.workers, "allow_other_workers": False} if self.workers
                       else _elsewhere(self.client, history))
            future = self.client.submit(self.fn, self.items[index], *self.extra, pure=False, **options)
            self._running[future] = (index, history)
            slots -= 1

    def _settle(self, future: Any) -> tuple[int, Any] | None:
        index, history = self._running.pop(future)
        if future.status == "finished":
            return index, future.result()
        worker, what, died = _failure(future)
        history = [*history, (worker, what)]
        if len(history) < ATTEMPTS and what != CANCELLED and (died or self.retry_on_error):
            retry = self.items[index] if self.retry_item is None else self.retry_item(index, self.items[index])
            if retry is not None:
                self.items[index] = retry
                self._waiting.appendleft((index, history))  # before new items: it has waited longest
                return None
        return index, Failed(_describe(history), worker_died=died)


def run_on_cluster(client: Any, fn: Callable[..., Any], items: Sequence[Any], *extra: Any,
                   retry_on_error: bool = True, workers: Sequence[str] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield (item index, fn(item, *extra) or Failed) as tasks complete, in any order (see
    ClusterStream).  Closing the iterator early cancels the tasks still in flight."""
    stream = ClusterStream(client, fn, items, *extra, retry_on_error=retry_on_error, workers=workers)
    try:
        while not stream.finished:
            outcome = stream.next_outcome()
            if outcome is not None:
                yield outcome
    finally:
        stream.close()


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
