"""Batch files: the shipped measurements as immutable, compressed, columnar files.

Why: a single sqlite file under version control is rewritten by every change (a VACUUM moves
nearly every page), so each commit that adds measurements adds the whole file to the
repository's history.  A batch is written once and never changed; adding measurements adds a
batch.  One batch is one folder of `data/batches/`:

* `batch.json`: the format, the batch's note, and for every file its rows and sha256;
* one zstd Parquet file per table (`spaces`, `sessions`, `evaluations`, `aliases`,
  `baselines`, `calibrations`) holding the table's columns, with two changes that make them
  small: the JSON of configs and points is stored once, in `configs.parquet`, addressed by
  the first 20 hex digits of its sha256 (an evaluation's `config` is left empty where that
  hash is its `config_key`, as it is for every canonical config), and timing samples written
  as base64 float32 are stored as their raw bytes (`samples_f32`), any other form as its text.

Files are written deterministically: the same rows give the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

FORMAT = 1
HASH_CHARS = 20
MANIFEST = "batch.json"

_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.binary()

# The stored columns of each file, in order.
COLUMNS: dict[str, tuple[tuple[str, pa.DataType], ...]] = {
    "spaces": (("fingerprint", _S), ("kernel", _S), ("shape", _S), ("dtype", _S), ("device", _S), ("versions", _S),
               ("source_hash", _S), ("definition", _S), ("created", _F)),
    "sessions": (("id", _I), ("kernel", _S), ("shape", _S), ("dtype", _S), ("strategy", _S), ("seed", _I),
                 ("budget", _I), ("seconds", _F), ("space_fingerprint", _S), ("device", _S), ("versions", _S),
                 ("mode", _S), ("options", _S), ("started", _F), ("ended", _F), ("exit_reason", _S),
                 ("best_key", _S)),
    "evaluations": (("id", _I), ("session_id", _I), ("space_fingerprint", _S), ("generation", _I), ("ordinal", _I),
                    ("config_key", _S), ("config", _S), ("params", _S), ("status", _S), ("error", _S),
                    ("compile_s", _F), ("bench_s", _F), ("median_ms", _F), ("min_ms", _F), ("max_ms", _F),
                    ("repetitions", _I), ("rel_error", _F), ("source", _S), ("samples_f32", _B),
                    ("samples_json", _S), ("created", _F), ("measured_on", _S), ("checked", _S), ("origin", _S)),
    "aliases": (("space_fingerprint", _S), ("params_key", _S), ("params", _S), ("config", _S), ("config_key", _S)),
    "baselines": (("id", _I), ("session_id", _I), ("space_fingerprint", _S), ("name", _S), ("status", _S),
                  ("error", _S), ("median_ms", _F), ("min_ms", _F), ("max_ms", _F), ("repetitions", _I),
                  ("rel_error", _F), ("created", _F)),
    "calibrations": (("id", _I), ("session_id", _I), ("space_fingerprint", _S), ("worker", _S), ("config_key", _S),
                     ("median_ms", _F), ("min_ms", _F), ("max_ms", _F), ("repetitions", _I), ("created", _F)),
    "configs": (("hash", _S), ("json", _S)),
}
TABLES = ("spaces", "sessions", "evaluations", "aliases", "baselines", "calibrations")
# The order rows are read from sqlite and written: by id, or in insertion order where there is none.
_ORDER = {"spaces": "rowid", "aliases": "rowid", "configs": "hash"}


class BatchError(Exception):
    """A batch folder that is incomplete, altered or of an unknown format."""


def text_hash(text: str) -> str:
    """The content address of a config's or point's JSON text."""
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- sqlite rows -> stored rows ----------------------------------------------------------------
def _f32_bytes(text: str | None) -> bytes | None:
    """The raw bytes of samples written as {"f32": base64}, when the text is exactly that form."""
    if text is None or not (text.startswith('{"f32":"') and text.endswith('"}')):
        return None
    raw = base64.b64decode(text[8:-2])
    return raw if _f32_text(raw) == text else None


def _f32_text(raw: bytes) -> str:
    return '{"f32":"' + base64.b64encode(raw).decode("ascii") + '"}'


def _address(text: str | None, texts: dict[str, str]) -> str | None:
    if text is None:
        return None
    key = text_hash(text)
    texts[key] = text
    return key


def encode_rows(conn: sqlite3.Connection, where: Mapping[str, str], known: set[str]
                ) -> dict[str, list[dict[str, Any]]]:
    """The rows of each table that `where[table]` selects (an SQL condition), in stored form,
    with the config texts they need that `known` (hashes stored by earlier batches) lacks."""
    texts: dict[str, str] = {}
    out: dict[str, list[dict[str, Any]]] = {}
    for table in TABLES:
        condition = where.get(table)
        if condition is None:
            out[table] = []
            continue
        cursor = conn.execute(f"SELECT * FROM {table} WHERE {condition} ORDER BY {_ORDER.get(table, 'id')}")
        names = [d[0] for d in cursor.description]
        rows = []
        for values in cursor:
            row = dict(zip(names, values))
            if table == "evaluations":
                config = _address(row.pop("config_json"), texts)
                row["config"] = None if config == row["config_key"] else config
                row["params"] = _address(row.pop("params_json"), texts)
                samples = row.pop("samples_json")
                row["samples_f32"] = _f32_bytes(samples)
                row["samples_json"] = samples if row["samples_f32"] is None else None
            elif table == "aliases":
                row["params"] = _address(row.pop("params_json"), texts)
                row["config"] = _address(row.pop("config_json"), texts)
            rows.append(row)
        out[table] = rows
    out["configs"] = [{"hash": h, "json": texts[h]} for h in sorted(texts) if h not in known]
    return out


# -- writing -------------------------------------------------------------------------------
def _arrow(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema(COLUMNS[table])
    return pa.Table.from_pydict({name: [r.get(name) for r in rows] for name in schema.names}, schema=schema)


def _write_parquet(table: pa.Table, path: Path) -> None:
    floats = [f.name for f in table.schema if f.type == _F]
    pq.write_table(table, path, compression="zstd", compression_level=19, row_group_size=1 << 20,
                   use_dictionary=[f.name for f in table.schema if f.type == _S], use_byte_stream_split=floats,
                   store_schema=False, write_statistics=False)


def write_batch(root: Path, name: str, rows: Mapping[str, list[dict[str, Any]]], note: str) -> Path:
    """Write a new batch folder `root/name` from stored rows (see `encode_rows`); written under a
    temporary name and renamed into place, so a batch is either whole or absent.  Never
    replaces a batch: an existing name is refused."""
    final = root / name
    if final.exists():
        raise BatchError(f"batch {final} exists: batches are never rewritten")
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f".{name}.partial-{os.getpid()}"
    partial.mkdir()
    files = {}
    for table in (*TABLES, "configs"):
        path = partial / f"{table}.parquet"
        _write_parquet(_arrow(table, list(rows[table])), path)
        files[path.name] = {"rows": len(rows[table]), "sha256": file_sha256(path)}
    manifest = {"format": FORMAT, "name": name, "note": note, "files": files}
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(partial, final)
    return final


# -- reading -------------------------------------------------------------------------------
def batch_folders(root: Path) -> list[Path]:
    """The batches under `root`, in the order they are applied (by name)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).exists())


def manifest(folder: Path) -> dict[str, Any]:
    data = json.loads((folder / MANIFEST).read_text())
    if data.get("format") != FORMAT:
        raise BatchError(f"batch {folder} has format {data.get('format')!r}; this autotune reads {FORMAT}")
    return data


def digest(root: Path) -> str:
    """What the built database was built from: a hash of every batch's name and manifest (which
    holds each file's sha256).  Cheap: reads only the manifests."""
    h = hashlib.sha256()
    for folder in batch_folders(root):
        h.update(folder.name.encode() + b"\0" + (folder / MANIFEST).read_bytes() + b"\0")
    return h.hexdigest()


def read_table(folder: Path, table: str, *, verify: bool = True) -> dict[str, list[Any]]:
    """One file of a batch as columns, after checking its sha256 against the manifest."""
    path = folder / f"{table}.parquet"
    expected = manifest(folder)["files"].get(path.name)
    if expected is None or not path.exists():
        raise BatchError(f"batch {folder} lacks {path.name}: restore it from version control")
    if verify and file_sha256(path) != expected["sha256"]:
        raise BatchError(f"{path} differs from what its batch recorded (batches are never rewritten): restore it "
                         "from version control")
    data = pq.read_table(path)
    return {name: data.column(name).to_pylist() for name in data.schema.names}


def decode_rows(table: str, columns: dict[str, list[Any]], texts: Mapping[str, str]) -> Iterator[tuple]:
    """Stored columns back to sqlite rows, in the order of the table's sqlite columns."""
    if table == "evaluations":
        c = columns
        for i in range(len(c["id"])):
            raw = c["samples_f32"][i]
            yield (c["id"][i], c["session_id"][i], c["space_fingerprint"][i], c["generation"][i], c["ordinal"][i],
                   c["config_key"][i], texts[c["config"][i] or c["config_key"][i]], texts[c["params"][i]],
                   c["status"][i], c["error"][i], c["compile_s"][i], c["bench_s"][i], c["median_ms"][i],
                   c["min_ms"][i], c["max_ms"][i], c["repetitions"][i], c["rel_error"][i], c["source"][i],
                   _f32_text(raw) if raw is not None else c["samples_json"][i], c["created"][i],
                   c["measured_on"][i], c["checked"][i], c["origin"][i])
    elif table == "aliases":
        c = columns
        for fp, key, params, config, config_key in zip(c["space_fingerprint"], c["params_key"], c["params"],
                                                         c["config"], c["config_key"]):
            yield (fp, key, texts[params] if params else None, texts[config] if config else None, config_key)
    else:
        yield from zip(*(columns[name] for name, _ in COLUMNS[table]))


def sqlite_columns(table: str) -> tuple[str, ...]:
    """The sqlite columns `decode_rows` yields, in order."""
    if table == "evaluations":
        return ("id", "session_id", "space_fingerprint", "generation", "ordinal", "config_key", "config_json",
                "params_json", "status", "error", "compile_s", "bench_s", "median_ms", "min_ms", "max_ms",
                "repetitions", "rel_error", "source", "samples_json", "created", "measured_on", "checked", "origin")
    if table == "aliases":
        return ("space_fingerprint", "params_key", "params_json", "config_json", "config_key")
    return tuple(name for name, _ in COLUMNS[table])


def known_hashes(folders: Iterable[Path]) -> set[str]:
    """Every config text hash the batches store (a new batch stores only the others)."""
    found: set[str] = set()
    for folder in folders:
        found.update(pq.read_table(folder / "configs.parquet", columns=["hash"]).column("hash").to_pylist())
    return found
