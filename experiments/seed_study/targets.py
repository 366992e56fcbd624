"""The study's targets (seed 004's claims), computed from the cells whatever they show."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from . import definition as d
from .data import CellResult


@dataclass(frozen=True)
class Targets:
    geomean: float | None  # geometric mean of default/seed over cells where both ran
    geomean_cells: int
    geomean_second_table: float | None  # the same over seed 004's second table (where 6.93x was measured)
    geomean_second_cells: int
    slower: list[str]  # cells where the seed is slower than the default
    near_grid: int  # cells with the seed within NEAR of grid-best
    near_grid_of: int  # cells where the seed and some grid point ran
    rescues: list[str]
    infeasible: list[str]

    @property
    def near_grid_share(self) -> float | None:
        return self.near_grid / self.near_grid_of if self.near_grid_of else None

    def lines(self) -> list[str]:
        """One line per target: the value, the target and whether it is met."""
        share = self.near_grid_share
        return [
            f"geometric mean of seed/default over the {self.geomean_cells} cells where both ran: "
            f"{_x(self.geomean)} (target >= {d.TARGET_GEOMEAN}x: {_met(self.geomean, d.TARGET_GEOMEAN)}); over "
            f"the {self.geomean_second_cells} of those in {d.SECOND_TABLE}: {_x(self.geomean_second_table)}",
            f"cells where the seed is slower than the default: {len(self.slower)} (target {d.TARGET_SLOWER}: "
            f"{'met' if len(self.slower) <= d.TARGET_SLOWER else 'not met'})"
            + (f": {', '.join(self.slower)}" if self.slower else ""),
            f"cells with the seed within {d.NEAR:.0%} of grid-best: {self.near_grid}/{self.near_grid_of}"
            f" = {'-' if share is None else f'{share:.0%}'} (target >= {d.TARGET_NEAR_GRID:.0%}: "
            f"{_met(share, d.TARGET_NEAR_GRID)})",
            f"rescues (the default fails, the seed runs): {len(self.rescues)} (seed 004 reports "
            f"{d.SEED_004_RESCUES})" + (f": {', '.join(self.rescues)}" if self.rescues else ""),
            f"cells where the rule declines (infeasible): {len(self.infeasible)}"
            + (f": {', '.join(self.infeasible)}" if self.infeasible else ""),
        ]


def compute(results: list[CellResult]) -> Targets:
    both = [r for r in results if r.ratio(r.default.ms) is not None]
    second = [r for r in both if r.cell.table == d.SECOND_TABLE]
    gridded = [r for r in results if r.ratio(r.grid_ms) is not None]
    return Targets(
        geomean=geomean([r.ratio(r.default.ms) for r in both]), geomean_cells=len(both),
        geomean_second_table=geomean([r.ratio(r.default.ms) for r in second]), geomean_second_cells=len(second),
        slower=[r.cell.name for r in both if (r.ratio(r.default.ms) or 0) < 1],
        near_grid=sum(1 for r in gridded if within(r)), near_grid_of=len(gridded),
        rescues=[r.cell.name for r in results if r.rescue],
        infeasible=[r.cell.name for r in results if r.infeasible],
    )


def within(result: CellResult) -> bool:
    """The seed is at most NEAR slower than grid-best (seed ms <= (1 + NEAR) x grid-best ms)."""
    assert result.seed is not None and result.seed.ms is not None and result.grid_ms is not None
    return result.seed.ms <= (1 + d.NEAR) * result.grid_ms


def geomean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None and v > 0]
    return statistics.geometric_mean(present) if present else None


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _met(value: float | None, target: float) -> str:
    return "no data" if value is None else ("met" if value >= target else "not met")
