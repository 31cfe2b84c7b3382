"""What the behavioural tests need to know of each backend, beyond the public API."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import apsw

import agui_store


def is_postgres(location: str) -> bool:
    """Whether a store location names a PostgreSQL database (a URL) rather than an SQLite file."""
    return str(location).startswith(("postgresql://", "postgres://"))


def dump(location: str) -> list[Any]:
    """Every row the store holds, table by table (for 'left exactly as it was' checks)."""
    if is_postgres(location):
        import psycopg

        from agui_store.backends.postgres import schema

        with psycopg.connect(location) as conn:
            return [
                (name, conn.execute(f"SELECT * FROM {schema.SCHEMA}.{name} ORDER BY 1").fetchall())
                for name in schema.TABLES
            ]
    conn = apsw.Connection(location)
    try:
        out: list[Any] = []
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') ORDER BY name"
        ).fetchall():
            out.append((name, conn.execute(f"SELECT * FROM {name}").fetchall()))
        return out
    finally:
        conn.close()


def checked(store: Any) -> bool:
    """``store.check().ok``, the problems shown when it fails."""
    report = store.check()
    assert report.ok, [str(p) for p in report.problems]
    return bool(report.ok)


@contextlib.contextmanager
def postgres_owner(location: str) -> Iterator[Any]:
    """A connection of the tables' owner (the superuser here) in one transaction, committed at
    the end, with every table's triggers off, the append-only guards and the foreign keys'
    own, and on again before the commit (the schema check sees nothing): as SQLite's edits,
    which drop only the guards and run with foreign keys off. The ``events`` view's triggers
    stay on and carry an edit of an event to its page, as SQLite's view carries it to
    ``event_log``. (``session_replication_role = replica`` would silence those too: a view's
    triggers cannot be made to fire in replica sessions.)"""
    import psycopg

    from agui_store.backends.postgres import schema

    tables = [t for t in schema.TABLES if t != "meta"]
    with psycopg.connect(location) as conn:
        conn.execute(f"SET search_path TO {schema.SCHEMA}")
        for table in tables:
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")
        yield conn
        for table in tables:
            conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER ALL")


#: A statement that edits a store behind its back: one text for every backend, or a text per
#: backend (``{"sqlite": ..., "postgres": ...}``) where their spellings differ.
Statement = str | dict[str, str]


def backend_of(location: str) -> str:
    """The backend a store location names: ``"postgres"`` or ``"sqlite"``."""
    return "postgres" if is_postgres(location) else "sqlite"


@contextlib.contextmanager
def owner(location: str) -> Iterator[Any]:
    """A connection of the tables' owner with the append-only (and, on PostgreSQL, the
    foreign-key) guards off, in one transaction committed at the end."""
    if is_postgres(location):
        with postgres_owner(location) as conn:
            yield conn
        return
    conn = apsw.Connection(location)
    try:
        conn.execute("BEGIN")
        triggers = conn.execute(  # the guards: the events view's own triggers stay
            "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' "
            "AND name LIKE '%\\_are\\_append\\_only\\_%' ESCAPE '\\'"
        ).fetchall()
        for name, _ in triggers:
            conn.execute(f'DROP TRIGGER "{name}"')
        yield conn
        for _, sql in triggers:
            conn.execute(sql)
        conn.execute("COMMIT")
    finally:
        conn.close()


def tamper(location: str, statements: list[Statement]) -> None:
    """Run ``statements`` as the tables' owner, each in the location's backend's spelling."""
    backend = backend_of(location)
    with owner(location) as conn:
        for statement in statements:
            conn.execute(statement[backend] if isinstance(statement, dict) else statement)


def report_of(location: str) -> Any:
    """``check()``'s report of the store at ``location``."""
    with agui_store.open(location) as store:
        return store.check()


def problems(location: str) -> list[str]:
    """The problems ``check()`` reports, as text."""
    return [str(p) for p in report_of(location).problems]
