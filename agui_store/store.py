"""The store: a lossless AG-UI event log with git-like run lineage, over a storage port.

``Store`` is the facade of verbs, written once for every backend. Each verb checks its
arguments, opens a transaction of the store's and hands one call to the engine. The verbs
are grouped by concern in :mod:`agui_store.facade`, one class each, which ``Store`` is
composed of: recording (``appends``), reading (``reads``), search (``search``), lineage
(``lineage``), erasure (``erasure``) and the archive (``archive``). This module holds
what they stand on: the store's options and lifecycle (its lock, its backend, what a
``fork()`` of the process does to it), the doors into its transactions, and ``check``.
"""
from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from agui_store import backends
from agui_store.backends import POSTGRES_SCHEMES, is_url, open_backend
from agui_store.codec import ingest
from agui_store.engine import (
    arguments,
    integrity,
    port,
    writes,
)
from agui_store.engine.integrity import CheckReport
from agui_store.engine.writes import (
    CHECKPOINT_EVENTS,
    IMPORT_BATCH_BYTES,
    IMPORT_BATCH_EVENTS,
    MAX_DEPTH_LIMIT,
)
from agui_store.errors import AguiStoreError, ArgumentTypeError, InvalidArgumentError
from agui_store.facade.appends import AppendVerbs
from agui_store.facade.archive import ArchiveVerbs
from agui_store.facade.erasure import ErasureVerbs
from agui_store.facade.lineage import LineageVerbs
from agui_store.facade.reads import ReadVerbs
from agui_store.facade.search import SearchVerbs

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


class Store(AppendVerbs, ReadVerbs, SearchVerbs, LineageVerbs, ErasureVerbs, ArchiveVerbs):
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
            "busy_timeout_ms", busy_timeout_ms, minimum=0,
            maximum=backends.MAX_BUSY_TIMEOUT_MS,
            why=" (some 24 days: the longest wait SQLite and PostgreSQL take)",
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
        self.derive_on_append = arguments.flag("derive_on_append", derive_on_append)
        self._lock = threading.RLock()
        self._open = _OpenTransaction()
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
        # Last: a fork in another thread renews whole stores only.
        renew_after_fork(self)

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
            self._closed = True

    def __repr__(self) -> str:
        return f"<agui_store.Store {self.path!r}>"

    @property
    def location(self) -> str:
        """Where the store is: a file's absolute path (a ``file:`` URI as it was given), or
        a database URL with its password (another process opens the same store with it,
        whatever its working directory; :attr:`path` is the one to show)."""
        return self._backend.location

    def _after_fork_in_child(self) -> None:
        """In a forked child: drop the parent's lock and its connection (the backend opens
        its own on first use) and what the parent remembered of the database."""
        self._lock = threading.RLock()
        self._open = _OpenTransaction()
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
        own. An error the block's own code raises (not the store's, nor the database's
        through the port) comes out as it was raised, once the transaction has ended."""
        with self._lock:
            try:
                with self._backend.reading() as tx:
                    outer = self._open.enter("store.reading()")
                    try:
                        yield tx
                    except Exception as e:
                        _pass_the_callers_own(e)
                        raise
                    finally:
                        self._open.door = outer
            except _CallersOwn as own:
                raised = own.error
            else:
                return
        raise raised

    @contextmanager
    def writing(self, key: str | None = None) -> Iterator[port.Writing]:
        """A write transaction of the store's, yielding the storage port
        (:class:`agui_store.engine.port.Writing`): it commits when the block ends and rolls
        back, leaving the database as it was, when it raises (as sqlite-utils'
        ``Database.atomic()``). An error the block's own code raises (not the store's, nor
        the database's through the port) comes out as it was raised, after the rollback.

        ``key`` narrows it to the writes of one key, which take turns with each other
        alone: an AG-UI thread id (appends to that thread), or another writer's own key
        (``conversations.WRITERS_KEY``). PostgreSQL runs writes of different keys side by
        side; SQLite has one writer at a time. What the store remembers of the database is
        dropped when the transaction fails.

        Not inside another of this store's transactions, in the same thread (a verb called
        in a ``reading()`` block): a write begins and commits its own, and would end the
        one around it; inside a block, write through the port it yields."""
        with self._lock:
            self._open.refuse_inside()
            try:
                with self._backend.writing(key) as tx:
                    outer = self._open.enter("store.writing()")
                    try:
                        yield tx
                    except Exception as e:
                        _pass_the_callers_own(e)
                        raise
                    finally:
                        self._open.door = outer
            except BaseException as e:
                self._writes.forget()
                if not isinstance(e, _CallersOwn):
                    raise
                raised = e.error
            else:
                return
        raise raised

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

    # --- the store as a whole --------------------------------------------------------------

    def check(self) -> CheckReport:
        """Check the store: its storage's integrity (an SQLite file's pages, foreign keys
        and schema; a PostgreSQL schema's foreign keys and objects) and the store's own
        invariants (see :mod:`agui_store.engine.integrity`). Reports; never repairs."""
        with self._lock, self._backend.reading() as tx:
            return integrity.check(tx)


class _CallersOwn(BaseException):
    """An error of the code in a block of the store's door, on its way out through the
    backend's transaction: that rolls back on it as on any error, and translates only an
    ``Exception`` (into the store's errors, a bug in agui-store for one it does not know)."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error


def _pass_the_callers_own(error: Exception) -> None:
    """Raise ``error`` wrapped in :class:`_CallersOwn` if the code in the door's block
    raised it itself: not the store's own error, and no frame of agui-store's (a call of the
    port, of an engine function, of a verb) between the block and where it was raised. The
    door's own frame, where it is caught, comes first."""
    if isinstance(error, AguiStoreError):
        return
    tb = error.__traceback__
    frame = None if tb is None else tb.tb_next  # the block's, then what it called
    while frame is not None:
        module = frame.tb_frame.f_globals.get("__name__", "")
        if module == "agui_store" or module.startswith("agui_store."):
            return
        frame = frame.tb_next
    raise _CallersOwn(error) from None


class _OpenTransaction(threading.local):
    """Which of a store's transactions a thread is inside, if any: a write is refused
    there by name, where the database would refuse it with its own words (SQLite: "cannot
    start a transaction within a transaction") or end the transaction around it."""

    door: str | None = None

    def enter(self, door: str) -> str | None:
        """Mark the thread inside ``door`` (unless inside one already); returns what to set
        :attr:`door` back to when it leaves (inline in the doors: a checkout passes here)."""
        outer = self.door
        if outer is None:
            self.door = door
        return outer

    def refuse_inside(self) -> None:
        if self.door is not None:
            through = ", or write through the port it yields" if "writing" in self.door else ""
            raise InvalidArgumentError(
                f"a write cannot begin inside {self.door} of the same store: each verb "
                "(append, branch, delete_thread, ...) commits a transaction of its own; call "
                f"it after the block{through}"
            )


class _Renewable(Protocol):
    def _after_fork_in_child(self) -> None: ...


#: What a forked child renews before it runs on, each by its ``_after_fork_in_child``: a
#: Store's connection, an AsyncStore's and a ConversationStore's threads and writer. Held
#: weakly: what is garbage-collected is not renewed.
_RENEWED_AFTER_FORK: weakref.WeakSet[_Renewable] = weakref.WeakSet()


def check_store(
    call: str,
    value: object,
    *,
    path_hint: str = "open the path with agui_store.open() and give the store",
) -> None:
    """Refuse, at ``call``, what is not a :class:`Store`, naming what it is and, for an
    ``AsyncStore`` or a path, what to pass instead: an ``AsyncStore`` is the likeliest
    mistake in async code, and its own ``Store`` is one attribute away. An ``AsyncStore``
    exists only once its module is loaded, so a sync caller imports no asyncio for this."""
    if isinstance(value, Store):
        return
    aio = sys.modules.get("agui_store.aio")
    if aio is not None and isinstance(value, aio.AsyncStore):
        hint = " (give it astore.store, the Store the AsyncStore wraps)"
    elif isinstance(value, (str, bytes, os.PathLike)):
        hint = f" ({path_hint})"
    else:
        hint = ""
    raise ArgumentTypeError(
        f"{call} takes an agui_store Store, not {arguments.a_kind(value)}{hint}"
    )


def renew_after_fork(owner: _Renewable) -> None:
    """Have ``owner._after_fork_in_child()`` called first thing in a child forked while it
    lives: what it holds of the parent (a connection, its threads) does not survive the
    fork, and a call that waited for a thread the child lacks would wait forever."""
    _RENEWED_AFTER_FORK.add(owner)


def _renew_in_child() -> None:
    for owner in list(_RENEWED_AFTER_FORK):
        owner._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_in_child)


#: The options a store opens with (:class:`Store`'s keyword arguments), which
#: :func:`open`, ``agui_store.aio.open`` and the pydantic-ai ``ConversationStore`` pass on.
OPTIONS = (
    "busy_timeout_ms", "max_event_bytes", "max_depth", "checkpoint_events", "derive_on_append",
)


def open(path: str | os.PathLike[str] | None = None, **options: Any) -> Store:
    """Open (creating if needed) a store: an SQLite file, or a PostgreSQL database named by a
    ``postgresql://`` URL. ``None``: ``$AGUI_STORE_DB`` or ``./agui-store.db``;
    ``":memory:"`` keeps everything in memory. ``options`` are :class:`Store`'s; another
    is an ``ArgumentTypeError`` (a ``TypeError`` too) naming it and the options taken."""
    arguments.known_options("agui_store.open()", options, OPTIONS)
    return Store(path, **options)
