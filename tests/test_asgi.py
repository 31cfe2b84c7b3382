"""agui_store.asgi: the SSE framer, what the Recorder records and passes through, reconnects.

The apps here are real ASGI 3 apps with scripted answers (what a producer sends, chunk by
chunk), driven in-process the way uvicorn drives them: the request body, then
``http.disconnect`` once the response is over. The end-to-end tests with uvicorn, real agents
and the official client are in ``test_asgi_e2e.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import inspect
import json
import logging
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.middleware.gzip import GZipMiddleware

import agui_store
from agui_store import testing
from agui_store.aio import AsyncStore
from agui_store.asgi import Recorder, SSEFramer, encode_sse
from agui_store.errors import ArgumentTypeError
from tests import live_servers
from tests.conftest import FIXTURES, _skip_or_fail

# --- the framer ---------------------------------------------------------------------------

payload_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=40,
)


@st.composite
def sse_streams(draw: Any) -> tuple[bytes, list[bytes]]:
    """An event stream with mixed line ends, comments, other fields and multi-line data, and
    the payloads a conforming parser reads from it."""
    events = draw(st.lists(st.lists(payload_text, min_size=1, max_size=3), max_size=8))
    out = bytearray()
    expected = []
    for lines in events:
        end = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
        if draw(st.booleans()):
            out += b": keep-alive" + end
        if draw(st.booleans()):
            out += b"id: 7" + end + b"event: message" + end
        encoded = [line.encode("utf-8") for line in lines]
        for value in encoded:
            # One space after the colon is not data; without it, data starts right there.
            space = b" " if value.startswith(b" ") else draw(st.sampled_from([b" ", b""]))
            out += b"data:" + space + value + end
        out += end
        expected.append(b"\n".join(encoded))
    return bytes(out), expected


@given(sse_streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_the_framer_reads_the_same_payloads_however_the_stream_is_cut(
    stream: tuple[bytes, list[bytes]], cuts: list[int]
) -> None:
    data, expected = stream
    points = sorted({min(c, len(data)) for c in cuts})
    framer = SSEFramer()
    got: list[bytes] = []
    last = 0
    for point in [*points, len(data)]:
        got += framer.feed(data[last:point])
        last = point
    assert got == expected


def test_the_framer_splits_inside_crlf_and_inside_a_utf8_sequence() -> None:
    data = 'data: {"delta":"é"}\r\n\r\n'.encode()
    at_e = data.index("é".encode()) + 1  # between the two bytes of é
    at_crlf = data.index(b"\r") + 1  # between \r and \n
    framer = SSEFramer()
    got = framer.feed(data[:at_e]) + framer.feed(data[at_e:at_crlf])
    got += framer.feed(data[at_crlf:])
    assert got == ['{"delta":"é"}'.encode()]


def test_an_event_the_stream_does_not_end_with_a_blank_line_comes_out_at_its_end() -> None:
    """As @ag-ui/client reads it: what is left in its buffer is parsed when the body ends."""
    framer = SSEFramer()
    assert framer.feed(b'data: {"a":1}\n\ndata: {"b":2}\n') == [b'{"a":1}']
    assert framer.finish() == [b'{"b":2}']
    unterminated = SSEFramer()
    assert unterminated.feed(b'data: {"c":3}') == []
    assert unterminated.finish() == [b'{"c":3}']


def test_the_recorder_refuses_a_store_scope_or_suffix_it_cannot_take_naming_it(
    tmp_path: Path,
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never called")

    with agui_store.open(tmp_path / "rec.db") as store:
        for arguments, named in [
            ({"store": None}, "store="),
            ({"store": str(tmp_path / "rec.db")}, "store="),
            ({"store": store, "connect_suffix": 7}, "connect_suffix="),
            ({"store": store, "scope": "alice"}, "scope="),
        ]:
            with pytest.raises(ArgumentTypeError, match=named):
                Recorder(app, **arguments)


def test_an_event_larger_than_the_framer_holds_is_refused_with_its_size() -> None:
    framer = SSEFramer(max_event_bytes=100)
    framer.feed(b"data: " + b"x" * 60 + b"\n")
    with pytest.raises(agui_store.InvalidEventError, match="exceeds 100 bytes"):
        framer.feed(b"data: " + b"y" * 60)


@pytest.mark.parametrize("size", [1, 7, 64, 10_000])
def test_what_the_framer_refuses_for_its_size_does_not_depend_on_the_chunks(size: int) -> None:
    limit = 100
    exact = b"data: " + b"e" * limit + b"\n\n"  # a payload of the limit exactly: taken
    over = b"data: " + b"o" * 60 + b"\ndata: " + b"o" * 40 + b"\n\n"  # 60 + LF + 40
    long_comment = b": " + b"c" * 500 + b"\n"  # no payload: any length is skipped
    stream = exact + long_comment + b"data: 1\n\n" + over + b"data: 2\n\ndata: 3\n\n"
    framer = SSEFramer(max_event_bytes=limit)
    got: list[bytes] = []
    for at in range(0, len(stream), size):
        got += framer.read(stream[at : at + size])
    got += framer.finish()
    assert got == [b"e" * limit, b"1"]
    assert framer.dropped == 3  # the refused event and the two after it
    assert framer.error is not None and "exceeds 100 bytes" in str(framer.error)


def test_encode_sse_writes_the_cursor_and_one_data_line_per_payload_line(astore: Any) -> None:
    assert encode_sse(b"{}", 12) == b"id: 12\ndata: {}\n\n"
    assert SSEFramer().feed(encode_sse(b"a\nb")) == [b"a\nb"]


# --- driving an ASGI app in-process --------------------------------------------------------


class Response:
    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[bytes, bytes] = {}
        self.chunks: list[bytes] = []
        self.complete = False

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


def posting(body: bytes, gone: asyncio.Event) -> Callable[[], Awaitable[dict[str, Any]]]:
    """The ``receive`` of a client that posts ``body`` whole, then says http.disconnect
    once ``gone`` is set, as a server does when the client leaves."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    return receive


async def call(
    app: Any,
    body: bytes = b"",
    *,
    method: str = "POST",
    path: str = "/agent",
    headers: list[tuple[bytes, bytes]] | None = None,
    disconnect: asyncio.Event | None = None,
) -> Response:
    """One request, as uvicorn runs it: the body, then http.disconnect after the response
    (or when ``disconnect`` is set: the client went away)."""
    response = Response()
    json_type = (b"content-type", b"application/json")
    gone = disconnect or asyncio.Event()
    receive = posting(body, gone)

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            response.status = message["status"]
            response.headers = {bytes(k).lower(): bytes(v) for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            response.chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                response.complete = True
                gone.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            *([] if any(k == b"content-type" for k, _ in headers or []) else [json_type]),
            *(headers or []),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    await app(scope, receive, send)
    return response


def streaming_app(
    chunks: list[bytes],
    *,
    status: int = 200,
    content_type: bytes = b"text/event-stream; charset=utf-8",
    finish: bool = True,
    pause: float = 0.0,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> Any:
    """An app that reads the request and answers ``chunks`` as they are, one message each."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while (await receive()).get("more_body", False):
            pass
        headers = [(b"content-type", content_type), *(extra_headers or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if pause:
                await asyncio.sleep(pause)
        if finish:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def run_events(thread: str, run: str, text: str = "hello") -> list[dict[str, Any]]:
    m = f"m-{run}"
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": c} for c in text),
        {"type": "TEXT_MESSAGE_END", "messageId": m},
        {"type": "STATE_SNAPSHOT", "snapshot": {"said": text}},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]


def request_body(thread: str, run: str, messages: list[dict[str, Any]] | None = None) -> bytes:
    body = {
        "threadId": thread,
        "runId": run,
        "state": {},
        "messages": messages
        if messages is not None
        else [{"id": f"u-{run}", "role": "user", "content": "hi"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    return json.dumps(body).encode()


#: A POST of a run to the agent's path.
AGENT_POST = {"type": "http", "method": "POST", "path": "/agent", "headers": [
    (b"content-type", b"application/json")]}  # fmt: skip


def client_leaving_after(chunks: int, body: bytes) -> tuple[Any, Any, asyncio.Event, list[bytes]]:
    """``receive`` and ``send`` of a client that posts ``body``, reads ``chunks`` chunks of
    the response and closes (a disconnect then, as a server says it), the event set as it
    leaves, and the chunks it got. What is sent after that reaches no one, as a server
    drops it."""
    gone = asyncio.Event()
    receive = posting(body, gone)
    got: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not gone.is_set():
            got.append(bytes(message.get("body", b"")))
            if len(got) == chunks:
                gone.set()

    return receive, send, gone, got


def sse(events: list[dict[str, Any]], end: bytes = b"\n") -> list[bytes]:
    """One chunk per event, framed as pydantic-ai frames them (or with ``end`` line ends);
    the JSON is written with spaces so that a re-encoding would show."""
    return [b"data: " + json.dumps(ev).encode() + end + end for ev in events]


def stored_payloads(store: agui_store.Store, thread: str) -> list[str]:
    """The events' JSON text as the store keeps it."""
    with agui_store.open(store.path) as reader:
        return [
            str(r[0])
            for r in testing.connection(reader).execute(
                "SELECT events.payload FROM events JOIN runs ON runs.id = events.run "
                "JOIN threads ON threads.id = runs.thread WHERE threads.thread_id = ? "
                "ORDER BY events.seq",
                (thread,),
            )
        ]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with agui_store.open(tmp_path / "live.db") as opened:
        yield opened


@pytest.fixture
def astore(store: agui_store.Store) -> Any:
    """The store as the Recorders here use it: writes on a worker thread (a writer process
    per test would cost a process start each; one test below runs the default)."""
    wrapped = AsyncStore(store, writer="thread")
    yield wrapped
    asyncio.run(wrapped.close())


# --- recording ----------------------------------------------------------------------------


def test_a_run_is_recorded_byte_exact_with_its_request_body_as_input(
    store: Any, astore: Any
) -> None:
    events = run_events("t1", "r1")
    chunks = sse(events, end=b"\r\n")
    body = request_body("t1", "r1")
    response = asyncio.run(call(Recorder(streaming_app(chunks), store=astore), body))
    assert response.body == b"".join(chunks) and response.complete
    assert stored_payloads(store, "t1") == [json.dumps(ev) for ev in events]
    assert store.input("r1", thread_id="t1") == json.loads(body)
    checkout = store.checkout("r1", thread_id="t1")
    assert checkout.run.status == "finished"
    assert [m["id"] for m in checkout.messages] == ["u-r1", "m-r1"]
    assert checkout.state == {"said": "hello"}


def test_events_split_across_chunks_anywhere_are_recorded_whole(store: Any, astore: Any) -> None:
    events = run_events("t1", "r1", text="héllo wörld")
    stream = b"".join(sse(events, end=b"\r\n"))
    chunks = [stream[i : i + 7] for i in range(0, len(stream), 7)]  # cuts CRLFs and é, ö
    response = asyncio.run(
        call(Recorder(streaming_app(chunks), store=astore), request_body("t1", "r1"))
    )
    assert response.body == stream
    assert store.events("r1", thread_id="t1") == events
    # Searchable as soon as it is recorded, accents folded.
    assert [h.marked() for h in store.search("hello world")] == ["[héllo] [wörld]"]


def test_add_middleware_starlette_style_records_the_same(store: Any, astore: Any) -> None:
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    events = run_events("t1", "r1")
    app = FastAPI()

    @app.post("/agent")
    async def agent() -> StreamingResponse:
        async def stream() -> Any:
            for chunk in sse(events):
                yield chunk

        return StreamingResponse(stream(), media_type="text/event-stream")

    app.add_middleware(Recorder, store=astore)
    response = asyncio.run(call(app, request_body("t1", "r1")))
    assert response.body == b"".join(sse(events))
    assert store.events("r1", thread_id="t1") == events


def test_a_store_given_as_is_is_written_by_a_writer_process_closed_at_lifespan_shutdown(
    store: Any,
) -> None:
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    events = run_events("t1", "r1")
    app = FastAPI()

    @app.post("/agent")
    async def agent() -> StreamingResponse:
        return StreamingResponse(iter(sse(events)), media_type="text/event-stream")

    recorder = Recorder(app, store=store)

    async def lifetime() -> subprocess.Popen[bytes]:
        said: list[str] = []
        steps = [{"type": "lifespan.startup"}]
        shutdown = asyncio.Event()

        async def receive() -> dict[str, Any]:
            if steps:
                return steps.pop()
            await shutdown.wait()
            return {"type": "lifespan.shutdown"}

        async def send(message: dict[str, Any]) -> None:
            said.append(message["type"])

        lifespan = asyncio.ensure_future(recorder({"type": "lifespan"}, receive, send))
        await call(recorder, request_body("t1", "r1"))
        process = testing.writer_process(testing.recorder_store(recorder))
        assert process is not None  # the appends went through it
        assert process.poll() is None
        shutdown.set()
        await lifespan
        assert said == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
        return process

    process = asyncio.run(lifetime())
    assert testing.closed(testing.recorder_store(recorder))
    assert process.poll() is not None
    assert store.events("r1", thread_id="t1") == events  # and the Store is still open


def test_an_app_started_again_after_its_lifespan_shut_down_records_again(store: Any) -> None:
    """Each ``with TestClient(app)`` of a test suite runs the app's lifespan once."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    async def agent(request: Request) -> StreamingResponse:
        asked = await request.json()
        events = run_events(asked["threadId"], asked["runId"])
        return StreamingResponse(iter(sse(events)), media_type="text/event-stream")

    app = Recorder(Starlette(routes=[Route("/agent", agent, methods=["POST"])]), store=store)
    for thread in ("t1", "t2"):
        with TestClient(app) as client:
            response = client.post("/agent", content=request_body(thread, "r1"),
                                   headers={"content-type": "application/json"})
            assert response.status_code == 200
    assert sorted(store.threads()) == ["t1", "t2"]


def test_the_servers_startup_completes_once_the_writer_process_has_started(store: Any) -> None:
    """A fresh interpreter takes a second or two: a run recorded meanwhile reached the store
    that much later, and a run posted right after it was placed before its tail."""
    from fastapi import FastAPI

    recorder = Recorder(FastAPI(), store=store)

    async def startup() -> list[tuple[str, bool]]:
        said: list[tuple[str, bool]] = []
        steps = [{"type": "lifespan.shutdown"}, {"type": "lifespan.startup"}]

        async def receive() -> dict[str, Any]:
            return steps.pop()

        async def send(message: dict[str, Any]) -> None:
            started = testing.writer_process(testing.recorder_store(recorder)) is not None
            said.append((message["type"], started))

        await recorder({"type": "lifespan"}, receive, send)
        return said

    assert asyncio.run(startup()) == [
        ("lifespan.startup.complete", True),
        ("lifespan.shutdown.complete", True),
    ]


def test_a_recorder_mounted_under_a_prefix_inside_cors_as_the_guide_shows_records_and_reconnects(
    store: Any,
) -> None:
    """uvicorn serving the arrangement docs/guides/asgi.md shows: the Recorder mounted at
    /api, CORS and GZip outside it, closed by the outer app's lifespan."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.routing import Mount

    chunks = sse(run_events("t1", "r1"))
    recorder = Recorder(streaming_app(chunks), store=store)

    @contextlib.asynccontextmanager
    async def lifespan(site: Any) -> Any:
        yield
        await recorder.aclose()

    site = Starlette(
        routes=[Mount("/api", app=recorder)],
        middleware=[
            Middleware(CORSMiddleware, allow_origins=["https://chat.example"]),
            Middleware(GZipMiddleware, minimum_size=1),
        ],
        lifespan=lifespan,
    )
    headers = {"origin": "https://chat.example", "accept-encoding": "gzip"}
    with live_servers.serve(site) as url, httpx.Client(base_url=url, headers=headers) as client:
        run = client.post("/api/agent", content=request_body("t1", "r1"),
                          headers={"content-type": "application/json"})
        reload = client.post("/api/agent/connect", content=request_body("t1", "r2"),
                             headers={"content-type": "application/json"})
    assert run.content == b"".join(chunks)
    assert store.events("r1", thread_id="t1") == run_events("t1", "r1")
    assert reload.status_code == 200 and b'"MESSAGES_SNAPSHOT"' in reload.content
    assert {r.headers["access-control-allow-origin"] for r in (run, reload)} == {
        "https://chat.example"
    }
    assert testing.closed(testing.recorder_store(recorder))


def test_a_last_event_the_app_does_not_end_with_a_blank_line_is_recorded(
    store: Any, astore: Any
) -> None:
    """@ag-ui/client parses what is left in its buffer when the body ends: so does the
    recorder."""
    events = run_events("t1", "r1")
    chunks = sse(events)
    chunks[-1] = chunks[-1].rstrip(b"\n")
    asyncio.run(call(Recorder(streaming_app(chunks), store=astore), request_body("t1", "r1")))
    assert store.get_run("r1", thread_id="t1").status == "finished"


def test_an_oversized_event_stops_the_recording_not_the_response(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = run_events("t1", "r1")
    huge = b"data: " + b"x" * 2000 + b"\n"  # no blank line: the framer holds it
    chunks = [*sse(events[:2]), huge, huge, *sse(events[2:])]
    with agui_store.open(tmp_path / "small.db", max_event_bytes=3000) as small:
        astore = AsyncStore(small, writer="thread")
        try:
            with caplog.at_level(logging.WARNING, logger="agui_store.asgi"):
                response = asyncio.run(
                    call(Recorder(streaming_app(chunks), store=astore), request_body("t1", "r1"))
                )
        finally:
            asyncio.run(astore.close())
        assert response.body == b"".join(chunks) and response.complete
        assert small.events("r1", thread_id="t1") == events[:2]
    assert any("exceeds 3,000 bytes" in r.getMessage() for r in caplog.records)


#: An event larger than the framer held by default (16 MiB) and than a store takes by default.
BIG = 17 * 1024 * 1024


def cut(data: bytes, size: int | None) -> list[bytes]:
    """``data`` in chunks of ``size`` bytes (``None``: one chunk)."""
    size = size or len(data)
    return [data[at : at + size] for at in range(0, len(data), size)]


@pytest.mark.parametrize("size", [None, 64 * 1024], ids=["one chunk", "64 KiB chunks"])
def test_an_event_the_store_takes_is_recorded_in_whatever_chunks_it_comes(
    tmp_path: Path, size: int | None
) -> None:
    events = run_events("t1", "r1")
    events[-2] = {"type": "STATE_SNAPSHOT", "snapshot": {"said": "x" * BIG}}
    stream = b"".join(sse(events))
    with agui_store.open(tmp_path / "large.db", max_event_bytes=BIG + 1024) as large:
        astore = AsyncStore(large, writer="thread")
        try:
            recorder = Recorder(streaming_app(cut(stream, size)), store=astore)
            asyncio.run(call(recorder, request_body("t1", "r1")))
        finally:
            asyncio.run(astore.close())
        run = large.get_run("r1", thread_id="t1")
        assert run is not None and run.status == "finished"
        assert large.events("r1", thread_id="t1")[-2]["snapshot"]["said"] == "x" * BIG


@pytest.mark.parametrize("size", [None, 64 * 1024], ids=["one chunk", "64 KiB chunks"])
def test_an_event_larger_than_the_store_takes_is_counted_with_those_after_it(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture, size: int | None
) -> None:
    events = run_events("t1", "r1")  # 10 events: the snapshot, too large, is the 9th
    events[-2] = {"type": "STATE_SNAPSHOT", "snapshot": {"said": "x" * BIG}}
    stream = b"".join(sse(events))
    with caplog.at_level(logging.WARNING, logger="agui_store.asgi"):
        response = asyncio.run(
            call(Recorder(streaming_app(cut(stream, size)), store=astore), request_body("t1", "r1"))
        )
    assert response.body == stream
    assert store.events("r1", thread_id="t1") == events[:-2]
    (report,) = [r.getMessage() for r in caplog.records if r.name.startswith("agui_store")]
    assert "thread t1, run r1: 8 event(s) recorded, 2 not" in report


def test_the_client_gets_each_chunk_before_it_is_recorded(store: Any, astore: Any) -> None:
    """A store that cannot be written at all changes nothing the client gets."""
    store.close()
    events = run_events("t1", "r1")
    response = asyncio.run(
        call(Recorder(streaming_app(sse(events)), store=astore), request_body("t1", "r1"))
    )
    assert response.body == b"".join(sse(events)) and response.complete


@pytest.mark.parametrize(
    ("method", "status", "content_type", "headers"),
    [
        ("GET", 200, b"text/event-stream", []),
        ("PUT", 200, b"text/event-stream", []),
        ("POST", 500, b"text/event-stream", []),
        ("POST", 200, b"application/json", []),
        ("POST", 200, b"application/vnd.ag-ui.event+proto", []),
        ("POST", 200, b"text/event-stream", [(b"content-encoding", b"gzip")]),
    ],
    ids=["GET", "PUT", "status-500", "json", "protobuf", "content-encoded"],
)
def test_what_is_not_an_agui_run_passes_through_unrecorded(
    store: Any, astore: Any, method: str, status: int, content_type: bytes, headers: list[Any]
) -> None:
    chunks = sse(run_events("t1", "r1"))
    app = streaming_app(chunks, status=status, content_type=content_type, extra_headers=headers)
    response = asyncio.run(
        call(Recorder(app, store=astore), request_body("t1", "r1"), method=method)
    )
    assert response.status == status and response.body == b"".join(chunks)
    assert store.threads() == []


def test_runs_answered_in_protobuf_pass_through_with_one_warning_naming_the_content_type(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # AG-UI's binary encoding: each event a 4-byte big-endian length, then its message.
    frames = [len(m).to_bytes(4, "big") + m for m in (b"\x08\x01\x12\x02t1", b"\x08\x02")]
    recorder = Recorder(
        streaming_app(frames, content_type=b"application/vnd.ag-ui.event+proto"), store=astore
    )
    with caplog.at_level("WARNING", logger="agui_store.asgi"):
        responses = [
            asyncio.run(call(recorder, request_body("t1", run))) for run in ("r1", "r2")
        ]
    assert all(r.body == b"".join(frames) for r in responses) and store.threads() == []
    [said] = [r.getMessage() for r in caplog.records if r.name == "agui_store.asgi"]
    assert "not recorded: POST /agent" in said
    assert "application/vnd.ag-ui.event+proto" in said
    assert "text/event-stream responses only" in said


def test_a_run_whose_request_body_is_compressed_passes_through_with_a_warning(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    chunks = sse(run_events("t1", "r1"))
    with caplog.at_level("WARNING", logger="agui_store.asgi"):
        response = asyncio.run(call(
            Recorder(streaming_app(chunks), store=astore), request_body("t1", "r1"),
            headers=[(b"content-type", b"application/json"), (b"content-encoding", b"gzip")],
        ))
    assert response.body == b"".join(chunks) and store.threads() == []
    [said] = [r.getMessage() for r in caplog.records if r.name == "agui_store.asgi"]
    assert "request body is compressed (Content-Encoding: gzip)" in said


@pytest.mark.parametrize("side", ["request", "response"])
def test_a_content_encoding_of_identity_in_any_case_is_no_compression(
    store: Any, astore: Any, side: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Content codings are case-insensitive (RFC 9110, 8.4.1): ``Identity`` compresses
    nothing, so the run is recorded."""
    identity = [(b"content-encoding", b"Identity")]
    chunks = sse(run_events("t1", "r1"))
    app = streaming_app(chunks, extra_headers=identity if side == "response" else None)
    with caplog.at_level("WARNING", logger="agui_store.asgi"):
        response = asyncio.run(call(
            Recorder(app, store=astore), request_body("t1", "r1"),
            headers=[(b"content-type", b"application/json"), *identity] if side == "request"
            else None,
        ))
    assert response.body == b"".join(chunks)
    assert store.events("r1", thread_id="t1") == run_events("t1", "r1")
    assert not [r for r in caplog.records if r.name == "agui_store.asgi"]


def test_a_request_that_is_not_json_passes_through_unrecorded(store: Any, astore: Any) -> None:
    chunks = sse(run_events("t1", "r1"))
    response = asyncio.run(
        call(
            Recorder(streaming_app(chunks), store=astore),
            request_body("t1", "r1"),
            headers=[(b"content-type", b"multipart/form-data; boundary=x")],
        )
    )
    assert response.body == b"".join(chunks)
    assert store.threads() == []


def test_an_app_that_fails_mid_stream_leaves_the_run_incomplete_and_its_error_as_it_was(
    store: Any,
    astore: Any,
) -> None:
    events = run_events("t1", "r1")
    inner = streaming_app(sse(events[:3]), finish=False)

    async def failing(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await inner(scope, receive, send)
        raise RuntimeError("the agent crashed")

    with pytest.raises(RuntimeError, match="the agent crashed"):
        asyncio.run(call(Recorder(failing, store=astore), request_body("t1", "r1")))
    run = store.get_run("r1", thread_id="t1")
    assert run is not None and run.status == "incomplete"
    assert store.events("r1", thread_id="t1") == events[:3]


def test_a_response_that_streams_on_after_its_store_closed_is_logged_with_what_was_lost(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The AsyncStore closed while a response streams: what passed is recorded, and the
    events after it are said not to be, the store's close named, not dropped without a word."""
    events = run_events("t1", "r1")
    paused, resume = asyncio.Event(), asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
        for chunk in sse(events[:3]):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        paused.set()
        await resume.wait()
        for chunk in sse(events[3:]):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def main() -> Response:
        recorder = Recorder(app, store=astore)
        responding = asyncio.ensure_future(call(recorder, request_body("t1", "r1")))
        await paused.wait()
        await astore.close()
        resume.set()
        return await responding

    with caplog.at_level(logging.WARNING, logger="agui_store.asgi"):
        assert asyncio.run(main()).body == b"".join(sse(events))
    assert store.events("r1", thread_id="t1") == events[:3]
    said = [r.getMessage() for r in caplog.records if r.name == "agui_store.asgi"]
    assert said == [
        f"not recorded: thread t1, run r1: 3 event(s) recorded, {len(events) - 3} not: an "
        "event came after the store was closed (AsyncStore.close)"
    ], said


def test_a_body_that_is_not_a_run_agent_input_is_logged_and_passes_through(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    chunks = sse(run_events("t1", "r1"))
    recorder = Recorder(streaming_app(chunks), store=astore)
    with caplog.at_level(logging.DEBUG, logger="agui_store.asgi"):
        response = asyncio.run(call(recorder, b'{"threadId": 3}'))
    assert response.body == b"".join(chunks)
    assert store.threads() == []
    assert any("not a RunAgentInput" in r.getMessage() for r in caplog.records)


def test_a_body_naming_a_thread_but_not_a_run_agent_input_is_logged_with_where_and_what(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    chunks = sse(run_events("t1", "r1"))
    recorder = Recorder(streaming_app(chunks), store=astore)
    with caplog.at_level(logging.WARNING, logger="agui_store.asgi"):
        asyncio.run(call(recorder, b'{"threadId": 3, "runId": "r1", "messages": []}'))
        asyncio.run(call(recorder, b'{"threadId": "t1", "messages": []}'))
    assert store.threads() == []
    assert [r.getMessage() for r in caplog.records if r.name == "agui_store.asgi"] == [
        "not recorded: POST /agent answered an event stream, but its request body is not a "
        "RunAgentInput (Expected `str`, got `int` - at `$.threadId`)",
        "not recorded: POST /agent answered an event stream, but its request body is not a "
        "RunAgentInput (Object missing required field `runId`)",
    ]


def test_a_request_body_larger_than_the_store_takes_is_not_kept_while_the_app_streams_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def upload(scope: dict[str, Any], receive: Any, send: Any) -> None:
        received = 0  # the app keeps nothing of it
        while True:
            message = await receive()
            received += len(message.get("body", b""))
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": sse(run_events("t1", "r1"))[0]})

    with agui_store.open(tmp_path / "small.db", max_event_bytes=64 * 1024) as small:
        astore = AsyncStore(small, writer="thread")
        try:
            with caplog.at_level(logging.WARNING, logger="agui_store.asgi"):
                head = b'{"threadId": "t1", "runId": "r1", "x": "'
                peak, _ = post_large_body(Recorder(upload, store=astore), "/upload", head)
        finally:
            asyncio.run(astore.close())
        assert small.threads() == []
    assert peak < LARGE_BODY_BYTES // 4  # nothing like the whole body
    assert "larger than the store takes" in caplog.text


LARGE_BODY_PIECE, LARGE_BODY_PIECES = 64 * 1024, 256  # 16 MiB, in the pieces a server delivers
LARGE_BODY_BYTES = LARGE_BODY_PIECE * LARGE_BODY_PIECES


def post_large_body(
    recorder: Any, path: str, head: bytes, sent: Any = None
) -> tuple[int, list[bytes]]:
    """POSTs ``head`` and 16 MiB after it, as a server delivers a large upload, to a client
    that stays; returns the peak of memory traced while the recorder answered, and the
    response's body pieces. ``sent``, a hash, is fed every piece of the body."""
    import tracemalloc

    answer: list[bytes] = []

    async def post() -> int:
        pieces = 0

        async def receive() -> dict[str, Any]:
            nonlocal pieces
            if pieces == LARGE_BODY_PIECES:
                await asyncio.Event().wait()  # the client stays
            pieces += 1
            body = head if pieces == 1 else b"y" * LARGE_BODY_PIECE
            if sent is not None:
                sent.update(body)
            return {"type": "http.request", "body": body, "more_body": pieces < LARGE_BODY_PIECES}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                answer.append(message["body"])
                if not message.get("more_body"):
                    raise _Done

        scope = {"type": "http", "method": "POST", "path": path,
                 "headers": [(b"content-type", b"application/json")]}
        tracemalloc.start()
        try:
            with contextlib.suppress(_Done):
                await recorder(scope, receive, send)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    return asyncio.run(post()), answer


class _Done(Exception):
    """The client has its response."""


def test_a_run_agent_input_the_store_refuses_leaves_the_store_as_it_was(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    body = json.dumps({"threadId": "t1", "runId": "r1", "messages": "not a list"}).encode()
    chunks = sse(run_events("t1", "r1"))
    with caplog.at_level(logging.WARNING, logger="agui_store.asgi"):
        response = asyncio.run(call(Recorder(streaming_app(chunks), store=astore), body))
    assert response.body == b"".join(chunks)
    assert store.threads() == []
    (report,) = [r.getMessage() for r in caplog.records if r.name == "agui_store.asgi"]
    assert "thread t1, run r1" in report and "$.messages" in report


def test_a_run_id_posted_twice_is_recorded_once_and_the_warning_says_to_send_a_new_run_id(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    events = run_events("t1", "r1")
    chunks = sse(events)
    asyncio.run(call(Recorder(streaming_app(chunks), store=astore), request_body("t1", "r1")))
    with caplog.at_level(logging.WARNING, logger="agui_store.asgi"):
        response = asyncio.run(
            call(Recorder(streaming_app(chunks), store=astore), request_body("t1", "r1"))
        )
    assert response.body == b"".join(chunks)  # the client has its answer all the same
    assert [r.run_id for r in store.runs("t1")] == ["r1"]
    assert store.events("r1", thread_id="t1") == events
    (report,) = [r.getMessage() for r in caplog.records if r.name == "agui_store.asgi"]
    assert "thread t1, run r1" in report and "already recorded" in report, report
    assert "this response is not recorded" in report and "new runId" in report, report
    # The store's advice is for code that appends: a request cannot follow it.
    assert "appending" not in report and "without a new RUN_STARTED" not in report, report


def test_malformed_sse_is_logged_and_the_response_is_unchanged(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    events = run_events("t1", "r1")
    chunks = [*sse(events[:3]), b"data: {not json\n\n", *sse(events[3:])]
    recorder = Recorder(streaming_app(chunks, pause=0.05), store=astore)
    recorder.flush_interval = 0.01  # the events before the bad one are written by then
    with caplog.at_level(logging.WARNING):
        response = asyncio.run(call(recorder, request_body("t1", "r1")))
    assert response.body == b"".join(chunks) and response.complete
    # What came before the bad event is recorded; the batch holding it is not, nor what
    # follows (it would record a run that never happened): the run stays incomplete.
    run = store.get_run("r1", thread_id="t1")
    assert run is not None and run.status == "incomplete"
    assert store.events("r1", thread_id="t1") == events[:3]
    # One WARNING for the response, with its final counts (not one more per layer).
    (report,) = [r.getMessage() for r in caplog.records if r.name.startswith("agui_store")]
    assert "thread t1, run r1" in report and "malformed JSON" in report
    assert "3 event(s) recorded, 8 not" in report  # the bad one and the 7 after it


def test_an_event_the_store_refuses_by_sequence_is_logged(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    events = run_events("t1", "r1")
    bad = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nobody", "delta": "x"}
    chunks = sse([*events[:-1], bad, events[-1]])
    with caplog.at_level(logging.WARNING, logger="agui_store.asgi"):
        asyncio.run(call(Recorder(streaming_app(chunks), store=astore), request_body("t1", "r1")))
    assert any("TEXT_MESSAGE_CONTENT" in r.getMessage() for r in caplog.records)


def test_an_aborted_response_leaves_the_run_incomplete_with_what_was_sent(
    store: Any, astore: Any
) -> None:
    events = run_events("t1", "r1")
    app = streaming_app([*sse(events[:4]), b'data: {"type": "TEXT_MESS'], finish=False)
    response = asyncio.run(call(Recorder(app, store=astore), request_body("t1", "r1")))
    assert not response.complete
    run = store.get_run("r1", thread_id="t1")
    assert run is not None and run.status == "incomplete"
    assert store.events("r1", thread_id="t1") == events[:4]


def test_a_client_gone_from_an_app_that_never_listens_leaves_the_run_with_what_it_got(
    store: Any, astore: Any
) -> None:
    """Servers drop what is sent after a disconnect, without an error (uvicorn does): an app
    that never asks for the disconnect streams on, and only the Recorder can tell."""
    events = run_events("t1", "r1", text="a long answer")
    chunks = sse(events)
    app = streaming_app(chunks, pause=0.01)  # reads its body, then never receives again
    receive, send, _, got = client_leaving_after(3, request_body("t1", "r1"))
    asyncio.run(Recorder(app, store=astore)(AGENT_POST, receive, send))
    run = store.get_run("r1", thread_id="t1")
    assert run is not None and run.status == "incomplete"
    assert store.events("r1", thread_id="t1") == events[:3]
    assert b"".join(got) == b"".join(chunks[:3])


def test_a_client_gone_before_the_response_started_leaves_nothing_recorded(
    store: Any, astore: Any
) -> None:
    """The client gave up while the model thought; the app then sends its whole answer in
    one burst, never yielding, and the server sends none of it."""
    app = streaming_app([b"".join(sse(run_events("t1", "r1")))])
    pending = [{"type": "http.request", "body": request_body("t1", "r1"), "more_body": False}]

    async def receive() -> dict[str, Any]:
        return pending.pop() if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:  # a server's, to a client gone
        pass

    asyncio.run(Recorder(app, store=astore)(AGENT_POST, receive, send))
    assert store.threads() == []


#: Older starlette never compresses an event stream (it has no exclude_content_types to ask
#: it to), so a compressed AG-UI response cannot come from its GZipMiddleware there.
compresses_event_streams = pytest.mark.skipif(
    "exclude_content_types" not in inspect.signature(GZipMiddleware.__init__).parameters,
    reason="this starlette's GZipMiddleware never compresses text/event-stream",
)


@compresses_event_streams
def test_a_response_compressed_above_the_recorder_is_recorded_from_its_own_bytes(
    store: Any,
    astore: Any,
) -> None:
    """GZipMiddleware rewrites message["body"] in place after the recorder saw it."""
    events = run_events("t1", "r1", text="x" * 300)
    chunks = sse(events)
    app = GZipMiddleware(
        Recorder(streaming_app(chunks), store=astore), minimum_size=1, exclude_content_types=()
    )
    response = asyncio.run(
        call(app, request_body("t1", "r1"), headers=[(b"accept-encoding", b"gzip")])
    )
    assert response.headers[b"content-encoding"] == b"gzip"
    assert gzip.decompress(response.body) == b"".join(chunks)
    assert store.events("r1", thread_id="t1") == events


@compresses_event_streams
def test_a_response_compressed_below_the_recorder_is_not_recorded(store: Any, astore: Any) -> None:
    chunks = sse(run_events("t1", "r1"))
    inner = GZipMiddleware(streaming_app(chunks), minimum_size=1, exclude_content_types=())
    response = asyncio.run(
        call(
            Recorder(inner, store=astore),
            request_body("t1", "r1"),
            headers=[(b"accept-encoding", b"gzip")],
        )
    )
    assert gzip.decompress(response.body) == b"".join(chunks)
    assert store.threads() == []


@compresses_event_streams
def test_runs_compressed_below_the_recorder_are_named_once_in_a_warning_saying_where_it_goes(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    chunks = sse(run_events("t1", "r1"))
    inner = GZipMiddleware(streaming_app(chunks), minimum_size=1, exclude_content_types=())
    recorder = Recorder(inner, store=astore)
    gzipped = [(b"content-type", b"application/json"), (b"accept-encoding", b"gzip")]
    with caplog.at_level("DEBUG", logger="agui_store.asgi"):
        responses = [
            asyncio.run(call(recorder, request_body("t1", run), headers=gzipped))
            for run in ("r1", "r2")
        ]
        # An event stream answering JSON that is no run is another route's: not named.
        asyncio.run(call(recorder, b'{"query": "x"}', headers=gzipped))
    assert all(gzip.decompress(r.body) == b"".join(chunks) for r in responses)
    assert store.threads() == []
    [said] = [r.getMessage() for r in caplog.records if r.name == "agui_store.asgi"]
    assert "not recorded: POST /agent" in said
    assert "compressed below the Recorder (Content-Encoding: gzip)" in said
    assert "GZipMiddleware(Recorder(app))" in said


def test_two_runs_of_one_thread_streaming_at_once_are_recorded_apart(
    store: Any, astore: Any
) -> None:
    first = run_events("t1", "r1", text="a" * 8)
    second = run_events("t1", "r2", text="b" * 8)
    # One recorder in front of two agents (by path), streaming at different paces: the two
    # runs' batches interleave in the log.
    agents = {
        "/first": streaming_app(sse(first), pause=0.01),
        "/second": streaming_app(sse(second), pause=0.013),
    }

    async def routed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await agents[scope["path"]](scope, receive, send)

    recorder = Recorder(routed, store=astore)

    async def both() -> None:
        await asyncio.gather(
            call(recorder, request_body("t1", "r1"), path="/first"),
            call(recorder, request_body("t1", "r2"), path="/second"),
        )

    asyncio.run(both())
    assert store.events("r1", thread_id="t1") == first
    assert store.events("r2", thread_id="t1") == second
    assert store.checkout("r2", thread_id="t1").state == {"said": "b" * 8}


# --- reconnect ----------------------------------------------------------------------------


def read_stream(body: bytes) -> list[tuple[int | None, dict[str, Any]]]:
    """(id, event) of each SSE event, as an EventSource reads them."""
    out = []
    for block in body.decode().split("\n\n"):
        if not block:
            continue
        event_id, data = None, []
        for line in block.split("\n"):
            name, _, value = line.partition(": ")
            if name == "id":
                event_id = int(value)
            elif name == "data":
                data.append(value)
        out.append((event_id, json.loads("\n".join(data))))
    return out


def test_connect_answers_the_hydration_stream_with_the_runs_cursor(store: Any, astore: Any) -> None:
    events = run_events("t1", "r1")
    result = store.append(events, input=request_body("t1", "r1"))
    recorder = Recorder(streaming_app([]), store=astore)
    response = asyncio.run(call(recorder, request_body("t1", "fresh"), path="/agent/connect"))
    assert response.status == 200
    assert response.headers[b"content-type"].startswith(b"text/event-stream")
    got = read_stream(response.body)
    assert [ev for _, ev in got] == store.reconnect_stream("r1", thread_id="t1")
    assert {i for i, _ in got} == {result.last_seq}


def test_connect_restores_the_run_the_body_names(store: Any, astore: Any) -> None:
    store.append(run_events("t1", "r1", text="one"), input=request_body("t1", "r1"))
    store.append(run_events("t1", "r2", text="two"), input=request_body("t1", "r2"))
    recorder = Recorder(streaming_app([]), store=astore)
    response = asyncio.run(call(recorder, request_body("t1", "r1"), path="/agent/connect"))
    expected = store.reconnect_stream("r1", thread_id="t1")
    assert [ev for _, ev in read_stream(response.body)] == expected


def test_connect_on_a_store_that_cannot_be_read_answers_500(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(streaming_app([]), store=astore)
    store.close()
    with caplog.at_level(logging.ERROR, logger="agui_store.asgi"):
        response = asyncio.run(call(recorder, request_body("t1", "r1"), path="/agent/connect"))
    assert response.status == 500
    assert any("connect failed: thread t1" in r.getMessage() for r in caplog.records)


class WrittenBetweenReads(agui_store.Store):
    """A store whose every read of a run's events lets another connection first append an
    event to that run and commit: a run written as fast as it is read."""

    writer: agui_store.Store

    def _interleave(self) -> None:
        tick = {"type": "CUSTOM", "name": "tick", "value": 1}
        self.writer.append([tick], thread_id="t1", run_id="r1")

    def reconnect_stream(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        self._interleave()
        return super().reconnect_stream(*args, **kwargs)

    def events(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        self._interleave()
        return super().events(*args, **kwargs)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_connect_to_a_run_written_between_its_reads_answers_one_moment_of_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    location = (
        str(tmp_path / "live.db")
        if backend == "sqlite"
        else request.getfixturevalue("postgres_store_database")
    )
    unfinished = run_events("t1", "r1")[:-1]
    with WrittenBetweenReads(location) as store, agui_store.open(location) as writer:
        store.writer = writer
        first = writer.append(unfinished[:2], input=request_body("t1", "r1"))
        writer.append(unfinished[2:], thread_id="t1", run_id="r1")
        cursor = writer.get_run("r1", thread_id="t1").last_seq
        expected = agui_store.Store.reconnect_stream(store, "r1", thread_id="t1")
        since_first = agui_store.Store.events(store, "r1", thread_id="t1", after=first.last_seq)
        astore = AsyncStore(store, writer="thread")
        recorder = Recorder(streaming_app([]), store=astore)
        hydration = asyncio.run(call(recorder, request_body("t1", "r1"), path="/agent/connect"))
        resumed = asyncio.run(
            call(
                recorder,
                request_body("t1", "r1"),
                path="/agent/connect",
                headers=[(b"last-event-id", str(first.last_seq).encode())],
            )
        )
        asyncio.run(astore.close())
        # Each answer is the run as it was when its read began: the event appended during
        # the read is neither in it nor under its cursor (the next reconnect sends it).
        tick = {"type": "CUSTOM", "name": "tick", "value": 1}
        assert hydration.status == 200
        assert read_stream(hydration.body) == [(cursor, ev) for ev in expected]
        assert resumed.status == 200
        got = read_stream(resumed.body)
        assert [ev for _, ev in got] == [*since_first, tick]  # the hydration's tick only
        assert cursor < got[-1][0] < writer.get_run("r1", thread_id="t1").last_seq
        assert writer.events("r1", thread_id="t1") == [*unfinished, tick, tick]


def test_connect_to_an_unknown_thread_is_404_and_writes_nothing(store: Any, astore: Any) -> None:
    recorder = Recorder(streaming_app([]), store=astore)
    response = asyncio.run(call(recorder, request_body("nobody", "r"), path="/agent/connect"))
    assert response.status == 404
    assert store.threads() == []


def test_connect_with_a_body_that_is_not_a_run_agent_input_goes_to_the_app(
    store: Any, astore: Any
) -> None:
    chunks = [b"the app's own route"]
    recorder = Recorder(streaming_app(chunks, content_type=b"text/plain"), store=astore)
    response = asyncio.run(call(recorder, b"hello", path="/agent/connect"))
    assert response.body == b"the app's own route"


def test_connect_with_ids_but_no_messages_list_goes_to_the_app(store: Any, astore: Any) -> None:
    """An app's own /connect route (an integration's, say) whose JSON names a thread and a
    run is not a reconnect: a RunAgentInput has its messages."""
    chunks = [b"connected the integration"]
    recorder = Recorder(streaming_app(chunks, content_type=b"text/plain"), store=astore)
    store.append(run_events("slack-T1", "r1"), input=request_body("slack-T1", "r1"))
    for body in [
        {"threadId": "slack-T1", "runId": "job-7", "token": "abc"},
        {"threadId": "slack-T1", "runId": "job-7", "messages": "none"},
        {"threadId": "slack-T1", "runId": "job-7", "messages": [], "tools": {}},
    ]:
        response = asyncio.run(
            call(recorder, json.dumps(body).encode(), path="/integrations/connect")
        )
        assert (response.status, response.body) == (200, b"connected the integration")
    reconnect = asyncio.run(
        call(recorder, request_body("slack-T1", "job-7"), path="/integrations/connect")
    )
    assert [ev for _, ev in read_stream(reconnect.body)] == store.reconnect_stream(
        "r1", thread_id="slack-T1"
    )


def test_a_body_nested_too_deep_to_read_goes_to_the_app_as_it_was_sent(
    store: Any, astore: Any
) -> None:
    # Valid JSON, nested deeper than a decoder follows: the app answers it (FastAPI says
    # 400), as it would without the Recorder, on the connect path and when refusing.
    deep = b'{"threadId": "t1", "runId": "r1", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    app = streaming_app([b"the app's own answer"], status=400, content_type=b"text/plain")
    recorder = Recorder(app, store=astore)
    assert asyncio.run(call(recorder, deep, path="/agent/connect")).body == b"the app's own answer"
    refusing = Recorder(app, store=astore, scope=owner_header, unowned="refuse")
    assert asyncio.run(call(refusing, deep)).body == b"the app's own answer"
    assert store.threads() == []


def test_a_connect_body_larger_than_the_store_takes_goes_to_the_app_unread_and_exact(
    tmp_path: Path,
) -> None:
    import hashlib

    sent_hash, got_hash = hashlib.sha256(), hashlib.sha256()

    async def drain(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:  # the app's own /connect route, which keeps nothing of the body
            message = await receive()
            got_hash.update(message.get("body", b""))
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"drained"})

    head = b'{"threadId": "t1", "runId": "r1", "messages": [], "x": "'
    with agui_store.open(tmp_path / "small.db", max_event_bytes=64 * 1024) as small:
        small.append(run_events("t1", "r1"), input=request_body("t1", "r1"))
        astore = AsyncStore(small, writer="thread")
        try:
            peak, answer = post_large_body(
                Recorder(drain, store=astore), "/drain/connect", head, sent=sent_hash
            )
        finally:
            asyncio.run(astore.close())
    assert answer == [b"drained"]  # the app's answer, not a reconnect's
    assert got_hash.digest() == sent_hash.digest()
    assert peak < LARGE_BODY_BYTES // 4  # nothing like the whole body


def test_an_unowned_body_larger_than_the_store_takes_is_refused_unread(tmp_path: Path) -> None:
    called: list[bool] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        called.append(True)

    pieces = [b'{"threadId": "t1", "runId": "r1", "x": "', *[b"y" * 1024] * 8, b'"}']
    asked = 0

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        return {"type": "http.request", "body": pieces[asked - 1], "more_body": asked < 10}

    response = Response()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            response.status = message["status"]

    scope = {"type": "http", "method": "POST", "path": "/agent",
             "headers": [(b"content-type", b"application/json")]}
    with agui_store.open(tmp_path / "small.db", max_event_bytes=2048) as small:
        astore = AsyncStore(small, writer="thread")
        try:
            refusing = Recorder(app, store=astore, scope=owner_header, unowned="refuse")
            asyncio.run(refusing(scope, receive, send))
        finally:
            asyncio.run(astore.close())
    assert response.status == 401 and not called
    assert asked < 10  # the rest was never read


def test_last_event_id_resumes_after_the_cursor(store: Any, astore: Any) -> None:
    events = run_events("t1", "r1")
    first = store.append(events[:4], input=request_body("t1", "r1"))
    store.append(events[4:], thread_id="t1")
    recorder = Recorder(streaming_app([]), store=astore)
    response = asyncio.run(
        call(
            recorder,
            request_body("t1", "r1"),
            path="/agent/connect",
            headers=[(b"last-event-id", str(first.last_seq).encode())],
        )
    )
    got = read_stream(response.body)
    assert [ev for _, ev in got] == events[4:]
    assert got[-1][0] == store.get_run("r1", thread_id="t1").last_seq


@pytest.mark.parametrize("cursor", [b"-1", b"x", b"1.5", b"9" * 5000, b"1_0", b" 7", b"+3",
                                    "٣".encode()])
def test_a_last_event_id_that_is_no_sequence_number_is_400_or_nothing_after_it(
    store: Any, cursor: bytes
) -> None:
    events = run_events("t1", "r1")
    store.append(events, input=request_body("t1", "r1"))
    recorder = Recorder(streaming_app([]), store=store)
    response = asyncio.run(
        call(recorder, request_body("t1", "r1"), path="/agent/connect",
             headers=[(b"last-event-id", cursor)])
    )
    assert response.status == 400, response.body


def test_a_last_event_id_beyond_every_sequence_number_resumes_with_nothing(store: Any) -> None:
    events = run_events("t1", "r1")
    store.append(events, input=request_body("t1", "r1"))
    recorder = Recorder(streaming_app([]), store=store)
    response = asyncio.run(
        call(recorder, request_body("t1", "r1"), path="/agent/connect",
             headers=[(b"last-event-id", str(10**30).encode())])
    )
    assert response.status == 200
    assert read_stream(response.body) == []


async def recorded_until(store: Any, event_type: str) -> None:
    """Wait until the store holds an event of that type in run r1 of thread t1."""
    while store.get_run("r1", thread_id="t1") is None or not any(
        ev["type"] == event_type for ev in store.events("r1", thread_id="t1")
    ):
        await asyncio.sleep(0.01)


def test_a_run_whose_request_was_cancelled_as_it_ended_is_not_followed_as_live_after(
    store: Any, astore: Any
) -> None:
    events = run_events("t1", "r1")
    recorder = Recorder(streaming_app(sse(events)), store=astore)

    async def shutting_down(scope: dict[str, Any], receive: Any, send: Any) -> None:
        # A server stopping cancels the request's task as its response ends: the Recorder
        # is then closing the recording, whose events it still writes.
        async def send_then_cancelled(message: dict[str, Any]) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                task = asyncio.current_task()
                assert task is not None
                task.cancel()

        await recorder(scope, receive, send_then_cancelled)

    async def scenario() -> Response:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.ensure_future(call(shutting_down, request_body("t1", "r1")))
        await recorded_until(store, "RUN_FINISHED")
        # The run has ended: a reconnect gets what the store holds, not a wait for more.
        return await asyncio.wait_for(
            call(recorder, request_body("t1", "r1"), path="/agent/connect"), timeout=60
        )

    reconnected = asyncio.run(scenario())
    assert reconnected.complete
    assert [ev["type"] for _, ev in read_stream(reconnected.body)][-1] == "RUN_FINISHED"


@pytest.mark.oracle
def test_a_client_reconnecting_to_a_live_run_gets_its_hydration_then_the_live_rest(
    store: Any, astore: Any, oracle: Any
) -> None:
    events = run_events("t1", "r1", text="abcdefghijklmnop")
    recorder = Recorder(streaming_app(sse(events), pause=0.02), store=astore)

    async def scenario() -> tuple[Response, Response]:
        running = asyncio.ensure_future(call(recorder, request_body("t1", "r1")))
        await recorded_until(store, "TEXT_MESSAGE_CONTENT")  # mid-message
        assert not running.done()
        reconnected = await call(recorder, request_body("t1", "r1"), path="/agent/connect")
        return await running, reconnected

    original, reconnected = asyncio.run(scenario())
    got = read_stream(reconnected.body)
    ids = [i for i, _ in got]
    assert ids == sorted(ids) and got[-1][1]["type"] == "RUN_FINISHED"
    assert got[0][1]["type"] == "RUN_STARTED"
    # It reopened the message it joined in the middle of: the official client, fed the
    # reconnect stream through its whole pipeline, holds what the store holds.
    assert [ev["type"] for _, ev in got[:4]] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START",
    ]
    replayed = oracle.replay([ev for _, ev in got], mode="pipeline")
    assert replayed["ok"], replayed
    checkout = store.checkout("r1", thread_id="t1")
    assert replayed["messages"] == checkout.messages
    assert replayed["state"] == checkout.state
    assert original.complete


def reconnected_at(
    store: Any, astore: Any, events: list[dict[str, Any]], event_type: str
) -> list[dict[str, Any]]:
    """The events a client reconnecting to run r1 of thread t1 gets, once the store holds an
    event of ``event_type`` of it (the run streaming ``events`` through a Recorder)."""
    recorder = Recorder(streaming_app(sse(events), pause=0.05), store=astore)

    async def scenario() -> Response:
        running = asyncio.ensure_future(call(recorder, request_body("t1", "r1")))
        await recorded_until(store, event_type)
        reconnected = await call(recorder, request_body("t1", "r1"), path="/agent/connect")
        await running
        return reconnected

    return [ev for _, ev in read_stream(asyncio.run(scenario()).body)]


def test_a_reconnect_to_a_run_whose_client_has_gone_ends_without_waiting_for_the_app(
    store: Any, astore: Any
) -> None:
    """The app streams on into the closed connection (it never listens): what it sends is
    not recorded, so a reconnect has nothing live to wait for."""
    events = run_events("t1", "r1", text="a long answer")
    chunks = sse(events)
    release = asyncio.Event()
    order: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        for i, chunk in enumerate(chunks):
            if i == 3:
                await release.wait()
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        order.append("the app ended")

    receive, send, gone, _ = client_leaving_after(3, request_body("t1", "r1"))

    async def scenario() -> Response:
        recorder = Recorder(app, store=astore)
        running = asyncio.ensure_future(recorder(AGENT_POST, receive, send))
        await gone.wait()
        connect = asyncio.ensure_future(
            call(recorder, request_body("t1", "r2"), path="/agent/connect")
        )
        await asyncio.wait({connect}, timeout=30)  # a guard: it hung until the app ended
        order.append("the reconnect ended" if connect.done() else "the reconnect waits")
        release.set()
        await running
        return await connect

    reconnected = asyncio.run(scenario())
    assert order == ["the reconnect ended", "the app ended"]
    assert reconnected.complete
    assert [ev["type"] for _, ev in read_stream(reconnected.body)][:2] == [
        "RUN_STARTED", "MESSAGES_SNAPSHOT"
    ]
    assert store.events("r1", thread_id="t1") == events[:3]


@pytest.mark.oracle
def test_a_client_reconnecting_inside_a_tool_call_gets_it_reopened(
    store: Any, astore: Any, oracle: Any
) -> None:
    started = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
    call_id = "call-1"
    events = [
        started,
        {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "Let me look."},
        {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": "search",
            "parentMessageId": "a1",
        },
        *(
            {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": part}
            for part in ['{"q"', ': "wea', "ther", ' in "', ', "n"', ": 3", "}"]
        ),
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
        {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": call_id, "content": "ok"},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
    ]
    got = reconnected_at(store, astore, events, "TOOL_CALL_START")
    assert [ev["type"] for ev in got[1:4]] == [
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "TOOL_CALL_START",
    ]
    (snapshot_call,) = got[1]["messages"][1]["toolCalls"]
    assert snapshot_call["id"] == got[3]["toolCallId"] == call_id
    replayed = oracle.replay(got, mode="pipeline")
    assert replayed["ok"], replayed
    checkout = store.checkout("r1", thread_id="t1")
    assert replayed["messages"] == checkout.messages
    assert checkout.messages[1]["toolCalls"][0]["function"]["arguments"] == (
        '{"q": "weather in ", "n": 3}'
    )


@pytest.mark.oracle
def test_a_client_reconnecting_while_the_model_thinks_in_a_step_gets_each_reopened(
    store: Any, astore: Any, oracle: Any
) -> None:
    events = [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
        {"type": "STEP_STARTED", "stepName": "plan"},
        {"type": "REASONING_START", "messageId": "think-1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rm-1", "role": "reasoning"},
        *(
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm-1", "delta": f"step {i}. "}
            for i in range(12)
        ),
        {"type": "REASONING_MESSAGE_END", "messageId": "rm-1"},
        {"type": "REASONING_END", "messageId": "think-1"},
        {"type": "STEP_FINISHED", "stepName": "plan"},
        *(
            {"type": kind, "messageId": "a1", **extra}
            for kind, extra in (
                ("TEXT_MESSAGE_START", {"role": "assistant"}),
                ("TEXT_MESSAGE_CONTENT", {"delta": "Done."}),
                ("TEXT_MESSAGE_END", {}),
            )
        ),
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
    ]
    got = reconnected_at(store, astore, events, "REASONING_MESSAGE_CONTENT")
    assert got[3:6] == [
        {"type": "STEP_STARTED", "stepName": "plan"},
        {"type": "REASONING_START", "messageId": "think-1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rm-1", "role": "reasoning"},
    ]
    replayed = oracle.replay(got, mode="pipeline")
    assert replayed["ok"], replayed
    checkout = store.checkout("r1", thread_id="t1")
    assert replayed["messages"] == checkout.messages
    (thought,) = [m for m in checkout.messages if m["id"] == "rm-1"]
    assert thought["content"] == "".join(f"step {i}. " for i in range(12))


def test_last_event_id_on_a_live_run_resumes_with_every_events_own_cursor(
    store: Any, astore: Any
) -> None:
    events = run_events("t1", "r1", text="abcdefghij")
    recorder = Recorder(streaming_app(sse(events), pause=0.02), store=astore)

    async def scenario() -> Response:
        running = asyncio.ensure_future(call(recorder, request_body("t1", "r1")))
        await recorded_until(store, "TEXT_MESSAGE_CONTENT")
        cursor = store.get_run("r1", thread_id="t1").last_seq
        resumed = await call(
            recorder,
            request_body("t1", "r1"),
            path="/agent/connect",
            headers=[(b"last-event-id", str(cursor).encode())],
        )
        await running
        return resumed

    resumed = asyncio.run(scenario())
    got = read_stream(resumed.body)
    seen = store.events("r1", thread_id="t1")
    assert [ev for _, ev in got] == seen[len(seen) - len(got) :]
    assert [i for i, _ in got] == list(range(got[0][0], got[0][0] + len(got)))


def until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (a test server's progress, seen from the test)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the server made no progress"
        time.sleep(0.005)


def test_each_run_of_a_response_streaming_several_is_followed_live_with_its_own_events_only(
    store: Any,
) -> None:
    """The retainsMemory recording answers one request with five runs; each run's end comes
    in one chunk with the next run's start, so one batch holds both."""
    path = FIXTURES / "dojo_event_traces" / "langgraphPythonTests.retainsMemory.json"
    if not path.is_file():
        _skip_or_fail(f"the upstream recording is not at {path}")
    recorder = Recorder(live_servers.turns_app(json.loads(path.read_text())), store=store)
    hold = live_servers.HOLDS["a"] = threading.Semaphore(0)  # the server waits mid-run
    a, b = json.loads(request_body("t1", "a")), json.loads(request_body("t1", "a-2"))
    try:
        with live_servers.serve(recorder) as url, httpx.Client(timeout=60) as http:
            posting = threading.Thread(target=http.post, args=(f"{url}/turns",), kwargs={"json": a})
            posting.start()
            until(lambda: store.get_run("a", thread_id="t1") is not None)
            with http.stream("POST", f"{url}/turns/connect", json=a) as following_a:
                hold.release()  # a's follower is in: the rest of a, and b up to its middle
                got_a = read_stream(following_a.read())
            until(lambda: store.get_run("a-2", thread_id="t1") is not None)
            resumed = {"json": b, "headers": {"last-event-id": "0"}}
            with http.stream("POST", f"{url}/turns/connect", **resumed) as following_b:
                for _ in range(4):  # b's rest and the three runs after it
                    hold.release()
                got_b = read_stream(following_b.read())
            posting.join()
            until(lambda: recorder.recording == 0)
    finally:
        del live_servers.HOLDS["a"]
    cursor = got_a[0][0]
    hydration = ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert [ev["type"] for _, ev in got_a[:3]] == hydration
    # The live rest of a is every event of a after the hydration's cursor, up to its end.
    live_rest = [ev for seq, ev in got_a if seq > cursor]
    assert live_rest == store.events("a", thread_id="t1", after=cursor)
    assert got_a[-1][1] == {"type": "RUN_FINISHED", "threadId": "t1", "runId": "a"}
    # Resumed from the start, b is exactly its own events, each with its own cursor.
    assert [ev for _, ev in got_b] == store.events("a-2", thread_id="t1")
    assert got_b[0][1]["type"] == "RUN_STARTED" and got_b[-1][1]["type"] == "RUN_FINISHED"
    assert [seq for seq, _ in got_b] == list(range(got_b[0][0], got_b[0][0] + len(got_b)))


def gated_app(chunks: list[bytes], gate: asyncio.Event, held: int) -> Any:
    """An app that answers the first ``held`` of ``chunks``, then waits for ``gate`` to
    answer the rest."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for at, chunk in enumerate(chunks):
            if at == held:
                await gate.wait()
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def test_a_connect_before_a_new_threads_first_batch_is_written_follows_its_run(
    store: Any, astore: Any
) -> None:
    events = run_events("t1", "r1")
    gate = asyncio.Event()
    recorder = Recorder(gated_app(sse(events), gate, held=3), store=astore)
    recorder.flush_interval = 60.0  # no batch of the run falls due while the test runs

    async def scenario() -> Response:
        running = asyncio.ensure_future(call(recorder, request_body("t1", "r1")))
        while recorder.recording == 0:
            await asyncio.sleep(0.001)
        assert store.threads() == []  # nothing written yet
        reconnecting = asyncio.ensure_future(
            call(recorder, request_body("t1", "r1"), path="/agent/connect")
        )
        while store.threads() == []:
            await asyncio.sleep(0.001)
        gate.set()
        await running
        return await reconnecting

    reconnected = asyncio.run(scenario())
    assert reconnected.status == 200  # not 404: the recorder wrote what it held first
    got = [ev for _, ev in read_stream(reconnected.body)]
    assert got[0] == events[0] and got[-1]["type"] == "RUN_FINISHED"


def test_a_connect_naming_a_run_still_unwritten_restores_it_and_not_the_run_before(
    store: Any, astore: Any
) -> None:
    store.append(run_events("t1", "r1", text="old"), input=request_body("t1", "r1"))
    events = run_events("t1", "r2", text="new")
    gate = asyncio.Event()
    recorder = Recorder(gated_app(sse(events), gate, held=3), store=astore)
    recorder.flush_interval = 60.0

    async def scenario() -> Response:
        running = asyncio.ensure_future(call(recorder, request_body("t1", "r2")))
        while recorder.recording == 0:
            await asyncio.sleep(0.001)
        reconnecting = asyncio.ensure_future(
            call(recorder, request_body("t1", "r2"), path="/agent/connect")
        )
        while store.get_run("r2", thread_id="t1") is None:
            await asyncio.sleep(0.001)
        gate.set()
        await running
        return await reconnecting

    got = [ev for _, ev in read_stream(asyncio.run(scenario()).body)]
    assert (got[0]["type"], got[0]["runId"]) == ("RUN_STARTED", "r2")


def owner_header(scope: dict[str, Any]) -> str | None:
    for key, value in scope["headers"]:
        if key == b"x-user":
            return str(value.decode())
    return None


def test_with_owners_on_a_request_without_one_is_not_recorded_nor_answered_by_connect(
    store: Any, astore: Any
) -> None:
    store.append(run_events("t0", "r0"), input=request_body("t0", "r0"))
    chunks = sse(run_events("t1", "r1"))
    recorder = Recorder(streaming_app(chunks), store=astore, scope=owner_header)
    response = asyncio.run(call(recorder, request_body("t1", "r1")))
    assert response.body == b"".join(chunks)
    assert store.threads() == ["t0"]
    reconnect = asyncio.run(call(recorder, request_body("t0", "r0"), path="/agent/connect"))
    assert reconnect.status == 404


def test_a_scope_callable_that_raises_is_logged_and_gives_the_request_no_owner(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(scope: dict[str, Any]) -> str | None:
        raise KeyError("x-user")

    store.append(run_events("t0", "r0"), input=request_body("t0", "r0"), scope="al")
    chunks = sse(run_events("t1", "r1"))
    refusing = Recorder(streaming_app(chunks), store=astore, scope=broken, unowned="refuse")
    with caplog.at_level("ERROR", logger="agui_store.asgi"):
        refused = asyncio.run(call(refusing, request_body("t1", "r1")))
        reconnect = asyncio.run(call(refusing, request_body("t0", "r0"), path="/agent/connect"))
    assert (refused.status, reconnect.status) == (401, 404)  # not a 500 with a traceback
    assert store.threads() == ["t0"]
    raised = [r for r in caplog.records if "the scope callable raised" in r.getMessage()]
    assert len(raised) == 2 and all(r.exc_info for r in raised)


@pytest.mark.parametrize("given", ["", 42], ids=["an-empty-header", "a-number"])
def test_a_scope_callable_that_gives_no_owners_name_gives_the_request_no_owner(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture, given: Any
) -> None:
    store.append(run_events("t0", "r0"), input=request_body("t0", "r0"), scope="al")
    chunks = sse(run_events("t1", "r1"))
    refusing = Recorder(streaming_app(chunks), store=astore, scope=lambda scope: given,
                        unowned="refuse")
    with caplog.at_level("WARNING", logger="agui_store.asgi"):
        refused = asyncio.run(call(refusing, request_body("t1", "r1")))
        reconnect = asyncio.run(call(refusing, request_body("t0", "r0"), path="/agent/connect"))
    assert (refused.status, reconnect.status) == (401, 404)  # the app never ran; no 500
    assert store.threads() == ["t0"]
    said = [r.getMessage() for r in caplog.records if "gave no owner's name" in r.getMessage()]
    assert [m.split(" (")[0].rsplit(" ", 1)[-1] for m in said] == ["/agent", "/agent/connect"]


@pytest.mark.parametrize("unowned", ["skip", "record", "refuse"])
def test_the_scope_callable_is_asked_once_a_request_and_its_owner_is_the_one_recorded(
    store: Any, astore: Any, unowned: str
) -> None:
    asked: list[str | None] = []

    def counted_owner(scope: dict[str, Any]) -> str | None:
        # A callable with a cost or a side effect (a session look-up) sees each request once.
        owner = owner_header(scope)
        asked.append(owner)
        return owner

    chunks = sse(run_events("t1", "r1"))
    recorder = Recorder(streaming_app(chunks), store=astore, scope=counted_owner,
                        unowned=unowned)
    answer = asyncio.run(call(recorder, request_body("t1", "r1"), headers=[(b"x-user", b"al")]))
    assert answer.body == b"".join(chunks)
    assert asked == ["al"]
    assert [r.run_id for r in store.runs("t1")] == ["r1"] and store.thread("t1").owner == "al"


def test_a_run_without_an_owner_is_skipped_with_a_warning_recorded_or_refused_as_asked(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    chunks = sse(run_events("t1", "r1"))
    skipping = Recorder(streaming_app(chunks), store=astore, scope=owner_header)
    with caplog.at_level("WARNING", logger="agui_store.asgi"):
        assert asyncio.run(call(skipping, request_body("t1", "r1"))).body == b"".join(chunks)
    assert store.threads() == []
    (warning,) = [r for r in caplog.records if r.name == "agui_store.asgi"]
    assert warning.levelname == "WARNING" and "no owner" in warning.getMessage()
    assert "unowned='record'" in warning.getMessage()

    recording = Recorder(streaming_app(chunks), store=astore, scope=owner_header,
                         unowned="record")
    assert asyncio.run(call(recording, request_body("t1", "r1"))).body == b"".join(chunks)
    assert [r.run_id for r in store.runs("t1")] == ["r1"]
    assert store.thread("t1").owner is None

    chunks2 = sse(run_events("t2", "r2"))
    refusing = Recorder(streaming_app(chunks2), store=astore, scope=owner_header,
                        unowned="refuse")
    refused = asyncio.run(call(refusing, request_body("t2", "r2")))
    assert refused.status == 401 and refused.body != b"".join(chunks2)
    assert store.threads() == ["t1"]
    owned = asyncio.run(call(refusing, request_body("t2", "r2"), headers=[(b"x-user", b"al")]))
    assert owned.body == b"".join(chunks2)
    with pytest.raises(agui_store.InvalidArgumentError, match="unowned="):
        Recorder(streaming_app(chunks), store=astore, unowned="ignore")


@pytest.mark.parametrize("unowned", ["skip", "refuse"])
def test_an_id_a_client_chose_cannot_write_a_log_line_of_its_own(
    store: Any, astore: Any, caplog: pytest.LogCaptureFixture, unowned: str
) -> None:
    # A client without an owner names the ids it likes: a newline in them would start a
    # line of the log that reads as the server's own.
    thread, run = "t1\nWARNING:agui_store.asgi:forged", "r1\r\x1b[2K"
    chunks = sse(run_events(thread, run))
    recorder = Recorder(streaming_app(chunks), store=astore, scope=owner_header,
                        unowned=unowned)
    with caplog.at_level("WARNING", logger="agui_store.asgi"):
        asyncio.run(call(recorder, request_body(thread, run)))
    (said,) = [r.getMessage() for r in caplog.records if r.name == "agui_store.asgi"]
    assert "\n" not in said and "\r" not in said and "\x1b" not in said
    assert "thread t1\\nWARNING:agui_store.asgi:forged, run r1\\r\\x1b[2K" in said
    assert store.threads() == []
