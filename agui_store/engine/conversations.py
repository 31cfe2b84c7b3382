"""Conversations as pydantic-ai keeps them, stored beside the AG-UI log: the engine's part.

A conversation is a log of entries, each holding one message and pointing at the entry
before it, and a record that points at its newest entry (its head) and at the last entries
of the branches it left. This module holds the rules, once for every backend, over the
storage port (:mod:`agui_store.engine.port`): messages are stored once by content (their sha256),
an entry's hash covers its parent's (an edit anywhere in a history changes the hash of every
entry after it), a write lands whole or not at all, and a delete releases what nothing
reaches any more. It knows no pydantic-ai type: messages and records arrive as JSON text
(:mod:`agui_store.integrations.pydantic_ai` encodes them with pydantic-ai's own type
adapters), so ``check()`` covers them without pydantic-ai installed.

Every function takes the transaction it works in first, as every engine module does: reads
a store's ``reading()``, writes its ``writing(WRITERS_KEY)``.

Writes take turns in one write transaction at a time (SQLite: the file's one writer;
PostgreSQL: a lock of their own, :data:`WRITERS_KEY`, beside the AG-UI appends, which never
touch these tables): a revision check, the rows it writes and the entries a delete releases
are decided in it, so two writers in several processes cannot both succeed against one
revision, and a delete never releases an entry a concurrent save has just pointed at (that
save either committed first, and its record reaches the entry, or it starts after the
delete, and finds the entry gone: a conflict).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import uuid
from collections.abc import Callable, Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import msgspec

from agui_store.codec import json
from agui_store.engine import arguments, port
from agui_store.errors import (
    AguiStoreError,
    ArgumentTypeError,
    HashMismatchError,
    InvalidArgumentError,
    InvalidEventError,
)

#: "All of them", as a ``limit`` every backend takes (SQLite's and PostgreSQL's bigint).
EVERY = 2**62
#: The key conversation writes take turns on: the store's write transaction of one key
#: (``Store.writing(key)``), which PostgreSQL runs beside other keys' appends and SQLite
#: alone. No AG-UI thread is named so (a NUL first); one that were would only take turns
#: with conversation writes.
WRITERS_KEY = "\x00agui-store conversations"

_NONE = b"\xff" * 8  # a missing field, unlike any length prefix
_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder()


class ConversationConflictError(AguiStoreError):
    """A conversation changed since it was read: its stored revision is not the one a
    write expected, or an entry the write builds on was released by a delete since.
    Nothing was written."""

    def __init__(self, conversation_id: str, reason: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(f"conversation {conversation_id!r}: {reason}; nothing was written")


class EntryNotFoundError(AguiStoreError, LookupError):
    """No conversation entry has this id (never stored, or released by a delete)."""

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(f"no conversation entry {entry_id!r} in the store")


@dataclass(frozen=True)
class Entry:
    """One entry as stored: its message is JSON text (keys sorted)."""

    entry_id: str
    parent_id: str | None
    kind: str
    message: str


@dataclass(frozen=True)
class Record:
    """A conversation's record as stored. ``record`` is the JSON text of its other fields;
    ``updated_at`` (microseconds since the epoch) orders listings."""

    conversation_id: str
    head_id: str | None
    scope: str | None
    revision: str
    updated_at: int
    record: str
    branches: tuple[str, ...]


# --- hashes ---------------------------------------------------------------------------------


def _field(value: str | bytes | None) -> bytes:
    if value is None:
        return _NONE
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return len(data).to_bytes(8, "big") + data


def canonical(message: str | bytes, where: str) -> bytes:
    """A message's JSON with its keys sorted and no spaces: equal messages, one text (so one
    row), whatever order an encoder wrote their keys in."""
    try:
        return _ENCODER.encode(_DECODER.decode(message))
    except (msgspec.DecodeError, UnicodeEncodeError):
        pass  # not JSON, or half an emoji (a lone surrogate), which msgspec refuses
    try:
        return json.canonical_bytes(json.decode(message))
    except InvalidEventError as e:
        raise InvalidArgumentError(f"{where}: the message is not JSON: {e}") from None


def message_hash(message: bytes) -> bytes:
    """A message's address: the sha256 of its stored text."""
    return hashlib.sha256(message).digest()


def entry_hash(entry_id: str, kind: str, message: bytes, parent: bytes | None) -> bytes:
    """An entry's hash: its id, kind, message hash and its parent's hash (``None``: the
    first entry of a history), so it vouches for the whole history before it."""
    return hashlib.sha256(
        b"agui-store conversation entry 1\x00"
        + _field(entry_id) + _field(kind) + _field(message) + _field(parent)
    ).digest()  # fmt: skip


def record_hash(record: Record) -> bytes:
    """A record's hash: every field it stores, its branches in order."""
    return hashlib.sha256(
        b"agui-store conversation record 1\x00"
        + _field(record.conversation_id) + _field(record.head_id) + _field(record.scope)
        + _field(record.revision) + _field(str(record.updated_at)) + _field(record.record)
        + _field(_ENCODER.encode(list(record.branches)))
    ).digest()  # fmt: skip


# --- reads ----------------------------------------------------------------------------------


def _record(row: port.ConversationRow) -> Record:
    return Record(
        conversation_id=str(row.conversation_id),
        head_id=None if row.head_id is None else str(row.head_id),
        scope=None if row.scope is None else str(row.scope),
        revision=str(row.revision),
        updated_at=int(row.updated_at),
        record=str(row.record),
        branches=tuple(str(b) for b in _DECODER.decode(row.branches)),
    )


def record_of(row: port.ConversationRow) -> Record:
    """A record as the port reads it (:meth:`port.Reading.conversation`)."""
    return _record(row)


def _entry(row: port.EntryRow) -> Entry:
    """An entry read, verified against its hashes: a message, kind or parent edited outside
    the store is refused, not returned (``check()`` lists every such edit)."""
    entry_id, parent_id, kind, message, stored, address, parent_hash = row
    text = str(message).encode("utf-8", "surrogatepass")
    if message_hash(text) != bytes(address):
        raise HashMismatchError(
            f"conversation entry {entry_id!r}: its message fails its content hash"
        )
    parent = None if parent_hash is None else bytes(parent_hash)
    if entry_hash(str(entry_id), str(kind), bytes(address), parent) != bytes(stored):
        raise HashMismatchError(
            f"conversation entry {entry_id!r} fails its hash (its kind, message or parent "
            "changed)"
        )
    return Entry(
        str(entry_id), None if parent_id is None else str(parent_id), str(kind), str(message)
    )


def _storable(value: object) -> bool:
    """Whether a store can hold ``value``, text (:func:`arguments.unstorable`): a read of
    one it cannot (a number, bytes, a NUL) finds nothing, on every backend alike, as in
    pydantic-ai's in-memory store."""
    return isinstance(value, str) and arguments.unstorable(value) is None


def _count(limit: int | None) -> int:
    """A ``limit`` as the statements take it: ``None`` is every row, and a count larger
    than any table is every row too."""
    if limit is None:
        return EVERY
    return min(arguments.positive_int("limit", limit, minimum=0), EVERY)


def _verified(row: port.ConversationRow) -> Record:
    """A record read, verified against its hash: a head, scope, revision, branch or field
    edited outside the store is refused, not returned (its JSON could be anything, and a
    head naming no entry would read as an empty history). ``check()`` lists every such
    edit, and the erasure verbs still take the conversation."""
    record = _record(row)
    if record_hash(record) != bytes(row.hash):
        raise HashMismatchError(
            f"conversation {arguments.quote(record.conversation_id)}: its record fails its "
            "hash (its head, scope, revision, branches or fields changed)"
        )
    return record


def read_record(tx: port.Reading, conversation_id: str) -> Record | None:
    """The record of a conversation, or ``None``. Raises
    :class:`~agui_store.errors.HashMismatchError` for a record edited outside the store."""
    row = tx.conversation(conversation_id) if _storable(conversation_id) else None
    return None if row is None else _verified(row)


def read_records(tx: port.Reading, scope: str | None, limit: int | None) -> list[Record]:
    """Records newest ``updated_at`` first (ties: the first created first), of ``scope``
    (``None``: every scope), at most ``limit`` (``None``: all). Raises
    :class:`~agui_store.errors.HashMismatchError` for a record edited outside the store."""
    count = _count(limit)
    if scope is not None and not _storable(scope):
        return []
    rows = tx.conversations(scope, count)
    return [_verified(row) for row in rows]


def read_history(tx: port.Reading, head_id: str | None, limit: int | None) -> list[Entry]:
    """The entries from the first up to ``head_id``, or only the last ``limit`` of them, in
    one statement. Raises :class:`EntryNotFoundError` when ``head_id`` is not stored."""
    count = _count(limit)
    if head_id is None or count == 0:
        return []
    if not _storable(head_id):
        raise EntryNotFoundError(head_id)
    rows = tx.conversation_history(head_id, count)
    # An entry whose message row is gone is left out of the rows: the history would read
    # as one without it (check() names it too).
    if not rows or str(rows[-1].entry_id) != head_id:
        _missing(tx, head_id)
    for before, row in itertools.pairwise(rows):
        if row.parent_id is not None and str(row.parent_id) != str(before.entry_id):
            _missing(tx, str(row.parent_id))
    if len(rows) < count and rows[0].parent_id is not None:
        _missing(tx, str(rows[0].parent_id))
    return [_entry(row) for row in rows]


def read_entry(tx: port.Reading, entry_id: str) -> Entry:
    """One entry; raises :class:`EntryNotFoundError` when it is not stored."""
    row = tx.conversation_entry(entry_id) if _storable(entry_id) else None
    if row is None:
        _missing(tx, entry_id)
    return _entry(row)


def _missing(tx: port.Reading, entry_id: str) -> NoReturn:
    """Raise for an entry a read did not find: :class:`EntryNotFoundError` when it is not
    stored, :class:`~agui_store.errors.HashMismatchError` when it is but its message is
    not (deleted outside the store)."""
    if not _storable(entry_id) or tx.conversation_entry_key(entry_id) is None:
        raise EntryNotFoundError(entry_id)
    raise HashMismatchError(
        f"conversation entry {arguments.quote(entry_id)}: its message is not stored"
    )


# --- writes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """What a write of a record works out before its write transaction (see :func:`prepare`):
    each new entry with its canonical message text and that text's hash."""

    record: Record
    entries: tuple[tuple[Entry, bytes, bytes], ...]


def prepare(record: Record, new_entries: Sequence[Entry]) -> Prepared:
    """Check and hash what :func:`write_record` writes, outside the write lock. Raises
    :class:`~agui_store.errors.InvalidArgumentError` for an entry id given twice or a message
    that is not JSON."""
    cid = record.conversation_id
    refuse_unstorable(record, new_entries)
    prepared: list[tuple[Entry, bytes, bytes]] = []
    for index, entry in enumerate(new_entries):
        text = canonical(entry.message, f"conversation {cid!r}, new entry {index}")
        prepared.append((entry, text, message_hash(text)))
    new_ids = [entry.entry_id for entry in new_entries]
    if len(set(new_ids)) != len(new_ids):
        raise InvalidArgumentError(
            f"conversation {cid!r}: new entries repeat an entry id; nothing was written"
        )
    # A parent among the new entries comes before its child, as pydantic-ai's port says
    # they do: else the store would find no such entry yet, and a ConversationConflict
    # would send a caller that retries on one round forever.
    position = {entry_id: index for index, entry_id in enumerate(new_ids)}
    for index, entry in enumerate(new_entries):
        at = position.get(entry.parent_id) if entry.parent_id is not None else None
        if at is not None and at >= index:
            raise InvalidArgumentError(
                f"conversation {arguments.quote(cid)}, new entry {index} (id "
                f"{arguments.quote(entry.entry_id)}): its parent is "
                + ("itself" if at == index else f"new entry {at}, which comes after it")
                + "; new entries are in order, each after the one it points at; nothing was "
                "written"
            )
    return Prepared(record, tuple(prepared))


def refuse_unstorable(record: Record, new_entries: Sequence[Entry]) -> None:
    """Ids and names are text on every backend: one PostgreSQL cannot hold (a NUL) is
    refused on SQLite too, so that any store copies to any other; a scope is an owner's
    name, never empty. A save and an archive's import both ask it."""
    for what, value in (("id", record.conversation_id), ("revision", record.revision)):
        if value is None:
            _none(record.conversation_id, what)
    _refuse(record.conversation_id, [
        ("id", record.conversation_id), ("scope", record.scope), ("head", record.head_id),
        ("revision", record.revision), *(("branch", b) for b in record.branches),
    ])
    _refuse_empty_scope(record.conversation_id, record.scope)
    # An entry's kind is held as an id is: a copy carries only such kinds. A save's entries
    # are many: each is looked at, and what is wrong with it is said only when it is refused.
    unstorable = arguments.unstorable
    for index, entry in enumerate(new_entries):
        entry_id, parent, kind = entry.entry_id, entry.parent_id, entry.kind
        if (
            type(entry_id) is not str or type(kind) is not str
            or unstorable(entry_id) is not None or unstorable(kind) is not None
            or (parent is not None and (type(parent) is not str or unstorable(parent)))
        ):
            _refuse_entry(record.conversation_id, index, entry)


def _refuse_entry(conversation_id: str, index: int, entry: Entry) -> NoReturn:
    """Raise for the first field of new entry ``index`` that no store can hold."""
    for part, value in (("id", entry.entry_id), ("kind", entry.kind)):
        if value is None:
            _none(conversation_id, f"new entry {index}'s {part}")
    _refuse(conversation_id, [(f"new entry {index}'s id", entry.entry_id),
                              (f"new entry {index}'s parent", entry.parent_id),
                              (f"new entry {index}'s kind", entry.kind)])
    raise AssertionError("an entry refused for nothing")  # _refuse found what was wrong


def _none(conversation_id: str, what: str) -> NoReturn:
    """Refuse a value a record or an entry must have."""
    raise ArgumentTypeError(
        f"conversation {arguments.quote(conversation_id)}: its {what} is None, not text; "
        "nothing was written"
    )


def refuse_saved(conversation_id: Any, scope: Any) -> None:
    """A save's conversation id and scope, refused at the call as :func:`refuse_unstorable`
    refuses them in the record: before the save reads the stored record, where a scope no
    record can have would read as another owner's, a ``ConversationConflict`` that no
    reload and retry resolves."""
    _refuse(conversation_id, [("id", conversation_id), ("scope", scope)])
    _refuse_empty_scope(conversation_id, scope)


def _refuse_empty_scope(conversation_id: Any, scope: Any) -> None:
    """The scope ``""``, which the store's every scope refuses: no erasure verb names an
    owner ``""``, so its conversations would outlive delete_owner and the erasure of their
    thread."""
    if scope == "":
        raise InvalidArgumentError(
            f"conversation {arguments.quote(conversation_id)}: its scope is empty: a scope is "
            "an owner's name (a non-empty string), or None; nothing was written"
        )


def _refuse(conversation_id: Any, named: Sequence[tuple[str, Any]]) -> None:
    """Raise for the first value of ``named`` no store can hold: an
    :class:`~agui_store.errors.ArgumentTypeError` for one that is not text, else an
    :class:`~agui_store.errors.InvalidArgumentError`."""
    for what, value in named:
        found = arguments.first_unstorable([(what, value)])
        if found is not None:
            error = InvalidArgumentError if isinstance(value, str) else ArgumentTypeError
            raise error(
                f"conversation {arguments.quote(conversation_id)}: its {found[0]} "
                f"{found[1]}; nothing was written"
            )


def write_record(tx: port.Writing, prepared: Prepared, expected_revision: str | None) -> None:
    """Store a prepared record and the entries its history adds, in the write transaction
    ``tx`` (a store's ``writing(WRITERS_KEY)``), replacing the record whose revision is
    ``expected_revision`` (``None``: there is none yet).

    Raises :class:`ConversationConflictError`, having written nothing, when the stored
    revision is another, or when the head, a branch or a new entry's parent names an entry
    neither the store nor the new entries have (a delete released it since it was read).
    Raises :class:`~agui_store.errors.InvalidArgumentError` for an entry id stored already."""
    record = prepared.record
    cid = record.conversation_id
    stored = tx.conversation(cid)
    found = None if stored is None else str(stored.revision)
    if found != expected_revision:
        raise ConversationConflictError(
            cid,
            "it is not in the store"
            if stored is None
            else "it is in the store already"
            if expected_revision is None
            else f"its revision is {found!r}, not {expected_revision!r}",
        )
    # Entries of this write by id: (pk, hash).
    written: dict[str, tuple[int, bytes]] = {}

    def key_of(entry_id: str, what: str) -> tuple[int, bytes]:
        if entry_id in written:
            return written[entry_id]
        key = tx.conversation_entry_key(entry_id)
        if key is None:
            raise ConversationConflictError(
                cid, f"{what} names entry {entry_id!r}, which the store does not have"
            )
        return key[0], key[1]

    for index, (entry, text, address) in enumerate(prepared.entries):
        if tx.conversation_entry_key(entry.entry_id) is not None:
            raise InvalidArgumentError(
                f"conversation {cid!r}, new entry {index}: entry {entry.entry_id!r} is "
                "stored already; nothing was written"
            )
        parent = (
            None
            if entry.parent_id is None
            else key_of(entry.parent_id, f"new entry {index}'s parent")
        )
        message = tx.conversation_message_id(address)
        if message is None:
            message = tx.insert_conversation_message(address, text.decode())
        own = entry_hash(entry.entry_id, entry.kind, address, parent and parent[1])
        pk = tx.insert_conversation_entry(
            entry.entry_id, parent and parent[0], message, entry.kind, cid, own
        )
        written[entry.entry_id] = (pk, own)
    head = None if record.head_id is None else key_of(record.head_id, "the head")[0]
    digest = record_hash(record)
    if stored is None:
        pk = tx.insert_conversation(
            cid, head, record.scope, record.revision, record.updated_at, record.record,
            digest,
        )
        was: tuple[str, ...] = ()
    else:
        pk = int(stored.pk)
        tx.update_conversation(
            pk, head, record.scope, record.revision, record.updated_at, record.record,
            digest,
        )
        was = _record(stored).branches
    if record.branches != was:
        tx.set_conversation_branches(
            pk, [key_of(tip, "a branch")[0] for tip in record.branches]
        )


def delete_record(tx: port.Writing, conversation_id: str, expected_revision: str) -> int:
    """Delete a conversation's record, then every entry no remaining record's head or
    branch reaches and every message no remaining entry holds; returns how many entries
    went. Raises :class:`ConversationConflictError` when no record with that revision is
    stored."""
    stored = tx.conversation(conversation_id) if _storable(conversation_id) else None
    if stored is None or str(stored.revision) != expected_revision:
        raise ConversationConflictError(
            conversation_id,
            "it is not in the store"
            if stored is None
            else f"its revision is {stored.revision!r}, not {expected_revision!r}",
        )
    tx.delete_conversation(int(stored.pk))
    kept_by: set[str] = set()
    released = release_history(tx, _record(stored), kept_by)
    # What it stored and a fork still reaches would name it still: a later conversation of
    # its id would claim that history (``entry_conversation``, ``run_of_entry``). Its own
    # entries end its history, so when the release stopped at none of them (nothing it
    # stored stays, as when it was a fork), there is nothing to hand over and no read of
    # the other conversations' histories.
    if conversation_id in kept_by:
        _hand_over(tx, [conversation_id], tx.entries_stored_by([conversation_id]))
    return released


def release_history(tx: port.Writing, was: Record, kept_by: set[str] | None = None) -> int:
    """Release the history a deleted or replaced record reached (``was``, its fields
    before) where no record reaches it any more: how many entries went. ``kept_by`` is
    given the conversations that stored the entries the release stopped at (still
    reached)."""
    tips = [t for t in (was.head_id, *was.branches) if t is not None]
    keys = [key[0] for tip in tips if (key := tx.conversation_entry_key(tip))]
    return _release(tx, keys, kept_by)


def _release(tx: port.Writing, tips: Sequence[int], kept_by: set[str] | None = None) -> int:
    """Delete the entries at ``tips`` and up their histories while nothing reaches them
    (no entry follows, no record's head or branch names them), and the messages they
    leave unused: the walk stops at the first entry still reached, so it costs what it
    releases, not the size of the store. ``kept_by``: as :func:`release_history`."""
    released = 0
    for tip in tips:
        pk: int | None = tip
        while pk is not None:
            row = tx.conversation_entry_reached(pk)
            if row is not None and row[2] and kept_by is not None:
                kept_by.add(row[3])
            if row is None or row[2]:
                break  # gone already (another tip's walk), or still reached
            parent, message, _reached, _stored_by = row
            tx.delete_conversation_entry(pk)
            tx.delete_unused_conversation_message(message)
            released += 1
            pk = parent
    return released


# --- links to the AG-UI log -----------------------------------------------------------------

#: The name of the CUSTOM event pydantic-ai's AG-UI adapter sends after a save.
SAVED_EVENT = "pydantic_ai_conversation_saved"


class Announcements(Protocol):
    """Where a thread's runs announce their conversation saves: a store's read transaction,
    or an archive's thread being imported."""

    def thread_custom_events(self, thread_id: str) -> list[tuple[str, str]]:
        """As :meth:`agui_store.engine.port.ConversationReads.thread_custom_events`."""


class Linking(Announcements, Protocol):
    """What finds a thread's linked conversations: a store's read transaction, or an
    archive's thread being imported."""

    def thread(self, thread_id: str) -> tuple[int, str | None] | None:
        """As :meth:`agui_store.engine.port.Reading.thread`: its key and owner."""

    def conversation(self, conversation_id: str) -> port.ConversationRow | None:
        """As :meth:`agui_store.engine.port.ConversationReads.conversation`."""


def saved_entries(tx: Announcements, thread_id: str) -> list[tuple[str, str, list[str]]]:
    """``(run_id, conversation_id, entry ids)`` of every conversation save a thread's runs
    announced (their ``pydantic_ai_conversation_saved`` CUSTOM events), in recorded order."""
    found: list[tuple[str, str, list[str]]] = []
    for run_id, payload in tx.thread_custom_events(thread_id):
        try:
            event = _DECODER.decode(payload)
        except msgspec.DecodeError:
            continue
        if not isinstance(event, dict) or event.get("name") != SAVED_EVENT:
            continue
        value = event.get("value")
        if not isinstance(value, dict):
            continue
        ids = value.get("entry_ids")
        conversation_id = value.get("conversation_id", thread_id)
        if isinstance(ids, list) and all(isinstance(i, str) for i in ids):
            found.append((run_id, str(conversation_id), ids))
    return found


@dataclass(frozen=True)
class Continuation:
    """Where the model's history began for a recorded run that saved conversation entries.

    The AG-UI log keeps what the client sent; the model saw the stored conversation up to
    ``entry_id``. The two differ after a server-side ``branch()`` (or ``fork``): the client
    still sends its whole history, while the model goes on from the branch point.

    Attributes:
        run_id / thread_id / conversation_id: the run and the conversation it saved to.
        entry_id: the entry the model continued from (``None``: the conversation's start).
        saved_by: the run whose save stored ``entry_id`` (``None``: the start, or an entry
            saved outside a recorded run).
        lineage_entry: the entry the run's AG-UI lineage had reached: the head left by its
            nearest ancestor that saved to the conversation (``None``: none did).
    """

    run_id: str
    thread_id: str
    conversation_id: str
    entry_id: str | None
    saved_by: str | None
    lineage_entry: str | None

    @property
    def diverged(self) -> bool:
        """Whether the model continued from another entry than the AG-UI lineage reached:
        the run's AG-UI history is not the history the model saw."""
        return self.entry_id != self.lineage_entry


def continuation(
    tx: port.Reading, thread_id: str, lineage: Sequence[str]
) -> Continuation | None:
    """Where the model continued from for ``lineage[0]``, a run of ``thread_id`` whose AG-UI
    lineage (the run, then its ancestors, newest first) is ``lineage``; ``None`` when that
    run saved no entry."""
    saves: dict[str, tuple[str, list[str]]] = {}
    saver: dict[str, str] = {}
    for run_id, conversation_id, ids in saved_entries(tx, thread_id):
        if ids:
            saves[run_id] = (conversation_id, ids)
            saver.update(dict.fromkeys(ids, run_id))
    if not lineage or lineage[0] not in saves:
        return None
    conversation_id, ids = saves[lineage[0]]
    try:
        parent = read_entry(tx, ids[0]).parent_id
    except EntryNotFoundError:  # released by a delete since: nothing to say
        return None
    reached = next((saves[r][1][-1] for r in lineage[1:] if r in saves), None)
    return Continuation(
        lineage[0], thread_id, conversation_id, parent,
        saver.get(parent) if parent is not None else None, reached,
    )


def linked(tx: Linking, thread_id: str) -> list[str]:
    """The stored pydantic-ai conversations linked to an AG-UI thread: the one named by its
    id (pydantic-ai's adapter names a conversation so), first, and every one its runs
    announced a save of; but not those saved under another owner's scope than the
    thread's: an owner's conversation that shares its name with another owner's thread, or
    with a thread of no owner (the operator's), is not that thread's. Erasures, copies and
    archives go by it."""
    stored = tx.thread(thread_id)
    owner = None if stored is None else stored[1]
    named = [thread_id, *(cid for _run, cid, _ids in saved_entries(tx, thread_id))]
    out = []
    for conversation_id in dict.fromkeys(named):
        talk = tx.conversation(conversation_id)
        if talk is not None and (talk.scope is None or talk.scope == owner):
            out.append(conversation_id)
    return out


def erase(
    tx: port.Writing,
    conversation_ids: Sequence[str],
    *,
    dry_run: bool,
    reached: dict[str, list[str]] | None = None,
) -> tuple[int, int]:
    """Delete these conversations' records and release what nothing else reaches, as
    :func:`delete_record` does, whatever their revision (an erasure is not a save that
    could conflict): ``(records found, bytes of their records and of the histories that
    go with them)``: an entry another conversation reaches (a fork's shared history)
    stays, and is not counted; one several of them reach counts once. With ``dry_run``
    nothing is deleted. ``reached`` is given the ids of the entries each conversation
    reached. No trace of an erased conversation's id stays: see :func:`forget_erased`."""
    size = 0
    records: list[tuple[port.ConversationRow, Record]] = []
    held: dict[str, dict[str, None]] = {}  # by conversation: each entry once
    sizes: dict[str, int] = {}  # the message bytes of every entry they reach, by id
    for conversation_id in sorted(conversation_ids):
        stored = tx.conversation(conversation_id)
        if stored is None:
            continue
        record = _record(stored)
        records.append((stored, record))
        size += len(record.record.encode("utf-8", "surrogatepass"))
        mine = held[conversation_id] = {}  # branches share the history before them
        for tip in (t for t in (record.head_id, *record.branches) if t is not None):
            for row in tx.conversation_history(tip, EVERY):
                entry_id = str(row[0])
                if entry_id not in mine:
                    mine[entry_id] = None
                    sizes[entry_id] = len(str(row[3]).encode("utf-8", "surrogatepass"))
    keepers = _keepers(tx, held.keys(), sizes.keys()) if sizes else {}
    size += sum(n for entry_id, n in sizes.items() if entry_id not in keepers)
    if dry_run:
        return len(records), size
    for stored, record in records:
        tx.delete_conversation(int(stored[0]))
        release_history(tx, record)
        if reached is not None:
            reached[record.conversation_id] = list(held[record.conversation_id])
    if records:
        forget_erased(tx, held.keys(), keepers)
    return len(records), size


def _keepers(
    tx: port.Reading, conversation_ids: Container[str], entry_ids: Container[str]
) -> dict[str, str]:
    """The entries of ``entry_ids`` a conversation other than ``conversation_ids`` reaches
    (what stays when those go), each with the first such conversation by id, which keeps
    it. One pass over every other conversation's history: the one an erasure makes."""
    out: dict[str, str] = {}
    for row in sorted(tx.conversations(None, EVERY), key=lambda row: str(row.conversation_id)):
        keeper = str(row.conversation_id)
        if keeper in conversation_ids:
            continue
        record = _record(row)
        for tip in (t for t in (record.head_id, *record.branches) if t is not None):
            for entry in tx.conversation_history(tip, EVERY):
                if (entry_id := str(entry[0])) in entry_ids:
                    out.setdefault(entry_id, keeper)
    return out


def forget_erased(
    tx: port.Writing, erased: Collection[str], keepers: Mapping[str, str] | None = None
) -> None:
    """Take the ids of erased conversations out of what stays: a fork that names one as
    the conversation it was forked from names none (:func:`without_origin`); an entry one
    of them stored and another keeps (a fork's shared history) is the keeper's, the first
    by id that reaches it (``keepers``, when the caller found them already:
    :func:`_keepers`). That includes the entries an earlier conversation of the same id
    stored, deleted since while a fork kept them, which the erased one never reached. An
    erasure calls it, and a copy or import that lands a fork of a conversation the
    destination erased."""
    for row in tx.conversations(None, EVERY):
        forgotten = without_origin(_record(row), erased)
        if forgotten is not None:
            head = forgotten.head_id
            head_key = None if head is None else tx.conversation_entry_key(head)
            tx.update_conversation(
                int(row.pk), None if head_key is None else int(head_key[0]), forgotten.scope,
                forgotten.revision, forgotten.updated_at, forgotten.record,
                record_hash(forgotten),
            )
    _hand_over(tx, erased, tx.entries_stored_by(sorted(erased)), keepers)


def _hand_over(
    tx: port.Writing,
    gone: Collection[str],
    stored: Sequence[tuple[int, str]],
    keepers: Mapping[str, str] | None = None,
) -> None:
    """Give the entries conversations ``gone`` (deleted or erased) stored that stay
    (``stored``: ``(pk, entry id)`` as ``entries_stored_by`` gives them)
    to the first conversation by id that reaches each (``keepers`` where the caller found
    them already, :func:`_keepers` for the rest), so that none names a conversation that is
    gone, or a later one of its id."""
    kept = {entry_id: pk for pk, entry_id in stored}
    unknown = [entry_id for entry_id in kept if keepers is None or entry_id not in keepers]
    if unknown:  # the caller's keepers are of the entries the erased reached
        keepers = {**(keepers or {}), **_keepers(tx, gone, set(unknown))}
    for entry_id, pk in kept.items():
        keeper = None if keepers is None else keepers.get(entry_id)
        if keeper is not None:
            tx.set_entry_conversation(pk, keeper)


def _fields(record: Record) -> dict[str, object] | None:
    """A record's other fields, when it names the conversation it was forked from."""
    try:
        fields = json.decode(record.record) if '"forked_from"' in record.record else None
    except InvalidEventError:
        return None  # edited outside the store: check() names it
    return fields if isinstance(fields, dict) else None


def forked_from(record: Record) -> str | None:
    """The conversation a record names as the one it was forked from, or ``None``."""
    fields = _fields(record)
    origin = None if fields is None else fields.get("forked_from")
    return origin if isinstance(origin, str) else None


def without_origin(record: Record, erased: Container[str]) -> Record | None:
    """``record`` no longer naming the conversation it was forked from, when that is one
    of ``erased``: its ``forked_from`` ``None``, under a new revision (a save that read it
    naming its origin would write that back: it conflicts instead); ``None`` when it names
    none of them."""
    fields = _fields(record)
    origin = None if fields is None else fields.get("forked_from")
    if fields is None or not isinstance(origin, str) or origin not in erased:
        return None
    fields["forked_from"] = None
    return dataclasses.replace(
        record, revision=str(uuid.uuid4()), record=json.canonical_bytes(fields).decode()
    )


def entry_conversation(tx: port.Reading, entry_id: str) -> str | None:
    """The conversation whose save stored an entry, or ``None``: no such entry."""
    key = tx.conversation_entry_key(entry_id) if _storable(entry_id) else None
    return None if key is None else key[2]


# --- check() --------------------------------------------------------------------------------


def check(tx: port.Inspecting, problem: Callable[[str], None]) -> None:
    """What ``check()`` finds wrong with the stored conversations: a message whose text is
    not its hash's, an entry whose hash is not what its id, kind, message and parent give
    (an edit anywhere in a history shows at the first entry it reaches), a record whose
    hash does not cover its fields, a parent later than its child, a message no entry
    holds."""
    hashes: dict[int, bytes] = {}
    for pk, address, message in tx.every_conversation_message():
        address = bytes(address)
        hashes[int(pk)] = address
        text = str(message).encode("utf-8", "surrogatepass")
        if message_hash(text) != address:
            problem(
                f"conversation message {pk} fails its content hash: its text was edited "
                "outside agui-store"
            )
    entries: dict[int, bytes] = {}
    for pk, entry_id, parent, message_pk, kind, conversation, stored in (
        tx.every_conversation_entry()
    ):
        where = f"conversation entry {entry_id!r} (of conversation {conversation!r})"
        if parent is not None and int(parent) >= int(pk):
            problem(f"{where} comes before its parent {parent}")
        found = hashes.get(int(message_pk))
        if found is None:
            problem(f"{where} holds message {message_pk}, which is not stored")
            continue
        parent_hash = None if parent is None else entries.get(int(parent))
        if parent is not None and parent_hash is None:
            problem(f"{where} follows entry {parent}, which is not stored")
            continue
        expected = entry_hash(str(entry_id), str(kind), found, parent_hash)
        entries[int(pk)] = bytes(stored)
        if expected != bytes(stored):
            problem(
                f"{where} fails its hash: its id, kind, message or parent was changed "
                "outside agui-store"
            )
    for row in tx.every_conversation():
        record = _record(row)
        if record_hash(record) != bytes(row.hash):
            problem(
                f"conversation {record.conversation_id!r}: its record fails its hash (head, "
                "scope, revision, branches or fields changed outside agui-store)"
            )
    for pk in tx.unused_conversation_messages():
        problem(f"conversation message {pk} is held by no entry (a delete should release it)")


__all__ = [
    "ConversationConflictError",
    "Entry",
    "EntryNotFoundError",
    "Record",
    "check",
    "delete_record",
    "read_entry",
    "read_history",
    "read_record",
    "read_records",
    "record_of",
    "saved_entries",
    "write_record",
]
