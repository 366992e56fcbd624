"""Spreading evaluation over the GPUs of a host and over hosts, on Dask distributed.

`cluster` picks or starts the cluster (`--workers`, worker roles), `evaluator` is the evaluator
the session uses, `pipeline` keeps configs in flight on it (no generation barrier), `farm` and
`fake_farm` compile on CPU workers for the GPU workers, `stream` runs tasks with one retry
elsewhere, `on_worker` is what runs in the workers,
`factories` build each worker's own evaluator, `tune` wires it all into `autotune tune
--workers`, and `jobs` spreads whole (kernel, shape) jobs.
The session and the cache are the same as in one process: the session's process alone
writes the database.  Needs the `distributed` extra: pip install -e ".[distributed]".
"""
