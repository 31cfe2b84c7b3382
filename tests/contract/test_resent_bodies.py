"""Request bodies that resend the history (HttpAgent), read without the messages they repeat.

A store remembers the last body of a thread: the text of its messages array and what it
derived from those messages. The next body is compared with it byte for byte and only the
rest is read (:mod:`agui_store.history.resent_bodies`). These tests hold that path to the full read:
the same sequences of bodies (extended, edited in the middle, shortened, written otherwise,
invalid, too deep) give the same results, errors and stored rows through a store that
remembers and through one that reads every body whole; and the full read's work on the
resent messages is really skipped.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import testing
from agui_store.errors import InvalidEventError
from tests.backends import checked
from tests.contract.conftest import StoreLocations
from tests.request_bodies import (
    CHUNK,
    MAX_DEPTH,
    body_text,
    encode_messages,
    nested,
    read_back,
    refusal_and_rows,
    reply,
    request,
    run_events,
    texts_parsed,
    user,
)

#: Messages no RunAgentInput may hold, and one nested deeper than MAX_DEPTH allows.
INVALID = [
    {"id": 5, "role": "user", "content": "an id that is not a string"},
    {"id": "x", "role": "tool", "content": "a tool message without its call"},
    "not an object",
    {"id": "deep", "role": "user", "content": "x", "extra": nested(MAX_DEPTH)},
]

# One step of a client: what it sends next, given the history it holds.
STEPS = st.one_of(
    st.tuples(st.just("next")),  # the history and a new message: HttpAgent's every run
    st.tuples(st.just("edit"), st.integers(0), st.text(max_size=5)),  # a message changed
    st.tuples(st.just("remove"), st.integers(0)),  # a message removed from the middle
    st.tuples(st.just("keys"), st.integers(0)),  # one message written with its keys reversed
    st.tuples(st.just("spaces")),  # the whole body written with spaces (json.dumps)
    st.tuples(st.just("spaced_message"), st.integers(0)),  # one message with spaces in it
    st.tuples(st.just("shorter"), st.integers(0)),  # the history cut short
    st.tuples(st.just("activity")),  # an activity message (no lineage id)
    st.tuples(st.just("parent")),  # the body names its parent run
    st.tuples(st.just("bad"), st.sampled_from(INVALID)),  # an invalid message added
    st.tuples(st.just("break"), st.integers(0), st.sampled_from(INVALID)),  # one replaced
    st.tuples(st.just("bad_text")),  # the added message's text is not JSON
)


def client_body(run: int, history: list[Any], step: tuple[Any, ...]) -> tuple[bytes, list[Any]]:
    """What the client sends for ``step``, and the messages it holds if the run is recorded."""
    kind = step[0]
    sent = list(history)
    new = user(1000 + run)
    if kind == "edit" and sent:
        at = step[1] % len(sent)
        sent[at] = {**sent[at], "content": f"edited {step[2]}"}
    elif kind == "remove" and sent:
        del sent[step[1] % len(sent)]
    elif kind == "shorter" and sent:
        sent = sent[: step[1] % len(sent)]
    elif kind == "activity":
        new = {"id": f"act{run}", "role": "activity", "activityType": "plan", "content": {"n": run}}
    elif kind == "bad":
        new = step[1]
    elif kind == "break" and sent:
        sent[step[1] % len(sent)] = step[2]
    sent.append(new)
    extra = {"parentRunId": f"run-{run - 1}"} if kind == "parent" and run else {}
    if kind == "spaces":
        text = json.dumps(request(run, sent, **extra)).encode()
    elif kind == "keys" and sent:
        text = body_text(run, sent, encode_messages(sent, reverse=step[1] % len(sent)), **extra)
    elif kind == "spaced_message":
        text = body_text(run, sent, encode_messages(sent, spaced=step[1] % len(sent)), **extra)
    elif kind == "bad_text":
        text = body_text(run, sent, encode_messages(sent)[:-1] + b',{"id": nope}]', **extra)
    else:
        text = body_text(run, sent, **extra)
    return text, sent


def outcome(store: agui_store.Store, run: int, text: bytes) -> str:
    try:
        result = store.append(run_events(run), input=text)
    except InvalidEventError as e:
        return f"refused: {e}"
    return f"appended {result.run_ids}"


def stored_inputs(store: agui_store.Store) -> list[Any]:
    """The rows as written: input text, its references to the parent's view, their digest."""
    return (
        testing.connection(store)
        .execute(
            "SELECT run_id, parent, lineage, parent_run_id, input, input_refs, input_hash "
            "FROM runs ORDER BY id"
        )
        .fetchall()
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    start=st.integers(min_value=CHUNK, max_value=2 * CHUNK + 20),
    steps=st.lists(STEPS, max_size=8),
)
def test_a_store_that_remembers_bodies_records_exactly_what_reading_them_whole_records(
    new_location: StoreLocations, start: int, steps: list[tuple[Any, ...]]
) -> None:
    # Two ordinary runs first: the second body is read without the first one's messages
    # (assert_same_records checks it).
    assert_same_records(new_location, start, [("next",), ("next",), *steps])


@pytest.mark.parametrize(
    "step", [("remove", 71), ("edit", 71, "x"), ("shorter", 72), ("break", 71, INVALID[0])]
)
def test_a_history_changed_after_an_activity_message_is_placed_as_when_read_whole(
    new_location: StoreLocations, step: tuple[Any, ...]
) -> None:
    """An activity message has no lineage id: the ids of the messages a body repeats are
    then not the first ids remembered (the reply after it is removed, edited, cut off)."""
    assert_same_records(new_location, 70, [("activity",), ("next",), step, ("next",)])


def assert_same_records(
    new_location: StoreLocations, start: int, steps: list[tuple[Any, ...]]
) -> None:
    """The client's bodies for ``steps``, from a history of ``start`` messages, give the
    same outcomes, records and rows in a remembering store and in one reading them whole."""
    history: list[Any] = [user(i) for i in range(start)]
    with (
        agui_store.open(new_location(), max_depth=MAX_DEPTH) as remembering,
        agui_store.open(new_location(), max_depth=MAX_DEPTH) as whole,
    ):
        testing.read_bodies_whole(whole)
        for run, step in enumerate(steps):
            text, sent = client_body(run, history, step)
            with texts_parsed() as parsed:
                got = outcome(remembering, run, text)
            assert got == outcome(whole, run, text), (run, step)
            if run == 1 and step == ("next",):  # after a first body of `start` messages
                assert text not in parsed and len(parsed) >= 1  # not read whole
            if got.startswith("appended"):
                history = [*sent, reply(run)]
        assert read_back(remembering) == read_back(whole)
        assert checked(remembering) and checked(whole)
        if new_location.backend != "postgres":
            assert stored_inputs(remembering) == stored_inputs(whole)


@pytest.mark.parametrize(
    "bad",
    [*INVALID, nested(2)],
    ids=["id-not-string", "tool-without-call", "not-an-object", "too-deep", "an-array"],
)
def test_a_bad_message_after_a_resent_history_is_refused_as_reading_the_whole_body_refuses_it(
    new_location: StoreLocations, bad: Any
) -> None:
    history = [user(i) for i in range(2 * CHUNK)]
    later = [*history, reply(0)]
    texts = [body_text(0, history), body_text(1, [*later, bad])]
    remembered = refusal_and_rows(new_location(), texts, remember=True)
    expected = refusal_and_rows(new_location(), texts, remember=False)
    assert remembered == expected
    assert f"$.messages[{len(later)}]" in remembered[0]
