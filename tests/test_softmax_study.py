"""The softmax study experiment: its report regenerates from a small recorded fixture on a CPU,
and its runner plans, skips and refuses as documented."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from autotune import cli
from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.experiment import ExperimentOptions, load_experiment
from autotune.kernels import get_kernel
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.task import bind_live
from conftest import REPO, assert_one_line_error, hashed_cost, run_main

STUDY_DIR = REPO / "experiments" / "softmax_study"
SHAPES = {"32x128": 0.004, "4096x4096": 0.05}  # shape -> the fixture's device copy time (ms)
# Per shape: a scale for each tuned kernel's fake times; at 32x128 torch eager (1.2x copy)
# stays faster than every tuned kernel, at 4096x4096 softmax-split wins.
SCALES = {"32x128": {"softmax": 1.6, "softmax-triton": 1.4, "softmax-split": 1.3},
          "4096x4096": {"softmax": 1.6, "softmax-triton": 1.4, "softmax-split": 1.05}}


def _session(cache: Cache, kernel: str, shape: str, method: str | None, *, budget: int, scale: float,
             seeds=(), extra=None, dtype=torch.float16, options=None) -> int:
    dims = tuple(int(x) for x in shape.split("x"))
    task = bind_live(get_kernel(kernel), dims, dtype, "cpu")
    copy_ms = SHAPES[shape]
    evaluator = FakeEvaluator(lambda p: copy_ms * scale * (1 + 0.5 * hashed_cost(p)),
                              baselines={"torch.softmax": copy_ms * (1.2 if shape == "32x128" else 2.0),
                                         "torch.compile": copy_ms * 1.8, "device copy": copy_ms})
    tags = {"study": "softmax_study", "method": method, "job_started": time.time() - 3, **(extra or {})}
    strategy = get_strategy("random")(task.space, seed=0)
    settings = SessionSettings("random", 0, budget, generation_size=4, mode="gpu")
    if options is None:
        options = {"experiment": tags} if method else {}
    return Session(task, evaluator, strategy, settings, cache, options=options,
                   seeds=list(seeds)).run().session_id


@pytest.fixture(scope="module")
def study_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("study") / "study.db"
    cache = Cache.open(path, create=True)
    for shape in SHAPES:
        for kernel, scale in SCALES[shape].items():
            _session(cache, kernel, shape, f"tuned {kernel}", budget=6, scale=scale)
        dims = tuple(int(x) for x in shape.split("x"))
        pick = get_kernel("softmax")
        task = bind_live(pick, dims, torch.float16, "cpu")
        point = task.space.sample(__import__("random").Random(5))
        _session(cache, "softmax", shape, "helion-quick", budget=1, scale=1.3, seeds=[("user", point)],
                 extra={"helion_wall_s": 104.5, "helion_configs": 74})
    # Faster, but an untagged session and a study session of another dtype: neither may appear.
    _session(cache, "softmax-triton", "32x128", None, budget=2, scale=0.1)
    # Older scripts tagged sessions with a bare study name: read as another study, never a crash.
    _session(cache, "softmax-triton", "32x128", None, budget=2, scale=0.1,
             options={"experiment": "strategies_vs_helion"})
    _session(cache, "softmax-triton", "32x128", "tuned softmax-triton", budget=2, scale=0.1, dtype=torch.float32)
    cache.close()
    return path


@pytest.fixture(scope="module")
def report_dir(study_db, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    code = cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(study_db), "--out", str(out)])
    assert code == 0
    return out


def test_report_regenerates_from_the_database_alone(report_dir):
    for name in ("README.md", "bandwidth.png", "roofline.png", "timelines.png", "results.json"):
        assert (report_dir / name).is_file(), name
    for name in ("bandwidth.png", "roofline.png", "timelines.png"):
        assert (report_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (report_dir / "README.md").read_text()
    assert "## 32x128" in text and "## 4096x4096" in text
    assert "Launch-bound" in text.split("## 4096x4096")[0].split("## 32x128")[1]
    assert "Launch-bound" not in text.split("## 4096x4096")[1].split("##")[0]


def test_report_rows_cover_every_method_with_accuracy(report_dir):
    results = json.loads((report_dir / "results.json").read_text())
    assert [r["shape"] for r in results] == [[32, 128], [4096, 4096]]
    for shape in results:
        methods = {row["method"] for row in shape["rows"]}
        assert methods == {"tuned softmax", "tuned softmax-triton", "tuned softmax-split", "helion-quick",
                           "Helion default config", "torch.softmax", "torch.compile"}
        for row in shape["rows"]:
            assert row["rel_error"] is not None and row["median_ms"] > 0
            assert row["gbps"] == pytest.approx(shape["bytes_moved"] / (row["median_ms"] * 1e6))
        quick = next(r for r in shape["rows"] if r["method"] == "helion-quick")
        assert quick["tuning_wall_s"] == 104.5 and quick["configs"] == 74 and not quick["tuned"]
        tuned = next(r for r in shape["rows"] if r["method"] == "tuned softmax-split")
        assert tuned["tuned"] and tuned["configs"] >= 6 and 0 < tuned["tuning_wall_s"] < 600
        # the search alone leaves out the 3 s the fixture's job spent before its session started
        assert 0 < tuned["search_s"] <= tuned["tuning_wall_s"] - 3
        assert quick["search_s"] == 104.5


def test_each_shape_says_what_its_tuning_cost_against_helion_quick(report_dir):
    results = {tuple(r["shape"]): r for r in json.loads((report_dir / "results.json").read_text())}
    text = (report_dir / "README.md").read_text()
    for shape, label in (((32, 128), "32x128"), ((4096, 4096), "4096x4096")):
        section = text.split(f"## {label}")[1].split("## ")[0]
        tuned = [row for row in results[shape]["rows"] if row["tuned"]]
        total = sum(row["search_s"] for row in tuned)
        assert f"our {len(tuned)} kernels searched {total:.0f} s in all" in section
        assert "Helion's quick autotune of one kernel took 104 s" in section  # the fixture's 104.5 s


def test_a_tuned_best_within_the_timing_noise_is_a_tie_not_a_win():
    from importlib import import_module

    report = import_module(load_experiment(STUDY_DIR).name + ".report")
    from experiments.softmax_study.data import MethodRow, ShapeResult

    def shape(nbytes: int, tuned_ms: float) -> ShapeResult:
        return ShapeResult((1, 1), nbytes, 0.09, [MethodRow("tuned softmax", tuned_ms, None, None, 0.0, tuned=True),
                                                 MethodRow("torch.softmax", 0.100, None, None, 0.0)])

    big, small = 2 * report.SMALL_BYTES, report.SMALL_BYTES // 2
    assert report.verdict(shape(big, 0.0990)).startswith("yes (1.010x torch.softmax")
    assert report.verdict(shape(big, 0.1005)).startswith("tie (0.995x")
    assert report.verdict(shape(big, 0.1030)).startswith("no (0.971x")
    assert report.verdict(shape(small, 0.1030)).startswith("tie")  # launch-bound: 5% of noise
    assert report.verdict(shape(small, 0.1100)).startswith("no")


def test_winners_and_verdicts_follow_the_recorded_times(report_dir):
    text = (report_dir / "README.md").read_text()
    summary = text.split("## Winner per shape")[1].split("## 32x128")[0]
    small = next(line for line in summary.splitlines() if line.startswith("| 32x128 "))
    large = next(line for line in summary.splitlines() if line.startswith("| 4096x4096 "))
    assert "| torch.softmax |" in small and "| no (" in small  # eager at 1.2x copy beats kernels >= 1.3x
    assert "| tuned softmax-split |" in large and "| yes (" in large


def test_frozen_configs_are_valid_python(report_dir):
    text = (report_dir / "README.md").read_text()
    frozen = text.split("## Frozen configs of the tuned winners")[1]
    blocks = [b.split("```")[0] for b in frozen.split("```python\n")[1:]]
    assert len(blocks) == 2
    for block in blocks:
        compile(block, "<frozen>", "exec")
        assert "triton.Config(" in block or "helion.Config(" in block


def test_report_reads_the_shipped_data_when_the_user_has_recorded_nothing(study_db, report_dir, tmp_path):
    """On a fresh checkout there is no user.db: the report is regenerated from the shipped file,
    names it as its source, and creates no user database."""
    out = tmp_path / "r"
    code = cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(tmp_path / "user.db"),
                     "--shipped", str(study_db), "--out", str(out)])
    assert code == 0 and not (tmp_path / "user.db").exists()
    text = (out / "README.md").read_text()
    assert f"Regenerated from `{study_db}` by" in text
    assert text.split("\n", 3)[3] == (report_dir / "README.md").read_text().split("\n", 3)[3]


def test_other_dtypes_and_untagged_sessions_are_left_out(study_db, tmp_path, capsys):
    code = cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(study_db), "--dtype", "bfloat16",
                     "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "no softmax_study sessions for bfloat16" in err and not (tmp_path / "r").exists()


def test_runner_plans_every_job_and_skips_recorded_ones(study_db):
    study = load_experiment(STUDY_DIR)
    from importlib import import_module

    runner = import_module(study.name + ".runner")
    options = ExperimentOptions(folder=STUDY_DIR, db=study_db, out=Path("unused"), shapes=("32x128",))
    jobs = runner.plan(options)
    # Helion quick first, then every tuned kernel of the definition in its order (the list grows
    # as formulations are added; the first seven are seed 000's and the long-row ones).
    methods = [job.method for job in jobs]
    assert methods == ["helion-quick", *(f"tuned {kernel}" for kernel in runner.d.TUNED_KERNELS)]
    assert methods[:8] == ["helion-quick", "tuned softmax", "tuned softmax-online", "tuned softmax-triton",
                           "tuned softmax-split", "tuned softmax-cooperative", "tuned softmax-lookback",
                           "tuned softmax-persistent"]
    chosen = runner.plan(replace(options, shapes=(), methods=("tuned softmax-cooperative",)))
    assert [(job.shape, job.method) for job in chosen] == [(s, "tuned softmax-cooperative") for s in runner.d.SHAPES]
    done = runner.recorded_jobs(study_db, "float16")
    assert ("32x128", "tuned softmax-split") in done and ("32x128", "tuned softmax-online") not in done
    assert ("4096x4096", "helion-quick") in done


def test_a_tune_job_records_its_experiment_tags(study_db, tmp_path):
    """The job plumbing, on a CPU: with no GPU the tuning replays from the recorded space, and the
    replay session carries the study's tags like a measured one would."""
    import shutil

    study = load_experiment(STUDY_DIR)
    from importlib import import_module

    runner = import_module(study.name + ".runner")
    db = tmp_path / "copy.db"
    shutil.copy(study_db, db)
    outcome = runner.TuneJob("softmax-triton", "4096x4096", "float16", budget=3, seconds=30)(db)
    journal = Cache.open(db)  # the replay is recorded in the job's database, beside what it replays
    session = journal.session(outcome["session"])
    assert session["options"]["experiment"]["study"] == "softmax_study"
    assert session["options"]["experiment"]["method"] == "tuned softmax-triton"
    assert session["strategy"] == "pattern" and session["budget"] == 3
    whole = runner.TuneJob("softmax-split", "4096x4096", "float16", budget=60, seconds=30)(db)
    journal.close()
    journal = Cache.open(db)
    assert journal.session(whole["session"])["strategy"] == "grid"  # a space within the budget, measured whole


@pytest.mark.parametrize("argv, words", [
    (["experiment", "run", str(STUDY_DIR), "--db", "x.db"], ["GPU", "experiment report"]),
    (["experiment", "run", str(STUDY_DIR), "--shapes", "7x7"], ["7x7", "not in the study"]),
    (["experiment", "run", str(STUDY_DIR), "--methods", "tuned nothing"], ["tuned nothing", "not in the study"]),
    (["experiment", "report", "no/such/folder"], ["no experiment folder"]),
    (["experiment", "report", str(REPO / "experiments" / "reports")], ["no __init__.py"]),
    (["experiment", "report", str(STUDY_DIR), "--db", "missing.db"], ["missing.db does not exist"]),
    (["experiment"], ["run or report"]),
])
def test_bad_experiment_requests_are_one_line(argv, words, tmp_path, capsys):
    line = assert_one_line_error(*run_main(argv, capsys))
    for word in words:
        assert word in line, line
    assert not list(tmp_path.glob("*.db"))


def test_study_jobs_pickle_for_workers(tmp_path):
    """Jobs travel to Dask workers: a study inside an importable package is imported under its
    real name (so its jobs pickle by reference); a copy elsewhere still loads, privately."""
    import pickle
    import shutil

    study = load_experiment(STUDY_DIR)
    assert study.name == "experiments.softmax_study"
    from experiments.softmax_study.runner import TuneJob

    job = TuneJob("softmax-split", "1024x50257", "float16", budget=60, seconds=25)
    assert pickle.loads(pickle.dumps(job)) == job
    copy = tmp_path / "my_study"
    shutil.copytree(STUDY_DIR, copy, ignore=shutil.ignore_patterns("report", "__pycache__"))
    private = load_experiment(copy)
    assert private.name.startswith("_autotune_experiment_my_study_") and callable(private.report)


def test_rows_measured_on_an_earlier_kernel_source_are_marked(study_db, tmp_path):
    import shutil
    import sqlite3

    db = tmp_path / "older.db"
    shutil.copy(study_db, db)
    with sqlite3.connect(db) as connection:  # as if softmax-split had been edited since its 4096x4096 session
        changed = connection.execute(
            "UPDATE spaces SET source_hash = 'an-earlier-version' WHERE kernel = 'softmax-split'"
            " AND shape = '[4096, 4096]' AND dtype = 'float16'").rowcount
    assert changed == 1
    out = tmp_path / "report"
    assert cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(db), "--out", str(out)]) == 0
    text = (out / "README.md").read_text()
    marked = [line for line in text.splitlines() if line.startswith("| ") and "†" in line]
    assert len(marked) == 1 and "tuned softmax-split" in marked[0]
    assert "† measured on an earlier version of the kernel's source" in text.split("## 4096x4096")[1]
    assert "†" not in text.split("## 32x128")[1].split("## 4096x4096")[0]
    rows = {(r["method"], tuple(s["shape"])): r["earlier_source"]
            for s in json.loads((out / "results.json").read_text()) for r in s["rows"]}
    assert rows[("tuned softmax-split", (4096, 4096))] is True
    assert rows[("tuned softmax-split", (32, 128))] is False


def test_cold_and_warm_sessions_are_reported_apart(tmp_path):
    """Each tuned row names what its session started from (its recorded seed_from and the seeds
    it got) and where its winner came from; a section sets the cold and warm sessions apart."""
    import random
    import sqlite3

    db = tmp_path / "starts.db"
    cache = Cache.open(db, create=True)
    task = bind_live(get_kernel("softmax-triton"), (4096, 4096), torch.float16, "cpu")
    seeds = [("heuristic", task.space.sample(random.Random(n))) for n in (1, 2)]
    tags = {"study": "softmax_study", "job_started": time.time() - 3}
    cold = _session(cache, "softmax-triton", "4096x4096", None, budget=4, scale=1.4,
                    options={"experiment": {**tags, "method": "tuned softmax-triton"}, "seed_from": "default"})
    warm = _session(cache, "softmax-split", "4096x4096", None, budget=4, scale=1.05, seeds=[],
                    options={"experiment": {**tags, "method": "tuned softmax-split"}, "seed_from": "default,heuristic"})
    seeded = _session(cache, "softmax-triton", "4096x4096", None, budget=4, scale=1.4, seeds=seeds,
                      options={"experiment": {**tags, "method": "tuned softmax-online"},
                               "seed_from": "default,heuristic", "seeds": ["heuristic", "heuristic"]})
    cache.close()
    out = tmp_path / "report"
    assert cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(db), "--shipped", "none",
                     "--out", str(out)]) == 0
    rows = {r["session"]: r for s in json.loads((out / "results.json").read_text()) for r in s["rows"] if r["tuned"]}
    with sqlite3.connect(db) as connection:  # the winner's origin, read independently of the report's code
        def origin_of_best(session: int) -> str:
            final = connection.execute("SELECT config_key FROM evaluations WHERE session_id = ? AND status = 'ok' "
                                       "ORDER BY generation >= 0, median_ms LIMIT 1", (session,)).fetchone()
            return connection.execute("SELECT origin FROM evaluations WHERE session_id = ? AND generation >= 0 AND "
                                      "config_key = ? ORDER BY id LIMIT 1", (session, final[0])).fetchone()[0]
        gen0 = {sid: connection.execute("SELECT COUNT(*) FROM evaluations WHERE session_id = ? AND generation = 0",
                                        (sid,)).fetchone()[0] for sid in (cold, warm, seeded)}
    assert rows[cold]["start"] == "cold" and rows[cold]["seed_from"] == "default" and rows[cold]["seeds"] == []
    # asked for heuristic seeds but got none: cold, whatever seed_from says
    assert rows[warm]["start"] == "cold" and rows[warm]["seed_from"] == "default,heuristic"
    assert rows[seeded]["start"] == "warm" and rows[seeded]["seeds"] == ["heuristic"] * (gen0[seeded] - 1)
    for sid in (cold, warm, seeded):
        assert rows[sid]["best_origin"] == origin_of_best(sid)
    text = (out / "README.md").read_text()
    starts = text.split("## Cold and warm starts")[1].split("\n## ")[0]
    line = next(x for x in starts.splitlines() if x.startswith("| 4096x4096 "))
    assert "| 2 / 1 |" in line and "tuned softmax-online" in line.split("|")[6]
    section = text.split("## 4096x4096")[1]
    assert "| started from | best from |" in section
    assert f"warm: default,heuristic ({gen0[seeded] - 1} heuristic)" in section


def test_each_gpus_sessions_are_reported_and_skipped_apart(study_db, tmp_path):
    """A study recorded on two GPUs: the report reads one (named, or the only one, or refused
    where neither the data nor the shipped GPU decides), and the runner skips a job only where
    the GPU recording now has run it."""
    import shutil
    import sqlite3
    from importlib import import_module

    from autotune.errors import UserError

    db = tmp_path / "two.db"
    shutil.copy(study_db, db)
    with sqlite3.connect(db) as conn:  # the wider shape's sessions as if measured on another card
        conn.execute("UPDATE sessions SET device = 'NVIDIA H200' WHERE shape = ?", (json.dumps([4096, 4096]),))
    conn.close()
    study = load_experiment(STUDY_DIR)
    data, runner = (import_module(f"{study.name}.{name}") for name in ("data", "runner"))
    on_cpu = data.load_study(db, "float16", shipped=None, device="cpu")
    on_other = data.load_study(db, "float16", shipped=None, device="NVIDIA H200")
    assert [r.label for r in on_cpu] == ["32x128"] and [r.label for r in on_other] == ["4096x4096"]
    assert {r.device for r in on_cpu + on_other} == {"cpu", "NVIDIA H200"}
    with pytest.raises(UserError, match="several devices"):
        data.load_study(db, "float16", shipped=None)
    assert {shape for shape, _ in runner.recorded_jobs(db, "float16", "NVIDIA H200")} == {"4096x4096"}
    assert {shape for shape, _ in runner.recorded_jobs(db, "float16")} == {"32x128", "4096x4096"}
    out = tmp_path / "r"
    assert cli.main(["experiment", "report", str(STUDY_DIR), "--db", str(db), "--shipped", "none",
                     "--device", "NVIDIA H200", "--out", str(out)]) == 0
    assert "on NVIDIA H200" in (out / "README.md").read_text().splitlines()[0]
