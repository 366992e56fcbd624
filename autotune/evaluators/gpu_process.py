"""The GPU evaluator's handle on one worker process: start, boot, kill and replace it.

A worker boots in stages, each reported on its pipe.  An ungated worker (the benchmark
worker) sets itself up as soon as it starts and says ("ready",).  A gated worker (a compile
worker) first imports what it needs, CPU work only, says ("booted",) and waits: creating its
CUDA context and its inputs puts work on the GPU, so it does that only when the parent sends
("setup",), which the parent grants under the same rule as a smoke run (see gpu.py).
"""

from __future__ import annotations

import getpass
import multiprocessing
import os
import tempfile
import time
from contextlib import AbstractContextManager, contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

SETUP_TIMEOUT_S = 300.0

STOPPED, BOOTING, BOOTED, SETTING_UP, READY = "stopped", "booting", "booted", "setting up", "ready"
CONTEXT_PHASE = "context_s"  # the set-up phase that creates a worker's CUDA context


# What every worker imports before it can do anything: loaded once, in the fork server.
PRELOAD = ("torch", "triton", "helion", "autotune.evaluators.gpu_worker")


def worker_context() -> Any:
    """How workers are started.  Where the platform has it, from a fork server that imported
    `PRELOAD` once: a new worker is a fork of it and starts in a fraction of a second instead of
    importing torch, Triton and Helion again (several seconds each, every worker at once
    contending for the CPU), and later sessions of the same process find the server warm.
    The server must never initialise the CUDA driver, or no fork of it could use the GPU:
    importing Helion imports torch's inductor, which asks `torch.cuda.is_available()`, so the
    server starts with torch's NVML-based check (`server_environment`).  Elsewhere, spawn.
    Each worker takes the starting process's environment as it is when the worker starts
    (`_run_in_environment`); what the preloaded modules read on import is fixed when the server
    starts."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    from multiprocessing import forkserver

    with server_environment():
        forkserver.ensure_running()  # at once, or the first worker's start would, without the check below
    return context


# Answer torch.cuda.is_available() from NVML, which leaves the CUDA driver uninitialised.
SERVER_ENVIRONMENT = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}


def server_environment() -> AbstractContextManager[None]:
    """`SERVER_ENVIRONMENT` for the fork server to inherit, this process's own restored after."""
    return environment_for_workers(SERVER_ENVIRONMENT)


@contextmanager
def environment_for_workers(values: dict[str, str]) -> Iterator[None]:
    """`values` in this process's environment while inside, for the processes started there to
    take (a worker takes the environment of its start); the variables restored after."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# Compiled kernels outlive a process in on-disk caches (Triton's, and inductor's for the modules
# Helion generates): a session after another at the same shape finds the configs the earlier one
# compiled already built.  Measurements of how long tuning takes (the held-out study, start-up
# latency) compile into empty caches of their own instead, as a first run on a fresh machine would.
COMPILE_CACHES = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


@contextmanager
def fresh_compile_caches() -> Iterator[Path]:
    """Empty compile caches for the workers (and processes) started inside; the environment is
    restored, and the caches removed, after."""
    with tempfile.TemporaryDirectory(prefix="compile-caches-") as folder, \
            environment_for_workers({name: str(Path(folder) / name.lower()) for name in COMPILE_CACHES}):
        yield Path(folder)


EMPTY_CACHES, WARM_CACHES = "empty", "warm"


def compile_caches_state(environ: Mapping[str, str] | None = None) -> str:
    """EMPTY_CACHES where none of the on-disk compile caches that workers started now would use
    holds a file yet (a fresh machine, or `fresh_compile_caches`), else WARM_CACHES.  Why it is
    recorded with each GPU session: its compile times, and so its wall time, depend on it, and a
    session run after another at the same shape finds that one's configs compiled."""
    environ = os.environ if environ is None else environ
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid: inductor then has no default to read
        user = None
    defaults = {"TRITON_CACHE_DIR": Path.home() / ".triton" / "cache",
                "TORCHINDUCTOR_CACHE_DIR": Path(tempfile.gettempdir()) / f"torchinductor_{user}" if user else None}
    for name in COMPILE_CACHES:
        folder = Path(environ[name]) if environ.get(name) else defaults[name]
        if folder is not None and folder.is_dir() and any(path.is_file() for path in folder.rglob("*")):
            return WARM_CACHES
    return EMPTY_CACHES


def warm_workers() -> None:
    """Start the fork server now, so that its imports overlap the caller's own set-up."""
    worker_context()


def _run_in_environment(environment: dict[str, str], output: str | None, target: Callable, *args: Any) -> Any:
    """A worker's entry point: the parent's environment of now (a fork server's is older), its
    output captured (`capture_output`), then the target."""
    os.environ.clear()
    os.environ.update(environment)
    if output is not None:
        capture_output(output)
    return target(*args)


def capture_output(path: str) -> None:
    """Send this process's file descriptors 1 and 2 to `path`, which the parent reads back per
    config (worker_output.py).  At the descriptor level, not sys.stdout alone: Triton's and
    MLIR's C++ code (an assertion, a module dump) and the tools it starts write to them directly,
    and would otherwise fill the user's terminal."""
    import sys

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for stream, number in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
        os.dup2(fd, number)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        try:  # Python's own writes reach the file before the worker's next reply
            stream.reconfigure(line_buffering=True, write_through=True)
        except (AttributeError, OSError, ValueError):
            pass


class WorkerSetupError(RuntimeError):
    """A worker could not bind the kernel at all (not a per-config failure)."""


class Worker:
    """One child process and the pipe to it; restarted transparently after a kill or crash."""

    def __init__(self, ctx: Any, target: Callable, init: Any, name: str, *, gated: bool = False,
                 output_dir: Path | None = None) -> None:
        self._ctx, self._target, self._init, self.name, self.gated = ctx, target, init, name, gated
        # Where each of its processes writes fd 1 and 2 (one file per process; None: the terminal).
        self.output_dir = output_dir
        self.output: Path | None = None
        self._started = 0
        self.process: Any = None
        self.conn: Connection | None = None
        self.state = STOPPED
        self.since = 0.0  # when the current boot stage began (its timeout counts from there)
        self.setup_phases: dict[str, float] = {}  # seconds per set-up phase, as the worker reported them

    def start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._started += 1
        self.output = self.output_dir / f"{self.name}.{self._started}.txt" if self.output_dir is not None else None
        args = (dict(os.environ), str(self.output) if self.output else None, self._target, child, self._init)
        self.process = self._ctx.Process(target=_run_in_environment, args=args, name=self.name, daemon=True)
        self.process.start()
        child.close()
        self.conn, self.state, self.since = parent, BOOTING, time.monotonic()
        self.setup_phases = {}

    def restart(self) -> None:
        """Replace the process; the new one boots in the background."""
        self.kill()
        self.start()

    def poll(self) -> str:
        """Non-blocking: read what the worker reported while booting and return its state.
        Raises WorkerSetupError (the process killed) if it died, failed or overran a stage."""
        if self.state in (STOPPED, READY):
            return self.state
        while self.conn is not None and self.conn.poll(0):
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                self._fail(self._death_while_starting())
            self._on_boot_message(message)
            if self.state == READY:
                return READY
        if not self.alive():
            self._fail(self._death_while_starting())
        if self.state != BOOTED and time.monotonic() - self.since > SETUP_TIMEOUT_S:
            self._fail(f"{self.name} did not start within {SETUP_TIMEOUT_S:.0f} s")
        return self.state

    def grant_setup(self) -> None:
        """Let a booted gated worker set itself up on the GPU."""
        assert self.state == BOOTED and self.conn is not None
        try:
            self.conn.send(("setup",))
        except OSError:
            self._fail(self._death_while_starting())
        self.state, self.since = SETTING_UP, time.monotonic()

    def wait_ready(self, timeout: float = SETUP_TIMEOUT_S) -> None:
        """Block until ready, granting a gated worker its set-up: for callers that know the GPU
        is not being timed.  A stopped or dead worker is started first."""
        if self.state == STOPPED or not self.alive() and (self.state == READY or not self.conn.poll(0)):
            self.restart()  # a dead worker's last words (a set-up failure) are read below instead
        wait_all_ready([self], timeout)

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def kill(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        if self.process is not None:
            self.process.join(timeout=10)
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn, self.state = None, None, STOPPED

    def request_stop(self) -> None:
        if self.conn is not None and self.alive():
            try:
                self.conn.send(None)
            except (OSError, EOFError, BrokenPipeError):
                pass

    def stop(self, timeout: float = 5.0) -> None:
        """Ask a ready worker to exit, waiting at most `timeout`; kill it otherwise.  A worker
        still booting reads nothing until its imports finish (tens of seconds on a busy machine),
        so it is killed at once."""
        if self.conn is not None and self.alive() and self.state == READY:
            try:
                self.conn.send(None)
                self.process.join(timeout=timeout)
            except (OSError, EOFError, BrokenPipeError):
                pass
        self.kill()

    def output_mark(self) -> tuple[Path, int] | None:
        """Where this process's output stands now: (its file, the size so far), for reading back
        what it writes from here on (None where output is not captured)."""
        if self.output is None:
            return None
        try:
            return self.output, self.output.stat().st_size
        except OSError:  # not written yet
            return self.output, 0

    def has_context(self) -> bool:
        """Its CUDA context exists: it said so while setting up ("phase", "context_s", s), or it is ready."""
        return self.state == READY or CONTEXT_PHASE in self.setup_phases

    def _on_boot_message(self, message: tuple) -> None:
        if message[0] == "booted":
            self.state = BOOTED
        elif message[0] == "phase":  # ("phase", name, seconds): one set-up phase ended
            self.setup_phases[message[1]] = message[2]
        elif message[0] == "ready":
            self.state = READY
            self.setup_phases = dict(message[1]) if len(message) > 1 else self.setup_phases
        else:  # ("setup_failed", text)
            self._fail(f"{self.name} could not set up: {message[1]}")

    def _death_while_starting(self) -> str:
        """Why it died before it was ready: how it ended, and the telling line of what it wrote."""
        from autotune.evaluators.failures import exit_description
        from autotune.evaluators.worker_output import telling_line

        reason = f"{self.name} died while starting ({exit_description(self.exit_code())})"
        try:
            lines = [line for line in self.output.read_text(errors="replace").splitlines() if line.strip()] \
                if self.output is not None else []
        except OSError:
            lines = []
        return f"{reason}: {telling_line(lines)[:300]}" if lines else reason

    def exit_code(self) -> int | None:
        if self.process is None:
            return None
        self.process.join(timeout=1.0)  # its pipe closes just before it is reaped
        return self.process.exitcode

    def _fail(self, reason: str) -> None:
        self.kill()
        raise WorkerSetupError(reason)


def wait_all_ready(workers: list[Worker], timeout: float = SETUP_TIMEOUT_S, *,
                   also_set_up: Sequence[Worker] = ()) -> None:
    """Block until every worker is ready, granting each gated one its set-up as soon as it has
    booted, so several set-ups run side by side rather than one after another: for callers that
    know the GPU is not being timed (an evaluator starting).  A worker that dies, fails or
    overruns raises WorkerSetupError (the process killed).  The gated workers of `also_set_up`
    are granted their set-ups too, but not waited for, once every waited worker has its CUDA
    context: the driver makes contexts asked for at once one after another, so granted at once
    the waited workers' could come last.  One that fails is left stopped, for its next user to
    start again."""
    from multiprocessing.connection import wait

    deadline = time.monotonic() + timeout
    waiting = list(workers)
    extra = [w for w in also_set_up if w not in waiting]
    while True:
        for worker in list(waiting):
            state = worker.poll()
            if state == BOOTED:
                worker.grant_setup()
            elif state == READY:
                waiting.remove(worker)
        contexts_made = all(worker.has_context() for worker in workers)
        for worker in list(extra):
            try:
                state = worker.poll()
                if state == BOOTED and contexts_made:
                    worker.grant_setup()
                    state = worker.state
            except WorkerSetupError:
                state = STOPPED
            if state not in (BOOTING, BOOTED):
                extra.remove(worker)  # granted (its set-up runs on), ready or failed: no longer ours
        if not waiting:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            waiting[0]._fail(f"{waiting[0].name} did not start within {timeout:.0f} s")
        conns = [w.conn for w in [*waiting, *extra] if w.conn is not None and w.state != BOOTED]
        wait(conns, timeout=min(remaining, 1.0))
