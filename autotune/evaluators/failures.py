"""Classify the exceptions that compiling and running a config can raise.

Triton and Helion report failures as exceptions of many types with telling messages;
we map them onto our statuses by type name and message, since the exception classes
differ between Triton versions and some arrive only as text from another process.
"""

from __future__ import annotations

from autotune.types import Status

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
        text = f"{type(error).__name__}: {error}".lower()
    else:
        text = error.lower()
    if any(marker in text for marker in _OUT_OF_RESOURCES):
        return Status.OUT_OF_RESOURCES
    if any(marker in text for marker in _CRASH):
        return Status.CRASH
    return Status.COMPILE_ERROR if phase == "compile" else Status.CRASH


def short_error(error: BaseException | str, limit: int = 600) -> str:
    """The first informative lines of an error, for the database and one-line reports."""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
