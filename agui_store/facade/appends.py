"""``Store``'s verbs that write the log: appends, imports, live recording, and the derived
data (lineage digests, checkpoints) that appends may leave for later.

Each verb reads and checks its input before its transaction opens, then hands one call to
the write paths (:mod:`agui_store.engine.writes`), which keep what they learnt between calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from agui_store import recording
from agui_store.engine import arguments, gc_pause, revisions
from agui_store.errors import AguiStoreError
from agui_store.facade.base import Facade
from agui_store.records import AppendResult, ImportResult

__all__ = ["AppendVerbs"]


class AppendVerbs(Facade):
    """``Store``'s verbs that record: :meth:`append`, :meth:`import_file` and
    :meth:`record`, and :meth:`derive`, :meth:`compact` and :meth:`rebuild` for what is
    derived from the log."""

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
            check_sequence=arguments.flag("check_sequence", check_sequence),
            run_id=run_id,
            scope=scope,
        )
        with self.writing(batch.thread_id) as tx:
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
        arguments.flag("check_sequence", check_sequence)
        events = self._writes.read_file(source, thread_id)
        with self.writing() as tx:
            return self._writes.import_events(tx, events, thread_id, check_sequence)

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
        See :mod:`agui_store.recording`.

        Raises:
            AguiStoreError: the store is closed (when called: a recording's own failures are
                warnings, and the stream goes on).
            InvalidArgumentError: ``events`` is not a stream of events (one event, one text,
                ``None``: also a ``TypeError``), or ``thread_id`` or ``scope`` is refused.
        """
        if self._closed:
            raise AguiStoreError(f"{self.path}: the store is closed")
        return recording.record(self, events, input=input, thread_id=thread_id, scope=scope)

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
        with self.writing() as tx:
            selected = revisions.runs_to_compact(tx, run_or_ref, thread_id, scope, self.path)
            return self._writes.compact(tx, *selected)

    def rebuild(self, thread_id: str | None = None, *, scope: str | None = None) -> int:
        """Derive again from the log everything derived from it, in a thread or everywhere
        (with a ``scope``: that owner's threads): each run's lineage digest and search index
        rows, and checkpoints as ``append`` writes them. Returns how many runs were derived.

        Derived data is dropped and written again, never edited; the log is not touched. It
        repairs what ``check()`` reports as derived data that differs from a replay of the
        log. The runs' events are first checked against their hashes: if any was edited,
        :class:`~agui_store.HashMismatchError` names the run and nothing changes. One write
        transaction: the whole selection is rebuilt, or none of it.
        """
        with self.writing() as tx:
            threads = revisions.threads_to_rebuild(tx, thread_id, scope, self.path)
            return self._writes.rebuild(tx, threads)
