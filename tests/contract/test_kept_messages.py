"""A store read often keeps the decoded messages of the flat message blobs it reads again
(:mod:`agui_store.engine.trust`): what it hands out stays the caller's, whatever the caller
or an erasure does next."""

from __future__ import annotations

import gc
import itertools
import tracemalloc
from typing import Any

import pytest

import agui_store
from agui_store import RunNotFoundError, testing
from agui_store.engine import trust
from tests.conftest import fixture_params

THREAD = "t"


def short_turns(store: agui_store.Store, runs: int, *, thread: str = THREAD) -> None:
    """``runs`` runs of a user's question and a streamed answer, each sent with the
    client's whole history: full chunks of flat messages, and a tail."""
    history: list[dict[str, Any]] = []
    for n in range(runs):
        run = f"r{n}"
        history.append({"id": f"u-{thread}-{n}", "role": "user", "content": f"question {n}"})
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": thread, "runId": run},
                {"type": "TEXT_MESSAGE_START", "messageId": f"a-{thread}-{n}", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"a-{thread}-{n}", "delta": f"{n}!"},
                {"type": "TEXT_MESSAGE_END", "messageId": f"a-{thread}-{n}"},
                {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
            ],
            input={"threadId": thread, "runId": run, "messages": history},
        )
        history.append({"id": f"a-{thread}-{n}", "role": "assistant", "content": f"{n}!"})


def test_a_view_read_again_and_again_is_the_same_and_each_copy_is_its_callers(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        short_turns(store, 150)
        first, second, third = (store.checkout("r149", thread_id=THREAD) for _ in range(3))
        assert testing.kept_message_blobs(store) > 0
        assert first.messages == second.messages == third.messages
        assert first.messages == testing.replayed_view(store, "r149", thread_id=THREAD).messages
        for changed in (second, third):
            changed.messages[0]["content"] = "changed"
            changed.messages[1]["extra"] = 1
            del changed.messages[2]["role"]
            changed.messages.pop()
        assert store.checkout("r149", thread_id=THREAD).messages == first.messages
        assert store.checkout("r120", thread_id=THREAD).messages == first.messages[:242]


@pytest.mark.parametrize("events", fixture_params())
def test_every_run_of_every_recording_reads_the_same_every_time_and_its_copies_are_apart(
    store_location: str, events: list[dict[str, Any]]
) -> None:
    with agui_store.open(store_location) as store:
        store.append(events)
        runs = [(e["threadId"], e["runId"]) for e in events if e["type"] == "RUN_STARTED"]
        for thread, run in runs:
            reads = [store.checkout(run, thread_id=thread) for _ in range(3)]
            assert reads[0].messages == reads[1].messages == reads[2].messages
            for a, b in itertools.combinations(reads, 2):
                assert all(x is not y for x, y in zip(a.messages, b.messages))


def test_messages_with_nested_values_are_decoded_on_every_read(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        for n in range(80):
            call = f"c{n}"
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": THREAD, "runId": f"r{n}"},
                    {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "look"},
                    {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": '{"n": 1}'},
                    {"type": "TOOL_CALL_END", "toolCallId": call},
                    {"type": "RUN_FINISHED", "threadId": THREAD, "runId": f"r{n}"},
                ]
            )
        reads = [store.checkout("r79", thread_id=THREAD) for _ in range(3)]
        assert testing.kept_message_blobs(store) == 0
        reads[1].messages[0]["toolCalls"][0]["function"]["name"] = "changed"
        assert store.checkout("r79", thread_id=THREAD).messages == reads[0].messages
        assert reads[0].messages[0]["toolCalls"][0]["function"]["name"] == "look"


def two_threads_read_three_times(store: agui_store.Store) -> None:
    """Two threads of 100 short turns, their newest runs read three times: the store keeps
    their messages."""
    short_turns(store, 100)
    short_turns(store, 100, thread="other")
    for _ in range(3):
        store.checkout("r99", thread_id=THREAD)
        store.checkout("r99", thread_id="other")
    assert testing.kept_message_blobs(store) > 0


def test_an_erasure_forgets_every_message_its_store_kept_decoded(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        two_threads_read_three_times(store)
        store.delete_thread(THREAD)
        assert testing.kept_message_blobs(store) == 0
        with pytest.raises(RunNotFoundError):
            store.checkout("r99", thread_id=THREAD)
        assert len(store.checkout("r99", thread_id="other").messages) == 200


def test_the_messages_a_store_keeps_take_no_more_memory_than_it_allows(
    store_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound is on what the kept messages take in memory, dicts and values, not on
    their text: a short message's dict takes several times its text."""
    monkeypatch.setattr(trust, "KEPT_BYTES", 256 << 10)
    with agui_store.open(store_location) as store:
        short_turns(store, 800)
        testing.forget(store)
        tracemalloc.start()
        try:
            for _ in range(3):
                store.checkout("r799", thread_id=THREAD)
            gc.collect()
            assert testing.kept_message_blobs(store) > 0
            held = tracemalloc.get_traced_memory()[0]
            testing.forget(store)
            freed = held - tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert 0 < freed <= trust.KEPT_BYTES


def test_an_erasure_by_another_store_is_forgotten_by_the_next_read_that_keeps_messages(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store, agui_store.open(store_location) as other:
        two_threads_read_three_times(store)
        other.delete_thread(THREAD)
        store.checkout("r99", thread_id="other")
        # SQLite's data version tells the store another connection wrote, and the erasure
        # log then that it erased; PostgreSQL tells every connection of the erasure, with
        # the next answer it reads.
        assert testing.kept_message_blobs(store) == 0
        with pytest.raises(RunNotFoundError):
            store.checkout("r99", thread_id=THREAD)
