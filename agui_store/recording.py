"""Recording live runs: events are recorded in batches as they pass, without holding them up.

``store.record(events, input=body)`` and ``astore.record(agen, input=body)`` wrap a producer's
events: each one is yielded unchanged as it arrives, and kept as JSON text in a batch that is
appended when its oldest event is ``interval`` old (0.1 s), when it holds ``max_bytes``, and
at the end. Whatever ends the stream (its last event, the producer raising, the consumer
stopping or being cancelled), everything that passed is recorded and nothing is added: a run
that did not end is left incomplete.

The batching itself is :class:`Batcher` (over an :class:`Appender`, such as a
:class:`~agui_store.store.Store`, with a flusher thread) and :class:`AsyncBatcher` (over an
:class:`AsyncAppender`, such as an :class:`~agui_store.aio.AsyncStore`, whose worker thread
does the appends), both driving one :class:`_Pending` core; the ASGI recorder feeds them the
``data:`` payloads of a response. The recorder knows the stores only through those two
interfaces, so the stores import it and not the other way round.

A recording failure never reaches the stream. A batch the store refuses is reported through
``logging`` (logger ``agui_store.recording``) with the thread, run and reason, and leaves the
file as it was; the run stops being recorded there, since appending its later events after a
gap would record a run that never happened. A batch the store answers busy (another writer
held the lock past the busy timeout, or the server cancelled the transaction) wrote nothing:
it is tried again, :data:`BUSY_TRIES` times in all, before the recording stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any, Protocol

import msgspec

from agui_store.codec import ingest
from agui_store.codec.sse import MAX_EVENT_BYTES, SSEParser
from agui_store.engine import arguments, placement
from agui_store.errors import (
    AguiStoreError,
    ArgumentTypeError,
    InvalidEventError,
    OpenRunsError,
    StorageError,
    StoreBusyError,
)
from agui_store.records import AppendResult, one_line

__all__ = [
    "Appender",
    "AsyncAppender",
    "AsyncBatcher",
    "Batcher",
    "PartlyRecorded",
    "append_batch",
    "event_json",
    "opens_run",
    "record",
    "record_async",
]


class Appender(Protocol):
    """What a :class:`Batcher` writes through: one call that appends a batch, atomically
    (:meth:`agui_store.Store.append` is one). An appender with a ``max_event_bytes`` (a
    store's) has an event stream's larger events refused as they arrive, never held whole."""

    def append(
        self,
        events: Any,
        *,
        thread_id: str | None = None,
        input: Any = None,
        check_sequence: bool = True,
        run_id: str | None = None,
        scope: str | None = None,
    ) -> AppendResult:
        """Append ``events`` whole or not at all; what was written."""
        ...


class AsyncAppender(Protocol):
    """What an :class:`AsyncBatcher` writes through (:class:`agui_store.aio.AsyncStore` is
    one): a batch appended off the event loop, and a register of the batchers still open,
    which the appender's ``close`` waits for. A ``max_event_bytes``, as :class:`Appender`'s."""

    def append_batch(
        self, batch: list[bytes], options: dict[str, Any]
    ) -> Awaitable[AppendResult]:
        """Start appending one recorded batch (:func:`append_batch`'s arguments); awaited,
        what was written. The batcher waits for it through its own cancellation."""
        ...

    def register_batcher(self, batcher: AsyncBatcher) -> None:
        """Keep ``batcher`` as open until :meth:`unregister_batcher`."""
        ...

    def unregister_batcher(self, batcher: AsyncBatcher) -> None:
        """``batcher`` has appended the rest and closed."""
        ...

log = logging.getLogger("agui_store.recording")

#: A batch is appended at the latest this long (seconds) after its oldest event passed.
FLUSH_INTERVAL = 0.1
#: ... or as soon as it holds this many bytes of JSON.
FLUSH_BYTES = 1 << 20
#: How many times a batch is appended while the store answers busy (``StoreBusyError``:
#: another writer held the lock past the busy timeout, or the server cancelled the
#: transaction; nothing was written either way) before the recording stops.
BUSY_TRIES = 3


# --------------------------------------------------------------------------------------------
# One event as JSON text
# --------------------------------------------------------------------------------------------

_ENCODER = msgspec.json.Encoder()


def event_json(event: Any) -> bytes:
    """An event's JSON text, taken as it passes: bytes and text as they are, dicts and
    msgspec structs encoded compactly, pydantic events (``ag_ui.core``) as their
    ``model_dump_json(by_alias=True)`` reads (what ``EventEncoder`` puts on the wire).

    Raises:
        InvalidEventError: the value cannot be written as JSON.
    """
    if isinstance(event, bytes):
        return event
    if isinstance(event, (bytearray, memoryview)):
        return bytes(event)
    if isinstance(event, str):
        try:
            return event.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidEventError(f"text is not valid Unicode: {exc.reason}") from None
    if isinstance(event, (dict, msgspec.Struct)):
        return ingest.encode(event)
    dump_json = getattr(event, "model_dump_json", None)
    if callable(dump_json) and not isinstance(event, type):
        return _model_json(event)
    raise InvalidEventError(
        f"cannot record {type(event).__name__} as an event: pass dicts, ag_ui.core events, "
        "msgspec structs or JSON text"
    )


def _model_json(event: Any) -> bytes:
    """A pydantic event's JSON, as ``model_dump_json(by_alias=True)`` writes it.

    ``ag_ui.core`` events serialize through a Python wrap serializer, and their ``Any``
    fields (a state snapshot, a RAW event, a CUSTOM value) by inspecting every value: a
    small event took 27 us, a 4 MB snapshot 23-37 ms, all of it on the event loop and
    holding the GIL. For those classes the fields are read directly and written by msgspec
    (6 us; 4-7 ms), with the same names and the same omissions; nested models are dumped by
    pydantic. Other models, and values msgspec cannot write, go through pydantic whole.
    """
    plan = _plan_of(type(event))
    if plan is not None:
        values = event.__dict__
        out: dict[str, Any] = {}
        try:
            for name, wire, omittable in plan:
                value = values[name]
                if value is None and omittable:
                    continue
                if isinstance(value, list) and value and hasattr(value[0], "model_dump"):
                    value = [_dumped(item) for item in value]
                elif hasattr(value, "model_dump") and not isinstance(value, type):
                    value = _dumped(value)
                out[wire] = value
            extra = getattr(event, "__pydantic_extra__", None)
            if extra:
                out.update(extra)
            return _ENCODER.encode(out)
        except (KeyError, TypeError, ValueError, OverflowError, UnicodeEncodeError):
            pass  # something msgspec cannot write as pydantic would: pydantic writes it all
    try:
        text = event.model_dump_json(by_alias=True)
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidEventError(
            f"the event could not be dumped to JSON: {str(exc)[:200]}"
        ) from None
    result: bytes = text.encode("utf-8")
    return result


def _dumped(model: Any) -> Any:
    if not hasattr(model, "model_dump"):
        return model
    return model.model_dump(mode="json", by_alias=True)


#: Per pydantic class: how to write it directly ((attribute, wire name, omitted when None)),
#: or None when it must go through pydantic.
_PLANS: dict[type, tuple[tuple[str, str, bool], ...] | None] = {}
#: The only serializer the direct path reproduces: ag_ui's base model omits an optional
#: field whose default is None when it has no value.
_KNOWN_SERIALIZERS = {"_omit_fields_without_value"}


def _plan_of(cls: type) -> tuple[tuple[str, str, bool], ...] | None:
    if cls in _PLANS:
        return _PLANS[cls]
    plan: tuple[tuple[str, str, bool], ...] | None = None
    decorators = getattr(cls, "__pydantic_decorators__", None)
    fields = getattr(cls, "model_fields", None)
    if (
        cls.__module__.startswith("ag_ui.")
        and decorators is not None
        and fields is not None
        and not decorators.field_serializers
        and set(decorators.model_serializers) <= _KNOWN_SERIALIZERS
        and not getattr(cls, "model_computed_fields", None)
    ):
        plan = tuple(
            (
                name,
                field.serialization_alias or field.alias or name,
                not field.is_required() and field.default is None,
            )
            for name, field in fields.items()
            if not field.exclude
        )
    _PLANS[cls] = plan
    return plan


# --------------------------------------------------------------------------------------------
# The batching core: what is pending, which run it continues, what happened
# --------------------------------------------------------------------------------------------


class _Pending:
    """What a batcher holds and knows, without any I/O: the events waiting to be appended,
    the run they continue, and what was written, refused or dropped."""

    def __init__(
        self,
        *,
        input: Any,
        thread_id: str | None,
        interval: float,
        max_bytes: int,
        scope: str | None = None,
        warn: bool = True,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, not {interval!r}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, not {max_bytes!r}")
        self.interval = interval
        self.max_bytes = max_bytes
        # Taken as it is now (the app may change its objects later), and as JSON text, which
        # a writer process receives as a plain copy. What cannot be written as JSON is kept
        # as given, for the store to refuse with its own error.
        self.input: Any = input
        if input is not None and not isinstance(input, (bytes, str)):
            with contextlib.suppress(InvalidEventError):
                self.input = event_json(input)
        self.thread_id = thread_id
        self.scope = scope
        self.run_id: str | None = None
        self.events: list[bytes] = []
        self.size = 0
        self.oldest: float | None = None  # when the oldest pending event passed
        self.recorded = 0
        self.dropped = 0
        # Of the dropped, the batch whose append met a lost connection: written if it was
        # lost during the commit, which the recorder cannot tell.
        self.uncertain = 0
        self.added = 0  # every event offered: recorded, dropped, or waiting
        self.last_seq: int | None = None
        self.failed: BaseException | None = None
        self.failure: str | None = None  # the failure as the recorder's user reads it
        self.closed = False
        # What closed it, as said of an event that comes after: its owner, or the store.
        self.closer = "the recorder was closed"
        self.warn = warn  # False: the owner reports what was not recorded, once
        self.reported = (0, 0)  # (recorded, not) as the warning of the failure said them
        self.sse: SSEParser | None = None  # the stream is text/event-stream, as sent
        # Its largest event: the store's, so that one it would refuse is never held whole.
        self.max_event_bytes = max_event_bytes
        self.unframed = 0  # the stream's events its framer refused or skipped, counted
        # The stream as its failures name it: what was given to record, or to the batcher.
        self.stream = "the stream"

    def payloads(self, event: Any) -> list[bytes]:
        """The JSON text of the events ``event`` carries: its own (:func:`event_json`); or,
        for text of a ``text/event-stream`` (``data: {...}`` and a blank line, what
        ag_ui's ``EventEncoder`` and pydantic-ai's ``encode_stream`` yield), the data of
        each event it completes. No JSON text begins as such a line does; once a stream
        is seen to be one, all of its text is read as one (an event may span chunks)."""
        raw = event_json(event)
        text = isinstance(event, (str, bytes, bytearray, memoryview))
        if self.sse is None:
            if not text or not raw.removeprefix(b"\xef\xbb\xbf").startswith(_SSE_FIELDS):
                return [raw]
            self.sse = SSEParser(max_event_bytes=self.max_event_bytes)
        elif not text:  # its JSON read as lines of the stream would be skipped, unsaid
            raise InvalidEventError(
                f"cannot record {type(event).__name__} in a text/event-stream: the stream "
                "began as its text (data: lines), so each of its events must come as that "
                "text too"
            )
        # The events before an oversized one are given; the refusal comes after them
        # (count_unframed), so that what the chunk completed first is not lost with it.
        return self.sse.read(raw)

    def framer_stopped(self) -> bool:
        """Whether the event stream has an event too large to read: from it on, its events
        are the framer's to count (:meth:`count_unframed`), none reaches :meth:`add`."""
        return self.sse is not None and self.sse.error is not None

    def count_unframed(self) -> None:
        """Count as dropped the events of the stream its framer refused or skipped since
        the last call; the first refusal stops the recording (what passed before it is
        still appended)."""
        sse = self.sse
        if sse is None or sse.error is None:
            return
        # The refused event is counted from its refusal; the framer counts it at its end.
        unframed = max(sse.dropped, 1)
        new, self.unframed = unframed - self.unframed, unframed
        self.added += new
        self.dropped += new
        if self.failed is None:
            self._name_from(self.events[0] if self.events else None)
            position = self.recorded + len(self.events)  # those before it still go in
            # The framer's words are a response's (the ASGI recorder's): these events were
            # given to the recorder, and the limit is the store's.
            limit = f"the store's max_event_bytes ({self.max_event_bytes:,} bytes)"
            refusal = InvalidEventError(f"the event is larger than {limit}")
            self._fail(refusal, position, position)

    def unended(self) -> list[bytes]:
        """The data of an event the event stream did not end with a blank line, which the
        official client still reads (``[]``: none, or no event stream)."""
        return [] if self.sse is None else self.sse.finish()

    def add(self, raw: bytes, now: float) -> bool:
        """Keep one event; ``True`` when the batch is full and should be appended now."""
        self.added += 1
        if self.failed is not None or self.closed:
            self.dropped += 1
            if self.failed is None:  # the stream goes on after the recorder closed: said once
                late = AguiStoreError(f"an event came after {self.closer}")
                self._fail(late, self.recorded, None)
            return False
        if not self.events:
            self.oldest = now
        self.events.append(raw)
        self.size += len(raw)
        return self.size >= self.max_bytes

    def refuse(self, exc: BaseException) -> None:
        """An event that could not even be turned into JSON: recording stops there (what
        passed before it is still appended)."""
        self.added += 1
        self.dropped += 1
        self._name_from(self.events[0] if self.events else None)
        position = self.recorded + len(self.events)  # those before it still go in
        self._fail(exc, position, position)

    def due_at(self) -> float | None:
        """When the pending batch must be appended (``None``: nothing pending)."""
        return None if self.oldest is None else self.oldest + self.interval

    def take(self) -> tuple[list[bytes], dict[str, Any]]:
        """The pending events up to the one that makes ``max_bytes``, and the keywords of
        :func:`append_batch` (the first batch carries the input; later ones name the run
        they may continue). What gathered beyond while an append was in flight stays
        pending, due at once: it is appended in batches of that size, back to back.
        """
        events = self.events
        if not events or self.size - len(events[-1]) < self.max_bytes:
            batch, self.events, self.size, self.oldest = events, [], 0, None
        else:  # one batch of it all would append slower per event, and fall further behind
            size = cut = 0
            for raw in events:
                size += len(raw)
                cut += 1
                if size >= self.max_bytes:
                    break
            batch, self.events = events[:cut], events[cut:]
            self.size -= size
        options: dict[str, Any] = {"check_sequence": True}
        if self.thread_id is not None:
            options["thread_id"] = self.thread_id
        if self.scope is not None:
            options["scope"] = self.scope
        if self.run_id is None:
            if self.input is not None:
                options["input"] = self.input
        else:
            options["continues"] = self.run_id
        return batch, options

    def written(self, batch: list[bytes], result: AppendResult) -> None:
        self.recorded += len(batch)
        self.thread_id = result.thread_id or self.thread_id
        if result.run_ids:
            self.run_id = result.run_ids[-1]
        if result.last_seq is not None:
            self.last_seq = result.last_seq
        self.input = None

    def _name_from(self, first: bytes | None) -> None:
        """Before any batch is written, the thread and run for reports: from the input, or
        the batch's RUN_STARTED."""
        if self.run_id is not None:
            return
        for source in (self.input, first):
            ids = _ids_of(source)
            if ids is not None and ids.runId is not None:
                self.thread_id = self.thread_id or ids.threadId
                self.run_id = ids.runId
                return

    def refused(self, batch: list[bytes], exc: BaseException, first: int) -> None:
        """The store refused a batch (the file is as it was): stop recording this run.
        Events that came after the batch are dropped too: they would follow a gap.
        ``first``: the place in the stream of the first event of the batch as it was
        appended (the refusal's index counts from it)."""
        self.dropped += len(batch) + len(self.events)
        self._name_from(batch[0] if batch else None)
        refusal = exc.__cause__ if isinstance(exc, PartlyRecorded) else exc
        if isinstance(refusal, StorageError) and refusal.maybe_committed:
            self.uncertain = len(batch)
        index = refusal.index if isinstance(refusal, InvalidEventError) else None
        self._fail(exc, self.recorded, None if index is None else first + index)
        self.events, self.size, self.oldest = [], 0, None

    def _fail(self, exc: BaseException, recorded: int, position: int | None) -> None:
        """Stop recording, and say so at once (a stream may go on for long): ``recorded``
        events of the run are recorded, or about to be; ``position``: the place in the
        stream of the event refused, when one was."""
        if self.failed is not None:
            return
        self.failed = exc
        self.failure = _refusal_text(exc, position, self.stream, self.thread_id, self.run_id)
        self.reported = (recorded, self.dropped)
        self._report(*self.reported)

    def _report(self, recorded: int, dropped: int) -> None:
        if self.warn:
            log.warning(
                "recording of thread %s, run %s stopped: %s: %s",
                # The ids come from the stream or a client's request: their control
                # characters as escapes, so that a newline in one cannot forge a log line.
                one_line(self.thread_id or "?"),
                one_line(self.run_id or "(none recorded)"),
                counted(recorded, dropped, self.uncertain),
                one_line(str(self.failure)),
            )

    def finish(self) -> None:
        """The stream ended (or its recorder was closed, and again when the stream ends
        after that): say what was not recorded, when it is more than the warning of the
        failure said (events came after it, or those before it failed too)."""
        self.count_unframed()
        final = (self.recorded, self.dropped)
        if self.failed is not None and final != self.reported:
            self.reported = final
            self._report(*final)
        self.closed = True


def counted(recorded: int, dropped: int, uncertain: int = 0) -> str:
    """What a stopped recording recorded and did not, as its warning says it; ``uncertain``:
    how many of the ``dropped`` were in the batch whose append lost its connection to the
    store, which is written if it was lost during the commit."""
    said = f"{recorded} event(s) recorded, {dropped} not"
    if uncertain:
        said += (
            f" ({uncertain} of them, the batch being appended when the connection was lost, "
            "are recorded if it was lost during the commit: the run's event_count tells)"
        )
    return said


def _refusal_text(
    exc: BaseException, position: int | None, stream: str, thread_id: str | None,
    run_id: str | None,
) -> str:
    """What stopped a recording, in the words of the one who records: the event refused
    counted in the stream (from 0, as ``append`` counts a batch's), not in the batch it
    happened to be appended in, and advice the recorder can follow (of the run
    ``run_id`` of thread ``thread_id``, when the stream names them)."""
    refusal = exc.__cause__ if isinstance(exc, PartlyRecorded) else exc
    if isinstance(refusal, OpenRunsError):
        # append's advice (name the run) is not the recorder's: the stream opens its run.
        runs = len(refusal.run_ids)
        return (
            f"event {position or 0} of {stream}: the stream starts no run, and thread "
            f"{arguments.quote(refusal.thread_id)} has {runs} open runs it may continue: "
            "begin the stream with its RUN_STARTED"
        )
    if isinstance(refusal, StorageError) and refusal.maybe_committed:
        # The store's words end with its own next call; the recording makes none.
        return (
            f"{exc}; the recording is not tried again, as a batch appended twice would "
            "record its events twice: the run's later events are not recorded"
        )
    if position is None or not isinstance(refusal, InvalidEventError):
        return str(exc)
    where = [f"event {position} of {stream}"]
    if refusal.event_type is not None:
        where.append(f"({refusal.event_type})")
    if refusal.path and refusal.path != "$":
        where.append(f"at {refusal.path}")
    reason = refusal.reason
    if placement.refuses_recorded_run(refusal, thread_id, run_id):
        # append's advice (continue the run without a RUN_STARTED) is not the recorder's:
        # the stream it records starts its run, and a run id is recorded once.
        reason = (
            f"run {arguments.quote(run_id)} is already recorded in thread "
            f"{arguments.quote(thread_id)}; a recording starts a new run id for each run"
        )
    return f"{' '.join(where)}: {reason}"


#: The stream ``record`` reads, as the failures of its recording name it.
_GIVEN_TO_RECORD = "the stream given to record"

#: How the lines of a text/event-stream begin (a comment line begins with ":").
_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")


class _Ids(msgspec.Struct):
    threadId: str | None = None
    runId: str | None = None


_IDS = msgspec.json.Decoder(_Ids)


def _ids_of(source: Any) -> _Ids | None:
    """The ``threadId`` and ``runId`` of an input or a RUN_STARTED, for reports only (the
    store validates them); ``None`` when they cannot be read."""
    try:
        if isinstance(source, dict):
            return msgspec.convert(source, _Ids)
        if isinstance(source, str):
            source = source.encode("utf-8")
        if isinstance(source, (bytes, bytearray, memoryview)):
            return _IDS.decode(source)
    # RecursionError: valid JSON nested deeper than the decoder follows (a client's body).
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeError, RecursionError):
        pass
    return None


class _Type(msgspec.Struct):
    type: Any = None


_TYPE = msgspec.json.Decoder(_Type)


def opens_run(event: bytes) -> bool:
    """Whether an event, as JSON, is a RUN_STARTED (which opens a run); ``False`` for what
    is not JSON, which the store refuses, naming the problem."""
    try:
        return bool(_TYPE.decode(event).type == "RUN_STARTED")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


class PartlyRecorded(AguiStoreError):
    """The store refused an event of a batch: the events before it were written
    (``result``), it and the rest were not. Its message is the refusal's."""

    def __init__(self, message: str, result: AppendResult) -> None:
        super().__init__(message)
        self.result = result


def append_batch(
    store: Appender, batch: list[bytes], *, continues: str | None = None, **options: Any
) -> AppendResult:
    """Append one batch of a recording, where the store runs (the writer process), so that
    the loop never reads the batch.

    A batch that does not open a run of its own continues ``continues`` (the run the
    previous batch ended in), by name, so that two runs of one thread streaming at once are
    recorded apart. When the store refuses an event, the events before it are appended
    alone (they passed, and they are valid), so that what is recorded does not depend on
    where the batches happened to be cut; :class:`PartlyRecorded` then tells both.
    """
    if continues is not None and batch and not opens_run(batch[0]):
        options["run_id"] = continues
    try:
        return _append_when_free(store, batch, options)
    except InvalidEventError as exc:
        good = exc.index
        if good is None or not 0 < good < len(batch):
            raise
        result = _append_when_free(store, batch[:good], options)
        raise PartlyRecorded(str(exc), result) from exc


def _append_when_free(store: Appender, batch: list[bytes], options: dict[str, Any]) -> AppendResult:
    """``store.append``, tried again while the store answers busy, up to :data:`BUSY_TRIES`
    times: a busy append wrote nothing, and the batch is still here to write."""
    tries = 1
    while True:
        try:
            return store.append(batch, **options)
        except StoreBusyError:
            if tries == BUSY_TRIES:
                raise
            tries += 1


def _largest_event(appender: object) -> int:
    """The largest event ``appender`` takes (a store's ``max_event_bytes``), for the framer of
    an event stream: an event the store would refuse is refused as it arrives, never held
    whole (:data:`~agui_store.codec.sse.MAX_EVENT_BYTES` for an appender that does not say)."""
    limit = getattr(appender, "max_event_bytes", None)
    return limit if isinstance(limit, int) and limit > 0 else MAX_EVENT_BYTES


#: Called after each batch is written, in order, with its receipt and its events' JSON.
OnWritten = Callable[[AppendResult, list[bytes]], None]


def _settle(
    pending: _Pending,
    on_written: OnWritten | None,
    batch: list[bytes],
    outcome: AppendResult | BaseException,
) -> None:
    """What one append did, told to the core and the listener: written, refused, or the
    events before a refused one written and the rest refused."""
    first = pending.recorded  # the place of the batch's first event in the stream
    if isinstance(outcome, PartlyRecorded):
        written = outcome.result.event_count
        pending.written(batch[:written], outcome.result)
        _tell(on_written, outcome.result, batch[:written])
        pending.refused(batch[written:], outcome, first)
    elif isinstance(outcome, BaseException):
        pending.refused(batch, outcome, first)
    else:
        pending.written(batch, outcome)
        _tell(on_written, outcome, batch)


def _tell(on_written: OnWritten | None, result: AppendResult, batch: list[bytes]) -> None:
    if on_written is None:
        return
    try:
        on_written(result, batch)
    except Exception:  # the listener's problem: the recording goes on
        log.exception(
            "on_written raised for thread %s, run %s",
            one_line(result.thread_id), one_line(", ".join(result.run_ids)),
        )


# --------------------------------------------------------------------------------------------
# Over a Store: a flusher thread
# --------------------------------------------------------------------------------------------


class Batcher:
    """Records one stream of events into a :class:`~agui_store.store.Store` in batches.

    ``add`` only keeps the event; a flusher thread of the batcher appends each batch when
    it is due, so the producer and the consumer never wait for SQLite. ``close`` appends
    the rest and stops the thread.
    """

    def __init__(
        self,
        store: Appender,
        *,
        input: Any = None,
        thread_id: str | None = None,
        interval: float = FLUSH_INTERVAL,
        max_bytes: int = FLUSH_BYTES,
        scope: str | None = None,
        on_written: OnWritten | None = None,
    ) -> None:
        self._store = store
        self._pending = _Pending(
            input=input,
            thread_id=thread_id,
            interval=interval,
            max_bytes=max_bytes,
            scope=scope,
            max_event_bytes=_largest_event(store),
        )
        self._on_written = on_written
        self._changed = threading.Condition()
        self._flush_now = False
        self._writing = False
        self._thread: threading.Thread | None = None

    # What it knows, read-only.
    thread_id = property(lambda self: self._pending.thread_id)
    run_id = property(lambda self: self._pending.run_id)
    recorded = property(lambda self: self._pending.recorded)
    dropped = property(lambda self: self._pending.dropped)
    failed = property(lambda self: self._pending.failed)
    failure = property(lambda self: self._pending.failure)
    uncertain = property(lambda self: self._pending.uncertain)
    last_seq = property(lambda self: self._pending.last_seq)

    def add(self, raw: bytes | bytearray | memoryview) -> None:
        """Keep one event's JSON text (copied) for the next batch."""
        with self._changed:
            full = self._pending.add(bytes(raw), time.monotonic())
            if self._thread is None and not self._pending.closed:
                self._thread = threading.Thread(
                    target=self._run, name="agui-store-recorder", daemon=True
                )
                self._thread.start()
            if full:
                self._flush_now = True
            self._changed.notify_all()

    def add_event(self, event: Any) -> None:
        """Keep one event of any form (see :func:`event_json`), or the events a chunk of
        an event stream completes."""
        try:  # the producer's alone: the flusher never reads what an event stream holds
            raws = self._pending.payloads(event)
        except Exception as exc:  # not JSON, or a model that fails to dump: not the stream's
            with self._changed:
                self._pending.refuse(exc)
            return
        for raw in raws:
            self.add(raw)
        if self._pending.framer_stopped():
            with self._changed:
                self._pending.count_unframed()

    def flush(self) -> None:
        """Append what is pending now, and wait until it is written."""
        with self._changed:
            if self._thread is None or not self._thread.is_alive():
                self._write_here()
                return
            self._flush_now = True
            self._changed.notify_all()
            self._changed.wait_for(lambda: not self._pending.events and not self._writing)

    def close(self) -> None:
        """Append the rest and stop. Further events are counted as dropped."""
        with self._changed:
            if self._pending.closed:
                self._pending.finish()  # events that came after it closed are told
                return
        for raw in self._pending.unended():
            self.add(raw)
        with self._changed:
            self._pending.closed = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._changed:
            self._write_here()  # when there was never a thread, or it ended early
            self._pending.finish()

    def __enter__(self) -> Batcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_here(self) -> None:
        """With the condition held and no flusher running: append what is pending."""
        while self._pending.events:
            batch, options = self._pending.take()
            self._append(batch, options)

    def _run(self) -> None:
        pending = self._pending
        with self._changed:
            while True:
                due = pending.due_at()
                now_due = due is not None and time.monotonic() >= due
                full = pending.size >= pending.max_bytes  # what gathered during an append
                if pending.events and (self._flush_now or pending.closed or now_due or full):
                    batch, options = pending.take()
                    self._flush_now = False
                    self._writing = True
                    self._changed.release()
                    try:
                        result = self._call_append(batch, options)
                    finally:
                        self._changed.acquire()
                        self._writing = False
                    self._settle(batch, result)
                    self._changed.notify_all()
                    continue
                if pending.closed:
                    return
                self._flush_now = False
                self._changed.notify_all()
                timeout = None if due is None else max(0.0, due - time.monotonic())
                self._changed.wait(timeout)

    def _append(self, batch: list[bytes], options: dict[str, Any]) -> None:
        self._settle(batch, self._call_append(batch, options))

    def _call_append(
        self, batch: list[bytes], options: dict[str, Any]
    ) -> AppendResult | BaseException:
        try:
            return append_batch(self._store, batch, **options)
        except Exception as exc:  # never into the stream: reported and kept in `failed`
            return exc

    def _settle(self, batch: list[bytes], result: AppendResult | BaseException) -> None:
        _settle(self._pending, self._on_written, batch, result)


def _check_arguments(
    events: Any, iterable: bool, thread_id: Any, scope: Any, *, asynchronous: bool = False
) -> None:
    """Refuse a call whose arguments no event could be recorded with, when it is made: a
    recorder that took them would log the error only once the stream had passed.
    ``asynchronous``: the call is ``AsyncStore.record``'s, which reads ``async for``. The
    wrong kind of ``events`` is an :class:`ArgumentTypeError`: a ``TypeError`` and a store
    error."""
    wanted = "an async iterable" if asynchronous else "an iterable"
    if isinstance(events, Mapping):  # one event: iterated, it would be its keys
        raise ArgumentTypeError(
            f"events must be {wanted} of events, not one event (a dict): record a stream of "
            "them, or append([event])"
        )
    if isinstance(events, (str, bytes, bytearray, memoryview)):  # iterated: its characters
        raise ArgumentTypeError(
            f"events must be {wanted} of events, not one text ({arguments.a_kind(events)}): "
            "record a stream of events, or append(text)"
        )
    if not iterable:
        said = f"events must be {wanted} of events, not {type(events).__name__}"
        if asynchronous and _is_iterable(events):
            said += " (a sync iterable: Store.record records it)"
        elif not asynchronous and isinstance(events, AsyncIterable):
            said += " (an async iterable: AsyncStore.record records it, with async for)"
        raise ArgumentTypeError(said)
    arguments.check_thread_id(thread_id)
    arguments.check_scope(scope)


def _is_iterable(events: Any) -> bool:
    """Whether ``iter`` takes ``events``, through ``__iter__`` or ``__getitem__`` (not
    consumed: a generator's iterator is itself)."""
    try:
        iter(events)
    except TypeError:
        return False
    return True


def record(
    store: Appender,
    events: Iterable[Any],
    *,
    input: Any = None,
    thread_id: str | None = None,
    scope: str | None = None,
) -> Iterator[Any]:
    """Yield each of ``events`` unchanged while recording it (``Store.record``)."""
    _check_arguments(events, _is_iterable(events), thread_id, scope)
    return _recorded(store, events, input=input, thread_id=thread_id, scope=scope)


def _recorded(
    store: Appender,
    events: Iterable[Any],
    *,
    input: Any,
    thread_id: str | None,
    scope: str | None,
) -> Iterator[Any]:
    batcher = Batcher(store, input=input, thread_id=thread_id, scope=scope)
    batcher._pending.stream = _GIVEN_TO_RECORD
    source = iter(events)
    try:
        for event in source:
            batcher.add_event(event)
            yield event
    finally:
        try:
            close = getattr(source, "close", None)
            if close is not None:
                close()  # the consumer stopped: so does the producer (a no-op once it ended)
        finally:
            batcher.close()


# --------------------------------------------------------------------------------------------
# Over an AsyncStore: the store's worker thread appends, the loop only keeps the events
# --------------------------------------------------------------------------------------------


class AsyncBatcher:
    """Records one stream of events into an :class:`~agui_store.aio.AsyncStore` in batches.

    ``add`` is synchronous and cheap (it runs on the event loop); each batch is appended on
    the store's worker when it is due, at most one at a time and in order. ``aclose`` appends
    the rest; the store's ``close`` waits for batchers still open. What could not be
    recorded is logged (logger ``agui_store.recording``) unless ``warn=False``: the caller
    reports it, as the ASGI Recorder does in one WARNING per response.
    """

    def __init__(
        self,
        astore: AsyncAppender,
        *,
        input: Any = None,
        thread_id: str | None = None,
        interval: float = FLUSH_INTERVAL,
        max_bytes: int = FLUSH_BYTES,
        scope: str | None = None,
        on_written: OnWritten | None = None,
        warn: bool = True,
    ) -> None:
        self._astore = astore
        self._pending = _Pending(
            input=input,
            thread_id=thread_id,
            interval=interval,
            max_bytes=max_bytes,
            scope=scope,
            warn=warn,
            max_event_bytes=_largest_event(astore),
        )
        self._on_written = on_written
        self._timer: asyncio.TimerHandle | None = None
        self._writer: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None
        self._settled: asyncio.Event | None = None  # set as the writer lands a batch
        astore.register_batcher(self)

    thread_id = property(lambda self: self._pending.thread_id)
    run_id = property(lambda self: self._pending.run_id)
    recorded = property(lambda self: self._pending.recorded)
    dropped = property(lambda self: self._pending.dropped)
    failed = property(lambda self: self._pending.failed)
    failure = property(lambda self: self._pending.failure)
    uncertain = property(lambda self: self._pending.uncertain)
    last_seq = property(lambda self: self._pending.last_seq)

    def add(self, raw: bytes | bytearray | memoryview) -> None:
        """Keep one event's JSON text (copied) for the next batch. Call it on the loop."""
        loop = asyncio.get_running_loop()
        if self._pending.add(bytes(raw), loop.time()):
            self._start_writer()
        elif self._timer is None and self._writer is None and self._pending.events:
            self._timer = loop.call_later(self._pending.interval, self._start_writer)

    def add_event(self, event: Any) -> None:
        """Keep one event of any form (see :func:`event_json`), or the events a chunk of
        an event stream completes."""
        try:
            raws = self._pending.payloads(event)
        except Exception as exc:  # not JSON, or a model that fails to dump: not the stream's
            self._pending.refuse(exc)
            return
        for raw in raws:
            self.add(raw)
        if self._pending.framer_stopped():
            self._pending.count_unframed()

    async def flush(self, *, later: bool = True) -> None:
        """Append what is pending now, and wait until it is written; with ``later=False``,
        only until the events added before the call are (a stream that goes on adding
        faster than appends land would otherwise keep the caller waiting)."""
        pending = self._pending
        before = pending.added
        while pending.events or self._writer is not None:
            if not later and pending.recorded + pending.dropped >= before:
                return
            self._start_writer()
            writer = self._writer
            if writer is None:
                continue
            if later:
                await asyncio.shield(writer)
                continue
            # The writer goes on while events keep coming: wait for its next batch only, on
            # the one event every caller waiting for that batch shares (a second caller's
            # own would leave the first waiting until the writer stops).
            settled = self._settled
            if settled is None or settled.is_set():
                settled = self._settled = asyncio.Event()
            waiting = asyncio.ensure_future(settled.wait())
            try:
                await asyncio.wait({waiting, writer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()

    async def aclose(self, *, by_store: bool = False) -> None:
        """Append the rest and stop; the appends finish even if the caller is cancelled.
        ``by_store``: the store's ``close`` closes it, while its stream may go on: an event
        that comes after is not recorded, and the warning says the store was closed."""
        if self._closing is None:
            if by_store:
                self._pending.closer = "the store was closed (AsyncStore.close)"
            self._closing = asyncio.get_running_loop().create_task(self._close())
        await asyncio.shield(self._closing)
        self._pending.finish()  # closed before: events that came since are told

    async def __aenter__(self) -> AsyncBatcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _close(self) -> None:
        try:
            for raw in self._pending.unended():
                self.add(raw)
            while True:
                try:
                    await self.flush()
                    break
                except asyncio.CancelledError:
                    # The event loop is shutting down (asyncio.run cancels every task left):
                    # what passed is still appended, as a closing recorder promises.
                    _uncancel()
        finally:
            self._pending.finish()
            self._astore.unregister_batcher(self)

    def _start_writer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._writer is not None and self._writer.done():
            self._writer = None  # cancelled before it began: it wrote nothing
        if self._writer is None and self._pending.events:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        """Append the pending batches, in order. A cancellation (the event loop shutting
        down cancels every task left) does not stop it: the append in flight runs to its
        end anyway, and its outcome is needed to append the next batch into the same run;
        what is pending is then appended at once, as no timer may fire any more."""
        pending = self._pending
        cancelled = False
        try:
            while pending.events:
                batch, options = pending.take()
                outcome: AppendResult | BaseException
                try:
                    appending = asyncio.ensure_future(self._astore.append_batch(batch, options))
                except Exception as exc:  # never into the stream: reported, kept in `failed`
                    outcome = exc
                else:
                    while not appending.done():
                        try:
                            await asyncio.wait({appending})  # never cancels the append
                        except asyncio.CancelledError:
                            cancelled = True
                            _uncancel()
                    if appending.cancelled():
                        outcome = AguiStoreError("the append of the batch was cancelled")
                    else:
                        error = appending.exception()
                        outcome = appending.result() if error is None else error
                _settle(pending, self._on_written, batch, outcome)
                if self._settled is not None:
                    self._settled.set()
                due = pending.due_at()
                loop_time = asyncio.get_running_loop().time()
                if (
                    not cancelled
                    and due is not None
                    and loop_time < due
                    and pending.size < pending.max_bytes
                ):
                    break  # not due yet: the timer below takes it
        finally:
            self._writer = None
            if pending.events and self._timer is None and not cancelled:
                loop = asyncio.get_running_loop()
                due = pending.due_at()
                delay = 0.0 if due is None else max(0.0, due - loop.time())
                self._timer = loop.call_later(delay, self._start_writer)


def _uncancel() -> None:
    """Take back the cancellation the current task just caught, which it goes on through
    (Python 3.11 counts them: a pending one would cut a later timeout short)."""
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()


def record_async(
    astore: AsyncAppender,
    events: AsyncIterable[Any],
    *,
    input: Any = None,
    thread_id: str | None = None,
    scope: str | None = None,
) -> AsyncIterator[Any]:
    """Yield each of ``events`` unchanged while recording it (``AsyncStore.record``)."""
    _check_arguments(
        events, isinstance(events, AsyncIterable), thread_id, scope, asynchronous=True
    )
    return _recorded_async(astore, events, input=input, thread_id=thread_id, scope=scope)


async def _recorded_async(
    astore: AsyncAppender,
    events: AsyncIterable[Any],
    *,
    input: Any,
    thread_id: str | None,
    scope: str | None,
) -> AsyncIterator[Any]:
    batcher = AsyncBatcher(astore, input=input, thread_id=thread_id, scope=scope)
    batcher._pending.stream = _GIVEN_TO_RECORD
    source = aiter(events)
    try:
        async for event in source:
            batcher.add_event(event)
            yield event
    finally:
        try:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            await batcher.aclose()
