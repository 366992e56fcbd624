"""The command's half of `autotune serve`: hand an `autotune tune` to a running server and relay
its answer; ask a server for its status, or to stop.  See autotune.server for why."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import sys
from pathlib import Path
from typing import Any, Sequence, TextIO

from autotune.server_wire import Lines, send, socket_path, sources_stamp

BUSY_NOTE_AFTER_S = 1.0  # a command not accepted by then is told the server is busy


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
        send(conn, argv=list(argv), cwd=os.getcwd(), env=dict(os.environ), stamp=sources_stamp(),
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
            send(conn, control=what)
            answer = Lines(conn).next(timeout=10.0)
        except (OSError, TimeoutError, ValueError):
            return None
    return answer.get("status") if isinstance(answer, dict) else None


def _relay(conn: socket.socket, path: Path, stdout: TextIO, stderr: TextIO) -> int | None:
    """The server's answer to one command, written where the command would have written it."""
    lines = Lines(conn)
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
                send(conn, interrupt=True)
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


def _wait(lines: Lines, conn: socket.socket, timeout: float | None) -> dict[str, Any] | None:
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
