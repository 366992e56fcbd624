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
