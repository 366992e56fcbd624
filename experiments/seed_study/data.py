"""The seed study read back from the database: one row per cell.

Only sessions tagged with the study (`options.experiment.study`) count; of several for the
same cell, the latest finished one is used (one cut short is resumed by the runner, not
reported).  A session's `labels` (config key -> labels, joined by " | " when one config is
several things at once) say which evaluation is the default, a rule seed, one of Helion's
own seeds or a grid point; its `heuristics` record says why the rule declined when it did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from autotune.databases import SHIPPED_DB, open_for_reading
from autotune.store.cache import Cache
from autotune.experiment import experiment_tags
from autotune.experiment_devices import on_one_device
from autotune.fixed_list import is_finished
from autotune.strategies.fixed import LABEL_JOIN
from autotune.types import Result

from . import definition as d

NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Timing:
    """A config's median time, or why it has none (its failure status)."""

    ms: float | None
    status: str

    @property
    def ok(self) -> bool:
        return self.ms is not None


@dataclass
class CellResult:
    cell: d.Cell
    session_id: int
    device: str
    seed: Timing | None  # the fastest rule seed; None: the rule declined (infeasible)
    seed_label: str  # the seed's label, or the rule's reasons for declining
    seed_tiles: str  # the seed's M tile, K tile, warps and stages
    default: Timing
    grid_ms: float | None
    grid_ok: int
    grid_n: int
    helion_seed: Timing | None  # the fastest of Helion's own seeds; None: none evaluated
    torch_ms: float | None
    compile_ms: float | None

    @property
    def infeasible(self) -> bool:
        return self.seed is None

    @property
    def rescue(self) -> bool:
        """The default does not compile or run, and the seed does."""
        return self.seed is not None and self.seed.ok and not self.default.ok

    def ratio(self, other_ms: float | None) -> float | None:
        """How many times faster the seed is than `other_ms` (> 1: the seed wins)."""
        if self.seed is None or self.seed.ms is None or other_ms is None:
            return None
        return other_ms / self.seed.ms


def study_sessions(db: Path, dtype: str, device: str | None = None) -> dict[str, dict[str, Any]]:
    """Cell name -> the latest finished study session (on `device`; None: on any)."""
    cache = open_for_reading(db)
    try:
        return _study_sessions(cache, dtype, device)
    finally:
        cache.close()


def _study_sessions(cache: Cache, dtype: str, device: str | None = None) -> dict[str, dict[str, Any]]:
    return _latest_by_cell(s for s in _finished(cache, dtype) if device is None or s["device"] == device)


def _latest_by_cell(sessions: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Cell name -> the last of `sessions` (in session order) of that cell."""
    return {experiment_tags(s["options"]).get("cell", "?"): s for s in sessions}


def _finished(cache: Cache, dtype: str) -> list[dict[str, Any]]:
    """The study's finished sessions of `dtype` (or of every dtype), on every device, in session order."""
    found = []
    for session in sorted(cache.sessions(limit=1_000_000), key=lambda s: s["id"]):
        tags = experiment_tags(session["options"])
        if tags.get("study") != d.STUDY or session["mode"] != "gpu":
            continue
        if dtype not in (session["dtype"], d.ALL_DTYPES):
            continue
        if not is_finished(session) or session["evaluations"] == 0:
            continue  # cut short (it is resumed, not reported), or nothing measured to report
        found.append(session)
    return found


def load_study(db: Path, dtype: str, shapes: tuple[str, ...] = (),
               shipped: Path | None = SHIPPED_DB, device: str | None = None) -> list[CellResult]:
    """Every recorded cell, the study's in its order first, then any other cell a session was
    tagged with (e.g. one since dropped from the definition) in the order it was recorded; from
    one GPU's sessions: `device`, else the only one recorded, else the shipped data's."""
    cache = open_for_reading(db, shipped)
    try:
        _, finished = on_one_device(_finished(cache, dtype), device, study=d.STUDY)
        sessions = _latest_by_cell(finished)
        pairs = [(_cell(session), session) for session in sessions.values()]
        order = {cell.name: index for index, cell in enumerate(d.CELLS)}
        pairs.sort(key=lambda pair: (order.get(pair[0].name, len(order)), pair[1]["id"]))
        return [_cell_result(cache, cell, session) for cell, session in pairs if not shapes or cell.shape in shapes]
    finally:
        cache.close()


def _cell(session: dict[str, Any]) -> d.Cell:
    """The definition's cell a session was tagged with, else one rebuilt from its tags."""
    tags = experiment_tags(session["options"])
    known = {cell.name: cell for cell in d.CELLS}.get(tags.get("cell", ""))
    return known or d.Cell(tags.get("kernel", session["kernel"]), tags.get("shape", "?"), session["dtype"],
                           tags.get("regime", "?"), tags.get("table", "?"))


def _cell_result(cache: Cache, cell: d.Cell, session: dict[str, Any]) -> CellResult:
    options = session["options"]
    results = {row.candidate.key: row.result for row in cache.session_evaluations(session["id"])
               if row.generation >= 0}
    by_label: dict[str, Result | None] = {}
    for key, joined in options.get("labels", {}).items():
        for label in joined.split(LABEL_JOIN):
            by_label[label] = results.get(key)
    invalid = options.get("invalid", {})
    seed, seed_label = _fastest(by_label, invalid, d.RULE_SEED + " ")
    heuristics = options.get("heuristics", {})
    declined = [f"{item['rule']}: {item['declined']}" for item in heuristics.get("declined", [])]
    grid = [r for label, r in by_label.items() if label.startswith(d.GRID + " ")]
    grid_ok = [r.median_ms for r in grid if r is not None and r.ok]
    helion_seed, _ = _fastest(by_label, invalid, d.HELION_SEED + " ")
    baselines = cache.baselines(session_id=session["id"])
    return CellResult(
        cell=cell, session_id=session["id"], device=session["device"], seed=seed,
        seed_label=seed_label if seed is not None else "; ".join(declined) or "no seed",
        seed_tiles=_tiles(heuristics.get("seeds", []), seed_label),
        default=_timing(by_label.get(d.DEFAULT), d.DEFAULT in by_label),
        grid_ms=min(grid_ok, default=None), grid_ok=len(grid_ok), grid_n=len(grid) + _count(invalid, d.GRID + " "),
        helion_seed=helion_seed,
        torch_ms=_ms(baselines.get("torch")), compile_ms=_ms(baselines.get("torch.compile")),
    )


def _fastest(by_label: dict[str, Result | None], invalid: dict[str, str],
             prefix: str) -> tuple[Timing | None, str]:
    """The fastest config whose label starts with `prefix` (else the first one's failure);
    (None, "") when no config had such a label."""
    labels = [label for label in by_label if label.startswith(prefix)]
    labels += [label for label in invalid if label.startswith(prefix)]
    if not labels:
        return None, ""
    timings = {label: _timing(by_label.get(label), label in by_label) if label not in invalid
               else Timing(None, "invalid") for label in labels}
    ran = [label for label in labels if timings[label].ok]
    # equal times: the lower-numbered label (the rule's own choice before its variants)
    best = min(ran, key=lambda label: (timings[label].ms or 0.0, _ordinal(label))) if ran else labels[0]
    return timings[best], best


def _ordinal(label: str) -> int:
    """The number in a label such as 'seed 2: rule' (0 when it has none)."""
    found = re.search(r"\d+", label)
    return int(found.group()) if found else 0


def _tiles(seeds: list[dict[str, Any]], label: str) -> str:
    """'M 64, K 32, 8 warps, 3 stages' for the rule seed labelled `label` ("seed I: rule")."""
    try:
        params = seeds[int(label.split(":")[0].split()[-1]) - 1]["params"]
    except (ValueError, IndexError, KeyError):
        return "-"
    return (f"M {params.get('block_sizes[0]')}, K {params.get('block_sizes[1]')}, {params.get('num_warps')} warps, "
            f"{params.get('num_stages')} stages")


def _timing(result: Result | None, labelled: bool) -> Timing:
    if result is None:
        return Timing(None, NOT_MEASURED if labelled else "-")
    return Timing(result.median_ms, "ok") if result.ok else Timing(None, result.status.value)


def _ms(result: Result | None) -> float | None:
    return result.median_ms if result is not None and result.ok else None


def _count(labels: dict[str, str], prefix: str) -> int:
    return sum(label.startswith(prefix) for label in labels)
