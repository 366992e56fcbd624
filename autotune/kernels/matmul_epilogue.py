"""Helion matmul + row-reduction epilogue kernels, `epilogue(x @ w)`, and a plain matmul.

x is [M, K], w is [K, N].  Each fused kernel keeps one [tile_m, N] fp32 accumulator per
program: N is `hl.specialize`d, so the whole output row is one tile (resident in
registers) and the epilogue reduces it without a second pass.  The [M, N] epilogues
(rms_norm, layernorm, softmax, l2_normalize) write in the input dtype; the [M] ones
(logsumexp, sum, max) write fp32.  Shapes are written MxKxN.

Products use IEEE fp32 dots (`dot_precision="ieee"`), as torch does by default, so float32
runs meet the float32 tolerance; fp16/bf16 dots are unaffected.

The plain `matmul` tiles M, N and K and has no reduction: with the row reductions (e.g.
`softmax`) it is the negative case for the composed matmul-with-epilogue fact.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import helion
import helion.language as hl
import torch

from autotune.kernels.registry import Inputs, Kernel, Shape, register

# The epilogues' epsilon (written as a literal inside the kernels, so it is compiled in).
EPS = 1e-6


# -- kernels -----------------------------------------------------------------------------
@helion.kernel(static_shapes=True, dot_precision="ieee")
def matmul_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = hl.specialize(w.size(1))
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        mean_square = torch.mean(acc * acc, dim=-1, keepdim=True)
        out[tile_m, :] = (acc * torch.rsqrt(mean_square + 1e-6)).to(out.dtype)
    return out


@helion.kernel(static_shapes=True, dot_precision="ieee")
def matmul_layernorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = hl.specialize(w.size(1))
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        centred = acc - torch.mean(acc, dim=-1, keepdim=True)
        variance = torch.mean(centred * centred, dim=-1, keepdim=True)
        out[tile_m, :] = (centred * torch.rsqrt(variance + 1e-6)).to(out.dtype)
    return out


@helion.kernel(static_shapes=True, dot_precision="ieee")
def matmul_softmax(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = hl.specialize(w.size(1))
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        shifted = torch.exp(acc - torch.amax(acc, dim=-1, keepdim=True))
        out[tile_m, :] = (shifted / torch.sum(shifted, dim=-1, keepdim=True)).to(out.dtype)
    return out


@helion.kernel(static_shapes=True, dot_precision="ieee")
def matmul_l2norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = hl.specialize(w.size(1))
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        norm = torch.sqrt(torch.sum(acc * acc, dim=-1, keepdim=True))
        out[tile_m, :] = (acc / torch.clamp(norm, min=1e-6)).to(out.dtype)
    return out


@helion.kernel(static_shapes=True, dot_precision="ieee")
def matmul_logsumexp(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = hl.specialize(w.size(1))
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        row_max = torch.amax(acc, dim=-1)
        out[tile_m] = row_max + torch.log(torch.sum(torch.exp(acc - row_max[:, None]), dim=-1))
    return out


@helion.kernel(static_shapes=True, dot_precision="ieee")
def matmul_sum(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = hl.specialize(w.size(1))
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        out[tile_m] = torch.sum(acc, dim=-1)
    return out


@helion.kernel(static_shapes=True, dot_precision="ieee")
def matmul_max(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = hl.specialize(w.size(1))
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        out[tile_m] = torch.amax(acc, dim=-1)
    return out


@helion.kernel(static_shapes=True, dot_precision="ieee")
def matmul_plain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


# -- epilogues in torch (reference and baselines) -------------------------------------------
def _rms_norm(y: torch.Tensor) -> torch.Tensor:
    return y * torch.rsqrt(torch.mean(y * y, dim=-1, keepdim=True) + EPS)


def _layer_norm(y: torch.Tensor) -> torch.Tensor:
    centred = y - torch.mean(y, dim=-1, keepdim=True)
    return centred * torch.rsqrt(torch.mean(centred * centred, dim=-1, keepdim=True) + EPS)


def _l2_normalize(y: torch.Tensor) -> torch.Tensor:
    return y / torch.clamp(torch.linalg.vector_norm(y, dim=-1, keepdim=True), min=EPS)


Epilogue = Callable[[torch.Tensor], torch.Tensor]
# name -> (kernel, torch epilogue on the fp32/fp64 product, output keeps the input dtype)
EPILOGUES: dict[str, tuple[object, Epilogue, bool]] = {
    "rmsnorm": (matmul_rmsnorm, _rms_norm, True),
    "layernorm": (matmul_layernorm, _layer_norm, True),
    "softmax": (matmul_softmax, lambda y: torch.softmax(y, dim=-1), True),
    "l2norm": (matmul_l2norm, _l2_normalize, True),
    "logsumexp": (matmul_logsumexp, lambda y: torch.logsumexp(y, dim=-1), False),
    "sum": (matmul_sum, lambda y: torch.sum(y, dim=-1), False),
    "max": (matmul_max, lambda y: torch.amax(y, dim=-1), False),
}


# -- inputs and accounting ----------------------------------------------------------------------
def make_inputs(shape: Shape, dtype: torch.dtype, device: str, seed: int) -> Inputs:
    """x ~ N(0, 1) and w ~ N(0, 1/K), so x @ w has unit scale whatever K is."""
    m, k, n = shape
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((m, k), generator=generator, dtype=torch.float32, device=device)
    w = torch.randn((k, n), generator=generator, dtype=torch.float32, device=device) / math.sqrt(k)
    return x.to(dtype), w.to(dtype)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _bytes_moved(keeps_dtype: bool) -> Callable[[Shape, torch.dtype], int]:
    def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
        """x and w read once, the output written once (fp32 [M] or [M, N] in the input dtype)."""
        m, k, n = shape
        out = m * n * _itemsize(dtype) if keeps_dtype else m * 4
        return (m * k + k * n) * _itemsize(dtype) + out
    return bytes_moved


def _flops(epilogue_ops_per_element: int) -> Callable[[Shape], int]:
    def flops(shape: Shape) -> int:
        """2*M*K*N for the product plus a few operations per output element for the epilogue."""
        m, k, n = shape
        return 2 * m * k * n + epilogue_ops_per_element * m * n
    return flops


_compiled: dict[str, Callable] = {}


def _eager(epilogue: Epilogue, keeps_dtype: bool) -> Callable[..., torch.Tensor]:
    def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """The product in the input dtype (cuBLAS, fp32 accumulate), the epilogue in fp32."""
        y = epilogue((x @ w).float())
        return y.to(x.dtype) if keeps_dtype else y
    return run


def _compiled_baseline(name: str, eager: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """torch.compile of the eager baseline (compiled on the first call, once per kernel)."""
        if name not in _compiled:
            _compiled[name] = torch.compile(eager, dynamic=False)
        return _compiled[name](x, w)
    return run


def _reference(epilogue: Epilogue) -> Callable[..., torch.Tensor]:
    def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """The product and the epilogue in fp64 (or the inputs' own dtype if wider)."""
        return epilogue(x.double() @ w.double())
    return reference


def register_epilogue_kernel(fn: Any, name: str, epilogue: str, what: str, *, sources: tuple,
                             space: Callable[..., Any] | None = None) -> None:
    """Register one kernel of the family (resident, tiled or split) computing `epilogue(x @ w)`:
    the family's inputs, fp64 reference, accounting and baselines, whatever its formulation.  The
    baselines keep the resident kernel's names, so each epilogue compiles one torch.compile per process."""
    _, torch_epilogue, keeps_dtype = EPILOGUES[epilogue]
    eager = _eager(torch_epilogue, keeps_dtype)
    output = "[M, N] in the input dtype" if keeps_dtype else "[M] in float32"
    register(Kernel(
        fn,
        name=name,
        description=f"{what}; output {output}",
        space=space,
        rank=3,
        inputs=make_inputs,
        reference=_reference(torch_epilogue),
        baselines={"torch": eager, "torch.compile": _compiled_baseline(f"matmul-{epilogue}", eager)},
        bytes_moved=_bytes_moved(keeps_dtype),
        flops=_flops(5),
        sources=sources,
    ))


def _matmul_eager(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x @ w


for _name, (_kernel, _, _) in EPILOGUES.items():
    register_epilogue_kernel(_kernel, f"matmul-{_name}", _name,
                             f"Helion {_name}(x @ w), x [M, K], w [K, N], N resident (specialised)", sources=(_kernel,))

register(Kernel(
    matmul_plain,
    name="matmul",
    description="Helion matmul x @ w, x [M, K], w [K, N], M, N and K tiled",
    rank=3,
    inputs=make_inputs,
    reference=lambda x, w: x.double() @ w.double(),
    baselines={"torch": _matmul_eager, "torch.compile": _compiled_baseline("matmul", _matmul_eager)},
    bytes_moved=_bytes_moved(True),
    flops=_flops(0),
    sources=(matmul_plain,),
))
