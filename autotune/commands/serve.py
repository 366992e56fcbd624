"""`autotune serve [--socket PATH] [--status | --stop]`: keep torch, Triton, Helion and the compile
workers' fork server loaded, and run every later `autotune tune` here (see autotune.server for
why and how); or say what a running server is doing, or stop it."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from autotune.errors import UserError

NAME = "serve"
STOP_WAIT_S = 60.0  # how long --stop waits for the server to finish its running session


def add_parser(subparsers: Any) -> None:
    sub = subparsers.add_parser(
        NAME, help="stay running with everything imported, so that later `autotune tune` commands start in seconds")
    sub.add_argument("--socket", default=None,
                     help="where to listen (default: $AUTOTUNE_SERVER, else a file of yours in the temporary "
                          "directory; the commands look in the same place)")
    asked = sub.add_mutually_exclusive_group()
    asked.add_argument("--status", action="store_true",
                       help="say whether a server answers, since when, what it runs and what waits (exit 1: none)")
    asked.add_argument("--stop", action="store_true",
                       help="stop the server: a running session stops as on Ctrl-C, with its evaluations kept")
    sub.add_argument("--requests", type=int, default=None, help=argparse.SUPPRESS)  # tests: stop after N


def run(args: argparse.Namespace, console: Any) -> int:
    from autotune.server_wire import socket_path

    path = Path(args.socket).expanduser() if args.socket else socket_path()
    if path is None:
        raise UserError("AUTOTUNE_SERVER is off: give --socket PATH to serve anyway")
    if args.status or args.stop:
        return _ask(path, console, stop=args.stop)
    return _serve(path, args.requests)


def _serve(path: Path, requests: int | None) -> int:
    from autotune.server import Server, preload

    out = sys.stdout  # the server's own: while a command runs, sys.stdout is that command's

    def log(text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=out, flush=True)

    instance = Server(path, log=log)
    instance.check()  # refuses a socket another server answers on, before the imports
    try:
        preload(log)
        instance.open()  # only now: a command that finds the socket is served at once
        log(f"serving on {path} (pid {os.getpid()}): `autotune tune` commands run here; Ctrl-C stops it")
        instance.serve(requests)
    except KeyboardInterrupt:
        pass
    finally:
        instance.close()
        log("stopped")
    return 0


def _ask(path: Path, console: Any, *, stop: bool) -> int:
    from autotune.server_client import control
    from autotune.server_wire import socket_answers

    status = control("stop" if stop else "status", path)
    if status is None:
        if stop:
            raise UserError(f"no server answers at {path}")
        console.print(f"no server answers at {path}", highlight=False, markup=False)
        return 1
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(status["since"]))
    running = (f"running `autotune {' '.join(status['running'])}` ({status['running_s']:.0f} s)"
               if status["running"] else "idle")
    console.print(f"server at {status['socket']} (pid {status['pid']}), up since {since}: {status['served']} "
                  f"command(s) served; {running}; {status['waiting']} waiting", highlight=False, markup=False)
    if stop:
        deadline = time.monotonic() + STOP_WAIT_S
        while socket_answers(path) and time.monotonic() < deadline:
            time.sleep(0.2)
        console.print("asked to stop; it is still finishing" if socket_answers(path) else "stopped",
                      highlight=False, markup=False)
    return 0
