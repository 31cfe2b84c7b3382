"""The port's operations that are one named statement and a conversion of its rows, written
once for the SQL backends.

A backend's transaction class derives from :class:`NamedQueries`: it names its module of SQL
constants (``sql``) and runs one statement (``_execute``). The constants are named alike in
every backend (``RUN_PK`` asks the same question of SQLite and of PostgreSQL, each in its
dialect, with the same parameters in the same order), so an operation that only asks and
shapes the answer is written here once. What differs stays in the backend's class: how many
keys make one parameter, what PostgreSQL defers or streams, and every statement whose
parameters differ.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, ClassVar, TypeVar

from agui_store.engine import port
from agui_store.engine.port import (
    ChainedBatch,
    CheckpointAddresses,
    CheckpointRow,
    EventRow,
    HashedBatch,
    ReplicaRun,
    RunRecordRow,
    RunSummary,
)

_Row = TypeVar("_Row", bound=tuple[Any, ...])


_MAKERS: dict[type[Any], Callable[[Iterable[Any]], Any]] = {}


def _maker(kind: type[_Row]) -> Callable[[Iterable[Any]], _Row]:
    # tuple.__new__ bound to the class, called from C by map(): the cursor's tuple becomes
    # the row type for the cost of a copy (NamedTuple's own _make and __new__ are Python
    # functions, several times dearer on a log of thousands of runs).
    made = _MAKERS.get(kind)
    if made is None:
        made = _MAKERS[kind] = functools.partial(tuple.__new__, kind)
    return made


def row_of(kind: type[_Row], row: Iterable[Any]) -> _Row:
    """One database row (a tuple in the type's column order) as the port's row type."""
    made: _Row = tuple.__new__(kind, row)
    return made


def rows_of(kind: type[_Row], rows: Iterable[Any]) -> list[_Row]:
    """Database rows as the port's row type, all read."""
    return list(map(_maker(kind), rows))


def stream_of(kind: type[_Row], rows: Iterable[Any]) -> Iterator[_Row]:
    """Database rows as the port's row type, as they are read."""
    return map(_maker(kind), rows)


class NamedQueries:
    """One-statement reads and writes over ``sql``'s constants (see the module).

    Each operation is the port's (:mod:`agui_store.engine.port`), documented there; a
    docstring here says only what this implementation adds."""

    __slots__ = ()

    #: The backend's SQL: a module of named statements.
    sql: ClassVar[ModuleType]

    def _execute(self, statement: str, args: Any) -> Any:
        """Run ``statement`` with ``args`` in the open transaction; its cursor."""
        raise NotImplementedError

    def _many(self, keys: Iterable[int] | Iterable[str]) -> Any:
        """Many keys (or ids) as one parameter, as the backend's statements read them."""
        raise NotImplementedError

    def _all(self, statement: str, args: Any = ()) -> list[Any]:
        return self._execute(statement, args).fetchall()  # type: ignore[no-any-return]

    def _rows(self, statement: str, args: Any = ()) -> Iterable[Any]:
        return self._execute(statement, args)  # type: ignore[no-any-return]

    def _one(self, statement: str, args: Any = ()) -> Any:
        return self._execute(statement, args).fetchone()

    def _value(self, statement: str, args: Any = ()) -> Any:
        row = self._execute(statement, args).fetchone()
        return None if row is None else row[0]

    def _column(self, statement: str, args: Any = ()) -> list[Any]:
        return [row[0] for row in self._execute(statement, args)]

    # --- checkpoints (chunked message lists: agui_store.engine.checkpoints) -----------------------

    def has_checkpoint(self, run_pk: int) -> bool:
        return self._one(self.sql.HAS_CHECKPOINT, (run_pk,)) is not None

    def checkpoint_row(self, run_pk: int) -> CheckpointRow | None:
        row = self._one(self.sql.SELECT_CHECKPOINT, (run_pk,))
        return None if row is None else row_of(CheckpointRow, row)

    def checkpoint_addresses(self, run_pk: int) -> CheckpointAddresses:
        return row_of(CheckpointAddresses, self._one(self.sql.SELECT_ADDRESSES, (run_pk,)))

    def state_address(self, run_pk: int) -> bytes:
        return bytes(self._value(self.sql.STATE_ADDRESS, (run_pk,)))

    def every_blob_id(self) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.EVERY_BLOB_ID)]

    def delete_blobs(self, blob_ids: Sequence[int]) -> None:
        self._execute(self.sql.ERASE_BLOBS, (self._many(blob_ids),))

    def blob_id(self, address: bytes) -> int | None:
        found = self._value(self.sql.SELECT_BLOB_ID, (address,))
        return None if found is None else int(found)

    # --- threads ----------------------------------------------------------------------------

    def thread(self, thread_id: str) -> tuple[int, str | None] | None:
        row = self._one(self.sql.THREAD, (thread_id,))
        return (int(row[0]), row[1]) if row else None

    def thread_id(self, thread_pk: int) -> str:
        return str(self._value(self.sql.THREAD_ID, (thread_pk,)))

    def newest_erasure(self) -> int:
        return int(self._value(self.sql.NEWEST_ERASURE))

    def thread_created_at(self, thread_pk: int) -> int:
        return int(self._value(self.sql.THREAD_CREATED_AT, (thread_pk,)))

    def owned_thread_pks(self, owner: str) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.OWNED_THREAD_PKS, (owner,))]

    def threads_with_open_head(self) -> set[str]:
        return {str(t) for t in self._column(self.sql.THREADS_WITH_OPEN_HEAD)}

    def insert_thread(
        self, thread_id: str, created_at: int, owner: str | None, tombstone: bytes | None = None
    ) -> int:
        return int(self._value(self.sql.INSERT_THREAD, (thread_id, created_at, tombstone, owner)))

    # --- runs -------------------------------------------------------------------------------

    def run_pk(self, thread_pk: int, run_id: str) -> int | None:
        pk = self._value(self.sql.RUN_PK, (thread_pk, run_id))
        return None if pk is None else int(pk)

    def run_id(self, run_pk: int) -> str:
        return str(self._value(self.sql.RUN_ID, (run_pk,)))

    def run_parent(self, run_pk: int) -> int | None:
        pk = self._value(self.sql.RUN_PARENT, (run_pk,))
        return None if pk is None else int(pk)

    def run_thread(self, run_pk: int) -> int:
        return int(self._value(self.sql.RUN_THREAD, (run_pk,)))

    def run_row(self, run_pk: int) -> tuple[int | None, str | None, str | None, str]:
        parent, raw_input, raw_refs, lineage = self._one(self.sql.RUN_ROW, (run_pk,))
        return parent, raw_input, raw_refs, lineage

    def run_input(self, run_pk: int) -> tuple[str | None, str | None, int | None, bytes | None]:
        raw, raw_refs, parent, input_hash = self._one(self.sql.RUN_INPUT, (run_pk,))
        return raw, raw_refs, parent, input_hash

    def run_names(self, run_pk: int) -> tuple[str, str] | None:
        row = self._one(self.sql.RUN_NAMES, (run_pk,))
        return (str(row[0]), str(row[1])) if row else None

    def newest_run(self, thread_pk: int) -> int | None:
        pk = self._value(self.sql.NEWEST_RUN, (thread_pk,))
        return None if pk is None else int(pk)

    def has_child(self, run_pk: int) -> bool:
        return self._one(self.sql.HAS_CHILD, (run_pk,)) is not None

    def open_runs(self, thread_pk: int) -> set[int]:
        return {int(pk) for pk in self._column(self.sql.OPEN_RUNS, (thread_pk,))}

    def run_status(self, run_pk: int) -> str | None:
        outcome = self._value(self.sql.RUN_STATUS, (run_pk,))
        return None if outcome is None else str(outcome)

    def run_last_seq(self, run_pk: int) -> int:
        return int(self._value(self.sql.RUN_LAST_SEQ, (run_pk,)) or 0)

    def thread_run_pks(self, thread_pk: int) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.THREAD_RUN_PKS, (thread_pk,))]

    def thread_run_count(self, thread_pk: int) -> int:
        return int(self._value(self.sql.THREAD_RUN_COUNT, (thread_pk,)) or 0)

    def thread_activity(self, thread_pk: int) -> tuple[str, int, int] | None:
        row = self._execute(self.sql.THREAD_ACTIVITY, (thread_pk, thread_pk)).fetchone()
        if row is None:
            return None
        run_id, appended_at, open_runs = row
        return str(run_id), int(appended_at), int(open_runs)

    def owner_run_pks(self, owner: str) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.OWNER_RUN_PKS, (owner,))]

    def all_run_pks(self) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.ALL_RUN_PKS)]

    def thread_run_summaries(self, thread_pk: int) -> list[RunSummary]:
        return rows_of(RunSummary, self._execute(self.sql.THREAD_RUN_SUMMARIES, (thread_pk,)))

    def thread_run_page(self, thread_pk: int, below_pk: int, limit: int) -> list[RunSummary]:
        rows = self._execute(self.sql.THREAD_RUN_PAGE, (thread_pk, below_pk, limit))
        return rows_of(RunSummary, rows)

    def replica_runs(self, thread_pk: int) -> list[ReplicaRun]:
        return rows_of(ReplicaRun, self._execute(self.sql.REPLICA_RUNS, (thread_pk,)))

    def threads_of_runs(self, run_pks: Sequence[int]) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.THREADS_OF_RUNS, (self._many(run_pks),))]

    def run_records(self, run_pks: Sequence[int]) -> list[RunRecordRow]:
        return rows_of(RunRecordRow, self._execute(self.sql.RUN_RECORDS, (self._many(run_pks),)))

    # --- lineage ----------------------------------------------------------------------------

    def ancestors(self, run_pk: int) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.ANCESTORS, (run_pk,))]

    def derived_descendants(self, run_pk: int) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.DERIVED_DESCENDANTS, (run_pk,))]

    def newest_input(self, run_pk: int) -> str | None:
        return self._value(self.sql.NEWEST_INPUT, (run_pk,))  # type: ignore[no-any-return]

    def ancestor_among(self, run_pk: int, candidates: Sequence[int]) -> bool:
        return self._one(self.sql.ANCESTOR_AMONG, (run_pk, self._many(candidates))) is not None

    # --- events -----------------------------------------------------------------------------

    def chain_events(self, run_pk: int) -> Iterable[EventRow]:
        return self._rows(self.sql.CHAIN_EVENTS, (run_pk,))

    def terminal_event(self, run_pk: int) -> str | None:
        return self._value(self.sql.TERMINAL_EVENT, (run_pk,))  # type: ignore[no-any-return]

    def events_of_runs(self, run_pks: Sequence[int]) -> Iterable[EventRow]:
        return self._rows(self.sql.EVENTS_OF_RUNS, (self._many(run_pks),))

    # --- batches and hashes -----------------------------------------------------------------

    def batches_of_runs(self, run_pks: Sequence[int]) -> Iterable[ChainedBatch]:
        rows = self._rows(self.sql.BATCHES_OF_RUNS, (self._many(run_pks),))
        return stream_of(ChainedBatch, rows)

    def batches_of_run_after(self, run_pk: int, after: int) -> Iterable[ChainedBatch]:
        rows = self._rows(self.sql.BATCHES_OF_RUN_AFTER, (run_pk, after, run_pk))
        return stream_of(ChainedBatch, rows)

    # --- branches ---------------------------------------------------------------------------

    def branch_run(self, thread_pk: int, name: str) -> int | None:
        pk = self._value(self.sql.BRANCH_RUN, (thread_pk, name))
        return None if pk is None else int(pk)

    def has_branches(self, thread_pk: int) -> bool:
        return bool(self._value(self.sql.HAS_BRANCHES, (thread_pk,)))

    def branch_tips(self, thread_pk: int) -> list[tuple[int, str]]:
        rows = self._execute(self.sql.BRANCH_TIPS, (thread_pk,))
        return [(int(run), str(name)) for run, name in rows]

    def branch_list(self, thread_pk: int) -> list[tuple[str, str, int]]:
        return self._all(self.sql.BRANCH_LIST, (thread_pk,))

    def set_branch(self, thread_pk: int, name: str, run_pk: int, now: int) -> None:
        self._execute(self.sql.SET_BRANCH, (thread_pk, name, run_pk, now))

    def move_branches(self, thread_pk: int, tip: int, to: int, now: int) -> None:
        self._execute(self.sql.MOVE_BRANCHES, (to, now, thread_pk, tip))

    # --- derived data -----------------------------------------------------------------------

    def has_digest(self, digest: bytes, run_pk: int) -> bool:
        return self._one(self.sql.HAS_DIGEST, (digest, run_pk)) is not None

    def grew_since(self, thread_pk: int, run_pk: int, seq: int) -> bool:
        args = {"seq": seq, "run": run_pk, "thread": thread_pk}
        return bool(self._value(self.sql.GREW_SINCE, args))

    def underived_threads(self) -> set[int]:
        return {int(pk) for pk in self._column(self.sql.UNDERIVED_THREADS)}

    def checkpoint_count(self) -> int:
        return int(self._value(self.sql.CHECKPOINT_COUNT))

    def digests_from_checkpoints(self) -> None:
        self._execute(self.sql.DIGESTS_FROM_CHECKPOINTS, ())

    def clear_underived(self, run_pk: int) -> None:
        self._execute(self.sql.CLEAR_UNDERIVED, (run_pk,))

    def mark_underived(self, run_pks: Sequence[int]) -> None:
        self._execute(self.sql.MARK_UNDERIVED, (self._many(run_pks),))

    # --- check(): whole-store reads of agui_store.engine.integrity --------------------------------

    def blob_content(self, blob_id: int) -> tuple[int, bytes] | None:
        row = self._one(self.sql.BLOB_CONTENT, (blob_id,))
        return None if row is None else (row[0], row[1])

    def checkpoint_layouts(self) -> list[tuple[int, int, int | None, str, int | None]]:
        return self._all(self.sql.CHECKPOINT_LAYOUTS)

    def checkpoint_segments(self) -> list[tuple[int, int]]:
        return [(int(run), int(blob)) for run, blob in self._all(self.sql.CHECKPOINT_SEGMENTS)]

    def complete_runs(self) -> set[int]:
        return {int(pk) for pk in self._column(self.sql.COMPLETE_RUNS)}

    def every_lineage_digest(self) -> list[tuple[bytes, int]]:
        return self._all(self.sql.EVERY_LINEAGE_DIGEST)

    def hashed_batches(self) -> list[HashedBatch]:
        return rows_of(HashedBatch, self._execute(self.sql.HASHED_BATCHES, ()))

    # --- pydantic-ai conversations (agui_store.engine.conversations) ---

    def conversation(self, conversation_id: str) -> port.ConversationRow | None:
        """A conversation's record, or ``None``."""
        row = self._one(self.sql.CONVERSATION, (conversation_id,))
        return None if row is None else port.ConversationRow(*row)

    def conversations(self, scope: str | None, limit: int) -> list[port.ConversationRow]:
        """Records as :meth:`conversation` gives them, newest ``updated_at`` first (ties: the
        first created first), of ``scope`` (``None``: all), at most ``limit``."""
        rows = (
            self._all(self.sql.CONVERSATIONS, (limit,))
            if scope is None
            else self._all(self.sql.SCOPE_CONVERSATIONS, (scope, limit))
        )
        return [port.ConversationRow(*row) for row in rows]

    def conversation_history(self, head_id: str, limit: int) -> list[port.EntryRow]:
        """The last ``limit`` entries of the history ending at ``head_id``, root first
        (none: no such entry)."""
        rows = self._all(self.sql.CONVERSATION_HISTORY, (head_id, limit))
        return [port.EntryRow(*row) for row in rows]

    def conversation_entry(self, entry_id: str) -> port.EntryRow | None:
        """One entry as :meth:`conversation_history` gives it, or ``None``."""
        row = self._one(self.sql.CONVERSATION_ENTRY, (entry_id,))
        return None if row is None else port.EntryRow(*row)

    def conversation_entry_key(self, entry_id: str) -> tuple[int, bytes, str] | None:
        """``(pk, hash, conversation that stored it)`` of an entry, or ``None``."""
        row = self._one(self.sql.CONVERSATION_ENTRY_KEY, (entry_id,))
        return None if row is None else (int(row[0]), bytes(row[1]), str(row[2]))

    def conversation_message_id(self, address: bytes) -> int | None:
        found = self._value(self.sql.CONVERSATION_MESSAGE_ID, (address,))
        return None if found is None else int(found)

    def insert_conversation_message(self, address: bytes, message: str) -> int:
        """Store a conversation message (JSON text) under its address (its sha256); its key."""
        return int(self._value(self.sql.INSERT_CONVERSATION_MESSAGE, (address, message)))

    def insert_conversation_entry(
        self, entry_id: str, parent: int | None, message: int, kind: str, conversation: str,
        entry_hash: bytes,
    ) -> int:
        """Store an entry of a conversation's history: it follows the entry ``parent`` (a key;
        ``None``: it starts a history) and holds the message ``message`` (a key); its key."""
        return int(self._value(
            self.sql.INSERT_CONVERSATION_ENTRY,
            (entry_id, parent, message, kind, conversation, entry_hash),
        ))

    def insert_conversation(
        self, conversation_id: str, head: int | None, scope: str | None, revision: str,
        updated_at: int, record: str, record_hash: bytes,
    ) -> int:
        """Store a conversation's record, its head the entry ``head`` (a key); its key."""
        return int(self._value(
            self.sql.INSERT_CONVERSATION,
            (conversation_id, head, scope, revision, updated_at, record, record_hash),
        ))

    def update_conversation(
        self, pk: int, head: int | None, scope: str | None, revision: str, updated_at: int,
        record: str, record_hash: bytes,
    ) -> None:
        """Rewrite the conversation record ``pk``: its head (an entry key), scope, revision, time,
        record text and hash."""
        self._execute(
            self.sql.UPDATE_CONVERSATION,
            (head, scope, revision, updated_at, record, record_hash, pk),
        )

    def set_conversation_branches(self, pk: int, entries: Sequence[int]) -> None:
        """The record's branches are ``entries`` (entry pks), oldest first."""
        self._execute(self.sql.DELETE_CONVERSATION_BRANCHES, (pk,))
        for pos, entry in enumerate(entries):
            self._execute(self.sql.INSERT_CONVERSATION_BRANCH, (pk, pos, entry))

    def delete_conversation(self, pk: int) -> None:
        """The record and its branches."""
        self._execute(self.sql.DELETE_CONVERSATION_BRANCHES, (pk,))
        self._execute(self.sql.DELETE_CONVERSATION, (pk,))

    def conversation_entry_reached(self, pk: int) -> tuple[int | None, int, bool, str] | None:
        """``(parent, message, still reached, conversation that stored it)`` of an entry
        (``None``: no such entry): it is reached while an entry follows it or a record's
        head or branch names it."""
        row = self._one(self.sql.CONVERSATION_ENTRY_REACHED, (pk,))
        if row is None:
            return None
        parent = None if row[0] is None else int(row[0])
        return parent, int(row[1]), bool(row[2]), str(row[3])

    def delete_conversation_entry(self, pk: int) -> None:
        """Delete an entry; its message stays until :meth:`delete_unused_conversation_message`."""
        self._execute(self.sql.DELETE_CONVERSATION_ENTRY, (pk,))

    def set_entry_conversation(self, pk: int, conversation: str) -> None:
        """The entry ``pk`` is kept by the conversation ``conversation`` (an erasure took
        the one that stored it)."""
        self._execute(self.sql.SET_ENTRY_CONVERSATION, (conversation, pk))

    def entries_stored_by(self, conversation_ids: Sequence[str]) -> list[tuple[int, str]]:
        """``(pk, entry_id)`` of the entries naming one of these conversations, by pk."""
        rows = self._all(self.sql.ENTRIES_STORED_BY, (self._many(conversation_ids),))
        return [(int(pk), str(entry_id)) for pk, entry_id in rows]

    def delete_unused_conversation_message(self, pk: int) -> None:
        """Delete the message unless an entry still holds it."""
        self._execute(self.sql.DELETE_UNUSED_CONVERSATION_MESSAGE, (pk, pk))

    def every_conversation_message(self) -> list[tuple[int, bytes, str]]:
        """``(pk, hash, message)`` of every conversation message, by pk."""
        return self._all(self.sql.EVERY_CONVERSATION_MESSAGE)

    def every_conversation_entry(
        self,
    ) -> list[tuple[int, str, int | None, int, str, str, bytes]]:
        """``(pk, entry_id, parent, message, kind, conversation, hash)``, by pk."""
        return self._all(self.sql.EVERY_CONVERSATION_ENTRY)

    def every_conversation(self) -> list[port.ConversationRow]:
        """Every record as :meth:`conversation` gives it, by pk."""
        return [port.ConversationRow(*row) for row in self._all(self.sql.EVERY_CONVERSATION)]

    def unused_conversation_messages(self) -> list[int]:
        return [int(pk) for pk in self._column(self.sql.UNUSED_CONVERSATION_MESSAGES)]

    def every_search_row(self) -> list[port.IndexedMessage]:
        return rows_of(port.IndexedMessage, self._execute(self.sql.EVERY_SEARCH_ROW, ()))

    def thread_custom_events(self, thread_id: str) -> list[tuple[str, str]]:
        """``(run_id, payload)`` of the CUSTOM events of a thread, in recorded order."""
        return [(str(r), str(p)) for r, p in self._all(self.sql.THREAD_CUSTOM_EVENTS, (thread_id,))]
