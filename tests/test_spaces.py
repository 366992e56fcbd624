"""Parameters, search spaces, codecs: the pure-data half of the framework."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search_spaces import (
    Choice,
    Integer,
    InvalidConfig,
    Ordinal,
    PowerOfTwo,
    ProductLimit,
    SearchSpace,
    config_key,
    iter_grid,
    params_key,
)
from search_spaces.codec import DeclaredCodec
from search_spaces.parameters import _same, parameter_from_dict
from search_spaces.triton_space import declare_triton_space, from_triton_config, to_triton_config

# -- parameters --------------------------------------------------------------------------------


def test_power_of_two_values_and_membership():
    p = PowerOfTwo(name="bs", low=4, high=64, default_value=16)
    expected = [v for v in range(1, 65) if v >= 4 and (v & (v - 1)) == 0]
    assert p.values() == expected
    assert p.cardinality() == len(expected)
    assert p.default == 16
    assert p.contains(32) and not p.contains(24) and not p.contains(2) and not p.contains(128)
    assert not PowerOfTwo(name="w", low=1, high=4, default_value=1).contains(True)


@pytest.mark.parametrize("kwargs", [
    dict(low=3, high=8, default_value=4),  # low not a power of two
    dict(low=4, high=12, default_value=4),  # high not a power of two
    dict(low=16, high=4, default_value=4),  # empty range
    dict(low=4, high=16, default_value=32),  # default outside
    dict(low=4, high=16, default_value=6),  # default not a power of two
])
def test_power_of_two_rejects_bad_definitions(kwargs):
    with pytest.raises(ValueError):
        PowerOfTwo(name="bs", **kwargs)


def test_integer_values_and_neighbours():
    p = Integer(name="u", low=0, high=4, default_value=0)
    assert p.values() == [0, 1, 2, 3, 4]
    assert p.neighbours(2) == [1, 3]
    assert p.neighbours(0) == [1]
    assert p.neighbours(4) == [3]
    assert p.neighbours(4, radius=2) == [2, 3]
    assert p.neighbours(2, radius=10) == [0, 1, 3, 4]
    with pytest.raises(ValueError):
        p.neighbours(7)
    with pytest.raises(ValueError):
        Integer(name="u", low=3, high=2, default_value=3)
    with pytest.raises(ValueError):
        Integer(name="u", low=0, high=2, default_value=5)


def test_power_of_two_neighbours_are_adjacent_powers():
    p = PowerOfTwo(name="bs", low=1, high=64, default_value=8)
    assert p.neighbours(8) == [4, 16]
    assert p.neighbours(1) == [2]
    assert p.neighbours(64, radius=2) == [16, 32]


def test_contains_keeps_booleans_apart_from_integers():
    flag = Choice(name="f", choices=(False, True), default_value=False)
    assert flag.contains(True) and flag.contains(False)
    assert not flag.contains(1) and not flag.contains(0)
    ints = Choice(name="i", choices=(0, 1), default_value=0)
    assert ints.contains(1) and not ints.contains(True) and not ints.contains(False)
    tri = Choice(name="t", choices=(None, False, True), default_value=None)
    assert tri.contains(None) and not tri.contains(0) and not tri.contains("None")
    integer = Integer(name="n", low=0, high=3, default_value=0)
    assert integer.contains(1) and not integer.contains(True)
    # a default of 0 is not the boolean False
    with pytest.raises(ValueError):
        Choice(name="f", choices=(False, True), default_value=0)
    assert not _same(1, True) and not _same([1, 0], [True, False]) and _same((1, 0), [1, 0])


def test_choice_is_unordered_and_ordinal_is_ordered():
    c = Choice(name="pid", choices=("flat", "persistent_blocked", "persistent_interleaved"), default_value="flat")
    assert not c.ordered
    assert c.neighbours("flat") == ["persistent_blocked", "persistent_interleaved"]
    assert c.neighbours("persistent_blocked", radius=1) == ["flat", "persistent_interleaved"]
    o = Ordinal(name="BLOCK", choices=(256, 64, 1024, 128), default_value=1024)
    assert o.ordered
    assert o.values() == [256, 64, 1024, 128]  # listed order, not sorted
    assert o.neighbours(64) == [256, 1024]
    assert o.neighbours(256) == [64]
    assert o.neighbours(128) == [1024]


def test_permutation_choices_accept_lists_and_tuples():
    perms = tuple(itertools.permutations(range(3)))
    p = Choice(name="order", choices=perms, default_value=(0, 1, 2))
    assert p.values() == [list(x) for x in perms]
    assert p.default == [0, 1, 2]
    assert p.contains([2, 1, 0]) and p.contains((2, 1, 0))
    assert not p.contains([0, 1]) and not p.contains([0, 1, 3])
    assert p.index_of([1, 0, 2]) == perms.index((1, 0, 2))


def test_choice_rejects_bad_definitions():
    with pytest.raises(ValueError):
        Choice(name="c", choices=(), default_value=None)
    with pytest.raises(ValueError):
        Choice(name="c", choices=("a", "b"), default_value="z")


PARAMETERS = [
    PowerOfTwo(name="block_sizes[0]", low=2, high=256, default_value=32),
    Integer(name="stages", low=1, high=8, default_value=3),
    Choice(name="flag", choices=(None, False, True), default_value=None),
    Choice(name="order", choices=tuple(itertools.permutations(range(3))), default_value=(1, 0, 2)),
    Choice(name="evict", choices=("", "first", "last"), default_value=""),
    Ordinal(name="BLOCK_SIZE", choices=(256, 512, 1024), default_value=512),
]


@pytest.mark.parametrize("parameter", PARAMETERS, ids=lambda p: p.kind + ":" + p.name)
def test_parameter_dict_round_trip(parameter):
    data = json.loads(json.dumps(parameter.to_dict()))  # what the cache stores
    rebuilt = parameter_from_dict(data)
    assert rebuilt == parameter
    assert type(rebuilt) is type(parameter)
    assert rebuilt.kind == parameter.kind
    assert rebuilt.values() == parameter.values()
    assert _same(rebuilt.default, parameter.default)


def test_parameter_from_dict_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        parameter_from_dict({"name": "x", "kind": "float_range", "low": 0, "high": 1, "default": 0})


@pytest.mark.parametrize("parameter", PARAMETERS, ids=lambda p: p.kind + ":" + p.name)
def test_parameter_sample_draws_members_and_covers_values(parameter):
    rng = random.Random(3)
    draws = [parameter.sample(rng) for _ in range(400)]
    assert all(parameter.contains(v) for v in draws)
    assert {json.dumps(v) for v in draws} == {json.dumps(v) for v in parameter.values()}


# -- a hand-built space --------------------------------------------------------------------------


def small_space(limit: int = 256, default_a: int = 8) -> SearchSpace:
    params = (
        PowerOfTwo(name="a", low=1, high=64, default_value=default_a),
        PowerOfTwo(name="b", low=1, high=64, default_value=8),
        Ordinal(name="w", choices=(1, 2, 4), default_value=2),
        Choice(name="flag", choices=(False, True), default_value=False),
        Integer(name="u", low=0, high=3, default_value=0),
    )
    return SearchSpace(kernel="toy", family="triton", parameters=params,
                       default={"a": default_a, "b": 8, "w": 2, "flag": False, "u": 0},
                       constraints=(ProductLimit(names=("a", "b"), limit=limit),))


GOOD = {"a": 4, "b": 16, "w": 1, "flag": True, "u": 3}


def test_validate_accepts_and_orders_a_valid_point():
    space = small_space()
    shuffled = dict(reversed(list(GOOD.items())))
    point = space.validate(shuffled)
    assert list(point) == space.names
    assert point == GOOD
    assert space.violations(GOOD) == []


def test_violations_report_unknown_names():
    space = small_space()
    problems = space.violations({**GOOD, "zzz": 1, "aaa": 2})
    assert len(problems) == 1 and "aaa" in problems[0] and "zzz" in problems[0]
    with pytest.raises(InvalidConfig, match="zzz"):
        space.validate({**GOOD, "zzz": 1})


def test_violations_report_missing_and_out_of_range_values():
    space = small_space()
    missing = {k: v for k, v in GOOD.items() if k != "u"}
    assert any("missing" in p and "u" in p for p in space.violations(missing))
    for name, bad in (("a", 3), ("a", 128), ("w", 8), ("u", 4), ("u", -1), ("flag", 1), ("b", "16"), ("b", None)):
        problems = space.violations({**GOOD, name: bad})
        assert len(problems) == 1 and problems[0].startswith(f"{name}="), (name, bad, problems)
        with pytest.raises(InvalidConfig):
            space.validate({**GOOD, name: bad})


def test_product_limit_constraint():
    space = small_space(limit=256)
    assert space.violations({**GOOD, "a": 16, "b": 16}) == []  # 256 is allowed
    problems = space.violations({**GOOD, "a": 32, "b": 16})
    assert len(problems) == 1 and "exceeds" in problems[0] and "512" in problems[0]
    with pytest.raises(InvalidConfig, match="exceeds"):
        space.validate({**GOOD, "a": 64, "b": 64})


def test_product_limit_per_divisor():
    limit = ProductLimit(names=("a", "b"), limit=4, per=("w",), per_scale=32)
    assert limit.violation({"a": 64, "b": 4, "w": 2}) is None  # 256 / (2 * 32) = 4
    message = limit.violation({"a": 64, "b": 8, "w": 2})  # 512 / 64 = 8
    assert message is not None and "8" in message and "w" in message
    assert limit.violation({"a": 64, "b": 8, "w": 4}) is None


def _valid_by_hand(point: dict, limit: int = 256) -> bool:
    return point["a"] * point["b"] <= limit


def test_sample_respects_constraints_and_is_deterministic():
    space = small_space(limit=64)
    rng = random.Random(11)
    points = [space.sample(rng) for _ in range(300)]
    assert all(space.violations(p) == [] and _valid_by_hand(p, 64) for p in points)
    assert all(list(p) == space.names for p in points)
    # rejection must not collapse the distribution: both small and large tiles appear
    assert {p["a"] for p in points} == {1, 2, 4, 8, 16, 32, 64}
    rng2 = random.Random(11)
    assert [space.sample(rng2) for _ in range(300)] == points
    rng3 = random.Random(12)
    assert [space.sample(rng3) for _ in range(300)] != points


def test_sample_of_unsatisfiable_space_raises():
    space = small_space(limit=0)
    with pytest.raises(InvalidConfig):
        space.sample(random.Random(0), max_tries=50)


def test_neighbours_differ_in_exactly_one_parameter():
    space = small_space(limit=256)
    point = {"a": 16, "b": 16, "w": 2, "flag": False, "u": 1}
    neighbours = space.neighbours(point)
    assert neighbours
    for n in neighbours:
        diff = [k for k in space.names if not _same(n[k], point[k])]
        assert len(diff) == 1, n
        assert space.violations(n) == []
        assert list(n) == space.names
    # expected moves, derived by hand: a and b may only shrink (growing breaks a * b <= 256)
    got = {(k, json.dumps(n[k])) for n in neighbours for k in space.names if not _same(n[k], point[k])}
    assert got == {("a", "8"), ("b", "8"), ("w", "1"), ("w", "4"), ("flag", "true"), ("u", "0"), ("u", "2")}
    assert space.changed(point, neighbours[0]) and len(space.changed(point, neighbours[0])) == 1


def test_space_dict_round_trip_and_definition_hash():
    space = small_space()
    data = json.loads(json.dumps(space.to_dict()))
    rebuilt = SearchSpace.from_dict(data)
    assert rebuilt == space
    assert rebuilt.definition_hash() == space.definition_hash() == small_space().definition_hash()
    assert space.definition_hash() != small_space(limit=128).definition_hash()
    assert space.definition_hash() != small_space(default_a=4).definition_hash()
    perm_space = SearchSpace(kernel="k", family="helion", parameters=(PARAMETERS[3],),
                             default={"order": [1, 0, 2]})
    rebuilt_perm = SearchSpace.from_dict(json.loads(json.dumps(perm_space.to_dict())))
    assert rebuilt_perm == perm_space
    assert rebuilt_perm.definition_hash() == perm_space.definition_hash()


def test_space_structure_helpers():
    space = small_space()
    assert space.cardinality() == 7 * 7 * 3 * 2 * 4
    assert space.parameter("w").values() == [1, 2, 4]
    with pytest.raises(KeyError):
        space.parameter("nope")
    assert space.complete({"u": 2}) == {**space.default, "u": 2}
    with pytest.raises(InvalidConfig):
        space.complete({"nope": 2})
    with pytest.raises(ValueError, match="duplicate"):
        SearchSpace(kernel="k", family="triton", parameters=(PARAMETERS[0], PARAMETERS[0]), default={})


def test_iter_grid_is_product_order_with_constraints():
    space = small_space(limit=16)
    got = list(iter_grid(space, ["a", "w"]))
    expected = [{**space.default, "a": a, "w": w} for a in (1, 2, 4, 8, 16, 32, 64) for w in (1, 2, 4)
                if a * space.default["b"] <= 16]
    assert got == expected


def test_config_key_ignores_order_but_not_values():
    a = {"x": 1, "y": [1, 2], "z": None}
    b = {"z": None, "y": [1, 2], "x": 1}
    assert config_key(a) == config_key(b)
    assert config_key(a) != config_key({**a, "x": 2})
    assert config_key(a) != config_key({**a, "z": False})
    assert config_key({"f": True}) != config_key({"f": 1})
    assert params_key(a) == params_key(b)


# -- hypothesis: validate on arbitrary JSON dicts ----------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-300, 300) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=8,
)
SPACE = small_space()


def _near_valid():
    """Dicts over the space's names with values usually (not always) drawn from the parameter."""
    fields = {p.name: st.sampled_from(p.values()) | json_values for p in SPACE.parameters}
    return st.fixed_dictionaries(fields, optional={"extra": json_values})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.dictionaries(st.sampled_from(SPACE.names) | st.text(max_size=8), json_values, max_size=7),
                 _near_valid()))
def test_validate_arbitrary_json(data):
    try:
        point = SPACE.validate(data)
    except InvalidConfig as error:
        assert str(error)
        assert SPACE.violations(data)
        return
    assert list(point) == SPACE.names
    assert SPACE.violations(point) == []
    assert set(data) == set(SPACE.names)
    for name in SPACE.names:
        assert SPACE.parameter(name).contains(point[name])
        assert _same(point[name], data[name])
    assert point["a"] * point["b"] <= 256


# -- the real Helion softmax space --------------------------------------------------------------


def _helion_points(task, n=200, seed=0):
    rng = random.Random(seed)
    return [task.space.sample(rng) for _ in range(n)]


def test_helion_space_is_read_from_the_kernel(helion_task):
    space = helion_task.space
    assert space.family == "helion" and space.kernel == "softmax"
    assert "num_warps" in space.names and "block_sizes[0]" in space.names
    assert space.violations(space.default) == []
    assert SearchSpace.from_dict(json.loads(json.dumps(space.to_dict()))) == space


def test_helion_normalisation_is_idempotent(helion_task):
    codec = helion_task.codec
    for point in _helion_points(helion_task):
        canonical, native = codec.normalise(point)
        assert helion_task.space.violations(canonical) == []
        canonical2, native2 = codec.normalise(canonical)
        assert canonical2 == canonical
        assert native2 == native
        assert config_key(native2) == config_key(native) == helion_task.candidate(point).key
        # native configs are plain JSON (they go into sqlite and come back unchanged)
        assert json.loads(json.dumps(native)) == native


def test_helion_params_of_recovers_the_canonical_point(helion_task):
    codec = helion_task.codec
    for point in _helion_points(helion_task, n=200, seed=1):
        canonical, native = codec.normalise(point)
        assert codec.params_of(native) == canonical
        assert helion_task.candidate_from_native(native).key == config_key(native)


def test_helion_non_canonical_points_share_the_canonical_key(helion_task):
    changed = 0
    for point in _helion_points(helion_task, n=200, seed=2):
        candidate = helion_task.candidate(point)
        if candidate.params != point:
            changed += 1
            assert helion_task.candidate(candidate.params).key == candidate.key
            assert params_key(point) != params_key(candidate.params)
    assert changed > 0, "no sampled point was changed by normalisation: the test lost its subject"


def test_helion_config_key_is_independent_of_dict_order(helion_task):
    for point in _helion_points(helion_task, n=20, seed=3):
        _, native = helion_task.codec.normalise(point)
        reordered = dict(reversed(list(native.items())))
        assert list(reordered) != list(native)
        assert config_key(reordered) == config_key(native)
        assert helion_task.candidate_from_native(reordered).key == config_key(native)


def test_helion_partial_native_config_is_completed(helion_task):
    candidate = helion_task.candidate_from_native({"block_sizes": [4], "num_warps": 8})
    assert candidate.params["block_sizes[0]"] == 4 and candidate.params["num_warps"] == 8
    assert candidate.native["block_sizes"] == [4] and candidate.native["num_warps"] == 8


def test_helion_normalise_rejects_points_outside_the_space(helion_task):
    bad = {**helion_task.space.default, "num_warps": 3}
    with pytest.raises(InvalidConfig):
        helion_task.codec.normalise(bad)
    with pytest.raises(InvalidConfig):
        helion_task.codec.normalise({**helion_task.space.default, "not_a_parameter": 1})


def test_helion_grid_over_two_parameters_stays_in_space(helion_task):
    points = list(iter_grid(helion_task.space, ["num_warps", "num_stages"]))
    warps = helion_task.space.parameter("num_warps").values()
    stages = helion_task.space.parameter("num_stages").values()
    assert len(points) <= len(warps) * len(stages)
    assert all(helion_task.space.violations(p) == [] for p in points)


# -- the declared Triton softmax space ------------------------------------------------------------


def _powers_between(lo, hi):
    return [v for v in range(lo, hi + 1) if v & (v - 1) == 0]


@pytest.mark.parametrize("n_cols", [100, 1000, 4096, 32000, 100000])
def test_triton_softmax_declared_space(n_cols):
    import torch

    from autotune.kernels.softmax_triton import triton_space

    space = triton_space((16, n_cols), torch.float16)
    top = 1
    while top < n_cols:
        top *= 2
    top = min(top, 65536)
    bottom = min(256, top)
    assert space.family == "triton"
    assert space.parameter("BLOCK_SIZE").values() == _powers_between(bottom, top)
    assert space.parameter("num_warps").values() == [1, 2, 4, 8, 16, 32]
    assert space.violations(space.default) == []
    for point in iter_grid(space, space.names):
        assert point["BLOCK_SIZE"] / (point["num_warps"] * 32) <= 1024


def test_triton_constraint_excludes_register_spills():
    import torch

    from autotune.kernels.softmax_triton import triton_space

    space = triton_space((16, 65536), torch.float16)
    assert space.violations({"BLOCK_SIZE": 65536, "num_warps": 1, "num_stages": 1})
    assert space.violations({"BLOCK_SIZE": 65536, "num_warps": 2, "num_stages": 1}) == []


def test_triton_config_round_trip(triton_task):
    import triton

    space = triton_task.space
    points = list(iter_grid(space, space.names))
    assert len(points) == len(space.parameter("BLOCK_SIZE").values()) * 6 * 4
    for point in points:
        config = to_triton_config(point)
        assert isinstance(config, triton.Config)
        assert config.kwargs == {"BLOCK_SIZE": point["BLOCK_SIZE"]}
        assert config.num_warps == point["num_warps"] and config.num_stages == point["num_stages"]
        assert from_triton_config(space, config) == point
        assert triton_task.candidate(point).native == point  # declared spaces need no normalisation


def test_from_triton_config_rejects_configs_outside_the_space(triton_task):
    import triton

    space = triton_task.space
    with pytest.raises(InvalidConfig, match="BLOCK_SIZE"):
        from_triton_config(space, triton.Config({}, num_warps=4, num_stages=2))
    with pytest.raises(InvalidConfig):
        from_triton_config(space, triton.Config({"BLOCK_SIZE": 300}, num_warps=4, num_stages=2))
    with pytest.raises(InvalidConfig):
        from_triton_config(space, triton.Config({"BLOCK_SIZE": 256}, num_warps=3, num_stages=2))


def test_declared_codec_is_identity_on_valid_points():
    space = declare_triton_space("k", meta={"BLOCK": [64, 128]}, num_warps=[4, 8], num_stages=[1, 2],
                                 default={"BLOCK": 64, "num_warps": 4, "num_stages": 1})
    codec = DeclaredCodec(space)
    point = {"num_stages": 2, "BLOCK": 128, "num_warps": 8}
    canonical, native = codec.normalise(point)
    assert canonical == native == {"BLOCK": 128, "num_warps": 8, "num_stages": 2}
    assert list(canonical) == space.names
    assert codec.params_of(native) == canonical
    with pytest.raises(InvalidConfig):
        codec.normalise({**point, "BLOCK": 96})


def test_equal_numeric_configs_get_one_key(triton_task):
    as_int = {"BLOCK_SIZE": 512, "num_warps": 4, "num_stages": 1}
    as_float = {"BLOCK_SIZE": 512.0, "num_warps": 4, "num_stages": 1}
    try:
        candidate = triton_task.candidate(as_float)
    except InvalidConfig:
        return  # refusing the float is a fine answer too
    assert candidate.key == triton_task.candidate(as_int).key
    assert not math.isnan(candidate.params["BLOCK_SIZE"])


# -- the nearest point to a config of another shape's space ------------------------------------------
def test_a_value_outside_a_parameter_moves_to_its_closest_value():
    blocks = PowerOfTwo("BLOCK", low=256, high=4096, default_value=1024)
    assert blocks.nearest(16384) == 4096 and blocks.nearest(64) == 256 and blocks.nearest(2048) == 2048
    assert Integer("stages", low=1, high=4, default_value=2).nearest(7) == 4
    indexing = Choice("indexing", choices=("pointer", "block_ptr"), default_value="pointer")
    assert indexing.nearest("tensor_descriptor") == "pointer"  # unordered: the default
    assert Choice("flag", choices=(False, True), default_value=False).nearest(1) is False  # 1 is not True


def test_the_nearest_point_steps_a_product_over_its_limit_down_by_its_largest_factor():
    space = SearchSpace(kernel="k", family="triton",
                        parameters=(PowerOfTwo("BLOCK_M", low=1, high=64, default_value=1),
                                    PowerOfTwo("LOOP", low=8, high=8192, default_value=64),
                                    PowerOfTwo("num_warps", low=1, high=8, default_value=4)),
                        default={"BLOCK_M": 1, "LOOP": 64, "num_warps": 4},
                        constraints=(ProductLimit(("BLOCK_M", "LOOP"), per=("num_warps",), per_scale=32, limit=16),))
    # a whole row of 32768 per program at 8 warps is 128 per thread: LOOP halves until it fits
    point = space.nearest_point({"BLOCK_M": 1, "LOOP": 32768, "num_warps": 8, "gone": 3})
    assert point == {"BLOCK_M": 1, "LOOP": 4096, "num_warps": 8}
    assert space.violations(point) == []
    # the larger factor steps first, so two large factors come down in turn (64 x 128 -> 16 x 32)
    assert space.nearest_point({"BLOCK_M": 64, "LOOP": 128, "num_warps": 1}) == {"BLOCK_M": 16, "LOOP": 32,
                                                                                "num_warps": 1}
    with pytest.raises(InvalidConfig, match="no point near"):
        SearchSpace(kernel="k", family="triton", parameters=(PowerOfTwo("B", low=64, high=64, default_value=64),),
                    default={"B": 64}, constraints=(ProductLimit(("B",), limit=32),)).nearest_point({"B": 64})


def test_a_helion_space_without_the_limit_holds_configs_past_it_and_keeps_tritons_limit():
    """Our elements-per-thread limit is a limit of our searches, not of Helion's: a config past
    it (4 rows of 65536 over 256 threads: 1024 values a thread) is refused by the limited space
    and taken by the space without it, which is another space (another fingerprint); Triton's
    tensor limit holds in both."""
    import torch

    from autotune.kernels import get_kernel
    from autotune.task import bind_live

    spec = get_kernel("softmax")
    limited = bind_live(spec, (4096, 65536), torch.float16, "cpu")
    unlimited = bind_live(spec, (4096, 65536), torch.float16, "cpu", thread_limit=False)
    _, default = limited.codec.normalise(limited.space.default)
    past = {**default, "block_sizes": [4], "reduction_loops": [None], "num_warps": 8}
    with pytest.raises(InvalidConfig, match="exceeds 128"):
        limited.codec.params_of(past)
    point = unlimited.codec.params_of(past)
    assert (point["block_sizes[0]"], point["num_warps"]) == (4, 8) and unlimited.space.violations(point) == []
    assert unlimited.fingerprint != limited.fingerprint
    assert len(unlimited.space.constraints) == len(limited.space.constraints) - 1
    too_big = {**past, "block_sizes": [32]}  # 32 x 65536 elements in one tile: past Triton's 2**20
    for task in (limited, unlimited):
        with pytest.raises(InvalidConfig, match="exceeds 1.04858e\\+06"):
            task.codec.params_of(too_big)
