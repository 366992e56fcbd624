"""`autotune serve`: a warm server that runs the `autotune tune` commands sent to it.

Why: a fresh `autotune tune` spends most of its start importing torch, Triton and Helion (in
the command and in the compile workers' fork server) before the kernel is even bound.  A server
started once has done that and keeps its fork server warm; it runs each later command itself
(the command's measuring workers are forked from that warm fork server), so a session's first
config is measured within seconds of the command.  The command's arguments, working directory
and environment travel with it; its output and exit status come back to the terminal that
typed it.  This module is the server; `autotune.server_client` is the command's half and
`autotune.server_wire` what the two speak.

    autotune serve &                                     # once: imports, fork server
    autotune tune softmax --shape 4096x32000 ...         # runs in the server if one answers
    autotune tune ... --no-server                        # always in its own process
    autotune serve --status | --stop

Sessions run one at a time, in the order they reach the server (a command that waits says so).
Ctrl-C in the command, or the command going away, stops its session here (every finished
evaluation is in the database, as always).  The server refuses, and the command then runs in
its own process, saying why in one line: a server started from other autotune sources than the
command's, or with other CUDA_VISIBLE_DEVICES.  A kernel named by its file is read afresh for
every command; one named by module (`pkg.mod:NAME`) is imported once, so restart the server
after editing such a module.
"""

from __future__ import annotations

import _thread
import contextlib
import io
import os
import queue
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from autotune.errors import UserError
from autotune.evaluators.gpu_process import PRELOAD as WORKER_PRELOAD
from autotune.server_wire import Lines, send, socket_answers, sources_stamp

# Imported at the server's start, so that no command waits for them: what every measuring worker
# imports, and what a command itself does.
PRELOAD = (*WORKER_PRELOAD, "autotune.tuning", "autotune.kernels.registry", "autotune.evaluators.gpu",
           "autotune.session", "autotune.strategies")


class _Stream(io.TextIOBase):
    """A command's stdout or stderr in the server: each write goes to the client as a message."""

    def __init__(self, conn: socket.socket, key: str, isatty: bool) -> None:
        self.conn, self.key, self._isatty, self.gone = conn, key, isatty, False

    def write(self, text: str) -> int:
        if text and not self.gone:
            try:
                send(self.conn, **{self.key: text})
            except OSError:
                self.gone = True  # the command went away; its session is being stopped
        return len(text)

    def isatty(self) -> bool:
        return self._isatty

    def writable(self) -> bool:
        return True


class Server:
    """Serves `autotune tune` commands on a Unix socket, one at a time, in this process's main
    thread (a command's Ctrl-C reaches its session as KeyboardInterrupt)."""

    def __init__(self, path: Path, *, log: Callable[[str], None] = print,
                 run: Callable[[list[str]], int] | None = None,
                 interrupt: Callable[[], None] = _thread.interrupt_main) -> None:
        self.path, self.log = path, log
        self.run = run or _run_cli  # tests give fakes of these two
        self.interrupt = interrupt
        self.stamp = sources_stamp()
        self.devices = os.environ.get("CUDA_VISIBLE_DEVICES")
        self._client_stop = threading.Event()
        self.listener: socket.socket | None = None
        self.stopping = False
        self.waiting: queue.Queue = queue.Queue()  # (conn, lines, request) for the main thread; None: stop
        self.running: tuple[list[str], float] | None = None  # the command and when it started
        self.since, self.served = time.time(), 0

    def check(self) -> None:
        """A UserError if another server answers at the socket (asked before the imports)."""
        if self.path.exists() and socket_answers(self.path):
            raise UserError(f"a server already answers at {self.path}")

    def open(self) -> None:
        """Listen on the socket: from now on a command that finds it is served (so open it once
        everything is imported: a probe that connects then knows the server is ready)."""
        self.check()
        if self.path.exists():
            self.path.unlink()  # a socket left by a server that died
        self.path.parent.mkdir(parents=True, exist_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        os.chmod(self.path, 0o600)  # this user's commands only
        listener.listen(16)
        self.listener = listener
        self.since = time.time()

    def close(self) -> None:
        if self.listener is not None:
            listener, self.listener = self.listener, None
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def serve(self, requests: int | None = None) -> None:
        """Run the commands that arrive, one at a time, until stopped (or `requests` of them).
        Connections are taken by a thread of their own, which answers `status` and `stop` at
        once, even while a command runs, and queues commands for this one."""
        if threading.current_thread() is threading.main_thread():
            # A process started in the background by a script inherits SIGINT ignored, and then
            # a command's Ctrl-C (`interrupt_main`) would be dropped: take it back.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, self._terminate)
        threading.Thread(target=self._accept, daemon=True).start()
        try:
            while (requests is None or self.served < requests) and not self.stopping:
                try:
                    item = self.waiting.get(timeout=0.5)
                except queue.Empty:
                    continue
                if item is None:  # stop() while idle
                    break
                conn, lines, request = item
                with conn:
                    self._command(conn, lines, request)
        finally:
            self.stopping = True
            self._turn_away_waiting()

    def stop(self) -> None:
        """Serve no more: a running command is stopped as its Ctrl-C would (its evaluations are
        kept), waiting ones are told to run in their own terminals."""
        self.stopping = True
        if self.running is not None:
            self._client_stop.set()
            self.interrupt()
        self.waiting.put(None)

    def status(self) -> dict[str, Any]:
        running = self.running
        return {"pid": os.getpid(), "socket": str(self.path), "since": self.since, "served": self.served,
                "running": running[0] if running else None,
                "running_s": round(time.time() - running[1], 1) if running else None,
                "waiting": sum(1 for item in list(self.waiting.queue) if item is not None)}

    def _terminate(self, *_: Any) -> None:
        """SIGTERM: stop the running command as Ctrl-C would (its evaluations are kept), then serve no more."""
        self.stopping = True
        raise KeyboardInterrupt

    def _accept(self) -> None:
        """Take connections until the listener closes: answer control requests, queue commands
        (and once stopping, turn commands away, so that they run in their own terminals)."""
        while self.listener is not None:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed
                return
            try:
                self._take(conn)
            except Exception:  # noqa: BLE001 - one bad connection must not stop the server
                conn.close()

    def _take(self, conn: socket.socket) -> None:
        lines = Lines(conn)
        try:
            request = lines.next(timeout=10.0)
        except (TimeoutError, ValueError):
            request = None
        if not isinstance(request, dict):  # a probe (socket_answers), or garbage
            conn.close()
            return
        control = request.get("control")
        if control in ("status", "stop"):
            with conn, contextlib.suppress(OSError):
                send(conn, status=self.status())
            if control == "stop":
                self.log("asked to stop")
                self.stop()
            return
        reason = "the server is stopping" if self.stopping else self._refusal(request) if isinstance(
            request.get("argv"), list) else "not a command"
        if reason:
            with conn, contextlib.suppress(OSError):
                send(conn, refused=reason)
            self.log(f"refused {' '.join(map(str, request.get('argv') or []))}: {reason}")
            return
        self.waiting.put((conn, lines, request))

    def _turn_away_waiting(self) -> None:
        while True:
            try:
                item = self.waiting.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                with item[0], contextlib.suppress(OSError):
                    send(item[0], refused="the server is stopping")

    def _command(self, conn: socket.socket, lines: Lines, request: dict[str, Any]) -> None:
        """One queued command, run here (not when its client had gone before it started)."""
        try:
            send(conn, accepted=True)
        except OSError:
            return
        started = time.monotonic()
        self.running = (list(request["argv"]), time.time())
        try:
            code = self._run_request(conn, lines, request)
        finally:
            self.running = None
        self.served += 1
        with contextlib.suppress(OSError):
            send(conn, exit=code)
        self.log(f"{' '.join(request['argv'])} -> exit {code} in {time.monotonic() - started:.1f} s")

    def _refusal(self, request: dict[str, Any]) -> str | None:
        if request.get("stamp") != self.stamp:
            return "it was started from other autotune sources than this command's (restart it: autotune serve)"
        if request.get("env", {}).get("CUDA_VISIBLE_DEVICES") != self.devices:
            return (f"it measures with CUDA_VISIBLE_DEVICES={self.devices}, this command asks for "
                    f"{request.get('env', {}).get('CUDA_VISIBLE_DEVICES')}")
        return None

    def _run_request(self, conn: socket.socket, lines: Lines, request: dict[str, Any]) -> int:
        """The command, run here as the client would have run it, its Ctrl-C or departure
        turned into a KeyboardInterrupt of this thread."""
        self._client_stop.clear()
        done = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(lines, done), daemon=True)
        out, err = _Stream(conn, "out", request.get("isatty", False)), _Stream(conn, "err", False)
        env = {**request["env"], "AUTOTUNE_SERVER": "off"}  # the command runs here, never forwarded again
        if request.get("columns"):
            env["COLUMNS"] = str(request["columns"])
        try:
            with _environment(env), _working_directory(request["cwd"]), \
                    contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                watcher.start()
                try:
                    return self.run(list(request["argv"]))
                except KeyboardInterrupt:
                    return 130
                except SystemExit as exit_:
                    return int(exit_.code or 0) if not isinstance(exit_.code, str) else 1
                finally:
                    done.set()
        except KeyboardInterrupt:  # the client's, arriving as the command ended
            if not self._client_stop.is_set() or self.stopping:
                raise
            return 130
        except Exception as error:  # noqa: BLE001 - e.g. a working directory gone: the command's, not the server's end
            err.write(f"autotune: the server could not run the command: {type(error).__name__}: {error}\n")
            return 1
        finally:
            _release_gpu_memory()

    def _watch(self, lines: Lines, done: threading.Event) -> None:
        """Interrupt the running command when its client asks to, or goes away."""
        while not done.is_set():
            try:
                message = lines.next(timeout=0.2)
            except TimeoutError:
                continue
            except ValueError:
                message = None
            if done.is_set():
                return
            if message is None or message.get("interrupt"):
                self._client_stop.set()
                self.interrupt()
                return


def _run_cli(argv: list[str]) -> int:
    from autotune import kernel_loader
    from autotune.cli import main

    kernel_loader.forget_loaded_files()  # a kernel's file is read as it is now
    return main(argv)


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """The command's environment while it runs (workers started then take it); ours after."""
    before = dict(os.environ)
    os.environ.clear()
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


@contextlib.contextmanager
def _working_directory(path: str) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _release_gpu_memory() -> None:
    """Give back what the command's tensors held in torch's cache, for the next session's workers."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def preload(log: Callable[[str], None]) -> None:
    """Import what every command needs and start the workers' fork server (where a GPU is)."""
    import importlib

    from autotune.device import gpu_device_present

    started = time.monotonic()
    for name in PRELOAD:
        importlib.import_module(name)
    if gpu_device_present():
        from autotune.evaluators.gpu_process import warm_workers

        warm_workers()
    log(f"imports and fork server ready in {time.monotonic() - started:.1f} s")
