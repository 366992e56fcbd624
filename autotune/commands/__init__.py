"""CLI commands that live in their own module.

Each module defines `NAME`, `add_parser(subparsers)` and `run(args, console) -> int`, and is
listed in `autotune.cli.COMMAND_MODULES`.  User errors are raised as `autotune.errors.UserError`
(one line on stderr, exit status 2); nothing else here reads flags.
"""
