"""The JavaScript value rules shared by the ports: json_equal against JavaScript's equality of
JSON values, written out here; ``String()`` and ``undefined`` against node's."""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_store.protocol import patch
from agui_store.protocol.js import (
    UNDEFINED,
    ToPrimitiveError,
    check_stringable,
    js_join,
    js_string,
    json_equal,
)
from tests.oracle_client import Oracle
from tests.strategies import json_values


def javascript_equal(a: Any, b: Any) -> bool:
    """Deep equality of JSON values as JavaScript has it, one rule at a time: a boolean equals
    only the same boolean, numbers equal by value whatever their Python type, objects by
    their keys (in any order) and values, arrays element by element, anything else by type
    and value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(javascript_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(javascript_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _twist(value: Any, data: st.DataObject) -> Any:
    """A copy that JavaScript may or may not call equal: numbers as floats or booleans, keys
    in another order, a leaf changed."""
    if isinstance(value, dict):
        keys = data.draw(st.permutations(list(value)))
        return {k: _twist(value[k], data) for k in keys}
    if isinstance(value, list):
        return [_twist(v, data) for v in value]
    if isinstance(value, bool):
        return data.draw(st.sampled_from([value, int(value)]))
    if isinstance(value, int) and abs(value) < 2**53:
        return data.draw(st.sampled_from([value, float(value), value == 1, value + 1]))
    return value


@given(json_values, st.data())
def test_json_equal_agrees_with_javascripts_rules_written_out(
    value: Any, data: st.DataObject
) -> None:
    other = _twist(value, data)
    assert json_equal(value, other) == javascript_equal(value, other)
    assert json_equal(value, value) and json_equal(other, other)


def test_json_equal_tells_what_javascript_tells() -> None:
    assert json_equal({"a": 1, "b": [2]}, {"b": [2.0], "a": 1})  # numbers by value, any key order
    assert not json_equal({"a": True}, {"a": 1})  # Python's == says equal
    assert not json_equal([0], [False])
    assert json_equal(-0.0, 0)
    assert not json_equal({"a": 1}, {"a": 1, "b": None})


# JSON has no undefined: this string stands for it on the way to node. It is longer than any
# string json_values draws, so no drawn value is taken for it.
_UNDEFINED_MARKER = "\x00undefined, as the test sends it\x00"

# Numbers whose spelling JavaScript decides: exponents from 1e21 and below 1e-6, -0, the
# smallest double, integers past 2**53 (rounded to a double), past the doubles (Infinity).
_numbers = st.sampled_from(
    [1e21, 1e20, 1e-7, 1e-6, -0.0, 5e-324, 0.1 + 0.2, 1.5e300, 123456789012345680000]
) | st.integers(min_value=-(10**400), max_value=10**400)
_elements = json_values | _numbers | st.just(UNDEFINED) | st.just({"toString": 1})
_strung = st.one_of(
    _elements,
    st.lists(_elements | st.lists(_elements, max_size=3), max_size=5),
)


def _for_node(value: Any) -> Any:
    if value is UNDEFINED:
        return _UNDEFINED_MARKER
    if isinstance(value, list):
        return [_for_node(item) for item in value]
    return value


@pytest.mark.oracle
@given(st.lists(_strung, min_size=1, max_size=8))
def test_js_string_spells_every_value_as_javascripts_string_does(
    oracle: Oracle, values: list[Any]
) -> None:
    answer = oracle.ask(
        {"op": "string", "values": [_for_node(v) for v in values], "undefined": _UNDEFINED_MARKER}
    )
    assert answer["ok"], answer
    for value, spelled in zip(values, answer["strings"], strict=True):
        if isinstance(spelled, dict):  # node threw
            with pytest.raises(ToPrimitiveError) as raised:
                check_stringable(value)
            assert str(raised.value) == spelled["error"]
        else:
            check_stringable(value)
            assert js_string(value) == spelled


def test_js_string_and_js_join_differ_on_null_and_undefined_only() -> None:
    assert [js_string(v) for v in (None, UNDEFINED, True, -0.0, 1e21, math.nan)] == [
        "null", "undefined", "true", "0", "1e+21", "NaN",
    ]
    assert js_string(float("-inf")) == "-Infinity" and js_string(10**400) == "Infinity"
    assert js_string([None, UNDEFINED, [None], {"a": 1}, 1.0]) == ",,,[object Object],1"
    assert js_join([None, UNDEFINED, "a", False], "-") == "--a-false"
    assert js_string({"toString": 1}) == "[object Object]"  # the lenient reading


def test_undefined_is_one_falsy_value_that_copies_and_pickles_as_itself() -> None:
    assert repr(UNDEFINED) == "UNDEFINED" and f"{UNDEFINED}" == "undefined" and not UNDEFINED
    assert copy.deepcopy(UNDEFINED) is UNDEFINED
    assert pickle.loads(pickle.dumps({"x": [UNDEFINED]}))["x"][0] is UNDEFINED
    assert patch.UNDEFINED is UNDEFINED  # apply_patch's result is the same value
