"""What every verb class of the facade stands on: a store's state, its doors, its lookups.

:class:`Facade` declares what :class:`agui_store.store.Store` sets in its constructor (its
options, its lock, its backend, its write paths) and the doors into its transactions that
``Store`` defines, so that each verb class is typed against them; it defines the private
lookups that verbs of several concerns share. A private member of the facade is named by
``Store``'s classes alone: ``tests/test_layers.py`` holds every other module to the public
doors.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from agui_store.engine import port, revisions, writes
from agui_store.engine.revisions import RunKey

__all__ = ["Facade"]


class Facade:
    """The base of ``Store``'s verb classes: the attributes and doors of a store they use,
    which :class:`agui_store.store.Store` sets and defines, and the lookups they share. A
    class of verbs, not a store: open one with :func:`agui_store.open`."""

    path: str
    derive_on_append: bool
    _lock: threading.RLock
    _backend: port.Backend
    _writes: writes.Writes
    #: Whether ``close`` ran: asked by a call that would otherwise fail later, away from its
    #: caller (a recording, whose failures are warnings).
    _closed: bool = False

    if TYPE_CHECKING:
        # Defined by Store (agui_store.store), beside the lifecycle they depend on.

        def reading(self) -> AbstractContextManager[port.Reading]:
            """A read transaction: :meth:`agui_store.store.Store.reading`."""

        def writing(self, key: str | None = None) -> AbstractContextManager[port.Writing]:
            """A write transaction: :meth:`agui_store.store.Store.writing`."""

        def replicating(self) -> AbstractContextManager[port.Writing]:
            """A write transaction of ``copy``: :meth:`agui_store.store.Store.replicating`."""

    def _require_thread(self, tx: port.Reading, thread_id: str, scope: str | None = None) -> int:
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
        return revisions.resolve(
            tx, ref, where=self.path, thread_id=thread_id, thread_pk=thread_pk, scope=scope
        )

    def _derive(self, thread_id: str | None, scope: str | None) -> int:
        """``derive``'s work, in a write transaction of its own."""
        with self.writing() as tx:
            threads = revisions.threads_to_derive(tx, thread_id, scope, self.path)
            return self._writes.derive(tx, threads)
