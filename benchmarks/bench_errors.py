"""What translating every error costs: the transaction wrappers, and opening a file.

Every store call now runs its transaction inside ``database.translated`` (errors anywhere in
the body come out as store errors), and ``connect`` reads the file's header before SQLite
opens it. This measures both against baselines in the same run:

- an empty write transaction through ``database.immediate`` vs the same ``BEGIN IMMEDIATE``
  / ``COMMIT`` issued directly (and vs the wrapper as it was before, which translated only
  the BEGIN and the COMMIT);
- an empty read transaction through ``database.snapshot`` vs ``BEGIN`` / ``COMMIT`` directly;
- ``Store.append`` of one event (a live run streamed one event per call) — the figure the
  wrapper could move — with the before-wrapper swapped in for comparison;
- ``database.connect`` of an existing store vs a bare ``apsw.Connection`` with the same
  pragmas (the header check and, for a new file, nothing else).

    python -m benchmarks.bench_errors
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import apsw

import agui_store
from agui_store import backends
from agui_store.backends.sqlite import connection
from agui_store.backends.sqlite import errors as sqlite_errors
from benchmarks._common import header, median_time, scratch_dir

N = 5_000


@contextlib.contextmanager
def _immediate_before(conn: Any) -> Iterator[None]:
    """``database.immediate`` as it was: only BEGIN and COMMIT translated."""
    with sqlite_errors.translated(""):
        conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise
    with sqlite_errors.translated(""):
        conn.execute("COMMIT")


@contextlib.contextmanager
def _snapshot_before(conn: Any) -> Iterator[None]:
    """``database.snapshot`` as it was: only BEGIN translated."""
    if not conn.getautocommit():
        yield
        return
    with sqlite_errors.translated(""):
        conn.execute("BEGIN DEFERRED")
    try:
        yield
    finally:
        if not conn.getautocommit():
            try:
                conn.execute("COMMIT")
            except apsw.Error:
                with contextlib.suppress(apsw.Error):
                    conn.execute("ROLLBACK")


def connect(path: str) -> apsw.Connection:
    """The connection a store opens on ``path``, with the store's default busy timeout."""
    return connection.connect(path, busy_timeout_ms=backends.DEFAULT_BUSY_TIMEOUT_MS)


def main() -> None:
    header("bench_errors: the cost of translating every error")
    folder = scratch_dir("agui-bench-errors-")
    path = os.path.join(folder, "store.db")
    conn = connect(path)

    def raw_write() -> None:
        for _ in range(N):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("COMMIT")

    def wrapped_write() -> None:
        for _ in range(N):
            with connection.immediate(conn):
                pass

    def before_write() -> None:
        for _ in range(N):
            with _immediate_before(conn):
                pass

    def raw_read() -> None:
        for _ in range(N):
            conn.execute("BEGIN")
            conn.execute("COMMIT")

    def wrapped_read() -> None:
        for _ in range(N):
            with connection.snapshot(conn):
                pass

    def before_read() -> None:
        for _ in range(N):
            with _snapshot_before(conn):
                pass

    raw_w, new_w, old_w = (
        median_time(f, repeat=7) for f in (raw_write, wrapped_write, before_write)
    )
    raw_r, new_r, old_r = (median_time(f, repeat=7) for f in (raw_read, wrapped_read, before_read))
    print(f"empty write transaction: raw {raw_w / N * 1e6:.1f} us, immediate() "
          f"{new_w / N * 1e6:.1f} us ({new_w / raw_w:.2f}x raw), the wrapper before "
          f"{old_w / N * 1e6:.1f} us ({old_w / raw_w:.2f}x raw)")
    print(f"empty read transaction: raw {raw_r / N * 1e6:.1f} us, snapshot() "
          f"{new_r / N * 1e6:.1f} us ({new_r / raw_r:.2f}x raw), the wrapper before "
          f"{old_r / N * 1e6:.1f} us ({old_r / raw_r:.2f}x raw)")
    conn.close()

    # One event per append: the smallest write a store makes.
    events = 2_000

    def stream(into: str) -> None:
        with agui_store.open(into) as store:
            store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}])
            store.append([{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}])
            for i in range(events):
                store.append([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m",
                               "delta": f"w{i} "}], thread_id="t")

    counter = iter(range(10**6))

    def fresh() -> str:
        return os.path.join(folder, f"s{next(counter)}.db")

    new_s = median_time(lambda: stream(fresh()), repeat=3)
    saved = connection.immediate
    connection.immediate = _immediate_before  # type: ignore[assignment]
    try:
        old_s = median_time(lambda: stream(fresh()), repeat=3)
    finally:
        connection.immediate = saved  # type: ignore[assignment]
    print(f"one-event appends: {new_s / events * 1e6:.0f} us each, with the wrapper before "
          f"{old_s / events * 1e6:.0f} us ({new_s / old_s:.3f}x)")

    opens = 300

    def bare_open() -> None:
        for _ in range(opens):
            c = apsw.Connection(path)
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA user_version").fetchall()
            c.close()

    def store_open() -> None:
        for _ in range(opens):
            connect(path).close()

    bare, ours = median_time(bare_open), median_time(store_open)
    print(f"opening an existing store: bare apsw {bare / opens * 1e6:.0f} us, connect() "
          f"{ours / opens * 1e6:.0f} us ({ours / bare:.2f}x; includes the header check, "
          "pragmas and the SQL function)")


if __name__ == "__main__":
    main()
