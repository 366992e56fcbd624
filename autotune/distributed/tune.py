"""`autotune tune --workers SPEC`: the distributed GPU evaluator for a tuning request."""

from __future__ import annotations

import os
from typing import Any

from autotune.errors import UserError
from autotune.task import TuningTask
from search_spaces.space import InvalidConfig

ASYNC_BATCH = 4  # configs per GPU task where the compile processes per worker are not known here


def distributed_gpu_evaluator(request: Any, spec: Any, shape: tuple[int, ...], task: TuningTask,
                              console: Any) -> Any:
    """Connect to (or start) the cluster, build each worker's GPU evaluator and calibrate them.

    Each local GPU worker gets an equal share of this machine's cores for its compile
    processes, less two for its benchmark process and itself (`--compile-workers` sets it
    per worker).
    """
    from autotune.distributed.cluster import connect, parse_workers
    from autotune.distributed.evaluator import distributed_evaluator
    from autotune.distributed.factories import GPUEvaluatorFactory
    from autotune.kernel_wire import wire_form
    from autotune.evaluators.gpu import default_compile_workers

    spec_of_workers = parse_workers(request.workers)
    try:
        client, close = connect(spec_of_workers)
    except (ImportError, RuntimeError, OSError, TimeoutError) as error:
        raise UserError(str(error)) from None
    try:
        from autotune.distributed.pipeline import GPU, roles

        count = max(1, len(roles(client)[GPU]))  # compile workers, if any, compile for them
        compile_workers = request.compile_workers
        if compile_workers is None and spec_of_workers.kind == "local-gpus":
            compile_workers = default_compile_workers((os.cpu_count() or 2) // count)
        factory = GPUEvaluatorFactory(
            wire_form(spec), tuple(shape), task.dtype, device_name=task.identity.device, compile_workers=compile_workers,
            compile_timeout_s=request.compile_timeout_s, run_timeout_s=request.run_timeout_s, seed=request.seed,
            timing_target_ms=request.timing_target_ms, slow_factor=request.slow_factor,
            compile_timeout_factor=request.compile_timeout_factor)
        try:
            reference = task.default_candidate()
        except InvalidConfig:
            reference = None
        console.print(f"spreading evaluation over {count} Dask worker(s) ({request.workers}); "
                      + ("timing the default config on each to calibrate them" if reference else "no calibration"))
        # The session keeps configs in flight (async_search.py); each task hands a GPU worker as
        # many configs as it has compile processes, so its evaluator compiles them in parallel
        # while it times (the GPU evaluator cannot yet take configs one by one while busy).
        return distributed_evaluator(client, factory, reference=reference, batch_size=None, on_close=close,
                                     async_batch_size=max(1, compile_workers or ASYNC_BATCH))
    except BaseException:
        close()
        raise
