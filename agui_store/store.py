"""The store: a lossless AG-UI event log with git-like run lineage, over a storage port.

``Store`` is the facade of verbs, written once for every backend (:mod:`agui_store.engine.port`;
SQLite in :mod:`agui_store.backends.sqlite`, PostgreSQL in :mod:`agui_store.backends.postgres`).
Each verb checks its arguments and delegates, in a transaction of the store's: reading what
``append`` is handed to :mod:`agui_store.engine.intake` (validation from
:mod:`agui_store.codec.ingest` and :mod:`agui_store.protocol.model`, resent request bodies from
:mod:`agui_store.history.resent_bodies`), placing a batch (runs, lineage, branches, open runs) to
:mod:`agui_store.engine.placement`, deriving views and checkpoints to
:mod:`agui_store.engine.derivation`, the read paths to :mod:`agui_store.engine.reads`, revisions to
:mod:`agui_store.engine.revisions`; what appends remember between calls is the store's
:class:`~agui_store.engine.cache.Memory`. This module holds the verbs, the store's lifecycle (its
lock, transactions, fork) and which backend a path names.
"""
from __future__ import annotations

import os
import threading
import uuid
import warnings
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agui_store import recording
from agui_store.backends.sqlite import SqliteBackend, connection
from agui_store.codec import ingest
from agui_store.engine import (
    arguments,
    cache,
    clock,
    derivation,
    gc_pause,
    intake,
    integrity,
    placement,
    port,
    reads,
    revisions,
)
from agui_store.engine.arguments import quote as _quote
from agui_store.engine.integrity import CheckReport
from agui_store.engine.revisions import DEFAULT_BRANCH, RESERVED_REFS, RunKey
from agui_store.errors import BranchError, InvalidArgumentError, InvalidEventError, RunNotFoundError
from agui_store.history import hashing, resume
from agui_store.history.diff import Diff, ViewChange, compare
from agui_store.history.normalize import expand_input
from agui_store.history.restore import View
from agui_store.records import (
    AppendResult,
    Branch,
    Checkout,
    ImportResult,
    Log,
    Run,
    Thread,
    when,
)

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


class Store:
    """An AG-UI conversation store: one SQLite file, or a PostgreSQL database. Open it with
    :func:`agui_store.open`.

    A ``Store`` may be shared between threads (calls are serialized); in a child process
    after ``fork()`` it reopens its file on first use.

    Options: ``busy_timeout_ms`` (how long a writer waits for another), ``max_event_bytes``
    and ``max_depth`` (limits on one event), ``checkpoint_events`` (events of replay
    between the checkpoints ``append`` writes; 1 writes one after every complete run),
    ``derive_on_append`` (``False``: ``append`` writes the log alone and leaves each
    complete run's derived data, its lineage digest and checkpoint, to :meth:`derive`,
    :meth:`compact` or the first lineage decision that needs it).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_ms: int = connection.DEFAULT_BUSY_TIMEOUT_MS,
        max_event_bytes: int = ingest.DEFAULT_MAX_EVENT_BYTES,
        max_depth: int = ingest.DEFAULT_MAX_DEPTH,
        checkpoint_events: int = CHECKPOINT_EVENTS,
        derive_on_append: bool = True,
    ) -> None:
        self.path = arguments.path_text(path) if path is not None else connection.default_path()
        self.busy_timeout_ms = arguments.positive_int(
            "busy_timeout_ms", busy_timeout_ms, minimum=0
        )
        self.max_event_bytes = arguments.positive_int("max_event_bytes", max_event_bytes)
        self.max_depth = arguments.positive_int("max_depth", max_depth, minimum=2)
        if max_depth > MAX_DEPTH_LIMIT:
            raise InvalidArgumentError(
                f"max_depth must be at most {MAX_DEPTH_LIMIT}, not {max_depth}: deeper values "
                "could not be read back (JSON encoders recurse once per level)"
            )
        if type(checkpoint_events) is not int or checkpoint_events < 1:
            raise InvalidArgumentError(
                f"checkpoint_events must be a positive integer, not {checkpoint_events!r}"
            )
        self.checkpoint_events = checkpoint_events  # see CHECKPOINT_EVENTS
        self.derive_on_append = bool(derive_on_append)
        self._lock = threading.RLock()
        self._backend: port.Backend = _backend_for(self.path, busy_timeout_ms)
        self.path = self._backend.where  # a URL is shown without its password
        self._pid = os.getpid()
        # What it remembers between calls (see agui_store.engine.cache).
        self._memory = cache.Memory(self.derive_on_append)
        self._intake = intake.Intake(self._memory, self.max_event_bytes, self.max_depth)
        self._deriver = derivation.Deriver(self._memory, self.checkpoint_events)
        self._placement = placement.Placement(
            self._memory,
            self._deriver,
            where=self.path,
            max_depth=self.max_depth,
            max_event_bytes=self.max_event_bytes,
            derive_on_append=self.derive_on_append,
        )
        # Last: a fork in another thread resets the stores in this set, whole ones only.
        _OPEN_STORES.add(self)

    # --- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file. Further calls raise."""
        with self._lock:
            self._backend.close()
            self._memory.resent.clear()  # the memory of what it read

    def __repr__(self) -> str:
        return f"<agui_store.Store {self.path!r}>"

    def _after_fork_in_child(self) -> None:
        """In a forked child: drop the parent's lock and its connection (the backend opens
        its own on first use) and what the parent remembered of the database."""
        self._lock = threading.RLock()
        self._memory.resent.after_fork()
        self._backend.after_fork()
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._memory.forget()

    @contextmanager
    def _reading(self) -> Iterator[port.Reading]:
        with self._lock, self._backend.reading() as tx:
            yield tx

    @contextmanager
    def _writing(self, thread_id: str | None = None) -> Iterator[port.Writing]:
        """A write transaction (of appends to ``thread_id`` alone, when given: see the
        port's ``writing``); what the store remembers of the database is dropped when it
        fails (the database is then as it was)."""
        with self._lock:
            try:
                with self._backend.writing(thread_id) as tx:
                    yield tx
            except BaseException:
                self._memory.forget()
                raise

    @contextmanager
    def _replicating(self) -> Iterator[port.Writing]:
        """The write transaction of :func:`agui_store.sync.copy`, which inserts runs as
        another store recorded them, beside the rules ``append`` applies: what this store
        remembers of the database is dropped after it, whether it commits or not."""
        try:
            with self._writing() as tx:
                yield tx
        finally:
            self._memory.forget()

    # --- append -------------------------------------------------------------------------

    @gc_pause.pausing  # its collections would only walk what the call is about to drop
    def append(
        self,
        events: Any,
        *,
        thread_id: str | None = None,
        input: Any = None,
        parent: str | None = None,
        branch: str | None = None,
        check_sequence: bool = True,
        run_id: str | None = None,
        scope: str | None = None,
    ) -> AppendResult:
        """Record events, atomically: the whole batch lands or nothing does.

        Args:
            events: dicts, JSON text/bytes (one event, an array or JSON Lines), SSE text,
                bytes or a file, official ``ag_ui.core`` events, or this library's structs.
            thread_id: the thread; needed only when the batch starts no run and more than
                one thread has an open run.
            input: the ``RunAgentInput`` the client sent for the run the batch opens.
            parent: explicit lineage parent (run id or ref) for the run the batch opens.
            branch: put the run the batch opens on this branch (created or advanced).
            check_sequence: ``False`` keeps well-formed but out-of-sequence streams (for
                recording buggy producers); events are still validated one by one.
            run_id: the run a batch that starts no run continues (several runs of a thread may
                stream at once: docs/design/behaviour.md#live-recording). Without it such a batch
                continues the thread's newest run, unless several runs of the thread are open.
                A batch that starts with a RUN_STARTED may name the run it starts. Without
                ``thread_id`` the run id finds its thread while it is unambiguous.
            scope: the owner writing (docs/design/behaviour.md#live-recording). A thread
                belongs to the scope that first wrote it; a scoped batch for a thread of another
                owner, or of none, is refused. ``None`` (the operator) writes anywhere; the
                threads it creates have no owner.

        Raises:
            InvalidEventError: naming the batch index, event type and JSON path, with the
                file left exactly as it was.
            RunNotFoundError: ``run_id`` names no run (of the thread).
            OpenRunsError: the batch starts no run, names none, and its thread has several
                open runs.
            ScopeError: the thread belongs to another owner than ``scope``.
        """
        batch = self._intake.read_batch(
            events,
            thread_id=thread_id,
            input=input,
            parent=parent,
            branch=branch,
            check_sequence=check_sequence,
            run_id=run_id,
            scope=scope,
        )
        with self._writing(batch.thread_id) as tx:
            self._memory.notice_other_writes(tx, batch.thread_id)
            result = self._placement.place(tx, batch)
            self._memory.remember_version(tx)
        return result

    def import_file(
        self,
        source: str | os.PathLike[str] | Any,
        *,
        thread_id: str | None = None,
        check_sequence: bool = True,
    ) -> ImportResult:
        """Record a JSON array, JSON Lines or SSE recording, whole or not at all, in memory
        that does not grow with the file.

        The file is read a chunk at a time (:func:`agui_store.codec.ingest.iter_events`) and
        appended in batches of whole runs, all inside one write transaction: a bad event
        near the end, a full disk or a killed process leave the store as it was. Each
        event is stored as its JSON text in the file. The result is what ``append`` of the
        file's events, one batch per stretch of one thread's runs, would give.

        Args:
            source: a path, or a binary (or text) file object.
            thread_id: the thread for events that start no run (as ``append``'s).
            check_sequence: as ``append``'s.

        Raises:
            InvalidEventError: naming the event's index in the file, its type and JSON
                path; nothing of the file is stored.
        """
        intake.storable(thread_id, path="thread_id")
        if isinstance(source, str):
            source = Path(source)
        events = ingest.iter_events(
            source, max_event_bytes=self.max_event_bytes, max_depth=self.max_depth
        )
        batches = intake.import_batches(events, thread_id, IMPORT_BATCH_EVENTS, IMPORT_BATCH_BYTES)
        count = runs = 0
        first_seq: int | None = None
        last_seq: int | None = None
        with self._writing() as tx:
            self._memory.notice_other_writes(tx)
            for offset, batch, batch_thread, batch_run in batches:
                try:
                    with gc_pause.paused():  # a batch at a time, as an append
                        types = self._intake.validated(batch)
                        thread = intake.thread_of_batch(batch, types, batch_thread, None)
                        result = self._placement.place(
                            tx,
                            intake.Batch(
                                batch, types, thread, check_sequence=check_sequence,
                                run_id=batch_run,
                            ),
                        )
                except InvalidEventError as e:
                    raise intake.counted_from(e, offset) from None
                count += result.event_count
                runs += len(result.new_run_ids)
                first_seq = first_seq if first_seq is not None else result.first_seq
                last_seq = result.last_seq
                self._memory.keep_caches_small(result.thread_id)
            self._memory.remember_version(tx)
        return ImportResult(count, runs, first_seq, last_seq)

    # --- checkpoints --------------------------------------------------------------------

    def derive(self, thread_id: str | None = None, *, scope: str | None = None) -> int:
        """Derive what appends left for later (``derive_on_append=False``), in a thread or
        everywhere: each complete run's lineage digest, and checkpoints as ``append`` would
        have written them. Returns how many runs were derived.

        A recorder that keeps appends short (``derive_on_append=False``) calls this once a
        run has ended and its response is out; nothing is lost if it never does: lineage
        decisions derive what they need first, and checkout replays what has no checkpoint.
        With a ``scope``, only that owner's threads.
        """
        intake.check_scope(scope)
        with self._writing() as tx:
            self._memory.notice_other_writes(tx)
            if thread_id:
                threads: list[int | None] = [self._require_thread(tx, thread_id, scope)]
            else:
                threads = revisions.owned_threads(tx, scope)
            derived = sum(self._deriver.derive_underived(tx, pk) for pk in threads)
            self._memory.remember_version(tx)
        return derived

    def compact(
        self,
        run_or_ref: str | None = None,
        *,
        thread_id: str | None = None,
        scope: str | None = None,
    ) -> int:
        """Materialize checkpoints: for a run and its ancestors, a thread, or the whole store
        (with a ``scope``: that owner's threads).

        Checkpoints are derived data (the raw log is never rewritten); ``append`` keeps them
        current where that is cheap, this fills in the rest. Returns how many were written.
        """
        intake.check_scope(scope)
        with self._writing() as tx:
            self._memory.notice_other_writes(tx)
            only: list[int | None] = [None]  # the threads compacted; None: all
            if run_or_ref is not None:
                key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
                only = [key.thread_pk]
                pks = tx.ancestors(key.pk)
            elif thread_id is not None:
                thread_pk = self._require_thread(tx, thread_id, scope)
                only = [thread_pk]
                pks = tx.thread_run_pks(thread_pk)
            elif scope is not None:
                only = revisions.owned_threads(tx, scope)
                pks = tx.owner_run_pks(scope)
            else:
                pks = tx.all_run_pks()
            return self._deriver.write_checkpoints(tx, only, pks)

    # --- lookups ------------------------------------------------------------------------

    def _require_thread(
        self, tx: port.Reading, thread_id: str, scope: str | None = None
    ) -> int:
        return revisions.require_thread(tx, thread_id, scope, self.path)

    def _resolve(
        self,
        tx: port.Reading,
        ref: str,
        *,
        thread_id: str | None = None,
        thread_pk: int | None = None,
        scope: str | None = None,
    ) -> RunKey:
        intake.check_scope(scope)
        return revisions.resolve(
            tx, ref, where=self.path, thread_id=thread_id, thread_pk=thread_pk, scope=scope
        )

    def record(
        self,
        events: Iterable[Any],
        *,
        input: Any = None,
        thread_id: str | None = None,
        scope: str | None = None,
    ) -> Iterator[Any]:
        """Yield each of ``events`` unchanged, as it arrives, while recording it in batches
        (appended by a thread at the latest every 0.1 s, and at the end). If the producer
        raises or the consumer stops, what passed is recorded and the run is left
        incomplete. ``scope`` names the owner the run is recorded for (``append``'s).
        See :mod:`agui_store.recording`."""
        return recording.record(self, events, input=input, thread_id=thread_id, scope=scope)

    # --- reading ------------------------------------------------------------------------

    def threads(self, *, scope: str | None = None) -> list[str]:
        """Every thread id, oldest first (with a ``scope``: that owner's threads).

        Every reading method takes ``scope=``: a thread of another owner (or of none) is
        then absent, as if it did not exist (docs/design/behaviour.md#live-recording). ``None``, the
        default, is the operator, who sees every thread."""
        intake.check_scope(scope)
        with self._reading() as tx:
            return tx.thread_ids(scope)

    def thread(self, thread_id: str, *, scope: str | None = None) -> Thread | None:
        """A thread's owner, creation time and number of runs, or ``None`` when the store
        has no such thread (or it is another owner's than ``scope``'s)."""
        intake.check_scope(scope)
        with self._reading() as tx:
            try:
                pk = self._require_thread(tx, thread_id, scope)
            except RunNotFoundError:
                return None
            found = tx.thread(thread_id)
            owner = found[1] if found else None
            created = when(tx.thread_created_at(pk))
            return Thread(thread_id, owner, created, tx.thread_run_count(pk))

    def runs(
        self,
        thread_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        scope: str | None = None,
    ) -> list[Run]:
        """Every run of a thread, in the order they were recorded.

        Pages, newest first: ``limit`` keeps only the newest ``limit`` runs recorded before
        the run ``before`` names (exclusive; ``None``: the thread's newest), still in recorded
        order. The next page is ``before=page[0].run_id``. A page reads only its own runs::

            page = store.runs("t", limit=50)
            while page:
                page = store.runs("t", limit=50, before=page[0].run_id)

        Raises:
            InvalidArgumentError: a ``limit`` that is not a positive int; a ``before`` that is
                not a run id of the thread.
        """
        intake.check_scope(scope)
        size = arguments.page_size(limit)
        if before is not None and not (isinstance(before, str) and before):
            raise InvalidArgumentError(f"before= must be None or a run id, not {before!r:.60}")
        start = before
        with self._reading() as tx:
            pk = self._require_thread(tx, thread_id, scope)
            if size is None and start is None:
                rows = tx.thread_run_summaries(pk)
            else:
                below = arguments.MAX_INT64
                if start is not None:
                    named = tx.run_pk(pk, start) if arguments.storable_text(start) else None
                    if named is None:
                        raise InvalidArgumentError(
                            f"before= {_quote(start)} names no run of thread {_quote(thread_id)}"
                        )
                    below = named
                rows = tx.thread_run_page(pk, below, size or arguments.MAX_INT64)[::-1]
            names = reads.branch_names(tx, [r[0] for r in rows], [pk])
            return [reads.run_from_row(r, names) for r in rows]

    def get_run(
        self, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Run | None:
        """A run by id or ref, or ``None`` when nothing matches."""
        intake.check_scope(scope)
        with self._reading() as tx:
            try:
                key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            except RunNotFoundError:
                return None
            return reads.run_record(tx, key.pk)

    def events(
        self,
        run_id: str,
        *,
        thread_id: str | None = None,
        after: int | None = None,
        scope: str | None = None,
    ) -> list[dict[str, Any]]:
        """A run's events, verbatim and in order.

        Args:
            after: a global sequence number (exclusive), e.g. ``AppendResult.last_seq`` or
                ``Run.last_seq``: only events recorded after it (a reconnecting reader's
                cursor, like SSE's ``Last-Event-ID``).

        Raises:
            HashMismatchError: the stored events are not the ones the run's hashes cover (the
                file was edited outside agui-store). After a cursor inside a batch, the whole
                batch is read and checked, since its hash covers all of it.
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            return reads.run_events(tx, key.pk, arguments.cursor(after), verify=True)

    def thread_events(
        self, thread_id: str, *, scope: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every event of a thread in recorded order, read run by run (memory bounded by
        the largest run): what a whole-thread export streams out."""
        for run in self.runs(thread_id, scope=scope):
            yield from self.events(run.run_id, thread_id=thread_id, scope=scope)

    def input(
        self, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> dict[str, Any] | None:
        """The ``RunAgentInput`` recorded for a run (``append(input=...)``), or ``None``."""
        with self._reading() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            raw, raw_refs, parent_pk, recorded = tx.run_input(key.pk)
            if hashing.input_digest(raw, raw_refs) != recorded:
                raise reads.mismatch(tx, key.pk, "its input is not the one its hash covers")
            if raw is None:
                return None
            value: dict[str, Any] = ingest.decode(raw.encode("utf-8"))
            if raw_refs is not None:
                assert parent_pk is not None  # refs name what the parent's view holds
                base = reads.view(tx, parent_pk)
                refs = ingest.decode(raw_refs.encode("utf-8"))
                value = expand_input(value, refs, base.messages, base.state)
        return value

    def history(
        self, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> list[dict[str, Any]]:
        """The events of a run's whole ancestor chain, root first: what replays it.

        Raises:
            HashMismatchError: the chain's events, records or inputs are not the ones its
                runs' hashes cover (the file was edited outside agui-store).
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            chain, grouped, normalized = reads.chain_payloads(tx, key.pk)
            if normalized:  # rare: read those runs through the expanding path
                out: list[dict[str, Any]] = []
                for pk in chain:
                    if pk in normalized:
                        out += reads.run_events(tx, pk)
                    else:
                        out += ingest.decode_many(grouped.get(pk, []))
                return out
        payloads = [p for pk in chain for p in grouped.get(pk, [])]
        return ingest.decode_many(payloads)


    def log(
        self,
        run_or_ref: str,
        *,
        thread_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        scope: str | None = None,
    ) -> Log:
        """The run and its lineage ancestors, newest first (metadata only, no payloads).

        Pages: ``limit`` runs at a time, each page continued from the one before by its
        ``next_cursor``. A page reads only the runs it holds, whatever the lineage's depth::

            page = store.log("HEAD", thread_id="t", limit=20)
            while page.next_cursor is not None:
                page = store.log("HEAD", thread_id="t", limit=20, cursor=page.next_cursor)

        Args:
            limit: at most this many runs (a positive int); ``None``: the whole lineage.
            cursor: where the page starts: ``Log.next_cursor`` of the page before, which is
                the id of the run the page starts with (a run of the thread ``run_or_ref``
                names; that ref then only names the thread). Its lineage is walked, not the
                ref's: runs and their parents never change, so pages continue the lineage
                they began on even when the ref (``HEAD``, a branch) has moved since.
                ``None``: the page starts at ``run_or_ref``.

        Returns:
            The runs; ``next_cursor`` is set when ``limit`` cut the lineage short, and
            ``None`` when the page reached its root.

        Raises:
            InvalidArgumentError: a ``limit`` that is not a positive int; a ``cursor`` that
                is not a run id of the thread (a cursor of another thread included).
        """
        size = arguments.page_size(limit)
        start = arguments.page_cursor(cursor)
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            first = key.pk
            if start is not None:
                # Text SQLite cannot hold names no run.
                named = tx.run_pk(key.thread_pk, start) if arguments.storable_text(start) else None
                if named is None:
                    raise InvalidArgumentError(
                        f"cursor {_quote(start)} names no run of thread "
                        f"{_quote(tx.thread_id(key.thread_pk))}: a cursor continues the log "
                        "of the thread it came from"
                    )
                first = named
            rows = tx.lineage_runs(first, None, size)
            # A lineage never leaves its thread (docs/design/lineage.md).
            names = reads.branch_names(tx, [r[0] for r in rows], [key.thread_pk])
            runs = [reads.run_from_row(r, names) for r in rows]
        # The last run's parent starts the next page (None at the root, or the whole log).
        more = runs[-1].parent_run_id if runs and len(runs) == size else None
        return Log(runs, next_cursor=more)

    def checkout(
        self, run_or_ref: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Checkout:
        """Restore a run: the messages and state the official client holds after it."""
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            run = reads.run_record(tx, key.pk)
            view = reads.view(tx, key.pk)
        return Checkout(run, view.messages, view.state, view.interrupts, view.warnings)

    def reconnect_stream(
        self, run_or_ref: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> list[dict[str, Any]]:
        """The short stream that restores a run: what a reconnecting client is sent.

        ``RUN_STARTED``, ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT`` and the run's terminal
        event (its outcome, with pending interrupts), accepted by the official client's full
        pipeline and restoring exactly ``checkout(run)`` (docs/design/behaviour.md#compaction). An
        incomplete run ends without a terminal event, as it was recorded.
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            run = reads.run_record(tx, key.pk)
            view = reads.view(tx, key.pk)
            terminal = tx.terminal_event(key.pk)
        return resume.reconnect_stream(run, view, terminal)

    def compacted(
        self, run_or_ref: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> list[dict[str, Any]]:
        """Deprecated: :meth:`reconnect_stream`, under the name that read as the result of
        :func:`~agui_store.compact_events` (upstream's compaction), which it is not. Kept for
        one release."""
        warnings.warn(
            "Store.compacted() is now Store.reconnect_stream(); the old name goes in the next "
            "release",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.reconnect_stream(run_or_ref, thread_id=thread_id, scope=scope)

    # --- time travel ----------------------------------------------------------------------

    def _pair(
        self, tx: port.Reading, a: str, b: str, thread_id: str | None, scope: str | None
    ) -> tuple[RunKey, RunKey, tuple[int, int, int] | None]:
        """Two arguments resolved, and their merge base with its depth below each (the
        port's ``merge_base``: the deepest run on both lineages)."""
        ka = self._resolve(tx, a, thread_id=thread_id, scope=scope)
        # The thread ``a`` was found in is the one ``thread_id`` names: not looked up again.
        in_thread = ka.thread_pk if thread_id is not None else None
        kb = self._resolve(tx, b, thread_id=thread_id, thread_pk=in_thread, scope=scope)
        return ka, kb, tx.merge_base(ka.pk, kb.pk)

    def merge_base(
        self, a: str, b: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Run | None:
        """The nearest run both ``a`` and ``b`` descend from (either may be it), or ``None``."""
        with self._reading() as tx:
            _, _, found = self._pair(tx, a, b, thread_id, scope)
            return reads.run_record(tx, found[0]) if found else None

    def is_ancestor(
        self, a: str, b: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> bool:
        """Whether ``a`` is on ``b``'s lineage (a run is its own ancestor, as in git)."""
        with self._reading() as tx:
            ka, _, found = self._pair(tx, a, b, thread_id, scope)
            return found is not None and found[0] == ka.pk

    def diff(
        self,
        a: str,
        b: str,
        *,
        thread_id: str | None = None,
        mode: str = "three-dot",
        scope: str | None = None,
    ) -> Diff:
        """Compare two runs: merge base, the runs on each side since it, message changes by
        id and the state change as an RFC 6902 patch.

        What it reads follows what the two runs changed, not the thread's length: each
        side's runs down to the merge base, and each run's checkpoint past the chunks and
        tail segments all sides share (the same blob at the same place: compared by
        address, as git compares trees), with a state they share read once.

        Args:
            mode: ``"three-dot"`` (default): what each side changed since the merge base, git
                and Dolt style; ``changes`` is base -> b and ``a_changes`` base -> a.
                ``"two-dot"``: the two views compared directly (``changes`` is a -> b).
        """
        if mode not in ("three-dot", "two-dot"):
            raise InvalidArgumentError(f"mode must be 'three-dot' or 'two-dot', not {mode!r}")
        with self._reading() as tx:
            ka, kb, found = self._pair(tx, a, b, thread_id, scope)
            run_a, run_b, base_run, a_runs, b_runs = reads.diff_sides(
                tx, ka.pk, kb.pk, found, ka.thread_pk
            )
            # Each distinct run is loaded once (one side is often the merge base itself);
            # two-dot needs no base.
            with_base = [found[0]] if found and mode == "three-dot" else []
            pks = list(dict.fromkeys([ka.pk, kb.pk, *with_base]))
            # Without a merge base, three-dot compares each side with an empty view: nothing
            # the sides share may be left out then.
            skip = found is not None or mode == "two-dot"
            views = dict(zip(pks, reads.views_past_shared(tx, pks, skip_shared=skip)))
        view_a, view_b = views[ka.pk], views[kb.pk]
        if mode == "two-dot":
            return Diff(run_a, run_b, mode, base_run, a_runs, b_runs, _compare(view_a, view_b))
        base = views[found[0]] if found else View([], {}, [], [])
        return Diff(
            run_a,
            run_b,
            mode,
            base_run,
            a_runs,
            b_runs,
            _compare(base, view_b),
            _compare(base, view_a),
        )

    def check(self) -> CheckReport:
        """Check the store: its storage's integrity (an SQLite file's pages, foreign keys
        and schema; a PostgreSQL schema's foreign keys and objects) and the store's own
        invariants (see :mod:`agui_store.engine.integrity`). Reports; never repairs."""
        with self._lock, self._backend.reading() as tx:
            return integrity.check(tx)

    # --- branches and forks -------------------------------------------------------------

    def branch(
        self, name: str, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Branch:
        """Point branch ``name`` at a run (creating or moving it). With a ``scope``, only a
        run of that owner's threads (another owner's are absent: ``RunNotFoundError``)."""
        intake.check_branch_name(name)
        with self._writing() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            placement.refuse_branch_shadowing_run(tx, key.thread_pk, name)
            now = clock.now_ms()
            tx.set_branch(key.thread_pk, name, key.pk, now)
            thread = tx.thread_id(key.thread_pk)
            return Branch(thread, name, tx.run_id(key.pk), False, when(now))

    def branches(self, thread_id: str, *, scope: str | None = None) -> list[Branch]:
        """A thread's branches: the default one (following the newest run) first."""
        intake.check_scope(scope)
        with self._reading() as tx:
            pk = self._require_thread(tx, thread_id, scope)
            out = []
            newest = tx.newest_run(pk)
            if newest is not None:
                out.append(Branch(thread_id, DEFAULT_BRANCH, tx.run_id(newest), True))
            for name, run_id, updated in tx.branch_list(pk):
                out.append(Branch(thread_id, name, run_id, False, when(updated)))
            return out

    def delete_branch(self, name: str, *, thread_id: str, scope: str | None = None) -> None:
        """Delete a branch (the runs stay; only the name goes)."""
        if name in RESERVED_REFS:
            raise BranchError(f"{name!r} is the thread's default branch; it cannot be deleted")
        intake.check_scope(scope)
        with self._writing() as tx:
            pk = self._require_thread(tx, thread_id, scope)
            if not tx.delete_branch(pk, name):
                raise BranchError(f"no branch {_quote(name)} in thread {_quote(thread_id)}")

    def fork(
        self,
        run_or_ref: str,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        scope: str | None = None,
    ) -> dict[str, Any]:
        """The ``RunAgentInput`` a client sends to start a new run from this one.

        Tools, context and forwarded props come from the newest recorded input in the
        run's lineage (a client resends the same ones); messages and state are the view.
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            run = reads.run_record(tx, key.pk)
            view = reads.view(tx, key.pk)
            newest_input = tx.newest_input(key.pk)
        if run_id is not None and not (
            isinstance(run_id, str) and run_id and arguments.storable_text(run_id)
        ):
            raise InvalidArgumentError(f"run_id= must be a non-empty id, not {_quote(run_id)}")
        return resume.fork_input(run, view, newest_input, run_id or str(uuid.uuid4()))


#: Every Store not yet garbage-collected, for the at-fork hook.
_OPEN_STORES: weakref.WeakSet[Store] = weakref.WeakSet()


def _close_inherited_connections() -> None:
    for store in list(_OPEN_STORES):
        store._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_connections)


#: An import appends batches of whole runs of about this many events (or bytes of JSON);
#: a run longer than four times that is cut, and continued by the next batch.
IMPORT_BATCH_EVENTS = 1000
IMPORT_BATCH_BYTES = 2 * 1024 * 1024


def _compare(old: View, new: View) -> ViewChange:
    """:func:`~agui_store.history.diff.compare` of two views; a view with itself (a side that is
    its merge base) has no change."""
    if old is new:
        return ViewChange([], [])
    return compare(old.messages, old.state, new.messages, new.state)


#: What a database URL (rather than a file path) starts with.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_url(path: str) -> bool:
    """Whether ``path`` names a PostgreSQL database instead of an SQLite file."""
    return path.startswith(POSTGRES_SCHEMES)


def _backend_for(path: str, busy_timeout_ms: int) -> port.Backend:
    """The backend a path or URL names: PostgreSQL for ``postgresql://`` URLs (psycopg, the
    ``postgres`` extra), else an SQLite file."""
    if is_url(path):
        try:
            # Imported on demand: psycopg is an optional extra.
            from agui_store.backends.postgres import (  # type: ignore[import-not-found,attr-defined,unused-ignore]
                PostgresBackend,
            )
        except ImportError as e:
            raise InvalidArgumentError(
                f"a PostgreSQL store needs psycopg 3: pip install 'agui-store[postgres]' ({e})"
            ) from e
        backend: port.Backend = PostgresBackend(path, busy_timeout_ms=busy_timeout_ms)
        return backend
    return SqliteBackend(path, busy_timeout_ms=busy_timeout_ms)


def open(path: str | os.PathLike[str] | None = None, **options: Any) -> Store:
    """Open (creating if needed) a store: an SQLite file, or a PostgreSQL database named by a
    ``postgresql://`` URL. ``None``: ``$AGUI_STORE_DB`` or ``./agui-store.db``;
    ``":memory:"`` keeps everything in memory."""
    return Store(path, **options)
