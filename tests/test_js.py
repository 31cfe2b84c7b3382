"""The JavaScript value rules shared by the ports: json_equal against JavaScript's equality of
JSON values, written out here."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agui_store.protocol.js import json_equal
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
