"""A Triton split-row softmax: several programs per row and a second reduction pass.

Why it exists: with one program per row, a long row (50257 fp16 values: 100 KB) pads to
65536 fp32 values held by one program, one program fits per SM, and 1024 rows leave
the memory system idle between each program's load, reduce and store phases.  Here a
row is cut into `CHUNK`-wide pieces, one program each:

1. `partial_stats` reads its piece and writes the piece's max and sum of exp(x - max);
2. `normalise` combines the row's partials (max M, sum L = sum_i l_i exp(m_i - M)) and
   writes exp(x - M) / L for its piece, reading x again.

The second read is the price.  `REVERSE=1` walks the rows of pass 2 backwards, so it
starts with the rows pass 1 read last, which are still in L2 (50 MB on an H100): part
of the second read is served from L2.  The tuner decides whether that pays.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from autotune.kernels import softmax_common as common
from autotune.kernels.registry import Kernel, Shape, register
from autotune.kernels.row_pieces import piece_space
from search_spaces.triton_space import split_launch_config

MIN_CHUNK = 1024
MAX_CHUNK = 32768
# More fp32 values per thread than this spill registers (the chunk is held whole).
MAX_ELEMENTS_PER_THREAD = 128


@triton.jit
def partial_stats(x_ptr, max_ptr, sum_ptr, n_cols, x_row_stride, n_chunks, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // n_chunks).to(tl.int64)
    chunk = pid % n_chunks
    offsets = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    piece_max = tl.max(x, axis=0)
    piece_sum = tl.sum(tl.exp(x - piece_max), axis=0)
    tl.store(max_ptr + pid, piece_max)
    tl.store(sum_ptr + pid, piece_sum)


@triton.jit
def normalise(x_ptr, out_ptr, max_ptr, sum_ptr, n_cols, x_row_stride, out_row_stride, n_chunks, n_programs,
              CHUNK: tl.constexpr, CHUNKS_POW2: tl.constexpr, REVERSE: tl.constexpr):
    pid = tl.program_id(0)
    if REVERSE:
        pid = n_programs - 1 - pid
    row = (pid // n_chunks).to(tl.int64)
    chunk = pid % n_chunks
    pieces = tl.arange(0, CHUNKS_POW2)
    present = pieces < n_chunks
    maxes = tl.load(max_ptr + row * n_chunks + pieces, mask=present, other=-float("inf"))
    sums = tl.load(sum_ptr + row * n_chunks + pieces, mask=present, other=0.0)
    row_max = tl.max(maxes, axis=0)
    row_sum = tl.sum(tl.where(present, sums * tl.exp(maxes - row_max), 0.0), axis=0)
    offsets = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    result = tl.exp(x - row_max) / row_sum
    tl.store(out_ptr + row * out_row_stride + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


def triton_space(shape: Shape, dtype: torch.dtype):
    return piece_space("softmax-split", shape[-1], smallest=MIN_CHUNK, largest=MAX_CHUNK, max_pieces=2**31,
                       preferred=8192, max_per_thread=MAX_ELEMENTS_PER_THREAD, num_warps=(2, 4, 8, 16, 32),
                       default_warps=8, meta={"REVERSE": [0, 1]}, default={"REVERSE": 1})


def launch(native: dict, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Both passes with one launch config; `out` may be passed so callers can poison it."""
    meta, options = split_launch_config(native)
    chunk, reverse = int(meta["CHUNK"]), int(meta["REVERSE"])
    if out is None:
        out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    n_chunks = triton.cdiv(n_cols, chunk)
    n_programs = n_rows * n_chunks
    maxes = torch.empty(n_programs, dtype=torch.float32, device=x.device)
    sums = torch.empty(n_programs, dtype=torch.float32, device=x.device)
    partial_stats[(n_programs,)](x, maxes, sums, n_cols, x.stride(0), n_chunks, CHUNK=chunk, **options)
    normalise[(n_programs,)](
        x, out, maxes, sums, n_cols, x.stride(0), out.stride(0), n_chunks, n_programs,
        CHUNK=chunk, CHUNKS_POW2=triton.next_power_of_2(n_chunks), REVERSE=reverse, **options,
    )
    return out


register(Kernel(
    launch,
    name="softmax-split",
    description="Triton split-row softmax: CHUNK-wide pieces of a row per program, partial max/sum, "
                "then a combine-and-write pass (REVERSE: second pass backwards, for L2 reuse)",
    **common.SPEC_FIELDS,
    space=triton_space,
    sources=(partial_stats, normalise, launch),
))
