"""Helion's own searches (PatternSearch, LFBOTreeSearch) as strategies, for comparison.

Helion's search owns its loop (`search.autotune()`) while our session speaks ask/tell, so
the search runs in a daemon thread whose benchmark provider hands each batch of configs to
the strategy and blocks until the session has told every result.  The threads strictly
alternate: the Helion thread runs only while `ask`/`tell` wait for it to hand over its next
batch (or finish), so a run is a function of the seed and the results alone, and global
`random` is swapped at each hand-over, so Helion's reseeding never leaks into the session.

Differences from `kernel.autotune()`, all deliberate:
* timings are the session's (one median per config): Helion's re-benchmarking of configs
  near the best and its final re-benchmark of the top configs are off;
* the budget is an exact count of evaluations (`_autotune_budget_exceeded`); Helion's
  wall-clock budget is off (the session has its own);
* configs cached by earlier Helion runs are not used as seeds (a reproducible cold start);
* the search runs on a copy of the kernel's settings (searches mutate their settings),
  logging at WARNING and above only.
Configs Helion proposes outside our space (its constraints are looser) are answered as
errors without asking the session, as are configs it proposes after the budget is spent.
Caveat: Helion's autotune() sets TRITON_LOCAL_BUILD=1 and TRITON_STORE_BINARY_ONLY=1 in
os.environ for the whole search, so also while the session evaluates.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import queue
import random
import threading
import time
from typing import Any, ClassVar, Sequence

from helion import exc as helion_exc
from helion.autotuner import LFBOTreeSearch, PatternSearch
from helion.autotuner.benchmark_provider import BenchmarkProvider, BenchmarkResult
from helion.autotuner.effort_profile import get_effort_profile

from autotune.strategies.base import Observation, Strategy
from autotune.types import Params, Result, Status
from search_spaces.helion_space import to_native
from search_spaces.space import InvalidConfig, params_key

EFFORTS = ("quick", "full")
WAIT_TIMEOUT_S = 600.0  # longest the session waits for Helion to hand over a batch
_POLL_S = 0.2
_TIMEOUT_STATUSES = (Status.COMPILE_TIMEOUT, Status.RUN_TIMEOUT)


class HelionSearchError(RuntimeError):
    """Helion's search failed (or stopped answering) in its thread."""


class _Stopped(BaseException):
    """Raised in the Helion thread to end a search the session abandoned (not an Exception,
    so Helion's own `except Exception` handlers cannot swallow it)."""


def _not_runnable(*_args: Any, **_kwargs: Any) -> None:
    raise RuntimeError("configs are timed by the session's evaluator, not by Helion")


class _IsolatedBound:
    """The bound kernel as the search sees it: the same kernel, a private copy of settings."""

    def __init__(self, bound: Any, settings: Any) -> None:
        self._bound = bound
        self.settings = settings

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bound, name)


class _SessionProvider(BenchmarkProvider):
    """Benchmarks a batch by handing it to the strategy, which waits for the session."""

    mutated_arg_indices: Sequence[int] = ()

    def __init__(self, kernel: Any, settings: Any, config_spec: Any, args: Any, log: Any,
                 autotune_metrics: Any, *, strategy: "_HelionSearch") -> None:
        self._strategy = strategy
        self._metrics = autotune_metrics

    def benchmark(self, configs: list[Any], *, desc: str = "Benchmarking",
                  raise_if_no_viable_config: bool = True) -> list[BenchmarkResult]:
        self._metrics.num_configs_tested += len(configs)
        return self._strategy._benchmark(configs)

    def setup(self) -> None:
        pass

    def cleanup(self) -> None:
        pass


class _Driven:
    """Mixed into Helion's search classes: our budget, our provider, no re-timing, no cache seeds."""

    _strategy: "_HelionSearch"

    def _autotune_budget_exceeded(self) -> bool:
        return self._strategy._budget_exceeded()

    def rebenchmark(self, members: Any, **_kwargs: Any) -> None:
        return None  # re-timing needs Helion's own timer; the session times each config once

    def _final_rebenchmark_top_k(self) -> int:
        return 0

    def _find_similar_cached_configs(self, max_configs: int, **_kwargs: Any) -> list[Any]:
        return []  # no warm start from configs that earlier Helion runs left on this machine


class _DrivenPatternSearch(_Driven, PatternSearch):
    pass


class _DrivenLFBOTreeSearch(_Driven, LFBOTreeSearch):
    pass


class _HelionSearch(Strategy):
    """Runs one of Helion's searches on the task's bound kernel (see the module docstring)."""

    guessable = False  # Helion's search runs on in its own thread: a copy would not be told
    search_class: ClassVar[type] = PatternSearch
    driven_class: ClassVar[type] = _DrivenPatternSearch
    exhaustive = False
    needs_bound_kernel = True

    def __init__(self, space: Any, seed: int = 0, *, task: Any = None, budget: int | None = None,
                 effort: str = "quick", **options: Any) -> None:
        super().__init__(space, seed=seed, **options)  # refuses unknown options (TypeError)
        if effort not in EFFORTS:
            raise ValueError(f"{self.name}: effort must be one of {', '.join(EFFORTS)}, got {effort!r}")
        if getattr(task, "bound", None) is None or getattr(task, "codec", None) is None:
            raise ValueError(f"strategy {self.name!r} runs Helion's own search, which needs the Helion kernel "
                             "bound on this machine (a live Helion task on a GPU machine, or from_task() in tests); "
                             "it cannot run in a replay or on a Triton kernel")
        if budget is not None and budget <= 0:
            raise ValueError(f"{self.name}: budget must be positive, got {budget}")
        self.task, self.budget, self.effort = task, budget, effort
        self.wait_timeout_s = WAIT_TIMEOUT_S
        self.rejected = 0  # configs Helion proposed that are not points of our space
        self.best_config: Any = None  # what Helion's autotune() returned
        self._known: dict[str, Result] = {}  # key of a canonical point -> its result
        self._pending: dict[str, Params] = {}  # the batch Helion waits on, in its order
        self._handed: set[str] = set()
        self._counted = 0  # results told for points this strategy asked: the budget spent
        self._to_main: queue.Queue = queue.Queue()
        self._to_helion: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = False
        self._error: BaseException | None = None
        self._helion_holds_random = False
        self._outer_random: Any = None
        outer = random.getstate()
        try:
            self.search = self._build_search()
        finally:
            random.setstate(outer)

    @classmethod
    def from_task(cls, task: Any, seed: int = 0, budget: int | None = None, **options: Any) -> "_HelionSearch":
        return cls(task.space, seed=seed, task=task, budget=budget, **options)

    def _build_search(self) -> Any:
        bound = self.task.bound
        base = bound.settings
        settings = base.copy(autotune_random_seed=self.seed, autotune_effort=self.effort,
                             autotune_budget_seconds=None, autotune_rebenchmark_threshold=0.5,
                             autotune_progress_bar=False,
                             autotune_log_level=max(base.autotune_log_level, logging.WARNING))
        # Helion's own mapping of effort to constructor kwargs (as in default_autotuner_fn).
        accepted = inspect.signature(self.search_class.__init__).parameters
        self.helion_kwargs = {k: v for k, v in self.search_class.get_kwargs_from_profile(
            get_effort_profile(self.effort), settings).items() if k in accepted}
        from autotune.kernels.registry import DTYPES

        args = self.task.spec.make_inputs(self.task.shape, DTYPES[self.task.dtype], str(bound.env.device), self.seed)
        search = self.driven_class(_IsolatedBound(bound, settings), args, **self.helion_kwargs)
        search._strategy = self
        search._benchmark_provider_cls = functools.partial(_SessionProvider, strategy=self)
        return search

    # -- ask / tell (session thread) ----------------------------------------------------
    def ask(self, n: int) -> list[Params]:
        if self._thread is None and not self._done:
            self._thread = threading.Thread(target=self._run, name=f"{self.name}-seed{self.seed}", daemon=True)
            self._thread.start()
            self._wait_for_helion()
        if self._error is not None:
            raise HelionSearchError(f"{self.name}: Helion's {self.search_class.__name__} failed: "
                                    f"{type(self._error).__name__}: {self._error}") from self._error
        if self._done:
            return []
        fresh = [k for k in self._pending if k not in self._handed and k not in self._known][:max(n, 0)]
        self._handed.update(fresh)
        points = [dict(self._pending[k]) for k in fresh]
        for point in points:
            self.mark_asked(point)
        return points

    def tell(self, observations: Sequence[Observation]) -> None:
        super().tell(observations)
        for point, result in observations:
            key = self._key(point)
            if key not in self._known:
                self._known[key] = result
                self._counted += key in self._pending
        if self._pending and not self._done and all(k in self._known for k in self._pending):
            self._pending, self._handed = {}, set()
            self._to_helion.put("results")
            self._wait_for_helion()

    def warm_start(self, observations: Sequence[Observation]) -> None:
        # The session evaluates seeds before the strategy and counts them against the budget
        # (all but the default config, which is free); count them here too.
        default = self._key(self.space.default)
        fresh = {self._key(point) for point, _ in observations} - set(self._known) - {default}
        self._counted += len(fresh)
        self.tell(observations)

    def close(self) -> None:
        """Stop the Helion thread (it also stops by itself once the budget is spent)."""
        self._done = True
        self._stop.set()
        self._to_helion.put("stop")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    @property
    def helion_thread(self) -> threading.Thread | None:
        return self._thread

    def _key(self, point: Params) -> str:
        try:
            return params_key(self.task.codec.normalise(point)[0])
        except InvalidConfig:
            return params_key(point)

    def _wait_for_helion(self) -> None:
        """Block until the Helion thread hands over a batch, finishes or fails."""
        assert self._thread is not None
        deadline = time.monotonic() + self.wait_timeout_s
        while True:
            try:
                kind, payload = self._to_main.get(timeout=_POLL_S)
                break
            except queue.Empty:
                alive = self._thread.is_alive()
                if not self._to_main.empty() or (alive and time.monotonic() < deadline):
                    continue
                self._stop.set()  # a stuck thread stops at its next hand-over or budget check
                what = f"gave no batch in {self.wait_timeout_s:g} s" if alive else "ended without a word"
                self._done, self._error = True, HelionSearchError(f"the Helion thread {what}")
                return
        if kind != "batch":  # the thread said its last word and is ending
            self._done, self._error = True, payload
            self._thread.join(timeout=10)

    # -- Helion's side (Helion thread) ------------------------------------------------------
    def _run(self) -> None:
        self._outer_random, self._helion_holds_random = random.getstate(), True
        random.seed(self.seed)
        message: tuple[str, Any] = ("done", None)
        try:
            self.best_config = self.search.autotune(skip_cache=True)
        except _Stopped:
            pass
        except helion_exc.NoConfigFound:
            pass  # every config failed (or the budget ran out before one worked): a normal end
        except BaseException as error:  # noqa: BLE001 - surfaced by the next ask()
            message = ("error", error)
        finally:  # after a stop the session thread runs on: its random state is no longer ours
            if self._helion_holds_random and not self._stop.is_set():
                random.setstate(self._outer_random)
            self._helion_holds_random = False
        self._to_main.put(message)

    def _budget_exceeded(self) -> bool:
        if self._stop.is_set():
            return True
        outstanding = sum(1 for k in self._pending if k not in self._known)
        return self.budget is not None and self._counted + outstanding >= self.budget

    def _benchmark(self, configs: list[Any]) -> list[BenchmarkResult]:
        keys: list[str | None] = []
        for config in configs:
            try:
                point = self.task.codec.params_of(to_native(config))
            except InvalidConfig:
                self.rejected += 1
                keys.append(None)
                continue
            key = params_key(point)
            if key not in self._known and key not in self._pending:
                if self._budget_exceeded():
                    keys.append(None)
                    continue
                self._pending[key] = point
            keys.append(key)
        if any(k not in self._known for k in self._pending):
            self._hand_over()
        now = time.perf_counter()
        return [self._benchmark_result(config, self._known.get(key) if key else None, now)
                for config, key in zip(configs, keys)]

    def _hand_over(self) -> None:
        """Give the batch to the session thread and wait until all its results are told."""
        if self._stop.is_set():
            raise _Stopped
        helion_random = random.getstate()
        random.setstate(self._outer_random)
        self._helion_holds_random = False
        self._to_main.put(("batch", None))
        while True:
            try:
                message = self._to_helion.get(timeout=1.0)
            except queue.Empty:
                message = "stop" if self._stop.is_set() else None
            if message == "stop":
                raise _Stopped
            if message == "results":
                break
        self._outer_random = random.getstate()
        random.setstate(helion_random)
        self._helion_holds_random = True

    @staticmethod
    def _benchmark_result(config: Any, result: Result | None, now: float) -> BenchmarkResult:
        if result is not None and result.ok:
            perf, status = float(result.median_ms), "ok"
        else:
            perf = math.inf
            status = "timeout" if result is not None and result.status in _TIMEOUT_STATUSES else "error"
        return BenchmarkResult(config=config, fn=_not_runnable, perf=perf, status=status,
                               compile_time=result.compile_s if result is not None else None, completed_at=now)


class HelionPatternSearch(_HelionSearch):
    """Helion's PatternSearch (with Helion's effort profile for its kwargs)."""

    name = "helion-pattern"
    search_class = PatternSearch
    driven_class = _DrivenPatternSearch


class HelionLFBOSearch(_HelionSearch):
    """Helion's LFBOTreeSearch, its default search (needs scikit-learn)."""

    name = "helion-lfbo"
    search_class = LFBOTreeSearch
    driven_class = _DrivenLFBOTreeSearch
