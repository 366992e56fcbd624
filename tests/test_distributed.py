"""Evaluation spread over Dask workers (CPU processes with fake evaluators): the same proposals
whatever the number of workers, a killed worker's config retried once elsewhere then recorded
as a crash, one writer, where each row was measured, and whole jobs merged home."""

from __future__ import annotations

import gc
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

import autotune.store.guard as guard_module  # noqa: E402
from autotune import cli  # noqa: E402
from autotune.store.cache import SCHEMA_VERSION, Cache, CacheError  # noqa: E402
from autotune.distributed.cluster import connect, parse_workers  # noqa: E402
from autotune.distributed.evaluator import distributed_evaluator  # noqa: E402
from autotune.distributed.factories import FakeEvaluatorFactory  # noqa: E402
from autotune.distributed.jobs import run_jobs  # noqa: E402
from autotune.distributed.stream import ClusterStream, Failed  # noqa: E402
from autotune.evaluators.base import InOrder  # noqa: E402
from autotune.evaluators.fake import FakeEvaluator  # noqa: E402
from autotune.session import Session, SessionSettings  # noqa: E402
from autotune.strategies import get_strategy  # noqa: E402
from autotune.types import Status  # noqa: E402
from distributed_fakes import (KillsItsWorker, OpensTheCache, RebenchmarkingFakeFactory, RecordsASession,  # noqa: E402
                               dies, hashed_cost)
from search_spaces.space import canonical_json  # noqa: E402

STRATEGY, SEED, BUDGET = "pattern", 3, 24
WINDOW = 3  # configs in flight, the same for every cluster: the same proposals whatever the workers
OPTIONS = {"initial_population": 6}  # small generations: several of them within the budget


@pytest.fixture(scope="module")
def one_worker():
    client, close = connect("local:1")
    yield client
    close()


@pytest.fixture(scope="module")
def three_workers():
    client, close = connect("local:3")
    yield client
    close()


class RecordingStrategy:
    """Passes everything to a real strategy and remembers what it proposed, in order."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.asked = inner, []

    def ask(self, n: int) -> list:
        points = self.inner.ask(n)
        self.asked.append([canonical_json(p) for p in points])
        return points

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def tune(task, evaluator, db: Path) -> tuple[Any, RecordingStrategy, Cache]:
    """One pattern-search session into `db` (the session records the evaluator's calibration)."""
    strategy = RecordingStrategy(get_strategy(STRATEGY)(task.space, seed=SEED, **OPTIONS))
    settings = SessionSettings(strategy=STRATEGY, seed=SEED, budget=BUDGET, mode="gpu", in_flight=WINDOW)
    journal = Cache.open(db, create=True)
    try:
        outcome = Session(task, evaluator, strategy, settings, journal).run()
    finally:
        evaluator.close()
    return outcome, strategy, journal


def rows_by_generation(journal: Cache, session_id: int) -> dict[int, list[tuple[str, str, float | None]]]:
    """Each generation's (config key, status, median) rows, sorted: completion order may differ."""
    grouped: dict[int, list] = {}
    for row in journal.session_evaluations(session_id):
        grouped.setdefault(row.generation, []).append((row.candidate.key, row.result.status.value,
                                                       row.result.median_ms))
    return {generation: sorted(rows) for generation, rows in grouped.items()}


@pytest.fixture(scope="module")
def in_process(triton_task, tmp_path_factory):
    """The reference: the same session with a plain in-process fake evaluator, through the
    asynchronous loop (one config at a time, in the order asked)."""
    outcome, strategy, journal = tune(triton_task, InOrder(FakeEvaluator(hashed_cost)),
                                      tmp_path_factory.mktemp("p") / "p.db")
    return outcome, strategy.asked, rows_by_generation(journal, outcome.session_id)


# -- (a) the same proposals whatever the number of workers, (d) where each row was measured --------
@pytest.mark.parametrize("workers, batch_size", [("one_worker", 3), ("three_workers", 1), ("one_worker", None),
                                                  ("three_workers", None)])  # None: automatic
def test_same_proposals_and_rows_at_one_and_three_workers(workers, batch_size, in_process, triton_task, tmp_path,
                                                          request):
    client = request.getfixturevalue(workers)
    evaluator = distributed_evaluator(client, FakeEvaluatorFactory(hashed_cost), batch_size=batch_size,
                                      reference=triton_task.default_candidate())
    outcome, strategy, journal = tune(triton_task, evaluator, tmp_path / "d.db")
    expected_outcome, expected_asked, expected_rows = in_process
    assert strategy.asked == expected_asked and len(expected_asked) >= 3
    assert rows_by_generation(journal, outcome.session_id) == expected_rows
    assert outcome.best[0].key == expected_outcome.best[0].key and outcome.exit_reason == expected_outcome.exit_reason

    names = {f"cpu{i}" for i in range(len(client.nthreads()))}
    rows = journal.session_evaluations(outcome.session_id)
    assert {row.result.measured_on for row in rows} <= names and all(row.result.measured_on for row in rows)
    assert sum(journal.measured_on_counts(outcome.session_id).values()) == len(rows)
    calibration = journal.calibrations(outcome.session_id)
    assert set(calibration) == names  # one row per worker, all timing the same reference config
    assert {result.key for result in calibration.values()} == {triton_task.default_candidate().key}
    reference_ms = hashed_cost(triton_task.default_candidate().params)
    assert [result.median_ms for result in calibration.values()] == pytest.approx([reference_ms] * len(names))


@pytest.mark.parametrize("workers, batch_size, sizes", [
    ("one_worker", None, [9]),  # one batch per worker
    ("three_workers", None, [3, 3, 3]),
    ("three_workers", 4, [4, 4, 1]),  # an explicit size is kept
])
def test_the_automatic_batch_size_gives_one_batch_per_worker(workers, batch_size, sizes, triton_task, request,
                                                               monkeypatch):
    import autotune.distributed.evaluator as evaluator_module

    submitted: list[list[int]] = []

    def recording(client, fn, items, *extra, **options):
        if fn is evaluator_module.on_worker.evaluate:
            submitted.append([len(batch) for batch in items])
        return ClusterStream(client, fn, items, *extra, **options)

    monkeypatch.setattr(evaluator_module, "ClusterStream", recording)
    evaluator = distributed_evaluator(request.getfixturevalue(workers), FakeEvaluatorFactory(hashed_cost),
                                      batch_size=batch_size)
    candidates = generation_of(triton_task, 9)
    try:
        results = list(evaluator.evaluate(candidates))
    finally:
        evaluator.close()
    assert submitted == [sizes]
    assert sorted(r.key for r in results) == sorted(c.key for c in candidates) and all(r.ok for r in results)
    assert [c.key for batch in evaluator.batches(candidates) for c in batch] == [c.key for c in candidates]


def test_batches_split_evenly():
    from autotune.distributed.evaluator import split_evenly

    assert [len(b) for b in split_evenly(list(range(64)), 4)] == [16] * 4
    assert [len(b) for b in split_evenly(list(range(3)), 4)] == [1, 1, 1]
    assert split_evenly([], 4) == []


def test_the_final_re_timing_runs_on_one_worker(triton_task, three_workers, tmp_path):
    evaluator = distributed_evaluator(three_workers, RebenchmarkingFakeFactory())
    outcome, _strategy, journal = tune(triton_task, evaluator, tmp_path / "r.db")
    final = [row for row in journal.session_evaluations(outcome.session_id) if row.generation < 0]
    assert len(final) >= 5 and len({row.result.measured_on for row in final}) == 1  # one GPU for every contender
    assert all(row.result.median_ms == pytest.approx(hashed_cost(row.candidate.params) * 1.01) for row in final)
    assert outcome.best[1].median_ms == min(row.result.median_ms for row in final)


# -- (b) a worker killed mid-generation ------------------------------------------------------------
def _victim(in_process) -> str:
    _outcome, asked, _rows = in_process
    return asked[1][0]  # proposed in the second generation, once the workers are warm


@pytest.mark.parametrize("workers", ["one_worker", "three_workers"])
def test_a_config_whose_worker_is_killed_once_is_retried_and_recorded_ok(workers, in_process, triton_task, tmp_path,
                                                                        request):
    marker = tmp_path / "kills"
    cost = KillsItsWorker(victim=_victim(in_process), marker=str(marker))
    evaluator = distributed_evaluator(request.getfixturevalue(workers), FakeEvaluatorFactory(cost))
    outcome, strategy, journal = tune(triton_task, evaluator, tmp_path / "k.db")
    assert marker.read_text().count("killed") == 1
    assert strategy.asked == in_process[1]
    assert rows_by_generation(journal, outcome.session_id) == in_process[2]  # the victim too, measured ok


def test_a_config_that_kills_every_worker_is_recorded_as_crash_and_the_session_goes_on(in_process, triton_task,
                                                                                       three_workers, tmp_path):
    marker = tmp_path / "kills"
    victim = _victim(in_process)
    cost = KillsItsWorker(victim=victim, marker=str(marker), every_time=True)
    outcome, _strategy, journal = tune(triton_task, distributed_evaluator(three_workers, FakeEvaluatorFactory(cost)),
                                       tmp_path / "k.db")
    assert marker.read_text().count("killed") == 2  # the first attempt and one retry, no more
    rows = journal.session_evaluations(outcome.session_id)
    (crashed,) = [row for row in rows if row.result.status is not Status.OK]
    assert canonical_json(crashed.candidate.params) == victim
    assert crashed.result.status is Status.CRASH and "died twice" in crashed.result.error
    assert outcome.exit_reason == in_process[0].exit_reason
    assert outcome.evaluations == in_process[0].evaluations and len(rows) == len(set(r.candidate.key for r in rows))


def test_results_stream_back_before_their_batch_ends(triton_task, one_worker):
    evaluator = distributed_evaluator(one_worker, FakeEvaluatorFactory(hashed_cost, delay_s=0.4), batch_size=None)
    candidates = generation_of(triton_task, 6)
    assert [len(batch) for batch in evaluator.batches(candidates)] == [6]  # one batch: 2.4 s of work
    try:
        started = time.monotonic()
        arrivals = [(time.monotonic() - started, result) for result in evaluator.evaluate(candidates)]
    finally:
        evaluator.close()
    assert sorted(r.key for _, r in arrivals) == sorted(c.key for c in candidates) and all(r.ok for _, r in arrivals)
    first, last = arrivals[0][0], arrivals[-1][0]
    assert first < 1.5 and last - first > 1.0  # one by one, not all at the batch's end


def test_a_dead_workers_batch_is_retried_with_only_the_configs_still_owed(triton_task, one_worker, tmp_path):
    candidates = generation_of(triton_task, 6)
    victim = canonical_json(candidates[3].params)
    log, marker = tmp_path / "evaluated", tmp_path / "kills"
    cost = KillsItsWorker(victim=victim, marker=str(marker), log=str(log))
    evaluator = distributed_evaluator(one_worker, FakeEvaluatorFactory(cost, delay_s=0.1), batch_size=None)
    try:
        results = list(evaluator.evaluate(candidates))
    finally:
        evaluator.close()
    assert marker.read_text().count("killed") == 1
    assert sorted(r.key for r in results) == sorted(c.key for c in candidates) and all(r.ok for r in results)
    evaluated = log.read_text().splitlines()
    counts = [evaluated.count(canonical_json(c.params)) for c in candidates]
    assert counts == [1, 1, 1, 2, 1, 1]  # the three measured before the kill were not measured again


def test_a_retry_with_nothing_left_to_run_ends_the_item_without_running_it(one_worker, tmp_path):
    marker = tmp_path / "kills"
    stream = ClusterStream(one_worker, dies, ["batch"], str(marker), retry_item=lambda index, item: None)
    outcomes = []
    while not stream.finished:
        outcome = stream.next_outcome(timeout=1.0)
        if outcome is not None:
            outcomes.append(outcome)
    ((index, failed),) = outcomes
    assert index == 0 and isinstance(failed, Failed) and failed.worker_died
    assert marker.read_text().count("killed") == 1  # not submitted again


def test_a_session_that_stops_early_leaves_nothing_in_flight(triton_task, three_workers):
    evaluator = distributed_evaluator(three_workers, FakeEvaluatorFactory(hashed_cost, delay_s=0.5))
    candidates = generation_of(triton_task, 9)
    stream = evaluator.evaluate(candidates)
    first = next(stream)
    assert first.ok and first.measured_on
    stream.close()  # what the session does when its time budget runs out mid-generation
    # The rest were cancelled, not left to run and be forgotten.  A task that finished just as
    # the stream closed is released asynchronously by Dask (and the yielded task's future sits in
    # a reference cycle of Dask's until collected), so allow it a moment to go.
    deadline = time.monotonic() + 5.0
    while True:
        gc.collect()
        if not three_workers.futures or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not three_workers.futures
    evaluator.close()


def generation_of(task, count: int) -> list:
    from experiments.distributed_throughput import generation

    return generation(task, count, seed=5)


# -- (c) one writer ------------------------------------------------------------------------------
def test_a_worker_may_not_open_the_cache_and_the_driver_writes_every_row(triton_task, three_workers, tmp_path):
    db = tmp_path / "d.db"
    evaluator = distributed_evaluator(three_workers, FakeEvaluatorFactory(OpensTheCache(str(db))))
    outcome, _strategy, journal = tune(triton_task, evaluator, db)
    rows = journal.session_evaluations(outcome.session_id)
    assert len(rows) == outcome.evaluations + 1  # every evaluation, recorded by this (the driver's) process
    for row in rows:
        assert row.result.status is Status.CRASH
        assert "may not be opened in this process" in row.result.error and "distributed worker" in row.result.error
        assert "then" in row.result.error  # it failed on one worker, then on another
    reasons = three_workers.run(guard_module.writes_forbidden)
    assert all(reason and "distributed worker" in reason for reason in reasons.values())


def test_the_guard_allows_exactly_the_permitted_path(tmp_path, monkeypatch):
    monkeypatch.setattr(guard_module, "_writes_forbidden_because", None)  # restored after the test
    guard_module.forbid_writes_in_this_process("a test says so")
    with pytest.raises(CacheError, match="a test says so"):
        Cache.open(tmp_path / "shared.db", create=True)
    with guard_module.allow_database(tmp_path / "private.db"):
        Cache.open(tmp_path / "private.db", create=True).close()
        with pytest.raises(CacheError):
            Cache.open(tmp_path / "shared.db", create=True)
    with pytest.raises(CacheError):
        Cache.open(tmp_path / "private.db")
    assert not (tmp_path / "shared.db").exists()


# -- (e) whole jobs spread over workers, merged by the one writer ----------------------------------
JOBS = [RecordsASession(seed=1, rows=5), RecordsASession(seed=2, rows=3, fail_after=2),
        RecordsASession(seed=3, rows=4)]


@pytest.mark.parametrize("workers", [None, "local:2"])
def test_run_jobs_merges_every_job_and_reports_a_failed_one(workers, tmp_path):
    db = tmp_path / "target.db"
    outcomes = run_jobs(JOBS, db, workers)
    assert [o.ok for o in outcomes] == [True, False, True]
    assert "ValueError" in outcomes[1].error and "job 2 fails on purpose" in outcomes[1].error
    assert outcomes[0].summary == {"seed": 1, "rows": 5}
    if workers:
        assert {o.worker for o in outcomes} <= {"cpu0", "cpu1"}
    journal = Cache.open(db)
    sessions = {s["seed"]: s for s in journal.sessions()}
    assert set(sessions) == {1, 2, 3}  # the failed job's rows so far land too, like a killed session's
    assert {seed: s["evaluations"] for seed, s in sessions.items()} == {1: 5, 2: 2, 3: 4}
    assert journal.integrity_ok()
    journal.close()


# -- (f) schema 1 databases: migrated on opening, merged without being migrated --------------------
V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spaces (fingerprint TEXT PRIMARY KEY, kernel TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,
    device TEXT NOT NULL, versions TEXT NOT NULL, source_hash TEXT NOT NULL, definition TEXT NOT NULL,
    created REAL NOT NULL);
CREATE TABLE sessions (id INTEGER PRIMARY KEY AUTOINCREMENT, kernel TEXT NOT NULL, shape TEXT NOT NULL,
    dtype TEXT NOT NULL, strategy TEXT NOT NULL, seed INTEGER, budget INTEGER, seconds REAL,
    space_fingerprint TEXT NOT NULL REFERENCES spaces(fingerprint), device TEXT NOT NULL, versions TEXT NOT NULL,
    mode TEXT NOT NULL, options TEXT NOT NULL, started REAL NOT NULL, ended REAL, exit_reason TEXT, best_key TEXT);
CREATE TABLE evaluations (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id INTEGER NOT NULL REFERENCES sessions(id),
    space_fingerprint TEXT NOT NULL, generation INTEGER NOT NULL, ordinal INTEGER NOT NULL,
    config_key TEXT NOT NULL, config_json TEXT NOT NULL, params_json TEXT NOT NULL, status TEXT NOT NULL,
    error TEXT, compile_s REAL, bench_s REAL, median_ms REAL, min_ms REAL, max_ms REAL, repetitions INTEGER,
    rel_error REAL, source TEXT NOT NULL, samples_json TEXT, created REAL NOT NULL,
    UNIQUE (session_id, generation, ordinal));
CREATE INDEX evaluations_by_config ON evaluations(space_fingerprint, config_key);
CREATE TABLE aliases (space_fingerprint TEXT NOT NULL, params_key TEXT NOT NULL, params_json TEXT NOT NULL,
    config_json TEXT NOT NULL, config_key TEXT NOT NULL, PRIMARY KEY (space_fingerprint, params_key));
CREATE TABLE baselines (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id INTEGER NOT NULL REFERENCES sessions(id),
    space_fingerprint TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL, error TEXT, median_ms REAL,
    min_ms REAL, max_ms REAL, repetitions INTEGER, rel_error REAL, created REAL NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO spaces VALUES ('fp1', 'toy', '[64, 1000]', 'float16', 'NVIDIA H100', '{}', 'h', '{}', 1.0);
INSERT INTO sessions VALUES (1, 'toy', '[64, 1000]', 'float16', 'random', 7, 2, NULL, 'fp1', 'NVIDIA H100', '{}',
    'gpu', '{}', 100.0, 101.0, 'budget', 'k1');
INSERT INTO evaluations VALUES (1, 1, 'fp1', 1, 0, 'k1', '{"a": 1}', '{"a": 1}', 'ok', '', 0.5, 0.1, 0.25, 0.24,
    0.26, 10, 0.0, 'measured', NULL, 100.5);
INSERT INTO evaluations VALUES (2, 1, 'fp1', 1, 1, 'k2', '{"a": 2}', '{"a": 2}', 'compile_error', 'boom', 0.5,
    NULL, NULL, NULL, NULL, 0, NULL, 'measured', NULL, 100.6);
INSERT INTO baselines VALUES (1, 1, 'fp1', 'torch.softmax', 'ok', '', 0.3, 0.29, 0.31, 10, 0.0, 100.7);
"""


def make_v1_database(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    conn.close()
    return path


def _meta_version(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        conn.close()


def test_a_schema_1_database_is_migrated_on_opening(tmp_path):
    path = make_v1_database(tmp_path / "v1.db")
    conn = sqlite3.connect(path)
    conn.execute("""INSERT INTO aliases VALUES ('fp1', 'p2', '{"a": 2}', '{"a": 2}', 'k2')""")
    conn.commit()
    conn.close()
    journal = Cache.open(path)
    assert journal.schema_version == SCHEMA_VERSION and _meta_version(path) == str(SCHEMA_VERSION)
    rows = journal.session_evaluations(1)
    assert [(r.candidate.key, r.result.status.value, r.result.measured_on) for r in rows] == [
        ("k1", "ok", ""), ("k2", "compile_error", "")]
    assert journal.calibrations(1) == {} and journal.measured_on_counts(1) == {}
    assert journal.baselines(session_id=1)["torch.softmax"].median_ms == 0.3
    assert journal.aliases("fp1") == {"p2": ({"a": 2}, {"a": 2})}  # carried over by the rebuild
    journal.close()
    conn = sqlite3.connect(path)  # schema 3: an alias may leave its JSON to the evaluation
    conn.execute("INSERT INTO aliases VALUES ('fp1', 'p1', NULL, NULL, 'k1')")
    conn.commit()
    conn.close()
    journal = Cache.open(path)  # opening again finds it current: nothing more to do
    assert journal.aliases("fp1") == {"p1": ({"a": 1}, {"a": 1}), "p2": ({"a": 2}, {"a": 2})}
    journal.close()
    assert _meta_version(path) == str(SCHEMA_VERSION)


def test_a_damaged_schema_1_database_is_refused_not_migrated(tmp_path):
    path = make_v1_database(tmp_path / "v1.db")
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE evaluations DROP COLUMN samples_json")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="schema 1 but lacks evaluations.samples_json"):
        Cache.open(path)
    assert _meta_version(path) == "1"


def test_merge_a_schema_1_database_into_a_schema_2_one_leaves_the_source_as_it_was(tmp_path, capsys):
    source = make_v1_database(tmp_path / "v1.db")
    before = source.read_bytes()
    target = tmp_path / "home.db"
    assert cli.main(["merge", str(source), "--into", str(target), "--create"]) == 0
    assert source.read_bytes() == before and _meta_version(source) == "1"
    journal = Cache.open(target)
    (session,) = journal.sessions()
    assert session["evaluations"] == 2 and journal.measured_on_counts(session["id"]) == {}
    assert journal.baselines(session_id=session["id"])["torch.softmax"].median_ms == 0.3
    journal.close()


def test_merge_a_schema_2_database_keeps_where_rows_were_measured_and_the_calibration(tmp_path, triton_task,
                                                                                      three_workers, capsys):
    source, target = tmp_path / "away.db", tmp_path / "home.db"
    evaluator = distributed_evaluator(three_workers, FakeEvaluatorFactory(hashed_cost),
                                      reference=triton_task.default_candidate())
    outcome, _strategy, journal = tune(triton_task, evaluator, source)
    counts, calibration = journal.measured_on_counts(outcome.session_id), journal.calibrations(outcome.session_id)
    journal.close()
    make_v1_database(tmp_path / "v1.db")
    assert cli.main(["merge", str(tmp_path / "v1.db"), str(source), "--into", str(target), "--create"]) == 0
    home = Cache.open(target)
    merged = next(s for s in home.sessions() if s["kernel"] == triton_task.spec.name)
    assert home.measured_on_counts(merged["id"]) == counts and len(counts) >= 2
    assert home.calibrations(merged["id"]) == calibration
    home.close()

    assert cli.main(["show", str(merged["id"]), "--db", str(target)]) == 0
    shown = capsys.readouterr().out
    assert "measured on" in shown and all(worker in shown for worker in counts)
    assert "calibration" in shown


# -- the command line ------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["local:0", "local:two", "banana", "tcp://", "local:"])
def test_a_bad_workers_value_is_refused(text):
    with pytest.raises(ValueError, match="--workers"):
        parse_workers(text)


def test_workers_values():
    assert parse_workers("local-gpus").kind == "local-gpus"
    assert parse_workers("local:4").count == 4
    assert parse_workers("tcp://scheduler:8786").address == "tcp://scheduler:8786"


def test_tune_with_workers_records_where_and_resumes_with_the_same_workers(tmp_path, monkeypatch, capsys):
    """`autotune tune --workers local:2` as on a GPU machine, the GPU evaluator swapped for a fake."""
    import autotune.distributed.factories as factories
    import autotune.tuning
    from autotune.tuning import TuneRequest, resumed_request

    monkeypatch.setenv("COLUMNS", "400")  # rich cuts tables to 80 columns under pytest otherwise
    monkeypatch.setattr(autotune.tuning, "gpu_available", lambda: True)
    monkeypatch.setattr(factories, "GPUEvaluatorFactory", lambda *args, **kwargs: FakeEvaluatorFactory(hashed_cost))
    db = tmp_path / "gpu.db"
    args = ["tune", "softmax-triton", "--shape", "64x40000", "--budget", "6", "--db", str(db), "--workers", "local:2"]
    assert cli.main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "spreading evaluation over 2 Dask worker(s)" in out
    assert "set up in " in out and "evaluator ready in " in out  # where a GPU session's start-up went
    journal = Cache.open(db)
    (session,) = journal.sessions()
    assert session["options"]["workers"] == "local:2"
    set_up = session["options"]["set_up"]
    assert set(set_up) == {"bind_s", "strategy_and_seeds_s", "evaluator_s"} and all(v >= 0 for v in set_up.values())
    assert set(journal.measured_on_counts(session["id"])) <= {"cpu0", "cpu1"}
    assert sum(journal.measured_on_counts(session["id"]).values()) == session["evaluations"] == 7
    assert set(journal.calibrations(session["id"])) == {"cpu0", "cpu1"}
    journal.close()

    assert cli.main(["sessions", "--db", str(db), "--wide"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "softmax-triton" in line)
    assert "cpu0" in row and "cpu1" in row  # the measured-on column
    sqlite3.connect(db).execute("UPDATE sessions SET exit_reason = 'interrupted'").connection.commit()
    request = TuneRequest(kernel=None, shape=None, dtype="float16", strategy="random", budget=None, seconds=None,
                          seed=0, generation_size=None, db=db, replay=False, space=None,
                          fresh=False, compile_workers=None, compile_timeout_s=60.0, resume=session["id"])
    assert resumed_request(request).workers == "local:2"
