"""Compile a config's Triton kernels without launching any of them.

The GPU evaluator's compile workers compile while the benchmark worker is timing on the
same GPU, so compiling must not put work on the GPU: a config's kernels run only when the
evaluator grants the GPU (see autotune/evaluators/gpu.py).

* Helion: the generated host function takes a `_launcher=` keyword; `compile_only_launcher`
  hands each of its kernels to Triton with `warmup=True` (compile, do not launch).
* Hand-written Triton: a kernel module's `launch` function calls `kernel[grid](...)`.  Those
  functions are part of the kernel's fingerprinted source (`Kernel.source_objects`), so
  rather than give them a compile-only flag (a new source hash, which would mark every
  earlier measurement of those kernels as stale), `triton_launches_compile_only()` makes
  every Triton launch in this process compile-only while it is active.

Only the Triton kernels are held back: torch operations in the host code still execute
(allocations queue no GPU work; a `torch.zeros` of a few counters queues a tiny fill).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from autotune.evaluators.generated_module import GeneratedModule, generated_module_of


def compile_only_launcher(triton_kernel: Any, grid: tuple[int, ...], *args: Any, num_warps: int, num_stages: int,
                          launch_cooperative_grid: bool = False, ptx_options: str | None = None,
                          **kwargs: Any) -> Any:
    """A Helion `_launcher` that compiles the kernel and launches nothing.

    Triton keys its in-memory kernel cache on the launch options in the order they are
    given, so they are passed in the order of Helion's `default_launcher`: the later real
    launch then finds this compilation instead of compiling (or loading) it again."""
    from helion.runtime.triton.launcher import compile_only_launch_args

    args, options = compile_only_launch_args(*args, **kwargs)
    if ptx_options is not None:
        options["ptx_options"] = ptx_options
    return triton_kernel.run(*args, grid=grid, warmup=True, num_warps=num_warps, num_stages=num_stages,
                             launch_cooperative_grid=launch_cooperative_grid, **options)


def compile_helion(bound: Any, native: dict[str, Any], inputs: tuple) -> GeneratedModule | None:
    """Generate the host function for `native` (cached by `bound`) and compile its kernels;
    where the generated function lives, for another process to load it without generating it."""
    import helion

    compiled = bound.compile_config(helion.Config.from_dict(dict(native)), allow_print=False)
    compiled(*inputs, _launcher=compile_only_launcher)
    return generated_module_of(compiled)


def _launch_classes() -> list[type]:
    """The classes whose `run(*args, grid, warmup, **kwargs)` every `kernel[grid](...)` reaches:
    the JIT function, and the interpreter's stand-in for it (TRITON_INTERPRET=1, CPU tests)."""
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - a Triton without the interpreter
        return classes
    return classes + [InterpretedFunction]


_held = False  # set while triton_launches_compile_only is active


@contextlib.contextmanager
def triton_launches_compile_only() -> Iterator[None]:
    """While active, every Triton kernel launch of this process compiles and does not launch.

    It swaps a process-wide method, so it is meant for a process that does one thing at a
    time (a compile worker), never for threads that launch kernels meanwhile."""
    global _held
    originals = {cls: cls.__dict__["run"] for cls in _launch_classes()}

    def compile_only(original: Any) -> Any:
        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            return original(self, *args, grid=grid, warmup=True, **kwargs)

        return run

    for cls, original in originals.items():
        cls.run = compile_only(original)
    _held = True
    try:
        yield
    finally:
        _held = False
        for cls, original in originals.items():
            cls.run = original


def launches_held() -> bool:
    """Whether `triton_launches_compile_only` is active: a launcher whose host code would run
    GPU work of its own (a library GEMM) must then skip it and only allocate its result."""
    return _held
