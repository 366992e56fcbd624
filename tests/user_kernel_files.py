"""Kernel files written the way a user writes them, for the tests that load a user's kernel
from a file: `my_kernels.py` (Helion: `scale_rows` with its own inputs, a bare `double`, and a
plain function that is no kernel) and `my_triton.py` (a hand-written Triton `double`, with a
right and a wrong reference)."""

from __future__ import annotations

from pathlib import Path

HELION_FILE = '''
import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def scale_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for rows in hl.tile(m):
        out[rows, :] = (x[rows, :].to(torch.float32) * w[None, :].to(torch.float32)).to(out.dtype)
    return out


@helion.kernel(static_shapes=True)
def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * 2.0
    return out


def inputs(shape, dtype, device):
    m, n = shape
    return torch.randn(m, n, dtype=dtype, device=device), torch.randn(n, dtype=dtype, device=device)


def plain_function(x):
    return x


import autotune

kernel = autotune.Kernel(scale_rows, inputs=inputs)
'''

TRITON_FILE = '''
import torch
import triton
import triton.language as tl

import autotune
from search_spaces.triton_space import declare_triton_space


@triton.jit
def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


def launch(config, x):
    out = torch.empty_like(x)
    n = x.numel()
    _double[(triton.cdiv(n, config["BLOCK"]),)](x, out, n, BLOCK=config["BLOCK"], num_warps=config["num_warps"],
                                                  num_stages=config["num_stages"])
    return out


def space(shape, dtype):
    return declare_triton_space("double", meta={"BLOCK": [32, 64, 128]}, num_warps=[1, 2], num_stages=[1],
                                default={"BLOCK": 64, "num_warps": 1, "num_stages": 1})


def right(x):
    return x * 2


def wrong(x):
    return x * 3


double = autotune.Kernel(launch, name="double", space=space, reference=right, dtypes=("float32",))
double_wrong_reference = autotune.Kernel(launch, name="double", space=space, reference=wrong, dtypes=("float32",))
'''


def write_user_files(folder: Path) -> Path:
    """Write my_kernels.py and my_triton.py into `folder`; returns it."""
    (folder / "my_kernels.py").write_text(HELION_FILE)
    (folder / "my_triton.py").write_text(TRITON_FILE)
    return folder
