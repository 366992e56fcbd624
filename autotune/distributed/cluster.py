"""Which Dask cluster evaluations go to: `--workers local-gpus | local:N | ADDRESS`.

* `local-gpus`: a local cluster with one single-threaded worker per visible GPU, each pinned
  to its GPU through CUDA_VISIBLE_DEVICES and named gpu0, gpu1, ...; the compile processes of
  each GPU's evaluator are that worker's children.
* `local:N`: N single-threaded CPU worker processes (cpu0, ...): tests, fakes, whole jobs.
* anything else is a scheduler address (`tcp://host:8786`): join an existing cluster.
* `+compile:M` after `local-gpus` or `local:N` adds M compile workers (compile0, ...), CPU
  processes that compile configs for the GPU workers (a compile farm, farm.py).

Roles are Dask resources: the GPU workers started here declare `gpu`, compile workers
`compile`; on an external cluster, start GPU workers with `--resources gpu=1` and compile
workers (on any host) with `--resources compile=1` (a cluster that declares no role has GPU
workers only).

For the clusters started here, a worker that dies is never retried by the scheduler
(`allowed_failures=0`): the evaluator retries once on another worker itself, so the rule is
the same on clusters we did not start.  Workers must be non-daemonic processes, because the
GPU evaluator starts compile and benchmark processes and a daemonic process cannot have
children; workers of an external cluster need `distributed.worker.daemon: false` too.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

LOCAL_GPUS = "local-gpus"
CPU_PREFIX = "local:"
COMPILE_SUFFIX = "+compile:"

# Set in the process that starts the cluster: nannies read it each time they (re)start a worker.
WORKER_CONFIG = {"distributed.worker.daemon": False}
# Read once, when the scheduler starts: a worker is handed one task at a time, so a worker that
# dies takes only the task it was running with it.
SCHEDULER_CONFIG = {"distributed.scheduler.worker-saturation": 1.0}


@dataclass(frozen=True)
class WorkersSpec:
    """A parsed `--workers` value."""

    kind: str  # "local-gpus", "local" or "address"
    count: int = 0  # CPU workers, for "local"
    address: str = ""  # for "address"
    compilers: int = 0  # local compile workers beside them (+compile:M)

    @property
    def text(self) -> str:
        base = {"local-gpus": LOCAL_GPUS, "local": f"{CPU_PREFIX}{self.count}"}.get(self.kind, self.address)
        return base + (f"{COMPILE_SUFFIX}{self.compilers}" if self.compilers else "")


def parse_workers(text: str) -> WorkersSpec:
    """`local-gpus`, `local:N` (N >= 1) or a scheduler address; ValueError in one line otherwise."""
    text = text.strip()
    if COMPILE_SUFFIX in text and "://" not in text:
        base, count = text.split(COMPILE_SUFFIX, 1)
        if not count.isascii() or not count.isdigit() or int(count) < 1:
            raise ValueError(f"--workers {text!r}: +compile:M needs a positive number of compile workers")
        spec = parse_workers(base)
        return WorkersSpec(spec.kind, count=spec.count, address=spec.address, compilers=int(count))
    if text == LOCAL_GPUS:
        return WorkersSpec("local-gpus")
    if text.startswith(CPU_PREFIX):
        count = text[len(CPU_PREFIX):]
        if not count.isascii() or not count.isdigit() or int(count) < 1:
            raise ValueError(f"--workers {text!r}: local:N needs a positive number of worker processes")
        return WorkersSpec("local", count=int(count))
    if "://" not in text or not text.split("://", 1)[1]:
        raise ValueError(f"--workers {text!r} is not local-gpus, local:N or a scheduler address such as "
                         "tcp://scheduler:8786")
    return WorkersSpec("address", address=text)


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (each worker gets one)."""
    from autotune.device import gpu_count

    count = gpu_count()
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def connect(workers: str | WorkersSpec) -> tuple[Any, Callable[[], None]]:
    """A Dask client for `workers`, and the function that closes it (and the cluster, if started here)."""
    try:
        from distributed import Client
    except ImportError:
        raise ImportError("spreading evaluation needs Dask distributed: pip install -e \".[distributed]\"") from None
    spec = parse_workers(workers) if isinstance(workers, str) else workers
    if spec.kind == "address":
        client = Client(spec.address, timeout="30s")
        try:
            client.wait_for_workers(1, timeout=60)
        except TimeoutError:
            client.close()
            raise RuntimeError(f"--workers {spec.address}: the scheduler has no workers (waited 60 s)") from None
        return client, client.close
    if spec.kind == "local-gpus":
        devices = visible_gpus()
        if not devices:
            raise RuntimeError("--workers local-gpus: no GPU is visible on this machine")
        worker_specs = {f"gpu{i}": {"CUDA_VISIBLE_DEVICES": device} for i, device in enumerate(devices)}
    else:
        worker_specs = {f"cpu{i}": {} for i in range(spec.count)}
    roles = {name: {"gpu": 1} for name in worker_specs}
    for i in range(spec.compilers):  # CPU only: no GPU is visible to a compile worker
        worker_specs[f"compile{i}"] = {"CUDA_VISIBLE_DEVICES": ""}
        roles[f"compile{i}"] = {"compile": 1}
    cluster = start_local_cluster(worker_specs, roles)
    client = Client(cluster)
    client.wait_for_workers(len(worker_specs), timeout=120)

    def close() -> None:
        client.close()
        cluster.close()

    return client, close


def start_local_cluster(worker_env: dict[str, dict[str, str]],
                        resources: dict[str, dict[str, float]] | None = None, *, in_process: bool = False) -> Any:
    """A local cluster of single-threaded, non-daemonic worker processes, one per name, each
    with the given extra environment and role (`resources`; default: every worker a GPU
    worker); no dashboard and no memory limit (an evaluator's memory is its GPU's, and a
    worker killed for memory would look like a crash)."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster, Worker

    dask.config.set(WORKER_CONFIG)  # process-wide: nannies restart dead workers long after this call
    roles = resources or {}
    # In this process (threads, no environment of their own): fakes in tests, where starting a
    # process per worker would cost seconds each.  A worker there must not forbid writes.
    options = {} if in_process else {"silence_logs": logging.ERROR}
    workers = {name: {"cls": Worker if in_process else Nanny,
                      "options": {"name": name, "nthreads": 1, "memory_limit": 0, "host": "127.0.0.1",
                                  "resources": roles.get(name, {"gpu": 1}), **options,
                                  **({} if in_process else {"env": env})}}
               for name, env in worker_env.items()}
    scheduler = {"cls": Scheduler, "options": {"allowed_failures": 0, "dashboard": False, "dashboard_address": ":0",
                                               "host": "127.0.0.1"}}
    with dask.config.set(SCHEDULER_CONFIG):  # quiet: a worker's death is reported in the results it cost
        return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.CRITICAL)
