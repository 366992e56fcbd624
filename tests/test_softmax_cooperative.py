"""The cooperative Triton softmax: its space, its one-piece numbers under the Triton interpreter,
and its refusal to wait forever there.  Pieces that wait for each other need programs running
at once, which only a GPU gives: that path is accuracy-gated by the evaluator on every config."""

from __future__ import annotations

import pytest

from tests.conftest import assert_softmax_runs_match, run_report_script, valid_points

_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from tests.conftest import softmax_run

spec = get_kernel("softmax-cooperative")
report = {}
for shape, chunk in (((5, 1000), 1024), ((3, 2500), 4096), ((7, 257), 1024)):
    for dtype in (torch.float16, torch.float32):
        inputs = spec.make_inputs(shape, dtype, "cpu", 0)
        out = spec.triton_launch({"CHUNK": chunk, "num_warps": 4, "num_stages": 1}, *inputs)
        report[f"{shape[0]}x{shape[1]}/{str(dtype)[6:]}"] = softmax_run(out, spec.reference(inputs))
x = torch.zeros((2, 3000), dtype=torch.float32)
x[1, 2999], x[1, 0] = 80.0, -80.0
out = spec.triton_launch({"CHUNK": 4096, "num_warps": 4, "num_stages": 1}, x)
report["extremes"] = softmax_run(out, torch.softmax(x.double(), dim=-1))
try:
    spec.triton_launch({"CHUNK": 1024, "num_warps": 4, "num_stages": 1}, x)
    report["refused"] = None
except ValueError as error:
    report["refused"] = str(error)
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def interpreted():
    return run_report_script(_INTERPRETED, timeout=600, shared=True, TRITON_INTERPRET="1")


def test_one_piece_per_row_matches_the_fp64_reference(interpreted):
    runs = {k: v for k, v in interpreted.items() if k != "refused"}
    assert len(runs) == 3 * 2 + 1
    assert_softmax_runs_match(runs, {"float16": 1e-3, "float32": 1e-5})


def test_waiting_pieces_are_refused_under_the_interpreter_instead_of_hanging(interpreted):
    assert interpreted["refused"] and "one at a time" in interpreted["refused"]


def test_space_caps_pieces_per_row_and_registers():
    from autotune.kernels import get_kernel
    from autotune.kernels.softmax_cooperative import MAX_PIECES

    spec = get_kernel("softmax-cooperative")
    space = spec.triton_space((1024, 50257), None)
    assert space.parameter("CHUNK").choices == (1024, 2048, 4096, 8192, 16384, 32768, 65536)
    points = valid_points(space)
    assert points and all(p["CHUNK"] / (32 * p["num_warps"]) <= 128 for p in points)
    assert not space.violations(space.default)
    assert space.default["CHUNK"] == 8192
    # A row so long that the smallest chunk leaves too many pieces drops those chunks.
    long_row = spec.triton_space((4, 1024 * (MAX_PIECES + 1)), None)
    assert 1024 not in long_row.parameter("CHUNK").choices
    assert spec.triton_space((32, 128), None).parameter("CHUNK").choices == (1024,)
