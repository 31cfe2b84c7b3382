"""Input normalization: what a resent history is stored as, and that it expands back."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agui_store.codec.ingest import canonical_bytes
from agui_store.history.blobs import digest
from agui_store.history.normalize import (
    expand,
    full_chunk_addresses,
    normalize,
    normalize_input,
    refs_problem,
)
from agui_store.protocol.js import json_equal
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


def _pieces(base: list[Any], cuts: list[int]) -> list[tuple[bytes, int]]:
    """``base`` stored in pieces of the given sizes, as a checkpoint stores its chunks."""
    out, at = [], 0
    for size in cuts:
        out.append((digest(canonical_bytes(base[at : at + size])), size))
        at += size
    return out


@given(messages, messages, st.integers(0, 6), st.data())
def test_a_history_compared_with_the_addresses_of_its_pieces_normalizes_as_compared_whole(
    base: list[Any], extra: list[Any], cut: int, data: st.DataObject
) -> None:
    # A store compares a resent history with the chunks it keeps of the parent's view:
    # the same references as comparing the lists, whatever the pieces and the values
    # (true against 1, 1 against 1.0: texts that differ fall back to the comparison).
    sent = copy.deepcopy(base[:cut]) + extra
    if sent and data.draw(st.booleans()):
        victim = data.draw(st.integers(0, len(sent) - 1))
        sent[victim] = {**sent[victim], "content": data.draw(st.sampled_from([True, 1, 1.0]))}
    sizes: list[int] = []
    while sum(sizes) < len(base):
        sizes.append(data.draw(st.integers(1, len(base) - sum(sizes))))
    whole = normalize(sent, base)
    assert normalize(sent, base, pieces=_pieces(base, sizes)) == whole
    # With the sent list's own chunk addresses given (computed when the input was
    # validated), for chunks of any size: the same references.
    chunk = data.draw(st.integers(1, 4))
    known = full_chunk_addresses(sent, chunk)
    assert normalize(sent, base, pieces=_pieces(base, sizes), sent_chunks=known) == whole


@given(messages, st.integers(1, 4))
def test_full_chunk_addresses_are_those_a_checkpoint_stores_its_chunks_under(
    sent: list[Any], size: int
) -> None:
    known = full_chunk_addresses(sent, size)
    assert list(known) == [(start, size) for start in range(0, len(sent) - size + 1, size)]
    for (start, count), address in known.items():
        assert address == _pieces(sent[start:], [count])[0][0]


def test_a_history_that_matches_its_pieces_is_shared_without_reading_the_base() -> None:
    base = [{"id": f"m{i}", "role": "user", "content": f"turn {i}"} for i in range(5)]
    sent = [*copy.deepcopy(base), {"id": "new", "role": "user", "content": "next"}]

    class Unreadable(list[Any]):
        def __iter__(self) -> Any:
            raise AssertionError("the base list was read")

    refs = normalize(sent, Unreadable(base), lambda mid: None, _pieces(base, [2, 3]))
    assert refs == [[0, 5], sent[5]]


@given(messages, messages, st.integers(0, 6), st.booleans())
def test_every_stored_form_the_store_writes_passes_the_check_an_import_holds_one_to(
    base: list[Any], extra: list[Any], cut: int, same_state: bool
) -> None:
    state = {"n": 1}
    sent = {"messages": copy.deepcopy(base[:cut]) + extra, "state": state if same_state else {}}
    stored = normalize_input(sent, base, state)
    if stored is not None:
        assert refs_problem(stored[1]) is None


def test_a_stored_form_the_store_never_writes_is_named() -> None:
    for refs, words in [
        ([[0, 1]], "is not"),
        ({}, "is not"),
        ({"messages": [[0, 1]], "extra": 1}, "is not"),
        ({"state": "child"}, "\"state\" is 'child'"),
        ({"messages": []}, "\"messages\" is not a list"),
        ({"messages": [[-1, 2]]}, "the range [-1, 2]"),
        ({"messages": [[0, 0]]}, "the range [0, 0]"),
        ({"messages": [[0, True]]}, "the range [0, True]"),
        ({"messages": [[0, 1, 2]]}, "the range [0, 1, 2]"),
    ]:
        found = refs_problem(refs)
        assert found is not None and words in found, (refs, found)
