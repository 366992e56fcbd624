"""Bayesian optimisation over candidate points: a Gaussian process on log time, expected improvement.

Why another model-based strategy next to optuna's: tuning spaces are discrete and often
finite (a recorded space lists its points), and optuna's samplers propose parameter values
one by one, many of which are not points of the space.  This strategy scores whole points
instead: every unevaluated point of a finite space, or for an unbounded space a fresh pool
of random points plus the neighbours of the best ones, and asks for those with the largest
expected improvement.

- Encoding: ordered parameters by their position in the value list (scaled to [0, 1]),
  unordered ones one-hot.
- Model: a GP with a Matern-5/2 kernel on standardised log times; its length scale and noise
  are picked by marginal likelihood from a small grid at every generation (cheap for the
  few hundred points a tuning run has).  Failed configs count as a little worse than the
  worst success, so the model learns to avoid them.
- A generation of several points is built by the kriging believer: each chosen point is
  added with its predicted time before the next is chosen, which spreads the batch out.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from autotune.strategies.base import Observation, Strategy
from autotune.strategies.encoding import PointEncoder
from autotune.types import Params
from search_spaces.space import InvalidConfig, SearchSpace, params_key

LENGTH_SCALES = (0.15, 0.3, 0.6, 1.2)  # in units of sqrt(encoded dimensions)
NOISE_LEVELS = (1e-3, 1e-2, 1e-1)  # variance of standardised log time
FAILURE_PENALTY = 0.5  # log-time units above the worst success
POOL_SIZE = 2000  # random candidates per generation for unbounded spaces
POOL_NEIGHBOURS_OF = 5  # plus the neighbours of this many best points
EXPLORATION = 0.01  # EI's improvement margin, in standardised units
ARD_FACTORS = (0.5, 2.0)  # per-parameter length-scale moves tried in each coordinate sweep
ARD_SWEEPS = 2
SHORTLIST = 256  # candidates kept after the first scoring of a generation


class SurrogateSearch(Strategy):
    name = "surrogate"
    generation_size = 8

    def __init__(self, space: SearchSpace, seed: int = 0, *, initial_points: int = 10, **options: Any) -> None:
        super().__init__(space, seed, **options)
        if initial_points < 2:
            raise ValueError("surrogate search needs initial_points >= 2")
        self.initial_points = initial_points
        self._encoder = PointEncoder(space)
        self._members_x = self.encode_all(space.members) if space.members is not None else None
        self._x: list[np.ndarray] = []
        self._y: list[float | None] = []  # log ms, None for failures
        self._hyper: tuple[np.ndarray, float] | None = None  # last generation's length scales and noise

    def encode_all(self, points: Sequence[Params]) -> np.ndarray:
        return self._encoder.encode_all(points)

    # -- ask / tell -----------------------------------------------------------------------------
    def tell(self, observations: Sequence[Observation]) -> None:
        super().tell(observations)
        points = [params for params, _ in observations]
        if not points:
            return
        try:
            encoded = self.encode_all(points)
        except KeyError:
            encoded = None  # a point from outside the space (a foreign seed): history only
        if encoded is None:
            return
        for row, (_params, result) in zip(encoded, observations):
            self._x.append(row)
            self._y.append(math.log(result.objective) if result.ok and result.objective > 0 else None)

    def ask(self, n: int) -> list[Params]:
        successes = sum(1 for y in self._y if y is not None)
        if len(self._x) < self.initial_points or successes < 2:
            return self._random(n)
        candidates, points = self._candidates()
        if not points:
            return []
        chosen: list[Params] = []
        x, y = self._training_set()
        model = _GaussianProcess.fit(x, y, self._encoder.groups, self._hyper)
        self._hyper = (model.scales, model.noise)
        if len(points) > SHORTLIST:  # score everything once, then build the batch among the best
            mean, std = model.predict(candidates)
            keep = np.argsort(-_expected_improvement(mean, std, y.min() - EXPLORATION))[:SHORTLIST]
            candidates, points = candidates[keep], [points[i] for i in keep]
        for _ in range(min(n, len(points))):
            model = model.refit(x, y)
            mean, std = model.predict(candidates)
            best = y.min()
            score = _expected_improvement(mean, std, best - EXPLORATION)
            pick = int(np.argmax(score))
            chosen.append(points[pick])
            self.mark_asked(points[pick])
            x, y = np.vstack([x, candidates[pick]]), np.append(y, mean[pick])  # kriging believer
            candidates = np.delete(candidates, pick, axis=0)
            del points[pick]
        return chosen

    # -- helpers --------------------------------------------------------------------------------
    def _training_set(self) -> tuple[np.ndarray, np.ndarray]:
        ok = [v for v in self._y if v is not None]
        worst = max(ok) + FAILURE_PENALTY
        y = np.array([v if v is not None else worst for v in self._y])
        mean, scale = y.mean(), y.std() or 1.0
        return np.vstack(self._x), (y - mean) / scale

    def _candidates(self) -> tuple[np.ndarray, list[Params]]:
        if self._members_x is not None:
            assert self.space.members is not None and self.space.member_keys is not None
            keep = [i for i, key in enumerate(self.space.member_keys) if key not in self._asked]
            return self._members_x[keep], [dict(self.space.members[i]) for i in keep]
        pool: dict[str, Params] = {}
        ranked = sorted((o for o in self.history if o[1].ok), key=lambda o: o[1].objective)
        for params, _ in ranked[:POOL_NEIGHBOURS_OF]:
            for neighbour in self.space.neighbours(params):
                pool.setdefault(params_key(neighbour), neighbour)
        for _ in range(POOL_SIZE):
            try:
                point = self.space.sample(self.rng)
            except InvalidConfig:
                break
            pool.setdefault(params_key(point), point)
        points = [p for k, p in pool.items() if k not in self._asked]
        return (self.encode_all(points) if points else np.zeros((0, 0))), points

    def _random(self, n: int) -> list[Params]:
        batch: list[Params] = []
        if self.space.members is not None:
            order = list(range(len(self.space.members)))
            self.rng.shuffle(order)
            for i in order:
                if len(batch) == n:
                    break
                point = self.space.members[i]
                if not self.was_asked(point):
                    self.mark_asked(point)
                    batch.append(dict(point))
            return batch
        for _ in range(n * 50):
            if len(batch) == n:
                break
            try:
                point = self.space.sample(self.rng)
            except InvalidConfig:
                break
            if not self.was_asked(point):
                self.mark_asked(point)
                batch.append(point)
        return batch


class _GaussianProcess:
    """Zero-mean GP, Matern 5/2, hyperparameters by marginal likelihood over a small grid."""

    def __init__(self, x: np.ndarray, weights: np.ndarray, scales: np.ndarray, noise: float, factor: np.ndarray,
                 alpha: np.ndarray) -> None:
        self.x, self.weights, self.scales, self.noise = x, weights, scales, noise
        self.factor, self.alpha = factor, alpha

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, groups: Sequence[slice] = (),
            start: tuple[np.ndarray, float] | None = None) -> "_GaussianProcess":
        """One length scale per parameter (its columns share it) and a noise level, by marginal likelihood.

        From scratch: the best isotropic scale of a small grid, then coordinate moves.  Warm
        (`start`, the previous generation's choice): one sweep of moves around it, which is
        what keeps a run of hundreds of evaluations fast.
        """
        dims = max(x.shape[1], 1)
        groups = list(groups) or [slice(0, dims)]
        if start is None:
            candidates = [(np.full(len(groups), r * math.sqrt(dims)), noise) for r in LENGTH_SCALES
                          for noise in NOISE_LEVELS]
            sweeps = ARD_SWEEPS
        else:
            candidates = [(start[0], noise) for noise in NOISE_LEVELS]
            sweeps = 1
        best = max((cls._evidence(x, y, groups, scales, noise) for scales, noise in candidates), key=lambda c: c[0])
        for _sweep in range(sweeps):
            for g in range(len(groups)):
                for factor in ARD_FACTORS:
                    scales = best[1].scales.copy()
                    scales[g] *= factor
                    candidate = cls._evidence(x, y, groups, scales, best[1].noise)
                    if candidate[0] > best[0] + 1e-9:
                        best = candidate
        return best[1]

    @classmethod
    def _evidence(cls, x: np.ndarray, y: np.ndarray, groups: Sequence[slice], scales: np.ndarray,
                  noise: float) -> tuple[float, "_GaussianProcess"]:
        weights = np.empty(x.shape[1])
        for group, scale in zip(groups, scales):
            weights[group] = 1.0 / scale
        scaled = x * weights
        try:
            factor = np.linalg.cholesky(_matern52(_distances(scaled, scaled)) + noise * np.eye(len(x)))
        except np.linalg.LinAlgError:
            return -math.inf, cls(scaled, weights, scales, noise, np.eye(len(x)), np.zeros(len(x)))
        alpha = np.linalg.solve(factor.T, np.linalg.solve(factor, y))
        evidence = float(-0.5 * y @ alpha - np.log(np.diag(factor)).sum())
        return evidence, cls(scaled, weights, scales, noise, factor, alpha)

    def refit(self, x: np.ndarray, y: np.ndarray) -> "_GaussianProcess":
        """The same hyperparameters on new data (the batch's believed points)."""
        scaled = x * self.weights
        factor = np.linalg.cholesky(_matern52(_distances(scaled, scaled)) + self.noise * np.eye(len(x)))
        alpha = np.linalg.solve(factor.T, np.linalg.solve(factor, y))
        return _GaussianProcess(scaled, self.weights, self.scales, self.noise, factor, alpha)

    def predict(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cross = _matern52(_distances(points * self.weights, self.x))
        mean = cross @ self.alpha
        solved = np.linalg.solve(self.factor, cross.T)
        variance = np.clip(1.0 - (solved * solved).sum(axis=0), 1e-12, None)
        return mean, np.sqrt(variance)


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    squared = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.sqrt(np.clip(squared, 0.0, None))


def _matern52(r: np.ndarray) -> np.ndarray:
    scaled = math.sqrt(5.0) * r
    return (1.0 + scaled + scaled * scaled / 3.0) * np.exp(-scaled)


def _expected_improvement(mean: np.ndarray, std: np.ndarray, target: float) -> np.ndarray:
    """EI for minimisation below `target`."""
    z = (target - mean) / std
    cdf = 0.5 * (1.0 + _erf(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (target - mean) * cdf + std * pdf


def _erf(values: np.ndarray) -> np.ndarray:
    from math import erf

    return np.vectorize(erf, otypes=[float])(values)
