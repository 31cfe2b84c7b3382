"""Bringing an SQLite store file to the current schema: the migrations of
:mod:`agui_store.backends.sqlite.schema`, applied in order, and the backfills whose values
are computed in Python.

The schema version is SQLite's ``PRAGMA user_version``; the caller holds the write lock, so
the version read here is the one that holds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import apsw

from agui_store import errors
from agui_store.backends import progress
from agui_store.backends.sqlite import schema, sql
from agui_store.backends.sqlite.errors import Conn
from agui_store.backends.sqlite.transaction import SqliteTransaction, lifted
from agui_store.engine import checkpoints, derivation, log_hashes

_T = TypeVar("_T")


def schema_version(conn: Conn) -> int:
    """The schema version the file records (0: a new, empty file)."""
    rows = conn.execute(sql.USER_VERSION).fetchall()  # done with: a VACUUM may follow
    return int(rows[0][0]) if rows else 0


def migrate(conn: Conn, path: str) -> None:
    """Bring the file at ``path`` to :data:`~agui_store.backends.sqlite.schema.SCHEMA_VERSION`,
    or create it there when it is empty. Runs inside the caller's write transaction, since
    another process may be creating or migrating the same file: the version read here is the
    one that holds."""
    version = schema_version(conn)
    _refuse_unmigratable(conn, version, path)
    for target in range(version + 1, schema.SCHEMA_VERSION + 1):
        conn.execute(schema.MIGRATIONS[target])
        if target in schema.BACKFILLS:
            _BACKFILLS[target](conn)
    if version < schema.SEARCH_INDEX_VERSION:
        # Derived data, indexed once every migration of the log ran: indexing reads runs
        # through their hashes, which a later version may recompute (version 15).
        _backfill_search(conn, path)
    conn.execute(sql.set_application_id(schema.APPLICATION_ID))
    conn.execute(sql.set_user_version(schema.SCHEMA_VERSION))


def refuse_migrated_since(conn: Conn, path: str) -> None:
    """Refuse, under the write lock, to write to a file a newer release migrated while this
    connection had it open: what this release writes (the search index's words, for one)
    would be of the version it left, which the newer one neither finds nor checks clean."""
    version = schema_version(conn)
    if version > schema.SCHEMA_VERSION:
        raise errors.SchemaVersionError(
            f"{path} was migrated to schema version {version} by a newer agui-store while "
            f"this one (schema version {schema.SCHEMA_VERSION}) had it open; nothing was "
            "written: open it with the newer agui-store"
        )


def refuse_unmigratable(conn: Conn, path: str) -> None:
    """Refuse, before anything writes to the file (the switch to WAL, the rewrite of an old
    version, a migration), a file this release cannot migrate: one of a newer version, or
    one whose tables are not those of the version it records. :func:`migrate` asks again
    under the write lock, where another process may have migrated the file meanwhile.
    Its reads are one snapshot: another process may be creating or migrating the file, and
    a version read before its commit beside tables read after it tells of neither state."""
    conn.execute("BEGIN")
    try:
        _refuse_unmigratable(conn, schema_version(conn), path)
    finally:
        # A failed read (an I/O error) may have ended the transaction already: a COMMIT
        # then fails too, and its error would hide the one that tells what went wrong.
        if not conn.getautocommit():
            conn.execute("COMMIT")


def _refuse_unmigratable(conn: Conn, version: int, path: str) -> None:
    if version == 0 and conn.execute(sql.SCHEMA_OBJECT_COUNT).fetchone()[0]:
        if conn.execute(sql.APPLICATION_ID).fetchone()[0] != schema.APPLICATION_ID:
            raise errors.NotAStoreError(
                f"{path} is an SQLite database of another application (it has tables "
                "but is not an agui-store file); give a new path"
            )
        # agui-store records the version in the transaction that creates the tables.
        raise errors.SchemaVersionError(
            f"{path} is marked as an agui-store file and holds tables, but records no schema "
            "version (user_version 0): it was changed outside agui-store, and is left as it "
            "is; nothing was changed"
        )
    if version > schema.SCHEMA_VERSION:
        raise errors.SchemaVersionError(
            f"{path} was written by a newer agui-store (schema version {version}; this one "
            f"reads up to {schema.SCHEMA_VERSION}): upgrade agui-store to open it"
        )
    if 0 < version < schema.SCHEMA_VERSION:
        _refuse_another_layout(conn, version, path)


def _refuse_another_layout(conn: Conn, version: int, path: str) -> None:
    """Refuse to migrate a file whose tables are not those of the version it records: a
    development build between releases may have given a version number the layout a
    later one changed. Migrating it would fail halfway or lose rows; it is left as it is.
    The tables and views the version's migrations make, column for column, are what the
    file must hold (more is allowed: a table another tool added). Of those refused, a file
    holding tables of this release that the version did not have, as this release's
    migrations state them, had its version set back outside agui-store (``PRAGMA
    user_version``), and is told so (a development build's table, of the same columns and
    other constraints, is not one of them)."""
    missing = sorted(_layout(version) - _layout_of(conn))
    if not missing:
        return
    later = sorted(
        name for name, _sql in (_made(schema.SCHEMA_VERSION) - _made(version)) & _made_of(conn)
    )
    if later:
        raise errors.SchemaVersionError(
            f"{path} records schema version {version}, but holds tables of a later one "
            f"({', '.join(later[:4])}{', ...' if len(later) > 4 else ''}): its version was set "
            "back outside agui-store; nothing was changed. If this release wrote it, record "
            f"its version again (its user_version set to {schema.SCHEMA_VERSION}), then run "
            "agui-store check"
        )
    named = ", ".join(name for _kind, name, _columns in missing[:4])
    raise errors.SchemaVersionError(
        f"{path} records schema version {version}, but its tables are not that "
        f"version's ({named}{', ...' if len(missing) > 4 else ''}): a development build "
        f"of agui-store wrote it, whose version {version} had another layout, and this "
        "release cannot migrate it; nothing was changed. Open it with the build that "
        "wrote it and export its threads, then import them here"
    )


@functools.cache
def _layout(version: int) -> frozenset[tuple[str, str, str]]:
    """What a file at ``version`` holds, as the migrations up to it make it."""
    return _migrated_in_memory(version, _layout_of)


@functools.cache
def _made(version: int) -> frozenset[tuple[str, str]]:
    """``(name, statement)`` of every table and view the migrations up to ``version`` make,
    as ``sqlite_schema`` keeps the statement."""
    return _migrated_in_memory(version, _made_of)


def _migrated_in_memory(version: int, read: Callable[[Conn], _T]) -> _T:
    """``read`` of an in-memory database the migrations up to ``version`` made."""
    made = apsw.Connection(":memory:")
    try:
        for step in range(1, version + 1):
            made.execute(schema.MIGRATIONS[step])
        return read(made)
    finally:
        made.close()


def _made_of(conn: Conn) -> frozenset[tuple[str, str]]:
    return frozenset((str(n), str(s)) for n, s in conn.execute(sql.SCHEMA_STATEMENTS))


def _layout_of(conn: Conn) -> frozenset[tuple[str, str, str]]:
    """``(kind, name, columns)`` of every table and view a file holds, their columns in
    order, joined by commas."""
    return frozenset(
        (str(kind), str(name), ",".join(str(c[1]) for c in conn.execute(sql.table_columns(name))))
        for kind, name in conn.execute(sql.SCHEMA_TABLES).fetchall()
    )


def rewrite(conn: Conn) -> None:
    """The one-time rewrite of a file written before ``secure_delete`` was on (schema
    versions before :data:`~agui_store.backends.sqlite.schema.REWRITE_BEFORE`): ``VACUUM``
    builds the file again from its live rows, so what earlier versions deleted (moved
    branches, dropped checkpoints) no longer lingers in free pages; the WAL is then emptied.
    Outside a transaction (``VACUUM`` cannot run in one), before the migration; a second
    process doing the same meanwhile only repeats it."""
    conn.execute(sql.VACUUM)
    conn.execute(sql.WAL_CHECKPOINT_TRUNCATE).fetchall()


def _backfill_hashes(conn: Conn) -> None:
    """Version 8: write every hash computed from the log into the columns the migration just
    added, with the append-only triggers on runs and batches lifted meanwhile."""
    tx = SqliteTransaction(conn)
    links = log_hashes.compute(tx)
    with lifted(conn, ("runs", "batches"), "update"):
        for link in links.values():
            conn.execute(
                sql.BACKFILL_RUN_HASHES,
                (link.parent_hash, link.input_hash, link.start_hash, link.pk),
            )
            conn.executemany(
                sql.BACKFILL_BATCH_HASH, [(b.computed, b.pk) for b in link.batches]
            )
    final = {
        pk: (link.batches[-1].computed if link.batches else link.start_hash)
        for pk, link in links.items()
    }
    layout = {str(r[1]) for r in conn.execute(sql.CHECKPOINT_COLUMNS)}
    if "tail" not in layout:
        # Checkpoints laid out as before version 10: that migration drops them (derived
        # data, derived again as chunks), so they get no digests now.
        return
    for (run_pk,) in conn.execute(sql.CHECKPOINT_RUNS).fetchall():
        view_hash = checkpoints.stored_view_digest(tx, int(run_pk))[0]
        conn.execute(sql.BACKFILL_CHECKPOINT_HASHES, (final.get(run_pk), view_hash, run_pk))


def _backfill_search(conn: Conn, path: str) -> None:
    """Index every complete run's messages for search (the tables are empty: new in version
    13, emptied by the versions whose words changed, :data:`schema.SEARCH_INDEX_VERSION`),
    with a progress bar when stderr is a terminal."""
    with progress.on_terminal(f"indexing {path} for search", unit="runs") as shown:
        derivation.index_every_run(SqliteTransaction(conn), shown)


def _rehash(conn: Conn) -> None:
    """Version 15: every run's, batch's and checkpoint's hash recomputed from the log, now
    that a batch's hash covers its events' positions, not the file's sequence numbers
    (:func:`agui_store.engine.log_hashes.rehash`), with the append-only triggers on runs and
    batches lifted meanwhile."""
    rehash = log_hashes.rehash(SqliteTransaction(conn))
    checkpoints_at = [
        (int(run), bytes(run_hash))
        for run, run_hash in conn.execute(sql.CHECKPOINT_RUN_HASHES).fetchall()
        if run_hash is not None
    ]
    with lifted(conn, ("runs", "batches"), "update"):
        conn.executemany(sql.BACKFILL_RUN_HASHES, rehash.runs)
        conn.executemany(sql.BACKFILL_BATCH_HASH, rehash.batches)
    conn.executemany(
        sql.REHASH_CHECKPOINT,
        [
            (rehash.renamed[run][old], run)
            for run, old in checkpoints_at
            if old in rehash.renamed.get(run, {})
        ],
    )


def _delete_unreferenced_blobs(conn: Conn) -> None:
    """Version 22: the blobs no checkpoint refers to, deleted
    (:func:`agui_store.engine.checkpoints.delete_unreferenced_blobs`)."""
    checkpoints.delete_unreferenced_blobs(SqliteTransaction(conn))


#: The migrations that compute values in Python after their SQL, by version.
_BACKFILLS = {8: _backfill_hashes, 15: _rehash, 22: _delete_unreferenced_blobs}
