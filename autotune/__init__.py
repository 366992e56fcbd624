"""autotune: tuning sessions, strategies, evaluators, the measurement cache and the CLI."""
