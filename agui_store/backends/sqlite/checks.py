"""The checks of ``Store.check()`` that only SQLite has: the file itself.

:mod:`agui_store.engine.integrity` runs the store's own invariants through the port, on every
backend; a backend adds the checks of its storage (:meth:`SqliteTransaction.storage_checks`).
For an SQLite file, in this order:

``sqlite``
    ``PRAGMA integrity_check``: pages, indexes, ``NOT NULL`` and ``CHECK`` constraints.
``foreign_keys``
    ``PRAGMA foreign_key_check``: rows that name a row that does not exist (a writer that
    connected without ``PRAGMA foreign_keys=ON`` can leave them).
``schema``
    The file says it is an agui-store file (``application_id``) of this version
    (``user_version``), and holds every table, index and trigger that version defines, as it
    defines them: a dropped or rewritten append-only trigger is a problem even before anything
    was rewritten through the gap.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import apsw

from agui_store.backends.sqlite import schema, sql
from agui_store.engine.arguments import quote

#: The checks of the file, in the order they run.
CHECKS = ("sqlite", "foreign_keys", "schema")

def problems(conn: apsw.Connection, check: str) -> Iterator[str]:
    """What one of :data:`CHECKS` finds wrong with the file."""
    if check == "sqlite":
        trees = _trees(conn)
        for (line,) in conn.execute(sql.CHECK_INTEGRITY_CHECK):
            if line != "ok":
                yield _TREE.sub(lambda m: f"{m[0]} ({trees.get(int(m[1]), 'unknown')})",
                                str(line))
    elif check == "foreign_keys":
        yield from _foreign_keys(conn)
    elif check == "schema":
        yield from _schema(conn)
    else:
        raise ValueError(f"no SQLite check {check!r}")


#: How ``PRAGMA integrity_check`` names a b-tree: by its root page.
_TREE = re.compile(r"\bTree (\d+)")

#: The b-tree that lists the file's tables and indexes (root page 1), as reports name it.
_SCHEMA = "the schema (sqlite_schema)"

#: A damaged page as ``PRAGMA quick_check`` names it: its b-tree's root page, and its own.
_TREE_PAGE = re.compile(r"\bTree (\d+) page (\d+)")


def damaged_place(conn: apsw.Connection) -> str | None:
    """Where the file's first damage is, in the words of the error of a call that met it
    ("damage found in table events (page 61)"), or ``None`` when SQLite's check finds none
    to name (or cannot run). The check (``PRAGMA quick_check(1)``) stops at the first
    damaged page: it reads the file only up to it, and only once a call has met damage.
    The check reads the schema first: damage there keeps it from running at all."""
    try:
        rows = conn.execute(sql.CHECK_FIRST_DAMAGE).fetchall()
    except apsw.CorruptError:
        return f"damage found in {_SCHEMA}, which SQLite reads before any table"
    except apsw.Error:
        return None
    lines = [
        line for (text,) in rows for line in str(text).splitlines()
        if line != "ok" and not line.startswith("***")  # "*** in database main ***"
    ]
    if not lines:
        return None
    found = _TREE_PAGE.search(lines[0])
    if found is None:
        return f"SQLite's check says: {_shorten(lines[0])}"
    root, page = int(found[1]), found[2]
    tree = _SCHEMA if root == 1 else _trees(conn).get(root)
    return f"damage found {f'on page {page}' if tree is None else f'in {tree} (page {page})'}"


def _trees(conn: apsw.Connection) -> dict[int, str]:
    """``root page -> 'table NAME'`` (or ``index``) for the b-trees of the file, so that a
    damaged page is reported by what it holds; empty when the schema itself cannot be read
    (SQLite's own words then say so)."""
    try:
        rows = conn.execute(sql.CHECK_ROOT_PAGES).fetchall()
    except apsw.Error:
        return {}
    return {
        int(root): f"{kind} {_SHOWN_AS.get(str(name), str(name))}"  # type: ignore[arg-type]
        for root, kind, name in rows
    }


def _shorten(text: str, width: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


#: Tables named in reports as the store's readers know them: ``event_log`` holds the rows of
#: the ``events`` view (schema version 11), which is what every query and PostgreSQL call it.
_SHOWN_AS = {"event_log": "events"}


def _foreign_keys(conn: apsw.Connection) -> Iterator[str]:
    columns: dict[tuple[str, int], list[str]] = {}
    found: list[tuple[str, int, str]] = []
    for table, rowid, parent, fkid in conn.execute(sql.CHECK_FOREIGN_KEY_CHECK).fetchall():
        key = (str(table), int(fkid))  # type: ignore[arg-type]  # an integer column
        if key not in columns:
            columns[key] = [
                str(r[3])
                for r in conn.execute(sql.check_foreign_key_list(str(table)))
                if int(r[0]) == fkid
            ]
        cols = columns[key]
        shown = _SHOWN_AS.get(str(table), str(table))
        if rowid is None:  # a WITHOUT ROWID table: name the row by its columns instead
            problem = f"a {shown} row names a missing {parent} row (through {', '.join(cols)})"
            found.append((shown, -1, problem))
            continue
        values = conn.execute(sql.check_row_values(str(table), cols), (rowid,)).fetchone()
        named = ", ".join(f"{c} = {quote(v)}" for c, v in zip(cols, values or (), strict=False))
        found.append((shown, int(rowid), f"{shown} row {rowid}: {named} names no row of {parent}"))
    # By table and row, whatever order SQLite checks its tables in: as PostgreSQL reports them.
    for _, _, problem in sorted(found, key=lambda f: (f[0], f[1])):
        yield problem


def expected_schema() -> dict[tuple[str, str], str]:
    """Every table, index and trigger this version defines, with its SQL: the migrations
    applied to an empty in-memory database (as ``database.connect`` applies them to a file)."""
    mem = apsw.Connection(":memory:")
    try:
        for version in sorted(schema.MIGRATIONS):
            mem.execute(schema.MIGRATIONS[version])
        return _objects(mem)
    finally:
        mem.close()


def _objects(conn: apsw.Connection) -> dict[tuple[str, str], str]:
    return {
        (str(kind), str(name)): str(text)
        for kind, name, text in conn.execute(sql.CHECK_SCHEMA_OBJECTS)
    }


def _pragma_int(conn: apsw.Connection, name: str) -> int:
    row = conn.execute(f"PRAGMA {name}").fetchone()
    return int(row[0]) if row else 0


def _schema(conn: apsw.Connection) -> Iterator[str]:
    app_id = _pragma_int(conn, "application_id")
    if app_id != schema.APPLICATION_ID:
        yield (
            f"application_id is {app_id:#010x}, not {schema.APPLICATION_ID:#010x} ('AGUI'): "
            "the file does not say it is an agui-store file"
        )
    version = _pragma_int(conn, "user_version")
    if version != schema.SCHEMA_VERSION:
        yield (
            f"schema version (user_version) is {version}, but this agui-store reads and "
            f"writes version {schema.SCHEMA_VERSION}"
        )
        return  # the objects to expect depend on the version
    found = _objects(conn)
    for (kind, name), definition in sorted(expected_schema().items()):
        if (kind, name) not in found:
            hint = ""
            if kind == "trigger" and "append_only" in name:
                table = name.split("_are_append_only_")[0]
                how = name.rsplit("_", 1)[-1].upper()
                hint = f": {how} of {table} is no longer refused"
            yield f"{kind} {name} is missing{hint}"
        elif _normalize_sql(found[(kind, name)]) != _normalize_sql(definition):
            yield (
                f"{kind} {name} is not what schema version {version} defines "
                f"(found: {_shorten(found[(kind, name)])})"
            )


def _normalize_sql(sql: str) -> str:
    return " ".join(sql.split())
