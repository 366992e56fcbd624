"""Screens: cheap predictions that a config cannot fit the device, for sampling a space's feasible part.

Why: in the matmul + row-reduction epilogue spaces most random configs fail.  Of the first
1,031 configs of the uniform random sample of matmul-layernorm 16384x512x1024 bf16 on the
H100 (session 143 in cache.db), 261 ran: 441 ran out of shared memory, 221 failed in ptxas
and 108 passed the 30 s compile timeout, and the failures took ~97% of the compile workers'
time.  A sample that must reach 2,000 valid configs spends most of the GPU machine's time
on them.  A screen rejects, before anything is compiled, the configs whose footprint is far
past the device's limits, so a random search (`--option screen=footprint`) samples the rest
uniformly.

`footprint` (needs the composed matmul + reduction-epilogue fact with a resident N axis)
rejects a config when
* its staged operand tiles, `heuristics.matmul_epilogue.staged_bytes`, need more than
  STAGED_SMEM_LIMIT times the device's shared memory per block; or
* its fp32 accumulator [M_BLOCK, N_pad] needs more than ACC_ELEMENTS_PER_THREAD_LIMIT
  elements per thread (num_warps * 32 threads).
On that sample it keeps 351 of the 1,031 configs, 201 of the 261 that ran and all of the
10 fastest (46 of the 50 fastest); the fastest valid config it rejects is 1.8x slower than
the sample's best; the compile-worker seconds per valid config drop from ~31 to ~4.  The
limits are deliberately loose (the footprint model over-counts: configs up to 1.7x the
device's shared memory ran): a screen must not hide a config that could be competitive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from heuristics.device import DeviceLimits, current_device
from heuristics.facts import KernelFacts
from heuristics.matmul_epilogue import next_pow2, operand_itemsize, staged_bytes, unsizable

# Staged operand tiles may need up to this many times the device's shared memory per block
# (the model counts num_stages - 1 full buffers of the x and w tiles; Triton allocates less:
# on the sample above configs modelled at up to 1.7x ran, and over 2x 7% ran, none fast).
STAGED_SMEM_LIMIT = 2.0
# fp32 accumulator elements one thread may hold: a thread has at most 255 32-bit registers,
# so past 256 the accumulator alone spills.  On the sample above, configs past it compiled
# in ptxas for minutes (75 of the 108 compile timeouts) and those that ran were slow.
ACC_ELEMENTS_PER_THREAD_LIMIT = 256
THREADS_PER_WARP = 32


class ScreenUnavailable(ValueError):
    """The kernel lacks the facts a screen needs (a user error: the screen was asked for by name)."""


@dataclass(frozen=True)
class FootprintScreen:
    """Rejects matmul + epilogue configs whose shared-memory or register footprint is far past the device's."""

    m_slot: str
    k_slot: str
    n_pad: int
    itemsize: int
    smem_per_block: int

    def reason(self, params: Mapping[str, Any]) -> str | None:
        """Why the config is rejected, or None when it passes."""
        m_block, k_block = int(params[self.m_slot]), int(params[self.k_slot])
        stages, warps = int(params.get("num_stages", 1)), int(params.get("num_warps", 4))
        staged = staged_bytes(stages, k_block, m_block, self.n_pad, self.itemsize)
        if staged > STAGED_SMEM_LIMIT * self.smem_per_block:
            return (f"staged tiles {staged} B > {STAGED_SMEM_LIMIT:g} x {self.smem_per_block} B shared memory "
                    "per block")
        per_thread = m_block * self.n_pad / (warps * THREADS_PER_WARP)
        if per_thread > ACC_ELEMENTS_PER_THREAD_LIMIT:
            return (f"accumulator [{m_block}, {self.n_pad}] over {warps} warps = {per_thread:g} fp32 per thread "
                    f"> {ACC_ELEMENTS_PER_THREAD_LIMIT}")
        return None

    def passes(self, params: Mapping[str, Any]) -> bool:
        return self.reason(params) is None


def footprint_screen(facts: KernelFacts, names: tuple[str, ...] | list[str],
                     device: DeviceLimits | None = None) -> FootprintScreen:
    """The footprint screen for a kernel's facts; ScreenUnavailable when they do not allow one."""
    fact = facts.epilogue
    if fact is None:
        raise ScreenUnavailable(f"screen 'footprint' needs a matmul with a row-reduction epilogue; "
                                f"no such fact was found in {facts.kernel}")
    matmul = fact.matmul
    why = unsizable(matmul, names)
    if why is not None:
        raise ScreenUnavailable(f"screen 'footprint': {why}")
    device = device or current_device()
    itemsize = operand_itemsize(matmul)
    return FootprintScreen(m_slot=matmul.m_slot, k_slot=matmul.k_slot, n_pad=next_pow2(matmul.n),
                           itemsize=itemsize, smem_per_block=device.smem_per_block)


SCREENS: dict[str, Callable[..., FootprintScreen]] = {"footprint": footprint_screen}


def screen_for_task(name: str, task: Any) -> FootprintScreen:
    """The named screen for a tuning task (its facts are read from the kernel, bound on CPU tensors if needed)."""
    if name not in SCREENS:
        raise ScreenUnavailable(f"unknown screen {name!r} (known: {', '.join(sorted(SCREENS))})")
    from heuristics.extract import facts_for_task

    return SCREENS[name](facts_for_task(task), task.space.names)
