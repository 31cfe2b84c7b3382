"""Opening a store file with apsw, and the transactions on its connection.

A file is checked to be a store (or empty) before anything is written to it, put in WAL mode,
given the connection's pragmas and migrated (:mod:`agui_store.backends.sqlite.migrations`).
Errors are translated by :mod:`agui_store.backends.sqlite.errors` when a transaction exits.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
import urllib.parse
from typing import Any

import apsw

from agui_store import errors
from agui_store.backends.sqlite import migrations, schema, sql
from agui_store.backends.sqlite.errors import Conn, translate, translated
from agui_store.backends.sqlite.files import SQLITE_HEADER, store_file
from agui_store.engine import archive

#: How much of the file reads may map into memory.
MMAP_BYTES = 256 * 1024 * 1024
#: Prepared statements a connection keeps (apsw's default is 100).
STATEMENT_CACHE_SIZE = 512

#: The tables every agui-store file has had since schema version 1 (``events`` a view over
#: ``event_log`` since version 11).
STORE_TABLES = frozenset({"threads", "runs", "events", "batches", "branches"})


def _check_is_store(real: str, shown: str, busy_timeout_ms: int) -> None:
    """Refuse a path that is not an agui-store file, without writing anything to it.

    Accepted: no file yet (a new store), an empty (0-byte) file, an SQLite database marked
    with agui-store's ``application_id``, an unmarked one holding agui-store's tables, and an
    SQLite database with no tables, no ``application_id`` and no ``user_version`` (nothing
    in it to destroy). Everything else is refused before SQLite opens it for writing: a
    folder, a device, a file that is not SQLite, another application's database. The header
    is read directly; only an unmarked SQLite file is opened, read-only, to list its tables.
    """
    try:
        st = os.stat(real)
    except FileNotFoundError:
        folder = os.path.dirname(real) or "."
        if not os.path.isdir(folder):
            raise errors.StorageError(
                f"cannot create {shown}: folder {folder} does not exist",
                path=shown, errno=errno.ENOENT,
            ) from None
        return
    except OSError as e:
        raise errors.StorageError(
            f"cannot open {shown}: {e.strerror}", path=shown, errno=e.errno
        ) from e
    if stat.S_ISDIR(st.st_mode):
        raise errors.NotAStoreError(
            f"{shown} is a folder, not a store file: give the path of a file, e.g. "
            f"{os.path.join(shown, 'store.db')}"
        )
    if not stat.S_ISREG(st.st_mode):
        raise errors.NotAStoreError(f"{shown} is not a regular file (a device, pipe or socket)")
    if st.st_size == 0:
        return  # what a new store file is before its first write (see _create_private)
    if not os.access(real, os.R_OK):
        raise errors.StorageError(
            f"cannot read {shown}: permission denied", path=shown, errno=errno.EACCES
        )
    header = _read_header(real, shown, min(st.st_size, 100))
    untouched = "it was left untouched"
    if not header.startswith(SQLITE_HEADER) and archive.is_archive(archive.first_line(header)):
        # What export --all writes: its store is the one an import makes of it.
        raise errors.NotAStoreError(
            f"{shown} is an agui-store archive (what export --all writes), not a store: "
            f"import it into one (agui-store --db STORE import {shown}, or "
            f"Store.import_archive); {untouched}"
        )
    if not header.startswith(SQLITE_HEADER) or len(header) < 100:
        raise errors.NotAStoreError(
            f"{shown} is not an agui-store file (not an SQLite database: it begins with "
            f"{header[:16]!r}); {untouched}"
        )
    app_id = int.from_bytes(header[68:72], "big")
    version = int.from_bytes(header[60:64], "big")
    if app_id == schema.APPLICATION_ID:
        _refuse_newer(version, shown)
        return
    if app_id == 0:
        app_id, version, tables = _read_unmarked(real, shown, busy_timeout_ms)
        if app_id == schema.APPLICATION_ID:  # marked in its WAL: a store being created
            _refuse_newer(version, shown)
            return
        empty = not tables and version == 0
        if app_id == 0 and (empty or (tables >= STORE_TABLES and version > 0)):
            return  # an empty SQLite database, or a store older than its application_id
        if app_id == 0:
            listed = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
            raise errors.NotAStoreError(
                f"{shown} is an SQLite database of another application (tables: "
                f"{listed or 'none'}; user_version {version}), not an agui-store file; "
                f"{untouched}"
            )
    raise errors.NotAStoreError(
        f"{shown} is an SQLite database of another application (application_id "
        f"0x{app_id & 0xFFFFFFFF:08x}; agui-store's is 0x{schema.APPLICATION_ID:08x}); "
        f"{untouched}"
    )


def _read_header(real: str, shown: str, size: int) -> bytes:
    """The first ``size`` bytes of a file, read through SQLite's own file layer.

    Not with Python's ``open``: closing any descriptor of a file releases every POSIX lock
    the process holds on it, so reading the header of a store this process already has open
    (another ``Store``, another thread) would silently drop that connection's locks. SQLite
    tracks its descriptors per file and defers such a close.
    """
    try:
        fh = apsw.VFSFile("", real, [apsw.SQLITE_OPEN_MAIN_DB | apsw.SQLITE_OPEN_READONLY, 0])
        try:
            return bytes(fh.xRead(size, 0))
        finally:
            fh.xClose()
    except apsw.Error as e:
        raise errors.StorageError(f"cannot read {shown} ({e})", path=shown) from e


def _refuse_newer(version: int, shown: str) -> None:
    if version > schema.SCHEMA_VERSION:
        raise errors.SchemaVersionError(
            f"{shown} was written by a newer agui-store (schema version {version}; this one "
            f"reads up to {schema.SCHEMA_VERSION}): upgrade agui-store to open it"
        )


def _read_unmarked(
    real: str, shown: str, busy_timeout_ms: int
) -> tuple[int, int, frozenset[str]]:
    """``(application_id, user_version, table names)`` of an SQLite file, read without
    writing: ``immutable`` when no ``-wal`` file exists (a read-only connection to a WAL
    database would create ``-wal`` and ``-shm`` beside it and leave them), read-only else.
    A store being created has its marks in its WAL alone, which another connection may hold
    locked a moment (checkpointing as it closes): the read waits for it as any other does."""
    query = "mode=ro" if os.path.exists(real + "-wal") else "immutable=1"
    uri = f"file:{urllib.parse.quote(real)}?{query}"
    try:
        conn: Conn = apsw.Connection(
            uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        )
        try:
            conn.set_busy_timeout(busy_timeout_ms)
            # One read transaction for the three reads (closing the connection ends it): a
            # store created between them would otherwise show its tables without the marks
            # committed with them, and be refused as another application's.
            conn.execute("BEGIN")
            app_id = int(conn.execute(sql.APPLICATION_ID).fetchone()[0])
            version = int(conn.execute(sql.USER_VERSION).fetchone()[0])
            tables = frozenset(str(r[0]) for r in conn.execute(sql.TABLES_AND_VIEWS))
        finally:
            conn.close()
    except apsw.BusyError as e:
        raise errors.StoreBusyError.locked(shown) from e
    except apsw.Error as e:
        raise errors.NotAStoreError(
            f"{shown} begins like an SQLite database but cannot be read as one ({e}); it was "
            "left untouched"
        ) from e
    return app_id & 0xFFFFFFFF, version, tables


def _create_private(real: str, shown: str) -> None:
    """Create an empty file readable by its owner only (mode 0600), if none exists yet.

    ``real`` is the path with symlinks resolved: ``O_EXCL`` refuses to follow a symlink, so
    a link to a file not yet created would otherwise leave SQLite to create it 0644. SQLite
    gives the ``-wal`` and ``-shm`` files the main file's mode, so they are 0600 too.
    """
    try:
        fd = os.open(real, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    except OSError as e:
        raise errors.StorageError(
            f"cannot create {shown}: {e.strerror}", path=shown, errno=e.errno
        ) from e
    os.close(fd)


def connect(path: str, *, busy_timeout_ms: int) -> apsw.Connection:
    """Open (creating and migrating if needed) a store file and return its connection.

    Nothing is written to a file before it is known to be a store (or empty): see
    :func:`_check_is_store`.
    """
    if "\0" in path:
        raise errors.InvalidArgumentError(f"the store path {path!r} holds a NUL byte")
    real = store_file(path)
    absent: list[str] = []  # the -wal and -shm this opening would create
    if real is not None:
        _check_is_store(real, path, busy_timeout_ms)
        _create_private(real, path)
        absent = [real + end for end in ("-wal", "-shm") if not os.path.lexists(real + end)]
    with translated(path):
        conn = apsw.Connection(
            path,
            flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | apsw.SQLITE_OPEN_URI,
            # Opening (the schema check, migrations) prepares about 100 statements: with
            # apsw's default cache of 100, appends then evicted and prepared some again.
            statementcachesize=STATEMENT_CACHE_SIZE,
        )
    try:
        with translated(path, conn):
            conn.set_busy_timeout(busy_timeout_ms)
            cur = conn.cursor()
            if real is not None:
                migrations.refuse_unmigratable(conn, path)
                _enter_wal(conn, busy_timeout_ms)
            # NORMAL in WAL mode survives a killed process (a committed transaction is in the
            # WAL); only a power cut can lose the last transactions. See README, "Durability".
            cur.execute(sql.SYNCHRONOUS_NORMAL)
            cur.execute(sql.FOREIGN_KEYS_ON)
            # Reads map the file instead of copying pages through the cache: a checkout reads
            # a few thousand small blobs, about twice as fast mapped.
            cur.execute(sql.mmap_size(MMAP_BYTES))
            # Before any write: a page freed without it keeps its old bytes (erasure).
            cur.execute(sql.SECURE_DELETE_ON)
            # A pragma's row left unread keeps VACUUM (a purge, a rewrite) out for as long as
            # the cursor lives, which is not always until this function returns.
            cur.close()
            found = migrations.schema_version(conn)
            if found != schema.SCHEMA_VERSION:
                try:
                    if 0 < found < schema.REWRITE_BEFORE:
                        # Outside a transaction: its errors (a read-only file, a full disk)
                        # come out as the store's here, to be told as the migration's.
                        with translated(path, conn):
                            migrations.rewrite(conn)
                    # Decided again under the write lock: another process may be creating
                    # or migrating the same file right now. The common case takes no lock.
                    with immediate(conn):
                        migrations.migrate(conn, path)
                except errors.StoreBusyError as e:
                    if not (e.waited and 0 < found < schema.SCHEMA_VERSION):
                        raise
                    # The writer waited out is most likely another process migrating the
                    # same file, which takes as long as indexing every run for search.
                    raise errors.StoreBusyError(
                        f"{path} is at schema version {found}, and this release migrates it "
                        f"to {schema.SCHEMA_VERSION} before it reads it, which waited longer "
                        "than the busy timeout for another process holding it (migrating it "
                        "too, or writing)", waited=True,
                        advice="open it again once that process is done, or raise "
                        "busy_timeout_ms; nothing was changed",
                    ) from None
                except errors.StorageError as e:
                    if not 0 < found < schema.SCHEMA_VERSION:
                        raise
                    # A migration writes, which a reading command does not lead one to expect.
                    raise type(e)(
                        f"{path} is at schema version {found}, and this release migrates it to "
                        f"{schema.SCHEMA_VERSION} before it reads it, which failed: {e}",
                        path=e.path, errno=getattr(e, "errno", None),
                    ) from None
    except BaseException:
        # A refused or failed open leaves no connection behind (nor its -wal and -shm).
        with contextlib.suppress(Exception):
            conn.close()
        if real is not None:
            _remove_unwritable_leftovers(real, absent)
        raise
    return conn


def _remove_unwritable_leftovers(real: str, created: list[str]) -> None:
    """Remove the ``-wal`` and ``-shm`` a failed opening created beside a file it could not
    write (read-only, immutable), which SQLite's last connection leaves there, unable to
    delete them as it does beside a file it can write. Only an empty ``-wal`` goes: no
    process can have written to it, the file taking no writes."""
    if os.access(real, os.W_OK):
        return  # SQLite removed them on closing, or another connection is using them
    wal = real + "-wal"
    if os.path.lexists(wal) and not (os.path.isfile(wal) and os.path.getsize(wal) == 0):
        return
    for leftover in created:
        with contextlib.suppress(OSError):
            os.unlink(leftover)


def close(conn: Conn, where: str) -> None:
    """Close a connection (the last one checkpoints the WAL, which can fail on a full disk)."""
    with translated(where, conn):
        conn.close()


def _enter_wal(conn: Conn, busy_timeout_ms: int) -> None:
    """Switch the file to WAL (a no-op when it is already). Leaving another journal mode
    needs the file to itself, and SQLite does not wait for that in the busy handler, so
    several processes opening an old file at once wait here, within the same bound."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute(sql.ENTER_WAL).fetchall()
            return
        except apsw.BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


class immediate:  # lower case: used as a function, ``with database.immediate(conn):``
    """A write transaction that takes the write lock up front (``BEGIN IMMEDIATE``).

    Taking it up front means a waiting writer waits in ``busy_timeout`` instead of failing
    with SQLITE_BUSY on a lock upgrade half-way through its work. Any error, in the body or
    at COMMIT (a full disk fails there), rolls the whole transaction back and comes out
    translated (:func:`translate`); the connection is then ready for the next call.

    A class rather than a generator: it is on every write's path, and one object with two
    methods costs a few microseconds less than nested generator-based context managers.
    """

    __slots__ = ("conn",)

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except Exception as e:
            raise _translated(e, self.conn) from e

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        conn = self.conn
        if error is None:
            try:
                conn.execute("COMMIT")
                return
            except Exception as e:
                _rollback(conn)
                raise _translated(e, conn) from e
        _rollback(conn)
        if isinstance(error, Exception) and not isinstance(error, errors.AguiStoreError):
            raise translate(error, _where(conn), conn) from error
        # The library's own errors, and KeyboardInterrupt and friends, go on as raised.


class snapshot:  # lower case: used as a function, ``with database.snapshot(conn):``
    """A read transaction: several queries see one consistent state of the file. Errors in
    its body come out translated (:func:`translate`). Nested in another transaction, it
    leaves both the transaction and the translation to that one."""

    __slots__ = ("conn", "outer")

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.outer = False

    def __enter__(self) -> None:
        conn = self.conn
        if not conn.getautocommit():  # already inside a transaction (nested use)
            return
        self.outer = True
        try:
            conn.execute("BEGIN DEFERRED")
        except Exception as e:
            raise _translated(e, conn) from e

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        if not self.outer:
            return
        # A read changed nothing; on a corrupt file even COMMIT can fail.
        _rollback(self.conn, commit=True)
        if isinstance(error, Exception) and not isinstance(error, errors.AguiStoreError):
            raise translate(error, _where(self.conn), self.conn) from error


def _translated(e: Exception, conn: Conn) -> errors.AguiStoreError | Exception:
    return e if isinstance(e, errors.AguiStoreError) else translate(e, _where(conn), conn)


def _rollback(conn: Conn, *, commit: bool = False) -> None:
    """End the open transaction, if SQLite has not already (it rolls back by itself after
    some errors, e.g. SQLITE_FULL). Best effort: the error being raised is the one to see."""
    if conn.getautocommit():
        return
    if commit:
        try:
            conn.execute("COMMIT")
            return
        except apsw.Error:
            pass
    with contextlib.suppress(apsw.Error):  # the rare path: errors only
        conn.execute("ROLLBACK")


def _where(conn: Conn) -> str:
    """The file a connection works on, for messages."""
    try:
        return str(conn.filename) or ":memory:"
    except apsw.Error:
        return "the store"
