"""diff: two runs 10 apart at the tip of a long chain, next to a checkout of the tip.

A chain of ``--runs`` runs of 20 events (``_common.conversation``) is appended run by run;
then ``diff(tip~10, tip)`` and ``checkout(tip)`` are timed cold (``testing.forget`` before
each call: no view left in memory), medians of ``--repeat``. A diff reads the two runs'
checkpoints past the chunks they share, the runs between them and their merge base; the
checkout of the tip (one whole view) is the baseline it is compared with.

    python -m benchmarks.bench_diff [--runs 10000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import agui_store
from agui_store import testing
from benchmarks._common import conversation, header

#: Issue 10's goal for a diff of two runs 10 apart at the tip of a 10,000-run chain.
GOAL_MS = 5.0


def cold(store: agui_store.Store, call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        testing.forget(store)
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    header(f"diff: two runs 10 apart at the tip of a {args.runs:,}-run chain")
    path = os.path.join(tempfile.mkdtemp(prefix="agui-bench-diff-"), "s.db")
    with agui_store.open(path) as store:
        for batch in conversation("t", args.runs, 20):
            store.append(batch)
        page = store.log("HEAD", thread_id="t", limit=11)
        older, tip = page[10].run_id, page[0].run_id
        diff = cold(store, lambda: store.diff(older, tip, thread_id="t"), args.repeat)
        checkout = cold(store, lambda: store.checkout(tip, thread_id="t"), args.repeat)
    print("| measure | ms | ratio to checkout of the tip |")
    print("|---|---|---|")
    print(f"| checkout(tip), cold | {checkout * 1e3:.2f} | 1.00 |")
    print(f"| diff(tip~10, tip), cold | {diff * 1e3:.2f} | {diff / checkout:.2f} |")
    verdict = "met" if diff * 1e3 <= GOAL_MS else "NOT met"
    print(f"goal (issue 10): diff <= {GOAL_MS:g} ms at the tip: {diff * 1e3:.2f} ms -> {verdict}")


if __name__ == "__main__":
    main()
