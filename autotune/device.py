"""Every question about the GPU, answered in one place with one fallback.

Why one module: whether a GPU is present decides between measuring and replaying, its name
is part of every space's fingerprint, and its SM count and shared memory feed kernels and
seed rules.  Asked in several places with different fallbacks, a broken driver could make
one part measure while another fingerprints as 'cpu'.  Here any failure to query CUDA means
"no GPU", everywhere.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

NO_GPU = "cpu"  # the device name recorded where there is no GPU


@dataclass(frozen=True)
class DeviceInfo:
    """What the project reads off a GPU."""

    name: str
    sm_count: int
    smem_per_block_optin: int  # bytes a block may opt in to (0 where the driver does not say)
    l2_bytes: int
    memory_bytes: int


def gpu_count() -> int:
    """How many CUDA devices this process sees; 0 without a GPU or with a broken driver."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a driver that cannot be queried is no GPU
        return 0


def gpu_device_present() -> bool:
    """Whether an NVIDIA driver is loaded here, asked without importing torch: a guess made
    before anything heavy is imported (gpu_available() is the answer)."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def gpu_available() -> bool:
    return gpu_count() > 0


@functools.lru_cache(maxsize=None)
def info(index: int = 0) -> DeviceInfo | None:
    """The properties of CUDA device `index`, or None where there is none."""
    if index >= gpu_count():
        return None
    try:
        import torch

        props = torch.cuda.get_device_properties(index)
    except Exception:  # noqa: BLE001
        return None
    return DeviceInfo(name=str(props.name), sm_count=int(props.multi_processor_count),
                      smem_per_block_optin=int(getattr(props, "shared_memory_per_block_optin", 0) or 0),
                      l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
                      memory_bytes=int(getattr(props, "total_memory", 0) or 0))


def device_name(index: int = 0) -> str:
    """The GPU's name as recorded with every measurement, or 'cpu' where there is none."""
    found = info(index)
    return found.name if found is not None else NO_GPU


def sm_count(index: int = 0, default: int = 0) -> int:
    found = info(index)
    return found.sm_count if found is not None else default


def running_device_name(index: int | None = None) -> str:
    """The name of the GPU a call runs on (CUDA device `index`, torch's current device when
    None), or 'cpu' where there is none.  Run-time config choice asks only this, so tests can
    stand in any GPU by replacing it."""
    if index is None:
        if gpu_count() == 0:
            return NO_GPU
        try:
            import torch

            index = torch.cuda.current_device()
        except Exception:  # noqa: BLE001 - a driver that cannot be queried is no GPU
            return NO_GPU
    return device_name(index)
