"""What the softmax study measures: seed 000's seven shapes, three-plus-one kernels, the baselines.

Every figure of the report comes from sessions recorded with `options.experiment.study ==
STUDY`; `method` says which row of the report a session feeds.
"""

from __future__ import annotations

STUDY = "softmax_study"
SHAPES = ("32x128", "256x1024", "1024x1024", "2048x2048", "4096x4096", "1024x50257", "4096x32000")
# Long rows that no softmax rule was fitted to, run on request (`--shapes`): where a two-pass
# design's second read misses L2.  The target there is 90% of the device copy's bandwidth.
LONG_ROWS = ("2048x100000", "512x262144", "4096x65536")
LONG_ROW_TARGET = 0.90  # of the device copy's bandwidth
# softmax-resident's exchange (packed partials, the tuned way of waiting) was revised by measuring
# at LONG_ROWS, so those no longer judge it.  These long rows were declared after that revision
# and before any softmax-study kernel ran at them (the held-out study had tuned Helion's softmax
# there, in sessions of its own): the revision's out-of-sample test, run only when named.
JUDGING_LONG_ROWS = ("768x160000", "1536x131072", "1024x196608")

# Kernels tuned by this framework.  softmax-split, softmax-cooperative, softmax-lookback,
# softmax-persistent and softmax-resident are the formulations added for long rows with few of
# them ([1024, 50257]), where one program per row leaves the GPU's memory system idle: split reads x twice from
# memory, cooperative once (its pieces wait for each other: measured slower), lookback once plus
# a re-read from L2 (measured slower), persistent once plus a re-read from L2 with only a few
# rows per SM in flight, resident once with its pieces held in registers across the exchange.
TUNED_KERNELS = ("softmax", "softmax-online", "softmax-triton", "softmax-split", "softmax-cooperative",
                 "softmax-lookback", "softmax-persistent", "softmax-resident")
# The framework's best strategy on the recorded softmax spaces (strategies_vs_helion and the
# simulation reports): pattern search started from the default, the heuristic seeds and the
# best configs recorded for the nearest shape.
STRATEGY = "pattern"
# A space no larger than the budget is measured whole, a larger one a seeded sample of it
# (softmax-split and softmax-cooperative have at most 60 points, softmax-lookback 85,
# softmax-resident 108).
STRATEGY_FOR = {"softmax-split": "grid", "softmax-cooperative": "grid", "softmax-lookback": "grid",
                "softmax-resident": "grid"}
SEED_FROM = "default,heuristic,cache"
BUDGET = 64  # configs per kernel and shape
SECONDS = 25.0  # wall clock per kernel and shape (compile time included)
COMPILE_TIMEOUT_S = 30.0

HELION_QUICK = "helion-quick"  # Helion's own autotuner, effort "quick", run natively
HELION_KERNEL = "softmax"  # the kernel whose default config and quick autotune are the Helion baselines


def method_of(kernel: str) -> str:
    """The report's name for a tuning session of one of our kernels."""
    return f"tuned {kernel}"


TORCH_EAGER = "torch.softmax"
TORCH_COMPILE = "torch.compile"
COPY = "device copy"
