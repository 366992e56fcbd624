"""A deliberately broken Triton kernel, for proving that the GPU evaluator survives faults.

It computes y = 2 * x over a 2-D tensor, unless its `fault` parameter asks for one of
the failures the evaluator must classify and survive: a compiler error, a launch that
needs more shared memory than any GPU has, a compiler that never returns, a kernel that
never finishes, an illegal memory access, NaN output, wrong numbers or elements never written.  Every fault is
selected by a constexpr, so the healthy configs compile to the plain kernel.

`EXPECTED_STATUS` is the contract: the status each fault must be recorded with.
"""

from __future__ import annotations

import time

import torch
import triton
import triton.language as tl

from autotune.kernels.registry import Inputs, Kernel, Shape, register
from autotune.types import Status
from search_spaces.parameters import Choice, Ordinal
from search_spaces.space import SearchSpace

KERNEL_NAME = "faulty"

EXPECTED_STATUS: dict[str, Status] = {
    "none": Status.OK,
    "compile_error": Status.COMPILE_ERROR,
    "out_of_resources": Status.OUT_OF_RESOURCES,
    "compile_hang": Status.COMPILE_TIMEOUT,
    "run_hang": Status.RUN_TIMEOUT,
    "illegal_address": Status.CRASH,
    "nan": Status.WRONG_RESULT,
    "wrong": Status.WRONG_RESULT,
    "unwritten": Status.WRONG_RESULT,
}
FAULTS: tuple[str, ...] = tuple(EXPECTED_STATUS)
# What each fault does, and so why it must end with its expected status.
FAULT_EFFECTS: dict[str, str] = {
    "none": "y = 2x: passes the accuracy check and is timed",
    "compile_error": "adds tensors of shapes [B] and [2B]: Triton's compiler rejects the kernel",
    "out_of_resources": "a 256x256 fp32 tl.dot needs 512 KiB of shared memory: Triton refuses the launch",
    "compile_hang": "the launch sleeps an hour before compiling: killed at the compile timeout",
    "run_hang": "every program spins on a volatile load of a zero: killed at the run timeout",
    "illegal_address": "reads 2**40 elements past the input: CUDA illegal address, the worker dies",
    "nan": "writes NaN: the accuracy check rejects it",
    "wrong": "writes 3x instead of 2x (relative error 0.5): the accuracy check rejects it",
    "unwritten": "writes only the even elements: the poisoned output shows the odd ones were never written",
}
BLOCK_SIZES = (256, 1024)
NUM_WARPS = 4

# The out_of_resources fault multiplies one TILE x TILE fp32 tile by itself: each dot
# operand then needs 256 KiB of shared memory, more than any GPU gives one block
# (227 KiB on the H100), so Triton refuses the launch.  8 warps keep the tile's share of
# registers per thread moderate, so compiling it stays quick.
TILE = 256
TILE_NUM_WARPS = 8
# The illegal_address fault reads this many elements past the input: terabytes away,
# in no allocation, so the GPU faults instead of reading someone else's memory.
FAR_OFFSET = tl.constexpr(1 << 40)
COMPILE_HANG_S = 3600.0


@triton.jit
def faulty_kernel(x_ptr, out_ptr, flag_ptr, n_elements, BLOCK_SIZE: tl.constexpr, FAULT: tl.constexpr,
                  TILE_SIZE: tl.constexpr):
    if FAULT == "out_of_resources":
        rows = tl.arange(0, TILE_SIZE)
        index = (rows[:, None] * TILE_SIZE + rows[None, :]) % n_elements
        tile = tl.load(x_ptr + index)
        tl.store(out_ptr + index, tl.dot(tile, tile))
    else:
        offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        y = x * 2.0
        if FAULT == "compile_error":
            y = y + tl.arange(0, 2 * BLOCK_SIZE)  # shapes [B] and [2B] cannot be added
        if FAULT == "run_hang":
            # flag_ptr points at a zero: spin until it changes, which it never does.
            # volatile keeps the load inside the loop (it cannot be hoisted out).
            flag = tl.load(flag_ptr, volatile=True)
            while flag == 0:
                flag = tl.load(flag_ptr, volatile=True)
        if FAULT == "illegal_address":
            y = tl.load(x_ptr + offsets + FAR_OFFSET) * 2.0
        if FAULT == "nan":
            y = y + float("nan")
        if FAULT == "wrong":
            y = x * 3.0
        if FAULT == "unwritten":
            mask = mask & (offsets % 2 == 0)
        tl.store(out_ptr + offsets, y, mask=mask)


def triton_space(shape: Shape, dtype: torch.dtype) -> SearchSpace:
    """Every fault at every block size; the healthy `none` at 1024 is the default."""
    return SearchSpace(
        kernel=KERNEL_NAME, family="triton",
        parameters=(
            Choice(name="fault", choices=FAULTS, default_value="none"),
            Ordinal(name="BLOCK_SIZE", choices=BLOCK_SIZES, default_value=BLOCK_SIZES[-1]),
        ),
        default={"fault": "none", "BLOCK_SIZE": BLOCK_SIZES[-1]},
    )


def launch(native: dict, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Run one config; `compile_hang` stalls here first, as a compiler that never returns would."""
    fault = str(native["fault"])
    if fault == "compile_hang":
        time.sleep(COMPILE_HANG_S)
    if out is None:
        out = torch.empty_like(x)
    # The spin reads a zero that never changes; the other configs pass any pointer there.
    flag = torch.zeros(1, dtype=torch.int32, device=x.device) if fault == "run_hang" else out
    block = int(native["BLOCK_SIZE"])
    n_elements = x.numel()
    warps = TILE_NUM_WARPS if fault == "out_of_resources" else NUM_WARPS
    faulty_kernel[(triton.cdiv(n_elements, block),)](
        x, out, flag, n_elements, BLOCK_SIZE=block, FAULT=fault, TILE_SIZE=TILE, num_warps=warps, num_stages=1,
    )
    return out


def make_inputs(shape: Shape, dtype: torch.dtype, device: str, seed: int) -> Inputs:
    generator = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(shape, generator=generator, dtype=torch.float32, device=device).to(dtype),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.double() * 2.0


def torch_double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    numel = 1
    for d in shape:
        numel *= d
    return 2 * numel * torch.empty((), dtype=dtype).element_size()


def flops(shape: Shape) -> int:
    numel = 1
    for d in shape:
        numel *= d
    return numel


register(Kernel(
    launch,
    name=KERNEL_NAME,
    description="a deliberately broken kernel for testing fault handling (y = 2x unless `fault` says otherwise)",
    rank=2,
    inputs=make_inputs,
    reference=reference,
    baselines={"torch": torch_double},
    bytes_moved=bytes_moved,
    flops=flops,
    space=triton_space,
    sources=(faulty_kernel, launch),
    dtypes=("float32",),
))
