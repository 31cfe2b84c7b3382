"""Test hooks: what tests and benchmarks may reach inside a store, and nothing else.

These are documented, stable entry points for the store's own test suite and benchmarks
(and for anyone testing code built on agui-store). They are not part of the API an
application should use: they bypass the store's rules.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agui_store import _writer
from agui_store.engine import checkpoints, erasure, port, verified
from agui_store.engine import search as search_index
from agui_store.history import resent_bodies
from agui_store.history import search as search_rules
from agui_store.history.restore import View
from agui_store.protocol import patch
from agui_store.store import Store

if TYPE_CHECKING:  # asyncio and the ASGI code load only for those who use them
    from agui_store.aio import AsyncStore
    from agui_store.asgi import Recorder


def connection(store: Store) -> Any:
    """The backend's open database connection (SQLite: an ``apsw.Connection``), to inspect
    tables, query plans and triggers. Writing through it bypasses the store."""
    return store._backend.connection()


@contextlib.contextmanager
def reading(store: Store) -> Iterator[port.Reading]:
    """A read transaction of the store's, through the storage port (:mod:`agui_store.engine.port`):
    to look at what the engine keeps (runs as a replica sees them, derived data) on any
    backend with the operations the engine itself uses. The same as :meth:`Store.reading`."""
    with store.reading() as tx:
        yield tx


def replayed_view(store: Store, run: int | str, *, thread_id: str | None = None) -> View:
    """The view of a run (a revision, or its integer key) by full replay of its lineage,
    ignoring every checkpoint: the reference checkouts are compared with."""
    with store.reading() as tx:
        pk = run if isinstance(run, int) else store._resolve(tx, run, thread_id=thread_id).pk
        return verified.replayed_view(tx, pk)


def search_text(message: dict[str, Any]) -> str:
    """The text a message is found by, as ``checkout`` restores it (its content, tool-call
    names and arguments, tool results): a message is indexed again when it changes."""
    return search_rules.message_text(message)


def search_words(message: dict[str, Any]) -> list[str]:
    """The words a message is found by (its text as ``checkout`` restores it, folded and
    cut as the index cuts it): what a brute-force scan of every view compares
    ``Store.search`` with."""
    return search_rules.words(search_rules.message_text(message))


def search_snippet(text: str, query: str) -> list[tuple[str, bool]]:
    """The snippet a hit shows of a message whose text is ``text``, found by ``query``:
    ``(text, matched)`` pieces, as :attr:`agui_store.SearchHit.snippet` holds them."""
    return search_rules.snippet(text, search_rules.parse(query))


def search_index_words(message: dict[str, Any]) -> list[str]:
    """The words the search index is given for a message, in order (the backend's string of
    them, :func:`agui_store.history.search.index_text`, cut at its spaces): the same as
    :func:`search_words`, made without a string per word."""
    return search_rules.index_text(search_rules.message_text(message)).split()


def search_matches(query: str, message: dict[str, Any]) -> bool:
    """Whether ``Store.search(query)`` finds a message, decided on its words alone (the
    query language's definition, with no index)."""
    return search_rules.parse(query).matches(search_words(message))


@contextlib.contextmanager
def without_search_index() -> Iterator[None]:
    """Inside the block, no store of this process indexes what it derives for search:
    what lets a benchmark measure what the index costs an append. Stores written so are
    not searchable; for benchmarks only."""
    search_index.INDEXING[0] = False
    try:
        yield
    finally:
        search_index.INDEXING[0] = True


@contextlib.contextmanager
def search_pending_rows(rows: int) -> Iterator[None]:
    """Inside the block, SQLite stores of this process move their pending search rows into
    the index (their words into the FTS5 table) once ``rows`` of them wait (else a few
    hundred): what lets a small test store search both its pending rows and its FTS5 table."""
    from agui_store.backends.sqlite import transaction

    kept = transaction.SEARCH_PENDING_ROWS[0]
    transaction.SEARCH_PENDING_ROWS[0] = rows
    try:
        yield
    finally:
        transaction.SEARCH_PENDING_ROWS[0] = kept


@contextlib.contextmanager
def search_owner_rows(rows: int) -> Iterator[None]:
    """Inside the block, stores of this process search an owner's scope from the owner's own
    index rows only when it holds fewer than ``rows`` of them (``0``: never; else 1,000 on
    PostgreSQL, 2,048 on SQLite, where the owner also holds at most 16 threads), and from
    the query's words otherwise: what lets a small test store take either way."""
    from agui_store.backends.sqlite import transaction as sqlite_transaction

    lists = [sqlite_transaction.SEARCH_OWNER_FEW_ROWS]
    try:
        from agui_store.backends.postgres import transaction as postgres_transaction
    except ImportError:  # no PostgreSQL driver installed: no PostgreSQL store to change
        pass
    else:
        lists.append(postgres_transaction.SEARCH_OWNER_FEW_ROWS)
    kept = [found[0] for found in lists]
    for found in lists:
        found[0] = rows
    try:
        yield
    finally:
        for found, value in zip(lists, kept):
            found[0] = value


def forget_thread_search(store: Store, thread_id: str) -> None:
    """Delete a thread's search index rows through the port's operation (what erasing a
    thread runs), in a write transaction of the store's."""
    with store.writing() as tx:
        found = tx.thread(thread_id)
        if found is not None:
            tx.forget_thread_search(found[0])


def records(store: Store, run_pks: list[int]) -> list[Any]:
    """The replay records (inputs and decoded events) of runs, by key, verified against
    their hashes."""
    with store.reading() as tx:
        return verified.records(tx, run_pks)


def forget(store: Store) -> None:
    """Drop everything the store keeps in memory between calls (cached views, sequence
    state, what appends remember, the message chunks it validated, the request bodies it
    read, the messages it kept decoded), so that the next call is cold. What its connection
    verified of the blobs it read stays (:mod:`agui_store.engine.trust`)."""
    with store._lock:
        store._writes.memory.forget_everything()
    with store.reading() as tx:
        tx.trusted_blobs().forget_messages()


def kept_message_blobs(store: Store) -> int:
    """How many message blobs the store's connection keeps the decoded messages of (see
    :mod:`agui_store.engine.trust`)."""
    with store.reading() as tx:
        return tx.trusted_blobs().kept_blobs()


def read_bodies_whole(store: Store) -> None:
    """From now on, the store reads every request body whole: ``append(input=...)``
    remembers nothing of earlier bodies (see :mod:`agui_store.history.resent_bodies`) and spends
    nothing on remembering them. The path a body that resends nothing took before bodies were
    remembered, which the remembering one is compared with."""
    store._writes.memory.read_bodies_whole()


def remembered_bodies(store: Store) -> resent_bodies.Memo:
    """What the store remembers of the request bodies it read (see
    :mod:`agui_store.history.resent_bodies`)."""
    return store._writes.memory.resent


@contextlib.contextmanager
def on_write_locked(store: Store, hook: Callable[[str | None], None]) -> Iterator[None]:
    """Call ``hook`` inside each write transaction of a PostgreSQL store once it holds its
    locks, before it writes, with the thread it appends to (``None``: a write that runs
    alone). A hook that waits keeps the transaction, and its locks, open: tests use it to
    show which writers proceed meanwhile. Only PostgreSQL stores have the hook."""
    backend = store._backend
    if not hasattr(backend, "on_write_locked"):
        raise TypeError(f"{store.path} is not a PostgreSQL store: it has no write hook")
    backend.on_write_locked = hook
    try:
        yield
    finally:
        backend.on_write_locked = None


@contextlib.contextmanager
def on_erasure_step(hook: Callable[[str], None]) -> Iterator[None]:
    """Call ``hook`` with each step's name as an erasure in this process (a copy's too)
    reaches it:
    ``selected`` and ``erased`` inside its write transaction (before any row is deleted;
    after every row is and the erasure is logged), ``committed`` after the commit, before
    the purge (:data:`agui_store.engine.erasure.STEPS`). A dry run reaches none. The crash
    tests stop an eraser there: the hook signals its parent and waits to be killed."""
    erasure.step_hook = hook
    try:
        yield
    finally:
        erasure.step_hook = None


@contextlib.contextmanager
def state_patches(*, share: int, most: int) -> Iterator[None]:
    """While inside, checkpoints store a state as the patches since the last whole one when
    their JSON text is at most 1/``share`` of that state's (``0``: whatever their size), and
    a whole state again after ``most`` patches; the store's own limits again afterwards. For
    every store in the process: tests use it to make states stored as patches common."""
    before = checkpoints.STATE_PATCH_SHARE, checkpoints.MAX_STATE_PATCHES
    checkpoints.STATE_PATCH_SHARE, checkpoints.MAX_STATE_PATCHES = share, most
    try:
        yield
    finally:
        checkpoints.STATE_PATCH_SHARE, checkpoints.MAX_STATE_PATCHES = before


# --- JSON Patch's two engines -------------------------------------------------------------


def exact_patch(document: Any, operations: Any) -> Any:
    """:func:`~agui_store.protocol.patch.apply_patch` by its exact engine alone (the whole
    document modelled as JavaScript values, as ``@ag-ui/client`` holds them), never by its
    fast path: what the fast path must agree with wherever it answers."""
    return patch._apply_exact(document, operations)


def fast_patch(document: Any, operations: Any) -> tuple[bool, Any]:
    """:func:`~agui_store.protocol.patch.apply_patch` by its fast path alone: ``(True, the new
    document)``, or ``(False, None)`` where the fast path does not answer (a document that is
    not plain JSON, operations that are not a list, or a patch it leaves to the exact engine).
    Raises what the fast path raises otherwise."""
    if not patch._takes_fast_path(document, operations):
        return False, None
    try:
        return True, patch._fast_apply(document, operations)
    except patch._Fallback:
        return False, None


# --- the async store and the ASGI recorder ------------------------------------------------


#: How much nicer than its parent an AsyncStore's writer process runs.
WRITER_NICE = _writer.NICE


def writer_process(astore: AsyncStore) -> subprocess.Popen[bytes] | None:
    """The child process an AsyncStore's writes run in, while one runs (``None`` before the
    first start, or when it writes on its worker thread): to check its priority, to end it
    and see the next write recover, to see it gone after ``close``."""
    process = astore._writer_process
    return None if process is None else process._proc


def closed(astore: AsyncStore) -> bool:
    """Whether ``close()`` has finished (its writer process and threads are ended)."""
    return astore._closed


def stop_threads(astore: AsyncStore) -> None:
    """End an AsyncStore's worker and forwarding threads without closing it: what is left
    of one a program dropped (its writer process must then end on its own)."""
    astore._forwarder.shutdown()
    astore._worker.shutdown()


def recording(astore: AsyncStore) -> int:
    """How many ``record()`` streams of an AsyncStore still have batches to write."""
    return len(astore._batchers)


def recorder_store(recorder: Recorder) -> AsyncStore:
    """The AsyncStore a Recorder writes through (the one it made for a ``Store`` it was
    given, or the one it was given)."""
    return recorder._store
