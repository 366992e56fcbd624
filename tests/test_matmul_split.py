"""The split matmul + epilogue kernels (library GEMM, then a Triton row pass): their numbers under
the Triton interpreter, their space, and the compile-only path that must not run the GEMM (the
rule that picks them: test_matmul_formulations.py).  The row pass has no tl.dot, so bfloat16
runs under the interpreter too."""

from __future__ import annotations

import pytest

from tests.conftest import assert_matmul_epilogue_runs_match, run_report_script, valid_points

EPILOGUES = ("rmsnorm", "layernorm", "softmax", "l2norm", "logsumexp", "sum", "max")

_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from tests.conftest import matmul_epilogue_run
report = {}

def run(name, spec, config, x, w, dtype):
    report[name] = matmul_epilogue_run(spec, config, x, w, dtype)

for epilogue in EPILOGUES:
    spec = get_kernel("matmul-split-" + epilogue)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        # 37 rows over programs of 4 (the last partial), N = 70 padded to 128; then one row a program
        for shape, config in (((37, 45, 70), {"ROWS": 4, "num_warps": 2, "num_stages": 1}),
                              ((64, 32, 200), {"ROWS": 1, "num_warps": 1, "num_stages": 1})):
            x, w = spec.make_inputs(shape, dtype, "cpu", 0)
            run(f"{epilogue}/{str(dtype)[6:]}/{shape[0]}x{shape[1]}x{shape[2]}", spec, config, x, w, dtype)
    # a sliced x (row stride 60, not K) and a transposed w (column-major)
    x, w = spec.make_inputs((37, 60, 70), torch.float16, "cpu", 1)
    x, w = x[:, 5:50], w.t().contiguous().t()[5:50]
    run(f"{epilogue}/float16/strided", spec, {"ROWS": 8, "num_warps": 4, "num_stages": 1}, x, w, torch.float16)
    # the declared default
    x, w = spec.make_inputs((37, 45, 70), torch.float16, "cpu", 2)
    run(f"{epilogue}/float16/default", spec, spec.triton_space((37, 45, 70), torch.float16).default, x, w,
        torch.float16)
# Rows whose mean (100) dwarfs their spread: layernorm centres in fp32 after one rounding of y.
spec = get_kernel("matmul-split-layernorm")
x, w = spec.make_inputs((37, 45, 200), torch.float32, "cpu", 3)
x[:, 0], w[0, :] = 1.0, 100.0
run("layernorm/float32/offset", spec, {"ROWS": 2, "num_warps": 2, "num_stages": 1}, x, w, torch.float32)
# Logits of spread 20: softmax and logsumexp subtract the row's max.
for epilogue in ("softmax", "logsumexp"):
    spec = get_kernel("matmul-split-" + epilogue)
    x, w = spec.make_inputs((37, 45, 200), torch.float32, "cpu", 4)
    run(f"{epilogue}/float32/spread", spec, {"ROWS": 2, "num_warps": 2, "num_stages": 1}, x * 20.0, w, torch.float32)
print("REPORT " + json.dumps(report))
""".replace("EPILOGUES", repr(EPILOGUES), 1)


@pytest.fixture(scope="module")
def interpreted():
    return run_report_script(_INTERPRETED, timeout=600, shared=True, TRITON_INTERPRET="1")


def test_every_epilogue_matches_the_fp64_reference_and_writes_every_element(interpreted):
    assert len(interpreted) == len(EPILOGUES) * 8 + 3
    assert_matmul_epilogue_runs_match(interpreted)
    for name in ("softmax/float32/spread", "logsumexp/float32/spread"):  # the row max subtracted first
        assert interpreted[name]["rel"] < 1e-5, interpreted[name]
    # y rounded to fp32 at |y| ~ 100 then centred: about 2^-24 * 100 of a unit spread, a fifth of fp32's tolerance
    assert interpreted["layernorm/float32/offset"]["rel"] < 2e-5


def _space(shape=(4096, 1024, 4096), dtype_name="bfloat16"):
    import torch

    from autotune.kernels import get_kernel

    return get_kernel("matmul-split-rmsnorm").triton_space(shape, getattr(torch, dtype_name))


@pytest.mark.parametrize("n", [70, 1024, 4096, 32768])
def test_space_keeps_every_threads_share_of_the_rows_under_the_cap(n):
    from autotune.kernels.matmul_split import MAX_VALUES_PER_THREAD

    space = _space((4096, 1024, n))
    assert not space.violations(space.default) and space.family == "triton"
    n_pad = 1 << (n - 1).bit_length()
    points = valid_points(space)
    assert points and len(points) < space.cardinality()
    for p in points:
        assert p["ROWS"] * n_pad / (32 * p["num_warps"]) <= MAX_VALUES_PER_THREAD, p
    assert max(p["ROWS"] for p in points) == (32 if n_pad <= 1024 else max(1, 32 * 16 * 64 // n_pad))


def test_a_row_wider_than_a_program_holds_is_refused_in_one_line():
    import torch

    from autotune.kernels.matmul_split import MAX_N, launch

    with pytest.raises(ValueError, match=f"over the {MAX_N} columns") as caught:
        _space((4096, 1024, MAX_N + 1))
    assert "\n" not in str(caught.value)
    x, w = torch.zeros((2, 4)), torch.zeros((4, MAX_N + 1))
    with pytest.raises(ValueError, match="whole row"):
        launch({"ROWS": 1, "num_warps": 1, "num_stages": 1}, x, w)


@pytest.mark.parametrize("dtype_name, k, n, k_up, n_up", [
    ("bfloat16", 45, 70, 48, 72),  # 90 and 140 B rows: both padded to 16-byte multiples
    ("float32", 48, 2044, 48, 2044),  # 192 and 8176 B: aligned, no copy
    ("float16", 64, 2044, 64, 2048),
])
def test_unaligned_operands_are_padded_for_the_library_gemm(dtype_name, k, n, k_up, n_up, monkeypatch):
    import torch

    from autotune.kernels import compile_only
    from autotune.kernels.matmul_split import library_product

    dtype = getattr(torch, dtype_name)
    x, w = torch.randn((5, k)).to(dtype), torch.randn((k, n)).to(dtype)
    seen = []
    real = torch.Tensor.__matmul__
    monkeypatch.setattr(torch.Tensor, "__matmul__", lambda a, b: seen.append((a.shape[1], b.shape[1])) or real(a, b))
    y = library_product(x, w)
    assert seen == [(k_up, n_up)] and y.shape == (5, n_up) and y.stride() == (n_up, 1)
    assert torch.equal(y[:, :n], real(x, w)) and not y[:, n:].any()  # zero columns past N
    with compile_only.triton_launches_compile_only():  # the same y, so the row pass compiled is the one run
        assert library_product(x, w).stride() == y.stride()
    assert len(seen) == 1


def test_compile_only_runs_no_library_gemm(monkeypatch):
    """A compile worker beside a timing one compiles the row pass; the GEMM must not run there."""
    import torch

    from autotune.kernels import compile_only
    from autotune.kernels.matmul_split import library_product

    x, w = torch.ones((3, 4)), torch.ones((4, 8))
    assert torch.equal(library_product(x, w), torch.full((3, 8), 4.0))

    def no_gemm(*_):
        raise AssertionError("the GEMM ran while launches were held")

    monkeypatch.setattr(torch.Tensor, "__matmul__", no_gemm)
    assert not compile_only.launches_held()
    with compile_only.triton_launches_compile_only():
        assert compile_only.launches_held()
        y = library_product(x, w)
    assert not compile_only.launches_held()
    assert (y.shape, y.dtype) == ((3, 8), x.dtype)
    with pytest.raises(AssertionError, match="GEMM ran"):
        library_product(x, w)
