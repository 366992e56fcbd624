"""`autotune compact [--db user.db]`: keep your database small.

Timing samples written by older versions (or merged from older files) spell float32
CUDA-event timings out as text, and points spell out their parameter names; this rewrites both
in the compact forms, which read back the same.  Aliases (which config a raw point became)
whose JSON an evaluation of the same config already holds lose their copy, and free pages go
back to the file system.  What any command reads back is unchanged.  Only a user's database is
compacted: the shipped data is batches that are never rewritten, and the database built from
them is only read (refused here in one line).
"""

from __future__ import annotations

import argparse
from typing import Any

from autotune.store.cache import Cache
from autotune.databases import USER_DB

NAME = "compact"


def add_parser(subparsers: Any) -> None:
    sub = subparsers.add_parser(
        NAME, help="rewrite stored timing samples, points and aliases compactly (losslessly) and shrink the database "
             "file")
    sub.add_argument("--db", default=str(USER_DB),
                     help=f"your database (default: {USER_DB})")


def run(args: argparse.Namespace, console: Any) -> int:
    cache = Cache.open(args.db)  # refuses missing, foreign and damaged files in one line
    try:
        counts = cache.compact()
    finally:
        cache.close()
    console.print(f"{args.db}: {counts['rows']} rows rewritten, {counts['aliases']} aliases "
                  f"shortened; {counts['bytes_before'] / 1e6:.1f} MB -> {counts['bytes_after'] / 1e6:.1f} MB")
    return 0
