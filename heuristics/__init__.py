"""Heuristic seeding: kernel facts and the rules that turn them into seed configs.

Not built yet: until it is, sessions start from the compiler's default config only.
"""
