"""A durable, branchable ``ConversationStore`` for pydantic-ai, in an agui-store store.

pydantic-ai's AG-UI adapter keeps a conversation on the server when it is given a
``conversation_store``; pydantic-ai itself ships only an in-memory one. This one keeps it in
the same SQLite file or PostgreSQL database as the AG-UI runs the ``Recorder`` records:

```python
from agui_store.integrations.pydantic_ai import ConversationStore

conversations = ConversationStore("chat.db")          # a path or URL, a Store or an AsyncStore
await AGUIAdapter.dispatch_request(request, agent=agent,
                                   conversation_store=conversations, conversation_scope=user_id)
```

Messages are stored with pydantic-ai's own ``ModelMessagesTypeAdapter``, once per distinct
content; a save lands whole or raises pydantic-ai's ``ConversationConflict`` having written
nothing, whichever process saves; ``read_history`` reads a whole history, or its last
``limit`` entries, in one statement. The rules live in :mod:`agui_store.engine.conversations`;
``Store.check()`` verifies every message, entry and record against its content hash.

The two views are linked: each AG-UI run that saved the conversation announced the entries
it stored (the adapter's ``pydantic_ai_conversation_saved`` event, recorded with the run), so
:meth:`ConversationStore.saved_by_run` goes from a run to the conversation head it left and
:meth:`ConversationStore.run_of_entry` from an entry to the run that saved it.

Needs the ``pydantic-ai`` extra: ``pip install 'agui-store[pydantic-ai]'``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import operator
import os
import platform
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

try:
    import pydantic
    from pydantic_ai import AgentRunResult
    from pydantic_ai import conversation_store as _upstream
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "agui_store.integrations.pydantic_ai needs pydantic-ai: "
        "pip install 'agui-store[pydantic-ai]'"
        # pip says only that no version satisfies the requirement: name the reason.
        + (
            ""
            if sys.version_info >= (3, 11)
            else f" (pydantic-ai needs Python 3.11; this is Python {platform.python_version()})"
        )
    ) from e

from agui_store.aio import AsyncStore
from agui_store.codec import json as _json
from agui_store.engine import clock as _clock
from agui_store.engine import conversations as _engine
from agui_store.engine.arguments import a_kind as _a_kind
from agui_store.engine.arguments import known_options as _known_options
from agui_store.engine.arguments import quote as _quote
from agui_store.engine.conversations import Continuation
from agui_store.errors import (
    AguiStoreError,
    ArgumentTypeError,
    InvalidArgumentError,
    RunNotFoundError,
)
from agui_store.store import OPTIONS as _store_options
from agui_store.store import Store, renew_after_fork

__all__ = ["Continuation", "ConversationDiff", "ConversationStore", "SavedRun"]

_T = TypeVar("_T")
#: A ``\\uXXXX`` escape of a surrogate in JSON text: the store writes one only for half a
#: pair, which pydantic's JSON parser refuses: a history holding one is validated from the
#: values the store's own JSON decoder reads.
_LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_RECORD = pydantic.TypeAdapter(_upstream.ConversationRecord)
#: The record's fields kept as columns (the rest is its JSON).
_COLUMNS = frozenset({"conversation_id", "head_id", "scope", "revision", "branches"})
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class SavedRun:
    """What one recorded AG-UI run saved to its conversation: the entries it stored, in
    order, and so the head it left (``None`` when it stored no new entry)."""

    run_id: str
    thread_id: str
    conversation_id: str
    entry_ids: tuple[str, ...]

    @property
    def head_id(self) -> str | None:
        """The conversation's head after this run's save, when it stored entries."""
        return self.entry_ids[-1] if self.entry_ids else None


@dataclass(frozen=True)
class ConversationDiff:
    """Two points of a conversation's tree compared, as ``Store.diff`` compares two runs:
    the last entry their histories share (``None``: none) and the entries after it on each
    side, oldest first."""

    merge_base: str | None
    only_a: tuple[_upstream.ConversationEntry, ...]
    only_b: tuple[_upstream.ConversationEntry, ...]


class ConversationStore(_upstream.ConversationStore):
    """pydantic-ai's ``ConversationStore`` on an agui-store store (SQLite or PostgreSQL).

    Args:
        store: a :class:`~agui_store.store.Store`, an :class:`~agui_store.aio.AsyncStore`
            (its synchronous store is used), or a path or URL to open one at (closed by
            :meth:`close`); ``None`` (the default) opens the one ``agui_store.open(None)``
            does: ``$AGUI_STORE_DB``, else ``./agui-store.db``.
        **options: :func:`agui_store.open`'s options, when ``store`` is a path or URL, or
            ``None``.

    Raises:
        ArgumentTypeError: ``store`` is none of these, or an option is none of
            :func:`agui_store.open`'s (a ``TypeError`` too).
        InvalidArgumentError: ``options`` given with an open store.

    Each call runs on a worker thread of its own, off the event loop. ``delete`` removes
    the record, then every entry no remaining record's head or branches reach and every
    message no remaining entry holds (see ``docs/pydantic-ai.md``).
    """

    def __init__(
        self, store: Store | AsyncStore | str | os.PathLike[str] | None = None, **options: Any
    ):
        if isinstance(store, AsyncStore):
            self._store, self._owns = store.store, False
        elif isinstance(store, Store):
            self._store, self._owns = store, False
        elif store is None or isinstance(store, (str, bytes, os.PathLike)):
            _known_options("ConversationStore", options, _store_options)
            self._store, self._owns = Store(store, **options), True
        else:
            raise ArgumentTypeError(
                "ConversationStore takes a Store, an AsyncStore, or a path or URL to open "
                f"one at, not {_a_kind(store)}"
            )
        if options and not self._owns:
            raise InvalidArgumentError(
                "ConversationStore takes store options only with a path or URL, "
                f"not with an open store: {sorted(options)}"
            )
        self._worker = _worker()
        self._closed = False
        renew_after_fork(self)

    @property
    def store(self) -> Store:
        """The synchronous store underneath (its calls block: use it off the loop)."""
        return self._store

    def __repr__(self) -> str:
        return f"<agui_store.integrations.pydantic_ai.ConversationStore {self._store.path!r}>"

    async def _off_loop(self, fn: Callable[..., _T], /, *args: Any) -> _T:
        if self._closed:
            raise AguiStoreError(f"{self._store.path}: the conversation store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, functools.partial(fn, *args))

    def _after_fork_in_child(self) -> None:
        """In a forked child (a server forking its workers from an app it built): the
        parent's worker thread did not come along, and a call handed to it would wait
        forever; the child's calls run on a thread of its own."""
        self._worker = _worker()

    def _in_read(self, fn: Callable[..., _T], /, *args: Any) -> _T:
        """``fn(tx, *args)`` in a read transaction of the store (on the worker)."""
        with self._store.reading() as tx:
            return fn(tx, *args)

    def _in_write(self, fn: Callable[..., _T], /, *args: Any) -> _T:
        """``fn(tx, *args)`` in the store's write transaction of conversations (on the
        worker): one at a time, beside the AG-UI appends."""
        with self._store.writing(_engine.WRITERS_KEY) as tx:
            return fn(tx, *args)

    def _write_record(
        self,
        record: _engine.Record,
        entries: Sequence[_engine.Entry],
        expected_revision: str | None,
    ) -> None:
        """On the worker: hash the entries, then take the write lock to store them."""
        self._in_write(_engine.write_record, _engine.prepare(record, entries), expected_revision)

    async def close(self) -> None:
        """Release the worker and, when this opened the store, the store; later calls
        raise ``AguiStoreError``."""
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._worker.shutdown(wait=True)
        if self._owns:
            self._store.close()

    async def __aenter__(self) -> ConversationStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- pydantic-ai's calls, their arguments checked at the call --------------------------

    # Each takes upstream's arguments as they are (**options), so that an argument a later
    # pydantic-ai adds passes through; the one each checks is read from them.

    async def load(self, conversation_id: str, **options: Any) -> Conversation | None:
        """pydantic-ai's ``load``; a ``limit`` that is not an integer is an
        ``ArgumentTypeError`` (a ``TypeError`` too) naming it."""
        _count_argument("limit", options.get("limit"))
        return await super().load(conversation_id, **options)

    async def load_entries(
        self, conversation_id: str, **options: Any
    ) -> list[_upstream.ConversationEntry] | None:
        """pydantic-ai's ``load_entries``; a ``limit`` that is not an integer is an
        ``ArgumentTypeError`` (a ``TypeError`` too) naming it."""
        _count_argument("limit", options.get("limit"))
        return await super().load_entries(conversation_id, **options)

    async def list_conversations(self, **options: Any) -> list[_upstream.ConversationRecord]:
        """pydantic-ai's ``list_conversations``; a ``limit`` that is not an integer is an
        ``ArgumentTypeError`` (a ``TypeError`` too) naming it."""
        _count_argument("limit", options.get("limit"))
        return await super().list_conversations(**options)

    async def branch(self, conversation_id: str, **options: Any) -> Conversation:
        """pydantic-ai's ``branch``; an ``at`` that is not an integer is an
        ``ArgumentTypeError`` (a ``TypeError`` too) naming it, before anything is read."""
        _count_argument("at", options.get("at"))
        return await super().branch(conversation_id, **options)

    async def fork(self, conversation_id: str, **options: Any) -> Conversation:
        """pydantic-ai's ``fork``; an ``at`` that is not an integer is an
        ``ArgumentTypeError`` (a ``TypeError`` too) naming it, before anything is read."""
        _count_argument("at", options.get("at"))
        return await super().fork(conversation_id, **options)

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], **options: Any
    ) -> list[_upstream.ConversationEntry]:
        """pydantic-ai's ``save``, refusing at the call, having read and written nothing,
        what no store could save: ``ArgumentTypeError`` (a ``TypeError`` too) for a
        ``conversation`` that is neither a ``Conversation`` nor a run's result, or an id or
        scope that is not text; ``InvalidArgumentError`` for an id or scope holding a NUL or
        half a surrogate pair, or the scope ``""``; ``ArgumentTypeError`` too for messages
        that are no list. Checked before the stored record is read:
        there, a scope no record can have reads as another owner's, a
        ``ConversationConflict`` that no reload and retry resolves."""
        saved = conversation.conversation if isinstance(conversation, AgentRunResult) else (
            conversation
        )
        if not isinstance(saved, Conversation):
            raise ArgumentTypeError(
                "ConversationStore.save takes a pydantic-ai Conversation or a run's result "
                f"(AgentRunResult), not {_a_kind(saved)}; nothing was written"
            )
        _engine.refuse_saved(saved.conversation_id, options.get("scope"))
        messages = saved.messages
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes, bytearray)):
            raise ArgumentTypeError(
                f"conversation {_quote(saved.conversation_id)}: its messages are "
                f"{_a_kind(messages)}, not a list of pydantic-ai messages; "
                "nothing was written"
            )
        return await super().save(conversation, **options)

    # --- the five primitives, and read_history in one statement ---------------------------

    async def read_record(self, conversation_id: str) -> _upstream.ConversationRecord | None:
        """The record for a conversation, or ``None`` if the store doesn't have it."""
        stored = await self._off_loop(self._in_read, _engine.read_record, conversation_id)
        return None if stored is None else _record_from(stored)

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[_upstream.ConversationRecord]:
        """The stored records (of ``scope``), newest ``updated_at`` first, at most ``limit``."""
        stored = await self._off_loop(self._in_read, _engine.read_records, scope, limit)
        return [_record_from(record) for record in stored]

    async def write_record(
        self,
        record: _upstream.ConversationRecord,
        *,
        new_entries: Sequence[_upstream.ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store the record and its new entries in one transaction, or raise
        ``ConversationConflict`` having written nothing. A ``record`` that is no
        ``ConversationRecord`` (or whose branches are no list), or new entries that are no
        ``ConversationEntry``, raise ``ArgumentTypeError`` (a ``TypeError`` too)."""
        if not isinstance(record, _upstream.ConversationRecord):
            raise ArgumentTypeError(
                "write_record takes a pydantic-ai ConversationRecord, not "
                f"{_a_kind(record)}; nothing was written"
            )
        if not isinstance(record.branches, (list, tuple)):
            raise ArgumentTypeError(
                f"conversation {_quote(record.conversation_id)}: its branches are "
                f"{_a_kind(record.branches)}, not a list of entry ids; nothing was written"
            )
        stored = _record_to(record)
        entries = _entries_to(record.conversation_id, new_entries)
        try:
            await self._off_loop(self._write_record, stored, entries, expected_revision)
        except _engine.ConversationConflictError as e:
            raise _upstream.ConversationConflict(record.conversation_id) from e

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the record, and the entries and messages nothing else reaches, in one
        transaction; ``ConversationConflict`` when no record with that revision is stored."""
        try:
            await self._off_loop(
                self._in_write, _engine.delete_record, conversation_id, expected_revision
            )
        except _engine.ConversationConflictError as e:
            raise _upstream.ConversationConflict(conversation_id) from e

    async def read_entry(self, entry_id: str) -> _upstream.ConversationEntry:
        """The entry with this id; a ``LookupError`` (``EntryNotFoundError``) if none."""
        stored = await self._off_loop(self._in_read, _engine.read_entry, entry_id)
        return _entries_from([stored])[0]

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[_upstream.ConversationEntry]:
        """The entries from the first up to ``head_id``, or its last ``limit``: one query."""
        stored = await self._off_loop(self._in_read, _engine.read_history, head_id, limit)
        return _entries_from(stored)

    # --- the AG-UI view beside it ---------------------------------------------------------

    async def saved_by_run(
        self, run: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> SavedRun | None:
        """What a recorded AG-UI run saved to its conversation (from the
        ``pydantic_ai_conversation_saved`` event it sent), or ``None``: it saved nothing.
        ``run`` is a run id or revision, as ``Store.get_run`` takes it; with ``scope``,
        another owner's run is one the store doesn't have (``RunNotFoundError``)."""
        return await self._off_loop(self._saved_by_run, run, thread_id, scope)

    def _saved_by_run(
        self, run: str, thread_id: str | None, scope: str | None
    ) -> SavedRun | None:
        found = self._store.get_run(run, thread_id=thread_id, scope=scope)
        if found is None:
            where = f" in thread {thread_id!r}" if thread_id else ""
            raise RunNotFoundError(f"no run {run!r}{where}")
        saved = None
        for run_id, conversation_id, ids in self._in_read(_engine.saved_entries, found.thread_id):
            if run_id == found.run_id:
                saved = SavedRun(run_id, found.thread_id, conversation_id, tuple(ids))
        return saved

    async def continued_from(
        self, run: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Continuation | None:
        """Which conversation entry the model continued from in a recorded run, and whether
        that is where the run's AG-UI lineage had reached (``Continuation.diverged``: after
        a server-side :meth:`branch`, the client still sends its whole history, which the
        AG-UI log keeps, while the model went on from the branch point). ``None``: the run
        saved nothing. ``agui-store show`` and the viewer print the same."""
        return await self._off_loop(self._continued_from, run, thread_id, scope)

    def _continued_from(
        self, run: str, thread_id: str | None, scope: str | None
    ) -> Continuation | None:
        found = self._store.get_run(run, thread_id=thread_id, scope=scope)
        if found is None:
            where = f" in thread {thread_id!r}" if thread_id else ""
            raise RunNotFoundError(f"no run {run!r}{where}")
        lineage = [r.run_id for r in self._store.log(found.run_id, thread_id=found.thread_id)]
        return self._in_read(_engine.continuation, found.thread_id, lineage)

    async def run_of_entry(self, entry_id: str, *, scope: str | None = None) -> SavedRun | None:
        """The recorded AG-UI run whose save stored an entry, or ``None``: the entry was
        stored outside a recorded run, its run is not in this store, or, with ``scope``, it
        is another owner's. Raises ``EntryNotFoundError`` (a ``LookupError``) for an entry
        the store doesn't have."""
        return await self._off_loop(self._run_of_entry, entry_id, scope)

    def _run_of_entry(self, entry_id: str, scope: str | None) -> SavedRun | None:
        conversation_id = self._in_read(_engine.entry_conversation, entry_id)
        if conversation_id is None:
            raise _engine.EntryNotFoundError(entry_id)
        # The adapter names a conversation by the AG-UI thread id.
        for run_id, saved_to, ids in self._in_read(_engine.saved_entries, conversation_id):
            if entry_id in ids:
                if self._store.get_run(run_id, thread_id=conversation_id, scope=scope) is None:
                    return None  # another owner's run
                return SavedRun(run_id, conversation_id, saved_to, tuple(ids))
        return None

    async def diff(self, a: str | None, b: str | None) -> ConversationDiff:
        """Compare two entries' histories (say, two heads: a regenerate's branch and the
        turn it replaced): where they fork and what each has after it."""
        history_a = await self.read_history(a)
        history_b = await self.read_history(b)
        shared = 0
        for left, right in zip(history_a, history_b):
            if left.id != right.id:
                break
            shared += 1
        base = history_a[shared - 1].id if shared else None
        return ConversationDiff(base, tuple(history_a[shared:]), tuple(history_b[shared:]))


def _count_argument(name: str, value: Any) -> None:
    """A ``limit`` or ``at`` is ``None`` or an integer: another type is refused by name at
    the call (pydantic-ai's own methods compare it with 0 first, a bare ``TypeError``, or
    slice with it). A negative one is left to pydantic-ai, which raises ``UserError``."""
    if value is None:
        return
    try:
        operator.index(value)  # an int, or what stands for one (numpy's)
    except TypeError:
        pass
    else:
        if not isinstance(value, bool):
            return
    raise ArgumentTypeError(
        f"{name} must be None or an integer >= 0, not {_a_kind(value)} ({_quote(value)})"
    )


def _worker() -> concurrent.futures.ThreadPoolExecutor:
    """The thread a ConversationStore's calls run on, one at a time."""
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="agui-store-conversations"
    )


# --- pydantic-ai's types as the engine's JSON text --------------------------------------------


def _micros(moment: datetime) -> int:
    """Microseconds since the epoch (a naive time is taken as UTC), what listings order by."""
    return _clock.micros(_clock.in_utc_if_naive(moment))


def _record_to(record: _upstream.ConversationRecord) -> _engine.Record:
    try:
        fields = _record_fields(record)
    except ValueError:  # PydanticSerializationError and ValidationError are ValueErrors
        raise _unwritable_record(record) from None
    return _engine.Record(
        conversation_id=record.conversation_id,
        head_id=record.head_id,
        scope=record.scope,
        revision=record.revision,
        updated_at=_micros(record.updated_at),
        record=_json.canonical_bytes(fields).decode(),
        branches=tuple(record.branches),
    )


def _record_fields(
    record: _upstream.ConversationRecord, only: set[str] | None = None
) -> dict[str, Any]:
    """The record's fields but its columns, as pydantic's JSON, refused (a ``ValueError``)
    unless a read gives them back: a usage or deferred tool requests of the wrong type
    (pydantic's serializer warns, and writes it as it is) would be stored, and fail every
    later read of the conversation, and every listing of the conversations beside it."""
    fields: dict[str, Any] = _RECORD.dump_python(
        record, mode="json", include=only, exclude=set(_COLUMNS), warnings="error"
    )
    _RECORD.validate_python({**_RECORD_COLUMNS_READ, **fields})
    return fields


#: Values of the record's columns that a read would fill in, to validate its other fields
#: alone (the columns' own values are refused by name by the engine).
_RECORD_COLUMNS_READ: dict[str, Any] = {
    "conversation_id": "c", "head_id": None, "scope": None, "revision": "r", "branches": [],
}


def _unwritable_record(record: _upstream.ConversationRecord) -> InvalidArgumentError:
    """The error naming the first field of a record a read could not give back."""
    name, reason = "fields", "unknown"
    for field in _upstream.ConversationRecord.__dataclass_fields__:
        if field in _COLUMNS or field == "_":
            continue
        try:
            _record_fields(record, {field})
        except ValueError as e:
            name, reason = field, str(e)
            break
    value = getattr(record, name, None)
    return InvalidArgumentError(
        f"conversation {_quote(record.conversation_id)}: its {name} ({_a_kind(value)}) cannot "
        f"be saved: pydantic-ai cannot write it as JSON it reads back ({_brief(reason)}); "
        "usage is a RunUsage of whole counts, deferred tool requests a DeferredToolRequests "
        "of tool call parts and values pydantic serializes; nothing was written"
    )


def _record_from(stored: _engine.Record) -> _upstream.ConversationRecord:
    fields = _json.decode(stored.record)
    fields.update(
        conversation_id=stored.conversation_id,
        head_id=stored.head_id,
        scope=stored.scope,
        revision=stored.revision,
        branches=list(stored.branches),
    )
    record = _RECORD.validate_python(fields)
    moment = record.updated_at
    if moment.tzinfo is not None and _micros(moment) != stored.updated_at:
        # pydantic writes a UTC offset in whole minutes (+05:30:15 as +05:30): the moment
        # saved is the column's, shown in the offset pydantic read back.
        exact = _EPOCH + timedelta(microseconds=stored.updated_at)
        record = dataclasses.replace(record, updated_at=exact.astimezone(moment.tzinfo))
    return record


def _entries_to(
    conversation_id: str, entries: Sequence[_upstream.ConversationEntry]
) -> list[_engine.Entry]:
    if not entries:
        return []
    try:
        messages = [e.message for e in entries]
    except (AttributeError, TypeError):  # no entries, or not iterable
        raise _not_entries(conversation_id, entries) from None
    try:
        dumped = _written(messages)
    except ValueError:  # PydanticSerializationError and ValidationError are ValueErrors
        raise _unwritable(conversation_id, entries) from None
    return [
        _engine.Entry(
            entry.id, entry.parent_id, entry.kind, _json.canonical_bytes(message).decode()
        )
        for entry, message in zip(entries, dumped)
    ]


def _not_entries(conversation_id: str, entries: Any) -> ArgumentTypeError:
    """The error naming new entries that are no ``ConversationEntry``: the first such one, or
    the whole argument when it is no sequence of them."""
    what = f"its new entries are {_a_kind(entries)}, not a list of"
    if isinstance(entries, (list, tuple)):
        for index, entry in enumerate(entries):
            if not isinstance(entry, _upstream.ConversationEntry):
                what = f"its new entry {index} is {_a_kind(entry)}, not a"
                break
    return ArgumentTypeError(
        f"conversation {_quote(conversation_id)}: {what} pydantic-ai ConversationEntry; "
        "nothing was written"
    )


def _written(messages: list[ModelMessage]) -> list[Any]:
    """The messages as pydantic-ai's JSON, refused (a ``ValueError``) unless a load gives
    them back: a value of the wrong type (pydantic's serializer warns, and writes it as it
    is) or JSON its ``ModelMessagesTypeAdapter`` cannot validate would be stored, and fail
    every later load of the conversation."""
    dumped: list[Any] = ModelMessagesTypeAdapter.dump_python(
        messages, mode="json", warnings="error"
    )
    ModelMessagesTypeAdapter.validate_python(dumped)
    return dumped


def _unwritable(
    conversation_id: str, entries: Sequence[_upstream.ConversationEntry]
) -> InvalidArgumentError:
    """The error naming the first entry whose message a load could not give back."""
    index, entry, reason = 0, entries[0], "unknown"
    for at, each in enumerate(entries):
        try:
            _written([each.message])
        except ValueError as e:
            index, entry, reason = at, each, str(e)
            break
    return InvalidArgumentError(
        f"conversation {_quote(conversation_id)}, new entry {index} (id {_quote(entry.id)}): "
        f"its message ({_a_kind(entry.message)}) cannot be saved: pydantic-ai "
        f"cannot write its message as JSON it reads back ({_brief(reason)}); a message is a "
        "ModelRequest or ModelResponse of pydantic-ai's parts, and a tool's return a value "
        "pydantic serializes; nothing was written"
    )


def _brief(reason: str) -> str:
    """pydantic's reason on one line, cut: it names the field and the type it expected."""
    return " ".join(reason.split())[:200]


def _entries_from(stored: Sequence[_engine.Entry]) -> list[_upstream.ConversationEntry]:
    if not stored:
        return []
    # One validation for the whole history: the messages' texts as one JSON array.
    history = "[" + ",".join(entry.message for entry in stored) + "]"
    messages: list[ModelMessage]
    if _LONE_SURROGATE_ESCAPE.search(history) is None:
        messages = ModelMessagesTypeAdapter.validate_json(history)
    else:  # half an emoji, which pydantic's JSON parser refuses and a str holds
        messages = ModelMessagesTypeAdapter.validate_python(_json.decode(history))
    return [
        _upstream.ConversationEntry(
            id=entry.entry_id,
            parent_id=entry.parent_id,
            message=message,
            kind=entry.kind,  # type: ignore[arg-type]
        )
        for entry, message in zip(stored, messages)
    ]
