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


def by_the_loop(sent: list[Any], base: list[Any]) -> list[Any] | None:
    """The definition: each message refers to the first of base with its id, when equal."""
    first: dict[Any, int] = {}
    for j, m in enumerate(base):
        if isinstance(m.get("id"), str):
            first.setdefault(m["id"], j)
    out: list[Any] = []
    shared = 0
    for m in sent:
        at = first.get(m.get("id"))
        if at is not None and json_equal(base[at], m):
            if out and isinstance(out[-1], list) and sum(out[-1]) == at:
                out[-1][1] += 1
            else:
                out.append([at, 1])
            shared += 1
        else:
            out.append(m)
    return out if shared else None


@given(messages, messages, st.integers(0, 6), st.data())
def test_a_resent_history_normalizes_as_the_loop_and_expands_back(
    base: list[Any], extra: list[Any], cut: int, data: st.DataObject
) -> None:
    sent = copy.deepcopy(base[:cut]) + extra  # a client resending (part of) the history
    if sent and data.draw(st.booleans()):  # a value JavaScript tells apart: true is not 1
        victim = data.draw(st.integers(0, len(sent) - 1))
        sent[victim] = {**sent[victim], "content": data.draw(st.sampled_from([True, 1, 1.0]))}
    refs = normalize(sent, base)
    assert refs == by_the_loop(sent, base)
    assert expand(refs if refs is not None else sent, base) == sent
