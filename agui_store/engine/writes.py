"""The store's write paths: appends, imports, deriving what appends left for later, and
writing checkpoints, over what one store remembers between calls (its
:class:`~agui_store.engine.cache.Memory`).

Each runs inside a write transaction the caller holds, and first asks the database whether
anyone else wrote since this store's last write (:meth:`Memory.notice_other_writes`), so
that what it remembers is used only while it is true.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agui_store.codec import ingest
from agui_store.engine import (
    cache,
    checkpoints,
    derivation,
    gc_pause,
    intake,
    placement,
    port,
    verified,
)
from agui_store.errors import CorruptStoreError, InvalidEventError
from agui_store.records import AppendResult, ImportResult

#: The largest ``max_depth`` a store takes: ``json.dumps``, msgspec and the CLI recurse once
#: per level, and near 1,000 levels (Python's recursion limit) even ``append`` failed with
#: a RecursionError; 512 leaves the caller's own stack room.
MAX_DEPTH_LIMIT = 512

#: The default ``checkpoint_events``: ``append`` writes a run's checkpoint when the runs since
#: the last one on its lineage hold at least this many events, so 1 checkpoints every
#: complete run. The thread's newest run, what a reconnecting client restores, is then
#: always checkpointed; a larger value makes appends cheaper (a checkpoint every few runs)
#: and a checkout of a run between two checkpoints replay from the earlier one (which first
#: indexes its whole view). ``bench_append`` and ``bench_checkout`` measure both sides.
CHECKPOINT_EVENTS = 1


#: An import appends batches of whole runs of about this many events (or bytes of JSON);
#: a run longer than four times that is cut, and continued by the next batch.
IMPORT_BATCH_EVENTS = 1000
IMPORT_BATCH_BYTES = 2 * 1024 * 1024

#: A rebuild checks the log of this many runs at a time against their hashes (their events
#: are read, not decoded).
REBUILD_VERIFY_RUNS = 256


class Writes:
    """One store's write paths and the memory they share.

    ``where`` names the store in errors; the limits and derivation options are the
    store's (see :class:`agui_store.Store`)."""

    def __init__(
        self,
        where: str,
        *,
        max_event_bytes: int,
        max_depth: int,
        checkpoint_events: int,
        derive_on_append: bool,
    ) -> None:
        self.memory = cache.Memory(derive_on_append)
        self.intake = intake.Intake(self.memory, max_event_bytes, max_depth)
        self.deriver = derivation.Deriver(self.memory, checkpoint_events)
        self.placement = placement.Placement(
            self.memory,
            self.deriver,
            where=where,
            max_depth=max_depth,
            max_event_bytes=max_event_bytes,
            derive_on_append=derive_on_append,
        )

    def read_batch(self, events: Any, **options: Any) -> intake.Batch:
        """Read and check what ``Store.append`` is handed, before any transaction:
        :meth:`agui_store.engine.intake.Intake.read_batch`."""
        return self.intake.read_batch(events, **options)

    def read_file(self, source: Any, thread_id: str | None) -> Iterator[ingest.IncomingEvent]:
        """The events of what ``Store.import_file`` is handed (a path, or a binary or text
        file object), read lazily a chunk at a time with the store's limits
        (:func:`agui_store.codec.ingest.iter_events`); ``thread_id`` checked before any
        transaction."""
        intake.storable(thread_id, path="thread_id")
        if isinstance(source, str):
            source = Path(source)
        return ingest.iter_events(
            source, max_event_bytes=self.intake.max_event_bytes, max_depth=self.intake.max_depth
        )

    def forget(self) -> None:
        """Drop what the store remembers of the database (a write failed, or another
        writer's rows arrived past the rules appends keep)."""
        self.memory.forget()

    def after_fork(self, same_process: bool) -> None:
        """In a forked child: what the parent remembered no longer holds."""
        self.memory.after_fork(same_process)

    def close(self) -> None:
        """Release what the store remembers; the store is closing."""
        self.memory.close()

    def append(self, tx: port.Writing, batch: intake.Batch) -> AppendResult:
        """Place a batch read by :meth:`read_batch`."""
        self.memory.notice_other_writes(tx, batch.thread_id)
        result = self.placement.place(tx, batch)
        self.memory.remember_version(tx)
        return result

    def import_events(
        self,
        tx: port.Writing,
        events: Iterator[ingest.IncomingEvent],
        thread_id: str | None,
        check_sequence: bool,
    ) -> ImportResult:
        """Append a file's events in batches of whole runs (:func:`intake.import_batches`),
        keeping memory bounded between them; an error names the event's index in the file."""
        batches = intake.import_batches(events, thread_id, IMPORT_BATCH_EVENTS, IMPORT_BATCH_BYTES)
        count = runs = 0
        first_seq: int | None = None
        last_seq: int | None = None
        self.memory.notice_other_writes(tx)
        for offset, batch, batch_thread, batch_run in batches:
            try:
                with gc_pause.paused():  # a batch at a time, as an append
                    types = self.intake.validated(batch)
                    thread = intake.thread_of_batch(batch, types, batch_thread, None)
                    result = self.placement.place(
                        tx,
                        intake.Batch(
                            batch, types, thread, check_sequence=check_sequence, run_id=batch_run
                        ),
                    )
            except InvalidEventError as e:
                raise intake.counted_from(e, offset) from None
            count += result.event_count
            runs += len(result.new_run_ids)
            first_seq = first_seq if first_seq is not None else result.first_seq
            last_seq = result.last_seq
            self.memory.keep_caches_small(result.thread_id)
        self.memory.remember_version(tx)
        return ImportResult(count, runs, first_seq, last_seq)

    def derive(self, tx: port.Writing, threads: Sequence[int | None]) -> int:
        """Derive what appends left for later in ``threads`` (``None``: every thread).
        Returns how many runs were derived."""
        self.memory.notice_other_writes(tx)
        derived = sum(self.deriver.derive_underived(tx, pk) for pk in threads)
        self.memory.remember_version(tx)
        return derived

    def compact(
        self, tx: port.Writing, threads: Sequence[int | None], run_pks: Iterable[int]
    ) -> int:
        """Write the checkpoints ``run_pks`` lack (after deriving what ``threads`` left for
        later). Returns how many were written."""
        self.memory.notice_other_writes(tx)
        return self.deriver.write_checkpoints(tx, threads, run_pks)

    def rebuild(self, tx: port.Writing, threads: Sequence[int]) -> int:
        """Drop what was derived in ``threads`` (their runs' checkpoints, lineage digests and
        search rows, with the blobs no other checkpoint uses) and derive it again from their
        logs, which are first checked against the hashes they were written with: a log
        edited since is refused, not derived from. Returns how many runs were derived."""
        self.memory.notice_other_writes(tx)
        runs = {thread_pk: tx.thread_run_pks(thread_pk) for thread_pk in threads}
        every = [pk for pks in runs.values() for pk in pks]
        for at in range(0, len(every), REBUILD_VERIFY_RUNS):
            verified.verify_logs(tx, every[at : at + REBUILD_VERIFY_RUNS])
        # The search rows first, with the words the index holds for them (not those their
        # messages give, which an edit of the index may not be): derived again below.
        tx.forget_search_as_held(list(threads))
        unlisted = False  # a checkpoint dropped whose blobs could not be listed
        for thread_pk, pks in runs.items():
            dropped: set[int] = set()
            for pk in pks:  # in key order: a lineage's root comes before the runs below it
                if pk in dropped:
                    continue
                try:
                    dropped.update(checkpoints.drop_derived_from(tx, pk))
                except CorruptStoreError:
                    # A checkpoint too damaged to list its blobs (nothing was dropped yet):
                    # its rows go all the same, and its blobs with every other one that no
                    # checkpoint uses once all is derived again.
                    dropped.update(tx.drop_derived_from(pk))
                    unlisted = True
            complete = [pk for pk in pks if verified.status(tx, pk) != "incomplete"]
            if complete:
                self.deriver.leave_underived(tx, thread_pk, complete)
        derived = sum(self.deriver.derive_underived(tx, pk) for pk in threads)
        if unlisted:
            checkpoints.delete_unreferenced_blobs(tx)
        self.memory.remember_version(tx)
        return derived
