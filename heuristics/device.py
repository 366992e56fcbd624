"""The device limits the rules size against: shared memory per block, SM count and L2.

Read from torch.cuda when a GPU is present; otherwise the H100's values, because the
project's recorded measurements are from an H100 and a CPU machine proposes seeds for it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Shared memory one thread block may use on the H100 (compute capability 9.0): 227 KB =
# 232448 bytes, CUDA's `sharedMemPerBlockOptin` for sm90 (the CUDA C++ Programming Guide,
# "Technical Specifications per Compute Capability": maximum shared memory per block 227 KB).
H100_SMEM_PER_BLOCK_BYTES = 232448
# Streaming multiprocessors of the H100 SXM5 (the project's measurement machine).
H100_SM_COUNT = 132
# Its L2 cache: 50 MB (NVIDIA's H100 SXM5 specification).
H100_L2_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True)
class DeviceLimits:
    name: str
    smem_per_block: int
    sm_count: int
    source: str  # "torch.cuda" or "default (H100)"
    l2_bytes: int = H100_L2_BYTES


H100 = DeviceLimits(name="NVIDIA H100 (default)", smem_per_block=H100_SMEM_PER_BLOCK_BYTES,
                    sm_count=H100_SM_COUNT, source="default (H100)", l2_bytes=H100_L2_BYTES)


def current_device() -> DeviceLimits:
    """The first CUDA device's limits, or the H100 defaults when there is no GPU."""
    from autotune.device import info

    props = info(0)
    if props is None:
        return H100
    smem = props.smem_per_block_optin or H100_SMEM_PER_BLOCK_BYTES
    return DeviceLimits(name=props.name, smem_per_block=smem, sm_count=props.sm_count, source="torch.cuda",
                        l2_bytes=props.l2_bytes or H100_L2_BYTES)
