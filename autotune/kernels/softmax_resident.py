"""A Triton softmax for long rows that moves each byte through memory once: pieces held on chip.

Why it exists: a row too long for one program (2048 x 100000 fp16 is 200 KB a row) is read
twice by every two-pass design, and the second read only comes from L2 while the rows in
flight fit in it.  `softmax-persistent` keeps PER_SM x SMs rows in flight for that, which at
200 KB a row leaves too few programs to keep HBM busy, or too many bytes for L2.  Here a
row is cut into pieces of at most CHUNK values, one program each, and a piece stays in
registers from its load to its store:

1. load the piece once (marked evict-first or not: tuned), take m_i = max and
   p = exp(x - m_i), l_i = sum p;
2. publish (m_i, l_i), announce arrival on the row's counter (release), poll it without
   fences until every piece of the row has arrived, then acquire once;
3. combine the row's partials (M = max m_i, L = sum l_i exp(m_i - M)) and store
   p * (exp(m_i - M) / L): one exponential per element, one multiply, no divide.

A program takes its place from a ticket (an atomic counter), not from its program id: the
GPU does not promise to start programs in order, but every program holding a lower ticket
than a running one has started, so the lowest unfinished row always has all its pieces
running and no piece waits on one that cannot start.  That needs one row's pieces on the GPU
at once, which `MAX_PIECES` keeps far below any GPU's capacity.

A row is shared out evenly between its pieces (`even_piece_width`), not cut into CHUNK-wide
pieces and a remainder: every piece of a row waits for the slowest of them, and with a
remainder (100000 = 12 x 8192 + 1696) the short piece holds its program's registers while
doing a fifth of the work and the full ones set the pace.  Evenly, 13 pieces of 7696.

Unlike `softmax-cooperative` (the same exchange), the piece is loaded with 16-byte vectors
when rows are 16-byte aligned, is never re-read, keeps its exponentials, and the
statistics are taken in base 2 on pre-scaled values.  Variants measured slower on an H100
and dropped: fenced tickets and fenced polling; holding x instead of p (fewer registers, a
second exp2 per element); a cooperative-grid launch whose programs loop over the pieces (no
tickets, but the programs move in lockstep, so loads and stores no longer overlap), even with
each program loading its next piece before it waits on the present one (far slower still; and
with tickets, a program whose next piece falls in its present row waits on itself).  The Triton
interpreter runs programs one after the other, so there a row must be one piece; the waiting
path runs on a GPU, accuracy-gated like every measured config.
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
MAX_CHUNK = 32768
MAX_PIECES = 128  # pieces of one row that must run at once (an H100 holds thousands of programs)
# More fp32 values per thread than this spill registers (the piece is held across the wait).
MAX_ELEMENTS_PER_THREAD = 128
LOG2_E = tl.constexpr(1.4426950408889634)  # a constexpr: jit code reads only those globals


@triton.jit
def resident_softmax(x_ptr, out_ptr, max_ptr, sum_ptr, sync_ptr, n_cols, x_row_stride, x_col_stride,
                     out_row_stride, out_col_stride, pieces_per_row, piece_width, CHUNK: tl.constexpr,
                     PIECES_POW2: tl.constexpr, STREAM_LOADS: tl.constexpr):
    # sync_ptr[0] hands out tickets; sync_ptr[1 + row] counts the row's pieces that arrived.  A
    # ticket publishes no data, so it needs no ordering (relaxed: no fence around it).
    ticket = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    _softmax_piece(x_ptr, out_ptr, max_ptr, sum_ptr, sync_ptr, ticket, n_cols, x_row_stride, x_col_stride,
                   out_row_stride, out_col_stride, pieces_per_row, piece_width, CHUNK, PIECES_POW2, STREAM_LOADS)


@triton.jit
def _softmax_piece(x_ptr, out_ptr, max_ptr, sum_ptr, sync_ptr, item, n_cols, x_row_stride, x_col_stride,
                   out_row_stride, out_col_stride, pieces_per_row, piece_width, CHUNK: tl.constexpr,
                   PIECES_POW2: tl.constexpr, STREAM_LOADS: tl.constexpr):
    """Piece `item` (row item // pieces_per_row): load, publish its partials, wait for the row's
    other pieces, store p * exp(m_i - M) / L.  Column strides of 1 are specialised by Triton, so
    contiguous rows keep their vector loads.  STREAM_LOADS marks x's lines evict-first in L2
    (each is read once); which is faster depends on the shape, so it is tuned."""
    row = item // pieces_per_row
    piece = item - row * pieces_per_row
    lanes = tl.arange(0, CHUNK)
    offsets = piece * piece_width + lanes
    mask = (lanes < piece_width) & (offsets < n_cols)
    x_pointers = x_ptr + row.to(tl.int64) * x_row_stride + offsets * x_col_stride
    if STREAM_LOADS:
        x = tl.load(x_pointers, mask=mask, other=-float("inf"), eviction_policy="evict_first")
    else:
        x = tl.load(x_pointers, mask=mask, other=-float("inf"))
    scaled = x.to(tl.float32) * LOG2_E  # base 2 from here on: exp(x - m) = exp2(scaled - m * log2 e)
    piece_max = tl.max(scaled, axis=0)
    p = tl.exp2(scaled - piece_max)
    piece_sum = tl.sum(p, axis=0)
    factor = 1.0 / piece_sum
    if pieces_per_row > 1:
        tl.store(max_ptr + item, piece_max)
        tl.store(sum_ptr + item, piece_sum)
        tl.debug_barrier()  # every thread's stores precede the release below
        arrived = tl.atomic_add(sync_ptr + 1 + row, 1, sem="release", scope="gpu") + 1
        while arrived < pieces_per_row:  # poll without fences, then acquire once
            arrived = tl.atomic_add(sync_ptr + 1 + row, 0, sem="relaxed", scope="gpu")
        tl.atomic_add(sync_ptr + 1 + row, 0, sem="acquire", scope="gpu")
        tl.debug_barrier()
        pieces = tl.arange(0, PIECES_POW2)
        present = pieces < pieces_per_row
        first = row * pieces_per_row
        maxes = tl.load(max_ptr + first + pieces, mask=present, other=-float("inf"), volatile=True)
        sums = tl.load(sum_ptr + first + pieces, mask=present, other=0.0, volatile=True)
        row_max = tl.max(maxes, axis=0)
        row_sum = tl.sum(tl.where(present, sums * tl.exp2(maxes - row_max), 0.0), axis=0)
        factor = tl.exp2(piece_max - row_max) / row_sum
    result = p * factor
    out_row = out_ptr + row.to(tl.int64) * out_row_stride
    tl.store(out_row + offsets * out_col_stride, result.to(out_ptr.dtype.element_ty), mask=mask,
             eviction_policy="evict_first")


def triton_space(shape: Shape, dtype: torch.dtype):
    return piece_space("softmax-resident", shape[-1], smallest=MIN_CHUNK, largest=MAX_CHUNK, max_pieces=MAX_PIECES,
                       preferred=8192, max_per_thread=MAX_ELEMENTS_PER_THREAD, num_warps=(2, 4, 8, 16, 32),
                       default_warps=4, meta={"STREAM_LOADS": [1, 0]}, default={"STREAM_LOADS": 1})


def even_piece_width(n_cols: int, pieces: int) -> int:
    """The columns each of a row's `pieces` pieces takes: the row shared out evenly, rounded up to
    a multiple of 16 (a piece then starts on a 16-byte boundary wherever its row does, and
    Triton, which marks integer arguments divisible by 16, keeps the 16-byte vectors).  At most
    CHUNK where pieces = cdiv(n_cols, CHUNK), CHUNK being a multiple of 16."""
    return triton.cdiv(triton.cdiv(n_cols, pieces), 16) * 16


def launch(native: dict, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """One launch of rows x pieces programs; the partials and the zeroed counters are per call."""
    meta, options = split_launch_config(native)
    chunk = int(meta["CHUNK"])
    if out is None:
        out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    width = even_piece_width(n_cols, triton.cdiv(n_cols, chunk))
    pieces_per_row = triton.cdiv(n_cols, width)  # none empty by construction (an empty piece's max is -inf)
    if pieces_per_row > MAX_PIECES:
        raise ValueError(f"CHUNK={chunk} cuts a row of {n_cols} into {pieces_per_row} pieces (at most {MAX_PIECES})")
    if pieces_per_row > 1 and os.environ.get("TRITON_INTERPRET") == "1":
        raise ValueError("the Triton interpreter runs programs one at a time, so pieces that wait for each other "
                         f"would wait forever: use CHUNK >= {n_cols} there")
    n_items = n_rows * pieces_per_row
    partials = torch.empty((2, n_items), dtype=torch.float32, device=x.device)
    sync = torch.zeros(1 + n_rows, dtype=torch.int32, device=x.device)
    arguments = (x, out, partials[0], partials[1], sync, n_cols, x.stride(0), x.stride(1), out.stride(0),
                 out.stride(1), pieces_per_row, width)
    resident_softmax[(n_items,)](*arguments, CHUNK=chunk, PIECES_POW2=triton.next_power_of_2(pieces_per_row),
                                 STREAM_LOADS=bool(meta["STREAM_LOADS"]), **options)
    return out


register(Kernel(
    launch,
    name="softmax-resident",
    description="Triton softmax for long rows: CHUNK-wide pieces held in registers, partial max/sum exchanged "
                "between the pieces of a row, so x is read once and written once",
    **common.SPEC_FIELDS,
    space=triton_space,
    sources=(resident_softmax, _softmax_piece, launch),
))
