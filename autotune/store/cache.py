"""The sqlite cache: the only module that touches the database.

Every evaluation is written as its own committed row the moment it completes (WAL mode),
so a killed run loses at most the evaluation in flight.  Spaces are stored with their
full definition beside the fingerprint, so a machine that cannot rebuild the space (a CPU
replaying GPU data) uses exactly the recorded one.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import sqlite_utils

from autotune.store.schema import SCHEMA as _SCHEMA  # noqa: F401 - tests build old databases from it
from autotune.store.schema import SCHEMA_VERSION, CacheError, check_schema, create_schema
from autotune.store.schema import transaction as _transaction
from autotune.store.layers import attach_shipped, create_views, read_only_uri, same_file
from autotune.store.merge import merge_into, session_here
from autotune.store.guard import _refuse_if_forbidden
from autotune.store.rows import (  # noqa: F401 - params_* and samples_* are read through this module too
    _INSERT_NAMES, _RESULT_COLUMNS, _alias_row, _evaluation_values, _result, params_from_text, params_text,
    samples_from_text, samples_text,
)
from autotune.session_options import NewerOptions, SessionOptions
from autotune.types import Candidate, Result, Status
from search_spaces.fingerprint import SpaceIdentity
from search_spaces.space import SearchSpace, canonical_json

BUSY_TIMEOUT_MS = 60_000


class DamagedDatabase(CacheError):
    """sqlite met damage while reading rows (the checks made on opening passed)."""


@dataclass(frozen=True)
class SpaceRecord:
    fingerprint: str
    kernel: str
    shape: tuple[int, ...]
    dtype: str
    device: str
    versions: dict[str, str]
    source_hash: str
    space: SearchSpace
    evaluations: int = 0


@dataclass(frozen=True)
class EvaluationRow:
    session_id: int
    generation: int
    ordinal: int
    candidate: Candidate
    result: Result
    created: float | None = None  # when the row was recorded (time.time()): a session's timeline read back


def _now() -> float:
    return round(time.time(), 3)


class Cache:
    """A tuning database.  Open with `Cache.open(path)` (existing) or `Cache.create(path)`."""

    def __init__(self, db: sqlite_utils.Database, path: Path) -> None:
        self.db = db
        self.path = path
        self.schema_version = SCHEMA_VERSION
        self._space_names: dict[str, tuple[str, ...]] = {}
        self.read_only = False  # the shipped data opened alone: every write is refused
        self.shipped: Path | None = None  # the shipped data attached read-only beside `path`

    # -- opening -------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, create: bool = False, migrate: bool = True,
             shipped: str | Path | None = None) -> "Cache":
        """Open a database; with `create`, make it (and its schema) when it does not exist.

        With `shipped` (the shipped measurements, normally `data/shipped.db`, built from the
        batches beside it when missing or stale: `autotune.store.build`), that file is attached
        read-only and every read sees both (see `layers`); writes go to `path` only.  When
        `path` does not exist and is not to be created, the shipped file alone is opened, read-only.
        An older database is migrated to the current schema on opening; with `migrate=False`
        it is left as it was and may only be read (what `merge_from` does with its sources).
        Refused in a process where cache writes are forbidden (a distributed worker), unless
        the path was allowed by `allow_database`.
        """
        path = Path(path)
        layer = Path(shipped) if shipped is not None and str(shipped) not in ("", "none") else None
        from autotune.store.build import ensure_current

        if layer is not None:  # built from the batches beside it when missing or stale (autotune.store.build)
            layer = ensure_current(layer)
        if not create:  # the shipped data named as --db (data/shipped.db) is built the same way
            path = ensure_current(path)
        if _is_build_product(path):  # a database built from batches is only ever read
            return cls._open_file(path, read_only=True)
        if layer is not None and (not layer.exists() or same_file(path, layer)):
            layer = None
        if layer is not None and not path.exists() and not create:
            return cls._open_file(layer, read_only=True)
        cache = cls._open_file(path, create=create, migrate=migrate)
        if layer is not None:
            attach_shipped(cache.db.conn, layer, path)
            cache.shipped = layer
        create_views(cache.db.conn, shipped=layer is not None)
        return cache

    @classmethod
    def _open_file(cls, path: Path, *, create: bool = False, migrate: bool = True,
                   read_only: bool = False) -> "Cache":
        _refuse_if_forbidden(path)
        if not path.exists() and not create:
            raise CacheError(f"database {path} does not exist")
        if path.exists() and path.is_dir():
            raise CacheError(f"{path} is a directory, not a database file")
        try:
            target = read_only_uri(path) if read_only else str(path)
            conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, uri=read_only)
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as error:
            raise CacheError(f"{path} is not a readable sqlite database ({error})") from None
        cache = cls(sqlite_utils.Database(conn), path)
        cache.read_only = read_only
        if not tables:
            if not create:
                raise CacheError(f"{path} is an empty database, not an autotune cache")
            create_schema(conn)
        else:
            cache.schema_version = check_schema(conn, path, tables, migrate=migrate and not read_only)
            if read_only and cache.schema_version != SCHEMA_VERSION:
                raise CacheError(f"{path} has cache schema {cache.schema_version} and is opened read-only: "
                                 f"this autotune reads {SCHEMA_VERSION}")
        if read_only:
            create_views(conn, shipped=False)
        return cache

    def _names(self, fingerprint: str) -> tuple[str, ...] | None:
        """The parameter names of a stored space, in order: points are written as their values in
        this order (see `params_text`).  None for a space not stored here, or whose definition
        does not read as a space (files of early versions): its points keep the object form."""
        names = self._space_names.get(fingerprint)
        if names is None:
            try:
                record = self.get_space(fingerprint)
            except (KeyError, TypeError, ValueError):
                return None
            if record is None:
                return None
            names = self._space_names[fingerprint] = tuple(record.space.names)
        return names

    def _point(self, text: str, fingerprint: str) -> dict[str, Any]:
        """A stored point read back; the space's definition is read only for a list of values."""
        return params_from_text(text, self._names(fingerprint) if text.startswith("[") else None)

    def close(self) -> None:
        self.db.conn.close()

    # -- spaces ------------------------------------------------------------------------
    def put_space(self, identity: SpaceIdentity) -> str:
        signature = identity.signature
        self._table("spaces").insert(dict(
            fingerprint=identity.fingerprint, kernel=identity.space.kernel, shape=json.dumps(list(signature["shape"])),
            dtype=str(signature["dtype"]), device=identity.device, versions=canonical_json(dict(identity.versions)),
            source_hash=identity.source_hash, definition=canonical_json(identity.space.to_dict()), created=_now(),
        ), ignore=True)
        return identity.fingerprint

    def find_spaces(self, kernel: str, shape: tuple[int, ...] | None = None, dtype: str | None = None) -> list[SpaceRecord]:
        """Recorded spaces of a kernel (optionally one shape and dtype), most data first."""
        sql = ("SELECT s.*, (SELECT COUNT(*) FROM all_evaluations e WHERE e.space_fingerprint = s.fingerprint"
               " AND e.source = 'measured') AS n FROM all_spaces s WHERE kernel = ?")
        args: list[Any] = [kernel]
        if shape is not None:
            sql += " AND shape = ?"
            args.append(json.dumps(list(shape)))
        if dtype is not None:
            sql += " AND dtype = ?"
            args.append(dtype)
        rows = self.db.execute(sql + " ORDER BY n DESC, created DESC", args).fetchall()
        return [self._space_record(dict(zip(self._columns("spaces") + ["n"], r))) for r in rows]

    def get_space(self, fingerprint: str) -> SpaceRecord | None:
        row = self.db.execute("SELECT * FROM all_spaces WHERE fingerprint = ?", (fingerprint,)).fetchone()
        return self._space_record(dict(zip(self._columns("spaces"), row))) if row else None

    @staticmethod
    def _space_record(row: Mapping[str, Any]) -> SpaceRecord:
        return SpaceRecord(
            fingerprint=row["fingerprint"], kernel=row["kernel"], shape=tuple(json.loads(row["shape"])),
            dtype=row["dtype"], device=row["device"], versions=json.loads(row["versions"]),
            source_hash=row["source_hash"], space=SearchSpace.from_dict(json.loads(row["definition"])),
            evaluations=int(row.get("n") or 0),
        )

    # -- sessions -------------------------------------------------------------------
    def start_session(self, *, kernel: str, shape: tuple[int, ...], dtype: str, strategy: str, seed: int,
                      budget: int | None, seconds: float | None, fingerprint: str, device: str,
                      versions: Mapping[str, str], mode: str, options: Mapping[str, Any]) -> int:
        table = self._table("sessions").insert(dict(
            kernel=kernel, shape=json.dumps(list(shape)), dtype=dtype, strategy=strategy, seed=seed, budget=budget,
            seconds=seconds, space_fingerprint=fingerprint, device=device, versions=canonical_json(dict(versions)),
            mode=mode, options=canonical_json(dict(options)), started=_now(),
        ))
        return int(table.last_rowid)

    def end_session(self, session_id: int, exit_reason: str, best_key: str | None) -> None:
        self._table("sessions").update(session_id, {"ended": _now(), "exit_reason": exit_reason, "best_key": best_key})

    def reopen_session(self, session_id: int, *, budget: int | None = None) -> None:
        """Mark a stopped session as running again (it is being resumed, perhaps with a larger budget)."""
        changes: dict[str, Any] = {"ended": None, "exit_reason": None}
        if budget is not None:
            changes["budget"] = budget
        self._table("sessions").update(session_id, changes)

    def session(self, session_id: int) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM all_sessions WHERE id = ?", (session_id,)).fetchone()
        return self._session_dict(row) if row else None

    def session_count(self) -> int:
        """How many sessions can be read here (the user's and the shipped ones)."""
        return int(self.db.execute("SELECT COUNT(*) FROM all_sessions").fetchone()[0])

    def holds_session(self, session_id: int) -> bool:
        """Whether a session is this database's own (not one read from the attached shipped data)."""
        if self.read_only:
            return False
        return self.db.execute("SELECT 1 FROM main.sessions WHERE id = ?", (session_id,)).fetchone() is not None

    def sessions(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM all_sessions ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [self._session_dict(r) for r in rows]

    def _session_dict(self, row: tuple) -> dict[str, Any]:
        data = dict(zip(self._columns("sessions"), row))
        data["shape"] = tuple(json.loads(data["shape"]))
        data["versions"] = json.loads(data["versions"])
        try:
            data["options"] = SessionOptions.from_record(json.loads(data["options"]))
        except NewerOptions as error:
            raise CacheError(f"session {data['id']} in {self.path}: {error}") from None
        counts = self.db.execute(
            "SELECT SUM(generation >= 0), SUM(generation >= 0 AND status != 'ok'), SUM(generation < 0)"
            " FROM all_evaluations WHERE session_id = ?", (data["id"],),
        ).fetchone()
        data["evaluations"], data["failures"], data["rebenchmarked"] = (int(c or 0) for c in counts)
        data["measured_on"] = self.measured_on_counts(data["id"])
        return data

    # -- evaluations ------------------------------------------------------------------
    def record(self, session_id: int, fingerprint: str, generation: int, ordinal: int,
               candidate: Candidate, result: Result, *, origin: str | None = None) -> None:
        """Write one evaluation as its own committed row; `origin` says where its config came from
        (the default, a seed source, the search, the final re-benchmark)."""
        row = dict(zip(_INSERT_NAMES, _evaluation_values(
            session_id, fingerprint, generation, ordinal, candidate, result, _now(), self._names(fingerprint))))
        self._table("evaluations").insert({**row, "origin": origin})

    def origins(self, session_id: int) -> dict[str, str]:
        """Config key -> where it came from, for a session's search-time rows (schema 5 on)."""
        rows = self.db.execute("SELECT config_key, origin FROM all_evaluations WHERE session_id = ? AND"
                               " generation >= 0 AND origin IS NOT NULL ORDER BY id", (session_id,)).fetchall()
        found: dict[str, str] = {}
        for key, origin in rows:
            found.setdefault(key, origin)
        return found

    def record_many(self, session_id: int, fingerprint: str,
                    rows: list[tuple[int, int, Candidate, Result]], *, aliases: bool = False) -> None:
        """Write (generation, ordinal, candidate, result) rows in one transaction: bulk imports of
        thousands of recorded configs take seconds, and a failure leaves none of them behind.
        With `aliases`, also remember each candidate's point -> config mapping (as `record_alias`)."""
        now, names = _now(), self._names(fingerprint)
        with _transaction(self._writable()):
            self._table("evaluations").insert_all(
                dict(zip(_INSERT_NAMES, _evaluation_values(session_id, fingerprint, gen, ordinal, c, r, now, names)))
                for gen, ordinal, c, r in rows)
            if aliases:
                self._table("aliases").insert_all((_alias_row(fingerprint, c.params, c, names) for _, _, c, _ in rows),
                                                  ignore=True)

    def merge_from(self, path: str | Path, *, fork_divergent: bool = False) -> dict[str, int]:
        """Copy every space, session, evaluation, baseline and alias of another database into this one.

        Why: measurements are made on GPU machines into copies of a database and must come home
        without renumbering by hand.  Sessions get new ids here.  A session already present (same
        space, strategy, seed, device and start time) is brought up to date instead: it may have
        been resumed in the copy, so the rows it lacks are added and, where the copy got further,
        its end is taken; rows already here are never duplicated or changed, so merging twice adds
        nothing.  Two copies that recorded different configs at one place of a session are two
        histories, refused (UserError), or with `fork_divergent` the copy's rows from the first
        difference on are kept as a new session marked as a fork of this one.  One transaction: a
        failure or a refusal leaves this database as it was.  An older source is read as it is
        (never migrated): columns it lacks stay empty here.
        """
        other = Cache.open(path, migrate=False)  # refuses missing, foreign and newer files with a clear message
        source_columns = {table: other._columns(table) for table in ("evaluations", "baselines", "calibrations")}
        other.close()
        try:
            return merge_into(self._writable(), path, {table: self._columns(table) for table in source_columns},
                              source_columns, self._columns("sessions"), fork_divergent=fork_divergent)
        except sqlite3.DatabaseError as error:  # damage found only once the rows are read
            raise DamagedDatabase(str(error)) from None

    def session_here(self, path: str | Path, source_id: int) -> int | None:
        """This database's id of session `source_id` of the database at `path`, after `merge_from`
        (why: a run recorded into a scratch copy must name the session its results now live in)."""
        return session_here(self.db.conn, path, source_id, self._columns("sessions"))

    def record_alias(self, fingerprint: str, raw: Mapping[str, Any], candidate: Candidate) -> None:
        """Remember which normalised config a raw point became (replay needs this off the GPU)."""
        self._table("aliases").insert(_alias_row(fingerprint, raw, candidate, self._names(fingerprint)), ignore=True)

    def aliases(self, fingerprint: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """Raw point key -> (normalised point, native config) for a space; an alias whose JSON
        `compact` dropped reads it from the evaluation of its config."""
        rows = self.db.execute(
            "SELECT a.params_key, COALESCE(a.params_json, e.params_json), COALESCE(a.config_json, e.config_json)"
            " FROM all_aliases a LEFT JOIN all_evaluations e ON a.params_json IS NULL AND e.id = (SELECT MIN(id) FROM"
            " all_evaluations WHERE space_fingerprint = a.space_fingerprint AND config_key = a.config_key)"
            " WHERE a.space_fingerprint = ?", (fingerprint,)
        ).fetchall()
        return {k: (self._point(p, fingerprint), json.loads(c)) for k, p, c in rows}

    def lookup(self, fingerprint: str, key: str) -> Result | None:
        """The latest search-time measurement of a config for a space, or None."""
        row = self.db.execute(
            f"SELECT {_RESULT_COLUMNS} FROM all_evaluations WHERE space_fingerprint = ? AND config_key = ?"
            f" AND source = 'measured' AND generation >= 0 ORDER BY id DESC LIMIT 1", (fingerprint, key),
        ).fetchone()
        return _result(row) if row else None

    def measurements(self, fingerprint: str, *, rebench: bool = False) -> dict[str, list[Result]]:
        """Measured results of a space grouped by config key, oldest first.

        Search-time measurements by default; with `rebench`, only the final interleaved
        re-benchmarks (recorded as generation -1).
        """
        grouped: dict[str, list[Result]] = {}
        condition = "generation < 0" if rebench else "generation >= 0"
        for row in self.db.execute(
            f"SELECT {_RESULT_COLUMNS} FROM all_evaluations WHERE space_fingerprint = ? AND source = 'measured'"
            f" AND {condition} ORDER BY id", (fingerprint,),
        ):
            grouped.setdefault(row[0], []).append(_result(row))
        return grouped

    def measured_points(self, fingerprint: str) -> list[tuple[dict[str, Any], Result]]:
        """Every search-time measurement of a space with the point it measured, oldest first.

        What an oracle over the recorded space is built from (`autotune.simulation.oracle`):
        the point is needed to offer a strategy exactly the recorded points, the result to answer
        them.  Re-benchmarks (generation < 0) and replayed or reused rows are left out.
        """
        rows = self.db.execute(
            f"SELECT params_json, {_RESULT_COLUMNS} FROM all_evaluations WHERE space_fingerprint = ?"
            " AND source = 'measured' AND generation >= 0 ORDER BY id", (fingerprint,),
        ).fetchall()
        return [(self._point(text, fingerprint), _result(tuple(rest))) for text, *rest in rows]

    def distinct_valid(self, fingerprint: str) -> int:
        """How many distinct configs of a space were measured and ran correctly (any session)."""
        return self.db.execute(
            "SELECT COUNT(DISTINCT config_key) FROM all_evaluations WHERE space_fingerprint = ? AND status = 'ok'"
            " AND source = 'measured'", (fingerprint,),
        ).fetchone()[0]

    def session_modes(self, fingerprint: str) -> list[tuple[int, str | None]]:
        """(id, mode) of every session recorded under a space, oldest first."""
        rows = self.db.execute("SELECT id, mode FROM all_sessions WHERE space_fingerprint = ? ORDER BY id",
                               (fingerprint,)).fetchall()
        return [(int(i), mode) for i, mode in rows]

    def session_options_under(self, fingerprint: str) -> list[str]:
        """The recorded options (JSON text) of every session under a space."""
        return [text for (text,) in self.db.execute("SELECT options FROM all_sessions WHERE space_fingerprint = ?",
                                                    (fingerprint,))]

    def fastest_measured(self, fingerprint: str, *, except_mode: str) -> tuple[tuple[str, float, int] | None, int]:
        """The fastest accurate measured row of a space outside sessions of `except_mode` (config
        JSON, median ms, session), and how many sessions of that mode measured there."""
        left_out = "SELECT id FROM all_sessions WHERE mode = ?"
        row = self.db.execute(
            "SELECT config_json, median_ms, session_id FROM all_evaluations WHERE space_fingerprint = ?"
            f" AND source = 'measured' AND status = 'ok' AND session_id NOT IN ({left_out})"
            " ORDER BY median_ms LIMIT 1", (fingerprint, except_mode)).fetchone()
        skipped = self.db.execute(
            f"SELECT COUNT(DISTINCT session_id) FROM all_evaluations WHERE space_fingerprint = ? AND session_id IN "
            f"({left_out})", (fingerprint, except_mode)).fetchone()[0]
        found = (row[0], float(row[1]), int(row[2])) if row and row[1] is not None else None
        return found, int(skipped or 0)

    def session_evaluations(self, session_id: int) -> list[EvaluationRow]:
        rows = self.db.execute(
            f"SELECT generation, ordinal, space_fingerprint, params_json, config_json, created, {_RESULT_COLUMNS}"
            " FROM all_evaluations WHERE session_id = ? ORDER BY generation < 0, generation, ordinal, id", (session_id,),
        ).fetchall()
        result = []
        for generation, ordinal, fingerprint, params_json, config_json, created, *rest in rows:
            candidate = Candidate(params=self._point(params_json, fingerprint), native=json.loads(config_json),
                                  key=rest[0])
            result.append(EvaluationRow(session_id, generation, ordinal, candidate, _result(tuple(rest)), created))
        return result

    def best(self, fingerprint: str) -> tuple[Candidate, Result] | None:
        """The fastest accurate config ever measured for a space."""
        row = self.db.execute(
            f"SELECT params_json, config_json, {_RESULT_COLUMNS} FROM all_evaluations WHERE space_fingerprint = ?"
            " AND source = 'measured' AND status = 'ok' ORDER BY median_ms LIMIT 1", (fingerprint,),
        ).fetchone()
        if not row:
            return None
        params_json, config_json, *rest = row
        return Candidate(self._point(params_json, fingerprint), json.loads(config_json), rest[0]), _result(tuple(rest))

    def best_configs(self, fingerprint: str, limit: int) -> list[tuple[dict[str, Any], Result]]:
        """The `limit` fastest distinct accurate configs measured for a space (native form)."""
        rows = self.db.execute(
            f"SELECT config_json, {_RESULT_COLUMNS} FROM all_evaluations WHERE space_fingerprint = ? AND source = 'measured'"
            " AND status = 'ok' ORDER BY median_ms", (fingerprint,),
        ).fetchall()
        best: dict[str, tuple[dict[str, Any], Result]] = {}
        for config_json, *rest in rows:
            if len(best) >= limit:
                break
            best.setdefault(rest[0], (json.loads(config_json), _result(tuple(rest))))
        return list(best.values())

    # -- baselines ----------------------------------------------------------------------
    def record_baseline(self, session_id: int, fingerprint: str, name: str, result: Result) -> None:
        self._table("baselines").insert(dict(
            session_id=session_id, space_fingerprint=fingerprint, name=name, status=result.status.value,
            error=result.error[:4000], median_ms=result.median_ms, min_ms=result.min_ms, max_ms=result.max_ms,
            repetitions=result.repetitions, rel_error=result.rel_error, created=_now()))

    def baselines(self, *, session_id: int | None = None, fingerprint: str | None = None) -> dict[str, Result]:
        """Baselines of one session, or the latest of each name recorded for a space."""
        column, value = ("session_id", session_id) if session_id is not None else ("space_fingerprint", fingerprint)
        rows = self.db.execute(
            f"SELECT name, status, error, median_ms, min_ms, max_ms, repetitions, rel_error FROM all_baselines"
            f" WHERE {column} = ? ORDER BY id", (value,),
        ).fetchall()
        return {
            name: Result(key=name, status=Status(status), error=error or "", median_ms=med, min_ms=lo, max_ms=hi,
                         repetitions=reps or 0, rel_error=rel)
            for name, status, error, med, lo, hi, reps, rel in rows
        }

    def search_started(self, session_id: int) -> float | None:
        """When a session's search began.  Sessions that measured their baselines (torch eager,
        torch.compile, the copy) first began searching once those were done; sessions that
        measure them after the search began at their start; with neither, at the first row."""
        row = self.db.execute(
            "SELECT (SELECT MAX(created) FROM all_baselines WHERE session_id = :id),"
            " (SELECT MIN(created) FROM all_evaluations WHERE session_id = :id),"
            " (SELECT started FROM all_sessions WHERE id = :id)", {"id": session_id},
        ).fetchone()
        baselines_done, first_row, started = row if row else (None, None, None)
        if baselines_done is not None and (first_row is None or baselines_done <= first_row):
            return baselines_done
        return started if baselines_done is not None else first_row

    # -- where rows were measured: workers and their calibration ----------------------------
    def record_calibration(self, session_id: int, fingerprint: str, worker: str, result: Result) -> None:
        """One worker's timing of the session's reference config (`result.key`), so measurements
        made on several GPUs can be checked against each other."""
        self._table("calibrations").insert(dict(
            session_id=session_id, space_fingerprint=fingerprint, worker=worker, config_key=result.key,
            median_ms=result.median_ms, min_ms=result.min_ms, max_ms=result.max_ms, repetitions=result.repetitions,
            created=_now()))

    def calibrations(self, session_id: int) -> dict[str, Result]:
        """The reference config's timing on each worker of a session, keyed by worker."""
        rows = self.db.execute(
            "SELECT worker, config_key, median_ms, min_ms, max_ms, repetitions FROM all_calibrations"
            " WHERE session_id = ? ORDER BY id", (session_id,),
        ).fetchall()
        return {worker: Result(key=key, status=Status.OK, median_ms=med, min_ms=lo, max_ms=hi, repetitions=reps or 0,
                               measured_on=worker) for worker, key, med, lo, hi, reps in rows}

    def measured_on_counts(self, session_id: int) -> dict[str, int]:
        """How many of a session's rows each worker measured (rows with no worker left out)."""
        rows = self.db.execute(
            "SELECT measured_on, COUNT(*) FROM all_evaluations WHERE session_id = ? AND measured_on IS NOT NULL"
            " GROUP BY measured_on ORDER BY measured_on", (session_id,),
        ).fetchall()
        return {worker: int(n) for worker, n in rows}

    # -- upkeep --------------------------------------------------------------------------------
    def compact(self) -> dict[str, int]:
        """Shrink the file, losslessly: rewrite timing samples and points in the compact forms
        (see `samples_text` and `params_text`; rows written by older versions, or merged from
        older files, spell them out), drop the JSON of every alias that an evaluation of the same
        config holds exactly (read back through it by `aliases`), and give free pages back.
        Returns the rows rewritten, the aliases shortened and the file's size before and after,
        in bytes."""
        conn = self._writable()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # so the file's size is the database's
        before = self.path.stat().st_size
        with _transaction(conn):
            rows = conn.execute("SELECT id, samples_json FROM evaluations WHERE samples_json IS NOT NULL").fetchall()
            points_rewritten = 0
            rewritten = [(new, row_id) for row_id, text in rows if (new := samples_text(samples_from_text(text))) != text]
            conn.executemany("UPDATE evaluations SET samples_json = ? WHERE id = ?", rewritten)
            for table in ("evaluations", "aliases"):  # points still written as objects (schema 3)
                key = "id" if table == "evaluations" else "rowid"
                points = conn.execute(f"SELECT {key}, space_fingerprint, params_json FROM {table}"
                                      " WHERE params_json LIKE '{%'").fetchall()
                changed = [(new, row_id) for row_id, fingerprint, text in points
                           if (new := params_text(json.loads(text), self._names(fingerprint))) != text]
                conn.executemany(f"UPDATE {table} SET params_json = ? WHERE {key} = ?", changed)
                points_rewritten += len(changed) if table == "evaluations" else 0
            # Safe because one config key of a space has one normalised point and one native
            # config; the first evaluation (the one `aliases` reads) is required to match.
            shortened = conn.execute(
                "UPDATE aliases SET params_json = NULL, config_json = NULL WHERE params_json IS NOT NULL AND EXISTS"
                " (SELECT 1 FROM evaluations e WHERE e.id = (SELECT MIN(id) FROM evaluations WHERE space_fingerprint"
                " = aliases.space_fingerprint AND config_key = aliases.config_key) AND e.params_json ="
                " aliases.params_json AND e.config_json = aliases.config_json)").rowcount
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # in WAL mode the file shrinks only here
        return {"rows": len(rewritten) + points_rewritten, "aliases": shortened, "bytes_before": before,
                "bytes_after": self.path.stat().st_size}

    # -- plumbing --------------------------------------------------------------------------
    def _columns(self, table: str) -> list[str]:
        return [r[1] for r in self.db.execute(f"PRAGMA table_info({table})")]

    def _writable(self) -> sqlite3.Connection:
        """The connection, for a write; refused where this is the shipped data opened alone."""
        if self.read_only:
            raise CacheError(f"{self.path} is the shipped data and is read-only: record into a database of "
                             "your own with --db PATH")
        return self.db.conn

    def _table(self, name: str) -> sqlite_utils.db.Table:
        """A table of this database (never of the attached shipped file), for inserts and updates."""
        self._writable()
        return self.db.table(name)

    def integrity_ok(self) -> bool:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _is_build_product(path: Path) -> bool:
    from autotune.store.build import is_built

    return path.is_file() and is_built(path)


def is_damage(error: BaseException) -> bool:
    """Whether an error met mid-command is sqlite finding a damaged file (not a bug of ours)."""
    return isinstance(error, sqlite3.DatabaseError) and getattr(error, "sqlite_errorname", "") in (
        "SQLITE_CORRUPT", "SQLITE_NOTADB")


def checkpoint(path: str | Path) -> None:
    """Fold a database's write-ahead log into the file, so its bytes alone hold every row (what a
    distributed worker sends home)."""
    conn = sqlite3.connect(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


