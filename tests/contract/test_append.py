"""Append on every backend: lossless read-back, runs and their statuses, streaming, atomicity."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

import agui_store
from agui_store.errors import (
    AguiStoreError,
    AmbiguousRunError,
    InvalidEventError,
    SequenceError,
)
from tests.backends import dump
from tests.conftest import fixture_params
from tests.streams import run, say


@pytest.fixture
def store(store_location: str) -> Any:
    """A store on each backend in turn (tests/contract/conftest.py)."""
    with agui_store.open(store_location) as s:
        yield s


# --- append and read back ---------------------------------------------------------------


@pytest.mark.parametrize("events", fixture_params())
def test_every_recorded_event_reads_back_json_equal(
    store: Any, events: list[dict[str, Any]]
) -> None:
    result = store.append(json.loads(json.dumps(events)))
    assert result.event_count == len(events)
    starts = [i for i, e in enumerate(events) if e["type"] == "RUN_STARTED"] + [len(events)]
    for a, b in itertools.pairwise(starts):
        rs = events[a]
        assert store.events(rs["runId"], thread_id=rs["threadId"]) == events[a:b]


def test_sse_text_appends_like_the_events_it_carries(store: Any) -> None:
    events = run("t", "r1", *say("m1", "hello\nworld"))
    sse = "".join(f"data: {json.dumps(e)}\r\n\r\n" for e in events)
    store.append(": keep-alive\n\n" + sse)
    assert store.events("r1") == events


def test_official_pydantic_events_are_accepted_without_depending_on_pydantic(store: Any) -> None:
    core = pytest.importorskip("ag_ui.core")
    events = [
        core.RunStartedEvent(thread_id="t", run_id="r1"),
        core.TextMessageStartEvent(message_id="m1", role="assistant"),
        core.TextMessageContentEvent(message_id="m1", delta="hi"),
        core.TextMessageEndEvent(message_id="m1"),
        core.RunFinishedEvent(thread_id="t", run_id="r1"),
    ]
    store.append(events)
    assert store.checkout("r1").messages == [{"id": "m1", "role": "assistant", "content": "hi"}]


# --- runs, status, streaming ------------------------------------------------------------


def test_a_live_run_streamed_over_several_appends_is_one_run(store: Any) -> None:
    store.append(run("t", "r1", {"type": "TEXT_MESSAGE_START", "messageId": "m"}, finish=False))
    assert store.get_run("r1").status == "incomplete"
    store.append([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a"}])
    store.append([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "b"}], thread_id="t")
    store.append(
        [
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        ]
    )
    r = store.get_run("r1")
    assert (r.status, r.event_count) == ("finished", 6)
    assert store.checkout("r1").messages[0]["content"] == "ab"


def test_a_continuation_is_checked_against_the_recorded_run(store: Any) -> None:
    store.append(run("t", "r1", finish=False))
    with pytest.raises(SequenceError) as e:
        store.append([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"}])
    assert e.value.index == 0 and e.value.event_type == "TEXT_MESSAGE_CONTENT"


def test_a_new_run_leaves_an_unfinished_one_incomplete(store: Any) -> None:
    store.append(run("t", "r1", {"type": "TEXT_MESSAGE_START", "messageId": "m"}, finish=False))
    store.append(run("t", "r2", *say("m2", "fresh")))
    assert [(r.run_id, r.status) for r in store.runs("t")] == [
        ("r1", "incomplete"),
        ("r2", "finished"),
    ]


def test_run_outcomes_become_statuses(store: Any) -> None:
    store.append(run("t", "a"))
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "b"},
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "b",
                "outcome": {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approve"}]},
            },
        ]
    )
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "c"},
            {"type": "RUN_ERROR", "message": "boom"},
        ]
    )
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "d"},
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "d",
                "outcome": {"type": "cancelled"},
            },
        ]
    )
    assert [r.status for r in store.runs("t")] == ["finished", "interrupted", "error", "cancelled"]
    assert store.checkout("b").interrupts == [{"id": "i1", "reason": "approve"}]


def test_a_late_run_error_after_run_finished_belongs_to_that_run(store: Any) -> None:
    store.append(run("t", "r1"))
    store.append([{"type": "RUN_ERROR", "message": "late"}], thread_id="t")
    r = store.get_run("r1")
    assert (r.status, r.event_count) == ("error", 3)


def test_a_stream_that_begins_with_run_error_gets_a_synthetic_run(store: Any) -> None:
    result = store.append([{"type": "RUN_ERROR", "message": "failed before start"}], thread_id="t")
    (r,) = store.runs("t")
    assert r.synthetic and r.status == "error" and r.run_id == result.run_ids[0]


def test_a_run_id_is_recorded_once_per_thread(store: Any, store_location: str) -> None:
    store.append(run("t", "r1"))
    before = dump(store_location)
    with pytest.raises(InvalidEventError, match="already recorded") as e:
        store.append(run("t", "r1"))
    assert e.value.index == 0 and e.value.path == "$.runId"
    assert dump(store_location) == before


def test_the_same_run_id_in_two_threads_is_two_runs_and_ambiguous_alone(store: Any) -> None:
    store.append(run("a", "r1", *say("m", "in a")))
    store.append(run("b", "r1", *say("m", "in b")))
    with pytest.raises(AmbiguousRunError, match="'a', 'b'"):
        store.checkout("r1")
    assert store.checkout("r1", thread_id="b").messages[0]["content"] == "in b"


def test_out_of_sequence_streams_are_kept_when_the_check_is_off(store: Any) -> None:
    events = run("t", "r1", {"type": "TEXT_MESSAGE_END", "messageId": "never-opened"})
    with pytest.raises(SequenceError):
        store.append(events)
    store.append(events, check_sequence=False)
    assert store.events("r1") == events


# --- cursors and inputs -----------------------------------------------------------------


def test_events_after_a_cursor_are_those_appended_since_and_none_twice(store: Any) -> None:
    first = store.append(run("t", "r1", *say("m1", "a"), finish=False))
    assert first.last_seq is not None
    other = store.append(run("u", "x1", *say("n1", "elsewhere")))
    second = store.append(
        [
            {"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m2"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        ],
        thread_id="t",
    )
    assert second.first_seq == other.last_seq + 1
    later = store.events("r1", thread_id="t", after=first.last_seq)
    assert [e["type"] for e in later] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert store.events("r1", thread_id="t", after=second.last_seq) == []
    whole = store.events("r1", thread_id="t")
    assert whole[-3:] == later and len(whole) == 4 + 3


def test_events_after_any_cursor_are_the_runs_events_after_it_whichever_batch_it_falls_in(
    store: Any,
) -> None:
    # A live run in batches of 2, 3 and 2 events, another thread's run between its batches:
    # its sequence numbers have a gap, and cursors fall before, inside, between and past them.
    events = run("t", "r", *say("a", "one"), *say("b", "two"), finish=False)
    assert len(events) == 7
    seqs: list[int] = []
    for n, batch in enumerate((events[:2], events[2:5], events[5:])):
        if n == 1:
            store.append(run("u", "other", *say("c", "elsewhere")))
        last = store.append(batch, thread_id="t").last_seq
        seqs += range(last - len(batch) + 1, last + 1)
    for after in range(0, seqs[-1] + 2):
        expected = [e for e, seq in zip(events, seqs) if seq > after]
        assert store.events("r", thread_id="t", after=after) == expected, after


def test_a_recorded_input_starts_the_run_from_what_the_client_sent(store: Any) -> None:
    user = {"id": "u1", "role": "user", "content": "hi"}
    store.append(
        run("t", "r1", *say("a1", "hello")),
        input={
            "threadId": "t",
            "runId": "r1",
            "messages": [user],
            "state": {"n": 1},
            "tools": [],
            "context": [],
        },
    )
    co = store.checkout("r1")
    assert co.messages == [user, {"id": "a1", "role": "assistant", "content": "hello"}]
    assert co.state == {"n": 1}
    assert store.input("r1")["messages"] == [user]


# --- bad input leaves the file as it was ------------------------------------------------

BAD_BATCHES: list[tuple[Any, dict[str, Any]]] = [
    ('[{"type": "RUN_STARTED", "threadId": "t", "runId": "x"}, {"type": ', {}),
    (
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "x"}, {"type": "TEXT_MESSAGE_START"}],
        {"index": 1, "event_type": "TEXT_MESSAGE_START"},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": 7, "delta": "x"},
        ],
        {"index": 1, "path": "$.messageId"},
    ),
    (
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "x"}, ["not", "an", "object"]],
        {"index": 1},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "RUN_STARTED", "threadId": "t", "runId": "y"},
        ],
        {"index": 1, "event_type": "RUN_STARTED"},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "RUN_STARTED", "threadId": "other", "runId": "y"},
        ],
        {"index": 1, "path": "$.threadId"},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "CUSTOM", "name": "n", "value": json.loads("[" * 200 + "]" * 200)},
        ],
        {"index": 1},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "CUSTOM", "name": "n", "value": float("nan")},
        ],
        {"index": 1},
    ),
]


@pytest.mark.parametrize(("batch", "where"), BAD_BATCHES)
def test_bad_input_names_where_and_leaves_the_file_unchanged(
    store: Any, store_location: str, batch: Any, where: dict[str, Any]
) -> None:
    store.append(run("t", "r0", *say("m", "before")))
    before = dump(store_location)
    with pytest.raises(AguiStoreError) as e:
        store.append(batch)
    assert isinstance(e.value, ValueError)
    for attr, value in where.items():
        assert getattr(e.value, attr) == value, str(e.value)
    assert dump(store_location) == before


def test_a_failure_late_in_a_multi_run_batch_writes_none_of_it(
    store: Any, store_location: str
) -> None:
    store.append(run("t", "r0"))
    before = dump(store_location)
    batch = run("t", "r1") + run("t", "r2") + run("t", "r0")  # r0 again: refused at index 4
    with pytest.raises(InvalidEventError) as e:
        store.append(batch)
    assert e.value.index == 4
    assert dump(store_location) == before


def test_an_id_every_backend_can_index_is_kept_and_a_longer_one_refused_by_name(
    store: Any, store_location: str
) -> None:
    """Ids are keys of unique indexes, and PostgreSQL's hold about 2,700 bytes: an id of
    more than 2,048 bytes is refused on every backend alike, so that a store copies to any
    other."""
    longest = "é" * 1024  # 2,048 bytes
    store.append(run(longest, longest, *say("m", "kept")))
    assert store.get_run(longest, thread_id=longest) is not None
    before = dump(store_location)
    too_long = longest + "x"
    for events, named, where in [
        (run(too_long, "r"), {}, "$.threadId"),
        (run("t", too_long), {}, "$.runId"),
        (run("t", "r"), {"scope": "o" * 2049}, "scope"),
    ]:
        with pytest.raises(InvalidEventError, match=r"is 2,049 bytes long .* at most 2,048") as e:
            store.append(events, **named)
        assert where in str(e.value)
    assert dump(store_location) == before
