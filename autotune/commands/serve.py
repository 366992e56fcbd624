"""`autotune serve [--socket PATH]`: keep torch, Triton, Helion and the compile workers' fork
server loaded, and run every later `autotune tune` here (see autotune.server for why and how)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from autotune.errors import UserError

NAME = "serve"


def add_parser(subparsers: Any) -> None:
    sub = subparsers.add_parser(
        NAME, help="stay running with everything imported, so that later `autotune tune` commands start in seconds")
    sub.add_argument("--socket", default=None,
                     help="where to listen (default: $AUTOTUNE_SERVER, else a file of yours in the temporary "
                          "directory; the commands look in the same place)")
    sub.add_argument("--requests", type=int, default=None, help=argparse.SUPPRESS)  # tests: stop after N


def run(args: argparse.Namespace, console: Any) -> int:
    from autotune import server

    path = Path(args.socket).expanduser() if args.socket else server.socket_path()
    if path is None:
        raise UserError("AUTOTUNE_SERVER is off: give --socket PATH to serve anyway")

    def log(text: str) -> None:
        console.print(f"[{server.time.strftime('%H:%M:%S')}] {text}", highlight=False, markup=False)

    instance = server.Server(path, log=log)
    instance.check()  # refuses a socket another server answers on, before the imports
    try:
        server.preload(log)
        instance.open()  # only now: a command that finds the socket is served at once
        log(f"serving on {path} (pid {server.os.getpid()}): `autotune tune` commands run here; Ctrl-C stops it")
        instance.serve(args.requests)
    except KeyboardInterrupt:
        log("stopped")
    finally:
        instance.close()
    return 0
