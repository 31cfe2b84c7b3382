"""copy: one thread of 2,000 runs copied from one store file to a new one.

The source is built once: a 2,000-run conversation (``_common.conversation``, 20 events a
run: streamed text, a tool call, state patches); every ``--input-every``-th run also has its
request body recorded as a client sends it (the whole history so far: stored by reference to
the parent's view). Not every run: a body holding the whole history makes building the
source quadratic.

Measured, median of ``--repeat`` runs, each into a new destination file:

- baseline: the source's raw read, apsw alone: every event row of the thread (seq, run,
  type, payload, echo refs) fetched in one query, nothing decoded;
- ``copy``, log only (the destination opened with ``derive_on_append=False``: copied runs
  are left underived, as such a store leaves its own appends);
- ``copy`` with derivation (the default: every copied complete run's lineage digest and
  checkpoints, as ``append`` would have written them);
- ``copy`` again onto the full destination: nothing to copy, both sides compared.

    python -m benchmarks.bench_copy [--runs 2000] [--events 20] [--repeat 3] [--input-every 50]
                                    [--postgres [--dsn postgresql://...]]

``--postgres`` also copies the file into a PostgreSQL database (a push: log and lineage
digests; PostgreSQL keeps no checkpoints yet) and back into a new file (a pull), on a
throwaway socket-only cluster (``tests/postgres_cluster.py``) unless ``--dsn`` names a
server's maintenance database.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import apsw

import agui_store
from benchmarks._common import conversation, header

RAW_READ = """
SELECT events.seq, events.run, events.type, events.payload, echo_refs.refs
FROM events JOIN runs ON runs.id = events.run
LEFT JOIN echo_refs ON echo_refs.seq = events.seq
WHERE runs.thread = (SELECT id FROM threads WHERE thread_id = ?) ORDER BY events.seq
"""


def build_source(path: Path, runs: int, events: int, input_every: int) -> int:
    """The source store; returns its event count."""
    total = 0
    with agui_store.open(path) as store:
        for turn, run in enumerate(conversation("t", runs, events)):
            run_id = run[0]["runId"]
            if turn % input_every:
                store.append(run, thread_id="t")
                total += len(run)
                continue
            parent = store.runs("t")[-1].run_id if turn else None
            messages = list(store.checkout(parent, thread_id="t").messages) if parent else []
            messages.append({"id": f"u-{turn}", "role": "user", "content": f"question {turn}"})
            body = {
                "threadId": "t",
                "runId": run_id,
                "messages": messages,
                "tools": [],
                "context": [],
                "state": {},
                "forwardedProps": {},
            }
            store.append(run, thread_id="t", input=body)
            total += len(run)
    return total


def postgres_figures(
    src: Path, tmp: Path, dsn: str | None, repeat: int, total: int
) -> list[tuple[str, list[float]]]:
    """Push the file into new PostgreSQL databases, again (nothing to copy), and pull one
    back into new files."""
    from tests.postgres_cluster import PostgresCluster, PostgresServer

    cluster = None
    if dsn is None:
        cluster = PostgresCluster.create()
        dsn = cluster.dsn()
    server = PostgresServer(dsn=dsn)
    made: list[str] = []
    push, again, pull = [], [], []
    try:
        for n in range(repeat):
            target = server.create_database()
            made.append(target)
            t0 = time.perf_counter()
            result = agui_store.copy(src, target)
            push.append(time.perf_counter() - t0)
            assert result.events == total
            t0 = time.perf_counter()
            agui_store.copy(src, target)
            again.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            agui_store.copy(target, tmp / f"pulled-{n}.db")
            pull.append(time.perf_counter() - t0)
    finally:
        for target in made:
            server.drop_database(target)
        if cluster is not None:
            cluster.destroy()
    return [
        ("file -> PostgreSQL (+ digests)", push),
        ("file -> PostgreSQL again", again),
        ("PostgreSQL -> file (+ derive)", pull),
    ]


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--input-every", type=int, default=50)
    parser.add_argument("--postgres", action="store_true", help="also file <-> PostgreSQL")
    parser.add_argument("--dsn", help="with --postgres: an existing server instead")
    args = parser.parse_args()
    header(f"copy: one thread of {args.runs} runs x {args.events} events, file to file")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src.db"
        t0 = time.perf_counter()
        total = build_source(src, args.runs, args.events, args.input_every)
        print(f"source built in {time.perf_counter() - t0:.1f} s: {total} events, "
              f"{os.path.getsize(src) / 1e6:.1f} MB")

        raw, logged, derived, again = [], [], [], []
        for n in range(args.repeat):
            conn = apsw.Connection(str(src), flags=apsw.SQLITE_OPEN_READONLY)
            t0 = time.perf_counter()
            rows = conn.execute(RAW_READ, ("t",)).fetchall()
            raw.append(time.perf_counter() - t0)
            assert len(rows) == total
            conn.close()

            dst = Path(tmp) / f"log-{n}.db"
            with agui_store.Store(dst, derive_on_append=False) as target:
                t0 = time.perf_counter()
                result = agui_store.copy(src, target)
                logged.append(time.perf_counter() - t0)
            assert result.events == total

            dst = Path(tmp) / f"derived-{n}.db"
            t0 = time.perf_counter()
            agui_store.copy(src, dst)
            derived.append(time.perf_counter() - t0)

            t0 = time.perf_counter()
            result = agui_store.copy(src, dst)
            again.append(time.perf_counter() - t0)
            assert result.runs == 0 and result.runs_present == args.runs

        rows = [
            ("raw read (apsw, baseline)", raw),
            ("copy, log only", logged),
            ("copy + derive (default)", derived),
            ("copy again (nothing to copy)", again),
        ]
        if args.postgres:
            rows += postgres_figures(src, Path(tmp), args.dsn, args.repeat, total)
        base = median(raw)
        print(f"{'':32} {'seconds':>9} {'events/s':>12} {'vs raw read':>12}")
        for label, times in rows:
            t = median(times)
            print(f"{label:32} {t:9.3f} {total / t:12,.0f} {base / t:12.3f}")


if __name__ == "__main__":
    main()
