"""A live run streaming JSON Patch copies: does each append cost what it adds?

A ``copy`` (or ``move``) is measured against the state it copies from before it is recorded
(how deep it nests, how much it clones), so a ``STATE_DELTA`` naming one makes the append
find the run's state so far. A live run streamed one ``STATE_DELTA`` per ``append``, each
copying a small value, next to the same run whose deltas ``add`` that value instead (no
state needed), in the same run. The store keeps the state its last copy check reached and
feeds it what came since; replaying the run's view at each copy made the append grow with
the run (2,000 appends: 38.5 s against 0.64 s).

    python -m benchmarks.bench_live_copies [--sizes 500,2000]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import agui_store
from benchmarks._common import header, scratch_dir


def delta(op: str, i: int) -> dict[str, Any]:
    if op == "copy":
        return {"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "/a", "path": f"/k{i}"}]}
    return {"type": "STATE_DELTA", "delta": [{"op": "add", "path": f"/k{i}", "value": {"x": 1}}]}


def stream(path: str, op: str, n: int) -> tuple[float, float]:
    """Total seconds, and the mean seconds of the last 100 appends."""
    with agui_store.open(path) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                {"type": "STATE_SNAPSHOT", "snapshot": {"a": {"x": 1}}},
            ]
        )
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            store.append([delta(op, i)], thread_id="t")
            times.append(time.perf_counter() - t0)
    tail = times[-100:]
    return sum(times), sum(tail) / len(tail)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="500,2000")
    args = parser.parse_args()
    header("a live run of STATE_DELTA appends: copies vs adds of the same value")
    tmp = scratch_dir("agui-bench-copies-")
    print(
        "| appends | adds: total s | copies: total s | copies / adds | copies: last 100, ms each |"
    )
    print("|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        adds, _ = stream(os.path.join(tmp, f"add-{n}.db"), "add", n)
        copies, tail = stream(os.path.join(tmp, f"copy-{n}.db"), "copy", n)
        print(f"| {n:,} | {adds:.2f} | {copies:.2f} | {copies / adds:.2f}x | {tail * 1e3:.2f} |")
    print(
        "the copies' ratio stays about the same as the run grows when an append costs what it adds"
    )


if __name__ == "__main__":
    main()
