"""append: events/s through the public API, next to raw apsw executemany of the same rows.

Both sides write the same rows (seq, run, type, payload JSON text) into a fresh WAL file with
the same pragmas, one transaction per batch of one 50-event run; the raw rows are encoded
before the clock starts. The public API also encodes and parses, validates each event
against its 1.0 shape, checks the sequence rules, decides lineage, writes run and batch
rows, replays the run through the reducer for its lineage digest, and writes a checkpoint
after every run (the default ``checkpoint_events=1``; a last row shows 200): the ratio is
what that costs.

    python benchmarks/bench_append.py [--runs 400]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

import msgspec

import agui_store
from agui_store import database
from benchmarks._common import conversation, header, median_time

EVENTS_PER_RUN = 50


def make_batches(n_runs: int) -> list[list[dict]]:
    return conversation("t", n_runs, EVENTS_PER_RUN)


def prebuilt_rows(batches: list[list[dict]]) -> list[list[tuple[int, int, str, str]]]:
    """The rows the store writes, built before timing: the baseline is executemany alone."""
    out, seq = [], 1
    for run_pk, batch in enumerate(batches, start=1):
        rows = []
        for ev in batch:
            rows.append((seq, run_pk, ev["type"], msgspec.json.encode(ev).decode()))
            seq += 1
        out.append(rows)
    return out


def raw_apsw(path: str, all_rows: list[list[tuple[int, int, str, str]]]) -> None:
    conn = database.connect(path)  # same pragmas and schema as the store
    conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)")
    for run_pk, rows in enumerate(all_rows, start=1):
        with database.immediate(conn):
            conn.execute(
                "INSERT INTO runs(id, thread, run_id, lineage, created_at) "
                "VALUES (?, 1, ?, 'root', 0)",
                (run_pk, f"run-{run_pk}"),
            )
            conn.executemany(
                "INSERT INTO events(seq, run, type, payload) VALUES (?, ?, ?, ?)", rows
            )
    conn.close()


def public_api(path: str, batches: list, **options: Any) -> None:
    with agui_store.open(path, **options) as store:
        for batch in batches:
            store.append(batch)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    header("append: public API vs raw apsw executemany")
    batches = make_batches(args.runs)
    n = args.runs * EVENTS_PER_RUN
    tmp = tempfile.mkdtemp(prefix="agui-bench-")
    counter = iter(range(10**6))

    def fresh() -> str:
        return os.path.join(tmp, f"{next(counter)}.db")

    paths: dict[str, str] = {}
    rows = prebuilt_rows(batches)
    raw = median_time(
        lambda: raw_apsw(paths["p"], rows),
        repeat=args.repeat,
        setup=lambda: paths.__setitem__("p", fresh()),
    )
    api = median_time(
        lambda: public_api(paths["p"], batches),
        repeat=args.repeat,
        setup=lambda: paths.__setitem__("p", fresh()),
    )
    print(f"{n} events in {args.runs} batches of {EVENTS_PER_RUN}, median of {args.repeat}")
    print("| path | events/s | ratio to raw |")
    print("|---|---|---|")
    print(f"| raw apsw executemany | {n / raw:,.0f} | 1.00 |")
    print(f"| Store.append (dicts) | {n / api:,.0f} | {raw / api:.2f} |")
    as_json = [msgspec.json.encode(b) for b in batches]
    api_json = median_time(
        lambda: public_api(paths["p"], as_json),
        repeat=args.repeat,
        setup=lambda: paths.__setitem__("p", fresh()),
    )
    print(f"| Store.append (JSON bytes) | {n / api_json:,.0f} | {raw / api_json:.2f} |")
    # The trade-off the option makes: a checkpoint every 200 events of replay instead of
    # after every run (checkout of a run between two checkpoints then replays from one).
    api_sparse = median_time(
        lambda: public_api(paths["p"], batches, checkpoint_events=200),
        repeat=args.repeat,
        setup=lambda: paths.__setitem__("p", fresh()),
    )
    print(
        f"| Store.append (dicts), checkpoint_events=200 | {n / api_sparse:,.0f} "
        f"| {raw / api_sparse:.2f} |"
    )
    print(f"goal: Store.append >= 0.50 of raw -> {'met' if raw / api >= 0.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
