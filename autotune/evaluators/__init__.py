"""Evaluators: the GPU evaluator, the replay evaluator and the fakes tests use, behind one protocol (base.py)."""
