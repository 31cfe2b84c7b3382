"""The one fixture every backend runs the store's behavioural tests through.

Each test in ``tests/contract`` takes a fresh, empty store location: ``store_location`` (one
location), ``new_location`` (call it for as many as the test needs; ``new_location.backend``
names the backend) or ``backend`` (the name alone). Each is parametrized over
:data:`BACKENDS`, so every test runs once per backend: SQLite always, PostgreSQL on the
session's server (tests/conftest.py ``postgres_server``; skipped with the reason when there is
none, a failure in CI). The tests reach the store through ``agui_store.open(location)``, the
public API and the documented :mod:`agui_store.testing` hooks, and nothing else.

What a third backend provides to run the suite:

- an entry in :data:`BACKENDS`: its name, the fixtures' param (and the test ids' suffix), and
  its harness, a class like :class:`SqliteLocations`:
  - made with the pytest request and the test's ``tmp_path``, it returns a fresh, empty
    location ``agui_store.open`` accepts each time it is called, and removes what it made in
    ``close()``;
  - its static ``owns``, ``dump`` and ``owner`` say whether a location is its backend's,
    read every row a store holds (for "left exactly as it was" checks) and open a connection
    of the tables' owner with the guards off (for tests that edit a store behind its back,
    as an attacker would); :mod:`tests.backends` finds the harness of a location here and
    holds no backend's code itself.

Tests of one backend's own features (SQLite's file, pragmas and migrations; PostgreSQL's
cluster, roles and schema) stay beside the backend, outside this folder.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import settings

from agui_store.backends import is_url


@functools.cache
def _empty_sqlite_store() -> Path:
    """A store file the library created and closed (no ``-wal`` left), made once a session."""
    import agui_store

    path = Path(tempfile.mkdtemp(prefix="agui-empty-store-")) / "empty.db"
    agui_store.open(path).close()
    atexit.register(shutil.rmtree, path.parent, True)
    return path


class SqliteLocations:
    """Fresh, empty SQLite store files in the test's ``tmp_path``."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self._tmp_path = tmp_path
        self._made = 0

    def __call__(self) -> str:
        path = self._tmp_path / f"store-{self._made}.db"
        # A copy of a store file made empty by the library, as the PostgreSQL side clones an
        # installed template: creating a file (schema, WAL switch, fsyncs) costs about 12 ms
        # and these tests make thousands. The tests of creating a file (modes, concurrent
        # creators, migrations) take paths of their own, outside this folder.
        shutil.copy(_empty_sqlite_store(), path)
        self._made += 1
        return str(path)

    def close(self) -> None:
        pass

    #: The placeholder of a bound value in a statement of this backend's.
    placeholder = "?"

    @staticmethod
    def owns(location: str) -> bool:
        """Whether ``location`` names an SQLite store (a file path, not a URL)."""
        return not is_url(str(location))

    @staticmethod
    def dump(location: str) -> list[Any]:
        """Every row of every table and view, table by table."""
        conn = apsw.Connection(str(location))
        try:
            out: list[Any] = []
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') ORDER BY name"
            ).fetchall():
                out.append((name, conn.execute(f"SELECT * FROM {name}").fetchall()))
            return out
        finally:
            conn.close()

    @staticmethod
    @contextlib.contextmanager
    def owner(location: str) -> Iterator[Any]:
        """A connection with the append-only guards dropped (the ``events`` view's own
        triggers stay) in one transaction, the guards back before it commits."""
        conn = apsw.Connection(str(location))
        try:
            conn.execute("BEGIN")
            triggers = conn.execute(
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


class PostgresLocations:
    """Fresh databases of the session's server, each a clone of one with an empty store
    installed (tests/conftest.py ``postgres_store_template``), dropped afterwards."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self._server = request.getfixturevalue("postgres_server")
        self._template = request.getfixturevalue("postgres_store_template")
        self._made: list[str] = []

    def __call__(self) -> str:
        dsn = self._server.create_database(template=self._template)
        self._made.append(dsn)
        return str(dsn)

    def close(self) -> None:
        for dsn in self._made:
            self._server.drop_database(dsn)

    #: The placeholder of a bound value in a statement of this backend's (psycopg's).
    placeholder = "%s"

    @staticmethod
    def owns(location: str) -> bool:
        """Whether ``location`` names a PostgreSQL database (a URL)."""
        return is_url(str(location))

    @staticmethod
    def dump(location: str) -> list[Any]:
        """Every row of every table of the store's schema, table by table."""
        import psycopg

        from agui_store.backends.postgres import schema

        with psycopg.connect(str(location)) as conn:
            return [
                (name, conn.execute(f"SELECT * FROM {schema.SCHEMA}.{name} ORDER BY 1").fetchall())
                for name in schema.TABLES
            ]

    @staticmethod
    @contextlib.contextmanager
    def owner(location: str) -> Iterator[Any]:
        """A connection of the tables' owner (the superuser here) in one transaction,
        committed at the end, with every table's triggers off, the append-only guards and the
        foreign keys' own, and on again before the commit (the schema check sees nothing): as
        SQLite's edits, which drop only the guards and run with foreign keys off. The
        ``events`` view's triggers stay on and carry an edit of an event to its page, as
        SQLite's view carries it to ``event_log``. (``session_replication_role = replica``
        would silence those too: a view's triggers cannot be made to fire in replica
        sessions.)"""
        import psycopg

        from agui_store.backends.postgres import schema

        tables = [t for t in schema.TABLES if t != "meta"]
        with psycopg.connect(str(location)) as conn:
            conn.execute(f"SET search_path TO {schema.SCHEMA}")
            for table in tables:
                conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")
            yield conn
            for table in tables:
                conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER ALL")


#: Every backend the suite runs on: its name, and its harness (what makes its fresh, empty
#: locations, and reads and edits its rows).
BACKENDS: dict[str, Any] = {"sqlite": SqliteLocations, "postgres": PostgresLocations}


class StoreLocations:
    """Fresh, empty store locations of one backend (call it for one): file paths, or new
    databases' URLs."""

    def __init__(self, backend: str, made_by: Any) -> None:
        self.backend = backend
        self._made_by = made_by

    def __call__(self) -> str:
        return str(self._made_by())


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    """The backend a behavioural test runs on."""
    return str(request.param)


@pytest.fixture
def new_location(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[StoreLocations]:
    """Makes fresh, empty store locations on the test's backend (call it)."""
    made_by = BACKENDS[backend](request, tmp_path)
    try:
        yield StoreLocations(backend, made_by)
    finally:
        made_by.close()


@pytest.fixture
def store_location(new_location: StoreLocations) -> str:
    """One fresh, empty store location on the test's backend."""
    return new_location()


#: The most examples a hypothesis test runs on PostgreSQL. Each example there is a fresh
#: database (a template clone, about 0.15 s) and every store call a round trip, so the second
#: backend runs the same properties on fewer examples; SQLite keeps the profile's budget.
POSTGRES_MAX_EXAMPLES = 25


@pytest.fixture(autouse=True)
def _fewer_examples_on_postgres(request: pytest.FixtureRequest) -> Iterator[None]:
    """Give a hypothesis test parametrized with ``backend="postgres"`` at most
    :data:`POSTGRES_MAX_EXAMPLES` examples, for this call only (hypothesis reads its
    settings from the test function when it runs)."""
    callspec = getattr(request.node, "callspec", None)
    test = getattr(request.node, "obj", None)
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if callspec is None or callspec.params.get("backend") != "postgres" or own is None:
        yield
        return
    capped = settings(parent=own, max_examples=min(own.max_examples, POSTGRES_MAX_EXAMPLES))
    test._hypothesis_internal_use_settings = capped  # type: ignore[union-attr]
    try:
        yield
    finally:
        test._hypothesis_internal_use_settings = own  # type: ignore[union-attr]
