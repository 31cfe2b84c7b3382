"""The steps of PostgreSQL migrations computed in Python after their SQL, run inside
:func:`~agui_store.backends.postgres.schema.install`'s transaction (the backend's
``backfill`` hands them the connection)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agui_store.backends.postgres import sql
from agui_store.backends.postgres.transaction import PostgresTransaction
from agui_store.engine import checkpoints, log_hashes


def rehash(conn: Any) -> None:
    """Version 7: every run's, batch's and checkpoint's hash recomputed from the log, now
    that a batch's hash covers its events' positions, not the store's sequence numbers
    (:func:`agui_store.engine.log_hashes.rehash`). The append-only triggers of runs and
    batches are disabled for the two updates and enabled again in the same transaction
    (an install runs as the tables' owner)."""
    found = log_hashes.rehash(PostgresTransaction(conn))
    checkpoints_at = [
        (int(run), bytes(run_hash))
        for run, run_hash in conn.execute(sql.CHECKPOINT_RUN_HASHES).fetchall()
        if run_hash is not None
    ]
    with conn.cursor() as cursor:
        cursor.execute(sql.LIFT_RUN_GUARDS)
        cursor.executemany(sql.REHASH_RUN, found.runs)
        cursor.executemany(sql.REHASH_BATCH, found.batches)
        cursor.execute(sql.RESTORE_RUN_GUARDS)
        cursor.executemany(
            sql.REHASH_CHECKPOINT,
            [
                (found.renamed[run][old], run)
                for run, old in checkpoints_at
                if old in found.renamed.get(run, {})
            ],
        )


def delete_unreferenced_blobs(conn: Any) -> None:
    """Version 11: the blobs no checkpoint refers to, deleted
    (:func:`agui_store.engine.checkpoints.delete_unreferenced_blobs`)."""
    tx = PostgresTransaction(conn)
    checkpoints.delete_unreferenced_blobs(tx)
    tx.flush()


#: The steps by version.
BACKFILLS: dict[int, Callable[[Any], None]] = {7: rehash, 11: delete_unreferenced_blobs}
