"""The seed study experiment: its report regenerates from a small recorded fixture on a CPU (the
sessions recorded by the runner's own job, with a fake evaluator of known times), and its
runner plans every cell without allocating, skips recorded cells and refuses as documented."""

from __future__ import annotations

import argparse
import json
import math
import shutil
from importlib import import_module
from pathlib import Path
from types import ModuleType

import pytest

from autotune import cli
from autotune.store.cache import Cache
from autotune.errors import UserError
from autotune.evaluators.fake import FakeEvaluator
from autotune.experiment import ExperimentOptions, load_experiment
from autotune.types import Status
from conftest import REPO, assert_one_line_error, run_main, run_python
from experiments import heuristic_seeds as hs

STUDY_DIR = REPO / "experiments" / "seed_study"
HELION_SEED = {"block_sizes": [16, 16], "num_warps": 4, "num_stages": 2}  # injected as Helion's own seed
# Small cells bound on the CPU -> the fake's times (ms) for the default, the rule's seed and every
# other config (the grid; the default is a grid point too), and the torch baselines.
FIXTURE = {
    # the seed 4x faster than the default, 2% slower than grid-best; it also gets a Helion seed
    ("matmul-rmsnorm", "256x128x512"): {"default": 2.0, "seed": 0.5, "other": 0.49, "torch": 1.0, "compile": 0.25},
    # the default runs out of shared memory: a rescue
    ("matmul-layernorm", "128x64x1024"): {"default": Status.OUT_OF_RESOURCES, "seed": 1.0, "other": 0.8,
                                          "torch": 2.0, "compile": 1.5},
    # the seed slower than the default, which is also grid-best
    ("matmul-softmax", "256x128x256"): {"default": 0.3, "seed": 0.4, "other": 0.6, "torch": 0.2, "compile": 0.1},
    # N = 8192: the rule declines (infeasible)
    ("matmul-max", "64x64x8192"): {"default": 1.0, "seed": None, "other": 2.0, "torch": 0.5, "compile": 0.4},
}


def _modules() -> tuple[ModuleType, ModuleType]:
    """The study's runner and definition, as `autotune experiment` loads them."""
    name = load_experiment(STUDY_DIR).name
    return import_module(name + ".runner"), import_module(name + ".definition")


def _tiles(params) -> tuple:
    return params["block_sizes[0]"], params["block_sizes[1]"], params["num_warps"], params["num_stages"]


def _record_cell(db: Path, kernel: str, shape: str, times: dict, dtype: str = "bfloat16", scale: float = 1.0,
                 device: str = "cpu") -> dict:
    """One cell recorded by the runner's job (bound on the CPU, measured by a fake)."""
    runner, d = _modules()
    job = runner.CellJob(d.Cell(kernel, shape, dtype, "fixture-regime", "fixture table"))
    item = job.plan("meta")
    labelled = {label: c for label, c, _ in item["candidates"] if c is not None}
    seed = next((_tiles(c.params) for label, c in labelled.items() if label.startswith("seed ")), None)
    default = _tiles(labelled["default"].params)

    def cost(params):
        tiles = _tiles(params)
        value = times["seed"] if tiles == seed else times["default"] if tiles == default else times["other"]
        return value * scale if isinstance(value, float) else value

    fake = FakeEvaluator(cost, baselines={"torch": times["torch"], "torch.compile": times["compile"]})
    return job(db, device=device, evaluator=fake)


@pytest.fixture(scope="module")
def study_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("seed_study") / "study.db"
    runner, _ = _modules()
    bind = runner.bind

    def bind_with_a_helion_seed(kernel, shape, dtype, device):
        task = bind(kernel, shape, dtype, device)
        if kernel == "matmul-rmsnorm":
            task.space.extras["compiler_seeds"] = [HELION_SEED]
        return task

    rmsnorm = FIXTURE["matmul-rmsnorm", "256x128x512"]
    _record_cell(path, "matmul-rmsnorm", "256x128x512", rmsnorm, scale=3.0)  # older: superseded below
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "bind", bind_with_a_helion_seed)
        for (kernel, shape), times in FIXTURE.items():
            _record_cell(path, kernel, shape, times)
    # Another dtype, and a session of the heuristic_seeds script (not tagged with the study).
    _record_cell(path, "matmul-rmsnorm", "256x128x512", rmsnorm, dtype="float32")
    item = hs.plan("matmul-sum", "256x128x512", "bfloat16", "cpu", sample=2, seed=0)
    hs.measure(item, argparse.Namespace(db=str(path)), evaluator=FakeEvaluator(lambda p: 0.01))
    return path


@pytest.fixture(scope="module")
def report_dir(study_db, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    code = cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(study_db), "--out", str(out),
                     "--dtype", "bfloat16"])
    assert code == 0
    return out


def _cells(report_dir: Path) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads((report_dir / "results.json").read_text())["cells"]}


def test_report_files_are_written(report_dir):
    for name in ("README.md", "results.json", "seed_vs_default.png", "seed_vs_baselines.png"):
        assert (report_dir / name).is_file(), name
    for name in ("seed_vs_default.png", "seed_vs_baselines.png"):
        assert (report_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rows_hold_the_recorded_times_and_ratios(report_dir):
    cells = _cells(report_dir)
    assert list(cells) == [f"{k} {s} bfloat16" for k, s in FIXTURE]  # no float32, no untagged session
    rms = cells["matmul-rmsnorm 256x128x512 bfloat16"]  # the later session, not the older 3x slower one
    assert rms["seed"]["ms"] == pytest.approx(0.5) and rms["default"]["ms"] == pytest.approx(2.0)
    assert rms["grid_ms"] == pytest.approx(0.49) and rms["grid_ok"] == rms["grid_n"] > 10
    assert rms["seed_vs_default"] == pytest.approx(4.0) and rms["seed_vs_grid_best"] == pytest.approx(0.98)
    assert rms["seed_vs_torch_compile"] == pytest.approx(0.5) and rms["seed_vs_torch"] == pytest.approx(2.0)
    assert rms["seed_vs_helion_seed"] == pytest.approx(0.98)  # Helion's seed is a grid point (0.49 ms)
    # 256 rows: M_BLOCK 16 and 8 warps (16 programs for 132 SMs), so the wide K band
    assert rms["seed_label"] == "seed 1: matmul_epilogue_resident"
    assert rms["seed_tiles"].startswith("M 16, K 64, 8 warps")
    assert rms["regime"] == "fixture-regime" and not rms["rescue"] and not rms["infeasible"]
    ln = cells["matmul-layernorm 128x64x1024 bfloat16"]
    assert ln["rescue"] and ln["default"] == {"ms": None, "status": "out_of_resources"}
    assert ln["seed_vs_default"] is None and ln["seed_vs_grid_best"] == pytest.approx(0.8)
    sm = cells["matmul-softmax 256x128x256 bfloat16"]
    assert sm["grid_ms"] == pytest.approx(0.3) and sm["seed_vs_default"] == pytest.approx(0.75)
    mx = cells["matmul-max 64x64x8192 bfloat16"]
    assert mx["infeasible"] and mx["seed"] is None and "K_BLOCK=16 with one buffer" in mx["seed_label"]
    assert mx["helion_seed"] is None and mx["grid_ms"] == pytest.approx(1.0)


def test_markdown_marks_rescues_and_infeasible_cells(report_dir):
    text = (report_dir / "README.md").read_text()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| matmul-")}
    assert "| rescue |" in rows["matmul-layernorm"] and "| out_of_resources |" in rows["matmul-layernorm"]
    assert "| infeasible: matmul_epilogue_resident: N=8192" in rows["matmul-max"]
    assert "| infeasible |" in rows["matmul-max"]
    assert "| 4.00x | 0.98x | 0.50x | 0.98x |" in rows["matmul-rmsnorm"]
    assert "| 0.75x | 0.75x | 0.25x | - |" in rows["matmul-softmax"]
    assert "Not recorded yet (25)" in text  # the study's own bf16 cells
    assert "seed/Helion's own seed is '-'" not in text  # one cell evaluated a Helion seed


def test_targets_are_computed_from_the_cells(report_dir):
    targets = json.loads((report_dir / "results.json").read_text())["targets"]
    assert targets["geomean"] == pytest.approx(math.sqrt(4.0 * 0.75)) and targets["geomean_cells"] == 2
    assert targets["geomean_second_table"] is None  # no fixture cell is from seed 004's second table
    assert targets["slower"] == ["matmul-softmax 256x128x256 bfloat16"]
    assert (targets["near_grid"], targets["near_grid_of"]) == (1, 3)
    assert targets["rescues"] == ["matmul-layernorm 128x64x1024 bfloat16"]
    assert targets["infeasible"] == ["matmul-max 64x64x8192 bfloat16"]
    text = (report_dir / "README.md").read_text().split("## Targets")[1].split("## Cells")[0]
    assert "1.73x (target >= 6.9x: not met)" in text
    assert "slower than the default: 1 (target 0: not met): matmul-softmax" in text
    assert "1/3 = 33% (target >= 90%: not met)" in text
    assert "rescues (the default fails, the seed runs): 1 (seed 004 reports 6)" in text


def test_all_dtypes_and_the_helion_seed_note(study_db, tmp_path):
    """`--dtype all` reports every dtype's cells; where no cell evaluated a Helion seed, a note says why."""
    out = tmp_path / "all"
    assert cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(study_db), "--out", str(out),
                     "--dtype", "all"]) == 0
    assert "matmul-rmsnorm 256x128x512 float32" in _cells(out)
    out32 = tmp_path / "fp32"
    assert cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(study_db), "--out", str(out32),
                     "--dtype", "float32"]) == 0
    assert list(_cells(out32)) == ["matmul-rmsnorm 256x128x512 float32"]
    assert "seed/Helion's own seed is '-'" in (out32 / "README.md").read_text()


def test_every_cell_plans_on_meta_tensors_and_the_rule_seeds_it():
    """Planning binds nothing real: each of seed 004's cells (up to 131072x8192x2048) binds on meta
    tensors, the rule seeds it, and the grid holds the default and only points of the space."""
    runner, d = _modules()
    assert len(d.CELLS) == 30 and len({c.name for c in d.CELLS}) == 30
    for cell in d.CELLS:
        item = runner.CellJob(cell).plan("meta")
        labels = {label: c for label, c, _ in item["candidates"]}
        assert labels["default"] is not None and labels["seed 1: matmul_epilogue_resident"] is not None, cell
        assert not item["analysis"].outcome.declined, cell
        grid = [c for label, c in labels.items() if label.startswith("grid ")]
        assert 20 <= len(grid) <= 72 and all(c is not None for c in grid), cell
        assert labels["default"].key in {c.key for c in grid}, cell


def test_the_shapes_only_binding_is_the_cpu_binding():
    """The plan's shapes-only binding (stride-0 CPU tensors) gives the space, default and rule
    seed of a CPU binding over real tensors, so a report made anywhere scores the same seed."""
    from heuristics import analyse

    runner, d = _modules()
    for kernel, shape, dtype in (("matmul-layernorm", "256x128x512", "bfloat16"),
                                 ("matmul-softmax", "128x256x1024", "float32")):
        shapes_only, real = (runner.bind(kernel, shape, dtype, device) for device in ("meta", "cpu"))
        assert shapes_only.fingerprint == real.fingerprint
        assert shapes_only.default_candidate().key == real.default_candidate().key
        seeds = [[s.params for s in analyse(task).outcome.seeds] for task in (shapes_only, real)]
        assert seeds[0] and seeds[0] == seeds[1]


def test_the_budget_caps_the_grid_to_a_seeded_sample():
    runner, d = _modules()
    cell = d.CELLS[0]
    first = runner.CellJob(cell, budget=5).plan("meta")
    again = runner.CellJob(cell, budget=5).plan("meta")
    keys = [[c.key for label, c, _ in item["candidates"] if label.startswith("grid ")] for item in (first, again)]
    assert len(keys[0]) == 5 and keys[0] == keys[1]


def _options(db: Path, **extra) -> ExperimentOptions:
    return ExperimentOptions(folder=STUDY_DIR, db=db, out=Path("unused"), **extra)


def test_runner_plans_by_dtype_and_shape(tmp_path):
    runner, d = _modules()
    bf16 = runner.plan(_options(tmp_path / "x.db", dtype="bfloat16"))
    assert len(bf16) == 25 and all(job.cell.dtype == "bfloat16" for job in bf16)
    assert [job.cell for job in bf16] == [c for c in d.CELLS if c.dtype == "bfloat16"]
    assert len(runner.plan(_options(tmp_path / "x.db", dtype="float32"))) == 5
    assert len(runner.plan(_options(tmp_path / "x.db", dtype="all"))) == 30
    wide = runner.plan(_options(tmp_path / "x.db", dtype="bfloat16", shapes=("131072x512x4096",), budget=7))
    assert [job.cell.kernel for job in wide] == ["matmul-layernorm", "matmul-rmsnorm", "matmul-l2norm",
                                                 "matmul-logsumexp"]
    assert {job.budget for job in wide} == {7} and {job.cell.regime for job in wide} == {"larger-N"}
    only = runner.plan(_options(tmp_path / "x.db", dtype="all", methods=("matmul-softmax",)))
    assert [job.cell.shape for job in only] == [c.shape for c in d.CELLS if c.kernel == "matmul-softmax"]
    with pytest.raises(UserError, match="matmul-nothing"):
        runner.plan(_options(tmp_path / "x.db", dtype="all", methods=("matmul-nothing",)))


def test_runner_skips_recorded_cells_and_survives_a_failing_one(study_db, tmp_path, monkeypatch):
    runner, d = _modules()
    db = tmp_path / "copy.db"
    shutil.copy(study_db, db)
    done = d.CELLS[5]  # a study cell, recorded here on meta tensors
    _record_cell(db, done.kernel, done.shape, FIXTURE["matmul-softmax", "256x128x256"], device="meta")
    assert done.name in runner.recorded_cells(db, "bfloat16")
    calls: list[str] = []

    def fake_call(job, db_path, **_):
        calls.append(job.name)
        if job.name == d.CELLS[0].name:
            raise RuntimeError("injected")
        return {"configs": 1}

    monkeypatch.setattr("autotune.tuning.gpu_available", lambda: True)
    monkeypatch.setattr(runner.CellJob, "__call__", fake_call)
    lines: list[str] = []
    console = type("Console", (), {"print": lambda self, text: lines.append(str(text)),
                                   "rule": lambda self, text: lines.append(str(text))})()
    runner.run(_options(db, dtype="bfloat16"), console)
    assert len(calls) == 24 and done.name not in calls
    assert any("cell failed" in line and "injected" in line for line in lines)
    assert any(line.startswith("cell 24/24:") for line in lines)
    calls.clear()
    runner.run(_options(db, dtype="bfloat16", again=True), console)
    assert len(calls) == 25


def _cell_evaluator(interrupt_after: int | None = None) -> FakeEvaluator:
    return FakeEvaluator(lambda params: 0.5 if params["num_warps"] == 4 else 0.7, baselines={"torch": 1.0},
                         interrupt_after=interrupt_after)


def test_a_cell_cut_short_keeps_its_results_and_resumes_with_the_rest(tmp_path):
    runner, d = _modules()
    db = tmp_path / "cut.db"
    job = runner.CellJob(d.Cell("matmul-rmsnorm", "256x128x512", "bfloat16", "fixture-regime", "fixture table"))
    total = len({c.key for _, c, _ in job.plan("meta")["candidates"] if c is not None})
    with pytest.raises(KeyboardInterrupt):
        job(db, device="meta", evaluator=_cell_evaluator(interrupt_after=7))
    cache = Cache.open(db)
    try:
        (cut,) = cache.sessions()
        assert cut["exit_reason"] == "interrupted" and cut["evaluations"] == 7  # each result written as it came
    finally:
        cache.close()
    assert job.name not in runner.recorded_cells(db, "bfloat16")  # an unfinished cell is not reported

    second = _cell_evaluator()
    summary = job(db, device="meta", evaluator=second)
    assert summary["resumed"] == 7 and summary["configs"] == total
    assert len(second.calls) == total - 7  # only what the first run had not measured
    cache = Cache.open(db)
    try:
        (done,) = cache.sessions()  # the same session, now finished
        assert done["id"] == cut["id"] and done["ended"] is not None and done["evaluations"] == total
        assert set(cache.baselines(session_id=done["id"])) == {"torch"}
    finally:
        cache.close()
    assert job.name in runner.recorded_cells(db, "bfloat16")
    # A finished cell measured again (--again) is a new session, not a resumption.
    assert job(db, device="meta", evaluator=_cell_evaluator())["resumed"] == 0


def test_jobs_unpickle_where_the_private_module_does_not_exist(tmp_path):
    """Dask workers import nothing of the study: its jobs must travel by value."""
    cloudpickle = pytest.importorskip("cloudpickle")
    runner, d = _modules()
    runner.send_by_value()
    (tmp_path / "job.pkl").write_bytes(cloudpickle.dumps(runner.CellJob(d.CELLS[3], budget=4)))
    done = run_python("import pickle; job = pickle.load(open('job.pkl', 'rb')); print(job.name, job.budget)",
                      cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split() == [*d.CELLS[3].name.split(), "4"], done.stderr


@pytest.mark.parametrize("argv, words", [
    (["experiment", "run", str(STUDY_DIR), "--db", "x.db", "--dtype", "bfloat16"], ["GPU", "experiment report"]),
    (["experiment", "run", str(STUDY_DIR), "--dtype", "float16"], ["no float16 cells", "bfloat16"]),
    (["experiment", "run", str(STUDY_DIR), "--dtype", "bfloat16", "--shapes", "7x7x7"], ["7x7x7", "not in"]),
    (["experiment", "report", str(STUDY_DIR), "--db", "missing.db", "--dtype", "bfloat16"], ["missing.db does not exist"]),
])
def test_bad_requests_are_one_line(argv, words, tmp_path, capsys):
    line = assert_one_line_error(*run_main(argv, capsys))
    for word in words:
        assert word in line, line
    assert not list(tmp_path.glob("*.db"))


def test_a_database_without_the_study_is_one_line(tmp_path, capsys):
    Cache.open(tmp_path / "empty.db", create=True).close()
    code = cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(tmp_path / "empty.db"),
                     "--dtype", "bfloat16", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no finished seed_study session for bfloat16:" in err
    assert not (tmp_path / "r").exists()
    code = cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(tmp_path / "empty.db"),
                     "--dtype", "bfloat16", "--shapes", "1024x1024x1024", "--out", str(tmp_path / "r")])
    assert code == 2 and "for bfloat16 at 1024x1024x1024:" in capsys.readouterr().err


# -- what-if: rule variants scored on the recorded grids ----------------------------------------
def _whatif(study_db: Path, values: dict) -> dict:
    from experiments.seed_study.whatif import compare

    return {c.cell: c for c in compare(study_db, "bfloat16", values)}


def test_the_present_rule_replays_to_its_recorded_seeds(study_db):
    found = _whatif(study_db, {})
    assert list(found) == [f"{k} {s} bfloat16" for k, s in FIXTURE]
    for (kernel, shape), times in FIXTURE.items():
        row = found[f"{kernel} {shape} bfloat16"]
        assert row.variant == row.present
        if times["seed"] is None:
            assert row.variant is None and row.variant_status == "declined"
        else:
            assert row.variant_ms == row.present_ms == times["seed"]


def test_a_variant_seed_inside_the_grid_gets_the_grids_time_and_one_outside_is_said_so(study_db):
    smaller_k = _whatif(study_db, {"WIDE_K_BLOCK": 32})  # no K_BLOCK wider than 32
    moved = smaller_k["matmul-rmsnorm 256x128x512 bfloat16"]
    assert moved.present == (16, 64, 8, 3) and moved.variant == (16, 32, 8, 3)
    assert moved.variant_ms == FIXTURE["matmul-rmsnorm", "256x128x512"]["other"]  # a grid point's recorded time
    kept = smaller_k["matmul-layernorm 128x64x1024 bfloat16"]
    assert kept.variant == kept.present and kept.variant_ms == 1.0
    wider = _whatif(study_db, {"WARPS_SMALL": 16, "WARPS_LARGE": 16})
    outside = wider["matmul-softmax 256x128x256 bfloat16"]
    assert outside.variant == (16, 64, 16, 3) and outside.variant_ms is None  # WARPS_LARGE: the wide K band
    assert outside.variant_status == "outside the grid"


def test_the_whatif_script_prints_its_table_and_refuses_bad_constants(study_db, capsys):
    from experiments.seed_study.whatif import main

    assert main(["--db", str(study_db), "--dtype", "bfloat16", "--set", "WIDE_K_BLOCK=32"]) == 0
    out = capsys.readouterr().out
    assert "WIDE_K_BLOCK=32" in out and "the variant changes the seed in 2" in out
    assert "| matmul-rmsnorm 256x128x512 bfloat16 | M 16, K 64, 8 warps, 3 stages | 0.5000 | " \
           "M 16, K 32, 8 warps, 3 stages | 0.4900 |" in out
    for bad, words in (("NAME=x", "one of the rule's constants"), ("K_BLOCK_BANDS=a", "not a value of that type"),
                       ("STAGED_SMEM_FRACTION", "expected NAME=VALUE")):
        assert main(["--db", str(study_db), "--set", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err


def test_the_report_scores_the_rule_as_checked_out_when_it_changed_since_recording(study_db, tmp_path, monkeypatch):
    from heuristics import matmul_epilogue as rule

    def report(out: Path) -> str:
        code = cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(study_db), "--out", str(out),
                         "--dtype", "bfloat16"])
        assert code == 0
        return (out / "README.md").read_text()

    assert "rule as checked out" not in report(tmp_path / "same")  # recorded with this very rule
    monkeypatch.setattr(rule, "WIDE_K_BLOCK", 32)  # the rule "changed" after the cells were recorded
    text = report(tmp_path / "changed")
    assert "## The rule as checked out, on the recorded grids" in text
    assert "| matmul-rmsnorm 256x128x512 bfloat16 | M 16, K 64, 8 warps, 3 stages | 0.5000 | " \
           "M 16, K 32, 8 warps, 3 stages | 0.4900 |" in text
    # rmsnorm: default 2.0 / 0.49; softmax: 0.3 / its grid's 0.6; the rescue cell has no timed default
    assert "seed/default, geometric mean over the 2 cells where both were timed: " \
           f"{math.sqrt(2.0 / 0.49 * 0.3 / 0.6):.2f}x" in text
    assert "slower than the default: 1 (matmul-softmax 256x128x256 bfloat16)" in text


def test_each_gpus_cells_are_reported_and_skipped_apart(study_db, tmp_path):
    """Cells recorded on two GPUs: the report reads one (named, or refused where neither the
    data nor the shipped GPU decides), and the runner skips a cell only where the GPU recording
    now has measured it."""
    import shutil
    import sqlite3

    from autotune.errors import UserError

    runner, _ = _modules()
    data = import_module(load_experiment(STUDY_DIR).name + ".data")
    db = tmp_path / "two.db"
    shutil.copy(study_db, db)
    with sqlite3.connect(db) as conn:  # the rmsnorm cell as if measured on another card
        conn.execute("UPDATE sessions SET device = 'NVIDIA H200' WHERE kernel = 'matmul-rmsnorm'")
    conn.close()
    on_other = data.load_study(db, "bfloat16", shipped=None, device="NVIDIA H200")
    on_cpu = data.load_study(db, "bfloat16", shipped=None, device="cpu")
    assert [r.cell.kernel for r in on_other] == ["matmul-rmsnorm"] and {r.device for r in on_other} == {"NVIDIA H200"}
    assert on_cpu and "matmul-rmsnorm" not in {r.cell.kernel for r in on_cpu}
    with pytest.raises(UserError, match="several devices"):
        data.load_study(db, "bfloat16", shipped=None)
    assert runner.recorded_cells(db, "bfloat16", "NVIDIA H200") == {r.cell.name for r in on_other}
    assert runner.recorded_cells(db, "bfloat16", "cpu") == {r.cell.name for r in on_cpu}
