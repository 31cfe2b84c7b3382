"""The PostgreSQL backend under its earlier import path: :mod:`agui_store.backends.postgres`.

``agui_store.postgres.schema.application_grants`` and the other submodules keep working, so
deployment scripts written against that path need no change.
"""

from __future__ import annotations

import sys

from agui_store.backends import postgres as _backend
from agui_store.backends.postgres import PostgresBackend, backend, checks, schema, sql, transaction

__all__ = ["PostgresBackend", "backend", "checks", "schema", "sql", "transaction"]

for _name in ("backend", "checks", "schema", "sql", "transaction"):
    sys.modules[f"{__name__}.{_name}"] = getattr(_backend, _name)
