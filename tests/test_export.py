"""Exported configs are data rendered as literals: nothing stored can inject code."""

from __future__ import annotations

import ast
import json
import math
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.export import ExportError, export_config, helion_python, literal, triton_python

NASTY = [
    "it's",
    'say "hi"',
    "line one\nline two",
    "tab\tand\\backslash",
    "'); import os; os.system('echo pwned'); ('",
    '"""; raise SystemExit; """',
    "\r\n\x00\u2028 unicode é ✓",
]


class _FakeConfig:
    """Stands in for helion.Config: records its keyword arguments."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


@pytest.fixture
def fake_helion(monkeypatch):
    module = types.ModuleType("helion")
    module.Config = _FakeConfig
    monkeypatch.setitem(sys.modules, "helion", module)
    return module


def _exec(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "<export>", "exec"), namespace)
    return namespace


# -- literal -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [object(), {1, 2}, b"bytes", 1 + 2j, frozenset(), type, print,
                                   [1, object()], [[{"nested": set()}]], {1: "a"},
                                   {"a": object()}])
def test_literal_refuses_what_is_not_a_json_value(value):
    with pytest.raises(ExportError):
        literal(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, [1.0, math.nan]])
def test_literal_refuses_non_finite_numbers(value):
    with pytest.raises(ExportError):
        literal(value)


@pytest.mark.parametrize("value", [None, True, False, 0, -7, 2**80, 0.1, -1e-300, 1.5e300, "", *NASTY,
                                   [], [None, [True, [1, "x"]]], ["a'b", 'c"d'], {}, {"a": 1},
                                   {"it's": [1, {"b": None}]}])
def test_literal_round_trips(value):
    text = literal(value)
    back = ast.literal_eval(text)
    assert back == value and type(back) is type(value)
    if isinstance(value, list):
        assert [type(x) for x in back] == [type(x) for x in value]


def test_literal_renders_tuples_as_lists_and_keeps_bools_apart_from_ints():
    assert ast.literal_eval(literal((1, 2))) == [1, 2]
    assert literal(True) == "True" and literal(1) == "1"
    assert literal(False) == "False" and literal(0) == "0"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_literal_round_trips_any_json_value(value):
    back = ast.literal_eval(literal(value))
    assert back == value
    assert json.dumps(back) == json.dumps(value)  # bools stay bools, ints stay ints


# -- helion --------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["x); import os; (", "class", "with space", "1abc", "a-b", "", "None"])
def test_helion_export_refuses_keys_that_are_not_identifiers(key, fake_helion):
    with pytest.raises(ExportError):
        helion_python({"num_warps": 4, key: 1}, "softmax")
    with pytest.raises(ExportError):
        export_config({key: 1}, family="helion", kernel="softmax", fmt="python")


def test_helion_export_refuses_non_string_keys(fake_helion):
    with pytest.raises(ExportError):
        helion_python({1: 2}, "softmax")


def test_helion_strings_round_trip_through_the_code(fake_helion):
    config = {"pid_type": NASTY[4], "indexing": NASTY, "note": NASTY[2], "num_warps": 4, "flags": [True, None, 0]}
    code = helion_python(config, "softmax")
    namespace = _exec(code)
    assert set(namespace) == {"__builtins__", "helion", "CONFIG"}  # nothing else was defined or imported
    assert isinstance(namespace["CONFIG"], _FakeConfig)
    assert namespace["CONFIG"].kwargs == config
    assert [type(v) for v in namespace["CONFIG"].kwargs["flags"]] == [bool, type(None), int]


def test_helion_export_with_the_real_module():
    import helion

    config = {"block_sizes": [32], "reduction_loops": [None], "num_warps": 4, "pid_type": "flat",
              "load_eviction_policies": ["", "first"], "range_flattens": [False]}
    namespace = _exec(export_config(config, family="helion", kernel="softmax", fmt="python"))
    assert namespace["CONFIG"] == helion.Config(**config)


@pytest.mark.parametrize("family", ["helion", "triton"])
def test_kernel_name_from_the_database_cannot_inject_code(fake_helion, family):
    kernel = "softmax\nINJECTED = __import__('os').getpid()\n#"
    config = {"num_warps": 4, "num_stages": 2, "BLOCK_SIZE": 256} if family == "triton" else {"num_warps": 4}
    namespace = _exec(export_config(config, family=family, kernel=kernel, fmt="python"))
    assert "INJECTED" not in namespace


# -- triton --------------------------------------------------------------------------------------


def test_triton_export_round_trips_strings_and_odd_keys():
    import triton

    config = {"BLOCK_SIZE": 1024, "x); import os; (": NASTY[4], "MODE": NASTY[2], "num_warps": 8, "num_stages": 2}
    namespace = _exec(triton_python(config, "softmax-triton"))
    assert set(namespace) == {"__builtins__", "triton", "CONFIG"}
    out = namespace["CONFIG"]
    assert isinstance(out, triton.Config)
    assert out.kwargs == {"BLOCK_SIZE": 1024, "x); import os; (": NASTY[4], "MODE": NASTY[2]}
    assert out.num_warps == 8 and out.num_stages == 2


def test_json_export_and_formats():
    config = {"BLOCK_SIZE": 1024, "num_warps": 8, "num_stages": 2, "s": NASTY[2]}
    assert json.loads(export_config(config, family="triton", kernel="k", fmt="json")) == config
    with pytest.raises(ExportError, match="format"):
        export_config(config, family="triton", kernel="k", fmt="yaml")
