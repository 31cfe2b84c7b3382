"""PostgreSQL schema version 3's event pages: the one-off migration of a version 2 store and the
``pages`` storage check of ``check()``, each against a raw read or write of the same rows in
the same run.

A version 2 store (a row per event) is filled with a chain of ``--runs`` runs of 50 events
(``_common.conversation``, one batch a run) by COPY, as a store that size would hold them. Then:

- the migration to version 3 (``schema.install``: every event moved into pages, the old table
  dropped, the view and its triggers created), against COPY of the same rows into a bare table
  (the floor of writing them at all);
- the ``pages`` check (``checks.problems(conn, "pages")`` read to its end), against a raw read of
  the whole log through the ``events`` view (what the store's own log pass reads);
- the bytes of ``events`` before and of ``event_pages`` after (heap, TOAST and indexes).

    python -m benchmarks.bench_postgres_pages [--runs 2000] [--dsn postgresql://...]

Without ``--dsn`` a throwaway socket-only cluster is started (``tests/postgres_cluster.py``).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg

from agui_store.backends.postgres import checks, schema
from agui_store.codec import ingest
from benchmarks._common import conversation, header, median_time, throwaway_postgres

EVENTS_PER_RUN = 50
OPTIONS = f"-c search_path={schema.SCHEMA}"


def fill_version_2(conn: Any, runs: int) -> list[tuple[int, int, str, str]]:
    """A version 2 store of ``runs`` runs (one thread, a chain, one batch a run); its event rows."""
    conn.execute(f"DROP SCHEMA IF EXISTS {schema.SCHEMA} CASCADE")
    conn.execute(f"CREATE SCHEMA {schema.SCHEMA}")
    for version in (1, 2):
        conn.execute(schema.MIGRATIONS[version])
    conn.execute(schema.WRITE_VERSION, {"application": schema.APPLICATION, "version": "2"})
    conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)")
    rows: list[tuple[int, int, str, str]] = []
    with conn.cursor().copy(
        "COPY runs(id, thread, run_id, parent, lineage, created_at) FROM STDIN"
    ) as out:
        for run, events in enumerate(conversation("t", runs, EVENTS_PER_RUN), start=1):
            out.write_row((run, 1, f"r{run}", run - 1 if run > 1 else None, "head", 0))
            for event in events:
                rows.append((len(rows) + 1, run, event["type"], ingest.encode(event).decode()))
    with conn.cursor().copy("COPY events(seq, run, type, payload) FROM STDIN") as out:
        for row in rows:
            out.write_row(row)
    with conn.cursor().copy(
        "COPY batches(run, first_seq, last_seq, count, appended_at) FROM STDIN"
    ) as out:
        for run in range(1, runs + 1):
            first = (run - 1) * EVENTS_PER_RUN + 1
            out.write_row((run, first, first + EVENTS_PER_RUN - 1, EVENTS_PER_RUN, 0))
    conn.execute("ANALYZE")
    return rows


def size_mb(conn: Any, table: str) -> float:
    (size,) = conn.execute(
        "SELECT pg_total_relation_size(%s::regclass)", (f"{schema.SCHEMA}.{table}",)
    ).fetchone()
    return int(size) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dsn", help="an existing server's database instead of a throwaway one")
    args = parser.parse_args()
    header(f"postgres_pages: a {args.runs}-run store of {EVENTS_PER_RUN} events a run, v2 -> v3")
    dsn = args.dsn or throwaway_postgres()
    with psycopg.connect(dsn, autocommit=True, options=OPTIONS) as conn:
        server = conn.execute("SELECT version()").fetchone()
        print(f"psycopg {psycopg.__version__} | {server[0] if server else '?'}")
        migrations, copies, before, after = [], [], 0.0, 0.0
        for _ in range(args.repeat):
            rows = fill_version_2(conn, args.runs)
            conn.execute("CHECKPOINT")
            before = size_mb(conn, "events")
            t0 = time.perf_counter()
            found = schema.install(conn)
            migrations.append(time.perf_counter() - t0)
            assert found == 2, found
            conn.execute("VACUUM ANALYZE")
            conn.execute("CHECKPOINT")
            after = size_mb(conn, "event_pages")
            conn.execute(
                "CREATE TABLE bare(seq bigint, run bigint, type text, payload text)"
            )
            t0 = time.perf_counter()
            with conn.transaction(), conn.cursor().copy(
                "COPY bare(seq, run, type, payload) FROM STDIN"
            ) as out:
                for row in rows:
                    out.write_row(row)
            copies.append(time.perf_counter() - t0)
            conn.execute("DROP TABLE bare")

        def page_check() -> None:
            with conn.transaction():
                assert list(checks.problems(conn, "pages")) == []

        def raw_log() -> None:
            with conn.transaction():
                conn.execute("SELECT seq, run, type, payload FROM events").fetchall()

        check_time = median_time(page_check, repeat=args.repeat * 2)
        raw_time = median_time(raw_log, repeat=args.repeat * 2)
    events = args.runs * EVENTS_PER_RUN
    migration, copy = min(migrations), min(copies)
    print(f"\n{events:,} events, best of {args.repeat}")
    print(
        f"migration v2 -> v3        {migration * 1e3:9.1f} ms   raw COPY of the rows "
        f"{copy * 1e3:8.1f} ms   {migration / copy:5.1f}x COPY"
    )
    print(
        f"pages check               {check_time * 1e3:9.1f} ms   raw read of the log "
        f"{raw_time * 1e3:9.1f} ms   {check_time / raw_time:5.2f}x the read"
    )
    print(
        f"events {before:.2f} MB (a row each) -> event_pages {after:.2f} MB "
        f"({before / after:.1f}x smaller)"
    )


if __name__ == "__main__":
    main()
