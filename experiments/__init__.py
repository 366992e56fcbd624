"""Reproducible experiments: each runs on a GPU machine and records into the user's database
(user.db; merged into the shipped cache.db to ship it), and writes its report from the data."""
