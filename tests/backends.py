"""What the behavioural tests need to know of each backend, beyond the public API: each
backend's harness, registered beside it in :data:`tests.contract.conftest.BACKENDS`, does the
work; these functions find the harness a store location belongs to."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import agui_store


def harness_of(location: str) -> Any:
    """The harness of the backend a store location names."""
    from tests.contract.conftest import BACKENDS

    found = [harness for harness in BACKENDS.values() if harness.owns(str(location))]
    assert len(found) == 1, f"{location!r} is a location of {len(found)} backends"
    return found[0]


def backend_of(location: str) -> str:
    """The backend a store location names: ``"postgres"`` or ``"sqlite"``."""
    from tests.contract.conftest import BACKENDS

    return next(name for name, harness in BACKENDS.items() if harness is harness_of(location))


def is_postgres(location: str) -> bool:
    """Whether a store location names a PostgreSQL database rather than an SQLite file."""
    return backend_of(location) == "postgres"


def placeholder(location: str) -> str:
    """The placeholder of a bound value in a statement of the location's backend."""
    return str(harness_of(location).placeholder)


def dump(location: str) -> list[Any]:
    """Every row the store holds, table by table (for 'left exactly as it was' checks)."""
    return list(harness_of(location).dump(location))


def checked(store: Any) -> bool:
    """``store.check().ok``, the problems shown when it fails."""
    report = store.check()
    assert report.ok, [str(p) for p in report.problems]
    return bool(report.ok)


@contextlib.contextmanager
def owner(location: str) -> Iterator[Any]:
    """A connection of the tables' owner with the append-only (and, on PostgreSQL, the
    foreign-key) guards off, in one transaction committed at the end."""
    with harness_of(location).owner(location) as conn:
        yield conn


def postgres_owner(location: str) -> contextlib.AbstractContextManager[Any]:
    """:func:`owner` of a PostgreSQL store (what its harness's ``owner`` says it does)."""
    assert is_postgres(location), location
    return owner(location)


#: A statement that edits a store behind its back: one text for every backend, or a text per
#: backend (``{"sqlite": ..., "postgres": ...}``) where their spellings differ.
Statement = str | dict[str, str]


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
