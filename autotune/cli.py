"""The `autotune` command line.  The only module that reads flags and the environment.

Every user error (unknown kernel, malformed shape, bad budget, missing or foreign
database, config outside the space) ends in one line on stderr and exit status 2.
"""

from __future__ import annotations

from autotune import startup

startup.cli_started()  # the clock a session's "started in" line reads: before this module's imports

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autotune.store.schema import CacheError
from autotune.databases import add_arguments as add_database_arguments
from autotune.databases import open_for_reading
from autotune.device import gpu_device_present
from autotune.errors import UserError
from autotune.evaluators.timing_target import SEARCH_TARGET_MS

if TYPE_CHECKING:
    from autotune.store.cache import Cache

EXIT_USAGE = 2


# -- argument parsing ------------------------------------------------------------------
def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _session_or_last(text: str) -> int | str:
    return "last" if text.strip().lower() == "last" else _positive_int(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not a usage dump
        raise UserError(message)


SESSIONS_SHOWN = 50  # `autotune sessions` without --limit or --all


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `command`, only the module of that command is imported and added
    (a refusal must not wait for every command's imports: simulate's alone take a while)."""
    parser = _Parser(prog="autotune", description="Tune Helion and Triton kernels; record every evaluation in sqlite.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for unexpected errors")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)

    commands.add_parser("kernels", help="list the built-in kernels")

    tune = commands.add_parser("tune", help="tune a kernel (replays from the database where there is no GPU)")
    tune.add_argument("kernel", nargs="?", help="a built-in kernel's name, or your own: path/to/file.py:NAME")
    tune.add_argument("--shape", help="e.g. 4096x32000")
    tune.add_argument("--dtype", default="float16")
    tune.add_argument("--strategy", default="auto", help="search strategy (default: auto; an unknown name lists the others)")
    tune.add_argument("--budget", type=_positive_int, default=None, help="number of configs to evaluate")
    tune.add_argument("--seconds", type=_positive_float, default=None,
                      help="wall-clock budget of the search, counted once the evaluator is ready (its set-up, "
                           "the configs in flight when it runs out and the final re-timing come on top)")
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument("--seed-from", default="default",
                      help="seeds evaluated first: comma-separated from default, heuristic, cache")
    tune.add_argument("--resume", type=_session_or_last, default=None, metavar="SESSION",
                      help="continue a stopped session of --db (an id, or 'last' for the newest one): nothing "
                           "measured is measured again; a larger --budget continues one that reached its budget")
    tune.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                      help="a strategy option, e.g. --option effort=full or --option copies=4 (repeatable)")
    tune.add_argument("--config", action="append", default=[], metavar="JSON_OR_FILE",
                      help="a config evaluated first: a JSON object of parameter -> value (missing ones from the "
                           "default), or a file holding one or a list (repeatable; see autotune check-config)")
    tune.add_argument("--grid", default="", help="grid strategy: comma-separated parameters (default: all)")
    tune.add_argument("--grid-sample", action="store_true", help="grid strategy: sample the grid if over budget")
    tune.add_argument("--generation-size", type=_positive_int, default=None)
    add_database_arguments(tune, writes=True)
    tune.add_argument("--replay", action="store_true", help="answer from the database even if a GPU is present")
    tune.add_argument("--no-server", action="store_true",
                      help="run here even if an `autotune serve` server answers (by default the command runs there)")
    tune.add_argument("--space", default=None, help="replay: fingerprint (or prefix) of the recorded space to use")
    tune.add_argument("--fresh", action="store_true", help="measure again even configs already recorded")
    tune.add_argument("--interpret", action="store_true",
                      help="run every config on the CPU through the Triton interpreter: checks accuracy, not speed")
    tune.add_argument("--compile-workers", type=_positive_int, default=None)
    tune.add_argument("--compile-timeout", type=_positive_float, default=60.0,
                      help="seconds a config may compile; once 16 configs compiled, the limit tightens to "
                           "--compile-timeout-factor times their median (at least 5 s)")
    tune.add_argument("--compile-timeout-factor", type=_positive_float, default=10.0,
                      help="see --compile-timeout; inf keeps --compile-timeout for every config")
    tune.add_argument("--run-timeout", type=_positive_float, default=30.0,
                      help="seconds a compiled config's first run may take before its worker is killed")
    tune.add_argument("--workers", default=None, metavar="SPEC",
                      help="spread evaluation over a Dask cluster: local-gpus (one worker per GPU here), local:N "
                           "(N CPU processes) or a scheduler address such as tcp://scheduler:8786 (needs the "
                           "distributed extra)")
    tune.add_argument("--timing-ms", type=_positive_float, default=SEARCH_TARGET_MS,
                      help="GPU time spent timing each config during the search (min 10 runs, max 200; default "
                           "%(default)s ms); more gives steadier medians, less records faster")
    tune.add_argument("--slow-factor", type=_positive_float, default=3.0,
                      help="a config whose first estimate is over this many times the fastest timed so far "
                           "keeps the estimate (5 runs) as its timing; inf times every config in full")

    for name, text in (("sessions", "list recorded sessions"),
                       ("show", "a session's timeline and best, or a kernel's best config at every recorded shape"),
                       ("export", "a session's best config, or a kernel's best configs by shape, as code or JSON")):
        sub = commands.add_parser(name, help=text)
        if name != "sessions":
            sub.add_argument("session", metavar="SESSION_OR_KERNEL",
                             help="a session id, or a kernel (a built-in name or path/to/file.py:NAME)")
        add_database_arguments(sub)
        if name == "export":
            sub.add_argument("--format", choices=("python", "json", "helion-aot"), default="python",
                             help="for a kernel: json (autotune.configured(table=...)), python (a module with "
                                  "config_for(shape, dtype)) or helion-aot (the heuristic @helion.aot_kernel reads)")
            sub.add_argument("--out", default=None, help="write here instead of standard output (the directory must exist)")
        if name != "sessions":
            sub.add_argument("--device", default=None, help="for a kernel: only data measured on this GPU")
        if name == "sessions":
            shown = sub.add_mutually_exclusive_group()
            shown.add_argument("--limit", type=_positive_int, default=SESSIONS_SHOWN,
                               help=f"show the latest N sessions (default: {SESSIONS_SHOWN})")
            shown.add_argument("--all", action="store_true", help="show every session")
            sub.add_argument("--wide", action="store_true",
                             help="also the Python version, limits, start time, database and seed origins")
    for module in _command_modules(command):
        module.add_parser(commands)
    return parser


# Commands that live in their own module (autotune/commands/<name>.py): each module has
# `NAME`, `add_parser(subparsers)` and `run(args, console) -> int`.
COMMAND_MODULES: tuple[str, ...] = ("noise", "check_config", "import_space", "export_space", "seeds", "merge", "simulate",
                                    "experiment", "compact", "serve", "rerun", "suite")


def _command_modules(command: str | None = None) -> list[Any]:
    """Every command module, or only `command`'s when it names one (or none for a command of
    this file)."""
    import importlib

    names = COMMAND_MODULES
    if command in COMMANDS:
        names = ()
    elif command is not None and command.replace("-", "_") in COMMAND_MODULES:
        names = (command.replace("-", "_"),)
    return [importlib.import_module(f"autotune.commands.{name}") for name in names]


def _command_in(argv: Sequence[str]) -> str | None:
    """The command word of an argument list (the first that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def positive_int(text: str) -> int:
    """argparse type for counts (budgets, repeats): one clear line for anything else."""
    return _positive_int(text)


def positive_float(text: str) -> float:
    return _positive_float(text)


# -- commands ------------------------------------------------------------------------------
def cmd_kernels(args: argparse.Namespace, console: Console) -> int:
    from autotune.kernels.catalogue import entries, is_current

    table = Table(title="built-in kernels")
    for column in ("name", "family", "baselines", "description"):
        table.add_column(column)
    if is_current():  # the catalogue says, without importing the kernels (torch, Triton, Helion)
        kernels: list[Any] = [entry for _, entry in sorted(entries().items())]
    else:
        from autotune.kernels import all_kernels

        kernels = all_kernels()
    for spec in kernels:
        table.add_row(spec.name, spec.family, ", ".join(spec.baselines), escape(spec.description))
    console.print(table)
    return 0


def cmd_tune(args: argparse.Namespace, console: Console) -> int:
    from autotune.precheck import check_tune

    options = check_tune(args)  # refusals that need no kernel answer before torch is imported
    if not (args.replay or args.interpret or args.workers) and gpu_device_present():
        from autotune.evaluators.gpu_process import warm_workers

        warm_workers()  # the workers' imports (seconds) start now, beside this process's own
    from autotune.tuning import TuneRequest, run_tune

    if args.interpret:  # Triton decides at @triton.jit time, so before the kernel's file is loaded
        os.environ["TRITON_INTERPRET"] = "1"
    request = TuneRequest(
        kernel=args.kernel, shape=args.shape, dtype=args.dtype, strategy=args.strategy, budget=args.budget,
        seconds=args.seconds, seed=args.seed, generation_size=args.generation_size, db=args.db,
        shipped=args.shipped, replay=args.replay, space=args.space, fresh=args.fresh,
        compile_workers=args.compile_workers, compile_timeout_s=args.compile_timeout, run_timeout_s=args.run_timeout,
        grid=tuple(n.strip() for n in args.grid.split(",") if n.strip()), grid_sample=args.grid_sample,
        seed_from=args.seed_from, resume=args.resume if args.resume != "last" else None,
        resume_last=args.resume == "last", strategy_options=options,
        configs=tuple(args.config),
        timing_target_ms=args.timing_ms, slow_factor=args.slow_factor,
        compile_timeout_factor=args.compile_timeout_factor, workers=args.workers, interpret=args.interpret,
    )
    run_tune(request, console)
    return 0


def _open_existing(args: argparse.Namespace) -> Cache:
    """The user's database with the shipped data read beside it (see autotune.databases)."""
    return open_for_reading(args.db, args.shipped)


def cmd_sessions(args: argparse.Namespace, console: Console) -> int:
    from autotune.report import sessions_table

    cache = _open_existing(args)
    total = cache.session_count()
    sessions = cache.sessions(total if args.all else args.limit)
    console.print(sessions_table(sessions, wide=args.wide))
    if len(sessions) < total:  # never silently: say what is left out and how to see it
        console.print(f"showing the latest {len(sessions)} of {total} sessions (--limit N or --all for more)")
    return 0


def _session_or_fail(cache: Cache, session_id: int | str) -> dict[str, Any]:
    session = cache.session(int(session_id))
    if session is None:
        raise UserError(f"no session {session_id} in {cache.path}")
    return session


def _is_session(text: str) -> bool:
    if text.isascii() and text.isdigit():
        if int(text) <= 0:
            raise UserError(f"session ids are positive, got {text}")
        return True
    return False


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    from autotune.history import print_session

    if not _is_session(args.session):
        from autotune.commands.kernel_table import show_kernel

        return show_kernel(args, console)
    cache = _open_existing(args)
    print_session(cache, _session_or_fail(cache, args.session), console)
    return 0


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    from autotune.export import export_config, refuse_interpreted
    from autotune.history import session_best

    if not _is_session(args.session):
        from autotune.commands.kernel_table import export_kernel

        return export_kernel(args, console)
    if args.format == "helion-aot":
        raise UserError("--format helion-aot is for a kernel's configs at every shape, not a session")
    if args.out is not None and not Path(args.out).parent.is_dir():
        raise UserError(f"cannot write {args.out}: its directory does not exist")
    cache = _open_existing(args)
    session = _session_or_fail(cache, args.session)
    refuse_interpreted(session)
    best = session_best(cache, session["id"])
    if best is None:
        raise UserError(f"session {args.session} has no accurate measured config to export")
    record = cache.get_space(session["space_fingerprint"])
    family = record.space.family if record else "helion"
    text = export_config(best[0].native, family=family, kernel=session["kernel"], fmt=args.format)
    if args.out is None:
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        console.print(f"session {session['id']}'s best config written to {args.out}")
    return 0


COMMANDS = {"kernels": cmd_kernels, "tune": cmd_tune, "sessions": cmd_sessions, "show": cmd_show,
            "export": cmd_export}


# Columns rich renders to when stdout is not a terminal (a pipe, a file, a test's capture):
# left to itself rich uses 80 there and cuts every wider table cell to "…".
PIPE_WIDTH = 10_000


def make_console() -> Console:
    """The console commands print to: the terminal's width on a terminal, COLUMNS when it is
    set, and otherwise wide enough that nothing piped or captured is cut."""
    isatty = getattr(sys.stdout, "isatty", None)
    if (isatty is not None and isatty()) or os.environ.get("COLUMNS", "").strip():
        return Console()
    return Console(width=PIPE_WIDTH)


def main(argv: Sequence[str] | None = None) -> int:
    startup.begin_command(from_process_start=argv is None)  # the process's own command line
    console = make_console()
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    args = None
    try:
        argv = list(argv if argv is not None else sys.argv[1:])
        args = build_parser(_command_in(argv)).parse_args(argv)
        if args.command is None:
            raise UserError("no command given (try: autotune kernels, tune, sessions, show, export, simulate)")
        if args.command == "tune" and not args.no_server:
            from autotune.server_client import forward

            forwarded = forward(argv)  # in a warm server, if one answers: the same command, started in seconds
            if forwarded is not None:
                return forwarded
        if args.command in COMMANDS:
            return COMMANDS[args.command](args, console)
        module = next(m for m in _command_modules(args.command) if m.NAME == args.command)
        return module.run(args, console)
    except (UserError, CacheError) as error:
        print(f"autotune: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("autotune: interrupted; every finished evaluation is in the database", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - last resort: one line unless --debug
        if _damaged_database(error):  # found mid-command, past the checks made on opening
            names = " or ".join(str(getattr(args, a)) for a in ("db", "shipped") if getattr(args, a, None))
            print(f"autotune: error: database {names or '(unknown)'} is damaged ({error}): restore it from a copy; "
                  "sqlite3 FILE 'PRAGMA integrity_check' shows the damage", file=sys.stderr)
            return EXIT_USAGE
        if debug:
            raise
        print(f"autotune: unexpected error: {type(error).__name__}: {error} (run with --debug for details)",
              file=sys.stderr)
        return 1


def _damaged_database(error: Exception) -> bool:
    from autotune.store.cache import is_damage

    return is_damage(error)


if __name__ == "__main__":
    sys.exit(main())

