"""Helion's own example kernels, tuned as a user would tune them (see README.md)."""
