"""The resident Triton softmax: its one-piece numbers under the Triton interpreter (odd widths,
sliced and strided inputs, extremes, every element written), its refusal to wait forever
there, and its space.  Pieces that wait for each other need programs running at once, which
only a GPU gives: that path is accuracy-gated by the evaluator on every config."""

from __future__ import annotations

import pytest

from tests.conftest import assert_softmax_runs_match, run_report_script, valid_points

_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from tests.conftest import softmax_run

spec = get_kernel("softmax-resident")
config = lambda chunk, stream=1: {"CHUNK": chunk, "STREAM_LOADS": stream, "num_warps": 4, "num_stages": 1}
report = {}
for stream, (shape, chunk) in enumerate((((5, 1000), 1024), ((3, 2500), 4096), ((7, 257), 1024), ((9, 300), 512))):
    for dtype in (torch.float16, torch.float32):
        inputs = spec.make_inputs(shape, dtype, "cpu", 0)
        out = spec.triton_launch(config(chunk, stream % 2), *inputs)  # both load hints
        report[f"{shape[0]}x{shape[1]}/{str(dtype)[6:]}"] = softmax_run(out, spec.reference(inputs))
wide = spec.make_inputs((6, 1200), torch.float16, "cpu", 1)[0]
for name, x in (("sliced", wide[1:5, 3:1003]), ("strided", wide[:, ::2]), ("transposed", wide[:, :6].t())):
    out = torch.full_like(x, float("nan"))  # written through the output's own strides
    spec.triton_launch(config(1024), x, out)
    run = softmax_run(out, torch.softmax(x.double(), dim=-1))
    report[f"{x.shape[0]}x{x.shape[1]}/float16/{name}"] = run
x = torch.zeros((2, 3000), dtype=torch.float32)
x[1, 2999], x[1, 0] = 80.0, -80.0
report["extremes"] = softmax_run(spec.triton_launch(config(4096), x), torch.softmax(x.double(), dim=-1))
from tests.partials_kernel import round_trip
inf, nan = float("inf"), float("nan")
maxes = torch.tensor([0.0, -1.5, 1e-40, -inf, inf, nan, 3.0e38, -0.0], dtype=torch.float32)
sums = torch.tensor([1.0, 7.25, 1.0e30, nan, nan, nan, 1.0, 12000.5], dtype=torch.float32)
words, max_out, sum_out = torch.zeros(8, dtype=torch.int64), torch.empty(8), torch.empty(8)
round_trip[(8,)](maxes, sums, words, max_out, sum_out, N=8)
bits = lambda t: t.view(torch.int32).tolist()
report["packed"] = {"zero_words": int((words == 0).sum()), "maxes": bits(maxes) == bits(max_out),
                    "sums": bits(sums) == bits(sum_out)}
try:
    spec.triton_launch(config(1024), x)
    report["refused"] = None
except ValueError as error:
    report["refused"] = str(error)
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def interpreted():
    return run_report_script(_INTERPRETED, timeout=600, shared=True, TRITON_INTERPRET="1")


def test_one_piece_per_row_matches_the_fp64_reference(interpreted):
    runs = {k: v for k, v in interpreted.items() if k not in ("refused", "packed")}
    assert len(runs) == 4 * 2 + 3 + 1
    assert_softmax_runs_match(runs, {"float16": 1e-3, "float32": 1e-5})


def test_sliced_strided_and_transposed_inputs_write_every_element(interpreted):
    # The outputs started as NaN, so a missed element would fail softmax_run's NaN check.
    names = [k for k in interpreted if k.count("/") == 2]
    assert sorted(n.split("/")[2] for n in names) == ["sliced", "strided", "transposed"]
    for name in names:
        assert not interpreted[name]["nan"] and interpreted[name]["rel"] < 1e-3, name


def test_partials_survive_packing_bit_for_bit_and_a_published_word_is_never_zero(interpreted):
    """A waiting piece takes a zero word for a piece not yet published, so no (max, sum) a piece
    can publish may pack to 0: sums of 1 or more (the piece's max contributes exp2(0)) and NaN
    (a row of -inf or inf), with maxes of every sign, denormals and infinities among them."""
    assert interpreted["packed"] == {"zero_words": 0, "maxes": True, "sums": True}


def test_waiting_pieces_are_refused_under_the_interpreter_instead_of_hanging(interpreted):
    assert interpreted["refused"] and "one at a time" in interpreted["refused"]


def test_space_caps_pieces_per_row_and_registers():
    from autotune.kernels import get_kernel
    from autotune.kernels.softmax_resident import MAX_ELEMENTS_PER_THREAD, MAX_PIECES

    spec = get_kernel("softmax-resident")
    space = spec.triton_space((2048, 100000), None)
    assert space.parameter("CHUNK").choices == (1024, 2048, 4096, 8192, 16384, 32768)
    assert space.parameter("COUNT_ARRIVALS").choices == (0, 1)  # how a piece waits is tuned
    points = valid_points(space)
    assert points and all(p["CHUNK"] / (32 * p["num_warps"]) <= MAX_ELEMENTS_PER_THREAD for p in points)
    assert {p["CHUNK"] for p in points} == set(space.parameter("CHUNK").choices)
    assert not space.violations(space.default) and space.default["CHUNK"] == 8192
    assert not space.violations({**space.default, "num_warps": 2})  # 128 values a thread
    assert space.violations({**space.default, "CHUNK": 32768, "num_warps": 4})
    # A row so long that the smallest chunk leaves too many pieces drops those chunks.
    long_row = spec.triton_space((4, 1024 * (MAX_PIECES + 1)), None)
    assert 1024 not in long_row.parameter("CHUNK").choices
    assert spec.triton_space((32, 128), None).parameter("CHUNK").choices == (1024,)


def test_a_row_with_more_pieces_than_can_wait_together_is_refused_before_launch():
    import torch

    from autotune.kernels import get_kernel
    from autotune.kernels.softmax_resident import MAX_PIECES

    x = torch.zeros((1, 1024 * MAX_PIECES + 1))
    with pytest.raises(ValueError, match="pieces"):
        get_kernel("softmax-resident").triton_launch({"CHUNK": 1024, "STREAM_LOADS": 1, "num_warps": 4, "num_stages": 1}, x)


def test_a_row_is_shared_out_evenly_between_pieces_none_empty_none_wider_than_chunk():
    """The pieces the launch cuts (they wait for each other, so only a GPU runs more than one):
    every column in exactly one piece, each piece a multiple of 16 wide and at most CHUNK, and
    no piece empty (its max would be -inf and the row NaN); the last, which takes what is left,
    short of the others by under 16 columns a piece (cut CHUNK-wide, 100000 left 1696 of 8192)."""
    import triton

    from autotune.kernels.softmax_resident import even_piece_width

    for chunk in (1024, 4096, 8192, 32768):
        for n_cols in (*range(1, 3000, 37), 8192, 8193, 100000, 100001, 262144, 130049, 101000, chunk * 128 - 1):
            width = even_piece_width(n_cols, triton.cdiv(n_cols, chunk))
            pieces = triton.cdiv(n_cols, width)
            assert width % 16 == 0 and width <= chunk and pieces <= triton.cdiv(n_cols, chunk)
            sizes = [min(width, n_cols - p * width) for p in range(pieces)]
            assert sum(sizes) == n_cols and min(sizes) > 0, (chunk, n_cols)
            assert sizes[-1] > width - 16 * pieces, (chunk, n_cols, sizes[-1], width)
    assert even_piece_width(100000, 13) == 7696



@pytest.mark.parametrize("count_arrivals", [0, 1])
def test_the_compiled_exchange_has_no_fence_and_publishes_with_one_exchange(count_arrivals):
    """The exchange's speed rests on what it leaves out: compiled for sm_90 (on this CPU), a piece
    publishes its packed partials with one relaxed 64-bit exchange and no instruction of the
    kernel orders memory (no fence, no acquire or release atomic); the row's words are polled
    with volatile loads, and only COUNT_ARRIVALS adds atomics (relaxed) on the row's counter."""
    import re

    import torch

    from autotune.kernels import get_kernel
    from experiments.load_widths import intercept, sm90_ptx

    spec = get_kernel("softmax-resident")
    native = {"CHUNK": 8192, "STREAM_LOADS": 1, "COUNT_ARRIVALS": count_arrivals, "num_warps": 4, "num_stages": 1}
    [launch] = intercept(spec, native, spec.make_inputs((8, 100000), torch.float16, "cpu", 0))
    ptx = sm90_ptx(launch)
    atomics = re.findall(r"\batom\.[\w.:]+", ptx)
    assert atomics.count("atom.global.gpu.relaxed.exch.b64") == 1
    assert "atom.global.gpu.relaxed.add.u64" in atomics  # the ticket
    assert all(".relaxed." in a for a in atomics), atomics
    assert not re.search(r"\b(fence|membar)\b", ptx)
    assert re.search(r"ld\.volatile\.global", ptx)
    counter_adds = [a for a in atomics if a.endswith(".add.u32") or a.endswith(".add.s32")]
    assert bool(counter_adds) == bool(count_arrivals), atomics
