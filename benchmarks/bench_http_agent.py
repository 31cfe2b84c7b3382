"""HttpAgent appends: every run recorded with the request body the official client posts.

``HttpAgent`` sends the whole conversation (and the state) with every run, so a recorder's
``append(events, input=body)`` reads a request that grows with the thread. The same-run
baseline is what any server does with that request anyway: decoding the body (with the
cyclic collector paused, as the append runs; the decode with it running is shown too). The
figure is the append's time as a multiple of that decode, over the last runs of the thread.

A store remembers the messages of the last body of a thread and reads the next one without
the messages it repeats (:mod:`agui_store.history.resent_bodies`). ``--compare`` also times, on a
copy of the file made before the last runs, a store that reads every body whole
(``testing.read_bodies_whole``): the same bodies appended to both, the two appends and the
decode timed in turns, run by run, so that the machine's load weighs on all three alike.

    python -m benchmarks.bench_http_agent [--runs 1000] [--compare]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec

import agui_store
from agui_store import testing
from agui_store.engine import gc_pause
from benchmarks._common import conversation, header, scratch_dir
from benchmarks.bench_file_size import http_agent_input

EVENTS_PER_RUN = 50
#: Runs appended to the copy before the timed ones: its first append replays the view.
WARM_RUNS = 5


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--last", type=int, default=50, help="runs measured at the end")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also time a store reading every body whole, in turns with the remembering one",
    )
    args = parser.parse_args()
    header(f"HttpAgent appends: {args.runs} runs, each with the client's whole history")
    scratch = scratch_dir("agui-bench-")
    path = os.path.join(scratch, "http-agent.db")
    timed: dict[str, list[float]] = {
        "decode": [],
        "decode_collecting": [],
        "remembering": [],
        "whole": [],
    }
    copy_from = args.runs - args.last - WARM_RUNS if args.compare else None
    whole: agui_store.Store | None = None
    with agui_store.open(path) as store:
        history: list[dict[str, Any]] = []
        for i, events in enumerate(conversation("t", args.runs, EVENTS_PER_RUN)):
            if i == copy_from:
                whole = _copy_reading_whole(store, path, os.path.join(scratch, "whole.db"))
            body = msgspec.json.encode(http_agent_input(i, history))
            steps: list[tuple[str, Callable[[], Any]]] = [
                ("decode", partial(_decode_paused, body)),
                ("decode_collecting", partial(msgspec.json.decode, body)),
                ("remembering", partial(store.append, events, input=body)),
            ]
            if whole is not None:
                steps.append(("whole", partial(whole.append, events, input=body)))
            for name, step in steps[i % len(steps) :] + steps[: i % len(steps)]:
                t0 = time.perf_counter()
                step()
                timed[name].append(time.perf_counter() - t0)
            # What the client holds after the run: the view, which it sends next time.
            history = store.checkout(f"run-{i}").messages
        if whole is not None:
            whole.close()
        # Two stricter baselines for the same body, shown below the table: the decode alone
        # (freeing what it built not counted), and the body decoded again and again in a row
        # (warm caches and allocator), which no server does with one request.
        unfreed, warm = [], []
        for _ in range(30):
            with gc_pause.paused():
                t0 = time.perf_counter()
                decoded = msgspec.json.decode(body)
                unfreed.append(time.perf_counter() - t0)
                del decoded
        for _ in range(30):
            warm.append(_timed(partial(_decode_paused, body)))
    decode = statistics.median(timed["decode"][-args.last :])
    print(
        f"the last {args.last} runs: {len(history):,} messages, "
        f"request body {len(body) / 1e6:.2f} MB; load average "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print("| measure | ms (median) | ratio |")
    print("|---|---|---|")
    print(f"| decoding the request body (baseline) | {decode * 1e3:.2f} | 1.00 |")
    rows = [
        ("decoding it with the collector running", "decode_collecting"),
        ("Store.append(events, input=body)", "remembering"),
    ]
    if whole is not None:
        rows.append(("the same, reading every body whole", "whole"))
    for label, name in rows:
        ms = statistics.median(timed[name][-args.last :])
        print(f"| {label} | {ms * 1e3:.2f} | {ms / decode:.1f}x |")
    append = statistics.median(timed["remembering"][-args.last :])
    for label, samples in (
        ("the last body decoded, freeing it not counted", unfreed),
        ("the last body decoded 30 times in a row (warm)", warm),
    ):
        ms = statistics.median(samples)
        print(f"stricter baseline: {label}: {ms * 1e3:.2f} ms; the append is {append / ms:.1f}x it")


def _timed(step: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def _decode_paused(body: bytes) -> Any:
    """The body decoded with the cyclic collector paused, as ``append`` runs: a decode that
    triggers collections pays for walking every object the process holds (the store's
    views and remembered bodies, the client's history), which would flatter the ratio."""
    with gc_pause.paused():
        return msgspec.json.decode(body)


def _copy_reading_whole(store: agui_store.Store, path: str, copy: str) -> agui_store.Store:
    """A store on a copy of ``store``'s file as it is now, reading every body whole."""
    testing.connection(store).execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(path, copy)
    whole = agui_store.open(copy)
    testing.read_bodies_whole(whole)
    return whole


if __name__ == "__main__":
    main()
