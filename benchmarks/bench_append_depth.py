"""Appends as a thread grows: an append deep in a long chain vs the same append early on.

Goal: the median append over the last 100 runs of a 10,000-run chain, against
runs 400-499, with inputs that hold only the new message (a client that sends what is new
and names its parent: ``RunAgentInput`` with ``parentRunId`` and one user message). The runs
are the 50-event conversation of the other benchmarks (streamed text, a tool call, a
growing state).

Two stores are built untimed, one to run 400 and one to the last 100 runs; then the
measured appends go **in turns**, one to each (run 400 + k, then run N - 100 + k): the
machine's load hits both sides alike, which a single build, whose runs 400-499 and last
runs lie a minute apart, does not give on shared cores.

    python -m benchmarks.bench_append_depth [--runs 2000]      # a quick look
    python -m benchmarks.bench_append_depth --runs 10000       # the goal's figure
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import agui_store
from benchmarks._common import conversation, header, scratch_dir
from benchmarks.bench_file_size import user_message

EVENTS_PER_RUN = 50
EARLY = 400  # the first run of the early window (runs 400-499)


def new_message_input(i: int) -> dict[str, Any]:
    """What a client that sends only what is new posts for run i: its parent and the user's
    message."""
    body: dict[str, Any] = {
        "threadId": "t",
        "runId": f"run-{i}",
        "messages": [user_message(i)],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if i:
        body["parentRunId"] = f"run-{i - 1}"
    return body


def append_run(store: agui_store.Store, runs: list[list[dict[str, Any]]], i: int) -> float:
    """Append run i with its input; the seconds the append took."""
    body = new_message_input(i)
    t0 = time.perf_counter()
    store.append(runs[i], input=body)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000, help="the chain's length")
    parser.add_argument("--window", type=int, default=100, help="runs in each window")
    args = parser.parse_args()
    if args.runs < EARLY + 2 * args.window:
        parser.error(f"--runs must be at least {EARLY + 2 * args.window}")
    header(
        f"appends as a thread grows: a {args.runs:,}-run chain, inputs holding only the new "
        "message"
    )
    runs = conversation("t", args.runs, EVENTS_PER_RUN)
    tmp = scratch_dir("agui-bench-depth-")
    late_start = args.runs - args.window
    early_times: list[float] = []
    late_times: list[float] = []
    with (
        agui_store.open(os.path.join(tmp, "early.db")) as early,
        agui_store.open(os.path.join(tmp, "late.db")) as late,
    ):
        t0 = time.perf_counter()
        for i in range(EARLY):
            append_run(early, runs, i)
        for i in range(late_start):
            append_run(late, runs, i)
        built = time.perf_counter() - t0
        for k in range(args.window):
            early_times.append(append_run(early, runs, EARLY + k))
            late_times.append(append_run(late, runs, late_start + k))
        messages = len(late.checkout(f"run-{args.runs - 1}").messages)
    e, la = statistics.median(early_times), statistics.median(late_times)
    print(
        f"built untimed in {built:.0f} s; then {args.window} appends to each, in turns; "
        f"the long chain ends with {messages:,} messages"
    )
    print("| window | median ms | p10-p90 ms | ratio |")
    print("|---|---|---|---|")
    for label, times in (
        (f"runs {EARLY}-{EARLY + args.window - 1}", early_times),
        (f"runs {late_start}-{args.runs - 1}", late_times),
    ):
        deciles = statistics.quantiles(times, n=10)
        median = statistics.median(times)
        print(
            f"| {label} | {median * 1e3:.2f} | {deciles[0] * 1e3:.2f}-{deciles[-1] * 1e3:.2f} "
            f"| {median / e:.2f}x |"
        )
    verdict = "met" if la / e <= 1.3 else "NOT met"
    print(
        f"goal: the last {args.window} runs of a {args.runs:,}-run chain <= 1.3x "
        f"runs {EARLY}-{EARLY + args.window - 1}: {la / e:.2f}x -> {verdict}"
        + ("" if args.runs >= 10_000 else " (the goal is stated at 10,000 runs)")
    )


if __name__ == "__main__":
    main()
