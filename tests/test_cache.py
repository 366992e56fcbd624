"""The sqlite cache: schema, rows written and read back, durability, concurrency, bad files."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from autotune.store.cache import SCHEMA_VERSION, Cache, CacheError
from autotune.types import Result, Source, Status
from conftest import make_candidate, subprocess_env, table_count
from search_spaces import Ordinal, SearchSpace, SpaceIdentity, params_key

VERSIONS = {"python": "3.11.7", "torch": "2.13.0", "triton": "3.9.0", "helion": "1.5.0"}


def toy_identity(shape=(64, 1000), device="NVIDIA H100", kernel="toy") -> SpaceIdentity:
    space = SearchSpace(
        kernel=kernel, family="triton",
        parameters=(Ordinal(name="BLOCK_SIZE", choices=(256, 512, 1024), default_value=1024),
                    Ordinal(name="num_warps", choices=(2, 4, 8), default_value=4)),
        default={"BLOCK_SIZE": 1024, "num_warps": 4},
    )
    return SpaceIdentity(space=space, signature={"shape": list(shape), "dtype": "float16"}, source_hash="s" * 24,
                         versions=VERSIONS, device=device)


def start(cache: Cache, identity: SpaceIdentity, seed: int = 0, mode: str = "gpu") -> int:
    cache.put_space(identity)
    return cache.start_session(
        kernel=identity.space.kernel, shape=tuple(identity.signature["shape"]), dtype="float16", strategy="random",
        seed=seed, budget=10, seconds=None, fingerprint=identity.fingerprint, device=identity.device,
        versions=identity.versions, mode=mode, options={"note": "test"},
    )


def ok(key: str, ms: float, source: Source = Source.MEASURED, samples=()) -> Result:
    return Result(key=key, status=Status.OK, median_ms=ms, min_ms=ms * 0.9, max_ms=ms * 1.1, repetitions=7,
                  compile_s=0.5, bench_s=0.2, rel_error=1e-4, source=source, samples_ms=tuple(samples))


def failed(key: str, status: Status = Status.COMPILE_ERROR) -> Result:
    return Result(key=key, status=status, error=f"boom: {status.value}\nsecond line", compile_s=1.5)


C1 = make_candidate({"BLOCK_SIZE": 256, "num_warps": 2})
C2 = make_candidate({"BLOCK_SIZE": 512, "num_warps": 4})
C3 = make_candidate({"BLOCK_SIZE": 1024, "num_warps": 8})


# -- schema ----------------------------------------------------------------------------------


def test_schema_is_created(tmp_path):
    path = tmp_path / "t.db"
    cache = Cache.open(path, create=True)
    cache.close()
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "spaces", "sessions", "evaluations", "aliases", "baselines"} <= tables
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    conn.close()
    reopened = Cache.open(path)  # an existing cache opens without create
    assert reopened.integrity_ok()
    assert reopened.sessions() == []
    reopened.close()


def test_create_is_idempotent(tmp_path):
    path = tmp_path / "t.db"
    Cache.open(path, create=True).close()
    Cache.open(path, create=True).close()
    assert table_count(path, "meta") == 1


# -- rows written and read back ------------------------------------------------------------------


def test_spaces_are_stored_with_their_definition(tmp_db):
    identity = toy_identity()
    assert tmp_db.put_space(identity) == identity.fingerprint
    tmp_db.put_space(identity)  # twice is fine
    record = tmp_db.get_space(identity.fingerprint)
    assert record.space == identity.space
    assert record.shape == (64, 1000) and record.dtype == "float16" and record.device == "NVIDIA H100"
    assert record.versions == VERSIONS and record.source_hash == identity.source_hash
    assert [r.fingerprint for r in tmp_db.find_spaces("toy", (64, 1000), "float16")] == [identity.fingerprint]
    assert tmp_db.find_spaces("toy", (64, 1001), "float16") == []
    assert tmp_db.find_spaces("toy", (64, 1000), "bfloat16") == []
    assert tmp_db.find_spaces("other") == []
    assert tmp_db.get_space("nope") is None


def test_find_spaces_prefers_the_space_with_most_measurements(tmp_db):
    a, b = toy_identity(device="A"), toy_identity(device="B")
    sa, sb = start(tmp_db, a), start(tmp_db, b)
    tmp_db.record(sa, a.fingerprint, 1, 0, C1, ok(C1.key, 1.0))
    for i, c in enumerate((C1, C2, C3)):
        tmp_db.record(sb, b.fingerprint, 1, i, c, ok(c.key, 1.0))
    tmp_db.record(sa, a.fingerprint, 1, 1, C2, ok(C2.key, 1.0, source=Source.REUSED))  # not a measurement
    found = tmp_db.find_spaces("toy", (64, 1000), "float16")
    assert [r.fingerprint for r in found] == [b.fingerprint, a.fingerprint]
    assert [r.evaluations for r in found] == [3, 1]


def test_session_rows_round_trip(tmp_db):
    identity = toy_identity()
    sid = start(tmp_db, identity, seed=5)
    rows = [(0, 0, C1, ok(C1.key, 2.0, samples=(1.9, 2.0, 2.2))), (1, 0, C2, failed(C2.key)),
            (1, 1, C3, ok(C3.key, 1.5)), (2, 0, C1, ok(C1.key, 9.0, source=Source.REUSED))]
    for generation, ordinal, candidate, result in reversed(rows):  # stored order must not matter
        tmp_db.record(sid, identity.fingerprint, generation, ordinal, candidate, result)
    back = tmp_db.session_evaluations(sid)
    assert [(r.generation, r.ordinal) for r in back] == [(g, o) for g, o, _, _ in rows]
    for row, (generation, ordinal, candidate, result) in zip(back, rows):
        assert row.session_id == sid
        assert row.candidate == candidate
        assert row.result == result  # every field, samples included
    session = tmp_db.session(sid)
    assert session["seed"] == 5 and session["shape"] == (64, 1000) and session["mode"] == "gpu"
    assert session["options"].extra == {"note": "test"} and session["versions"] == VERSIONS  # an untyped key kept
    assert session["evaluations"] == 4 and session["failures"] == 1
    assert session["ended"] is None and session["exit_reason"] is None
    tmp_db.end_session(sid, "budget", C3.key)
    session = tmp_db.session(sid)
    assert session["exit_reason"] == "budget" and session["best_key"] == C3.key and session["ended"] >= session["started"]
    assert tmp_db.session(sid + 100) is None


def test_samples_are_stored_compactly_and_losslessly_and_compact_rewrites_old_rows(tmp_path):
    import base64

    import numpy as np

    cache = Cache.open(tmp_path / "c.db", create=True)
    identity = toy_identity()
    sid = start(cache, identity)
    float32_ms = tuple(float(v) for v in np.array([0.04416, 181.6234, 0.0012345678], dtype=np.float32))
    float64_ms = (0.1, 1 / 3)  # not float32 values: kept to the last digit
    cache.record(sid, identity.fingerprint, 0, 0, C1, ok(C1.key, 0.05, samples=float32_ms))
    cache.record(sid, identity.fingerprint, 0, 1, C2, ok(C2.key, 0.05, samples=float64_ms))
    first, second = (text for (text,) in cache.db.execute("SELECT samples_json FROM evaluations ORDER BY id"))
    assert json.loads(first) == {"f32": base64.b64encode(np.array(float32_ms, dtype="<f4").tobytes()).decode()}
    assert json.loads(second) == [0.1, 1 / 3]
    rows = cache.session_evaluations(sid)
    assert rows[0].result.samples_ms == float32_ms and rows[1].result.samples_ms == float64_ms
    # rows written by older versions: float32 values spelt out as float64 (schema 1), or as their
    # shortest float32 text (schema 2)
    for i in range(200):
        cache.record(sid, identity.fingerprint, 1, i, C3, ok(C3.key, 0.05, samples=[0.5]))
    cache.db.conn.execute("UPDATE evaluations SET samples_json = ? WHERE generation = 1 AND ordinal < 100",
                          (json.dumps([float32_ms[0]] * 50),))
    cache.db.conn.execute("UPDATE evaluations SET samples_json = ? WHERE generation = 1 AND ordinal >= 100",
                          (json.dumps({"float32": [0.04416, 181.6234] * 25}),))
    cache.db.conn.commit()
    counts = cache.compact()
    assert counts["rows"] == 200 and counts["bytes_after"] < counts["bytes_before"]  # the old rows only
    assert cache.compact()["rows"] == 0  # nothing left to rewrite: nothing counted
    rows = cache.session_evaluations(sid)
    assert rows[2].result.samples_ms == (float32_ms[0],) * 50 and rows[2].result.median_ms == 0.05
    assert rows[-1].result.samples_ms == float32_ms[:2] * 25
    assert rows[0].result.samples_ms == float32_ms and rows[1].result.samples_ms == float64_ms
    assert all("f32" in json.loads(text) for (text,) in cache.db.execute(
        "SELECT samples_json FROM evaluations WHERE generation = 1"))
    assert cache.integrity_ok()
    cache.close()


def test_points_are_stored_as_values_in_the_space_order_and_compact_rewrites_old_rows(tmp_path):
    cache = Cache.open(tmp_path / "c.db", create=True)
    identity = toy_identity()
    sid = start(cache, identity)
    unordered = make_candidate({"num_warps": 2, "BLOCK_SIZE": 256})  # names in another order than the space's
    odd = make_candidate({"BLOCK_SIZE": 512, "num_warps": 4, "extra": True})  # a point of another definition
    cache.record(sid, identity.fingerprint, 0, 0, unordered, ok(unordered.key, 0.05))
    cache.record(sid, identity.fingerprint, 0, 1, odd, ok(odd.key, 0.06))
    cache.record_alias(identity.fingerprint, {"BLOCK_SIZE": 256, "num_warps": 2}, unordered)
    stored = [text for (text,) in cache.db.execute("SELECT params_json FROM evaluations ORDER BY id")]
    assert stored == ['[256,2]', '{"BLOCK_SIZE":512,"extra":true,"num_warps":4}']
    assert [r.candidate for r in cache.session_evaluations(sid)] == [unordered, odd]
    assert cache.aliases(identity.fingerprint)[params_key({"BLOCK_SIZE": 256, "num_warps": 2})][0] == unordered.params
    # a row written by schema 3 (the point as an object) reads the same, and compact rewrites it
    cache.record(sid, identity.fingerprint, 1, 0, C3, ok(C3.key, 0.07))
    cache.db.conn.execute("UPDATE evaluations SET params_json = ? WHERE generation = 1",
                          ('{"BLOCK_SIZE":1024,"num_warps":8}',))
    cache.db.conn.commit()
    before = cache.session_evaluations(sid)
    assert before[2].candidate == C3
    cache.compact()
    assert cache.db.execute("SELECT params_json FROM evaluations WHERE generation = 1").fetchone()[0] == "[1024,8]"
    assert cache.session_evaluations(sid) == before and cache.best(identity.fingerprint)[0] == unordered
    cache.close()
    reopened = Cache.open(tmp_path / "c.db")  # a fresh connection knows the space's names from its definition
    assert reopened.session_evaluations(sid) == before
    reopened.close()


def test_duplicate_position_in_a_session_is_refused(tmp_db):
    identity = toy_identity()
    sid = start(tmp_db, identity)
    tmp_db.record(sid, identity.fingerprint, 1, 0, C1, ok(C1.key, 1.0))
    with pytest.raises(sqlite3.IntegrityError):
        tmp_db.record(sid, identity.fingerprint, 1, 0, C2, ok(C2.key, 1.0))
    assert len(tmp_db.session_evaluations(sid)) == 1  # the failed write left nothing behind


def test_lookup_returns_the_latest_measurement(tmp_db):
    identity, other = toy_identity(), toy_identity(device="other")
    s1, s2 = start(tmp_db, identity), start(tmp_db, identity)
    tmp_db.record(s1, identity.fingerprint, 1, 0, C1, ok(C1.key, 2.0))
    tmp_db.record(s2, identity.fingerprint, 1, 0, C1, ok(C1.key, 1.5))
    tmp_db.record(s2, identity.fingerprint, 1, 1, C1, ok(C1.key, 9.0, source=Source.REUSED))
    tmp_db.record(s2, identity.fingerprint, 1, 2, C1, ok(C1.key, 8.0, source=Source.REPLAYED))
    found = tmp_db.lookup(identity.fingerprint, C1.key)
    assert found.median_ms == 1.5 and found.source is Source.MEASURED
    assert tmp_db.lookup(identity.fingerprint, C2.key) is None
    assert tmp_db.lookup(other.fingerprint, C1.key) is None
    tmp_db.record(s2, identity.fingerprint, 1, 3, C1, failed(C1.key, Status.CRASH))
    assert tmp_db.lookup(identity.fingerprint, C1.key).status is Status.CRASH  # latest, even a failure


def test_measurements_group_repeats_oldest_first(tmp_db):
    identity = toy_identity()
    s1, s2 = start(tmp_db, identity), start(tmp_db, identity)
    tmp_db.record(s1, identity.fingerprint, 1, 0, C1, ok(C1.key, 2.0))
    tmp_db.record(s1, identity.fingerprint, 1, 1, C2, failed(C2.key))
    tmp_db.record(s2, identity.fingerprint, 1, 0, C1, ok(C1.key, 1.5))
    tmp_db.record(s2, identity.fingerprint, 1, 1, C3, ok(C3.key, 0.5, source=Source.REUSED))
    grouped = tmp_db.measurements(identity.fingerprint)
    assert set(grouped) == {C1.key, C2.key}  # reused rows are not measurements
    assert [r.median_ms for r in grouped[C1.key]] == [2.0, 1.5]
    assert [r.status for r in grouped[C2.key]] == [Status.COMPILE_ERROR]
    assert tmp_db.measurements(toy_identity(device="x").fingerprint) == {}


def test_best_is_the_fastest_accurate_measurement(tmp_db):
    identity = toy_identity()
    sid = start(tmp_db, identity)
    assert tmp_db.best(identity.fingerprint) is None
    tmp_db.record(sid, identity.fingerprint, 1, 0, C1, ok(C1.key, 2.0))
    tmp_db.record(sid, identity.fingerprint, 1, 1, C2, failed(C2.key, Status.WRONG_RESULT))
    tmp_db.record(sid, identity.fingerprint, 1, 2, C3, ok(C3.key, 1.25))
    tmp_db.record(sid, identity.fingerprint, 1, 3, C2, ok(C2.key, 0.1, source=Source.REPLAYED))
    candidate, result = tmp_db.best(identity.fingerprint)
    assert candidate == C3 and result.median_ms == 1.25


def test_baselines_by_session_and_by_fingerprint(tmp_db):
    identity = toy_identity()
    s1, s2 = start(tmp_db, identity), start(tmp_db, identity)
    tmp_db.record_baseline(s1, identity.fingerprint, "torch.softmax", ok("torch.softmax", 1.0))
    tmp_db.record_baseline(s1, identity.fingerprint, "other", failed("other", Status.CRASH))
    tmp_db.record_baseline(s2, identity.fingerprint, "torch.softmax", ok("torch.softmax", 0.75))
    first = tmp_db.baselines(session_id=s1)
    assert set(first) == {"torch.softmax", "other"}
    assert first["torch.softmax"].median_ms == 1.0 and first["other"].status is Status.CRASH
    assert {k: v.median_ms for k, v in tmp_db.baselines(session_id=s2).items()} == {"torch.softmax": 0.75}
    latest = tmp_db.baselines(fingerprint=identity.fingerprint)
    assert latest["torch.softmax"].median_ms == 0.75 and latest["other"].status is Status.CRASH
    assert tmp_db.baselines(fingerprint="nope") == {}


def test_aliases(tmp_db):
    identity = toy_identity()
    raw = {"num_warps": 2, "BLOCK_SIZE": 256}
    canonical = {"BLOCK_SIZE": 256, "num_warps": 2}
    candidate = make_candidate({"BLOCK_SIZE": 256, "num_warps": 2, "extra": [None]}, canonical)
    tmp_db.record_alias(identity.fingerprint, raw, candidate)
    tmp_db.record_alias(identity.fingerprint, raw, C2)  # the first mapping wins
    aliases = tmp_db.aliases(identity.fingerprint)
    assert aliases == {params_key(raw): (canonical, {"BLOCK_SIZE": 256, "num_warps": 2, "extra": [None]})}
    assert tmp_db.aliases("other") == {}


def test_compact_drops_the_alias_json_an_evaluation_holds_and_reads_back_the_same(tmp_path):
    """Most aliases are of configs then measured: compact keeps their key alone and `aliases`
    reads the rest from the evaluation.  An alias of a config never measured keeps its JSON,
    and a copy merged elsewhere reads back the same."""
    cache = Cache.open(tmp_path / "c.db", create=True)
    identity = toy_identity()
    sid = start(cache, identity)
    measured = [make_candidate({"BLOCK_SIZE": b, "num_warps": w}) for b in (256, 512, 1024) for w in (2, 4, 8)]
    for i, candidate in enumerate(measured):
        raw = {"num_warps": candidate.native["num_warps"], "BLOCK_SIZE": candidate.native["BLOCK_SIZE"], "i": i}
        cache.record_alias(identity.fingerprint, raw, candidate)
        cache.record(sid, identity.fingerprint, 1, i, candidate, ok(candidate.key, 1.0 + i))
    never_measured = make_candidate({"BLOCK_SIZE": 2048, "num_warps": 16})
    cache.record_alias(identity.fingerprint, {"BLOCK_SIZE": 2048}, never_measured)
    before = cache.aliases(identity.fingerprint)
    assert len(before) == 10
    counts = cache.compact()
    assert counts["aliases"] == 9
    assert cache.aliases(identity.fingerprint) == before
    assert table_count(tmp_path / "c.db", "aliases", "params_json IS NULL") == 9
    cache.record(sid, identity.fingerprint, 2, 0, measured[0], ok(measured[0].key, 0.5))  # measured again
    assert cache.aliases(identity.fingerprint) == before and cache.compact()["aliases"] == 0
    cache.close()
    home = Cache.open(tmp_path / "home.db", create=True)
    home.merge_from(tmp_path / "c.db")
    assert home.aliases(identity.fingerprint) == before
    home.close()


def test_sessions_are_listed_newest_first(tmp_db):
    identity = toy_identity()
    ids = [start(tmp_db, identity, seed=i) for i in range(4)]
    assert [s["id"] for s in tmp_db.sessions()] == list(reversed(ids))
    assert [s["id"] for s in tmp_db.sessions(limit=2)] == list(reversed(ids))[:2]


# -- durability and concurrency ----------------------------------------------------------------


def test_rows_are_durable_one_by_one(tmp_path):
    path = tmp_path / "t.db"
    writer = Cache.open(path, create=True)
    identity = toy_identity()
    sid = start(writer, identity)
    reader = sqlite3.connect(path)
    other_cache = Cache.open(path)
    for i in range(12):
        candidate = make_candidate({"BLOCK_SIZE": 256, "num_warps": 2, "i": i})
        writer.record(sid, identity.fingerprint, 1, i, candidate, ok(candidate.key, 1.0 + i))
        assert reader.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == i + 1
        assert len(other_cache.session_evaluations(sid)) == i + 1
    assert other_cache.session(sid)["ended"] is None  # all of that before the session ended
    reader.close()
    other_cache.close()
    writer.close()


def test_a_killed_writer_loses_nothing_it_recorded(tmp_path):
    path = tmp_path / "t.db"
    Cache.open(path, create=True).close()
    code = f"""
import os, sys
from autotune.store.cache import Cache
from search_spaces.space import config_key
from autotune.types import Candidate, Result, Status
cache = Cache.open({str(path)!r})
from search_spaces import Ordinal, SearchSpace, SpaceIdentity
space = SearchSpace(kernel="toy", family="triton", parameters=(Ordinal(name="n", choices=(1,), default_value=1),),
                    default={{"n": 1}})
ident = SpaceIdentity(space=space, signature={{"shape": [1], "dtype": "float16"}}, source_hash="x", versions={{}},
                      device="d")
cache.put_space(ident)
sid = cache.start_session(kernel="toy", shape=(1,), dtype="float16", strategy="random", seed=0, budget=5,
                          seconds=None, fingerprint=ident.fingerprint, device="d", versions={{}}, mode="gpu", options={{}})
for i in range(5):
    native = {{"n": 1, "i": i}}
    cache.record(sid, ident.fingerprint, 1, i, Candidate(native, native, config_key(native)),
                 Result(key=config_key(native), status=Status.OK, median_ms=1.0))
os._exit(9)  # no close, no end_session, no commit hooks
"""
    done = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 9, done.stderr
    cache = Cache.open(path)
    assert cache.integrity_ok()
    assert table_count(path, "evaluations") == 5
    (session,) = cache.sessions()
    assert session["evaluations"] == 5 and session["ended"] is None
    cache.close()


def test_concurrent_readers_while_a_writer_writes(tmp_path):
    path = tmp_path / "t.db"
    setup = Cache.open(path, create=True)
    identity = toy_identity()
    sid = start(setup, identity)
    setup.close()
    total = 150
    errors: list[BaseException] = []
    done = threading.Event()
    seen: dict[int, list[int]] = {}

    readers = 3
    ready = threading.Barrier(readers + 1, timeout=60)

    def write():
        try:
            cache = Cache.open(path)
            ready.wait()  # every reader has its connection open and is about to read
            for i in range(total):
                candidate = make_candidate({"BLOCK_SIZE": 256, "num_warps": 2, "i": i})
                cache.record(sid, identity.fingerprint, 1, i, candidate, ok(candidate.key, 1.0))
                time.sleep(0.001)
            cache.end_session(sid, "budget", None)
            cache.close()
        except BaseException as error:  # noqa: BLE001
            errors.append(error)
        finally:
            done.set()

    def read(index: int):
        try:
            cache = Cache.open(path)
            counts = seen.setdefault(index, [])
            ready.wait()
            while not done.is_set():
                counts.append(len(cache.session_evaluations(sid)))
                measured = sum(len(v) for v in cache.measurements(identity.fingerprint).values())
                assert measured >= counts[-1]  # read later, so never fewer
            counts.append(len(cache.session_evaluations(sid)))
            cache.close()
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(readers)] + [threading.Thread(target=write)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    for counts in seen.values():
        assert counts == sorted(counts), "a reader saw rows disappear"
        assert counts[-1] == total
    assert any(0 < c < total for counts in seen.values() for c in counts), "readers never overlapped the writer"
    assert table_count(path, "evaluations") == total


def test_concurrent_writer_processes_queue_instead_of_failing(tmp_path):
    path = tmp_path / "t.db"
    code = """
import os, sys, time
from autotune.store.cache import Cache
from autotune.types import Candidate, Result, Status
from search_spaces import Ordinal, SearchSpace, SpaceIdentity
from search_spaces.space import config_key
worker = int(sys.argv[1])
cache = Cache.open(sys.argv[2], create=True)
space = SearchSpace(kernel="toy", family="triton", parameters=(Ordinal(name="n", choices=(1,), default_value=1),),
                    default={"n": 1})
ident = SpaceIdentity(space=space, signature={"shape": [1], "dtype": "float16"}, source_hash="x", versions={},
                      device="d")
cache.put_space(ident)
sid = cache.start_session(kernel="toy", shape=(1,), dtype="float16", strategy="random", seed=worker, budget=60,
                          seconds=None, fingerprint=ident.fingerprint, device="d", versions={}, mode="gpu", options={})
print("ready", flush=True)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.005)
for i in range(60):
    native = {"worker": worker, "i": i}
    cache.record(sid, ident.fingerprint, 1, i, Candidate(native, native, config_key(native)),
                 Result(key=config_key(native), status=Status.OK, median_ms=1.0))
    time.sleep(0.002)
cache.end_session(sid, "budget", None)
print("done", worker)
"""
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w), str(path), str(go)], env=subprocess_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(3)]
    try:
        for p in procs:  # all three have created or opened the cache and started a session
            assert p.stdout.readline().strip() == "ready", p.stderr.read() if p.poll() is not None else ""
    finally:
        go.touch()
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
    cache = Cache.open(path)
    assert cache.integrity_ok()
    assert table_count(path, "evaluations") == 180
    assert sorted(s["evaluations"] for s in cache.sessions()) == [60, 60, 60]
    order = [r[0] for r in cache.db.execute("SELECT session_id FROM evaluations ORDER BY id")]
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches > 2, "the writers never overlapped, so nothing was tested"
    assert table_count(path, "meta") == 1 and table_count(path, "spaces") == 1
    cache.close()


# -- files that are not caches -----------------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "nope.db"
    with pytest.raises(CacheError, match="does not exist"):
        Cache.open(path)
    assert not path.exists()


def test_directory(tmp_path):
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(CacheError, match="directory"):
        Cache.open(tmp_path / "dir.db")
    with pytest.raises(CacheError, match="directory"):
        Cache.open(tmp_path / "dir.db", create=True)


@pytest.mark.parametrize("create", [False, True])
def test_non_database_file(tmp_path, create):
    path = tmp_path / "junk.db"
    content = random.Random(0).randbytes(8192)
    path.write_bytes(content)
    with pytest.raises(CacheError) as info:
        Cache.open(path, create=create)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert path.read_bytes() == content  # never overwritten


def test_text_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 50)
    with pytest.raises(CacheError):
        Cache.open(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(CacheError, match="empty"):
        Cache.open(path)
    assert path.stat().st_size == 0


def test_empty_sqlite_database(tmp_path):
    path = tmp_path / "empty.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")  # a real sqlite file with no tables
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="empty"):
        Cache.open(path)


def test_foreign_sqlite_database(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="not an autotune cache"):
        Cache.open(path)
    with pytest.raises(CacheError):
        Cache.open(path, create=True)
    assert table_count(path, "photos") == 0
    conn = sqlite3.connect(path)
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} == {"photos"}
    conn.close()


def _set_schema_version(path, value):
    Cache.open(path, create=True).close()
    conn = sqlite3.connect(path)
    if value is None:
        conn.execute("DELETE FROM meta WHERE key='schema_version'")
    else:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (value,))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [str(SCHEMA_VERSION + 1), "0", None, pytest.param(
    "two")])
def test_other_schema_version(tmp_path, version):
    path = tmp_path / "t.db"
    _set_schema_version(path, version)
    with pytest.raises(CacheError) as info:
        Cache.open(path)
    assert "schema" in str(info.value)
    assert str(SCHEMA_VERSION) in str(info.value)


def test_integrity_ok_on_a_filled_database(tmp_db):
    identity = toy_identity()
    sid = start(tmp_db, identity)
    for i, c in enumerate((C1, C2, C3)):
        tmp_db.record(sid, identity.fingerprint, 1, i, c, ok(c.key, 1.0))
    assert tmp_db.integrity_ok()
    assert json.loads(json.dumps(tmp_db.session(sid)["options"].to_record()))["note"] == "test"
