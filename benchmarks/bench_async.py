"""Event-loop lag while live runs are recorded with ``astore.record``, against the same app
without recording, measured in one run.

The app: an asyncio server that streams agent runs. Each stream's producer yields AG-UI events
with a small pause between them (a model streaming tokens), and its consumer writes each one
as an SSE frame, as a server does. A probe task sleeps 1 ms at a time and notes how late it
wakes: that lateness is the lag every other task on the loop suffers.

* 20 concurrent streams of 200 events: the probe's p99 lag, with recording / without.
* one response carrying one 4 MB ``STATE_SNAPSHOT``: the probe's longest stall, with / without.

Both for events as pydantic ``ag_ui.core`` objects (what pydantic-ai and ag-ui-langgraph yield
in-process) and as JSON bytes (what the ASGI recorder hands over). Goal: every ratio <= 1.5.

    python -m benchmarks.bench_async [--rounds 7] [--streams 20] [--events 200] [--writer thread]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from ag_ui.encoder import EventEncoder

from agui_store import aio, testing
from agui_store.recording import event_json
from benchmarks._common import header, median_time, scratch_dir

PROBE_INTERVAL = 0.001
#: Between two events of one stream: 10 ms is a fast model (100 tokens a second); the stress
#: row streams every 2 ms (20 streams: 10,000 events a second on one loop).
TOKEN_PAUSES = (0.010, 0.002)


def big_state(n_bytes: int) -> dict[str, Any]:
    """A LangGraph-like state: a message history of ``n_bytes`` of JSON."""
    messages: list[dict[str, Any]] = []
    size = 0
    while size < n_bytes:
        i = len(messages)
        message = {
            "id": f"m{i}",
            "role": "assistant" if i % 2 else "user",
            "content": f"word {i} " * 60,
            "meta": {"n": i, "f": i / 3, "ok": True, "tags": ["a", "b"]},
        }
        messages.append(message)
        size += len(msgspec.json.encode(message)) + 1
    return {"messages": messages, "counter": 1}


def stream_events(thread: str, run: str, n: int, snapshot: Any = None) -> list[Any]:
    """One run as pydantic events: text deltas, and the snapshot in the middle if given."""
    mid = f"a-{run}"
    events: list[Any] = [
        RunStartedEvent(thread_id=thread, run_id=run),
        TextMessageStartEvent(message_id=mid, role="assistant"),
    ]
    deltas = [TextMessageContentEvent(message_id=mid, delta=f"tok{i} ") for i in range(n - 4)]
    if snapshot is not None:
        half = len(deltas) // 2
        deltas[half:half] = [StateSnapshotEvent(snapshot=snapshot)]
        deltas.pop()
    events += deltas
    events += [TextMessageEndEvent(message_id=mid), RunFinishedEvent(thread_id=thread, run_id=run)]
    return events


def body(thread: str, run: str) -> bytes:
    return msgspec.json.encode(
        {
            "threadId": thread,
            "runId": run,
            "messages": [{"id": f"u-{run}", "role": "user", "content": "hi"}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    )


class Probe:
    """Sleeps ``PROBE_INTERVAL`` at a time and keeps how late each wake-up was."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._stop = False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stop:
            due = loop.time() + PROBE_INTERVAL
            await asyncio.sleep(PROBE_INTERVAL)
            self.lags.append(max(0.0, loop.time() - due))

    def stop(self) -> None:
        self._stop = True


async def produce(events: list[Any], as_json: bool, pause: float) -> AsyncIterator[Any]:
    """The agent: one event every ``pause``; ``as_json``: already encoded, as an ASGI
    recorder receives them (the app serializes each event before it reaches the wire)."""
    for event in events:
        await asyncio.sleep(pause)
        yield event.model_dump_json(by_alias=True).encode() if as_json else event


async def consume(stream: AsyncIterator[Any], encode: Callable[[Any], bytes]) -> int:
    sent = 0
    async for event in stream:
        sent += len(encode(event))
    return sent


async def one_round(
    astore: aio.AsyncStore | None,
    runs: list[tuple[str, str, list[Any]]],
    encode: Callable[[Any], bytes],
    as_json: bool,
    pause: float,
) -> list[float]:
    probe = Probe()
    probe_task = asyncio.create_task(probe.run())
    await asyncio.sleep(0.02)

    async def serve(thread: str, run: str, events: list[Any]) -> None:
        source = produce(events, as_json, pause)
        if astore is None:
            await consume(source, encode)
        else:
            await consume(astore.record(source, input=body(thread, run)), encode)

    await asyncio.gather(*(serve(t, r, e) for t, r, e in runs))
    if astore is not None:
        # The recording's own tail (its last batches) belongs to what it costs the loop.
        while testing.recording(astore):
            await asyncio.sleep(PROBE_INTERVAL)
    await asyncio.sleep(0.02)
    probe.stop()
    await probe_task
    return probe.lags


def p99(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.99)]


async def scenario(
    name: str,
    make_runs: Callable[[int], list[tuple[str, str, list[Any]]]],
    encode: Callable[[Any], bytes],
    as_json: bool,
    pause: float,
    measure: Callable[[list[float]], float],
    rounds: int,
    directory: str,
    options: dict[str, Any],
) -> tuple[float, float]:
    base: list[float] = []
    recorded: list[float] = []
    async with aio.open(os.path.join(directory, f"{name}.db"), **options) as astore:
        # Warm up: the file, the writer process, imports, caches.
        await one_round(astore, make_runs(-1), encode, as_json, pause)
        for i in range(rounds):
            # Alternated, so that a busy moment of the machine falls on both sides.
            base.append(measure(await one_round(None, make_runs(i), encode, as_json, pause)))
            recorded.append(measure(await one_round(astore, make_runs(i), encode, as_json, pause)))
    return statistics.median(base), statistics.median(recorded)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--snapshot-mb", type=float, default=4.0)
    parser.add_argument(
        "--derive-later",
        action="store_true",
        help="open the store with derive_on_append=False",
    )
    parser.add_argument("--writer", choices=aio.WRITERS, default="process")
    args = parser.parse_args()
    header(
        f"event-loop lag with astore.record vs without: {args.streams} streams of "
        f"{args.events} events; one {args.snapshot_mb:g} MB snapshot"
    )
    options: dict[str, Any] = {"writer": args.writer}
    if args.derive_later:
        options["derive_on_append"] = False
    directory = scratch_dir("agui-bench-")
    snapshot = big_state(int(args.snapshot_mb * 1_000_000))
    sse = EventEncoder()

    def encode_model(event: Any) -> bytes:
        return sse.encode(event).encode("utf-8")

    def encode_bytes(event: Any) -> bytes:
        return b"data: " + event + b"\n\n"

    def as_bytes(runs: list[tuple[str, str, list[Any]]]) -> list[tuple[str, str, list[Any]]]:
        return [
            (t, r, [e.model_dump_json(by_alias=True).encode() for e in es]) for t, r, es in runs
        ]

    def many(i: int) -> list[tuple[str, str, list[Any]]]:
        return [
            (f"t{s}", f"r{i}", stream_events(f"t{s}", f"r{i}", args.events))
            for s in range(args.streams)
        ]

    def big(i: int) -> list[tuple[str, str, list[Any]]]:
        return [("big", f"r{i}", stream_events("big", f"r{i}", args.events, snapshot))]

    print("| scenario | events as | without recording (ms) | with (ms) | ratio | goal |")
    print("|---|---|---|---|---|---|")
    pause_fast, pause_stress = TOKEN_PAUSES
    for label, make, measure, what, pause in (
        (f"{args.streams} streams, an event every 10 ms: p99 lag", many, p99, "p99", pause_fast),
        (f"{args.streams} streams, every 2 ms (stress): p99 lag", many, p99, "p99", pause_stress),
        (f"one {args.snapshot_mb:g} MB event: longest stall", big, max, "max", pause_fast),
    ):
        for form, encode, as_json in (
            ("pydantic", encode_model, False),
            ("JSON bytes", encode_bytes, True),
        ):
            base, rec = asyncio.run(
                scenario(
                    f"{what}-{form.split()[0]}-{pause}",
                    make,
                    encode,
                    as_json,
                    pause,
                    measure,
                    args.rounds,
                    directory,
                    options,
                )
            )
            print(
                f"| {label} | {form} | {base * 1e3:.2f} | {rec * 1e3:.2f} | "
                f"{rec / base:.2f} | <= 1.5 |",
                flush=True,
            )
    conversion_rows(snapshot, args.snapshot_mb)


def conversion_rows(snapshot: dict[str, Any], snapshot_mb: float) -> None:
    """What the recorder spends on the loop per pydantic event: its JSON, against the
    event's own ``model_dump_json`` (what EventEncoder does for the wire)."""
    small = TextMessageContentEvent(message_id="m1", delta="a token ")
    big = StateSnapshotEvent(snapshot=snapshot)
    print()
    print("| pydantic event to JSON | model_dump_json (ms) | event_json (ms) | ratio |")
    print("|---|---|---|---|")
    rows = (("a text delta (x1000)", small, 1000), (f"the {snapshot_mb:g} MB snapshot", big, 1))
    for label, event, n in rows:

        def dump(event: Any = event, n: int = n) -> None:
            for _ in range(n):
                event.model_dump_json(by_alias=True)

        def ours(event: Any = event, n: int = n) -> None:
            for _ in range(n):
                event_json(event)

        base, mine = median_time(dump, repeat=7), median_time(ours, repeat=7)
        print(f"| {label} | {base * 1e3:.2f} | {mine * 1e3:.2f} | {mine / base:.2f} |")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s)")
