"""Which reference a session checks every config against, chosen once, said and recorded.

Why: the default reference runs a Helion kernel's body eagerly in float64, and some bodies
cannot run there (an fp32 accumulator given to `torch.addmm` with fp64 operands is refused by
PyTorch), which used to refuse a kernel that works.  The choice falls back in a fixed order:

1. the user's `reference=` hook, when given (in float64, as always);
2. the kernel's body, run eagerly in float64;
3. the kernel's body, run eagerly in float32;
4. the baseline named by `reference_baseline=` (in float64, else float32).

The session process tries them once on the session's inputs (`choose_reference`), prints
`reference: ...` and records the choice in the session's options; the plan travels with the
kernel, so every measuring process computes the same reference without trying again.  Only
when nothing works is the session refused, in one line listing what was tried.
"""

from __future__ import annotations

from typing import Any, Callable

from autotune.kernel import Inputs, Kernel, KernelError

Plan = tuple[str, ...]  # ("hook",), ("body", dtype), ("baseline", name, dtype), ("default config",)


def describe(kernel: Kernel, plan: Plan) -> str:
    """The plan in words, as the session prints and records it."""
    if plan[0] == "hook":
        return "the reference= hook, in float64"
    if plan[0] == "body":
        return f"the kernel's body run eagerly in {plan[1]}"
    if plan[0] == "baseline":
        return f"baseline {plan[1]!r} in {plan[2]}"
    return "the declared default config's output (no reference given)"


def choose_reference(kernel: Kernel, make_inputs: Callable[[], Inputs]) -> str:
    """Try the references in order on the session's inputs (`make_inputs()`, in their own dtype,
    made only when something must run); keep the first that runs as `kernel.reference_plan`
    and return what the session says about it."""
    if kernel.reference is not None:
        kernel.reference_plan = ("hook",)
        return describe(kernel, kernel.reference_plan)
    if kernel.family != "helion":
        kernel.reference_plan = ("default config",)
        return describe(kernel, kernel.reference_plan)
    if kernel.locator and ":" not in kernel.locator:  # a built-in kernel: its body runs in float64
        return describe(kernel, ("body", "float64"))
    candidates: list[Plan] = [("body", "float64"), ("body", "float32")]
    if kernel.reference_baseline is not None:
        candidates += [("baseline", kernel.reference_baseline, "float64"),
                       ("baseline", kernel.reference_baseline, "float32")]
    failures: list[str] = []
    inputs = make_inputs()
    for plan in candidates:
        try:
            output = run_plan(kernel, plan, inputs)
            del output
        except Exception as error:  # noqa: BLE001 - the next one is tried; all are listed if none works
            failures.append(f"{describe(kernel, plan)}: {_one_line(error)}")
            continue
        kernel.reference_plan = plan
        said = describe(kernel, plan)
        return said + (f" (first tried: {'; '.join(failures)})" if failures else "")
    hint = "" if kernel.reference_baseline else "; give reference= or reference_baseline= (a baseline's name)"
    raise KernelError(f"no reference for {kernel.name} runs: tried " + "; ".join(failures) + hint)


def run_plan(kernel: Kernel, plan: Plan, inputs: Inputs) -> Any:
    """The reference output by `plan`, as float64 tensors; `inputs` in any dtype."""
    from autotune.evaluators.timing import to_float64

    if plan[0] == "hook":
        return kernel.reference(cast(inputs, "float64"))
    if plan[0] == "body":
        return to_float64(kernel.eager_kernel()(*cast(inputs, plan[1])))
    if plan[0] == "baseline":
        return to_float64(kernel.baselines[plan[1]](cast(inputs, plan[2])))
    return None


def cast(inputs: Inputs, dtype_name: str) -> Inputs:
    """Floating-point tensors in `dtype_name`; everything else (integer indices, scalars) as it is."""
    import torch

    dtype = getattr(torch, dtype_name)
    return tuple(x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)


def _one_line(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())[:160]
