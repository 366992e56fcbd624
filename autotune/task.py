"""A tuning task: one kernel, one input signature, its space, codec and fingerprint.

Built live (the kernel is bound, on a GPU machine the space is Helion's real one) or from
the cache (a replay: the space recorded on the GPU, normalised through recorded aliases).
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from autotune.kernel import Kernel, Shape
from autotune.kernels.names import dtype_name  # not the registry: a replay never imports torch
from autotune.types import Candidate
from search_spaces.codec import Codec, DeclaredCodec, RecordedCodec
from search_spaces.fingerprint import SpaceIdentity
from search_spaces.space import InvalidConfig, SearchSpace, config_key, params_key

if TYPE_CHECKING:  # the oracle is built only for replays
    from autotune.simulation.oracle import Oracle


@dataclass
class TuningTask:
    spec: Kernel
    shape: Shape
    dtype: str
    space: SearchSpace
    codec: Codec
    identity: SpaceIdentity
    bound: Any = None  # the bound Helion kernel, when built live
    sample: Mapping[str, int] | None = None  # a replay's recorded sample: points, valid, left_out

    @property
    def fingerprint(self) -> str:
        return self.identity.fingerprint

    def candidate(self, params: Mapping[str, Any]) -> Candidate:
        """Normalise a point (raises InvalidConfig) and key it on its native config."""
        point, native = self.codec.normalise(params)
        return Candidate(params=point, native=native, key=config_key(native))

    def candidate_from_native(self, native: Mapping[str, Any]) -> Candidate:
        """A config as a user or a compiler writes it (possibly partial) -> a candidate."""
        return self.candidate(self.codec.params_of(native))

    def default_candidate(self) -> Candidate:
        return self.candidate(self.space.default)

    def bytes_moved(self) -> int | None:
        """Bytes one call must move, when the kernel says (for GB/s)."""
        from autotune.kernels.catalogue import CatalogueKernel

        if isinstance(self.spec, CatalogueKernel):  # a replay's kernel answers without torch
            return self.spec.bytes_for(self.shape, self.dtype)
        from autotune.kernels.registry import DTYPES

        return self.spec.bytes_for(self.shape, DTYPES[self.dtype])


def signature(shape: Shape, dtype: str) -> dict[str, Any]:
    return {"shape": list(shape), "dtype": dtype}


def bind_live(spec: Kernel, shape: Shape, dtype: Any, device: str, seed: int = 0, *,
              thread_limit: bool = True) -> TuningTask:
    """Bind the kernel to real inputs and read its space (Helion) or declaration (Triton);
    `thread_limit=False`: a Helion space without our elements-per-thread limit (`space_from_bound`)."""
    name = dtype_name(dtype)
    if spec.family == "helion":
        from search_spaces.helion_space import space_from_bound

        inputs = build_inputs(spec, shape, dtype, device, seed)
        bound = bind_inputs(spec, shape, inputs)
        space, codec = space_from_bound(spec.name, bound, thread_limit=thread_limit)
    else:
        bound = None
        space = spec.triton_space(shape, dtype)
        codec = DeclaredCodec(space)
    identity = SpaceIdentity(space=space, signature=signature(shape, name), source_hash=spec.source_hash())
    return TuningTask(spec=spec, shape=shape, dtype=name, space=space, codec=codec, identity=identity, bound=bound)


def build_inputs(spec: Kernel, shape: Shape, dtype: Any, device: str, seed: int = 0) -> tuple:
    """The kernel's inputs for a shape; a hook that fails is the user's to fix: one line."""
    from autotune.kernel import KernelError

    try:
        return spec.make_inputs(shape, dtype, device, seed)
    except KernelError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's hook
        text = " ".join(str(error).split())[:200]
        raise KernelError(f"cannot build {spec.name}'s inputs for shape {'x'.join(map(str, shape))}: "
                          f"{type(error).__name__}: {text}") from None


def bind_inputs(spec: Kernel, shape: Shape, inputs: tuple) -> Any:
    """The Helion kernel bound to `inputs`.  Where binding fails, no config could run: one line
    before anything is measured, naming the parameter the default inputs could not build
    (Helion's own error tells which, where the annotations did not)."""
    from autotune.kernel import KernelError

    try:
        return spec.helion_kernel.bind(inputs)
    except Exception as error:  # noqa: BLE001 - the user's kernel or inputs: one line
        text = " ".join(f"{type(error).__name__}: {error}".split()).split(" While processing:")[0][:240]
        size = "x".join(map(str, shape))
        if spec.inputs_given:
            raise KernelError(f"{spec.name} cannot be bound to what its inputs hook builds for shape {size}: "
                              f"{text}") from None
        names = spec.default_input_names()
        named = [name for name in names if re.search(rf"\b{re.escape(name)}\b", str(error))]
        what = (f"parameter {named[0]!r} cannot be a random tensor of shape {size}" if named else
                f"the default inputs (a random tensor of shape {size} for each of {', '.join(names)}) do not fit it")
        raise KernelError(f"{spec.name}: {what} ({text}); give the kernel an inputs(shape, dtype, device) hook, "
                          "or a --shape of the rank it takes") from None


def bind_recorded(spec: Kernel, record: Any, aliases: Mapping[str, Any], oracle: Oracle | None = None) -> TuningTask:
    """A task over a recorded space (a `cache.SpaceRecord`), for replay on any machine.

    With `oracle` (an `autotune.simulation.oracle.Oracle` of the space), the task's space is
    the recorded sample, as `autotune simulate` searches it: only points whose normalised
    config was measured, so every point a strategy proposes has an answer.  The codec keeps
    the whole recorded space, so seeds and --config may still name a point outside the
    sample (the replay answers it `not_recorded`).  `task.sample` counts the sample.
    """
    space = record.space
    codec: Codec = DeclaredCodec(space) if space.family == "triton" else RecordedCodec(space, aliases)
    identity = _RecordedIdentity(record)
    sample = None
    if oracle is not None:
        space, sample = recorded_sample(space, codec, oracle)
    return TuningTask(spec=spec, shape=tuple(record.shape), dtype=record.dtype, space=space, codec=codec,
                      identity=identity, sample=sample)  # type: ignore[arg-type]


def recorded_sample(space: SearchSpace, codec: Codec, oracle: Oracle) -> tuple[SearchSpace, dict[str, int]]:
    """(`space` restricted to the oracle's recorded points that the codec normalises to a
    measured config, and the counts: points, valid, left_out).  A recorded point the recorded
    normalisation does not bring to a measured config (a row older than its aliases) is left
    out and counted, never offered."""
    kept: dict[str, tuple[dict[str, Any], bool]] = {}  # point key -> (point, answered OK)
    left_out = 0
    recorded = getattr(codec, "recorded", None)  # a recorded point's normalisation, not validated again
    for point in oracle.points.values():
        known = recorded(point) if recorded is not None else None
        try:
            normalised, native = known if known is not None else codec.normalise(point)
        except InvalidConfig:
            left_out += 1
            continue
        answer = oracle.result(config_key(native))
        if answer is None:
            left_out += 1
            continue
        kept.setdefault(params_key(normalised), (normalised, answer.ok))
    if not kept:
        raise InvalidConfig(f"no recorded point of {space.kernel}'s space has a measurement to replay")
    restricted = space.restricted_to(point for point, _ in kept.values())
    return restricted, {"points": len(kept), "valid": sum(ok for _, ok in kept.values()), "left_out": left_out}


class _RecordedIdentity:
    """The identity of a recorded space: its stored fingerprint, never recomputed here."""

    def __init__(self, record: Any) -> None:
        self.space = record.space
        self.signature = signature(tuple(record.shape), record.dtype)
        self.source_hash = record.source_hash
        self.versions = record.versions
        self.device = record.device
        self.fingerprint = record.fingerprint
