"""`autotune import-space FILE`: a tuning space recorded by Kernel Tuner, into our database.

The file is read and checked completely before the database is opened, so a malformed file
changes nothing (and creates no database)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from autotune.databases import add_arguments as add_database_arguments
from autotune.databases import open_for_writing

NAME = "import-space"


def add_parser(subparsers: Any) -> None:
    sub = subparsers.add_parser(NAME, help="import a Kernel Tuner cache file (gzip or plain JSON) as a recorded space")
    sub.add_argument("file", help="a Kernel Tuner cache file, e.g. convolution_A100.json.gz")
    add_database_arguments(sub, writes=True)


def run(args: argparse.Namespace, console: Console) -> int:
    from autotune.interop.kernel_tuner import read_kernel_tuner_file
    from autotune.interop.kernel_tuner_db import import_into_cache

    ks = read_kernel_tuner_file(args.file)
    cache = open_for_writing(args.db, args.shipped)
    try:
        fingerprint, session_id = import_into_cache(cache, ks, Path(args.file).name)
        best = cache.best(fingerprint)
    finally:
        cache.close()
    valid, failed = ks.counts()
    console.print(f"imported {escape(Path(args.file).name)} into {escape(str(args.db))}"
                  + (" (the file was cut short; its complete entries were read)" if ks.repaired else ""))
    console.print(f"  space     {fingerprint}")
    console.print(f"  kernel    {escape(ks.kernel_name)}  shape {'x'.join(map(str, ks.shape)) or '-'}")
    console.print(f"  device    {escape(ks.device_name) or '(unnamed: the file gives no device_name)'}")
    console.print(f"  configs   {valid + failed} ({valid} valid, {failed} failed)")
    if best is not None:
        console.print(f"  best      {best[1].median_ms:.6g} ms")
    console.print(f"  session   {session_id}")
    return 0
