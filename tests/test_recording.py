"""The in-process recorder: ``store.record(events)`` and ``astore.record(agen)`` yield every
event unchanged as it arrives, record it in batches as it passes, and record exactly what
passed whatever ends the stream."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import apsw
import msgspec
import pytest
from ag_ui.core import (
    CustomEvent,
    Event,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

import agui_store
from agui_store import aio, recording, testing
from agui_store.backends.postgres import schema
from agui_store.protocol import model
from agui_store.recording import AsyncBatcher, Batcher, PartlyRecorded, event_json
from benchmarks._common import conversation_run
from tests import streams

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def body(thread: str, run_id: str, text: str = "hello") -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run_id,
        "messages": [{"id": f"u-{run_id}", "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def pydantic_run(thread: str, run_id: str) -> list[Any]:
    return [
        RunStartedEvent(thread_id=thread, run_id=run_id),
        StateSnapshotEvent(snapshot={"items": [1, 2.5, {"x": None}], "n": "é"}),
        StateDeltaEvent(delta=[{"op": "add", "path": "/items/-", "value": 3}]),
        TextMessageStartEvent(message_id=f"a-{run_id}", role="assistant"),
        TextMessageContentEvent(message_id=f"a-{run_id}", delta="hi "),
        TextMessageContentEvent(message_id=f"a-{run_id}", delta="there"),
        TextMessageEndEvent(message_id=f"a-{run_id}"),
        CustomEvent(name="note", value={"k": [True, None]}),
        RunFinishedEvent(thread_id=thread, run_id=run_id, result={"ok": 1}),
    ]


# --- event_json -------------------------------------------------------------------------


@pytest.mark.parametrize("event", pydantic_run("t", "r"), ids=lambda e: e.type.value)
def test_a_pydantic_event_is_kept_as_the_json_its_encoder_writes(event: Any) -> None:
    assert json.loads(event_json(event)) == json.loads(event.model_dump_json(by_alias=True))


def test_every_upstream_event_as_a_pydantic_model_is_kept_as_its_encoder_writes_it(
    fixture_streams: list[tuple[str, list[dict[str, Any]]]],
) -> None:
    as_model = TypeAdapter(Event)
    checked = 0
    for name, events in fixture_streams:
        for i, data in enumerate(events):
            event = as_model.validate_python(data)
            want = json.loads(event.model_dump_json(by_alias=True))
            assert json.loads(event_json(event)) == want, f"{name} event {i}"
            checked += 1
    assert checked > 1000


def test_a_pydantic_value_msgspec_cannot_write_falls_back_to_pydantic_whole() -> None:
    class Odd:
        pass

    event = CustomEvent(name="n", value={"when": {1, 2}})  # a set: pydantic writes a list
    assert json.loads(event_json(event)) == json.loads(event.model_dump_json(by_alias=True))
    with pytest.raises(agui_store.InvalidEventError, match=r"Odd|JSON"):
        event_json(CustomEvent(name="n", value={"x": Odd()}))


def test_bytes_and_text_are_kept_as_they_arrived_and_dicts_encoded_compactly() -> None:
    raw = b'{"type": "RUN_STARTED",  "threadId":"t","runId":"r"}'
    assert event_json(raw) is raw
    assert event_json(bytearray(raw)) == raw
    assert event_json(raw.decode()) == raw
    assert event_json({"type": "CUSTOM", "name": "n", "value": 1}) == (
        b'{"type":"CUSTOM","name":"n","value":1}'
    )
    struct = model.RunStartedEvent(thread_id="t", run_id="r")
    assert json.loads(event_json(struct)) == {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    with pytest.raises(agui_store.InvalidEventError, match="cannot record int"):
        event_json(42)


# --- the sync recorder --------------------------------------------------------------------


def test_record_yields_each_event_itself_and_records_the_run(db_path: Path) -> None:
    events = pydantic_run("t", "r1")
    with agui_store.open(db_path) as store:
        passed = list(store.record(iter(events), input=body("t", "r1")))
        assert all(a is b for a, b in zip(passed, events)) and len(passed) == len(events)
        assert store.events("r1", thread_id="t") == [
            json.loads(e.model_dump_json(by_alias=True)) for e in events
        ]
        assert store.input("r1", thread_id="t") == body("t", "r1")
        co = store.checkout("r1", thread_id="t")
        assert co.run.status == "finished"
        assert co.state == {"items": [1, 2.5, {"x": None}, 3], "n": "é"}
        assert [m["content"] for m in co.messages] == ["hello", "hi there"]


def test_record_keeps_raw_json_bytes_verbatim(db_path: Path) -> None:
    raws = [
        b'{"type":"RUN_STARTED",  "threadId":"t","runId":"r1"}',
        b'{"type":"STATE_SNAPSHOT","snapshot":{"b":1,"a":1.50}}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r1"}',
    ]
    with agui_store.open(db_path) as store:
        assert list(store.record(raws)) == raws
        db = testing.connection(store)
        rows = db.execute("SELECT payload FROM events ORDER BY seq").fetchall()
    assert [r[0].encode() for r in rows] == raws


def test_a_batcher_appends_in_batches_not_event_by_event(db_path: Path) -> None:
    events = [msgspec.json.encode(e) for e in conversation_run("t", "r1", 300, 0)]
    with agui_store.open(db_path) as store, Batcher(store, interval=60) as batcher:
        for raw in events:
            batcher.add(raw)
        batcher.flush()
        assert batcher.recorded == 300 and batcher.run_id == "r1"
        batches = testing.connection(store).execute("SELECT count(*) FROM batches").fetchone()[0]
    assert batches == 1


def test_an_event_that_cannot_be_json_stops_recording_and_is_logged(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[Any] = conversation_run("t", "r1", 10, 0)
    events.insert(5, {"type": "CUSTOM", "name": "n", "value": float("nan")})
    with agui_store.open(db_path) as store:
        with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
            assert list(store.record(events)) == events
        assert store.events("r1", thread_id="t") == events[:5]
        assert store.get_run("r1", thread_id="t").status == "incomplete"  # type: ignore[union-attr]
    assert "recording of thread t, run r1 stopped: 5 event(s) recorded, 6 not" in caplog.text
    assert "nan is not a JSON number" in caplog.text


def test_an_id_from_the_stream_cannot_write_a_log_line_of_its_own(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The ids come from the events (or a client's request): a newline in them would start a
    # line of the log that reads as the application's own.
    thread, run = "t1\nWARNING:agui_store.recording:forged", "r1\r\x1b[2K"
    events: list[Any] = conversation_run(thread, run, 10, 0)
    events.insert(5, {"type": "CUSTOM", "name": "n", "value": float("nan")})
    with agui_store.open(db_path) as store:
        with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
            assert list(store.record(events)) == events
        assert store.events(run, thread_id=thread) == events[:5]
    said = [r.getMessage() for r in caplog.records if r.name == "agui_store.recording"]
    assert said
    for line in said:
        assert "\n" not in line and "\r" not in line and "\x1b" not in line
        assert "thread t1\\nWARNING:agui_store.recording:forged, run r1\\r\\x1b[2K stopped" in line


def test_an_event_stream_event_too_large_to_read_keeps_what_its_chunk_completed_before_it(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk of text/event-stream that completes an event and then starts one too large
    to hold: the first is recorded, the second refused, by both batchers."""
    started = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r1"}\n\n'
    chunk = started + b"data: " + b"x" * (17 << 20)

    async def asynchronously(path: Path) -> None:
        async with aio.open(path) as astore:
            batcher = AsyncBatcher(astore, thread_id="t")
            batcher.add_event(chunk)
            await batcher.aclose()

    with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
        with agui_store.open(db_path) as store:
            assert list(store.record([chunk], thread_id="t")) == [chunk]
            assert [e["type"] for e in store.events("r1", thread_id="t")] == ["RUN_STARTED"]
        other = db_path.with_name("async.db")
        asyncio.run(asynchronously(other))
        with agui_store.open(other) as store:
            assert [e["type"] for e in store.events("r1", thread_id="t")] == ["RUN_STARTED"]
    assert caplog.text.count("1 event(s) recorded, 1 not") == 2, caplog.text
    assert "larger than the store's max_event_bytes" in caplog.text


def test_an_event_stream_event_larger_than_the_store_takes_is_refused_as_it_arrives(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Both batchers read an event stream up to the store's max_event_bytes: an event the
    store would refuse stops the recording while it arrives (never held whole), and every
    event of the stream from it on is counted as not recorded."""
    frames = [b"data: %b\n\n" % msgspec.json.encode(e) for e in conversation_run("t", "r1", 10, 0)]
    opening = b"data: " + b"x" * 1500  # an event not yet ended, already over the limit

    def feed(batcher: Batcher | AsyncBatcher) -> None:
        batcher.add_event(frames[0])
        batcher.add_event(opening)
        assert batcher.failed is not None and "1,000 bytes" in str(batcher.failed)
        batcher.add_event(b"x" * 1500 + b"\n\n")
        for frame in frames[1:]:
            batcher.add_event(frame)

    async def asynchronously(path: Path) -> tuple[int, int]:
        async with aio.open(path, max_event_bytes=1000) as astore:
            batcher = AsyncBatcher(astore, thread_id="t")
            feed(batcher)
            await batcher.aclose()
            return batcher.recorded, batcher.dropped

    with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
        with agui_store.open(db_path, max_event_bytes=1000) as store:
            with Batcher(store, thread_id="t") as batcher:
                feed(batcher)
            assert (batcher.recorded, batcher.dropped) == (1, len(frames))
            assert [e["type"] for e in store.events("r1", thread_id="t")] == ["RUN_STARTED"]
        assert asyncio.run(asynchronously(db_path.with_name("async.db"))) == (1, len(frames))
    final = f"run r1 stopped: 1 event(s) recorded, {len(frames)} not: event 1 of the stream"
    assert caplog.text.count(final) == 2, caplog.text


def test_an_event_stream_event_too_large_for_record_is_named_in_the_stream_given_to_record(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``record`` has no response: the refusal of an event of its stream larger than the
    store takes names that event, counted in the stream given to it, and the store's limit."""
    frames = [b"data: %b\n\n" % msgspec.json.encode(e) for e in conversation_run("t", "r1", 10, 0)]
    stream = [frames[0], frames[1], b"data: " + b"x" * 1500 + b"\n\n", *frames[2:]]

    async def asynchronously(path: Path) -> None:
        async with aio.open(path, max_event_bytes=1000) as astore:
            assert [chunk async for chunk in astore.record(agen(stream), thread_id="t")] == stream

    with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
        with agui_store.open(db_path, max_event_bytes=1000) as store:
            assert list(store.record(stream, thread_id="t")) == stream
        asyncio.run(asynchronously(db_path.with_name("async.db")))
    said = [r.getMessage() for r in caplog.records]
    refusal = (
        "2 event(s) recorded, 1 not: event 2 of the stream given to record: the event is "
        "larger than the store's max_event_bytes (1,000 bytes)"
    )
    assert [refusal in line for line in said].count(True) == 2, said
    assert not any("response" in line for line in said), said


def test_an_event_that_is_not_text_in_an_event_stream_is_refused_not_skipped_unsaid(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A dict after the text of an event stream was read as lines of that stream: it was
    no ``data:`` line, so it was skipped, and nothing said so."""
    started = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r1"}\n\n'
    stream: list[Any] = [started, {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"}]

    async def asynchronously(path: Path) -> None:
        async with aio.open(path) as astore:
            assert [event async for event in astore.record(agen(stream))] == stream

    with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
        with agui_store.open(db_path) as store:
            assert list(store.record(stream)) == stream
            assert [e["type"] for e in store.events("r1", thread_id="t")] == ["RUN_STARTED"]
        asyncio.run(asynchronously(db_path.with_name("async.db")))
    said = [r.getMessage() for r in caplog.records]
    refusal = (
        "1 event(s) recorded, 1 not: event 1 of the stream given to record: cannot record "
        "dict in a text/event-stream"
    )
    assert [refusal in line for line in said].count(True) == 2, said


def test_an_event_after_the_async_store_is_closed_is_said_to_come_after_the_store_closed(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``AsyncStore.close`` while ``record`` still streams: what passed is recorded, the rest
    is not, and the warnings blame the store's close and count the events, at the first
    late one and when the stream ends."""
    events = conversation_run("t", "r1", 10, 0)

    async def main() -> list[Any]:
        astore = await aio.open(db_path)
        paused, resume = asyncio.Event(), asyncio.Event()

        async def agent() -> AsyncIterator[Any]:
            for i, event in enumerate(events):
                if i == 4:
                    paused.set()
                    await resume.wait()
                yield event

        async def consume() -> list[Any]:
            return [event async for event in astore.record(agent())]

        consumer = asyncio.ensure_future(consume())
        await paused.wait()
        await astore.close()
        resume.set()
        return await consumer

    with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
        assert run(main()) == events
    with agui_store.open(db_path) as store:
        assert store.events("r1", thread_id="t") == events[:4]
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"recording of thread t, run r1 stopped: 4 event(s) recorded, {n} not: an event came "
        "after the store was closed (AsyncStore.close)"
        for n in (1, 6)
    ], said


def test_an_event_the_store_refuses_stops_the_recording_after_the_events_before_it(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever the batch it fell in, the events that passed before a refused one are
    recorded; it and the rest are not (they would record a run that never happened)."""
    events: list[Any] = conversation_run("t", "r1", 10, 0)
    bad = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"}
    stream = [*events[:3], bad, *events[3:]]
    with agui_store.open(db_path) as store:
        with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
            assert list(store.record(stream)) == stream  # one batch: it all passed at once
        assert store.events("r1", thread_id="t") == events[:3]
        assert store.get_run("r1", thread_id="t").status == "incomplete"  # type: ignore[union-attr]
        assert store.check().ok
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said  # one failure, told once
    assert said[0].startswith("recording of thread t, run r1 stopped: 3 event(s) recorded, 8 not")
    assert "TEXT_MESSAGE_CONTENT" in said[0]


class HeldByAnotherWriter(agui_store.Store):
    """A store another connection holds the write lock of (``BEGIN IMMEDIATE``), until it
    has answered busy ``release_after`` times (``None``: never)."""

    release_after: int | None = None
    busy = 0

    def hold(self) -> None:
        self.other = apsw.Connection(self.path)
        self.other.execute("BEGIN IMMEDIATE")

    def append(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().append(*args, **kwargs)
        except agui_store.StoreBusyError:
            self.busy += 1
            if self.busy == self.release_after:
                self.other.execute("ROLLBACK")  # the other writer is done
            raise


def test_a_batch_the_store_answers_busy_is_appended_once_the_other_writer_is_done(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[Any] = conversation_run("t", "r1", 12, 0)
    with HeldByAnotherWriter(db_path, busy_timeout_ms=20) as store:
        store.hold()
        store.release_after = 1
        with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
            assert list(store.record(events, input=body("t", "r1"))) == events
        assert store.busy == 1
        assert store.events("r1", thread_id="t") == events
        assert store.input("r1", thread_id="t") == body("t", "r1")
    assert caplog.records == []


def test_a_store_busy_on_every_try_stops_the_recording_and_leaves_the_file_as_it_was(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[Any] = conversation_run("t", "r1", 12, 0)
    with HeldByAnotherWriter(db_path, busy_timeout_ms=20) as store:
        store.hold()
        with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
            assert list(store.record(events, input=body("t", "r1"))) == events
        assert store.busy == recording.BUSY_TRIES
        store.other.execute("ROLLBACK")
        assert store.threads() == []
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    assert said[0].startswith("recording of thread t, run r1 stopped: 0 event(s) recorded")
    assert "busy timeout" in said[0]


class FirstAppendHeld(agui_store.Store):
    """A store whose first append waits, once begun (``entered``), until ``release``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered, self.release = threading.Event(), threading.Event()

    def append(self, *args: Any, **kwargs: Any) -> Any:
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait()
        return super().append(*args, **kwargs)


def test_what_gathers_while_an_append_is_in_flight_is_appended_in_batches_of_max_bytes(
    db_path: Path,
) -> None:
    """Both batchers: the events that came while an append was held are appended after it
    in batches of at most ``max_bytes``, back to back, not as one batch of them all (a larger
    batch appends slower per event, and a recording behind its stream fell further behind)."""
    frames = [msgspec.json.encode(e) for e in conversation_run("t", "r1", 120, 0)]
    first = next(i for i in itertools.count(1) if sum(map(len, frames[:i])) >= 1000)

    def batch_sizes(written: list[list[bytes]]) -> list[int]:
        """Each batch's bytes before its last event (the one that makes max_bytes)."""
        assert [raw for batch in written for raw in batch] == frames
        return [sum(map(len, batch[:-1])) for batch in written]

    with FirstAppendHeld(db_path) as store:
        written: list[list[bytes]] = []
        with Batcher(
            store, max_bytes=1000, interval=60, on_written=lambda r, b: written.append(b)
        ) as batcher:
            for raw in frames[:first]:
                batcher.add(raw)
            store.entered.wait()  # the flusher appends the first batch, held
            for raw in frames[first:]:
                batcher.add(raw)
            store.release.set()
        sizes = batch_sizes(written)
        assert len(sizes) > 5 and max(sizes) < 1000, sizes

    async def asynchronously(store: FirstAppendHeld) -> list[int]:
        written: list[list[bytes]] = []
        astore = aio.AsyncStore(store, writer="thread")
        batcher = AsyncBatcher(
            astore, max_bytes=1000, interval=60, on_written=lambda r, b: written.append(b)
        )
        for raw in frames[:first]:
            batcher.add(raw)
        await asyncio.get_running_loop().run_in_executor(None, store.entered.wait)
        for raw in frames[first:]:
            batcher.add(raw)
        store.release.set()
        await batcher.aclose()
        await astore.close()
        return batch_sizes(written)

    with FirstAppendHeld(db_path.with_name("async.db")) as store:
        sizes = asyncio.run(asynchronously(store))
        assert len(sizes) > 5 and max(sizes) < 1000, sizes


class AppendsHeld(agui_store.Store):
    """A store whose appends each wait, once begun, until the test allows that many."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turns = threading.Condition()
        self.begun = self.allowed = 0

    def append(self, *args: Any, **kwargs: Any) -> Any:
        with self.turns:
            self.begun += 1
            self.turns.notify_all()
            self.turns.wait_for(lambda: self.allowed >= self.begun)
        return super().append(*args, **kwargs)

    def wait_begun(self, appends: int) -> None:
        with self.turns:
            self.turns.wait_for(lambda: self.begun >= appends)

    def allow(self, appends: int) -> None:
        with self.turns:
            self.allowed = appends
            self.turns.notify_all()


def test_two_flushes_waiting_for_the_same_events_both_return_once_they_are_written(
    db_path: Path,
) -> None:
    """``flush(later=False)`` waits for the events added before it only: a second caller
    (a reconnect, while the client that left waits for what it got) must not leave the first
    waiting for every later batch of a stream that goes on."""
    frames = [msgspec.json.encode(e) for e in conversation_run("t", "r1", 60, 0)]
    first = next(i for i in itertools.count(1) if sum(map(len, frames[:i])) >= 1000)

    async def main(store: AppendsHeld) -> None:
        astore = aio.AsyncStore(store, writer="thread")
        batcher = AsyncBatcher(astore, max_bytes=1000, interval=60)
        loop = asyncio.get_running_loop()
        try:
            for raw in frames[:first]:
                batcher.add(raw)  # full: the writer appends them, held
            await loop.run_in_executor(None, store.wait_begun, 1)
            one = asyncio.ensure_future(batcher.flush(later=False))
            await asyncio.sleep(0)
            two = asyncio.ensure_future(batcher.flush(later=False))
            await asyncio.sleep(0)
            for raw in frames[first:]:
                batcher.add(raw)  # the next batch, full too: written right after
            store.allow(1)
            await two
            for _ in range(100):  # a few turns of the loop, no waiting on the store
                if one.done():
                    break
                await asyncio.sleep(0)
            assert one.done(), "the first flush waits for the batch after its events"
            assert batcher.recorded >= first
        finally:
            store.allow(len(frames))
            await batcher.aclose()
            await astore.close()

    with AppendsHeld(db_path) as store:
        asyncio.run(main(store))
        assert len(store.events("r1", thread_id="t")) == len(frames)


def test_a_refused_event_is_counted_in_the_stream_not_in_the_batch_it_was_appended_in(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[Any] = conversation_run("t", "r1", 12, 0)[:8]  # a text message is open
    bad = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"}
    with agui_store.open(db_path) as store:
        with (
            caplog.at_level(logging.WARNING, logger="agui_store.recording"),
            Batcher(store) as batcher,
        ):
            for event in events[:6]:
                batcher.add_event(event)
            batcher.flush()  # a batch of 6, then one of 2 before the refused event
            for event in [*events[6:], bad]:
                batcher.add_event(event)
        assert store.events("r1", thread_id="t") == events
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    assert "8 event(s) recorded, 1 not: event 8 of the stream (TEXT_MESSAGE_CONTENT): " in said[0]
    assert batcher.failure is not None and batcher.failure.startswith("event 8 of the stream")
    assert isinstance(batcher.failed, PartlyRecorded)  # the store's error, as it was raised
    assert str(batcher.failed).startswith("event 2 (TEXT_MESSAGE_CONTENT)")


def test_a_stream_that_starts_no_run_in_a_thread_of_open_runs_is_told_to_begin_with_one(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with agui_store.open(db_path) as store:
        for run_id in ("r1", "r2"):  # two runs of the thread streaming at once
            store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": run_id}])
        stream = [{"type": "STATE_SNAPSHOT", "snapshot": {}}]
        with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
            assert list(store.record(stream, thread_id="t")) == stream
        assert [len(store.events(r, thread_id="t")) for r in ("r1", "r2")] == [1, 1]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    assert said[0].endswith(
        "event 0 of the stream given to record: the stream starts no run, and thread 't' has "
        "2 open runs it may continue: begin the stream with its RUN_STARTED"
    ), said[0]
    assert "run_id=" not in said[0]  # append's advice: record() takes no run_id


def test_a_stream_recorded_twice_is_told_a_recording_starts_a_new_run_id_not_to_append(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stream = conversation_run("t1", "r1", 14, 0)
    with agui_store.open(db_path) as store:
        assert list(store.record(stream)) == stream
        with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
            assert list(store.record(stream)) == stream
        assert store.events("r1", thread_id="t1") == stream  # recorded once
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    assert said[0].endswith(
        "run 'r1' is already recorded in thread 't1'; a recording starts a new run id for "
        "each run"
    ), said[0]
    assert "without a new RUN_STARTED" not in said[0]  # append's advice: no stream can


def test_an_async_batcher_given_a_recorded_run_again_says_a_recording_starts_a_new_run_id(
    db_path: Path,
) -> None:
    stream = conversation_run("t1", "r1", 14, 0)

    async def twice() -> str | None:
        async with aio.open(db_path) as store:
            for _ in range(2):
                async with AsyncBatcher(store, warn=False) as batcher:
                    for event in stream:
                        batcher.add_event(event)
            return batcher.failure

    assert run(twice()) == (
        "event 0 of the stream (RUN_STARTED) at $.runId: run 'r1' is already recorded in "
        "thread 't1'; a recording starts a new run id for each run"
    )


def test_an_input_nested_too_deep_to_read_is_refused_with_a_warning_never_in_the_stream(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A request body as a client may send it: valid JSON, nested deeper than a decoder follows.
    deep = b'{"threadId": "t", "runId": "r1", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    events: list[Any] = conversation_run("t", "r1", 10, 0)

    async def produce() -> AsyncIterator[Any]:
        for event in events:
            yield event

    async def consume(astore: aio.AsyncStore) -> list[Any]:
        return [event async for event in astore.record(produce(), input=deep)]

    with agui_store.open(db_path) as store:
        with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
            assert list(store.record(events, input=deep)) == events
            astore = aio.AsyncStore(store, writer="thread")
            try:
                assert run(consume(astore)) == events
            finally:
                run(astore.close())
        assert store.threads() == []
    said = [r.getMessage() for r in caplog.records if r.name == "agui_store.recording"]
    assert len(said) == 2, said
    assert all(m.startswith("recording of thread t, run r1 stopped: 0 event(s)") for m in said)


def test_a_refused_event_first_in_its_batch_leaves_the_file_as_it_was(db_path: Path) -> None:
    bad = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"}
    with agui_store.open(db_path) as store:
        list(store.record([bad, *conversation_run("t", "r1", 10, 0)]))
        assert store.threads() == []


def test_through_the_writer_process_the_events_before_a_refused_one_are_recorded(
    db_path: Path,
) -> None:
    events: list[Any] = conversation_run("t", "r1", 30, 0)
    bad = {"type": "TOOL_CALL_ARGS", "toolCallId": "none-open", "delta": "{}"}

    async def main() -> None:
        async with aio.open(db_path) as astore:
            async with AsyncBatcher(astore, interval=60) as batcher:
                for event in [*events[:17], bad, *events[17:]]:
                    batcher.add_event(event)
            assert batcher.recorded == 17 and batcher.dropped == 14
            assert isinstance(batcher.failed, PartlyRecorded)
            assert "TOOL_CALL_ARGS" in str(batcher.failed)
            assert await astore.events("r1", thread_id="t") == events[:17]

    run(main())


def test_a_flush_of_what_came_so_far_returns_while_a_faster_stream_goes_on(
    db_path: Path,
) -> None:
    """``flush(later=False)`` waits for the events added before it, not for a stream that
    adds more between appends (what the ASGI Recorder does before answering a connect)."""
    events: list[Any] = conversation_run("t", "r1", 400, 0)

    async def main() -> None:
        async with aio.open(db_path, writer="thread") as astore:
            real = astore.append_batch

            async def loaded(batch: Any, options: Any) -> Any:  # a writer under load
                await asyncio.sleep(0.02)
                return await real(batch, options)

            astore.append_batch = loaded  # type: ignore[method-assign]
            async with AsyncBatcher(astore, interval=0.01) as batcher:

                async def stream() -> None:
                    for event in events:
                        batcher.add_event(event)
                        await asyncio.sleep(0.002)

                streaming = asyncio.ensure_future(stream())
                await asyncio.sleep(0.1)
                await batcher.flush(later=False)
                assert not streaming.done()  # it returned mid-stream
                assert batcher.recorded > 0
                await streaming
            assert batcher.recorded == len(events)

    run(main())


# --- the async recorder -------------------------------------------------------------------


async def agen(events: list[Any]) -> AsyncIterator[Any]:
    for event in events:
        await asyncio.sleep(0)
        yield event


def test_async_record_yields_each_event_itself_and_records_the_run(db_path: Path) -> None:
    events = pydantic_run("t", "r1")

    async def main() -> None:
        async with aio.open(db_path) as astore:
            passed = [e async for e in astore.record(agen(events), input=body("t", "r1"))]
            assert all(a is b for a, b in zip(passed, events)) and len(passed) == len(events)
            co = await astore.checkout("r1", thread_id="t")
            assert co.run.status == "finished"
            assert [m["content"] for m in co.messages] == ["hello", "hi there"]

    run(main())


def test_an_async_batcher_appends_in_batches_in_order(db_path: Path) -> None:
    events = [msgspec.json.encode(e) for e in conversation_run("t", "r1", 300, 0)]

    async def main() -> None:
        async with aio.open(db_path) as astore:
            async with AsyncBatcher(astore, max_bytes=2000) as batcher:
                for raw in events:
                    batcher.add(raw)
                    await asyncio.sleep(0)
            assert batcher.recorded == 300 and batcher.last_seq == 300
            assert [e["type"] for e in await astore.events("r1")] == [
                json.loads(e)["type"] for e in events
            ]

    run(main())
    with agui_store.open(db_path) as store:
        counts = [
            r[0] for r in testing.connection(store).execute("SELECT count FROM batches ORDER BY id")
        ]
    assert sum(counts) == 300 and len(counts) > 1


def test_on_written_hears_of_every_batch_in_order_with_its_payloads(db_path: Path) -> None:
    events = [msgspec.json.encode(e) for e in conversation_run("t", "r1", 120, 0)]
    heard: list[tuple[agui_store.AppendResult, list[bytes]]] = []

    async def main() -> None:
        async with aio.open(db_path) as astore:
            batcher = AsyncBatcher(
                astore, max_bytes=500, on_written=lambda r, p: heard.append((r, p))
            )
            for raw in events:
                batcher.add(raw)
                await asyncio.sleep(0)
            await batcher.aclose()

    run(main())
    assert [p for _, payloads in heard for p in payloads] == events
    assert len(heard) > 1
    seqs = [(r.first_seq, r.last_seq) for r, _ in heard]
    assert seqs[0][0] == 1 and seqs[-1][1] == 120
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(seqs))


def test_a_listener_that_raises_does_not_stop_the_recording(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def deaf(result: agui_store.AppendResult, payloads: list[bytes]) -> None:
        raise RuntimeError("listener broke")

    events = conversation_run("t", "r1", 30, 0)
    with agui_store.open(db_path) as store:
        logging_errors = caplog.at_level(logging.ERROR, logger="agui_store.recording")
        with logging_errors, Batcher(store, max_bytes=200, on_written=deaf) as batcher:
            for e in events:
                batcher.add_event(e)
        assert store.events("r1", thread_id="t") == events
    assert "listener broke" in caplog.text


def test_the_scope_goes_with_every_batch_of_the_recording(db_path: Path) -> None:
    scopes: list[Any] = []

    class Spy(agui_store.Store):
        def append(self, events: Any, **options: Any) -> agui_store.AppendResult:
            scopes.append(options.pop("scope", "(none)"))
            return super().append(events, **options)

    events = conversation_run("t", "r1", 40, 0)
    with Spy(db_path) as store:
        with Batcher(store, scope="alice") as batcher:
            for n, event in enumerate(events, 1):
                batcher.add_event(event)
                if n % 10 == 0:
                    batcher.flush()
        assert store.events("r1", thread_id="t") == events
        list(store.record(conversation_run("u", "r2", 12, 0)))
    assert scopes == ["alice"] * 4 + ["(none)"]


@settings(max_examples=25)
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=8),
    max_bytes=st.integers(min_value=1, max_value=5000),
)
def test_whatever_the_batching_every_event_lands_once_in_order(
    tmp_path_factory: pytest.TempPathFactory, cuts: list[int], max_bytes: int
) -> None:
    """Flushes at arbitrary points and any batch size: the file holds exactly the events
    added, in order, in contiguous batches, and the run is what its events make it."""
    events = conversation_run("t", "r1", 60, 0)
    path = tmp_path_factory.mktemp("batching") / "store.db"
    with agui_store.open(path) as store:
        with Batcher(store, max_bytes=max_bytes) as batcher:
            added = 0
            for cut in cuts:
                for event in events[added : added + cut]:
                    batcher.add_event(event)
                added = min(added + cut, len(events))
                batcher.flush()
        assert batcher.recorded == added and batcher.dropped == 0
        assert store.events("r1", thread_id="t") == events[:added]
        rows = (
            testing.connection(store)
            .execute("SELECT first_seq, last_seq FROM batches ORDER BY id")
            .fetchall()
        )
        assert rows[0][0] == 1 and rows[-1][1] == added
        assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(rows))
        want = "finished" if added == len(events) else "incomplete"
        assert store.get_run("r1", thread_id="t").status == want  # type: ignore[union-attr]


def test_an_event_after_the_recorder_closed_is_not_recorded_and_is_logged(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = conversation_run("t", "r1", 12, 0)
    with agui_store.open(db_path) as store, caplog.at_level(logging.WARNING):
        batcher = Batcher(store)
        for event in events[:5]:
            batcher.add_event(event)
        batcher.close()
        batcher.add_event(events[5])
        assert batcher.recorded == 5 and batcher.dropped == 1
        assert store.events("r1", thread_id="t") == events[:5]
    assert "came after the recorder was closed" in caplog.text


@pytest.mark.parametrize(
    ("arguments", "error"),
    [({"scope": ""}, agui_store.InvalidArgumentError), ({"scope": 7}, TypeError),
     ({"thread_id": 5}, agui_store.InvalidArgumentError),
     ({"thread_id": ""}, agui_store.InvalidArgumentError)],
)
def test_a_recording_with_arguments_no_event_could_be_recorded_with_is_refused_when_called(
    tmp_path: Path, arguments: dict[str, Any], error: type[Exception]
) -> None:
    events = conversation_run("t", "r1", 12, 0)

    async def agent() -> AsyncIterator[dict[str, Any]]:
        for event in events:
            yield event

    with agui_store.open(tmp_path / "s.db") as store:
        with pytest.raises(error):
            store.record(events, **arguments)
        with pytest.raises(TypeError, match="iterable"):
            store.record(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"not one event \(a dict\)"):
            store.record(events[0])  # iterated, a dict is its keys
        stream = agent()
        with pytest.raises(TypeError) as sync_error:  # the other kind names the other record
            store.record(stream)  # type: ignore[arg-type]
        assert str(sync_error.value) == (
            "events must be an iterable of events, not async_generator (an async iterable: "
            "AsyncStore.record records it, with async for)"
        )

        async def main() -> None:
            await stream.aclose()
            async with aio.open(tmp_path / "a.db") as astore:
                with pytest.raises(error):
                    astore.record(agent(), **arguments)
                with pytest.raises(TypeError) as async_error:
                    astore.record(events)  # type: ignore[arg-type]
                assert str(async_error.value) == (
                    "events must be an async iterable of events, not list (a sync iterable: "
                    "Store.record records it)"
                )

        asyncio.run(main())
        assert store.threads() == []


@settings(max_examples=25, deadline=None)
@given(events=st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.datetimes(),
    st.text(max_size=40), st.binary(max_size=40), st.binary(max_size=8).map(bytearray),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2), st.builds(object),
))
def test_events_that_are_not_a_stream_are_refused_with_a_store_error_that_is_a_type_error(
    tmp_path_factory: pytest.TempPathFactory, events: Any
) -> None:
    # A text is iterated as its characters and a dict as its keys: none is an event.
    path = tmp_path_factory.mktemp("s") / "s.db"
    with agui_store.open(path) as store:
        with pytest.raises(agui_store.AguiStoreError) as error:
            store.record(events)
        assert isinstance(error.value, TypeError)
        assert str(error.value).startswith("events must be an iterable of events, not ")

        async def main() -> None:
            async with aio.open(path) as astore:
                with pytest.raises(agui_store.AguiStoreError) as error:
                    astore.record(events)
                assert isinstance(error.value, TypeError)

        asyncio.run(main())
        assert store.threads() == []


def test_a_recording_on_a_closed_store_is_refused_when_called(tmp_path: Path) -> None:
    # Once events flow, a store's failure is a warning and the stream goes on; a store
    # closed before the call is the caller's mistake, said to the caller.
    events = conversation_run("t", "r1", 12, 0)
    store = agui_store.open(tmp_path / "s.db")
    store.close()
    with pytest.raises(agui_store.AguiStoreError, match="the store is closed"):
        store.record(events)

    async def main() -> None:
        astore = await aio.open(tmp_path / "a.db")
        await astore.close()

        async def agent() -> AsyncIterator[dict[str, Any]]:
            for event in events:
                yield event

        with pytest.raises(agui_store.AguiStoreError, match="the store is closed"):
            astore.record(agent())
        wrapped = aio.AsyncStore(store, writer="thread")  # a Store its owner closed
        with pytest.raises(agui_store.AguiStoreError, match="the store is closed"):
            wrapped.record(agent())

    asyncio.run(main())


def test_events_iterable_by_index_alone_are_recorded_as_iter_reads_them(tmp_path: Path) -> None:
    events = conversation_run("t", "r1", 12, 0)

    class ByIndex:  # the sequence protocol of old: __getitem__ until IndexError
        def __getitem__(self, at: int) -> dict[str, Any]:
            return events[at]

    with agui_store.open(tmp_path / "s.db") as store:
        assert list(store.record(ByIndex())) == events  # type: ignore[arg-type]
        assert store.events("r1", thread_id="t") == events


def _session_waiting_on_a_lock(watcher: Any, seconds: float = 60) -> int | None:
    """The server backend of the store's database that comes to wait on a lock (polled
    through ``watcher``, an autocommit session), within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        row = watcher.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        ).fetchone()
        if row is not None:
            return int(row[0])
        time.sleep(0.01)
    return None


def test_a_lost_postgresql_connection_stops_the_recording_saying_what_was_recorded_and_not(
    postgres_server: Any, postgres_store_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    psycopg = pytest.importorskip("psycopg")
    url = postgres_store_database
    events = streams.run("t", "r1", *streams.say("m1", "one two three"))
    assert len(events) == 5  # RUN_STARTED, a text message's three events, RUN_FINISHED

    async def main() -> AsyncBatcher:
        # The writer process appends; the wait for the lock below is bounded by this.
        async with aio.open(url, busy_timeout_ms=60_000) as astore:
            batcher = AsyncBatcher(astore, input=body("t", "r1"), thread_id="t")
            for event in events[:2]:
                batcher.add_event(event)
            await batcher.flush()  # the first batch is written
            with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as watcher:
                # Another session holds the run's row: the next append waits for it inside
                # its write transaction, where its connection is then terminated.
                holder.execute(f"SELECT 1 FROM {schema.SCHEMA}.runs WHERE run_id = 'r1' FOR UPDATE")
                for event in events[2:4]:
                    batcher.add_event(event)
                appending = asyncio.ensure_future(batcher.flush())
                pid = await asyncio.to_thread(_session_waiting_on_a_lock, watcher)
                assert pid is not None and postgres_server.terminate_backend(pid)
                await appending
                holder.rollback()
            batcher.add_event(events[4])  # the stream goes on: this is not recorded
            with caplog.at_level(logging.WARNING, logger="agui_store.recording"):
                await batcher.aclose()
            return batcher

    batcher = asyncio.run(main())
    with agui_store.open(url) as store:
        recorded = store.get_run("r1", thread_id="t")
        assert recorded is not None and recorded.event_count == 2
        assert recorded.status == "incomplete"
    said = [r.getMessage() for r in caplog.records if r.name == "agui_store.recording"]
    assert said and said[-1].startswith(
        "recording of thread t, run r1 stopped: 2 event(s) recorded, 3 not (2 of them, the "
        "batch being appended when the connection was lost, are recorded if it was lost "
        "during the commit: the run's event_count tells): "
    )
    assert "lost the connection to the PostgreSQL server" in said[-1]
    assert said[-1].endswith(
        "the recording is not tried again, as a batch appended twice would record its events "
        "twice: the run's later events are not recorded"
    )
    assert (batcher.recorded, batcher.dropped, batcher.uncertain) == (2, 3, 2)
