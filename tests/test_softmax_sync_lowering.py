"""The two Triton softmaxes whose programs wait for each other compile for a Hopper GPU (sm_90)
on the CPU, and their waiting is lowered with the ordering it needs: each program's partials are
published by a release and read back after an acquire.  A GPU is
not needed to compile; only running them is GPU work (accuracy-gated by the evaluator)."""

from __future__ import annotations

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

COMMON = {"x_ptr": "*fp16", "out_ptr": "*fp16", "max_ptr": "*fp32", "sum_ptr": "*fp32", "sync_ptr": "*i32"}


def _ptx(kernel, signature: dict, constexprs: dict) -> str:
    source = ASTSource(fn=kernel, signature={**COMMON, **signature, **{k: "constexpr" for k in constexprs}},
                       constexprs=constexprs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    assert compiled.asm.get("cubin"), "no cubin for sm_90"
    return compiled.asm["ptx"]


def _ordering(ptx: str) -> tuple[bool, bool]:
    lines = [line.strip() for line in ptx.splitlines()]
    release = any(".release" in line and ("red." in line or "atom." in line) for line in lines)
    acquire = any(".acquire" in line and ("ld." in line or "atom." in line) for line in lines)
    return release, acquire


@pytest.mark.parametrize("name", ["softmax-lookback", "softmax-cooperative"])
def test_waiting_kernels_compile_for_sm90_with_release_and_acquire(name):
    if name == "softmax-lookback":
        from autotune.kernels.softmax_lookback import lookback_softmax as kernel
        signature = {"n_tiles": "i32", "n_cols": "i32", "x_row_stride": "i32", "out_row_stride": "i32",
                     "pieces_per_row": "i32", "lag": "i32"}
    else:
        from autotune.kernels.softmax_cooperative import cooperative_softmax as kernel
        signature = {"n_cols": "i32", "x_row_stride": "i32", "out_row_stride": "i32", "pieces_per_row": "i32"}
    ptx = _ptx(kernel, signature, {"CHUNK": 4096, "PIECES_POW2": 16})
    release, acquire = _ordering(ptx)
    assert release, "partials are published without a release"
    assert acquire, "the wait reads the counter without acquire"
