"""rebuild(): deriving a thread again from its log, against appending the runs that made it.

A thread of ``--runs`` short turns (``bench_short_turns.build``: one user and one assistant
message a run, the client's whole history sent as each run's input, as the ASGI Recorder
stores it) is built in a scratch file, the appends timed; then ``Store.rebuild`` of the
thread is timed ``--repeat`` times (its median). Printed: both times and their ratio, and
that ``check()`` is clean after the last rebuild.

    python -m benchmarks.bench_rebuild [--runs 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import agui_store
from benchmarks._common import header, scratch_dir
from benchmarks.bench_short_turns import THREAD, build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    header("rebuild against the appends that recorded the thread")
    path = os.path.join(scratch_dir("agui-bench-rebuild-"), "thread.db")
    t0 = time.perf_counter()
    build(path, args.runs, seed=1)
    appended = time.perf_counter() - t0
    times = []
    with agui_store.open(path) as store:
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            derived = store.rebuild(THREAD)
            times.append(time.perf_counter() - t0)
            assert derived == args.runs, derived
        clean = store.check().ok
    rebuilt = statistics.median(times)
    print()
    print("| runs | appending them | rebuild (median) | rebuild / appending | check() after |")
    print("|---|---|---|---|---|")
    print(
        f"| {args.runs:,} | {appended:.2f} s | {rebuilt:.2f} s | {rebuilt / appended:.2f}x | "
        f"{'clean' if clean else 'PROBLEMS'} |"
    )


if __name__ == "__main__":
    main()
