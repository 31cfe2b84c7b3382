"""One long streamed message: does an append cost in proportion to its deltas?

A run holding one message streamed as N deltas (``TEXT_MESSAGE_CONTENT``, or
``TEXT_MESSAGE_CHUNK`` through the chunk lanes, or ``TOOL_CALL_ARGS``), appended as one batch,
next to raw apsw ``executemany`` of the same rows in the same run. The append replays the run
into its checkpoint, so a reducer that copied the whole text for every delta made the append
grow with N squared: the ratio to raw then grows with N (80,000 deltas took 3.6 s, 20,000
took 0.35 s). Flat ratios across sizes mean the append stays linear.

The memory an append takes, against the message's own size, is measured too (tracemalloc's
peak, outside the timed runs) for a message of 4 kB deltas, as a tool streams a file it
reads: cut into a string per word all at once, a 40 MB message took 17 times its size.

    python -m benchmarks.bench_long_message [--sizes 10000,40000,160000]
        [--memory-sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import os
import tracemalloc
from typing import Any

import msgspec

import agui_store
from agui_store.backends.sqlite import schema
from benchmarks._common import header, median_time, raw_connection, scratch_dir

DELTA = "word " * 4  # 20 characters, about a token's text
PAGE = "lorem ipsum dolor sit amet " * 148  # about 4 kB: a file a tool reads, a page at a time


def stream(kind: str, n: int, delta: str = DELTA) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    if kind == "text":
        events.append({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
        events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta}] * n
        events.append({"type": "TEXT_MESSAGE_END", "messageId": "m"})
    elif kind == "chunks":
        events += [
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "role": "assistant", "delta": DELTA}
        ] * n
    else:
        events.append({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "write"})
        events += [{"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": DELTA}] * n
        events.append({"type": "TOOL_CALL_END", "toolCallId": "c"})
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return events


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,40000,160000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-sizes", default="1000,10000")
    args = parser.parse_args()
    header("one long streamed message: Store.append vs raw executemany, by size")
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = scratch_dir("agui-bench-long-")
    counter = iter(range(10**6))

    def fresh() -> str:
        return os.path.join(tmp, f"{next(counter)}.db")

    print("| deltas | stream | Store.append ms | raw executemany ms | ratio to raw |")
    print("|---|---|---|---|---|")
    for kind in ("text", "chunks", "tool args"):
        for n in sizes:
            events = stream(kind, n)
            rows = [
                (seq, 1, schema.EVENT_TYPE_CODES[ev["type"]], msgspec.json.encode(ev).decode())
                for seq, ev in enumerate(events, start=1)
            ]

            def raw(rows: list[Any] = rows) -> None:
                with raw_connection(fresh()) as conn:
                    conn.execute(
                        "INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)"
                    )
                    with conn:
                        conn.execute(
                            "INSERT INTO runs(id, thread, run_id, lineage, created_at) "
                            "VALUES (1, 1, 'r', 'root', 0)"
                        )
                        conn.executemany(
                            "INSERT INTO event_log(seq, run, type, payload) VALUES (?, ?, ?, ?)",
                            rows,
                        )

            def api(events: list[dict[str, Any]] = events) -> None:
                with agui_store.open(fresh()) as store:
                    store.append(events)

            took_raw = median_time(raw, repeat=args.repeat)
            took_api = median_time(api, repeat=args.repeat)
            print(
                f"| {n:,} | {kind} | {took_api * 1e3:,.0f} | {took_raw * 1e3:,.0f} "
                f"| {took_api / took_raw:.1f}x |"
            )
    print("linear: each stream's ratio stays about the same as its deltas grow")
    print()
    print("| deltas of 4 kB | message MB | peak allocated by the append MB | ratio to message |")
    print("|---|---|---|---|")
    for n in (int(s) for s in args.memory_sizes.split(",")):
        events = stream("text", n, delta=PAGE)
        size = len(PAGE) * n
        with agui_store.open(fresh()) as store:
            tracemalloc.start()
            try:
                store.append(events)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        print(f"| {n:,} | {size / 1e6:,.1f} | {peak / 1e6:,.0f} | {peak / size:.1f}x |")

if __name__ == "__main__":
    main()
