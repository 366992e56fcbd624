"""What the softmaxes that cut a row into pieces share: the piece widths a space offers, and
the combine of the pieces' partial statistics (max m_i, sum l_i of exp(x - m_i)) into the
row's max M and sum L = sum_i l_i exp(m_i - M)."""

from __future__ import annotations

import triton
import triton.language as tl


def piece_widths(n_cols: int, smallest: int, largest: int, max_pieces: int) -> list[int]:
    """Powers of two from `smallest` up to the padded row (at most `largest`), leaving at most
    `max_pieces` pieces a row: the CHUNK values a space offers."""
    top = max(smallest, min(triton.next_power_of_2(n_cols), largest))
    return [2**e for e in range(smallest.bit_length() - 1, top.bit_length())
            if triton.cdiv(n_cols, 2**e) <= max_pieces]


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
