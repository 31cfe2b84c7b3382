"""diff: two runs 10 apart at the tip of a long chain, next to a checkout of the tip.

A chain of ``--runs`` runs of 20 events (``_common.conversation``) is appended run by run;
then ``diff(tip~10, tip)`` and ``checkout(tip)`` are timed cold (``testing.forget`` before
each call: no view left in memory), medians of ``--repeat``. A diff reads the two runs'
checkpoints past the chunks they share, the runs between them and their merge base; the
checkout of the tip (one whole view) is the baseline it is compared with.

    python -m benchmarks.bench_diff [--runs 10000] [--repeat 7] [--postgres [--dsn URL]]

``--postgres`` measures the same on PostgreSQL too (a throwaway socket-only cluster unless
``--dsn`` names a database). The number of statements a diff runs is printed for SQLite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import agui_store
from agui_store import testing
from benchmarks._common import conversation, header, scratch_dir, throwaway_postgres

#: The goal for a diff of two runs 10 apart at the tip of a 10,000-run chain.
GOAL_MS = 5.0


def cold(store: agui_store.Store, call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        testing.forget(store)
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(target: str, runs: int, repeat: int) -> tuple[float, float, int]:
    """``(diff, checkout of the tip, queries of the diff)`` on a fresh store at ``target``."""
    with agui_store.open(target) as store:
        for batch in conversation("t", runs, 20):
            store.append(batch)
        page = store.log("HEAD", thread_id="t", limit=11)
        older, tip = page[10].run_id, page[0].run_id
        diff = cold(store, lambda: store.diff(older, tip, thread_id="t"), repeat)
        checkout = cold(store, lambda: store.checkout(tip, thread_id="t"), repeat)
        queries = count_queries(store, lambda: store.diff(older, tip, thread_id="t"))
    return diff, checkout, queries


def count_queries(store: agui_store.Store, call: Callable[[], object]) -> int:
    """Statements a cold call runs (SQLite only: apsw's trace hook; 0 elsewhere)."""
    connection = testing.connection(store)
    if not hasattr(connection, "exec_trace"):
        return 0
    seen = []

    def trace(cursor: object, statement: str, bindings: object) -> bool:
        seen.append(statement)
        return True

    testing.forget(store)
    connection.exec_trace = trace
    try:
        call()
    finally:
        connection.exec_trace = None
    return len([s for s in seen if not s.startswith(("BEGIN", "COMMIT"))])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also on PostgreSQL (a throwaway cluster, tests/postgres_cluster.py, or --dsn)",
    )
    parser.add_argument("--dsn", help="an existing PostgreSQL database for --postgres")
    args = parser.parse_args()
    header(f"diff: two runs 10 apart at the tip of a {args.runs:,}-run chain")
    targets = [("SQLite", os.path.join(scratch_dir("agui-bench-diff-"), "s.db"))]
    if args.postgres:
        targets.append(("PostgreSQL", args.dsn or throwaway_postgres()))
    figures = [(name, *measure(target, args.runs, args.repeat)) for name, target in targets]
    print("| backend | checkout(tip), cold, ms | diff(tip~10, tip), cold, ms "
          "| diff / checkout | diff's statements |")
    print("|---|---|---|---|---|")
    for name, diff, checkout, queries in figures:
        print(f"| {name} | {checkout * 1e3:.2f} | {diff * 1e3:.2f} | {diff / checkout:.2f} "
              f"| {queries or 'n/a'} |")
    print(f"load average over the last minute: {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} cores): wall times grow with it")
    diff = figures[0][1]
    verdict = "met" if diff * 1e3 <= GOAL_MS else "NOT met"
    print(f"goal: diff <= {GOAL_MS:g} ms at the tip (SQLite): "
          f"{diff * 1e3:.2f} ms -> {verdict}")


if __name__ == "__main__":
    main()
