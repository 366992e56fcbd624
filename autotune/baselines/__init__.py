"""Baseline methods our sessions are compared against (other tuners, run their own way)."""
