"""A kernel and its hooks travel by value to the measuring processes; every output is checked.

One script, run as `__main__` in a fresh interpreter (TRITON_INTERPRET=1 set before helion is
imported), defines a Helion kernel and its hooks in `__main__` (inside a helper function, so
no other process could import them) and measures it through the GPU evaluator's own
processes and pipes, with worker targets that run the configs through the Triton interpreter
(tests/cpu_measuring_workers.py).  The kernel returns two outputs; its baselines return one
or both, or declare which they compute.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tests.conftest import subprocess_env

SCRIPT = textwrap.dedent('''
    import json, os, sys
    import torch, helion, helion.language as hl
    import autotune
    from autotune.evaluators.gpu import GPUEvaluator
    from autotune.task import bind_live
    from autotune.tuning import compared_line
    from tests import cpu_measuring_workers as workers

    FACTOR = 3.0

    @helion.kernel(static_shapes=True)
    def scale_and_sum(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.empty_like(x)
        sums = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
        for rows in hl.tile(x.size(0)):
            v = x[rows, :].to(torch.float32) * FACTOR
            out[rows, :] = v.to(out.dtype)
            sums[rows] = v.sum(-1)
        return out, sums

    def make_kernel():
        def inputs(shape, dtype, device):  # a shape only this hook builds: 5 times the rows asked
            return (torch.randn(shape[0] * 5, shape[1], dtype=dtype, device=device),)
        return autotune.Kernel(scale_and_sum, inputs=inputs, baselines={
            "one": lambda x: x * FACTOR,  # the first of the kernel's two outputs: compared on output 0
            "both": lambda x: (x * FACTOR, (x * FACTOR).sum(-1)),
            "declared": autotune.Baseline(lambda x: (x * FACTOR, torch.zeros(x.shape[0])), outputs=(0,)),
            "wrong": lambda x: x * 2 * FACTOR})

    def measure(kernel, shape):
        task = bind_live(kernel, shape, torch.float32, "cpu")
        evaluator = GPUEvaluator(kernel, shape, "float32", device_name="cpu", compile_workers=1,
                                 compile_target=workers.compile_target, bench_target=workers.bench_target)
        try:
            results = [r.status.value for r in evaluator.evaluate([task.default_candidate()])]
            baselines = {name: r.status.value for name, r in evaluator.baselines().items()}
        finally:
            evaluator.close()
        return {"configs": results, "baselines": baselines, "compared": evaluator.compared,
                "line": compared_line(evaluator.compared)}

    if __name__ == "__main__":
        report = {"pid": os.getpid(), "main": measure(make_kernel(), (8, 16))}
        print("REPORT " + json.dumps(report))
''')


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("wire")
    (folder / "script.py").write_text(SCRIPT)
    log = folder / "workers.log"
    env = subprocess_env(TRITON_INTERPRET="1", CPU_WORKER_LOG=str(log))
    done = subprocess.run([sys.executable, "script.py"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=240)
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    report = json.loads(lines[0][len("REPORT "):])
    report["log"] = [json.loads(line) for line in log.read_text().splitlines()]
    return report


def test_hooks_made_in_main_are_what_the_measuring_process_used(measured: dict[str, Any]) -> None:
    setups = [e for e in measured["log"] if e["event"] == "setup" and e["kernel"] == "scale_and_sum"]
    assert setups, measured["log"]
    for setup in setups:
        assert setup["pid"] != measured["pid"]  # another process ...
        assert setup["input_shapes"] == [[40, 16]]  # ... built the inputs with the hook from __main__
        assert setup["baselines"] == ["both", "declared", "one", "wrong"]
    assert measured["main"]["configs"] == ["ok"]  # the kernel bound and ran there, checked for real


def test_every_output_is_checked_and_baselines_on_the_outputs_they_compute(measured: dict[str, Any]) -> None:
    main = measured["main"]
    assert main["baselines"]["one"] == "ok"  # one output against a kernel of two: compared on output 0
    assert main["baselines"]["both"] == "ok"
    assert main["baselines"]["declared"] == "ok"  # its second output is wrong, but not declared
    assert main["baselines"]["wrong"] == "wrong_result"  # the gate still bites
    assert main["compared"] == {"configs": "all 2 outputs", "one": "output 0", "both": "all 2 outputs",
                                "declared": "output 0", "wrong": "output 0"}
    assert main["line"].startswith("compared with the reference: every config on all 2 outputs; one on output 0")
    errors = {e["key"]: e["rel_error"] for e in measured["log"] if e["event"] == "baseline"}
    assert errors["one"] < 1e-6 and errors["wrong"] > 0.5


def test_baseline_error_compares_declared_or_leading_outputs() -> None:
    import torch

    from autotune.evaluators.timing import baseline_error

    ref = (torch.ones(4, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    assert baseline_error(torch.ones(4), ref) == (0.0, "output 0")
    assert baseline_error((torch.ones(4), torch.zeros(2)), ref) == (0.0, "all 2 outputs")
    assert baseline_error(torch.zeros(2), ref, (1,)) == (0.0, "output 1")
    assert baseline_error((torch.ones(4), torch.ones(2)), ref, (0,)) == (0.0, "output 0")
    assert baseline_error(torch.ones(3), ref)[0] == float("inf")  # the wrong shape never passes
    assert baseline_error(torch.ones(4), ref, (5,))[0] == float("inf")


def test_an_unpicklable_hook_is_named_in_one_line() -> None:
    import threading

    import torch

    from autotune.kernel import Kernel, KernelError
    from autotune.kernel_wire import to_wire

    lock = threading.Lock()

    def launch(config, x):
        return x

    kernel = Kernel(launch, space=lambda shape, dtype: None, inputs=lambda shape, dtype, device: (torch.ones(1),),
                    baselines={"locked": lambda x: lock})
    with pytest.raises(KernelError) as raised:
        to_wire(kernel)
    text = str(raised.value)
    assert "\n" not in text and "baselines['locked']" in text and "lock" in text.lower()


CELL = textwrap.dedent('''
    import helion, torch
    import helion.language as hl

    OFFSET = 1.5

    @helion.kernel(static_shapes=True)
    def shifted(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for rows in hl.tile(x.size(0)):
            out[rows, :] = x[rows, :] + OFFSET
        return out
''')


def test_a_notebook_cells_kernel_and_a_triton_launcher_arrive_whole(tmp_path) -> None:
    import linecache

    from autotune.kernel import Kernel
    from autotune.kernel_loader import resolve_kernel
    from autotune.kernel_wire import to_wire
    from tests.user_kernel_files import write_user_files

    cell = "<ipython-input-7-0a1b2c>"  # where IPython keeps a cell's lines: linecache, no file
    linecache.cache[cell] = (len(CELL), None, CELL.splitlines(keepends=True), cell)
    namespace: dict = {"__name__": "__main__"}
    exec(compile(CELL, cell, "exec"), namespace)
    notebook = Kernel(namespace["shifted"], baselines={"eager": lambda x: x + 1.5})
    write_user_files(tmp_path)
    launcher = resolve_kernel(f"{tmp_path}/my_triton.py:double")  # a @triton.jit function behind a launcher
    (tmp_path / "notebook.bin").write_bytes(to_wire(notebook))
    (tmp_path / "triton.bin").write_bytes(to_wire(launcher))
    code = textwrap.dedent(f'''
        import json, torch
        from autotune.kernel_wire import from_wire
        notebook = from_wire(open({str(tmp_path / "notebook.bin")!r}, "rb").read())
        x = torch.randn(4, 8)
        bound = notebook.helion_kernel.bind((x,))  # Helion binds it: the cell's lines and a module came along
        launcher = from_wire(open({str(tmp_path / "triton.bin")!r}, "rb").read())
        jit = [type(o).__name__ for o in launcher.source_objects]
        baseline = notebook.baselines["eager"]((x,)).sub(x).mean().item()
        print("REPORT " + json.dumps({{"bound": type(bound).__name__, "baseline": baseline, "jit": jit,
                                     "hash": launcher.source_hash()}}))
    ''')
    done = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True,
                          timeout=240)
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert lines, done.stderr[-3000:]
    report = json.loads(lines[0][len("REPORT "):])
    assert report["bound"] == "BoundKernel" and abs(report["baseline"] - 1.5) < 1e-6
    assert report["jit"] == ["function", "JITFunction"] and report["hash"] == launcher.source_hash()


def test_builtins_go_by_name_and_a_distributed_factory_carries_the_kernel_itself(tmp_path) -> None:
    import pickle

    from autotune.distributed.factories import GPUEvaluatorFactory
    from autotune.kernel_loader import resolve_kernel
    from autotune.kernel_wire import from_wire, wire_form
    from tests.user_kernel_files import write_user_files

    assert wire_form(resolve_kernel("softmax")) == "softmax"  # a recorded session's kernel_locator still names it
    write_user_files(tmp_path)
    kernel = resolve_kernel(f"{tmp_path}/my_kernels.py:kernel").with_hooks(baselines={"twice": lambda x, w: x * 2})
    factory = GPUEvaluatorFactory(wire_form(kernel), (16, 64), "float16", device_name="cpu")
    arrived = pickle.loads(pickle.dumps(factory))  # what Dask does to reach a worker
    assert arrived == factory and hash(arrived) == hash(factory)  # workers key their evaluators by it
    sent = from_wire(arrived.kernel)
    assert sent.name == "scale_rows" and sent.inputs_given and list(sent.baselines) == ["twice"]
