"""Where a command's start-up went, from the command's own start (not the session's).

Why: a session used to say only how long its own set-up took, while most of the wait before
its first measurement was the process's start and its imports.  The command line starts a
clock at its first line (`begin_command`), dated back to the process's start where the system
says when that was; the session marks each phase as it ends (`mark`), prints the line
`started in X s: python A, imports B, ...` and records the phases in its options.
Nothing here imports more than the standard library.
"""

from __future__ import annotations

import os
import time

_CLI_TOP: float | None = None  # perf_counter when the command line's module started executing
_AGE_AT_TOP: float | None = None  # how old the process was then (None where the system does not say)


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc; None elsewhere), to about 10 ms."""
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        with open("/proc/uptime") as uptime:
            now = float(uptime.read().split()[0])
        return max(0.0, now - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def cli_started() -> None:
    """Called at the top of the command line's module, before its imports."""
    global _CLI_TOP, _AGE_AT_TOP
    if _CLI_TOP is None:
        _CLI_TOP, _AGE_AT_TOP = time.perf_counter(), process_age()


class Clock:
    """Phases of one command's start, each a (name, seconds) from the previous mark."""

    def __init__(self, origin: float, first: tuple[str, float] | None = None) -> None:
        self.origin = origin
        self.last = origin + (first[1] if first else 0.0)
        self.phases: dict[str, float] = {first[0]: first[1]} if first else {}

    def mark(self, name: str) -> None:
        """`name` ended now: it took the time since the previous mark (added to a repeated name)."""
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.last = now

    def record(self) -> dict[str, float]:
        """The phases in seconds (rounded to ms) and their total, as stored in a session's options."""
        out = {f"{name.replace(' ', '_')}_s": round(s, 3) for name, s in self.phases.items()}
        out["total_s"] = round(self.last - self.origin, 3)
        return out

    def line(self) -> str:
        parts = ", ".join(f"{name} {s:.1f}" for name, s in self.phases.items())
        return f"started in {self.last - self.origin:.1f} s: {parts} s"


_pending: Clock | None = None  # begun by the command line, taken by the session it runs
_current: Clock | None = None


def begin_command(from_process_start: bool = True) -> None:
    """The command line's command starts: from the process's start for the process's own command
    (`from_process_start`, once), from now otherwise (a warm server runs many; a caller that
    imported the command line long before)."""
    global _pending, _AGE_AT_TOP
    if from_process_start and _CLI_TOP is not None and _AGE_AT_TOP is not None:
        _pending = Clock(_CLI_TOP - _AGE_AT_TOP, ("python", _AGE_AT_TOP))
        _AGE_AT_TOP = None  # used once
    else:
        _pending = Clock(time.perf_counter())


def take() -> Clock:
    """The clock of the command now starting a session (a new one from now for the Python API)."""
    global _pending, _current
    _current, _pending = _pending or Clock(time.perf_counter()), None
    return _current


def mark(name: str) -> None:
    """Phase `name` of the current session's start ended now (nothing without one)."""
    if _current is not None:
        _current.mark(name)
