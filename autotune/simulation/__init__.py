"""Strategy benchmarking on recorded tuning spaces, with no GPU.

`oracle.Oracle` answers configs from the measurements in the database, by one rule that
`autotune tune --replay` shares (its evaluator reads the same oracle); `oracle.RecordedSpace`
is that oracle keyed by recorded point, with the finite space of those points;
`runner.simulate` runs one strategy once against it, fast; `stats` summarises many seeded
runs; `plot` draws convergence curves.
"""
