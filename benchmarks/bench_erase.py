"""Erasure: deleting one 100-run thread from a small store and from a store ten times larger.

An erasure's transaction should cost what it erases, not the store's size; its purge, on
SQLite, rewrites the file (``VACUUM``) and so grows with it. Each backend gets two
stores of other threads (``--threads`` runs each): ``--small`` other runs (the baseline) and
``--large`` other runs. Into each, a thread of ``--runs`` runs (``--events`` events each,
checkpoints written as ``append`` writes them) is appended untimed, then erased with
``Store.delete_thread``, timed: the transaction (selection, counts, derived data and the
blobs no kept checkpoint shares, the log, the erasure log, the tombstone) and the purge
(SQLite: the search index and the file written again, the WAL copied into the file and
truncated; PostgreSQL: ``VACUUM`` of the touched tables). On PostgreSQL,
``purge(rewrite=True)`` of each store is timed last (three times, median): the rewrite an
erasure that must be provable asks for. Each PostgreSQL store is
vacuumed and analysed once built (untimed). Median of ``--repeat`` erasures per store,
taken in turns (one in each store, then the next round) so that the machine's load falls on
both sizes alike; the figure that matters is the ratio of the large store's to the small
store's, measured in the same run.

    python -m benchmarks.bench_erase [--small 1000] [--large 10000] [--runs 100]
                                     [--events 10] [--threads 10] [--repeat 9]
                                     [--postgres [--dsn postgresql://...]]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path

import agui_store
from agui_store import testing
from benchmarks._common import conversation, header, scratch_dir, throwaway_postgres

#: The ratio an erasure's transaction must hold: the large store's within 1.5x of the small
#: one's.
TARGET = 1.5


def fill(location: str, others: int, per_thread: int, events: int) -> None:
    """``others`` runs in threads of ``per_thread`` runs; on PostgreSQL then vacuumed and
    analysed (untimed), as autovacuum leaves a store in use, so that its catching up with
    the bulk load does not run beside the timed erasures."""
    with agui_store.open(location) as store:
        for t in range(others // per_thread):
            for run in conversation(f"other-{t}", per_thread, events):
                store.append(run, thread_id=f"other-{t}")
        if not location.endswith(".db"):
            testing.connection(store).execute("VACUUM (ANALYZE)")


def erase_once(
    store: agui_store.Store, thread: str, runs: int, events: int
) -> tuple[float, float, float]:
    """Append a ``runs``-run thread (untimed) and time its erasure: ``(wall, CPU, wall up to
    the commit)``, the last without the purge (``testing.on_erasure_step``)."""
    for run in conversation(thread, runs, events):
        store.append(run, thread_id=thread)
    committed: list[float] = []

    def step(name: str) -> None:
        if name == "committed":
            committed.append(time.perf_counter())

    with testing.on_erasure_step(step):
        t0, c0 = time.perf_counter(), time.process_time()
        receipt = store.delete_thread(thread)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert receipt.runs == runs and receipt.purged, receipt
    return elapsed, cpu, committed[0] - t0


def measure(name: str, locations: dict[int, str], args: argparse.Namespace) -> list[str]:
    """Build every store, then erase in turns (one erasure in each store, then the next
    round), so that a change in the machine's load falls on every size alike. On SQLite also
    the process's CPU time, which other work on the machine does not move: the wall clock
    of an erasure includes its waits for the disk (commit, WAL checkpoint)."""
    built = {}
    for others, location in locations.items():
        t0 = time.perf_counter()
        fill(location, others, args.threads, args.events)
        built[others] = time.perf_counter() - t0
    times: dict[int, list[tuple[float, float, float]]] = {others: [] for others in locations}
    with contextlib.ExitStack() as stack:
        stores = {n: stack.enter_context(agui_store.open(loc)) for n, loc in locations.items()}
        for n in range(args.repeat):
            for others, store in stores.items():
                times[others].append(erase_once(store, f"target-{n}", args.runs, args.events))
        for store in stores.values():
            assert store.check().ok
        rewrites = {}
        if name != "SQLite":  # SQLite's purge always rewrites: it is timed above
            for others, store in stores.items():
                timed = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    assert store.purge(rewrite=True)
                    timed.append(time.perf_counter() - t0)
                rewrites[others] = statistics.median(timed)
    wall = {others: statistics.median(t[0] for t in ts) for others, ts in times.items()}
    cpu = {others: statistics.median(t[1] for t in ts) for others, ts in times.items()}
    until_commit = {others: statistics.median(t[2] for t in ts) for others, ts in times.items()}
    # A PostgreSQL erasure's work is mostly the server's: this process's CPU time says nothing.
    in_process = name == "SQLite"
    for others in locations:
        print(f"{name}: {others:,} other runs (built in {built[others]:.1f} s): median "
              f"{wall[others] * 1000:.1f} ms"
              + (f", CPU {cpu[others] * 1000:.1f} ms" if in_process else "")
              + f", of {len(times[others])}; its transaction (up to the commit) "
              f"{until_commit[others] * 1000:.1f} ms", flush=True)
    rows = [
        f"| {name} | {others:,} | {wall[others] * 1000:.1f} | {wall[others] / wall[args.small]:.2f}"
        + (f" | {cpu[others] * 1000:.1f} | {cpu[others] / cpu[args.small]:.2f} |"
           if in_process else " | | |")
        for others in locations
    ]
    for others, seconds in rewrites.items():
        print(f"{name}: purge(rewrite=True) of the store of {others:,} other runs: median "
              f"{seconds * 1000:.1f} ms of 3 (VACUUM FULL of the tables erasures delete from)",
              flush=True)
    ratio = until_commit[args.large] / until_commit[args.small]
    verdict = "within" if ratio <= TARGET else "NOT within"
    print(f"{name}: the transaction's ratio {ratio:.2f} ({verdict} {TARGET}x)", flush=True)
    for label, medians in (("wall clock", wall), ("CPU", cpu))[: 2 if in_process else 1]:
        ratio = medians[args.large] / medians[args.small]
        # On SQLite the purge rewrites the file (VACUUM): the whole grows with the store.
        print(f"{name}: with the purge, {label} ratio {ratio:.2f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--threads", type=int, default=10, help="runs per other thread")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--dsn", help="with --postgres: a server to make the databases on")
    args = parser.parse_args()
    header(
        f"erase: a {args.runs}-run thread ({args.events} events a run) deleted from stores "
        f"of {args.small:,} and {args.large:,} other runs"
    )
    rows = [
        "| backend | other runs | delete_thread, ms (median) | against the small store "
        "| CPU, ms (median, SQLite) | against the small store |",
        "|---|---|---|---|---|---|",
    ]
    tmp = Path(scratch_dir("agui-bench-erase-"))
    rows += measure(
        "SQLite", {n: str(tmp / f"store-{n}.db") for n in (args.small, args.large)}, args
    )
    if args.postgres:
        from tests.postgres_cluster import PostgresServer

        server = PostgresServer(dsn=args.dsn or throwaway_postgres())
        locations = {n: server.create_database() for n in (args.small, args.large)}
        rows += measure("PostgreSQL", locations, args)
    print()
    print("\n".join(rows))


if __name__ == "__main__":
    main()
