"""Copying threads between two stores, like ``git push`` and ``git pull``: :func:`copy`.

This module is the edge: it opens the stores, reports progress and sums up what was copied.
The engine's half, comparing and writing (:mod:`agui_store.engine.replication`), is written once
above the storage port, so it copies between any two backends: SQLite file to file, SQLite to
PostgreSQL and back.

A copy is lossless. Replaying the events through ``append`` would not be: the destination
would decide lineage again, stamp new times and may group batches differently. So runs land
as recorded (:meth:`port.Writing.insert_run`, :meth:`port.Writing.replicate_log`): run ids,
lineage (parent, reason, the ``parentRunId`` sent), synthetic runs, inputs and echoed inputs
as stored, every batch with its events, outcome and time, creation times, branches and the
thread's owner, and the pydantic-ai conversations linked to the threads (the one named by
the thread's id, and those its runs announced saving to), with their entries, messages and
records at their revisions. Only the sequence numbers are the destination's own (``seq`` is
global to one database): events get the destination's next ones, in the source's order.
Hashes are computed as ``append`` computes them (:mod:`agui_store.history.hashing`), over
content alone, so every copied run has the source's hash; the source's own hashes are
checked as its runs are read, so a run edited there outside the store is refused
(:class:`~agui_store.errors.HashMismatchError`, nothing written), never given fresh hashes.

Derived data (lineage digests, checkpoints) is not copied: copied complete runs are listed
as underived, and derived after the copy (or left for later, as ``derive_on_append=False``
would) so that a checkout reads the same on both sides.

What a copy refuses (:class:`~agui_store.errors.SyncConflictError`, nothing written):

- a run both stores hold with different content: its record (parent, lineage reason, sent
  ``parentRunId``, input as stored, created_at, synthetic) or its batches (grouping, outcome,
  appended_at, events' type, payload and echo references in order). A run whose batches in
  the destination are the first of the source's (it was copied while still streaming) is
  not a conflict: the batches it lacks are copied;
- a thread whose owner (scope) differs;
- a conversation entry both hold with different content, or a conversation both moved on
  (the destination's head or a branch of it is not in the source's history, or the
  source's record is older and holds entries the destination's does not; ``force``: the
  source's record wins). A source's record older than the destination's that holds
  nothing more is behind it, and not copied;
- a branch both stores hold at different runs, unless the destination's tip is an
  ancestor of the source's (the branch then moves forward, as ``git push`` fast-forwards;
  at the same run, the later ``updated_at`` wins).
  A destination ahead of, or diverged from, the source is refused like git's
  non-fast-forward push (``force=True``, ``--force``: the source's tip wins).

One write transaction on the destination for the whole copy, after every thread was
compared: a conflict anywhere leaves the destination exactly as it was, and a copy that
fails midway (a full disk, a lost connection) writes nothing either. The destination's
writer waits for it; copy a thread at a time (``thread_id=``) to keep each copy short.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from agui_store import backends
from agui_store.backends import locations
from agui_store.backends.sqlite import files
from agui_store.engine import erasure, port, reads, replication, tombstones
from agui_store.engine.arguments import check_progress, check_thread_id, flag, path_text
from agui_store.engine.intake import check_scope
from agui_store.errors import AguiStoreError, InvalidArgumentError, NotAStoreError
from agui_store.store import Store, is_url

#: Called as events land: ``(events copied so far, events to copy)``.
ProgressCallback = replication.ProgressCallback


_log = logging.getLogger("agui_store.sync")


@dataclass(frozen=True)
class CopyResult:
    """What a copy did.

    Attributes:
        threads: threads that received anything (new ones included).
        threads_created: threads the destination did not hold.
        runs: runs copied.
        events: events copied (those of runs extended included).
        runs_present: runs the destination already held whole (nothing to copy).
        runs_extended: runs the destination held in part (copied while streaming): the
            batches it lacked were copied.
        branches: branches created or moved forward.
        conversations: pydantic-ai conversations linked to the threads that the
            destination lacked or held at an older revision, written.
        erased: threads the destination held that the source erased: erased there too.
        erased_conversations: pydantic-ai conversations the destination held that the
            source erased (with their threads, or on their own): erased there too.
        left_erased: threads the destination erased, which the copy did not bring back
            (``restore_erased=True`` does).
    """

    threads: int = 0
    threads_created: int = 0
    runs: int = 0
    events: int = 0
    runs_present: int = 0
    runs_extended: int = 0
    branches: int = 0
    conversations: int = 0
    erased: int = 0
    left_erased: int = 0
    erased_conversations: int = 0


# --- the API --------------------------------------------------------------------------------


@contextlib.contextmanager
def opened(
    where: Store | str | os.PathLike[str],
    *,
    must_exist: bool,
    busy_timeout_ms: int = backends.DEFAULT_BUSY_TIMEOUT_MS,
    purpose: str = "to copy from",
) -> Iterator[Store]:
    """A store given as one, or opened (and closed after) from a path or URL. A file it
    creates (``must_exist=False``) is removed again when the block fails and leaves the
    store holding nothing: a failed copy or import into a new path leaves no empty store
    behind. ``purpose`` ends "no store at PATH", the error of a store that must exist and
    does not (``""``: nothing)."""
    if isinstance(where, Store):
        yield where
        return
    path = path_text(where)  # UTF-8, as SQLite names its files
    # a file: URI names its file after "file:", before any "?mode=ro"
    real = path if is_url(path) or not path.startswith("file:") else files.store_file(path)
    missing = None if not must_exist or real in (None, ":memory:") else (
        backends.missing_store(real))
    if missing is not None:
        shown = locations.without_password(path) if is_url(path) else path
        raise NotAStoreError(f"no store at {shown}{' ' if purpose else ''}{purpose}: {missing}")
    created = None  # the file or URL of a store this opening creates
    if must_exist or real is None:
        pass
    elif is_url(path):
        created = path if backends.missing_store(path) is not None else None
    elif not os.path.lexists(real):  # a file: URI's text names no file: its file is asked
        created = files.store_file(path)
    try:
        store = Store(path, busy_timeout_ms=busy_timeout_ms)
    except BaseException:  # the file it began to create holds no store
        if created is not None:
            _remove_new_store(created)
        raise
    left_empty = False
    try:
        yield store
    except BaseException:
        left_empty = created is not None and _holds_nothing(store)
        raise
    finally:
        store.close()
        if left_empty and created is not None:
            _remove_new_store(created)


def _remove_new_store(where: str) -> None:
    """Remove the store an opening created, on the way out of a failure: the failure is
    what the caller is told, so a removal that fails too (a lost connection) is logged."""
    try:
        backends.remove_new_store(where)
    except AguiStoreError as e:
        _log.warning("the new store %s, left holding nothing, was not removed: %s",
                     locations.without_password(where), e)




def _holds_nothing(store: Store) -> bool:
    """Whether ``store`` holds no thread and no conversation (``False`` when it cannot say)."""
    try:
        if store.threads():
            return False
        with store.reading() as tx:
            return not tx.conversations(None, 1)
    except Exception:
        return False


class _SourceFailed(BaseException):
    """A source read's error on its way through the destination's transaction, which
    translates only an ``Exception`` (with its own database's rules) and rolls back on this."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class _SourceReads:
    """The source's read transaction, its errors (a call's, or those of the rows a call
    returns as an iterator) raised as :class:`_SourceFailed` until they are back in the
    source's transaction. Each method is wrapped once, when first asked for."""

    def __init__(self, tx: Any) -> None:
        self._tx = tx

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._tx, name)
        if not callable(attr):
            return attr
        wrapped = _from_source(attr)
        setattr(self, name, wrapped)  # found in the instance from now on, not here
        return wrapped


def _from_source(method: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = method(*args, **kwargs)
        except AguiStoreError:
            raise
        except Exception as e:
            raise _SourceFailed(e) from e
        return _SourceRows(result) if hasattr(result, "__next__") else result

    return call


class _SourceRows:
    __slots__ = ("_rows",)

    def __init__(self, rows: Iterator[Any]) -> None:
        self._rows = rows

    def __iter__(self) -> _SourceRows:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._rows)
        except (AguiStoreError, StopIteration):
            raise
        except Exception as e:
            raise _SourceFailed(e) from e


def _same_store(a: Store, b: Store) -> bool:
    """Whether two stores are one database, however their paths or URLs spell it (a
    link, a ``file:`` URI, ``localhost`` for ``127.0.0.1``)."""
    if a is b:
        return True
    if is_url(a.path) != is_url(b.path):
        return False
    with a.reading() as one, b.reading() as other:
        return one.database() == other.database()


def _chosen(
    tx: port.Reading, thread_id: str | None, scope: str | None, where: str
) -> list[str]:
    """The threads a copy covers (:func:`reads.chosen_threads`), and a thread the source
    erased and holds no thread of: a copy of that thread is a copy of its erasure. Not in
    an owner's ``scope``: a tombstone names no owner, so the erasure could reach another
    owner's thread of that id."""
    if (
        thread_id is not None
        and scope is None
        and tx.thread(thread_id) is None
        and tombstones.thread_erased_at(tx, thread_id) is not None
    ):
        return [thread_id]
    return reads.chosen_threads(tx, thread_id, scope, where)


def copy(
    src: Store | str | os.PathLike[str],
    dst: Store | str | os.PathLike[str],
    *,
    thread_id: str | None = None,
    scope: str | None = None,
    force: bool = False,
    progress: ProgressCallback | None = None,
    restore_erased: bool = False,
) -> CopyResult:
    """Copy threads from ``src`` to ``dst`` (open stores, or paths and
    ``postgresql://`` URLs, opened and closed here: the source must exist, the destination
    is created when missing): every thread, or ``thread_id`` alone; with a ``scope``,
    only that owner's threads (another owner's thread is absent, as to every read). Only
    what ``dst`` lacks is copied, so a second copy copies nothing.

    ``force``: a branch both hold at runs where the destination's tip is not an ancestor
    of the source's (the source moved it back, or both moved it) takes the source's tip
    instead of being refused, and a pydantic-ai conversation both saved since they last
    agreed takes the source's record (what only the destination's reached is released).
    Runs are never forced: they are append-only on both sides.

    ``progress(copied, total)`` is called as events land.

    Erasures (docs/guides/erasure.md): a thread the destination erased (it keeps a
    tombstone, a hash of the id) is not copied back, unless ``restore_erased``; a copy of
    every thread (no ``thread_id``) carries the source's erasures: the threads the source
    erased and the destination holds are erased there, and their tombstones copied. A
    copy of one thread the source erased carries that thread's erasure.

    Raises:
        SyncConflictError: both hold a run, a thread's owner or a branch with different
            content (see the module's documentation); nothing was written.
        HashMismatchError: a run of the source is not what its hashes cover (edited outside
            the store, or damaged); nothing was written.
        RunNotFoundError: ``src`` has no thread ``thread_id`` (in the ``scope``) and
            erased none of that id (a copy of a thread the source erased carries its
            erasure).
    """
    check_scope(scope)
    check_thread_id(thread_id)
    flag("restore_erased", restore_erased)  # "no" would bring the erased back
    flag("force", force)
    check_progress(progress)
    with opened(src, must_exist=True) as source, opened(dst, must_exist=False) as target:
        if _same_store(source, target):
            named = source.path if target.path == source.path else (
                f"{source.path}, which {target.path} names too")
            raise InvalidArgumentError(
                f"the source and the destination are the same store ({named})"
            )
        with source.reading() as stx:
            # Each store's transaction translates its own database's errors: one the
            # source's reads raise passes through the destination's unread (which rolls
            # back), and is raised again inside the source's, which names the source.
            try:
                with target.replicating() as dtx:
                    source_tx = cast(port.Reading, _SourceReads(stx))
                    thread_ids = _chosen(source_tx, thread_id, scope, source.path)
                    done = replication.replicate(
                        source_tx, dtx, thread_ids, scope=scope, force=force, progress=progress,
                        restore_erased=restore_erased, carry=thread_id is None,
                    )
            except _SourceFailed as failed:
                raise failed.error from None
        # Derived data, as append would have written it (its own transactions: what is
        # left underived by an interruption is derived by the next copy of its threads).
        if target.derive_on_append:
            for t in done.derive:
                target.derive(t)
        if done.erased or done.erased_conversations:
            # The copy is committed: a purge that cannot run now (the file held by another
            # writer past the busy timeout) or cannot finish (a reader holding pages from
            # before it) is said, and finished by the next one.
            erasure.step("committed")
            try:
                pending = "" if target.purge() else target.purge_pending
            except AguiStoreError as e:
                pending = (
                    f"the purge failed ({e}): purge again (Store.purge(), or 'agui-store purge')"
                )
            if pending:
                _log.warning(
                    "copy: erased %d thread(s) and %d conversation(s) the source erased; "
                    "their purge is not finished in the destination: %s",
                    done.erased,
                    done.erased_conversations,
                    pending,
                )
        plans = done.plans
        return CopyResult(
            threads=len(done.touched),
            threads_created=sum(1 for p in plans if p.dst_pk is None),
            runs=sum(len(p.missing) for p in plans),
            events=done.events,
            runs_present=sum(p.present for p in plans),
            runs_extended=sum(len(p.extended) for p in plans),
            branches=sum(len(p.branches) for p in plans),
            conversations=done.conversations,
            erased=done.erased,
            left_erased=done.left_erased,
            erased_conversations=done.erased_conversations,
        )


__all__ = ["CopyResult", "copy", "opened"]
