"""Eight writer processes on eight threads of one PostgreSQL store: what the one writer lock
costs against per-thread locking.

Issue 11 asks that writers on different threads do not serialize on one lock "unless you
measure that this costs nothing". The store takes one transaction-level advisory lock for
every write (``agui_store/postgres/backend.py``): it makes ``seq`` order commit order, so a
reader polling ``events(after=cursor)`` never skips an event committed late, and it is what
lets a store trust what it remembers between its own appends (``PostgresTransaction.version``).

This benchmark measures the same workload twice per round, interleaved:

- **shipped**: the store as it is;
- **per-thread**: a prototype patched in, in the writer processes only, of the alternative:
  no lock at BEGIN, the event-order lock taken only when the batch's first ``seq`` is read
  and held to commit (as eventsourcing's PostgreSQL recorder locks its table just before it
  inserts), and the store's memory of its own appends never trusted (``version()`` is None:
  with concurrent writers the transaction-id version cannot vouch for it). It is safe for this
  workload only (one writer per thread); it is the upper bound of what per-thread locking can
  win with today's engine.

Each writer appends ``--runs`` runs of 50 events (``bench_langgraph``'s conversation) to a
thread of its own, in a database of its own per round. Printed: the wall time of each round
and the median ratio shipped / per-thread.

    python -m benchmarks.bench_postgres_writers [--runs 60] [--rounds 5] [--writers 8]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import time
from collections.abc import Iterator
from typing import Any

import agui_store
from benchmarks._common import header
from benchmarks.bench_langgraph import conversation, run_events


def per_thread_prototype() -> None:
    """Patch the PostgreSQL backend, in this process, into the per-thread prototype."""
    from agui_store.postgres import backend, sql
    from agui_store.postgres.transaction import PostgresTransaction

    @contextlib.contextmanager
    def writing(self: Any) -> Iterator[PostgresTransaction]:
        conn = self._begin(sql.BEGIN_WRITING)
        try:
            yield PostgresTransaction(conn)
        except BaseException:
            self._end(conn, rollback=True)
            raise
        conn.execute("COMMIT")

    def next_seq(self: Any) -> int:
        self._conn.execute(sql.LOCK_EVENT_ORDER)  # its own statement: a fresh snapshot after
        return int(self._value(sql.NEXT_SEQ))

    backend.PostgresBackend.writing = writing  # type: ignore[method-assign]
    PostgresTransaction.version = lambda self: None  # type: ignore[method-assign]
    PostgresTransaction.next_seq = next_seq  # type: ignore[method-assign]


def writer(dsn: str, number: int, runs: int, prototype: bool, out: Any) -> None:
    if prototype:
        per_thread_prototype()
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


def round_trip(dsn: str, writers: int, runs: int, prototype: bool) -> float:
    """Wall time from the moment every writer is ready to the last one's end."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    processes = [
        ctx.Process(target=writer, args=(dsn, n, runs, prototype, out)) for n in range(writers)
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
        shipped, prototype = [], []
        for n in range(args.rounds):
            for is_prototype, into in ((False, shipped), (True, prototype)):
                dsn = server.create_database()
                agui_store.open(dsn).close()  # the schema, outside the timed part
                wall = round_trip(dsn, args.writers, args.runs, is_prototype)
                into.append(wall)
                name = "per-thread" if is_prototype else "shipped"
                print(f"round {n + 1} {name:>10}: {wall:6.2f} s", flush=True)
                server.drop_database(dsn)
        ratio = statistics.median(s / p for s, p in zip(shipped, prototype))
        print(
            f"median wall: shipped {statistics.median(shipped):.2f} s, per-thread "
            f"{statistics.median(prototype):.2f} s; shipped / per-thread {ratio:.2f}x "
            f"(range {min(s / p for s, p in zip(shipped, prototype)):.2f}-"
            f"{max(s / p for s, p in zip(shipped, prototype)):.2f})"
        )
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
