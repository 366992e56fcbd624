"""Tuned configs know their provenance: the GPU they were measured on, the kernel code they
were tuned for, and whether they were timed at all (interpreter sessions are not).

A CPU stand-in kernel (a launcher that scales its input by the config's BLOCK, so the output
shows which config ran) and two fake GPUs through autotune.device's seam.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from autotune.config_table import (INTERPRETED, OTHER_SOURCE, ConfigTable, ConfigWarning, EmptyTableWarning,
                                   Entry, OtherGpuWarning, SourceMismatchWarning, kernel_code_hash)
from autotune.errors import UserError
from autotune.kernel_loader import resolve_kernel
from autotune.serving import configured
from tests.conftest import assert_one_line_error, run_main

A, B = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
SHAPE = (64, 256)
KERNEL = '''
import autotune
from search_spaces.triton_space import declare_triton_space


def launch(config, x):
    """Scales x by the config's BLOCK: the output shows which config ran."""
    return x * config["BLOCK"]


def space(shape, dtype):
    return declare_triton_space("scale", meta={"BLOCK": [16, 32, 64, 128]}, num_warps=[1, 2], num_stages=[1],
                                default={"BLOCK": 64, "num_warps": 1, "num_stages": 1})


scale = autotune.Kernel(launch, name="scale", space=space, dtypes=("float32",))
'''
REFORMATTED = KERNEL.replace('''def launch(config, x):
    """Scales x by the config's BLOCK: the output shows which config ran."""
    return x * config["BLOCK"]''', '''def launch(config,
           x):
    # the config's BLOCK, as a factor
    return (x*config['BLOCK'])  # scaled''')
CHANGED = KERNEL.replace('return x * config["BLOCK"]', 'return x * config["BLOCK"] + 1')


def _kernel(folder: Path, name: str, text: str = KERNEL):
    path = folder / f"{name}.py"
    path.write_text(text)
    return resolve_kernel(f"{path}:scale")


@pytest.fixture
def scale(tmp_path: Path):
    return _kernel(tmp_path, "scale_kernel")


@pytest.fixture
def running_on(monkeypatch):
    """Which fake GPU calls run on: set `running_on.name`."""
    class Where:
        name = A
    monkeypatch.setattr("autotune.device.running_device_name", lambda index=None: Where.name)
    return Where


def _config(block: int) -> dict:
    return {"BLOCK": block, "num_warps": 1, "num_stages": 1}


def _table(kernel, *entries: tuple[tuple[int, ...], int, str], path: Path | None = None) -> Path:
    table = ConfigTable(kernel=kernel.name, family=kernel.family, source_hash=kernel.source_hash(),
                        code_hash=kernel_code_hash(kernel),
                        entries=[Entry(shape, "float32", _config(block), 1.0, device=gpu)
                                 for shape, block, gpu in entries])
    path = path or Path(kernel.locator.split(":")[0]).with_suffix(".json")
    table.save(path)
    return path


def _ran(fast, shape=SHAPE) -> int:
    """The BLOCK of the config a call ran."""
    return int(fast(torch.ones(shape))[0, 0])


# -- the GPU a call runs on ----------------------------------------------------------------------------
def test_each_gpu_is_served_its_own_measurements(scale, running_on) -> None:
    path = _table(scale, (SHAPE, 32, A), (SHAPE, 128, B))
    assert _ran(configured(scale, table=path)) == 32
    running_on.name = B
    fast = configured(scale, table=path)
    assert _ran(fast) == 128 and fast.last[0].device == B


def test_another_gpus_configs_serve_only_as_a_declared_fallback(scale, running_on) -> None:
    path = _table(scale, (SHAPE, 128, B))
    with pytest.warns(EmptyTableWarning, match=f"no config measured on {A}.*{B}") as caught:
        fast = configured(scale, table=path)
        assert _ran(fast) == 64 and _ran(fast) == 64  # the default config (BLOCK 64), said once
    assert len(caught) == 1
    for fallback in ("any-gpu", (B,)):
        with pytest.warns(OtherGpuWarning) as caught:
            fast = configured(scale, table=path, fallback=fallback)
            assert [_ran(fast), _ran(fast), _ran(fast, (64, 512))] == [128, 128, 128]
        assert len(caught) == 1 and A in str(caught[0].message) and B in str(caught[0].message)
    with pytest.warns(EmptyTableWarning):
        assert _ran(configured(scale, table=path, fallback=("NVIDIA A100",))) == 64
    with pytest.raises(UserError, match="any-gpu"):
        configured(scale, table=path, fallback="anything")


def test_this_gpus_exact_shape_then_a_fallbacks_then_this_gpus_nearest(scale, running_on) -> None:
    path = _table(scale, ((64, 1024), 16, A), (SHAPE, 128, B))
    assert _ran(configured(scale, table=path)) == 16  # no fallback: this GPU's nearest shape
    with pytest.warns(OtherGpuWarning):
        assert _ran(configured(scale, table=path, fallback="any-gpu")) == 128  # B's exact shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # this GPU's own exact shape: nothing to say
        assert _ran(configured(scale, table=path, fallback="any-gpu"), (64, 1024)) == 16


def test_repr_says_what_it_holds(scale, running_on) -> None:
    path = _table(scale, (SHAPE, 32, A), ((64, 512), 32, A), (SHAPE, 128, B))
    fast = configured(scale, table=path, fallback="any-gpu")
    _ran(fast)
    text = repr(fast)
    assert f"scale: 2 shape(s) measured on {A}, {B}" in text and str(path) in text
    assert "fallback any-gpu" in text and "1 signature(s) compiled" in text


# -- the kernel a table is for --------------------------------------------------------------------------
def test_identity_survives_comments_and_reformatting(scale, tmp_path: Path, running_on) -> None:
    path = _table(scale, (SHAPE, 32, A))
    same = _kernel(tmp_path, "reformatted", REFORMATTED)
    assert same.source_hash() != scale.source_hash() and kernel_code_hash(same) == kernel_code_hash(scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _ran(configured(same, table=path)) == 32
    changed = _kernel(tmp_path, "changed", CHANGED)
    assert kernel_code_hash(changed) != kernel_code_hash(scale)
    with pytest.warns(SourceMismatchWarning, match="another version of scale's code"):
        configured(changed, table=path)


def test_a_table_of_another_kernel_is_refused(scale, tmp_path: Path) -> None:
    other = _kernel(tmp_path, "other", KERNEL.replace('name="scale"', 'name="softmax"'))
    path = _table(other, (SHAPE, 32, A))
    with pytest.raises(UserError, match=r"holds configs of softmax \(triton\), not of scale") as refused:
        configured(scale, table=path)
    assert "\n" not in str(refused.value)


def test_a_frozen_rule_holds_one_gpus_configs(scale) -> None:
    from autotune.export import ExportError

    from dataclasses import replace

    table = ConfigTable.load(_table(scale, (SHAPE, 32, A), (SHAPE, 128, B)))
    for write in (table.to_python, lambda: replace(table, family="helion").to_helion_aot("launch")):
        with pytest.raises(ExportError, match=f"measured on 2 GPUs .*{A}.*--device"):
            write()
    table.entries = [e for e in table.entries if e.device == A]
    assert "'BLOCK': 32" in table.to_python()


def test_an_empty_table_warns_once(scale, running_on) -> None:
    path = _table(scale)
    with pytest.warns(EmptyTableWarning) as caught:
        fast = configured(scale, table=path)
        _ran(fast), _ran(fast)
    assert len(caught) == 1 and "no tuned config" in str(caught[0].message)


def test_a_named_database_must_exist(scale, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="missing.db does not exist"):
        configured(scale, db=tmp_path / "missing.db")
    with pytest.raises(UserError, match="gone.db does not exist"):
        configured(scale, db=[tmp_path / "gone.db"], shipped=None)
    with pytest.raises(UserError, match="shipped data .*nothing.db does not exist"):
        configured(scale, shipped=tmp_path / "nothing.db")


# -- recorded sessions: interpreter sessions and code identity --------------------------------------------
def _record(db: Path, kernel, *, gpu: str, mode: str, block: int, ms: float, source_hash: str | None = None,
            options: dict | None = None) -> tuple[int, str]:
    """One session of one evaluation, recorded as a session of `mode` on `gpu`: (session id, space)."""
    from autotune.store.cache import Cache
    from autotune.task import signature
    from autotune.types import Candidate, Result, Status
    from search_spaces.fingerprint import SpaceIdentity
    from search_spaces.space import config_key

    cache = Cache.open(db, create=True)
    try:
        identity = SpaceIdentity(space=kernel.triton_space(SHAPE, torch.float32), signature=signature(SHAPE, "float32"),
                                 source_hash=source_hash or kernel.source_hash(), device=gpu)
        fingerprint = cache.put_space(identity)
        session = cache.start_session(kernel=kernel.name, shape=SHAPE, dtype="float32", strategy="random", seed=0,
                                      budget=1, seconds=None, fingerprint=fingerprint, device=gpu,
                                      versions=dict(identity.versions), mode=mode, options=options or {})
        native = _config(block)
        key = config_key(native)
        cache.record(session, fingerprint, 0, 0, Candidate(dict(native), native, key), Result(key, Status.OK, ms))
        cache.end_session(session, "budget", key)
    finally:
        cache.close()
    return session, fingerprint


def test_interpreter_sessions_are_not_timings(scale, tmp_path: Path, running_on) -> None:
    db = tmp_path / "user.db"
    _record(db, scale, gpu=A, mode="gpu", block=32, ms=2.0)
    _record(db, scale, gpu=A, mode="interpret", block=128, ms=0.5)  # "faster": interpreter seconds
    table = ConfigTable.from_db(scale, db)
    assert [e.config["BLOCK"] for e in table.entries] == [32] and table.skipped == {INTERPRETED: 1}
    with pytest.warns(ConfigWarning, match="1 interpreter session.*not GPU timings") as caught:
        fast = configured(scale, db=db, shipped=None)
    assert len(caught) == 1 and _ran(fast) == 32
    cpu_only = tmp_path / "interpreted.db"
    _record(cpu_only, scale, gpu="cpu", mode="interpret", block=128, ms=0.5)  # a machine without a GPU
    with pytest.warns(EmptyTableWarning, match="no tuned config .*left out: 1 interpreter session.*not GPU timings"):
        assert _ran(configured(scale, db=cpu_only, shipped=None)) == 64


def test_export_refuses_interpreter_sessions(scale, tmp_path: Path, capsys) -> None:
    db = tmp_path / "user.db"
    interpreted, space = _record(db, scale, gpu=A, mode="interpret", block=128, ms=0.5)
    for argv in (["export", str(interpreted)], ["export-space", "--session", str(interpreted)],
                 ["export-space", "--space", space[:12]]):
        error = assert_one_line_error(*run_main([*argv, "--db", str(db), "--shipped", "none"], capsys))
        assert "Triton interpreter" in error and "not GPU timings" in error
    timed, _ = _record(db, scale, gpu=A, mode="gpu", block=32, ms=2.0)
    error = assert_one_line_error(*run_main(["export-space", "--space", space[:12], "--db", str(db), "--shipped",
                                             "none"], capsys))
    assert f"interpreter session(s) {interpreted}" in error and f"--session ({timed})" in error
    code, out, _ = run_main(["export", str(timed), "--format", "json", "--db", str(db), "--shipped", "none"], capsys)
    assert code == 0 and '"BLOCK": 32' in out


@pytest.mark.filterwarnings("ignore::autotune.config_table.EmptyTableWarning")
def test_recorded_sessions_match_by_code_identity_where_they_recorded_it(scale, tmp_path: Path, running_on) -> None:
    db = tmp_path / "user.db"
    old = "0" * 24  # a space recorded under an earlier text of the same code
    _record(db, scale, gpu=A, mode="gpu", block=16, ms=1.0, source_hash=old,
            options={"code_hash": kernel_code_hash(scale)})
    assert [e.config["BLOCK"] for e in ConfigTable.from_db(scale, db).entries] == [16]
    other = tmp_path / "other.db"
    _record(other, scale, gpu=A, mode="gpu", block=16, ms=1.0, source_hash=old)  # no code identity recorded
    table = ConfigTable.from_db(scale, other)
    assert table.entries == [] and table.skipped == {OTHER_SOURCE: 1}
    with pytest.warns(SourceMismatchWarning, match="1 recorded shape.*another version of its code"):
        configured(scale, db=other, shipped=None)
