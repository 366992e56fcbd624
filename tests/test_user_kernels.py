"""A user's own kernel, from a file of theirs, through the CLI and the Python API.

The kernels are written into temporary files as a user would write them.  Tuning runs with
a fake evaluator (a Helion kernel: its configs cannot run on a CPU) or for real through the
Triton interpreter (a Triton kernel); bad input must end in one line, exit 2, nothing written.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.kernel import Kernel
from autotune.kernel_loader import KernelNotFound, locator_of, resolve_kernel
from autotune.session import Session, SessionSettings
from autotune.strategies.random_search import RandomSearch
from autotune.task import bind_live
from tests.conftest import assert_one_line_error, run_main
from tests.user_kernel_files import write_user_files

ROOT = Path(__file__).resolve().parent.parent



@pytest.fixture()
def user_files(tmp_path: Path) -> Path:
    return write_user_files(tmp_path)


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=environment)


# -- finding a kernel -------------------------------------------------------------------------------
def test_a_kernel_in_a_file_is_found_by_its_autotune_kernel_name(user_files: Path) -> None:
    kernel = resolve_kernel(f"{user_files}/my_kernels.py:kernel")
    assert isinstance(kernel, Kernel) and kernel.family == "helion" and kernel.name == "scale_rows"
    assert kernel.inputs_given  # the module's autotune.Kernel gave inputs=
    x, w = kernel.make_inputs((4, 8), __import__("torch").float32, "cpu", 0)
    assert tuple(x.shape) == (4, 8) and tuple(w.shape) == (8,)
    assert kernel.locator.endswith("my_kernels.py:kernel")
    assert resolve_kernel(kernel.locator) is kernel  # the same object again


def test_naming_the_helion_kernel_a_file_wraps_names_the_wrapper(user_files: Path) -> None:
    with pytest.raises(KernelNotFound) as raised:  # what a user names to tune or serve
        resolve_kernel(f"{user_files}/my_kernels.py:scale_rows", refuse_wrapped=True)
    text = str(raised.value)
    assert "\n" not in text and "wrapped in autotune.Kernel 'kernel'" in text and "FILE.py:kernel" in text
    # a locator recorded before (a session's kernel_locator, read back by show or --resume) finds the wrapper
    assert resolve_kernel(f"{user_files}/my_kernels.py:scale_rows").inputs_given


def test_a_bare_helion_kernel_gets_default_inputs_and_its_eager_body_as_reference(user_files: Path) -> None:
    import torch

    kernel = resolve_kernel(f"{user_files}/my_kernels.py:double")
    assert not kernel.inputs_given
    (x,) = kernel.make_inputs((3, 5), torch.float16, "cpu", 1)
    assert x.shape == (3, 5) and x.dtype == torch.float16
    reference = kernel.reference_output((x.double(),))
    assert reference.dtype == torch.float64 and torch.equal(reference, x.double() * 2.0)


@pytest.mark.parametrize("text, message", [
    ("missing.py:f", "no file missing.py"),
    ("my_kernels.py:nothing", "has no 'nothing' (kernels there: double, kernel, scale_rows)"),
    ("my_kernels.py:plain_function", "is a function, not a @helion.kernel or an autotune.Kernel"),
    ("not-a-kernel", "unknown kernel 'not-a-kernel'"),
])
def test_a_kernel_that_cannot_be_found_is_one_line(user_files: Path, monkeypatch, text: str, message: str) -> None:
    monkeypatch.chdir(user_files)
    with pytest.raises(KernelNotFound, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_kernel(text)


def test_a_kernel_made_in_a_notebook_cell_has_no_locator_for_resume() -> None:
    namespace = {"__name__": "__cell__"}  # what a notebook cell is: code with no file behind it
    exec(compile(textwrap.dedent('''
        import helion, torch
        import helion.language as hl

        @helion.kernel(static_shapes=True)
        def copy(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size()):
                out[tile] = x[tile]
            return out
    '''), "<cell>", "exec"), namespace)
    with pytest.raises(KernelNotFound, match="not defined at the top level of a .py file"):
        locator_of(Kernel(namespace["copy"]))


def test_builtins_come_through_the_same_door() -> None:
    kernel = resolve_kernel("softmax")
    assert isinstance(kernel, Kernel) and kernel.locator == "softmax" and "torch.softmax" in kernel.baselines


# -- tuning a user's Helion kernel (fake evaluator), seeds and check-config -------------------------
def test_a_user_kernel_tunes_records_and_exports(user_files: Path, tmp_path: Path) -> None:
    import torch

    from autotune.config_table import ConfigTable

    kernel = resolve_kernel(f"{user_files}/my_kernels.py:kernel")
    task = bind_live(kernel, (16, 64), torch.float16, "cpu")
    warps = task.space.names.index("num_warps")
    cost = lambda p: 1.0 / p["num_warps"] + 0.01 * list(p.values()).__len__()  # noqa: E731 - more warps, faster
    db = Cache.open(tmp_path / "user.db", create=True)
    outcome = Session(task, FakeEvaluator(cost), RandomSearch.from_task(task, seed=3, budget=12),
                      SessionSettings(strategy="random", seed=3, budget=12, mode="fake"), db,
                      options={"kernel_locator": kernel.locator}).run()
    assert outcome.best is not None and warps >= 0
    rows = db.session_evaluations(outcome.session_id)
    assert len([r for r in rows if r.generation > 0]) == 12
    recorded = db.find_spaces("scale_rows", (16, 64), "float16")
    assert recorded and recorded[0].source_hash == task.identity.source_hash
    db.close()
    # a session of the fake evaluator is not measured on a GPU: its space's device is "cpu", so
    # nothing is served from it at run time
    assert ConfigTable.from_db(kernel, tmp_path / "user.db").entries == []


def test_seeds_and_check_config_take_a_kernel_by_path(user_files: Path, capsys, monkeypatch) -> None:
    # In this process, as `autotune` runs each command (tune and bad kernels check real processes).
    monkeypatch.chdir(user_files)
    code, out, err = run_main(["seeds", "my_kernels.py:kernel", "--shape", "64x128", "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["kernel"] == "scale_rows"
    code, out, err = run_main(["check-config", "my_kernels.py:kernel", "--shape", "64x128", "--config",
                               '{"num_warps": 8}', "--format", "json"], capsys)
    assert code == 0, err
    [item] = json.loads(out)
    assert item["native"]["num_warps"] == 8 and "num_warps" not in item["from_default"]


# -- the Triton interpreter: a real run on the CPU ----------------------------------------------------
def test_a_triton_user_kernel_tunes_for_real_through_the_interpreter(user_files: Path) -> None:
    done = _cli("tune", "my_triton.py:double", "--shape", "4x100", "--dtype", "float32", "--interpret",
                "--strategy", "grid", "--budget", "6", "--db", "interp.db", cwd=user_files)
    assert done.returncode == 0, done.stderr
    cache = Cache.open(user_files / "interp.db")
    session = cache.sessions()[0]
    rows = cache.session_evaluations(session["id"])
    assert session["mode"] == "interpret" and session["options"]["kernel_locator"] == "my_triton.py:double"
    assert {r.result.status.value for r in rows} == {"ok"} and len(rows) >= 6
    assert all(r.result.rel_error == 0.0 for r in rows)  # x * 2 exactly, checked against the reference


def test_a_reference_that_disagrees_with_the_default_config_is_refused_with_nothing_written(
        user_files: Path) -> None:
    done = _cli("tune", "my_triton.py:double_wrong_reference", "--shape", "4x100", "--dtype", "float32",
                "--interpret", "--budget", "2", "--db", "refused.db", cwd=user_files)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "the reference disagrees with double at its default config" in lines[0]
    assert not (user_files / "refused.db").exists()


def test_inputs_that_cannot_be_built_for_the_shape_are_refused_with_nothing_written(user_files: Path, capsys,
                                                                                    monkeypatch) -> None:
    monkeypatch.chdir(user_files)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # --interpret sets it: put back after the test
    line = assert_one_line_error(*run_main(["tune", "my_kernels.py:kernel", "--shape", "4x8x2", "--interpret",
                                            "--budget", "2", "--db", "refused.db"], capsys))
    assert "cannot build scale_rows's inputs for shape 4x8x2: ValueError" in line
    assert not (user_files / "refused.db").exists()


@pytest.mark.parametrize("kernel, message", [
    ("missing.py:f", "no file missing.py"),
    ("my_kernels.py:nothing", "has no 'nothing'"),
    ("my_kernels.py:plain_function", "is a function, not a @helion.kernel"),
])
def test_bad_kernels_on_the_command_line_are_one_line_exit_2_nothing_written(user_files: Path, kernel: str,
                                                                              message: str, capsys, monkeypatch
                                                                              ) -> None:
    # In this process (each command as `autotune` runs it); the test below checks a real process.
    monkeypatch.chdir(user_files)
    for command in (["tune", kernel, "--shape", "8x8", "--db", "x.db"], ["seeds", kernel, "--shape", "8x8"],
                    ["show", kernel, "--db", "x.db"]):
        assert message in assert_one_line_error(*run_main(command, capsys)), command
    assert not (user_files / "x.db").exists()


def test_a_bad_kernel_is_one_line_and_exit_2_from_a_real_process(user_files: Path) -> None:
    done = _cli("tune", "my_kernels.py:plain_function", "--shape", "8x8", "--db", "x.db", cwd=user_files)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "is a function, not a @helion.kernel" in lines[0], lines
    assert not (user_files / "x.db").exists()


# -- the Python API ---------------------------------------------------------------------------------
def test_tune_checks_that_the_arguments_are_what_the_inputs_hook_builds(user_files: Path) -> None:
    import torch

    import autotune
    from autotune.errors import UserError

    kernel = resolve_kernel(f"{user_files}/my_kernels.py:kernel")
    with pytest.raises(UserError, match=r"do not match the arguments given"):
        autotune.tune(kernel, (torch.zeros(8, 16, dtype=torch.float16), torch.zeros(4, dtype=torch.float16)),
                      db=user_files / "api.db", replay=True)
    assert not (user_files / "api.db").exists()


def test_tune_replays_a_users_kernel_from_recorded_data(user_files: Path, tmp_path: Path) -> None:
    """A session recorded (here by a fake GPU) for a user's kernel replays through autotune.tune."""
    import torch

    import autotune

    kernel = resolve_kernel(f"{user_files}/my_kernels.py:kernel")
    task = bind_live(kernel, (16, 64), torch.float16, "cpu")
    db_path = tmp_path / "recorded.db"
    db = Cache.open(db_path, create=True)
    Session(task, FakeEvaluator(lambda p: 1.0 / p["num_warps"]), RandomSearch.from_task(task, seed=1, budget=10),
            SessionSettings(strategy="random", seed=1, budget=10, mode="gpu"), db).run()
    db.close()
    x, w = kernel.make_inputs((16, 64), torch.float16, "cpu", 0)
    result = autotune.tune(kernel, (x, w), strategy="random", seed=1, budget=10, db=db_path, shipped=None,
                           quiet=True)  # its own database, numbered from 1: read alone
    assert result.mode == "replay" and result.best_ms is not None and result.shape == (16, 64)
    assert result.config["num_warps"] == result.best_native["num_warps"]
    assert result.table[0].name.startswith("best found") and result.table[0].ratio == 1.0
    figure = result.plot(tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").stat().st_size > 0 and figure is not None
