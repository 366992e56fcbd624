"""Layer norm with weight and bias, as a user would write it in Helion.

    autotune tune examples/layer_norm.py:kernel --shape 4096x8192 --dtype float16

The shape is MxN: x is [M, N], weight and bias are [N].
"""

import helion
import helion.language as hl
import torch

import autotune


@helion.kernel(static_shapes=True)
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for rows in hl.tile(m):
        values = x[rows, :].to(torch.float32)
        mean = torch.mean(values, dim=-1, keepdim=True)
        centred = values - mean
        variance = torch.mean(centred * centred, dim=-1, keepdim=True)
        normed = centred * torch.rsqrt(variance + eps)
        out[rows, :] = (normed * weight[None, :].to(torch.float32) + bias[None, :].to(torch.float32)).to(out.dtype)
    return out


def inputs(shape, dtype, device):
    m, n = shape
    return (torch.randn(m, n, dtype=dtype, device=device), torch.randn(n, dtype=dtype, device=device),
            torch.randn(n, dtype=dtype, device=device))


def torch_layer_norm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


_compiled = {}


def compiled_layer_norm(x, weight, bias):
    if "fn" not in _compiled:
        _compiled["fn"] = torch.compile(torch_layer_norm, dynamic=False)
    return _compiled["fn"](x, weight, bias)


def bytes_moved(shape, dtype):
    m, n = shape
    return (2 * m * n + 2 * n) * torch.empty((), dtype=dtype).element_size()


kernel = autotune.Kernel(layer_norm, inputs=inputs, bytes_moved=bytes_moved,
                         baselines={"torch": torch_layer_norm, "torch.compile": compiled_layer_norm})
