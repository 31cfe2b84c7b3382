"""log: one page of a long lineage (``limit=20``) against the whole log, in the same run.

A chain of 10,000 runs (by default) of one thread, each a short conversation turn. A page
walks only its own runs (a recursive CTE with LIMIT, one primary-key probe per run), so it
should cost the same at the tip and deep in the chain, and a small, fixed share of the whole
log. Goal: ``log(limit=20)`` at the tip of a 10,000-run chain in <= 1 ms.
``get_run`` (one run's record, the same ref resolved) is the floor a read call costs; the tip
is named both as ``HEAD`` and by its run id, since resolving a ref is part of the figure.

    python -m benchmarks.bench_log [--runs 10000] [--limit 20] [--repeat 25]
"""

from __future__ import annotations

import argparse
import os
import time

import agui_store
from benchmarks._common import header, median_time, scratch_dir


def turn(thread: str, i: int) -> list[dict[str, object]]:
    run_id = f"run-{i}"
    mid = f"a-{i}"
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"answer {i}"},
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id},
    ]


def build(path: str, n_runs: int) -> float:
    """The chain, appended in batches of 500 runs (lineage rule 4: each run's parent is the
    thread's head). Views are not derived: a log reads run metadata only."""
    t0 = time.perf_counter()
    with agui_store.open(path, derive_on_append=False) as store:
        for start in range(0, n_runs, 500):
            batch = [e for i in range(start, min(start + 500, n_runs)) for e in turn("t", i)]
            store.append(batch)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()
    header(f"log: a page of {args.limit} runs against the whole log of a {args.runs:,}-run chain")
    path = os.path.join(scratch_dir("agui-bench-"), "log.db")
    built = build(path, args.runs)
    print(f"built the chain in {built:.1f} s")
    print()
    print("| measure | ms | whole log / this |")
    print("|---|---|---|")
    with agui_store.open(path) as store:
        tip = store.log("HEAD", thread_id="t", limit=args.limit)
        assert len(tip) == args.limit and tip.next_cursor == f"run-{args.runs - 1 - args.limit}"
        whole_log = store.log("HEAD", thread_id="t")
        assert len(whole_log) == args.runs
        middle = f"run-{args.runs // 2}"
        whole = median_time(
            lambda: store.log("HEAD", thread_id="t"), repeat=max(args.repeat // 5, 3)
        )
        newest = f"run-{args.runs - 1}"
        rows = [
            (f"log(HEAD, limit={args.limit}): the tip",
             lambda: store.log("HEAD", thread_id="t", limit=args.limit)),
            (f"log(run id, limit={args.limit}): the tip named by its id",
             lambda: store.log(newest, thread_id="t", limit=args.limit)),
            (f"log(limit={args.limit}, cursor=) halfway down",
             lambda: store.log("HEAD", thread_id="t", limit=args.limit, cursor=middle)),
            ("get_run(HEAD): one run's record", lambda: store.get_run("HEAD", thread_id="t")),
            ("get_run(run id): one run's record", lambda: store.get_run(newest, thread_id="t")),
        ]
        print(f"| whole log ({args.runs:,} runs) | {whole * 1e3:.2f} | 1.0 |")
        for name, call in rows:
            took = median_time(call, repeat=args.repeat)
            print(f"| {name} | {took * 1e3:.3f} | {whole / took:.0f} |")


if __name__ == "__main__":
    main()
