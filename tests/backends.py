"""What the behavioural tests need to know of each backend, beyond the public API."""

from __future__ import annotations

from typing import Any

import apsw

from agui_store.store import is_url


def dump(location: str) -> list[Any]:
    """Every row the store holds, table by table (for 'left exactly as it was' checks)."""
    if is_url(location):
        import psycopg

        from agui_store.postgres import schema

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
