"""The accuracy gate's guarantee that an element a kernel never writes cannot pass.

Why: a kernel that skips part of its output leaves whatever the memory held; if that happens
to be a correct value from an earlier run, the check passes a broken config.  Relying on the
caching allocator to hand back a freed NaN-filled block is not a guarantee (it often hands
back another block).  So the checked run is made twice, each time with every output the
kernel allocates (`torch.empty`, `empty_like`, `empty_strided`, `Tensor.new_empty`, which is
how Helion's generated code and Triton launchers allocate; seen through a TorchFunctionMode)
filled with a sentinel the moment
it is allocated: NaN the first time, a finite sentinel the second.  An element holding NaN in
the first output and the finite sentinel in the second was never written.  What was done is
returned as a `Check` and stored with the row.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

SECOND_SENTINEL = 3.0  # finite in every float dtype; an integer output gets -7 and then 7
_ALLOCATORS = frozenset({torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty})

POISONED = "poisoned twice (NaN, then 3.0)"
NOT_POISONED = "not poisoned (the output was not allocated through torch.empty*)"


@dataclass(frozen=True)
class Check:
    """How the checked output was produced."""

    poisoned: bool  # every output came from an allocation filled with the sentinels
    unwritten: int  # elements the kernel never wrote (0 when not poisoned: unknown)

    @property
    def text(self) -> str:
        if not self.poisoned:
            return NOT_POISONED
        return POISONED if not self.unwritten else f"{POISONED}: {self.unwritten} element(s) never written"


class _SentinelAllocations(TorchFunctionMode):
    """Fills every tensor that torch.empty* returns, seen through torch's function-mode hook:
    no attribute of torch is replaced, so code imported meanwhile (Helion compiling a kernel
    imports parts of inductor) cannot capture a stand-in that outlives the check."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value
        self.filled: set[int] = set()

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        result = func(*args, **(kwargs or {}))
        if func in _ALLOCATORS and isinstance(result, torch.Tensor):
            if result.numel():
                integer = not (result.is_floating_point() or result.is_complex())
                result.fill_(_integer(self.value) if integer else self.value)
            self.filled.add(result.untyped_storage().data_ptr())
        return result


@contextlib.contextmanager
def sentinel_allocations(value: float) -> Iterator[set[int]]:
    """While active, every tensor allocated through torch.empty* is filled with `value`; yields
    the data pointers of those tensors."""
    mode = _SentinelAllocations(value)
    with mode:
        yield mode.filled


def _integer(value: float) -> int:
    return -7 if math.isnan(value) else 7


def _tensors(out: Any) -> list[torch.Tensor]:
    return [t for t in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(t, torch.Tensor)]


def run_checked(fn: Callable[[], Any], synchronize: Callable[[], None] = lambda: None) -> tuple[Any, Check]:
    """Run `fn` twice with sentinel-filled allocations; return the first (NaN-poisoned) output,
    which the accuracy check reads, and the `Check`."""
    with sentinel_allocations(math.nan) as first_filled:
        first = fn()
        synchronize()
    first_outs = _tensors(first)
    poisoned = bool(first_outs) and all(t.untyped_storage().data_ptr() in first_filled for t in first_outs)
    if not poisoned:
        return first, Check(poisoned=False, unwritten=0)
    kept = [t.clone() for t in first_outs]  # the second run may reuse the first's memory
    with sentinel_allocations(SECOND_SENTINEL):
        second = fn()
        synchronize()
    unwritten = sum(_never_written(a, b) for a, b in zip(kept, _tensors(second)))
    return first, Check(poisoned=True, unwritten=unwritten)


def _never_written(first: torch.Tensor, second: torch.Tensor) -> int:
    if first.is_floating_point():
        return int((torch.isnan(first) & (second == SECOND_SENTINEL)).sum())
    return int(((first == _integer(math.nan)) & (second == _integer(SECOND_SENTINEL))).sum())
