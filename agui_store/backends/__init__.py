"""The storage backends: one package per database, each whole (connection, schema,
migrations, SQL, error translation), and what they share: the error rules every backend
applies alike and the named queries both SQL backends run."""

from __future__ import annotations

import os
from typing import Any

from agui_store.engine import port
from agui_store.errors import InvalidArgumentError

#: How long a writer waits for another writer before giving up (milliseconds).
DEFAULT_BUSY_TIMEOUT_MS = 30_000
#: The longest busy timeout: what SQLite's busy timeout and PostgreSQL's ``lock_timeout``
#: hold (a C ``int`` of milliseconds, some 24 days).
MAX_BUSY_TIMEOUT_MS = 2**31 - 1

#: The store used when no path is given: ``$AGUI_STORE_DB`` (a file path or a
#: ``postgresql://`` URL), else ``./agui-store.db``.
DEFAULT_DB_ENV = "AGUI_STORE_DB"
DEFAULT_DB_NAME = "agui-store.db"


def default_path() -> str:
    """The store used when none is given: ``$AGUI_STORE_DB``, else ``./agui-store.db``."""
    return os.environ.get(DEFAULT_DB_ENV) or DEFAULT_DB_NAME

#: What a database URL (rather than a file path) starts with.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_url(path: str) -> bool:
    """Whether ``path`` names a PostgreSQL database instead of an SQLite file."""
    return path.startswith(POSTGRES_SCHEMES)


def _postgres() -> Any:
    """The PostgreSQL backend's module, imported on demand: psycopg is an optional extra."""
    try:
        from agui_store.backends import postgres
    except ImportError as e:
        raise InvalidArgumentError(
            f"a PostgreSQL store needs psycopg 3: pip install 'agui-store[postgres]' ({e})"
        ) from e
    return postgres.backend


def missing_store(path: str) -> str | None:
    """Why no store is at a path or URL, in words, or ``None``: there is one (or a file
    that is something else, which opening names). No file (a symbolic link to nothing
    included), an empty file with no WAL beside it (SQLite would make a store in it), a
    PostgreSQL database whose schema holds no store: opening any of them creates one."""
    if is_url(path):
        return None if _postgres().holds_store(path) else "the database holds no agui-store schema"
    if not os.path.exists(path):
        if os.path.lexists(path):
            return "the file does not exist (a symbolic link to nothing)"
        return "the file does not exist"
    try:
        wal = path + "-wal"
        empty = (
            os.path.isfile(path)
            and os.path.getsize(path) == 0
            and (not os.path.exists(wal) or os.path.getsize(wal) == 0)
        )
    except OSError:
        return None  # opening says what is wrong with it
    return "the file is empty" if empty else None


def remove_new_store(path: str) -> None:
    """Remove a store a failed first write created and left holding nothing: the SQLite
    file with the files beside it, or the PostgreSQL database's store schema (dropped only
    while it holds nothing, so a store another process has begun to fill stays)."""
    if is_url(path):
        _postgres().drop_new_store(path)
        return
    from agui_store.backends.sqlite import files

    files.remove_database(path)


def open_backend(path: str, busy_timeout_ms: int) -> port.Backend:
    """The backend a path or URL names: PostgreSQL for ``postgresql://`` URLs (psycopg, the
    ``postgres`` extra), else an SQLite file."""
    if is_url(path):
        backend: port.Backend = _postgres().PostgresBackend(
            path, busy_timeout_ms=busy_timeout_ms
        )
        return backend
    from agui_store.backends.sqlite import SqliteBackend

    return SqliteBackend(path, busy_timeout_ms=busy_timeout_ms)
