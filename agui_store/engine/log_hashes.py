"""The content hashes in a store file, computed again from its log (see
:mod:`agui_store.history.hashing`).

One pass over runs and batches in the order they were written computes what every hash
should be. Its users:

- the migration to schema version 8 writes them, for files written before hashes existed
  (:mod:`agui_store.backends.sqlite.migrations`);
- the migrations that rehash a store written when a batch's hash covered the store's own
  sequence numbers (:func:`rehash`; SQLite's version 15, PostgreSQL's version 7): every run,
  batch and checkpoint gets the hash of its content, which another store holding the same
  runs computes alike;
- ``check()`` compares them with what is stored, link by link: each run's input against its
  input digest, its parent's hash when it was placed against the one it recorded, its record
  against its start hash, each batch's events against the hash after that batch (chained from
  the stored hash before it). An edit is then reported where it was made, not at every run
  below it; a rewrite that recomputed a run's own hashes still breaks the link to the runs
  below it (their recorded parent hash), as in git.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agui_store.engine.port import Inspecting
from agui_store.history import hashing


@dataclass
class BatchLink:
    """One batch's hash: the one stored, and the one computed from the log."""

    pk: int
    first_seq: int
    last_seq: int
    stored: bytes | None
    computed: bytes  # the whole chain recomputed from the log
    verified: bool  # stored == chain(the stored hash before it, this batch's events)


@dataclass
class RunLink:
    """One run's hashes: recomputed from the log, and whether each stored link holds."""

    pk: int
    thread_pk: int
    thread_id: str | None
    run_id: str
    parent: int | None
    stored_parent: bytes | None
    stored_input: bytes | None
    stored_start: bytes | None
    input_hash: bytes | None = None  # recomputed
    parent_hash: bytes | None = None  # recomputed: the parent's whole-chain hash then
    start_hash: bytes = b""  # recomputed
    parent_stored_then: bytes | None = None  # the parent's stored hash when it was placed
    start_verified: bool = True  # stored start == start(record, stored parent, stored input)
    parent_unknown: bool = False  # the parent's hash cannot be computed (a lineage cycle)
    batches: list[BatchLink] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)

    @property
    def input_verified(self) -> bool:
        """Whether the stored input digest is the one its input gives."""
        return self.stored_input == self.input_hash

    @property
    def parent_verified(self) -> bool:
        """Whether the parent hash the run recorded is the one its parent had then."""
        return self.parent_unknown or self.stored_parent == self.parent_stored_then


@dataclass
class Rehash:
    """The rows a rehash writes: what every stored hash becomes.

    Attributes:
        runs: ``(parent_hash, input_hash, start_hash, run pk)`` of every run.
        batches: ``(hash, batch pk)`` of every batch.
        renamed: each stored run hash (a run's start or a batch's), by run pk, with the hash
            that replaces it: a checkpoint's ``run_hash`` (the run's hash it was derived at)
            becomes the hash at the same point of the recomputed chain.
    """

    runs: list[tuple[bytes | None, bytes | None, bytes, int]]
    batches: list[tuple[bytes, int]]
    renamed: dict[int, dict[bytes, bytes]]


def rehash(tx: Inspecting) -> Rehash:
    """What every stored hash becomes when recomputed from the log (inside a migration's
    transaction of any backend, before it writes the rows)."""
    links = compute(tx)
    runs: list[tuple[bytes | None, bytes | None, bytes, int]] = []
    batches: list[tuple[bytes, int]] = []
    renamed: dict[int, dict[bytes, bytes]] = {}
    for link in links.values():
        runs.append((link.parent_hash, link.input_hash, link.start_hash, link.pk))
        names = renamed[link.pk] = {}
        if link.stored_start is not None:
            names[link.stored_start] = link.start_hash
        for batch in link.batches:
            batches.append((batch.computed, batch.pk))
            if batch.stored is not None:
                names[batch.stored] = batch.computed
    return Rehash(runs, batches, renamed)


def _hex(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def compute(tx: Inspecting) -> dict[int, RunLink]:
    """Every run's hashes, recomputed from the log in the order it was written, with each
    stored link verified (inside a read transaction of any backend)."""
    runs: dict[int, RunLink] = {}
    for row in tx.hashed_runs():
        link = RunLink(
            int(row.pk),
            int(row.thread_pk),
            None if row.thread_id is None else str(row.thread_id),
            str(row.run_id),
            None if row.parent is None else int(row.parent),
            _hex(row.parent_hash),
            _hex(row.input_hash),
            _hex(row.start_hash),
        )
        link.input_hash = hashing.input_digest(row.input, row.input_refs)
        link.header = {
            "thread_id": link.thread_id or "",
            "run_id": link.run_id,
            "lineage": str(row.lineage),
            "sent_parent_run_id": row.sent_parent,
            "synthetic": bool(row.synthetic),
            "created_at": int(row.created_at),
        }
        runs[link.pk] = link
    # The newest hash of each run as batches are met in the order they were written: the
    # recomputed one and the stored one.
    current: dict[int, bytes] = {}
    current_stored: dict[int, bytes | None] = {}
    placed: set[int] = set()

    def place(link: RunLink) -> None:
        placed.add(link.pk)
        parent = runs.get(link.parent) if link.parent is not None else None
        if parent is not None and parent.pk not in placed:
            place(parent)  # a parent with no batch before its child (a hand-made row)
        if parent is not None and parent.pk in current:
            link.parent_hash = current[parent.pk]
            link.parent_stored_then = current_stored[parent.pk]
        elif parent is not None:  # a lineage cycle (the lineage check reports it)
            link.parent_unknown = True
        link.start_hash = hashing.start(
            **link.header, parent_hash=link.parent_hash, input_hash=link.input_hash
        )
        link.start_verified = link.stored_start == hashing.start(
            **link.header, parent_hash=link.stored_parent, input_hash=link.stored_input
        )
        current[link.pk] = link.start_hash
        current_stored[link.pk] = link.stored_start

    for batch in tx.hashed_batches():
        found = runs.get(int(batch.run_pk))
        if found is None:
            continue  # the foreign-key check reports it
        link = found
        if link.pk not in placed:
            place(link)
        first, last = int(batch.first_seq), int(batch.last_seq)
        events = tx.batch_events(first, last, link.pk)
        digest = hashing.batch_digest(events, batch.outcome, int(batch.appended_at))
        computed = hashing.chain(current[link.pk], digest)
        previous = current_stored[link.pk]
        stored_hash = _hex(batch.hash)
        verified = (
            stored_hash is not None
            and previous is not None
            and stored_hash == hashing.chain(previous, digest)
        )
        link.batches.append(
            BatchLink(int(batch.id), first, last, stored_hash, computed, verified)
        )
        current[link.pk] = computed
        current_stored[link.pk] = stored_hash
    for link in runs.values():
        if link.pk not in placed:
            place(link)
    return runs
