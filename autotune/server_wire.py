"""The wire between `autotune tune` and `autotune serve`: where the socket is, whether a server
answers there, which sources each side runs, and the framing (one JSON object per line).
Nothing here imports torch: the command's side runs before anything heavy is imported."""

from __future__ import annotations

import hashlib
import json
import os
import select
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

OFF = ("off", "none", "0", "no")
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
def send(conn: socket.socket, **message: Any) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


class Lines:
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
