"""Model-based search through Optuna's ask-and-tell API: TPE ("tpe") and a Gaussian process ("gp").

Each parameter of the space becomes one Optuna distribution, chosen so the model sees
the structure the parameter declares:

=============  =====================================================  ======================
kind           Optuna distribution                                    encoded value
=============  =====================================================  ======================
PowerOfTwo     IntDistribution(log2 low, log2 high)                   the exponent: 64 -> 6
Integer        IntDistribution(low, high)                             the integer itself
Ordinal        IntDistribution(0, len(values) - 1)                    index of the value
Choice         CategoricalDistribution(values), when every value is   the value itself
               a str/int/float/bool/None and no two compare equal
               (True == 1, 0 == 0.0 would be confused by Optuna)
Choice (else)  CategoricalDistribution(range(len(values)))            index of the value
               (permutation lists, mixed bool/int choices)
=============  =====================================================  ======================

PowerOfTwo, Integer and Ordinal are ordered integer axes, so TPE's kernels and the GP's
length scales use the order; Choice is categorical (no order).  Decoding inverts this
exactly, returning the parameter's own spelling of each value.

Bookkeeping:

* `ask` calls `study.ask(distributions)` and decodes the trial.  A draw that violates a
  constraint or repeats a point already asked (or known) is told to Optuna as FAIL at once
  (with user attribute "rejected" = "invalid" / "repeat"; both samplers ignore FAIL trials)
  and drawn again, up to `model_draws` times (8 for TPE, 3 for the GP).  Then the strategy
  draws a random unasked valid point itself (from `self.rng`; for spaces of at most
  MAX_ENUMERATED raw points, from the full list of those left) and enqueues it, so it is
  still an Optuna trial.  An empty list means no new point could be found.
* Options: `seeds` (below) and `n_startup_trials` (random trials before the model is
  used; default 10, for budgets of 50-300 evaluations).
* The GP asks with one torch thread (restored afterwards): about 10x faster on 2 cores.
* `tell` finds the trial asked for each point (by `params_key`) and tells it
  `result.objective` when finite, else state FAIL: a failed config is never reported as a
  good time, and the models only learn from measured times.
* Observations of points the strategy did not ask (`warm_start`: the default config,
  cached results) are added to the study as finished trials (`create_trial` + `add_trial`,
  COMPLETE with their time, or FAIL) rather than enqueued: they are already measured, so
  the model learns from them at once and they are never proposed again.
* The `seeds` option lists configs (partial ones are completed from the default) proposed
  first, in order, through `study.enqueue_trial`; seeds already known are skipped.

Runs are deterministic for a seed: the samplers are seeded, and the fallback uses `self.rng`.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from autotune.strategies.base import Observation, Strategy
from autotune.strategies.encoding import MemberIndex
from autotune.types import Params
from search_spaces.parameters import Choice, Integer, Ordinal, Parameter, PowerOfTwo
from search_spaces.space import InvalidConfig, SearchSpace, iter_grid, params_key

#: Optuna draws per proposal before falling back to a random unasked point (TPE's draws
#: are random; the GP's acquisition optimum tends to come back, so GPSearch uses 3).
MODEL_DRAWS = 8
#: Random draws of the fallback before it gives up (or enumerates a small space).
RANDOM_DRAWS = 200
#: Spaces with at most this many raw points are enumerated once the random fallback fails.
MAX_ENUMERATED = 100_000

_SCALARS = (str, int, float, bool, type(None))


class _Axis:
    """One parameter as one Optuna distribution, with the encoding both ways."""

    def __init__(self, parameter: Parameter) -> None:
        self.name = parameter.name
        values = parameter.values()
        self.encode: Callable[[Any], Any]
        self.decode: Callable[[Any], Any]
        if isinstance(parameter, PowerOfTwo):
            self.distribution: BaseDistribution = IntDistribution(
                parameter.low.bit_length() - 1, parameter.high.bit_length() - 1)
            self.encode = lambda v: int(parameter.canonical(v)).bit_length() - 1
            self.decode = lambda e: 2 ** int(e)
        elif isinstance(parameter, Integer):
            self.distribution = IntDistribution(parameter.low, parameter.high)
            self.encode = lambda v: int(parameter.canonical(v))
            self.decode = int
        elif isinstance(parameter, Ordinal) or (isinstance(parameter, Choice) and not _plain(values)):
            indices = range(len(values))
            self.distribution = (IntDistribution(0, len(values) - 1) if isinstance(parameter, Ordinal)
                                 else CategoricalDistribution(tuple(indices)))
            self.encode = parameter.index_of
            self.decode = lambda i: values[int(i)]
        elif isinstance(parameter, Choice):
            self.distribution = CategoricalDistribution(tuple(values))
            self.encode = parameter.canonical
            self.decode = parameter.canonical
        else:
            raise TypeError(f"no Optuna mapping for parameter kind {parameter.kind!r} ({parameter.name})")


def _plain(values: list[Any]) -> bool:
    """Hashable scalars that Optuna's `choices.index` tells apart (no True vs 1, 0 vs 0.0)."""
    if not all(isinstance(v, _SCALARS) for v in values):
        return False
    return all(a != b for i, a in enumerate(values) for b in values[i + 1:])


class OptunaSearch(Strategy):
    """Shared ask/tell bookkeeping; subclasses choose the sampler."""

    name = "optuna"
    default_startup_trials = 10
    model_draws = MODEL_DRAWS

    def __init__(self, space: SearchSpace, seed: int = 0, *, seeds: Sequence[Params] | None = None,
                 n_startup_trials: int | None = None, **options: Any) -> None:
        super().__init__(space, seed, **options)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.axes = [_Axis(p) for p in space.parameters]
        self.distributions = {a.name: a.distribution for a in self.axes}
        self.n_startup_trials = self.default_startup_trials if n_startup_trials is None else int(n_startup_trials)
        self.study = optuna.create_study(direction="minimize", sampler=self.make_sampler())
        self._seeds = [space.validate(space.complete(s)) for s in seeds or ()]
        self._trials: dict[str, int | None] = {}  # params_key -> trial number (None: added finished)
        self._grid: list[Params] | None = None
        self._exhausted = False
        self._members = MemberIndex(space) if space.members is not None else None

    def make_sampler(self) -> optuna.samplers.BaseSampler:
        raise NotImplementedError

    # -- encoding -------------------------------------------------------------------------
    def encode(self, params: Params) -> dict[str, Any]:
        return {a.name: a.encode(params[a.name]) for a in self.axes}

    def decode(self, encoded: dict[str, Any]) -> Params:
        return {a.name: a.decode(encoded[a.name]) for a in self.axes}

    # -- ask ------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Params]:
        batch: list[Params] = []
        while len(batch) < n:
            point = self._next_point()
            if point is None:
                break
            batch.append(point)
        return batch

    def _next_point(self) -> Params | None:
        while self._seeds:
            seed = self._seeds.pop(0)
            if not self.was_asked(seed):
                return self._propose(seed)
        if self._exhausted:
            return None
        if self._members is not None:
            return self._next_member()
        for _ in range(self.model_draws):
            trial = self.study.ask(self.distributions)
            point = self.decode(trial.params)
            reason = "repeat" if self.was_asked(point) else "invalid" if self.space.violations(point) else None
            if reason is None:
                return self._accept(point, trial.number)
            trial.set_user_attr("rejected", reason)
            self.study.tell(trial, state=TrialState.FAIL)
        point = self._fallback()
        return None if point is None else self._propose(point)

    def _next_member(self) -> Params | None:
        """Finite spaces: the model's proposal, or the unasked listed point nearest to it.

        A recorded space lists few of its product's points, so most proposals are not among
        them; rejecting them would leave only random fallbacks.  The proposal is snapped to
        the closest open point instead, which becomes the trial the model learns from.
        """
        assert self._members is not None
        trial = self.study.ask(self.distributions)
        point = self.decode(trial.params)
        if not self.was_asked(point) and self.space.is_member(point):
            return self._accept(point, trial.number)
        trial.set_user_attr("rejected", "snapped to the nearest listed point")
        self.study.tell(trial, state=TrialState.FAIL)
        snapped = self._members.nearest_open(point)
        if snapped is None:
            self._exhausted = True
            return None
        return self._propose(snapped)

    def _fallback(self) -> Params | None:
        """A random valid point not asked yet (every one left, for small spaces), or None."""
        for _ in range(RANDOM_DRAWS):
            try:
                point = self.space.sample(self.rng)
            except InvalidConfig:
                break
            if not self.was_asked(point):
                return point
        if self.space.cardinality() > MAX_ENUMERATED:
            return None
        if self._grid is None:
            self._grid = list(iter_grid(self.space, self.space.names))
        left = [p for p in self._grid if not self.was_asked(p)]
        if not left:
            self._exhausted = True
            return None
        return left[self.rng.randrange(len(left))]

    def _propose(self, point: Params) -> Params:
        """Make `point` the next trial (seeds and fallbacks) so its result is told to the model."""
        self.study.enqueue_trial(self.encode(point))
        trial = self.study.ask(self.distributions)
        return self._accept(self.decode(trial.params), trial.number)

    def _accept(self, point: Params, number: int) -> Params:
        self.mark_asked(point)
        if self._members is not None:
            self._members.close(point)
        self._trials[params_key(point)] = number
        return point

    # -- tell -----------------------------------------------------------------------------
    def tell(self, observations: Sequence[Observation]) -> None:
        for params, result in observations:
            key = params_key(params)
            if self._members is not None:
                self._members.close(params)
            value = result.objective
            finite = math.isfinite(value)
            if key not in self._trials:
                self._add_known(key, params, value if finite else None)
                continue
            number = self._trials[key]
            if number is None:
                continue  # already in the study as a finished trial
            if finite:
                self.study.tell(number, value, skip_if_finished=True)
            else:
                self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
        super().tell(observations)

    def _add_known(self, key: str, params: Params, value: float | None) -> None:
        """A result for a point not asked here (warm start): a finished trial, never proposed."""
        try:
            encoded = self.encode(params)
        except (KeyError, ValueError):
            return  # not a point of this space: kept in the history only
        state = TrialState.COMPLETE if value is not None else TrialState.FAIL
        self.study.add_trial(optuna.trial.create_trial(
            params=encoded, distributions=self.distributions, value=value, state=state,
            user_attrs={"known": True}))
        self._trials[key] = None


class TPESearch(OptunaSearch):
    """Multivariate TPE (Optuna's TPESampler), with constant liar so a generation spreads out."""

    name = "tpe"

    def make_sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=self.n_startup_trials,
                                          multivariate=True, constant_liar=True)


class GPSearch(OptunaSearch):
    """Gaussian-process Bayesian optimisation (Optuna's GPSampler; needs torch and scipy)."""

    name = "gp"
    model_draws = 3

    def make_sampler(self) -> optuna.samplers.BaseSampler:
        try:
            import scipy  # noqa: F401
            import torch  # noqa: F401

            return optuna.samplers.GPSampler(seed=self.seed, n_startup_trials=self.n_startup_trials,
                                             deterministic_objective=False, warn_independent_sampling=False)
        except ImportError as error:
            raise ImportError(f"the 'gp' strategy needs Optuna's GPSampler, which needs torch and scipy "
                              f"(pip install torch scipy): {error}") from error

    def ask(self, n: int) -> list[Params]:
        # Fitting the GP and optimising the acquisition are many tiny torch operations: with
        # several intra-op threads (worse on a busy machine) each ask was ~10x slower, as Optuna's
        # GPSampler documentation warns.  One thread while asking; the caller's setting is restored.
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return super().ask(n)
        finally:
            torch.set_num_threads(threads)
