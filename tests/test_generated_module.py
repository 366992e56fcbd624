"""The benchmark worker loads a Helion config's host function from the file a compile worker's
code generation wrote (autotune/evaluators/generated_module.py), checked on the CPU under the
Triton interpreter with a user's Helion kernel (`double`): the loaded function computes what
the generated-here one does, loading it generates no code, and a file gone (or the switch
off) falls back to generating it."""

from __future__ import annotations

from autotune.evaluators.generated_module import GeneratedModule, generated_module_of, load_generated
from tests.conftest import run_report_script
from tests.user_kernel_files import write_user_files


def test_a_function_without_a_module_file_has_no_generated_module():
    assert generated_module_of(len) is None  # a builtin
    assert generated_module_of(lambda: 0) is not None  # this test file's own lambda: a file and a name


def test_a_generated_module_is_imported_once_per_process(tmp_path):
    path = tmp_path / "generated_host.py"
    path.write_text("CALLS = []\ndef host(x):\n    CALLS.append(x)\n    return 2 * x\n")
    host = load_generated(GeneratedModule(str(path), "host"))
    assert host(3) == 6
    again = load_generated(GeneratedModule(str(path), "host"))
    assert again is host and host.__globals__["CALLS"] == [3]  # the same module object, not a second import
    assert generated_module_of(host) == GeneratedModule(str(path), "host")


_LOADED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.evaluators import generated_module
from autotune.evaluators.gpu_worker import build_runner, default_native
from autotune.kernel_loader import resolve_kernel
from autotune.kernels import compile_only

spec = resolve_kernel(os.environ["KERNEL"])
shape = (4, 100)
inputs = spec.make_inputs(shape, torch.float32, "cpu", 0)
bound = spec.helion_kernel.bind(inputs)
native = default_native(spec, bound, shape, torch.float32)
compile_only.compile_only_launcher = lambda *args, **kwargs: None  # the interpreter cannot compile without running
generated = spec.compile_without_launch(native, inputs, bound=bound)  # what a compile worker sends
calls = []
generate = bound.compile_config
bound.compile_config = lambda *args, **kwargs: (calls.append(1), generate(*args, **kwargs))[1]
loaded = build_runner(spec, bound, native, tuple(generated))(inputs)
report = {"is_file": os.path.isfile(generated.path), "module": generated_module.load_generated(generated).__module__,
          "loaded_calls": len(calls), "loaded_right": bool(torch.equal(loaded, 2 * inputs[0]))}
gone = generated_module.GeneratedModule(generated.path + ".gone.py", generated.name)
fallback = build_runner(spec, bound, native, tuple(gone))(inputs)
report.update(fallback_calls=len(calls), fallback_right=bool(torch.equal(fallback, loaded)))
generated_module.BUILD_FROM_WORKER = False
build_runner(spec, bound, native, tuple(generated))(inputs)
report.update(off_calls=len(calls))
print("REPORT " + json.dumps(report))
"""


def test_the_benchmark_worker_runs_what_the_compile_worker_generated_without_generating_it(tmp_path):
    folder = write_user_files(tmp_path)
    report = run_report_script(_LOADED, timeout=300, TRITON_INTERPRET="1", KERNEL=f"{folder}/my_kernels.py:double")
    assert report["is_file"] and report["module"].startswith("autotune_generated_")
    assert report["loaded_calls"] == 0 and report["loaded_right"]  # no code generated, the right answer
    assert report["fallback_calls"] == 1 and report["fallback_right"]  # a file gone: generated here
    assert report["off_calls"] == 2  # switched off: generated here although the file is there
