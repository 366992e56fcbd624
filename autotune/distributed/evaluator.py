"""An evaluator that spreads configs over the workers of a Dask cluster.

It implements the asynchronous evaluator protocol (autotune/evaluators/base.py), so the
session keeps configs in flight on it (autotune/async_search.py, through pipeline.py): a free
worker takes the next config at once, and no generation waits for its slowest.  Told in ask
order, the session asks for the same configs whatever the number of workers (only the wall
time changes); it records every result itself, in its own process, as results come back.
`evaluate` (a whole list, as the synchronous protocol has it) serves the session's first
generation, calibration-like uses and the experiments.  Each worker builds its own
evaluator from a picklable factory (see `factories.py`) and keeps it between generations.

A worker that dies (process killed, GPU fault) costs only the configs it was running: the
ones whose results had not come back are run once more on another worker, and recorded as
`crash` if that worker dies too.

Calibration: at start, the reference config (the kernel's default, chosen by the caller
because it is the one config every session of a space evaluates) is timed once on every
worker, so measurements made on different GPUs can be checked against each other; the
session records it as soon as it has an id.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any, Callable, Iterator, Sequence

from autotune.distributed import on_worker
from autotune.distributed.pipeline import COMPILE, GPU, Pipeline
from autotune.distributed.stream import ClusterStream, Failed, run_on_cluster
from autotune.types import Candidate, Result, Status

CALIBRATION_TIMEOUT_S = 900.0  # a GPU worker binds the kernel and boots its processes first
# A batch is done when its slowest config is, and its worker takes no other batch meanwhile,
# so every batch a worker runs can cost it a compile timeout.  Measured on two H200s (64 Helion
# softmax configs): a batch of 32 ran in 11.7 s, the other waited 60 s on one config's compile;
# two batches per worker gave 1.10x over one GPU, one per worker 1.22x.  One batch per worker.
BATCHES_PER_WORKER = 1
POLL_S = 0.05  # how often the driver looks for results streamed from the workers


def split_evenly(candidates: Sequence[Candidate], parts: int) -> list[list[Candidate]]:
    """`candidates` in order, cut into min(parts, len) batches whose sizes differ by one at most."""
    parts = max(1, min(parts, len(candidates)))
    size, extra = divmod(len(candidates), parts)
    batches, start = [], 0
    for index in range(parts):
        end = start + size + (index < extra)
        batches.append(list(candidates[start:end]))
        start = end
    return [batch for batch in batches if batch]


class DistributedEvaluator:
    """Evaluates batches of configs as Dask tasks (one batch per worker at a time).

    A GPU worker compiles a batch's configs while it times those already compiled, so a
    large batch hides its slowest compile behind the timing of the others; a batch is also
    the unit Dask spreads over workers, while its results stream back one by one (see
    `evaluate`).  `batch_size=None` (automatic) cuts each generation into BATCHES_PER_WORKER
    batches per worker, of ceil(configs / workers) configs at most (why one: see the
    constant).  An explicit size is kept as given (1: every config its own Dask task, with
    no overlap within a worker).
    """

    def __init__(self, client: Any, factory: Callable[[], Any], *, reference: Candidate | None = None,
                 batch_size: int | None = 1, on_close: Callable[[], None] | None = None,
                 calibration_timeout_s: float = CALIBRATION_TIMEOUT_S, farm: bool | None = None,
                 gpus: int | None = None, async_batch_size: int = 1) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be at least 1 (or None: automatic), got {batch_size}")
        self.client, self.factory, self.batch_size = client, factory, batch_size
        self._on_close = on_close
        self._closed = False
        # Configs kept in flight for the asynchronous session (pipeline.py): GPU workers, and a
        # compile farm where the cluster has compile workers and the factory can compile apart.
        self.pipeline = Pipeline(client, factory, farm_on=farm, gpus=gpus, batch_size=async_batch_size)
        gpu_names = [name for name, _ in self.pipeline.members[GPU]]
        compile_names = [name for name, _ in self.pipeline.members[COMPILE]] if self.pipeline.farm else []
        self.description = (f"{getattr(factory, 'description', 'evaluating')} through Dask: {len(gpu_names)} "
                            f"worker(s) ({', '.join(gpu_names)})"
                            + (f", compiling on {len(compile_names)} ({', '.join(compile_names)})"
                               if compile_names else ""))
        self.calibration: dict[str, Result] = (
            self._calibrate(reference, calibration_timeout_s) if reference is not None else {})

    # -- the asynchronous protocol (autotune/evaluators/base.py: AsyncEvaluator) ---------------
    def slots(self) -> int:
        return self.pipeline.slots()

    def submit(self, candidates: Sequence[Candidate]) -> None:
        self.pipeline.submit(candidates)

    def poll(self, timeout: float) -> list[Result]:
        return self.pipeline.poll(timeout)

    def cancel(self) -> None:
        self.pipeline.cancel()

    # -- the protocol --------------------------------------------------------------------
    def batches(self, candidates: Sequence[Candidate]) -> list[list[Candidate]]:
        """How a generation is cut into Dask tasks (see the class docstring)."""
        if self.batch_size is not None:
            return [list(candidates[i:i + self.batch_size]) for i in range(0, len(candidates), self.batch_size)]
        workers = max(1, len(self.pipeline.members[GPU]))
        return split_evenly(candidates, BATCHES_PER_WORKER * workers)

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        """Each result as soon as its worker has it: a worker sends every result through a Dask
        queue as it is measured, and returns its batch's results when the batch is done (the
        two are merged, each config once).  A batch whose worker died is retried with only the
        configs that had not come back, so a dead worker costs only its configs in flight."""
        if self.pipeline.farm or self.pipeline.gpus is not None or self.pipeline.members[COMPILE]:
            yield from self._through_pipeline(candidates)  # roles to respect: every config as its own task
            return
        from distributed import Queue

        wanted = {candidate.key for candidate in candidates}
        received: set[str] = set()
        ready: list[Result] = []  # received, not yet handed to the caller

        def absorb(results: Sequence[Result]) -> None:
            for result in results:
                if result.key in wanted and result.key not in received:
                    received.add(result.key)
                    ready.append(result)

        def still_owed(_index: int, batch: list[Candidate]) -> list[Candidate]:
            absorb(_drain(sink))  # a result put just before its worker died is in the queue by now
            return [candidate for candidate in batch if candidate.key not in received]

        sink_name = f"autotune-results-{uuid.uuid4().hex}"
        sink = Queue(sink_name, client=self.client)
        stream = ClusterStream(self.client, on_worker.evaluate, self.batches(candidates), self.factory, sink_name,
                               retry_item=lambda index, batch: still_owed(index, batch) or None)
        try:
            while True:
                absorb(_drain(sink))
                yield from ready
                ready.clear()
                if stream.finished:
                    break
                outcome = stream.next_outcome(timeout=POLL_S)
                if outcome is None:
                    continue
                index, value = outcome
                if isinstance(value, Failed):
                    absorb([Result(key=candidate.key, status=Status.CRASH, error=value.message)
                            for candidate in still_owed(index, stream.items[index])])
                else:
                    absorb(value[1])
        finally:  # also when the session stopped early (time budget, Ctrl-C): cancel what is in flight
            stream.close()
            with contextlib.suppress(Exception):
                sink.close()

    def _through_pipeline(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        self.pipeline.submit(candidates)
        left = {candidate.key for candidate in candidates}
        try:
            while left:
                for result in self.pipeline.poll(POLL_S):
                    if result.key in left:
                        left.discard(result.key)
                        yield result
        finally:
            if left:
                self.pipeline.cancel()

    def baselines(self) -> dict[str, Result]:
        """The library baselines, timed on one worker (like every other baseline of a session)."""
        for _index, outcome in run_on_cluster(self.client, on_worker.baselines, [None], self.factory,
                                                  workers=self._gpu_addresses()):
            return {} if isinstance(outcome, Failed) else outcome
        return {}

    def _gpu_addresses(self) -> list[str] | None:
        """Where a task that needs a GPU may run: None (anywhere) on a cluster of GPU workers only."""
        if not self.pipeline.members[COMPILE] and self.pipeline.gpus is None:
            return None
        return [address for _name, address in self.pipeline.members[GPU]]

    def close(self) -> None:
        self.pipeline.cancel()
        if self._closed:
            return
        self._closed = True
        try:
            self.client.run(on_worker.close_evaluators, self.factory)
        except Exception:  # noqa: BLE001 - workers already gone: nothing left to close
            pass
        if self._on_close is not None:
            self._on_close()

    # -- calibration ---------------------------------------------------------------------------
    def _calibrate(self, reference: Candidate, timeout_s: float) -> dict[str, Result]:
        """The reference config timed once on each worker, keyed by worker label (ok results only)."""
        from distributed import wait

        futures = [self.client.submit(on_worker.evaluate, [reference], self.factory, pure=False, workers=[address],
                                      allow_other_workers=False)
                   for _name, address in self.pipeline.members[GPU]]  # the GPUs only: compile workers time nothing
        try:
            wait(futures, timeout=timeout_s)
        except TimeoutError:  # a worker that never answered is left uncalibrated
            pass
        calibration = {}
        for future in futures:
            if future.status == "finished":
                label, (result,) = future.result()
                if result.ok:
                    calibration[label] = result
            else:
                future.cancel()
        return dict(sorted(calibration.items()))


def _drain(sink: Any) -> list[Result]:
    """What the workers have put in the queue so far, without waiting."""
    try:
        return list(sink.get(batch=True))
    except Exception:  # noqa: BLE001 - the queue is a shortcut: every result also comes back with its batch
        return []


class RebenchmarkingDistributedEvaluator(DistributedEvaluator):
    """Adds the final round-robin re-timing, run on one worker so the contenders share one GPU."""

    def rebenchmark(self, candidates: Sequence[Candidate]) -> dict[str, Result]:
        if not candidates:
            return {}
        for _index, outcome in run_on_cluster(self.client, on_worker.rebenchmark, [list(candidates)], self.factory,
                                                  workers=self._gpu_addresses()):
            return {} if isinstance(outcome, Failed) else outcome[1]
        return {}


def distributed_evaluator(client: Any, factory: Callable[[], Any], **options: Any) -> DistributedEvaluator:
    """The evaluator for `factory`: with the final re-timing when its evaluators can re-time."""
    cls = RebenchmarkingDistributedEvaluator if getattr(factory, "rebenchmarks", False) else DistributedEvaluator
    return cls(client, factory, **options)
