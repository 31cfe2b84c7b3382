"""Input normalization: what a resent history is stored as, and that it expands back."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agui_store.js import json_equal
from agui_store.normalize import expand, normalize
from tests.strategies import json_values

IDS = ["m1", "m2", "m3", "m4"]
messages = st.lists(
    st.fixed_dictionaries(
        {"id": st.sampled_from(IDS), "role": st.sampled_from(["user", "assistant"])},
        optional={"content": json_values},
    ),
    max_size=6,
)


@given(messages, messages, st.integers(0, 6), st.data())
def test_a_resent_history_expands_back_exactly_as_sent(
    base: list[Any], extra: list[Any], cut: int, data: st.DataObject
) -> None:
    sent = copy.deepcopy(base[:cut]) + extra  # a client resending (part of) the history
    if sent and data.draw(st.booleans()):  # a value JavaScript tells apart: true is not 1
        victim = data.draw(st.integers(0, len(sent) - 1))
        sent[victim] = {**sent[victim], "content": data.draw(st.sampled_from([True, 1, 1.0]))}
    refs = normalize(sent, base)
    back = expand(refs, base) if refs is not None else sent
    # As JavaScript compares them: Python's == would take True for 1.
    assert json_equal(back, sent)
    if refs is not None:
        assert any(isinstance(r, list) for r in refs)
        for r in refs:
            assert not isinstance(r, list) or (r[1] > 0 and 0 <= r[0] <= r[0] + r[1] <= len(base))


@given(messages.filter(lambda ms: ms and len({m["id"] for m in ms}) == len(ms)))
def test_the_whole_history_resent_is_one_reference_when_its_ids_are_unique(
    base: list[Any],
) -> None:
    assert normalize(copy.deepcopy(base), base) == [[0, len(base)]]
