"""The GPU evaluator: compilation overlapped with timing, every failure classified.

Compile workers (one process each) compile configs while the benchmark worker (one
process) checks accuracy and times the configs compiled before, so neither the GPU nor
the cores wait for a generation's slowest compile.  A compile worker compiles without
launching anything, then waits until the parent grants it the GPU to run the config once
(the smoke run: a hang or a crash then costs a compile worker, not the benchmark worker).

The exclusivity rule, kept by the parent alone (gpu_generation.py): a benchmark request is
sent only while no smoke run is in flight, and smoke runs are granted only while no
benchmark request is.  When the GPU is free, every config waiting to run is granted (they
may run together), else the next config that ran is timed.  A compile worker's set-up,
which creates its CUDA context and its inputs, is granted like a smoke run.  So a timing
never shares the GPU with another Triton kernel of ours: compiling shares only the CPU with
it, and one core is left for the benchmark worker.  A benchmark request names the config to
be timed after it, which the benchmark worker builds while the GPU works through the current
timing's queued calls (gpu_worker.NextRunner).  (Compiling still runs a launch
function's own torch operations; two of them zero a few counters, a fill of microseconds:
see autotune/kernels/compile_only.py.)

Deadlines: `compile_timeout_s` from dispatch until 'compiled' (tightened to 10x the session's
median compile time once 16 configs compiled: see compile_deadline.py), `run_timeout_s` from the grant
until 'ran', `bench_timeout_s` per benchmark; waiting for a grant has none (that wait is
ours).  A worker that hangs is killed and one that dies is replaced; the config is recorded
with the matching status and the session goes on; a config in flight when its process died is
tried again in a fresh one (gpu_generation.MAX_ATTEMPTS).  Baselines are timed in a fresh
benchmark process, never in one that timed configs.  What workers write to fd 1 and 2 is
captured, never shown: a failing config's goes into its error and `<db>.logs/<session>/`
(worker_output.py).  Results stream: failures at once, the others once timed.

Asynchronous (`asynchronous=True`, or AUTOTUNE_ASYNC_GPU=1): the evaluator also takes configs
while others are out (base.AsyncEvaluator), so the session keeps a window in flight
(async_search.py) and no generation waits for its slowest compile.  One long-lived Generation
then takes every submitted config: a free compile worker gets the next one at once, a compiled
config joins the benchmark worker's queue in the order it ran, `poll` returns what is known, and
the deadlines and retries above hold unchanged.  The compile limit adapts as results come.  Off
by default until measured on a GPU; then nothing is compiled ahead (nothing waits to overlap).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from autotune.evaluators.compile_ahead import COMPILE_AHEAD, Ahead, Guess
from autotune.evaluators.compile_deadline import CompileDeadline
from autotune.evaluators.failures import exit_description
from autotune.evaluators.gpu_generation import Generation, drop_ahead
from autotune.evaluators.gpu_jobs import COMPILE, result_from_reply
from autotune.evaluators.gpu_process import (SETTING_UP, Worker, WorkerSetupError, wait_all_ready,
                                             worker_context)
from autotune.evaluators.gpu_worker import WorkerInit, bench_worker_main, compile_worker_main
from autotune.evaluators.timing import Timing, TimingOptions
from autotune.evaluators.worker_output import WorkerOutput
from autotune.types import Candidate, Result, Status

BASELINE_TIMEOUT_S = 600.0  # torch.compile's first call compiles with inductor
COPY_BASELINE = "device copy"
CLOSE_WAIT_S = 5.0  # how long closing waits for all workers to exit by themselves before killing them
# AUTOTUNE_EARLY_SETUPS=0: the compile workers other than the first set up only when a generation
# grants it (the behaviour before, for measuring what setting them up at the start saves).
EARLY_SETUPS = os.environ.get("AUTOTUNE_EARLY_SETUPS", "1") != "0"
# AUTOTUNE_ASYNC_GPU=1: the evaluator takes configs while others are out (the module docstring).
ASYNC_GPU = os.environ.get("AUTOTUNE_ASYNC_GPU", "0") != "0"


def default_compile_workers(cores: int | None = None) -> int:
    """Compile processes for `cores` (this machine's by default): all but two, one left for
    the benchmark worker, which now times while they compile, and one for this process."""
    cores = cores if cores is not None else (os.cpu_count() or 2)
    return max(1, min(16, cores - 2))


class GPUEvaluator:
    """Evaluates configs of one task on the local GPU (see the module docstring)."""

    def __init__(self, kernel: Any, shape: tuple[int, ...], dtype: str, *, device_name: str,
                 compile_workers: int | None = None, compile_timeout_s: float = 60.0,
                 run_timeout_s: float = 30.0, bench_timeout_s: float = 60.0, seed: int = 0,
                 timing: TimingOptions = TimingOptions(), compile_timeout_factor: float = 10.0,
                 compile_target: Callable = compile_worker_main, bench_target: Callable = bench_worker_main,
                 compile_ahead: bool | None = None, log_root: Path | str | None = None,
                 asynchronous: bool | None = None) -> None:
        self.description = f"measuring on {device_name}"
        self.compile_deadline = CompileDeadline(compile_timeout_s, factor=compile_timeout_factor)
        self.run_timeout_s = run_timeout_s
        self.bench_timeout_s = bench_timeout_s
        from autotune.kernel_loader import resolve_kernel
        from autotune.kernel_wire import wire_form

        # `kernel`: an autotune.Kernel, its locator, or what kernel_wire.wire_form made of it;
        # the workers get the kernel itself (every hook with it), a built-in one by name.
        if isinstance(kernel, bytes):
            from autotune.kernel_wire import from_wire

            payload, kernel = kernel, from_wire(kernel)
        else:
            kernel = resolve_kernel(kernel) if isinstance(kernel, str) else kernel
            payload = wire_form(kernel)
        self._baseline_names = list(kernel.baselines)
        # Which outputs each baseline (and every config: "configs") was compared on, once baselines ran.
        self.compared: dict[str, str] = {}
        ctx = worker_context()
        init = WorkerInit(kernel=payload, shape=tuple(shape), dtype=dtype, seed=seed, timing=timing)
        count = compile_workers or default_compile_workers()
        # Whether the session may pass `guess` to `evaluate` (compile_ahead.py; None: the switch's
        # default), and what generations compiled ahead for the next one.
        self.compiles_ahead = COMPILE_AHEAD if compile_ahead is None else compile_ahead
        # Whether the session may keep configs in flight (base.is_asynchronous reads it), and the
        # generation that takes them while it does; nothing is compiled ahead then.
        self.asynchronous = ASYNC_GPU if asynchronous is None else asynchronous
        self.compiles_ahead = self.compiles_ahead and not self.asynchronous
        self._stream: Generation | None = None
        self.ahead = Ahead()
        # The targets are parameters so tests can drive this orchestration with fake workers.
        # `log_root` (`<db>.logs`): where failing configs' output is filed, per session.
        self.output = WorkerOutput(Path(log_root) if log_root is not None else None)
        self._compilers = [Worker(ctx, compile_target, init, f"compile-{i}", gated=True,
                                  output_dir=self.output.folder) for i in range(count)]
        self._bench = Worker(ctx, bench_target, init, "bench", output_dir=self.output.folder)
        for worker in [*self._compilers, self._bench]:
            worker.start()  # they import torch and bind in parallel
        try:
            # The benchmark worker and the first compile worker set up side by side (nothing is
            # timed yet), failing fast if the kernel cannot be set up at all.  The other compile
            # workers are granted their set-ups meanwhile too (EARLY_SETUPS) but not waited for:
            # granted later, by the first generation, their set-ups held its first timing back.
            wait_all_ready([self._bench, self._compilers[0]],
                           also_set_up=self._compilers[1:] if EARLY_SETUPS else ())
        except BaseException:
            self.close()
            raise
        # Where the wait went, per worker and phase (recorded with the session's set-up).
        self.setup_phases = {f"{worker}_{phase}": seconds for worker, source in
                             (("bench", self._bench), ("compile", self._compilers[0]))
                             for phase, seconds in source.setup_phases.items()}
        # A compile worker not yet booted by then is granted its set-up by the first generation
        # that needs it, like a smoke run.

    # -- the protocol --------------------------------------------------------------
    def session_started(self, session_id: int) -> None:
        """The session's id: its failing configs' output is filed under `<log_root>/<session_id>/`."""
        self.output.session_started(session_id)

    def evaluate(self, candidates: Sequence[Candidate], guess: Guess | None = None) -> Iterator[Result]:
        """One generation, all of it (configs submitted and still out are dropped first)."""
        self.cancel()
        compile_s = self.compile_deadline.seconds()
        generation = Generation(self._compilers, self._bench, list(candidates), compile_timeout_s=compile_s,
                                run_timeout_s=self.run_timeout_s, bench_timeout_s=self.bench_timeout_s,
                                compile_timeout_note=self.compile_deadline.describe(compile_s),
                                ahead=self.ahead, guess=guess if self.compiles_ahead else None,
                                output=self.output)
        for result in generation.results():
            self.compile_deadline.observe(result)
            yield result

    # -- the asynchronous protocol (base.AsyncEvaluator) -------------------------------------
    def slots(self) -> int:
        """A config per compile worker, one being timed and one queued behind it (built ahead)."""
        return len(self._compilers) + 2

    def submit(self, candidates: Sequence[Candidate]) -> None:
        if self._stream is None:
            drop_ahead(self.ahead, self._compilers)  # a synchronous generation's guesses: nobody asks now
            self._stream = Generation(self._compilers, self._bench, [], compile_timeout_s=0.0,
                                      run_timeout_s=self.run_timeout_s, bench_timeout_s=self.bench_timeout_s,
                                      ahead=self.ahead, output=self.output)
        self._stream.add(list(candidates))

    def poll(self, timeout: float) -> list[Result]:
        stream = self._stream
        if stream is None or not stream.busy:
            return []
        compile_s = self.compile_deadline.seconds()  # for the configs dispatched from now on
        stream.timeouts[COMPILE], stream.notes[COMPILE] = compile_s, self.compile_deadline.describe(compile_s)
        results = stream.step(timeout)
        for result in results:
            self.compile_deadline.observe(result)
        return results

    def cancel(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.abandon()

    def baselines(self) -> dict[str, Result]:
        """The kernel's library baselines and a device-to-device copy of the input (the bandwidth ceiling)."""
        self.cancel()  # the search is over: what is still out is nobody's
        drop_ahead(self.ahead, self._compilers)  # the search is over: no generation follows
        # A fresh process: one that timed configs may have been left in any state by them.
        self._bench.restart()
        results = {}
        for name in self._baseline_names:
            reply = self._request(("baseline", name, name), BASELINE_TIMEOUT_S)
            results[name] = result_from_reply(name, reply, None)
            self.compared[name] = reply.get("compared", "")
        reply = self._request(("copy", COPY_BASELINE, None), self.bench_timeout_s)
        results[COPY_BASELINE] = result_from_reply(COPY_BASELINE, reply, None)
        self.compared["configs"] = reply.get("compared", "")  # the copy's reply says what configs are checked on
        return results

    def rebenchmark(self, candidates: Sequence[Candidate]) -> dict[str, Result]:
        """Re-time the candidates round-robin in one process; medians over all rounds."""
        if not candidates:
            return {}
        self.cancel()
        drop_ahead(self.ahead, self._compilers)  # compiles would share the cores with the re-timing
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
        self.cancel()
        drop_ahead(self.ahead, self._compilers)  # mid-compile they would answer only once it ends
        workers = [*self._compilers, self._bench]
        for worker in workers:  # ask all to exit first, then wait: exits overlap
            worker.request_stop()
        deadline = time.monotonic() + CLOSE_WAIT_S  # one wait for all, not one per worker
        for worker in workers:
            worker.stop(timeout=max(0.0, deadline - time.monotonic()))
        self.output.close()

    # -- one request at a time, when no generation is in flight (baselines, re-timing) ----------
    def _settle_compilers(self) -> None:
        """Wait for compile workers' set-ups still in flight (GPU work) before timing."""
        for worker in self._compilers:
            while worker.state == SETTING_UP:
                try:
                    worker.poll()  # raises once the set-up overran its timeout
                except WorkerSetupError:
                    break
                if worker.state == SETTING_UP:
                    worker.conn.poll(0.5)

    def _request(self, request: tuple[str, str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request to the benchmark worker; hangs and deaths become failed replies."""
        self._settle_compilers()
        try:
            self._bench.wait_ready()
        except WorkerSetupError as error:
            return {"status": Status.CRASH.value, "error": str(error)}
        self.output.begin(request[1], self._bench)  # what it writes from here on is this request's
        started = time.monotonic()
        try:
            self._bench.conn.send(request)
            answered = self._bench.conn.poll(timeout_s)
            reply = self._bench.conn.recv() if answered else None
        except (EOFError, OSError):
            code = self._bench.exit_code()
            self._bench.restart()
            return {"status": Status.CRASH.value, "bench_s": time.monotonic() - started,
                    "error": f"benchmark process died ({exit_description(code)})"}
        if reply is None:
            self._bench.restart()
            return {"status": Status.RUN_TIMEOUT.value, "bench_s": time.monotonic() - started,
                    "error": f"benchmark did not finish within {timeout_s:g} s; worker killed"}
        if reply.get("status") == Status.CRASH.value or not self._bench.alive():
            self._bench.restart()  # it exits after a crash
        return reply
