"""Spreading evaluation over the GPUs of a host and over hosts, on Dask distributed.

`cluster` picks or starts the cluster (`--workers`), `evaluator` is the evaluator the session
uses, `stream` runs tasks with one retry elsewhere, `on_worker` is what runs in the workers,
`factories` build each worker's own evaluator, `tune` wires it all into `autotune tune
--workers`, and `jobs` spreads whole (kernel, shape) jobs.
The session and the cache are the same as in one process: the session's process alone
writes the database.  Needs the `distributed` extra: pip install -e ".[distributed]".
"""
