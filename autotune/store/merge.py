"""Merging another database's sessions into this one (`Cache.merge_from`, `autotune merge`).

Part of the cache: the source database is attached as `other` to the target's connection and
everything happens in one transaction.  New sessions are copied under new ids; a session both
databases hold (a copy resumed elsewhere) is brought up to date row by row.  Where the two
copies recorded different configs at one place (the session was resumed in two places), the
merge is refused, or with `fork_divergent` the source's rows from that place on are kept as a
new, finished session that names the original and the place (a fork: measurements are never
thrown away, and the original's history stays the one it recorded).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Mapping

from autotune.store.schema import transaction
from autotune.errors import UserError
from search_spaces.space import canonical_json


FORKED = "diverged"  # the exit reason of a fork: it lacks the history before its first row, so it cannot resume


def merge_into(conn: sqlite3.Connection, path: str | Path, target_columns: Mapping[str, list[str]],
               source_columns: Mapping[str, list[str]], session_columns: list[str], *,
               fork_divergent: bool = False) -> dict[str, int]:
    """Merge the database at `path` into the one `conn` is open on (see `Cache.merge_from`).
    Returns counts: new sessions and their rows per table, sessions already here, how many of
    those were brought up to date with how many rows, and the forks kept with their rows."""
    columns = {table: [c for c in target_columns[table]  # none for a table the source's schema lacks
                       if c not in ("id", "session_id") and c in source_columns.get(table, ())]
               for table in _NATURAL_KEYS}
    counts = dict.fromkeys(("sessions", *_NATURAL_KEYS, "skipped_sessions", "extended_sessions",
                            "extended_rows", "forked_sessions", "forked_rows"), 0)
    conn.execute("ATTACH DATABASE ? AS other", (str(path),))
    try:
        with transaction(conn):
            conn.execute("INSERT OR IGNORE INTO spaces SELECT * FROM other.spaces")
            conn.execute("INSERT OR IGNORE INTO aliases SELECT * FROM other.aliases")
            listed = [c for c in session_columns if c != "id"]
            for row in conn.execute(f"SELECT id, {', '.join(listed)} FROM other.sessions ORDER BY id").fetchall():
                old_id, values = row[0], dict(zip(listed, row[1:]))
                here = _same_session(conn, values)
                if here is None:
                    counts["sessions"] += 1
                    values = _renumber_fork(conn, values)
                    for table, added in _copy_session(conn, columns, old_id, values).items():
                        counts[table] += added
                    continue
                counts["skipped_sessions"] += 1
                clash = _first_clash(conn, here, old_id)
                if clash is not None and fork_divergent:
                    forked = _keep_fork(conn, columns, here, old_id, values, clash[:2])
                    counts["forked_sessions"] += 1
                    counts["forked_rows"] += forked
                    continue
                if clash is not None:
                    _refuse_another_history(clash, here, old_id, values, path)
                added = _bring_up_to_date(conn, columns, here, old_id, values)
                if added is not None:
                    counts["extended_sessions"] += 1
                    counts["extended_rows"] += added
    finally:
        conn.execute("DETACH DATABASE other")
    return counts


def session_here(conn: sqlite3.Connection, path: str | Path, source_id: int, session_columns: list[str]) -> int | None:
    """The id here of session `source_id` of the database at `path` once merged (the same
    identity a merge matches on), or None where it is not here."""
    listed = [c for c in session_columns if c != "id"]
    conn.execute("ATTACH DATABASE ? AS other", (str(path),))
    try:
        row = conn.execute(f"SELECT {', '.join(listed)} FROM other.sessions WHERE id=?", (source_id,)).fetchone()
        return None if row is None else _same_session(conn, dict(zip(listed, row)))
    finally:
        conn.execute("DETACH DATABASE other")


# What makes a row of a session the same row in two copies of a database: evaluations are unique
# per place in the search; a session measures each baseline once; a calibration is taken anew
# each time the session is (re)started, so its time tells two apart.
_NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    "evaluations": ("generation", "ordinal"),
    "baselines": ("name",),
    "calibrations": ("worker", "config_key", "created"),
}


def _same_session(conn: sqlite3.Connection, values: Mapping[str, Any]) -> int | None:
    """The id here of the session the source's `values` describe, or None (identity: space,
    strategy, seed, device and start time, which a resume keeps).  A fork shares its original's
    identity: the source's fork is the fork here that parted at the same place, its original
    is the session here that is no fork."""
    place = _fork_place(values)
    identity = ("SELECT id FROM main.sessions WHERE space_fingerprint=? AND strategy=? AND seed IS ? AND device=?"
                " AND started=?")
    parameters: tuple[Any, ...] = (values["space_fingerprint"], values["strategy"], values["seed"], values["device"],
                                   values["started"])
    if place is None:
        row = conn.execute(identity + " AND exit_reason IS NOT ? ORDER BY id LIMIT 1", (*parameters, FORKED)).fetchone()
    else:
        row = conn.execute(identity + " AND exit_reason = ? AND json_extract(options, '$.forked_from.generation') = ?"
                           " AND json_extract(options, '$.forked_from.ordinal') = ? ORDER BY id LIMIT 1",
                           (*parameters, FORKED, *place)).fetchone()
    return int(row[0]) if row else None


def _fork_place(values: Mapping[str, Any]) -> tuple[int, int] | None:
    """(generation, ordinal) where a fork parted from its original; None for a session that is no fork."""
    if values.get("exit_reason") != FORKED:
        return None
    forked = json.loads(values["options"] or "{}").get("forked_from")
    return (int(forked["generation"]), int(forked["ordinal"])) if forked else None


def _renumber_fork(conn: sqlite3.Connection, values: dict[str, Any]) -> dict[str, Any]:
    """A fork new here names its original by the id the original has here (ids differ between
    copies; the original, listed before its forks, is here by now)."""
    if _fork_place(values) is None:
        return values
    original = _same_session(conn, {**values, "exit_reason": None})
    options = json.loads(values["options"])
    options["forked_from"]["session"] = original
    return {**values, "options": canonical_json(options)}


def _copy_session(conn: sqlite3.Connection, columns: Mapping[str, list[str]], source_id: int,
                  values: Mapping[str, Any]) -> dict[str, int]:
    """Add the source's session here under a new id, with all its rows.  Rows added per table."""
    names = ", ".join(values)
    new_id = conn.execute(f"INSERT INTO main.sessions({names}) VALUES ({', '.join('?' * len(values))})",
                          tuple(values.values())).lastrowid
    return _copy_rows(conn, columns, int(new_id), source_id)


def _copy_rows(conn: sqlite3.Connection, columns: Mapping[str, list[str]], target_id: int,
               source_id: int, *, fork_of: int | None = None, from_place: tuple[int, int] | None = None,
               ) -> dict[str, int]:
    """Copy a source session's rows into a session here, leaving out each row whose natural key
    the session here already has (none, for a session just created).  For a fork: only the
    evaluations from `from_place` (generation, ordinal) on, no baselines (the original `fork_of`
    holds them), and only the calibrations the original lacks.  Rows added per table."""
    added = {}
    for table, cols in columns.items():
        if not cols or (fork_of is not None and table == "baselines"):
            added[table] = 0
            continue
        same = " AND ".join(f"t.{c} = o.{c}" for c in _NATURAL_KEYS[table])
        where, parameters = "", ()
        if fork_of is not None and table == "evaluations":
            where = " AND (o.generation > ? OR (o.generation = ? AND o.ordinal >= ?))"
            parameters = (from_place[0], from_place[0], from_place[1])
        elif fork_of is not None:
            where = f" AND NOT EXISTS (SELECT 1 FROM main.{table} t WHERE t.session_id = ? AND {same})"
            parameters = (fork_of,)
        cursor = conn.execute(
            f"INSERT INTO main.{table}(session_id, {', '.join(cols)}) SELECT ?, {', '.join('o.' + c for c in cols)}"
            f" FROM other.{table} o WHERE o.session_id = ? AND NOT EXISTS"
            f" (SELECT 1 FROM main.{table} t WHERE t.session_id = ? AND {same}){where} ORDER BY o.id",
            (target_id, source_id, target_id, *parameters))
        added[table] = cursor.rowcount
    return added


def _bring_up_to_date(conn: sqlite3.Connection, columns: Mapping[str, list[str]], target_id: int, source_id: int,
                      source: Mapping[str, Any]) -> int | None:
    """Add to session `target_id` what the source's copy of it recorded after the two parted (a
    resume elsewhere; the same history, checked by the caller), and take the copy's end where the
    copy got further.  The rows added, or None where the session here was already up to date."""
    count = "SELECT COUNT(*) FROM {}.evaluations WHERE session_id = ?"
    theirs = conn.execute(count.format("other"), (source_id,)).fetchone()[0]
    ours = conn.execute(count.format("main"), (target_id,)).fetchone()[0]
    (ended,) = conn.execute("SELECT ended FROM main.sessions WHERE id = ?", (target_id,)).fetchone()
    # Further along: more rows, or as many and finished where this one is not.  A copy with fewer
    # rows is behind even when it says it ended: its end would misdescribe the longer history.
    further = theirs > ours or (theirs == ours and ended is None and source["ended"] is not None)
    added = sum(_copy_rows(conn, columns, target_id, source_id).values())
    if further:
        conn.execute("UPDATE main.sessions SET ended = ?, exit_reason = ?, best_key = ?, options = ? WHERE id = ?",
                     (source["ended"], source["exit_reason"], source["best_key"], source["options"], target_id))
    return added if added or further else None


def _first_clash(conn: sqlite3.Connection, target_id: int, source_id: int) -> tuple[int, int, str, str] | None:
    """The first place (generation, ordinal) where the source's copy of a session recorded another
    config than the session here, with the two config keys (theirs, ours); None for one history."""
    return conn.execute(
        "SELECT o.generation, o.ordinal, o.config_key, t.config_key FROM other.evaluations o JOIN main.evaluations t"
        " ON t.session_id = ? AND t.generation = o.generation AND t.ordinal = o.ordinal"
        " WHERE o.session_id = ? AND o.config_key != t.config_key ORDER BY o.generation, o.ordinal LIMIT 1",
        (target_id, source_id)).fetchone()


def _refuse_another_history(clash: tuple[int, int, str, str], target_id: int, source_id: int,
                            source: Mapping[str, Any], path: str | Path) -> None:
    """Refuse (UserError, one line) a source whose copy of the session recorded another config
    than this one at some place: the two continued differently, and no merge of them is true."""
    generation, ordinal, theirs, ours = clash
    raise UserError(
        f"cannot merge {path}: its session {source_id} is session {target_id} here ({source['kernel']} "
        f"{source['strategy']} seed {source['seed']}), but the two copies recorded different configs at "
        f"generation {generation}, ordinal {ordinal} ({theirs} there, {ours} here): they are two histories "
        f"of one session, so nothing of {path} was merged (--fork-divergent keeps its rows from there on as "
        f"a new session)")


def _keep_fork(conn: sqlite3.Connection, columns: Mapping[str, list[str]], original_id: int, source_id: int,
               source: Mapping[str, Any], place: tuple[int, int]) -> int:
    """Keep the source's rows from `place` on as a fork of session `original_id`: a new session
    (or the fork an earlier merge of the same copy made, brought up to date) with the source's
    identity and end, exit reason FORKED and `forked_from` in its options.  Rows added."""
    generation, ordinal = place
    existing = conn.execute(
        "SELECT id FROM main.sessions WHERE exit_reason = ? AND json_extract(options, '$.forked_from.session') = ?"
        " AND json_extract(options, '$.forked_from.generation') = ? AND json_extract(options, '$.forked_from.ordinal') = ?"
        " AND started = ? ORDER BY id LIMIT 1",
        (FORKED, original_id, generation, ordinal, source["started"])).fetchone()
    if existing is not None:
        fork_id = int(existing[0])
    else:
        values = dict(source)
        options = json.loads(values["options"])
        options["forked_from"] = {"session": original_id, "generation": generation, "ordinal": ordinal}
        values.update(options=canonical_json(options), exit_reason=FORKED)
        fork_id = int(conn.execute(
            f"INSERT INTO main.sessions({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
            tuple(values.values())).lastrowid)
    return sum(_copy_rows(conn, columns, fork_id, source_id, fork_of=original_id, from_place=place).values())
