"""Which value of one tuning slot is faster, all else equal, over recorded measurements.

A seed rule's constant claims that one value of a slot beats another (a program order, host-built
descriptors, a load hint).  This compares the claim with the data without a GPU.  In every recorded
space of the chosen kernels, configs that differ in that slot alone are paired, each at its time as
the project's one oracle over recorded data answers it (`autotune.simulation.oracle`: the median of
its accurate search-time measurements' medians; a config that never ran accurately is left out), so
this report and a replay or simulation of the same space never disagree about a config.  For each
space the report gives the number of pairs, how many the second value won, and the geometric mean
of first / second (above 1: the second is faster).  It
gives them over all pairs and over the pairs near the space's best (both within `--near` of the
fastest config measured there), which is where a rule's seed has to be right.

    python -m experiments.slot_pairs --kernels 'matmul-*' --slot pid_type --values flat,persistent_interleaved
        [--near 1.25] [--dtype bfloat16] [--db user.db] [--shipped cache.db] [--out experiments/reports]

`--kernels` takes names or shell patterns over the built-in kernels.  The report is written to
`--out` as slot_pairs_<slot>.md with its JSON beside it.  A pair is only as fair as the search
that measured it: configs near a search's path are over-represented, which is why the near-best
counts are given apart.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import shlex
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from autotune.simulation.oracle import Oracle

REPORT_PREFIX = "slot_pairs"


@dataclass(frozen=True)
class Tally:
    """Pairs of one space (or of all of them): how many, how many the second value won, and the
    geometric mean of first / second."""

    pairs: int
    second_faster: int
    geomean_first_over_second: float | None

    @classmethod
    def of(cls, ratios: Sequence[float]) -> "Tally":
        return cls(len(ratios), sum(r > 1 for r in ratios), statistics.geometric_mean(ratios) if ratios else None)


@dataclass(frozen=True)
class SpacePairs:
    kernel: str
    shape: str
    dtype: str
    device: str
    fingerprint: str
    all: Tally
    near_best: Tally


def accurate_times(oracle: "Oracle") -> dict[str, tuple[dict[str, Any], float]]:
    """Each recorded config the oracle answers as accurate: its point and its time, by config key."""
    times: dict[str, tuple[dict[str, Any], float]] = {}
    for key, point in oracle.points.items():
        result = oracle.result(key)
        if result is not None and result.ok and result.median_ms is not None:
            times[key] = (point, result.median_ms)
    return times


def pair_ratios(times: dict[str, tuple[dict[str, Any], float]], slot: str, first: Any, second: Any,
                near: float) -> tuple[list[float], list[float]]:
    """first / second time of every pair of configs that differ in `slot` alone (all of them, and
    those with both within `near` of the fastest config)."""
    if not times:
        return [], []
    best = min(ms for _, ms in times.values())
    by_rest: dict[str, dict[Any, float]] = {}
    for point, ms in times.values():
        if slot not in point:
            continue
        rest = json.dumps({k: v for k, v in point.items() if k != slot}, sort_keys=True, default=str)
        by_rest.setdefault(rest, {})[json.dumps(point[slot], default=str)] = ms
    a, b = json.dumps(first, default=str), json.dumps(second, default=str)
    every, close = [], []
    for times_here in by_rest.values():
        if a in times_here and b in times_here:
            every.append(times_here[a] / times_here[b])
            if max(times_here[a], times_here[b]) <= near * best:
                close.append(times_here[a] / times_here[b])
    return every, close


def _value(text: str) -> Any:
    """A slot value from the command line: JSON where it parses (8, true, null), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def kernel_names(patterns: Sequence[str]) -> list[str]:
    """The built-in kernels the patterns name (a name that matches none is kept as given)."""
    from autotune.kernels.registry import all_kernels

    known = sorted(k.name for k in all_kernels())
    names: list[str] = []
    for pattern in patterns:
        matched = fnmatch.filter(known, pattern) or [pattern]
        names += [n for n in matched if n not in names]
    return names


def summarise(cache: Any, kernels: Sequence[str], slot: str, first: Any, second: Any, near: float,
              dtype: str | None = None) -> list[SpacePairs]:
    """Every recorded space of the kernels with at least one pair, most pairs first."""
    from autotune.simulation.oracle import Oracle

    found = []
    for kernel in kernels:
        for record in cache.find_spaces(kernel, dtype=dtype):
            oracle = Oracle.from_cache(cache, record.fingerprint, record.space.names)
            every, close = pair_ratios(accurate_times(oracle), slot, first, second, near)
            if every:
                found.append(SpacePairs(kernel, "x".join(map(str, record.shape)), record.dtype, record.device,
                                        record.fingerprint, Tally.of(every), Tally.of(close)))
    return sorted(found, key=lambda s: (-s.all.pairs, s.kernel, s.shape))


def _cells(tally: Tally) -> list[str]:
    return [str(tally.pairs), str(tally.second_faster), _mean(tally)]


def render(spaces: list[SpacePairs], slot: str, first: Any, second: Any, near: float, read: str,
           command: str = "python -m experiments.slot_pairs") -> str:
    every = totals([s.all for s in spaces])
    close = totals([s.near_best for s in spaces])
    one, two = f"`{_shown(first)}`", f"`{_shown(second)}`"
    lines = [f"# `{slot}`: {one} against {two}, all else equal", "",
             f"Generated by `{command}` from {read}. In each recorded space, configs that "
             f"differ in `{slot}` alone are paired, each at its time as the project's oracle over recorded data "
             "answers it (the median of its accurate search-time measurements' medians). "
             f"'{two} faster' counts the pairs the second value won; the ratio is the geometric mean of "
             f"{one} / {two} (above 1: {two} is faster). 'Near the best' keeps the pairs whose two configs are "
             f"both within {near:g}x of the fastest config measured in their space. Pairs come from searches, so "
             "configs near a search's path are over-represented.", "",
             f"- all pairs: {every.pairs}, {two} faster in {every.second_faster}, ratio {_mean(every)}",
             f"- near the best: {close.pairs}, {two} faster in {close.second_faster}, ratio {_mean(close)}", "",
             f"| kernel | shape | dtype | pairs | {two} faster | ratio | near-best pairs | {two} faster | ratio |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for s in spaces:
        lines.append("| " + " | ".join([s.kernel, s.shape, s.dtype, *_cells(s.all), *_cells(s.near_best)]) + " |")
    return "\n".join(lines) + "\n"


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _mean(tally: Tally) -> str:
    return "-" if tally.geomean_first_over_second is None else f"{tally.geomean_first_over_second:.3f}"


def totals(tallies: Sequence[Tally]) -> Tally:
    """All spaces' pairs together (the geometric mean weighted by each space's pairs)."""
    pairs = sum(t.pairs for t in tallies)
    if not pairs:
        return Tally(0, 0, None)
    logs = sum(t.pairs * math.log(t.geomean_first_over_second) for t in tallies if t.pairs)
    return Tally(pairs, sum(t.second_faster for t in tallies), math.exp(logs / pairs))


def main(argv: Sequence[str] | None = None) -> int:
    from autotune.store.schema import CacheError
    from autotune.databases import add_arguments, open_for_reading, read_from

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", required=True, help="comma-separated kernel names or patterns, e.g. 'matmul-*'")
    parser.add_argument("--slot", required=True, help="the parameter compared, e.g. pid_type")
    parser.add_argument("--values", required=True, help="the two values compared, comma-separated: FIRST,SECOND")
    parser.add_argument("--near", type=float, default=1.25, help="near the best: within this factor of it")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--out", type=Path, default=Path("experiments/reports"))
    add_arguments(parser)
    args = parser.parse_args(argv)
    values = [v.strip() for v in args.values.split(",") if v.strip()]
    if len(values) != 2:
        print(f"slot_pairs: --values takes two values, got {args.values!r}", file=sys.stderr)
        return 2
    if not args.near >= 1:
        print(f"slot_pairs: --near is a factor of at least 1, got {args.near}", file=sys.stderr)
        return 2
    if not args.out.is_dir():
        print(f"slot_pairs: --out {args.out} is not a directory", file=sys.stderr)
        return 2
    first, second = map(_value, values)
    try:
        cache = open_for_reading(args.db, args.shipped)
    except CacheError as error:
        print(f"slot_pairs: {error}", file=sys.stderr)
        return 2
    try:
        spaces = summarise(cache, kernel_names([k.strip() for k in args.kernels.split(",") if k.strip()]),
                           args.slot, first, second, args.near, args.dtype)
    finally:
        cache.close()
    if not spaces:
        print(f"slot_pairs: no recorded configs of those kernels differ in {args.slot} alone between "
              f"{first!r} and {second!r}", file=sys.stderr)
        return 2
    stem = args.out / f"{REPORT_PREFIX}_{args.slot}"
    command = "python -m experiments.slot_pairs " + shlex.join(sys.argv[1:] if argv is None else argv)
    stem.with_suffix(".md").write_text(render(spaces, args.slot, first, second, args.near,
                                              read_from(args.db, args.shipped), command))
    stem.with_suffix(".json").write_text(json.dumps(
        {"slot": args.slot, "first": first, "second": second, "near": args.near,
         "spaces": [asdict(s) for s in spaces]}, indent=1) + "\n")
    print(f"written {stem.with_suffix('.md')} ({len(spaces)} spaces)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
