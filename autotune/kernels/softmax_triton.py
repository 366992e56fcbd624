"""A hand-written Triton fused softmax whose space is BLOCK_SIZE, num_warps and num_stages.

One program per row.  When BLOCK_SIZE covers the row it is held in registers and read
once; otherwise the row is streamed in BLOCK_SIZE chunks twice (online max and sum, then
the normalised write), so every BLOCK_SIZE in the space is a correct kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from autotune.kernels import softmax_common as common
from autotune.kernels.registry import Kernel, Shape, register
from search_spaces.space import ProductLimit
from search_spaces.triton_space import declare_triton_space, split_launch_config

# A program holding more than this many fp32 row elements per thread spills most of
# them to local memory; such configs are slow and take long to compile.
MAX_ELEMENTS_PER_THREAD = 1024
MIN_BLOCK_SIZE = 256
MAX_BLOCK_SIZE = 65536


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride,
                   BLOCK_SIZE: tl.constexpr, WHOLE_ROW: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    offsets = tl.arange(0, BLOCK_SIZE)
    if WHOLE_ROW:
        mask = offsets < n_cols
        x = tl.load(x_row + offsets, mask=mask, other=-float("inf")).to(tl.float32)
        numerator = tl.exp(x - tl.max(x, axis=0))
        result = numerator / tl.sum(numerator, axis=0)
        tl.store(out_row + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        row_max = -float("inf")
        row_sum = 0.0
        for start in tl.range(0, n_cols, BLOCK_SIZE):
            mask = start + offsets < n_cols
            x = tl.load(x_row + start + offsets, mask=mask, other=-float("inf")).to(tl.float32)
            new_max = tl.maximum(row_max, tl.max(x, axis=0))
            row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max), axis=0)
            row_max = new_max
        for start in tl.range(0, n_cols, BLOCK_SIZE):
            mask = start + offsets < n_cols
            x = tl.load(x_row + start + offsets, mask=mask, other=-float("inf")).to(tl.float32)
            result = tl.exp(x - row_max) / row_sum
            tl.store(out_row + start + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


def triton_space(shape: Shape, dtype: torch.dtype):
    n_cols = shape[-1]
    top = min(triton.next_power_of_2(n_cols), MAX_BLOCK_SIZE)
    bottom = min(MIN_BLOCK_SIZE, top)
    block_sizes = [2**e for e in range(bottom.bit_length() - 1, top.bit_length())]
    default_block = top if top <= 8192 else 4096
    return declare_triton_space(
        "softmax-triton",
        meta={"BLOCK_SIZE": block_sizes},
        num_warps=[1, 2, 4, 8, 16, 32],
        num_stages=[1, 2, 3, 4],
        default={"BLOCK_SIZE": default_block, "num_warps": 8, "num_stages": 2},
        constraints=[ProductLimit(names=("BLOCK_SIZE",), per=("num_warps",), per_scale=32,
                                  limit=MAX_ELEMENTS_PER_THREAD)],
    )


def launch(native: dict, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Run the kernel with one launch config; `out` may be passed so callers can poison it."""
    meta, options = split_launch_config(native)
    if out is None:
        out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = int(meta["BLOCK_SIZE"])
    softmax_kernel[(n_rows,)](
        x, out, n_cols, x.stride(0), out.stride(0),
        BLOCK_SIZE=block, WHOLE_ROW=block >= n_cols, **options,
    )
    return out


register(Kernel(
    launch,
    name="softmax-triton",
    description="Hand-written Triton fused softmax, one row per program (BLOCK_SIZE, num_warps, num_stages)",
    **common.SPEC_FIELDS,
    space=triton_space,
    sources=(softmax_kernel, launch),
))
