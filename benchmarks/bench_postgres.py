"""The store on PostgreSQL against the same store on an SQLite file, measured in one run.

A chain of runs of 50 events each (``_common.conversation``), appended run by run as a live
server would, then: the append time at the end of the chain, ``checkout`` of the leaf (from
its chunked checkpoint on both backends), a full replay of the leaf (the engine's own work,
like for like), ``log`` of the leaf, and one raw
psycopg ``COPY`` of the same event rows into a bare table (the floor an append through the
API is compared with). Last, where a steady append's time goes: the statements it sends
(round trips, which load does not change), and its wall time split into the client's CPU,
the server backend's CPU and waiting.

    python -m benchmarks.bench_postgres [--runs 200] [--dsn postgresql://...]

Without ``--dsn`` a throwaway socket-only cluster is started (``tests/postgres_cluster.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import psycopg

import agui_store
from agui_store import testing
from agui_store.codec import ingest
from benchmarks._common import conversation, header, median_time, throwaway_postgres

EVENTS_PER_RUN = 50
#: The last appends whose median is "append at the end of the chain".
TAIL = 20


def build(target: str, runs: int) -> tuple[agui_store.Store, list[float]]:
    store = agui_store.open(target)
    times = []
    for events in conversation("t", runs, EVENTS_PER_RUN):
        t0 = time.perf_counter()
        store.append(events)
        times.append(time.perf_counter() - t0)
    return store, times


def steady_appends(dsn: str, runs: int, tail: int) -> dict[str, float]:
    """Where a steady append's time goes on PostgreSQL, in figures load does not move much:
    the statements it sends (each a round trip), and, over the last ``tail`` appends of a
    ``runs``-run chain, its wall time, the client's CPU time and the server backend's CPU
    time (read from ``/proc``: the throwaway cluster runs on this machine; NaN elsewhere).
    Wall time beyond the two CPU times is waiting: round trips, scheduling."""
    sent = [0]
    originals = {name: getattr(psycopg.Cursor, name) for name in ("execute", "executemany")}

    def counting(name: str) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            sent[0] += 1
            return originals[name](self, *args, **kwargs)

        return call

    chain = conversation("steady", runs, EVENTS_PER_RUN)
    walls: list[float] = []
    cpus: list[float] = []
    servers: list[float] = []
    statements: list[int] = []
    with agui_store.open(dsn) as store:
        backend = testing.connection(store).info.backend_pid
        for events in chain[: runs - tail]:
            store.append(events)
        for name in originals:
            setattr(psycopg.Cursor, name, counting(name))
        try:
            for events in chain[runs - tail :]:
                sent[0] = 0
                wall, cpu, server = time.perf_counter(), time.process_time(), cpu_of(backend)
                store.append(events)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                servers.append(cpu_of(backend) - server)
                statements.append(sent[0])
        finally:
            for name, original in originals.items():
                setattr(psycopg.Cursor, name, original)
    return {
        "statements": statistics.median(statements),
        "wall": statistics.fmean(walls),
        "client CPU": statistics.fmean(cpus),
        "server CPU": statistics.fmean(servers),
    }


def cpu_of(pid: int) -> float:
    """Seconds of CPU a process of this machine has used (user + system); NaN if unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def full_replay(store: agui_store.Store) -> None:
    testing.replayed_view(store, store.runs("t")[-1].run_id, thread_id="t")


def raw_copy(dsn: str, rows: list[tuple[int, int, str, str]]) -> float:
    """One transaction that COPYs one run's event rows into a bare table (no index, no key)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TEMP TABLE bare(seq bigint, run bigint, type text, payload text)"
        )

        def copy() -> None:
            with conn.transaction(), conn.cursor().copy(
                "COPY bare(seq, run, type, payload) FROM STDIN"
            ) as out:
                for row in rows:
                    out.write_row(row)

        return median_time(copy, repeat=15)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--dsn", help="an existing server's database instead of a throwaway one")
    args = parser.parse_args()
    header(f"postgres: a {args.runs}-run thread of {EVENTS_PER_RUN} events a run, against SQLite")
    dsn = args.dsn or throwaway_postgres()
    with psycopg.connect(dsn) as conn:
        server = conn.execute("SELECT version()").fetchone()
        print(f"psycopg {psycopg.__version__} | {server[0] if server else '?'}")
    with tempfile.TemporaryDirectory() as tmp:
        figures = {}
        for name, target in (("sqlite", os.path.join(tmp, "s.db")), ("postgres", dsn)):
            store, times = build(target, args.runs)
            leaf = store.runs("t")[-1].run_id
            figures[name] = {
                "append (first 20)": statistics.median(times[:TAIL]),
                f"append (last {TAIL})": statistics.median(times[-TAIL:]),
                "checkout leaf": median_time(
                    lambda s=store, r=leaf: s.checkout(r, thread_id="t")
                ),
                "full replay leaf": median_time(lambda s=store: full_replay(s)),
                "log leaf": median_time(lambda s=store, r=leaf: s.log(r, thread_id="t")),
            }
            store.close()
        rows = [
            (i, 1, e["type"], ingest.encode(e).decode())
            for i, e in enumerate(conversation("t", 1, EVENTS_PER_RUN)[0], start=1)
        ]
        copy_time = raw_copy(dsn, rows)
    print()
    print(f"{'':24} {'SQLite':>10} {'PostgreSQL':>11} {'PG/SQLite':>10}")
    for key in figures["sqlite"]:
        s, p = figures["sqlite"][key], figures["postgres"][key]
        print(f"{key:24} {s * 1e3:8.2f}ms {p * 1e3:9.2f}ms {p / s:9.1f}x")
    last = figures["postgres"][f"append (last {TAIL})"]
    print(
        f"\nraw psycopg COPY of one run's {EVENTS_PER_RUN} rows: {copy_time * 1e3:.2f}ms; "
        f"an append through the API runs at {copy_time / last:.0%} of it"
    )
    steady = steady_appends(dsn, args.runs, TAIL * 5)
    print(
        f"a steady PostgreSQL append (mean of the last {TAIL * 5} of {args.runs} in a new "
        f"thread): {steady['statements']:.0f} statements (round trips); wall "
        f"{steady['wall'] * 1e3:.2f}ms = client CPU {steady['client CPU'] * 1e3:.2f}ms + "
        f"server backend CPU {steady['server CPU'] * 1e3:.2f}ms + waiting "
        f"{(steady['wall'] - steady['client CPU'] - steady['server CPU']) * 1e3:.2f}ms "
        f"(CPU clock ticks of {1e3 / os.sysconf('SC_CLK_TCK'):.0f}ms, averaged)"
    )


if __name__ == "__main__":
    main()
