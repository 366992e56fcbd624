"""What cannot be measured is refused before anything starts, in one line, with nothing written;
a reference that cannot run in float64 falls back, and the session says which it used.

The kernels are written into a file as a user writes them and named on the command line
(run in this process); Helion's own examples are used from their folder where it exists.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_main, run_report_script

EXAMPLES = Path("/work/shared/helion-examples")

KERNELS = textwrap.dedent('''
    import threading

    import helion
    import helion.language as hl
    import torch

    import autotune


    @helion.kernel(static_shapes=True)
    def gather(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(table)
        for rows in hl.tile(idx.size(0)):
            out[rows, :] = table[idx[rows], :]
        return out


    @helion.kernel(static_shapes=True)
    def add_all(xs: list[torch.Tensor]) -> torch.Tensor:
        out = torch.empty_like(xs[0])
        for rows in hl.tile(out.size(0)):
            out[rows, :] = xs[0][rows, :] + xs[1][rows, :]
        return out


    @helion.kernel(static_shapes=True)
    def shift(x: torch.Tensor, by: int) -> torch.Tensor:
        out = torch.empty_like(x)
        for rows in hl.tile(x.size(0)):
            out[rows, :] = x[rows, :] + by
        return out


    @helion.kernel(static_shapes=True)
    def rows_times_two(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty_like(x)
        for rows in hl.tile(m):
            out[rows, :] = x[rows, :] * 2
        return out


    @helion.kernel(static_shapes=True)
    def blend(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for rows in hl.tile(x.size(0)):
            acc = hl.zeros([rows, x.size(1)], dtype=torch.float32)  # a float32 accumulator: float64 refuses it
            acc = torch.lerp(acc, x[rows, :], 0.5)
            out[rows, :] = acc.to(out.dtype)
        return out


    @helion.kernel(static_shapes=True)
    def rows_plus_one(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for rows in hl.tile(x.size(0)):
            out[rows, :] = x[rows, :] + 1
        return out


    @helion.kernel(static_shapes=True)
    def half_blend(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for rows in hl.tile(x.size(0)):
            acc = hl.zeros([rows, x.size(1)], dtype=torch.float16)  # runs in neither float64 nor float32
            acc = torch.lerp(acc, x[rows, :], 0.5)
            out[rows, :] = acc.to(out.dtype)
        return out


    LOCK = threading.Lock()
    locked = autotune.Kernel(rows_plus_one, name="locked", baselines={"holds_a_lock": lambda x: LOCK})
    ranked = autotune.Kernel(rows_plus_one, name="ranked", rank=2)
    wrapped = autotune.Kernel(shift, inputs=lambda shape, dtype, device: (torch.randn(shape), 1))


    def _broken(x):
        raise ValueError("no library for this")


    broken = autotune.Kernel(half_blend, name="broken", baselines={"lib": _broken}, reference_baseline="lib")
''')


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch) -> Path:
    # `--interpret` below runs in this process and sets TRITON_INTERPRET before it imports what
    # it needs; Triton decides at `@triton.jit` time, so the built-in kernels and Helion are
    # imported first, without it, as the other tests of this worker will want them.
    import helion  # noqa: F401

    from autotune.kernels.registry import all_kernels

    all_kernels()
    (tmp_path / "kernels.py").write_text(KERNELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # --interpret sets it: put back after the test
    return tmp_path


def _refused(capsys, kernel: str, shape: str = "16x32", dtype: str = "float32") -> str:
    return assert_one_line_error(*run_main(["tune", kernel, "--shape", shape, "--dtype", dtype, "--interpret",
                                            "--budget", "2", "--db", "refused.db", "--shipped", "none"], capsys))


@pytest.mark.parametrize("kernel, shape, said", [
    ("kernels.py:gather", "16x32", "parameter 'idx' indexes another tensor, so it needs integer indices"),
    ("kernels.py:add_all", "16x32", "parameter 'xs' (annotated list[torch.Tensor]) is not a tensor"),
    ("kernels.py:shift", "16x32", "is wrapped in autotune.Kernel 'wrapped'"),
    ("kernels.py:rows_times_two", "512", "rows_times_two: parameter 'x' cannot be a random tensor of shape 512"),
    ("kernels.py:ranked", "512", "shape '512' has 1 dimension(s); this kernel takes 2"),
    ("kernels.py:locked", "16x32", "locked's baselines['holds_a_lock'] hook cannot be sent to the measuring"),
    ("kernels.py:broken", "16x32", "no reference for broken runs: tried the kernel's body run eagerly in float64"),
])
def test_what_cannot_be_measured_is_one_line_exit_2_nothing_written(folder: Path, capsys, kernel: str, shape: str,
                                                                    said: str) -> None:
    line = _refused(capsys, kernel, shape, "float16" if kernel.endswith("broken") else "float32")
    assert said in line, line
    assert not (folder / "refused.db").exists()


def test_a_refused_scalar_parameter_is_named_with_what_it_needs(folder: Path, capsys) -> None:
    from autotune.kernel import Kernel, KernelError
    from autotune.kernel_loader import resolve_kernel

    bare = resolve_kernel("kernels.py:wrapped").fn  # the Helion kernel itself, without the wrapper's inputs
    with pytest.raises(KernelError, match=r"parameter 'by' \(annotated int\) is not a tensor .* "
                                          r"inputs\(shape, dtype, device\)"):
        Kernel(bare).make_inputs((4, 8), __import__("torch").float32, "cpu", 0)


def test_reference_fallback_lists_everything_tried(folder: Path, capsys) -> None:
    line = _refused(capsys, "kernels.py:broken", dtype="float16")  # binds in float16, its body runs in neither
    assert "body run eagerly in float32" in line and "baseline 'lib' in float64: ValueError: no library for" in line


def test_the_declared_reference_baseline_is_the_last_resort(folder: Path) -> None:
    import torch

    from autotune.kernel_loader import resolve_kernel
    from autotune.reference_choice import choose_reference

    kernel = resolve_kernel("kernels.py:broken").with_hooks(
        baselines={"lib": lambda x: torch.lerp(torch.zeros_like(x), x, 0.5)})
    kernel.reference_baseline = "lib"
    said = choose_reference(kernel, lambda: (torch.randn(16, 32, dtype=torch.float16),))
    assert said.startswith("baseline 'lib' in float64 (first tried: the kernel's body run eagerly in float64: ")
    assert kernel.reference_plan == ("baseline", "lib", "float64")
    x = torch.randn(4, 8, dtype=torch.float64)
    assert torch.equal(kernel.reference_output((x,)), x * 0.5)  # what every measuring process then computes


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="Helion's examples are not at /work/shared/helion-examples")
def test_helions_rms_norm_example_with_default_inputs_is_refused_naming_its_weight(folder: Path, capsys) -> None:
    line = _refused(capsys, f"{EXAMPLES}/rms_norm.py:rms_norm_fwd", "8x32")
    assert "rms_norm_fwd: parameter 'weight' cannot be a random tensor of shape 8x32" in line
    assert not (folder / "refused.db").exists()


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="Helion's examples are not at /work/shared/helion-examples")
def test_helions_embedding_example_needs_its_indices_built(folder: Path, capsys) -> None:
    line = _refused(capsys, f"{EXAMPLES}/embedding.py:embedding", "8x32")
    assert "parameter 'x' indexes another tensor" in line


def test_a_helion_kernel_from_python_c_is_refused_in_one_line(folder: Path) -> None:
    import autotune
    from autotune.errors import UserError

    namespace: dict = {"__name__": "__main__"}
    exec(compile(textwrap.dedent('''
        import helion, torch
        import helion.language as hl

        @helion.kernel(static_shapes=True)
        def copy(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for rows in hl.tile(x.size(0)):
                out[rows, :] = x[rows, :]
            return out
    '''), "<string>", "exec"), namespace)  # what `python -c` compiles: no file, no source lines
    with pytest.raises(UserError) as raised:
        autotune.tune(namespace["copy"], shape=(8, 8), dtype="float32", interpret=True, budget=1,
                      db=folder / "refused.db", shipped=None, quiet=True)
    text = str(raised.value)
    assert "\n" not in text and "written in `python -c`" in text and "put the kernel in a .py file" in text
    assert not (folder / "refused.db").exists()


def test_a_body_that_cannot_run_in_float64_is_checked_against_float32_and_says_so(folder: Path) -> None:
    report = run_report_script(textwrap.dedent(f'''
        import io, json
        from rich.console import Console
        import autotune
        from autotune.databases import open_for_reading
        from autotune.kernel_loader import resolve_kernel

        text = io.StringIO()
        kernel = resolve_kernel({str(folder / "kernels.py")!r} + ":blend")
        result = autotune.tune(kernel, shape=(16, 32), dtype="float32", interpret=True, budget=2,
                               db={str(folder / "f32.db")!r}, shipped=None, console=Console(file=text, width=240))
        db = open_for_reading({str(folder / "f32.db")!r}, None)
        session = db.sessions(limit=1)[0]
        print("REPORT " + json.dumps({{"lines": text.getvalue().splitlines()[:6],
                                      "reference": db.session(session["id"])["options"].reference,
                                      "best_ms": result.best_ms, "mode": result.mode}}))
    '''), shared=True, TRITON_INTERPRET="1")
    said = [line for line in report["lines"] if line.startswith("reference: ")]
    assert said and said[0].startswith("reference: the kernel's body run eagerly in float32 (first tried: the "
                                       "kernel's body run eagerly in float64: RuntimeError")
    assert report["reference"] == said[0].removeprefix("reference: ")  # recorded with the session
    assert report["mode"] == "interpret" and report["best_ms"] is not None  # a config passed that reference
