"""Reproducible experiments: each module runs on a GPU machine and records into cache.db."""
