"""Configs picked by shape at run time, from the shipped H100 measurements of the examples.

`examples/rms_norm.py` was tuned on the H100 at six shapes (experiments/user_kernels); the
rule is judged here on that recorded data: the exact shape, else the nearest recorded shape,
else the compiler's default; and the exported forms give the same answers without the database.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autotune import databases
from autotune.config_table import DEFAULT, EXACT, NEAREST, ConfigTable
from autotune.kernel_loader import resolve_kernel
from tests.conftest import assert_one_line_error, run_main
from autotune.serving import configured

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = getattr(databases, "ready", lambda path: path)(ROOT / databases.SHIPPED_DB)  # built where kept as batches
RMS = "examples/rms_norm.py:kernel"  # the autotune.Kernel, with its hooks
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def on_the_h100(monkeypatch) -> None:
    """Calls run as on the GPU the shipped examples were tuned on (autotune.device's seam)."""
    monkeypatch.setattr("autotune.device.running_device_name", lambda index=None: H100)


@pytest.fixture(scope="module")
def rms(monkeypatch_module=None):
    import os

    old = os.getcwd()
    os.chdir(ROOT)
    try:
        yield resolve_kernel(RMS)
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def table(rms) -> ConfigTable:
    return ConfigTable.from_db(rms, SHIPPED)


def _meta(*shapes: tuple[int, ...], dtype=torch.float16) -> tuple[torch.Tensor, ...]:
    return tuple(torch.empty(shape, dtype=dtype, device="meta") for shape in shapes)


def test_the_shipped_data_holds_the_examples_shapes(table: ConfigTable) -> None:
    shapes = {e.shape for e in table.entries if e.dtype == "float16"}
    assert {(2048, 4096), (8192, 8192), (4096, 16384), (4096, 8192)} <= shapes
    assert all(e.device.startswith("NVIDIA H100") for e in table.entries)


def test_exact_nearest_and_none(rms, table: ConfigTable) -> None:
    fast = configured(rms, db=SHIPPED, shipped=None)
    exact = fast.choose(*_meta((4096, 16384), (16384,)))
    recorded = next(e for e in table.entries if e.shape == (4096, 16384))
    assert exact.how == EXACT and exact.config == recorded.config
    near = fast.choose(*_meta((4096, 15000), (15000,)))
    assert near.how == NEAREST and near.shape == (4096, 16384)
    # with the exact shape held out, the nearest other shape answers
    held = table.pick((4096, 8192), "float16", exclude=[(4096, 8192)])
    assert held.how == NEAREST and held.shape != (4096, 8192)
    assert fast.choose(*_meta((64, 64), (64,), dtype=torch.bfloat16)).how == DEFAULT  # no bf16 recorded
    assert "nearest recorded shape 4096x16384" in near.describe("rms_norm", (4096, 15000), "float16")


def test_a_table_from_another_database_serves_nothing(rms, tmp_path: Path) -> None:
    from autotune.store.cache import Cache
    from autotune.config_table import EmptyTableWarning

    Cache.open(tmp_path / "empty.db", create=True).close()
    with pytest.warns(EmptyTableWarning, match="no tuned config"):
        fast = configured(rms, db=tmp_path / "empty.db", shipped=None)
    assert fast.choose(*_meta((4096, 8192), (8192,))).how == DEFAULT


def test_the_shipped_data_is_found_from_any_directory(rms, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no user.db and no shipped data here
    fast = configured(rms)
    assert fast.choose(*_meta((4096, 16384), (16384,))).how == EXACT
    assert f"rms_norm: 6 shape(s) measured on {H100}, from " in repr(fast) and "user.db" not in repr(fast)


def test_the_exported_forms_agree_with_the_rule(rms, table: ConfigTable, tmp_path: Path) -> None:
    path = tmp_path / "rms.json"
    table.save(path)
    loaded = ConfigTable.load(path)
    assert loaded.entries == table.entries
    fast = configured(rms, table=path)
    spec = importlib.util.spec_from_file_location("rms_configs", _write(tmp_path / "rms_configs.py", table.to_python()))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    aot = importlib.util.spec_from_file_location("aot", _write(tmp_path / "aot.py", table.to_helion_aot("rms_norm")))
    heuristic = importlib.util.module_from_spec(aot)
    aot.loader.exec_module(heuristic)
    for shape in [(4096, 16384), (3000, 9000), (16384, 2048), (100, 100)]:
        args = _meta(shape, shape[1:])
        pick = fast.choose(*args)
        assert dict(module.config_for(shape, "float16").config) == pick.config
        assert heuristic.autotune_rms_norm(*args) == pick.config
    assert heuristic.autotune_rms_norm(*_meta((8, 8), (8,), dtype=torch.bfloat16)) == {}  # Helion's default


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_export_and_show_take_a_kernel_by_path(tmp_path: Path, capsys, monkeypatch) -> None:
    out = tmp_path / "table.json"
    done = subprocess.run([sys.executable, "-m", "autotune.cli", "export", RMS, "--format", "json", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)  # one real process
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["kernel"] == "rms_norm"
    monkeypatch.chdir(ROOT)  # the rest in this process, as `autotune` runs them
    code, shown, _ = run_main(["show", RMS], capsys)
    assert code == 0 and "16384" in shown
    error = assert_one_line_error(*run_main(["export", RMS, "--format", "json", "--out",
                                             str(tmp_path / "missing" / "t.json")], capsys))
    assert "does not exist" in error
    assert not (tmp_path / "missing").exists()


def test_the_example_replays_on_a_cpu(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "autotune.cli", "tune", RMS, "--shape", "4096x16384", "--dtype",
                           "float16", "--strategy", "random", "--budget", "5", "--seed", "1", "--db",
                           str(tmp_path / "replays.db")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "REPLAY" in done.stdout and "replay recorded as session" in done.stdout
