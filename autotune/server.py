"""A warm server for `autotune tune`, and the client half every `autotune tune` runs first.

Why: a fresh `autotune tune` spends most of its start importing torch, Triton and Helion (in
this process and in the compile workers' fork server) before the kernel is even bound.  A
server started once with `autotune serve` has done that, keeps its fork server warm, and runs
each later command itself (its measuring workers are forked from that warm fork server), so a
session's first config is measured within seconds of the command.  The command's arguments, working directory and environment travel with it;
its output comes back to the terminal that typed it, and so does its exit status.

    autotune serve &                      # once: imports, fork server (seconds)
    autotune tune softmax --shape 4096x32000 ...        # runs in the server if one answers
    autotune tune ... --no-server                      # always here
    autotune serve --status | --stop

Sessions run one at a time, in the order they reach the server (a second command waits and
says so).  Ctrl-C in the command stops its session there (every finished evaluation is in the
database, as always); a command that goes away does the same.  What the server will not serve,
the command runs itself and says why in one line: a server started from other autotune sources
than the command's, or with other CUDA_VISIBLE_DEVICES.  A kernel named by its file is read
afresh for every command; one named by module (`pkg.mod:NAME`) is imported once, so restart the
server after editing such a module.

The socket is `$AUTOTUNE_SERVER`, else a file of this user's in the temporary directory;
`AUTOTUNE_SERVER=off` turns the client half off.  Nothing here imports torch: the client half
runs before anything heavy is imported.
"""

from __future__ import annotations

import _thread
import contextlib
import hashlib
import io
import json
import os
import queue
import select
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TextIO

from autotune.errors import UserError

OFF = ("off", "none", "0", "no")
BUSY_NOTE_AFTER_S = 1.0  # a command not accepted by then is told the server is busy
# The sources whose edits make a running server stale: the package and what it imports of the repository.
SOURCE_ROOTS = ("autotune", "heuristics", "search_spaces")
REPO = Path(__file__).resolve().parents[1]


def socket_path() -> Path | None:
    """Where the server listens: $AUTOTUNE_SERVER, this user's default, or None when turned off."""
    value = os.environ.get("AUTOTUNE_SERVER")
    if value is not None:
        return None if value.strip().lower() in OFF or not value.strip() else Path(value).expanduser()
    return Path(tempfile.gettempdir()) / f"autotune-{os.getuid()}.sock"


def socket_answers(path: Path) -> bool:
    """Whether a server accepts connections at `path` (a probe: it sees a connection close at once)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def sources_stamp(root: Path = REPO) -> str:
    """A digest of every source file's name, size and modification time: a server and a command
    that disagree on it run different code.  Stats only (a few milliseconds), no reads."""
    digest = hashlib.sha256()
    for name in SOURCE_ROOTS:
        for folder, dirs, files in sorted(os.walk(root / name)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for file in sorted(f for f in files if f.endswith(".py")):
                stat = os.stat(os.path.join(folder, file))
                digest.update(f"{folder}/{file}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


# -- framing: one JSON object per line ---------------------------------------------------------
def _send(conn: socket.socket, **message: Any) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


class _Lines:
    """The JSON messages arriving on a socket, one per line."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.buffer = conn, b""

    def next(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message; None when the peer has closed; TimeoutError after `timeout` seconds.
        The socket itself stays blocking (a timeout on it would apply to the other thread's sends)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if deadline is not None:
                readable, _, _ = select.select([self.conn], [], [], max(0.0, deadline - time.monotonic()))
                if not readable:
                    raise TimeoutError
            try:
                chunk = self.conn.recv(65536)
            except OSError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)


# -- the client half ---------------------------------------------------------------------------
def forward(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None,
            path: Path | None = None) -> int | None:
    """Run `autotune` with `argv` in the server, if one answers: its exit status; None when the
    command is to run here (no server, or one that will not serve it, which is said on stderr)."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    path = path or socket_path()
    if path is None or not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        print(f"autotune: no server answers at {path} (left by a server that stopped? remove it, or start "
              "`autotune serve`); running here", file=stderr)
        return None
    with conn:
        _send(conn, argv=list(argv), cwd=os.getcwd(), env=dict(os.environ), stamp=sources_stamp(),
              isatty=bool(getattr(stdout, "isatty", lambda: False)()), columns=_columns(stdout))
        return _relay(conn, path, stdout, stderr)


def control(what: str, path: Path | None = None) -> dict[str, Any] | None:
    """Ask the server at `path` for its `status`, or to `stop`: its status (as it was when asked),
    or None when no server answers there."""
    path = path or socket_path()
    if path is None or not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with conn:
        try:
            conn.connect(str(path))
            _send(conn, control=what)
            answer = _Lines(conn).next(timeout=10.0)
        except (OSError, TimeoutError, ValueError):
            return None
    return answer.get("status") if isinstance(answer, dict) else None


def _relay(conn: socket.socket, path: Path, stdout: TextIO, stderr: TextIO) -> int | None:
    """The server's answer to one command, written where the command would have written it."""
    lines = _Lines(conn)
    try:
        first = lines.next(timeout=BUSY_NOTE_AFTER_S)
    except TimeoutError:
        print(f"autotune: the server at {path} is running another session; this one waits for it", file=stderr)
        first = _wait(lines, conn, timeout=None)
    except KeyboardInterrupt:
        return 130
    if first is None:
        print(f"autotune: the server at {path} closed the connection; running here", file=stderr)
        return None
    if "refused" in first:
        print(f"autotune: not using the server at {path}: {first['refused']}; running here", file=stderr)
        return None
    print(f"autotune: running in the server at {path} (--no-server runs here)", file=stderr)
    interrupted = False
    while True:
        try:
            message = lines.next()
        except KeyboardInterrupt:
            if interrupted:  # a second Ctrl-C: stop waiting for the server's last lines
                return 130
            interrupted = True
            with contextlib.suppress(OSError):
                _send(conn, interrupt=True)
            continue
        if message is None:
            print(f"autotune: the server at {path} stopped during the command", file=stderr)
            return 1
        if "out" in message:
            stdout.write(message["out"])
            stdout.flush()
        elif "err" in message:
            stderr.write(message["err"])
            stderr.flush()
        elif "exit" in message:
            return int(message["exit"])


def _wait(lines: _Lines, conn: socket.socket, timeout: float | None) -> dict[str, Any] | None:
    try:
        return lines.next(timeout=timeout)
    except KeyboardInterrupt:
        conn.close()
        raise SystemExit(130) from None


def _columns(stream: TextIO) -> int | None:
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else None
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


# -- the server half ---------------------------------------------------------------------------
# Imported at the server's start, so that no command waits for them.
PRELOAD = ("torch", "triton", "helion", "autotune.tuning", "autotune.kernels.registry", "autotune.evaluators.gpu",
           "autotune.session", "autotune.strategies")


class _Stream(io.TextIOBase):
    """A command's stdout or stderr in the server: each write goes to the client as a message."""

    def __init__(self, conn: socket.socket, key: str, isatty: bool) -> None:
        self.conn, self.key, self._isatty, self.gone = conn, key, isatty, False

    def write(self, text: str) -> int:
        if text and not self.gone:
            try:
                _send(self.conn, **{self.key: text})
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
        served = 0
        try:
            while (requests is None or served < requests) and not self.stopping:
                try:
                    item = self.waiting.get(timeout=0.5)
                except queue.Empty:
                    continue
                if item is None:  # stop() while idle
                    break
                conn, lines, request = item
                with conn:
                    served += self._command(conn, lines, request)
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
        lines = _Lines(conn)
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
                _send(conn, status=self.status())
            if control == "stop":
                self.log("asked to stop")
                self.stop()
            return
        reason = "the server is stopping" if self.stopping else self._refusal(request) if isinstance(
            request.get("argv"), list) else "not a command"
        if reason:
            with conn, contextlib.suppress(OSError):
                _send(conn, refused=reason)
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
                    _send(item[0], refused="the server is stopping")

    def _command(self, conn: socket.socket, lines: _Lines, request: dict[str, Any]) -> bool:
        """One queued command, run here; False when its client had gone before it started."""
        try:
            _send(conn, accepted=True)
        except OSError:
            return False
        started = time.monotonic()
        self.running = (list(request["argv"]), time.time())
        try:
            code = self._run_request(conn, lines, request)
        finally:
            self.running = None
        self.served += 1
        with contextlib.suppress(OSError):
            _send(conn, exit=code)
        self.log(f"{' '.join(request['argv'])} -> exit {code} in {time.monotonic() - started:.1f} s")
        return True

    def _refusal(self, request: dict[str, Any]) -> str | None:
        if request.get("stamp") != self.stamp:
            return "it was started from other autotune sources than this command's (restart it: autotune serve)"
        if request.get("env", {}).get("CUDA_VISIBLE_DEVICES") != self.devices:
            return (f"it measures with CUDA_VISIBLE_DEVICES={self.devices}, this command asks for "
                    f"{request.get('env', {}).get('CUDA_VISIBLE_DEVICES')}")
        return None

    def _run_request(self, conn: socket.socket, lines: _Lines, request: dict[str, Any]) -> int:
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

    def _watch(self, lines: _Lines, done: threading.Event) -> None:
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
