"""The store for asyncio code: every ``Store`` method as a coroutine, run off the event loop.

```python
astore = await agui_store.aio.open("chat.db")          # or: async with agui_store.aio.open(...)
await astore.append(events, input=run_agent_input)
co = await astore.checkout("HEAD", thread_id="t1")
async for event in astore.record(agent_events, input=run_agent_input):
    ...                                                # each event as it arrives, recorded
await astore.close()
```

Reads run on the store's own worker thread, one at a time and in the order they were made,
so the loop never waits for SQLite; they hand their results back as they are (no copies).
Writes that parse and replay events (``append``, ``import_file``, ``derive``, ``compact``,
``rebuild``) go one step further, to a writer process (:mod:`agui_store._writer`, started
with the AsyncStore): parsing and replaying hold the GIL, and on a thread a 4 MB event kept
the loop from running for tens of milliseconds. A second thread only hands each write over and waits
on a pipe, so reads never queue behind writes. ``writer="thread"`` keeps writes on the worker
thread (always so for ``:memory:``, which another process cannot open).

A call whose awaiting task is cancelled still runs to its end (an append lands whole or not
at all either way). ``close`` waits for what was queued and for every recorder still open,
then closes the writer process and the file.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine, Generator
from pathlib import PurePath
from typing import Any, Concatenate, ParamSpec, TypeVar

import msgspec

from agui_store import recording
from agui_store._writer import Unsendable, WriterProcess
from agui_store.engine import arguments
from agui_store.errors import AguiStoreError, ArgumentTypeError, InvalidArgumentError
from agui_store.records import AppendResult
from agui_store.store import OPTIONS as _STORE_OPTIONS
from agui_store.store import Store, check_store, renew_after_fork

__all__ = ["AsyncStore", "open"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: Where writes that parse and replay events run: a child process, or the worker thread.
WRITERS = ("process", "thread")


def _off_loop(
    method: Callable[Concatenate[Store, _P], _R], *, parses: bool = False
) -> Callable[Concatenate[AsyncStore, _P], Coroutine[Any, Any, _R]]:
    """``Store.<method>`` as a coroutine method of ``AsyncStore`` with the same parameters
    (``inspect.signature`` reads them through ``__wrapped__``), run on the worker; with
    ``parses``, in the writer process when there is one."""

    name = method.__name__

    @functools.wraps(method)
    async def off_loop(self: AsyncStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if parses:
            args, kwargs = _absolute_paths(name, args, kwargs)  # type: ignore[assignment]
            result: _R = await self._run_on(self._forwarder, self._write, name, args, kwargs)
            return result
        # Looked up on the instance, so that a Store subclass's override is the one called.
        bound: Callable[_P, _R] = getattr(self._store, name)
        return await self._run(bound, *args, **kwargs)

    return off_loop


#: The parsing writes' parameters that take a path: ``import_file``'s ``source`` (text or
#: ``os.PathLike``); ``append``'s ``events`` (``os.PathLike`` only: its text is events).
_PATH_PARAMETERS: dict[str, tuple[str, tuple[type, ...]]] = {
    "import_file": ("source", (str, os.PathLike)),
    "append": ("events", (os.PathLike,)),
}


def _absolute_paths(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A call's relative path made absolute against the working directory of the moment it
    is made: the writer process has a working directory of its own (where it started), and
    the ``Store`` reads a relative path from the caller's."""
    if name not in _PATH_PARAMETERS:
        return args, kwargs
    parameter, kinds = _PATH_PARAMETERS[name]
    if args and isinstance(args[0], kinds):
        return (_absolute(args[0]), *args[1:]), kwargs
    if isinstance(kwargs.get(parameter), kinds):
        return args, {**kwargs, parameter: _absolute(kwargs[parameter])}
    return args, kwargs


def _absolute(path: Any) -> Any:
    """``path`` made absolute, of the type it came as (a ``Path`` stays a ``Path``)."""
    if isinstance(path, PurePath):
        return type(path)(os.path.abspath(path))
    if isinstance(path, str):
        return os.path.abspath(path)
    return path  # another os.PathLike: it may not pickle, and then runs on this process


def _tell(outcome: asyncio.Future[Any], done: concurrent.futures.Future[Any]) -> None:
    """Give a waiting caller its call's outcome (nobody waits for it any more when the caller
    was cancelled)."""
    if outcome.cancelled():
        return
    if done.cancelled():  # the executor shut down before the call began
        outcome.cancel()
        return
    error = done.exception()
    if error is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(done.result())


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    outcome: asyncio.Future[Any],
    done: concurrent.futures.Future[Any],
) -> None:
    """On the thread that ran a call: hand its outcome to the loop that waits for it. A loop
    closed meanwhile (``asyncio.run`` returned, cancelling the caller) waits for nothing; the
    call has still run to its end."""
    with contextlib.suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(_tell, outcome, done)


def _read_together(
    store: Store, fn: Callable[..., _R], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> _R:
    """:meth:`AsyncStore.in_one_read`'s work, on the worker thread. An error ``fn`` raises
    that is not the store's own is the caller's (the store's reads inside ``fn`` raise the
    store's): it is raised as it was once the read has ended, where the store's door, whose
    block is this function of agui-store's, would report it as a bug in agui-store."""
    raised: Exception
    with store.reading():
        try:
            return fn(store, *args, **kwargs)
        except AguiStoreError:
            raise
        except Exception as e:
            raised = e
    raise raised


class AsyncStore:
    """A :class:`~agui_store.store.Store` for asyncio: each public method, with the same
    name and arguments, as a coroutine run on a worker thread. Open one with
    :func:`agui_store.aio.open`, or wrap a ``Store`` you have: ``AsyncStore(store)`` (which
    closes it on ``close`` only with ``owns=True``)."""

    def __init__(self, store: Store, *, owns: bool = False, writer: str = "process") -> None:
        check_store("AsyncStore", store, path_hint="open a path with agui_store.aio.open()")
        if writer not in WRITERS:
            raise InvalidArgumentError(
                f"writer= must be one of {', '.join(map(repr, WRITERS))}, not "
                f"{arguments.quote(writer)}"
            )
        self._store = store
        self._owns = owns
        memory = store.path == ":memory:" or store.path.startswith("file::memory:")
        self.writer = "thread" if memory else writer
        self._writer_process: WriterProcess | None = None
        self._batchers: set[recording.AsyncBatcher] = set()
        self._closed = False
        #: Done once ``close`` has released the threads, the writer and the file: what a
        #: second ``close``, made while the first runs, waits for.
        self._released: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._new_threads()
        # Started now: a fresh interpreter takes a moment to import the store (1.8-2.2 s
        # measured on 2 cores at load average 10), which the first recorded batch would
        # otherwise wait for.
        self._forwarder.submit(self._start_writer)
        renew_after_fork(self)

    def _new_threads(self) -> None:
        """The worker thread and, with a writer process, the forwarding thread: a second
        thread that hands writes over to it and waits for them, so that a read never queues
        behind an append the process is busy with."""
        self._worker = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="agui-store"
        )
        self._forwarder = (
            concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="agui-store-writer"
            )
            if self.writer == "process"
            else self._worker
        )

    def _after_fork_in_child(self) -> None:
        """In a forked child (a server that forks its workers after building the app, such
        as gunicorn's ``--preload``): the parent's threads did not come along, so a call
        handed to them would wait forever, and its writer process serves the parent. The
        child gets threads of its own, and a writer process of its own from its first write
        or :meth:`ready`; what the parent's recorders held is the parent's to append."""
        inherited, self._writer_process = self._writer_process, None
        if inherited is not None:
            inherited.leave()
        self._batchers = set()
        self._new_threads()

    @property
    def store(self) -> Store:
        """The synchronous store underneath (its calls block: use it off the loop)."""
        return self._store

    @property
    def path(self) -> str:
        """The store's path, or its URL without the password."""
        return self._store.path

    @property
    def max_event_bytes(self) -> int:
        """The largest event the store takes, as JSON (the ``Store``'s)."""
        return self._store.max_event_bytes

    @property
    def purge_pending(self) -> str:
        """Why the last :meth:`purge` did not finish, or ``""`` (see
        :attr:`agui_store.Store.purge_pending`)."""
        return self._store.purge_pending

    def __repr__(self) -> str:
        return f"<agui_store.aio.AsyncStore {self._store.path!r}>"

    async def _run(self, fn: Callable[..., _R], /, *args: Any, **kwargs: Any) -> _R:
        """``fn(*args, **kwargs)`` on the worker thread."""
        return await self._run_on(self._worker, fn, *args, **kwargs)

    async def _run_on(
        self,
        executor: concurrent.futures.Executor,
        fn: Callable[..., _R],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> _R:
        return await self._start_on(executor, fn, *args, **kwargs)

    def _start_on(
        self,
        executor: concurrent.futures.Executor,
        fn: Callable[..., _R],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> asyncio.Future[_R]:
        """Start ``fn(*args, **kwargs)`` on ``executor``; the future that tells its outcome."""
        if self._closed:
            raise AguiStoreError(f"{self._store.path}: the store is closed")
        # Not ``run_in_executor``: its future cancels the work item with a cancelled caller,
        # and an append still queued behind another would never be written. This one tells
        # the caller the outcome; the caller's cancellation stops its waiting only, and the
        # call runs to its end.
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[_R] = loop.create_future()
        work = executor.submit(functools.partial(fn, *args, **kwargs))
        work.add_done_callback(functools.partial(_hand_back, loop, outcome))
        return outcome

    async def in_one_read(self, fn: Callable[..., _R], /, *args: Any, **kwargs: Any) -> _R:
        """``fn(store, *args, **kwargs)`` on the store's worker thread, inside one read
        transaction (:meth:`agui_store.Store.reading`): every read ``fn`` makes of ``store``
        sees the same moment of the store, however fast another writer writes meanwhile.
        An error of ``fn``'s own reaches the caller as it was raised; an ``fn`` that is not
        callable is an ``ArgumentTypeError`` (a ``TypeError`` too) at the call."""
        if not callable(fn):
            raise ArgumentTypeError(
                "in_one_read takes a function of the store, called as fn(store, *args, "
                f"**kwargs), not {arguments.a_kind(fn)} ({arguments.quote(fn)})"
            )
        return await self._run(_read_together, self._store, fn, args, kwargs)

    def append_batch(
        self, batch: list[bytes], options: dict[str, Any]
    ) -> asyncio.Future[AppendResult]:
        """Start appending one recorder's batch (:func:`agui_store.recording.append_batch`'s
        arguments) where appends run: the writer process, or the worker thread. Await the
        future for what was written: a plain future, not a task, so that an event loop
        shutting down, which cancels every task, does not lose the outcome of an append
        that runs to its end anyway."""
        result: asyncio.Future[AppendResult] = self._start_on(
            self._forwarder, self._write, "append_batch", (batch,), options
        )
        return result

    def register_batcher(self, batcher: recording.AsyncBatcher) -> None:
        """Keep an open recorder's batcher until it closes (:meth:`unregister_batcher`):
        ``close`` waits for every batcher still open, so what it holds is appended."""
        self._batchers.add(batcher)

    def unregister_batcher(self, batcher: recording.AsyncBatcher) -> None:
        """Forget a batcher that has appended the rest and closed."""
        self._batchers.discard(batcher)

    def _write(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """On the forwarding thread: a parsing write, in the writer process when there is
        one and its arguments are plain data (a file object, a generator or an event holding
        a value pickle refuses cannot be sent: such a call runs here, on this thread, where
        the store names what it refuses)."""
        if self.writer == "process" and _sendable(args, kwargs):
            if self._writer_process is None or not self._writer_process.alive:
                # It failed to start, or died (the call that saw it raised): a new one.
                self._writer_process = self._new_writer()
            with contextlib.suppress(Unsendable):
                return self._writer_process.call(name, args, kwargs)
        if name == "append_batch":
            return recording.append_batch(self._store, *args, **kwargs)
        return getattr(self._store, name)(*args, **kwargs)

    def _new_writer(self) -> WriterProcess:
        """A writer process for the same file, with the same options."""
        options = {name: getattr(self._store, name) for name in _STORE_OPTIONS}
        # The location, not the path shown: a database URL's password opens it again.
        return WriterProcess(self._store.location, options)

    async def ready(self) -> None:
        """Wait until the writer process has started (at once with a writer thread): what
        a server's startup waits for, so that its first recorded batch does not."""
        await self._run_on(self._forwarder, self._start_writer)

    def _start_writer(self) -> None:
        """On the forwarding thread: start the writer process unless one runs. One that
        fails to start is tried again (and its error raised) by the next write."""
        if self.writer != "process":
            return
        if self._writer_process is not None and self._writer_process.alive:
            return
        with contextlib.suppress(Exception):
            self._writer_process = self._new_writer()

    # --- the Store's methods, off the loop ------------------------------------------------

    append = _off_loop(Store.append, parses=True)
    derive = _off_loop(Store.derive, parses=True)
    compact = _off_loop(Store.compact, parses=True)
    rebuild = _off_loop(Store.rebuild, parses=True)
    import_file = _off_loop(Store.import_file, parses=True)
    # On the worker thread, not the writer process: they take file objects and callbacks.
    export_archive = _off_loop(Store.export_archive)
    import_archive = _off_loop(Store.import_archive)
    threads = _off_loop(Store.threads)
    thread = _off_loop(Store.thread)
    runs = _off_loop(Store.runs)
    get_run = _off_loop(Store.get_run)
    events = _off_loop(Store.events)
    input = _off_loop(Store.input)
    history = _off_loop(Store.history)
    log = _off_loop(Store.log)
    checkout = _off_loop(Store.checkout)
    search = _off_loop(Store.search)
    reconnect_stream = _off_loop(Store.reconnect_stream)
    compacted = _off_loop(Store.compacted)
    merge_base = _off_loop(Store.merge_base)
    is_ancestor = _off_loop(Store.is_ancestor)
    diff = _off_loop(Store.diff)
    check = _off_loop(Store.check)
    branch = _off_loop(Store.branch)
    branches = _off_loop(Store.branches)
    delete_branch = _off_loop(Store.delete_branch)
    rename_branch = _off_loop(Store.rename_branch)
    fork = _off_loop(Store.fork)
    delete_thread = _off_loop(Store.delete_thread)
    delete_owner = _off_loop(Store.delete_owner)
    prune = _off_loop(Store.prune)
    purge = _off_loop(Store.purge)

    async def thread_events(
        self, thread_id: str, *, scope: str | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Every event of a thread in recorded order, read run by run off the loop."""
        for run in await self.runs(thread_id, scope=scope):
            for event in await self.events(run.run_id, thread_id=thread_id, scope=scope):
                yield event

    def record(
        self,
        events: AsyncIterable[Any],
        *,
        input: Any = None,
        thread_id: str | None = None,
        scope: str | None = None,
    ) -> AsyncIterator[Any]:
        """Yield each event of ``events`` unchanged, as it arrives, while recording it in
        batches (at the latest every 0.1 s, and at the end). If the producer raises or the
        consumer stops or is cancelled, what passed is recorded and the run is left
        incomplete. ``scope`` names the owner the run is recorded for (``append``'s).
        See :mod:`agui_store.recording`.

        Raises:
            AguiStoreError: the store is closed (when called: a recording's own failures are
                warnings, and the stream goes on).
            InvalidArgumentError: ``events`` is not a stream of events (one event, one text,
                ``None``: also a ``TypeError``), or ``thread_id`` or ``scope`` is refused.
        """
        if self._closed or self._store._closed:  # or the Store it wraps, closed by its owner
            raise AguiStoreError(f"{self._store.path}: the store is closed")
        return recording.record_async(self, events, input=input, thread_id=thread_id, scope=scope)

    # --- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        """Finish what is queued (open recorders append the rest), then release the worker
        and, when this AsyncStore owns it, the file. Further calls raise. A close made while
        another runs returns once that one has closed the store."""
        while self._batchers and not self._closed:
            await asyncio.gather(*(b.aclose(by_store=True) for b in list(self._batchers)))
        if self._closed:
            await asyncio.wrap_future(self._released)
            return
        self._closed = True
        # Running: a waiting close that is cancelled cannot cancel it.
        self._released.set_running_or_notify_cancel()
        loop = asyncio.get_running_loop()
        try:
            shut = loop.run_in_executor(None, self._shutdown)
        except RuntimeError:  # the loop's executor is shut down (asyncio.run is ending)
            self._shutdown()  # here, then: a close waiting on it would wait forever
            return
        await shut

    def _shutdown(self) -> None:
        try:
            self._forwarder.shutdown(wait=True)
            self._worker.shutdown(wait=True)
            if self._writer_process is not None:
                self._writer_process.close()
        finally:
            try:
                if self._owns:
                    self._store.close()
            finally:
                self._released.set_result(None)

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Opening:
    """What :func:`open` returns: await it for the store, or use it in ``async with``."""

    def __init__(self, path: str | os.PathLike[str] | None, options: dict[str, Any]) -> None:
        self._path = path
        self._options = options
        self._store: AsyncStore | None = None

    def __await__(self) -> Generator[Any, None, AsyncStore]:
        return self._open().__await__()

    async def _open(self) -> AsyncStore:
        arguments.known_options("agui_store.aio.open()", self._options, _OPEN_OPTIONS)
        options = dict(self._options)
        writer = options.pop("writer", "process")
        loop = asyncio.get_running_loop()
        store = await loop.run_in_executor(None, functools.partial(Store, self._path, **options))
        try:
            return AsyncStore(store, owns=True, writer=writer)
        except BaseException:
            store.close()
            raise

    async def __aenter__(self) -> AsyncStore:
        self._store = await self._open()
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        if self._store is not None:
            await self._store.close()

    def __getattr__(self, name: str) -> Any:
        # Only what the class lacks gets here: a store's verb called on the opening itself.
        if name.startswith("__") or not hasattr(AsyncStore, name):
            raise AttributeError(name)
        raise AttributeError(
            f"agui_store.aio.open() returns an opening, not the store: await it "
            f"(astore = await agui_store.aio.open(...)) or use it in 'async with', then call "
            f"astore.{name}"
        )


def open(path: str | os.PathLike[str] | None = None, **options: Any) -> _Opening:
    """Open (creating if needed) a store file for asyncio code, off the loop.

    ``astore = await agui_store.aio.open(path, **options)``, or
    ``async with agui_store.aio.open(path, **options) as astore:``. The path and options
    are those of :func:`agui_store.open`, plus ``writer``: ``"process"`` (default) or
    ``"thread"`` (see the module notes). Another option is an ``ArgumentTypeError`` (a
    ``TypeError`` too) naming it and the options taken.
    """
    return _Opening(path, options)


#: The options :func:`open` takes: the ``Store``'s, and ``writer``.
_OPEN_OPTIONS = (*_STORE_OPTIONS, "writer")

_PLAIN = (bytes, bytearray, str, dict, msgspec.Struct, PurePath)


def _sendable(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a call's arguments are plain data that pickles cheaply and exactly: JSON text,
    dicts, msgspec structs and paths, or lists and tuples of them."""
    for value in (*args, *kwargs.values()):
        if value is None or isinstance(value, (_PLAIN, int, float)):
            continue
        if type(value) in (list, tuple) and all(isinstance(item, _PLAIN) for item in value):
            continue
        return False
    return True
