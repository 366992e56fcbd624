"""The deliberately broken `faulty` kernel and the fault-injection experiment, on the CPU.

What can be shown without a GPU is shown here: the kernel is registered with every fault
in its space; its launch function, run against Triton's real compiler for an H100 target
and Triton's own launch-time checks (only the device's answers are simulated), raises a
compiler error and an out-of-resources refusal where it should and launches the others;
the compiled code holds a spin loop on a volatile load and an address terabytes away;
the exceptions are classified as the expected statuses; the interpreter runs the
healthy, NaN and wrong configs; and the experiment's plan, read-back and verdicts work on
a session recorded through the normal command line (with a stand-in evaluator).
"""

from __future__ import annotations

import ast
import json
import re
import sys
import time

import pytest
import torch

from autotune import cli
from autotune.evaluators.failures import classify_exception, short_error
from autotune.evaluators.fake import FakeEvaluator
from autotune.kernels import all_kernels, get_kernel
from autotune.kernels import faulty_triton as faulty
from autotune.types import Status
from conftest import run_python
from experiments import fault_injection as experiment

SHAPE = (64, 96)
H100 = ("cuda", 90, 32)
H100_SHARED_LIMIT = 232448  # bytes of shared memory one block may use on an H100 (227 KiB)


# -- registration and space ----------------------------------------------------------------------
def test_faulty_kernel_is_registered_with_every_fault_in_its_space():
    assert "faulty" in [spec.name for spec in all_kernels()]
    spec = get_kernel("faulty")
    assert spec.family == "triton" and spec.triton_launch is not None and "torch" in spec.baselines
    space = spec.triton_space(SHAPE, torch.float32)
    wanted = {"none", "compile_error", "out_of_resources", "compile_hang", "run_hang", "illegal_address", "nan",
              "wrong", "unwritten"}
    assert set(space.parameter("fault").values()) == wanted
    assert space.default["fault"] == "none"
    healthy = [p for p in space.parameter("BLOCK_SIZE").values() if not space.violations({"fault": "none",
                                                                                          "BLOCK_SIZE": p})]
    assert len(healthy) >= 2


def test_each_fault_expects_the_status_that_names_its_failure():
    expected = faulty.EXPECTED_STATUS
    assert set(expected) == set(faulty.FAULTS) == set(faulty.FAULT_EFFECTS)
    assert expected["none"] is Status.OK
    assert expected["compile_error"] is Status.COMPILE_ERROR
    assert expected["out_of_resources"] is Status.OUT_OF_RESOURCES
    assert expected["compile_hang"] is Status.COMPILE_TIMEOUT
    assert expected["run_hang"] is Status.RUN_TIMEOUT
    assert expected["illegal_address"] is Status.CRASH
    assert expected["nan"] is Status.WRONG_RESULT and expected["wrong"] is Status.WRONG_RESULT


def test_compile_hang_stalls_in_the_launch_before_compiling(monkeypatch):
    slept = []

    def fake_sleep(seconds):
        slept.append(seconds)
        raise TimeoutError("stopped the stall")  # what the evaluator's kill amounts to

    monkeypatch.setattr(faulty.time, "sleep", fake_sleep)
    with pytest.raises(TimeoutError):
        faulty.launch({"fault": "compile_hang", "BLOCK_SIZE": 256}, torch.zeros(4, 4))
    assert slept and slept[0] >= 600  # far longer than any compile timeout


# -- what Triton's compiler makes of each fault (H100 target, compiled on the CPU) ----------------------
def _compile_for_h100(fault: str, block: int = 256):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "flag_ptr": "*i32", "n_elements": "i32",
                 "BLOCK_SIZE": "constexpr", "FAULT": "constexpr", "TILE_SIZE": "constexpr"}
    source = ASTSource(fn=faulty.faulty_kernel, signature=signature,
                       constexprs={"BLOCK_SIZE": block, "FAULT": fault, "TILE_SIZE": faulty.TILE})
    return triton.compile(source, target=GPUTarget(*H100), options={"num_warps": faulty.NUM_WARPS, "num_stages": 1})


@pytest.fixture
def triton_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))


def test_healthy_and_hang_and_address_faults_compile_into_what_the_gpu_must_see(triton_cache):
    healthy = _compile_for_h100("none").asm["ptx"]
    assert "ld.volatile" not in healthy and not re.search(r"\sbra(\.uni)?\s", healthy)  # no loop, no branch
    spin = _compile_for_h100("run_hang").asm["ptx"]
    labels = re.findall(r"^(\$L__BB\d+_\d+):", spin, flags=re.M)
    loops = [label for label in labels
             if re.search(re.escape(label) + r":.*?ld\.volatile.*?bra\s+" + re.escape(label) + ";", spin, flags=re.S)]
    assert loops, "the run_hang fault has no loop re-reading the flag"
    far = _compile_for_h100("illegal_address").asm["ptx"]
    assert str(4 * 2**40) in far  # bytes added to the input's address: 4 TiB away


# An H100 as Triton's launch path sees it: the real compiler (sm_90 target) and the real
# checks Triton makes when it loads a kernel, with the device's answers faked.  The
# launch function itself runs, exactly as a compile worker calls it.
_SIMULATED_H100 = """
import json
import torch
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
from autotune.evaluators.failures import classify_exception, short_error
from autotune.kernels import faulty_triton as faulty

launches = []

class Utils:
    def get_device_properties(self, device):
        return {"max_shared_mem": %(limit)d, "multiprocessor_count": 132, "max_num_regs": 65536, "warpSize": 32}
    def load_binary(self, name, kernel, shared, device):
        return 1, 1, 32, 0, 1024  # module, function, registers, spills, threads per block
    def unload_module(self, module):
        pass

class SimulatedH100:
    utils = Utils()
    def get_current_device(self):
        return 0
    def get_current_stream(self, device):
        return 0
    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)
    def launcher_cls(self, src, metadata):
        return lambda grid_x, *rest: launches.append({"grid": grid_x, "warps": metadata.num_warps})

driver.set_active(SimulatedH100())
report = {}
for fault in ("none", "nan", "wrong", "run_hang", "illegal_address", "compile_error", "out_of_resources"):
    before = len(launches)
    try:
        faulty.launch({"fault": fault, "BLOCK_SIZE": 256}, torch.zeros(1024, 1024))
        report[fault] = {"launched": launches[before:]}
    except Exception as error:
        report[fault] = {"raised": type(error).__name__, "status": classify_exception(error, phase="compile").value,
                         "recorded": short_error(error), "launched": launches[before:]}
print("REPORT " + json.dumps(report))
""" % {"limit": H100_SHARED_LIMIT}


@pytest.fixture(scope="module")
def simulated_h100(tmp_path_factory):
    cache = tmp_path_factory.mktemp("triton-cache")
    done = run_python(_SIMULATED_H100, timeout=300, TRITON_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("REPORT "))
    return json.loads(line.removeprefix("REPORT "))


def test_compile_error_fault_raises_a_real_compilation_error_classified_compile_error(simulated_h100):
    run = simulated_h100["compile_error"]
    assert run["raised"] == "CompilationError" and run["status"] == "compile_error" and not run["launched"]
    assert "compatible" in run["recorded"].splitlines()[0]  # the diagnosis leads the recorded error


def test_out_of_resources_fault_is_refused_at_launch_by_tritons_own_shared_memory_check(simulated_h100):
    run = simulated_h100["out_of_resources"]
    assert run["raised"] == "OutOfResources" and run["status"] == "out_of_resources" and not run["launched"]
    required = int(re.search(r"Required: (\d+)", run["recorded"]).group(1))
    assert required > H100_SHARED_LIMIT


@pytest.mark.parametrize("fault", ["none", "nan", "wrong", "run_hang", "illegal_address"])
def test_faults_that_show_only_on_the_device_launch_normally(simulated_h100, fault):
    run = simulated_h100[fault]
    assert "raised" not in run
    assert run["launched"] == [{"grid": 1024 * 1024 // 256, "warps": faulty.NUM_WARPS}]


# -- classification of the real exception types --------------------------------------------------------
def test_real_triton_and_torch_errors_are_classified_as_their_faults():
    from triton.runtime.errors import OutOfResources, PTXASError

    oor = OutOfResources(524288, 232448, "shared memory")
    illegal = torch.AcceleratorError("CUDA error: an illegal memory access was encountered\n"
                                     "CUDA kernel errors might be asynchronously reported at some other API call")
    for phase in ("compile", "run"):
        assert classify_exception(oor, phase=phase) is Status.OUT_OF_RESOURCES
        assert classify_exception(illegal, phase=phase) is Status.CRASH
    ptxas = PTXASError("ptxas fatal: Insufficient registers")
    assert classify_exception(ptxas, phase="compile") is Status.COMPILE_ERROR


def test_kernel_source_quoted_in_a_compilation_error_does_not_decide_the_status():
    from triton.compiler.errors import CompilationError

    source = ("def k(x_ptr):\n"
              "    # on a cuda error: illegal memory access, out of resource: shared memory\n"
              "    y = x + z\n")
    node = ast.parse("y = x + z").body[0]
    node.lineno, node.col_offset = 3, 8
    error = CompilationError(source, node, "NameError: z is not defined")
    assert "illegal memory access" in str(error)  # the quoted source is in the message...
    assert classify_exception(error, phase="compile") is Status.COMPILE_ERROR  # ...but only the diagnosis counts
    assert short_error(error).splitlines()[0] == "CompilationError: NameError: z is not defined"
    assert "y = x + z" in short_error(error)  # where it arose still follows


# -- the interpreter: healthy, NaN and wrong configs --------------------------------------------------------
_INTERPRETED = """
import json, torch
from autotune.kernels import faulty_triton as spec  # only this kernel: the others take seconds to import
from autotune.evaluators.timing import relative_error, tolerance_for
(x,) = spec.make_inputs((8, 300), torch.float32, "cpu", 3)  # 2400 elements: the last block is partial
ref = spec.reference(x.double())
report = {}
for fault in ("none", "nan", "wrong"):
    for block in (256, 1024):
        out = spec.launch({"fault": fault, "BLOCK_SIZE": block}, x)
        report[f"{fault}/{block}"] = {"rel": relative_error(out, ref), "nan": int(torch.isnan(out).sum()),
                                      "numel": out.numel(), "shape": list(out.shape),
                                      "ratio": float((out.double() / ref).nanmedian())}
report["tolerance"] = tolerance_for(torch.float32)
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def interpreted():
    done = run_python(_INTERPRETED, timeout=300, TRITON_INTERPRET="1")
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("REPORT "))
    return json.loads(line.removeprefix("REPORT "))


@pytest.mark.parametrize("block", [256, 1024])
def test_interpreted_outputs_are_right_nan_and_wrong(interpreted, block):
    tolerance = interpreted["tolerance"]
    none, nan, wrong = (interpreted[f"{f}/{block}"] for f in ("none", "nan", "wrong"))
    assert none["shape"] == [8, 300] and none["nan"] == 0 and none["rel"] <= tolerance
    assert nan["nan"] == nan["numel"] and not nan["rel"] <= tolerance  # every element NaN: rejected
    assert wrong["nan"] == 0 and wrong["rel"] == pytest.approx(0.5) and wrong["ratio"] == pytest.approx(1.5)


# -- the experiment script ---------------------------------------------------------------------------------------
def test_dry_run_lists_every_config_with_its_expected_status(capsys):
    assert experiment.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    planned = experiment.plan((1024, 1024))
    assert len(planned) == len(faulty.FAULTS) * len(faulty.BLOCK_SIZES)
    for p in planned:
        assert re.search(rf"\| {p.fault}\s+\| {p.params['BLOCK_SIZE']}\s+\| {p.key} \| {p.expected}\s+\|", out), p
    assert "--run-timeout 10" in out and "--compile-timeout 45" in out and "plan OK" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_the_real_run_refuses_without_a_gpu(tmp_path, capsys):
    assert experiment.main(["--db", str(tmp_path / "f.db"), "--report", str(tmp_path / "r.md")]) == 2
    assert "--dry-run" in capsys.readouterr().err
    assert not (tmp_path / "f.db").exists() and not (tmp_path / "r.md").exists()


def _stand_in(statuses: dict[str, Status]):
    """A GPUEvaluator stand-in answering each fault with the status it is told to."""

    def make(*args, **kwargs):
        return FakeEvaluator(lambda p: 0.01 * p["BLOCK_SIZE"] / 256 if statuses[p["fault"]] is Status.OK
                             else statuses[p["fault"]], baselines={"torch": 0.02})

    return make


def _recorded_session(tmp_path, monkeypatch, statuses: dict[str, Status], limit: int | None = None):
    """Run the experiment's own tune command line in-process, in GPU mode, against the stand-in."""
    import autotune.evaluators.gpu as gpu
    import autotune.tuning as tuning

    monkeypatch.setattr(tuning, "gpu_available", lambda: True)
    monkeypatch.setattr(gpu, "GPUEvaluator", _stand_in(statuses))
    args = experiment.build_parser().parse_args(["--db", str(tmp_path / "f.db")])
    planned = experiment.plan((1024, 1024))
    argv = experiment.tune_argv(args, budget=limit or len(planned))
    if limit:
        argv += ["--grid-sample"]
    assert cli.main(argv) == 0
    session, rows = experiment.read_back(tmp_path / "f.db", 0)
    return planned, session, rows, argv


def test_a_session_with_every_fault_as_expected_passes(tmp_path, monkeypatch):
    planned, session, rows, argv = _recorded_session(tmp_path, monkeypatch, dict(faulty.EXPECTED_STATUS))
    assert len(rows) == len(planned)  # the default, evaluated first, is not evaluated twice
    checks = experiment.session_checks(session, rows, planned, exit_code=0, wall_s=12.5)
    assert all(c.passed for c in checks), checks
    table = experiment.table_rows(planned, rows)
    assert [row[experiment.AS_EXPECTED] for row in table] == ["yes"] * len(planned)
    report = experiment.render_report(argv=argv, session=session, table=table, checks=checks, wall_s=12.5)
    assert report.startswith("# Fault injection: PASS")
    assert "injected compile_timeout" in report and "wall time of the whole tune command: 12.5 s" in report


def test_a_misclassified_fault_fails_the_experiment(tmp_path, monkeypatch):
    statuses = {**faulty.EXPECTED_STATUS, "out_of_resources": Status.COMPILE_ERROR}
    planned, session, rows, argv = _recorded_session(tmp_path, monkeypatch, statuses)
    table = experiment.table_rows(planned, rows)
    wrong = [row for row in table if row[experiment.AS_EXPECTED] != "yes"]
    assert {row[0] for row in wrong} == {"out_of_resources"} and len(wrong) == 2
    checks = experiment.session_checks(session, rows, planned, exit_code=0, wall_s=1.0)
    report = experiment.render_report(argv=argv, session=session, table=table, checks=checks, wall_s=1.0)
    assert report.startswith("# Fault injection: FAIL")
    assert "configs with an unexpected status: 2 of 18" in report


def test_a_cut_off_session_or_a_broken_best_fails_the_checks(tmp_path, monkeypatch):
    planned, session, rows, _ = _recorded_session(tmp_path, monkeypatch, dict(faulty.EXPECTED_STATUS), limit=10)
    checks = {c.name: c for c in experiment.session_checks(session, rows, planned, exit_code=None, wall_s=540.0)}
    assert not checks["every config of the grid was recorded"].passed
    assert not checks["the tune process ended by itself, with status 0"].passed
    assert "killed at the time limit" in checks["the tune process ended by itself, with status 0"].detail
    # a best config that is not a healthy one (a NaN config that somehow passed) is caught too
    nan_key = next(p.key for p in planned if p.fault == "nan")
    checks = {c.name: c for c in experiment.session_checks({**session, "best_key": nan_key}, rows, planned,
                                                           exit_code=0, wall_s=1.0)}
    assert not checks["the best config is a healthy one with an accurate result"].passed
    assert experiment.read_back(tmp_path / "f.db", session["id"]) == (None, {})  # no later session


def test_the_time_limit_kills_the_command_and_the_processes_it_started(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(120)\n")
    started = time.monotonic()
    exit_code, wall = experiment.run_limited([sys.executable, "-c", code], limit_s=3)
    assert exit_code is None and wall < 30 and time.monotonic() - started < 40
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _running(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(grandchild)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as handle:
            state = next(line for line in handle if line.startswith("State:"))
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "Z" not in state.split()[1]


def test_the_time_limit_returns_the_exit_code_of_a_command_that_finishes():
    exit_code, wall = experiment.run_limited([sys.executable, "-c", "import sys; sys.exit(3)"], limit_s=60)
    assert exit_code == 3 and wall < 60


def test_rows_answered_from_an_earlier_session_are_not_proof(tmp_path, monkeypatch):
    planned, first, _, argv = _recorded_session(tmp_path, monkeypatch, dict(faulty.EXPECTED_STATUS))
    assert cli.main([a for a in argv if a != "--fresh"]) == 0  # measured configs are reused without --fresh
    session, rows = experiment.read_back(tmp_path / "f.db", first["id"])
    checks = {c.name: c for c in experiment.session_checks(session, rows, planned, exit_code=0, wall_s=1.0)}
    assert not checks["every row was measured in this session"].passed
    assert "answered from earlier rows" in checks["every row was measured in this session"].detail
