"""``Store``'s erasure verbs: forgetting a thread, an owner or old threads, provably.

Each verb checks its arguments, names the threads to erase in one write transaction and hands
them to :mod:`agui_store.engine.erasure`, then runs the physical purge
(docs/guides/erasure.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
from collections.abc import Callable

from agui_store.engine import checkpoints, clock, erasure, intake, port, revisions
from agui_store.engine.arguments import check_thread_id
from agui_store.engine.arguments import flag as _flag
from agui_store.engine.arguments import quote as _quote
from agui_store.errors import AguiStoreError, ArgumentTypeError, InvalidArgumentError
from agui_store.facade.base import Facade
from agui_store.records import ErasureReceipt

__all__ = ["PURGE_INTERRUPTED", "ErasureVerbs"]

#: :attr:`ErasureVerbs.purge_pending` of a purge an interrupt (Ctrl-C) stopped, its erasure
#: committed.
PURGE_INTERRUPTED = (
    "the purge was interrupted before it finished: purge again (Store.purge(), or "
    "'agui-store purge')"
)


class ErasureVerbs(Facade):
    """``Store``'s verbs that erase: :meth:`delete_thread`, :meth:`delete_owner`,
    :meth:`prune`, and :meth:`purge` to finish the purge one of them began."""

    def delete_thread(
        self, thread_id: str, *, scope: str | None = None, dry_run: bool = False
    ) -> ErasureReceipt:
        """Erase a thread: its runs, events, inputs, branches, checkpoints and derived data,
        and the pydantic-ai conversations linked to it, in one transaction; content another
        thread shares stays. A tombstone (a hash of the id) keeps ``copy`` from bringing it
        back. ``dry_run``: count what would go, erase nothing. With a ``scope``, only a
        thread of that owner (another's is absent: ``RunNotFoundError``). See
        docs/guides/erasure.md."""
        _flag("dry_run", dry_run)
        intake.check_scope(scope)
        if thread_id is None:  # the one verb that needs its thread named
            raise ArgumentTypeError("thread_id must be a non-empty string, not None")
        check_thread_id(thread_id)
        return self._erase(
            lambda tx: [revisions.require_thread(tx, thread_id, scope, self.path)],
            "delete_thread",
            dry_run,
        )

    def delete_owner(self, scope: str, *, dry_run: bool = False) -> ErasureReceipt:
        """Erase everything one owner has: every thread of the scope (as
        :meth:`delete_thread` erases one) and every pydantic-ai conversation saved under it,
        in one transaction. An owner with nothing stored erases nothing."""
        _flag("dry_run", dry_run)
        if scope is None:
            raise InvalidArgumentError("delete_owner needs the owner's scope, not None")
        intake.check_scope(scope)
        return self._erase(
            lambda tx: tx.owned_thread_pks(scope), "delete_owner", dry_run, scope=scope
        )

    def prune(
        self,
        *,
        before: datetime.datetime | datetime.timedelta,
        scope: str | None = None,
        dry_run: bool = False,
    ) -> ErasureReceipt:
        """Erase every thread (of an owner, with a ``scope``) whose newest activity is older
        than ``before``: a ``datetime`` (a naive one is UTC), or a ``timedelta`` back from
        now (``timedelta(days=90)`` keeps the last 90 days). A thread's activity is a batch
        appended to it, or a save of a pydantic-ai conversation linked to it. A thread with
        a run still open is in use and stays whole, however old: never cut in the middle.
        A pydantic-ai conversation last saved before ``before`` goes too, unless a thread
        that stays holds it (the thread its id names, or one whose runs announced a save
        of it)."""
        _flag("dry_run", dry_run)
        intake.check_scope(scope)
        if isinstance(before, datetime.timedelta):
            if before < datetime.timedelta(0):
                raise InvalidArgumentError(f"before= must not be a negative timedelta: {before}")
            cutoff = clock.now_ms() * 1000 - (before // datetime.timedelta(microseconds=1))
        elif isinstance(before, datetime.datetime):
            cutoff = clock.micros(clock.in_utc_if_naive(before))
        else:
            raise InvalidArgumentError(
                f"before= must be a datetime or a timedelta, not {_quote(before)}"
            )
        return self._erase(
            lambda tx: erasure.idle_threads(tx, cutoff, scope),
            "prune",
            dry_run,
            idle=lambda tx, pruned: erasure.idle_conversations(tx, cutoff, scope, pruned),
        )

    def _erase(
        self,
        threads: Callable[[port.Writing], list[int]],
        verb: str,
        dry_run: bool,
        *,
        scope: str | None = None,
        idle: Callable[[port.Writing, list[int]], list[str]] | None = None,
    ) -> ErasureReceipt:
        """One erasure: the threads ``threads(tx)`` names erased in one write transaction,
        with the conversations ``idle(tx, threads)`` names besides their linked ones, then
        the physical purge (see :mod:`agui_store.engine.erasure`)."""
        with self.replicating() as tx:  # what the store remembers goes with the threads
            now = clock.now_ms()
            pks = threads(tx)
            alone = dict.fromkeys(idle(tx, pks), now) if idle is not None else None
            receipt = erasure.erase(
                tx, pks, verb, now, owner=scope, dry_run=dry_run, conversation_times=alone
            )
        if dry_run:
            return receipt
        if not (receipt.threads or receipt.conversations):
            return dataclasses.replace(receipt, purged=True)  # nothing went: none to purge
        # Said until the purge ends: an interrupt (Ctrl-C) before then leaves it to the next.
        self._unfinished_purge = PURGE_INTERRUPTED
        erasure.step("committed")
        pending = self._finish_purge()
        return dataclasses.replace(receipt, purged=not pending, purge_pending=pending)

    def _finish_purge(self) -> str:
        """The purge of erasures already committed: why it is not finished, or ``""`` when
        it is. Its failure is not raised but said: what it purges is erased already, and
        the next purge finishes it."""
        with contextlib.suppress(AguiStoreError):  # said in purge_pending
            if self._physical_purge():
                return ""
        return self.purge_pending

    def purge(self, *, rewrite: bool = False) -> bool:
        """The physical purge every erasure runs after it commits (SQLite: the file
        rewritten, the WAL copied into it and emptied; PostgreSQL: the touched tables
        vacuumed); whether it finished. Call it to finish a purge an erasure's receipt said
        did not (a reader held older pages then). On PostgreSQL, ``rewrite`` writes the
        tables an erasure deletes from again, with their indexes (``VACUUM FULL``: each
        table locked while it is copied), so that no index key and no freed space keeps
        erased bytes; SQLite's purge always rewrites. Called, it first deletes any blob no
        checkpoint refers to, which ``check()`` reports: an erasure follows checkpoints, and
        never reaches one. See docs/guides/erasure.md."""
        _flag("rewrite", rewrite)
        with self.writing() as tx:
            checkpoints.delete_unreferenced_blobs(tx)
        return self._physical_purge(rewrite)

    def _physical_purge(self, rewrite: bool = False) -> bool:
        self._unfinished_purge = PURGE_INTERRUPTED  # until the purge ends, whichever way
        try:
            with self._lock:
                done = self._backend.purge(rewrite)
        except AguiStoreError as e:
            self._unfinished_purge = (
                f"the purge failed ({e}): purge again (Store.purge(), or 'agui-store purge')"
            )
            raise
        self._unfinished_purge = "" if done else self._backend.purge_pending
        return done

    #: Why the last purge did not finish (see :attr:`purge_pending`).
    _unfinished_purge = ""

    @property
    def purge_pending(self) -> str:
        """Why the last :meth:`purge` of this store did not finish (a reader holding older
        pages, the tables owned by another role, an interrupt after its erasure committed),
        or ``""``: it did, or none ran."""
        return self._unfinished_purge
