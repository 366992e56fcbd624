"""A persistent Triton online softmax: a few programs per SM loop over the rows.

Why it exists: at [1024, 50257] the one-program-per-row kernels pay one of two prices.  A
row held in registers (the Helion softmax's best configs, 130 us on an H100) runs one
program per SM whose load, exp and store phases do not overlap; a looped row launched as
1024 programs puts every row in flight at once, 103 MB of them, so the second pass misses
the 50 MB L2 and x is read twice from memory.  Here only PER_SM x (SM count) programs are
launched and each walks its rows one at a time:

    pass 1: stream the row in CHUNK-wide tiles, keeping a running max and a rescaled sum
            (tiles loaded with evict_last, so they stay in L2)
    pass 2: stream the row again, now from L2, and write exp(x - max) * (1 / sum)

so the rows in flight (PER_SM x SMs x row bytes) fit in L2 while several programs per SM
keep the memory system busy.  exp is taken as exp2 of a pre-scaled argument and the divide
as one reciprocal per row, which keeps the SM's special-function units off the critical path.

Rows whose length is not a multiple of 8 (50257) start at a different 16-byte phase each, and
a kernel that loads them as they are gets no vectorised load at all (2-byte loads: measured
116 us at [1024, 50257] on an H100 against torch.softmax's 112; 82 us with what follows).  So
each row is loaded as a masked head up to its first 16-byte boundary, a body of whole tiles
and a tail of narrower ones that start and end on such boundaries, and the last few values.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from autotune.kernels import softmax_common as common
from autotune.kernels.registry import Kernel, Shape, register
from search_spaces.space import ProductLimit
from search_spaces.triton_space import declare_triton_space, split_launch_config

MIN_CHUNK = 256
MAX_CHUNK = 16384
PROGRAMS_PER_SM = (1, 2, 3, 4, 6, 8)
# More fp32 values of a tile per thread than this spill registers.
MAX_ELEMENTS_PER_THREAD = 64
# Stands in for the SM count where there is no GPU (the Triton interpreter on a CPU).
CPU_PROGRAM_SLOTS = 4
VECTOR_BYTES = 16  # the widest global load a thread issues
# A row's tail (less than a CHUNK) goes in tiles this many times narrower, so padding lanes
# waste at most one such tile per row.  Measured on an H100 at [1024, 50257]: 82.4 us, against
# 92.8 with masked CHUNK tiles over the whole row.  The narrow tiles cost where the tail is
# long: at [4096, 32000] (7424 values past CHUNK 8192 x 3) 228.5 us, against 188.4.
EDGES_PER_CHUNK = 8
MIN_EDGE = 16
LOG2_E = tl.constexpr(1.4426950408889634)  # a constexpr: jit code reads only those globals


@triton.jit
def _absorb(row_max, row_sum, x):
    """The running max and sum of exp(x - max) after one more tile of x (fp32; padding is -inf)."""
    new_max = tl.maximum(row_max, tl.max(x, axis=0))
    row_sum = row_sum * tl.exp2((row_max - new_max) * LOG2_E) + tl.sum(tl.exp2((x - new_max) * LOG2_E), axis=0)
    return new_max, row_sum


@triton.jit
def persistent_softmax(x_ptr, out_ptr, n_rows, n_cols, x_row_stride, out_row_stride,
                       CHUNK: tl.constexpr, EDGE: tl.constexpr, ALIGN: tl.constexpr):
    # A row of 50257 fp16 values starts at a different 16-byte phase each time; loaded as it
    # is, no load can be vectorised.  So each row is cut at ALIGN-element boundaries into
    #   head  up to the first boundary: one masked tile of ALIGN lanes
    #   body  whole CHUNK tiles, unmasked (16-byte loads and stores)
    #   tail  EDGE tiles up to the last boundary, masked on boundaries (still 16-byte)
    #   end   what is left past it: one masked tile of ALIGN lanes
    # ALIGN is 1 where x's and out's rows are not in the same phase.
    columns = tl.arange(0, CHUNK)
    edge = tl.arange(0, EDGE)
    few = tl.arange(0, ALIGN)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = tl.cast(row, tl.int64) * x_row_stride
        out_row = tl.cast(row, tl.int64) * out_row_stride
        head = tl.minimum((ALIGN - x_row % ALIGN) % ALIGN, n_cols)
        body_end = head + (n_cols - head) // CHUNK * CHUNK
        tail_end = head + (n_cols - head) // ALIGN * ALIGN
        x_tail_end = tl.multiple_of(x_row + tail_end, ALIGN)
        row_max = -float("inf")
        row_sum = 0.0
        # pass 1: running max and sum; evict_last keeps the row in L2 for pass 2
        if head > 0:
            x = tl.load(x_ptr + x_row + few, mask=few < head, other=-float("inf"), eviction_policy="evict_last")
            row_max, row_sum = _absorb(row_max, row_sum, x.to(tl.float32))
        for start in range(head, body_end, CHUNK):
            x = tl.load(x_ptr + tl.multiple_of(x_row + start, ALIGN) + columns, eviction_policy="evict_last")
            row_max, row_sum = _absorb(row_max, row_sum, x.to(tl.float32))
        for start in range(body_end, tail_end, EDGE):
            at = tl.multiple_of(x_row + start, ALIGN) + edge
            x = tl.load(x_ptr + at, mask=at < x_tail_end, other=-float("inf"), eviction_policy="evict_last")
            row_max, row_sum = _absorb(row_max, row_sum, x.to(tl.float32))
        if tail_end < n_cols:
            x = tl.load(x_ptr + x_row + tail_end + few, mask=tail_end + few < n_cols, other=-float("inf"),
                        eviction_policy="evict_last")
            row_max, row_sum = _absorb(row_max, row_sum, x.to(tl.float32))
        # pass 2: exp(x - max) / sum as exp2 of a pre-scaled argument times one reciprocal
        shift = row_max * LOG2_E
        scale = 1.0 / row_sum
        if head > 0:
            _write(x_ptr + x_row + few, out_ptr + out_row + few, few < head, shift, scale)
        for start in range(head, body_end, CHUNK):
            _write(x_ptr + tl.multiple_of(x_row + start, ALIGN) + columns,
                   out_ptr + tl.multiple_of(out_row + start, ALIGN) + columns, None, shift, scale)
        for start in range(body_end, tail_end, EDGE):
            at = tl.multiple_of(x_row + start, ALIGN) + edge
            _write(x_ptr + at, out_ptr + tl.multiple_of(out_row + start, ALIGN) + edge, at < x_tail_end,
                   shift, scale)
        if tail_end < n_cols:
            _write(x_ptr + x_row + tail_end + few, out_ptr + out_row + tail_end + few, tail_end + few < n_cols,
                   shift, scale)


@triton.jit
def _write(x_pointers, out_pointers, mask, shift, scale):
    """out = exp2(x * log2(e) - shift) * scale where mask; x streamed out of L2."""
    x = tl.load(x_pointers, mask=mask, other=0.0 if mask is not None else None, eviction_policy="evict_first")
    result = tl.exp2(x.to(tl.float32) * LOG2_E - shift) * scale
    tl.store(out_pointers, result.to(out_pointers.dtype.element_ty), mask=mask, eviction_policy="evict_first")


def triton_space(shape: Shape, dtype: torch.dtype):
    top = min(triton.next_power_of_2(shape[-1]), MAX_CHUNK)
    bottom = min(MIN_CHUNK, top)
    chunks = [2**e for e in range(bottom.bit_length() - 1, top.bit_length())]
    return declare_triton_space(
        "softmax-persistent",
        meta={"CHUNK": chunks, "PER_SM": list(PROGRAMS_PER_SM)},
        num_warps=[4, 8, 16, 32],
        num_stages=[1, 2, 3],
        # measured near the best at [1024, 50257] and [4096, 32000] on an H100
        default={"CHUNK": min(8192, top), "PER_SM": 4, "num_warps": 16, "num_stages": 2},
        constraints=[ProductLimit(names=("CHUNK",), per=("num_warps",), per_scale=32,
                                  limit=MAX_ELEMENTS_PER_THREAD)],
    )


@functools.lru_cache(maxsize=None)
def program_slots(device: torch.device) -> int:
    """The SM count of a CUDA device (what PER_SM multiplies); a small stand-in elsewhere."""
    if device.type == "cuda":
        from autotune.device import sm_count

        return sm_count(device.index or 0, default=CPU_PROGRAM_SLOTS)
    return CPU_PROGRAM_SLOTS


def launch(native: dict, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """One launch of min(rows, PER_SM x SMs) programs; `out` may be passed so callers can poison it."""
    meta, options = split_launch_config(native)
    if out is None:
        out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    programs = min(n_rows, int(meta["PER_SM"]) * program_slots(x.device))
    chunk = int(meta["CHUNK"])
    persistent_softmax[(programs,)](x, out, n_rows, n_cols, x.stride(0), out.stride(0), CHUNK=chunk,
                                    EDGE=max(MIN_EDGE, chunk // EDGES_PER_CHUNK), ALIGN=row_alignment(x, out),
                                    **options)
    return out


def row_alignment(x: torch.Tensor, out: torch.Tensor) -> int:
    """Elements per 16 bytes when x's and out's rows are in the same 16-byte phase (equal row
    strides, 16-byte aligned starts, unit column stride), else 1 (no aligned body)."""
    width = VECTOR_BYTES // x.element_size()
    in_phase = (x.stride(0) == out.stride(0) and x.stride(1) == out.stride(1) == 1
                and x.data_ptr() % VECTOR_BYTES == 0 and out.data_ptr() % VECTOR_BYTES == 0)
    return width if in_phase and width > 1 else 1


register(Kernel(
    launch,
    name="softmax-persistent",
    description="Triton persistent online softmax: PER_SM programs per SM loop over rows, two passes over "
                "CHUNK-wide tiles, the second from L2",
    **common.SPEC_FIELDS,
    space=triton_space,
    sources=(persistent_softmax, _absorb, _write, launch, row_alignment),
))
