"""Eight writer processes on eight threads of one PostgreSQL store: what per-thread locking
wins against the one writer lock it replaced.

Writers on different threads should not serialize on one lock unless measuring shows that it
costs nothing. The store locks per thread (``agui_store/backends/postgres/sql.py``):
an append takes the writers' lock shared and its thread's lock, and the event-order lock only
from its batch's first ``seq`` to commit; what it remembers of its thread is checked under
the thread's lock (``Memory.check_thread_facts``).

This benchmark measures the same workload twice per round, interleaved:

- **shipped**: the store as it is;
- **one lock**: the design it replaced, patched in, in the writer processes only: every
  write takes one global advisory lock at ``BEGIN`` and holds it to commit, and the store
  trusts what it remembers while the server's transaction-id counter says nothing committed
  since its own write (sound only under that one lock), forgetting everything otherwise.

Each writer appends ``--runs`` runs of 50 events (``bench_langgraph``'s conversation) to a
thread of its own, in a database of its own per round. Printed: the wall time of each round
and the median ratio one lock / shipped (above 1: the shipped store is faster).

    python -m benchmarks.bench_postgres_writers [--runs 60] [--rounds 5] [--writers 8]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from typing import Any

import agui_store
from benchmarks._common import header
from benchmarks.bench_langgraph import conversation, run_events


def one_lock_baseline() -> None:
    """Patch the PostgreSQL backend, in this process, back into the one-writer-lock design."""
    from agui_store.backends.postgres import backend, sql
    from agui_store.backends.postgres.transaction import PostgresTransaction

    shipped_writing = backend.PostgresBackend.writing

    def writing(self: Any, thread_id: str | None = None) -> Any:
        return shipped_writing(self, None)  # the exclusive writers' lock, for every write

    def version(self: Any) -> int | None:
        # What the store trusted under the one lock: the first transaction id not completed.
        return int(self._value("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"))

    def next_seq(self: Any) -> int:
        return int(self._value(sql.NEXT_SEQ))  # the one lock already orders the commits

    def run_pk_and_next_seq(self: Any, thread_pk: int, run_id: str) -> tuple[int | None, int]:
        return self.run_pk(thread_pk, run_id), next_seq(self)

    backend.PostgresBackend.writing = writing  # type: ignore[method-assign]
    PostgresTransaction.version = version  # type: ignore[method-assign]
    PostgresTransaction.next_seq = next_seq  # type: ignore[method-assign]
    PostgresTransaction.run_pk_and_next_seq = run_pk_and_next_seq  # type: ignore[method-assign]


def writer(dsn: str, number: int, runs: int, baseline: bool, out: Any) -> None:
    if baseline:
        one_lock_baseline()
    thread = f"writer-{number}"
    batches = []
    for turn in conversation(runs, 1000 + number):
        events = run_events(turn, user_as_events=True)
        for event in events:
            if "threadId" in event:
                event["threadId"] = thread
        batches.append(events)
    with agui_store.open(dsn) as store:
        out.put("ready")
        started = time.perf_counter()
        for events in batches:
            store.append(events, thread_id=thread)
        out.put(time.perf_counter() - started)


def round_trip(dsn: str, writers: int, runs: int, baseline: bool) -> float:
    """Wall time from the moment every writer is ready to the last one's end."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    processes = [
        ctx.Process(target=writer, args=(dsn, n, runs, baseline, out)) for n in range(writers)
    ]
    for p in processes:
        p.start()
    for _ in processes:
        assert out.get() == "ready"
    started = time.perf_counter()
    for _ in processes:
        out.get()
    wall = time.perf_counter() - started
    for p in processes:
        p.join()
        assert p.exitcode == 0, p.exitcode
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60, help="runs each writer appends")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writers", type=int, default=8)
    args = parser.parse_args()
    header(
        f"postgres_writers: {args.writers} writer processes on {args.writers} threads, "
        f"{args.runs} runs of 50 events each"
    )
    from tests.postgres_cluster import PostgresCluster, PostgresServer

    cluster = PostgresCluster.create()
    try:
        server = PostgresServer(dsn=cluster.dsn())
        shipped, baseline = [], []
        for n in range(args.rounds):
            for is_baseline, into in ((True, baseline), (False, shipped)):
                dsn = server.create_database()
                agui_store.open(dsn).close()  # the schema, outside the timed part
                wall = round_trip(dsn, args.writers, args.runs, is_baseline)
                into.append(wall)
                name = "one lock" if is_baseline else "shipped"
                print(f"round {n + 1} {name:>8}: {wall:6.2f} s", flush=True)
                server.drop_database(dsn)
        ratios = [b / s for b, s in zip(baseline, shipped)]
        print(
            f"median wall: one lock {statistics.median(baseline):.2f} s, shipped "
            f"{statistics.median(shipped):.2f} s; one lock / shipped "
            f"{statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f})"
        )
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
