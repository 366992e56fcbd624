"""A Triton softmax for long rows that moves each byte through memory once: pieces held on chip.

Why it exists: a row too long for one program (2048 x 100000 fp16 is 200 KB a row) is read
twice by every two-pass design, and the second read only comes from L2 while the rows in
flight fit in it.  `softmax-persistent` keeps PER_SM x SMs rows in flight for that, which at
200 KB a row leaves too few programs to keep HBM busy, or too many bytes for L2.  Here a
row is cut into pieces of at most CHUNK values, one program each, and a piece stays in
registers from its load to its store:

1. load the piece once (marked evict-first or not: tuned), take m_i = max and
   p = exp(x - m_i), l_i = sum p;
2. publish (m_i, l_i) as one 64-bit word (`pack_partials`), then wait until every piece of the
   row has published;
3. combine the row's partials (M = max m_i, L = sum l_i exp(m_i - M)) and store
   p * (exp(m_i - M) / L): one exponential per element, one multiply, no divide.

The word is its own flag: it is never 0 (l_i is at least 1, or NaN), the partials start zeroed,
and one atomic exchange writes both values at once, so a piece that reads all of its row's words
non-zero holds their values and needs no fence.  A program's wait is where its registers sit
idle, so it is kept to few round trips to L2.  How a piece waits is tuned (COUNT_ARRIVALS): 0
polls the row's words themselves; 1 counts arrivals on a per-row counter, polls it, then reads
the words (and reads again while one is still 0).  Polling the words waits one round trip less;
with many pieces a row (512 x 262144 at CHUNK 8192 is 32) their pollers share the row's lines,
and the counter, one word, was measured faster there on an H100.  An earlier exchange
(partials stored plainly, a counter incremented with release and a fenced acquire after the
poll) waited two round trips more and was measured slower at every long row.

A program takes its place from a ticket (an atomic counter), not from its program id: the
GPU does not promise to start programs in order, but every program holding a lower ticket
than a running one has started, so the lowest unfinished row always has all its pieces
running and no piece waits on one that cannot start.  That needs one row's pieces on the GPU
at once, which `MAX_PIECES` keeps far below any GPU's capacity.  (Program ids, which skip the
ticket's round trip, were measured a little faster, but nothing promises they are safe.)

A row is shared out evenly between its pieces (`even_piece_width`), not cut into CHUNK-wide
pieces and a remainder: every piece of a row waits for the slowest of them, and with a
remainder (100000 = 12 x 8192 + 1696) the short piece holds its program's registers while
doing a fifth of the work and the full ones set the pace.  Evenly, 13 pieces of 7696.

Unlike `softmax-cooperative` (the same exchange), the piece is loaded with 16-byte vectors
when rows are 16-byte aligned, is never re-read, keeps its exponentials, and the
statistics are taken in base 2 on pre-scaled values.  Variants measured slower on an H100
and dropped: fenced tickets and fenced polling; holding x instead of p (fewer registers, a
second exp2 per element); loading the piece of the program id while the ticket is fetched
(and again when they differ: more registers); a cooperative-grid launch whose programs loop
over the pieces (no tickets, but the programs move in lockstep, so loads and stores no longer
overlap).  The Triton interpreter runs programs one after the other, so there a row must be one
piece; the waiting path runs on a GPU, accuracy-gated like every measured config, and the
word's packing is checked under the interpreter (`tests/partials_kernel.py`).
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
LOG2_E = tl.constexpr(1.4426950408889634)  # constexprs: jit code reads only those globals
LOW_32_BITS = tl.constexpr(0xFFFFFFFF)


@triton.jit
def resident_softmax(x_ptr, out_ptr, sync_ptr, count_ptr, n_cols, x_row_stride, x_col_stride, out_row_stride,
                     out_col_stride, pieces_per_row, piece_width, CHUNK: tl.constexpr, PIECES_POW2: tl.constexpr,
                     STREAM_LOADS: tl.constexpr, COUNT_ARRIVALS: tl.constexpr):
    # sync_ptr[0] hands out tickets, sync_ptr[1 + item] holds piece item's packed partials and
    # count_ptr[row] counts the row's arrivals (COUNT_ARRIVALS), all zeroed before the launch.  A
    # ticket publishes no data, so it needs no ordering (relaxed: no fence around it).
    ticket = tl.atomic_add(sync_ptr, 1, sem="relaxed").to(tl.int32)
    _softmax_piece(x_ptr, out_ptr, sync_ptr + 1, count_ptr, ticket, n_cols, x_row_stride, x_col_stride,
                   out_row_stride, out_col_stride, pieces_per_row, piece_width, CHUNK, PIECES_POW2, STREAM_LOADS,
                   COUNT_ARRIVALS)


@triton.jit
def pack_partials(piece_max, piece_sum):
    """(max, sum) as one int64: the sum's bits high, the max's low.  Never 0, since the sum is at
    least 1 (exp2 of the max less itself) or NaN: a zeroed word means not yet published."""
    high = piece_sum.to(tl.int32, bitcast=True).to(tl.int64) << 32
    return high | (piece_max.to(tl.int32, bitcast=True).to(tl.int64) & LOW_32_BITS)


@triton.jit
def unpack_partials(words):
    """The (max, sum) of each word packed by `pack_partials`."""
    maxes = (words & LOW_32_BITS).to(tl.int32).to(tl.float32, bitcast=True)
    return maxes, (words >> 32).to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def _row_partials(words_ptr, count_ptr, row, pieces_per_row, PIECES_POW2: tl.constexpr, COUNT_ARRIVALS: tl.constexpr):
    """Wait until every piece of `row` has published, then its pieces' words (1 past the last).
    Polls use volatile loads and relaxed atomics, which go to L2 and order nothing: a word read
    non-zero is the whole of what its piece wrote."""
    pieces = tl.arange(0, PIECES_POW2)
    present = pieces < pieces_per_row
    first = words_ptr + row * pieces_per_row
    if COUNT_ARRIVALS:
        arrived = tl.atomic_add(count_ptr + row, 1, sem="relaxed", scope="gpu") + 1
        while arrived < pieces_per_row:
            arrived = tl.atomic_add(count_ptr + row, 0, sem="relaxed", scope="gpu")
    words = tl.load(first + pieces, mask=present, other=1, volatile=True)
    while tl.sum((words == 0).to(tl.int32), axis=0) > 0:
        words = tl.load(first + pieces, mask=present, other=1, volatile=True)
    return words


@triton.jit
def _softmax_piece(x_ptr, out_ptr, words_ptr, count_ptr, item, n_cols, x_row_stride, x_col_stride, out_row_stride,
                   out_col_stride, pieces_per_row, piece_width, CHUNK: tl.constexpr, PIECES_POW2: tl.constexpr,
                   STREAM_LOADS: tl.constexpr, COUNT_ARRIVALS: tl.constexpr):
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
        tl.atomic_xchg(words_ptr + item, pack_partials(piece_max, piece_sum), sem="relaxed", scope="gpu")
        words = _row_partials(words_ptr, count_ptr, row, pieces_per_row, PIECES_POW2, COUNT_ARRIVALS)
        maxes, sums = unpack_partials(words)
        present = tl.arange(0, PIECES_POW2) < pieces_per_row
        maxes = tl.where(present, maxes, -float("inf"))
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
                       default_warps=4, meta={"STREAM_LOADS": [1, 0], "COUNT_ARRIVALS": [0, 1]},
                       default={"STREAM_LOADS": 1, "COUNT_ARRIVALS": 0})


def even_piece_width(n_cols: int, pieces: int) -> int:
    """The columns each of a row's `pieces` pieces takes: the row shared out evenly, rounded up to
    a multiple of 16 (a piece then starts on a 16-byte boundary wherever its row does, and
    Triton, which marks integer arguments divisible by 16, keeps the 16-byte vectors).  At most
    CHUNK where pieces = cdiv(n_cols, CHUNK), CHUNK being a multiple of 16."""
    return triton.cdiv(triton.cdiv(n_cols, pieces), 16) * 16


def exchange_buffer(n_rows: int, pieces_per_row: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """One zeroed allocation (one memset a call): the ticket and every piece's partials word
    (int64), then a counter per row (int32); returned as (ticket and words, counters)."""
    n_items = n_rows * pieces_per_row
    sync = torch.zeros(1 + n_items + triton.cdiv(n_rows, 2), dtype=torch.int64, device=device)
    return sync, sync[1 + n_items:].view(torch.int32)


def piece_layout(n_cols: int, chunk: int) -> tuple[int, int]:
    """(pieces per row, piece width) of a row of `n_cols` cut at `chunk`; none empty by
    construction (an empty piece's max would be -inf)."""
    width = even_piece_width(n_cols, triton.cdiv(n_cols, chunk))
    return triton.cdiv(n_cols, width), width


def launch(native: dict, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """One launch of rows x pieces programs; the exchange buffer is zeroed per call."""
    meta, options = split_launch_config(native)
    chunk = int(meta["CHUNK"])
    if out is None:
        out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    pieces_per_row, width = piece_layout(n_cols, chunk)
    if pieces_per_row > MAX_PIECES:
        raise ValueError(f"CHUNK={chunk} cuts a row of {n_cols} into {pieces_per_row} pieces (at most {MAX_PIECES})")
    if pieces_per_row > 1 and os.environ.get("TRITON_INTERPRET") == "1":
        raise ValueError("the Triton interpreter runs programs one at a time, so pieces that wait for each other "
                         f"would wait forever: use CHUNK >= {n_cols} there")
    sync, counters = exchange_buffer(n_rows, pieces_per_row, x.device)
    resident_softmax[(n_rows * pieces_per_row,)](
        x, out, sync, counters, n_cols, x.stride(0), x.stride(1), out.stride(0), out.stride(1), pieces_per_row, width,
        CHUNK=chunk, PIECES_POW2=triton.next_power_of_2(pieces_per_row), STREAM_LOADS=bool(meta["STREAM_LOADS"]),
        COUNT_ARRIVALS=bool(meta.get("COUNT_ARRIVALS", 0)), **options)
    return out


register(Kernel(
    launch,
    name="softmax-resident",
    description="Triton softmax for long rows: CHUNK-wide pieces held in registers, partial max/sum exchanged "
                "between the pieces of a row, so x is read once and written once",
    **common.SPEC_FIELDS,
    space=triton_space,
    sources=(resident_softmax, pack_partials, unpack_partials, _row_partials, _softmax_piece, exchange_buffer,
             launch),
))
