"""The SQLite edge: opening a store file with apsw, transactions, migrations, error translation.

Everything that knows about apsw is here, so that driver errors are translated in exactly one
place and a PostgreSQL backend can later stand beside this module with the same shape.
"""

from __future__ import annotations

import contextlib
import os
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeAlias

import apsw

from agui_store import errors, schema

#: An open store connection (``apsw.Connection``). apsw types every row value as the union of
#: SQLite's types; the store reads its own STRICT schema, so its modules take rows as Any
#: instead of narrowing them at each of a hundred call sites.
Conn: TypeAlias = Any

#: How much of the file reads may map into memory.
MMAP_BYTES = 256 * 1024 * 1024

#: How long a writer waits for another writer before giving up (milliseconds).
DEFAULT_BUSY_TIMEOUT_MS = 30_000

#: The database file used when no path is given: ``$AGUI_STORE_DB``, else ``./agui-store.db``.
DEFAULT_DB_ENV = "AGUI_STORE_DB"
DEFAULT_DB_NAME = "agui-store.db"


def default_path() -> str:
    return os.environ.get(DEFAULT_DB_ENV) or DEFAULT_DB_NAME


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Turn driver errors into the library's error tree (the one place that does so)."""
    try:
        yield
    except apsw.BusyError as e:
        raise errors.StoreBusyError(
            "the database stayed locked by another writer for longer than the busy timeout; "
            "raise busy_timeout_ms or shorten the other writer's transactions"
        ) from e
    except apsw.ConstraintError as e:
        raise errors.IntegrityError(f"the database refused the write: {e}") from e
    except apsw.NotADBError as e:
        raise errors.AguiStoreError(f"not an SQLite database: {e}") from e
    except apsw.CorruptError as e:
        raise errors.AguiStoreError(
            f"the database file is corrupt ({e}); run 'agui-store check' for details"
        ) from e
    except apsw.CantOpenError as e:
        raise errors.AguiStoreError(f"cannot open the database file: {e}") from e


def _create_private(path: str) -> None:
    """Create an empty file readable by its owner only (mode 0600), if none exists yet.

    SQLite gives its -wal and -shm files the main file's mode, so they stay private too.
    """
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)


def connect(path: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> apsw.Connection:
    """Open (creating and migrating if needed) a store file and return its connection."""
    memory = path == ":memory:" or path.startswith("file::memory:")
    if not memory:
        parent = Path(path).parent
        if not parent.exists():
            raise errors.AguiStoreError(f"cannot create {path}: folder {parent} does not exist")
        _create_private(path)
    with translated():
        conn = apsw.Connection(
            path,
            flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | apsw.SQLITE_OPEN_URI,
        )
        conn.set_busy_timeout(busy_timeout_ms)
        cur = conn.cursor()
        if not memory:
            _enter_wal(conn, busy_timeout_ms)
        # NORMAL in WAL mode survives a killed process (a committed transaction is in the WAL);
        # only a power cut can lose the last transactions. See README, "Durability".
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        # Reads map the file instead of copying pages through the cache: a checkout reads a
        # few thousand small blobs, about twice as fast mapped.
        cur.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        # Compressed blobs inflate inside a query, so reading a list of blobs returns the
        # JSON texts alone, in one column (see checkpoints.MESSAGE_TEXTS).
        register_functions(conn)
        _migrate(conn, path)
    return conn


def register_functions(conn: Conn) -> None:
    """The SQL functions the store's queries use (``agui_inflate``), on a connection."""
    conn.create_scalar_function("agui_inflate", _inflate, 1, deterministic=True)


def _inflate(*args: Any) -> Any:
    """``agui_inflate(data)``: a zlib blob's bytes (apsw's SQL function signature)."""
    return zlib.decompress(args[0])


def _enter_wal(conn: Conn, busy_timeout_ms: int) -> None:
    """Switch the file to WAL (a no-op when it is already). Leaving another journal mode
    needs the file to itself, and SQLite does not wait for that in the busy handler, so
    several processes opening an old file at once wait here, within the same bound."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except apsw.BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def schema_version(conn: apsw.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def _migrate(conn: Conn, path: str) -> None:
    if schema_version(conn) == schema.SCHEMA_VERSION:
        return  # the common case, without taking the write lock
    with immediate(conn):
        # Everything is decided inside the write lock: another process may be creating or
        # migrating the same file right now.
        version = schema_version(conn)
        if version > schema.SCHEMA_VERSION:
            raise errors.SchemaVersionError(
                f"{path} was written by a newer agui-store (schema version {version}; this one "
                f"reads up to {schema.SCHEMA_VERSION}): upgrade agui-store to open it"
            )
        if version == 0:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
            if tables and app_id != schema.APPLICATION_ID:
                raise errors.AguiStoreError(
                    f"{path} is an SQLite database of something else (it has tables but is "
                    "not an agui-store file); give a new path"
                )
        for target in range(version + 1, schema.SCHEMA_VERSION + 1):
            conn.execute(schema.MIGRATIONS[target])
            if target in schema.BACKFILLS:
                from agui_store import ledger  # the hashes of the log (imports this module)

                ledger.backfill(conn, lambda: _lifted(conn, ("runs", "batches"), "update"))
        conn.execute(f"PRAGMA application_id={schema.APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={schema.SCHEMA_VERSION}")


@contextlib.contextmanager
def _lifted(conn: Conn, tables: tuple[str, ...], kind: str) -> Iterator[None]:
    """Inside a migration's transaction: the append-only triggers of ``kind`` on ``tables``
    dropped for the block and put back, exactly as they were, after it (a backfill writes
    values computed from the log into columns the migration just added)."""
    names = [f"{table}_are_append_only_{kind}" for table in tables]
    marks = ",".join("?" * len(names))
    triggers = conn.execute(
        f"SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND name IN ({marks})",
        names,
    ).fetchall()
    for name, _ in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    yield
    for _, sql in triggers:
        conn.execute(sql)


@contextlib.contextmanager
def immediate(conn: apsw.Connection) -> Iterator[None]:
    """A write transaction that takes the write lock up front (``BEGIN IMMEDIATE``).

    Taking it up front means a waiting writer waits in ``busy_timeout`` instead of failing
    with SQLITE_BUSY on a lock upgrade half-way through its work.
    """
    with translated():
        conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise
    with translated():
        conn.execute("COMMIT")


@contextlib.contextmanager
def snapshot(conn: apsw.Connection) -> Iterator[None]:
    """A read transaction: several queries see one consistent state of the file."""
    if not conn.getautocommit():  # already inside a transaction (nested use)
        yield
        return
    with translated():
        conn.execute("BEGIN DEFERRED")
    try:
        yield
    finally:
        if not conn.getautocommit():
            try:
                conn.execute("COMMIT")
            except apsw.Error:
                # A read changed nothing; on a corrupt file even COMMIT can fail.
                with contextlib.suppress(apsw.Error):
                    conn.execute("ROLLBACK")
