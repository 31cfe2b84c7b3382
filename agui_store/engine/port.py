"""The storage port: what the engine asks of a database, and nothing else.

The engine (:mod:`agui_store.engine`, under the verbs of :mod:`agui_store.facade`) holds
every rule of the store: lineage, branches, derived views, revisions, verification. A
backend holds tables and answers these one-purpose operations inside a transaction, with
its own SQL; it knows no rule. SQLite (:mod:`agui_store.backends.sqlite`) and PostgreSQL
(:mod:`agui_store.backends.postgres`) implement it.

A backend opens transactions: :meth:`Backend.reading` gives a consistent snapshot
(:class:`Reading`, with :class:`Inspecting`'s scans for ``check()``), :meth:`Backend.writing`
the single writer (:class:`Writing`, which reads too). Either translates every driver error
into the :class:`~agui_store.errors.AguiStoreError` tree when it exits, and a failed write
leaves nothing behind.

The operations are grouped by who asks them, each group a ``Protocol`` whose docstring names
its users, its reads apart from its writes:

- :class:`LogReads`, :class:`LogWrites`: the verbs, appends, branches and derivation;
- :class:`Remembering`: the engine's memory of a store (is what it remembers still so?);
- :class:`ReplicaReads`, :class:`ReplicaWrites`: a copy to another store, an archive;
- :class:`ConversationReads`, :class:`ConversationWrites`: the pydantic-ai conversations;
- :class:`ErasureReads`, :class:`ErasureWrites`: erasure, and its tombstones;
- :class:`SearchReads`, :class:`SearchWrites`: the full-text index;
- :class:`Inspecting`: ``check()``'s whole-store scans and the backend's own checks.

:class:`Reading` composes the reads and :class:`Writing` every group: what a backend's
transaction class implements. A consumer's code may name its group alone (the slice it uses).

Keys: threads and runs have integer keys (``pk``) local to one database; a run's key is
always larger than its parent's. Event sequence numbers (``seq``) are global and assigned
by the engine from :meth:`LogReads.next_seq` inside the write transaction.

Rows are tuples: the wide ones are the ``NamedTuple`` classes below (a backend builds them
from its cursor's tuples, the engine reads them by name), the narrow ones plain tuples in the
column order each operation documents. Either is one tuple per row, with no object beside it
(they are the hot path).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol

from agui_store.engine.trust import TrustedBlobs
from agui_store.history.search import Query


class RunSummary(NamedTuple):
    """A run as a log and a run's record show it (``thread_run_summaries``,
    ``thread_run_page``, ``lineage_runs``, ``run_summary_and_branches``)."""

    pk: int
    thread_id: str
    run_id: str
    parent_run_id: str | None  # the lineage parent's run_id
    lineage: str
    sent_parent: str | None  # the parentRunId its RUN_STARTED sent
    has_input: bool  # 0 or 1 as the database gives it
    synthetic: bool  # 0 or 1 as the database gives it
    created_at: int
    event_count: int | None  # ``None``: no batch yet
    last_seq: int | None
    updated_at: int | None  # when its last batch was appended
    outcome: str | None  # of its newest terminal batch (``None``: incomplete)
    hash: bytes | None  # its newest batch's hash (its chain's start while it has none)


class RunRecordRow(NamedTuple):
    """What verifying a run against its hashes reads (``run_records``)."""

    pk: int
    thread_id: str
    run_id: str
    lineage: str
    sent_parent: str | None
    synthetic: bool  # 0 or 1 as the database gives it
    created_at: int
    input: str | None  # JSON text
    input_refs: str | None  # JSON text
    parent_hash: bytes | None
    input_hash: bytes | None
    start_hash: bytes | None
    parent_verified: bool  # its parent_hash is one of its parent's hashes (0 or 1)


class ReplicaRun(NamedTuple):
    """A run as recorded: what copying it to another store needs (``replica_runs``)."""

    pk: int
    run_id: str
    parent_run_id: str | None
    lineage: str
    sent_parent: str | None
    input: str | None  # JSON text
    input_refs: str | None  # JSON text
    synthetic: bool  # 0 or 1 as the database gives it
    created_at: int
    parent_hash: bytes | None
    start_hash: bytes | None


class NewRun(NamedTuple):
    """A run to place (``insert_run``)."""

    thread_pk: int
    run_id: str
    parent: int | None  # its lineage parent's key
    lineage: str
    sent_parent: str | None
    input: str | None  # JSON text
    input_refs: str | None  # JSON text
    synthetic: bool
    created_at: int
    parent_hash: bytes | None
    input_hash: bytes | None
    start_hash: bytes


#: An event row of a run: ``(run pk, seq, type, payload, echo refs or None)``.
EventRow = tuple[int, int, str, str, "str | None"]


class ChainedBatch(NamedTuple):
    """A batch of a run with the hash its chain continues from (``batches_of_runs``,
    ``batches_of_run_after``)."""

    run_pk: int
    start_hash: bytes | None  # the run's start hash, or the hash of the batch before
    first_seq: int
    last_seq: int
    outcome: str | None
    appended_at: int
    hash: bytes | None


#: A batch as recorded: ``(run pk, first_seq, last_seq, outcome, appended_at, hash)``.
BatchRow = tuple[int, int, int, "str | None", int, bytes]


class CheckpointRow(NamedTuple):
    """A run's checkpoint as :func:`agui_store.engine.checkpoints.load` reads it
    (``checkpoint_row``): its list's layout, its single blobs (codec and data), what it
    recorded, and the checkpoint its state patches apply to (its state base's)."""

    length: int
    tail: str  # ``[[blob id, message count], ...]`` as JSON text
    manifest_data: bytes | None
    state_codec: int
    state_data: bytes
    interrupts_codec: int | None
    interrupts_data: bytes | None
    warnings_codec: int | None
    warnings_data: bytes | None
    state_base: int | None  # the run whose (whole) state this one's patches apply to
    state_address: bytes
    interrupts_address: bytes | None
    warnings_address: bytes | None
    view_hash: bytes | None
    run_hash_ok: bool  # the run hash it was derived at is one of the run's (0 or 1)
    manifest: int | None  # the manifest blob's id (``None``: no full chunk)
    manifest_codec: int | None
    base_run: int | None  # the state base's run (``None``: no checkpoint there)
    base_state_base: int | None
    base_state_codec: int | None
    base_state_data: bytes | None
    base_state_address: bytes | None


class CheckpointAddresses(NamedTuple):
    """What a check recomputes a checkpoint's view digest from (``checkpoint_addresses``)."""

    state: bytes
    interrupts: bytes | None
    warnings: bytes | None
    state_base_state: bytes | None  # the address of the state its patches apply to
    view_hash: bytes | None
    run_hash: bytes | None
    manifest_codec: int | None
    manifest_data: bytes | None
    tail: str


class NewCheckpoint(NamedTuple):
    """A checkpoint to store (``insert_checkpoint``); its blobs are stored already."""

    run: int
    length: int
    manifest: int | None
    tail: str
    state: int
    interrupts: int | None
    warnings: int | None
    ids_hash: bytes
    created_at: int
    state_base: int | None
    run_hash: bytes | None
    view_hash: bytes


class StoredRun(NamedTuple):
    """A run as a check of the lineage reads it (``every_run``)."""

    pk: int
    thread_pk: int
    run_id: str
    parent: int | None
    lineage: str
    synthetic: bool
    thread_id: str | None  # ``None``: no such thread


class LogBatch(NamedTuple):
    """A batch as a check of the log reads it (``batches_in_order``)."""

    id: int
    run_pk: int
    first_seq: int
    last_seq: int
    events: int
    outcome: str | None


class HashedRun(NamedTuple):
    """A run as its hashes cover it (``hashed_runs``)."""

    pk: int
    thread_pk: int
    thread_id: str | None  # ``None``: no such thread
    run_id: str
    parent: int | None
    lineage: str
    sent_parent: str | None
    synthetic: bool
    created_at: int
    input: str | None
    input_refs: str | None
    parent_hash: bytes | None
    input_hash: bytes | None
    start_hash: bytes | None


class HashedBatch(NamedTuple):
    """A batch as its hash covers it (``hashed_batches``)."""

    id: int
    run_pk: int
    first_seq: int
    last_seq: int
    outcome: str | None
    appended_at: int
    hash: bytes | None


class ConversationRow(NamedTuple):
    """A conversation's record as stored (pydantic-ai's ``ConversationRecord``, its JSON
    beside the columns a lookup needs)."""

    pk: int
    conversation_id: str
    head_id: str | None  # the entry_id of its head entry
    scope: str | None
    revision: str
    updated_at: int
    record: str  # the whole record, as JSON text
    hash: bytes
    branches: str  # the entry_ids of its branches' tips, as a JSON array


class EntryRow(NamedTuple):
    """A conversation entry as stored, with the hashes that verify it."""

    entry_id: str
    parent_id: str | None
    kind: str
    message: str  # JSON text
    hash: bytes
    message_hash: bytes
    parent_hash: bytes | None


class RunCheckout(NamedTuple):
    """What a checkout of a run named in its thread reads (:meth:`Reading.run_checkout`):
    the run's record and its own checkpoint, as the engine verifies and decodes them."""

    pk: int
    summary: RunSummary
    branches: list[str]  # the names of the branches at the run, by name
    newest: bool  # whether it is its thread's newest run
    checkpoint: CheckpointRow  # its checkpoint, as Reading.checkpoint_row gives it
    #: its chunks and tail segments as :meth:`Reading.blobs_in_order` gives them, read with
    #: the row (``None``: read apart)
    blobs: list[tuple[int, int, bytes, bytes]] | None


class ErasedCheckpoint(NamedTuple):
    """The blobs a checkpoint an erasure takes refers to (``erased_checkpoints``)."""

    run: int
    state: int | None
    interrupts: int | None
    warnings: int | None
    manifest: int | None
    tail: str | None  # ``[[blob id, message count], ...]`` as JSON text


class ErasureEntry(NamedTuple):
    """An entry of the erasure log as written (``insert_erasure``): what an erasure took,
    chained to the entry before it by ``hash``. ``seqs``: the log's sequence-number ranges
    it emptied, as JSON text."""

    erased_at: int
    verb: str
    threads: int
    runs: int
    events: int
    conversations: int
    size: int
    seqs: str
    hash: bytes


class ErasureLogRow(NamedTuple):
    """An entry of the erasure log as read back (``erasures``): its number, then the
    entry's fields, which ``check()`` verifies against its hash."""

    number: int
    erased_at: int
    verb: str
    threads: int
    runs: int
    events: int
    conversations: int
    size: int
    seqs: str
    hash: bytes


#: A search index row as :meth:`SearchWrites.index_messages` takes it: ``(key, position in
#: the view, tool name or None, words, blob id or None, position in the blob or None)``,
#: the words in order separated by spaces, repeats and all
#: (:func:`agui_store.history.search.index_text`); a plain tuple, as an append builds one
#: per message.
IndexRow = tuple[int, int, "str | None", str, "int | None", "int | None"]


class SearchCandidate(NamedTuple):
    """An index row holding a query's words (``search_candidates``): the message it names
    and where to read it."""

    id: int  # the index row's, which orders hits newest first and is a hit's cursor
    thread_id: str
    run: int
    run_id: str
    position: int  # in the run's view
    tool: str | None
    blob: int | None  # the checkpoint blob that holds it (``None``: read the view)
    at: int | None  # its position in that blob
    recorded: int | None  # when the run's last batch was recorded (ms since the epoch)


class IndexedMessage(NamedTuple):
    """A search index row as ``check()`` reads it (``every_search_row``)."""

    id: int
    thread: int  # the thread's pk
    run: int  # the run that recorded the message's text first
    key: int  # :func:`agui_store.engine.search.message_key` of its id and text
    position: int  # in that run's view
    blob: int | None  # the checkpoint blob that holds it (``None``: read the view)
    at: int | None  # its position in that blob


#: ``thread_facts``: (newest run, has branches, {run: last seq}, the cached view stands,
#: runs of the thread wait to be derived).
ThreadFacts = tuple["int | None", bool, dict[int, int], bool, bool]


# --- the operations, grouped by who asks them -----------------------------------------------
# A group's reads apart from its writes: a read transaction offers the reads alone.


class LogReads(Protocol):
    """What the engine's verbs, appends and derivation read of the log and of what derives
    from it (:mod:`agui_store.engine.reads`, ``placement``, ``derivation``, ``checkpoints``,
    ``revisions``, ``branches``, ``comparison``)."""

    # threads
    def thread(self, thread_id: str) -> tuple[int, str | None] | None:
        """``(pk, owner)`` of a thread, or ``None``."""
    def thread_id(self, thread_pk: int) -> str:
        """The id of a thread."""
    def thread_created_at(self, thread_pk: int) -> int:
        """When a thread was created (milliseconds since the epoch)."""
    def thread_ids(self, scope: str | None) -> list[str]:
        """Thread ids of an owner (``None``: all), oldest first."""
    def thread_ids_by_activity(self, scope: str | None) -> list[str]:
        """Thread ids of an owner (``None``: all), the one written to last first: by their
        newest batch's time (ties: the thread this store recorded last first)."""
    def thread_pks(self, scope: str | None, limit: int) -> list[int]:
        """The first ``limit`` threads of an owner (``None``: all), oldest first."""
    def owned_thread_pks(self, owner: str) -> list[int]:
        """Every thread of an owner, oldest first."""
    def threads_with_open_head(self) -> set[str]:
        """Threads whose newest run is incomplete."""

    # runs
    def run_pk(self, thread_pk: int, run_id: str) -> int | None:
        """The run ``run_id`` of a thread, or ``None``."""
    def run_id(self, run_pk: int) -> str:
        """The id of a run."""
    def run_parent(self, run_pk: int) -> int | None:
        """A run's lineage parent, or ``None`` at a root."""
    def run_thread(self, run_pk: int) -> int:
        """The thread a run belongs to."""
    def run_row(self, run_pk: int) -> tuple[int | None, str | None, str | None, str]:
        """``(parent, input, input_refs, lineage)``: what replaying a run needs."""
    def run_input(self, run_pk: int) -> tuple[str | None, str | None, int | None, bytes | None]:
        """``(input, input_refs, parent, input_hash)``."""
    def run_names(self, run_pk: int) -> tuple[str, str] | None:
        """``(thread_id, run_id)``."""
    def newest_run(self, thread_pk: int) -> int | None:
        """A thread's newest run, or ``None`` when it has none."""
    def has_child(self, run_pk: int) -> bool:
        """Whether any run has this one as its lineage parent."""
    def open_runs(self, thread_pk: int) -> set[int]:
        """The thread's runs without a terminal batch."""
    def run_status(self, run_pk: int) -> str | None:
        """The outcome of the run's newest terminal batch (``None``: incomplete)."""
    def run_last_seq(self, run_pk: int) -> int:
        """The last ``seq`` of a run's batches."""
    def threads_of_run_id(self, run_id: str, scope: str | None) -> list[str]:
        """Threads (of an owner; ``None``: any) holding a run id, at most six."""
    def runs_named(
        self, run_id: str, thread_pk: int | None, scope: str | None
    ) -> list[tuple[int, int, str, str | None]]:
        """``(pk, thread pk, thread_id, branch_thread_id)`` of runs with this id, at most five.

        Without ``thread_pk``, ``branch_thread_id`` is another thread with a branch of this
        name (or None); within a thread it is always None (append and branch refuse the clash).
        """
    def runs_prefixed(
        self, prefix: str, below: str | None, thread_pk: int | None, scope: str | None
    ) -> list[tuple[int, int, str]]:
        """``(pk, thread pk, run_id)`` of runs whose id is in ``[prefix, below)``, at most
        seven (six to show, and whether there are more)."""
    def thread_run_pks(self, thread_pk: int) -> list[int]:
        """A thread's runs, in the order they were placed."""
    def thread_run_count(self, thread_pk: int) -> int:
        """How many runs a thread holds, counted by the database."""
    def thread_activity(self, thread_pk: int) -> tuple[str, int, int] | None:
        """The run a thread was written to last (of two batches written in the same
        millisecond, the later one's), that batch's time (milliseconds since the epoch), and
        how many of the thread's runs have no batch that ends them; ``None``: it holds no
        batch."""
    def owner_run_pks(self, owner: str) -> list[int]:
        """The runs of an owner's threads, in the order they were placed."""
    def all_run_pks(self) -> list[int]:
        """Every run, in the order they were placed."""
    def threads_of_runs(self, run_pks: Sequence[int]) -> list[int]:
        """The threads holding these runs, each once."""
    def run_checkout(
        self, thread_id: str, run_id: str, scope: str | None
    ) -> RunCheckout | None:
        """The run ``run_id`` of the thread ``thread_id`` (of the owner ``scope``; ``None``:
        of any), with its own checkpoint: what restoring it reads (:class:`RunCheckout`).
        ``None``: no such run, or it has no checkpoint of its own.

        A backend with round trips answers in one. As the transaction's first operation it
        may answer from a snapshot of its own, taken before the transaction's (PostgreSQL
        sends the statement alone, outside the transaction: one statement sees one
        snapshot), so the caller uses the answer whole or not at all, and reads nothing
        else to complete it."""
    def run_summary_and_branches(self, run_pk: int) -> tuple[RunSummary, list[str], bool]:
        """A run's summary, the names of the branches at the run (by
        name), and whether it is its thread's newest run: what one run's record shows, in
        one statement."""
    def thread_run_summaries(self, thread_pk: int) -> list[RunSummary]:
        """A thread's runs as summaries, in run order."""
    def thread_run_page(self, thread_pk: int, below_pk: int, limit: int) -> list[RunSummary]:
        """The newest ``limit`` runs of a thread whose key is below ``below_pk``, newest
        first."""
    def run_records(self, run_pks: Sequence[int]) -> list[RunRecordRow]:
        """What verifying runs against their hashes reads (order unspecified)."""

    # lineage
    def ancestors(self, run_pk: int) -> list[int]:
        """The run's lineage, root first, the run last."""
    def ancestor_among(self, run_pk: int, candidates: Sequence[int]) -> bool:
        """Whether one of ``candidates`` is on the run's lineage (itself included)."""
    def derived_descendants(self, run_pk: int) -> list[int]:
        """Runs below this one, at any depth, not listed as underived."""
    def merge_base(self, a: int, b: int) -> tuple[int, int, int] | None:
        """``(base, its depth below a, below b)``: the deepest run on both lineages."""
    def lineage_runs(self, run_pk: int, depth: int | None, limit: int | None) -> list[RunSummary]:
        """Summaries of the run's lineage, newest first: those above ``depth`` (``None``:
        all), at most ``limit``."""
    def newest_input(self, run_pk: int) -> str | None:
        """The newest recorded input on the run's lineage."""

    # events, batches and their hashes
    def next_seq(self) -> int:
        """The ``seq`` the next event appended gets (one more than the last)."""
    def run_pk_and_next_seq(self, thread_pk: int, run_id: str) -> tuple[int | None, int]:
        """``(run_pk(thread_pk, run_id), next_seq())``: a batch's first run checked for a
        duplicate and its first ``seq`` taken, together (one round trip on PostgreSQL)."""
    def run_events(self, run_pk: int, after: int) -> list[tuple[str, str | None, int, str]]:
        """``(payload, echo refs, seq, type)`` of a run's events after ``after``."""
    def events_of_runs(self, run_pks: Sequence[int]) -> Iterable[EventRow]:
        """The events of runs, run by run, in order."""
    def chain_events(self, run_pk: int) -> Iterable[EventRow]:
        """The events of a run's lineage (run order unspecified, in order within a run)."""
    def terminal_event(self, run_pk: int) -> str | None:
        """The payload of a run's newest RUN_FINISHED or RUN_ERROR."""
    def batches_of_runs(self, run_pks: Sequence[int]) -> Iterable[ChainedBatch]:
        """The runs' batches, run by run, in order, each with its run's start hash."""
    def batches_of_run_after(self, run_pk: int, after: int) -> Iterable[ChainedBatch]:
        """The run's batches from the one holding the event after sequence number ``after``
        on, as :meth:`batches_of_runs` gives them, but with the hash of the batch before
        them as the chain start (the run's start hash when none is before them)."""
    def run_hash(self, run_pk: int) -> bytes:
        """The hash of the run's newest batch (its chain's start while it has none)."""

    # branches
    def branch_run(self, thread_pk: int, name: str) -> int | None:
        """The run a branch of a thread points at, or ``None``: no such branch."""
    def has_branches(self, thread_pk: int) -> bool:
        """Whether a thread has any stored branch."""
    def branch_tips(self, thread_pk: int) -> list[tuple[int, str]]:
        """``(run pk, name)`` by name."""
    def branch_list(self, thread_pk: int) -> list[tuple[str, str, int]]:
        """``(name, run_id, updated_at)`` by name."""
    def branches_named(
        self, name: str, thread_pk: int | None, scope: str | None
    ) -> list[tuple[int, int]]:
        """``(run pk, thread pk)`` of branches with this name, at most two."""

    # derived data
    def has_digest(self, digest: bytes, run_pk: int) -> bool:
        """Whether a run is stored under this lineage digest."""
    def grew_since(self, thread_pk: int, run_pk: int, seq: int) -> bool:
        """Whether a run of the thread keyed at most ``run_pk`` holds an event after ``seq``
        (the runs of a view's lineage are among them), read from what was written since, up
        to a few thousand events: more than that answers ``True`` unread (a view that old is
        replayed again, a few milliseconds, rather than checked against all of them)."""
    def runs_with_digests(
        self, thread_pk: int, digests: Sequence[bytes]
    ) -> list[tuple[int, bytes]]:
        """``(run pk, digest)`` of the thread's runs whose lineage digest is one of these."""
    def underived_threads(self) -> set[int]:
        """The threads with runs whose derived data was left for later."""
    def underived_runs(self, thread_pk: int | None) -> list[tuple[int, int]]:
        """``(run pk, thread pk)`` left underived, in run order."""
    def checkpoint_count(self) -> int:
        """How many checkpoints the store holds."""

    # checkpoints: chunked message lists (agui_store.engine.checkpoints holds the layout)
    def checkpoint_walk(self, run_pk: int) -> list[tuple[int, bool]]:
        """The run's lineage from the run up to the nearest run with a checkpoint (or the
        root), newest first, each with whether it has one."""
    def has_checkpoint(self, run_pk: int) -> bool:
        """Whether a run has a checkpoint."""
    def checkpoint_row(self, run_pk: int) -> CheckpointRow | None:
        """A run's checkpoint, or ``None``: it has none."""
    def checkpoint_with_blobs(
        self, run_pk: int
    ) -> tuple[CheckpointRow | None, Iterable[tuple[int, int, bytes, bytes]] | None]:
        """:meth:`checkpoint_row`, with its chunks and tail segments as
        :meth:`blobs_in_order` gives them where the backend reads them in the same round
        trip (``None``: it does not). The caller compares their ids with the row's list, and
        reads them to the end or closes them before its next statement (PostgreSQL holds
        the connection while it streams them)."""
    def checkpoint_addresses(self, run_pk: int) -> CheckpointAddresses:
        """What a check recomputes a run's checkpoint's view digest from."""
    def state_address(self, run_pk: int) -> bytes:
        """The address of a checkpoint's state blob."""
    def blobs_in_order(self, blob_ids: Sequence[int]) -> Iterable[tuple[int, int, bytes, bytes]]:
        """``(id, codec, data, address)`` of blobs, in the order of ``blob_ids``: possibly
        streamed as they arrive, so the caller reads them to the end before its next
        statement, even when one of them is wrong."""
    def addresses_in_order(self, blob_ids: Sequence[int]) -> Iterable[tuple[int, bytes]]:
        """``(id, address)`` of blobs, in the order of ``blob_ids``."""
    def every_blob_id(self) -> list[int]:
        """The key of every stored blob."""
    def blob_id(self, address: bytes) -> int | None:
        """The id of the blob stored at an address, or ``None``."""
    def blob_ids(self, addresses: Sequence[bytes]) -> dict[bytes, int]:
        """The ids of the stored blobs among ``addresses``, by address."""


class Remembering(Protocol):
    """What the engine's memory of a store (:mod:`agui_store.engine.cache`,
    :mod:`agui_store.engine.trust`) asks to know whether what it remembers still holds."""

    def trusted_blobs(self) -> TrustedBlobs:
        """What this transaction's connection has found of the blobs it read
        (:mod:`agui_store.engine.trust`): the backend keeps one for each connection it
        opens, for that connection's life, and the engine alone fills it."""
    def newest_erasure(self) -> int:
        """The key of the newest erasure the store logged, 0 when none: the log only
        grows, so a change tells a connection's memory of decoded messages
        (:mod:`agui_store.engine.trust`) that an erasure ran since, on any connection."""
    def version(self) -> int | None:
        """A number that changes whenever another connection commits. ``None``: writers
        of other threads may commit at any time (PostgreSQL), so the engine keeps only what
        cannot change, and checks what it remembers of the thread it appends to with
        :meth:`thread_facts` under that thread's lock."""
    def thread_facts(
        self, thread_pk: int, run_pks: Sequence[int],
        view: tuple[bytes, int, int | None] | None, view_base: int | None,
        probe_underived: bool,
    ) -> ThreadFacts:
        """What an append checks of what its store remembers of a thread: its newest run,
        whether it has branches, the last ``seq`` of each of ``run_pks`` that is the
        thread's (the others are left out), and whether a cached view still stands (given
        ``(ids_hash, run, seen)``: its lineage digest is there, no run up to ``run`` grew
        after ``seen`` (:meth:`grew_since`; ``None``: unknown, so it does not stand), and
        the checkpoint it starts from is there, unless ``view_base`` is ``None``; ``False``
        when ``view`` is ``None``), and, when
        ``probe_underived``, whether runs of the thread are underived (else ``False``)."""


class ReplicaReads(Protocol):
    """What a copy to another store and an archive export read that nothing else does: a
    thread's runs as recorded (:mod:`agui_store.engine.replication`,
    :mod:`agui_store.engine.archive`). The rest of what they read is the log's."""

    def replica_runs(self, thread_pk: int) -> list[ReplicaRun]:
        """The thread's runs as recorded, in run order."""
    def database(self) -> tuple[str | int, ...]:
        """What names the database this transaction reads, however its path or URL
        spells it: equal for two transactions of one database (a copy refuses a store
        into itself by it), unequal for two databases."""


class ConversationReads(Protocol):
    """What the pydantic-ai conversations read (:mod:`agui_store.engine.conversations`)."""

    def conversation(self, conversation_id: str) -> ConversationRow | None:
        """A conversation's record, or ``None``."""
    def conversations(self, scope: str | None, limit: int) -> list[ConversationRow]:
        """Records as :meth:`conversation` gives them, newest ``updated_at`` first (ties: the
        first created first), of ``scope`` (``None``: all), at most ``limit``."""
    def conversation_history(self, head_id: str, limit: int) -> list[EntryRow]:
        """The last ``limit`` entries of the history ending at ``head_id``, root first, in
        one statement (none: no such entry)."""
    def conversation_entry(self, entry_id: str) -> EntryRow | None:
        """One entry as :meth:`conversation_history` gives it, or ``None``."""
    def conversation_entry_key(self, entry_id: str) -> tuple[int, bytes, str] | None:
        """``(pk, hash, conversation that stored it)``, or ``None``."""
    def conversation_message_id(self, address: bytes) -> int | None:
        """The key of the message stored at ``address`` (its sha256), or ``None``."""
    def conversation_entry_reached(self, pk: int) -> tuple[int | None, int, bool, str] | None:
        """``(parent, message, still reached, conversation that stored it)``: an entry is
        reached while an entry follows it or a record's head or branch names it (``None``:
        no such entry)."""
    def thread_custom_events(self, thread_id: str) -> list[tuple[str, str]]:
        """``(run_id, payload)`` of a thread's CUSTOM events, in recorded order."""


class ErasureReads(Protocol):
    """What an erasure reads before it deletes, and what replication reads of what was
    erased (:mod:`agui_store.engine.erasure`)."""

    def idle_threads(self, before: int, scope: str | None) -> list[int]:
        """Threads (of an owner; ``None``: all) created before ``before`` (milliseconds since
        the epoch), with no batch appended since and no run left open, oldest first."""
    def erased_log(self, run_pks: Sequence[int]) -> tuple[int, int, list[tuple[int, int]]]:
        """What erasing these runs takes out of the log: ``(events, bytes of their payloads
        and recorded inputs, the batches' [first_seq, last_seq] ranges by first_seq)``."""
    def erased_checkpoints(self, run_pks: Sequence[int]) -> list[ErasedCheckpoint]:
        """What these runs' checkpoints refer to."""
    def blobs_used_elsewhere(self, blob_ids: Sequence[int], run_pks: Sequence[int]) -> set[int]:
        """The blobs among ``blob_ids`` that a checkpoint of a run not among ``run_pks``
        refers to itself (its state, interrupts, warnings, manifest or a tail segment)."""
    def manifests_elsewhere(self, run_pks: Sequence[int]) -> list[int]:
        """The manifests of the checkpoints of runs not among ``run_pks``, each once."""
    def blob_bytes(self, blob_ids: Sequence[int]) -> int:
        """The stored size of these blobs."""
    def erasures(self) -> list[ErasureLogRow]:
        """Every erasure the store logged, in order."""
    def tombstoned(self, hashes: Sequence[bytes]) -> dict[bytes, int]:
        """The thread hashes among ``hashes`` that have a tombstone, each with its
        ``erased_at``."""
    def tombstones(self) -> list[tuple[bytes, int]]:
        """``(thread hash, erased_at)`` of every tombstone."""


class SearchReads(Protocol):
    """What full-text search reads (:mod:`agui_store.engine.search`)."""

    def search_candidates(
        self, query: Query, thread_pk: int | None, scope: str | None, before: int | None,
        limit: int,
    ) -> list[SearchCandidate]:
        """Index rows holding every word of ``query`` (an
        :class:`agui_store.history.search.Query`: its words, each word of a phrase, the
        last one of a starred term as a prefix) and no excluded single word, newest first
        (by key): of a thread (``None``: any), of an owner's threads (``scope``; ``None``:
        any owner), with a key below ``before`` (``None``: any), at most ``limit``; the
        engine checks phrases."""


class Reading(
    LogReads, Remembering, ReplicaReads, ConversationReads, ErasureReads, SearchReads, Protocol
):
    """A read transaction on a consistent snapshot: every group's reads."""

    # what is not behind the port: agui_store.testing hands tests the driver's connection
    @property
    def connection(self) -> Any:
        """The driver's connection."""


class Inspecting(Reading, Protocol):
    """What ``check()`` reads besides the engine's own operations: whole-store scans in key
    order, and the checks of the backend's own storage (:mod:`agui_store.engine.integrity`,
    :mod:`agui_store.engine.log_hashes`). Apart from :class:`Reading` so that the engine's
    interface stays what the engine uses; every backend's read transaction implements both."""

    # Each in key order. The long ones (marked "streamed") are read a page at a time: a check
    # never holds the log whole.
    #: The driver's errors, which a check of a store too broken to read can meet (reported
    #: as a check it could not finish, not raised).
    storage_errors: tuple[type[Exception], ...]
    def storage_checks(self) -> tuple[str, ...]:
        """The names of the checks of the backend's own storage (SQLite: the file's pages,
        foreign keys and schema; PostgreSQL: foreign keys and schema), in the order they
        run, before the store's own (:data:`agui_store.engine.integrity.CHECKS`)."""
    def storage_problems(self, check: str) -> Iterable[str]:
        """What one of :meth:`storage_checks` finds wrong, a sentence each."""
    def contained(self) -> AbstractContextManager[None]:
        """A part of the transaction whose failure leaves the rest of it usable (a check
        that could not finish, and the next one still runs): PostgreSQL aborts a whole
        transaction on an error, so there it is a savepoint; SQLite needs nothing."""
    def every_run(self) -> Iterable[StoredRun]:
        """Every run, by pk."""
    def every_branch(self) -> Iterable[tuple[int, str, int, str | None]]:
        """``(thread pk, name, run pk, thread_id or None)`` by thread pk and name."""
    def log_in_order(self) -> Iterable[tuple[int, int, str, str | None]]:
        """``(seq, run pk, type, payload)`` of every event by seq, the payload only for
        RUN_STARTED, RUN_FINISHED and RUN_ERROR (``None`` for others); streamed."""
    def batches_in_order(self) -> Iterable[LogBatch]:
        """Every batch, by first_seq and id; streamed."""
    def suspect_events(self) -> Iterable[tuple[int, int, str, str]]:
        """``(seq, run pk, type, payload)`` of the events whose payload may not be a JSON
        object of their type, by seq: at least those (a backend that cannot tell cheaply
        returns every event; the engine decides); streamed."""
    def suspect_inputs(self) -> Iterable[tuple[int, str]]:
        """``(run pk, input)`` of the recorded inputs that may not be JSON objects (at
        least those), by pk; streamed."""
    def every_blob(self) -> Iterable[tuple[bytes, int, bytes]]:
        """``(address, codec, data)`` of every blob, by address; streamed."""
    def blob_content(self, blob_id: int) -> tuple[int, bytes] | None:
        """``(codec, data)`` of a blob, or ``None``: no such blob."""
    def checkpoint_layouts(self) -> list[tuple[int, int, int | None, str, int | None]]:
        """``(run pk, length, manifest blob id, tail, state_base)`` of every checkpoint,
        by run."""
    def checkpoint_segments(self) -> list[tuple[int, int]]:
        """``(run pk, blob id)`` of every row of the list of checkpoints' tail segments
        (what an erasure looks a blob's users up in), by run and blob."""
    def complete_runs(self) -> set[int]:
        """The runs with a terminal batch."""
    def every_lineage_digest(self) -> list[tuple[bytes, int]]:
        """``(digest, run pk)`` of every lineage digest, by run."""
    def hashed_runs(self) -> Iterable[HashedRun]:
        """Every run as its hashes cover it, by pk; streamed."""
    def hashed_batches(self) -> list[HashedBatch]:
        """Every batch as its hash covers it, in the order they were written."""
    def batch_events(
        self, first_seq: int, last_seq: int, run_pk: int
    ) -> list[tuple[int, str, str, str | None]]:
        """``(seq, type, payload, echo refs)`` of the run's events in the range, by seq:
        what a batch's hash covers."""

    # pydantic-ai conversations, for check()
    def every_conversation_message(self) -> list[tuple[int, bytes, str]]:
        """``(pk, hash, message)`` by pk."""
    def every_conversation_entry(
        self,
    ) -> list[tuple[int, str, int | None, int, str, str, bytes]]:
        """``(pk, entry_id, parent, message, kind, conversation, hash)`` by pk."""
    def every_conversation(self) -> list[ConversationRow]:
        """Every record as :meth:`conversation` gives it, by pk."""
    def unused_conversation_messages(self) -> list[int]:
        """Messages no entry holds."""

    # the search index, for check()
    def every_search_row(self) -> list[IndexedMessage]:
        """Every index row, those whose words wait to be merged included, by id."""
    def search_words_apart(self) -> tuple[list[int], list[int]]:
        """What the backend's full-text index and the index rows disagree on: the ids of
        rows whose words it does not hold, and the ids it holds words under that name no
        row (SQLite: the FTS5 table's rowids; PostgreSQL keeps the words in the row: none).
        """
    def search_words_held(self) -> Iterable[tuple[int, str]]:
        """``(row id, word)``: each distinct word the backend's full-text index holds for an
        index row, once, those of rows whose words wait to be merged included, in no set
        order (SQLite: the pending rows' ``words`` and the FTS5 table's terms, read back
        through ``fts5vocab``; PostgreSQL: each row's ``tsvector`` lexemes). Streamed."""


class LogWrites(Protocol):
    """What an append, a branch and derivation write (:mod:`agui_store.engine.placement`,
    ``branches``, ``derivation``, ``checkpoints``)."""

    def insert_thread(
        self, thread_id: str, created_at: int, owner: str | None, tombstone: bytes | None = None
    ) -> int:
        """Create a thread; its key. ``tombstone``: the hash of its id among the tombstones
        (:func:`agui_store.engine.tombstones.thread_hash`); when one says the id was erased at
        or after ``created_at``, the thread is created the millisecond after the erasure."""
    def insert_run(self, run: NewRun) -> int:
        """Place a run; its key (larger than its parent's)."""
    def insert_events(self, rows: Sequence[tuple[int, int, str, str]]) -> None:
        """``(seq, run pk, type, payload)`` rows."""
    def insert_echo_refs(self, seq: int, refs: str) -> None:
        """Keep what an event's echoed input holds by reference (its ``echo_refs`` row)."""
    def insert_batch(
        self,
        run_pk: int,
        first_seq: int,
        last_seq: int,
        outcome: str | None,
        appended_at: int,
        batch_hash: bytes,
    ) -> None:
        """Record a batch of a run: its ``seq`` range, how it ends the run, and the run's hash
        after it."""
    def set_branch(self, thread_pk: int, name: str, run_pk: int, now: int) -> None:
        """Point a branch of a thread at a run, creating it if needed."""
    def move_branches(self, thread_pk: int, tip: int, to: int, now: int) -> None:
        """Every branch of the thread at ``tip`` now points at ``to``."""
    def delete_branch(self, thread_pk: int, name: str) -> bool:
        """Whether there was one."""
    def insert_digest(self, digest: bytes, run_pk: int) -> None:
        """Store a run under a lineage digest (no-op if it is already)."""
    def digests_from_checkpoints(self) -> None:
        """Every checkpoint's digest is a lineage digest again."""
    def drop_derived_from(self, run_pk: int) -> list[int]:
        """Drop the checkpoints, lineage digests and search index rows of a run and of
        every run below it; returns those runs. The blobs stay (see
        :func:`agui_store.engine.checkpoints.drop_derived_from`)."""
    def delete_blobs(self, blob_ids: Sequence[int]) -> None:
        """Delete these blobs (no checkpoint refers to them any more)."""
    def mark_underived(self, run_pks: Sequence[int]) -> None:
        """List runs whose derived data is left for later."""
    def clear_underived(self, run_pk: int) -> None:
        """Take a run off the list of those left for later."""
    def insert_new_blobs(self, packed: Sequence[tuple[bytes, int, bytes]]) -> dict[bytes, int]:
        """Store packed blobs ``(address, codec, data)`` whose address is not there; the
        ids of those stored, by address (a backend may add the ids of some it found
        there: the caller looks up the ones missing)."""
    def insert_checkpoint(self, row: NewCheckpoint) -> None:
        """Store a run's checkpoint."""


class ReplicaWrites(Protocol):
    """What a copy writes that an append does not: a thread's log exactly as another store
    recorded it (:mod:`agui_store.engine.replication`)."""

    def replicate_log(
        self,
        events: Sequence[tuple[int, int, str, str]],
        echo_refs: Sequence[tuple[int, str]],
        batches: Sequence[BatchRow],
    ) -> None:
        """Insert events (``(seq, run pk, type, payload)``), their echo references and
        their batches exactly as given, in bulk: a copy from another store
        (:mod:`agui_store.sync`) lands runs as they were recorded there, with this
        database's sequence numbers and the hashes they give."""


class ConversationWrites(Protocol):
    """What the pydantic-ai conversations write (:mod:`agui_store.engine.conversations`)."""

    def insert_conversation_message(self, address: bytes, message: str) -> int:
        """Store a conversation message (JSON text) under its address (its sha256); its key."""
    def insert_conversation_entry(
        self, entry_id: str, parent: int | None, message: int, kind: str, conversation: str,
        entry_hash: bytes,
    ) -> int:
        """Store an entry of a conversation's history: it follows the entry ``parent`` (a key;
        ``None``: it starts a history) and holds the message ``message`` (a key); its key."""
    def insert_conversation(
        self, conversation_id: str, head: int | None, scope: str | None, revision: str,
        updated_at: int, record: str, record_hash: bytes,
    ) -> int:
        """Store a conversation's record, its head the entry ``head`` (a key); its key."""
    def update_conversation(
        self, pk: int, head: int | None, scope: str | None, revision: str, updated_at: int,
        record: str, record_hash: bytes,
    ) -> None:
        """Rewrite the conversation record ``pk``: its head (an entry key), scope, revision,
        time, record text and hash."""
    def set_conversation_branches(self, pk: int, entries: Sequence[int]) -> None:
        """The record's branches are ``entries`` (entry pks), oldest first."""
    def delete_conversation(self, pk: int) -> None:
        """The record and its branches."""
    def delete_conversation_entry(self, pk: int) -> None:
        """Delete an entry; its message stays until :meth:`delete_unused_conversation_message`."""
    def delete_unused_conversation_message(self, pk: int) -> None:
        """Delete the message unless an entry still holds it."""
    def set_entry_conversation(self, pk: int, conversation: str) -> None:
        """The entry ``pk`` is kept by the conversation ``conversation`` (an erasure took
        the one that stored it)."""
    def entries_stored_by(self, conversation_ids: Sequence[str]) -> list[tuple[int, str]]:
        """``(pk, entry_id)`` of the entries that name one of these conversations as the
        one that stored them, by pk."""


class ErasureWrites(Protocol):
    """What an erasure writes, and replication of its tombstones
    (:mod:`agui_store.engine.erasure`)."""

    def erasing(self) -> None:
        """The transaction is an erasure's: its statements each touch a few rows of large
        tables, by key. A backend may plan them so (PostgreSQL: index scans, which stale
        statistics can otherwise lose to whole-table scans); SQLite needs nothing."""
    def erase_derived(self, run_pks: Sequence[int], blob_ids: Sequence[int]) -> None:
        """Delete the derived data of these runs (checkpoints, lineage digests, underived
        marks) and these blobs."""
    def erase_log(self, thread_pks: Sequence[int], run_pks: Sequence[int]) -> None:
        """Delete every logged row of these threads and runs (events, echo references,
        batches, branches, the runs and the threads), the log's append-only guards lifted
        for this alone. Their derived data is gone already (:meth:`erase_derived`)."""
    def insert_erasure(self, entry: ErasureEntry) -> None:
        """Log an erasure."""
    def insert_tombstones(self, rows: Sequence[tuple[bytes, int]]) -> None:
        """``(thread hash, erased_at)`` rows; a hash already there stays as it is."""
    def delete_tombstones(self, hashes: Sequence[bytes]) -> None:
        """Remove the tombstones of these thread hashes."""


class SearchWrites(Protocol):
    """What full-text search writes: its index, kept with the append that adds to it
    (:mod:`agui_store.engine.search`)."""

    def index_messages(
        self, thread_pk: int, run_pk: int, rows: Sequence[IndexRow]
    ) -> None:
        """Add index rows recorded by ``run_pk``, skipping each whose key the thread's index
        holds already."""
    def forget_thread_search(self, thread_pk: int) -> None:
        """Delete every index row of a thread, its words out of the backend's full-text
        index at once: erasing a thread erases what it can be found by."""
    def forget_search_as_held(self, thread_pks: Sequence[int]) -> None:
        """Delete every index row of the threads, and out of the backend's full-text index
        the words it holds for them, read back from it, with those it holds under ids no row
        has: what ``rebuild`` does, which repairs an index that may not hold what the
        messages give (SQLite: one scan of the FTS5 table; PostgreSQL keeps the words in the
        row)."""


class Writing(
    Reading, LogWrites, ReplicaWrites, ConversationWrites, ErasureWrites, SearchWrites, Protocol
):
    """The single writer's transaction: every group's writes, and the reads, which see the
    writes made so far."""


class Backend(Protocol):
    """One database: opens transactions on it."""

    #: How the database is named in messages (a path, or a URL without its password).
    where: str
    #: What opens it again (a path, or the URL with its credentials): never shown.
    location: str

    def reading(self) -> AbstractContextManager[Inspecting]:
        """A read transaction on a consistent snapshot (with the operations of ``check()``)."""
    def writing(self, thread_id: str | None = None) -> AbstractContextManager[Writing]:
        """A write transaction: of appends to one thread when ``thread_id`` is given (a
        backend may run them beside other threads' appends), else one that may write
        anything (it runs alone)."""
    def close(self) -> None:
        """Close the database; later calls raise."""
    def connection(self) -> Any:
        """The driver's connection, for :mod:`agui_store.testing` only."""
    def after_fork(self) -> None:
        """In a forked child: drop the parent's connection; the next use opens a new one."""
    def purge(self, rewrite: bool = False) -> bool:
        """After an erasure committed: make what it deleted unreadable where the database
        keeps old copies (SQLite: the file rewritten, the WAL copied into it and emptied;
        PostgreSQL: the tables it touched vacuumed, and with ``rewrite`` written again with
        their indexes). Whether that finished (SQLite: not while a reader holds pages of an
        older snapshot)."""
    #: Why the last :meth:`purge` that did not finish did not, and what finishes it.
    purge_pending: str


__all__ = [
    "Backend",
    "BatchRow",
    "ChainedBatch",
    "CheckpointAddresses",
    "CheckpointRow",
    "ConversationReads",
    "ConversationRow",
    "ConversationWrites",
    "EntryRow",
    "ErasedCheckpoint",
    "ErasureEntry",
    "ErasureLogRow",
    "ErasureReads",
    "ErasureWrites",
    "EventRow",
    "HashedBatch",
    "HashedRun",
    "IndexRow",
    "IndexedMessage",
    "Inspecting",
    "LogBatch",
    "LogReads",
    "LogWrites",
    "NewCheckpoint",
    "NewRun",
    "Reading",
    "Remembering",
    "ReplicaReads",
    "ReplicaRun",
    "ReplicaWrites",
    "RunCheckout",
    "RunRecordRow",
    "RunSummary",
    "SearchCandidate",
    "SearchReads",
    "SearchWrites",
    "StoredRun",
    "ThreadFacts",
    "Writing",
]
