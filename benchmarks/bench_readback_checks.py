"""What the read-back guarantees cost an append: the nesting checks on every batch.

``append`` now refuses patches that would nest a state deeper than a snapshot may
(:mod:`agui_store.history.nesting`): ``add``/``replace`` judged from the event, and a scan for the
``copy``/``move`` operations that need the state. This measures those checks on a batch
against what every append already did with it (parse and validate), in the same run, for
a realistic run and for a run of deep-path ``STATE_DELTA`` patches (the checks' worst case:
every value is measured). Printing goes through ``records.printable`` too: its cost on a
transcript with no surrogate (one regex search) is measured against building the transcript.

    python -m benchmarks.bench_readback_checks [--runs 200]
"""

from __future__ import annotations

import argparse
from typing import Any

import agui_store
from agui_store.codec import ingest
from agui_store.history import nesting
from agui_store.protocol import validate
from agui_store.records import Checkout, Run, printable, transcript, when
from benchmarks._common import conversation_run, header, median_time


def deep_patch_run(n: int) -> list[dict[str, Any]]:
    """A run of ``n`` STATE_DELTAs writing small objects four levels down."""
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    events += [
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "add", "path": f"/a/b/c/k{i}", "value": {"x": [1, {"y": i}]}},
                {"op": "replace", "path": "/a/count", "value": i},
            ],
        }
        for i in range(n)
    ]
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return events


def measure(title: str, batch: list[dict[str, Any]], repeat: int) -> None:
    text = "\n".join(ingest.encode(e).decode() for e in batch)

    def parse_and_validate() -> None:
        incoming = ingest.parse_events(text)
        validate.validate_events([ev.data for ev in incoming])

    incoming = ingest.parse_events(text)
    data = [ev.data for ev in incoming]
    raws = [ev.raw for ev in incoming]
    types = validate.validate_events(data)

    def checks() -> None:  # what Store.append adds
        nesting.refuse_deep_writes(data, types, ingest.DEFAULT_MAX_DEPTH, raws)
        nesting.replayed_copies(data, types, raws)

    stores: list[Any] = []

    def append() -> None:
        stores[-1].append(text)

    base = median_time(parse_and_validate, repeat=repeat)
    added = median_time(checks, repeat=repeat)
    fresh = lambda: stores.append(agui_store.open(":memory:"))  # noqa: E731
    whole = median_time(append, repeat=max(repeat // 10, 5), setup=fresh)
    print(
        f"{title}: nesting checks {added * 1e3:.3f} ms = {added / base:.1%} of parse+validate "
        f"({base * 1e3:.3f} ms), {added / whole:.1%} of Store.append ({whole * 1e3:.1f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="repetitions (median)")
    args = parser.parse_args()
    header("read-back checks on append")
    realistic = [e for i in range(20) for e in conversation_run("t", f"r{i}", 50, i)]
    measure("20 runs of 50 realistic events", realistic, args.runs)
    measure("1 run of 1,000 four-level STATE_DELTAs", deep_patch_run(1000), args.runs)

    messages = [{"id": f"m{i}", "role": "user", "content": "hello " * 40} for i in range(2000)]
    run = Run("t", "r", None, "root", "finished", 0, when(0), None)
    co = Checkout(run, messages, {"k": list(range(100))})
    built = median_time(lambda: transcript(co), repeat=max(args.runs // 10, 5))
    shown = transcript(co)
    escaped = median_time(lambda: printable(shown), repeat=max(args.runs // 10, 5))
    print(
        f"transcript of 2,000 messages: built {built * 1e3:.2f} ms, printable() "
        f"{escaped * 1e3:.3f} ms ({escaped / built:.1%} of it)"
    )


if __name__ == "__main__":
    main()
