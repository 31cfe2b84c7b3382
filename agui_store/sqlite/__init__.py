"""The SQLite backend of the storage port (:mod:`agui_store.port`): all of its SQL is in
:mod:`agui_store.sqlite.sql`."""

from agui_store.sqlite.backend import SqliteBackend

__all__ = ["SqliteBackend"]
