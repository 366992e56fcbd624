"""Classify the exceptions that compiling and running a config can raise.

Triton and Helion report failures as exceptions of many types with telling messages;
we map them onto our statuses by type name and message, since the exception classes
differ between Triton versions and some arrive only as text from another process.
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from autotune.types import Result, Status

_OUT_OF_RESOURCES = (
    "outofresources", "out of resource", "too many resources requested", "cuda out of memory",
    "outofmemoryerror", "uses too much shared data", "exceeds the shared memory",
)
_CRASH = (
    "illegal memory access", "misaligned address", "unspecified launch failure", "illegal instruction",
    "device-side assert", "an illegal", "cuda error", "launch failure", "context is destroyed",
    "unrecoverable",
)


def classify_exception(error: BaseException | str, *, phase: str) -> Status:
    """Status for an exception raised while `phase` ('compile' or 'run') was in progress."""
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {_diagnosis(error)}".lower()
    else:
        text = error.lower()
    if any(marker in text for marker in _OUT_OF_RESOURCES):
        return Status.OUT_OF_RESOURCES
    if any(marker in text for marker in _CRASH):
        return Status.CRASH
    return Status.COMPILE_ERROR if phase == "compile" else Status.CRASH


def _diagnosis(error: BaseException) -> str:
    """The message without quoted kernel source: Triton's CompilationError prints the
    lines of the kernel above the fault, and words in that code ("cuda error" in a
    comment, say) must not decide the status."""
    quoted_source = getattr(error, "src", None) is not None and hasattr(error, "error_message")
    return str(error.error_message or "") if quoted_source else str(error)


def short_error(error: BaseException | str, limit: int = 600) -> str:
    """The first informative lines of an error, for the database and one-line reports."""
    if isinstance(error, BaseException):
        diagnosis, full = _diagnosis(error), str(error)
        if diagnosis != full:  # the diagnosis first, then where in the kernel's source it arose
            full = full.removesuffix(diagnosis).rstrip()
            text = f"{type(error).__name__}: {diagnosis}\n{full}"
        else:
            text = f"{type(error).__name__}: {full}"
    else:
        text = str(error)
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def exit_description(code: int | None) -> str:
    """How a process ended, in words: 'killed by SIGABRT' reads (and groups) apart from 'exit code 3'."""
    if code is None:
        return "exit code unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass(frozen=True)
class FailureGroup:
    """Failures with the same status and, numbers aside, the same reason."""

    status: str
    reason: str  # the first member's first line
    count: int


_NUMBER = re.compile(r"0x[0-9a-fA-F]+|[-+]?\d+(\.\d+)?([eE][-+]?\d+)?")
REASON_LIMIT = 200  # characters of a reason shown


def failure_groups(results: Iterable[Result]) -> list[FailureGroup]:
    """The failed results grouped by status and first line of their error, numbers masked (a
    relative error, a size, a line number differ between configs that failed alike); the
    largest group first.  The one grouping behind a session's per-generation lines and
    `autotune show`."""
    counts: Counter = Counter()
    reasons: dict[tuple[str, str], str] = {}
    for result in results:
        if not result.status.failed:
            continue
        first = (result.error or "").strip().split("\n", 1)[0].strip() or "(no reason recorded)"
        key = (result.status.value, _NUMBER.sub("N", first))
        counts[key] += 1
        reasons.setdefault(key, first)
    ranked = sorted(reasons, key=lambda key: -counts[key])  # stable: ties in the order first seen
    return [FailureGroup(status, reasons[(status, masked)], counts[(status, masked)]) for status, masked in ranked]


def failure_lines(results: Iterable[Result], indent: str = "  ") -> list[str]:
    """One line per failure group: '  3 x crash: worker process died during compile (...)'."""
    lines = []
    for group in failure_groups(results):
        reason = group.reason if len(group.reason) <= REASON_LIMIT else group.reason[:REASON_LIMIT - 3] + "..."
        lines.append(f"{indent}{group.count} x {group.status}: {reason}")
    return lines
