"""Test hooks: what tests and benchmarks may reach inside a store, and nothing else.

These are documented, stable entry points for the store's own test suite and benchmarks
(and for anyone testing code built on agui-store). They are not part of the API an
application should use: they bypass the store's rules.
"""

from __future__ import annotations

from typing import Any

from agui_store.restore import View
from agui_store.store import Store


def connection(store: Store) -> Any:
    """The backend's open database connection (SQLite: an ``apsw.Connection``), to inspect
    tables, query plans and triggers. Writing through it bypasses the store."""
    return store._backend.connection()


def replayed_view(store: Store, run_pk: int) -> View:
    """The view of a run (by its integer key) by full replay of its lineage, ignoring every
    checkpoint: the reference checkouts are compared with."""
    with store._reading() as tx:
        return store._replay_view(tx, run_pk)


def records(store: Store, run_pks: list[int]) -> list[Any]:
    """The replay records (inputs and decoded events) of runs, by key, verified against
    their hashes."""
    with store._reading() as tx:
        return store._records(tx, run_pks)


def forget(store: Store) -> None:
    """Drop everything the store keeps in memory between calls (cached views, sequence
    state, what appends remember), so that the next call is cold."""
    with store._lock:
        store._forget()
