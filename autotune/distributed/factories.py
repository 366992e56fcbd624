"""Evaluator factories: how a worker builds its own evaluator.

A factory crosses to the workers by pickling, so it is a small frozen dataclass of plain
values (and module-level functions); being hashable, it also names the evaluator a worker
keeps for it.  `device_label` (optional) names the worker's device for `measured_on`;
`rebenchmarks` says whether its evaluators can re-time configs round-robin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from autotune.evaluators.timing_target import SEARCH_TARGET_MS


@dataclass(frozen=True)
class GPUEvaluatorFactory:
    """A GPU evaluator for one task on the worker's GPU (the one CUDA_VISIBLE_DEVICES leaves it)."""

    kernel: str | bytes  # a built-in kernel's name, or the kernel itself (autotune/kernel_wire.py)
    shape: tuple[int, ...]
    dtype: str
    device_name: str  # the session's device, for the description
    compile_workers: int | None = None
    compile_timeout_s: float = 60.0
    run_timeout_s: float = 30.0
    seed: int = 0
    timing_target_ms: float = SEARCH_TARGET_MS
    slow_factor: float = 3.0
    compile_timeout_factor: float = 10.0

    rebenchmarks: ClassVar[bool] = True

    @property
    def description(self) -> str:
        return f"measuring on {self.device_name} GPUs"

    def device_label(self) -> str:
        from autotune.device import device_name

        return device_name(0)

    def __call__(self) -> Any:
        from autotune.evaluators.gpu import GPUEvaluator
        from autotune.evaluators.timing import TimingOptions

        return GPUEvaluator(self.kernel, self.shape, self.dtype, device_name=self.device_label(),
                            compile_workers=self.compile_workers, compile_timeout_s=self.compile_timeout_s,
                            run_timeout_s=self.run_timeout_s, seed=self.seed,
                            timing=TimingOptions(target_ms=self.timing_target_ms, slow_factor=self.slow_factor),
                            compile_timeout_factor=self.compile_timeout_factor)


@dataclass(frozen=True)
class FakeEvaluatorFactory:
    """A fake evaluator of `cost` (a module-level function or a frozen callable): CPU workers,
    tests and dry runs."""

    cost: Callable[[Any], Any]
    delay_s: float = 0.0
    compile_s: float = 0.01
    baselines: tuple[tuple[str, float], ...] = ()

    rebenchmarks: ClassVar[bool] = False
    description: ClassVar[str] = "fake evaluator (synthetic costs, no GPU)"

    def __call__(self) -> Any:
        from autotune.evaluators.fake import FakeEvaluator

        return FakeEvaluator(self.cost, delay_s=self.delay_s, compile_s=self.compile_s,
                             baselines=dict(self.baselines))
