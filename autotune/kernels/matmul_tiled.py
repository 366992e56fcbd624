"""An N-tiled Triton formulation of the matmul + row-reduction epilogue family.

Why it exists: the Helion kernels of `matmul_epilogue` keep a [tile_m, N] fp32 accumulator
resident, which at N >= 2048 leaves a handful of rows per program, spills, and loses to
torch.compile by 3-10x on an H100.  Here N is tiled like any GEMM and the epilogue is split
in two launches:

    pass 1  a GEMM tiled over M, N and K (tl.dot, fp32 accumulate, IEEE fp32 products, GROUP_M
            swizzled program order so that neighbouring programs share x and w tiles in L2).
            Its epilogue writes each row's statistics of its N tile to a small fp32 buffer
            parts[stat, M, n_tiles] and, for the [M, N] epilogues, a rescalable tile into out;
    pass 2  one program per COMBINE_ROWS rows combines the row's partials and, for [M, N]
            epilogues, rescales out in place, one pass-1 tile at a time.  For the [M]
            epilogues (logsumexp, sum, max) it only combines: y is never written or read.

With ROW_BLOCK=1 both passes run in one launch: a program owns BLOCK_M rows, computes all
their N tiles one after another, then combines and rescales them.  Pass 2 then re-reads tiles
the same program has just written, from L2 as long as the rows in flight (programs x BLOCK_M
x N) fit it, so out crosses HBM once instead of three times; the price is that every program
reads all of w (from L2) and the grid has only cdiv(M, BLOCK_M) programs.  Which form wins
depends on the shape, so it is a parameter of the space like the tiles.

What pass 1 stores, so that rounding to the output dtype costs no more than one rounding of
the final value (bf16 3e-2, fp16 5e-3, fp32 1e-4 are the tolerances against fp64):

* rmsnorm, l2norm: y itself and the tile's sum of squares; out = y * scale.
* layernorm: y minus the tile's mean, the tile mean and the tile's M2 (sum of squared
  deviations); pass 2 merges (count, mean, M2) triples with Chan's formula, which does not
  cancel catastrophically the way sum and sum of squares do when the mean is large, and
  shifts each tile by (tile mean - row mean).  Centring before the store also keeps a
  large row mean out of the stored value's rounding error.
* softmax: exp(y - tile max) (in (0, 1]: its rounding is relative to the final value), the
  tile max and the tile's sum of exponentials; out = e * exp(tile max - row max) / row sum.
  A bf16 logit stored before exp would carry an absolute error of |y| * 2^-9 into exp.
* logsumexp: the tile max and sum; sum, max: the tile's sum or max.

Edges: x rows and w columns past M and N are read as row or column 0 (every load stays in
bounds, no mask along M or N) and never counted or stored; K is masked only when it is not a
multiple of BLOCK_K.  Strides are passed, so transposed or sliced inputs work.  With TMA=1
(offered where the rows of contiguous inputs are 16-byte multiples) the operand tiles are
fetched through tensor descriptors, which read zeros past M, N and K; inputs a descriptor
cannot describe (a sliced x, a column-major w) fall back to pointer loads.  Shapes MxKxN.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from autotune.kernels.matmul_epilogue import EPILOGUES, register_epilogue_kernel
from autotune.kernels.registry import Shape
from search_spaces.space import ProductLimit, SearchSpace
from search_spaces.triton_space import declare_triton_space, split_launch_config

# Epilogue codes (constexpr in both kernels) and how many fp32 statistics each keeps per tile.
CODES = {"rmsnorm": 0, "layernorm": 1, "softmax": 2, "l2norm": 3, "logsumexp": 4, "sum": 5, "max": 6}
STATS = {"rmsnorm": 1, "layernorm": 2, "softmax": 2, "l2norm": 1, "logsumexp": 2, "sum": 1, "max": 1}
RMS, LAYERNORM, SOFTMAX, L2, LSE, SUM, MAX = (tl.constexpr(v) for v in range(7))
EPS = tl.constexpr(1e-6)  # matmul_epilogue.EPS, as a constexpr (jit code reads only those globals)

# Shared memory the staged operand tiles may take: (BLOCK_M + BLOCK_N) * BLOCK_K * itemsize *
# num_stages under SMEM_BUDGET_BYTES (the H100 allows 227 KB per block; the rest is left to
# the epilogue's layout conversions).  A sum is not a ProductLimit, so each operand tile gets
# half the budget: sound (it never admits a config over the budget) and it keeps Triton's
# usual Hopper tiles (128x256x64 at 3 stages, 128x128x64 at 4), dropping only lopsided ones
# at the most stages.  The model is conservative: compiled for sm_90 on a CPU (Triton 3.9,
# aligned bf16 operands), 128x128x64 at 3 stages allocated 65536 B and 256x128x64 at 3 stages
# 114688 B, against 98304 and 147456 here.
SMEM_BUDGET_BYTES = 200 * 1024
# fp32 accumulator values per thread: half of Triton's 255-register cap, the rest left to
# operand fragments, addresses and the epilogue's temporaries (an assumption to check on the GPU).
MAX_ACC_PER_THREAD = 128
# Pass 2 holds a [COMBINE_ROWS, next_pow2(n_tiles)] block of partials in registers.
MAX_PARTIALS_PER_PROGRAM = 4096
BLOCKS_M = (16, 32, 64, 128, 256)
BLOCKS_N = (16, 32, 64, 128, 256)
BLOCKS_K = (16, 32, 64, 128)
GROUPS_M = (1, 4, 8, 16)
COMBINE_ROWS = (1, 2, 4, 8, 16, 32)
ROW_BLOCKS = (0, 1)  # 0: a launch per pass; 1: one program per row block does both (row_block)
TMAS = (0, 1)  # operand tiles: 0, pointer loads (cp.async); 1, tensor descriptors (the TMA unit)
# Untuned starting points for an H100: the usual Hopper GEMM tile for 16-bit operands (tensor
# cores); IEEE fp32 products run on CUDA cores, where smaller tiles and fewer stages suffice.
DEFAULT_16BIT = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "COMBINE_ROWS": 8, "ROW_BLOCK": 0,
                 "num_warps": 8, "num_stages": 3}
DEFAULT_FP32 = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "COMBINE_ROWS": 8, "ROW_BLOCK": 0,
                "num_warps": 4, "num_stages": 2}


@triton.jit
def _gemm_tile(x_ptr, w_ptr, x_desc, w_desc, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn, pid_m, pid_n,
               EVEN_K: tl.constexpr, W_ROWS_ALIGNED: tl.constexpr, TMA: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """One [BLOCK_M, BLOCK_N] tile of x @ w in fp32, with its rows and columns."""
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TMA:  # the tensor-memory accelerator fetches whole tiles, zero past M, N and K
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = x_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = w_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc, input_precision="ieee")
        return acc, rows, cols, row_ok, col_ok
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + tl.where(row_ok, rows, 0).to(tl.int64)[:, None] * stride_xm + ks[None, :] * stride_xk
    w_cols = tl.where(col_ok, cols, 0)
    if W_ROWS_ALIGNED:
        # The select hides from Triton that w's columns are consecutive, and w's loads then go
        # one element at a time.  When N is a multiple of 16, every 16-byte vector of columns
        # lies wholly inside N, or wholly past it; a vector is addressed by its first lane,
        # which past N the select made column 0, so such a vector reads columns 0 onwards: in
        # bounds, and never counted or stored.
        w_cols = tl.max_contiguous(tl.multiple_of(w_cols, BLOCK_N), BLOCK_N)
    w_ptrs = w_ptr + ks[:, None] * stride_wk + w_cols[None, :] * stride_wn
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(x_ptrs)
            b = tl.load(w_ptrs)
        else:
            left = K - k * BLOCK_K
            a = tl.load(x_ptrs, mask=ks[None, :] < left, other=0.0)
            b = tl.load(w_ptrs, mask=ks[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    return acc, rows, cols, row_ok, col_ok


@triton.jit
def _tile_statistics(acc, rows, cols, row_ok, col_ok, pid_n, y_ptr, part_ptr, N, n_tiles, part_stride, stride_ym,
                     stride_yn, EPILOGUE: tl.constexpr, WRITE_Y: tl.constexpr, BLOCK_N: tl.constexpr):
    """The tile's statistics per row into the partials, and the tile the combining step rescales."""
    part = part_ptr + rows * n_tiles + pid_n
    inside = col_ok[None, :]
    if EPILOGUE == LAYERNORM:
        count = tl.minimum(BLOCK_N, N - pid_n * BLOCK_N).to(tl.float32)
        mean = tl.sum(tl.where(inside, acc, 0.0), axis=1) / count
        acc = tl.where(inside, acc - mean[:, None], 0.0)
        tl.store(part, mean, mask=row_ok)
        tl.store(part + part_stride, tl.sum(acc * acc, axis=1), mask=row_ok)
    elif EPILOGUE == SOFTMAX or EPILOGUE == LSE:
        logits = tl.where(inside, acc, -float("inf"))
        top = tl.max(logits, axis=1)
        acc = tl.exp(logits - top[:, None])
        tl.store(part, top, mask=row_ok)
        tl.store(part + part_stride, tl.sum(acc, axis=1), mask=row_ok)
    elif EPILOGUE == MAX:
        tl.store(part, tl.max(tl.where(inside, acc, -float("inf")), axis=1), mask=row_ok)
    elif EPILOGUE == SUM:
        tl.store(part, tl.sum(tl.where(inside, acc, 0.0), axis=1), mask=row_ok)
    else:  # RMS, L2: sum of squares
        tl.store(part, tl.sum(tl.where(inside, acc * acc, 0.0), axis=1), mask=row_ok)
    if WRITE_Y:
        y_ptrs = y_ptr + rows.to(tl.int64)[:, None] * stride_ym + cols[None, :] * stride_yn
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & inside)


@triton.jit
def _combine(out_ptr, part_ptr, rows, M, N, n_tiles, part_stride, stride_om, stride_on, EPILOGUE: tl.constexpr,
             WRITE_Y: tl.constexpr, BLOCK_N: tl.constexpr, TILES: tl.constexpr):
    """Combine `rows`' partials; rescale their tiles of out in place, or store the [M] result.
    Rows past M read row 0's partials (no NaN from empty rows) and store nothing."""
    row_ok = rows < M
    safe = tl.where(row_ok, rows, 0)
    tiles = tl.arange(0, TILES)
    tile_ok = (tiles < n_tiles)[None, :]
    at = part_ptr + safe[:, None] * n_tiles + tiles[None, :]
    if EPILOGUE == LAYERNORM:
        means = tl.load(at, mask=tile_ok, other=0.0)
        counts = tl.where(tile_ok, tl.minimum(BLOCK_N, N - tiles * BLOCK_N).to(tl.float32)[None, :], 0.0)
        mean = tl.sum(counts * means, axis=1) / N
        apart = tl.where(tile_ok, means - mean[:, None], 0.0)
        m2 = tl.sum(tl.load(at + part_stride, mask=tile_ok, other=0.0), axis=1) + tl.sum(counts * apart * apart, axis=1)
        scale = 1.0 / tl.sqrt(m2 / N + EPS)
    elif EPILOGUE == SOFTMAX or EPILOGUE == LSE:
        maxes = tl.load(at, mask=tile_ok, other=-float("inf"))
        top = tl.max(maxes, axis=1)
        total = tl.sum(tl.load(at + part_stride, mask=tile_ok, other=0.0) * tl.exp(maxes - top[:, None]), axis=1)
        scale = 1.0 / total
    elif EPILOGUE == MAX:
        total = tl.max(tl.load(at, mask=tile_ok, other=-float("inf")), axis=1)
    else:  # RMS, L2, SUM: a sum of the partials
        total = tl.sum(tl.load(at, mask=tile_ok, other=0.0), axis=1)
        if EPILOGUE == RMS:
            scale = 1.0 / tl.sqrt(total / N + EPS)
        elif EPILOGUE == L2:
            scale = 1.0 / tl.maximum(tl.sqrt(total), EPS)
    if WRITE_Y:
        columns = tl.arange(0, BLOCK_N)
        for t in range(0, n_tiles):
            cols = t * BLOCK_N + columns
            mask = row_ok[:, None] & (cols < N)[None, :]
            y_ptrs = out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :] * stride_on
            y = tl.load(y_ptrs, mask=mask, other=0.0).to(tl.float32)
            if EPILOGUE == SOFTMAX:
                factor = tl.exp(tl.load(part_ptr + safe * n_tiles + t) - top) * scale
                y = y * factor[:, None]
            elif EPILOGUE == LAYERNORM:
                shift = tl.load(part_ptr + safe * n_tiles + t) - mean
                y = (y + shift[:, None]) * scale[:, None]
            else:
                y = y * scale[:, None]
            tl.store(y_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        if EPILOGUE == LSE:
            total = top + tl.log(total)
        tl.store(out_ptr + rows * stride_om, total, mask=row_ok)


@triton.jit
def tile_product(x_ptr, w_ptr, x_desc, w_desc, y_ptr, part_ptr, M, N, K, stride_xm, stride_xk, stride_wk,
                 stride_wn, stride_ym, stride_yn, n_tiles, part_stride, EPILOGUE: tl.constexpr, WRITE_Y: tl.constexpr,
                 EVEN_K: tl.constexpr, W_ROWS_ALIGNED: tl.constexpr, TMA: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # GROUP_M row tiles walk all N tiles before the next group starts: x's rows and w's
    # columns are reused from L2 by the programs running at the same time.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    per_group = GROUP_M * n_tiles
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    acc, rows, cols, row_ok, col_ok = _gemm_tile(
        x_ptr, w_ptr, x_desc, w_desc, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn, pid_m, pid_n,
        EVEN_K, W_ROWS_ALIGNED, TMA, BLOCK_M, BLOCK_N, BLOCK_K)
    _tile_statistics(acc, rows, cols, row_ok, col_ok, pid_n, y_ptr, part_ptr, N, n_tiles, part_stride, stride_ym,
                     stride_yn, EPILOGUE, WRITE_Y, BLOCK_N)


@triton.jit
def combine_rows(out_ptr, part_ptr, M, N, n_tiles, part_stride, stride_om, stride_on,
                 EPILOGUE: tl.constexpr, WRITE_Y: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
                 TILES: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    _combine(out_ptr, part_ptr, rows, M, N, n_tiles, part_stride, stride_om, stride_on, EPILOGUE, WRITE_Y, BLOCK_N,
             TILES)


@triton.jit
def row_block(x_ptr, w_ptr, x_desc, w_desc, out_ptr, part_ptr, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn,
              stride_om, stride_on, n_tiles, part_stride, EPILOGUE: tl.constexpr, WRITE_Y: tl.constexpr,
              EVEN_K: tl.constexpr, W_ROWS_ALIGNED: tl.constexpr, TMA: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ROWS: tl.constexpr, TILES: tl.constexpr):
    # One program owns BLOCK_M rows: it computes all their N tiles (w, K x N, is read from L2 by
    # every program), then combines and rescales them itself.  The re-read is of tiles this
    # program has just written, from L2 while the rows in flight fit it: each byte of out
    # crosses HBM once, and there is no second launch.
    pid_m = tl.program_id(0)
    for pid_n in range(0, n_tiles):
        acc, rows, cols, row_ok, col_ok = _gemm_tile(
            x_ptr, w_ptr, x_desc, w_desc, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn, pid_m, pid_n,
            EVEN_K, W_ROWS_ALIGNED, TMA, BLOCK_M, BLOCK_N, BLOCK_K)
        _tile_statistics(acc, rows, cols, row_ok, col_ok, pid_n, out_ptr, part_ptr, N, n_tiles, part_stride,
                         stride_om, stride_on, EPILOGUE, WRITE_Y, BLOCK_N)
    tl.debug_barrier()  # the program's own stores, made by other threads, are visible to all of it
    for first in range(0, BLOCK_M, ROWS):
        rows = pid_m * BLOCK_M + first + tl.arange(0, ROWS)
        _combine(out_ptr, part_ptr, rows, M, N, n_tiles, part_stride, stride_om, stride_on, EPILOGUE, WRITE_Y,
                 BLOCK_N, TILES)


def tma_ready(x: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether x and w can be read through tensor descriptors: rows contiguous, and bases and
    row strides 16-byte aligned (the tensor-memory accelerator's requirements)."""
    return all(t.stride(1) == 1 and t.data_ptr() % 16 == 0 and t.stride(0) * t.element_size() % 16 == 0
               for t in (x, w))


def tma_possible(shape: Shape, itemsize: int) -> bool:
    """Whether contiguous inputs of this MxKxN shape are `tma_ready` (their rows of K and N elements
    whole multiples of 16 bytes): only then does the space offer TMA."""
    _, k, n = shape
    return k * itemsize % 16 == 0 and n * itemsize % 16 == 0


def w_rows_aligned(w: torch.Tensor) -> bool:
    """w's rows are contiguous and N a multiple of 16, so w's column loads may be vectorised."""
    return w.stride(1) == 1 and w.shape[1] % 16 == 0


def combine_warps(rows: int, block_n: int) -> int:
    """Pass 2's warps: about 16 values of a [rows, block_n] tile per thread, 1 to 8 warps."""
    return max(1, min(8, rows * block_n // (32 * 16)))


def launch(native: dict, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None, *,
           epilogue: str = "rmsnorm") -> torch.Tensor:
    """`epilogue(x @ w)` in the config's form (two launches, or one with ROW_BLOCK); `out` ([M, N]
    in x's dtype, or [M] fp32) may be passed so callers can poison it."""
    meta, options = split_launch_config(native)
    m, k = x.shape
    n = w.shape[1]
    keeps = EPILOGUES[epilogue][2]
    if out is None:
        out = torch.empty((m, n) if keeps else (m,), dtype=x.dtype if keeps else torch.float32, device=x.device)
    block_m, block_n, block_k = int(meta["BLOCK_M"]), int(meta["BLOCK_N"]), int(meta["BLOCK_K"])
    n_tiles = triton.cdiv(n, block_n)
    parts = torch.empty((STATS[epilogue], m, n_tiles), dtype=torch.float32, device=x.device)
    strides = (x.stride(0), x.stride(1), w.stride(0), w.stride(1))
    out_strides = (out.stride(0), out.stride(1) if keeps else 0)
    tma = bool(int(meta.get("TMA", 0))) and tma_ready(x, w)
    descriptors = (TensorDescriptor.from_tensor(x, [block_m, block_k]),
                   TensorDescriptor.from_tensor(w, [block_k, block_n])) if tma else (None, None)
    shared = dict(EPILOGUE=CODES[epilogue], WRITE_Y=keeps, EVEN_K=k % block_k == 0, W_ROWS_ALIGNED=w_rows_aligned(w),
                  TMA=tma, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    rows, tiles = int(meta["COMBINE_ROWS"]), triton.next_power_of_2(n_tiles)
    if int(meta.get("ROW_BLOCK", 0)):
        row_block[(triton.cdiv(m, block_m),)](x, w, *descriptors, out, parts, m, n, k, *strides, *out_strides, n_tiles,
                                             m * n_tiles, ROWS=min(rows, block_m), TILES=tiles, **shared, **options)
        return out
    y, y_strides = (out, out_strides) if keeps else (parts, (0, 0))
    tile_product[(triton.cdiv(m, block_m) * n_tiles,)](x, w, *descriptors, y, parts, m, n, k, *strides, *y_strides,
                                                       n_tiles, m * n_tiles, GROUP_M=int(meta["GROUP_M"]), **shared,
                                                       **options)
    combine_rows[(triton.cdiv(m, rows),)](
        out, parts, m, n, n_tiles, m * n_tiles, *out_strides, EPILOGUE=CODES[epilogue], WRITE_Y=keeps, ROWS=rows,
        BLOCK_N=block_n, TILES=tiles, num_warps=combine_warps(rows, block_n), num_stages=1)
    return out


def _itemsize(dtype: Any) -> int:
    return 2 if dtype is None else torch.empty((), dtype=dtype).element_size()


def triton_space(shape: Shape, dtype: Any, kernel: str = "matmul-tiled") -> SearchSpace:
    """The declared space; the shared-memory and pass-2 limits depend on the dtype and on N."""
    itemsize = _itemsize(dtype)
    n_pad = triton.next_power_of_2(shape[-1])
    meta = {"BLOCK_M": BLOCKS_M, "BLOCK_N": BLOCKS_N, "BLOCK_K": BLOCKS_K, "GROUP_M": GROUPS_M,
            "COMBINE_ROWS": COMBINE_ROWS, "ROW_BLOCK": ROW_BLOCKS}
    default = dict(DEFAULT_FP32 if itemsize == 4 else DEFAULT_16BIT)
    if tma_possible(shape, itemsize):  # offered only where contiguous inputs allow it
        meta["TMA"], default["TMA"] = TMAS, 0
    return declare_triton_space(
        kernel,
        meta=meta,
        num_warps=[2, 4, 8],
        num_stages=[1, 2, 3, 4, 5],
        default=default,
        constraints=[
            ProductLimit(names=("BLOCK_M", "BLOCK_K", "num_stages"), limit=SMEM_BUDGET_BYTES // 2 // itemsize),
            ProductLimit(names=("BLOCK_N", "BLOCK_K", "num_stages"), limit=SMEM_BUDGET_BYTES // 2 // itemsize),
            ProductLimit(names=("BLOCK_M", "BLOCK_N"), per=("num_warps",), per_scale=32, limit=MAX_ACC_PER_THREAD),
            # COMBINE_ROWS * n_pad / BLOCK_N (the partials pass 2 holds) within its cap
            ProductLimit(names=("COMBINE_ROWS",), per=("BLOCK_N",), limit=max(1, MAX_PARTIALS_PER_PROGRAM // n_pad)),
        ],
    )


def _launcher(epilogue: str) -> Callable[..., torch.Tensor]:
    def launch_epilogue(native: dict, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None
                        ) -> torch.Tensor:
        """One epilogue's launcher: what its registered Kernel calls."""
        return launch(native, x, w, out, epilogue=epilogue)

    launch_epilogue.__name__ = f"launch_{epilogue}"
    return launch_epilogue


for _epilogue in EPILOGUES:
    _name = f"matmul-tiled-{_epilogue}"
    register_epilogue_kernel(
        _launcher(_epilogue), _name, _epilogue,
        f"Triton {_epilogue}(x @ w), x [M, K], w [K, N]: a GEMM tiled over M, N and K writing per-tile row "
        f"statistics, then a row pass combining them",
        space=functools.partial(triton_space, kernel=_name),
        sources=(_gemm_tile, _tile_statistics, _combine, tile_product, combine_rows, row_block, launch, tma_ready,
                 tma_possible, w_rows_aligned, combine_warps, triton_space, _launcher))
