"""The built-in kernel registry: what the CLI can tune by name.

A `KernelSpec` says how to make inputs for a shape and dtype, how to compute a trusted
reference (in fp32 or fp64), which library implementations to measure as baselines, and
how many bytes and flops one call must move and do (for GB/s and roofline figures).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch

Shape = tuple[int, ...]
Inputs = tuple[torch.Tensor, ...]

DTYPES: dict[str, torch.dtype] = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


class UnknownKernel(KeyError):
    """Raised for a kernel name that is not registered."""


@dataclass(frozen=True)
class KernelSpec:
    name: str
    family: str  # "helion" or "triton"
    description: str
    rank: int
    make_inputs: Callable[[Shape, torch.dtype, str, int], Inputs]
    reference: Callable[[Inputs], torch.Tensor]
    baselines: Mapping[str, Callable[[Inputs], torch.Tensor]]
    bytes_moved: Callable[[Shape, torch.dtype], int]
    flops: Callable[[Shape], int]
    helion_kernel: Any = None  # a @helion.kernel object (family "helion")
    triton_space: Callable[[Shape, torch.dtype], Any] | None = None  # -> SearchSpace (family "triton")
    triton_launch: Callable[..., torch.Tensor] | None = None  # (native_config, *inputs) -> output
    source_objects: Sequence[Any] = field(default_factory=tuple)  # whose source text is fingerprinted
    dtypes: Sequence[str] = ("float16", "bfloat16", "float32")

    def compile_without_launch(self, native: Mapping[str, Any], inputs: Inputs, bound: Any = None) -> None:
        """Compile every Triton kernel one call with `native` would launch, launching none:
        what a compile worker does while another process may be timing on the GPU.
        `bound` is the Helion kernel bound to `inputs` (bound here when not given)."""
        from autotune.kernels import compile_only

        if self.family == "helion":
            compile_only.compile_helion(bound or self.helion_kernel.bind(inputs), dict(native), inputs)
            return
        with compile_only.triton_launches_compile_only():
            self.triton_launch(dict(native), *inputs)

    def source_text(self) -> str:
        parts = []
        for obj in self.source_objects:
            fn = getattr(obj, "fn", obj)  # helion.Kernel and triton.JITFunction keep the function in .fn
            parts.append(inspect.getsource(fn))
        return "\n".join(parts)


_REGISTRY: dict[str, KernelSpec] = {}


def register(spec: KernelSpec) -> KernelSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"kernel {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def get_kernel(name: str) -> KernelSpec:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownKernel(f"unknown kernel {name!r} (known: {known})") from None


def all_kernels() -> list[KernelSpec]:
    _load_builtins()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def _load_builtins() -> None:
    # Imported lazily: the kernel modules import helion and triton, which the cache and
    # replay paths do not need.
    from autotune.kernels import (  # noqa: F401
        faulty_triton, matmul_epilogue, softmax_cooperative, softmax_helion, softmax_lookback, softmax_persistent,
        softmax_split, softmax_triton,
    )


def parse_shape(text: str, rank: int | None = None) -> Shape:
    """'4096x32000' -> (4096, 32000); raises ValueError with a one-line reason.

    Only ASCII digits are extents: int() would also take ' 7', '+7', '1_000' and other
    scripts' digits, none of which a user means as a shape."""
    pieces = text.lower().replace("×", "x").split("x")
    try:
        if not all(p.isascii() and p.isdigit() for p in pieces):
            raise ValueError(text)
        shape = tuple(int(p) for p in pieces)
    except ValueError:
        raise ValueError(f"malformed shape {text!r}: expected positive integers joined by 'x', e.g. 4096x32000") from None
    if any(d <= 0 for d in shape):
        raise ValueError(f"malformed shape {text!r}: every extent must be positive")
    if rank is not None and len(shape) != rank:
        raise ValueError(f"shape {text!r} has {len(shape)} dimension(s); this kernel takes {rank}")
    return shape


def parse_dtype(text: str, allowed: Sequence[str] = tuple(DTYPES)) -> torch.dtype:
    if text not in DTYPES or text not in allowed:
        raise ValueError(f"unsupported dtype {text!r} (supported: {', '.join(allowed)})")
    return DTYPES[text]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
