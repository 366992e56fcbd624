"""GPU timing and accuracy checks, run inside the benchmark worker process.

Timing: the L2 cache is flushed (a buffer larger than L2 is overwritten) before every
timed call, each call is bracketed by CUDA events, and the median of many calls is kept
with min and max.  Kernels shorter than `graph_below_ms` are replayed from a CUDA graph,
because for them the host launch cost, not the kernel, would dominate event timing.
A config whose first estimate is over `slow_factor` times the fastest config timed so far
keeps the estimate's samples: it cannot be among the best, and timing it in full cost most
of a random generation's benchmark time (a config's timing costs about its kernel time times
the repetitions, and the slowest random configs run 1000x longer than the best).

Accuracy: relative error ||out - ref|| / ||ref|| against an fp64 reference; NaN or an
unwritten element never passes (the output memory is poisoned with NaN before the run).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from autotune.evaluators.timing_target import SEARCH_TARGET_MS

# Relative-error tolerances by output dtype: a few ulps of the format, with room for
# exp/division approximations (fp16 ulp ~ 9.8e-4, bf16 ulp ~ 7.8e-3).
TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 3e-2, torch.float32: 1e-4, torch.float64: 1e-10}
FLUSH_BYTES = 256 * 1024 * 1024  # 5x the H100's 50 MB L2
ESTIMATE = "estimate"  # the method of a timing that stopped after the estimate


@dataclass(frozen=True)
class TimingOptions:
    min_reps: int = 10
    max_reps: int = 200
    target_ms: float = SEARCH_TARGET_MS  # aim for about this much timed kernel time per config
    warmup: int = 3
    graph_below_ms: float = 0.05
    estimate_reps: int = 5
    slow_factor: float = 3.0  # over this many times the fastest so far: the estimate is the timing


@dataclass(frozen=True)
class Timing:
    samples_ms: tuple[float, ...]
    method: str  # "events" or "graph"

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)


def relative_error(out: object, ref: object) -> float:
    """||out - ref|| / ||ref|| in fp64; infinity when anything is NaN/inf or shapes differ.
    Kernels returning several tensors (a tuple or list) are judged by their worst output."""
    if isinstance(ref, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref) or not ref:
            return math.inf
        return max(relative_error(o, r) for o, r in zip(out, ref))
    if not isinstance(out, torch.Tensor) or not isinstance(ref, torch.Tensor) or out.shape != ref.shape:
        return math.inf
    out64 = out.detach().to(torch.float64)
    if not bool(torch.isfinite(out64).all()):
        return math.inf
    denominator = float(torch.linalg.vector_norm(ref))
    numerator = float(torch.linalg.vector_norm(out64 - ref))
    return numerator / denominator if denominator else numerator


def outputs_text(indices: Sequence[int], count: int) -> str:
    """Which of a kernel's `count` outputs a comparison covered: 'all 2 outputs', 'output 0'."""
    if count <= 1 and list(indices) == [0]:
        return "the output"
    if list(indices) == list(range(count)):
        return f"all {count} outputs"
    return ("output " if len(indices) == 1 else "outputs ") + ", ".join(map(str, indices))


def baseline_error(out: object, ref: object, outputs: Sequence[int] | None = None) -> tuple[float, str]:
    """A baseline's relative error on the outputs it computes, and which they were.

    A kernel may return more than a baseline does (the output and its statistics, say): the
    baseline is compared on the outputs it declares (`outputs`, indices into the kernel's), else
    by position (a single tensor is output 0, a tuple of k the first k)."""
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if outputs is None:
        indices = list(range(len(outs)))
    else:
        indices = list(outputs)
        if len(outs) == len(refs) and len(indices) != len(outs):  # it returns them all: take the declared
            outs = [outs[i] for i in indices if i < len(outs)]
    if not indices or len(outs) != len(indices) or max(indices) >= len(refs):
        return math.inf, outputs_text(indices, len(refs))
    return relative_error(tuple(outs), tuple(refs[i] for i in indices)), outputs_text(indices, len(refs))


def to_float64(out: object) -> object:
    """A kernel's output (a tensor, or a tuple or list of them) as float64 copies."""
    if isinstance(out, (tuple, list)):
        return type(out)(to_float64(o) for o in out)
    return out.detach().to(torch.float64) if isinstance(out, torch.Tensor) else out


def tolerance_for(dtype: torch.dtype) -> float:
    return TOLERANCE.get(dtype, 1e-2)


def run_poisoned(fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, bool]:
    """Run `fn` with its output memory pre-filled with NaN.

    Kernels that allocate their own output (Helion's `torch.empty_like`) get a block from
    the caching allocator; freeing a NaN-filled block of the same size just before makes
    that block the one they get, so elements the kernel never writes stay NaN.  Returns
    the output and whether the poisoned block was indeed reused.
    """
    probe = fn()
    torch.cuda.synchronize()
    probes = list(probe) if isinstance(probe, (tuple, list)) else [probe]
    poison = [torch.full_like(p, float("nan")) if p.is_floating_point() else torch.full_like(p, -1) for p in probes]
    addresses = [p.data_ptr() for p in poison]
    del probe, probes, poison
    out = fn()
    torch.cuda.synchronize()
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return out, [o.data_ptr() for o in outs] == addresses


def repetitions(estimate_ms: float, fastest_ms: float | None, options: TimingOptions) -> int:
    """How many timed calls to make after the estimate; 0: the estimate's samples are the timing.

    Only event-timed kernels are cut short: below `graph_below_ms` an event estimate carries
    the launch cost and could read a fast kernel as slow.  At or above it the launch adds well
    under 2x, so with the default factor of 3 a config within 1.5x of the fastest is always
    timed in full.
    """
    event_timed = estimate_ms >= options.graph_below_ms
    if fastest_ms is not None and event_timed and estimate_ms > options.slow_factor * fastest_ms:
        return 0
    return int(min(options.max_reps, max(options.min_reps, options.target_ms / max(estimate_ms, 1e-3))))


def time_gpu(fn: Callable[[], object], options: TimingOptions = TimingOptions(),
             fastest_ms: float | None = None, while_queued: Callable[[], None] | None = None) -> Timing:
    """Median-of-many timing with a cold L2 before every call; `fastest_ms` (the fastest
    median timed so far, if any) lets a clearly slower config stop after the estimate.

    `while_queued`, CPU work of the caller's (building the next config), runs once while the
    GPU works through the timed calls: after the last of them is queued, so no timed interval
    (an event pair around one call, queued back to back) can include a wait for it."""
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    for _ in range(options.warmup):
        fn()
    torch.cuda.synchronize()
    estimate = _event_samples(fn, flush, options.estimate_reps)
    estimate_ms = statistics.median(estimate)
    reps = repetitions(estimate_ms, fastest_ms, options)
    if reps == 0:
        if while_queued is not None:
            while_queued()
        return Timing(tuple(estimate), ESTIMATE)
    if estimate_ms < options.graph_below_ms:
        return Timing(tuple(_graph_samples(fn, flush, reps, while_queued)), "graph")
    return Timing(tuple(_event_samples(fn, flush, reps, while_queued)), "events")


def _event_samples(fn: Callable[[], object], flush: torch.Tensor, reps: int,
                   while_queued: Callable[[], None] | None = None) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        flush.zero_()
        start.record()
        fn()
        end.record()
    if while_queued is not None:
        while_queued()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _graph_samples(fn: Callable[[], object], flush: torch.Tensor, reps: int,
                   while_queued: Callable[[], None] | None = None) -> list[float]:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # allocations made during capture come from the graph's own pool after this
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        flush.zero_()
        start.record()
        graph.replay()
        end.record()
    if while_queued is not None:
        while_queued()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]
