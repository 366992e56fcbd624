"""Config spaces of Helion kernels, read off a bound kernel's ConfigSpec.

Helion describes its space as a flat list of fragments (`ConfigGeneration.flat_spec`), one
per slot of `ConfigSpec.flat_key_layout()`.  We name every slot (`block_sizes[0]`,
`num_warps`, `indexing[3]`...) and expand list-valued slots into one scalar parameter per
element, so strategies, optuna and exported tables all see plain named dimensions.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping

from search_spaces.parameters import Choice, Integer, JsonValue, Parameter, PowerOfTwo
from search_spaces.space import InvalidConfig, Params, ProductLimit, SearchSpace

# Triton refuses tensors of more than 2**20 elements; a tile past it cannot compile.
TRITON_MAX_TENSOR_NUMEL = 2**20
# Elements of one tile per thread.  Measured on an H100 (softmax 4096x32000 fp16, 16
# random configs): every config above 128 elements per thread either hit the 60 s
# compile timeout (9 of 16) or compiled slowly; configs at or below it compiled in
# 0.2-4 s.  Helion's own sampler shrinks tiles under a random cap of 1-2048 for the
# same reason.  The best softmax configs hold 16-64 elements per thread.
MAX_ELEMENTS_PER_THREAD = 128
# Program orders that need the GPU's SM count: Helion asserts "TODO: implement for other
# devices" for them on a CPU, so under the Triton interpreter every such config fails.
PERSISTENT_PID_TYPES = ("persistent_blocked", "persistent_interleaved")


@dataclass(frozen=True)
class _Slot:
    """One flat slot of Helion's layout and the parameter names it expands into."""

    names: tuple[str, ...]
    is_list: bool  # a ListOf slot: its value is a list with one element per name


def _fragment_parameters(name: str, fragment: Any) -> tuple[list[Parameter], bool]:
    from helion.autotuner import config_fragment as cf

    if isinstance(fragment, cf.ListOf):
        params = []
        for j in range(fragment.length):
            inner, _ = _fragment_parameters(f"{name}[{j}]", fragment.inner)
            params += inner
        return params, True
    if isinstance(fragment, cf.PowerOfTwoFragment):  # block sizes, num_warps, multipliers
        return [PowerOfTwo(name=name, low=fragment.low, high=fragment.high, default_value=fragment.default())], False
    if isinstance(fragment, cf.IntegerFragment):
        return [Integer(name=name, low=fragment.low, high=fragment.high, default_value=fragment.default())], False
    if isinstance(fragment, cf.BooleanFragment):
        return [Choice(name=name, choices=(False, True), default_value=fragment.default())], False
    if isinstance(fragment, cf.EnumFragment):
        return [Choice(name=name, choices=tuple(fragment.choices), default_value=fragment.default())], False
    if isinstance(fragment, cf.PermutationFragment):
        perms = tuple(itertools.permutations(range(fragment.length)))
        return [Choice(name=name, choices=perms, default_value=tuple(fragment.default()))], False
    raise TypeError(f"unsupported Helion fragment {type(fragment).__name__} for {name}")


def _slot_names(config_spec: Any) -> list[str]:
    names = []
    for key, count, is_sequence in config_spec.flat_key_layout():
        names += [f"{key}[{i}]" for i in range(count)] if is_sequence else [key]
    return names


class HelionCodec:
    """Normalises points through Helion's own `ConfigGeneration` (needs the bound kernel)."""

    def __init__(self, space: SearchSpace, config_generation: Any, slots: list[_Slot]) -> None:
        self.space = space
        self._generation = config_generation
        self._slots = slots

    def to_flat(self, params: Mapping[str, JsonValue]) -> list[Any]:
        flat = []
        for slot in self._slots:
            values = [params[n] for n in slot.names]
            flat.append(list(values) if slot.is_list else values[0])
        return flat

    def from_flat(self, flat: list[Any]) -> Params:
        params: Params = {}
        for slot, value in zip(self._slots, flat):
            values = list(value) if slot.is_list else [value]
            for name, v in zip(slot.names, values):
                params[name] = list(v) if isinstance(v, tuple) else v
        return self.space.ordered(params)

    def normalise(self, params: Mapping[str, JsonValue]) -> tuple[Params, dict[str, JsonValue]]:
        point = self.space.validate(params)
        try:
            config = self._generation.unflatten(self.to_flat(point))
        except Exception as error:  # helion raises InvalidConfig (and asserts) for conflicts
            raise InvalidConfig(f"Helion rejected the config: {error}") from error
        canonical = self.from_flat(self._generation.flatten(config))
        return canonical, to_native(config)

    def params_of(self, native: Mapping[str, JsonValue]) -> Params:
        return self.normalise(self._unchecked_point(native))[0]

    def params_near(self, native: Mapping[str, JsonValue]) -> Params:
        return self.normalise(self.space.nearest_point(self._unchecked_point(native)))[0]

    def _unchecked_point(self, native: Mapping[str, JsonValue]) -> Params:
        """The native config's values by parameter name, not yet checked against the space."""
        import helion

        try:
            flat = self._generation.flatten(helion.Config.from_dict(dict(native)))
        except Exception as error:
            raise InvalidConfig(f"config does not fit this kernel's space: {error}") from error
        return self.from_flat(flat)


def to_native(config: Any) -> dict[str, JsonValue]:
    """A helion.Config as a plain JSON-able dict (tuples become lists)."""
    import json

    return json.loads(json.dumps(dict(config.config if hasattr(config, "config") else config)))


def space_from_bound(kernel_name: str, bound: Any, *, thread_limit: bool = True,
                     interpreter: bool = False) -> tuple[SearchSpace, HelionCodec]:
    """The space of a bound Helion kernel, and the codec that normalises its points.

    `thread_limit=False` leaves out the elements-per-thread limit (MAX_ELEMENTS_PER_THREAD): it
    keeps our searches away from configs that compile slowly or not at all, but it is not a rule
    of Helion's, whose own search can pick a config past it, and re-timing that pick needs a
    space that holds it.  Triton's tensor limit stays."""
    from helion.autotuner.config_generation import ConfigGeneration

    spec = bound.config_spec
    generation = ConfigGeneration(spec)
    slot_names = _slot_names(spec)
    if len(slot_names) != len(generation.flat_spec):
        raise RuntimeError("Helion's flat layout and its fragments disagree in length")
    parameters: list[Parameter] = []
    slots: list[_Slot] = []
    for name, fragment in zip(slot_names, generation.flat_spec):
        params, is_list = _fragment_parameters(name, fragment)
        if interpreter and name == "pid_type":
            params = [_without_persistent(p) for p in params]
        parameters += params
        slots.append(_Slot(names=tuple(p.name for p in params), is_list=is_list))
    block_names = tuple(parameters_of_slots(slots, generation.block_size_indices))
    constraints = []
    if block_names:
        constraints.append(ProductLimit(names=block_names, limit=TRITON_MAX_TENSOR_NUMEL))
        if thread_limit and generation.num_warps_index >= 0:
            warps = slots[generation.num_warps_index].names[0]
            constraints.append(
                ProductLimit(names=block_names, limit=MAX_ELEMENTS_PER_THREAD, per=(warps,), per_scale=32)
            )
    provisional = SearchSpace(
        kernel=kernel_name, family="helion", parameters=tuple(parameters), default={},
        constraints=tuple(constraints),
    )
    codec = HelionCodec(provisional, generation, slots)
    # default_config() is what Helion runs untuned: on a GPU its heuristics may promote a
    # compiler default over the fragments' defaults, so read it there, not from fragments.
    default_point = codec.from_flat(generation.flatten(spec.default_config()))
    seeds = [to_native(c) for c in (getattr(spec, "compiler_seed_configs", None) or [])]
    space = SearchSpace(
        kernel=kernel_name, family="helion", parameters=tuple(parameters), default=default_point,
        constraints=tuple(constraints), extras={"compiler_seeds": seeds},
    )
    codec.space = space
    return space, codec


def _without_persistent(parameter: Parameter) -> Parameter:
    """The pid_type choice without the program orders a CPU cannot run."""
    from dataclasses import replace

    assert isinstance(parameter, Choice)
    kept = tuple(c for c in parameter.choices if c not in PERSISTENT_PID_TYPES)
    default = parameter.default_value if parameter.default_value in kept else kept[0]
    return replace(parameter, choices=kept, default_value=default)


def parameters_of_slots(slots: list[_Slot], indices: list[int]) -> list[str]:
    names: list[str] = []
    for i in indices:
        names += slots[i].names
    return names
