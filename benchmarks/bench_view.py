"""view representation: a long conversation's file size and cold checkout of its newest run.

The conversation of ``bench_langgraph`` (4 messages and 50 events a run, the user's message
streamed as events, no inputs), appended run by run, at 2,000 and 10,000 runs. For each size:

- cold checkout of the newest run: a new ``Store`` for every measurement (nothing an earlier
  call left in memory), against LangGraph ``SqliteSaver.get_tuple`` on a new connection to a
  file holding that run's checkpoint (the full message list, plain dicts): what a LangGraph
  app reads to restore it. (``get_tuple`` reads the newest checkpoint only, so the file holds
  the last runs' checkpoints, not all of them: ``bench_langgraph`` compares the files.)
- file bytes per run (db + wal folded), and the file against the raw JSON of its events.

Goals: checkout <= 1.0x get_tuple at both sizes; bytes per run at 10,000 runs
<= 1.1x those at 2,000; file <= 2.5x the raw JSON of its events at 10,000 runs.

    pip install langgraph-checkpoint-sqlite   # for the get_tuple baseline only
    python -m benchmarks.bench_view [--runs 2000,10000] [--repeat 11]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import time
from typing import Any

import msgspec

import agui_store
from agui_store.engine import checkpoints
from benchmarks._common import header, scratch_dir
from benchmarks.bench_langgraph import (
    THREAD,
    LangGraphThread,
    conversation,
    fold_wal,
    run_events,
    table_sizes,
)

#: LangGraph checkpoints kept before the newest one (get_tuple reads the newest only).
LG_KEEP = 3


def build(path: str, lg_path: str, n_runs: int, seed: int) -> tuple[int, float]:
    """The conversation in a store (and its last checkpoints in SqliteSaver); returns the raw
    JSON bytes of its events and the seconds the appends took."""
    raw = 0
    spent = 0.0
    turns = conversation(n_runs, seed)
    with agui_store.open(path) as store:
        for turn in turns:
            events = run_events(turn, user_as_events=True)
            raw += sum(len(msgspec.json.encode(e)) for e in events)
            t0 = time.perf_counter()
            store.append(events)
            spent += time.perf_counter() - t0
        lg = LangGraphThread(lg_path)
        for turn in turns[-LG_KEEP - 1 :]:
            lg.put_run(turn["run_id"], store.checkout(turn["run_id"]).messages)
        lg.close()
    fold_wal(path)
    return raw, spent


def cold_reads(
    path: str, run_id: str, lg_path: str, repeat: int
) -> tuple[float, float, list[Any], list[Any]]:
    """Median times of a cold ``checkout`` (a new Store each time) and a cold ``get_tuple``
    (a new connection each time), taken in turns so that a busy machine slows both alike."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    config = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
    ours: list[float] = []
    theirs: list[float] = []
    mine: list[Any] = []
    found_lg: list[Any] = []
    for _ in range(repeat):
        with agui_store.open(path) as store:
            t0 = time.perf_counter()
            mine = store.checkout(run_id).messages
            ours.append(time.perf_counter() - t0)
        del mine[:]  # freed outside the timing, as a caller would
        conn = sqlite3.connect(lg_path, check_same_thread=False)
        saver = SqliteSaver(conn)
        t0 = time.perf_counter()
        found = saver.get_tuple(config)
        theirs.append(time.perf_counter() - t0)
        assert found is not None
        conn.close()
    with agui_store.open(path) as store:
        mine = store.checkout(run_id).messages
    conn = sqlite3.connect(lg_path, check_same_thread=False)
    found = SqliteSaver(conn).get_tuple(config)
    assert found is not None
    found_lg = found.checkpoint["channel_values"]["messages"]
    conn.close()
    return statistics.median(ours), statistics.median(theirs), mine, found_lg


def size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default="2000,10000")
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--seed", type=int, default=20260)
    parser.add_argument("--keep", action="store_true", help="keep the files")
    parser.add_argument(
        "--compress-chunks",
        action="store_true",
        help="keep full chunks zlib-compressed (checkpoints.COMPRESS_CHUNKS): smaller file, "
        "slower checkout",
    )
    args = parser.parse_args()
    checkpoints.COMPRESS_CHUNKS = args.compress_chunks
    header("view representation: file size and cold checkout of the newest run")
    print(f"full chunks compressed: {checkpoints.COMPRESS_CHUNKS}")
    print(
        "| runs | messages | checkout ms (cold) | get_tuple ms (cold) | checkout / get_tuple "
        "| file MB | bytes / run | file / raw events JSON | appends s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    tmp = scratch_dir("agui-bench-view-")
    per_run: dict[int, float] = {}
    ratios: dict[int, tuple[float, float]] = {}
    try:
        for n in (int(r) for r in args.runs.split(",")):
            path = os.path.join(tmp, f"view-{n}.db")
            lg_path = os.path.join(tmp, f"langgraph-{n}.db")
            raw, spent = build(path, lg_path, n, args.seed)
            leaf = f"run-{n - 1:05d}"
            co, lg, ours, theirs = cold_reads(path, leaf, lg_path, args.repeat)
            assert ours == theirs
            total = size(path)
            per_run[n] = total / n
            ratios[n] = (co / lg, total / raw)
            print(
                f"| {n:,} | {len(ours):,} | {co * 1e3:.2f} | {lg * 1e3:.2f} | {co / lg:.2f}x "
                f"| {total / 1e6:.2f} | {total / n:,.0f} | {total / raw:.2f}x | {spent:.1f} |"
            )
        print()
        for n in per_run:
            rows = table_sizes(os.path.join(tmp, f"view-{n}.db"))
            whole = sum(s for _, s, _, _ in rows)
            shown = ", ".join(
                f"{name} {s / n:,.0f}" for name, s, _, _ in rows if s / whole >= 0.01
            )
            print(f"bytes per run by table at {n:,} runs: {shown}")
        print()
        for n, (co_ratio, _) in ratios.items():
            print(
                f"goal: checkout of the newest run <= 1.0x get_tuple at {n:,} runs: "
                f"{co_ratio:.2f}x -> {'met' if co_ratio <= 1.0 else 'NOT met'}"
            )
        sizes = sorted(per_run)
        if len(sizes) >= 2:
            small, large = sizes[0], sizes[-1]
            growth = per_run[large] / per_run[small]
            print(
                f"goal: file bytes per run at {large:,} runs <= 1.1x those at "
                f"{small:,}: {growth:.2f}x -> {'met' if growth <= 1.1 else 'NOT met'}"
            )
            raw_ratio = ratios[large][1]
            print(
                f"goal: file <= 2.5x the raw JSON of its events at {large:,} runs: "
                f"{raw_ratio:.2f}x -> {'met' if raw_ratio <= 2.5 else 'NOT met'}"
            )
    finally:
        if args.keep:
            print(f"files kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
