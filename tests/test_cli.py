"""The `autotune` command, each run in its own temporary working directory: as `python -m
autotune.cli` subprocesses, and in-process where many bad inputs only need the same checks."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.store.layers import USER_SESSIONS_FROM
from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.history import session_best
from autotune.kernels import parse_dtype, parse_shape
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from conftest import all_counts, hashed_cost, record_fake_session, run_cli, table_count

TUNE = ["tune", "softmax-triton", "--shape", "64x1000", "--shipped", "a.db", "--db", "r.db"]


def _junk(directory: Path) -> None:
    (directory / "junk.db").write_bytes(random.Random(1).randbytes(4096))


def _empty_cache(directory: Path) -> None:
    Cache.open(directory / "ok.db", create=True).close()


# id -> (arguments, setup)
BAD_INPUT = {
    "unknown kernel": (["tune", "nope", "--shape", "64x1000", "--shipped", "a.db", "--db", "r.db"], None),
    "shape 4096y": (["tune", "softmax", "--shape", "4096y", "--shipped", "a.db", "--db", "r.db"], None),
    "shape 0x5": (["tune", "softmax-triton", "--shape", "0x5", "--shipped", "a.db", "--db", "r.db"], None),
    "shape 12": (["tune", "softmax", "--shape", "12", "--shipped", "a.db", "--db", "r.db"], None),
    "dtype float64": ([*TUNE, "--dtype", "float64"], None),
    "budget 0": ([*TUNE, "--budget", "0"], None),
    "budget -3": ([*TUNE, "--budget", "-3"], None),
    "budget abc": ([*TUNE, "--budget", "abc"], None),
    "unknown strategy": ([*TUNE, "--strategy", "annealing"], None),
    "replay without db": (["tune", "softmax-triton", "--shape", "64x1000", "--replay"], None),
    "replay missing db": ([*TUNE, "--replay"], None),
    "sessions without db": (["sessions"], None),
    "show without db": (["show", "1"], None),
    "export without db": (["export", "1"], None),
    "sessions junk db": (["sessions", "--db", "junk.db"], _junk),
    "show junk db": (["show", "1", "--db", "junk.db"], _junk),
    "replay junk db": (["tune", "softmax-triton", "--shape", "64x1000", "--shipped", "junk.db", "--db", "r.db"],
                       _junk),
    "show unknown session": (["show", "7", "--db", "ok.db"], _empty_cache),
    "export unknown session": (["export", "7", "--db", "ok.db", "--format", "json"], _empty_cache),
    "no command": ([], None),
}


def _files(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


# Run in the real executable too (the others run in-process, which is ~5 s faster each: no
# import of torch, triton and helion per command).
IN_A_SUBPROCESS = ("unknown kernel", "no command", "replay junk db")


def _run_in_process(args: list[str], directory: Path) -> subprocess.CompletedProcess:
    """`autotune ARGS` through `cli.main` in `directory`, as a CompletedProcess like `run_cli`'s."""
    from autotune import cli

    out, err, previous = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(directory)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(args))
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(["autotune", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    """Every bad-input command, each in its own directory: a few as real processes (concurrently),
    the rest in-process."""
    jobs = {}
    for index, (name, (args, setup)) in enumerate(BAD_INPUT.items()):
        directory = tmp_path_factory.mktemp(f"bad{index}")
        if setup:
            setup(directory)
        jobs[name] = (args, directory, _files(directory))

    def run(item, in_process: bool = False):
        name, (args, directory, before) = item
        done = _run_in_process(args, directory) if in_process else run_cli(args, directory)
        return name, (done, before, _files(directory))

    with ThreadPoolExecutor(max_workers=len(IN_A_SUBPROCESS)) as pool:
        runs = dict(pool.map(run, [(name, jobs[name]) for name in IN_A_SUBPROCESS]))
    runs.update(run((name, job), in_process=True) for name, job in jobs.items() if name not in IN_A_SUBPROCESS)
    return runs


@pytest.mark.parametrize("name", list(BAD_INPUT))
def test_bad_input_is_one_line_and_exit_status_2(bad_runs, name):
    done, before, after = bad_runs[name]
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("autotune: error: ") and len(lines[0]) > len("autotune: error: ") + 5
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    new = {f for f in after - before if not any(f.startswith(old + "-") for old in before)}
    assert not new, f"files created: {new}"


@pytest.mark.parametrize("name, words", [
    ("unknown kernel", ["nope", "softmax-triton"]), ("shape 4096y", ["4096y"]), ("shape 0x5", ["0x5"]),
    ("shape 12", ["12", "dimension"]), ("dtype float64", ["float64"]), ("budget -3", ["-3"]),
    ("unknown strategy", ["annealing", "random"]), ("replay missing db", ["a.db"]),
    ("sessions without db", ["data/shipped.db"]), ("show junk db", ["junk.db"]), ("show unknown session", ["7"]),
])
def test_bad_input_messages_name_the_problem(bad_runs, name, words):
    message = bad_runs[name][0].stderr
    for word in words:
        assert word in message, message


def test_kernels_lists_the_builtin_kernels(tmp_path):
    done = _run_in_process(["kernels"], tmp_path)
    assert done.returncode == 0, done.stderr
    for name in ("softmax", "softmax-online", "softmax-triton"):
        assert name in done.stdout
    assert "helion" in done.stdout and "triton" in done.stdout
    assert _files(tmp_path) == set()


# -- replay end to end -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replay_run(triton_task, tmp_path_factory):
    directory = tmp_path_factory.mktemp("replay")
    db = directory / "measured.db"
    session_id = record_fake_session(triton_task, db, strategy="grid", budget=1000)  # the whole declared space
    before = all_counts(db)
    done = run_cli(["tune", "softmax-triton", "--shape", "64x1000", "--budget", "10", "--seed", "3", "--shipped", str(db),
                    "--db", str(directory / "r.db")], directory)
    return directory, db, session_id, before, done


def test_cli_replay_end_to_end(replay_run, triton_task):
    directory, db, _, before, done = replay_run
    assert done.returncode == 0, done.stderr
    assert "REPLAY" in done.stdout.splitlines()[0]
    assert "Traceback" not in done.stderr
    replay_db = directory / "r.db"
    journal = Cache.open(replay_db)
    (session,) = journal.sessions()
    assert session["mode"] == "replay" and session["evaluations"] == 11 and session["exit_reason"] == "budget"
    rows = journal.session_evaluations(session["id"])
    assert all(r.result.source.value == "replayed" for r in rows)
    assert all(r.result.status.value == "ok" for r in rows)  # the whole space was recorded
    assert session["best_key"] == min(rows, key=lambda r: r.result.median_ms).candidate.key
    journal.close()
    assert all_counts(db) == before  # the measurement database is read, never written
    assert not (directory / "cache.db").exists() and not (directory / "replays.db").exists()


def test_cli_show_sessions_and_export(replay_run, triton_task, monkeypatch):
    import triton

    monkeypatch.setenv("COLUMNS", "240")  # as run_cli's processes get it: rich truncates tables at 80

    directory, db, session_id, _, _ = replay_run
    commands = {
        "show": ["show", str(USER_SESSIONS_FROM), "--db", str(directory / "r.db")],
        "sessions": ["sessions", "--db", str(db)],
        "python": ["export", str(session_id), "--db", str(db), "--format", "python"],
        "json": ["export", str(session_id), "--db", str(db), "--format", "json"],
    }
    # in-process: the replay, Helion export and bad-input tests run the real executable
    results = {name: _run_in_process(args, directory) for name, args in commands.items()}
    for name, done in results.items():
        assert done.returncode == 0, (name, done.stderr)
    assert f"session {USER_SESSIONS_FROM}" in results["show"].stdout
    assert "softmax-triton" in results["sessions"].stdout

    cache = Cache.open(db)
    best_candidate, _ = session_best(cache, session_id)
    cache.close()
    python = results["python"].stdout
    assert "triton.Config(" in python
    namespace = {"triton": triton}
    exec(python, namespace)
    config = namespace["CONFIG"]
    assert isinstance(config, triton.Config)
    assert config.kwargs == {"BLOCK_SIZE": best_candidate.native["BLOCK_SIZE"]}
    assert config.num_warps == best_candidate.native["num_warps"]
    assert config.num_stages == best_candidate.native["num_stages"]
    exported = json.loads(results["json"].stdout)
    assert exported == dict(best_candidate.native) and "BLOCK_SIZE" in exported


def test_cli_helion_export(helion_task, tmp_path):
    import helion

    db = tmp_path / "h.db"
    session_id = record_fake_session(helion_task, db, strategy="random", budget=6, seed=2)
    done = run_cli(["export", str(session_id), "--db", str(db), "--format", "python"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "helion.Config(" in done.stdout
    namespace = {"helion": helion}
    exec(done.stdout, namespace)
    cache = Cache.open(db)
    best_candidate, best_result = session_best(cache, session_id)
    cache.close()
    assert best_result.median_ms == min(hashed_cost(r) for r in _session_params(db, session_id))
    assert namespace["CONFIG"] == helion.Config(**best_candidate.native)
    assert dict(namespace["CONFIG"].config) == dict(best_candidate.native)


def _session_params(db: Path, session_id: int):
    cache = Cache.open(db)
    try:
        return [r.candidate.params for r in cache.session_evaluations(session_id)]
    finally:
        cache.close()


def test_cli_export_refuses_a_session_without_a_good_config(triton_task, tmp_path):
    db = tmp_path / "f.db"
    cache = Cache.open(db, create=True)
    strat = get_strategy("random")(triton_task.space, seed=0)
    from autotune.types import Status

    Session(triton_task, FakeEvaluator(lambda p: Status.CRASH), strat,
            SessionSettings(strategy="random", seed=0, budget=3, mode="gpu"), cache).run()
    cache.close()
    done = run_cli(["export", "1", "--db", str(db)], tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("autotune: error: ") and len(done.stderr.splitlines()) == 1
    assert table_count(db, "evaluations") == 4


def test_cli_export_of_a_tampered_database_is_still_inert(triton_task, tmp_path):
    import sqlite3

    import triton

    db = tmp_path / "t.db"
    session_id = record_fake_session(triton_task, db, strategy="random", budget=3)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE sessions SET kernel = ? WHERE id = ?", ("softmax-triton\nINJECTED = 1\n#", session_id))
    conn.commit()
    conn.close()
    done = run_cli(["export", str(session_id), "--db", str(db), "--format", "python"], tmp_path)
    assert done.returncode == 0, done.stderr
    namespace = {"triton": triton}
    exec(done.stdout, namespace)
    assert "INJECTED" not in namespace


# -- shape parsing (what --shape goes through) ------------------------------------------------

_shape_like = st.lists(st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(["", " 7", "+3", "1_0", "0x1",
                                                                                    "٣", "1e3", "x", "X", "×"])),
                       min_size=1, max_size=4).flatmap(
    lambda parts: st.sampled_from(["x", "X", "×", "*", ",", ""]).map(lambda sep: sep.join(parts)))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=20), _shape_like), st.sampled_from([None, 1, 2, 3]))
def test_parse_shape_on_arbitrary_text(text, rank):
    try:
        shape = parse_shape(text, rank)
    except ValueError as error:
        message = str(error)
        assert message and "\n" not in message
        assert repr(text) in message or "dimension" in message
        return
    assert isinstance(shape, tuple) and len(shape) >= 1
    assert all(type(d) is int and d > 0 for d in shape)
    if rank is not None:
        assert len(shape) == rank
    assert parse_shape("x".join(map(str, shape)), rank) == shape  # the canonical spelling parses the same


@pytest.mark.parametrize("text, shape", [("4096x32000", (4096, 32000)), ("64X1000", (64, 1000)), ("8×16", (8, 16)),
                                         ("7", (7,))])
def test_parse_shape_examples(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["4096y", "0x5", "-1x5", "x", "", "4096x", "1.5x2"])
def test_parse_shape_rejects(text):
    with pytest.raises(ValueError, match="shape"):
        parse_shape(text)


def test_parse_dtype():
    import torch

    assert parse_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(ValueError, match="float64"):
        parse_dtype("float64")
    with pytest.raises(ValueError):
        parse_dtype("float32", allowed=("float16",))
