"""``Store``'s verbs that read a thread: its runs, their events and inputs, a lineage's log,
a run's restored view and the stream that restores it.

Each verb checks its arguments, resolves the run or thread it names in one read
transaction and hands it to the read paths (:mod:`agui_store.engine.reads`), which check
what they read against its hashes.
"""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Iterator
from typing import Any

from agui_store.engine import arguments, clock, gc_pause, reads
from agui_store.errors import ArgumentTypeError, InvalidArgumentError, RunNotFoundError
from agui_store.facade.base import Facade
from agui_store.records import Checkout, Log, Run, Thread

__all__ = ["ReadVerbs"]


class ReadVerbs(Facade):
    """``Store``'s verbs that read: :meth:`threads` and :meth:`thread`, a thread's
    :meth:`runs`, a run's :meth:`events`, :meth:`input` and :meth:`history`, a lineage's
    :meth:`log`, :meth:`checkout` and :meth:`reconnect_stream`."""

    def threads(
        self,
        *,
        scope: str | None = None,
        recent_first: bool = False,
        after: str | None = None,
        after_updated_at: datetime.datetime | None = None,
    ) -> list[str]:
        """Every thread id, in the order this store first recorded them (with a ``scope``:
        that owner's threads). A copy records the threads it brings after those the
        destination held (docs/guides/copy.md). With ``recent_first``, the thread written
        to last comes first (by its newest batch's time), as ``agui-store threads`` and the
        viewer list them.

        ``after`` pages the list: the threads listed after that one. Listed
        ``recent_first``, a thread moves to the top when it is written to; give the
        ``updated_at`` it had when it was listed (:meth:`thread`) as ``after_updated_at``,
        and a page after it that was written to since, or erased, starts where it was: at
        the first thread last written before that time (a naive datetime is UTC), so that
        no thread is listed twice or skipped (a thread written in that same millisecond
        counts as listed). Without it, ``after`` must still be in the store
        (:class:`~agui_store.errors.RunNotFoundError`).

        Every reading method takes ``scope=``: a thread of another owner (or of none) is
        then absent, as if it did not exist (docs/design/behaviour.md#live-recording). ``None``, the
        default, is the operator, who sees every thread."""
        arguments.check_scope(scope)
        arguments.flag("recent_first", recent_first)
        if after is not None and (not isinstance(after, str) or not after):
            error = InvalidArgumentError if isinstance(after, str) else ArgumentTypeError
            raise error(f"after= must be a thread's id, not {arguments.quote(after)}")
        at = None
        if after_updated_at is not None:
            if not isinstance(after_updated_at, datetime.datetime):
                kind = arguments.a_kind(after_updated_at)
                raise ArgumentTypeError(f"after_updated_at= must be a datetime, not {kind}")
            if not recent_first or after is None:
                raise InvalidArgumentError(
                    "after_updated_at= places after= in the list recent_first= gives: pass "
                    "both with it"
                )
            at = clock.ms_before(clock.in_utc_if_naive(after_updated_at))
        with self.reading() as tx:
            ids = tx.thread_ids_by_activity(scope) if recent_first else tx.thread_ids(scope)
            if after is None:
                return ids
            start = reads.threads_after(tx, ids, after, at)
        if start is None:
            raise RunNotFoundError(
                f"after= {arguments.quote(after)}: no such thread in {self.path}"
            )
        return ids[start:]

    def thread(self, thread_id: str, *, scope: str | None = None) -> Thread | None:
        """A thread's owner, creation time and number of runs, or ``None`` when the store
        has no such thread (or it is another owner's than ``scope``'s)."""
        arguments.check_scope(scope)
        with self.reading() as tx:
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
        """Every run of a thread, in the order this store recorded them (a copy records the
        runs it brings after those the destination held: docs/guides/copy.md).

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
        with self.reading() as tx, gc_pause.paused_for(size):
            pk = self._require_thread(tx, thread_id, scope)
            return reads.run_page(tx, pk, thread_id, size, before)

    def get_run(
        self, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Run | None:
        """A run by id or ref, or ``None`` when nothing matches."""
        arguments.check_scope(scope)
        with self.reading() as tx:
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
        with self.reading() as tx:
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
        with self.reading() as tx:
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
        with self.reading() as tx:
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
        with self.reading() as tx, gc_pause.paused_for(size):
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            return reads.log_page(tx, key, start, size)

    def checkout(
        self, run_or_ref: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Checkout:
        """Restore a run: the messages and state the official client holds after it.

        Every call returns objects of its own, which the caller may change. The store's
        connection keeps the decoded messages of the stored blobs it reads a second time
        when they hold only strings, numbers, booleans and null (up to 24 MB), and copies
        them rather than decode the blob again: a thread restored at every turn costs a
        fraction of its first read. An erasure on any connection drops them
        (docs/design/hashes.md).
        """
        with self.reading() as tx:
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
        with self.reading() as tx:
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
