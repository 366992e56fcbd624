"""Inputs, reference and accounting shared by the softmax kernels."""

from __future__ import annotations

import torch

from autotune.kernels.registry import Inputs, Shape


def make_inputs(shape: Shape, dtype: torch.dtype, device: str, seed: int) -> Inputs:
    # Spread-out logits (std 3) so the max-subtraction and the exponent range matter.
    # Drawn on the target device: many worker processes make their own copy at start-up.
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape, generator=generator, dtype=torch.float32, device=device) * 3.0
    return (x.to(dtype=dtype),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1)


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


_compiled_softmax = None


def compiled_softmax(x: torch.Tensor) -> torch.Tensor:
    """torch.compile of the same softmax (inductor generates a Triton kernel); compiled on first call."""
    global _compiled_softmax
    if _compiled_softmax is None:
        _compiled_softmax = torch.compile(lambda x: torch.softmax(x, dim=-1), dynamic=False)
    return _compiled_softmax(x)


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    """Each element read once and written once: the floor for a memory-bound softmax."""
    numel = 1
    for d in shape:
        numel *= d
    return 2 * numel * torch.empty((), dtype=dtype).element_size()


def flops(shape: Shape) -> int:
    """max, subtract, exp, sum, divide: about five operations per element."""
    numel = 1
    for d in shape:
        numel *= d
    return 5 * numel


# The registry fields every softmax kernel shares (inputs, reference, baselines, accounting).
SPEC_FIELDS = dict(
    rank=2,
    inputs=make_inputs,
    reference=reference,
    baselines={"torch.softmax": torch_softmax, "torch.compile": compiled_softmax},
    bytes_moved=bytes_moved,
    flops=flops,
)
