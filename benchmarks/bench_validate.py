"""Validation and parsing: what checking an event costs next to decoding it.

Two hot paths every append and import crosses, each next to ``json.loads`` of the same
events in the same run:
- ``validate.validate_event`` of a small, already-decoded event (the append path's check);
- ``codec.parse_events`` of JSON lines (the import path) and of decoded dicts (``append``).

A ratio under 1 means the step costs less than decoding the event once. Timed assertions in a test
suite fail sound builds on loaded machines, so these figures are measured here instead.

    python -m benchmarks.bench_validate [--events 5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import timeit
from collections.abc import Callable
from typing import Any

from agui_store.codec.ingest import parse_events
from agui_store.protocol import validate
from benchmarks._common import header


def best(fn: Callable[[], Any], repeat: int, number: int = 1) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    header("validation and parsing vs json.loads of the same events")
    n = args.events
    events = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"token {i}"} for i in range(n)
    ]
    lines = [json.dumps(e).encode() for e in events]
    text = b"\n".join(lines)
    small = events[0]
    small_text = lines[0]

    print("| step | ms per batch | baseline: json.loads ms | ratio to baseline |")
    print("|---|---|---|---|")
    rows = [
        (
            f"validate_event x {n:,} (one small event)",
            best(lambda: validate.validate_event(small), args.repeat, number=n),
            best(lambda: json.loads(small_text), args.repeat, number=n),
        ),
        (
            f"parse_events of {n:,} JSON lines",
            best(lambda: parse_events(text), args.repeat),
            best(lambda: [json.loads(line) for line in lines], args.repeat),
        ),
        (
            f"parse_events of {n:,} dicts",
            best(lambda: parse_events(events), args.repeat),
            best(lambda: [json.loads(line) for line in lines], args.repeat),
        ),
    ]
    for step, took, baseline in rows:
        print(f"| {step} | {took * 1e3:.2f} | {baseline * 1e3:.2f} | {took / baseline:.2f}x |")
    print(f"validate_event: {n / rows[0][1]:,.0f} small events/s")


if __name__ == "__main__":
    main()
