"""The split-row Triton softmax: its space, and its numbers under the Triton interpreter."""

from __future__ import annotations

import pytest

from tests.conftest import assert_softmax_runs_match, run_report_script, valid_points

_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from tests.conftest import softmax_run

spec = get_kernel("softmax-split")
report = {}
# 1000 columns: chunks of 1024 give one piece per row; 257 columns with a forced 1024 chunk too.
# The CHUNK values below 1024 are not in the space, but the kernel must be right for any
# power of two, so the multi-piece path is exercised on small rows here.
for shape in ((5, 1000), (3, 2500), (7, 257)):
    for dtype in (torch.float16, torch.float32):
        inputs = spec.make_inputs(shape, dtype, "cpu", 0)
        ref = spec.reference(inputs)
        for chunk in (64, 256, 1024):
            for reverse in (0, 1):
                out = spec.triton_launch({"CHUNK": chunk, "REVERSE": reverse, "num_warps": 4, "num_stages": 1},
                                         *inputs)
                report[f"{shape[0]}x{shape[1]}/{str(dtype)[6:]}/{chunk}/{reverse}"] = softmax_run(out, ref)
# A row of constant values and one with a huge spread: the combine must rescale partial sums.
x = torch.zeros((2, 3000), dtype=torch.float32)
x[1, 2999] = 80.0
x[1, 0] = -80.0
out = spec.triton_launch({"CHUNK": 512, "REVERSE": 1, "num_warps": 4, "num_stages": 1}, x)
report["extremes"] = softmax_run(out, torch.softmax(x.double(), dim=-1))
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def interpreted():
    return run_report_script(_INTERPRETED, timeout=600, shared=True, TRITON_INTERPRET="1")


def test_split_softmax_matches_the_fp64_reference_for_every_chunking(interpreted):
    assert len(interpreted) == 3 * 2 * 3 * 2 + 1
    assert_softmax_runs_match(interpreted, {"float16": 1e-3, "float32": 1e-5})


def test_split_softmax_space_is_small_and_capped():
    from autotune.kernels import get_kernel

    spec = get_kernel("softmax-split")
    space = spec.triton_space((1024, 50257), None)
    chunks = space.parameter("CHUNK").choices
    assert chunks == (1024, 2048, 4096, 8192, 16384, 32768)
    points = valid_points(space)
    # every point holds at most 128 fp32 values per thread
    assert points and all(p["CHUNK"] / (32 * p["num_warps"]) <= 128 for p in points)
    assert {"CHUNK": 32768, "REVERSE": 0, "num_warps": 4, "num_stages": 1} not in points
    assert len(points) < 60  # a grid a tuner can run whole
    assert not space.violations(space.default)
    small = spec.triton_space((32, 128), None)
    assert small.parameter("CHUNK").choices == (1024,)
