"""The checks of ``Store.check()`` that only PostgreSQL has: its schema in the server.

:mod:`agui_store.engine.integrity` runs the store's own invariants through the port, on every
backend; a backend adds the checks of its storage (:meth:`PostgresTransaction.storage_checks`).
For PostgreSQL, as for an SQLite file, where the idea carries over:

``foreign_keys``
    Rows that name a row that does not exist, for every reference the schema defines (by
    anti-join, so a reference whose constraint was dropped, or whose triggers were disabled
    or bypassed with ``session_replication_role = replica``, is checked all the same).
``pages``
    Each row of ``event_pages`` (schema version 3: a batch's events to a row) holds what its
    seq range says: as many types as payloads as seqs, plain one-dimensional arrays from 1
    without NULLs; no two pages hold the same seq; no page reaches past the batch its first
    event is in. The CHECK constraints refuse the first on INSERT, but the owner can drop them;
    what the ``events`` view then shows is no longer what was stored, so these are checked
    row by row, as SQLite's ``events`` rows are by their own table's constraints.
``schema``
    ``meta`` says the schema is an agui-store's of this version, and the schema (:data:`agui_store.
    postgres.schema.SCHEMA`) holds every table, column, constraint, index, view, trigger and
    trigger function that version defines, as it defines them, with the triggers enabled: a dropped,
    disabled or rewritten append-only trigger is a problem even before anything was rewritten
    through the gap. (SQLite's page check has no equivalent here: the server checks its own
    pages.)

What to expect is read from the schema's own DDL
(:data:`agui_store.backends.postgres.schema.MIGRATIONS`), every migration's statements in order (a
later DROP undoes an earlier CREATE), so a change there is expected here without a second list to
keep in step.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agui_store.backends.postgres import schema, sql
from agui_store.engine.arguments import quote

#: The checks of the database, in the order they run.
CHECKS = ("foreign_keys", "pages", "schema")

#: Who changes a table an append-only trigger guards, by the events it refuses.
_REFUSED = {"DELETE OR UPDATE": "UPDATE and DELETE", "TRUNCATE": "TRUNCATE"}

#: The order PostgreSQL prints a trigger's events in (pg_get_triggerdef).
_EVENT_ORDER = ("INSERT", "DELETE", "UPDATE", "TRUNCATE")


@dataclass
class Table:
    """A table as the schema's DDL declares it: columns, collations, key and CHECK count."""

    name: str
    columns: dict[str, str] = field(default_factory=dict)  # name -> type
    collations: dict[str, str] = field(default_factory=dict)  # name -> collation, if named
    key: str | None = None  # the single-column primary key, if it has one
    checks: int = 0
    unique: int = 0  # primary key and unique constraints


@dataclass(frozen=True)
class Reference:
    """A foreign key: ``table.column`` names a row of ``target.target_column``."""

    table: str
    column: str
    target: str
    target_column: str


@dataclass(frozen=True)
class Trigger:
    """A trigger as the schema's DDL declares it, compared with the server's."""

    name: str
    table: str
    timing: str
    events: tuple[str, ...]
    level: str
    function: str

    @property
    def definition(self) -> str:
        """As ``pg_get_triggerdef`` prints it (names unqualified)."""
        return (
            f"CREATE TRIGGER {self.name} {self.timing} {' OR '.join(self.events)} ON "
            f"{self.table} FOR EACH {self.level} EXECUTE FUNCTION {self.function}()"
        )


@dataclass
class Expected:
    """What the schema's DDL defines."""

    tables: dict[str, Table]
    references: list[Reference]
    indexes: dict[str, tuple[str, str]]  # name -> (table, definition as pg_indexes prints it)
    triggers: dict[str, Trigger]
    functions: dict[str, str]  # name -> body
    views: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> columns


#: The statements :func:`expected` follows, one alternative each, found in DDL order.
_STATEMENT = re.compile(
    "|".join(
        (
            r"(?P<function>CREATE (?:OR REPLACE )?FUNCTION (\w+)\([^)]*\).*?AS \$\$(.*?)\$\$;)",
            r"(?P<table>CREATE TABLE (\w+) \((.*?)\n\);)",
            r"(?P<index>CREATE (UNIQUE )?INDEX (\w+) ON (\w+)\(([^)]*)\)(?: WHERE ([^;]*))?;)",
            r"(?P<trigger>CREATE TRIGGER (\w+) (BEFORE|AFTER|INSTEAD OF) (.+?) ON (\w+)\s+"
            r"FOR EACH (ROW|STATEMENT) EXECUTE FUNCTION (\w+)\(\);)",
            r"(?P<view>CREATE VIEW (\w+)\(([^)]*)\) AS)",
            r"(?P<drop_constraint>ALTER TABLE (\w+) DROP CONSTRAINT (?:IF EXISTS )?(\w+);)",
            r"(?P<drop>DROP (TABLE|VIEW|INDEX|FUNCTION|TRIGGER) (?:IF EXISTS )?(\w+)"
            r"(?:\(\))?(?: ON (\w+))?;)",
        )
    ),
    re.S,
)
_REFERENCE = re.compile(r"REFERENCES (\w+)\((\w+)\)")
_COLLATE = re.compile(r'COLLATE "([^"]+)"')
_TABLE_CONSTRAINT = ("PRIMARY", "UNIQUE", "CHECK", "FOREIGN", "CONSTRAINT")


@functools.cache
def expected() -> Expected:
    """The objects this version's DDL leaves: every migration's statements, in order."""
    ddl = "\n".join(schema.MIGRATIONS[v] for v in sorted(schema.MIGRATIONS))
    want = Expected({}, [], {}, {}, {})
    for match in _STATEMENT.finditer(ddl):
        kind = str(match.lastgroup)
        _follow(want, kind, _groups(match, kind))
    return want


def _groups(match: re.Match[str], kind: str) -> tuple[str, ...]:
    """The groups of the alternative ``kind`` that matched (its own name's group first)."""
    index = _STATEMENT.groupindex[kind]
    following = [i for i in _STATEMENT.groupindex.values() if i > index]
    end = min(following, default=_STATEMENT.groups + 1)
    return tuple(match.group(i) or "" for i in range(index + 1, end))


def _follow(want: Expected, kind: str, groups: tuple[str, ...]) -> None:
    """What one DDL statement adds to or takes from ``want``."""
    if kind == "function":
        name, body = groups
        want.functions[name] = _words(body)
    elif kind == "table":
        name, body = groups
        want.tables[name] = _table(name, body, want.references)
    elif kind == "index":
        unique, name, table, columns, where = groups
        want.indexes[name] = (
            table,
            f"CREATE {unique}INDEX {name} ON {table} USING btree ({columns})"
            + (f" WHERE ({where.strip()})" if where else ""),
        )
    elif kind == "trigger":
        name, timing, events, table, level, function = groups
        said = {e.strip() for e in events.split(" OR ")}
        want.triggers[name] = Trigger(
            name, table, timing, tuple(e for e in _EVENT_ORDER if e in said), level, function
        )
    elif kind == "view":
        name, columns = groups
        want.views[name] = tuple(c.strip() for c in columns.split(","))
    elif kind == "drop_constraint":
        table, constraint = groups
        dropped = [r for r in want.references if f"{r.table}_{r.column}_fkey" == constraint]
        if len(dropped) != 1 or dropped[0].table != table:
            raise ValueError(f"the schema check cannot follow DROP CONSTRAINT {constraint}")
        want.references.remove(dropped[0])
    elif kind == "drop":
        what, name, _on = groups
        if what == "TABLE":
            del want.tables[name]
            want.references[:] = [r for r in want.references if r.table != name]
            want.indexes = {k: v for k, v in want.indexes.items() if v[0] != name}
            want.triggers = {k: v for k, v in want.triggers.items() if v.table != name}
        elif what == "VIEW":
            del want.views[name]
            want.triggers = {k: v for k, v in want.triggers.items() if v.table != name}
        elif what == "INDEX":
            del want.indexes[name]
        elif what == "FUNCTION":
            del want.functions[name]
        else:
            del want.triggers[name]


def _table(name: str, body: str, references: list[Reference]) -> Table:
    """A CREATE TABLE's columns and constraints (one constraint a line), its references
    added to ``references``."""
    table = Table(name)
    for raw in body.splitlines():
        line = raw.split("--", 1)[0].strip().rstrip(",")
        if not line:
            continue
        table.checks += line.count("CHECK (")
        table.unique += line.count("PRIMARY KEY") + line.count("UNIQUE")
        words = line.split()
        if words[0] in _TABLE_CONSTRAINT:
            continue
        column = words[0]
        table.columns[column] = words[1]
        collation = _COLLATE.search(line)
        if collation:
            table.collations[column] = collation.group(1)
        if "PRIMARY KEY" in line:
            table.key = column
        for target, target_column in _REFERENCE.findall(line):
            references.append(Reference(name, column, target, target_column))
    return table


#: How a check reads a long result: ``(statement, args) -> rows`` (a server-side cursor).
Stream = Callable[[str, Any], Iterable[Any]]


def problems(conn: Any, check: str, stream: Stream | None = None) -> Iterator[str]:
    """What one of :data:`CHECKS` finds wrong with the store's storage in the database;
    ``stream`` reads the rows of the checks that read every row (default: all at once)."""
    if check == "foreign_keys":
        yield from _foreign_keys(conn)
    elif check == "pages":
        read = stream or (lambda statement, args: conn.execute(statement, args).fetchall())
        statement = sql.CHECK_PAGE_SHAPES.format(schema=schema._ident(schema.SCHEMA))
        yield from page_problems(read(statement, ()))
    elif check == "schema":
        yield from _schema(conn)
    else:
        raise ValueError(f"no PostgreSQL check {check!r}")


def page_problems(rows: Iterable[tuple[Any, ...]]) -> Iterator[str]:
    """What is wrong with the pages, in seq order: rows of
    :data:`~agui_store.backends.postgres.sql.CHECK_PAGE_SHAPES`."""
    reach: tuple[int, int] | None = None  # the page reaching furthest so far: (first, last)
    for first, run, last, types, payloads, plain, has_null, batch, b_first, b_last in rows:
        page = f"the page of run #{run} at seq {first}..{last}"
        size = last - first + 1
        if not (types == payloads == size):
            yield (
                f"{page} holds {types} types and {payloads} payloads for its {size} seqs: the "
                "events view shows other events than the range says"
            )
        if not plain:
            yield f"{page} holds arrays that are not one-dimensional from index 1"
        if has_null:
            yield f"{page} holds a NULL type or payload"
        if reach is not None and first <= reach[1]:
            yield (
                f"{page} overlaps the page at seq {reach[0]}..{reach[1]}: seq {first}.."
                f"{min(last, reach[1])} are stored twice"
            )
        if batch is not None and last > b_last:
            yield (
                f"{page} reaches past the end of batch #{batch} (seq {b_first}..{b_last}), "
                "where its first event is: the store writes a page within one batch"
            )
        if reach is None or last > reach[1]:
            reach = (first, last)


def _words(text: str) -> str:
    return " ".join(text.split())


def _unqualified(definition: str) -> str:
    """A definition PostgreSQL printed, without the schema's name before the names in it."""
    return _words(definition.replace(f'"{schema.SCHEMA}".', "").replace(f"{schema.SCHEMA}.", ""))


def _shorten(text: str, width: int = 120) -> str:
    text = _words(text)
    return text if len(text) <= width else text[: width - 3] + "..."


def _present(conn: Any) -> set[str]:
    return {str(row[0]) for row in conn.execute(sql.CHECK_COLUMNS, {"schema": schema.SCHEMA})}


#: Tables whose rows are named as a view shows them: ``table -> (view, key)``. A page's
#: orphaned events are named one by one, as SQLite names its ``events`` rows.
_SHOWN_AS = {"event_pages": ("events", "seq")}


def _foreign_keys(conn: Any) -> Iterator[str]:
    want = expected()
    present = _present(conn)
    where = schema._ident(schema.SCHEMA)
    for ref in sorted(want.references, key=lambda r: (r.table, r.column)):
        if ref.table not in present or ref.target not in present:
            continue  # the schema check reports the missing table
        table, key = _SHOWN_AS.get(ref.table, (ref.table, want.tables[ref.table].key))
        statement = sql.CHECK_ORPHANS.format(
            key=f"t.{key}" if key else "NULL",
            schema=where,
            table=table,
            column=ref.column,
            target=ref.target,
            target_column=ref.target_column,
        )
        for pk, value in conn.execute(statement).fetchall():
            if pk is None or not isinstance(pk, int):
                yield f"a {table} row names a missing {ref.target} row (through {ref.column})"
            else:
                yield (
                    f"{table} row {pk}: {ref.column} = {quote(value)} names no row of "
                    f"{ref.target}"
                )


def _schema(conn: Any) -> Iterator[str]:
    version = str(schema.SCHEMA_VERSION)
    meta = dict(conn.execute(sql.CHECK_META.format(schema=schema._ident(schema.SCHEMA))).fetchall())
    if meta.get("application") != schema.APPLICATION:
        yield (
            f"meta names application {quote(meta.get('application'))}, not "
            f"{schema.APPLICATION!r}: the schema does not say it is an agui-store's"
        )
    if meta.get("schema_version") != version:
        yield (
            f"schema version (meta) is {meta.get('schema_version')}, but this agui-store "
            f"reads and writes version {version}"
        )
        return  # the objects to expect depend on the version
    want = expected()
    found_columns: dict[str, dict[str, str]] = {}
    found_collations: dict[tuple[str, str], str | None] = {}
    for table, column, kind, collation in conn.execute(
        sql.CHECK_COLUMNS, {"schema": schema.SCHEMA}
    ).fetchall():
        found_columns.setdefault(str(table), {})[str(column)] = str(kind)
        found_collations[(str(table), str(column))] = collation
    for name, table in want.tables.items():
        columns = found_columns.get(name)
        if columns is None:
            yield f"table {name} is missing"
            continue
        for column, kind in table.columns.items():
            if column not in columns:
                yield f"table {name} has no column {column}"
            elif columns[column] != kind:
                yield (
                    f"column {name}.{column} is {columns[column]}, where schema version "
                    f"{version} defines {kind}"
                )
            elif column in table.collations and (
                found_collations.get((name, column)) != table.collations[column]
            ):
                yield (
                    f"column {name}.{column} collates by "
                    f"{quote(found_collations.get((name, column)))}, where schema version "
                    f"{version} defines {table.collations[column]!r} (the store relies on "
                    "byte order: run-id prefixes, sorted ids)"
                )
        for column in columns.keys() - table.columns.keys():
            yield (
                f"table {name} has column {column}, which schema version {version} does not "
                "define"
            )
    yield from _constraints(conn, want, found_columns.keys())
    found_indexes = {
        str(name): (str(table), _unqualified(str(definition)))
        for table, name, definition in conn.execute(sql.CHECK_INDEXES, {"schema": schema.SCHEMA})
    }
    for name, (_, definition) in sorted(want.indexes.items()):
        if name not in found_indexes:
            yield f"index {name} is missing"
        elif found_indexes[name][1] != definition:
            yield (
                f"index {name} is not what schema version {version} defines (found: "
                f"{_shorten(found_indexes[name][1])})"
            )
    found_views = {
        str(name): tuple(columns)
        for name, columns in conn.execute(sql.CHECK_VIEWS, {"schema": schema.SCHEMA}).fetchall()
    }
    for name, view_columns in sorted(want.views.items()):
        if name not in found_views:
            yield f"view {name} is missing: its rows can no longer be read or edited by SQL"
        elif found_views[name] != view_columns:
            yield (
                f"view {name} has columns {', '.join(found_views[name])}, where schema version "
                f"{version} defines {', '.join(view_columns)}"
            )
    yield from _triggers(conn, want)
    functions = {
        str(name): _words(str(body))
        for name, body in conn.execute(sql.CHECK_FUNCTIONS, {"schema": schema.SCHEMA})
    }
    for name, body in sorted(want.functions.items()):
        if name not in functions:
            users = ", ".join(sorted(t.name for t in want.triggers.values() if t.function == name))
            yield f"function {name} is missing: triggers {users} have nothing to run"
        elif functions[name] != body:
            yield (
                f"function {name} is not what schema version {version} defines (found: "
                f"{_shorten(functions[name])})"
            )


def _constraints(conn: Any, want: Expected, tables: Any) -> Iterator[str]:
    version = schema.SCHEMA_VERSION
    checks: dict[str, int] = {}
    unique: dict[str, int] = {}
    references: set[tuple[str, str, str]] = set()
    for table, name, kind, validated, column, target in conn.execute(
        sql.CHECK_CONSTRAINTS, {"schema": schema.SCHEMA}
    ).fetchall():
        if kind == "c":
            checks[table] = checks.get(table, 0) + 1
        elif kind in ("p", "u"):
            unique[table] = unique.get(table, 0) + 1
        elif kind == "f":
            references.add((str(table), str(column), str(target)))
        if not validated:
            yield (
                f"constraint {name} of {table} is NOT VALID: rows written before it may "
                "break it"
            )
    for ref in want.references:
        if ref.table in tables and (ref.table, ref.column, ref.target) not in references:
            yield (
                f"the foreign key {ref.table}.{ref.column} -> {ref.target}.{ref.target_column} "
                "is missing: the server no longer refuses rows that name no row"
            )
    for name, table in want.tables.items():
        if name not in tables:
            continue
        if checks.get(name, 0) != table.checks:
            yield (
                f"table {name} has {checks.get(name, 0)} CHECK constraints, where schema "
                f"version {version} defines {table.checks}"
            )
        if unique.get(name, 0) != table.unique:
            yield (
                f"table {name} has {unique.get(name, 0)} primary key and unique constraints, "
                f"where schema version {version} defines {table.unique}"
            )


def _triggers(conn: Any, want: Expected) -> Iterator[str]:
    version = schema.SCHEMA_VERSION
    found: dict[str, tuple[str, str]] = {}
    unenforced: set[str] = set()
    for table, name, enabled, internal, definition in conn.execute(
        sql.CHECK_TRIGGERS, {"schema": schema.SCHEMA}
    ).fetchall():
        if internal:  # a foreign key's own: disabled, the server no longer checks it
            if enabled == "D":
                unenforced.add(str(table))
            continue
        found[str(name)] = (str(enabled), _unqualified(str(definition)))
    for table in sorted(unenforced):
        yield (
            f"the foreign keys of {table} are not enforced: their triggers are disabled "
            "(ALTER TABLE ... DISABLE TRIGGER ALL)"
        )
    for name, trigger in sorted(want.triggers.items()):
        refused = " OR ".join(e for e in trigger.events)
        if trigger.timing == "INSTEAD OF":  # the events view's: carries SQL by hand to pages
            what = f"{refused} of {trigger.table} by hand no longer reaches what it shows"
        else:
            what = f"{_REFUSED.get(refused, refused)} of {trigger.table}"
            what += " are no longer refused" if " and " in what else " is no longer refused"
        if name not in found:
            yield f"trigger {name} is missing: {what}"
            continue
        enabled, definition = found[name]
        if definition != trigger.definition:
            yield (
                f"trigger {name} is not what schema version {version} defines (found: "
                f"{_shorten(definition)})"
            )
        if enabled == "D":
            yield f"trigger {name} is disabled: {what}"
        elif enabled == "R":
            yield f"trigger {name} fires only in replica sessions: {what}"
