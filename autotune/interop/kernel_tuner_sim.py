"""Running Kernel Tuner's own strategies on a cache file, in its simulation mode.

In simulation mode Kernel Tuner answers every configuration from the cache file, but it
still builds its search space from `tune_params` and `restrictions`, and a configuration
of that space that the file lacks stops the run with a ValueError.  So the space must be
restricted to the recorded configurations.  Kernel Tuner's own `tune_cache` does that with
one function of all parameters, which its constraint solver only evaluates once every
parameter is assigned: it enumerates the full product of the parameter values, hopeless for
a sampled Helion space (about 10**12 points).  `RecordedConfigs` is a constraint that also
rejects partial assignments no recorded configuration extends, so building the space costs
about (recorded configs x parameter values), whatever the product.

Kernel Tuner needs a kernel name, source, problem size and arguments even in simulation
mode; only the name and problem size are checked (against the file), so an empty source
and no arguments suffice.  It draws random numbers from Python's and NumPy's global
generators, which `kernel_tuner_simulate` seeds.
"""

from __future__ import annotations

import random
import tempfile
import warnings
from pathlib import Path
from typing import Any, Sequence

from constraint import Constraint

from autotune.interop.kernel_tuner import load_document, parse_document, write_kernel_tuner_file


class RecordedConfigs(Constraint):
    """A python-constraint constraint over all tune parameters: only recorded configs pass."""

    def __init__(self, names: Sequence[str], configs: Sequence[tuple[Any, ...]]) -> None:
        self.names = list(names)
        self.configs = frozenset(configs)
        self._projections: dict[tuple[int, ...], frozenset[tuple[Any, ...]]] = {}

    def __call__(self, variables: Sequence[str], domains: dict, assignments: dict, forwardcheck: Any = False,
                 _unassigned: Any = None) -> bool:
        assigned = tuple(i for i, name in enumerate(self.names) if name in assignments)
        values = tuple(assignments[self.names[i]] for i in assigned)
        if len(assigned) == len(self.names):
            return values in self.configs
        projection = self._projections.get(assigned)
        if projection is None:
            projection = frozenset(tuple(c[i] for i in assigned) for c in self.configs)
            self._projections[assigned] = projection
        return values in projection


def kernel_tuner_simulate(path: str | Path, strategy: str = "random_sample", max_fevals: int = 20, seed: int = 0,
                          *, include_failed: bool = True, strategy_options: dict[str, Any] | None = None,
                          ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Tune the recorded space of a cache file with a Kernel Tuner strategy; returns
    `tune_kernel`'s (results, env).

    The space is every recorded configuration, failed ones included (a real run would have
    tried them too and paid their compile time); with `include_failed=False` it is only the
    ones that ran, as Kernel Tuner's own `tune_cache` does.
    """
    import kernel_tuner
    import numpy as np

    document, _, _ = load_document(path)
    ks = parse_document(document, name=Path(path).name)
    configs = [tuple(e.params[n] for n in ks.names) for e in ks.entries if include_failed or e.ok]
    if not configs:
        raise ValueError(f"{ks.name}: no configuration ran successfully")
    options = {**(strategy_options or {}), "max_fevals": max_fevals}
    problem_size = ks.problem_size if isinstance(ks.problem_size, (int, list)) else (lambda params: (1,))
    with tempfile.TemporaryDirectory(prefix="kt-sim-") as tmp:
        # Kernel Tuner reads plain JSON only, from a name ending in .json: give it a copy.
        plain = Path(tmp) / "cache.json"
        write_kernel_tuner_file(document, plain)
        random.seed(seed)
        np.random.seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "no thread block dimensions": none exist here
            results, env = kernel_tuner.tune_kernel(
                ks.kernel_name, "", problem_size, [], dict(ks.tune_params),
                restrictions=[RecordedConfigs(ks.names, configs)], strategy=strategy, strategy_options=options,
                cache=str(plain), simulation_mode=True, quiet=True, seed=seed,
            )
    return results, env

