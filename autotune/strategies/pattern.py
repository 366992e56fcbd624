"""Pattern search: search paths walking to better single-parameter neighbours, restarted
when they stall.

1. The first paths start from the best `copies` accurate points the session gave (the
   default config, seeds).  With `explore="first"` (Helion's order), or when the session
   gave no accurate point, a random population of `initial_population` points is evaluated
   first and the paths start from the best of everything known.
2. Each generation evaluates every single-parameter neighbour of each active centre
   (capped at `max_neighbours` per path, drawn with the strategy's rng); a path moves to
   its best neighbour when that is faster by more than `min_improvement` (relative), and
   stops otherwise, or after `max_generations` generations of its walk.
3. When every path has stopped and `restarts` remain, an exploration generation is drawn:
   half kicks (the best point with a few parameters changed at random) and half uniform
   random points.  New paths start from the best known points no path has reached yet:
   neither a past centre nor within `radius` changed parameters of one.
4. The search ends when no restart remains or no such point is left.

5. Options (`PatternOptions`) add what later walks found they needed, each off by default:
   a look before a path stops (`look`, `line_reach`), first paths one per program order
   (`orders`), kicks drawn by how much each parameter mattered (`focus`), and paths that follow
   moves level with the best one (`ties`).  The walks written one by one after stalls on the
   softmax are named sets of them (`pattern_presets.PRESETS`); what each found is written beside
   its field.

Why paths start from the given points: a random point of a kernel's space is usually many
times slower than the default (a random population cost a session tens of seconds of
compiles and slow timings before the first step), and a session that was given seeds
already knows where to start.  Exploring when stalled instead of first spends that time
only where walking from what is known has stopped paying.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, ClassVar

from autotune.strategies.base import Observation, Strategy
from autotune.strategies.pattern_line_look import LINE_REACH, NOISE_FLOOR
from autotune.types import Params
from search_spaces.space import SearchSpace, params_key

EXPLORE = ("stalled", "first")
LOOKS = ("none", "ends", "full")
KICK_STEPS = 3  # single-parameter moves in a kick: past the reach of a path's neighbourhood
START_ACROSS = "pid_type"  # `orders`: the parameter each of whose values starts a first path (Helion's program order)
# `ties`: a percent, the most that timing noise moves a long-row config's median between two
# timings, and half the 2% that counts as reaching the best; moves closer than this are not ranked.
TIE_BAND = 0.01
# `focus`: a parameter whose moves changed nothing measurable keeps this weight (0.1%: below
# timing noise), so a kick can still move it, rarely; changes past 10% weigh no more than 10%
# (uncapped, one ruinous move took most of the draws at the shape it was fitted to, 4096x65536).
MIN_WEIGHT = 0.001
MAX_WEIGHT = math.log(1.10)


@dataclass(frozen=True)
class PatternOptions:
    """Everything that shapes a pattern walk; `--option KEY=VALUE` sets one field.

    The first eight are the walk's own (module docstring).  The rest are off by default; each
    was written after a stall of the Helion softmax at a long row, said here in a line (the
    held-out study, `experiments/heldout`, has the runs):
    - `look`: what a path looks at once before it stops.  "ends": each ordered parameter set to
      the farthest value towards either end of its range that the constraints allow (the largest
      reduction block takes a whole row, a different program, behind slower values); "full":
      also the neighbours `max_neighbours` left out (a draw that missed the one move after which a
      block size pays stopped a path short of it).  A better one continues the path.
    - `line_reach`: the look also takes each ordered parameter moved `radius + 1` to
      `line_reach` steps either way (a chunk that tiles a row unevenly is slower one step up and
      faster two up); 0 takes none.  The presets that use it also stop at the timing noise
      (`min_improvement` 0.5%), so a path on a plateau stops and looks instead of drifting.
    - `orders`: the first paths start one in each program order (`START_ACROSS`), each keeping
      its order until all have stopped: a flat walk stays flat where the best is persistent
      behind moves that are slower alone.  A space without the parameter is walked as without it.
    - `focus`: a kick's moves take parameters drawn by how much their single moves changed the
      time at the kick's start (`MIN_WEIGHT`..`MAX_WEIGHT`), not uniformly: an escape that needs
      two moves at once is found more often among many moves that change nothing.
    - `ties`: moves within `TIE_BAND` of a path's best move become paths of their own, at most
      `paths` kept a generation (one timing cannot rank two moves that close; where two
      parameters interact the other move was the one that led on).
    """

    initial_population: int = 16
    copies: int = 2
    max_generations: int = 20
    min_improvement: float = 0.001
    max_neighbours: int | None = 24
    radius: int = 1
    explore: str = "stalled"
    restarts: int = 8
    look: str = "none"
    line_reach: int = 0
    orders: bool = False
    focus: bool = False
    ties: bool = False
    paths: int = 2

    def __post_init__(self) -> None:
        if self.initial_population < 1 or self.copies < 1 or self.max_generations < 1 or self.restarts < 0:
            raise ValueError("pattern search needs initial_population, copies and max_generations >= 1 "
                             "and restarts >= 0")
        if self.explore not in EXPLORE:
            raise ValueError(f"pattern search: explore must be one of {', '.join(EXPLORE)}, got {self.explore!r}")
        if self.look not in LOOKS:
            raise ValueError(f"pattern search: look must be one of {', '.join(LOOKS)}, got {self.look!r}")
        if self.line_reach < 0 or self.paths < 1:
            raise ValueError("pattern search needs line_reach >= 0 and paths >= 1")

    @property
    def looks(self) -> bool:
        """Whether a path looks before it stops."""
        return self.look != "none" or self.line_reach > self.radius

    def changed(self) -> dict[str, Any]:
        """The fields that differ from the defaults (what a preset sets)."""
        default = PatternOptions()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)}


class _Unset:
    def __repr__(self) -> str:
        return "<the preset's>"


UNSET: Any = _Unset()  # an option not given: the preset's value stands


class PatternSearch(Strategy):
    name = "pattern"
    generation_size = 64
    exhaustive = False
    #: The options a name stands for before `--option`s are applied (`pattern_presets`).
    preset: ClassVar[PatternOptions] = PatternOptions()

    def __init__(self, space: SearchSpace, seed: int = 0, *, initial_population: int = UNSET, copies: int = UNSET,
                 max_generations: int = UNSET, min_improvement: float = UNSET, max_neighbours: int | None = UNSET,
                 radius: int = UNSET, explore: str = UNSET, restarts: int = UNSET, look: str = UNSET,
                 line_reach: int = UNSET, orders: bool = UNSET, focus: bool = UNSET, ties: bool = UNSET,
                 paths: int = UNSET, **options: Any) -> None:
        super().__init__(space, seed, **options)
        given = dict(initial_population=initial_population, copies=copies, max_generations=max_generations,
                     min_improvement=min_improvement, max_neighbours=max_neighbours, radius=radius, explore=explore,
                     restarts=restarts, look=look, line_reach=line_reach, orders=orders, focus=focus, ties=ties,
                     paths=paths)
        self.options = replace(self.preset, **{k: v for k, v in given.items() if v is not UNSET})
        o = self.options
        self.initial_population, self.copies, self.max_generations = o.initial_population, o.copies, o.max_generations
        self.min_improvement, self.max_neighbours, self.radius = o.min_improvement, o.max_neighbours, o.radius
        self.explore, self.paths = o.explore, o.paths
        self.restarts_left = o.restarts
        self.generation = 0  # generations of the current walk; 0 = none yet
        self.restarts = 0  # restarts made
        self.centres: list[Params] = []
        self.past_centres: list[Params] = []
        self._known: dict[str, Observation] = {}
        self._queue: list[Params] = []
        self._started = False
        self._exploring = False  # the queued points are an exploration generation, not steps
        self._done = False
        self._probed: set[str] = set()  # centres whose look before stopping has been asked
        self._starting_across = False  # `orders`: the first start is one path per program order
        self._pinned = False  # `orders`: the first paths keep their program order until they all stop

    def tell(self, observations: list[Observation]) -> None:
        super().tell(observations)
        for params, result in observations:
            self._known[params_key(params)] = (params, result)

    def ask(self, n: int) -> list[Params]:
        if self.options.orders and not self._started and self.explore != "first" and self._ranked():
            self._started = True
            variants = self.order_variants(self._ranked()[0][0])
            if variants:
                self._starting_across = True
                self._queue_exploration(variants)
        if not self._started:
            self._started = True
            if self.explore == "first" or not self._ranked():
                self._queue_exploration(self._random_points(self.initial_population))
        while not self._queue and not self._done:
            self._advance()
        batch = self._queue[:n]
        del self._queue[:n]
        for point in batch:
            self.mark_asked(point)
        return batch

    # -- the search ------------------------------------------------------------------
    def _advance(self) -> None:
        """Start paths (after an exploration), move them, or explore when they all stopped."""
        if self._exploring or not self.centres and self.generation == 0:
            self._exploring = False
            self.centres = self._fresh_centres()
            self.generation = 0
        else:
            self.centres = self._moved() if self.generation < self.max_generations else []
        if not self.centres:
            self._restart_or_finish()
            return
        self.past_centres += self.centres
        self.generation += 1
        queue: list[Params] = []
        queued: set[str] = set()
        for centre in self.centres:
            for point in self._neighbours(centre):
                key = params_key(point)
                if key not in self._known and key not in queued and not self.was_asked(point):
                    queued.add(key)
                    queue.append(point)
        self._queue = queue  # may be empty when every neighbour is known: ask() advances again

    def _moved(self) -> list[Params]:
        """Each path's best neighbour where it is better by `min_improvement`; a path that would
        stop stays one more generation to look first (`look`); with `ties`, the level moves too."""
        moved = []
        for centre in self.centres:
            best = min(self._neighbours(centre), key=self._objective, default=None)
            if best is not None and self._objective(best) < self._objective(centre) * (1 - self.min_improvement):
                moved.append(best)
            elif self.options.looks and params_key(centre) not in self._probed and self.stall_moves(centre):
                self._probed.add(params_key(centre))
                moved.append(centre)  # stays one more generation: its look is asked next
        moved = _unique(moved)
        if not self.options.ties:
            return moved
        ahead = _unique(moved + [point for centre in self.centres for point in self.tied_moves(centre)])
        if not ahead:
            return []
        lead = min(self._objective(point) for point in ahead)
        level = [point for point in ahead if self._objective(point) <= lead * (1 + TIE_BAND)]
        return sorted(level, key=self._objective)[: self.paths]

    def _restart_or_finish(self) -> None:
        self._pinned = False  # every path has stopped: restarts walk freely
        if self.restarts_left <= 0:
            self._done = True
            return
        self.restarts_left -= 1
        self.restarts += 1
        best = self._ranked()
        kicks = self._kicks(best[0][0], self.initial_population // 2) if best else []
        points = kicks + self._random_points(self.initial_population - len(kicks), exclude=kicks)
        if not points and not self._fresh_centres():
            self._done = True
            return
        self._queue_exploration(points)

    def _queue_exploration(self, points: list[Params]) -> None:
        self._queue = points
        self._exploring = True
        self.centres = []

    def _fresh_centres(self) -> list[Params]:
        """The best `copies` accurate points no path has reached: not a past centre, and more
        than `radius` parameters away from each.  At an `orders` first start, the fastest
        accurate point of each program order instead."""
        if self._starting_across:
            self._starting_across = False
            self._pinned = True
            fastest: dict[Any, Params] = {}
            for params, _ in self._ranked():
                fastest.setdefault(params[START_ACROSS], params)
            return list(fastest.values())
        fresh = [params for params, _ in self._ranked() if all(self._distance(params, c) > self.radius
                                                                for c in self.past_centres)]
        return fresh[: self.copies]

    # -- points ----------------------------------------------------------------------
    def _ranked(self) -> list[Observation]:
        return sorted((o for o in self._known.values() if o[1].ok), key=lambda o: o[1].objective)

    def _objective(self, point: Params) -> float:
        known = self._known.get(params_key(point))
        return known[1].objective if known else float("inf")

    def _distance(self, a: Params, b: Params) -> int:
        return len(self.space.changed(a, b))

    def _new(self, point: Params, taken: set[str]) -> bool:
        key = params_key(point)
        return key not in self._known and key not in taken and not self.was_asked(point)

    def _random_points(self, count: int, exclude: list[Params] = ()) -> list[Params]:
        points: list[Params] = []
        taken = {params_key(p) for p in exclude}
        for _ in range(count * 50):
            if len(points) >= count:
                break
            point = self.space.sample(self.rng)
            if self._new(point, taken):
                taken.add(params_key(point))
                points.append(point)
        return points

    def _kicks(self, start: Params, count: int) -> list[Params]:
        """Up to `count` new points, each `KICK_STEPS` random moves (`_kick_move`) from `start`."""
        move = self._kick_move(start)
        points: list[Params] = []
        taken: set[str] = set()
        for _ in range(count * 10):
            if len(points) >= count:
                break
            point, moved = start, set()
            for _step in range(KICK_STEPS):
                step = move(point, moved)
                if step is None:
                    break
                point = step
            if self._distance(point, start) > self.radius and self._new(point, taken):
                taken.add(params_key(point))
                points.append(point)
        return points

    def _kick_move(self, start: Params) -> Callable[[Params, set[str]], Params | None]:
        """How a kick from `start` takes one move (None where the point has none): a random
        neighbour; with `focus`, a parameter not yet moved in the kick (`moved`), drawn by
        `weights` at `start`, then one of the point's moves of it at random."""
        if not self.options.focus:
            def move(point: Params, moved: set[str]) -> Params | None:
                options = self.space.neighbours(point, self.radius)
                return self.rng.choice(options) if options else None
            return move
        weights = self.weights(start)

        def focused(point: Params, moved: set[str]) -> Params | None:
            moves = self._moves_by_parameter(point, moved)
            if not moves:
                return None
            names = sorted(moves)
            name = self.rng.choices(names, weights=[weights[n] for n in names])[0]
            moved.add(name)
            return self.rng.choice(moves[name])
        return focused

    def weights(self, start: Params) -> dict[str, float]:
        """`focus`: per parameter, how much its measured single moves at `start` changed the time
        (the largest |ln(t / t_start)|, within `MIN_WEIGHT`..`MAX_WEIGHT`; an unmeasured one gets
        the median of the measured ones, and every one alike where none was measured)."""
        here = self._objective(start)
        changes: dict[str, float] = {}
        if math.isfinite(here) and here > 0:
            for point in self.space.neighbours(start, self.radius):
                time = self._objective(point)
                names = self.space.changed(start, point)
                if math.isfinite(time) and time > 0 and len(names) == 1:
                    changes[names[0]] = max(changes.get(names[0], 0.0), abs(math.log(time / here)))
        unknown = statistics.median(changes.values()) if changes else 1.0
        return {name: min(max(changes.get(name, unknown), MIN_WEIGHT), MAX_WEIGHT) for name in self.space.names}

    def _moves_by_parameter(self, point: Params, moved: set[str]) -> dict[str, list[Params]]:
        """`point`'s single-parameter moves, by the parameter they change (those in `moved` left out)."""
        moves: dict[str, list[Params]] = {}
        for neighbour in self.space.neighbours(point, self.radius):
            names = self.space.changed(point, neighbour)
            if len(names) == 1 and names[0] not in moved:
                moves.setdefault(names[0], []).append(neighbour)
        return moves

    def _drawn(self, centre: Params) -> list[Params]:
        """The centre's neighbours, capped at `max_neighbours` (the draw is seeded per centre)."""
        points = self.space.neighbours(centre, self.radius)
        if self.max_neighbours is not None and len(points) > self.max_neighbours:
            chooser = random.Random(f"{self.seed}:{params_key(centre)}")
            points = chooser.sample(points, self.max_neighbours)
        return points

    def _neighbours(self, centre: Params) -> list[Params]:
        """The moves a path weighs at `centre`: the capped draw, then its look once it has been
        asked, less (while `orders`' first paths are pinned) moves out of the centre's program
        order: a persistent path's best first move is often back to the flat order."""
        points = self._drawn(centre)
        if self.options.looks and params_key(centre) in self._probed:
            keys = {params_key(p) for p in points}
            points = points + [p for p in self.stall_moves(centre) if params_key(p) not in keys]
        if self._pinned:
            points = [p for p in points if p.get(START_ACROSS) == centre.get(START_ACROSS)]
        return points

    # -- the looks -------------------------------------------------------------------
    def stall_moves(self, centre: Params) -> list[Params]:
        """What a path looks at once before it stops at `centre` (`look`, `line_reach`)."""
        if self.options.look == "full":
            drawn = {params_key(p) for p in self._drawn(centre)}
            looked = self.space.neighbours(centre, self.radius) + self.end_moves(centre)
            moves = [point for point in _unique(looked) if params_key(point) not in drawn]
        elif self.options.look == "ends":
            moves = self.end_moves(centre)
        else:
            moves = []
        if self.options.line_reach > self.radius:
            moves = _unique(moves + self.line_moves(centre))
        return moves

    def end_moves(self, centre: Params) -> list[Params]:
        """For each ordered parameter, the value farthest towards each end of its range that
        keeps `centre` (with only that parameter changed) inside the space, when more than
        `radius` steps from the centre's value."""
        moves = []
        for parameter in self.space.parameters:
            if not parameter.ordered:
                continue
            values = parameter.values()
            here = parameter.index_of(centre[parameter.name])
            for towards_end in (range(0, here - self.radius), range(len(values) - 1, here + self.radius, -1)):
                for index in towards_end:
                    candidate = self.space.ordered({**centre, parameter.name: values[index]})
                    if not self.space.violations(candidate) and self.space.is_member(candidate):
                        moves.append(candidate)
                        break
        return moves

    def line_moves(self, centre: Params) -> list[Params]:
        """`centre` with one ordered parameter moved `radius + 1` to `line_reach` steps either way,
        each that keeps it inside the space (the space's own neighbours at that reach, less the
        nearer ones and the unordered parameters' moves, which do not depend on the reach)."""
        near = {params_key(p) for p in self.space.neighbours(centre, self.radius)}
        ordered = {p.name for p in self.space.parameters if p.ordered}
        return [point for point in self.space.neighbours(centre, self.options.line_reach)
                if params_key(point) not in near and set(self.space.changed(centre, point)) <= ordered]

    def tied_moves(self, centre: Params) -> list[Params]:
        """`ties`: the centre's neighbours past the noise floor within `TIE_BAND` of its best one,
        that one aside (which the walk takes anyway)."""
        floor = self._objective(centre) * (1 - self.min_improvement)
        better = sorted((p for p in self._neighbours(centre) if self._objective(p) < floor), key=self._objective)
        if not better:
            return []
        band = self._objective(better[0]) * (1 + TIE_BAND)
        return [point for point in better[1:] if self._objective(point) <= band]

    def order_variants(self, point: Params) -> list[Params]:
        """`orders`: `point` with each other value of START_ACROSS that the space allows, not yet measured."""
        if START_ACROSS not in self.space.names:
            return []
        parameter = self.space.parameter(START_ACROSS)
        variants: list[Params] = []
        taken: set[str] = set()
        for value in parameter.values():
            if value == point[START_ACROSS]:
                continue
            candidate = self.space.ordered({**point, START_ACROSS: value})
            if not self.space.violations(candidate) and self.space.is_member(candidate) and self._new(candidate, taken):
                taken.add(params_key(candidate))
                variants.append(candidate)
        return variants


def _unique(points: list[Params]) -> list[Params]:
    seen: set[str] = set()
    result = []
    for point in points:
        key = params_key(point)
        if key not in seen:
            seen.add(key)
            result.append(point)
    return result
