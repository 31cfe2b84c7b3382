"""The storage backends: one package per database, each whole (connection, schema,
migrations, SQL, error translation), and what they share: the error rules every backend
applies alike and the named queries both SQL backends run."""

from __future__ import annotations

from agui_store.engine import port
from agui_store.errors import InvalidArgumentError

#: What a database URL (rather than a file path) starts with.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_url(path: str) -> bool:
    """Whether ``path`` names a PostgreSQL database instead of an SQLite file."""
    return path.startswith(POSTGRES_SCHEMES)


def open_backend(path: str, busy_timeout_ms: int) -> port.Backend:
    """The backend a path or URL names: PostgreSQL for ``postgresql://`` URLs (psycopg, the
    ``postgres`` extra), else an SQLite file."""
    if is_url(path):
        try:
            # Imported on demand: psycopg is an optional extra.
            from agui_store.backends.postgres import (  # type: ignore[import-not-found,attr-defined,unused-ignore]
                PostgresBackend,
            )
        except ImportError as e:
            raise InvalidArgumentError(
                f"a PostgreSQL store needs psycopg 3: pip install 'agui-store[postgres]' ({e})"
            ) from e
        backend: port.Backend = PostgresBackend(path, busy_timeout_ms=busy_timeout_ms)
        return backend
    from agui_store.backends.sqlite import SqliteBackend

    return SqliteBackend(path, busy_timeout_ms=busy_timeout_ms)
