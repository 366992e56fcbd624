"""The split formulation of the matmul + row-reduction epilogue family: a library GEMM, then a
tuned Triton row pass.

Why it exists: where the product is large, the GEMM decides the time, and the vendor library's
GEMM (cuBLAS through `torch.matmul`) is the strongest one available; the N-tiled Triton kernel
(`matmul_tiled`) moves the same bytes (y written, read back, out written) but with a Triton
GEMM.  Here the product y = x @ w is rounded to the input dtype exactly as torch.compile's own
plan does, and one program per ROWS rows reads each row of y once, whole, reduces it in
registers and writes the epilogue.  The row pass is what the framework tunes; the GEMM is not
a parameter.  The formulation rule (`heuristics.matmul_formulation`) says where it is picked.

The whole row of a program stays in registers (a [ROWS, next_pow2(N)] fp32 block), so N is
limited to MAX_N; the space caps the values each thread holds.  Strides are passed, so sliced
and transposed inputs work (the library GEMM takes them as they are).  Where K or N is no
multiple of 16 bytes, the operands are copied into zero-padded ones first (as torch.compile's
plan pads them): the library GEMM then reads and writes whole 16-byte vectors instead of falling
back to a slow kernel, for one read and write of w (and of x, if K is the odd one).  Shapes MxKxN.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
import triton
import triton.language as tl

from autotune.kernels import compile_only
from autotune.kernels.matmul_epilogue import EPILOGUES, register_epilogue_kernel
from autotune.kernels.registry import Shape
from search_spaces.space import ProductLimit, SearchSpace
from search_spaces.triton_space import declare_triton_space, split_launch_config

CODES = {"rmsnorm": 0, "layernorm": 1, "softmax": 2, "l2norm": 3, "logsumexp": 4, "sum": 5, "max": 6}
RMS, LAYERNORM, SOFTMAX, L2, LSE, SUM, MAX = (tl.constexpr(v) for v in range(7))
EPS = tl.constexpr(1e-6)  # matmul_epilogue.EPS, as a constexpr (jit code reads only those globals)

ROWS = (1, 2, 4, 8, 16, 32)
WARPS = (1, 2, 4, 8, 16)
# fp32 values of y one thread holds: a quarter of Triton's 255-register cap, so a row pass never
# spills (it keeps y, and for layernorm the centred copy, at once).
MAX_VALUES_PER_THREAD = 64
# The widest row a program holds whole: one row over 16 warps at MAX_VALUES_PER_THREAD.
MAX_N = max(WARPS) * 32 * MAX_VALUES_PER_THREAD


@triton.jit
def row_epilogue(y_ptr, out_ptr, M, N, stride_ym, stride_yn, stride_om, stride_on, EPILOGUE: tl.constexpr,
                 WRITE_ROWS: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    """ROWS whole rows of y: their statistic in registers, then the epilogue's rows or values.
    Rows past M read zeros (no NaN from empty rows) and store nothing."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = (cols < N)[None, :]
    mask = row_ok[:, None] & col_ok
    y = tl.load(y_ptr + rows.to(tl.int64)[:, None] * stride_ym + cols[None, :] * stride_yn, mask=mask,
                other=0.0).to(tl.float32)
    if EPILOGUE == LAYERNORM:
        centred = tl.where(col_ok, y - (tl.sum(y, axis=1) / N)[:, None], 0.0)
        y = centred * (1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / N + EPS))[:, None]
    elif EPILOGUE == RMS:
        y = y * (1.0 / tl.sqrt(tl.sum(y * y, axis=1) / N + EPS))[:, None]
    elif EPILOGUE == L2:
        y = y * (1.0 / tl.maximum(tl.sqrt(tl.sum(y * y, axis=1)), EPS))[:, None]
    elif EPILOGUE == SOFTMAX or EPILOGUE == LSE:
        logits = tl.where(col_ok, y, -float("inf"))
        top = tl.max(logits, axis=1)
        e = tl.exp(logits - top[:, None])
        total = tl.sum(e, axis=1)
        if EPILOGUE == SOFTMAX:
            y = e * (1.0 / total)[:, None]
        else:
            value = top + tl.log(total)
    elif EPILOGUE == SUM:
        value = tl.sum(y, axis=1)
    else:  # MAX
        value = tl.max(tl.where(col_ok, y, -float("inf")), axis=1)
    if WRITE_ROWS:
        tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :] * stride_on,
                 y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(out_ptr + rows * stride_om, value, mask=row_ok)


def padded(extent: int, itemsize: int) -> int:
    """The extent rounded up to a whole number of 16-byte vectors."""
    unit = max(1, 16 // itemsize)
    return -(-extent // unit) * unit


def library_product(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y = x @ w in x's dtype by the vendor library, [M, padded(N)] with the first N columns the
    product; while launches are held for compiling only (a compile worker beside a timing one),
    an empty y of the same shape, so no GEMM runs."""
    (m, k), n = x.shape, w.shape[1]
    k_up, n_up = padded(k, x.element_size()), padded(n, x.element_size())
    if compile_only.launches_held():
        return torch.empty((m, n_up), dtype=x.dtype, device=x.device)
    if k_up != k:
        x = torch.nn.functional.pad(x, (0, k_up - k))
    if (k_up, n_up) != (k, n):
        w = torch.nn.functional.pad(w, (0, n_up - n, 0, k_up - k))
    return x @ w


def launch(native: dict, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None, *,
           epilogue: str = "rmsnorm") -> torch.Tensor:
    """`epilogue(x @ w)`: the library GEMM, then the row pass; `out` ([M, N] in x's dtype, or [M]
    fp32) may be passed so callers can poison it."""
    meta, options = split_launch_config(native)
    m, n = x.shape[0], w.shape[1]
    if n > MAX_N:
        raise ValueError(f"the split formulation holds a whole row per program: N={n} is over {MAX_N}")
    keeps = EPILOGUES[epilogue][2]
    if out is None:
        out = torch.empty((m, n) if keeps else (m,), dtype=x.dtype if keeps else torch.float32, device=x.device)
    y = library_product(x, w)
    rows = int(meta["ROWS"])
    row_epilogue[(triton.cdiv(m, rows),)](
        y, out, m, n, y.stride(0), y.stride(1), out.stride(0), out.stride(1) if keeps else 0,
        EPILOGUE=CODES[epilogue], WRITE_ROWS=keeps, ROWS=rows, BLOCK_N=triton.next_power_of_2(n), **options)
    return out


def triton_space(shape: Shape, dtype: Any, kernel: str = "matmul-split") -> SearchSpace:
    """Rows per program and warps, with each thread's share of the [ROWS, N_pad] block capped."""
    n_pad = triton.next_power_of_2(shape[-1])
    if n_pad > MAX_N:
        raise ValueError(f"{kernel}: N={shape[-1]} is over the {MAX_N} columns a program holds whole")
    warps = next(w for w in WARPS if n_pad / (w * 32) <= MAX_VALUES_PER_THREAD // 2 or w == WARPS[-1])
    return declare_triton_space(
        kernel,
        meta={"ROWS": ROWS},
        num_warps=list(WARPS),
        num_stages=[1],
        default={"ROWS": 1, "num_warps": warps, "num_stages": 1},
        constraints=[ProductLimit(names=("ROWS",), per=("num_warps",), per_scale=32,
                                  limit=MAX_VALUES_PER_THREAD / n_pad)],
    )


def _launcher(epilogue: str) -> Callable[..., torch.Tensor]:
    def launch_epilogue(native: dict, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None
                        ) -> torch.Tensor:
        """One epilogue's launcher: what its registered Kernel calls."""
        return launch(native, x, w, out, epilogue=epilogue)

    launch_epilogue.__name__ = f"launch_{epilogue}"
    return launch_epilogue


for _epilogue in EPILOGUES:
    _name = f"matmul-split-{_epilogue}"
    register_epilogue_kernel(
        _launcher(_epilogue), _name, _epilogue,
        f"{_epilogue}(x @ w), x [M, K], w [K, N]: the library GEMM (torch.matmul) writes y, then a tuned Triton "
        f"row pass reads each row once and writes the epilogue",
        space=functools.partial(triton_space, kernel=_name),
        sources=(row_epilogue, library_product, launch, triton_space, _launcher))
