"""append: the pages a steady append's commit writes, by table and index, next to raw apsw.

A commit writes each page it changed to the WAL once (a frame); every ~1,000 frames a WAL
checkpoint copies them into the file and syncs it, so on a machine with slow syncs each
frame costs about its share of a checkpoint, whatever the load. This counts, for the
appends of ``bench_append``'s conversation after the first quarter, the frames of each
commit by the B-tree (table or index) their page belongs to (``dbstat``), read from the WAL
itself (automatic checkpoints off, for the counted appends only). Counted, not timed.

    python -m benchmarks.bench_append_pages [--runs 200]
"""

from __future__ import annotations

import argparse
import collections
import os
import struct
from typing import Any

import apsw

import agui_store
from agui_store import testing
from benchmarks._common import header, raw_connection, scratch_dir
from benchmarks.bench_append import make_batches, prebuilt_rows, raw_apsw_rows

_FRAME_HEADER = 24
_WAL_HEADER = 32


def frames_by_btree(path: str, conn: apsw.Connection) -> tuple[int, collections.Counter[str]]:
    """Commits in the WAL of ``path``, and its frames by the B-tree their page belongs to."""
    with open(path + "-wal", "rb") as f:
        wal = f.read()
    page_size = struct.unpack(">I", wal[8:12])[0]
    owner = {int(page): str(name) for name, page in conn.execute("SELECT name, pageno FROM dbstat")}
    commits, frames = 0, collections.Counter[str]()
    at = _WAL_HEADER
    while at + _FRAME_HEADER + page_size <= len(wal):
        page, size_after_commit = struct.unpack(">II", wal[at : at + 8])
        frames[owner.get(page, "(a page freed or new since)")] += 1
        commits += size_after_commit != 0
        at += _FRAME_HEADER + page_size
    return commits, frames


def counted(
    path: str, conn: apsw.Connection, write_rest: Any
) -> tuple[int, collections.Counter[str]]:
    """Frames of what ``write_rest`` commits, from an empty WAL on."""
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    write_rest()
    return frames_by_btree(path, conn)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    header("append: WAL frames a commit, by table and index")
    batches = make_batches(args.runs)
    rows = prebuilt_rows(batches)
    warm = args.runs // 4
    tmp = scratch_dir("agui-bench-")
    results: dict[str, tuple[int, collections.Counter[str]]] = {}

    store_path = os.path.join(tmp, "store.db")
    with agui_store.open(store_path) as store:
        for batch in batches[:warm]:
            store.append(batch)
        conn = testing.connection(store)
        results["Store.append"] = counted(
            store_path, conn, lambda: [store.append(batch) for batch in batches[warm:]]
        )
    raw_path = os.path.join(tmp, "raw.db")
    with raw_connection(raw_path) as conn:
        raw_apsw_rows(conn, rows[:warm], 1)
        results["raw"] = counted(raw_path, conn, lambda: raw_apsw_rows(conn, rows[warm:], warm + 1))

    names = sorted(
        {name for _, frames in results.values() for name in frames},
        key=lambda name: -results["Store.append"][1][name],
    )
    print(f"{args.runs - warm} appends of 50 events after {warm}; frames a commit")
    print("| B-tree | Store.append | raw apsw executemany |")
    print("|---|---|---|")
    for name in names:
        cells = [f"{frames[name] / commits:.2f}" for commits, frames in results.values()]
        print(f"| {name} | {' | '.join(cells)} |")
    totals = [f"{sum(frames.values()) / commits:.2f}" for commits, frames in results.values()]
    print(f"| all | {' | '.join(totals)} |")


if __name__ == "__main__":
    main()
