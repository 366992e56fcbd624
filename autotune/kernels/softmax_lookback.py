"""A Triton look-back softmax: the second pass trails the first by LAG programs, so it reads from L2.

Why it exists: for long rows with few of them ([1024, 50257]) one program per row leaves
the memory system idle, and the two ways of cutting rows into pieces measured so far each
pay somewhere: `softmax-split` reads x twice (two kernels; only part of the second read can
come from L2), `softmax-cooperative` reads once but measured slower still on an H100 (156
against 123 us at [1024, 50257]), its pieces waiting for each other.  Here one launch does
both passes in a pipeline over pieces (tiles):

    program t:  pass 1 on tile t        read it (kept in L2), store its max and sum of exp,
                                        count it on its row
                pass 2 on tile t - LAG  wait until every tile of that row is counted
                                        (meant to be done long before), combine the partials
                                        and write exp(x - M) / L, re-reading the tile from L2

Memory traffic is one read and one write of x; the second read is served by L2 as long as
the last LAG tiles (read and written) fit there, which is what the tuner's LAG trades off.

A program waits only on programs with lower tickets (LAG is at least a row's tile count),
and tickets come from an atomic counter in the order programs start, so whatever it
waits on has already started: no deadlock, whatever the GPU's scheduling.  For the same
reason the Triton interpreter, which runs programs one after the other, runs this kernel
correctly, the waiting path included.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from autotune.kernels import softmax_common as common
from autotune.kernels.registry import Kernel, Shape, register
from autotune.kernels.row_pieces import combine_partials, piece_space
from search_spaces.triton_space import split_launch_config

MIN_CHUNK = 1024
MAX_CHUNK = 16384
MAX_PIECES = 64  # tiles per row: the combine loads them as one vector
LAGS = (128, 256, 512, 1024, 2048)  # programs between a tile's two passes (at least its row's tile count)
# More fp32 values per thread than this spill registers (one tile is held at a time).
MAX_ELEMENTS_PER_THREAD = 64


@triton.jit
def lookback_softmax(x_ptr, out_ptr, max_ptr, sum_ptr, sync_ptr, n_tiles, n_cols, x_row_stride, out_row_stride,
                     pieces_per_row, lag, CHUNK: tl.constexpr, PIECES_POW2: tl.constexpr):
    # sync_ptr[0] hands out tickets; sync_ptr[1 + row] counts the row's tiles through pass 1.
    ticket = tl.atomic_add(sync_ptr, 1)
    columns = tl.arange(0, CHUNK)
    if ticket < n_tiles:  # pass 1 on tile `ticket`
        row = ticket // pieces_per_row
        offsets = (ticket % pieces_per_row) * CHUNK + columns
        x = tl.load(x_ptr + row.to(tl.int64) * x_row_stride + offsets, mask=offsets < n_cols,
                    other=-float("inf"), eviction_policy="evict_last").to(tl.float32)
        tile_max = tl.max(x, axis=0)
        tl.store(max_ptr + ticket, tile_max)
        tl.store(sum_ptr + ticket, tl.sum(tl.exp(x - tile_max), axis=0))
        tl.debug_barrier()  # every thread's stores precede the release below
        tl.atomic_add(sync_ptr + 1 + row, 1, sem="release", scope="gpu")
    if ticket >= lag:  # pass 2 on tile `ticket - lag`, whose row's tiles all have lower tickets
        tile = ticket - lag
        row = tile // pieces_per_row
        arrived = tl.atomic_add(sync_ptr + 1 + row, 0, sem="acquire", scope="gpu")
        while arrived < pieces_per_row:
            arrived = tl.atomic_add(sync_ptr + 1 + row, 0, sem="acquire", scope="gpu")
        tl.debug_barrier()
        row_max, row_sum = combine_partials(max_ptr, sum_ptr, row * pieces_per_row, pieces_per_row,
                                            PIECES_POW2, True)
        offsets = (tile % pieces_per_row) * CHUNK + columns
        mask = offsets < n_cols
        x = tl.load(x_ptr + row.to(tl.int64) * x_row_stride + offsets, mask=mask, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        result = tl.exp(x - row_max) / row_sum
        tl.store(out_ptr + row.to(tl.int64) * out_row_stride + offsets, result.to(out_ptr.dtype.element_ty),
                 mask=mask)


def triton_space(shape: Shape, dtype: torch.dtype):
    return piece_space("softmax-lookback", shape[-1], smallest=MIN_CHUNK, largest=MAX_CHUNK, max_pieces=MAX_PIECES,
                       preferred=4096, max_per_thread=MAX_ELEMENTS_PER_THREAD, num_warps=(2, 4, 8, 16),
                       default_warps=4, meta={"LAG": list(LAGS)}, default={"LAG": 512})


def launch(native: dict, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """One launch of n_tiles + lag programs; partials and the zeroed counters are allocated per call."""
    meta, options = split_launch_config(native)
    chunk = int(meta["CHUNK"])
    if out is None:
        out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    pieces_per_row = triton.cdiv(n_cols, chunk)
    if pieces_per_row > MAX_PIECES:
        raise ValueError(f"CHUNK={chunk} cuts a row of {n_cols} into {pieces_per_row} tiles (at most {MAX_PIECES})")
    n_tiles = n_rows * pieces_per_row
    # A tile's row-mates must all come before its second pass; no longer than the tiles there are.
    lag = max(pieces_per_row, min(int(meta["LAG"]), n_tiles))
    maxes = torch.empty(n_tiles, dtype=torch.float32, device=x.device)
    sums = torch.empty(n_tiles, dtype=torch.float32, device=x.device)
    sync = torch.zeros(1 + n_rows, dtype=torch.int32, device=x.device)
    lookback_softmax[(n_tiles + lag,)](
        x, out, maxes, sums, sync, n_tiles, n_cols, x.stride(0), out.stride(0), pieces_per_row, lag,
        CHUNK=chunk, PIECES_POW2=triton.next_power_of_2(pieces_per_row), **options,
    )
    return out


register(Kernel(
    launch,
    name="softmax-lookback",
    description="Triton look-back softmax: one launch pipelines the two passes over CHUNK-wide tiles, the "
                "second trailing the first by LAG programs so its re-read of x comes from L2",
    **common.SPEC_FIELDS,
    space=triton_space,
    sources=(lookback_softmax, combine_partials, launch),
))
