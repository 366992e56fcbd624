"""A Triton cooperative softmax: the pieces of a row wait for each other instead of reading twice.

Why it exists: `softmax-split` cuts a long row into pieces so that many small programs keep
the memory system busy, but it pays with a second read of x.  Here the programs that hold
the pieces of one row exchange their partial statistics through global memory and wait
for each other, so each piece is read once, kept in registers, and written once:

1. read the piece, compute its max m_i and sum l_i of exp(x - m_i), store them;
2. announce arrival on the row's counter (release) and spin until every piece of the row
   has arrived (acquire);
3. combine the row's partials (M = max m_i, L = sum l_i exp(m_i - M)) and write
   exp(x - M) / L from the registers.

Waiting across programs is safe only if all the pieces of a row run at the same time.
The GPU does not promise to start programs in order, so a program takes its place from a
ticket (an atomic counter) rather than from its program id: the programs holding tickets
below any running program's ticket have all started, so the lowest unfinished row always
has every piece running, and a row never waits on a piece that cannot start.  That needs
room for one row's pieces on the GPU at once, which `MAX_PIECES` keeps far below any
GPU's capacity.

CPU interpreters run programs one after the other, so there a row must fit one piece
(`pieces_per_row == 1`); the waiting path is exercised on a GPU, accuracy-gated like every
measured config.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from autotune.kernels import softmax_common as common
from autotune.kernels.registry import Kernel, Shape, register
from autotune.kernels.row_pieces import piece_space
from search_spaces.triton_space import split_launch_config

MIN_CHUNK = 1024
MAX_CHUNK = 65536
MAX_PIECES = 64  # pieces of one row that must run at once (an H100 holds thousands of programs)
# More fp32 values per thread than this spill registers (the piece is held across the wait).
MAX_ELEMENTS_PER_THREAD = 128


@triton.jit
def cooperative_softmax(x_ptr, out_ptr, max_ptr, sum_ptr, sync_ptr, n_cols, x_row_stride, out_row_stride,
                        pieces_per_row, CHUNK: tl.constexpr, PIECES_POW2: tl.constexpr):
    # sync_ptr[0] hands out tickets; sync_ptr[1 + row] counts the row's pieces that arrived.
    ticket = tl.atomic_add(sync_ptr, 1)
    row = ticket // pieces_per_row
    piece = ticket % pieces_per_row
    offsets = piece * CHUNK + tl.arange(0, CHUNK)
    mask = offsets < n_cols
    x_row = x_ptr + row.to(tl.int64) * x_row_stride
    x = tl.load(x_row + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    piece_max = tl.max(x, axis=0)
    piece_sum = tl.sum(tl.exp(x - piece_max), axis=0)
    row_max = piece_max
    row_sum = piece_sum
    if pieces_per_row > 1:
        tl.store(max_ptr + ticket, piece_max)
        tl.store(sum_ptr + ticket, piece_sum)
        tl.debug_barrier()  # every thread's stores precede the release below
        arrived = tl.atomic_add(sync_ptr + 1 + row, 1, sem="release", scope="gpu") + 1
        while arrived < pieces_per_row:
            arrived = tl.atomic_add(sync_ptr + 1 + row, 0, sem="acquire", scope="gpu")
        tl.debug_barrier()
        pieces = tl.arange(0, PIECES_POW2)
        present = pieces < pieces_per_row
        first = row * pieces_per_row
        maxes = tl.load(max_ptr + first + pieces, mask=present, other=-float("inf"), volatile=True)
        sums = tl.load(sum_ptr + first + pieces, mask=present, other=0.0, volatile=True)
        row_max = tl.max(maxes, axis=0)
        row_sum = tl.sum(tl.where(present, sums * tl.exp(maxes - row_max), 0.0), axis=0)
    result = tl.exp(x - row_max) / row_sum
    out_row = out_ptr + row.to(tl.int64) * out_row_stride
    tl.store(out_row + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


def triton_space(shape: Shape, dtype: torch.dtype):
    return piece_space("softmax-cooperative", shape[-1], smallest=MIN_CHUNK, largest=MAX_CHUNK, max_pieces=MAX_PIECES,
                       preferred=8192, max_per_thread=MAX_ELEMENTS_PER_THREAD, num_warps=(2, 4, 8, 16, 32),
                       default_warps=8)


def launch(native: dict, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """One launch; the partials and the zeroed ticket and arrival counters are allocated per call."""
    meta, options = split_launch_config(native)
    chunk = int(meta["CHUNK"])
    if out is None:
        out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    pieces_per_row = triton.cdiv(n_cols, chunk)
    if pieces_per_row > MAX_PIECES:
        raise ValueError(f"CHUNK={chunk} cuts a row of {n_cols} into {pieces_per_row} pieces (at most {MAX_PIECES})")
    if pieces_per_row > 1 and os.environ.get("TRITON_INTERPRET") == "1":
        raise ValueError("the Triton interpreter runs programs one at a time, so pieces that wait for each other "
                         f"would wait forever: use CHUNK >= {n_cols} there")
    n_programs = n_rows * pieces_per_row
    maxes = torch.empty(n_programs, dtype=torch.float32, device=x.device)
    sums = torch.empty(n_programs, dtype=torch.float32, device=x.device)
    sync = torch.zeros(1 + n_rows, dtype=torch.int32, device=x.device)
    cooperative_softmax[(n_programs,)](
        x, out, maxes, sums, sync, n_cols, x.stride(0), out.stride(0), pieces_per_row,
        CHUNK=chunk, PIECES_POW2=triton.next_power_of_2(pieces_per_row), **options,
    )
    return out


register(Kernel(
    launch,
    name="softmax-cooperative",
    description="Triton cooperative softmax: CHUNK-wide pieces of a row per program, which exchange partial "
                "max/sum and wait for each other, so x is read once and written once",
    **common.SPEC_FIELDS,
    space=triton_space,
    sources=(cooperative_softmax, launch),
))
