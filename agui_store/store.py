"""The store: a lossless AG-UI event log with git-like run lineage, over a storage port.

``Store`` is the facade of verbs, written once for every backend. Each verb checks its
arguments, opens a transaction of the store's and hands one call to the engine: the write
paths (:mod:`agui_store.engine.writes`), the read paths (:mod:`agui_store.engine.reads`),
comparisons (:mod:`agui_store.engine.comparison`), branches
(:mod:`agui_store.engine.branches`) and refs (:mod:`agui_store.engine.revisions`). This
module holds the verbs and the store's lifecycle: its lock, its transactions, what a
``fork()`` of the process does to it.
"""
from __future__ import annotations

import contextlib
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agui_store import backends, recording
from agui_store.backends import POSTGRES_SCHEMES, is_url, open_backend
from agui_store.codec import ingest
from agui_store.engine import (
    archive,
    arguments,
    branches,
    comparison,
    gc_pause,
    intake,
    integrity,
    port,
    reads,
    revisions,
    search,
    writes,
)
from agui_store.engine.integrity import CheckReport
from agui_store.engine.revisions import RunKey
from agui_store.engine.writes import (
    CHECKPOINT_EVENTS,
    IMPORT_BATCH_BYTES,
    IMPORT_BATCH_EVENTS,
    MAX_DEPTH_LIMIT,
)
from agui_store.errors import InvalidArgumentError, RunNotFoundError
from agui_store.exports.targets import check_source, check_target, write_file
from agui_store.facade.erasure import ErasureVerbs
from agui_store.history import search as search_rules
from agui_store.history.diff import Diff
from agui_store.records import (
    AppendResult,
    Branch,
    Checkout,
    ImportResult,
    Log,
    Run,
    SearchHits,
    Thread,
)

__all__ = [
    "CHECKPOINT_EVENTS",
    "IMPORT_BATCH_BYTES",
    "IMPORT_BATCH_EVENTS",
    "MAX_DEPTH_LIMIT",
    "POSTGRES_SCHEMES",
    "Store",
    "is_url",
    "open",
]

class Store(ErasureVerbs):
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
        busy_timeout_ms: int = backends.DEFAULT_BUSY_TIMEOUT_MS,
        max_event_bytes: int = ingest.DEFAULT_MAX_EVENT_BYTES,
        max_depth: int = ingest.DEFAULT_MAX_DEPTH,
        checkpoint_events: int = CHECKPOINT_EVENTS,
        derive_on_append: bool = True,
    ) -> None:
        self.path = arguments.path_text(path) if path is not None else backends.default_path()
        self.busy_timeout_ms = arguments.positive_int(
            "busy_timeout_ms", busy_timeout_ms, minimum=0
        )
        self.max_event_bytes = arguments.positive_int("max_event_bytes", max_event_bytes)
        self.max_depth = arguments.positive_int(
            "max_depth",
            max_depth,
            minimum=2,
            maximum=MAX_DEPTH_LIMIT,
            why=": deeper values could not be read back (JSON encoders recurse once per level)",
        )
        self.checkpoint_events = arguments.positive_int("checkpoint_events", checkpoint_events)
        self.derive_on_append = bool(derive_on_append)
        self._lock = threading.RLock()
        self._backend: port.Backend = open_backend(self.path, busy_timeout_ms)
        self.path = self._backend.where  # a URL is shown without its password
        self._pid = os.getpid()
        # The write paths and what they remember between calls (its ``memory``).
        self._writes = writes.Writes(
            self.path,
            max_event_bytes=self.max_event_bytes,
            max_depth=self.max_depth,
            checkpoint_events=self.checkpoint_events,
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
        """Close the store (its file or its database connection). Further calls raise."""
        with self._lock:
            self._backend.close()
            self._writes.close()

    def __repr__(self) -> str:
        return f"<agui_store.Store {self.path!r}>"

    @property
    def location(self) -> str:
        """Where the store is, as it was opened: a file path, or a database URL with its
        password (another process opens the same store with it; :attr:`path` is the one
        to show)."""
        return self._backend.location

    def _after_fork_in_child(self) -> None:
        """In a forked child: drop the parent's lock and its connection (the backend opens
        its own on first use) and what the parent remembered of the database."""
        self._lock = threading.RLock()
        same_process = self._pid == os.getpid()
        self._pid = os.getpid()
        self._writes.after_fork(same_process)
        self._backend.after_fork()

    # --- the door into transactions ----------------------------------------------------

    @contextmanager
    def reading(self) -> Iterator[port.Reading]:
        """A read transaction of the store's, yielding the storage port
        (:class:`agui_store.engine.port.Reading`): one consistent snapshot, taken in turn
        with this store's other calls (as langgraph's ``SqliteSaver.cursor()`` or
        sqlite-utils' ``Database.conn``).

        For code above the verbs that works with the engine's functions, which take the
        transaction first (``conversations.read_record(tx, ...)``); the verbs open their
        own."""
        with self._lock, self._backend.reading() as tx:
            yield tx

    @contextmanager
    def writing(self, key: str | None = None) -> Iterator[port.Writing]:
        """A write transaction of the store's, yielding the storage port
        (:class:`agui_store.engine.port.Writing`): it commits when the block ends and rolls
        back, leaving the database as it was, when it raises (as sqlite-utils'
        ``Database.atomic()``).

        ``key`` narrows it to the writes of one key, which take turns with each other
        alone: an AG-UI thread id (appends to that thread), or another writer's own key
        (``conversations.WRITERS_KEY``). PostgreSQL runs writes of different keys side by
        side; SQLite has one writer at a time. What the store remembers of the database is
        dropped when the transaction fails."""
        with self._lock:
            try:
                with self._backend.writing(key) as tx:
                    yield tx
            except BaseException:
                self._writes.forget()
                raise

    @contextmanager
    def replicating(self) -> Iterator[port.Writing]:
        """The write transaction of :func:`agui_store.copy`, which inserts runs as another
        store recorded them, beside the rules ``append`` applies: what this store
        remembers of the database is dropped after it, whether it commits or not."""
        try:
            with self.writing() as tx:
                yield tx
        finally:
            self._writes.forget()

    # The verbs' spelling of the doors.
    _reading = reading
    _writing = writing
    _replicating = replicating

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
        batch = self._writes.read_batch(
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
            return self._writes.append(tx, batch)

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
        events = self._writes.read_file(source, thread_id)
        with self._writing() as tx:
            return self._writes.import_events(tx, events, thread_id, check_sequence)

    # --- the archive: everything, out and in ---------------------------------------------

    def export_archive(
        self,
        target: str | os.PathLike[str] | Any,
        *,
        thread_id: str | None = None,
        scope: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> archive.ArchiveResult:
        """Write everything the store holds for a thread, or for every thread, in the
        lossless archive format (docs/reference/archive.md): runs with their inputs,
        lineage, status, times and content hashes, events byte for byte, branches, owners,
        and the pydantic-ai conversations linked to the threads (with no ``thread_id`` and
        no ``scope``: every conversation). :meth:`import_archive` reads it back.

        Read from one snapshot, a thread at a time (memory follows the largest thread). A
        path is written whole or not at all (never over the store or a database).

        Args:
            target: a path, or a binary file object.
            thread_id: only this thread (and its conversations).
            scope: only this owner's threads (another owner's thread is absent).
            progress: called as ``progress(threads written, threads)``.

        Raises:
            RunNotFoundError: no thread ``thread_id`` (in the ``scope``).
        """
        intake.check_scope(scope)
        counts = archive.ArchiveResult()
        with self._reading() as tx:
            ids = reads.chosen_threads(tx, thread_id, scope, self.path)
            lines = archive.export_lines(
                tx, ids, whole_store=thread_id is None and scope is None, scope=scope,
                counts=counts, progress=progress,
            )  # fmt: skip
            # A failed write (a full disk, a reader gone: `| head`) is the target's, not the
            # store's: raised as it is, after the read transaction ends.
            failed: OSError | None = None
            try:
                if isinstance(target, (str, os.PathLike)):
                    write_file(check_target(target, self.path), lines)
                else:
                    for line in lines:
                        target.write(line)
            except OSError as e:
                failed = e
        if failed is not None:
            raise failed
        return counts

    def import_archive(
        self,
        source: str | os.PathLike[str] | Any,
        *,
        progress: Callable[[int], None] | None = None,
        restore_erased: bool = False,
    ) -> archive.ArchiveResult:
        """Import an archive :meth:`export_archive` wrote, whole or not at all: what the
        store lacks of it is added as it was recorded (same run ids, parents, inputs,
        events, status, times, content hashes, branches, owners and conversations), and
        what it holds already is left as it is, so importing again adds nothing.

        A thread this store erased (it keeps a tombstone) is left out with its
        conversations, as :func:`agui_store.copy` leaves it, and counted in
        ``left_erased``; ``restore_erased=True`` takes the tombstone away and imports it.

        Read a line at a time, landed a thread at a time, all in one write transaction.

        Args:
            source: a path, or a binary file object.
            progress: called with the size of each line read.
            restore_erased: import threads this store erased, too.

        Raises:
            InvalidArgumentError: a line that is not an archive record, or a cut archive.
            SchemaVersionError: an archive of a newer version.
            HashMismatchError: a record, input or event that is not the one its hash
                covers (an edited archive).
            SyncConflictError: the store holds a run, a thread's owner, a branch or a
                conversation with other content (as :func:`agui_store.copy` refuses it).
        """
        with contextlib.ExitStack() as stack:
            if isinstance(source, (str, os.PathLike)):
                where = os.fspath(source)
                check_source(where, self.path)
                handle: Any = stack.enter_context(Path(where).open("rb"))
            else:
                where, handle = getattr(source, "name", "the archive"), source
            with self.replicating() as tx:
                result, underived = archive.import_lines(
                    tx, handle, where=str(where), progress=progress,
                    restore_erased=restore_erased,
                )
        if underived and self.derive_on_append:
            self._derive(None, None)  # what the import left, as append would have derived
        return result

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
        arguments.check_scope(scope)
        return self._derive(thread_id, scope)

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
        arguments.check_scope(scope)
        with self._writing() as tx:
            selected = revisions.runs_to_compact(tx, run_or_ref, thread_id, scope, self.path)
            return self._writes.compact(tx, *selected)

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
        arguments.check_scope(scope)
        with self._reading() as tx:
            return tx.thread_ids(scope)

    def thread(self, thread_id: str, *, scope: str | None = None) -> Thread | None:
        """A thread's owner, creation time and number of runs, or ``None`` when the store
        has no such thread (or it is another owner's than ``scope``'s)."""
        arguments.check_scope(scope)
        with self._reading() as tx:
            try:
                pk = self._require_thread(tx, thread_id, scope)
            except RunNotFoundError:
                return None
            return reads.thread_summary(tx, pk, thread_id)

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
        arguments.check_scope(scope)
        size, before = arguments.page_size(limit), arguments.page_before(before)
        with self._reading() as tx, gc_pause.paused_for(size):
            pk = self._require_thread(tx, thread_id, scope)
            return reads.run_page(tx, pk, thread_id, size, before)

    def get_run(
        self, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Run | None:
        """A run by id or ref, or ``None`` when nothing matches."""
        arguments.check_scope(scope)
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
            return reads.events(tx, key.pk, arguments.cursor(after))

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
            return reads.recorded_input(tx, key.pk)

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
            return reads.history(tx, key.pk)

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
        with self._reading() as tx, gc_pause.paused_for(size):
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            return reads.log_page(tx, key, start, size)

    def search(
        self,
        query: str,
        *,
        thread_id: str | None = None,
        scope: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> SearchHits:
        """Find messages by their words, newest first, in every thread (or one).

        A message is found by the text ``checkout`` restores it with: user, assistant,
        system and developer text, reasoning, tool-call names and arguments, and tool
        results; once per thread, named by the run that first recorded it. Words match
        case-insensitively with accents folded (``cafe`` finds ``Café``)::

            store.search("porto hotel")           # both words, anywhere in a message
            store.search('"porto hotel" -cancel') # the phrase, and not the word
            store.search("refund*", thread_id="t1")  # a word starting with refund

        Pages: ``limit`` hits at a time, continued by ``cursor=page.next_cursor``.

        Args:
            query: words (all must match), ``"quoted phrases"``, a trailing ``*`` for a
                prefix, ``-word`` or ``-"a phrase"`` to leave out.
            thread_id: only this thread's messages.
            scope: only that owner's threads; another owner's messages are never returned
                or counted against ``limit``.
            limit: at most this many hits (1 to 1,000).
            cursor: the ``next_cursor`` of the page before.

        Returns:
            The hits (:class:`~agui_store.records.SearchHit`), with ``next_cursor`` set
            when the page is full.

        Raises:
            InvalidArgumentError: a query of the wrong shape (the message says what), a
                ``limit`` or ``cursor`` that is not one.
            RunNotFoundError: no thread ``thread_id`` (in the ``scope``).
        """
        parsed = search_rules.parse(query)
        size = search.page_limit(limit)
        after = search.parse_cursor(cursor)
        intake.check_scope(scope)
        with self._reading() as tx:
            thread_pk = None
            if thread_id is not None:
                thread_pk = self._require_thread(tx, thread_id, scope)
            return search.search(tx, parsed, thread_pk, scope, after, size)

    def checkout(
        self, run_or_ref: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Checkout:
        """Restore a run: the messages and state the official client holds after it."""
        with self._reading() as tx:
            arguments.check_scope(scope)
            return reads.checkout_ref(
                tx, run_or_ref, where=self.path, thread_id=thread_id, scope=scope
            )

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
            return reads.reconnect_stream(tx, key.pk)

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
    ) -> tuple[RunKey, RunKey]:
        return revisions.resolve_pair(tx, a, b, where=self.path, thread_id=thread_id, scope=scope)

    def merge_base(
        self, a: str, b: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Run | None:
        """The nearest run both ``a`` and ``b`` descend from (either may be it), or ``None``."""
        with self._reading() as tx:
            return comparison.merge_base(tx, *self._pair(tx, a, b, thread_id, scope))

    def is_ancestor(
        self, a: str, b: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> bool:
        """Whether ``a`` is on ``b``'s lineage (a run is its own ancestor, as in git)."""
        with self._reading() as tx:
            return comparison.is_ancestor(tx, *self._pair(tx, a, b, thread_id, scope))

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

        What it reads follows what the two runs changed, not the thread's length (see
        :func:`agui_store.engine.comparison.diff`).

        Args:
            mode: ``"three-dot"`` (default): what each side changed since the merge base, git
                and Dolt style; ``changes`` is base -> b and ``a_changes`` base -> a.
                ``"two-dot"``: the two views compared directly (``changes`` is a -> b).
        """
        if mode not in comparison.MODES:
            raise InvalidArgumentError(f"mode must be 'three-dot' or 'two-dot', not {mode!r}")
        with self._reading() as tx:
            ka, kb = self._pair(tx, a, b, thread_id, scope)
            return comparison.diff(tx, ka, kb, mode)

    def check(self) -> CheckReport:
        """Check the store: its storage's integrity (an SQLite file's pages, foreign keys
        and schema; a PostgreSQL schema's foreign keys and objects) and the store's own
        invariants (see :mod:`agui_store.engine.integrity`). Reports; never repairs."""
        with self._lock, self._backend.reading() as tx:
            return integrity.check(tx)

    # --- branches and forks -------------------------------------------------------------

    def branch(
        self,
        name: str,
        run_id: str,
        *,
        thread_id: str | None = None,
        scope: str | None = None,
        move: bool = True,
    ) -> Branch:
        """Point branch ``name`` at a run (creating or moving it). With a ``scope``, only a
        run of that owner's threads (another owner's are absent: ``RunNotFoundError``).
        ``move=False`` refuses to move a branch that exists (``BranchError``), as git's
        ``branch`` does without ``--force``."""
        with self._writing() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            return branches.point(tx, name, key, move=move)

    def branches(self, thread_id: str, *, scope: str | None = None) -> list[Branch]:
        """A thread's branches: the default one (following the newest run) first."""
        arguments.check_scope(scope)
        with self._reading() as tx:
            return branches.listing(tx, self._require_thread(tx, thread_id, scope), thread_id)

    def delete_branch(self, name: str, *, thread_id: str, scope: str | None = None) -> None:
        """Delete a branch (the runs stay; only the name goes)."""
        branches.refuse_reserved(name)
        arguments.check_scope(scope)
        with self._writing() as tx:
            branches.delete(tx, self._require_thread(tx, thread_id, scope), thread_id, name)

    def rename_branch(
        self,
        old: str,
        new: str,
        *,
        thread_id: str,
        force: bool = False,
        scope: str | None = None,
    ) -> Branch:
        """Rename a branch (its run stays), as ``git branch -m`` does. ``force`` replaces a
        branch already named ``new`` (otherwise ``BranchError``)."""
        branches.refuse_reserved(old)
        intake.check_scope(scope)
        with self._writing() as tx:
            pk = self._require_thread(tx, thread_id, scope)
            return branches.rename(tx, pk, thread_id, old, new, force=force)

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

        Raises:
            InvalidArgumentError: ``run_id`` is already a run of the thread (append would
                refuse the body).
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            return reads.fork_input(tx, key.pk, revisions.new_run_id(tx, key, run_id))


#: Every Store not yet garbage-collected, for the at-fork hook.
_OPEN_STORES: weakref.WeakSet[Store] = weakref.WeakSet()


def _close_inherited_connections() -> None:
    for store in list(_OPEN_STORES):
        store._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_connections)


def open(path: str | os.PathLike[str] | None = None, **options: Any) -> Store:
    """Open (creating if needed) a store: an SQLite file, or a PostgreSQL database named by a
    ``postgresql://`` URL. ``None``: ``$AGUI_STORE_DB`` or ``./agui-store.db``;
    ``":memory:"`` keeps everything in memory."""
    return Store(path, **options)
