"""The JavaScript value rules shared by the ports: json_equal's fast paths against its walk."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agui_store.protocol.js import _json_equal, json_equal
from tests.strategies import json_values


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
def test_json_equal_agrees_with_the_walk_it_shortcuts(value: Any, data: st.DataObject) -> None:
    other = _twist(value, data)
    assert json_equal(value, other) == _json_equal(value, other)
    assert json_equal(value, value) and json_equal(other, other)


def test_json_equal_tells_what_javascript_tells() -> None:
    assert json_equal({"a": 1, "b": [2]}, {"b": [2.0], "a": 1})  # numbers by value, any key order
    assert not json_equal({"a": True}, {"a": 1})  # Python's == says equal
    assert not json_equal([0], [False])
    assert json_equal(-0.0, 0)
    assert not json_equal({"a": 1}, {"a": 1, "b": None})
