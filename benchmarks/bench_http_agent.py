"""HttpAgent appends: every run recorded with the request body the official client posts.

``HttpAgent`` sends the whole conversation (and the state) with every run, so a recorder's
``append(events, input=body)`` reads a request that grows with the thread. The same-run
baseline is what any server does with that request anyway: decoding the body. The figure is
the append's time as a multiple of that decode, over the last runs of the thread.

    python -m benchmarks.bench_http_agent [--runs 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import msgspec

import agui_store
from benchmarks._common import conversation, header, scratch_dir
from benchmarks.bench_file_size import http_agent_input

EVENTS_PER_RUN = 50


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--last", type=int, default=50, help="runs measured at the end")
    args = parser.parse_args()
    header(f"HttpAgent appends: {args.runs} runs, each with the client's whole history")
    path = os.path.join(scratch_dir("agui-bench-"), "http-agent.db")
    appends: list[float] = []
    decodes: list[float] = []
    with agui_store.open(path) as store:
        history: list[dict[str, Any]] = []
        for i, events in enumerate(conversation("t", args.runs, EVENTS_PER_RUN)):
            body = msgspec.json.encode(http_agent_input(i, history))
            t0 = time.perf_counter()
            msgspec.json.decode(body)
            t1 = time.perf_counter()
            store.append(events, input=body)
            t2 = time.perf_counter()
            decodes.append(t1 - t0)
            appends.append(t2 - t1)
            # What the client holds after the run: the view, which it sends next time.
            history = store.checkout(f"run-{i}").messages
    last_append = statistics.median(appends[-args.last :])
    last_decode = statistics.median(decodes[-args.last :])
    print(
        f"the last {args.last} runs: {len(history):,} messages, "
        f"request body {len(body) / 1e6:.2f} MB"
    )
    print("| measure | ms (median) | ratio |")
    print("|---|---|---|")
    print(f"| decoding the request body (baseline) | {last_decode * 1e3:.2f} | 1.00 |")
    print(
        f"| Store.append(events, input=body) | {last_append * 1e3:.2f} "
        f"| {last_append / last_decode:.1f}x |"
    )


if __name__ == "__main__":
    main()
