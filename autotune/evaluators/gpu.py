"""The GPU evaluator: parallel compilation, isolated benchmarking, every failure classified.

A generation is evaluated in two phases so compilation never disturbs a timing:
1. compile workers (one process each) build every config and run it once, in parallel,
   each under a compile timeout and then a run timeout;
2. the benchmark worker (one process) checks accuracy and times the survivors one by one.
A worker that hangs is killed and one that dies is replaced; the config is recorded with
the matching status and the session goes on.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterator, Sequence

from autotune.evaluators.gpu_worker import WorkerInit, bench_worker_main, compile_worker_main
from autotune.evaluators.timing import Timing, TimingOptions
from autotune.types import Candidate, Result, Status

SETUP_TIMEOUT_S = 300.0
BASELINE_TIMEOUT_S = 600.0  # torch.compile's first call compiles with inductor
COPY_BASELINE = "device copy"


class WorkerSetupError(RuntimeError):
    """A worker could not bind the kernel at all (not a per-config failure)."""


class _Worker:
    """One child process and the pipe to it; restarted transparently after a kill or crash."""

    def __init__(self, ctx: Any, target: Callable, init: WorkerInit, name: str) -> None:
        self._ctx, self._target, self._init, self.name = ctx, target, init, name
        self.process: Any = None
        self.conn: Connection | None = None
        self.ready = False
        self.started_at = 0.0

    def start(self) -> None:
        parent, child = self._ctx.Pipe()
        self.process = self._ctx.Process(target=self._target, args=(child, self._init), name=self.name, daemon=True)
        self.process.start()
        child.close()
        self.conn, self.ready, self.started_at = parent, False, time.monotonic()

    def restart(self) -> None:
        """Replace the process; the new one boots in the background."""
        self.kill()
        self.start()

    def poll_ready(self) -> bool:
        """Non-blocking: True once the worker has reported ready; raises if its set-up failed."""
        if self.ready:
            return True
        if self.conn is None or not self.alive() and not self.conn.poll(0):
            code = self.process.exitcode if self.process else None
            self.kill()
            raise WorkerSetupError(f"{self.name} died while starting (exit code {code})")
        if not self.conn.poll(0):
            if time.monotonic() - self.started_at > SETUP_TIMEOUT_S:
                self.kill()
                raise WorkerSetupError(f"{self.name} did not start within {SETUP_TIMEOUT_S:.0f} s")
            return False
        self.wait_ready(0)
        return True

    def wait_ready(self, timeout: float = SETUP_TIMEOUT_S) -> None:
        if self.ready and self.alive():
            return
        if not self.alive() and not (self.conn is not None and self.conn.poll(0)):
            self.restart()
        assert self.conn is not None
        if not self.conn.poll(timeout):
            self.kill()
            raise WorkerSetupError(f"{self.name} did not start within {timeout:.0f} s")
        try:
            message = self.conn.recv()
        except EOFError:
            raise WorkerSetupError(f"{self.name} died while starting (exit code {self.process.exitcode})") from None
        if message[0] != "ready":
            raise WorkerSetupError(f"{self.name} could not set up: {message[1]}")
        self.ready = True

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def kill(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        if self.process is not None:
            self.process.join(timeout=10)
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn, self.ready = None, None, False

    def request_stop(self) -> None:
        if self.conn is not None and self.alive():
            try:
                self.conn.send(None)
            except (OSError, EOFError, BrokenPipeError):
                pass

    def stop(self) -> None:
        if self.conn is not None and self.alive():
            try:
                self.conn.send(None)
                self.process.join(timeout=5)
            except (OSError, EOFError, BrokenPipeError):
                pass
        self.kill()


class GPUEvaluator:
    """Evaluates configs of one task on the local GPU (see the module docstring)."""

    def __init__(self, kernel: str, shape: tuple[int, ...], dtype: str, *, device_name: str,
                 compile_workers: int | None = None, compile_timeout_s: float = 60.0,
                 run_timeout_s: float = 30.0, bench_timeout_s: float = 60.0, seed: int = 0,
                 timing: TimingOptions = TimingOptions(), compile_target: Callable = compile_worker_main,
                 bench_target: Callable = bench_worker_main) -> None:
        self.description = f"measuring on {device_name}"
        self.compile_timeout_s = compile_timeout_s
        self.run_timeout_s = run_timeout_s
        self.bench_timeout_s = bench_timeout_s
        ctx = multiprocessing.get_context("spawn")
        init = WorkerInit(kernel=kernel, shape=tuple(shape), dtype=dtype, seed=seed, timing=timing)
        count = compile_workers or max(1, min(16, (os.cpu_count() or 2) - 1))
        # The targets are parameters so tests can drive this orchestration with fake workers.
        self._compilers = [_Worker(ctx, compile_target, init, f"compile-{i}") for i in range(count)]
        self._bench = _Worker(ctx, bench_target, init, "bench")
        for worker in [*self._compilers, self._bench]:
            worker.start()  # they import torch and bind in parallel
        self._bench.wait_ready()
        self._compilers[0].wait_ready()  # fail fast if the kernel cannot be set up at all

    # -- the protocol --------------------------------------------------------------
    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        compiled: list[tuple[Candidate, float]] = []
        for item in self._compile_all(list(candidates)):
            if isinstance(item, Result):
                yield item
            else:
                compiled.append(item)
        for candidate, compile_s in compiled:
            yield self._bench_one(("config", candidate.key, dict(candidate.native)), compile_s)

    def baselines(self) -> dict[str, Result]:
        """The kernel's library baselines and a device-to-device copy of the input (the bandwidth ceiling)."""
        from autotune.kernels.registry import get_kernel

        names = list(get_kernel(self._bench._init.kernel).baselines)
        results = {name: self._bench_one(("baseline", name, name), None, timeout_s=BASELINE_TIMEOUT_S) for name in names}
        results[COPY_BASELINE] = self._bench_one(("copy", COPY_BASELINE, None), None)
        return results

    def rebenchmark(self, candidates: Sequence[Candidate]) -> dict[str, Result]:
        """Re-time the candidates round-robin in one process; medians over all rounds."""
        if not candidates:
            return {}
        request = ("rebench", "final", [(c.key, dict(c.native)) for c in candidates])
        reply = self._request(request, self.bench_timeout_s * (1 + len(candidates)))
        if reply.get("status") != Status.OK.value:
            return {}
        results = {}
        for key, samples in reply["samples"].items():
            results[key] = Result(key=key, status=Status.OK, median_ms=Timing(tuple(samples), "rebench").median_ms,
                                  min_ms=min(samples), max_ms=max(samples), repetitions=len(samples),
                                  samples_ms=tuple(samples))
        return results

    def close(self) -> None:
        workers = [*self._compilers, self._bench]
        for worker in workers:  # ask all to exit first, then wait: exits overlap
            worker.request_stop()
        for worker in workers:
            worker.stop()

    # -- phase 1: parallel compile + smoke run ------------------------------------------------
    def _compile_all(self, pending: list[Candidate]) -> Iterator[Result | tuple[Candidate, float]]:
        busy: dict[int, dict[str, Any]] = {}  # worker index -> {candidate, stage, deadline, compile_s}
        pending.reverse()
        try:
            yield from self._compile_loop(pending, busy)
        finally:  # the caller stopped early (time budget, Ctrl-C): workers mid-job hold stale replies
            for index in busy:
                self._compilers[index].restart()

    def _compile_loop(self, pending: list[Candidate], busy: dict[int, dict[str, Any]]
                      ) -> Iterator[Result | tuple[Candidate, float]]:
        """Dispatch to ready workers; never block on one that is (re)booting."""
        setup_failures: list[str] = []
        while pending or busy:
            booting = []
            for index, worker in enumerate(self._compilers):
                if index in busy:
                    continue
                if worker.process is None:
                    worker.start()
                try:
                    ready = worker.poll_ready()
                except WorkerSetupError as error:
                    setup_failures.append(str(error))
                    if len(setup_failures) >= 2 * len(self._compilers):  # the kernel cannot be set up at all
                        while pending:
                            yield Result(key=pending.pop().key, status=Status.CRASH, error=setup_failures[-1])
                        return
                    worker.restart()
                    ready = False
                if not ready:
                    booting.append(worker.conn)
                    continue
                if not pending:
                    continue
                candidate = pending.pop()
                try:
                    worker.conn.send((candidate.key, dict(candidate.native)))
                except OSError:  # it died while idle: replace it and retry the candidate
                    worker.restart()
                    pending.append(candidate)
                    continue
                busy[index] = {"candidate": candidate, "stage": "compile", "compile_s": None,
                               "started": time.monotonic(), "deadline": time.monotonic() + self.compile_timeout_s}
            if not busy and not booting:
                continue
            deadlines = [job["deadline"] for job in busy.values()]
            timeout = max(0.0, min([*deadlines, time.monotonic() + 1.0]) - time.monotonic())
            ready_conns = wait([self._compilers[i].conn for i in busy] + [c for c in booting if c], timeout=timeout)
            for index in [i for i in list(busy) if self._compilers[i].conn in ready_conns]:
                yield from self._on_message(index, busy)
            now = time.monotonic()
            for index in [i for i, job in busy.items() if job["deadline"] <= now]:
                job = busy.pop(index)
                self._compilers[index].restart()
                status = Status.COMPILE_TIMEOUT if job["stage"] == "compile" else Status.RUN_TIMEOUT
                limit = self.compile_timeout_s if job["stage"] == "compile" else self.run_timeout_s
                yield Result(key=job["candidate"].key, status=status, compile_s=job["compile_s"],
                             error=f"{job['stage']} did not finish within {limit:g} s; worker killed")

    def _on_message(self, index: int, busy: dict[int, dict[str, Any]]) -> Iterator[Result | tuple[Candidate, float]]:
        worker, job = self._compilers[index], busy[index]
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            busy.pop(index)
            code = worker.process.exitcode if worker.process else None
            worker.restart()
            yield Result(key=job["candidate"].key, status=Status.CRASH, compile_s=job["compile_s"],
                         error=f"worker process died during {job['stage']} (exit code {code})")
            return
        kind = message[0]
        if kind == "compiled":
            job.update(stage="run", compile_s=message[2], deadline=time.monotonic() + self.run_timeout_s)
        elif kind == "ran":
            busy.pop(index)
            yield (job["candidate"], job["compile_s"])
        elif kind == "failed":
            busy.pop(index)
            _, key, status, error, seconds = message
            if not worker.alive() or Status(status) is Status.CRASH:
                worker.restart()
            yield Result(key=key, status=Status(status), error=error, compile_s=seconds)

    # -- phase 2: one-by-one accuracy check and timing ---------------------------------------
    def _request(self, request: tuple[str, str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request to the benchmark worker; hangs and deaths become failed replies."""
        try:
            self._bench.wait_ready()
        except WorkerSetupError as error:
            return {"status": Status.CRASH.value, "error": str(error)}
        started = time.monotonic()
        self._bench.conn.send(request)
        if not self._bench.conn.poll(timeout_s):
            self._bench.restart()
            return {"status": Status.RUN_TIMEOUT.value, "bench_s": time.monotonic() - started,
                    "error": f"benchmark did not finish within {timeout_s:g} s; worker killed"}
        try:
            reply = self._bench.conn.recv()
        except (EOFError, OSError):
            code = self._bench.process.exitcode if self._bench.process else None
            self._bench.restart()
            return {"status": Status.CRASH.value, "bench_s": time.monotonic() - started,
                    "error": f"benchmark process died (exit code {code})"}
        if not self._bench.alive():
            self._bench.restart()
        return reply

    def _bench_one(self, request: tuple[str, str, Any], compile_s: float | None,
                   timeout_s: float | None = None) -> Result:
        key = request[1]
        reply = self._request(request, timeout_s or self.bench_timeout_s)
        return Result(
            key=key, status=Status(reply["status"]), median_ms=reply.get("median_ms"), min_ms=reply.get("min_ms"),
            max_ms=reply.get("max_ms"), repetitions=reply.get("repetitions", 0), compile_s=compile_s,
            bench_s=reply.get("bench_s"), rel_error=reply.get("rel_error"), error=reply.get("error", ""),
            samples_ms=tuple(reply.get("samples_ms", ())),
        )
