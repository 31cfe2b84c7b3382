"""The ASGI Recorder's overhead: the same app served with and without it, in one run.

Two uvicorn servers on 127.0.0.1, each in its own process, serve the same FastAPI app (a
pydantic-ai agent over a scripted ``FunctionModel``, and a route answering 200 pre-built
events), one of them behind ``agui_store.asgi.Recorder``. A client in this process posts the
same ``RunAgentInput`` to each in turn and times the whole response and its first byte; the
figures are medians and their ratios. Then 20 streams at once go through the Recorder; once
its server has stopped (uvicorn waits for every request, the Recorder's last appends
included), the events the clients received are counted against the events the store holds.

    python -m benchmarks.bench_asgi [--repeat 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import StreamingResponse

import agui_store
from agui_store.asgi import Recorder, SSEFramer
from benchmarks._common import header, scratch_dir
from tests.live_servers import agent_app

EVENTS = 200  # per response


def prebuilt(thread: str, run: str) -> list[bytes]:
    """200 events as an SSE producer frames them: a run streaming one text message."""
    m = f"m-{run}"
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"},
        *(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": f"word {i} "}
            for i in range(EVENTS - 4)
        ),
        {"type": "TEXT_MESSAGE_END", "messageId": m},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]
    return [b"data: " + json.dumps(ev).encode() + b"\n\n" for ev in events]


def make_app() -> Any:
    app = agent_app()

    @app.post("/prebuilt")
    async def prebuilt_endpoint(request: Request) -> StreamingResponse:
        body = await request.json()
        chunks = prebuilt(body["threadId"], body["runId"])

        async def stream() -> Any:
            for chunk in chunks:
                yield chunk

        return StreamingResponse(stream(), media_type="text/event-stream")

    return app


def body(say: str) -> dict[str, Any]:
    run = uuid.uuid4().hex
    return {
        "threadId": f"t-{run}",
        "runId": run,
        "state": {},
        "messages": [{"id": f"u-{run}", "role": "user", "content": say}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def timed(client: httpx.Client, url: str, payload: dict[str, Any]) -> tuple[float, float, int]:
    """(total seconds, seconds to the first body byte, events received)."""
    framer = SSEFramer()
    count = 0
    t0 = time.perf_counter()
    first = None
    with client.stream(
        "POST", url, json=payload, headers={"accept": "text/event-stream"}
    ) as response:
        assert response.status_code == 200, response.status_code
        for chunk in response.iter_raw():
            if first is None:
                first = time.perf_counter() - t0
            count += len(framer.feed(chunk))
    total = time.perf_counter() - t0
    return total, first or total, count + len(framer.finish())


def compare(plain: str, recorded: str, path: str, say: str, repeat: int) -> None:
    totals: dict[str, list[float]] = {"plain": [], "recorded": []}
    firsts: dict[str, list[float]] = {"plain": [], "recorded": []}
    counts = set()
    with httpx.Client(timeout=30) as client:
        for i in range(repeat + 3):
            # Alternate which goes first: drift in the machine's load hits both alike.
            order = [("plain", plain), ("recorded", recorded)]
            for name, base in order if i % 2 else reversed(order):
                total, first, count = timed(client, f"{base}/{path}", body(say))
                counts.add(count)
                if i >= 3:  # warm-up
                    totals[name].append(total)
                    firsts[name].append(first)
    assert counts == {EVENTS}, counts
    for measure, values in (("total time", totals), ("time to first byte", firsts)):
        p, r = statistics.median(values["plain"]), statistics.median(values["recorded"])
        print(f"| {path}: {measure} | {p * 1e3:.2f} | {r * 1e3:.2f} | {r / p:.2f}x |", flush=True)


async def concurrent(recorded: str, streams: int) -> list[tuple[str, int]]:
    """``streams`` responses at once through the Recorder: (thread, events received)."""

    async def one(client: httpx.AsyncClient) -> tuple[str, int]:
        payload = body(f"slow {EVENTS - 4}")
        framer = SSEFramer()
        count = 0
        async with client.stream("POST", f"{recorded}/pydantic", json=payload) as response:
            async for chunk in response.aiter_raw():
                count += len(framer.feed(chunk))
        return payload["threadId"], count + len(framer.finish())

    limits = httpx.Limits(max_connections=streams)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return list(await asyncio.gather(*(one(client) for _ in range(streams))))


def run_server(recorded: bool, port: int, path: str) -> None:
    """In the server process: the app (behind the Recorder when ``recorded``) on ``port``."""
    import uvicorn

    app = make_app()
    if recorded:
        store = agui_store.open(path)
        app = Recorder(app, store=store)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


@contextmanager
def server(recorded: bool, path: str) -> Iterator[str]:
    """A server process; stopped (gracefully: its requests finish) on exit."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    flag = "--recorded" if recorded else "--plain"
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_asgi", "--serve", flag, str(port), path]
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/langgraph/health", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        run_server(sys.argv[2] == "--recorded", int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--streams", type=int, default=20)
    args = parser.parse_args()
    header(f"ASGI Recorder overhead: {EVENTS}-event responses, with and without the Recorder")
    path = os.path.join(scratch_dir("agui-bench-"), "asgi.db")
    with server(False, path) as plain, server(True, path) as recorded:
        print("| response | without (ms, median) | with Recorder (ms) | ratio |")
        print("|---|---|---|---|")
        compare(plain, recorded, "pydantic", f"count {EVENTS - 4}", args.repeat)
        compare(plain, recorded, "prebuilt", "", args.repeat)
        t0 = time.perf_counter()
        received = asyncio.run(concurrent(recorded, args.streams))
        elapsed = time.perf_counter() - t0
    with agui_store.open(path) as store:
        stored = {thread: sum(r.event_count for r in store.runs(thread)) for thread, _ in received}
        complete = sum(
            all(r.status == "finished" for r in store.runs(thread)) for thread, _ in received
        )
    sent = sum(count for _, count in received)
    kept = sum(stored.values())
    print(
        f"\n{args.streams} concurrent streams ({elapsed:.2f} s): clients received {sent:,} "
        f"events, the store holds {kept:,}; {complete} of {args.streams} runs finished; "
        f"every stream's count equal: {all(stored[t] == c for t, c in received)}"
    )


if __name__ == "__main__":
    main()
