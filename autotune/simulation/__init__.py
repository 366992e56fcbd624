"""Strategy benchmarking on recorded tuning spaces, with no GPU.

A recorded space (`oracle.RecordedSpace`) answers a strategy's configs from measurements
in the database; `runner.simulate` runs one strategy once against it, fast; `stats`
summarises many seeded runs; `plot` draws convergence curves.
"""
