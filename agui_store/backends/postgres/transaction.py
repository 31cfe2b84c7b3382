"""The PostgreSQL implementation of the port's transactions (:mod:`agui_store.engine.port`).

Each method runs one statement of :mod:`agui_store.backends.postgres.sql` and shapes its rows, with
the same names and row shapes as :class:`~agui_store.backends.sqlite.transaction.SqliteTransaction`;
none decides anything. The operations both backends ask and shape alike are written once in
:class:`agui_store.backends.named_queries.NamedQueries`; those here differ in their parameters, or
defer, carry or stream. Errors are not caught here: the backend's transaction translates
them when it exits (:mod:`agui_store.backends.postgres.backend`).

Checkpoints are kept as on SQLite: the engine lays a view out as chunks
(:mod:`agui_store.engine.checkpoints`) and this class stores and reads the blobs and rows.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, ClassVar

import psycopg

from agui_store import errors
from agui_store.backends.named_queries import NamedQueries, row_of, rows_of, stream_of
from agui_store.backends.postgres import checks, sql
from agui_store.backends.postgres.schema import PAGE_EVENTS
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

#: A page as inserted: (first_seq, run, last_seq, types, payloads).
Page = tuple[int, int, int, list[str], list[str]]


def pages(
    rows: Sequence[tuple[int, int, str, str]], batch_starts: frozenset[int] = frozenset()
) -> list[Page]:
    """Event rows ``(seq, run, type, payload)`` as pages ``(first_seq, run, last_seq, types,
    payloads)``: runs of rows of one run with consecutive seqs, at most PAGE_EVENTS each, a
    new page at each of ``batch_starts`` (the first seqs of the batches the rows make up),
    so that no page spans two batches (the ``pages`` check holds the store to it)."""
    out: list[Page] = []
    first = run = last = -1
    types: list[str] = []
    payloads: list[str] = []
    for seq, row_run, kind, payload in rows:
        if (
            row_run != run
            or seq != last + 1
            or len(payloads) == PAGE_EVENTS
            or seq in batch_starts
        ):
            if payloads:
                out.append((first, run, last, types, payloads))
            first, run, types, payloads = seq, row_run, [], []
        types.append(kind)
        payloads.append(payload)
        last = seq
    if payloads:
        out.append((first, run, last, types, payloads))
    return out


#: Rows a server-side cursor fetches per round trip (:meth:`PostgresTransaction._stream`).
STREAM_PAGE_ROWS = 2000

#: Names of server-side cursors, unique in the process.
_CURSORS = itertools.count()


def _whole(rows: Iterable[Any], columns: tuple[int, ...]) -> Iterator[Any]:
    """``rows`` of events (seq first), refused where a page gave one a NULL in ``columns``
    (its type or payload): only a page whose CHECKs the owner dropped holds one, and the
    store's checks cannot judge an event that is not there (the ``pages`` check names it)."""
    for row in rows:
        if any(row[column] is None for column in columns):
            raise errors.CorruptStoreError(
                f"event seq {row[0]} has no type or payload in its page of event_pages"
            )
        yield row


#: The one character PostgreSQL's text cannot hold: no stored id has it, so a lookup of a
#: name holding it finds nothing (SQLite's stores from before ids were checked may hold it).
_NUL = "\x00"


def _keys(keys: Iterable[int]) -> list[int]:
    """Many keys as one parameter (a bigint array, read with ``= ANY``)."""
    return list(keys)


#: The columns of ``sql.SELECT_CHECKPOINT`` (``sql.CHECKPOINT_WITH_BLOBS`` adds a blob's).
HEADER_COLUMNS = 22
#: The columns of a run summary (``sql.RUN_COLUMNS``).
SUMMARY_COLUMNS = 14
#: The columns of ``sql.RUN_CHECKOUT``'s first row before a blob's: a run summary, the
#: branches at the run, whether it is the newest, and its checkpoint's row.
CHECKOUT_COLUMNS = SUMMARY_COLUMNS + 2 + HEADER_COLUMNS


def _with_clauses(
    carried: Sequence[tuple[str, tuple[Any, ...]]], statement: str, args: tuple[Any, ...]
) -> tuple[str, tuple[Any, ...]]:
    """``statement`` with the writes of ``carried`` (INSERTs with positional placeholders)
    as data-modifying WITH clauses in front of it: one statement, whose foreign keys are
    checked once all its rows are in."""
    if not carried:
        return statement, args
    clauses = ", ".join(
        f"agui_store_w{n} AS ({text.strip()})" for n, (text, _) in enumerate(carried)
    )
    every = tuple(itertools.chain.from_iterable(a for _, a in carried)) + tuple(args)
    statement = statement.strip()
    if statement.startswith("WITH "):  # its own WITH clauses follow the carried ones
        return f"WITH {clauses}, {statement[len('WITH '):]}", every
    return f"WITH {clauses} {statement}", every


class PostgresTransaction(NamedQueries):
    """Reads and writes on one psycopg connection, inside a transaction its backend opened.

    Each operation is the port's (:mod:`agui_store.engine.port`), documented there; a
    docstring here says only what PostgreSQL's implementation adds (deferred, carried or
    streamed)."""

    __slots__ = (
        "_alone", "_begin", "_open_conn", "_pending", "_reserved_run", "_streams", "_trusted"
    )
    sql: ClassVar[ModuleType] = sql

    def __init__(
        self,
        conn: Any,
        begin: Callable[[str | None], tuple[Any, Any]] | None = None,
        trusted: TrustedBlobs | None = None,
        alone: Callable[[str, Any], list[Any]] | None = None,
    ) -> None:
        """On ``conn`` in a transaction, or, with ``begin``, on one its first statement
        opens: ``begin(query)`` sends ``BEGIN`` and the locks with ``query`` (None: alone;
        no parameters) and gives back the connection and the query's rows. ``trusted``:
        what the connection verified of its blobs (its backend's; by default, nothing).
        ``alone(statement, args)``: a read transaction's way to send its first statement
        outside any transaction, its rows fetched (:meth:`run_checkout`)."""
        self._open_conn = conn
        self._trusted = TrustedBlobs() if trusted is None else trusted
        self._begin = begin
        self._alone = alone
        self._streams: list[Any] = []  # the server-side cursors open (_stream)
        #: Writes sent later (:meth:`_defer`): ``(INSERT statement, positional args)``.
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        #: A run key taken from the runs' sequence for the next :meth:`insert_run`
        #: (:meth:`run_pk_and_next_seq`), so that the run's row needs no round trip.
        self._reserved_run: int | None = None

    @property
    def _conn(self) -> Any:
        """The connection, in the transaction, every write deferred so far sent: whatever
        is sent next sees them."""
        if self._begin is not None:
            self._start(None)
        if self._pending:
            self.flush()
        return self._open_conn

    # --- deferred writes --------------------------------------------------------------------
    #
    # An append's INSERTs whose answer the engine does not use (its events' page, its batch,
    # the lineage digest, the checkpoint's row, the run's row when its key was reserved) are
    # not sent one round trip each: they are kept and sent as data-modifying WITH clauses of
    # the next INSERT that returns something (:meth:`_carrying`), else in one statement of
    # their own before anything else is sent (:meth:`flush`; the backend flushes before
    # COMMIT). Each round trip costs more than the server's work for such a row (a
    # statement's time in an append is 3-6x its server time). Nothing is reordered:
    # statements run in the order the engine called them, every read sees every write
    # before it (reads go through ``_conn``), and an error in a deferred write fails the
    # statement that carried it, so the call fails and its transaction rolls back whole.
    # A carrier and the writes it carries touch different tables, so no row of one is
    # looked for by another (their foreign keys are checked at the statement's end, when
    # every row of it is there).

    def _defer(self, statement: str, args: tuple[Any, ...]) -> None:
        if self._begin is not None:
            self._start(None)
        self._pending.append((statement, args))

    def flush(self) -> None:
        """Send the deferred writes, in one statement."""
        if not self._pending:
            return
        *carried, (last, last_args) = self._pending
        statement, args = _with_clauses(carried, last, last_args)
        self._pending = []
        self._open_conn.execute(statement, args, binary=True)

    def _carrying(self, statement: str, args: tuple[Any, ...]) -> Any:
        """Run ``statement`` (an INSERT into a table no deferred write touches) with the
        deferred writes in front of it, in one round trip; its cursor."""
        if self._begin is not None:
            self._start(None)
        carried, self._pending = self._pending, []
        full, full_args = _with_clauses(carried, statement, args)
        return self._open_conn.execute(full, full_args, binary=True)

    def _start(self, query: str | None) -> Any:
        """Open the transaction, with ``query`` in the same round trip; its rows."""
        begin, self._begin = self._begin, None
        assert begin is not None
        self._open_conn, rows = begin(query)
        return rows

    # Rows come back in binary format: bytea arrives as its bytes rather than as hex text
    # twice their size to parse (a checkout's chunks: 3.2 MB read in 17 ms instead of 44 ms).

    def _execute(self, statement: str, args: Any) -> Any:
        return self._conn.execute(statement, args, binary=True)

    def _many(self, keys: Iterable[int] | Iterable[str]) -> list[Any]:
        return list(keys)  # a bigint or a text array, as the statement reads it

    # --- the connection, and what vouches for what the store remembers -----------------------

    @property
    def connection(self) -> Any:
        """The psycopg connection, in the transaction, every deferred write sent."""
        return self._conn

    def database(self) -> tuple[str | int, ...]:
        """The server, by when it started (any role reads it), and the database's oid: a
        host's name or address, or the socket, name one server (sql.DATABASE)."""
        found = self._conn.execute(sql.DATABASE).fetchone()
        return ("server", str(found[0]), int(found[1]))

    def trusted_blobs(self) -> TrustedBlobs:
        return self._trusted

    def version(self) -> int | None:
        """None: appends of other threads commit while this transaction runs (they take
        only the writers' lock shared), so no one number can vouch for what a store
        remembers. A transaction id cannot either: a transaction that got its id before
        this store's last one and committed after it leaves the server's counters as this
        store left them. The engine checks the thread it appends to (:meth:`thread_facts`)."""
        return None

    def thread_facts(
        self, thread_pk: int, run_pks: Sequence[int],
        view: tuple[bytes, int, int | None] | None, view_base: int | None,
        probe_underived: bool,
    ) -> ThreadFacts:
        """One statement; an append's first, sent with ``BEGIN`` and the locks."""
        digest, view_run, seen = view if view is not None else (b"", None, None)
        args = {
            "thread": thread_pk,
            "runs": _keys(run_pks),
            "digest": digest,
            "view": view_run,
            "base": view_base,
            "probe": probe_underived,
            "seen": seen,
        }
        # An append's first statement: it rides with BEGIN and the locks.
        if self._begin is not None:
            (row,) = self._start(
                sql.execute_thread_facts(
                    thread_pk, _keys(run_pks), digest, view_run, view_base, probe_underived,
                    seen,
                )
            )
        else:
            row = self._one(sql.THREAD_FACTS, args)
        newest, branched, pairs, digest_kept, base_kept, underived = row
        last_seqs = {int(pk): int(seq) for pk, seq in pairs}
        holds = view is not None and bool(digest_kept) and bool(base_kept)
        newest_pk = None if newest is None else int(newest)
        return newest_pk, bool(branched), last_seqs, holds, bool(underived)

    # --- checkpoints (chunked message lists: agui_store.engine.checkpoints) -----------------------

    def checkpoint_walk(self, run_pk: int) -> list[tuple[int, bool]]:
        rows = self._rows(sql.NEAREST_CHECKPOINT, {"run": run_pk})
        return [(int(pk), bool(stop)) for pk, stop in rows]

    def drop_derived_from(self, run_pk: int) -> list[int]:
        below = [int(pk) for pk in self._column(sql.SUBTREE, (run_pk,))]
        self._conn.execute(sql.DROP_CHECKPOINTS, (below,))
        self._conn.execute(sql.DROP_DIGESTS, (below,))
        self._conn.execute(sql.DROP_RUNS_SEARCH, (below,))
        return below

    def checkpoint_with_blobs(
        self, run_pk: int
    ) -> tuple[CheckpointRow | None, Iterable[tuple[int, int, bytes, bytes]] | None]:
        """The row, then its blobs, from one statement."""
        # One statement, fetched whole: the row, then the blobs (sql.CHECKPOINT_WITH_BLOBS).
        # Not streamed: a stream is planned again on every call and costs a message per
        # row, which cost more than decoding while the next row arrives saved
        # (bench_short_turns: a checkout 14 % faster on a 2,000-run thread); fetched, the
        # statement is prepared once the connection has run it a few times.
        rows = self._conn.cursor(binary=True).execute(
            sql.CHECKPOINT_WITH_BLOBS, {"run": run_pk}
        ).fetchall()
        if not rows:
            return None, None
        if rows[0][0] is None:  # not the row first (UNION ALL keeps its order in practice)
            return self.checkpoint_row(run_pk), None
        header = row_of(CheckpointRow, rows[0][:HEADER_COLUMNS])
        return header, [row[HEADER_COLUMNS:] for row in rows[1:]]

    def blobs_in_order(self, blob_ids: Sequence[int]) -> Iterable[tuple[int, int, bytes, bytes]]:
        """Streamed a row at a time; the caller reads them to the end."""
        # Streamed a row at a time (a checkout's chunks are ~3 MB): the engine checks and
        # decodes each chunk while the server reads and sends the next, instead of after
        # the last has arrived. The caller reads the rows to the end (the port says so).
        cursor = self._conn.cursor(binary=True)
        return cursor.stream(sql.BLOBS_IN_ORDER, (list(blob_ids),))  # type: ignore[no-any-return]

    def addresses_in_order(self, blob_ids: Sequence[int]) -> Iterable[tuple[int, bytes]]:
        return self._all(sql.ADDRESSES_IN_ORDER, (list(blob_ids),))

    def blob_ids(self, addresses: Sequence[bytes]) -> dict[bytes, int]:
        rows = self._all(sql.SELECT_BLOB_IDS, (list(addresses),))
        return {bytes(h): int(i) for i, h in rows}

    def insert_new_blobs(self, packed: Sequence[tuple[bytes, int, bytes]]) -> dict[bytes, int]:
        """Carries the deferred writes."""
        columns = ([p[0] for p in packed], [p[1] for p in packed], [p[2] for p in packed])
        rows = self._carrying(sql.INSERT_OR_FIND_BLOBS, (*columns, columns[0])).fetchall()
        return {bytes(h): int(i) for i, h in rows}

    def insert_checkpoint(self, row: NewCheckpoint) -> None:
        """Deferred."""
        self._defer(sql.INSERT_CHECKPOINT, tuple(row))  # a plain tuple, as every deferred write

    # --- threads ----------------------------------------------------------------------------

    def thread_ids(self, scope: str | None) -> list[str]:
        return [str(t) for t in self._column(sql.THREAD_IDS, {"scope": scope})]

    def thread(self, thread_id: str) -> tuple[int, str | None] | None:
        if _NUL in thread_id:  # no text column holds one: a lookup finds nothing
            return None
        return super().thread(thread_id)

    def thread_ids_by_activity(self, scope: str | None) -> list[str]:
        return [str(t) for t in self._column(sql.THREAD_IDS_BY_ACTIVITY, {"scope": scope})]

    def thread_pks(self, scope: str | None, limit: int) -> list[int]:
        return [int(pk) for pk in self._column(sql.THREAD_PKS, {"scope": scope, "limit": limit})]

    # --- runs -------------------------------------------------------------------------------

    def threads_of_run_id(self, run_id: str, scope: str | None) -> list[str]:
        if _NUL in run_id:
            return []
        return [str(t) for t in self._column(
            sql.THREADS_OF_RUN_ID, {"run_id": run_id, "scope": scope}
        )]

    def runs_named(
        self, run_id: str, thread_pk: int | None, scope: str | None
    ) -> list[tuple[int, int, str, str | None]]:
        if _NUL in run_id:
            return []
        rows = self._conn.execute(
            sql.RUNS_NAMED_WHERE, {"run_id": run_id, "thread": thread_pk, "scope": scope}
        )
        return [(int(pk), int(thread), str(tid), other) for pk, thread, tid, other in rows]

    def runs_prefixed(
        self, prefix: str, below: str | None, thread_pk: int | None, scope: str | None
    ) -> list[tuple[int, int, str]]:
        if _NUL in prefix:
            return []
        rows = self._conn.execute(
            sql.RUNS_PREFIXED,
            {"prefix": prefix, "below": below, "thread": thread_pk, "scope": scope},
        )
        return [(int(pk), int(thread), str(rid)) for pk, thread, rid in rows]

    def run_checkout(
        self, thread_id: str, run_id: str, scope: str | None
    ) -> RunCheckout | None:
        """One statement (``sql.RUN_CHECKOUT``), fetched whole, as
        :meth:`checkpoint_with_blobs` is. As a read transaction's first statement it is sent
        alone, outside the transaction, which then never opens unless more follows: no
        ``BEGIN`` or ``COMMIT`` round trip, and one statement sees one snapshot. See
        :meth:`agui_store.engine.port.Reading.run_checkout`."""
        args = {"thread_id": thread_id, "run_id": run_id, "scope": scope}
        alone, self._alone = self._alone, None
        if _NUL in thread_id or _NUL in run_id:
            return None
        if alone is not None and self._begin is not None:
            rows = alone(sql.RUN_CHECKOUT, args)
        else:
            rows = self._conn.cursor(binary=True).execute(sql.RUN_CHECKOUT, args).fetchall()
        if not rows or rows[0][0] is None:  # none, or not the run's row first: read apart
            return None
        head = rows[0]
        blob_rows = [row[CHECKOUT_COLUMNS:] for row in rows[1:]]
        return RunCheckout(
            int(head[0]),
            row_of(RunSummary, head[:SUMMARY_COLUMNS]),
            [str(name) for name in head[SUMMARY_COLUMNS]],
            bool(head[SUMMARY_COLUMNS + 1]),
            row_of(CheckpointRow, head[SUMMARY_COLUMNS + 2 : CHECKOUT_COLUMNS]),
            blob_rows,
        )

    def run_summary_and_branches(self, run_pk: int) -> tuple[RunSummary, list[str], bool]:
        *summary, names, newest = self._one(sql.RUN_SUMMARY_AND_BRANCHES, (run_pk,))
        return row_of(RunSummary, summary), [str(name) for name in names], bool(newest)

    def insert_run(self, run: NewRun) -> int:
        """Deferred when :meth:`run_pk_and_next_seq` reserved the run's key, else carries the
        deferred writes."""
        args = (*run[:7], int(run.synthetic), *run[8:])  # stored as 0 or 1
        reserved, self._reserved_run = self._reserved_run, None
        if reserved is not None:  # its key is known: the row rides with the next statement
            self._defer(sql.INSERT_RUN_KEYED, (reserved, *args))
            return reserved
        return int(self._carrying(sql.INSERT_RUN, args).fetchone()[0])

    # --- lineage ----------------------------------------------------------------------------

    def merge_base(self, a: int, b: int) -> tuple[int, int, int] | None:
        row = self._one(sql.MERGE_BASE, {"a": a, "b": b})
        return (int(row[0]), int(row[1]), int(row[2])) if row else None

    def lineage_runs(self, run_pk: int, depth: int | None, limit: int | None) -> list[RunSummary]:
        args = {"run": run_pk, "depth": depth, "limit": limit}
        return rows_of(RunSummary, self._execute(sql.LINEAGE_RUNS, args))

    # --- events -----------------------------------------------------------------------------

    def run_pk_and_next_seq(self, thread_pk: int, run_id: str) -> tuple[int | None, int]:
        """The thread's run named ``run_id`` (None: none), then the event-order lock and the
        next ``seq`` (as :meth:`next_seq`), in one round trip; a key for the run's row is
        taken from the runs' sequence in it too, for the :meth:`insert_run` that follows
        when the run is new (a key unused leaves a gap, as a rolled-back insert does)."""
        cursor = self._conn.execute(sql.run_pk_and_next_seq(self._conn, thread_pk, run_id))
        found = cursor.fetchone()
        cursor.nextset()
        cursor.nextset()
        next_seq, reserved = cursor.fetchone()
        self._reserved_run = None if found is not None else int(reserved)
        return (None if found is None else int(found[0])), int(next_seq)

    def next_seq(self) -> int:
        """Takes the event-order lock, held to commit (sql.NEXT_SEQ_LOCKED): one round trip,
        two statements, so the number is read after the lock was granted."""
        cursor = self._conn.execute(sql.NEXT_SEQ_LOCKED)
        cursor.nextset()
        return int(cursor.fetchone()[0])

    def run_events(self, run_pk: int, after: int) -> list[tuple[str, str | None, int, str]]:
        return self._all(sql.RUN_EVENTS, {"run": run_pk, "after": after})

    def insert_events(self, rows: Sequence[tuple[int, int, str, str]]) -> None:
        """One page of events per run of consecutive rows (deferred when there is one)."""
        self._insert_pages(pages(rows))  # one batch's events

    def _insert_pages(self, paged: Sequence[Page]) -> None:
        if len(paged) == 1:
            self._defer(sql.INSERT_PAGE, paged[0])
        elif paged:
            self._conn.cursor().executemany(sql.INSERT_PAGE, paged)

    def insert_echo_refs(self, seq: int, refs: str) -> None:
        """Deferred."""
        self._defer(sql.INSERT_ECHO_REFS, (seq, refs))

    # --- batches and hashes -----------------------------------------------------------------

    def run_hash(self, run_pk: int) -> bytes:
        return bytes(self._value(sql.RUN_HASH, {"run": run_pk}))

    def insert_batch(
        self,
        run_pk: int,
        first_seq: int,
        last_seq: int,
        outcome: str | None,
        appended_at: int,
        batch_hash: bytes,
    ) -> None:
        """Deferred."""
        count = last_seq - first_seq + 1
        self._defer(
            sql.INSERT_BATCH, (run_pk, first_seq, last_seq, count, outcome, appended_at, batch_hash)
        )

    def replicate_log(
        self,
        events: Sequence[tuple[int, int, str, str]],
        echo_refs: Sequence[tuple[int, str]],
        batches: Sequence[BatchRow],
    ) -> None:
        """Pages that never span two batches."""
        self._insert_pages(pages(events, frozenset(batch[1] for batch in batches)))
        if echo_refs:
            self._conn.cursor().executemany(sql.INSERT_ECHO_REFS, echo_refs)
        if batches:
            self._conn.cursor().executemany(
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
        if _NUL in name:
            return []
        rows = self._conn.execute(
            sql.BRANCHES_NAMED, {"name": name, "thread": thread_pk, "scope": scope}
        )
        return [(int(run), int(thread)) for run, thread in rows]

    def delete_branch(self, thread_pk: int, name: str) -> bool:
        return bool(self._conn.execute(sql.DELETE_BRANCH, (thread_pk, name)).rowcount)

    # --- derived data -----------------------------------------------------------------------

    def runs_with_digests(
        self, thread_pk: int, digests: Sequence[bytes]
    ) -> list[tuple[int, bytes]]:
        rows = self._conn.execute(sql.RUNS_WITH_DIGESTS, ([bytes(d) for d in digests], thread_pk))
        return [(int(run), bytes(digest)) for run, digest in rows]

    def underived_runs(self, thread_pk: int | None) -> list[tuple[int, int]]:
        rows = self._conn.execute(sql.UNDERIVED_RUNS, {"thread": thread_pk})
        return [(int(run), int(thread)) for run, thread in rows]

    def insert_digest(self, digest: bytes, run_pk: int) -> None:
        """Deferred."""
        self._defer(sql.INSERT_DIGEST, (digest, run_pk))

    # --- check(): whole-store reads of agui_store.engine.integrity --------------------------------

    #: What a check of a database too broken to read meets. Not ``OperationalError``: the
    #: server's conditions (the connection lost, a shutdown, a cancelled statement, a lock
    #: wait past the timeout, a full disk) say nothing of the store, and end the check as
    #: the error they are (``backend.translate``), not as problems found in it.
    storage_errors: tuple[type[Exception], ...] = (
        psycopg.InterfaceError,
        psycopg.DataError,
        psycopg.IntegrityError,
        psycopg.InternalError,
        psycopg.ProgrammingError,
        psycopg.NotSupportedError,
    )

    def _stream(self, statement: str, args: Any = ()) -> Iterator[Any]:
        """The rows of a long read through a server-side cursor, a page at a time: neither
        side holds them all. Several can be open at once in one transaction."""
        cursor = self._conn.cursor(name=f"agui_store_check_{next(_CURSORS)}")
        cursor.itersize = STREAM_PAGE_ROWS
        self._streams.append(cursor)
        try:
            cursor.execute(statement, args)
            yield from cursor
        finally:
            if cursor in self._streams:  # not closed already by contained()
                self._streams.remove(cursor)
            cursor.close()

    def search_words_apart(self) -> tuple[list[int], list[int]]:
        """Nothing: a row holds its own words."""
        return [], []

    def search_words_held(self) -> Iterable[tuple[int, str]]:
        for pk, word in self._stream(sql.SEARCH_WORDS_HELD):
            yield int(pk), str(word)

    def storage_checks(self) -> tuple[str, ...]:
        return checks.CHECKS

    def storage_problems(self, check: str) -> Iterable[str]:
        return checks.problems(self._conn, check, self._stream)

    @contextlib.contextmanager
    def contained(self) -> Iterator[None]:
        """A savepoint: an error inside aborts only what came after it."""
        self._conn.execute(sql.SAVEPOINT_CHECK)
        streams = len(self._streams)
        try:
            yield
        except BaseException as e:
            if not isinstance(e, Exception):
                # An interrupt (Ctrl-C) ends the whole transaction, and may have cut a
                # statement short, leaving the connection busy with it: nothing more is sent.
                raise
            # Close the cursors the failed part left open first: the rollback drops them on
            # the server, and closing one later would then fail and abort the transaction.
            for cursor in self._streams[streams:]:
                cursor.close()  # a no-op on the wire if the transaction is in error
            del self._streams[streams:]
            self._conn.execute(sql.ROLLBACK_TO_CHECK)
            raise
        self._conn.execute(sql.RELEASE_CHECK)

    def every_run(self) -> Iterable[StoredRun]:
        """Streamed through a server-side cursor."""
        return stream_of(StoredRun, self._stream(sql.EVERY_RUN))

    def every_branch(self) -> Iterable[tuple[int, str, int, str | None]]:
        return self._all(sql.EVERY_BRANCH)

    def log_in_order(self) -> Iterable[tuple[int, int, str, str | None]]:
        """Streamed through a server-side cursor."""
        return _whole(self._stream(sql.LOG_IN_ORDER), (2,))

    def batches_in_order(self) -> Iterable[LogBatch]:
        """Streamed through a server-side cursor."""
        return stream_of(LogBatch, self._stream(sql.BATCHES_IN_ORDER))

    def suspect_events(self) -> Iterable[tuple[int, int, str, str]]:
        """Streamed through a server-side cursor."""
        return _whole(self._stream(sql.SUSPECT_EVENTS), (2, 3))

    def suspect_inputs(self) -> Iterable[tuple[int, str]]:
        """Streamed through a server-side cursor."""
        return self._stream(sql.SUSPECT_INPUTS)

    def every_blob(self) -> Iterable[tuple[bytes, int, bytes]]:
        """Streamed through a server-side cursor."""
        return self._stream(sql.EVERY_BLOB)

    def hashed_runs(self) -> Iterable[HashedRun]:
        """Streamed through a server-side cursor."""
        return stream_of(HashedRun, self._stream(sql.HASHED_RUNS))

    def batch_events(
        self, first_seq: int, last_seq: int, run_pk: int
    ) -> list[tuple[int, str, str, str | None]]:
        rows = self._all(sql.BATCH_EVENTS, {"first": first_seq, "last": last_seq, "run": run_pk})
        return list(_whole(rows, (1, 2)))

    # --- erasure (agui_store.engine.erasure) ------------------------------------------------

    def idle_threads(self, before: int, scope: str | None) -> list[int]:
        args = {"before": before, "scope": scope}
        return [int(pk) for pk in self._column(sql.IDLE_THREADS, args)]

    def erased_log(self, run_pks: Sequence[int]) -> tuple[int, int, list[tuple[int, int]]]:
        runs = _keys(run_pks)
        events, payload_bytes = self._one(sql.ERASED_EVENT_BYTES, (runs,))
        input_bytes = self._value(sql.ERASED_INPUT_BYTES, (runs,))
        ranges = [(int(a), int(b)) for a, b in self._all(sql.ERASED_BATCHES, (runs,))]
        return int(events), int(payload_bytes) + int(input_bytes), ranges

    def erased_checkpoints(self, run_pks: Sequence[int]) -> list[ErasedCheckpoint]:
        return rows_of(ErasedCheckpoint, self._all(sql.ERASED_CHECKPOINTS, (_keys(run_pks),)))

    def blobs_used_elsewhere(self, blob_ids: Sequence[int], run_pks: Sequence[int]) -> set[int]:
        args = {"blobs": _keys(blob_ids), "runs": _keys(run_pks)}
        return {int(b) for b in self._column(sql.BLOBS_USED_ELSEWHERE, args)}

    def manifests_elsewhere(self, run_pks: Sequence[int]) -> list[int]:
        return [int(b) for b in self._column(sql.MANIFESTS_ELSEWHERE, (_keys(run_pks),))]

    def blob_bytes(self, blob_ids: Sequence[int]) -> int:
        return int(self._value(sql.BLOB_BYTES, (_keys(blob_ids),)))

    def erasures(self) -> list[ErasureLogRow]:
        return rows_of(ErasureLogRow, self._all(sql.ERASURES))

    def tombstoned(self, hashes: Sequence[bytes]) -> dict[bytes, int]:
        return {bytes(h): int(at) for h, at in self._all(sql.TOMBSTONED, (list(hashes),))}

    def tombstones(self) -> list[tuple[bytes, int]]:
        return [(bytes(h), int(at)) for h, at in self._all(sql.TOMBSTONES)]

    def erasing(self) -> None:
        """Index scans over table scans for the rest of the transaction (``SET LOCAL``): an
        erasure's statements each take a few rows by key, and a store whose statistics are
        stale (autovacuum has not analysed it yet) would read whole tables for them, which
        costs the store's size."""
        self._execute(sql.PREFER_INDEXES, None)

    def erase_derived(self, run_pks: Sequence[int], blob_ids: Sequence[int]) -> None:
        runs = _keys(run_pks)
        self._execute(sql.DROP_DIGESTS, (runs,))
        self._execute(sql.DROP_CHECKPOINTS, (runs,))
        self._execute(sql.ERASE_UNDERIVED, (runs,))
        self._execute(sql.ERASE_BLOBS, (_keys(blob_ids),))

    def erase_log(self, thread_pks: Sequence[int], run_pks: Sequence[int]) -> None:
        """The branches, then the log's rows through the schema's ``erase_log`` (run as the
        tables' owner: the application's role never deletes a log row itself)."""
        threads = _keys(thread_pks)
        self._execute(sql.ERASE_BRANCHES, (threads,))
        self._execute(sql.ERASE_LOG, (threads, _keys(run_pks)))

    def insert_erasure(self, entry: ErasureEntry) -> None:
        self._execute(sql.INSERT_ERASURE, entry)
        self._execute(sql.ERASED, ())  # every listening connection forgets what it kept

    def insert_tombstones(self, rows: Sequence[tuple[bytes, int]]) -> None:
        for row in rows:
            self._execute(sql.INSERT_TOMBSTONE, row)

    def delete_tombstones(self, hashes: Sequence[bytes]) -> None:
        for thread_hash in hashes:
            self._execute(sql.DELETE_TOMBSTONE, (thread_hash,))
    # --- full-text search (agui_store.engine.search) ------------------------------------------

    def index_messages(
        self, thread_pk: int, run_pk: int, rows: Sequence[IndexRow]
    ) -> None:
        """Deferred, one statement for the run's rows."""
        keys, positions, tools, words, blobs, ats = zip(*rows)
        texts = [" ".join(dict.fromkeys(w.split())) for w in words]  # each word once
        self._defer(
            sql.INSERT_SEARCH_MESSAGES,
            (thread_pk, run_pk, list(keys), list(positions), list(tools), list(blobs),
             list(ats), texts),
        )

    def forget_thread_search(self, thread_pk: int) -> None:
        self._conn.execute(sql.DELETE_THREAD_SEARCH, (thread_pk,))

    def forget_search_as_held(self, thread_pks: Sequence[int]) -> None:
        """The words are the rows': deleting the rows deletes them."""
        self._conn.execute(sql.DELETE_THREADS_SEARCH, (list(thread_pks),))

    def search_candidates(
        self, query: Query, thread_pk: int | None, scope: str | None, before: int | None,
        limit: int,
    ) -> list[SearchCandidate]:
        args = {
            "query": tsquery_text(query),
            "before": _NO_KEY if before is None else before,
            "thread": thread_pk,
            "scope": scope,
            "limit": limit,
        }
        # Planned for these values each time (never a generic plan): how the rows are best
        # read depends on how many hold the words, or, in an owner's scope, how many the
        # owner holds.
        conn = self._conn
        few = SEARCH_OWNER_FEW_ROWS[0]
        if scope is not None and thread_pk is None and few > 0:
            counted = {"scope": scope, "few": few}
            (owned,) = conn.execute(sql.SEARCH_OWNER_ROWS, counted, prepare=False).fetchone()
            if owned < few:
                return rows_of(
                    SearchCandidate, conn.execute(sql.SEARCH_OWNER_CANDIDATES, args, prepare=False)
                )
        (many,) = conn.execute(sql.SEARCH_PROBE, args, prepare=False).fetchone()
        statement = sql.SEARCH_CANDIDATES if many >= sql.SEARCH_MANY else sql.SEARCH_FEW_CANDIDATES
        return rows_of(SearchCandidate, conn.execute(statement, args, prepare=False))


#: An owner whose threads hold fewer index rows than this is searched from those rows, their
#: words checked one by one; one with more, from the word's rows (the GIN index or the key
#: backwards), as every owner's are: reading a few hundred rows costs what reading a
#: common word's rows up to the limit costs. A list, so that a test can change it
#: (:func:`agui_store.testing.search_owner_rows`).
SEARCH_OWNER_FEW_ROWS = [sql.SEARCH_MANY]

#: A key above every index row's (they are 63-bit).
_NO_KEY = 2**63 - 1


def tsquery_text(query: Query) -> str:
    """A query (:class:`agui_store.history.search.Query`) as ``tsquery`` input over its
    words, each a quoted lexeme taken as it is: every word of a found term (its last as a
    prefix when starred), none of an excluded single word. Words are letters and digits:
    quoting needs no escape."""
    found = " & ".join(
        _lexeme(word, term.prefix and i == len(term.words) - 1)
        for term in query.found
        for i, word in enumerate(term.words)
    )
    excluded = "".join(
        f" & !{_lexeme(term.words[0], term.prefix)}"
        for term in query.excluded
        if len(term.words) == 1
    )
    return f"({found}){excluded}"


def _lexeme(word: str, prefix: bool) -> str:
    return f"'{word}':*" if prefix else f"'{word}'"
