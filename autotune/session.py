"""The tuning session: ask -> normalise -> skip known -> evaluate -> record -> tell.

One loop for every strategy and every evaluator.  Each evaluation is written to the cache
the moment it completes, so a killed session loses at most the evaluation in flight.
Generation 0 holds the compiler's default config (not counted against the budget) and any
seeds (counted), evaluated before the strategy's first proposals.  A session stopped at any
point can be resumed: its recorded rows answer the same proposals again without measuring.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Protocol, Sequence

from autotune.store.cache import Cache
from autotune.async_search import TELL_ORDERS, AsyncSearch
from autotune.evaluators.base import Evaluator, is_asynchronous
from autotune.next_generation import NextGeneration
from autotune.session_options import SessionOptions
from autotune.strategies.base import Strategy
from autotune.task import TuningTask
from autotune.types import Candidate, Params, Result, Source, Status
from search_spaces.space import InvalidConfig, params_key

MAX_EMPTY_GENERATIONS = 3
REBENCHMARK_TOP = 5
# A row's provenance (stored as `origin`): the compiler's default, a seed source (heuristic,
# cache, user, ...), the strategy's own proposal, or the final interleaved re-benchmark.
DEFAULT, SEARCH, REBENCHMARK = "default", "search", "rebenchmark"


@dataclass(frozen=True)
class SessionSettings:
    strategy: str
    seed: int
    budget: int | None
    seconds: float | None = None
    fresh: bool = False
    generation_size: int | None = None
    mode: str = "gpu"  # "gpu", "replay" or "fake": where the results come from
    generations: int | None = None  # stop after this many search generations (a re-run stops where its original did)
    # With an evaluator that keeps configs in flight (autotune/async_search.py): the order the
    # strategy is told results in ("ask": deterministic; "completion": never waits), and how
    # many configs may be untold before the next generation is asked (None: the evaluator's slots).
    tell_order: str = "ask"
    in_flight: int | None = None

    def __post_init__(self) -> None:
        if self.budget is None and self.seconds is None:
            raise ValueError("a session needs a budget of evaluations or of seconds")
        if self.budget is not None and self.budget <= 0:
            raise ValueError(f"budget must be a positive number of evaluations, got {self.budget}")
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"seconds must be positive, got {self.seconds}")
        if self.tell_order not in TELL_ORDERS:
            raise ValueError(f"tell_order must be one of {', '.join(TELL_ORDERS)}, got {self.tell_order!r}")
        if self.in_flight is not None and self.in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, got {self.in_flight}")


@dataclass
class GenerationSummary:
    generation: int
    tested: int
    failures: int
    best_ms: float | None
    improvement_pct: float | None  # how much faster the best got this generation
    changed: list[str]  # parameters the new best changed relative to the previous best
    elapsed_s: float


@dataclass
class SessionOutcome:
    session_id: int
    exit_reason: str
    evaluations: int
    best: tuple[Candidate, Result] | None
    default: tuple[Candidate, Result] | None
    baselines: dict[str, Result]
    status_counts: Counter = field(default_factory=Counter)
    generations: list[GenerationSummary] = field(default_factory=list)
    wall_s: float = 0.0
    seeds: dict[str, tuple[Candidate, Result]] = field(default_factory=dict)  # best of each seed origin
    rebenchmarked: dict[str, Result] = field(default_factory=dict)  # final interleaved re-timings by key
    task: Any = None  # the TuningTask the session ran on
    best_origin: str = ""  # where the best config came from: default, a seed source, or search


class Reporter(Protocol):
    def session_started(self, session_id: int, task: TuningTask, settings: SessionSettings, source: str) -> None: ...
    def generation_started(self, generation: int, size: int) -> None: ...
    def result(self, candidate: Candidate, result: Result) -> None: ...
    def generation_finished(self, summary: GenerationSummary) -> None: ...


class SilentReporter:
    def session_started(self, *args: Any) -> None: ...
    def generation_started(self, *args: Any) -> None: ...
    def result(self, *args: Any) -> None: ...
    def generation_finished(self, *args: Any) -> None: ...


class Session:
    """Runs one strategy against one evaluator, recording into `journal`.

    `journal` is where this session's rows go (the user's database); `cache` is where earlier
    measurements are looked up for reuse (GPU mode, unless `fresh`): usually the same store,
    which reads the user's rows and the shipped ones together.
    """

    def __init__(self, task: TuningTask, evaluator: Evaluator, strategy: Strategy, settings: SessionSettings,
                 journal: Cache, *, cache: Cache | None = None, reporter: Reporter | None = None,
                 options: Mapping[str, Any] | None = None, seeds: Sequence[tuple[str, Params]] = (),
                 resume_session: int | None = None) -> None:
        self.task, self.evaluator, self.strategy, self.settings = task, evaluator, strategy, settings
        self.journal = journal
        self.cache = cache if cache is not None else journal
        self.reporter = reporter or SilentReporter()
        self.options = options if isinstance(options, SessionOptions) else SessionOptions.from_record(options or {})
        self.seen: dict[str, Result] = {}
        self.evaluations = 0
        self.counts: Counter = Counter()
        self.best: tuple[Candidate, Result] | None = None
        self.generations: list[GenerationSummary] = []
        self.seeds = list(seeds)
        self.origins: dict[str, str] = {}  # config key -> seed origin ("heuristic", "cache")
        self.free: set[str] = set()  # generation 0's configs that are free of budget (the default)
        self.first_origin: dict[str, str] = {}  # config key -> where it first came from (provenance)
        self.candidates: dict[str, Candidate] = {}
        self.resume_session = resume_session
        self.recorded: dict[str, Result] = {}  # a resumed session's rows, answered without measuring
        self.final_rows = 0  # re-benchmark rows already recorded for this session

    # -- the loop ---------------------------------------------------------------------
    def _record_calibration(self) -> None:
        """An evaluator spread over GPUs times one reference config on each of them before the
        session starts; those rows go in as soon as the session has an id, so a driver killed
        later keeps them with the evaluations they qualify."""
        for worker, result in (getattr(self.evaluator, "calibration", None) or {}).items():
            self.journal.record_calibration(self.session_id, self.task.fingerprint, worker, result)

    def run(self) -> SessionOutcome:
        task, settings = self.task, self.settings
        self.journal.put_space(task.identity)
        if self.resume_session is not None:
            self.session_id = self.resume_session
            rows = self.journal.session_evaluations(self.session_id)
            self.recorded = {row.candidate.key: row.result for row in rows if row.generation >= 0}
            self.final_rows = sum(row.generation < 0 for row in rows)  # a re-benchmark cut short
            self.journal.reopen_session(self.session_id, budget=settings.budget)
        else:
            self.session_id = self.journal.start_session(
                kernel=task.spec.name, shape=task.shape, dtype=task.dtype, strategy=settings.strategy,
                seed=settings.seed, budget=settings.budget, seconds=settings.seconds, fingerprint=task.fingerprint,
                device=task.identity.device, versions=task.identity.versions, mode=settings.mode,
                options=self.options.but(fresh=settings.fresh, generation_size=settings.generation_size),
            )
        self._record_calibration()
        getattr(self.evaluator, "session_started", lambda _id: None)(self.session_id)  # where its logs go
        self.reporter.session_started(self.session_id, task, settings, self.evaluator.description)
        self.started = time.monotonic()
        exit_reason = "interrupted"
        try:
            default = self._generation_zero()
            reason = self._search()
            # After the search, not before it: the first config is measured as soon as the
            # evaluator is ready, and torch.compile's own compile no longer delays it.
            baselines = self.journal.baselines(session_id=self.session_id)
            if not baselines:
                baselines = self.evaluator.baselines()
                for name, result in baselines.items():
                    self.journal.record_baseline(self.session_id, task.fingerprint, name, result)
            rebenchmarked = self._final_rebenchmark(default)
            if default is not None and default[0].key in rebenchmarked:
                default = (default[0], rebenchmarked[default[0].key])
            exit_reason = reason
        except KeyboardInterrupt:
            exit_reason = "interrupted"
            raise
        except Exception as error:  # recorded, so `autotune sessions` says why it stopped
            exit_reason = f"error: {type(error).__name__}"
            raise
        finally:
            best_key = self.best[0].key if self.best else None
            self.journal.end_session(self.session_id, exit_reason, best_key)
        return SessionOutcome(
            session_id=self.session_id, exit_reason=exit_reason, evaluations=self.evaluations, best=self.best,
            default=default, baselines=baselines, status_counts=self.counts, generations=self.generations,
            wall_s=time.monotonic() - self.started, seeds=self._best_by_origin(), rebenchmarked=rebenchmarked,
            task=task, best_origin=self.first_origin.get(self.best[0].key, "") if self.best else "",
        )

    def _best_by_origin(self) -> dict[str, tuple[Candidate, Result]]:
        best: dict[str, tuple[Candidate, Result]] = {}
        for key, origin in self.origins.items():
            result = self.seen.get(key)
            if result is not None and result.ok and (origin not in best or result.objective < best[origin][1].objective):
                best[origin] = (self.candidates[key], result)
        return best

    def _final_rebenchmark(self, default: tuple[Candidate, Result] | None) -> dict[str, Result]:
        """Re-time the best few (and the default) interleaved, so the winner is not a lucky reading."""
        rebenchmark = getattr(self.evaluator, "rebenchmark", None)
        if rebenchmark is None or self.best is None:
            return {}
        ranked = sorted((k for k, r in self.seen.items() if r.ok), key=lambda k: self.seen[k].objective)
        keys = ranked[:REBENCHMARK_TOP]
        if default is not None and default[1].ok and default[0].key not in keys:
            keys.append(default[0].key)
        started = time.monotonic()
        self.reporter.generation_started(-1, len(keys))
        results = rebenchmark([self.candidates[k] for k in keys])
        source = Source.MEASURED if self.settings.mode == "gpu" else Source.REPLAYED
        for ordinal, key in enumerate(keys, start=self.final_rows):
            if key in results:
                result = replace(results[key], source=source, rel_error=self.seen[key].rel_error)
                results[key] = result
                self.journal.record(self.session_id, self.task.fingerprint, -1, ordinal, self.candidates[key], result,
                                    origin=REBENCHMARK)
                self.reporter.result(self.candidates[key], result)
        # The default competes too: a first reading taken on a cold GPU can hide the real winner.
        contenders = [(self.candidates[k], results[k]) for k in keys if k in results and results[k].ok]
        if contenders:
            self.best = min(contenders, key=lambda pair: pair[1].objective)
        self.reporter.generation_finished(GenerationSummary(
            generation=-1, tested=len(results), failures=0, best_ms=self.best[1].median_ms, improvement_pct=None,
            changed=[], elapsed_s=time.monotonic() - started))
        return results

    def _generation_zero(self) -> tuple[Candidate, Result] | None:
        """The compiler's default config (free of budget) and the seeds, before the strategy."""
        items: list[tuple[Params, Candidate]] = []
        free = self.free
        default = None
        try:
            default = self.task.default_candidate()
            items.append((self.task.space.default, default))
            free.add(default.key)
        except InvalidConfig:
            pass
        for origin, raw in self.seeds:
            try:
                candidate = self.task.candidate(raw)
            except InvalidConfig:
                continue
            self.origins.setdefault(candidate.key, origin)
            if all(candidate.key != c.key for _, c in items):
                items.append((raw, candidate))
        if self.settings.budget is not None:
            items = items[: len(free) + self.settings.budget]
        for raw, candidate in items:
            self.journal.record_alias(self.task.fingerprint, raw, candidate)
        results = self._evaluate_generation(0, items, free=free)
        self.strategy.warm_start([(raw, results[c.key]) for raw, c in items if c.key in results])
        if default is None or default.key not in results:
            return None
        return default, results[default.key]

    def _search(self) -> str:
        if is_asynchronous(self.evaluator):  # configs kept in flight: no generation waits for its slowest
            return AsyncSearch(self).run()
        generation, empty = 0, 0
        size = self.settings.generation_size or self.strategy.generation_size
        while True:
            if self.settings.budget is not None and self.evaluations >= self.settings.budget:
                return "budget"
            if self._out_of_time():
                return "seconds"
            if self.settings.generations is not None and generation >= self.settings.generations:
                return "generations"
            generation += 1
            want = size if self.settings.budget is None else min(size, self.settings.budget - self.evaluations)
            asked = self.strategy.ask(want)
            if not asked:
                return "strategy finished"
            pairs, observations = self._normalise(asked)
            new, new_keys = [], set()
            for raw, candidate in pairs:  # first occurrence of each config not yet seen
                if candidate.key not in self.seen and candidate.key not in new_keys:
                    new_keys.add(candidate.key)
                    new.append((raw, candidate))
            results = self._evaluate_generation(generation, new, guess=self._guess(pairs, observations, new, size))
            for raw, candidate in pairs:  # repeats are answered from this session's own results
                result = results.get(candidate.key) or self.seen.get(candidate.key)
                if result is not None:  # None: the clock ran out before it was evaluated
                    observations.append((raw, result))
            self.strategy.tell(observations)
            empty = empty + 1 if not new else 0
            if empty >= MAX_EMPTY_GENERATIONS:
                return "strategy exhausted"
            if len(results) < len(new):
                return "seconds"

    def _guess(self, pairs: list[tuple[Params, Candidate]], told: list[tuple[Params, Result]],
               new: list[tuple[Params, Candidate]], size: int) -> NextGeneration | None:
        """What the evaluator may ask for the next generation's likely configs, to compile them
        ahead (autotune/evaluators/compile_ahead.py); None where it does not compile ahead."""
        if not getattr(self.evaluator, "compiles_ahead", False) or not self.strategy.guessable:
            return None
        left = None if self.settings.budget is None else self.settings.budget - self.evaluations - len(new)
        return NextGeneration(self.strategy, self.task, pairs, list(told), self.seen,
                              size if left is None else min(size, left))

    def _normalise(self, asked: list[Params]) -> tuple[list[tuple[Params, Candidate]], list[tuple[Params, Result]]]:
        pairs, rejected = [], []
        for raw in asked:
            try:
                candidate = self.task.candidate(raw)
            except InvalidConfig as error:
                rejected.append((raw, Result(key=params_key(raw), status=Status.INVALID, error=str(error))))
                continue
            self.journal.record_alias(self.task.fingerprint, raw, candidate)
            pairs.append((raw, candidate))
        return pairs, rejected

    def _evaluate_generation(self, generation: int, items: list[tuple[Params, Candidate]], *,
                             free: set[str] = frozenset(), guess: NextGeneration | None = None) -> dict[str, Result]:
        """Evaluate (or reuse) each candidate and record each as it completes.

        Keys in `free` do not count against the budget.  Returns results by config key;
        candidates left unevaluated when the clock ran out are missing from it.
        """
        started = time.monotonic()
        previous_best = self.best
        self.reporter.generation_started(generation, len(items))
        results: dict[str, Result] = {}
        to_measure: list[Candidate] = []
        for _raw, candidate in items:
            counted = candidate.key not in free
            recorded = self.recorded.pop(candidate.key, None)
            if recorded is not None:  # resuming: this session measured it before it was stopped
                results[candidate.key] = self._accept(generation, len(results), candidate, recorded, counted,
                                                      record=False)
                continue
            reused = self._reusable(candidate)
            if reused is not None:
                results[candidate.key] = self._accept(generation, len(results), candidate, reused, counted)
            else:
                to_measure.append(candidate)
        by_key = {c.key: c for c in to_measure}
        stream = self.evaluator.evaluate(to_measure, guess=guess) if guess else self.evaluator.evaluate(to_measure)
        try:
            for result in stream:
                counted = result.key not in free
                results[result.key] = self._accept(generation, len(results), by_key[result.key], result, counted)
                if counted and self._out_of_time():
                    break
        finally:
            close = getattr(stream, "close", None)
            if close:
                close()
        self._summarise(generation, list(results.values()), previous_best, started)
        return results

    def _reusable(self, candidate: Candidate) -> Result | None:
        if self.settings.fresh or self.settings.mode != "gpu":
            return None
        found = self.cache.lookup(self.task.fingerprint, candidate.key)
        return found.as_source(Source.REUSED) if found else None

    def origin(self, key: str, generation: int) -> str:
        """Where a config came from: the compiler's default, a seed source, or the search."""
        if generation < 0:
            return REBENCHMARK
        if generation == 0:
            return DEFAULT if key in self.free else self.origins.get(key, SEARCH)
        return self.first_origin.get(key, SEARCH)

    def _accept(self, generation: int, ordinal: int, candidate: Candidate, result: Result, counted: bool, *,
                record: bool = True) -> Result:
        origin = self.origin(candidate.key, generation)
        self.first_origin.setdefault(candidate.key, origin)
        if record:
            self.journal.record(self.session_id, self.task.fingerprint, generation, ordinal, candidate, result,
                                origin=origin)
        self.seen[candidate.key] = result
        self.candidates[candidate.key] = candidate
        self.counts[result.status.value] += 1
        if counted:
            self.evaluations += 1
        if result.ok and (self.best is None or result.objective < self.best[1].objective):
            self.best = (candidate, result)
        self.reporter.result(candidate, result)
        return result

    def _summarise(self, generation: int, results: list[Result], previous_best: Any, started: float) -> None:
        best_ms = self.best[1].median_ms if self.best else None
        improvement = None
        changed: list[str] = []
        if self.best and previous_best and self.best is not previous_best:
            improvement = 100.0 * (previous_best[1].objective - self.best[1].objective) / previous_best[1].objective
            changed = self.task.space.changed(previous_best[0].params, self.best[0].params)
        summary = GenerationSummary(
            generation=generation, tested=len(results), failures=sum(r.status.failed for r in results),
            best_ms=best_ms, improvement_pct=improvement, changed=changed, elapsed_s=time.monotonic() - started,
        )
        self.generations.append(summary)
        self.reporter.generation_finished(summary)

    def _out_of_time(self) -> bool:
        seconds = self.settings.seconds
        return seconds is not None and time.monotonic() - self.started >= seconds
