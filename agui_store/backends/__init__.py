"""The storage backends: one package per database, each whole (connection, schema,
migrations, SQL, error translation), and what they share: the error rules every backend
applies alike and the named queries both SQL backends run."""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

from agui_store.engine import port
from agui_store.errors import InvalidArgumentError

#: How long a writer waits for another writer before giving up (milliseconds).
DEFAULT_BUSY_TIMEOUT_MS = 30_000

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


#: How a message names a URL too malformed to show without its password.
UNREADABLE_URL = "a PostgreSQL database"


def without_password(url: str) -> str:
    """``url`` as shown in messages: its password (in the authority or the query) removed."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return UNREADABLE_URL
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = userinfo.split(":", 1)[0] + "@" + host
    query = urllib.parse.urlencode(
        [
            (key, value)
            for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
            if key != "password"
        ],
        safe="/",
    )
    # Built by hand: urlunsplit drops the empty authority of postgresql:///db?host=/socket.
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    return shown + (f"?{query}" if query else "")


def _postgres() -> Any:
    """The PostgreSQL backend's module, imported on demand: psycopg is an optional extra."""
    try:
        from agui_store.backends.postgres import backend
    except ImportError as e:
        raise InvalidArgumentError(
            f"a PostgreSQL store needs psycopg 3: pip install 'agui-store[postgres]' ({e})"
        ) from e
    return backend


def holds_store(path: str) -> bool:
    """Whether a path or URL names a store that exists: a file there, or a PostgreSQL
    database whose schema holds the store's tables (opening either creates it)."""
    if is_url(path):
        return bool(_postgres().holds_store(path))
    return os.path.lexists(path)


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
