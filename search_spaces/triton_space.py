"""Config spaces of hand-written Triton kernels: declared, not discovered.

A Triton launch config is meta-parameters (constexpr arguments such as BLOCK_SIZE) plus
`num_warps` and `num_stages`.  The declaration lists the values each may take; the
point of the space is the launch config itself, so no normalisation is needed.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from search_spaces.parameters import JsonValue, Ordinal
from search_spaces.space import Constraint, InvalidConfig, SearchSpace

LAUNCH_OPTIONS = ("num_warps", "num_stages")


def declare_triton_space(
    kernel: str,
    meta: Mapping[str, Sequence[int]],
    num_warps: Sequence[int],
    num_stages: Sequence[int],
    default: Mapping[str, JsonValue],
    constraints: Sequence[Constraint] = (),
) -> SearchSpace:
    """A space over meta-parameters and launch options, each an ordered list of values."""
    axes = {**{k: list(v) for k, v in meta.items()}, "num_warps": list(num_warps), "num_stages": list(num_stages)}
    parameters = tuple(
        Ordinal(name=name, choices=tuple(values), default_value=default[name]) for name, values in axes.items()
    )
    return SearchSpace(
        kernel=kernel, family="triton", parameters=parameters, default={k: default[k] for k in axes},
        constraints=tuple(constraints),
    )


def split_launch_config(native: Mapping[str, JsonValue]) -> tuple[dict[str, JsonValue], dict[str, int]]:
    """(meta-parameters, launch options) of a native Triton config."""
    meta = {k: v for k, v in native.items() if k not in LAUNCH_OPTIONS}
    options = {k: int(native[k]) for k in LAUNCH_OPTIONS if k in native}
    return meta, options


def to_triton_config(native: Mapping[str, JsonValue]) -> Any:
    """A `triton.Config` for a native config (what `@triton.autotune(configs=[...])` takes)."""
    import triton

    meta, options = split_launch_config(native)
    return triton.Config(meta, **options)


def from_triton_config(space: SearchSpace, config: Any) -> dict[str, JsonValue]:
    """The point of `space` a `triton.Config` stands for; raises InvalidConfig if outside."""
    native = {**dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}
    missing = [n for n in space.names if n not in native]
    if missing:
        raise InvalidConfig(f"triton.Config lacks {', '.join(missing)}")
    return space.validate(native)
