"""RMS norm written as a user would: a Helion kernel and what autotune needs to measure it.

    autotune tune examples/rms_norm.py:kernel --shape 4096x8192 --dtype float16 --strategy evolution

The shape is MxN: x is [M, N], weight is [N].  Nothing else is required: autotune checks every
config against this kernel's own body run eagerly in float64, unless a reference is given.
"""

import helion
import helion.language as hl
import torch

import autotune


@helion.kernel(static_shapes=True)
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for rows in hl.tile(m):
        values = x[rows, :].to(torch.float32)
        inverse_rms = torch.rsqrt(torch.mean(values * values, dim=-1, keepdim=True) + eps)
        out[rows, :] = (values * inverse_rms * weight[None, :].to(torch.float32)).to(out.dtype)
    return out


def inputs(shape, dtype, device):
    m, n = shape
    return torch.randn(m, n, dtype=dtype, device=device), torch.randn(n, dtype=dtype, device=device)


def torch_rms_norm(x, weight):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps=1e-6)


_compiled = {}


def compiled_rms_norm(x, weight):
    if "fn" not in _compiled:
        _compiled["fn"] = torch.compile(torch_rms_norm, dynamic=False)
    return _compiled["fn"](x, weight)


def bytes_moved(shape, dtype):
    m, n = shape
    return (2 * m * n + n) * torch.empty((), dtype=dtype).element_size()


kernel = autotune.Kernel(rms_norm, inputs=inputs, bytes_moved=bytes_moved,
                         baselines={"torch": torch_rms_norm, "torch.compile": compiled_rms_norm})
