"""The look-back Triton softmax: its space, and its numbers under the Triton interpreter.

The interpreter runs programs one after the other in ticket order, which this kernel allows
(a program waits only on lower tickets): so the two passes, the row counters and the
combine of the partials are all exercised here, for one and many tiles per row."""

from __future__ import annotations

import pytest

from tests.conftest import assert_softmax_runs_match, run_report_script, valid_points

_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from tests.conftest import softmax_run

spec = get_kernel("softmax-lookback")
report = {}
# CHUNK values below 1024 are not in the space, but the kernel must be right for any power of
# two: small rows then cut into many tiles, and small lags make the second pass trail closely.
for shape in ((5, 1000), (3, 2500), (7, 257)):
    for dtype in (torch.float16, torch.float32):
        inputs = spec.make_inputs(shape, dtype, "cpu", 0)
        ref = spec.reference(inputs)
        for chunk, lag in ((64, 1), (64, 16), (256, 3), (1024, 128)):
            out = spec.triton_launch({"CHUNK": chunk, "LAG": lag, "num_warps": 4, "num_stages": 1}, *inputs)
            report[f"{shape[0]}x{shape[1]}/{str(dtype)[6:]}/{chunk}/{lag}"] = softmax_run(out, ref)
x = torch.zeros((2, 3000), dtype=torch.float32)
x[1, 2999], x[1, 0] = 80.0, -80.0
out = spec.triton_launch({"CHUNK": 512, "LAG": 2, "num_warps": 4, "num_stages": 1}, x)
report["extremes"] = softmax_run(out, torch.softmax(x.double(), dim=-1))
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def interpreted():
    return run_report_script(_INTERPRETED, timeout=900, shared=True, TRITON_INTERPRET="1")


def test_lookback_softmax_matches_the_fp64_reference_for_every_tiling_and_lag(interpreted):
    assert len(interpreted) == 3 * 2 * 4 + 1
    assert_softmax_runs_match(interpreted, {"float16": 1e-3, "float32": 1e-5})


def test_lookback_space_keeps_one_tile_in_registers():
    from autotune.kernels import get_kernel

    spec = get_kernel("softmax-lookback")
    space = spec.triton_space((1024, 50257), None)
    assert space.parameter("CHUNK").choices == (1024, 2048, 4096, 8192, 16384)
    points = valid_points(space)
    assert points and all(p["CHUNK"] / (32 * p["num_warps"]) <= 64 for p in points)
    assert {"CHUNK": 16384, "LAG": 512, "num_warps": 4, "num_stages": 1} not in points
    assert not space.violations(space.default)
    assert spec.triton_space((32, 128), None).parameter("CHUNK").choices == (1024,)
