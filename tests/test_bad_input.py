"""Every command against bad input and bad databases: one line on stderr, exit status 2, no
traceback, and nothing written.  Commands run in-process through `autotune.cli.main`, so the
whole matrix takes seconds; `test_cli.py` runs the real subprocesses."""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import autotune.tuning
from autotune import cli
from autotune.store.cache import SCHEMA_VERSION, Cache, CacheError
from autotune.store.layers import USER_SESSIONS_FROM
from autotune.evaluators.fake import FakeEvaluator
from autotune.kernels import get_kernel, parse_shape
from autotune.kernels.softmax_triton import triton_space
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.task import bind_live
from conftest import all_counts, assert_one_line_error, hashed_cost, run_main

SHAPE = "64x40000"  # wide enough rows for the Triton space's elements-per-thread limit to bind
# One valid invocation per command, its database written DB; the tests below swap one piece at
# a time for a bad one.
COMMANDS = {
    "kernels": ["kernels"],
    "tune": ["tune", "softmax-triton", "--shape", SHAPE, "--budget", "2", "--shipped", "DB", "--db", "r.db"],
    "sessions": ["sessions", "--db", "DB"],
    "show": ["show", "1", "--db", "DB"],
    "export": ["export", "1", "--db", "DB", "--format", "json"],
    "check-config": ["check-config", "softmax-triton", "--shape", SHAPE, "--config", "{}", "--db", "DB"],
    "noise": ["noise", "softmax-triton", "--shape", SHAPE, "--db", "DB"],
    "export-space": ["export-space", "--session", "1", "--db", "DB"],
    "import-space": ["import-space", "KT", "--db", "DB"],  # KT: a Kernel Tuner file made by export-space
    "seeds": ["seeds", "softmax-triton", "--shape", SHAPE],
    "merge": ["merge", "DB", "--into", "merged.db", "--create"],
    "compact": ["compact", "--db", "DB"],
    "simulate": ["simulate", "softmax-triton", "--shape", SHAPE, "--db", "DB", "--repeats", "1", "--budget", "2"],
    "rerun": ["rerun", "1", "--db", "DB"],
    # Its report needs sessions of the study, which the recorded database has none of; its bad
    # input is tested in test_softmax_study.py.
    "experiment": ["experiment", "report", "experiments/softmax_study", "--db", "study.db"],
    # Serves no command and stops (--requests 0); a socket already served is refused in test_server.py.
    "serve": ["serve", "--socket", "s.sock", "--requests", "0"],
    # Its runs need a GPU and Helion's example files; its planning is tested in test_helion_suite.py.
    "suite": ["suite", "report", "--out", "suite_report"],
}
WITH_DB = [name for name, args in COMMANDS.items() if "DB" in args]
CREATES_DB = {"import-space"}  # a missing or empty --db is where it creates the database


# -- a small recorded database and the helpers every test uses --------------------------------
@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    """rich cuts tables and lines to the terminal width (80 under pytest) otherwise."""
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """The whole Triton space at 64x40000, measured by a fake evaluator (session 1)."""
    triton_task = bind_live(get_kernel("softmax-triton"), parse_shape(SHAPE), torch.float16, "cpu")
    path = tmp_path_factory.mktemp("recorded") / "base.db"
    cache = Cache.open(path, create=True)
    strategy = get_strategy("grid")(triton_task.space, seed=0, budget=1000)
    settings = SessionSettings(strategy="grid", seed=0, budget=1000, mode="gpu")
    Session(triton_task, FakeEvaluator(hashed_cost, baselines={"torch.softmax": 0.5}), strategy, settings,
            cache).run()
    cache.close()
    return path


@pytest.fixture(scope="module")
def kt_file(recorded, tmp_path_factory) -> Path:
    """The recorded space written as a Kernel Tuner cache file (what import-space reads)."""
    path = tmp_path_factory.mktemp("kt") / "space.json"
    assert cli.main(["export-space", "--session", "1", "--db", str(recorded), "--out", str(path)]) == 0
    return path


@pytest.fixture
def db(recorded, tmp_path) -> Path:
    """A private copy of the recorded database, as c.db in the test's working directory."""
    shutil.copy(recorded, tmp_path / "c.db")
    return tmp_path / "c.db"


def snapshot(directory: Path) -> dict[str, str]:
    """Every file and folder under `directory` with a hash of its bytes."""
    return {str(path.relative_to(directory)): "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
            for path in directory.rglob("*")}


def assert_unchanged(before: dict[str, str], after: dict[str, str]) -> None:
    """Same files with the same bytes; sqlite's own -wal/-shm beside an existing database aside."""
    sidecars = {n for n in after if n not in before and any(n.startswith(f"{old}-") for old in before)}
    assert {n: h for n, h in after.items() if n not in sidecars} == before


def with_db(name: str, path: str, kt: Path | None = None) -> list[str]:
    return [path if a == "DB" else str(kt) if a == "KT" else a for a in COMMANDS[name]]


def test_the_matrix_covers_every_command():
    """A command added to the CLI must be added to COMMANDS above, so its bad input is tested."""
    parser = cli.build_parser()
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert set(choices) <= set(COMMANDS), f"add a row to COMMANDS for: {sorted(set(choices) - set(COMMANDS))}"


@pytest.mark.parametrize("name", WITH_DB)
def test_each_command_works_on_the_recorded_database(name, db, kt_file, capsys):
    """The baseline the fault tests change one thing of: every valid invocation succeeds."""
    if name in CREATES_DB:  # importing needs a database without that space yet
        db = db.with_name("fresh.db")
        Cache.open(db, create=True).close()
    code, out, err = run_main(with_db(name, str(db), kt_file), capsys)
    assert code == 0 and err == "", err


# -- bad databases ------------------------------------------------------------------------------
def _sql(statement: str):
    def damage(path: Path) -> None:
        conn = sqlite3.connect(path)
        conn.execute(statement)
        conn.commit()
        conn.close()
    return damage


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _damaged_page(path: Path) -> None:
    """Random bytes over the evaluations table's root page: the file opens, its schema reads
    fine, and the damage shows only when a command reads its rows."""
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'evaluations'").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page_size: root * page_size] = random.Random(3).randbytes(page_size)
    path.write_bytes(bytes(data))


FAULTS = {  # name -> how a good database (already at the path) is made bad; None: removed first
    "missing": None,
    "random bytes": lambda p: p.write_bytes(random.Random(7).randbytes(8192)),
    "text file": lambda p: p.write_text("these are my notes, not a database\n" * 40),
    "directory": lambda p: p.mkdir(),
    "empty file": lambda p: p.touch(),
    "foreign sqlite": _sql("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)"),
    "older schema": _sql("UPDATE meta SET value = '0' WHERE key = 'schema_version'"),
    "newer schema": _sql(f"UPDATE meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'"),
    "no meta table": _sql("DROP TABLE meta"),
    "missing table": _sql("DROP TABLE aliases"),
    "missing column": _sql("ALTER TABLE sessions DROP COLUMN mode"),
    "truncated": _truncated,
    "damaged page": _damaged_page,
}
FRESH = ("missing", "random bytes", "text file", "directory", "empty file", "foreign sqlite")


def make_fault(fault: str, path: Path, recorded: Path) -> None:
    if fault not in FRESH:
        shutil.copy(recorded, path)
    FAULTS[fault] and FAULTS[fault](path)


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("name", WITH_DB)
def test_bad_database_is_refused_in_one_line(name, fault, recorded, kt_file, tmp_path, capsys):
    if name in CREATES_DB and fault in ("missing", "empty file"):
        pytest.skip(f"{name} creates its database there")
    path = tmp_path / "bad.db"
    make_fault(fault, path, recorded)
    before = snapshot(tmp_path)
    line = assert_one_line_error(*run_main(with_db(name, str(path), kt_file), capsys))
    assert str(path) in line
    assert_unchanged(before, snapshot(tmp_path))


@pytest.mark.parametrize("fault", ["random bytes", "text file", "directory", "foreign sqlite", "older schema",
                                   "newer schema", "missing column"])
def test_bad_replay_journal_is_refused_before_anything_is_written(fault, recorded, db, tmp_path, capsys):
    journal = tmp_path / "journal.db"
    make_fault(fault, journal, recorded)
    before = snapshot(tmp_path)
    args = [*with_db("tune", str(db)), "--db", str(journal)]  # the last --db wins: the journal
    line = assert_one_line_error(*run_main(args, capsys))
    assert str(journal) in line
    assert_unchanged(before, snapshot(tmp_path))


@pytest.mark.parametrize("version, words", [("0", ["older", "schema 0", "--db"]),
                                            (str(SCHEMA_VERSION + 1), ["newer", "upgrade"]),
                                            ("1.5", ["unknown", "'1.5'"])])
def test_schema_versions_other_than_ours_are_refused_with_what_to_do(recorded, tmp_path, version, words):
    path = tmp_path / "v.db"
    shutil.copy(recorded, path)
    _sql(f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'")(path)
    with pytest.raises(CacheError) as info:
        Cache.open(path)
    message = str(info.value)
    assert f"reads cache schema {SCHEMA_VERSION}" in message and "\n" not in message
    for word in words:
        assert word in message


def test_a_plausible_schema_0_database_is_refused_not_misread(tmp_path, capsys):
    """An unversioned cache (autotune's tables without meta) and a schema-0 one (meta says 0,
    no aliases table): both refused, by Cache.open and by the CLI, and left as they were."""
    from autotune.store.cache import _SCHEMA

    unversioned, old = tmp_path / "unversioned.db", tmp_path / "old.db"
    for path in (unversioned, old):
        conn = sqlite3.connect(path)
        for statement in filter(str.strip, _SCHEMA.split(";")):
            if "TABLE meta" in statement or (path == old and "TABLE aliases" in statement):
                continue
            conn.execute(statement)
        conn.execute("INSERT INTO spaces VALUES ('f', 'softmax', '[64, 1000]', 'float16', 'd', '{}', 'h', '{}', 0)")
        conn.commit()
        conn.close()
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '0')")
    conn.commit()
    conn.close()
    before = snapshot(tmp_path)
    with pytest.raises(CacheError, match="no schema version"):
        Cache.open(unversioned)
    with pytest.raises(CacheError, match="older autotune .cache schema 0"):
        Cache.open(old, create=True)
    for path in (unversioned, old):
        line = assert_one_line_error(*run_main(["sessions", "--db", str(path)], capsys))
        assert str(path) in line and f"schema {SCHEMA_VERSION}" in line
    assert_unchanged(before, snapshot(tmp_path))


@pytest.mark.parametrize("fault, part", [("missing table", "table aliases"), ("missing column", "sessions.mode")])
def test_a_damaged_database_names_what_is_missing(fault, part, recorded, tmp_path):
    path = tmp_path / "d.db"
    make_fault(fault, path, recorded)
    with pytest.raises(CacheError, match="damaged") as info:
        Cache.open(path)
    assert part in str(info.value)


# -- bad arguments --------------------------------------------------------------------------------
TUNE = COMMANDS["tune"]
CHECK = ["check-config", "softmax-triton", "--shape", SHAPE]
BAD_ARGS = {
    "no command": [],
    "unknown command": ["frobnicate"],
    "kernels extra argument": ["kernels", "softmax"],
    "tune no kernel": ["tune", "--shape", SHAPE, "--db", "DB"],
    "tune no shape": ["tune", "softmax-triton", "--db", "DB"],
    "tune unknown kernel": ["tune", "nope", "--shape", SHAPE, "--db", "DB"],
    "tune unknown strategy": [*TUNE, "--strategy", "annealing"],
    "tune dtype": [*TUNE, "--dtype", "float64"],
    "tune budget 0": [*TUNE, "--budget", "0"],
    "tune budget -4": [*TUNE, "--budget", "-4"],
    "tune budget 2.5": [*TUNE, "--budget", "2.5"],
    "tune seconds 0": [*TUNE, "--seconds", "0"],
    "tune seconds nan": [*TUNE, "--seconds", "nan"],
    "tune slow factor 0": [*TUNE, "--slow-factor", "0"],
    "tune compile timeout factor -1": [*TUNE, "--compile-timeout-factor", "-1"],
    "tune seconds -1": [*TUNE, "--seconds", "-1"],
    "tune generation size 0": [*TUNE, "--generation-size", "0"],
    "tune seed text": [*TUNE, "--seed", "one"],
    "tune seed-from": [*TUNE, "--seed-from", "default,guess"],
    "tune option": [*TUNE, "--option", "effort"],
    "tune unknown option": [*TUNE, "--option", "colour=blue"],
    "tune grid without grid": [*TUNE, "--grid", "BLOCK_SIZE"],
    "tune grid unknown parameter": [*TUNE, "--strategy", "grid", "--grid", "BLOCK"],
    "tune resume 0": [*TUNE, "--resume", "0"],
    "tune resume unknown": [*TUNE, "--resume", "9"],
    "tune resume with config": [*TUNE, "--resume", "1", "--config", "{}"],
    "tune more configs than budget": [*TUNE, "--config", "[{}, {}, {}]"],
    "tune unknown space": [*TUNE, "--space", "ffff"],
    "tune compile timeout": [*TUNE, "--compile-timeout", "-5"],
    "tune workers local:0": [*TUNE, "--workers", "local:0"],
    "tune workers not a spec": [*TUNE, "--workers", "gpus"],
    "tune workers in a replay": [*TUNE, "--workers", "local:2"],  # no GPU here: a replay, nothing to spread
    "sessions limit 0": ["sessions", "--db", "DB", "--limit", "0"],
    "show session 0": ["show", "0", "--db", "DB"],
    "show session -1": ["show", "-1", "--db", "DB"],
    "show session text": ["show", "first", "--db", "DB"],
    "show unknown session": ["show", "99", "--db", "DB"],
    "export unknown session": ["export", "99", "--db", "DB"],
    "export format": ["export", "1", "--db", "DB", "--format", "yaml"],
    "check-config no config": CHECK,
    "check-config no shape": ["check-config", "softmax-triton", "--config", "{}"],
    "check-config unknown kernel": ["check-config", "nope", "--shape", SHAPE, "--config", "{}"],
    "check-config dtype": [*CHECK, "--dtype", "int8", "--config", "{}"],
    "check-config space without db": [*CHECK, "--space", "ab", "--config", "{}"],
    "check-config unknown space": [*CHECK, "--db", "DB", "--space", "ffff", "--config", "{}"],
    "check-config shape not recorded": ["check-config", "softmax-triton", "--shape", "64x1000", "--config", "{}",
                                        "--db", "DB"],
    "noise unknown kernel": ["noise", "nope", "--shape", SHAPE, "--db", "DB"],
    "noise top 0": [*COMMANDS["noise"], "--top", "0"],
    "noise resamples -1": [*COMMANDS["noise"], "--resamples", "-1"],
    "suite report without results": ["suite", "report", "--out", "nowhere"],
    "suite run without examples": ["suite", "run", "--examples", "no_such_folder", "--out", "nowhere"],
    "seeds unknown kernel": ["seeds", "nope", "--shape", SHAPE],
    "seeds no shape": ["seeds", "softmax-triton"],
    "seeds dtype": [*COMMANDS["seeds"], "--dtype", "float8"],
    "serve no socket": ["serve"],  # the tests run with AUTOTUNE_SERVER=off (conftest)
    "serve unknown option": ["serve", "--port", "80"],
}
BAD_SHAPES = ["4096y", "0x5", "-1x5", "x", "", "64x", "1.5x2", "+64x40000", "64 x 40000", "1_0x40000",
              "64x40000x2", "٦٤x40000", "64\nx40000", "9" * 5000]
for _shape in BAD_SHAPES:
    for _name in ("tune", "check-config", "noise", "seeds"):
        _args = [*COMMANDS[_name]] if _name != "check-config" else [*CHECK, "--config", "{}"]
        _args[_args.index("--shape") + 1] = _shape
        BAD_ARGS[f"{_name} shape {_shape[:12]!r}"] = _args


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_bad_arguments_are_one_line_and_write_nothing(case, db, tmp_path, capsys):
    args = [str(db) if a == "DB" else a for a in BAD_ARGS[case]]
    before = snapshot(tmp_path)
    assert_one_line_error(*run_main(args, capsys))
    assert_unchanged(before, snapshot(tmp_path))


@pytest.mark.parametrize("case, words", [
    ("tune unknown kernel", ["nope", "softmax-triton"]), ("tune unknown strategy", ["annealing", "random"]),
    ("tune budget -4", ["-4"]), ("tune seconds nan", ["nan"]), ("tune slow factor 0", ["--slow-factor", "positive"]),
    ("tune compile timeout factor -1", ["--compile-timeout-factor", "positive"]),
    ("tune resume with config", ["--config", "--resume"]),
    ("check-config unknown kernel", ["nope"]), ("check-config space without db", ["--db"]),
    ("tune shape '64 x 40000'", ["64 x 40000"]), ("noise shape '+64x40000'", ["+64x40000"]),
    ("show unknown session", ["99"]), ("tune more configs than budget", ["3 configs", "budget of 2"]),
    ("tune workers local:0", ["local:0", "positive"]), ("tune workers not a spec", ["gpus", "local-gpus"]),
    ("tune workers in a replay", ["--workers local:2", "replay"]),
])
def test_messages_name_the_problem(case, words, db, capsys):
    args = [str(db) if a == "DB" else a for a in BAD_ARGS[case]]
    line = assert_one_line_error(*run_main(args, capsys))
    for word in words:
        assert word in line, line


# -- --config: refused before anything is created ------------------------------------------------
BAD_CONFIGS = {
    "malformed JSON": ('{"BLOCK_SIZE": 512', ["malformed JSON"]),
    "not an object": ("[1, 2]", ["item 1", "not a JSON object"]),
    "a number": ("512", ["not a JSON object"]),
    "empty list": ("[]", ["empty list"]),
    "unknown parameter": ('{"BLOCK": 512}', ['"BLOCK"', "BLOCK_SIZE", "num_warps", "num_stages"]),
    "value outside": ('{"BLOCK_SIZE": 300}', ["BLOCK_SIZE=300", "256, 512, 1024, 2048"]),
    "wrong type": ('{"num_warps": "8"}', ['num_warps="8"', "1, 2, 4, 8, 16, 32"]),
    "boolean for a number": ('{"num_stages": true}', ["num_stages=true"]),
    "NaN": ('{"num_stages": NaN}', ["num_stages=NaN"]),
    "constraint": ('{"BLOCK_SIZE": 65536, "num_warps": 1}', ["limit", "BLOCK_SIZE", "num_warps", "2048"]),
    "duplicate key": ('{"num_warps": 4, "num_warps": 8}', ['"num_warps" is given twice']),
    "neither JSON nor file": ("best.json", ["neither", "best.json"]),
    "a directory": (".", ["directory"]),
    "deep nesting": ("[" * 50_000, ["unreadable JSON"]),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
@pytest.mark.parametrize("gpu", [False, True], ids=["replay", "gpu"])
def test_a_config_that_does_not_fit_writes_nothing(case, gpu, db, tmp_path, capsys, monkeypatch):
    """On a GPU machine (simulated: the Triton space needs no GPU to bind) and when replaying,
    an existing database keeps its rows and a new one is never created."""
    text, words = BAD_CONFIGS[case]
    monkeypatch.setattr(autotune.tuning, "gpu_available", lambda: gpu)
    target = db if not gpu or case != "constraint" else tmp_path / "new.db"  # one GPU case on a new database
    before, counts = snapshot(tmp_path), all_counts(db)
    args = [*with_db("tune", str(target)), "--config", '{"num_warps": 4}', "--config", text]
    line = assert_one_line_error(*run_main(args, capsys))
    for word in words:
        assert word in line, line
    assert_unchanged(before, snapshot(tmp_path))
    assert all_counts(db) == counts and not target.with_name("new.db").exists()


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_check_config_gives_the_same_one_line_error(case, db, capsys):
    text, words = BAD_CONFIGS[case]
    line = assert_one_line_error(*run_main([*CHECK, "--config", text], capsys))
    for word in words:
        assert word in line, line


def test_a_bad_config_in_a_file_names_the_file_and_item(db, tmp_path, capsys):
    path = tmp_path / "configs.json"
    path.write_text(json.dumps([{"BLOCK_SIZE": 512}, {"num_warps": 3}]))
    line = assert_one_line_error(*run_main([*with_db("tune", str(db)), "--config", str(path)], capsys))
    assert "configs.json" in line and "item 2" in line and "num_warps=3" in line
    assert not (tmp_path / "r.db").exists()
    path.write_bytes(b"\xff\xfe{not utf-8")
    line = assert_one_line_error(*run_main([*CHECK, "--config", str(path)], capsys))
    assert "cannot be read" in line


# -- --config that fits: evaluated first, recorded, resumed ----------------------------------------
def test_user_configs_are_evaluated_first_and_recorded(db, tmp_path, capsys):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([{"BLOCK_SIZE": 512, "num_warps": 2}, {"num_stages": 4}]))
    code, out, err = run_main([*with_db("tune", str(db)), "--budget", "4", "--config", '{"num_warps": 1}',
                               "--config", str(path)], capsys)
    assert code == 0, err
    journal = Cache.open(tmp_path / "r.db")
    (session,) = journal.sessions()
    rows = journal.session_evaluations(session["id"])
    journal.close()
    space = triton_space(parse_shape(SHAPE), torch.float16)
    given = [{"num_warps": 1}, {"BLOCK_SIZE": 512, "num_warps": 2}, {"num_stages": 4}]
    expected = [space.validate({**space.default, **g}) for g in given]
    seeds = [r.candidate.params for r in rows if r.generation == 0]
    assert seeds == [space.default, *expected]  # the default first (free), then the user's, in order
    assert session["options"]["user_configs"] == expected
    assert session["options"]["seeds"][:3] == ["user"] * 3
    assert "best user seed" in out


def test_resume_brings_back_the_user_configs(db, tmp_path, capsys):
    from autotune.tuning import TuneRequest, resumed_request

    args = [*with_db("tune", str(db)), "--budget", "3", "--config", '{"num_warps": 16}']
    assert run_main(args, capsys)[0] == 0
    _sql("UPDATE sessions SET exit_reason = 'interrupted'")(tmp_path / "r.db")  # as if killed
    request = TuneRequest(kernel=None, shape=None, dtype="float16", strategy="random", budget=None, seconds=None,
                          seed=0, generation_size=None, db=tmp_path / "r.db", shipped=db, replay=True, space=None,
                          fresh=False, compile_workers=None, compile_timeout_s=60.0, resume=USER_SESSIONS_FROM)
    (config,) = resumed_request(request).configs
    assert json.loads(config)["num_warps"] == 16 and len(json.loads(config)) == 3
    assert resumed_request(request).seconds is None  # the session's own wall clock: none was given
    assert resumed_request(replace(request, seconds=30.0)).seconds == 30.0  # this call's, when given


def test_resume_keeps_a_session_without_the_limit_without_it(db, tmp_path, capsys):
    """A session measured in a Helion space without our elements-per-thread limit (a re-timing of
    another tuner's pick past it) resumes in that space: its options say so; others say nothing."""
    from autotune.tuning import TuneRequest, resumed_request

    assert run_main([*with_db("tune", str(db)), "--budget", "3"], capsys)[0] == 0
    _sql("UPDATE sessions SET exit_reason = 'interrupted'")(tmp_path / "r.db")
    journal = Cache.open(tmp_path / "r.db")
    (session,) = journal.sessions()
    journal.close()
    assert session["options"].thread_limit is None and "thread_limit" not in session["options"].to_record()
    request = TuneRequest(kernel=None, shape=None, dtype="float16", strategy="random", budget=None, seconds=None,
                          seed=0, generation_size=None, db=tmp_path / "r.db", shipped=db, replay=True, space=None,
                          fresh=False, compile_workers=None, compile_timeout_s=60.0, resume=USER_SESSIONS_FROM)
    assert resumed_request(request).thread_limit is True
    _sql("UPDATE sessions SET options = json_set(options, '$.thread_limit', json('false'))")(tmp_path / "r.db")
    assert resumed_request(request).thread_limit is False


@pytest.mark.parametrize(("given", "stored", "resumed"), [("inf", None, math.inf), ("2", 2.0, 2.0)])
def test_a_session_keeps_its_factors_through_json_and_resume(db, tmp_path, capsys, given, stored, resumed):
    from autotune.tuning import TuneRequest, resumed_request

    args = [*with_db("tune", str(db)), "--budget", "3", "--slow-factor", given, "--compile-timeout-factor", given]
    assert run_main(args, capsys)[0] == 0
    _sql("UPDATE sessions SET exit_reason = 'interrupted'")(tmp_path / "r.db")
    journal = Cache.open(tmp_path / "r.db")
    (session,) = journal.sessions()
    journal.close()
    # JSON has no infinity: null stands for it
    assert session["options"]["slow_factor"] == session["options"]["compile_timeout_factor"] == stored
    request = TuneRequest(kernel=None, shape=None, dtype="float16", strategy="random", budget=None, seconds=None,
                          seed=0, generation_size=None, db=tmp_path / "r.db", shipped=db, replay=True, space=None,
                          fresh=False, compile_workers=None, compile_timeout_s=60.0, resume=USER_SESSIONS_FROM)
    assert resumed_request(request).slow_factor == resumed_request(request).compile_timeout_factor == resumed


# -- check-config on configs that fit ------------------------------------------------------------
def test_check_config_completes_from_the_default_and_shows_the_native_form(db, capsys):
    space = triton_space(parse_shape(SHAPE), torch.float16)
    for extra in ([], ["--db", str(db)]):
        code, out, err = run_main([*CHECK, "--config", '{"num_warps": 4.0}', "--format", "json", *extra], capsys)
        assert code == 0, err
        (item,) = json.loads(out)
        assert item["config"] == {**space.default, "num_warps": 4}
        assert type(item["config"]["num_warps"]) is int  # canonical: 4.0 is spelled as the space spells it
        assert item["native"] == item["config"]  # a Triton point is its own launch config
        assert item["from_default"] == ["BLOCK_SIZE", "num_stages"]
    code, out, err = run_main([*CHECK, "--config", '{"BLOCK_SIZE": 2048}'], capsys)
    assert code == 0 and "triton.Config({'BLOCK_SIZE': 2048}" in out


def test_check_config_on_the_helion_kernel_gives_a_loadable_helion_config(capsys):
    import helion

    code, out, err = run_main(["check-config", "softmax", "--shape", "64x1000", "--format", "json",
                               "--config", '{"num_warps": 8, "block_sizes[0]": 2}'], capsys)
    assert code == 0, err
    (item,) = json.loads(out)
    assert item["config"]["num_warps"] == 8 and item["config"]["block_sizes[0]"] == 2
    config = helion.Config(**item["native"])
    assert config.num_warps == 8 and list(config.block_sizes) == [2]
    # helion.Config's own spelling (what `autotune export SESSION --format json` writes) is read too
    code, out, err = run_main(["check-config", "softmax", "--shape", "64x1000", "--format", "json",
                               "--config", '{"num_warps": 8, "block_sizes": [2]}'], capsys)
    assert code == 0, err
    (native,) = json.loads(out)
    assert native["config"] == item["config"] and native["given_as"] == "native"
    line = assert_one_line_error(*run_main(["check-config", "softmax", "--shape", "64x1000",
                                            "--config", '{"block_sizes": [2, 4]}'], capsys))
    assert "block_sizes[0]" in line  # the hint: one element per slot of the space


# -- where each session's data came from ------------------------------------------------------------
def test_sessions_show_device_toolchain_and_where_the_data_came_from(db, kt_file, tmp_path, capsys):
    assert run_main([*with_db("tune", str(db)), "--budget", "2"], capsys)[0] == 0  # a replay into r.db
    imported = tmp_path / "imported.db"
    assert run_main(["import-space", str(kt_file), "--db", str(imported)], capsys)[0] == 0
    code, out, err = run_main(["sessions", "--db", str(db), "--wide"], capsys)
    cache = Cache.open(db)
    (session,) = cache.sessions()
    cache.close()
    versions = session["versions"]
    row = next(line for line in out.splitlines() if "softmax-triton" in line)
    for text in ("measured", session["device"], f"{versions['torch']}/{versions['triton']}/{versions['helion']}",
                 versions["python"], session["space_fingerprint"]):
        assert text in row, (text, row)
    out = run_main(["sessions", "--db", str(tmp_path / "r.db"), "--wide"], capsys)[1]
    assert "replay" in out and str(db.name) in out
    out = run_main(["sessions", "--db", str(imported), "--wide"], capsys)[1]
    assert "imported" in out and f"file {kt_file.name}" in out


def test_recorded_text_is_never_read_as_markup(db, capsys):
    _sql("UPDATE sessions SET kernel = '[/bold] [red]x', device = '[link=file:///etc/passwd]gpu'")(db)
    code, out, err = run_main(["sessions", "--db", str(db), "--wide"], capsys)
    assert code == 0, err
    assert "[/bold]" in out and "[red]x" in out and "[link=file:///etc/passwd]gpu" in out


# -- import-space: a bad file writes nothing ------------------------------------------------------
@pytest.mark.parametrize("fault", ["missing", "random bytes", "text file", "directory", "empty file"])
def test_import_space_refuses_a_bad_file_and_creates_no_database(fault, recorded, tmp_path, capsys):
    path = tmp_path / "space.json"
    make_fault(fault, path, recorded)
    before = snapshot(tmp_path)
    line = assert_one_line_error(*run_main(["import-space", str(path), "--db", str(tmp_path / "new.db")], capsys))
    assert "space.json" in line
    assert_unchanged(before, snapshot(tmp_path))
