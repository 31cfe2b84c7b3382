"""A reconnecting reader's tail: ``events(run, after=cursor)`` against a raw read of the same rows.

A live run streamed one event per ``append`` (as a recorder writes it: one batch per event),
then read after cursors at its end, its middle and its start. ``events`` verifies what it
returns against the run's batch hashes (a cursor inside a batch reads that batch whole). The
baseline, in the same run, is raw apsw: a ``SELECT`` of the same payloads after the same
cursor and ``msgspec`` decoding of them, unverified. The ratio stays about the same across
run lengths when the read costs what it returns, not the run.

    python -m benchmarks.bench_events_after [--sizes 1000,10000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import msgspec

import agui_store
from agui_store import testing
from benchmarks._common import header, median_time, scratch_dir

RAW = "SELECT payload FROM event_log WHERE run = (SELECT id FROM runs WHERE run_id = ?) AND seq > ?"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    header("events(after=) of a live run, one batch per event, vs a raw read of the same rows")
    tmp = scratch_dir("agui-bench-after-")
    decode = msgspec.json.Decoder().decode
    print("| batches in the run | read after | events returned | events() ms | raw ms | ratio |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        with agui_store.open(os.path.join(tmp, f"{n}.db")) as store:
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
                ]
            )
            for _ in range(n):
                last = store.append(
                    [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "word "}],
                    thread_id="t",
                ).last_seq
            conn = testing.connection(store)
            for label, after in (("the last", last - 1), ("the middle", last // 2), ("0", 0)):
                returned = len(store.events("r", thread_id="t", after=after))

                def api(after: int = after) -> None:
                    store.events("r", thread_id="t", after=after)

                def raw(after: int = after, conn: Any = conn) -> None:
                    [decode(p) for (p,) in conn.execute(RAW, ("r", after))]

                took_api = median_time(api, repeat=args.repeat)
                took_raw = median_time(raw, repeat=args.repeat)
                print(
                    f"| {n + 2:,} | {label} | {returned:,} | {took_api * 1e3:.2f} "
                    f"| {took_raw * 1e3:.2f} | {took_api / took_raw:.1f}x |"
                )


if __name__ == "__main__":
    main()
