"""The N-tiled Triton matmul + epilogue kernels: their numbers under the Triton interpreter, their
space, and their compiled code for an H100 (the formulation rule and its report:
test_matmul_formulations.py).

bfloat16 is not run under the interpreter: its tl.dot multiplies bf16 tensors as the uint16 bit
patterns it stores them in (Triton 3.x), so every bf16 product there is garbage whatever the
kernel.  bf16 differs from fp16 only in the dtype of the stored tile and output."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import assert_matmul_epilogue_runs_match, run_report_script, valid_points

EPILOGUES = ("rmsnorm", "layernorm", "softmax", "l2norm", "logsumexp", "sum", "max")

_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from tests.conftest import matmul_epilogue_run
from autotune.kernels.matmul_tiled import tma_ready

SMALL = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 4, "COMBINE_ROWS": 4, "num_warps": 4, "num_stages": 1}
EVEN = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "COMBINE_ROWS": 1, "num_warps": 4, "num_stages": 1}
report = {}

def run(name, spec, config, x, w, dtype):
    report[name] = matmul_epilogue_run(spec, config, x, w, dtype)

for epilogue in EPILOGUES:
    spec = get_kernel("matmul-tiled-" + epilogue)
    for dtype in (torch.float32, torch.float16):
        # 37x45x70: three N tiles (the last partial), K not a multiple of BLOCK_K, M not of BLOCK_M
        # 64x32x200: four N tiles, K and M multiples of the blocks (the unmasked K loop)
        for shape, config in (((37, 45, 70), SMALL), ((64, 32, 200), EVEN)):
            x, w = spec.make_inputs(shape, dtype, "cpu", 0)
            run(f"{epilogue}/{str(dtype)[6:]}/{shape[0]}x{shape[1]}x{shape[2]}", spec, config, x, w, dtype)
        # one launch per row block: three row blocks (the last partial), COMBINE_ROWS over BLOCK_M
        x, w = spec.make_inputs((37, 45, 70), dtype, "cpu", 5)
        run(f"{epilogue}/{str(dtype)[6:]}/row-block", spec, {**SMALL, "ROW_BLOCK": 1, "COMBINE_ROWS": 32}, x, w, dtype)
        # tiles through tensor descriptors (rows of 16-byte multiples): M, N and K each end mid-tile
        x, w = spec.make_inputs((37, 40, 88), dtype, "cpu", 6)
        assert tma_ready(x, w)
        for form in (0, 1):
            run(f"{epilogue}/{str(dtype)[6:]}/tma{form}", spec, {**SMALL, "TMA": 1, "ROW_BLOCK": form}, x, w, dtype)
    # a sliced x (row stride 60, not K) and a transposed w (column-major), in both forms; with
    # TMA asked for, the descriptors cannot describe them and pointer loads serve
    x, w = spec.make_inputs((37, 60, 70), torch.float16, "cpu", 1)
    x, w = x[:, 5:50], w.t().contiguous().t()[5:50]
    assert not tma_ready(x, w)
    for form in (0, 1):
        run(f"{epilogue}/float16/strided{form}", spec, {**SMALL, "ROW_BLOCK": form, "TMA": form}, x, w, torch.float16)
    # the declared default (128x128x64 tiles) on a problem smaller than one tile
    x, w = spec.make_inputs((37, 45, 70), torch.float16, "cpu", 2)
    default = spec.triton_space((37, 45, 70), torch.float16).default
    run(f"{epilogue}/float16/default", spec, default, x, w, torch.float16)
# Rows whose mean (100) dwarfs their spread: layernorm must centre before rounding to fp16.
spec = get_kernel("matmul-tiled-layernorm")
x, w = spec.make_inputs((37, 45, 200), torch.float16, "cpu", 3)
x[:, 0], w[0, :] = 1.0, 100.0
run("layernorm/float16/offset", spec, SMALL, x, w, torch.float16)
# Logits of spread 20 over several tiles: each tile's max differs from the row's by far.
for epilogue in ("softmax", "logsumexp"):
    spec = get_kernel("matmul-tiled-" + epilogue)
    x, w = spec.make_inputs((37, 45, 200), torch.float32, "cpu", 4)
    run(f"{epilogue}/float32/spread", spec, SMALL, x * 20.0, w, torch.float32)
print("REPORT " + json.dumps(report))
""".replace("EPILOGUES", repr(EPILOGUES), 1)


@pytest.fixture(scope="module")
def interpreted():
    return run_report_script(_INTERPRETED, timeout=600, shared=True, TRITON_INTERPRET="1")


def test_every_epilogue_matches_the_fp64_reference_and_writes_every_element(interpreted):
    assert len(interpreted) == len(EPILOGUES) * 13 + 3
    assert sum("row-block" in name for name in interpreted) == len(EPILOGUES) * 2
    assert sum("/tma" in name for name in interpreted) == len(EPILOGUES) * 4
    assert_matmul_epilogue_runs_match(interpreted)


def test_float32_is_ieee_accurate_and_float16_rounds_once(interpreted):
    """IEEE fp32 products: far inside fp32's 1e-4; fp16: about one rounding of the output."""
    for name, run in interpreted.items():
        if "/float32/" in name and "spread" not in name:
            assert run["rel"] < 1e-5, (name, run)
        if name.endswith("/offset"):
            assert run["rel"] < 1e-3, run  # an uncentred fp16 tile would be off by about 5e-2


def _space(dtype_name: str, shape=(4096, 1024, 4096)):
    import torch

    from autotune.kernels import get_kernel

    return get_kernel("matmul-tiled-rmsnorm").triton_space(shape, getattr(torch, dtype_name))


@pytest.mark.parametrize("dtype_name, itemsize", [("float16", 2), ("bfloat16", 2), ("float32", 4)])
def test_space_default_is_valid_and_constraints_keep_tiles_within_budget(dtype_name, itemsize):
    from autotune.kernels.matmul_tiled import MAX_ACC_PER_THREAD, SMEM_BUDGET_BYTES

    space = _space(dtype_name)
    assert not space.violations(space.default)
    assert space.default["BLOCK_K"] * space.default["num_stages"] > 0 and space.family == "triton"
    # GROUP_M, ROW_BLOCK and TMA enter no constraint: held at their defaults, the product stays small
    points = valid_points(space, {name: space.default[name] for name in ("GROUP_M", "ROW_BLOCK", "TMA")})
    assert points and len(points) < space.cardinality()
    for p in points:
        staged = (p["BLOCK_M"] + p["BLOCK_N"]) * p["BLOCK_K"] * itemsize * p["num_stages"]
        assert staged <= SMEM_BUDGET_BYTES, p
        assert p["BLOCK_M"] * p["BLOCK_N"] / (32 * p["num_warps"]) <= MAX_ACC_PER_THREAD, p
    over = {**space.default, "BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 4}
    assert space.violations(over)
    if itemsize == 2:  # the usual Hopper tiles stay in
        assert not space.violations({**space.default, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64,
                                     "num_warps": 8, "num_stages": 3})
        assert not space.violations({**space.default, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64,
                                     "num_warps": 8, "num_stages": 4})


def test_space_caps_the_partials_pass_two_holds_at_large_n():
    wide = _space("float16", (4096, 1024, 8192))  # 8192 / 16 = 512 tiles of partials per row
    assert wide.violations({**wide.default, "BLOCK_N": 16, "COMBINE_ROWS": 32})
    assert not wide.violations({**wide.default, "BLOCK_N": 128, "COMBINE_ROWS": 32})


def test_launch_sizes_both_grids_and_passes_strides(monkeypatch):
    import torch

    from autotune.kernels import matmul_tiled as module

    launched = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *args, **kwargs: launched.append((self.name, grid, args, kwargs))

    monkeypatch.setattr(module, "tile_product", Recorder("pass 1"))
    monkeypatch.setattr(module, "combine_rows", Recorder("pass 2"))
    x = torch.zeros((300, 96))
    w = torch.zeros((200, 96)).t()  # [96, 200], column-major
    config = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "COMBINE_ROWS": 16,
              "num_warps": 4, "num_stages": 2}
    out = module.launch(config, x, w, epilogue="softmax")
    (_, grid1, args1, kw1), (_, grid2, args2, kw2) = launched
    assert out.shape == (300, 200) and out.dtype == torch.float32
    assert grid1 == (5 * 4,) and grid2 == (19,)  # ceil(300/64) * ceil(200/64); ceil(300/16)
    assert args1[2:4] == (None, None)  # no tensor descriptors: the config has no TMA (and w is column-major)
    assert args1[9:13] == (96, 1, 1, 96)  # x and w strides
    assert kw1["EVEN_K"] and kw1["WRITE_Y"] and kw1["num_warps"] == 4 and kw1["num_stages"] == 2
    assert kw2["TILES"] == 4 and kw2["BLOCK_N"] == 64 and kw2["ROWS"] == 16
    launched.clear()
    out = module.launch({**config, "BLOCK_K": 64}, x, w, epilogue="max")
    assert out.shape == (300,) and out.dtype == torch.float32
    assert not launched[0][3]["EVEN_K"] and not launched[0][3]["WRITE_Y"]


def _compile_sm90(form: str, epilogue: str, element: str, tma: bool) -> Any:
    """The default 16-bit tile of `form` ('tile_product' or 'row_block') compiled for an H100
    (sm_90) on the CPU, specialised as a launch at 16-byte-aligned pointers and strides is."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from autotune.kernels import matmul_tiled as module

    keeps = module.EPILOGUES[epilogue][2]
    d = module.DEFAULT_16BIT
    out, out_strides = ("y_ptr", ("stride_ym", "stride_yn")) if form == "tile_product" else \
        ("out_ptr", ("stride_om", "stride_on"))
    element_type = element.lstrip("*")
    descriptors = {"x_desc": f"tensordesc<{element_type}[{d['BLOCK_M']}, {d['BLOCK_K']}]>",
                   "w_desc": f"tensordesc<{element_type}[{d['BLOCK_K']}, {d['BLOCK_N']}]>"} if tma else {}
    signature = {"x_ptr": element, "w_ptr": element, **descriptors, out: element if keeps else "*fp32",
                 "part_ptr": "*fp32", **{name: "i32" for name in ("M", "N", "K", "stride_xm", "stride_xk", "stride_wk",
                                                                  "stride_wn", *out_strides, "n_tiles", "part_stride")}}
    constexprs = {"stride_xk": 1, "stride_wn": 1, out_strides[1]: 1 if keeps else 0, "EPILOGUE": module.CODES[epilogue],
                  "WRITE_Y": keeps, "EVEN_K": True, "W_ROWS_ALIGNED": True, "TMA": tma, "BLOCK_M": d["BLOCK_M"],
                  "BLOCK_N": d["BLOCK_N"], "BLOCK_K": d["BLOCK_K"],
                  **({"GROUP_M": d["GROUP_M"]} if form == "tile_product" else {"ROWS": d["COMBINE_ROWS"], "TILES": 16}),
                  **({} if tma else {"x_desc": None, "w_desc": None})}
    kernel = getattr(module, form)
    # in the kernel's parameter order: the divisibility attributes below are by position
    signature = {name: signature.get(name, "constexpr") for name in kernel.arg_names}
    aligned = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(signature)
               if name.endswith("_ptr") or name in ("M", "N", "K", "stride_xm", "stride_wk", out_strides[0])}
    source = ASTSource(fn=kernel, signature=signature, attrs=aligned, constexprs=constexprs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": d["num_warps"], "num_stages": d["num_stages"]})


@pytest.mark.parametrize("form, epilogue, element", [
    ("tile_product", "softmax", "*bf16"), ("tile_product", "layernorm", "*fp16"),
    ("tile_product", "logsumexp", "*bf16"), ("row_block", "softmax", "*bf16"), ("row_block", "logsumexp", "*bf16")])
@pytest.mark.parametrize("tma", [False, True])
def test_the_gemm_compiles_for_sm90_on_tensor_cores_with_asynchronous_operand_loads(form, epilogue, element, tma):
    """Both forms lower for an H100 to wgmma with their operand tiles pipelined (every stage of
    both in shared memory, within the device's limit) and fetched asynchronously: by cp.async,
    or with TMA by the tensor-memory accelerator; no operand element goes through a register
    load.  Without the alignment hint w's columns were loaded one 16-bit element at a time, and
    the kernel ran at a quarter of torch.compile's speed.  The row-block form adds its
    combining step after a barrier."""
    from autotune.kernels.matmul_tiled import DEFAULT_16BIT as d
    from heuristics.device import H100_SMEM_PER_BLOCK_BYTES

    compiled = _compile_sm90(form, epilogue, element, tma)
    ptx = compiled.asm["ptx"]
    assert compiled.asm.get("cubin") and "wgmma" in ptx
    staged = (d["BLOCK_M"] + d["BLOCK_N"]) * d["BLOCK_K"] * 2 * d["num_stages"]
    assert staged <= compiled.metadata.shared <= H100_SMEM_PER_BLOCK_BYTES
    assert ("cp.async.bulk.tensor" in ptx) == tma and (not tma) == ("cp.async.cg" in ptx or "cp.async.ca" in ptx)
    assert not [load for load in re.findall(r"ld\.global[.\w]*", ptx) if load.endswith("16")]
    if form == "row_block":
        assert "bar.sync" in ptx or "barrier.sync" in ptx


def test_w_columns_are_declared_consecutive_only_where_every_vector_is_inside_or_past_n():
    import torch

    from autotune.kernels.matmul_tiled import w_rows_aligned

    w = torch.zeros(64, 1536)
    assert w_rows_aligned(w)
    assert not w_rows_aligned(w[:, :1000])  # N not a multiple of 16: a vector could straddle N
    assert not w_rows_aligned(torch.zeros(1536, 64).t())  # columns not contiguous
