"""The compile deadline: the user's limit until the session knows its compile times, then a
multiple of their median, between a floor and the limit."""

from __future__ import annotations

import math

import pytest

from autotune.evaluators.compile_deadline import CompileDeadline
from autotune.types import Result, Status


def compiled(seconds: float, status: Status = Status.OK) -> Result:
    return Result(key=f"k{seconds}", status=status, compile_s=seconds)


def test_the_limit_holds_until_enough_configs_compiled():
    deadline = CompileDeadline(60.0, factor=10.0, floor_s=10.0, warmup=3)
    for seconds in (2.0, 3.0):
        deadline.observe(compiled(seconds))
    assert deadline.seconds() == 60.0 and deadline.describe(60.0) == ""
    deadline.observe(compiled(4.0))
    assert deadline.seconds() == 30.0  # 10x the median of 2, 3, 4
    assert "10x this session's median compile time of 3.00 s" in deadline.describe(30.0)


def test_the_deadline_stays_between_the_floor_and_the_limit():
    fast = CompileDeadline(60.0, factor=10.0, floor_s=10.0, warmup=2)
    slow = CompileDeadline(60.0, factor=10.0, floor_s=10.0, warmup=2)
    for _ in range(2):
        fast.observe(compiled(0.1))  # e.g. every config found in the compiler's own cache
        slow.observe(compiled(9.0))
    assert fast.seconds() == 10.0 and slow.seconds() == 60.0


def test_configs_that_did_not_compile_teach_nothing_and_inf_keeps_the_limit():
    deadline = CompileDeadline(60.0, factor=10.0, floor_s=1.0, warmup=2)
    deadline.observe(compiled(0.5, Status.COMPILE_ERROR))
    deadline.observe(Result(key="t", status=Status.COMPILE_TIMEOUT, compile_s=None))
    deadline.observe(Result(key="n", status=Status.OK, compile_s=None))  # e.g. answered from the cache
    assert deadline.seconds() == 60.0
    deadline.observe(compiled(0.5, Status.WRONG_RESULT))  # it compiled: its time counts
    deadline.observe(compiled(0.7, Status.OUT_OF_RESOURCES))
    assert deadline.seconds() == pytest.approx(6.0)
    never = CompileDeadline(60.0, factor=math.inf, warmup=1)
    never.observe(compiled(0.1))
    assert never.seconds() == 60.0


@pytest.mark.parametrize("bad", [{"limit_s": 0.0}, {"limit_s": 60.0, "factor": 0.0},
                                 {"limit_s": 60.0, "floor_s": -1.0}])
def test_a_deadline_without_positive_bounds_is_refused(bad):
    with pytest.raises(ValueError, match="positive"):
        CompileDeadline(**bad)
