"""The long-row stage experiment's seams: the pieces-alone tensor, the launch that takes its
exchange buffers from a ring (under the Triton interpreter), and the report's arithmetic."""

from __future__ import annotations

from autotune.kernels.softmax_resident import piece_layout
from experiments import long_row_stages as stages
from tests.conftest import run_report_script

_RING = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from experiments.long_row_stages import launcher

from autotune.kernels.softmax_resident import exchange_buffer

native = {"CHUNK": 1024, "STREAM_LOADS": 1, "COUNT_ARRIVALS": 0, "num_warps": 4, "num_stages": 1}
x = torch.randn((3, 1000), dtype=torch.float32)
ring = [exchange_buffer(3, 1, torch.device("cpu")) for _ in range(3)]
out = torch.full_like(x, float("nan"))
call = launcher(native, x, out, buffers=ring)
outs = []
for _ in range(2):
    out.fill_(float("nan"))
    call()
    outs.append(float((out.double() - torch.softmax(x.double(), dim=-1)).abs().max()))
print("REPORT " + json.dumps({"errors": outs, "tickets": [int(sync[0]) for sync, _ in ring]}))
"""


def test_pieces_alone_have_the_long_rows_pieces_and_no_exchange():
    pieces, width = piece_layout(100000, 8192)
    assert (pieces, width) == (13, 7696)  # 100000 shared out evenly, 16-aligned
    rows, alone_width = stages.pieces_alone_shape(2048, 100000, 8192)
    assert (rows, alone_width) == (2048 * 13, 7696)
    assert piece_layout(alone_width, 8192) == (1, alone_width)  # one piece a row: nothing to wait for
    assert 0 <= rows * alone_width - 2048 * 100000 < 2048 * 16 * 13  # at most the rounding of each piece


def test_a_ring_launch_uses_its_counters_in_turn_and_computes_softmax():
    report = run_report_script(_RING, timeout=300, shared=True, TRITON_INTERPRET="1")
    assert max(report["errors"]) < 1e-6
    assert report["tickets"] == [3, 3, 0]  # two calls, two fresh counters, each handed out 3 tickets


def _case(resident: float, zeroed: float, alone: float, copy: float = 1.0) -> dict:
    def variant(of_copy: float) -> dict:
        return {"ms": copy / of_copy, "of_copy": of_copy, "method": "events", "samples": 50, "rel_error": 1e-4}
    return {"shape": "8x8", "config": {"CHUNK": 8192, "num_warps": 4, "num_stages": 1},
            "pieces_alone_shape": "104x7696", "copy_long_ms": copy, "copy_alone_ms": copy,
            "resident": variant(resident), "resident, counters zeroed beforehand": variant(zeroed),
            "pieces alone": variant(alone)}


def test_report_places_the_loss_between_exchange_and_pieces():
    text = stages.render({"device": "GPU", "torch": "2", "triton": "3",
                          "cases": [_case(0.86, 0.87, 0.95), _case(0.88, 0.88, 0.91)]})
    assert "| 0.860 | 0.870 |" in text and "+0.090 | +0.010 |" in text
    # medians over the cases: exchange (0.09, 0.03) -> 0.060; pieces alone short by (0.05, 0.09) -> 0.070
    assert "costs 0.060 of the copy's bandwidth" in text
    assert "stay 0.070 short of the copy" in text
    assert "share by +0.005 (range +0.000 to +0.010)" in text  # zeroing: (0.01, 0.00)


_NCU_LOG = """==PROF== Profiling "resident_softmax": 0%....50%....100% - 1 pass
  resident_softmax (26624, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: Command line profiler metrics
    dram__bytes_read.sum                                            Mbyte       409.66
    gpu__time_duration.sum                                             us       314.59
    launch__grid_size                                                           26,624
    launch__registers_per_thread                          register/thread           96
  resident_softmax (26624, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: Command line profiler metrics
    gpu__time_duration.sum                                             us     1,268.0
"""


def test_profiler_counters_are_read_per_kernel_in_launch_order_and_shown_only_when_they_match():
    kernels = stages.parse_ncu(_NCU_LOG)
    assert kernels == [{"dram__bytes_read.sum": 409.66, "gpu__time_duration.sum": 314.59,
                        "launch__registers_per_thread": 96.0}, {"gpu__time_duration.sum": 1268.0}]
    results = {"device": "GPU", "torch": "2", "triton": "3", "cases": [_case(0.86, 0.87, 0.95)]}
    three = kernels + [{"gpu__time_duration.sum": 5.0}]
    text = stages.render({**results, "ncu": three})
    assert "| 8x8 | CHUNK 8192, num_warps 4 | resident | 314.6 | 409.7 |" in text
    assert "| pieces alone | 5.0 |" in text
    assert "left out" in stages.render({**results, "ncu": kernels})  # two kernels for three variants
    assert "Counters" not in stages.render(results)
