"""A configured call after its first at a signature: one key, one lookup, the compiled callable.

Tested structurally (after the first call nothing that picks, compiles or asks the device is
reached) on a CPU stand-in whose "compiled kernel" is a plain function; the cost itself is
measured by experiments/configured_overhead.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from autotune.config_table import ConfigTable, Entry
from autotune.serving import ConfiguredKernel
from experiments.configured_overhead import _stand_in_kernel

RECORDED = (64, 256)


class Counted(ConfiguredKernel):
    """Counts how often a config is picked and built; each build returns a callable of its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.picks = self.builds = 0

    def choose(self, *args: Any):
        raise AssertionError("not on the call path")

    def _build(self, pick, args):
        self.builds += 1

        def compiled(*call: Any) -> tuple[str, int]:
            return pick.how, id(compiled)
        return compiled, pick, ""


@pytest.fixture
def fast(monkeypatch) -> Counted:
    monkeypatch.setattr("autotune.device.running_device_name", lambda index=None: "cpu")
    table = ConfigTable(kernel="stand_in", family="triton", source_hash="",
                        entries=[Entry(RECORDED, "float32", {"BLOCK": 64}, 0.01, device="cpu")])
    kernel = Counted(_stand_in_kernel(), table)
    original = table.pick

    def counted_pick(*args: Any, **kwargs: Any):
        kernel.picks += 1
        return original(*args, **kwargs)
    monkeypatch.setattr(table, "pick", counted_pick)
    return kernel


def _args(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty(shape, dtype=dtype, device="meta"), torch.empty(shape[1:], dtype=dtype, device="meta")


@pytest.mark.parametrize("shape, dtype, how", [(RECORDED, torch.float32, "exact"),
                                               ((64, 200), torch.float32, "nearest"),
                                               (RECORDED, torch.float16, "default")])
def test_after_the_first_call_nothing_but_the_lookup_runs(fast: Counted, monkeypatch, shape, dtype, how) -> None:
    args = _args(shape, dtype)
    first = fast(*args)
    assert first[0] == how and (fast.picks, fast.builds) == (1, 1)

    def not_on_the_call_path(*_: Any, **__: Any):
        raise AssertionError("asked after the first call")
    # neither the table, the kernel's shape hook, nor the device is asked again
    monkeypatch.setattr(fast, "table", None)
    monkeypatch.setattr(fast.kernel, "shape_of", not_on_the_call_path)
    monkeypatch.setattr("autotune.device.running_device_name", not_on_the_call_path)
    for _ in range(100):
        assert fast(*_args(shape, dtype)) == first  # new tensors, same signature
    assert (fast.picks, fast.builds) == (1, 1) and fast.last[0].how == how
    assert fast.compiled_for(*args)() == first  # the very callable the calls run


def test_each_signature_is_picked_once(fast: Counted) -> None:
    signatures = [_args(RECORDED), _args((64, 200)), _args(RECORDED, torch.float16), _args((128, 256))]
    for _ in range(3):
        for args in signatures:
            fast(*args)
    assert fast.picks == fast.builds == 4 and len(fast.choices) == 4
    fast(_args(RECORDED)[0])  # another argument layout: one tensor
    fast(_args(RECORDED)[0])
    fast(*_args(RECORDED))  # back to the first layout: still compiled
    assert fast.picks == fast.builds == 5


def test_compiled_for_before_any_call(fast: Counted) -> None:
    runner = fast.compiled_for(*_args(RECORDED))
    assert fast.builds == 1 and fast(*_args(RECORDED)) == runner() and fast.builds == 1


def test_a_call_without_a_tensor_says_so(fast: Counted) -> None:
    with pytest.raises(TypeError, match="without a tensor"):
        fast(3, 4)


def test_the_overhead_experiment_reports_every_pick(tmp_path) -> None:
    from experiments.configured_overhead import cpu_run, markdown, write

    data = cpu_run(calls=20, repeats=2)
    assert set(data["rows"]) == {"exact", "nearest", "default"}
    assert all(row["configured"] > 0 and row["bare"] > 0 for row in data["rows"].values())
    report = write(data, tmp_path)
    assert report.read_text() == markdown(data) and "| nearest |" in report.read_text()
