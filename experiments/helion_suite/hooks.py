"""The hooks the suite gives each example kernel: inputs for a problem shape, baselines, shape_of.

Why ours: Helion's examples build their inputs inside `main()`/`check_*()` with fixed sizes, and
the framework needs them for any shape (the shape's dimensions are `manifest.SuiteKernel.dims`).
Each kernel's `inputs` lives in one small function; baselines are the eager torch operation
(or, where torch has none, the PyTorch implementation the example itself ships) and the same
under `torch.compile`.  The accuracy reference is the framework's default, the kernel's own body
run eagerly in float64, except where that cannot run on every device (attention).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any, Callable

import torch
import torch.nn.functional as F

Shape = tuple[int, ...]


def _randn(shape: Any, dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.float32, device=device).to(dtype)


def _pair(shape: Shape, dtype: torch.dtype, device: str) -> tuple:
    return _randn(shape, dtype, device), _randn(shape, dtype, device)


def _rows_and_weight(shape: Shape, dtype: torch.dtype, device: str) -> tuple:
    return _randn(shape, dtype, device), _randn(shape[1], dtype, device)


def _log_probs(shape: Shape, dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.randn(shape, device=device).log_softmax(dim=-1).to(dtype)


def _inputs(name: str) -> Callable[[Shape, torch.dtype, str], tuple]:
    """inputs(shape, dtype, device) of one kernel, as the example's own checks build them."""
    def attention(shape, dtype, device):
        return tuple(_randn(shape, dtype, device) for _ in range(3))

    def cross_entropy(shape, dtype, device):
        tokens, vocab = shape
        return _randn(shape, dtype, device), torch.randint(0, vocab, (tokens,), device=device, dtype=torch.int64)

    def embedding(shape, dtype, device):
        tokens, vocab, dim = shape
        return torch.randint(0, vocab, (tokens,), device=device, dtype=torch.int32), _randn((vocab, dim), dtype, device)

    def jsd(shape, dtype, device):
        return _log_probs(shape, dtype, device), _log_probs(shape, dtype, device)

    def kl_div(shape, dtype, device):
        return _log_probs(shape, dtype, device), torch.randn(shape, device=device).softmax(dim=-1).to(dtype)

    def layer_norm(shape, dtype, device):
        x = (-2.3 + 0.5 * torch.randn(shape, device=device)).to(dtype)
        return x, [shape[1]], _randn(shape[1], dtype, device), _randn(shape[1], dtype, device)

    def rope(shape, dtype, device):
        batch, q_heads, k_heads, seq, head_dim = shape
        angles = torch.randn((batch, seq, head_dim), device=device)
        return (_randn((batch, q_heads, seq, head_dim), dtype, device),
                _randn((batch, k_heads, seq, head_dim), dtype, device),
                torch.cos(angles).to(dtype), torch.sin(angles).to(dtype))

    def welford(shape, dtype, device):
        weight, x = _rows_and_weight(shape, dtype, device)[::-1]
        return weight, _randn(shape[1], dtype, device), x

    table = {"attention": attention, "cross_entropy": cross_entropy, "embedding": embedding, "geglu": _pair,
             "jsd": jsd, "kl_div": kl_div, "layer_norm": layer_norm, "rms_norm": _rows_and_weight, "rope": rope,
             "softmax": lambda shape, dtype, device: (_randn(shape, dtype, device),), "swiglu": _pair,
             "welford": welford}
    return table[name]


def _torch_op(name: str, module: ModuleType) -> Callable[..., Any]:
    """The eager PyTorch computation of the same result (what a user would call instead)."""
    table: dict[str, Callable[..., Any]] = {
        "attention": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        "cross_entropy": lambda logits, labels: F.cross_entropy(logits, labels),
        "embedding": lambda x, weight: F.embedding(x, weight),
        "geglu": lambda a, b: F.gelu(a, approximate="tanh") * b,
        "jsd": lambda log_q, log_p: module.TorchJSDBaseline()(log_q, log_p),
        "kl_div": lambda y_pred, y_true: F.kl_div(y_pred, y_true, reduction="batchmean"),
        "layer_norm": lambda x, shape, w, b: F.layer_norm(x, shape, w, b, eps=1e-5),
        "rms_norm": lambda x, w: F.rms_norm(x, (x.shape[-1],), w, eps=1e-5),
        "rope": lambda q, k, cos, sin: module.rope_pytorch(q, k, cos, sin),
        "softmax": lambda x: F.softmax(x, dim=-1),
        "swiglu": lambda a, b: F.silu(a) * b,
        "welford": lambda w, b, x: F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5),
    }
    return table[name]


class Compiled:
    """`torch.compile(fn)`, compiled at its first call (not when the hooks are built: a CPU
    interpreter check never calls it)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self._compiled: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            self._compiled = torch.compile(self.fn)
        return self._compiled(*args)


def _attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, base-2 log-sum-exp of the scaled scores), what the kernel returns; in float64 with
    torch's matmuls, because its eager body's `torch.bmm(..., out_dtype)` has no CPU kernel."""
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1) / math.log(2.0)


_REFERENCE: dict[str, Callable[..., Any]] = {"attention": _attention_reference}

_SHAPE_OF: dict[str, Callable[..., Shape]] = {
    "embedding": lambda x, weight, *rest: (x.numel(), *weight.shape),
    "rope": lambda q, k, *rest: (q.shape[0], q.shape[1], k.shape[1], q.shape[2], q.shape[3]),
    "welford": lambda weight, bias, x, *rest: tuple(x.shape),
}


def hooks_for(name: str, module: ModuleType) -> dict[str, Any]:
    """The keyword arguments of `autotune.Kernel` for the suite kernel `name` of `module`."""
    op = _torch_op(name, module)
    hooks: dict[str, Any] = {"inputs": _inputs(name), "baselines": {"torch": op, "torch.compile": Compiled(op)}}
    if name in _SHAPE_OF:
        hooks["shape_of"] = _SHAPE_OF[name]
    if name in _REFERENCE:
        hooks["reference"] = _REFERENCE[name]
    return hooks
