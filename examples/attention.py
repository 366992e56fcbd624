"""Attention forward (non-causal, softmax(q k^T / sqrt(D)) v), a flash-style Helion kernel.

    autotune tune examples/attention.py:kernel --shape 16x96x4096x64 --dtype float16

The shape is BxHxSxD: q, k and v are [B, H, S, D].  Each program keeps a tile of queries and
walks the keys in tiles with a running max and sum (the scores never leave the chip).  The
baseline is PyTorch's scaled_dot_product_attention; the reference is the same product in
float64, a few heads at a time (the full score matrix in float64 would not fit).
"""

import math

import helion
import helion.language as hl
import torch

import autotune

LOG2_E = 1.4426950408889634


@helion.kernel(static_shapes=True)
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    batch, heads, length, dim = q.size()
    dim = hl.specialize(dim)
    queries = q.reshape([batch * heads, length, dim])
    keys_t = k.reshape([batch * heads, length, dim]).transpose(1, 2)
    values = v.reshape([batch * heads, length, dim])
    out = torch.empty_like(queries)
    scale = LOG2_E / math.sqrt(dim)  # scores are taken in base 2
    for heads_tile, rows in hl.tile([batch * heads, length]):
        running_max = hl.full([heads_tile, rows], float("-inf"), dtype=torch.float32)
        running_sum = hl.zeros([heads_tile, rows], dtype=torch.float32)
        acc = hl.zeros([heads_tile, rows, dim], dtype=torch.float32)
        query = queries[heads_tile, rows, :]
        for cols in hl.tile(length):
            scores = torch.bmm(query, keys_t[heads_tile, :, cols]) * scale
            new_max = torch.maximum(running_max, torch.amax(scores, -1))
            weights = torch.exp2(scores - new_max[:, :, None])
            rescale = torch.exp2(running_max - new_max)
            running_sum = running_sum * rescale + torch.sum(weights, -1)
            acc = torch.baddbmm(acc * rescale[:, :, None], weights.to(values.dtype), values[heads_tile, cols, :])
            running_max = new_max
        out[heads_tile, rows, :] = (acc / running_sum[:, :, None]).to(out.dtype)
    return out.view(q.size())


def inputs(shape, dtype, device):
    return tuple(torch.randn(shape, dtype=dtype, device=device) for _ in range(3))


def reference(q, k, v, heads_per_step=8):
    """softmax(q k^T / sqrt(D)) v in float64, a few heads at a time."""
    b, h, s, d = q.shape
    out = torch.empty_like(q)
    q, k, v = (t.reshape(b * h, s, d) for t in (q, k, v))
    flat = out.view(b * h, s, d)
    for start in range(0, b * h, heads_per_step):
        part = slice(start, start + heads_per_step)
        scores = torch.bmm(q[part], k[part].transpose(1, 2)) / math.sqrt(d)
        flat[part] = torch.bmm(torch.softmax(scores, dim=-1), v[part])
    return out


def sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def flops(shape, dtype):
    b, h, s, d = shape
    return 4 * b * h * s * s * d  # two matrix products of 2*s*s*d each


kernel = autotune.Kernel(attention, inputs=inputs, reference=reference, baselines={"sdpa": sdpa}, flops=flops)
