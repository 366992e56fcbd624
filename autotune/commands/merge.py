"""`autotune merge SOURCE... [--into user.db | --into data/batches]`: bring measurements made elsewhere home.

Typical use: tune on a GPU machine into a database of its own, copy it back, merge it into
yours (`--into` defaults to user.db).  Sessions are renumbered; a session the copy continued
(`tune --resume`, an experiment cell run again) is brought up to date with the rows and the end
it got there; merging the same file twice adds nothing.  A copy whose session went another way
than the one here (resumed in two places) is refused, nothing of it merged; with
--fork-divergent its rows from the first difference on are kept as a new session, a fork that
names the original and cannot be resumed.

`--into data/batches` (a folder of batches: the shipped data) adds what the sources bring as one
new batch and never rewrites an existing one (`autotune.store.append`); it is the only command
that writes the batches.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from autotune.store.cache import Cache, DamagedDatabase
from autotune.databases import SHIPPED_DB, USER_DB
from autotune.errors import UserError

NAME = "merge"
BATCHES = Path("data/batches")


def add_parser(subparsers: Any) -> None:
    sub = subparsers.add_parser(NAME, help="copy the sessions of other databases into one, or into the shipped "
                                           "batches as a new batch")
    sub.add_argument("sources", nargs="+", help="databases to copy from")
    sub.add_argument("--into", default=str(USER_DB),
                     help=f"the database that receives them (default: your {USER_DB}), or the shipped data's batch "
                          f"folder ({BATCHES}), which gets them as a new batch")
    sub.add_argument("--create", action="store_true", help="create --into when it does not exist")
    sub.add_argument("--note", default="", help="with --into a batch folder: what the new batch holds, kept in it")
    sub.add_argument("--fork-divergent", action="store_true",
                     help="keep a session that continued differently in the source as a fork (a new session "
                          "holding its rows from the first difference on) instead of refusing the source")


def run(args: argparse.Namespace, console: Any) -> int:
    from autotune.store.build import is_built

    target = Path(args.into)
    for source in args.sources:
        if Path(source).resolve() == target.resolve():
            raise UserError(f"cannot merge {source} into itself")
    for source in args.sources:  # check every source before changing anything
        Cache.open(source, migrate=False).close()  # an older source is read as it is, never migrated
    if target.is_dir():
        return _into_batches(args, target, console)
    if target.is_file() and is_built(target):
        raise UserError(f"{target} is built from the shipped batches and is only read: merge into the batches with "
                        f"--into {target.parent / 'batches'} (nothing was written)")
    if args.note:
        raise UserError("--note is for a new batch (--into a batch folder such as data/batches); nothing was written")
    created = not target.exists()
    if created and not args.create:
        raise UserError(f"{target} does not exist: add --create to make it (nothing was written)")
    cache = Cache.open(target, create=True, shipped=SHIPPED_DB)  # a new user database numbers after it
    try:
        for source in args.sources:
            try:
                counts = cache.merge_from(source, fork_divergent=args.fork_divergent)
            except DamagedDatabase as error:  # damage found only once the rows are read
                raise UserError(f"merging {source} into {target} failed, nothing of it was merged: {error} "
                                f"(sqlite3 FILE 'PRAGMA integrity_check' shows which file is damaged)") from None
            console.print(_summary(source, target, counts))
            created = False
    finally:
        cache.close()
        if created:  # a database made for a merge that failed is not left behind
            for path in (target, Path(f"{target}-wal"), Path(f"{target}-shm")):
                path.unlink(missing_ok=True)
    return 0


def _into_batches(args: argparse.Namespace, root: Path, console: Any) -> int:
    from autotune.store.append import append

    try:
        batch, counts = append([Path(s) for s in args.sources], root, note=args.note,
                               fork_divergent=args.fork_divergent)
    except DamagedDatabase as error:
        raise UserError(f"merging into {root} failed, nothing was written: {error}") from None
    for source, count in zip(args.sources, counts):
        console.print(_summary(source, root, count))
    console.print(f"new batch {batch}" if batch else f"nothing new: {root} is unchanged")
    return 0


def _summary(source: str, target: Path, counts: dict[str, int]) -> str:
    return (f"{source}: {counts['sessions']} new session(s) with {counts['evaluations']} evaluation(s) "
            f"and {counts['baselines']} baseline(s) merged into {target}; "
            f"{counts['skipped_sessions']} session(s) already there, {counts['extended_sessions']} "
            f"of them brought up to date ({counts['extended_rows']} row(s) added)"
            + (f"; {counts['forked_sessions']} kept as fork(s) ({counts['forked_rows']} row(s))"
               if counts["forked_sessions"] else ""))
