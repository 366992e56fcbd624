"""What would a variant of the seed rule have measured?  Scored on the study's recorded grids, on a CPU.

Each recorded cell measured a grid of M tile x K tile x warps x stages (other parameters at
the default), so the time of any seed inside that grid is already in the database.  This
replays the `matmul_epilogue_resident` rule with some of its named constants changed and,
for every recorded cell, puts the variant's seed and its recorded time next to the present
seed's and the grid-best.  A seed outside the grid is reported as such: only a GPU run can
time it.

    python -m experiments.seed_study.whatif --set K_BLOCK_BANDS=64,32,16 --set STAGED_SMEM_FRACTION=0.97
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from . import data
from . import definition as d
from . import targets

REPO = Path(__file__).resolve().parents[2]
Tiles = tuple[int, int, int, int]  # M tile, K tile, warps, stages


@dataclass(frozen=True)
class Comparison:
    cell: str
    present: Tiles | None
    present_ms: float | None
    variant: Tiles | None  # None: the variant declines
    variant_ms: float | None  # None: outside the recorded grid, failed, or declined
    variant_status: str
    grid_ms: float | None


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """NAME=VALUE pairs for the rule's constants, each coerced to the constant's own type
    (a tuple takes comma-separated integers); a one-line ValueError otherwise."""
    from heuristics import matmul_epilogue as rule

    tunable = {name: value for name, value in vars(rule).items()
               if name.isupper() and isinstance(value, (int, float, tuple)) and not isinstance(value, bool)}
    values: dict[str, Any] = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        present = tunable.get(name)
        if present is None or not text:
            constants = ", ".join(tunable)
            raise ValueError(f"--set {pair!r}: expected NAME=VALUE with NAME one of the rule's constants ({constants})")
        try:
            if isinstance(present, tuple):
                values[name] = tuple(int(part) for part in text.split(","))
            else:
                values[name] = type(present)(text)
        except ValueError:
            raise ValueError(f"--set {pair!r}: {name} is {present!r}; {text!r} is not a value of that type") from None
    return values


@contextlib.contextmanager
def rule_constants(values: dict[str, Any]) -> Iterator[None]:
    """The rule's module constants replaced for the duration (the rule reads them per call)."""
    from heuristics import matmul_epilogue as rule

    saved = {name: getattr(rule, name) for name in values}
    try:
        for name, value in values.items():
            setattr(rule, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(rule, name, value)


TILE_NAMES = ("block_sizes[0]", "block_sizes[1]", "num_warps", "num_stages")


def tiles_of(params: dict[str, Any]) -> Tiles:
    return tuple(params[name] for name in TILE_NAMES)  # type: ignore[return-value]


def _others(params: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in params.items() if name not in TILE_NAMES}


def variant_seed(cell: d.Cell, values: dict[str, Any]) -> Tiles | None:
    """The variant rule's seed for a cell (bound on meta tensors: nothing allocated)."""
    from heuristics import analyse
    from heuristics.matmul_epilogue import NAME

    from .runner import bind

    task = bind(cell.kernel, cell.shape, cell.dtype, "meta")
    with rule_constants(values):
        seeds = [s for s in analyse(task).outcome.seeds if s.rule == NAME]
    return tiles_of(seeds[0].params) if seeds else None


def recorded_by_tiles(cache: Any, session: dict[str, Any]) -> dict[Tiles, Any]:
    """A cell session's measured configs that differ from its default only in the tiles (the
    grid, the default, the rule's seeds), keyed by their tiles."""
    rows = [row for row in cache.session_evaluations(session["id"]) if row.generation >= 0]
    default_keys = {key for key, labels in session["options"].get("labels", {}).items()
                    if d.DEFAULT in labels.split(data.LABEL_JOIN)}
    defaults = [row.candidate.params for row in rows if row.candidate.key in default_keys]
    if not defaults:
        return {}
    found: dict[Tiles, Any] = {}
    for row in rows:
        if _others(row.candidate.params) != _others(defaults[0]):
            continue  # Helion's own seeds and the like: other parameters changed too
        key = tiles_of(row.candidate.params)
        earlier = found.get(key)
        if earlier is None or (row.result.ok and (not earlier.ok or row.result.median_ms < earlier.median_ms)):
            found[key] = row.result
    return found


def compare(db: Path, dtype: str, values: dict[str, Any],
            results: list[data.CellResult] | None = None) -> list[Comparison]:
    """One comparison per recorded cell (`results`: the cells already read from `db`)."""
    from autotune.databases import open_for_reading

    results = data.load_study(db, dtype) if results is None else results
    cache = open_for_reading(db)
    try:
        comparisons = []
        for result in results:
            recorded = recorded_by_tiles(cache, cache.session(result.session_id))
            present = _present_tiles(result.seed_tiles)
            variant = variant_seed(result.cell, values)
            measured = recorded.get(variant) if variant is not None else None
            status = ("declined" if variant is None else "outside the grid" if measured is None
                      else "ok" if measured.ok else measured.status.value)
            comparisons.append(Comparison(
                cell=result.cell.name, present=present, present_ms=result.seed.ms if result.seed else None,
                variant=variant, variant_ms=measured.median_ms if measured is not None and measured.ok else None,
                variant_status=status, grid_ms=result.grid_ms))
        return comparisons
    finally:
        cache.close()


def _present_tiles(text: str) -> Tiles | None:
    """Tiles back from the report's 'M 64, K 32, 8 warps, 3 stages'."""
    try:
        m, k, warps, stages = (int(part.split()[1] if part.startswith(("M", "K")) else part.split()[0])
                               for part in text.split(", "))
    except ValueError:
        return None
    return m, k, warps, stages


def summary(comparisons: list[Comparison], names: tuple[str, str] = ("present rule", "variant")) -> list[str]:
    both = [c for c in comparisons if c.present_ms and c.variant_ms]
    changed = [c for c in comparisons if c.variant != c.present]
    ratio = targets.geomean([c.present_ms / c.variant_ms for c in both])
    near = sum(1 for c in comparisons if c.grid_ms and c.variant_ms and c.variant_ms <= 1.05 * c.grid_ms)
    near_present = sum(1 for c in comparisons if c.grid_ms and c.present_ms and c.present_ms <= 1.05 * c.grid_ms)
    outside = [c.cell for c in comparisons if c.variant_status == "outside the grid"]
    lines = [f"cells: {len(comparisons)}; the variant changes the seed in {len(changed)}",
             f"{names[0]}'s seed time / {names[1]}'s seed time, geometric mean over the {len(both)} cells where "
             f"both were measured: {ratio:.3f}x (> 1: the {names[1]} is faster)" if ratio
             else "no cell where both were measured",
             f"within 5% of grid-best: {names[0]} {near_present}/{len(comparisons)}, {names[1]} {near}/{len(comparisons)}"]
    if outside:
        lines.append(f"variant seeds outside the recorded grid (a GPU run would time them): {', '.join(outside)}")
    return lines


def table(comparisons: list[Comparison], names: tuple[str, str] = ("present seed", "variant seed")) -> list[str]:
    def tiles(t: Tiles | None) -> str:
        return "declines" if t is None else f"M {t[0]}, K {t[1]}, {t[2]} warps, {t[3]} stages"

    def ms(value: float | None, status: str = "ok") -> str:
        return f"{value:.4f}" if value is not None else status

    lines = [f"| cell | {names[0]} | ms | {names[1]} | ms | grid-best ms |", "|---|---|---|---|---|---|"]
    lines += [f"| {c.cell} | {tiles(c.present)} | {ms(c.present_ms, '-')} | {tiles(c.variant)} | "
              f"{ms(c.variant_ms, c.variant_status)} | {ms(c.grid_ms, '-')} |" for c in comparisons]
    return lines


def against_default(comparisons: list[Comparison], default_ms: dict[str, float | None]) -> list[str]:
    """The study's targets for the variant's seeds, from their recorded times: seed/default and
    the cells where the seed is slower than the default (cells whose variant seed was timed)."""
    pairs = [(c.cell, default_ms.get(c.cell), c.variant_ms) for c in comparisons]
    both = [(cell, default, seed) for cell, default, seed in pairs if default and seed]
    ratio = targets.geomean([default / seed for _, default, seed in both])
    slower = [cell for cell, default, seed in both if seed > default]
    if ratio is None:
        return ["no cell where both the default and the variant's seed were timed"]
    return [f"seed/default, geometric mean over the {len(both)} cells where both were timed: {ratio:.2f}x",
            f"cells where the seed is slower than the default: {len(slower)}"
            + (f" ({', '.join(slower)})" if slower else "")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.seed_study.whatif", description=__doc__.split("\n")[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                        help="a constant of the matmul_epilogue_resident rule (repeatable)")
    parser.add_argument("--dtype", default=d.ALL_DTYPES, help="bfloat16, float32 or all (default)")
    parser.add_argument("--db", type=Path, default=REPO / "data" / "shipped.db")
    args = parser.parse_args(argv)
    try:
        values = parse_overrides(args.overrides)
    except ValueError as error:
        print(f"whatif: {error}", file=sys.stderr)
        return 2
    if not args.db.exists():
        print(f"whatif: no database at {args.db}", file=sys.stderr)
        return 2
    comparisons = compare(args.db, args.dtype, values)
    if not comparisons:
        print(f"whatif: {args.db} holds no recorded {args.dtype} cell of the seed study", file=sys.stderr)
        return 2
    changes = ", ".join(f"{name}={value}" for name, value in values.items()) or "no change (the present rule)"
    print(f"Seed rule variant: {changes}; scored on the grids recorded in {args.db}\n")
    print("\n".join(table(comparisons) + [""] + summary(comparisons)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
