"""A command's start: the kernel catalogue, a replay that imports no compiler, the started-in line."""

from __future__ import annotations

import json
import sqlite3

import pytest

from autotune.kernels import catalogue
from conftest import run_python

HEAVY = ("torch", "helion", "triton")
REPLAY = ["tune", "softmax", "--shape", "4096x32000", "--dtype", "float16", "--strategy", "random", "--budget", "20",
          "--seed", "1"]


def test_the_catalogue_matches_the_registry():
    """The committed catalogue is what the kernels' modules register, and the digest of their
    sources is the one it was generated from (else: python -m autotune.kernels.catalogue --write)."""
    data = catalogue.generate()
    from autotune.kernels import catalogue_data

    assert data == catalogue_data.KERNELS
    assert catalogue.kernels_digest() == catalogue_data.DIGEST
    assert catalogue.is_current()
    from autotune.kernels.names import BUILTIN_KERNELS

    assert set(catalogue.entries()) == set(BUILTIN_KERNELS)


def test_a_catalogue_kernel_answers_as_the_real_one():
    """What a replay asks of the kernel: the same answers from the catalogue as from the module."""
    import torch

    from autotune.kernels.registry import get_kernel

    for name in ("softmax", "matmul-rmsnorm", "matmul-sum", "softmax-triton"):
        light, real = catalogue.light_kernel(name), get_kernel(name)
        assert light is not None and light.source_hash() == real.source_hash()
        assert (light.name, light.family, light.rank, light.dtypes) == (real.name, real.family, real.rank,
                                                                          real.dtypes)
        shape = (256, 512, 1024) if real.rank == 3 else (4096, 32000)
        assert light.bytes_for(shape, "bfloat16") == real.bytes_for(shape, torch.bfloat16)
        assert light.reference_baseline == real.reference_baseline  # anything else: the real kernel's


def test_an_edited_kernel_is_imported_for_real(monkeypatch):
    """A catalogue older than the kernels' sources is not trusted: the module is imported."""
    monkeypatch.setattr(catalogue, "is_current", lambda: False)
    assert catalogue.light_kernel("softmax") is None
    assert catalogue.light_kernel("no-such-kernel") is None


def test_a_replay_imports_no_compiler_and_says_where_its_start_went(shipped_db, tmp_path):
    """`autotune tune` replaying the shipped data: neither Helion nor Triton (nor torch) is
    imported, the session says where its start went, and records it in its options."""
    db = tmp_path / "u.db"
    argv = REPLAY + ["--db", str(db), "--shipped", str(shipped_db)]
    code = ("import json, sys\nfrom autotune.cli import main\nsys.argv[1:] = %r\nrc = main()\n"
            "print('MODULES', json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in %r)))\n"
            "sys.exit(rc)\n" % (argv, HEAVY))
    done = run_python(code, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.split("MODULES ", 1)[1].splitlines()[0])
    assert loaded == [], loaded
    lines = done.stdout.splitlines()
    assert lines[0].startswith("REPLAY (no GPU on this machine)")
    started = next(line for line in lines if line.startswith("started in "))
    assert all(f"{phase} " in started for phase in ("python", "imports", "database", "binding", "evaluator"))
    options = json.loads(sqlite3.connect(db).execute("select options from sessions").fetchone()[0])
    phases = options["startup"]
    assert {"python_s", "imports_s", "database_s", "binding_s", "total_s"} <= set(phases)
    assert phases["total_s"] == pytest.approx(sum(v for k, v in phases.items() if k != "total_s"), abs=0.01)


def test_the_recorded_sample_is_the_same_without_validating_recorded_points_again(shipped_db):
    """The replay's fast path (a recorded point's alias, not validated again) gives the sample
    that validating every point gives."""
    from pathlib import Path

    from search_spaces.codec import RecordedCodec

    from autotune.databases import open_for_reading
    from autotune.simulation.oracle import Oracle
    from autotune.task import recorded_sample
    from autotune.tuning import choose_recorded_space

    cache = open_for_reading(Path("none.db"), shipped_db)
    record = choose_recorded_space(cache, catalogue.light_kernel("softmax"), (4096, 32000), "float16", None)
    oracle = Oracle.from_cache(cache, record.fingerprint, record.space.names)
    codec = RecordedCodec(record.space, cache.aliases(record.fingerprint))

    class Validating:  # the codec without its fast path
        normalise = staticmethod(codec.normalise)

    fast_space, fast = recorded_sample(record.space, codec, oracle)
    slow_space, slow = recorded_sample(record.space, Validating(), oracle)
    assert fast == slow and fast["points"] > 1000
    assert fast_space.members == slow_space.members  # the same points, in the same order


def test_a_kernel_looked_up_by_name_imports_its_own_module_only():
    """A session and each of its workers import the one module that registers the kernel."""
    code = ("import sys\nfrom autotune.kernels.registry import get_kernel\nkernel = get_kernel('softmax-triton')\n"
            "print(kernel.name, sorted(m for m in sys.modules if m.startswith('autotune.kernels.')))\n")
    done = run_python(code, timeout=300)
    assert done.returncode == 0, done.stderr
    name, _, modules = done.stdout.strip().partition(" ")
    assert name == "softmax-triton"
    assert "autotune.kernels.softmax_triton" in modules
    assert "matmul" not in modules and "softmax_helion" not in modules


def test_a_command_called_in_process_is_timed_from_its_call_not_from_the_process_start():
    """A warm server or a caller runs `main(argv)` long after its process started: no python phase."""
    from autotune import startup

    startup.begin_command(from_process_start=False)
    clock = startup.take()
    clock.mark("imports")
    clock.mark("binding")
    assert list(clock.phases) == ["imports", "binding"]
    record = clock.record()
    assert record["total_s"] == pytest.approx(record["imports_s"] + record["binding_s"], abs=0.002)
    assert clock.line().startswith("started in 0.0 s: imports 0.0, binding 0.0 s")
    assert startup.take() is not clock  # taken once: the next session gets a clock of its own
