"""The SQLite implementation of the port's transactions (:mod:`agui_store.engine.port`).

Each method runs one statement of :mod:`agui_store.backends.sqlite.sql` and shapes its rows; none
decides anything. The operations both backends ask and shape alike are written once in
:class:`agui_store.backends.named_queries.NamedQueries`; those here differ from PostgreSQL's in
their parameters or in what SQLite answers (JSON text for arrays, ``last_insert_rowid``). Errors
are not caught here: the transaction that holds this object translates them when it exits
(:mod:`agui_store.backends.sqlite.connection`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, ClassVar

import apsw

from agui_store.backends.named_queries import NamedQueries, row_of, rows_of, stream_of
from agui_store.backends.sqlite import checks, schema, sql
from agui_store.backends.sqlite.errors import Conn
from agui_store.codec import ingest
from agui_store.engine.port import (
    BatchRow,
    CheckpointRow,
    ErasedCheckpoint,
    ErasureEntry,
    ErasureLogRow,
    HashedRun,
    IndexRow,
    LogBatch,
    NewCheckpoint,
    NewRun,
    RunCheckout,
    RunSummary,
    SearchCandidate,
    StoredRun,
    ThreadFacts,
)
from agui_store.engine.trust import TrustedBlobs
from agui_store.history.search import Query


def _json_keys(keys: Iterable[int] | Iterable[str]) -> str:
    """Many keys as one parameter (a JSON array, read with ``json_each``): a lineage can be
    longer than SQLite takes parameters."""
    return ingest.encode(list(keys)).decode()


@contextlib.contextmanager
def lifted(conn: Conn, tables: tuple[str, ...], kind: str) -> Iterator[None]:
    """Inside a write transaction (a migration's, an erasure's): the append-only triggers
    of ``kind`` on ``tables`` dropped for the block and put back, exactly as they were,
    after it (a backfill writes values computed from the log into columns the migration
    just added; an erasure deletes an erased thread's rows)."""
    triggers = []
    for table in tables:
        name = f"{table}_are_append_only_{kind}"
        row = conn.execute(sql.TRIGGER_DEFINITION, (name,)).fetchone()
        if row is not None:
            triggers.append((name, str(row[0])))
    for name, _ in triggers:
        conn.execute(sql.drop_trigger(name))
    yield
    for _, definition in triggers:
        conn.execute(definition)


class SqliteTransaction(NamedQueries):
    """Reads and writes on one apsw connection, inside a transaction its backend opened.

    Each operation is the port's (:mod:`agui_store.engine.port`), documented there; a
    docstring here says only what SQLite's implementation adds."""

    __slots__ = ("_conn", "_trusted")
    sql: ClassVar[ModuleType] = sql

    def __init__(self, conn: Any, trusted: TrustedBlobs | None = None) -> None:
        """On ``conn``; ``trusted``: what the connection verified of its blobs (its
        backend's; by default, nothing: a transaction opened on its own trusts nothing)."""
        self._conn = conn
        self._trusted = TrustedBlobs() if trusted is None else trusted

    def trusted_blobs(self) -> TrustedBlobs:
        return self._trusted

    def _execute(self, statement: str, args: Any) -> Any:
        return self._conn.execute(statement, args)

    def _many(self, keys: Iterable[int] | Iterable[str]) -> str:
        return _json_keys(keys)

    # --- the connection, and what vouches for what the store remembers -----------------------

    @property
    def connection(self) -> Any:
        """The apsw connection."""
        return self._conn

    def database(self) -> tuple[str | int, ...]:
        """The main file's device and inode: a link to it, a ``file:`` URI or another
        spelling of its path names one file. An in-memory database is its connection's."""
        try:
            found = os.stat(self._conn.filename)
        except (OSError, ValueError):  # no file (":memory:", ""), or a name no file has
            return ("connection", id(self._conn))
        return ("file", found.st_dev, found.st_ino)

    def version(self) -> int | None:
        """SQLite's ``data_version``, which changes when another connection commits to the
        file."""
        return int(self._conn.data_version())

    def thread_facts(
        self, thread_pk: int, run_pks: Sequence[int],
        view: tuple[bytes, int, int | None] | None, view_base: int | None,
        probe_underived: bool,
    ) -> ThreadFacts:
        """Asked statement by statement: never needed while :meth:`version` vouches for the
        file, so kept simple."""
        last_seqs = {
            pk: self.run_last_seq(pk) for pk in run_pks if self.run_thread(pk) == thread_pk
        }
        holds = (
            view is not None
            and view[2] is not None
            and self.has_digest(view[0], view[1])
            and not self.grew_since(thread_pk, view[1], view[2])
            and (view_base is None or self.has_checkpoint(view_base))
        )
        underived = probe_underived and thread_pk in self.underived_threads()
        return self.newest_run(thread_pk), self.has_branches(thread_pk), last_seqs, holds, underived

    # --- checkpoints (chunked message lists: agui_store.engine.checkpoints) -----------------------

    def checkpoint_walk(self, run_pk: int) -> list[tuple[int, bool]]:
        return [(int(pk), bool(stop)) for pk, stop in self._rows(sql.NEAREST, (run_pk,))]

    def drop_derived_from(self, run_pk: int) -> list[int]:
        below = [int(pk) for pk in self._column(sql.SUBTREE, (run_pk,))]
        listed = _json_keys(below)
        # The index rows first: their words are read back from the checkpoints' blobs.
        self._forget_search(sql.RUNS_SEARCH_ROWS, listed)
        self._conn.execute(sql.DELETE_CHECKPOINTS, (listed,))
        # Keyed by digest, so this scans the table: fine for a path only sequence-unchecked
        # recording reaches.
        self._conn.execute(sql.DELETE_LINEAGE_DIGESTS, (listed,))
        return below

    def checkpoint_with_blobs(
        self, run_pk: int
    ) -> tuple[CheckpointRow | None, Iterable[tuple[int, int, bytes, bytes]] | None]:
        """The row alone (a statement costs no round trip here)."""
        return self.checkpoint_row(run_pk), None  # a statement costs no round trip here

    def blobs_in_order(self, blob_ids: Sequence[int]) -> Iterable[tuple[int, int, bytes, bytes]]:
        return self._rows(sql.BLOBS_IN_ORDER, (_json_keys(blob_ids),))

    def addresses_in_order(self, blob_ids: Sequence[int]) -> Iterable[tuple[int, bytes]]:
        return self._rows(sql.ADDRESSES_IN_ORDER, (_json_keys(blob_ids),))

    def blob_ids(self, addresses: Sequence[bytes]) -> dict[bytes, int]:
        wanted = ingest.encode([a.hex() for a in addresses]).decode()
        return {bytes(h): int(i) for i, h in self._rows(sql.SELECT_BLOB_IDS, (wanted,))}

    def insert_new_blobs(self, packed: Sequence[tuple[bytes, int, bytes]]) -> dict[bytes, int]:
        conn = self._conn
        ids = {}
        for row in packed:
            conn.execute(sql.INSERT_NEW_BLOB, row)
            if conn.changes():  # else the address is stored already (or twice in packed)
                ids[bytes(row[0])] = int(conn.last_insert_rowid())
        return ids

    def insert_checkpoint(self, row: NewCheckpoint) -> None:
        self._conn.execute(sql.INSERT_CHECKPOINT, row)

    # --- threads ----------------------------------------------------------------------------

    def thread_ids(self, scope: str | None) -> list[str]:
        return [str(t) for t in self._column(sql.THREAD_IDS, (scope,))]

    def thread_ids_by_activity(self, scope: str | None) -> list[str]:
        return [str(t) for t in self._column(sql.THREAD_IDS_BY_ACTIVITY, (scope,))]

    def thread_pks(self, scope: str | None, limit: int) -> list[int]:
        return [int(pk) for pk in self._column(sql.THREAD_PKS, (scope, limit))]

    # --- runs -------------------------------------------------------------------------------

    def threads_of_run_id(self, run_id: str, scope: str | None) -> list[str]:
        return [str(t) for t in self._column(sql.THREADS_OF_RUN_ID, (run_id, scope))]

    def runs_named(
        self, run_id: str, thread_pk: int | None, scope: str | None
    ) -> list[tuple[int, int, str, str | None]]:
        rows = self._conn.execute(sql.RUNS_NAMED, (run_id, thread_pk, scope))
        return [(int(pk), int(thread), str(tid), other) for pk, thread, tid, other in rows]

    def runs_prefixed(
        self, prefix: str, below: str | None, thread_pk: int | None, scope: str | None
    ) -> list[tuple[int, int, str]]:
        rows = self._conn.execute(sql.RUNS_PREFIXED, (prefix, below, thread_pk, scope))
        return [(int(pk), int(thread), str(rid)) for pk, thread, rid in rows]

    def run_checkout(
        self, thread_id: str, run_id: str, scope: str | None
    ) -> RunCheckout | None:
        """Asked statement by statement (a statement costs no round trip here), on the
        transaction's snapshot. See :meth:`agui_store.engine.port.Reading.run_checkout`."""
        thread = self.thread(thread_id)
        if thread is None or (scope is not None and thread[1] != scope):
            return None
        pk = self.run_pk(thread[0], run_id)
        row = None if pk is None else self.checkpoint_row(pk)
        if pk is None or row is None:
            return None
        summary, names, newest = self.run_summary_and_branches(pk)
        return RunCheckout(pk, summary, names, newest, row, None)

    def run_summary_and_branches(self, run_pk: int) -> tuple[RunSummary, list[str], bool]:
        *summary, names, newest = self._one(sql.RUN_SUMMARY_AND_BRANCHES, (run_pk,))
        names = [str(name) for name in ingest.decode(names)]
        return row_of(RunSummary, summary), names, bool(newest)

    def insert_run(self, run: NewRun) -> int:
        args = (*run[:7], int(run.synthetic), *run[8:])  # stored as 0 or 1
        self._conn.execute(sql.INSERT_RUN, args)
        return int(self._conn.last_insert_rowid())

    # --- lineage ----------------------------------------------------------------------------

    def merge_base(self, a: int, b: int) -> tuple[int, int, int] | None:
        row = self._one(sql.MERGE_BASE, (a, b))
        return (int(row[0]), int(row[1]), int(row[2])) if row else None

    def lineage_runs(self, run_pk: int, depth: int | None, limit: int | None) -> list[RunSummary]:
        args = (run_pk, depth, -1 if limit is None else limit)
        return rows_of(RunSummary, self._execute(sql.LINEAGE_RUNS, args))

    # --- events -----------------------------------------------------------------------------

    def next_seq(self) -> int:
        return int(self._value(sql.NEXT_SEQ))

    def run_pk_and_next_seq(self, thread_pk: int, run_id: str) -> tuple[int | None, int]:
        return self.run_pk(thread_pk, run_id), self.next_seq()

    def run_events(self, run_pk: int, after: int) -> list[tuple[str, str | None, int, str]]:
        return self._all(sql.RUN_EVENTS, (run_pk, after))

    def insert_events(self, rows: Sequence[tuple[int, int, str, str]]) -> None:
        """Event types are stored as codes, a new type added to the codes first."""
        self._conn.executemany(sql.INSERT_EVENT, self._coded(rows))

    def _coded(self, rows: Sequence[tuple[int, int, str, str]]) -> list[tuple[int, int, int, str]]:
        """Event rows with their type's code in place of its name (``schema.EVENT_TYPE_CODES``)."""
        codes = schema.EVENT_TYPE_CODES
        try:
            return [(seq, run, codes[kind], payload) for seq, run, kind, payload in rows]
        except KeyError:
            return [(seq, run, self._code(kind), payload) for seq, run, kind, payload in rows]

    def _code(self, kind: str) -> int:
        code = schema.EVENT_TYPE_CODES.get(kind)
        if code is None:
            self._conn.execute(sql.ADD_EVENT_TYPE, (kind,))
            code = int(self._value(sql.EVENT_TYPE_CODE, (kind,)))
        return code

    def insert_echo_refs(self, seq: int, refs: str) -> None:
        self._conn.execute(sql.INSERT_ECHO_REFS, (seq, refs))

    # --- batches and hashes -----------------------------------------------------------------

    def run_hash(self, run_pk: int) -> bytes:
        return bytes(self._value(sql.RUN_HASH, (run_pk,)))

    def insert_batch(
        self,
        run_pk: int,
        first_seq: int,
        last_seq: int,
        outcome: str | None,
        appended_at: int,
        batch_hash: bytes,
    ) -> None:
        count = last_seq - first_seq + 1
        self._conn.execute(
            sql.INSERT_BATCH, (run_pk, first_seq, last_seq, count, outcome, appended_at, batch_hash)
        )

    def replicate_log(
        self,
        events: Sequence[tuple[int, int, str, str]],
        echo_refs: Sequence[tuple[int, str]],
        batches: Sequence[BatchRow],
    ) -> None:
        self._conn.executemany(sql.INSERT_EVENT, self._coded(events))
        self._conn.executemany(sql.INSERT_ECHO_REFS, echo_refs)
        self._conn.executemany(
            sql.INSERT_BATCH,
            [
                (run, first, last, last - first + 1, outcome, appended_at, batch_hash)
                for run, first, last, outcome, appended_at, batch_hash in batches
            ],
        )

    # --- branches ---------------------------------------------------------------------------

    def branches_named(
        self, name: str, thread_pk: int | None, scope: str | None
    ) -> list[tuple[int, int]]:
        rows = self._conn.execute(sql.BRANCHES_NAMED, (name, thread_pk, scope))
        return [(int(run), int(thread)) for run, thread in rows]

    def delete_branch(self, thread_pk: int, name: str) -> bool:
        self._conn.execute(sql.DELETE_BRANCH, (thread_pk, name))
        return bool(self._conn.changes())

    # --- derived data -----------------------------------------------------------------------

    def runs_with_digests(
        self, thread_pk: int, digests: Sequence[bytes]
    ) -> list[tuple[int, bytes]]:
        wanted = ingest.encode([d.hex() for d in digests]).decode()
        rows = self._conn.execute(sql.RUNS_WITH_DIGESTS, (wanted, thread_pk))
        return [(int(run), bytes(digest)) for run, digest in rows]

    def underived_runs(self, thread_pk: int | None) -> list[tuple[int, int]]:
        rows = self._conn.execute(sql.UNDERIVED_RUNS, (thread_pk,))
        return [(int(run), int(thread)) for run, thread in rows]

    def insert_digest(self, digest: bytes, run_pk: int) -> None:
        self._conn.execute(sql.INSERT_DIGEST, (digest, run_pk))

    # --- check(): whole-store reads of agui_store.engine.integrity --------------------------------

    #: What a check of a file too broken to read meets.
    storage_errors: tuple[type[Exception], ...] = (apsw.Error,)

    def storage_checks(self) -> tuple[str, ...]:
        return checks.CHECKS

    def storage_problems(self, check: str) -> Iterable[str]:
        return checks.problems(self._conn, check)

    def contained(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to set up: an error leaves an SQLite read transaction usable."""
        return contextlib.nullcontext()  # an error leaves an SQLite read transaction usable

    def search_words_apart(self) -> tuple[list[int], list[int]]:
        return (
            [int(i) for i in self._column(sql.SEARCH_ROWS_WITHOUT_WORDS)],
            [int(i) for i in self._column(sql.SEARCH_WORDS_WITHOUT_ROWS)],
        )

    def search_words_held(self) -> Iterable[tuple[int, str]]:
        for pk, words in self._rows(sql.PENDING_SEARCH_WORDS):
            for word in set(str(words).split()):
                yield int(pk), word
        # A temporary table of the connection's own: nothing of the store is written.
        self._conn.execute(sql.SEARCH_INSTANCES_TABLE)
        for pk, term in self._rows(sql.EVERY_SEARCH_INSTANCE):
            yield int(pk), str(term)

    def every_run(self) -> Iterable[StoredRun]:
        return stream_of(StoredRun, self._rows(sql.EVERY_RUN))

    def every_branch(self) -> Iterable[tuple[int, str, int, str | None]]:
        return self._rows(sql.EVERY_BRANCH)

    def log_in_order(self) -> Iterable[tuple[int, int, str, str | None]]:
        return self._rows(sql.LOG_IN_ORDER)

    def batches_in_order(self) -> Iterable[LogBatch]:
        return stream_of(LogBatch, self._rows(sql.BATCHES_IN_ORDER))

    def suspect_events(self) -> Iterable[tuple[int, int, str, str]]:
        return self._rows(sql.SUSPECT_EVENTS)

    def suspect_inputs(self) -> Iterable[tuple[int, str]]:
        return self._rows(sql.SUSPECT_INPUTS)

    def every_blob(self) -> Iterable[tuple[bytes, int, bytes]]:
        return self._rows(sql.EVERY_BLOB)

    def hashed_runs(self) -> Iterable[HashedRun]:
        return stream_of(HashedRun, self._rows(sql.HASHED_RUNS))

    def batch_events(
        self, first_seq: int, last_seq: int, run_pk: int
    ) -> list[tuple[int, str, str, str | None]]:
        return self._all(sql.BATCH_EVENTS, (first_seq, last_seq, run_pk))

    # --- erasure (agui_store.engine.erasure) ------------------------------------------------

    def idle_threads(self, before: int, scope: str | None) -> list[int]:
        return [int(pk) for pk in self._column(sql.IDLE_THREADS, (before, scope))]

    def erased_log(self, run_pks: Sequence[int]) -> tuple[int, int, list[tuple[int, int]]]:
        runs = _json_keys(run_pks)
        events, payload_bytes = self._one(sql.ERASED_EVENT_BYTES, (runs,))
        input_bytes = self._value(sql.ERASED_INPUT_BYTES, (runs,))
        ranges = [(int(a), int(b)) for a, b in self._all(sql.ERASED_BATCHES, (runs,))]
        return int(events), int(payload_bytes) + int(input_bytes), ranges

    def erased_checkpoints(self, run_pks: Sequence[int]) -> list[ErasedCheckpoint]:
        return rows_of(ErasedCheckpoint, self._all(sql.ERASED_CHECKPOINTS, (_json_keys(run_pks),)))

    def blobs_used_elsewhere(self, blob_ids: Sequence[int], run_pks: Sequence[int]) -> set[int]:
        args = (_json_keys(blob_ids), _json_keys(run_pks))
        return {int(b) for b in self._column(sql.BLOBS_USED_ELSEWHERE, args)}

    def manifests_elsewhere(self, run_pks: Sequence[int]) -> list[int]:
        return [int(b) for b in self._column(sql.MANIFESTS_ELSEWHERE, (_json_keys(run_pks),))]

    def blob_bytes(self, blob_ids: Sequence[int]) -> int:
        return int(self._value(sql.BLOB_BYTES, (_json_keys(blob_ids),)))

    def erasures(self) -> list[ErasureLogRow]:
        return rows_of(ErasureLogRow, self._all(sql.ERASURES))

    def tombstoned(self, hashes: Sequence[bytes]) -> dict[bytes, int]:
        keys = ingest.encode([h.hex() for h in hashes]).decode()
        return {bytes(h): int(at) for h, at in self._all(sql.TOMBSTONED, (keys,))}

    def tombstones(self) -> list[tuple[bytes, int]]:
        return [(bytes(h), int(at)) for h, at in self._all(sql.TOMBSTONES)]

    def erasing(self) -> None:
        """Nothing: SQLite's plans of these statements use their indexes."""

    def erase_derived(self, run_pks: Sequence[int], blob_ids: Sequence[int]) -> None:
        """The rows (the erased threads' search rows went just before, their words with
        them: the FTS5 table deletes with ``secure-delete``, schema version 16)."""
        conn, runs = self._conn, _json_keys(run_pks)
        conn.execute(sql.DELETE_LINEAGE_DIGESTS, (runs,))
        conn.execute(sql.DELETE_CHECKPOINTS, (runs,))
        conn.execute(sql.ERASE_UNDERIVED, (runs,))
        conn.execute(sql.ERASE_BLOBS, (_json_keys(blob_ids),))

    def erase_log(self, thread_pks: Sequence[int], run_pks: Sequence[int]) -> None:
        conn = self._conn
        runs, threads = _json_keys(run_pks), _json_keys(thread_pks)
        # A type name the producer made up is the thread's content as much as its events
        # are: it goes with the last event of its type.
        own_types = _json_keys(
            int(c) for c in self._column(sql.ERASED_OWN_EVENT_TYPES, (runs, _BUILT_IN_TYPES))
        )
        with lifted(conn, schema.ERASED_LOG_TABLES, "delete"):
            conn.execute(sql.ERASE_ECHO_REFS, (runs,))
            conn.execute(sql.ERASE_EVENTS, (runs,))
            if own_types != "[]":
                conn.execute(sql.ERASE_UNUSED_EVENT_TYPES, (own_types,))
            conn.execute(sql.ERASE_BATCHES, (runs,))
            conn.execute(sql.ERASE_BRANCHES, (threads,))
            conn.execute(sql.ERASE_RUNS, (runs,))
            conn.execute(sql.ERASE_THREADS, (threads,))

    def insert_erasure(self, entry: ErasureEntry) -> None:
        self._conn.execute(sql.INSERT_ERASURE, entry)

    def insert_tombstones(self, rows: Sequence[tuple[bytes, int]]) -> None:
        self._conn.executemany(sql.INSERT_TOMBSTONE, rows)

    def delete_tombstones(self, hashes: Sequence[bytes]) -> None:
        self._conn.executemany(sql.DELETE_TOMBSTONE, [(h,) for h in hashes])
    # --- full-text search (agui_store.engine.search) ------------------------------------------

    def index_messages(
        self, thread_pk: int, run_pk: int, rows: Sequence[IndexRow]
    ) -> None:
        # The run's rows wait in search_pending, whole (schema version 18), until enough are
        # pending to move into search_messages and the FTS5 table together; a key the
        # thread's index holds, moved or pending, is not added again.
        conn = self._conn
        keys = [row[0] for row in rows]
        held: set[int] = set()
        for at in range(0, len(keys), _KEYS_AT_ONCE):
            part = keys[at : at + _KEYS_AT_ONCE]
            # Padded to a power of two (the last key repeated): few statements to cache.
            part += part[-1:] * ((1 << (len(part) - 1).bit_length()) - len(part))
            for key, next_id, oldest_id in conn.execute(
                sql.search_keys_held(len(part)), (thread_pk, *part)
            ):
                if key is None:  # the last row: where the ids stand (the last part's holds)
                    first, oldest = next_id, oldest_id
                else:
                    held.add(key)
        new = [row for row in rows if row[0] not in held] if held else rows
        if not new:
            return
        conn.executemany(
            sql.INSERT_SEARCH_PENDING,
            [
                (first + i, thread_pk, run_pk, k, p, t, b, a, found)
                for i, (k, p, t, found, b, a) in enumerate(new)
            ],
        )
        if first + len(new) - (first if oldest is None else oldest) >= SEARCH_PENDING_ROWS[0]:
            conn.execute(sql.FLUSH_SEARCH_WORDS)

    def forget_thread_search(self, thread_pk: int) -> None:
        self._forget_search(sql.THREAD_SEARCH_ROWS, thread_pk)

    def forget_search_as_held(self, thread_pks: Sequence[int]) -> None:
        conn = self._conn
        threads = _json_keys(thread_pks)
        conn.execute(sql.SEARCH_INSTANCES_TABLE)
        held: dict[int, list[str]] = {}
        for pk, term in conn.execute(sql.SEARCH_INSTANCES_BUT_OTHERS, (threads,)):
            held.setdefault(int(pk), []).append(str(term))
        conn.executemany(sql.DELETE_SEARCH_WORDS, [(pk, " ".join(w)) for pk, w in held.items()])
        conn.execute(sql.DELETE_THREADS_SEARCH_ROWS, {"threads": threads})

    def _forget_search(self, rows_sql: str, arg: Any) -> None:
        """Delete the index rows ``rows_sql`` selects, and their words from the FTS5 table.
        The table is contentless and deletes with ``secure-delete``: it must be told a row's
        words, which are read back from the message the row names
        (:func:`agui_store.engine.search.indexed_words`); a row whose message no longer holds
        its text (a run whose view events after its end changed) has its words read from
        the index itself, by a scan of it: exact either way, and the scan is rare."""
        conn = self._conn
        rows = [tuple(r) for r in conn.execute(rows_sql, (arg,))]
        if not rows:
            return
        everyone = [int(r[0]) for r in rows]
        from agui_store.engine import search  # the engine's reading of a message's words

        # A pending row's words are in search_pending, not in the FTS5 table yet.
        rows = [r[:6] for r in rows if not r[6]]
        if not rows:
            conn.execute(sql.DELETE_SEARCH_MESSAGES, {"ids": _json_keys(everyone)})
            return
        found = search.indexed_words(self, [r[1:] for r in rows])
        lost = [int(r[0]) for r, w in zip(rows, found, strict=True) if w is None]
        scanned: dict[int, list[str]] = {pk: [] for pk in lost}
        if lost:
            conn.execute(sql.SEARCH_INSTANCES_TABLE)
            for pk, term in conn.execute(sql.SEARCH_INSTANCES, (_json_keys(lost),)):
                scanned[int(pk)].append(str(term))
        conn.executemany(
            sql.DELETE_SEARCH_WORDS,
            [
                (int(r[0]), w if w is not None else " ".join(scanned[int(r[0])]))
                for r, w in zip(rows, found, strict=True)
            ],
        )
        conn.execute(sql.DELETE_SEARCH_MESSAGES, {"ids": _json_keys(everyone)})

    def search_candidates(
        self, query: Query, thread_pk: int | None, scope: str | None, before: int | None,
        limit: int,
    ) -> list[SearchCandidate]:
        below = _NO_KEY if before is None else before
        match, words = pending_condition(query)
        # The pending rows first: each is newer than every row of the FTS5 table.
        found = rows_of(SearchCandidate, self._conn.execute(
            sql.SEARCH_PENDING_CANDIDATES.format(match=match),
            {"below": below, "thread": thread_pk, "scope": scope, "limit": limit, **words},
        ))
        if len(found) >= limit:
            return found
        # The FTS5 table's rows, read between bounds where the rows searched lie: a search
        # that finds fewer hits than the limit reads its words' lists back to the lowest.
        spans: list[tuple[int, int]] | None = None
        if thread_pk is not None:
            lowest, highest = self._conn.execute(sql.THREAD_SEARCH_IDS, (thread_pk,)).fetchone()
            spans = [] if lowest is None else [(lowest, highest)]
        elif scope is not None:
            spans = self._owner_search_windows(scope)
        expression = fts5_expression(query)
        for low, high in [(0, below - 1)] if spans is None else spans:
            if low >= below:
                continue
            args = (expression, min(below, high + 1), thread_pk, scope, limit - len(found), low)
            found += rows_of(SearchCandidate, self._conn.execute(sql.SEARCH_CANDIDATES, args))
            if len(found) >= limit:
                break
        return found

    def _owner_search_windows(self, scope: str) -> list[tuple[int, int]] | None:
        """The ranges of FTS5 row ids an owner's threads span (each thread's lowest to its
        highest, overlapping ones joined), newest first. ``None`` when the owner holds more
        than :data:`SEARCH_OWNER_WINDOWS` threads (each range costs a query of FTS5), or
        :data:`SEARCH_OWNER_FEW_ROWS` rows or more: the search reads the word's list."""
        few = SEARCH_OWNER_FEW_ROWS[0]
        if few <= 0:
            return None
        most = SEARCH_OWNER_WINDOWS + 1
        (threads,) = self._conn.execute(sql.OWNER_THREADS, (scope, most)).fetchone()
        if threads >= most:
            return None
        (rows,) = self._conn.execute(sql.OWNER_SEARCH_ROWS, (scope, few)).fetchone()
        if rows >= few:
            return None
        joined: list[tuple[int, int]] = []
        for low, high in sorted(self._conn.execute(sql.OWNER_SEARCH_SPANS, (scope,))):
            if joined and low <= joined[-1][1]:
                joined[-1] = (joined[-1][0], max(joined[-1][1], high))
            else:
                joined.append((low, high))
        return joined[::-1]


#: An owner of at most :data:`SEARCH_OWNER_WINDOWS` threads holding fewer rows in the FTS5
#: table than this is searched between the lowest and highest row of each of its threads
#: (two reads of their entries in the ``(thread, key)`` index first: 0.3 ms at this bound,
#: what an owner with more pays for nothing); any other, along the word's list back from
#: the newest, as every owner's are. That reading stops once it has the limit's hits, so for
#: an owner holding few of a common word's rows it reads the word's whole list (9-10 ms in
#: a 10,000-run store, against 2-3 ms between the threads' rows, for an owner of 2 threads
#: of 1,000). A list, so that a test can change it
#: (:func:`agui_store.testing.search_owner_rows`).
SEARCH_OWNER_FEW_ROWS = [2048]

#: The most threads whose ranges of row ids an owner's search reads one by one (a query of
#: FTS5 each, about 0.2-0.4 ms).
SEARCH_OWNER_WINDOWS = 16


#: How many pending search rows go into the FTS5 table together (schema version 16): one
#: segment for them all (a segment per append cost as much as the rest of its writes), and
#: few enough that searching them in their column costs little. A list, so that a test can
#: make it small (:func:`agui_store.testing.search_pending_rows`).
SEARCH_PENDING_ROWS = [256]


#: The highest code of a type AG-UI names (``schema.EVENT_TYPE_NAMES``); a producer's own
#: type names have codes above it.
_BUILT_IN_TYPES = len(schema.EVENT_TYPE_NAMES)

#: The most keys one statement looks up (SQLite takes a few hundred parameters at least).
_KEYS_AT_ONCE = 64

#: A key above every index row's (they are 63-bit).
_NO_KEY = 2**63 - 1


def fts5_expression(query: Query) -> str:
    """A query (:class:`agui_store.history.search.Query`) as an FTS5 expression over its
    words: every word of a found term (its last as a prefix when starred), none of an
    excluded single word. Words are letters and digits: quoting needs no escape."""
    found = " AND ".join(
        _fts5_term(word, term.prefix and i == len(term.words) - 1)
        for term in query.found
        for i, word in enumerate(term.words)
    )
    excluded = "".join(
        f" NOT {_fts5_term(term.words[0], term.prefix)}"
        for term in query.excluded
        if len(term.words) == 1
    )
    return f"({found}){excluded}"


def pending_condition(query: Query) -> tuple[str, dict[str, str]]:
    """The condition :func:`fts5_expression` states, over a pending row's ``words`` (its
    words separated by spaces): an ``instr`` per word, with its parameters. A word
    is found as `` word `` in `` words ``, a prefix as `` prefix`` in it."""
    params: dict[str, str] = {}

    def term(word: str, prefix: bool) -> str:
        name = f"w{len(params)}"
        params[name] = f" {word}" if prefix else f" {word} "
        return f"instr(' ' || m.words || ' ', :{name}) > 0"

    found = [
        term(word, term_.prefix and i == len(term_.words) - 1)
        for term_ in query.found
        for i, word in enumerate(term_.words)
    ]
    excluded = [
        f"NOT {term(t.words[0], t.prefix)}" for t in query.excluded if len(t.words) == 1
    ]
    return " AND ".join(found + excluded), params


def _fts5_term(word: str, prefix: bool) -> str:
    return f'"{word}"*' if prefix else f'"{word}"'
