"""The persistent Triton softmax: its numbers under the Triton interpreter, its space, and its
lowering for a Hopper GPU (sm_90), compiled on the CPU."""

from __future__ import annotations

import pytest

from tests.conftest import assert_softmax_runs_match, run_report_script, valid_points

_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from tests.conftest import softmax_run

spec = get_kernel("softmax-persistent")
report = {}
# The interpreter stands in 4 program slots for the SMs: PER_SM 1 leaves each program 2-3
# rows of the 9, PER_SM 8 gives every row its own program.  CHUNK 64 cuts the rows into many
# tiles (the running max and sum are rescaled), CHUNK 4096 takes a row in one tile.  Rows of
# 1000 start in 16-byte phase, rows of 1001 and 257 each at another phase (head, body, tail and
# end all used), rows of 7 are a head and an end only.
for shape in ((9, 1000), (9, 1001), (9, 257), (4, 7)):
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        inputs = spec.make_inputs(shape, dtype, "cpu", 0)
        ref = spec.reference(inputs)
        for chunk, per_sm in ((64, 1), (256, 2), (4096, 8)):
            out = spec.triton_launch({"CHUNK": chunk, "PER_SM": per_sm, "num_warps": 4, "num_stages": 1}, *inputs)
            report[f"{shape[0]}x{shape[1]}/{str(dtype)[6:]}/{chunk}/{per_sm}"] = softmax_run(out, ref)
# The largest value at the end of a row, after tiles that set a much lower running max.
x = torch.zeros((2, 3000), dtype=torch.float32)
x[1, 2999] = 80.0
x[1, 0] = -80.0
out = spec.triton_launch({"CHUNK": 512, "PER_SM": 1, "num_warps": 4, "num_stages": 1}, x)
report["extremes"] = softmax_run(out, torch.softmax(x.double(), dim=-1))
# Rows of a wider tensor: out's rows are not in x's phase, so no aligned body.
x = (torch.randn(6, 3000) * 3)[:, 5:2505]
out = spec.triton_launch({"CHUNK": 256, "PER_SM": 1, "num_warps": 4, "num_stages": 1}, x)
report["slice"] = softmax_run(out, torch.softmax(x.double(), dim=-1))
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def interpreted():
    return run_report_script(_INTERPRETED, timeout=600, shared=True, TRITON_INTERPRET="1")


def test_persistent_softmax_matches_the_fp64_reference(interpreted):
    assert len(interpreted) == 4 * 3 * 3 + 2
    assert_softmax_runs_match(interpreted, {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-5})


def test_persistent_softmax_space_caps_registers_and_fits_short_rows():
    from autotune.kernels import get_kernel

    spec = get_kernel("softmax-persistent")
    space = spec.triton_space((1024, 50257), None)
    assert space.parameter("CHUNK").choices == (256, 512, 1024, 2048, 4096, 8192, 16384)
    points = valid_points(space)
    assert all(p["CHUNK"] / (32 * p["num_warps"]) <= 64 for p in points)
    assert {"CHUNK": 16384, "PER_SM": 2, "num_warps": 4, "num_stages": 1} not in points
    assert {"CHUNK": 16384, "PER_SM": 2, "num_warps": 8, "num_stages": 1} in points
    assert not space.violations(space.default)
    assert space.default["CHUNK"] == 8192
    short = spec.triton_space((32, 128), None)
    assert short.parameter("CHUNK").choices == (128,)
    assert short.default["CHUNK"] == 128


def test_persistent_softmax_launches_per_sm_programs_capped_by_rows(monkeypatch):
    torch = pytest.importorskip("torch")
    from autotune.kernels import softmax_persistent as module

    launched = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launched.append((grid, kwargs))

    monkeypatch.setattr(module, "persistent_softmax", Recorder())
    config = {"CHUNK": 1024, "PER_SM": 3, "num_warps": 8, "num_stages": 2}
    module.launch(config, torch.zeros((100, 5000)))
    module.launch(config, torch.zeros((5, 5000)))
    slots = module.CPU_PROGRAM_SLOTS
    assert [grid for grid, _ in launched] == [(3 * slots,), (5,)]
    assert launched[0][1] == {"CHUNK": 1024, "EDGE": 128, "ALIGN": 4, "num_warps": 8, "num_stages": 2}


def test_rows_are_loaded_in_16_byte_phase_only_when_x_and_out_share_it():
    torch = pytest.importorskip("torch")
    from autotune.kernels.softmax_persistent import row_alignment

    x = torch.zeros((4, 1001), dtype=torch.float16)
    assert row_alignment(x, torch.empty_like(x)) == 8
    assert row_alignment(x.float(), torch.empty_like(x.float())) == 4
    wide = torch.zeros((4, 1100), dtype=torch.float16)[:, :1001]
    assert row_alignment(wide, torch.empty_like(wide)) == 1  # out is dense: other row stride
    assert row_alignment(wide, torch.zeros((4, 1100), dtype=torch.float16)[:, :1001]) == 8
    shifted = torch.zeros(4 * 1001 + 1, dtype=torch.float16)[1:].view(4, 1001)
    assert row_alignment(shifted, torch.empty_like(shifted)) == 1  # starts off a 16-byte boundary


def _ptx_memory_ops(element: str, align: int) -> dict[str, int]:
    import re
    from collections import Counter

    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from autotune.kernels.softmax_persistent import persistent_softmax

    signature = {"x_ptr": element, "out_ptr": element, "n_rows": "i32", "n_cols": "i32", "x_row_stride": "i32",
                 "out_row_stride": "i32", "CHUNK": "constexpr", "EDGE": "constexpr", "ALIGN": "constexpr"}
    # what a launch specialises: both tensors start on a 16-byte boundary
    aligned_pointers = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    source = ASTSource(fn=persistent_softmax, signature=signature, attrs=aligned_pointers,
                       constexprs={"CHUNK": 8192, "EDGE": 1024, "ALIGN": align})
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 16, "num_stages": 2})
    assert compiled.asm.get("cubin"), "no cubin for sm_90"
    ptx = compiled.asm["ptx"]
    ops = Counter(re.findall(r"\b(ld\.global|st\.global)\S*?(\.v4)?\.b(?:16|32)\b", ptx))
    return {"divides": ptx.count("div."), "exp2": ptx.count("ex2.approx"),
            "evict_last": ptx.count("evict_last"), "evict_first": ptx.count("evict_first"),
            "vector_loads": ops[("ld.global", ".v4")], "vector_stores": ops[("st.global", ".v4")],
            "scalar_loads": ops[("ld.global", "")]}


@pytest.mark.parametrize("element", ["*fp16", "*bf16", "*fp32"])
def test_persistent_softmax_compiles_for_sm90_with_one_divide_per_row(element):
    ops = _ptx_memory_ops(element, 16 // {"*fp16": 2, "*bf16": 2, "*fp32": 4}[element])
    # exp as ex2 of a pre-scaled argument, and the normalisation as one reciprocal per row:
    # a divide per element would put the special-function units on the critical path.
    assert ops["exp2"] >= 2 * 8192 // (16 * 32)
    assert ops["divides"] == 1
    # pass 1 keeps x in L2 for pass 2, which streams it out
    assert ops["evict_last"] and ops["evict_first"]
    # the aligned body moves 16 bytes per load and store
    assert ops["vector_loads"] >= 2 and ops["vector_stores"] >= 1


def test_rows_out_of_phase_get_no_vector_loads():
    ops = _ptx_memory_ops("*fp16", 1)
    assert ops["vector_loads"] == 0 and ops["vector_stores"] == 0 and ops["scalar_loads"] > 0
