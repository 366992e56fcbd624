"""`autotune rerun SESSION... | --strategy NAME [--source HASH]`: does today's strategy ask what it asked?

Re-runs recorded sessions with today's source of their strategy (or `--as` another one) against
each session's own answers, generation by generation (`autotune.simulation.rerun`), and says for
each whether every generation asked the same configs.  With `--strategy` it re-runs every
recorded session of that strategy (under `--source`, a recorded source hash or its prefix), grouped
by the source each was recorded under: the proof that a refactor changed no proposal, which
`autotune.strategies.lineage` then declares.  Reads the database only; exit status 1 if any
session asked differently (a session recorded before sessions kept their seeds as given, whose
seeds normalised to other points, is reported inconclusive instead).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

from autotune.databases import SHIPPED_DB, USER_DB, open_for_reading
from autotune.errors import UserError

NAME = "rerun"


def add_parser(subparsers: Any) -> None:
    sub = subparsers.add_parser(NAME, help="re-run recorded sessions with today's strategy source and say whether "
                                           "every generation asked the same configs")
    sub.add_argument("sessions", nargs="*", type=int, help="session ids")
    sub.add_argument("--strategy", help="every recorded session of this strategy instead")
    sub.add_argument("--source", help="with --strategy: only sessions recorded under this source hash (or prefix)")
    sub.add_argument("--as", dest="as_strategy", metavar="STRATEGY",
                     help="re-run with this strategy instead of each session's own")
    sub.add_argument("--db", default=str(USER_DB), help=f"the database (default: your {USER_DB})")
    sub.add_argument("--shipped", default=str(SHIPPED_DB),
                     help=f"the shipped data read beside it (default: {SHIPPED_DB})")


def run(args: argparse.Namespace, console: Any) -> int:
    from autotune.simulation.rerun import rerun_session, sessions_of
    from autotune.strategies import UnknownStrategy, get_strategy

    if bool(args.sessions) == bool(args.strategy):
        raise UserError("name session ids or --strategy NAME (one of the two)")
    if args.source and not args.strategy:
        raise UserError("--source goes with --strategy")
    for name in filter(None, (args.strategy, args.as_strategy)):
        try:
            get_strategy(name)  # an unknown name: one line, before anything is read
        except UnknownStrategy as error:
            raise UserError(error.args[0]) from None
    cache = open_for_reading(args.db, args.shipped)
    try:
        ids = args.sessions or [s["id"] for s in sessions_of(cache, args.strategy, args.source)]
        if not ids:
            raise UserError(f"no recorded session of {args.strategy}" + (f" under source {args.source}"
                                                                          if args.source else ""))
        by_source: dict[str | None, list[Any]] = defaultdict(list)
        for number, session_id in enumerate(ids, start=1):
            result = rerun_session(cache, session_id, args.as_strategy)
            by_source[result.source].append(result)
            console.print(f"[{number}/{len(ids)}] session {session_id} ({result.strategy}, recorded under source "
                          f"{result.source}): {result.matched} of {result.generations} generations matched; "
                          f"{_verdict(result)}")
    finally:
        cache.close()
    for source, results in by_source.items():
        unproven = sum(not r.conclusive for r in results)
        console.print(f"source {source}: {sum(r.same for r in results)} of {len(results)} session(s) asked the same"
                      + (f"; {unproven} inconclusive (seeds not recorded as given)" if unproven else ""))
    return 0 if all(r.same or not r.conclusive for results in by_source.values() for r in results) else 1


def _verdict(result: Any) -> str:
    if result.same:
        return "asked the same"
    if not result.conclusive:
        return (f"differs at {result.difference}; inconclusive: the session did not record its seeds as given, "
                "so they were given as the configs they became")
    return f"differs at {result.difference}"
