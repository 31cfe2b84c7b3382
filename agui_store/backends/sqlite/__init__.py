"""The SQLite backend of the storage port (:mod:`agui_store.engine.port`): all of its SQL is in
:mod:`agui_store.backends.sqlite.sql`."""

from agui_store.backends.sqlite.backend import SqliteBackend

__all__ = ["SqliteBackend"]
