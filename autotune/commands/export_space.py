"""`autotune export-space`: a recorded space as a Kernel Tuner cache file.

Kernel Tuner's simulation mode can then replay it (see `autotune.interop.kernel_tuner_sim`
for the restrictions it needs); re-importing the file elsewhere restores the same space
and fingerprint."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from autotune.databases import add_arguments as add_database_arguments
from autotune.databases import open_for_reading
from autotune.errors import UserError

NAME = "export-space"


def add_parser(subparsers: Any) -> None:
    from autotune.cli import positive_int

    sub = subparsers.add_parser(NAME, help="write a recorded space as a Kernel Tuner cache file")
    which = sub.add_mutually_exclusive_group(required=True)
    which.add_argument("--space", metavar="FINGERPRINT_PREFIX", help="every measurement of this space")
    which.add_argument("--session", type=positive_int, metavar="N", help="only the measurements of session N")
    sub.add_argument("--format", choices=("kernel-tuner",), default="kernel-tuner")
    add_database_arguments(sub)
    sub.add_argument("--out", default=None, metavar="FILE",
                     help="write here (gzip when it ends in .gz); default: standard output")


def run(args: argparse.Namespace, console: Console) -> int:
    from autotune.interop.kernel_tuner import write_kernel_tuner_file
    from autotune.export import refuse_interpreted, refuse_interpreted_space
    from autotune.interop.kernel_tuner_db import export_kernel_tuner, resolve_space

    out = None if args.out in (None, "-") else args.out
    cache = open_for_reading(args.db, args.shipped)
    try:
        if args.session is not None:
            session = cache.session(args.session)
            if session is None:
                raise UserError(f"no session {args.session} in {args.db}")
            refuse_interpreted(session)  # interpreter seconds are no timings to simulate from
            fingerprint = session["space_fingerprint"]
        else:
            fingerprint = resolve_space(cache, args.space).fingerprint
            refuse_interpreted_space(cache, fingerprint)
        document = export_kernel_tuner(cache, fingerprint, args.session)
    finally:
        cache.close()
    text = write_kernel_tuner_file(document, out)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        console.print(f"wrote {len(document['cache'])} configs of space {fingerprint[:12]} "
                                   f"({escape(document['kernel_name'])}, {escape(document['device_name'])}) to "
                                   f"{escape(out)}")
    return 0
