"""Property-based tests (hypothesis) of what users type and of the spaces' own invariants:
arbitrary JSON as --config never ends in a traceback, shape strings are accepted exactly when
they are positive integers joined by x, and random points of the spaces validate to themselves."""

from __future__ import annotations

import contextlib
import io
import json
import random
import re

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autotune import cli
from autotune.kernels.softmax_triton import triton_space
from autotune.errors import UserError
from autotune.kernels import parse_shape
from autotune.seeds import read_configs, user_point, user_seeds
from search_spaces.parameters import Choice, Integer, Ordinal, PowerOfTwo
from search_spaces.space import InvalidConfig, ProductLimit, SearchSpace, canonical_json, config_key, params_key

# The `space` fixture is function-scoped but immutable, so sharing it between examples is safe.
FEW = settings(max_examples=60, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SOME = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# -- the spaces ------------------------------------------------------------------------------------
SYNTHETIC = SearchSpace(
    kernel="synthetic", family="triton",
    parameters=(PowerOfTwo(name="block", low=16, high=1024, default_value=64),
                Integer(name="unroll", low=0, high=4, default_value=1),
                Choice(name="order", choices=((0, 1), (1, 0)), default_value=(0, 1)),
                Choice(name="flag", choices=(None, False, True), default_value=None),
                Ordinal(name="warps", choices=(1, 2, 4, 8), default_value=4)),
    default={"block": 64, "unroll": 1, "order": [0, 1], "flag": None, "warps": 4},
    constraints=(ProductLimit(names=("block",), limit=64, per=("warps",), per_scale=1),),
)
FINITE = SYNTHETIC.restricted_to(SYNTHETIC.sample(random.Random(s)) for s in range(12))
WIDE_TRITON = triton_space((64, 40000), torch.float16)  # rows wide enough for its per-thread limit to bind


@pytest.fixture(params=["synthetic", "finite", "triton", "helion"])
def space(request) -> SearchSpace:
    if request.param == "synthetic":
        return SYNTHETIC
    if request.param == "finite":
        return FINITE
    return request.getfixturevalue(f"{request.param}_task").space


# -- arbitrary JSON as --config ---------------------------------------------------------------------
scalars = st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats() | st.text(max_size=8)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def near_configs(space: SearchSpace) -> st.SearchStrategy:
    """Objects over the space's own names, mostly with each parameter's own values (some as
    floats), sometimes a stray name or value: many fit or nearly fit, which arbitrary JSON
    almost never does."""
    def own_value(parameter):
        values = st.sampled_from(parameter.values())
        return st.tuples(st.just(parameter.name), values | values.map(lambda v: float(v) if type(v) is int else v))

    own = st.sampled_from(space.parameters).flatmap(own_value)
    stray = st.tuples(st.sampled_from(space.names) | st.text(max_size=6),
                      scalars | st.integers(-2, 2048) | st.sampled_from(["4", [0, 1], [1, 0]]))
    configs = st.lists(st.one_of(own, own, own, stray), max_size=6).map(dict)
    if space.members is not None:  # a finite space's points are few: offer them whole too
        configs = configs | st.sampled_from(space.members)
    return configs


def check_one(space: SearchSpace, task, text: str) -> None:
    """Accepted: each point is complete, canonical and validates to itself; refused: one line."""
    try:
        configs = read_configs([text])
        points = [p for _, p in user_seeds(task, configs)] if task is not None else \
            [user_point(space, raw, label) for label, raw in configs]
    except UserError as error:
        message = str(error)
        assert message and "\n" not in message and len(message) < 2000
        return
    for (_, raw), point in zip(configs, points):
        assert list(point) == space.names
        assert space.validate(point) == point
        assert canonical_json(space.validate({**space.default, **raw})) == canonical_json(point)


@FEW
@given(data=st.data())
def test_arbitrary_json_as_a_config_is_accepted_canonical_or_refused_in_one_line(space, data):
    value = data.draw(st.one_of(json_values, near_configs(space), st.lists(near_configs(space), max_size=3)))
    check_one(space, None, json.dumps(value))


@FEW
@given(data=st.data())
def test_configs_through_the_codecs_never_traceback(triton_task, helion_task, data):
    """The Helion codec (Helion's own normalisation) and the Triton one, as `tune` uses them."""
    task = data.draw(st.sampled_from([triton_task, helion_task]))
    check_one(task.space, task, json.dumps(data.draw(near_configs(task.space))))


@FEW
@given(text=st.one_of(st.text(max_size=30), json_values.map(json.dumps),
                      near_configs(WIDE_TRITON).map(json.dumps)))
def test_check_config_on_arbitrary_text(text):
    """The whole command: exit 0 with canonical JSON that validates, or exit 2 and one line."""
    args = ["check-config", "softmax-triton", "--shape", "64x40000", "--format", "json", "--config", text]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(args)
    if code == 0:
        for item in json.loads(out.getvalue()):
            assert WIDE_TRITON.validate(item["config"]) == item["config"] == item["native"]
    else:
        assert code == 2, err.getvalue()
        (line,) = err.getvalue().splitlines()
        assert line.startswith("autotune: error: ")


# -- shape strings ----------------------------------------------------------------------------------
SHAPE = re.compile(r"[0-9]+(?:[xX×][0-9]+)*")
pieces = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["-1", "+3", " 7", "1_0", "٣", "1e3", "0x1", "", "07"]))
shape_like = st.tuples(st.lists(pieces, min_size=1, max_size=4), st.sampled_from(["x", "X", "×", "*", ",", " x "])
                       ).map(lambda t: t[1].join(t[0]))


@SOME
@given(text=st.one_of(st.text(max_size=20), shape_like), rank=st.sampled_from([None, 1, 2, 3]))
def test_parse_shape_accepts_exactly_positive_integers_joined_by_x(text, rank):
    well_formed = SHAPE.fullmatch(text) is not None
    extents = tuple(int(p) for p in re.split("[xX×]", text)) if well_formed else ()
    should_accept = well_formed and all(e > 0 for e in extents) and (rank is None or len(extents) == rank)
    try:
        shape = parse_shape(text, rank)
    except ValueError as error:
        assert not should_accept, text
        assert str(error) and "\n" not in str(error)
        return
    assert should_accept, text
    assert shape == extents


# -- random points of the spaces --------------------------------------------------------------------
@SOME
@given(seed=st.integers(0, 2**32 - 1), order_seed=st.integers(0, 2**32 - 1))
def test_random_points_validate_to_themselves_and_keys_ignore_order(space, seed, order_seed):
    point = space.sample(random.Random(seed))
    assert space.validate(point) == space.ordered(point)
    assert user_point(space, point) == space.ordered(point)
    names = list(point)
    random.Random(order_seed).shuffle(names)
    shuffled = {n: point[n] for n in names}
    assert params_key(shuffled) == params_key(point) and config_key(shuffled) == config_key(point)
    assert space.validate(shuffled) == space.validate(point)


@SOME
@given(seed=st.integers(0, 2**32 - 1), keep=st.integers(0, 2**8))
def test_a_partial_point_completes_from_the_default(space, seed, keep):
    point = space.sample(random.Random(seed))
    partial = {n: v for i, (n, v) in enumerate(point.items()) if keep >> (i % 8) & 1}
    completed = {**space.default, **partial}
    try:
        expected = space.validate(completed)
    except InvalidConfig:  # the default's values and the sample's can break a limit together
        with pytest.raises(UserError):
            user_point(space, partial)
        return
    assert user_point(space, partial) == expected


@SOME
@given(seed=st.integers(0, 2**32 - 1), pick=st.integers(0, 100))
def test_floats_are_spelled_as_the_space_spells_them_and_booleans_stay_booleans(space, seed, pick):
    point = space.sample(random.Random(seed))
    ints = [n for n, v in point.items() if type(v) is int]
    assume(ints)
    name = ints[pick % len(ints)]
    as_float = {**point, name: float(point[name])}
    assert user_point(space, as_float) == space.ordered(point) == space.validate(as_float)
    assert type(user_point(space, as_float)[name]) is int
    if point[name] in (0, 1) and not space.parameter(name).contains(bool(point[name])):
        with pytest.raises(UserError, match=name.replace("[", r"\[").replace("]", r"\]")):
            user_point(space, {**point, name: bool(point[name])})
