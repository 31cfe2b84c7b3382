"""check(): time and peak memory on both backends, against reading the log raw.

Two stores are built, one ``--scale`` times the other: ``--shape conversation`` (the
default) is a chain of ``--runs`` runs (``_common.conversation``, 20 events a run), whose
views grow with the log; ``--shape log`` is ``--runs`` runs over 7 threads, each a
RUN_STARTED, 100 CUSTOM events of 1 KB and a RUN_FINISHED, whose views stay empty, so that
the check's memory shows what it keeps of the log itself; with ``--postgres`` each is copied into a
PostgreSQL database (``agui_store.copy``) on a throwaway socket-only cluster
(``tests/postgres_cluster.py``) unless ``--dsn`` names a server's maintenance database.

Measured, each in a fresh child process (so that its peak RSS is the check's own):

- baseline: the raw read of the whole log, ``SELECT seq, run, type, payload FROM events
  ORDER BY seq`` fetched whole by the driver (apsw, psycopg), nothing decoded;
- ``check()``: every check (the storage's, then the store's own: the log pass, the hashes,
  a replay of every run against its checkpoint).

Printed: the check's time as a multiple of the raw read's; the peak of the Python heap
(tracemalloc) during each, and how it grows from the small store to the large one against how
the log grows (the log pass streams: what grows is per-run metadata and the largest view
replayed, not the log).

    python -m benchmarks.bench_check [--runs 500] [--scale 4] [--shape conversation|log]
                                     [--postgres [--dsn ...]]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import agui_store
from benchmarks._common import conversation, header

CHILD = r"""
import json, resource, sys, time, tracemalloc
import agui_store
from agui_store import testing
location, what = sys.argv[1], sys.argv[2]
store = agui_store.open(location)
conn = testing.connection(store)
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.perf_counter()
if what == "raw":
    rows = conn.execute("SELECT seq, run, type, payload FROM events ORDER BY seq").fetchall()
    ok = len(rows) > 0
else:
    ok = store.check().ok
elapsed = time.perf_counter() - t0
traced = tracemalloc.get_traced_memory()[1]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
store.close()
print(json.dumps({"seconds": elapsed, "rss_kb": peak - start, "py_kb": traced / 1024, "ok": ok}))
"""


def measure(location: str, what: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, location, what],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    result: dict[str, float] = json.loads(done.stdout)
    assert result["ok"], f"{what} on {location}: not ok"
    return result


def log_runs(runs: int) -> list[list[dict[str, Any]]]:
    """Runs whose events make no view: CUSTOM events of 1 KB, over 7 threads."""
    out = []
    for i in range(runs):
        thread = f"t{i % 7}"
        out.append(
            [
                {"type": "RUN_STARTED", "threadId": thread, "runId": f"r{i}"},
                *[{"type": "CUSTOM", "name": "n", "value": "x" * 1000} for _ in range(100)],
                {"type": "RUN_FINISHED", "threadId": thread, "runId": f"r{i}"},
            ]
        )
    return out


def build(path: Path, runs: int, shape: str) -> int:
    """The store file; returns the log's payload bytes."""
    made = conversation("t", runs, 20) if shape == "conversation" else log_runs(runs)
    with agui_store.open(path) as store:
        for run in made:
            store.append(run)
    return sum(len(json.dumps(e)) for run in made for e in run)


def figures(name: str, locations: list[tuple[str, int, int]]) -> None:
    rows = []
    for location, runs, log_bytes in locations:
        raw = measure(location, "raw")
        checked = measure(location, "check")
        rows.append((runs, log_bytes, raw, checked))
        print(
            f"{name:<10} {runs:>6} runs  log {log_bytes / 1e6:6.1f} MB  raw read "
            f"{raw['seconds'] * 1000:8.1f} ms  check {checked['seconds'] * 1000:9.1f} ms "
            f"({checked['seconds'] / raw['seconds']:5.1f}x raw)  peak Python heap: check "
            f"{checked['py_kb'] / 1024:6.1f} MB, raw read {raw['py_kb'] / 1024:6.1f} MB"
        )
    (_, small_log, small_raw, small), (_, large_log, large_raw, large) = rows
    print(
        f"{name:<10} log x{large_log / small_log:.1f}: check time x"
        f"{large['seconds'] / small['seconds']:.1f}, check peak Python heap x"
        f"{large['py_kb'] / small['py_kb']:.1f} (raw read "
        f"x{large_raw['py_kb'] / small_raw['py_kb']:.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--scale", type=int, default=4)
    parser.add_argument("--shape", choices=["conversation", "log"], default="conversation")
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--dsn", help="with --postgres: an existing server instead")
    args = parser.parse_args()
    header(f"check(): time and peak memory against the raw read of the log ({args.shape})")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for runs in (args.runs, args.runs * args.scale):
            path = Path(tmp) / f"store-{runs}.db"
            files.append((str(path), runs, build(path, runs, args.shape)))
        figures("sqlite", files)
        if args.postgres:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.postgres_cluster import PostgresCluster, PostgresServer

            cluster = None
            dsn = args.dsn
            if dsn is None:
                cluster = PostgresCluster.create()
                dsn = cluster.dsn()
            server = PostgresServer(dsn=dsn)
            try:
                databases = []
                for path, runs, log_bytes in files:
                    target = server.create_database()
                    agui_store.copy(path, target)
                    databases.append((target, runs, log_bytes))
                figures("postgres", databases)
                for target, _, _ in databases:
                    server.drop_database(target)
            finally:
                if cluster is not None:
                    cluster.destroy()


if __name__ == "__main__":
    main()
