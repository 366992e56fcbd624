"""The N-tiled Triton matmul + epilogue kernels: their numbers under the Triton interpreter, their
space, the formulation rule, and the formulations report regenerated from a fake recording.

bfloat16 is not run under the interpreter: its tl.dot multiplies bf16 tensors as the uint16 bit
patterns it stores them in (Triton 3.x), so every bf16 product there is garbage whatever the
kernel.  bf16 differs from fp16 only in the dtype of the stored tile and output."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import run_report_script, valid_points

EPILOGUES = ("rmsnorm", "layernorm", "softmax", "l2norm", "logsumexp", "sum", "max")

_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.evaluators.timing import relative_error, tolerance_for
from autotune.kernels import get_kernel
from autotune.kernels.matmul_tiled import tma_ready

SMALL = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 4, "COMBINE_ROWS": 4, "num_warps": 4, "num_stages": 1}
EVEN = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "COMBINE_ROWS": 1, "num_warps": 4, "num_stages": 1}
report = {}

def run(name, spec, config, x, w, dtype):
    ref = spec.reference((x.double(), w.double()))
    # out starts as NaN: an element the kernel never writes stays NaN
    out = torch.full(ref.shape, float("nan"), dtype=dtype if ref.dim() == 2 else torch.float32)
    got = spec.triton_launch(config, x, w, out)
    report[name] = {"rel": relative_error(got, ref), "tol": tolerance_for(dtype), "nan": bool(torch.isnan(got).any()),
                    "same": got is out, "shape": list(got.shape), "dtype": str(got.dtype)[6:]}

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
    return run_report_script(_INTERPRETED, timeout=600, TRITON_INTERPRET="1")


def test_every_epilogue_matches_the_fp64_reference_and_writes_every_element(interpreted):
    assert len(interpreted) == len(EPILOGUES) * 13 + 3
    assert sum("row-block" in name for name in interpreted) == len(EPILOGUES) * 2
    assert sum("/tma" in name for name in interpreted) == len(EPILOGUES) * 4
    for name, run in interpreted.items():
        assert not run["nan"], name  # every output element written (out started as NaN), none NaN
        assert run["rel"] <= run["tol"], (name, run)
        assert run["same"], name  # the given out is the output
        epilogue, dtype = name.split("/")[:2]
        rows_out = epilogue in ("rmsnorm", "layernorm", "softmax", "l2norm")
        assert run["dtype"] == (dtype if rows_out else "float32"), name
        assert len(run["shape"]) == (2 if rows_out else 1), name


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


# -- the formulation rule --------------------------------------------------------------------------
@pytest.mark.parametrize("epilogue, shape, dtype, formulation", [
    ("rmsnorm", (131072, 256, 512), "bfloat16", "resident"),
    ("sum", (131072, 256, 256), "bfloat16", "resident"),
    ("layernorm", (131072, 512, 512), "float32", "resident"),
    ("rmsnorm", (32768, 1024, 1536), "bfloat16", "tiled"),
    ("softmax", (16384, 768, 3072), "bfloat16", "tiled"),
    ("layernorm", (65536, 2048, 1024), "bfloat16", "tiled"),
    ("softmax", (131072, 512, 2048), "float32", "tiled"),
])
def test_rule_picks_resident_for_small_n_and_tiled_for_large_n(epilogue, shape, dtype, formulation):
    from heuristics.device import H100
    from heuristics.matmul_formulation import pick_formulation

    pick = pick_formulation(epilogue, *shape, dtype, H100)
    assert pick.formulation == formulation
    assert pick.why.startswith(formulation + ":") and "\n" not in pick.why and len(pick.why) > 40
    if formulation == "tiled":
        assert pick.kernel == f"matmul-tiled-{epilogue}" and "comfort budget" in pick.why
        assert not _space(dtype, shape).violations(pick.config)
    else:
        assert pick.kernel == f"matmul-{epilogue}" and {"block_sizes[0]", "block_sizes[1]"} <= set(pick.config)


def test_rule_goes_tiled_with_the_resident_rules_reason_when_it_declines():
    from heuristics.device import DeviceLimits
    from heuristics.matmul_formulation import pick_formulation

    tiny = DeviceLimits(name="tiny", smem_per_block=4096, sm_count=8, source="test")
    pick = pick_formulation("rmsnorm", 4096, 512, 256, "bfloat16", tiny)
    assert pick.formulation == "tiled" and "resident rule declines" in pick.why


def test_tiled_seed_is_a_valid_point_at_every_cell_of_the_experiment():
    from experiments.matmul_formulations import all_cells
    from heuristics.device import H100
    from heuristics.matmul_formulation import tiled_seed

    cells = all_cells()
    assert len([c for c in cells if c.source == "seed study"]) == 30
    assert len([c for c in cells if c.source == "larger N" and c.dims[2] >= 1024]) >= 6
    assert len([c for c in cells if c.source == "rule check"]) >= 6  # not fitted on: the rule's judges
    for cell in cells:
        seed = tiled_seed(*cell.dims, cell.dtype, H100)
        assert not _space(cell.dtype, cell.dims).violations(seed), cell.name
    small = tiled_seed(1024, 1024, 1024, "bfloat16", H100)  # 8 x 8 tiles of 128 on 132 SMs: halved
    assert small["BLOCK_M"] < 128


def test_the_seed_takes_two_launches_and_the_wide_tile_and_tma_only_where_the_fitted_rule_says():
    from heuristics.device import H100
    from heuristics.matmul_formulation import TMA_MIN_MACS, pick_formulation, tiled_seed

    # [M] epilogues: two launches like every other (the row-block form lost wherever it was seeded)
    lse = pick_formulation("logsumexp", 32768, 1024, 8192, "float16", H100)
    assert lse.config["ROW_BLOCK"] == 0 and "two launches" in lse.why
    assert lse.config["BLOCK_N"] == 128  # an [M] output: the wide tile is for [M, N] epilogues
    # 16-bit [M, N] epilogue, K >= 768, large: the 256-wide tile, tiles by TMA
    wide = pick_formulation("rmsnorm", 32768, 1024, 1536, "bfloat16", H100)
    assert (wide.config["BLOCK_N"], wide.config["TMA"], wide.config["ROW_BLOCK"]) == (256, 1, 0)
    assert "tiles by TMA" in wide.why and "128x256x64" in wide.why
    # the same at K = 512 keeps the 128-wide tile
    assert tiled_seed(131072, 512, 4096, "bfloat16", H100)["BLOCK_N"] == 128
    # fp32, and a 16-bit problem under TMA_MIN_MACS: pointer loads, though descriptors are offered
    fp32 = pick_formulation("sum", 8192, 4096, 1024, "float32", H100)
    assert fp32.config["TMA"] == 0 and "fp32, or too small" in fp32.why
    assert 2048 ** 3 < TMA_MIN_MACS and tiled_seed(2048, 2048, 2048, "bfloat16", H100)["TMA"] == 0
    # rows that are no 16-byte multiple: no descriptor is offered at all
    odd = pick_formulation("rmsnorm", 4096, 1024, 1004, "bfloat16", H100)  # rows of 2008 B
    assert odd.formulation == "tiled" and "TMA" not in odd.config and "rows not 16-byte multiples" in odd.why
    for pick, dtype, shape in ((lse, "float16", (32768, 1024, 8192)), (fp32, "float32", (8192, 4096, 1024)),
                               (wide, "bfloat16", (32768, 1024, 1536))):
        assert not _space(dtype, shape).violations(pick.config)


# -- the experiment: runner and report on a fake recording ------------------------------------------
# (epilogue, shape, dtype) -> fake times (ms) of each formulation and of the baselines
TIMES = {
    ("rmsnorm", "64x32x256", "bfloat16"): {"resident": 0.5, "tiled": 0.6, "compile": 0.8},
    ("softmax", "64x32x2048", "bfloat16"): {"resident": 2.0, "tiled": 0.5, "compile": 1.0},
    ("layernorm", "64x32x1024", "float32"): {"resident": 0.4, "tiled": 0.5, "compile": 0.45},
}


def _fake_tune(calls: list, db_times: dict):
    """Stands in for autotune.tune: one 'GPU' session answered by a fake evaluator."""
    def tune(kernel, *, shape, dtype, db, configs, seed_from, **_):
        from autotune.cache import Cache
        from autotune.evaluators.fake import FakeEvaluator
        from autotune.kernels import get_kernel, parse_dtype, parse_shape
        from autotune.session import Session, SessionSettings
        from autotune.strategies import get_strategy
        from autotune.task import bind_live

        formulation = "tiled" if kernel.startswith("matmul-tiled-") else "resident"
        epilogue = kernel.removeprefix("matmul-tiled-").removeprefix("matmul-")
        times = db_times[epilogue, shape, dtype]
        spec = get_kernel(kernel)
        task = bind_live(spec, parse_shape(shape, 3), parse_dtype(dtype), "cpu")
        fake = FakeEvaluator(lambda p: times[formulation], baselines={"torch": 9.0, "torch.compile": times["compile"]})
        journal = Cache.open(db, create=True)
        try:
            outcome = Session(task, fake, get_strategy("random")(task.space, seed=0),
                              SessionSettings(strategy="random", seed=0, budget=2, mode="gpu"), journal).run()
        finally:
            journal.close()
        calls.append((kernel, list(configs), seed_from))
        return SimpleNamespace(session_id=outcome.session_id, best_ms=times[formulation], exit_reason="budget")
    return tune


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from experiments import matmul_formulations as mf

    db = tmp_path_factory.mktemp("formulations") / "f.db"
    cells = [mf.Cell(e, s, d, "fixture") for e, s, d in TIMES]
    args = SimpleNamespace(db=db, shipped=None, seconds=1.0, strategy="random", seed=0, compile_timeout=60.0,
                           resident="missing")
    calls: list = []
    tune = _fake_tune(calls, TIMES)
    mf.tune_cell(cells[0], SimpleNamespace(**{**vars(args), "resident": "never"}), tune, say=lambda _: None)
    first = [mf.tune_cell(cell, args, tune, say=lambda _: None) for cell in cells]
    again = [mf.tune_cell(cell, args, tune, say=lambda _: None) for cell in cells]
    return SimpleNamespace(db=db, cells=cells, calls=calls, first=first, again=again, mf=mf)


def test_runner_seeds_the_tiled_session_and_skips_what_is_recorded(recorded):
    from heuristics.device import current_device
    from heuristics.matmul_formulation import tiled_seed

    kernels = [kernel for kernel, _, _ in recorded.calls]
    assert kernels == ["matmul-tiled-rmsnorm", "matmul-rmsnorm", "matmul-tiled-softmax", "matmul-softmax",
                       "matmul-tiled-layernorm", "matmul-layernorm"]
    assert recorded.first[0]["tiled"] == "recorded" and isinstance(recorded.first[0]["resident"], dict)
    assert all(o["tiled"] == "recorded" and o["resident"] == "recorded" for o in recorded.again)
    kernel, configs, seed_from = recorded.calls[0]
    assert configs == [tiled_seed(64, 32, 256, "bfloat16", current_device())] and seed_from == "default"
    assert recorded.calls[1][1:] == ([], "default,heuristic")


def test_report_reads_best_times_baselines_and_judges_the_pick(recorded, tmp_path):
    from heuristics.device import H100

    data = recorded.mf.report(recorded.db, None, tmp_path, cells=recorded.cells, device=H100)
    rows = {r["cell"]: r for r in data["cells"]}
    small, wide, fp32 = (rows[c.name] for c in recorded.cells)
    assert (small["pick"], small["resident_ms"], small["tiled_ms"], small["best"]) == ("resident", 0.5, 0.6, "resident")
    assert small["pick_within_5pct"] is True and small["compile_ms"] == 0.8
    assert wide["pick"] == "tiled" and wide["pick_within_5pct"] is True
    assert wide["tiled_speedup_vs_compile"] == pytest.approx(2.0) and wide["speedup_vs_compile"] == pytest.approx(2.0)
    assert fp32["pick"] == "tiled" and fp32["pick_within_5pct"] is False  # 0.5 against the resident's 0.4
    assert data["summary"] == {**data["summary"], "cells": 3, "with_both": 3, "pick_within_5pct": 2,
                               "tiled_beats_compile": 2}  # rmsnorm and softmax
    assert json.loads((tmp_path / "matmul_formulations.json").read_text())["summary"] == data["summary"]
    text = (tmp_path / "matmul_formulations.md").read_text()
    assert ("| softmax 64x32x2048 bfloat16 | fixture | tiled | 2.0000 | 0.5000 | - | 1.0000 | 2.00x | 2.00x | yes |"
            in text)
    assert "**no**" in text and "comfort budget" in text


def test_cells_filter_and_a_report_without_sessions(tmp_path):
    from experiments import matmul_formulations as mf

    assert [c.name for c in mf.select(mf.all_cells(), "32768x1024x1536")] == ["rmsnorm 32768x1024x1536 bfloat16"]
    assert len(mf.select(mf.all_cells(), None)) == len(mf.all_cells())
    from autotune.cache import Cache

    Cache.open(tmp_path / "empty.db", create=True).close()
    data = mf.report(tmp_path / "empty.db", None, tmp_path / "out", cells=mf.select(mf.all_cells(), "sum"))
    assert all(r["tiled_ms"] is None and r["pick_within_5pct"] is None for r in data["cells"])
    assert (tmp_path / "out" / "matmul_formulations.md").exists()


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


# -- the report counts only sessions of the kernel's current source ---------------------------------
def _record_at_source(db, kernel: str, cell, ms: float, source: str | None, baselines: dict | None = None) -> int:
    """One fake 'GPU' session of `kernel` at the cell, every config timed `ms`; its space records
    `source` as the kernel's source hash (None: the current one), as a session before a change would."""
    import dataclasses

    from autotune.cache import Cache
    from autotune.evaluators.fake import FakeEvaluator
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.session import Session, SessionSettings
    from autotune.strategies import get_strategy
    from autotune.task import bind_live

    task = bind_live(get_kernel(kernel), parse_shape(cell.shape, 3), parse_dtype(cell.dtype), "cpu")
    if source is not None:
        task = dataclasses.replace(task, identity=dataclasses.replace(task.identity, source_hash=source))
    journal = Cache.open(db, create=True)
    try:
        return Session(task, FakeEvaluator(lambda p: ms, baselines=baselines),
                       get_strategy("random")(task.space, seed=0),
                       SessionSettings(strategy="random", seed=0, budget=2, mode="gpu"), journal).run().session_id
    finally:
        journal.close()


def test_report_keeps_sessions_of_an_older_tiled_source_out_of_the_comparison(tmp_path):
    """The older source's session is the faster one: without the filter it would be the tiled time."""
    from autotune.cache import Cache
    from experiments import matmul_formulations as mf
    from heuristics.device import H100

    db = tmp_path / "f.db"
    cell = mf.Cell("rmsnorm", "64x32x256", "bfloat16", "fixture")
    kernel = cell.kernel("tiled")
    assert mf.current_source(kernel) != "0" * 24
    older = _record_at_source(db, kernel, cell, 0.3, "0" * 24, baselines={"torch.compile": 0.9})
    current = _record_at_source(db, kernel, cell, 0.6, None)  # no baselines: torch.compile from the older one
    cache = Cache.open(db)
    try:
        spaces = {s["id"]: cache.get_space(s["space_fingerprint"]).source_hash for s in cache.sessions()}
    finally:
        cache.close()
    assert spaces == {older: "0" * 24, current: mf.current_source(kernel)}
    data = mf.report(db, None, tmp_path / "out", cells=[cell], device=H100)
    (row,) = data["cells"]
    assert (row["tiled_ms"], row["tiled_sessions"]) == (0.6, [current])
    assert (row["tiled_older_ms"], row["tiled_older_sessions"]) == (0.3, [older])
    assert row["tiled_config"] is not None and row["resident_older_ms"] is None and row["resident_older_sessions"] == []
    assert row["compile_ms"] == 0.9 and row["tiled_speedup_vs_compile"] == pytest.approx(0.9 / 0.6)
    assert data["summary"] == {**data["summary"], "with_tiled": 1, "tiled_older_cells": 1, "tiled_beats_compile": 1}
    text = (tmp_path / "out" / "matmul_formulations.md").read_text()
    assert "| tiled ms | tiled ms (older source) |" in text and "current source" in text
    assert "| rmsnorm 64x32x256 bfloat16 | fixture | resident | - | 0.6000 | 0.3000 | 0.9000 |" in text


def test_runner_measures_again_a_cell_recorded_only_with_an_older_source(tmp_path):
    from autotune.cache import Cache
    from experiments import matmul_formulations as mf

    db = tmp_path / "f.db"
    cell = mf.Cell("rmsnorm", "64x32x256", "bfloat16", "fixture")
    _record_at_source(db, cell.kernel("tiled"), cell, 0.3, "0" * 24)
    cache = Cache.open(db)
    try:
        assert not mf.is_recorded(cache, cell, "tiled")
    finally:
        cache.close()
    _record_at_source(db, cell.kernel("tiled"), cell, 0.6, None)
    cache = Cache.open(db)
    try:
        assert mf.is_recorded(cache, cell, "tiled")
    finally:
        cache.close()


def test_report_times_the_seed_each_session_was_given_against_the_tiled_best(tmp_path):
    """The seed's time is read for the config the session recorded as its given seed (not the
    rule's seed of today), and judged against the best over every current session."""
    from autotune.cache import Cache
    from autotune.evaluators.fake import FakeEvaluator
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.session import Session, SessionSettings
    from autotune.strategies import get_strategy
    from autotune.task import bind_live
    from experiments import matmul_formulations as mf
    from heuristics.device import H100

    cell = mf.Cell("rmsnorm", "64x32x256", "bfloat16", "fixture")
    task = bind_live(get_kernel(cell.kernel("tiled")), parse_shape(cell.shape, 3), parse_dtype(cell.dtype), "cpu")
    given = {**task.space.default, "GROUP_M": 16, "COMBINE_ROWS": 1}  # not what the rule seeds here
    assert task.space.violations(given) == []
    cost = lambda p: 1.0 if dict(p) == given else 0.5 + 0.01 * p["BLOCK_K"] / 16  # noqa: E731
    db = tmp_path / "f.db"
    journal = Cache.open(db, create=True)
    try:
        Session(task, FakeEvaluator(cost), get_strategy("random")(task.space, seed=0),
                SessionSettings(strategy="random", seed=0, budget=6, mode="gpu"), journal,
                seeds=[("user", given)], options={"user_configs": [given]}).run()
    finally:
        journal.close()
    (row,) = mf.report(db, None, tmp_path / "out", cells=[cell], device=H100)["cells"]
    assert row["seed"] == given and row["seed_ms"] == 1.0
    assert row["tiled_ms"] < 1.0 / 1.05 and row["seed_within_5pct"] is False
    assert row["seed_is_the_rules_now"] is False
    text = (tmp_path / "out" / "matmul_formulations.md").read_text()
    assert "| 1.0000 | **no** (rule changed) |" in text
