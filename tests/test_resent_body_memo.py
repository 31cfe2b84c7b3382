"""Request bodies that resend the history (HttpAgent), read without the messages they repeat:
the memo itself, and its path on an SQLite file (tests/contract/test_resent_bodies.py holds
what every backend does with such bodies).

A store remembers the last body of a thread: the text of its messages array and what it
derived from those messages. The next body is compared with it byte for byte and only the
rest is read (:mod:`agui_store.history.resent_bodies`). These tests hold that path to the full read:
the same sequences of bodies (extended, edited in the middle, shortened, written otherwise,
invalid, too deep) give the same results, errors and stored rows through a store that
remembers and through one that reads every body whole; and the full read's work on the
resent messages is really skipped.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from array import array
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import testing
from agui_store.engine import checkpoints
from agui_store.errors import InvalidEventError
from agui_store.history import resent_bodies
from tests.backends import checked
from tests.request_bodies import (
    CHUNK,
    CLOCK,
    THREAD,
    body_text,
    encode_messages,
    read_back,
    refusal_and_rows,
    reply,
    request,
    run_events,
    texts_parsed,
    user,
)


def test_bodies_of_several_threads_read_at_once_record_what_reading_them_whole_records(
    tmp_path: Path,
) -> None:
    """Four clients append to their threads of one store at once (bodies are read outside
    the store's lock): each thread records what a store reading bodies whole records."""
    threads = [f"t{k}" for k in range(4)]

    def bodies(thread: str) -> list[tuple[list[dict[str, Any]], bytes]]:
        history = [user(i) for i in range(CHUNK + 10)]
        out = []
        for run in range(6):
            sent = [*history, user(1000 + run)]
            text = body_text(run, sent).replace(
                b'"threadId":"t"', f'"threadId":"{thread}"'.encode()
            )
            out.append((run_events(run, thread), text))
            history = [*sent, reply(run)]
        return out

    with (
        agui_store.open(str(tmp_path / "remembering.db")) as remembering,
        agui_store.open(str(tmp_path / "whole.db")) as whole,
    ):
        testing.read_bodies_whole(whole)

        def client(thread: str) -> None:
            for events, text in bodies(thread):
                remembering.append(events, input=text)

        with ThreadPoolExecutor(len(threads)) as pool:
            list(pool.map(client, threads))
        assert len(testing.remembered_bodies(remembering)) == len(threads)
        for thread in threads:
            for events, text in bodies(thread):
                whole.append(events, input=text)
            # Less the global sequence numbers too: the threads' appends interleave.
            leave = (*CLOCK, "last_seq")
            assert read_back(remembering, thread, leave) == read_back(whole, thread, leave)
        assert checked(remembering)


def test_a_resent_history_is_not_decoded_again_only_what_follows_it(tmp_path: Path) -> None:
    history = [user(i) for i in range(3 * CHUNK)]
    with agui_store.open(str(tmp_path / "s.db")) as store:
        first = body_text(0, history)
        store.append(run_events(0), input=first)
        held = testing.remembered_bodies(store)
        assert len(held) == 1 and 0 < held.weight <= held.budget
        history = [*history, reply(0), user(1000)]
        second = body_text(1, history)
        with texts_parsed() as parsed:
            store.append(run_events(1), input=second)
        # One text read: the body without the 192 messages it repeats (the reply and the
        # new message are read).
        assert len(parsed) == 1
        rest = parsed[0]
        assert msgspec.json.decode(rest)["messages"] == [reply(0), user(1000)]
        assert len(rest) < len(second) // 10
        assert store.input("run-1", thread_id=THREAD) == msgspec.json.decode(second)
        assert [r.lineage for r in store.runs(THREAD)] == ["root", "messages"]


def test_a_body_that_is_not_json_after_a_resent_history_is_refused_where_it_breaks(
    tmp_path: Path,
) -> None:
    history = [user(i) for i in range(2 * CHUNK)]
    broken = (
        encode_messages([*history, reply(0)])[:-1] + b',{"id":"x","role":"user","content":"\xff"}]'
    )
    texts = [body_text(0, history), body_text(1, [], broken)]
    remembered = refusal_and_rows(str(tmp_path / "a.db"), texts, remember=True)
    expected = refusal_and_rows(str(tmp_path / "b.db"), texts, remember=False)
    assert remembered == expected and "invalid UTF-8" in remembered[0]


def test_a_body_over_the_size_limit_is_refused_even_when_it_resends_a_remembered_history(
    tmp_path: Path,
) -> None:
    history = [user(i) for i in range(2 * CHUNK)]
    first = body_text(0, history)
    second = body_text(1, [*history, reply(0), user(1000, "x" * 200)])
    with agui_store.open(str(tmp_path / "s.db"), max_event_bytes=len(first) + 100) as store:
        store.append(run_events(0), input=first)
        with pytest.raises(InvalidEventError, match="over the limit"):
            store.append(run_events(1), input=second)


@pytest.mark.parametrize("as_text", [True, False], ids=["bytes", "dict"])
def test_an_input_over_the_size_limit_is_named_as_the_input_not_as_an_event(
    tmp_path: Path, as_text: bool
) -> None:
    text = body_text(0, [user(i, "x" * 300) for i in range(10)])
    with agui_store.open(str(tmp_path / "s.db"), max_event_bytes=len(text) - 1) as store:
        with pytest.raises(InvalidEventError) as refused:
            store.append(run_events(0), input=text if as_text else json.loads(text))
        assert refused.value.index is None  # not the batch's event 0
        assert str(refused.value).startswith("the input is ")
        assert store.threads() == []


# --- the pure parts ------------------------------------------------------------------------


def seen_of(text: bytes, ends: array[int], messages: list[Any]) -> resent_bodies.Seen:
    """A body's messages as remembered, with what only the store derives left empty."""
    return resent_bodies.Seen(text, messages, [], {}, ends=ends)


@given(
    common=st.text(max_size=200), a=st.text(max_size=40), b=st.text(max_size=40),
    before=st.integers(0, 3),
)
def test_the_messages_two_bodies_share_end_wherever_their_texts_first_differ(
    common: str, a: str, b: str, before: int
) -> None:
    """The bodies' texts first differ anywhere inside the last message (the search for the
    common start lands on any byte): every message before it is shared, and it is shared
    only when it is the same."""
    old_messages = [user(i) for i in range(before)] + [user(before, common + a)]
    sent = [user(i) for i in range(before)] + [user(before, common + b)]
    first = resent_bodies.envelope(body_text(0, old_messages))
    assert first is not None
    ends = resent_bodies.element_ends(first.messages)
    assert ends is not None
    found = resent_bodies.envelope(body_text(1, sent))
    assert found is not None
    count = resent_bodies.shared(found, seen_of(first.messages, ends, old_messages))
    assert count == before + (a == b)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(values=st.lists(JSON_VALUES, max_size=6), offset=st.integers(0, 100))
def test_the_end_of_each_element_of_a_compact_array_is_where_its_separator_is(
    values: list[Any], offset: int
) -> None:
    text = msgspec.json.encode(values)
    ends = resent_bodies.element_ends(text, offset)
    assert ends is not None and len(ends) == len(values)
    starts = [offset + 1, *(end + 1 for end in ends[:-1])]
    for value, begin, end in zip(values, starts, ends):
        assert text[end - offset : end - offset + 1] in (b",", b"]")
        assert msgspec.json.decode(text[begin - offset : end - offset]) == value
    if len(values) > 1:
        assert resent_bodies.element_ends(json.dumps(values).encode()) is None  # ", " between


def test_a_body_written_otherwise_than_compactly_is_not_cut() -> None:
    messages = [user(i) for i in range(3)]
    compact = body_text(0, messages)
    assert resent_bodies.envelope(compact) is not None
    assert resent_bodies.envelope(json.dumps(request(0, messages)).encode()) is None
    twice = compact[:-1] + b',"messages":[]}'
    assert resent_bodies.envelope(twice) is None  # a key given twice: the last one counts
    escaped = compact.replace(b'"threadId"', b'"\\u0074hreadId"')
    assert resent_bodies.envelope(escaped) is None  # a key spelled otherwise
    assert resent_bodies.envelope(b'{"threadId":"t"}') is None  # no messages
    assert resent_bodies.envelope(compact + b"\n" + compact) is None  # JSON Lines


@given(
    old=st.lists(st.integers(0, 3), min_size=1, max_size=8),
    new=st.lists(st.integers(0, 3), max_size=8),
    keep=st.integers(0, 8),
)
def test_a_body_is_cut_after_the_messages_it_repeats_and_reads_as_the_rest(
    old: list[int], new: list[int], keep: int
) -> None:
    old_messages = [user(i) for i in old]
    sent = old_messages[:keep] + [user(i, "other") for i in new]
    first = resent_bodies.envelope(body_text(0, old_messages))
    assert first is not None
    ends = resent_bodies.element_ends(first.messages)
    assert ends is not None
    seen = seen_of(first.messages, ends, old_messages)
    found = resent_bodies.envelope(body_text(1, sent))
    assert found is not None
    count = resent_bodies.shared(found, seen)
    assert sent[:count] == old_messages[:count]
    assert count == len(old_messages) or count == len(sent) or sent[count] != old_messages[count]
    if count:
        rest, _ = resent_bodies.without_shared(found, seen, count)
        assert msgspec.json.decode(rest) == request(1, sent[count:])


def test_what_is_remembered_stays_within_its_budget_forgetting_the_least_recent() -> None:
    memo = resent_bodies.Memo(budget=3 * resent_bodies.BYTES_PER_BYTE * 100)

    def seen(size: int) -> resent_bodies.Seen:
        return seen_of(b"[" + b"x" * (size - 2) + b"]", array("q"), [])

    for thread in "abc":
        memo.put(thread, seen(100))
    assert len(memo) == 3 and memo.weight == memo.budget
    assert memo.get("a") is not None  # now the most recent
    memo.put("d", seen(100))
    assert memo.get("b") is None and memo.get("a") is not None and len(memo) == 3
    memo.put("e", seen(250))  # two make room
    assert memo.weight <= memo.budget and memo.get("e") is not None
    memo.put("huge", seen(400))  # heavier than the budget alone: not kept
    assert memo.get("huge") is None and memo.weight <= memo.budget
    memo.put("e", seen(100))  # replaced, not added
    assert memo.weight <= memo.budget and len([t for t in "ade" if memo.get(t)]) == len(memo)


def test_a_message_followed_by_whitespace_is_not_counted_as_repeated() -> None:
    messages = [user(i) for i in range(4)]
    first = resent_bodies.envelope(body_text(0, messages[:3]))
    assert first is not None
    ends = resent_bodies.element_ends(first.messages)
    assert ends is not None
    seen = seen_of(first.messages, ends, messages[:3])
    parts = [msgspec.json.encode(m) for m in messages]
    array_text = b"[" + parts[0] + b"," + parts[1] + b" ," + b",".join(parts[2:]) + b"]"
    found = resent_bodies.envelope(body_text(1, [], array_text))
    assert found is not None
    assert resent_bodies.shared(found, seen) == 1
    rest, _ = resent_bodies.without_shared(found, seen, 1)
    assert msgspec.json.decode(rest) == request(1, messages[1:])


@given(
    ids=st.lists(st.sampled_from(["a", "b", "c", "d", 5, None]), max_size=12),
    start=st.integers(0, 12),
)
def test_where_ids_first_are_found_going_on_from_a_prefix_as_computed_whole(
    ids: list[Any], start: int
) -> None:
    """``None`` stands for a message that is not an object, ``5`` for an id not a string."""
    messages = [{"id": i, "role": "user"} if i is not None else "x" for i in ids]
    start = min(start, len(messages))
    places, distinct = resent_bodies.id_places(messages)
    naive = 0
    while naive < len(ids) and isinstance(ids[naive], str) and ids[naive] not in ids[:naive]:
        naive += 1
    assert distinct == naive
    assert places == {i: ids.index(i) for i in ids if isinstance(i, str)}
    before, before_distinct = resent_bodies.id_places(messages[:start])
    assert resent_bodies.id_places(messages, start, before, before_distinct) == (places, distinct)


@settings(max_examples=50)
@given(
    ids=st.lists(st.text(max_size=3) | st.integers(), max_size=300),
    kept=st.integers(0, 300),
    first=st.integers(0, 300),
)
def test_the_digest_of_any_first_ids_goes_on_from_the_marks_of_an_earlier_list(
    ids: list[Any], kept: int, first: int
) -> None:
    """Marks made over the first ``kept`` ids, gone on over all of them, give the digest
    of the first ``first`` ids as hashing those ids whole does."""
    earlier = checkpoints.hash_marks(ids[:kept])
    marks = checkpoints.hash_marks(ids, earlier)
    assert len(marks) == len(ids) // checkpoints.HASH_MARK + 1
    assert all(
        m.digest() == checkpoints.hash_ids(ids[: i * 64]).digest() for i, m in enumerate(marks)
    )
    first = min(first, len(ids))
    within = marks[: first // checkpoints.HASH_MARK + 1]
    expected = checkpoints.hash_ids(ids[:first]).digest()
    assert checkpoints.hash_from_marks(ids[:first], within).digest() == expected


@given(ids=st.lists(st.sampled_from("abcdef"), max_size=10), count=st.integers(0, 10))
def test_the_places_of_the_first_messages_leave_out_the_ids_first_found_after_them(
    ids: list[str], count: int
) -> None:
    messages = [{"id": i} for i in ids]
    seen = seen_of(b"[]", array("q"), messages)
    count = min(count, len(messages))
    assert seen.places_before(count) == resent_bodies.id_places(messages[:count])[0]


@pytest.mark.parametrize("content", ["", "what about the weather in city {i} tomorrow? " * 4])
def test_a_remembered_body_holds_no_more_memory_than_its_estimated_weight(
    tmp_path: Path, content: str
) -> None:
    """The bound on what a store remembers is counted in estimated bytes: the Python memory
    a remembering store holds beyond one reading bodies whole is within that estimate, for
    short messages and for long ones."""
    history = [{**user(i), "content": content.format(i=i)} for i in range(1000)]
    first, second = body_text(0, history[:CHUNK]), body_text(1, history)
    held = []
    for remember in (True, False):
        with agui_store.open(str(tmp_path / f"{remember}.db")) as store:
            if not remember:
                testing.read_bodies_whole(store)
            store.append(run_events(0), input=first)  # caches warm
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                store.append(run_events(1), input=second)
                gc.collect()
                held.append(tracemalloc.get_traced_memory()[0] - before)
            finally:
                tracemalloc.stop()
            if remember:
                weight = testing.remembered_bodies(store).weight
    assert 0 < held[0] - held[1] <= weight
    assert held[0] - held[1] > weight / 2  # the estimate is not far off either
