"""What the softmaxes that cut a row into pieces share: the space they offer (piece widths,
warps, a cap on what one thread holds), and the combine of the pieces' partial statistics
(max m_i, sum l_i of exp(x - m_i)) into the row's max M and sum L = sum_i l_i exp(m_i - M)."""

from __future__ import annotations

from typing import Any, Sequence

import triton
import triton.language as tl

from search_spaces.space import ProductLimit, SearchSpace
from search_spaces.triton_space import declare_triton_space


def piece_widths(n_cols: int, smallest: int, largest: int, max_pieces: int) -> list[int]:
    """Powers of two from `smallest` up to the padded row (at most `largest`), leaving at most
    `max_pieces` pieces a row: the CHUNK values a space offers."""
    top = max(smallest, min(triton.next_power_of_2(n_cols), largest))
    return [2**e for e in range(smallest.bit_length() - 1, top.bit_length())
            if triton.cdiv(n_cols, 2**e) <= max_pieces]


def piece_space(kernel: str, n_cols: int, *, smallest: int, largest: int, max_pieces: int, preferred: int,
                max_per_thread: int, num_warps: Sequence[int], default_warps: int,
                meta: dict[str, list[Any]] | None = None, default: dict[str, Any] | None = None) -> SearchSpace:
    """CHUNK (see `piece_widths`, the default `preferred` or the widest offered) x `meta` x
    num_warps, one stage, with at most `max_per_thread` fp32 values of a piece per thread
    (more spill registers).  Refuses a row that needs more than `max_pieces` pieces."""
    chunks = piece_widths(n_cols, smallest, largest, max_pieces)
    if not chunks:
        raise ValueError(f"{kernel}: a row of {n_cols} values needs more than {max_pieces} pieces of at most "
                         f"{largest}")
    return declare_triton_space(
        kernel,
        meta={"CHUNK": chunks, **(meta or {})},
        num_warps=list(num_warps),
        num_stages=[1],
        default={"CHUNK": min(preferred, chunks[-1]), **(default or {}), "num_warps": default_warps, "num_stages": 1},
        constraints=[ProductLimit(names=("CHUNK",), per=("num_warps",), per_scale=32, limit=max_per_thread)],
    )


@triton.jit
def combine_partials(max_ptr, sum_ptr, first, n_pieces, PIECES_POW2: tl.constexpr, VOLATILE: tl.constexpr):
    """The row's max and sum from its pieces' partials stored at `first` ... `first + n_pieces - 1`
    (`VOLATILE` where other programs of the same launch wrote them)."""
    pieces = tl.arange(0, PIECES_POW2)
    present = pieces < n_pieces
    maxes = tl.load(max_ptr + first + pieces, mask=present, other=-float("inf"), volatile=VOLATILE)
    sums = tl.load(sum_ptr + first + pieces, mask=present, other=0.0, volatile=VOLATILE)
    row_max = tl.max(maxes, axis=0)
    row_sum = tl.sum(tl.where(present, sums * tl.exp(maxes - row_max), 0.0), axis=0)
    return row_max, row_sum
