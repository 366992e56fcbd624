"""The one grouping of failures behind a session's per-generation lines and `autotune show`."""

from __future__ import annotations

from autotune.evaluators.failures import exit_description, failure_groups, failure_lines
from autotune.types import Result, Status


def failed(status: Status, error: str, key: str = "k") -> Result:
    return Result(key=key, status=status, error=error)


def test_failures_group_by_status_and_first_line_with_numbers_masked_largest_first():
    results = [
        failed(Status.WRONG_RESULT, "relative error 0.31 over tolerance 0.005; output poisoned"),
        failed(Status.CRASH, "worker process died during compile (killed by SIGABRT): python: x.cpp:12: Assertion"
                             " `a' failed.\noutput: 600 lines"),
        failed(Status.WRONG_RESULT, "relative error 2.5e+03 over tolerance 0.005; output poisoned"),
        Result(key="fine", status=Status.OK, median_ms=1.0),
        failed(Status.CRASH, "worker process died during compile (killed by SIGSEGV)"),
        failed(Status.CRASH, "worker process died during compile (killed by SIGABRT): python: x.cpp:97: Assertion"
                             " `a' failed."),
        failed(Status.WRONG_RESULT, "relative error 0.9 over tolerance 0.005; output poisoned"),
        failed(Status.COMPILE_ERROR, ""),
    ]
    groups = failure_groups(results)
    assert [(g.status, g.count) for g in groups] == [("wrong_result", 3), ("crash", 2), ("crash", 1),
                                                     ("compile_error", 1)]
    assert groups[0].reason == "relative error 0.31 over tolerance 0.005; output poisoned"  # the first seen
    assert groups[1].reason.endswith("x.cpp:12: Assertion `a' failed.")  # the first line only
    assert "SIGSEGV" in groups[2].reason and groups[3].reason == "(no reason recorded)"
    assert failure_lines(results, indent="> ")[1] == f"> 2 x crash: {groups[1].reason}"
    assert failure_lines([Result(key="fine", status=Status.OK, median_ms=1.0)]) == []


def test_a_process_end_reads_as_a_signal_name_or_an_exit_code():
    assert exit_description(-6) == "killed by SIGABRT" and exit_description(-11) == "killed by SIGSEGV"
    assert exit_description(3) == "exit code 3" and exit_description(None) == "exit code unknown"
