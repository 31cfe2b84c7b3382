"""Record the AG-UI runs an ASGI app serves, and answer clients that reconnect: pure ASGI.

```python
app = agui_store.asgi.Recorder(app, store=store_or_astore, scope=None)
app.add_middleware(agui_store.asgi.Recorder, store=...)   # the same, Starlette style
```

A request is an AG-UI run when it is a POST whose JSON body is a ``RunAgentInput`` and whose
response is 200 ``text/event-stream`` without a content encoding
(docs/design/behaviour.md#live-recording).
Its body becomes the run's ``input=`` and the ``data:`` payloads of the response its events,
byte-exact. Every other request passes through untouched. The client always gets exactly the bytes
the app sent: each chunk is forwarded first and recorded after, off the response's path; what cannot
be recorded is logged (logger ``agui_store.asgi``) and never reaches the client.

``POST <endpoint>/connect`` with a ``RunAgentInput`` body answers the hydration stream of a
run (``Store.reconnect_stream``) as SSE, each event with an ``id:`` (the store's global sequence
cursor), then the live rest of the run when it is still streaming through this recorder.
A ``Last-Event-ID`` header resumes after that cursor.

Nothing here imports a web framework: the module speaks the ASGI 3 protocol only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from agui_store import recording
from agui_store.aio import AsyncStore
from agui_store.codec.sse import SSEParser, encode_sse
from agui_store.engine import arguments, placement
from agui_store.errors import (
    AguiStoreError,
    ArgumentTypeError,
    InvalidArgumentError,
)
from agui_store.records import AppendResult, one_line
from agui_store.store import Store

__all__ = ["Recorder", "SSEFramer", "encode_sse"]

logger = logging.getLogger("agui_store.asgi")

#: What ``Recorder(unowned=...)`` takes: how a run without an owner is handled.
UNOWNED = ("skip", "record", "refuse")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The SSE parser the recorder reads a response with, under the name this module exports.
SSEFramer = SSEParser

#: AG-UI's binary (protobuf) encoding of events, which the Recorder does not read.
PROTOBUF_TYPE = b"application/vnd.ag-ui.event+proto"


def _is_json(content_type: bytes | None) -> bool:
    media = (content_type or b"").partition(b";")[0].strip().lower()
    return media == b"application/json" or media.endswith(b"+json")


def _shown_path(scope: Scope) -> str:
    """A request's path as a log line shows it: the client chose it (``%0A`` arrives as a
    newline), so its control characters are escapes and it cannot start a line of its own.
    The thread and run ids a body names are shown the same way (:func:`one_line`)."""
    return one_line(str(scope.get("path")))


def _identity(content_encoding: bytes | None) -> bool:
    """Whether a Content-Encoding header leaves the bytes as they are: none, or ``identity``
    in any case (content codings are case-insensitive, RFC 9110 8.4.1)."""
    return content_encoding is None or content_encoding.strip().lower() == b"identity"


def _header(headers: Any, name: bytes) -> bytes | None:
    for key, value in headers or ():
        if bytes(key).lower() == name:
            return bytes(value)
    return None


class _Ids(msgspec.Struct):
    """What the recorder reads of a request body on the event loop: the rest is validated
    by the store, off the loop."""

    threadId: str  # the wire names
    runId: str


_ids_decoder = msgspec.json.Decoder(_Ids)


class _ConnectIds(_Ids):
    """What makes a ``/connect`` body a reconnect: a ``RunAgentInput`` as ``HttpAgent``
    sends it (its ``messages`` a list; ``tools`` and ``context``, when given, lists), not any
    JSON naming a thread and a run, which the app's own route there may take."""

    messages: list[msgspec.Raw]
    tools: list[msgspec.Raw] | None = None
    context: list[msgspec.Raw] | None = None


_connect_decoder = msgspec.json.Decoder(_ConnectIds)


async def _whole_body(receive: Receive, limit: int) -> tuple[bytes, bool] | None:
    """A request's body, read before the app sees it, and whether it is whole: reading stops
    once it has grown past ``limit`` bytes (``None``: the client left)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        part = bytes(message.get("body", b""))
        parts.append(part)
        size += len(part)
        if not message.get("more_body", False):
            return b"".join(parts), True
        if size > limit:
            # No RunAgentInput the store takes is this large: the rest stays with the client.
            return b"".join(parts), False


def _ids_of(body: bytes, decoder: msgspec.json.Decoder[Any] = _ids_decoder) -> _Ids | None:
    try:
        return decoder.decode(body)  # type: ignore[no-any-return]
    # RecursionError: valid JSON nested deeper than the decoder follows, which the app
    # answers as it would without the Recorder (FastAPI: 400), not a server error.
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def _why_not_ids(body: bytes) -> str:
    """What keeps ``body`` from naming a run (:func:`_ids_of` gave ``None``), as msgspec
    says it: where and what (``Expected `str`, got `int` - at `$.threadId```)."""
    try:
        _ids_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        return str(e)[:200]
    except RecursionError:
        return "its JSON is nested deeper than it is read"
    return "it names a thread and a run"  # not reached: _ids_of read it


# --- the store, as coroutines ------------------------------------------------------------------


def _as_async(store: Any) -> tuple[AsyncStore, bool]:
    """An ``AsyncStore`` as it is; a ``Store`` seen through a new one (its writes in a writer
    process, its reads on a worker thread), which the Recorder then owns and closes."""
    if isinstance(store, AsyncStore):
        return store, False
    if isinstance(store, Store):
        return AsyncStore(store), True
    raise ArgumentTypeError(
        f"store= takes an agui_store Store or AsyncStore, not {arguments.a_kind(store)}"
    )


# --- live runs: what a reconnecting client is sent after its hydration ----------------------

_END: Any = None  # what a subscriber's queue receives when the run's response is over


@dataclass
class _LiveRun:
    """A run whose response is streaming through this recorder: every event written so far
    (with its sequence number) and the queues of the clients that follow it."""

    written: list[tuple[int, bytes]] = field(default_factory=list)
    followers: list[asyncio.Queue[Any]] = field(default_factory=list)

    def publish(self, events: list[tuple[int, bytes]]) -> None:
        self.written += events
        for queue in self.followers:
            queue.put_nowait(events)

    def end(self) -> None:
        for queue in self.followers:
            queue.put_nowait(_END)


# --- one recorded response --------------------------------------------------------------------


class _Recording:
    """The events of one response on their way to the store: an ``AsyncBatcher`` fed with
    the response's ``data:`` payloads (appended at the latest 0.1 s after they passed, in
    order, off the loop)."""

    def __init__(
        self, recorder: Recorder, body: bytes, thread_id: str, run_id: str, owner: str | None
    ) -> None:
        self._recorder = recorder
        self.thread_id = thread_id
        self.requested_run_id = run_id
        self.run_id: str | None = None  # the run recorded, once its first batch is written
        # An event the store would refuse for its size is refused as it arrives, never held
        # whole, whichever chunks carry it.
        self._framer = SSEParser(max_event_bytes=recorder._store.store.max_event_bytes)
        self._batcher = recording.AsyncBatcher(
            recorder._store,
            input=body,
            thread_id=thread_id,
            interval=recorder.flush_interval,
            scope=owner,
            on_written=self._written,
            warn=False,  # close() reports the response once, with its final counts
        )
        self._unreadable: Exception | None = None
        self._ended = False  # the response is over: the run is no longer followed live
        self._leaving: asyncio.Task[None] | None = None  # the client has gone

    def feed(self, chunk: bytes) -> None:
        """A chunk the client got: its complete events go to the batch."""
        if self._unreadable is not None:
            return
        try:
            payloads = self._framer.read(chunk)
        except Exception as exc:  # never let recording break the response
            self._unreadable = exc
            return
        for payload in payloads:
            self._batcher.add(payload)

    async def written(self) -> None:
        """Wait until every event the client got so far is in the store (appended now, not
        when its batch falls due)."""
        await self._batcher.flush(later=False)

    def client_left(self) -> None:
        """The client has gone: nothing more of the response reaches it, so nothing more is
        recorded, and once what it got is written the run is no longer followed live (the
        app may stream on into the closed connection for long)."""
        if self._leaving is None and not self._ended:
            self._leaving = asyncio.get_running_loop().create_task(self._leave())

    async def _leave(self) -> None:
        try:
            await self.written()
        finally:
            self._ended = True
            self._recorder._run_ended(self.thread_id, self.run_id)

    def finish(self) -> None:
        """The response ended normally (its last body chunk came)."""
        if self._unreadable is None:
            for payload in self._framer.finish():
                self._batcher.add(payload)

    async def close(self) -> None:
        """The response is over (ended, aborted or failed): write what is pending, report
        what could not be recorded."""
        try:
            await self._batcher.aclose()  # shielded: a cancelled request still records
        finally:
            # Cancelled (a server stopping), the appends go on after this: their first batch
            # must not register the run as live again, with no end to come.
            self._ended = True
            self._recorder._run_ended(self.thread_id, self.run_id)
            if self._leaving is not None:
                self._leaving.cancel()  # done by now, or moot: the run has ended
        batcher = self._batcher
        reason = self._recorded_already() or batcher.failure or self._framer.error
        reason = reason or self._unreadable
        if reason is not None:
            logger.warning(
                "not recorded: thread %s, run %s: %s: %s",
                one_line(self.thread_id),
                one_line(batcher.run_id or self.requested_run_id),
                recording.counted(
                    batcher.recorded,
                    batcher.dropped + self._framer.dropped,  # the framer's never reached it
                    batcher.uncertain,
                ),
                one_line(str(reason)),
            )

    def _recorded_already(self) -> str | None:
        """The store's refusal of a run id it holds, in the Recorder's words: the store's
        advice is for code that appends, and a request cannot follow it (``None``: another
        failure, or none)."""
        refusal = self._batcher.failed
        run_id = self._batcher.run_id or self.requested_run_id
        if not placement.refuses_recorded_run(refusal, self.thread_id, run_id):
            return None
        return (
            f"run {one_line(run_id)} is already recorded in thread {one_line(self.thread_id)} "
            "(a request with this threadId and runId was recorded before): this response is "
            "not recorded; a client sends a new runId for each run it starts, a retry too"
        )

    def _written(self, result: AppendResult, batch: list[bytes]) -> None:
        first, last = result.first_seq, result.last_seq
        # One append's events have consecutive sequence numbers (one write transaction).
        numbered = first is not None and last == first + len(batch) - 1
        # A batch may hold the end of one run and the start of the next (an app answering
        # one request with several runs): each run's followers get its own part, and the
        # run before ends only after its last events went to them.
        for opened, start, end in _runs_in(batch, result.new_run_ids):
            if opened is not None:
                if self.run_id is not None:
                    self._recorder._run_ended(self.thread_id, self.run_id)
                self.run_id = opened
                if not self._ended:
                    self._recorder._run_opened(self.thread_id, opened)
            live = self._recorder._live.get((self.thread_id, self.run_id or ""))
            if live is not None and first is not None and numbered and start < end:
                live.publish([(first + i, batch[i]) for i in range(start, end)])


def _runs_in(batch: list[bytes], new_run_ids: tuple[str, ...]) -> list[tuple[str | None, int, int]]:
    """The parts of a written batch that belong to one run each, as the store split it
    (every RUN_STARTED opens a run; docs/design/behaviour.md#events): the run a part opens
    (``None``: it continues the run before) and its bounds in the batch.

    The batch is read only when it opened a run somewhere after its first event.
    """
    if not new_run_ids:
        return [(None, 0, len(batch))]
    if len(new_run_ids) == 1 and batch and recording.opens_run(batch[0]):
        return [(new_run_ids[0], 0, len(batch))]
    starts = [i for i, payload in enumerate(batch) if recording.opens_run(payload)]
    if len(starts) == len(new_run_ids) - 1:
        starts.insert(0, 0)  # its first events opened a run of their own (a RUN_ERROR's)
    if len(starts) != len(new_run_ids):  # not how the store split it: nothing is published
        return [(name, 0, 0) for name in new_run_ids]
    bounds = [*starts, len(batch)]
    parts: list[tuple[str | None, int, int]] = [(None, 0, starts[0])] if starts[0] else []
    parts += [(name, bounds[n], bounds[n + 1]) for n, name in enumerate(new_run_ids)]
    return parts


# --- the middleware ---------------------------------------------------------------------------


class Recorder:
    """ASGI middleware: records the AG-UI runs ``app`` serves and answers reconnects.

    Args:
        app: the ASGI application (Starlette, FastAPI, anything ASGI 3).
        store: an ``AsyncStore``, or a ``Store``, which the Recorder wraps in an
            ``AsyncStore`` of its own (writes in a writer process, off the loop's GIL),
            closed at the app's lifespan shutdown or by :meth:`aclose`.
        scope: ``callable(asgi_scope) -> str | None``, the owner of a request; a thread
            belongs to the owner that first wrote it, and another owner's requests are
            neither recorded into it nor answered by ``connect`` (404). A request the
            callable gives no owner (``None``) is what ``unowned`` says, and ``connect``
            answers it 404. Without ``scope``, every request is the store's operator (one
            user).
        unowned: what becomes of an AG-UI run whose request ``scope`` gives no owner:
            ``"skip"`` (the default): the app answers it, it is not recorded, and a WARNING
            says so (logger ``agui_store.asgi``); ``"record"``: it is recorded as the
            operator records (a thread it starts has no owner, so no owner's scope reads
            it);
            ``"refuse"``: the app never sees it, and the client gets 401. Written without a
            scope, a run could reach into any owner's thread, which is why none of these is
            silent.
        connect_suffix: the path suffix of the reconnect endpoint (``POST <endpoint>/connect``);
            ``None`` leaves every such request to the app.

    Raises:
        ArgumentTypeError: ``store`` is neither a ``Store`` nor an ``AsyncStore``,
            ``scope`` is not callable, or ``connect_suffix`` is not text.
        InvalidArgumentError: ``unowned`` is none of its three values.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        store: Any,
        scope: Callable[[Scope], str | None] | None = None,
        connect_suffix: str | None = "/connect",
        unowned: str = "skip",
    ) -> None:
        if unowned not in UNOWNED:
            raise InvalidArgumentError(
                f"unowned= must be one of {', '.join(map(repr, UNOWNED))}, not {unowned!r:.60}"
            )
        if scope is not None and not callable(scope):
            raise ArgumentTypeError(
                f"scope= takes None or a callable of the request's ASGI scope, not "
                f"{arguments.a_kind(scope)}"
            )
        if connect_suffix is not None and not isinstance(connect_suffix, str):
            raise ArgumentTypeError(
                f"connect_suffix= must be None or a path suffix (text), not "
                f"{arguments.a_kind(connect_suffix)}"
            )
        self.unowned = unowned
        self.app = app
        self._store, self._owns_store = _as_async(store)
        # Whether the AsyncStore the Recorder made was closed (a lifespan's shutdown): the
        # next startup makes another, as the same app may be started again (each
        # ``with TestClient(app)`` of a test suite, a server restarted in its process).
        self._made_closed = False
        #: The latest a recorded event waits before its batch is appended (seconds).
        self.flush_interval = recording.FLUSH_INTERVAL
        self._owner_of = scope
        self.connect_suffix = connect_suffix
        self._live: dict[tuple[str, str], _LiveRun] = {}
        self._told_protobuf = False  # a protobuf response was said to go unrecorded
        self._told_compressed = False  # a run compressed below was said to go unrecorded
        # Thread id -> its responses being recorded whose last batch is not yet written.
        self._unwritten: dict[str, list[_Recording]] = {}

    @property
    def recording(self) -> int:
        """How many responses are being recorded now (their last batch not yet written)."""
        return sum(map(len, self._unwritten.values()))

    async def aclose(self) -> None:
        """Write what is pending and release the ``AsyncStore`` the Recorder made for a
        ``Store`` it was given (its writer process); the ``Store`` itself stays open. Done
        at the ASGI lifespan's shutdown; call it yourself where no lifespan runs. An
        ``AsyncStore`` you gave is yours to close."""
        if self._owns_store and not self._made_closed:
            self._made_closed = True
            await self._store.close()

    def _reopen(self) -> None:
        """Make the ``AsyncStore`` for the given ``Store`` again, if :meth:`aclose` closed it."""
        if self._made_closed:
            self._store = AsyncStore(self._store.store)
            self._made_closed = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._lifespan_send(send))
            return
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        if not _is_json(_header(scope.get("headers"), b"content-type")):
            # A RunAgentInput is JSON (HttpAgent says so; pydantic-ai answers 415 otherwise):
            # uploads and forms go by without their bodies being kept.
            await self.app(scope, receive, send)
            return
        suffix = self.connect_suffix
        if suffix and scope.get("path", "").endswith(suffix):
            await self._connect(scope, receive, send)
            return
        await self._record(scope, receive, send)

    def _lifespan_send(self, send: Send) -> Send:
        """``send`` for the app's lifespan: the server's startup completes once the store's
        writer process has started (a fresh interpreter takes a second or two: a run
        recorded meanwhile reached the store that much later, so a reconnect found no live
        run, and a run posted right after it was placed before its tail); the Recorder
        closes what it owns once the app has shut down (uvicorn has waited for every
        request by then)."""

        async def lifespan_send(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                self._reopen()
                try:
                    await self._store.ready()
                except Exception:  # the first write starts it again, and says why
                    logger.exception("starting the recorder's writer process failed")
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                try:
                    await self.aclose()
                except Exception:
                    logger.exception("closing the recorder's store failed")
            await send(message)

        return lifespan_send

    def _owner(self, scope: Scope) -> str | None:
        """The request's owner, as ``scope=`` says; a callable that raises, or gives what
        is no owner's name (``""`` from an empty header, a number), is logged and gives none
        (the request is then what ``unowned`` says, and ``connect`` answers it 404), instead
        of a 500 with the server's traceback."""
        if self._owner_of is None:
            return None
        try:
            owner = self._owner_of(scope)
        except Exception:
            logger.exception(
                "the scope callable raised for %s %s: the request has no owner",
                scope.get("method"), _shown_path(scope),
            )
            return None
        try:
            arguments.check_scope(owner)
        except (TypeError, AguiStoreError) as e:
            logger.warning("the scope callable gave no owner's name for %s %s (%s): the "
                           "request has no owner", scope.get("method"), _shown_path(scope), e)
            return None
        return owner

    def _run_opened(self, thread_id: str, run_id: str) -> None:
        self._live[(thread_id, run_id)] = _LiveRun()

    def _run_ended(self, thread_id: str, run_id: str | None) -> None:
        live = self._live.pop((thread_id, run_id or ""), None)
        if live is not None:
            live.end()

    # --- recording ----------------------------------------------------------------------

    async def _record(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The scope callable is asked once a request: under "refuse" before the app runs (a
        # request it gives no owner never reaches the app), otherwise when the response
        # starts. The owner let through is the owner its run is written for.
        owner: str | None = None
        if self.unowned == "refuse" and self._owner_of is not None:
            owner = self._owner(scope)
            if owner is None:
                await self._refuse_unowned(scope, receive, send)
                return
        body_parts: list[bytes] | None = []  # None: larger than the store takes (not kept)
        body_size = 0
        body_limit = self._store.store.max_event_bytes
        body_complete = False
        # Once the body is read, the next message can only be the client's disconnect: the
        # Recorder waits for it itself (an app that never asks would otherwise have its
        # aborted run recorded as finished: servers drop what is sent after a disconnect,
        # without an error), and the app's own receive() gets the same message.
        gone: asyncio.Future[Message] | None = None

        async def tee_receive() -> Message:
            nonlocal body_complete, body_parts, body_size
            if gone is not None:
                return await asyncio.shield(gone)
            message = await receive()
            if message["type"] == "http.request" and not body_complete:
                # bytes() of bytes is the same immutable object: no copy on the hot path.
                part = bytes(message.get("body", b""))
                body_complete = not message.get("more_body", False)
                body_size += len(part)
                if body_size > body_limit:
                    # The store refuses such an input: an upload the app streams is not
                    # held in memory whole for a run that cannot be recorded.
                    body_parts = None
                elif body_parts is not None:
                    body_parts.append(part)
            return message

        current: _Recording | None = None

        async def tee_send(message: Message) -> None:
            nonlocal current, gone
            kind = message["type"]
            if kind == "http.response.body" and current is not None:
                # Copied before the send: a compressing layer below may rewrite the message.
                chunk = bytes(message.get("body", b""))
                final = not message.get("more_body", False)
                await send(message)
                if _left(gone):
                    return  # the client had gone: the server sent it nothing
                current.feed(chunk)
                if final:
                    current.finish()
                return
            if kind == "http.response.start":
                current = self._start(scope, message, body_parts, body_complete, owner)
                if current is not None and body_complete:
                    gone = asyncio.ensure_future(receive())
                    gone.add_done_callback(_on_leaving(current))
                    # One turn of the loop for it: a client that left before the response
                    # started is known gone before the first body, which an app may send
                    # without ever yielding (a server sends a gone client nothing, silently).
                    await asyncio.sleep(0)
            await send(message)

        try:
            await self.app(scope, tee_receive, tee_send)
        finally:
            if gone is not None:
                gone.cancel()  # done already, or the response ended first
            if current is not None:
                try:
                    await current.close()
                finally:
                    self._forget(current)

    def _forget(self, recording: _Recording) -> None:
        """``recording``'s last batch is written (or never will be)."""
        same_thread = self._unwritten.get(recording.thread_id, [])
        same_thread.remove(recording)
        if not same_thread:
            del self._unwritten[recording.thread_id]

    async def _refuse_unowned(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``unowned="refuse"``: a RunAgentInput without an owner gets 401, and the app never
        sees it; any other request (a login form posting JSON, say) goes through. A body larger
        than the store takes as a run's input is not read whole to tell: it is refused too."""
        read = await _whole_body(receive, self._store.store.max_event_bytes)
        if read is None:
            return
        body, whole = read
        if not whole:
            logger.warning(
                "refused: %s %s: the request has no owner (unowned='refuse') and its body is "
                "larger than the store takes as a run's input (max_event_bytes=%d)",
                scope.get("method"), _shown_path(scope), self._store.store.max_event_bytes,
            )
            await _reply(send, 401, b"no owner: this request names no user")
            return
        ids = _ids_of(body)
        if ids is None:
            await self.app(scope, _replay(body, receive), send)
            return
        logger.warning(
            "refused: thread %s, run %s: the request has no owner (unowned='refuse')",
            one_line(ids.threadId), one_line(ids.runId),
        )
        await _reply(send, 401, b"no owner: this request names no user")

    def _start(
        self, scope: Scope, start: Message, body_parts: list[bytes] | None, body_complete: bool,
        owner: str | None,
    ) -> _Recording | None:
        """The recording of this response, or ``None`` when it is not an AG-UI run;
        ``owner``: the request's, when the scope callable was already asked."""
        try:
            if start.get("status") != 200:
                return None
            headers = start.get("headers") or ()
            content_type = _header(headers, b"content-type") or b""
            if not content_type.lower().startswith(b"text/event-stream"):
                if content_type.lower().startswith(PROTOBUF_TYPE) and not self._told_protobuf:
                    # Surely a run, and none of this encoding is: said once, not a run each.
                    self._told_protobuf = True
                    logger.warning(
                        "not recorded: %s %s answered AG-UI's protobuf encoding (Content-Type: "
                        "%s); the Recorder records text/event-stream responses only (a client "
                        "that accepts text/event-stream is recorded). Said once: later "
                        "protobuf responses go unrecorded without a word",
                        scope.get("method"), _shown_path(scope), PROTOBUF_TYPE.decode(),
                    )
                return None
            compressed = _header(headers, b"content-encoding")
            if not _identity(compressed):
                # A compressing layer sits below: its bytes are not SSE.
                self._tell_compressed(scope, compressed or b"", body_parts, body_complete)
                return None
            encoding = _header(scope.get("headers"), b"content-encoding")
            if not _identity(encoding):
                # The run's input would be the compressed bytes: never recorded, said once
                # a run, as an event stream answering it is most likely a run.
                logger.warning(
                    "not recorded: %s %s answered an event stream, but its request body is "
                    "compressed (Content-Encoding: %s), which the Recorder does not read",
                    scope.get("method"), _shown_path(scope),
                    (encoding or b"").decode("latin-1")[:40],
                )
                return None
            if body_parts is None:
                logger.warning(
                    "not recorded: %s %s answered an event stream, but its request body is "
                    "larger than the store takes as a run's input (max_event_bytes=%d)",
                    scope.get("method"), _shown_path(scope), self._store.store.max_event_bytes,
                )
                return None
            body = b"".join(body_parts)
            ids = _ids_of(body) if body_complete else None
            if ids is None:
                looks_like_run = b'"threadId"' in body
                (logger.warning if looks_like_run else logger.debug)(
                    "not recorded: %s %s answered an event stream, but its request body is "
                    "not a RunAgentInput (%s)",
                    scope.get("method"),
                    _shown_path(scope),
                    _why_not_ids(body) if body_complete
                    else "the app answered before reading it whole",
                )
                return None
            if owner is None:
                owner = self._owner(scope)
            if owner is None and self._owner_of is not None and self.unowned != "record":
                # Owners are on, and this request has none: written without a scope it would
                # reach every owner's threads (the store's operator), so it is not written,
                # and a WARNING says so (unowned="record" writes it as the operator's).
                logger.warning(
                    "not recorded: thread %s, run %s: the request has no owner (the app "
                    "answered it; Recorder(unowned='record') records such runs as the "
                    "operator's, unowned='refuse' refuses them)",
                    one_line(ids.threadId),
                    one_line(ids.runId),
                )
                return None
            recording = _Recording(self, body, ids.threadId, ids.runId, owner)
            self._unwritten.setdefault(ids.threadId, []).append(recording)
            return recording
        except Exception:
            logger.exception("not recorded: %s %s", scope.get("method"), _shown_path(scope))
            return None

    def _tell_compressed(
        self, scope: Scope, encoding: bytes, body_parts: list[bytes] | None, body_complete: bool
    ) -> None:
        """A run's event stream compressed below the Recorder (``Recorder(GZip(app))``): every
        run is then unrecorded, so the first is named in a WARNING saying where the
        compressing layer goes, once. A stream answering JSON that names no run is another
        route's and goes unnamed."""
        if self._told_compressed or body_parts is None or not body_complete:
            return
        if _ids_of(b"".join(body_parts)) is None:
            return
        self._told_compressed = True
        logger.warning(
            "not recorded: %s %s answered an event stream compressed below the Recorder "
            "(Content-Encoding: %s), whose bytes it does not read; put the compressing "
            "middleware outside it (GZipMiddleware(Recorder(app))) to record its runs. Said "
            "once: later compressed responses go unrecorded without a word",
            scope.get("method"), _shown_path(scope), one_line(encoding.decode("latin-1")[:40]),
        )

    # --- reconnect ----------------------------------------------------------------------

    async def _connect(self, scope: Scope, receive: Receive, send: Send) -> None:
        read = await _whole_body(receive, self._store.store.max_event_bytes)
        if read is None:
            return
        body, whole = read
        ids = _ids_of(body, _connect_decoder) if whole else None
        if ids is None:
            # Not a reconnect: the app may have a route of its own there.
            await self.app(scope, _replay(body, receive, whole), send)
            return
        owner = self._owner(scope)
        if owner is None and self._owner_of is not None:
            await _reply(send, 404, b"no such thread")  # no owner: no thread is its
            return
        last_event_id = _header(scope.get("headers"), b"last-event-id")
        try:
            # The ids the Recorder sends are ASCII digits; int() takes "1_000", " 7" and
            # "-1" too, and refuses more than 4,300 digits.
            if last_event_id is not None and not (
                last_event_id.isascii() and last_event_id.isdigit()
            ):
                raise ValueError(last_event_id)
            after = int(last_event_id) if last_event_id is not None else None
        except ValueError:
            await _reply(send, 400, b"Last-Event-ID must be a sequence number")
            return
        disconnected = asyncio.Event()
        watcher = asyncio.get_running_loop().create_task(_watch(receive, disconnected))
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._answer_connect(ids, owner, after, tracked, disconnected)
        except Exception:
            logger.exception(
                "connect failed: thread %s, run %s", one_line(ids.threadId), one_line(ids.runId)
            )
            if not started:
                await _reply(send, 500, b"the store could not be read")
            else:  # end the stream: the client reconnects with its Last-Event-ID
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _answer_connect(
        self,
        ids: _Ids,
        owner: str | None,
        after: int | None,
        send: Send,
        disconnected: asyncio.Event,
    ) -> None:
        store = self._store
        reads: dict[str, Any] = {"thread_id": ids.threadId}
        if owner is not None:
            reads["scope"] = owner
        # What this recorder has streamed of the thread and not yet written (a run's first
        # events, or the tail of one that just ended) is written first: read before it, the
        # store knows no such thread yet, or has the run before as the thread's newest.
        await asyncio.gather(*(r.written() for r in self._unwritten.get(ids.threadId, ())))
        run = await _find_run(store, ids, reads)
        if run is None:
            await _reply(send, 404, b"no such thread")
            return
        key = (run.thread_id, run.run_id)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        live = self._live.get(key)
        if live is not None:
            live.followers.append(queue)
        try:
            if after is not None and live is not None:
                # Everything this recorder wrote of the run is in memory, with its cursor.
                head: list[tuple[int | None, bytes]] = [
                    (seq, p) for seq, p in live.written if seq > after
                ]
                sent = max([after, *(seq for seq, _ in head if seq is not None)])
            else:
                read = await _snapshot(store, run.run_id, reads, after, live is not None)
                if read is None:
                    await _reply(send, 404, b"no such thread")  # erased since it was found
                    return
                head, sent = read
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream; charset=utf-8"),
                        (b"cache-control", b"no-cache"),
                    ],
                }
            )
            if head:
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"".join(encode_sse(p, seq) for seq, p in head),
                        "more_body": True,
                    }
                )
            if live is not None:
                await _follow(queue, sent, send, disconnected)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if live is not None and queue in live.followers:
                live.followers.remove(queue)


async def _find_run(store: Any, ids: _Ids, reads: dict[str, Any]) -> Any:
    """The run the body names (exactly, in its thread), else the thread's newest."""
    run = await store.get_run(ids.runId, **reads)
    if run is not None and run.run_id == ids.runId:
        return run
    return await store.get_run("HEAD", **reads)


async def _snapshot(
    store: AsyncStore, run_id: str, reads: dict[str, Any], after: int | None, live: bool
) -> tuple[list[tuple[int | None, bytes]], int] | None:
    """What a reconnecting client is sent before the live rest, and its cursor (``None``:
    the run was erased since it was found).

    Read in one read transaction, on the store's worker thread: the hydration and the cursor
    describe the same moment of the run, however fast it is being written meanwhile.
    """
    read = await store.in_one_read(_hydration, run_id, reads, after, live)
    if read is None:
        return None
    backlog, cursor = read
    # A backlog read by Last-Event-ID carries the cursor on its last event only: the store's
    # read API gives events without their own sequence numbers.
    if after is not None:
        head: list[tuple[int | None, bytes]] = [
            (None, msgspec.json.encode(ev)) for ev in backlog
        ]
        if head:
            head[-1] = (cursor, head[-1][1])
        return head, max(cursor, after)
    return [(cursor, msgspec.json.encode(ev)) for ev in backlog], cursor


def _hydration(
    store: Store, run_id: str, reads: dict[str, Any], after: int | None, live: bool
) -> tuple[list[dict[str, Any]], int] | None:
    """The events :func:`_snapshot` sends and the run's cursor, read in one read
    transaction (:meth:`AsyncStore.in_one_read`)."""
    run = store.get_run(run_id, **reads)
    if run is None:
        return None
    if after is not None:
        backlog = store.events(run_id, after=after, **reads)
    else:
        backlog = store.reconnect_stream(run_id, **reads)
        if live:
            backlog += _reopen(store.events(run_id, **reads))
    return backlog, int(run.last_seq or 0)


def _on_leaving(recording: _Recording) -> Callable[[asyncio.Future[Message]], None]:
    """What the future of the message after a request's body calls when it is done."""

    def done(gone: asyncio.Future[Message]) -> None:
        if _left(gone):
            recording.client_left()

    return done


def _left(gone: asyncio.Future[Message] | None) -> bool:
    """Whether the client has disconnected, as the message that followed its body said."""
    if gone is None or not gone.done() or gone.cancelled():
        return False
    if gone.exception() is not None:  # a server that failed the receive: not a disconnect
        return False
    return bool(gone.result()["type"] == "http.disconnect")


def _reopen(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The opening events of what a live run has open, in the order they opened: text and
    reasoning messages, tool calls, reasoning spans, steps and subagents.

    The hydration stream holds the content so far (MESSAGES_SNAPSHOT); the live rest goes
    on with CONTENT/ARGS/END/FINISHED events, which the client only accepts for what its
    stream opened. The official client reuses the message or tool call a START names when it
    exists, so the content already in the snapshot is kept and continued.
    """
    opened: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in events:
        kind = ev.get("type")
        if kind in _OPENS:
            field, start = _OPENS[kind]
            opened[kind, str(ev.get(field))] = start(ev)
        elif kind in _CLOSES:
            opener, field = _CLOSES[kind]
            opened.pop((opener, str(ev.get(field))), None)
    return [*opened.values(), *_open_chunk_streams(events)]


#: The chunk events, and what the first chunk of a stream names, which the chunks that
#: continue it may leave out (the official client fills them in from the first).
_CHUNKS: dict[str, tuple[str, ...]] = {
    "TEXT_MESSAGE_CHUNK": ("messageId", "role", "name"),
    "TOOL_CALL_CHUNK": ("toolCallId", "toolCallName", "parentMessageId"),
    "REASONING_MESSAGE_CHUNK": ("messageId",),
}
#: Events that end every open chunk stream, as the official client reads them.
_ENDS_ALL_CHUNKS = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"})
#: Events that end the open chunk stream of their subagent (of the agent itself without one).
_ENDS_LANE_CHUNKS = frozenset({
    "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START",
    "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STATE_SNAPSHOT", "STATE_DELTA",
    "CUSTOM", "STEP_STARTED", "STEP_FINISHED", "REASONING_START", "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
})


def _open_chunk_streams(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chunk naming each chunk stream still open after ``events`` (its id, and the name,
    role or parent its first chunk gave), without content.

    The official client reads chunks in streams, one open at a time per subagent: the
    chunks after the first may leave out the id and name (``{"type": "TOOL_CALL_CHUNK",
    "delta": ...}``), and a stream begins only with a chunk that names them. The hydration
    stream's ``MESSAGES_SNAPSHOT`` ends every stream, so the live rest needs them named
    again; the client then continues the message or tool call the snapshot holds.
    """
    lanes: dict[Any, tuple[str, dict[str, Any]]] = {}  # subagent -> its open stream
    for ev in events:
        kind = ev.get("type")
        if kind in _ENDS_ALL_CHUNKS:
            lanes.clear()
        elif kind in _ENDS_LANE_CHUNKS:
            lanes.pop(ev.get("subagentRunId"), None)
        elif kind in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR") and ev.get("subagentRunId"):
            lanes.pop(ev["subagentRunId"], None)
        elif kind in _CHUNKS:
            _read_chunk(lanes, kind, ev)
    return [{"type": kind, **fields} for kind, fields in lanes.values()]


def _read_chunk(
    lanes: dict[Any, tuple[str, dict[str, Any]]], kind: str, ev: dict[str, Any]
) -> None:
    """One chunk, as the official client takes it: it continues the open stream of its kind
    it names (or, naming none, the one of its subagent), else begins one."""
    names = _CHUNKS[kind]
    ident, subagent = ev.get(names[0]), ev.get("subagentRunId")
    lane = subagent
    if ident is not None:
        lane = next(
            (key for key, (k, fields) in lanes.items() if k == kind and fields[names[0]] == ident),
            subagent,
        )
    elif subagent is None and lanes.get(None, ("",))[0] != kind:
        same = [key for key, (k, _) in lanes.items() if k == kind]
        lane = same[0] if len(same) == 1 else None
    current = lanes.get(lane)
    if current is not None and current[0] == kind and ident in (None, current[1][names[0]]):
        return
    if ident is None:  # the client refuses a stream begun so: nothing is open
        lanes.pop(lane, None)
        return
    fields = {name: ev[name] for name in names if ev.get(name) is not None}
    if kind == "TEXT_MESSAGE_CHUNK":
        fields.setdefault("role", "assistant")
    if subagent is not None:
        fields["subagentRunId"] = subagent
    lanes[lane] = (kind, fields)


def _only(*names: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An opening event sent again with these fields of the recorded one."""
    return lambda ev: {name: ev[name] for name in ("type", *names) if name in ev}


def _whole(ev: dict[str, Any]) -> dict[str, Any]:
    return dict(ev)


#: What opens something a later event continues: the field naming it, and the event that
#: opens it again (a text message as an assistant's unless it says otherwise).
_OPENS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "TEXT_MESSAGE_START": (
        "messageId",
        lambda ev: {
            "type": "TEXT_MESSAGE_START",
            "messageId": ev["messageId"],
            "role": ev.get("role", "assistant"),
        },
    ),
    "TOOL_CALL_START": ("toolCallId", _only("toolCallId", "toolCallName", "parentMessageId")),
    "REASONING_START": ("messageId", _whole),
    "REASONING_MESSAGE_START": ("messageId", _whole),
    "STEP_STARTED": ("stepName", _whole),
    "SUBAGENT_STARTED": ("subagentRunId", _whole),
}
#: What closes it: the opening event's type and the field naming it.
_CLOSES: dict[str, tuple[str, str]] = {
    "TEXT_MESSAGE_END": ("TEXT_MESSAGE_START", "messageId"),
    "TOOL_CALL_END": ("TOOL_CALL_START", "toolCallId"),
    "REASONING_END": ("REASONING_START", "messageId"),
    "REASONING_MESSAGE_END": ("REASONING_MESSAGE_START", "messageId"),
    "STEP_FINISHED": ("STEP_STARTED", "stepName"),
    "SUBAGENT_FINISHED": ("SUBAGENT_STARTED", "subagentRunId"),
    "SUBAGENT_ERROR": ("SUBAGENT_STARTED", "subagentRunId"),
}


async def _follow(
    queue: asyncio.Queue[Any], sent: int, send: Send, disconnected: asyncio.Event
) -> None:
    """The live rest of a run, from its cursor, until its response ends or the client goes."""
    gone = asyncio.ensure_future(disconnected.wait())
    try:
        while True:
            getting = asyncio.ensure_future(queue.get())
            await asyncio.wait({getting, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():
                getting.cancel()
                return
            events = getting.result()
            if events is _END:
                return
            fresh = [(seq, p) for seq, p in events if seq > sent]
            if fresh:
                sent = fresh[-1][0]
                chunk = b"".join(encode_sse(p, seq) for seq, p in fresh)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
    finally:
        gone.cancel()


async def _watch(receive: Receive, disconnected: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            disconnected.set()
            return


def _replay(body: bytes, receive: Receive, whole: bool = True) -> Receive:
    """``receive`` for an app, giving back the body (or its start, ``whole=False``) the
    recorder already read, then what the client sends next."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": not whole}
        return await receive()

    return replayed


async def _reply(send: Send, status: int, text: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": text, "more_body": False})
