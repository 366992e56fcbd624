"""Helion softmax kernels: the one-row-tile form and the looped online (two-pass) form."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

from autotune.kernels import softmax_common as common
from autotune.kernels.registry import Kernel, register


@helion.kernel(static_shapes=True)
def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    """A tile of whole rows per program; Helion may still loop over the row (reduction_loops)."""
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


@helion.kernel(static_shapes=True)
def softmax_online(x: torch.Tensor) -> torch.Tensor:
    """Online softmax: one pass keeps a running max and a rescaled sum, a second pass writes."""
    m, n = x.size()
    out = torch.empty_like(x)
    block_m = hl.register_block_size(m)
    block_n = hl.register_block_size(n)
    for tile_m in hl.tile(m, block_size=block_m):
        running_max = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        running_sum = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block_n):
            values = x[tile_m, tile_n].to(torch.float32)
            new_max = torch.maximum(running_max, torch.amax(values, dim=1))
            rescale = torch.exp(running_max - new_max)
            running_sum = running_sum * rescale + torch.exp(values - new_max[:, None]).sum(dim=1)
            running_max = new_max
        for tile_n in hl.tile(n, block_size=block_n):
            values = x[tile_m, tile_n].to(torch.float32)
            out[tile_m, tile_n] = (torch.exp(values - running_max[:, None]) / running_sum[:, None]).to(out.dtype)
    return out


register(Kernel(
    softmax_rows,
    name="softmax",
    description="Helion softmax over the last axis, whole rows per tile: softmax(x[tile, :])",
    sources=(softmax_rows,),
    **common.SPEC_FIELDS,
))

register(Kernel(
    softmax_online,
    name="softmax-online",
    description="Helion online softmax, looped two-pass form (running max and rescaled sum, then a write pass)",
    sources=(softmax_online,),
    **common.SPEC_FIELDS,
))
