"""The SQLite backend: one store file, opened with apsw
(:mod:`agui_store.backends.sqlite.connection`).

Transactions come from :mod:`agui_store.backends.sqlite.connection`, which translates every driver
error when a transaction exits; the operations inside them are :class:`SqliteTransaction`'s.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from agui_store.backends.sqlite import connection, migrations, sql
from agui_store.backends.sqlite.errors import translated
from agui_store.backends.sqlite.files import store_file
from agui_store.backends.sqlite.transaction import SqliteTransaction
from agui_store.engine import integrity
from agui_store.engine.trust import TrustedBlobs
from agui_store.errors import AguiStoreError
from agui_store.records import CheckReport


class _Reopen:
    """Stands for a connection a forked child closed: the next use opens a new one."""

    def close(self) -> None:
        pass


_REOPEN: Any = _Reopen()


#: How soon a checkpoint answers busy when another connection's checkpoint holds it (s).
_AT_ONCE = 0.05


class SqliteBackend:
    """A store file. Not thread-safe by itself: the engine serializes calls."""

    def __init__(self, path: str, *, busy_timeout_ms: int) -> None:
        self.where = path
        self.busy_timeout_ms = busy_timeout_ms
        self._conn: Any = connection.connect(path, busy_timeout_ms=busy_timeout_ms)
        # Absolute: another process (an AsyncStore's writer, started again later) opens the
        # file by it, when the working directory may have changed.
        plain_file = store_file(path) is not None and not path.startswith("file:")
        self.location = os.path.abspath(path) if plain_file else path
        self._pid = os.getpid()
        self._trusted = TrustedBlobs()  # what the connection verified of its blobs

    @property
    def _db(self) -> Any:
        if self._conn is None:
            raise AguiStoreError(f"{self.where}: the store is closed")
        if os.getpid() != self._pid:
            # A forked child must not use the parent's SQLite handle (after_fork already
            # closed it): open its own, on the file the parent opened whatever the working
            # directory is now.
            self._conn = connection.connect(self.location, busy_timeout_ms=self.busy_timeout_ms)
            self._pid = os.getpid()
            self._trusted = TrustedBlobs()
        return self._conn

    def connection(self) -> Any:
        """The apsw connection (for :mod:`agui_store.testing`)."""
        return self._db

    @contextlib.contextmanager
    def reading(self) -> Iterator[SqliteTransaction]:
        """A read transaction on one snapshot of the file."""
        conn = self._db
        with connection.snapshot(conn):
            yield SqliteTransaction(conn, self._trusted)

    @contextlib.contextmanager
    def writing(self, thread_id: str | None = None) -> Iterator[SqliteTransaction]:
        # One writer at a time on a file, whatever the thread.
        """The write transaction (``BEGIN IMMEDIATE``): one writer at a time on a file."""
        conn = self._db
        with connection.immediate(conn):
            migrations.refuse_migrated_since(conn, self.where)
            yield SqliteTransaction(conn, self._trusted)

    def purge(self, rewrite: bool = False) -> bool:
        """See :meth:`agui_store.engine.port.Backend.purge` (every purge rewrites, so
        ``rewrite`` asks for nothing more): the full-text index written
        again (:data:`sql.REWRITE_SEARCH_WORDS`: its page index keeps the starts of deleted
        words), the planner's statistics sampled again where an ``ANALYZE`` left some
        (:data:`sql.HAS_STATISTICS`), the file rewritten (``VACUUM``), then the WAL copied
        into it and truncated to nothing.

        ``secure_delete`` zeroes a deleted cell and a freed page, but not what a page
        rebuilt while rows are deleted leaves in its unused space: copies of cells moved
        to a neighbour, the erased rows' among them. Rewriting every page is the one means
        SQLite offers to take those copies out (the rewrite copies only live rows); it
        costs what the file holds. A reader still on a snapshot from before the erasure
        holds pages the checkpoint may not overwrite: then it does not finish (``False``),
        and the next purge after that reader is done completes it."""
        conn = self._db
        with translated(self.where, conn):
            with connection.immediate(conn):
                conn.execute(sql.REWRITE_SEARCH_WORDS)
                if conn.execute(sql.HAS_STATISTICS).fetchone()[0]:
                    conn.execute(sql.ANALYZE)
            conn.execute(sql.VACUUM)
            return self._checkpointed(conn)

    def _checkpointed(self, conn: Any) -> bool:
        """``wal_checkpoint(TRUNCATE)``, tried again while another connection's checkpoint
        holds it: SQLite answers busy at once then (no busy handler), where a reader makes
        it wait up to the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            tried = time.monotonic()
            busy, _log, _done = conn.execute(sql.WAL_CHECKPOINT_TRUNCATE).fetchone()
            now = time.monotonic()
            if not busy or now - tried > _AT_ONCE or now >= deadline:
                return not busy
            time.sleep(_AT_ONCE)

    purge_pending = (
        "a reader holds older pages: it completes at the next purge (Store.purge(), or "
        "'agui-store purge') once that reader is done"
    )

    def close(self) -> None:
        """Close the connection (the last one checkpoints the WAL); later calls raise."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            connection.close(conn, self.where)

    def after_fork(self) -> None:
        """In a forked child: close the inherited connection before anything opens a new
        one (SQLite's own procedure, test/forkdemo.c). A child whose new connection sat
        beside the inherited one would share the parent's lock bookkeeping, and the
        parent's close could delete the WAL the child writes to."""
        if self._conn is not None and self._pid != os.getpid():
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = _REOPEN


def check_file(conn: Any) -> CheckReport:
    """Every check of ``Store.check()`` on an open SQLite connection, another tool's too,
    inside one read transaction (the caller's, or one of its own)."""
    with connection.snapshot(conn):
        return integrity.check(SqliteTransaction(conn))
