"""The store: a lossless AG-UI event log with git-like run lineage, over a storage port.

``Store`` is the facade of verbs, and the engine behind them, written once for every backend
(:mod:`agui_store.port`; SQLite in :mod:`agui_store.sqlite`, PostgreSQL in
:mod:`agui_store.postgres`). Parsing and validation come from :mod:`agui_store.codec` and
:mod:`agui_store.model`, sequence rules from :mod:`agui_store.verify`, restoring from
:mod:`agui_store.restore` (the official reducer, in Python), resent request bodies from
:mod:`agui_store.resent`, views and checkpoints from :mod:`agui_store.derivation` and
:mod:`agui_store.checkpoints`, the read paths from :mod:`agui_store.reads`, revisions from
:mod:`agui_store.revisions`. This module decides where events go (runs, lineage, branches)
and when what derives from them is written, and keeps what appends remember between calls.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agui_store import (
    arguments,
    checkpoints,
    codec,
    collector,
    database,
    derivation,
    hashing,
    intake,
    integrity,
    memory,
    nesting,
    port,
    reads,
    revisions,
)
from agui_store.arguments import quote as _quote
from agui_store.derivation import RunRow
from agui_store.diff import Diff, ViewChange, compare
from agui_store.errors import (
    AmbiguousRunError,
    BranchError,
    InvalidArgumentError,
    InvalidEventError,
    OpenRunsError,
    RunNotFoundError,
    ScopeError,
    SequenceError,
)
from agui_store.integrity import CheckReport
from agui_store.normalize import (
    SentChunks,
    expand_input,
    normalize_input,
)
from agui_store.patch import UNDEFINED
from agui_store.records import AppendResult, Branch, Checkout, ImportResult, Log, Run, when
from agui_store.restore import (
    RunRecord,
    View,
    apply_run,
    body_as_sent,
    start_reducer,
)
from agui_store.revisions import DEFAULT_BRANCH, RESERVED_REFS, RunKey
from agui_store.sqlite import SqliteBackend
from agui_store.verify import SequenceVerifier

_TERMINAL_STATUS = {"RUN_ERROR": "error"}
_OUTCOME_STATUS = {"success": "finished", "interrupt": "interrupted", "cancelled": "cancelled"}


def _status_of_terminal(event: dict[str, Any]) -> str:
    if event["type"] == "RUN_ERROR":
        return "error"
    outcome = event.get("outcome")
    kind = outcome.get("type") if isinstance(outcome, dict) else None
    return _OUTCOME_STATUS.get(kind or "success", "finished")


@dataclass
class _Segment:
    """Consecutive events of one batch that belong to one run."""

    first_index: int
    events: list[codec.IncomingEvent] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    run_pk: int | None = None  # an existing run continued, or the new run once inserted
    started: dict[str, Any] | None = None  # the RUN_STARTED that opens a new run
    outcome: str | None = None  # the status its last terminal event gives the run
    was_complete: bool = False  # it continues a run that had already ended
    run_row: RunRow | None = None  # a new run's row


class _TooDeep(Exception):
    """A copy or move that nests too deeply, at event ``at`` of a segment, operation ``op``
    of its patch field ``field``."""

    def __init__(self, at: int, field: str, op: int, levels: int) -> None:
        super().__init__(at, field, op, levels)
        self.at, self.field, self.op, self.levels = at, field, op, levels


#: The largest ``max_depth`` a store takes: ``json.dumps``, msgspec and the CLI recurse once
#: per level, and near 1,000 levels (Python's recursion limit) even ``append`` failed with
#: a RecursionError; 512 leaves the caller's own stack room.
MAX_DEPTH_LIMIT = 512

#: The default ``checkpoint_events``: ``append`` writes a run's checkpoint when the runs since
#: the last one on its lineage hold at least this many events, so 1 checkpoints every
#: complete run. The thread's newest run, what a reconnecting client restores, is then
#: always checkpointed; a larger value makes appends cheaper (a checkpoint every few runs)
#: and a checkout of a run between two checkpoints replay from the earlier one (which first
#: indexes its whole view). ``bench_append`` and ``bench_checkout`` measure both sides.
CHECKPOINT_EVENTS = 1


class Store:
    """An AG-UI conversation store on one SQLite file. Open it with :func:`agui_store.open`.

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
        busy_timeout_ms: int = database.DEFAULT_BUSY_TIMEOUT_MS,
        max_event_bytes: int = codec.DEFAULT_MAX_EVENT_BYTES,
        max_depth: int = codec.DEFAULT_MAX_DEPTH,
        checkpoint_events: int = CHECKPOINT_EVENTS,
        derive_on_append: bool = True,
    ) -> None:
        self.path = arguments.path_text(path) if path is not None else database.default_path()
        self.busy_timeout_ms = arguments.positive_int(
            "busy_timeout_ms", busy_timeout_ms, minimum=0
        )
        self.max_event_bytes = arguments.positive_int("max_event_bytes", max_event_bytes)
        self.max_depth = arguments.positive_int("max_depth", max_depth, minimum=2)
        if max_depth > MAX_DEPTH_LIMIT:
            raise InvalidArgumentError(
                f"max_depth must be at most {MAX_DEPTH_LIMIT}, not {max_depth}: deeper values "
                "could not be read back (JSON encoders recurse once per level)"
            )
        if type(checkpoint_events) is not int or checkpoint_events < 1:
            raise InvalidArgumentError(
                f"checkpoint_events must be a positive integer, not {checkpoint_events!r}"
            )
        self.checkpoint_events = checkpoint_events  # see CHECKPOINT_EVENTS
        self.derive_on_append = bool(derive_on_append)
        self._lock = threading.RLock()
        self._backend: port.Backend = _backend_for(self.path, busy_timeout_ms)
        self.path = self._backend.where  # a URL is shown without its password
        self._pid = os.getpid()
        _OPEN_STORES.add(self)
        # What it remembers between calls (see agui_store.memory).
        self._memory = memory.Memory(self.derive_on_append)
        self._intake = intake.Intake(self._memory, self.max_event_bytes, self.max_depth)
        self._deriver = derivation.Deriver(self._memory, self.checkpoint_events)

    # --- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file. Further calls raise."""
        with self._lock:
            self._backend.close()
            self._memory.resent.clear()  # the memory of what it read

    def __repr__(self) -> str:
        return f"<agui_store.Store {self.path!r}>"

    def _after_fork_in_child(self) -> None:
        """In a forked child: drop the parent's lock and its connection (the backend opens
        its own on first use) and what the parent remembered of the database."""
        self._lock = threading.RLock()
        self._memory.resent.after_fork()
        self._backend.after_fork()
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._memory.forget()

    @contextmanager
    def _reading(self) -> Iterator[port.Reading]:
        with self._lock, self._backend.reading() as tx:
            yield tx

    @contextmanager
    def _writing(self, thread_id: str | None = None) -> Iterator[port.Writing]:
        """A write transaction (of appends to ``thread_id`` alone, when given: see the
        port's ``writing``); what the store remembers of the database is dropped when it
        fails (the database is then as it was)."""
        with self._lock:
            try:
                with self._backend.writing(thread_id) as tx:
                    yield tx
            except BaseException:
                self._memory.forget()
                raise

    @contextmanager
    def _replicating(self) -> Iterator[port.Writing]:
        """The write transaction of :func:`agui_store.sync.copy`, which inserts runs as
        another store recorded them, beside the rules ``append`` applies: what this store
        remembers of the database is dropped after it, whether it commits or not."""
        try:
            with self._writing() as tx:
                yield tx
        finally:
            self._memory.forget()

    # --- append -------------------------------------------------------------------------

    @collector.pausing  # its collections would only walk what the call is about to drop
    def append(
        self,
        events: Any,
        *,
        thread_id: str | None = None,
        input: Any = None,
        parent: str | None = None,
        branch: str | None = None,
        check_sequence: bool = True,
        run_id: str | None = None,
        scope: str | None = None,
    ) -> AppendResult:
        """Record events, atomically: the whole batch lands or nothing does.

        Args:
            events: dicts, JSON text/bytes (one event, an array or JSON Lines), SSE text,
                bytes or a file, official ``ag_ui.core`` events, or this library's structs.
            thread_id: the thread; needed only when the batch starts no run and more than
                one thread has an open run.
            input: the ``RunAgentInput`` the client sent for the run the batch opens.
            parent: explicit lineage parent (run id or ref) for the run the batch opens.
            branch: put the run the batch opens on this branch (created or advanced).
            check_sequence: ``False`` keeps well-formed but out-of-sequence streams (for
                recording buggy producers); events are still validated one by one.
            run_id: the run a batch that starts no run continues (SPEC §8: several runs of
                a thread may stream at once). Without it such a batch continues the thread's
                newest run, unless several runs of the thread are open. A batch that starts
                with a RUN_STARTED may name the run it starts. Without ``thread_id`` the run
                id finds its thread while it is unambiguous.
            scope: the owner writing (SPEC §8). A thread belongs to the scope that first
                wrote it; a scoped batch for a thread of another owner, or of none, is
                refused. ``None`` (the operator) writes anywhere; the threads it creates
                have no owner.

        Raises:
            InvalidEventError: naming the batch index, event type and JSON path, with the
                file left exactly as it was.
            RunNotFoundError: ``run_id`` names no run (of the thread).
            OpenRunsError: the batch starts no run, names none, and its thread has several
                open runs.
            ScopeError: the thread belongs to another owner than ``scope``.
        """
        incoming = codec.parse_events(
            events, max_event_bytes=self.max_event_bytes, max_depth=self.max_depth
        )
        types = self._intake.validated(incoming)
        for name, value in (("thread_id", thread_id), ("parent", parent), ("branch", branch)):
            intake.storable(value, path=name)
        if thread_id == "":
            raise InvalidEventError("is empty: name a thread or pass None", path="thread_id")
        if run_id is not None:
            if not isinstance(run_id, str) or not run_id:
                raise InvalidEventError(
                    f"must be a run id (a non-empty string), not {run_id!r}", path="run_id"
                )
            intake.storable(run_id, path="run_id")
        intake.check_scope(scope)
        if branch is not None:
            intake.check_branch_name(branch)
        run_input = self._intake.parse_input(input) if input is not None else None
        if run_input is not None:
            intake.check_input_run_id(incoming, types, run_input[0])
        batch_thread = intake.thread_of_batch(incoming, types, thread_id, run_input)
        with self._writing(batch_thread) as tx:
            self._memory.notice_other_writes(tx, batch_thread)
            result = self._append_locked(
                tx,
                incoming,
                types,
                batch_thread,
                run_input,
                parent,
                branch,
                check_sequence,
                run_id,
                scope,
            )
            self._memory.remember_version(tx)
        return result

    def import_file(
        self,
        source: str | os.PathLike[str] | Any,
        *,
        thread_id: str | None = None,
        check_sequence: bool = True,
    ) -> ImportResult:
        """Record a JSON array, JSON Lines or SSE recording, whole or not at all, in memory
        that does not grow with the file.

        The file is read a chunk at a time (:func:`agui_store.codec.iter_events`) and
        appended in batches of whole runs, all inside one write transaction: a bad event
        near the end, a full disk or a killed process leave the store as it was. Each
        event is stored as its JSON text in the file. The result is what ``append`` of the
        file's events, one batch per stretch of one thread's runs, would give.

        Args:
            source: a path, or a binary (or text) file object.
            thread_id: the thread for events that start no run (as ``append``'s).
            check_sequence: as ``append``'s.

        Raises:
            InvalidEventError: naming the event's index in the file, its type and JSON
                path; nothing of the file is stored.
        """
        intake.storable(thread_id, path="thread_id")
        if isinstance(source, str):
            source = Path(source)
        events = codec.iter_events(
            source, max_event_bytes=self.max_event_bytes, max_depth=self.max_depth
        )
        batches = intake.import_batches(events, thread_id, IMPORT_BATCH_EVENTS, IMPORT_BATCH_BYTES)
        count = runs = 0
        first_seq: int | None = None
        last_seq: int | None = None
        with self._writing() as tx:
            self._memory.notice_other_writes(tx)
            for offset, batch, batch_thread, batch_run in batches:
                try:
                    with collector.paused():  # a batch at a time, as an append
                        types = self._intake.validated(batch)
                        thread = intake.thread_of_batch(batch, types, batch_thread, None)
                        result = self._append_locked(
                            tx, batch, types, thread, None, None, None, check_sequence, batch_run
                        )
                except InvalidEventError as e:
                    raise intake.counted_from(e, offset) from None
                count += result.event_count
                runs += len(result.new_run_ids)
                first_seq = first_seq if first_seq is not None else result.first_seq
                last_seq = result.last_seq
                self._memory.keep_caches_small(result.thread_id)
            self._memory.remember_version(tx)
        return ImportResult(count, runs, first_seq, last_seq)

    def _append_locked(
        self,
        tx: port.Writing,
        incoming: list[codec.IncomingEvent],
        types: list[str],
        thread_id: str | None,
        run_input: intake.Input | None,
        parent_ref: str | None,
        branch: str | None,
        check_sequence: bool,
        named_run: str | None = None,
        scope: str | None = None,
    ) -> AppendResult:
        now = database.now_ms()
        if not incoming:
            if run_input is not None:
                raise InvalidEventError(
                    "an input was given but no events: it belongs to the run a batch starts",
                    path="input",
                )
            return AppendResult(thread_id or "", (), (), 0, None, None)
        starts_run = types[0] == "RUN_STARTED"
        if named_run is not None and starts_run and incoming[0].data["runId"] != named_run:
            raise InvalidEventError(
                f"the batch starts run {_quote(incoming[0].data['runId'])} but names "
                f"run_id={_quote(named_run)}",
                index=0,
                event_type="RUN_STARTED",
                path="$.runId",
            )
        if thread_id is None:
            if named_run is not None:
                thread_id = self._thread_of_run(tx, named_run, scope)
            else:
                thread_id = self._only_open_thread(tx, types[0], scope)
        known = self._memory.known
        thread_pk = known.thread_pks.get(thread_id)
        if thread_pk is None:
            thread_pk, owner = tx.thread(thread_id) or (
                tx.insert_thread(thread_id, now, scope),
                scope,
            )
            known.thread_pks[thread_id] = thread_pk
            known.owners[thread_pk] = owner
        if scope is not None and known.owners[thread_pk] != scope:
            raise ScopeError(
                f"thread {_quote(thread_id)} belongs to another owner: scope {_quote(scope)} "
                "may not write to it (nothing was written)"
            )
        newest = self._memory.head(tx, thread_pk)
        # The run a batch that starts none continues: the one it names, else the newest.
        continued = (
            None
            if starts_run
            else self._continued_run(tx, thread_pk, thread_id, named_run, newest, types[0])
        )

        # Sequence rules (SPEC §1): a batch that does not start a run continues a recorded
        # run, so it is checked from that run's recorded state.
        verifier: SequenceVerifier | None = None
        if check_sequence:
            if continued is None:
                verifier = SequenceVerifier()
            else:
                verifier = self._verifier_for(tx, continued).copy()
            verifier.feed_many([ev.data for ev in incoming])

        segments = self._segments(incoming, types)
        if run_input is not None and segments[0].started is None:
            raise InvalidEventError(
                "an input was given, but the batch starts no run (the input belongs to the "
                "run its RUN_STARTED opens)",
                path="input",
            )
        explicit_parent = (
            self._resolve(tx, parent_ref, thread_pk=thread_pk) if parent_ref else None
        )
        first_seq: int | None = None
        run_ids: list[str] = []
        new_run_ids: list[str] = []
        for n, segment in enumerate(segments):
            # From the batch's first seq to commit, appends of other threads wait (on
            # PostgreSQL this takes the event-order lock): what comes before only reads, but
            # for a new thread's row, so no append waits inside on a row another one holds
            # while it waits for this lock (two checkpoints storing one blob, say). A run's
            # duplicate check is read with that seq (one round trip on PostgreSQL).
            if segment.started is not None:
                run_id = segment.started["runId"]
                if known.next_seq is None:
                    recorded, known.next_seq = tx.run_pk_and_next_seq(thread_pk, run_id)
                else:
                    recorded = tx.run_pk(thread_pk, run_id)
                self._refuse_duplicate_run(tx, thread_pk, run_id, segment, recorded)
            seq = self._memory.next_seq(tx)
            first_seq = seq if first_seq is None else first_seq
            if segment.started is not None:
                rid = segment.started["runId"]
                first_run = n == 0 or (n == 1 and segments[0].started is None)
                segment.run_pk, segment.run_row = self._insert_run(
                    tx,
                    thread_pk,
                    segment.started,
                    segment.first_index,
                    run_input if first_run else None,
                    explicit_parent if first_run else None,
                    branch if first_run else None,
                    now,
                )
                known.newest[thread_pk] = segment.run_pk
                known.run_ids[segment.run_pk] = rid
                known.run_pks[(thread_pk, rid)] = segment.run_pk
                known.statuses[segment.run_pk] = "incomplete"
                new_run_ids.append(rid)
                run_ids.append(rid)
            else:
                if continued is None:
                    # Only RUN_ERROR (a run that failed before it started) or, without
                    # sequence checks, any event may open the thread's log.
                    segment.run_pk = self._insert_synthetic_run(
                        tx, thread_pk, thread_id, seq, now
                    )
                    known.newest[thread_pk] = segment.run_pk
                    known.statuses[segment.run_pk] = "incomplete"
                    new_run_ids.append(self._memory.known_run_id(tx, segment.run_pk))
                else:
                    segment.run_pk = continued
                    segment.was_complete = self._memory.known_status(tx, continued) != "incomplete"
                    if continued != newest and not segment.was_complete:
                        # An open run with runs after it: those placed below it (lineage
                        # rule 4 takes the head, open or not) derived their views from
                        # what it held then; they are derived again when next needed.
                        self._drop_below(tx, thread_pk, continued)
                run_ids.append(self._memory.known_run_id(tx, segment.run_pk))
            run_pk = segment.run_pk
            self._refuse_deep_copies(tx, segment, run_input)
            rows = [
                (at, run_pk, kind, ev.raw.decode("utf-8"))
                for at, ev, kind in zip(itertools.count(seq), segment.events, segment.types)
            ]
            seq += len(rows)
            echo = (
                self._normalize_echo(tx, thread_pk, segment.run_pk, rows)
                if segment.started is not None and isinstance(segment.started.get("input"), dict)
                else None
            )
            tx.insert_events(rows)
            known.next_seq = seq
            if echo is not None:
                tx.insert_echo_refs(*echo)
            if "RUN_FINISHED" in segment.types or "RUN_ERROR" in segment.types:
                for ev, kind in zip(segment.events, segment.types):
                    if kind in ("RUN_FINISHED", "RUN_ERROR"):
                        segment.outcome = _status_of_terminal(ev.data)
            # The run's hash after this batch: the batch's stored bytes chained onto it (the
            # events' JSON as received, but a RUN_STARTED whose echo was normalized).
            stored = [ev.raw for ev in segment.events]
            refs = {}
            if echo is not None:
                stored[0] = rows[0][3].encode("utf-8")
                refs[echo[0]] = echo[1]
            batch_hash = hashing.chain(
                self._memory.known_run_hash(tx, run_pk),
                hashing.batch_digest_of(
                    seq - len(rows), segment.types, stored, refs, segment.outcome, now
                ),
            )
            known.run_hashes[run_pk] = batch_hash
            tx.insert_batch(run_pk, seq - len(rows), seq - 1, segment.outcome, now, batch_hash)
            self._memory.remember_batch(thread_pk, thread_id, run_pk, segment.outcome, seq - 1)
            # Before the next run of the batch is placed: its lineage and its echoed input
            # then see this one complete, as they would had it come in an append of its own.
            self._keep_checkpoint_current(tx, thread_pk, segment, now)
        last_seq = seq - 1
        if verifier is not None:
            last_pk = segments[-1].run_pk
            assert last_pk is not None
            if known.statuses.get(last_pk) == "incomplete":
                self._memory.verifiers[last_pk] = (last_seq, verifier)
            else:  # what continues a complete run is rare: found again if it comes
                self._memory.verifiers.pop(last_pk, None)
        return AppendResult(
            thread_id,
            tuple(dict.fromkeys(run_ids)),
            tuple(new_run_ids),
            len(incoming),
            first_seq,
            last_seq,
        )

    def _continued_run(
        self,
        tx: port.Reading,
        thread_pk: int,
        thread_id: str,
        named: str | None,
        newest: int | None,
        first_type: str,
    ) -> int | None:
        """The run a batch that starts none continues (SPEC §8): the run it names; else the
        thread's newest (``None``: the thread has none), unless several runs are open."""
        if named is not None:
            run_pk = self._memory.known.run_pks.get((thread_pk, named))
            if run_pk is None:
                found = tx.run_pk(thread_pk, named)
                if found is None:
                    raise RunNotFoundError(
                        f"no run {_quote(named)} in thread {_quote(thread_id)} to continue "
                        "(a run's first batch starts with its RUN_STARTED)"
                    )
                run_pk = self._memory.known.run_pks[(thread_pk, named)] = found
            return run_pk
        open_runs = self._open_runs(tx, thread_pk)
        if len(open_runs) > 1:
            names = tuple(self._memory.known_run_id(tx, pk) for pk in sorted(open_runs))
            shown = ", ".join(_quote(n) for n in names[:10])
            more = f" and {len(names) - 10} more" if len(names) > 10 else ""
            raise OpenRunsError(
                f"event 0 ({first_type}): the batch starts no run and names none, but thread "
                f"{_quote(thread_id)} has {len(names)} open runs ({shown}{more}): "
                "pass run_id= to say which one it continues",
                thread_id=thread_id,
                run_ids=names,
            )
        return newest

    def _open_runs(self, tx: port.Reading, thread_pk: int) -> set[int]:
        """The thread's incomplete runs (remembered between appends)."""
        open_runs = self._memory.known.open_runs
        if thread_pk not in open_runs:
            open_runs[thread_pk] = tx.open_runs(thread_pk)
        return open_runs[thread_pk]

    def _open_above(self, tx: port.Reading, thread_pk: int, run_pk: int) -> bool:
        """Whether an open run of the thread is on ``run_pk``'s lineage, above it (a run
        continued by name may have runs below it: SPEC §8)."""
        above = [pk for pk in self._open_runs(tx, thread_pk) if pk < run_pk]
        if not above:
            return False
        return tx.ancestor_among(run_pk, above)

    def _thread_of_run(self, tx: port.Reading, run_id: str, scope: str | None) -> str:
        """The thread of a run named without its thread, while the id is unambiguous (among
        the scope's threads: another owner's are absent)."""
        found = tx.threads_of_run_id(run_id, scope)
        if not found:
            raise RunNotFoundError(f"no run {_quote(run_id)} to continue")
        if len(found) > 1:
            threads = ", ".join(_quote(t) for t in found[:5])
            raise AmbiguousRunError(
                f"run id {_quote(run_id)} exists in several threads ({threads}): pass thread_id="
            )
        return found[0]

    def _drop_below(self, tx: port.Writing, thread_pk: int, run_pk: int) -> None:
        """Leave underived the complete runs below an open run whose view is still growing
        (open ones have nothing derived yet; they are derived when they complete)."""
        if not tx.has_child(run_pk):
            return
        # Those already left underived by an earlier piece hold nothing to drop: a live run
        # streamed in many pieces drops what is below it once, not once a piece.
        derived = tx.derived_descendants(run_pk)
        if any(self._memory.known_status(tx, pk) != "incomplete" for pk in derived):
            below = [
                pk
                for pk in tx.drop_derived_from(run_pk)
                if self._memory.known_status(tx, pk) != "incomplete"
            ]
            self._deriver.leave_underived(tx, thread_pk, below)

    @staticmethod
    def _segments(incoming: list[codec.IncomingEvent], types: list[str]) -> list[_Segment]:
        """Split a batch by position: RUN_STARTED opens a run; everything else belongs to
        the run open before it (SPEC §1: never match RUN_FINISHED.runId)."""
        if types and types.count("RUN_STARTED") == (types[0] == "RUN_STARTED"):
            # The usual batch: one run, or the continuation of one.
            started = incoming[0].data if types[0] == "RUN_STARTED" else None
            return [_Segment(0, list(incoming), list(types), started=started)]
        segments: list[_Segment] = []
        for i, (ev, kind) in enumerate(zip(incoming, types)):
            if kind == "RUN_STARTED" or not segments:
                segments.append(
                    _Segment(first_index=i, started=ev.data if kind == "RUN_STARTED" else None)
                )
            segments[-1].events.append(ev)
            segments[-1].types.append(kind)
        return segments

    def _only_open_thread(
        self, tx: port.Reading, first_type: str, scope: str | None = None
    ) -> str:
        known = self._memory.known
        if known.open_threads is None:
            known.open_threads = tx.threads_with_open_head()
        candidates = known.open_threads
        if scope is not None:  # only the scope's own threads count
            candidates = {t for t in candidates if self._owner_of(tx, t) == scope}
        if len(candidates) == 1:
            return next(iter(candidates))
        reason = "no thread has an open run" if not candidates else "several threads have open runs"
        raise InvalidEventError(
            f"the batch starts no run and names no thread ({reason}): pass thread_id=",
            index=0,
            event_type=first_type,
        )

    def _owner_of(self, tx: port.Reading, thread_id: str) -> str | None:
        found = tx.thread(thread_id)
        return found[1] if found else None

    def _refuse_duplicate_run(
        self, tx: port.Reading, thread_pk: int, run_id: str, segment: _Segment,
        recorded: int | None,
    ) -> None:
        """Refuse a run the thread has (``recorded``: its pk, read by the caller) or whose id
        names a branch of the thread."""
        if recorded is not None:
            raise InvalidEventError(
                f"run {_quote(run_id)} is already recorded in this thread; a run is recorded once "
                "(continue a live run by appending events without a new RUN_STARTED)",
                index=segment.first_index,
                event_type="RUN_STARTED",
                path="$.runId",
            )
        # A run id and a branch name are both revisions: neither may hide the other.
        if (
            self._memory.known.branched.get(thread_pk, True)
            and tx.branch_run(thread_pk, run_id) is not None
        ):
            raise InvalidEventError(
                f"run id {_quote(run_id)} is the name of a branch of this thread, and would "
                "shadow it as a revision: delete or rename the branch (delete_branch, then "
                "branch under another name), or record the run under another id",
                index=segment.first_index,
                event_type="RUN_STARTED",
                path="$.runId",
            )

    def _refuse_deep_copies(
        self,
        tx: port.Writing,
        segment: _Segment,
        run_input: intake.Input | None,
    ) -> None:
        """Refuse a ``copy``/``move`` that would nest the state (or an activity's content)
        deeper than a snapshot may (:mod:`agui_store.nesting`). How deep the copied value is
        depends on the state, so a segment holding such an operation (rare) is replayed
        from the run's view so far, before its rows are written."""
        risky = set(
            nesting.deepening_copies(
                [ev.data for ev in segment.events], segment.types, [ev.raw for ev in segment.events]
            )
        )
        if not risky:
            return
        fresh = [codec.decode(ev.raw) for ev in segment.events]  # the reducer may own these
        try:
            if segment.started is not None:
                assert segment.run_row is not None
                parent_pk, recorded, _, reason = segment.run_row
                reducer = start_reducer(None if parent_pk is None else reads.view(tx, parent_pk))
                given = codec.decode(run_input.raw) if run_input and recorded else None
                as_sent = body_as_sent(recorded is not None, reason)
                apply_run(reducer, RunRecord(input=given, events=fresh[:1], as_sent=as_sent))
                first = 1
            else:
                assert segment.run_pk is not None
                reducer = start_reducer(reads.view(tx, segment.run_pk))
                first = 0
            limit = nesting.state_depth_limit(self.max_depth)
            for at in range(first, len(fresh)):
                event = fresh[at]
                if at in risky:
                    target = reducer.patch_target(event)
                    field = nesting.PATCH_FIELDS[segment.types[at]]
                    found = (
                        None
                        if target is UNDEFINED
                        else nesting.deep_copy_at(target, event[field], limit)
                    )
                    if found is not None:
                        raise _TooDeep(at, field, *found)
                reducer.feed([event])
        except _TooDeep as deep:
            raise InvalidEventError(
                f"copies a value {deep.levels} levels deep into the "
                f"{'state' if deep.field == 'delta' else 'activity content'}; the store keeps "
                f"at most {nesting.state_depth_limit(self.max_depth)} (max_depth "
                f"{self.max_depth} less the event's own level, what a snapshot can carry), so "
                "that every reader can read it back",
                index=segment.first_index + deep.at,
                event_type=segment.types[deep.at],
                path=f"$.{deep.field}[{deep.op}]",
            ) from None
        except InvalidEventError:
            return  # the client throws on this lineage: there is no state to measure

    def _insert_run(
        self,
        tx: port.Writing,
        thread_pk: int,
        started: dict[str, Any],
        index: int,
        run_input: intake.Input | None,
        explicit_parent: RunKey | None,
        branch: str | None,
        now: int,
    ) -> tuple[int, RunRow]:
        """Insert a run; its pk and the row's ``(parent, input, input_refs, lineage)``."""
        input_data = run_input[0] if run_input else None
        echoed = started.get("input") if isinstance(started.get("input"), dict) else None
        sent_parent = None
        for source in (input_data, started, echoed):
            if source and isinstance(source.get("parentRunId"), str):
                sent_parent = source["parentRunId"]
                break
        sent = input_data if input_data is not None else echoed
        parent_pk, reason = self._decide_parent(
            tx,
            thread_pk,
            explicit_parent,
            sent_parent,
            branch,
            sent.get("messages") if sent is not None else None,
            run_input,
        )
        input_text, refs_text = None, None
        if run_input is not None and parent_pk is not None:
            normalized = self._normalized_input(
                tx, thread_pk, parent_pk, run_input.data, run_input.chunks, run_input.distinct
            )
            if normalized is not None:
                input_text = codec.encode(normalized[0]).decode("utf-8")
                refs_text = codec.encode(normalized[1]).decode("utf-8")
        if run_input is not None and input_text is None:
            input_text = run_input.raw.decode("utf-8")  # as sent
        parent_hash = self._memory.known_run_hash(tx, parent_pk) if parent_pk is not None else None
        input_hash = hashing.input_digest(input_text, refs_text)
        start_hash = hashing.start(
            thread_id=started["threadId"],
            run_id=started["runId"],
            lineage=reason,
            sent_parent_run_id=sent_parent,
            synthetic=False,
            created_at=now,
            parent_hash=parent_hash,
            input_hash=input_hash,
        )
        run_pk = tx.insert_run(
            thread_pk,
            started["runId"],
            parent_pk,
            reason,
            sent_parent,
            input_text,
            refs_text,
            False,
            now,
            parent_hash,
            input_hash,
            start_hash,
        )
        self._memory.known.run_hashes[run_pk] = start_hash
        self._advance_branches(tx, thread_pk, parent_pk, run_pk, branch, now)
        return run_pk, (parent_pk, input_text, refs_text, reason)

    def _decide_parent(
        self,
        tx: port.Writing,
        thread_pk: int,
        explicit: RunKey | None,
        sent_parent: str | None,
        branch: str | None,
        sent_messages: Any = None,
        run_input: intake.Input | None = None,
    ) -> tuple[int | None, str]:
        """SPEC §2, first match wins: explicit; parentRunId within the thread; the run whose
        restored message ids are the longest prefix of the input's; the thread's head.
        ``run_input``: the input ``sent_messages`` are of, if any (what reading it gave)."""
        if explicit is not None:
            return explicit.pk, "explicit"
        if sent_parent is not None:
            found = tx.run_pk(thread_pk, sent_parent)
            if found is not None:
                return found, "parentRunId"
        if branch is not None:
            found = tx.branch_run(thread_pk, branch)
            if found is not None:
                return found, "explicit"
        if isinstance(sent_messages, list) and sent_messages:
            known = run_input.ids if run_input is not None else None
            ids = known if known is not None else checkpoints.lineage_ids(sent_messages)
            hashed = run_input.hashed if run_input is not None else None
            inferred = self._longest_prefix_run(tx, thread_pk, ids, hashed)
            if inferred is not None:
                return inferred, "messages"
        head = self._memory.head(tx, thread_pk)
        return (head, "head") if head is not None else (None, "root")

    def _normalized_input(
        self,
        tx: port.Writing,
        thread_pk: int,
        parent_pk: int,
        run_input: dict[str, Any],
        sent_chunks: SentChunks | None = None,
        distinct: int = 0,
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The input naming what the parent's view holds instead of repeating it, when the
        parent's view is final (it and every run above it complete) and they share any
        (``sent_chunks``, ``distinct``: what reading the input gave, see intake.Input)."""
        if self._open_above(tx, thread_pk, parent_pk):
            return None  # a run above it still streams: its view may still change
        self._deriver.derive_underived(tx, thread_pk)  # the parent's view, kept in memory after
        cached = self._memory.cached_view(tx, thread_pk)
        if cached is not None and cached.run_pk == parent_pk:
            # Its reducer's index finds a message sent again, and when the parent's checkpoint
            # is the view's (nothing replayed since), a resent history is compared with the
            # addresses of its chunks: no pass over the view's old objects.
            reducer, since = cached.reducer, cached.since
            at_checkpoint = since.run_pk == parent_pk and since.events == 0
            sent = run_input.get("messages")
            resent = isinstance(sent, list) and len(sent) >= len(reducer.messages)
            pieces = since.layout.pieces() if resent and at_checkpoint and since.layout else None
            return normalize_input(
                run_input,
                reducer.messages,
                reducer.state,
                reducer.first_position,
                pieces,
                sent_chunks,
                distinct,
            )
        if self._memory.known_status(tx, parent_pk) != "incomplete":
            try:
                base = reads.view(tx, parent_pk)
            except InvalidEventError:
                return None  # a lineage the client cannot replay: nothing to refer to
        else:
            return None
        return normalize_input(run_input, base.messages, base.state)

    def _longest_prefix_run(
        self,
        tx: port.Writing,
        thread_pk: int,
        ids: list[Any],
        hashed: tuple[int, Any] | None = None,
    ) -> int | None:
        """Lineage rule 3: the run whose restored message ids form the longest prefix of the
        input's message ids ``ids`` (:func:`checkpoints.lineage_ids` of its messages; the
        newest such run on a tie). Runs are compared through their lineage digests, which
        complete runs have: an incomplete run is not a candidate.

        A client usually sends the view of the run appended last plus its new messages, so
        that view (cached) is tried first: when it is a prefix, only longer prefixes can
        beat it, and only their digests are looked up. ``hashed``, ``(n, the sha256 state
        of hash_ids(ids[:n]))`` when the caller has it (an earlier body's ids), spares
        comparing the first ``n`` ids with the view's.
        """
        if not ids:
            return None
        self._deriver.derive_underived(tx, thread_pk)  # every complete run is a candidate
        length_of: dict[bytes, int] | None = None
        cached = self._memory.cached_view(tx, thread_pk)
        if cached is not None:
            known = len(cached.lineage)
            if 0 < known <= len(ids):
                head = None
                if hashed is not None and hashed[0] <= known:
                    candidate = checkpoints.hash_ids(ids[hashed[0] : known], hashed[1])
                    if candidate.digest() == cached.ids_hasher.digest():
                        head = candidate
                elif ids[:known] == cached.lineage and set(map(type, cached.lineage)) == {str}:
                    head = cached.ids_hasher  # equal strings: the same digest, unhashed
                else:
                    candidate = checkpoints.hash_ids(ids[:known])
                    if candidate.digest() == cached.ids_hasher.digest():
                        head = candidate
                if head is not None:
                    length_of = checkpoints.prefix_digests(ids, head, known)
                    length_of[head.digest()] = known
        if length_of is None:
            length_of = checkpoints.prefix_digests(ids)
        matches = tx.runs_with_digests(thread_pk, list(length_of))
        if not matches:
            return None
        best = max(matches, key=lambda row: (length_of[row[1]], row[0]))
        return best[0]

    def _advance_branches(
        self,
        tx: port.Writing,
        thread_pk: int,
        parent_pk: int | None,
        run_pk: int,
        branch: str | None,
        now: int,
    ) -> None:
        """A new run on a branch advances it: the named one, else every branch whose tip
        is the run's parent."""
        branched = self._memory.known.branched
        if branch is not None:
            intake.check_branch_name(branch)
            _refuse_branch_shadowing_run(tx, thread_pk, branch)
            tx.set_branch(thread_pk, branch, run_pk, now)
            branched[thread_pk] = True
        elif parent_pk is not None:
            if thread_pk not in branched:
                branched[thread_pk] = tx.has_branches(thread_pk)
            if branched[thread_pk]:
                tx.move_branches(thread_pk, parent_pk, run_pk, now)

    def _insert_synthetic_run(
        self, tx: port.Writing, thread_pk: int, thread_id: str, seq: int, now: int
    ) -> int:
        run_id = f"run-error-{seq}"
        parent_pk = self._memory.head(tx, thread_pk)
        lineage = "head" if parent_pk else "root"
        parent_hash = self._memory.known_run_hash(tx, parent_pk) if parent_pk is not None else None
        start_hash = hashing.start(
            thread_id=thread_id,
            run_id=run_id,
            lineage=lineage,
            sent_parent_run_id=None,
            synthetic=True,
            created_at=now,
            parent_hash=parent_hash,
            input_hash=None,
        )
        run_pk = tx.insert_run(
            thread_pk,
            run_id,
            parent_pk,
            lineage,
            None,
            None,
            None,
            True,
            now,
            parent_hash,
            None,
            start_hash,
        )
        self._memory.known.run_hashes[run_pk] = start_hash
        return run_pk

    def _normalize_echo(
        self, tx: port.Writing, thread_pk: int, run_pk: int, rows: list[Any]
    ) -> tuple[int, str] | None:
        """Store a RUN_STARTED's echoed input by reference to its lineage (SPEC §4), like a
        recorded input: producers such as ag-ui-langgraph echo the whole history each run.
        ``rows[0]`` is the RUN_STARTED row; its payload is replaced when anything is shared,
        and the ``echo_refs`` row to insert after it is returned."""
        started = codec.decode(rows[0][3].encode("utf-8"))
        echoed = started.get("input")
        if not isinstance(echoed, dict):
            return None
        parent_pk = tx.run_parent(run_pk)
        if parent_pk is None:
            return None
        normalized = self._normalized_input(tx, thread_pk, parent_pk, echoed)
        if normalized is None:
            return None
        started["input"] = normalized[0]
        seq = rows[0][0]
        rows[0] = (seq, rows[0][1], rows[0][2], codec.encode(started).decode("utf-8"))
        return seq, codec.encode(normalized[1]).decode("utf-8")


    def _verifier_for(self, tx: port.Reading, run_pk: int) -> SequenceVerifier:
        """The sequence state at the end of a recorded run (cached while nobody appends)."""
        last_seq = self._memory.known_last_seq(tx, run_pk)
        cached = self._memory.verifiers.get(run_pk)
        if cached and cached[0] == last_seq:
            return cached[1]
        verifier = SequenceVerifier()
        try:
            for i, event in enumerate(reads.run_events(tx, run_pk)):
                verifier.feed(event, i)
        except SequenceError:
            # Recorded with check_sequence=False: its state is unknown, so a continuation
            # can only be judged on its own.
            verifier = SequenceVerifier()
        self._memory.verifiers[run_pk] = (last_seq, verifier)
        return verifier

    # --- checkpoints --------------------------------------------------------------------

    def _keep_checkpoint_current(
        self, tx: port.Writing, thread_pk: int, segment: _Segment, now: int
    ) -> None:
        """A run that completes is replayed now (cheap: its parent's view is cached, or a few
        runs from a checkpoint): it gets its lineage digest, and a checkpoint when the runs
        since the last one add up to ``checkpoint_events``. Events that would change a
        completed run's view drop what was derived from it."""
        assert segment.run_pk is not None
        if segment.was_complete:
            if any(kind != "RUN_ERROR" for kind in segment.types):
                # Only possible with check_sequence=False: events after the run's end. What
                # derives from the run is dropped, and derived again when next needed.
                dropped = tx.drop_derived_from(segment.run_pk)
                self._deriver.leave_underived(tx, thread_pk, dropped)
            return
        if segment.outcome is None:
            return
        if not self.derive_on_append:
            self._deriver.leave_underived(tx, thread_pk, [segment.run_pk])
            return
        underived = self._memory.known.underived
        if underived is None or thread_pk in underived:
            # The run itself may be listed (an open run below one that changed, or below a
            # migration's): it is derived below, once, from the batch's own events.
            tx.clear_underived(segment.run_pk)
        self._deriver.derive_underived(tx, thread_pk)  # what another store left, if anything
        # The batch's own decoded events, as sent (echoes whole): fresh objects nobody else
        # holds, so the reducer may take them over.
        whole = segment.started is not None  # the batch holds the whole run
        events = [ev.data for ev in segment.events] if whole else None
        self._deriver.derive(tx, thread_pk, segment.run_pk, now, events, segment.run_row)

    def derive(self, thread_id: str | None = None, *, scope: str | None = None) -> int:
        """Derive what appends left for later (``derive_on_append=False``), in a thread or
        everywhere: each complete run's lineage digest, and checkpoints as ``append`` would
        have written them. Returns how many runs were derived.

        A recorder that keeps appends short (``derive_on_append=False``) calls this once a
        run has ended and its response is out; nothing is lost if it never does: lineage
        decisions derive what they need first, and checkout replays what has no checkpoint.
        With a ``scope``, only that owner's threads.
        """
        intake.check_scope(scope)
        with self._writing() as tx:
            self._memory.notice_other_writes(tx)
            if thread_id:
                threads: list[int | None] = [self._require_thread(tx, thread_id, scope)]
            else:
                threads = revisions.owned_threads(tx, scope)
            derived = sum(self._deriver.derive_underived(tx, pk) for pk in threads)
            self._memory.remember_version(tx)
        return derived

    def compact(
        self,
        run_or_ref: str | None = None,
        *,
        thread_id: str | None = None,
        scope: str | None = None,
    ) -> int:
        """Materialize checkpoints: for a run and its ancestors, a thread, or the whole store
        (with a ``scope``: that owner's threads).

        Checkpoints are derived data (the raw log is never rewritten); ``append`` keeps them
        current where that is cheap, this fills in the rest. Returns how many were written.
        """
        intake.check_scope(scope)
        with self._writing() as tx:
            self._memory.notice_other_writes(tx)
            only: list[int | None] = [None]  # the threads compacted; None: all
            if run_or_ref is not None:
                key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
                only = [key.thread_pk]
                pks = tx.ancestors(key.pk)
            elif thread_id is not None:
                thread_pk = self._require_thread(tx, thread_id, scope)
                only = [thread_pk]
                pks = tx.thread_run_pks(thread_pk)
            elif scope is not None:
                only = revisions.owned_threads(tx, scope)
                pks = tx.owner_run_pks(scope)
            else:
                pks = tx.all_run_pks()
            now = database.now_ms()
            before = tx.checkpoint_count()
            # Digests lost while their checkpoints stayed: the checkpoint has it.
            tx.digests_from_checkpoints()
            # What appends left for later first, in run order: each run then continues the
            # view its parent left in memory.
            for only_pk in only:
                self._deriver.derive_underived(tx, only_pk)
            for pk in pks:
                if (
                    tx.has_checkpoint(pk)
                    or reads.status(tx, pk) == "incomplete"
                ):
                    continue
                self._deriver.derive(tx, tx.run_thread(pk), pk, now, force_checkpoint=True)
            return tx.checkpoint_count() - before

    # --- lookups ------------------------------------------------------------------------

    def _require_thread(
        self, tx: port.Reading, thread_id: str, scope: str | None = None
    ) -> int:
        return revisions.require_thread(tx, thread_id, scope, self.path)

    def _resolve(
        self,
        tx: port.Reading,
        ref: str,
        *,
        thread_id: str | None = None,
        thread_pk: int | None = None,
        scope: str | None = None,
    ) -> RunKey:
        intake.check_scope(scope)
        return revisions.resolve(
            tx, ref, where=self.path, thread_id=thread_id, thread_pk=thread_pk, scope=scope
        )

    def _run_record(self, tx: port.Reading, pk: int) -> Run:
        row, names, newest = tx.run_summary_and_branches(pk)
        if newest:
            names.insert(0, DEFAULT_BRANCH)
        return self._run_from_row(row, {pk: names})

    @staticmethod
    def _branch_names(
        tx: port.Reading, pks: list[int], thread_pks: list[int] | None = None
    ) -> dict[int, list[str]]:
        """The branches naming runs (the default branch first), by run; ``thread_pks``:
        the threads holding them, when the caller knows."""
        names: dict[int, list[str]] = {}
        if not pks:
            return names
        wanted = set(pks)
        if thread_pks is None:
            thread_pks = tx.threads_of_runs(sorted(wanted))
        for thread_pk in thread_pks:
            for run_pk, name in tx.branch_tips(thread_pk):
                if run_pk in wanted:
                    names.setdefault(run_pk, []).append(name)
            newest = tx.newest_run(thread_pk)
            if newest in wanted:
                names.setdefault(newest, []).insert(0, DEFAULT_BRANCH)
        return names

    @staticmethod
    def _run_from_row(row: Any, branches: dict[int, list[str]]) -> Run:
        (
            pk,
            thread_id,
            run_id,
            parent_run_id,
            lineage,
            sent_parent,
            has_input,
            synthetic,
            created_at,
            count,
            last_seq,
            updated_at,
            outcome,
            run_hash,
        ) = row
        return Run(
            thread_id=thread_id,
            run_id=run_id,
            parent_run_id=parent_run_id,
            lineage=lineage,
            status=outcome or "incomplete",
            event_count=int(count or 0),
            created_at=when(created_at),  # type: ignore[arg-type]
            updated_at=when(updated_at),
            sent_parent_run_id=sent_parent,
            has_input=bool(has_input),
            synthetic=bool(synthetic),
            branches=tuple(branches.get(pk, ())),
            last_seq=last_seq,
            hash=bytes(run_hash).hex() if run_hash is not None else None,
        )

    def record(
        self,
        events: Iterable[Any],
        *,
        input: Any = None,
        thread_id: str | None = None,
        scope: str | None = None,
    ) -> Iterator[Any]:
        """Yield each of ``events`` unchanged, as it arrives, while recording it in batches
        (appended by a thread at the latest every 0.1 s, and at the end). If the producer
        raises or the consumer stops, what passed is recorded and the run is left
        incomplete. ``scope`` names the owner the run is recorded for (``append``'s).
        See :mod:`agui_store.recording`."""
        from agui_store import recording  # it builds on this module

        return recording.record(self, events, input=input, thread_id=thread_id, scope=scope)

    # --- reading ------------------------------------------------------------------------

    def threads(self, *, scope: str | None = None) -> list[str]:
        """Every thread id, oldest first (with a ``scope``: that owner's threads).

        Every reading method takes ``scope=``: a thread of another owner (or of none) is
        then absent, as if it did not exist (SPEC §8). ``None``, the default, is the
        operator, who sees every thread."""
        intake.check_scope(scope)
        with self._reading() as tx:
            return tx.thread_ids(scope)

    def runs(self, thread_id: str, *, scope: str | None = None) -> list[Run]:
        """Every run of a thread, in the order they were recorded."""
        intake.check_scope(scope)
        with self._reading() as tx:
            pk = self._require_thread(tx, thread_id, scope)
            rows = tx.thread_run_summaries(pk)
            names = self._branch_names(tx, [r[0] for r in rows])
            return [self._run_from_row(r, names) for r in rows]

    def get_run(
        self, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Run | None:
        """A run by id or ref, or ``None`` when nothing matches."""
        intake.check_scope(scope)
        with self._reading() as tx:
            try:
                key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            except RunNotFoundError:
                return None
            return self._run_record(tx, key.pk)

    def events(
        self,
        run_id: str,
        *,
        thread_id: str | None = None,
        after: int | None = None,
        scope: str | None = None,
    ) -> list[dict[str, Any]]:
        """A run's events, verbatim and in order.

        Args:
            after: a global sequence number (exclusive), e.g. ``AppendResult.last_seq`` or
                ``Run.last_seq``: only events recorded after it (a reconnecting reader's
                cursor, like SSE's ``Last-Event-ID``).

        Raises:
            HashMismatchError: (the whole run, without ``after``) the stored events are not
                the ones the run's hashes cover: the file was edited outside agui-store.
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            return reads.run_events(
                tx, key.pk, arguments.cursor(after), verify=after is None
            )

    def thread_events(
        self, thread_id: str, *, scope: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every event of a thread in recorded order, read run by run (memory bounded by
        the largest run): what a whole-thread export streams out."""
        for run in self.runs(thread_id, scope=scope):
            yield from self.events(run.run_id, thread_id=thread_id, scope=scope)

    def input(
        self, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> dict[str, Any] | None:
        """The ``RunAgentInput`` recorded for a run (``append(input=...)``), or ``None``."""
        with self._reading() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            raw, raw_refs, parent_pk, recorded = tx.run_input(key.pk)
            if hashing.input_digest(raw, raw_refs) != recorded:
                raise reads.mismatch(tx, key.pk, "its input is not the one its hash covers")
            if raw is None:
                return None
            value: dict[str, Any] = codec.decode(raw.encode("utf-8"))
            if raw_refs is not None:
                assert parent_pk is not None  # refs name what the parent's view holds
                base = reads.view(tx, parent_pk)
                refs = codec.decode(raw_refs.encode("utf-8"))
                value = expand_input(value, refs, base.messages, base.state)
        return value

    def history(
        self, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> list[dict[str, Any]]:
        """The events of a run's whole ancestor chain, root first: what replays it.

        Raises:
            HashMismatchError: the chain's events, records or inputs are not the ones its
                runs' hashes cover (the file was edited outside agui-store).
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            chain, grouped, normalized = reads.chain_payloads(tx, key.pk)
            if normalized:  # rare: read those runs through the expanding path
                out: list[dict[str, Any]] = []
                for pk in chain:
                    if pk in normalized:
                        out += reads.run_events(tx, pk)
                    else:
                        out += codec.decode_many(grouped.get(pk, []))
                return out
        payloads = [p for pk in chain for p in grouped.get(pk, [])]
        return codec.decode_many(payloads)


    def log(
        self,
        run_or_ref: str,
        *,
        thread_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        scope: str | None = None,
    ) -> Log:
        """The run and its lineage ancestors, newest first (metadata only, no payloads).

        Pages: ``limit`` runs at a time, each page continued from the one before by its
        ``next_cursor``. A page reads only the runs it holds, whatever the lineage's depth::

            page = store.log("HEAD", thread_id="t", limit=20)
            while page.next_cursor is not None:
                page = store.log("HEAD", thread_id="t", limit=20, cursor=page.next_cursor)

        Args:
            limit: at most this many runs (a positive int); ``None``: the whole lineage.
            cursor: where the page starts: ``Log.next_cursor`` of the page before, which is
                the id of the run the page starts with (a run of the thread ``run_or_ref``
                names; that ref then only names the thread). Its lineage is walked, not the
                ref's: runs and their parents never change, so pages continue the lineage
                they began on even when the ref (``HEAD``, a branch) has moved since.
                ``None``: the page starts at ``run_or_ref``.

        Returns:
            The runs; ``next_cursor`` is set when ``limit`` cut the lineage short, and
            ``None`` when the page reached its root.

        Raises:
            InvalidArgumentError: a ``limit`` that is not a positive int; a ``cursor`` that
                is not a run id of the thread (a cursor of another thread included).
        """
        size = arguments.page_size(limit)
        start = arguments.page_cursor(cursor)
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            first = key.pk
            if start is not None:
                # Text SQLite cannot hold names no run.
                named = tx.run_pk(key.thread_pk, start) if arguments.storable_text(start) else None
                if named is None:
                    raise InvalidArgumentError(
                        f"cursor {_quote(start)} names no run of thread "
                        f"{_quote(tx.thread_id(key.thread_pk))}: a cursor continues the log "
                        "of the thread it came from"
                    )
                first = named
            rows = tx.lineage_runs(first, None, size)
            names = self._branch_names(tx, [r[0] for r in rows])
            runs = [self._run_from_row(r, names) for r in rows]
        # The last run's parent starts the next page (None at the root, or the whole log).
        more = runs[-1].parent_run_id if runs and len(runs) == size else None
        return Log(runs, next_cursor=more)

    def checkout(
        self, run_or_ref: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Checkout:
        """Restore a run: the messages and state the official client holds after it."""
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            run = self._run_record(tx, key.pk)
            view = reads.view(tx, key.pk)
        return Checkout(run, view.messages, view.state, view.interrupts, view.warnings)

    def compacted(
        self, run_or_ref: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> list[dict[str, Any]]:
        """The short stream that restores a run: what a reconnecting client is sent.

        ``RUN_STARTED``, ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT`` and the run's terminal
        event (its outcome, with pending interrupts), accepted by the official client's full
        pipeline and restoring exactly ``checkout(run)`` (SPEC §4). An incomplete run ends
        without a terminal event, as it was recorded.
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            run = self._run_record(tx, key.pk)
            view = reads.view(tx, key.pk)
            terminal = tx.terminal_event(key.pk)
        ids = {"threadId": run.thread_id, "runId": run.run_id}
        started: dict[str, Any] = {"type": "RUN_STARTED", **ids}
        if run.parent_run_id is not None:
            started["parentRunId"] = run.parent_run_id
        stream: list[dict[str, Any]] = [
            started,
            {"type": "MESSAGES_SNAPSHOT", "messages": view.messages},
            {"type": "STATE_SNAPSHOT", "snapshot": view.state},
        ]
        if terminal is None:
            # Still open: a live recorder continues it. Interrupts an earlier run left pending
            # cannot be stated without ending the run, so they are not in this stream.
            return stream
        original = codec.decode(terminal.encode("utf-8"))
        if original["type"] == "RUN_ERROR":
            if view.interrupts:
                # Interrupts an earlier run left pending survive this run's failure in the
                # client; RUN_FINISHED then a late RUN_ERROR is the legal way to say both.
                stream.append(
                    {
                        "type": "RUN_FINISHED",
                        **ids,
                        "outcome": {"type": "interrupt", "interrupts": view.interrupts},
                    }
                )
            stream.append({k: original[k] for k in ("type", "message", "code") if k in original})
            return stream
        finished: dict[str, Any] = {"type": "RUN_FINISHED", **ids}
        for name in ("result", "usage"):
            if name in original:
                finished[name] = original[name]
        outcome = original.get("outcome")
        if view.interrupts:
            finished["outcome"] = {"type": "interrupt", "interrupts": view.interrupts}
        elif isinstance(outcome, dict) and outcome.get("type") != "interrupt":
            finished["outcome"] = outcome
        stream.append(finished)
        return stream






    # --- time travel ----------------------------------------------------------------------

    def _merge_base_pk(self, tx: port.Reading, a: int, b: int) -> tuple[int, int, int] | None:
        """(merge base, its depth below a, below b): the deepest run on both lineages."""
        return tx.merge_base(a, b)

    def _pair(
        self, tx: port.Reading, a: str, b: str, thread_id: str | None, scope: str | None
    ) -> tuple[RunKey, RunKey, tuple[int, int, int] | None]:
        """Two arguments resolved, and their merge base (see :meth:`_merge_base_pk`)."""
        ka = self._resolve(tx, a, thread_id=thread_id, scope=scope)
        # The thread ``a`` was found in is the one ``thread_id`` names: not looked up again.
        in_thread = ka.thread_pk if thread_id is not None else None
        kb = self._resolve(tx, b, thread_id=thread_id, thread_pk=in_thread, scope=scope)
        return ka, kb, self._merge_base_pk(tx, ka.pk, kb.pk)

    def merge_base(
        self, a: str, b: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Run | None:
        """The nearest run both ``a`` and ``b`` descend from (either may be it), or ``None``."""
        with self._reading() as tx:
            _, _, found = self._pair(tx, a, b, thread_id, scope)
            return self._run_record(tx, found[0]) if found else None

    def is_ancestor(
        self, a: str, b: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> bool:
        """Whether ``a`` is on ``b``'s lineage (a run is its own ancestor, as in git)."""
        with self._reading() as tx:
            ka, _, found = self._pair(tx, a, b, thread_id, scope)
            return found is not None and found[0] == ka.pk

    def diff(
        self,
        a: str,
        b: str,
        *,
        thread_id: str | None = None,
        mode: str = "three-dot",
        scope: str | None = None,
    ) -> Diff:
        """Compare two runs: merge base, the runs on each side since it, message changes by
        id and the state change as an RFC 6902 patch.

        What it reads follows what the two runs changed, not the thread's length: each
        side's runs down to the merge base, and each run's checkpoint past the chunks and
        tail segments all sides share (the same blob at the same place: compared by
        address, as git compares trees), with a state they share read once.

        Args:
            mode: ``"three-dot"`` (default): what each side changed since the merge base, git
                and Dolt style; ``changes`` is base -> b and ``a_changes`` base -> a.
                ``"two-dot"``: the two views compared directly (``changes`` is a -> b).
        """
        if mode not in ("three-dot", "two-dot"):
            raise InvalidArgumentError(f"mode must be 'three-dot' or 'two-dot', not {mode!r}")
        with self._reading() as tx:
            ka, kb, found = self._pair(tx, a, b, thread_id, scope)
            run_a, run_b, base_run, a_runs, b_runs = self._sides(
                tx, ka.pk, kb.pk, found, ka.thread_pk
            )
            # Each distinct run is loaded once (one side is often the merge base itself);
            # two-dot needs no base.
            with_base = [found[0]] if found and mode == "three-dot" else []
            pks = list(dict.fromkeys([ka.pk, kb.pk, *with_base]))
            # Without a merge base, three-dot compares each side with an empty view: nothing
            # the sides share may be left out then.
            skip = found is not None or mode == "two-dot"
            views = dict(zip(pks, reads.views_past_shared(tx, pks, skip_shared=skip)))
        view_a, view_b = views[ka.pk], views[kb.pk]
        if mode == "two-dot":
            return Diff(run_a, run_b, mode, base_run, a_runs, b_runs, _compare(view_a, view_b))
        base = views[found[0]] if found else View([], {}, [], [])
        return Diff(
            run_a,
            run_b,
            mode,
            base_run,
            a_runs,
            b_runs,
            _compare(base, view_b),
            _compare(base, view_a),
        )

    def _sides(
        self,
        tx: port.Reading,
        a: int,
        b: int,
        found: tuple[int, int, int] | None,
        thread_pk: int,
    ) -> tuple[Run, Run, Run | None, list[Run], list[Run]]:
        """A diff's runs: ``a``, ``b``, their merge base, and the runs of each side above
        the base, newest first (whole lineages when there is none). Each side is one walk
        from its run down to the base, which it includes (so no run is read twice), and
        the branches naming them are read once for all (``thread_pk``: ``a``'s thread)."""
        if found is None:
            a_rows, b_rows = tx.lineage_runs(a, None, None), tx.lineage_runs(b, None, None)
            a_side, b_side, base_row = a_rows, b_rows, None
        else:
            _, depth_a, depth_b = found
            a_rows = tx.lineage_runs(a, depth_a + 1, depth_a + 1)
            b_rows = tx.lineage_runs(b, depth_b + 1, depth_b + 1)
            a_side, b_side, base_row = a_rows[:depth_a], b_rows[:depth_b], a_rows[depth_a]
        rows = [*a_rows, *b_rows]
        # With a merge base both runs are on one lineage, so in one thread.
        threads = None if found is None else [thread_pk]
        names = self._branch_names(tx, sorted({int(r[0]) for r in rows}), threads)
        run_a = self._run_from_row(a_rows[0], names)
        run_b = self._run_from_row(b_rows[0], names)
        base_run = self._run_from_row(base_row, names) if base_row is not None else None
        return (
            run_a,
            run_b,
            base_run,
            [self._run_from_row(r, names) for r in a_side],
            [self._run_from_row(r, names) for r in b_side],
        )

    def check(self) -> CheckReport:
        """Check the store: its storage's integrity (an SQLite file's pages, foreign keys
        and schema; a PostgreSQL schema's foreign keys and objects) and the store's own
        invariants (see :mod:`agui_store.integrity`). Reports; never repairs."""
        with self._reading() as tx:
            return integrity.check(tx)

    # --- branches and forks -------------------------------------------------------------

    def branch(
        self, name: str, run_id: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Branch:
        """Point branch ``name`` at a run (creating or moving it). With a ``scope``, only a
        run of that owner's threads (another owner's are absent: ``RunNotFoundError``)."""
        intake.check_branch_name(name)
        with self._writing() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            _refuse_branch_shadowing_run(tx, key.thread_pk, name)
            now = database.now_ms()
            tx.set_branch(key.thread_pk, name, key.pk, now)
            thread = tx.thread_id(key.thread_pk)
            return Branch(thread, name, tx.run_id(key.pk), False, when(now))

    def branches(self, thread_id: str, *, scope: str | None = None) -> list[Branch]:
        """A thread's branches: the default one (following the newest run) first."""
        intake.check_scope(scope)
        with self._reading() as tx:
            pk = self._require_thread(tx, thread_id, scope)
            out = []
            newest = tx.newest_run(pk)
            if newest is not None:
                out.append(Branch(thread_id, DEFAULT_BRANCH, tx.run_id(newest), True))
            for name, run_id, updated in tx.branch_list(pk):
                out.append(Branch(thread_id, name, run_id, False, when(updated)))
            return out

    def delete_branch(self, name: str, *, thread_id: str, scope: str | None = None) -> None:
        """Delete a branch (the runs stay; only the name goes)."""
        if name in RESERVED_REFS:
            raise BranchError(f"{name!r} is the thread's default branch; it cannot be deleted")
        intake.check_scope(scope)
        with self._writing() as tx:
            pk = self._require_thread(tx, thread_id, scope)
            if not tx.delete_branch(pk, name):
                raise BranchError(f"no branch {_quote(name)} in thread {_quote(thread_id)}")

    def fork(
        self,
        run_or_ref: str,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        scope: str | None = None,
    ) -> dict[str, Any]:
        """The ``RunAgentInput`` a client sends to start a new run from this one.

        Tools, context and forwarded props come from the newest recorded input in the
        run's lineage (a client resends the same ones); messages and state are the view.
        """
        with self._reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            run = self._run_record(tx, key.pk)
            view = reads.view(tx, key.pk)
            newest_input = tx.newest_input(key.pk)
        recorded = codec.decode(newest_input.encode("utf-8")) if newest_input else {}
        if run_id is not None and not (
            isinstance(run_id, str) and run_id and arguments.storable_text(run_id)
        ):
            raise InvalidArgumentError(f"run_id= must be a non-empty id, not {_quote(run_id)}")
        fork_input: dict[str, Any] = {
            "threadId": run.thread_id,
            "runId": run_id or str(uuid.uuid4()),
            "parentRunId": run.run_id,
            "state": view.state,
            "messages": [m for m in view.messages if m.get("role") != "activity"],
            "tools": recorded.get("tools", []),
            "context": recorded.get("context", []),
            "forwardedProps": recorded.get("forwardedProps", {}),
        }
        return fork_input



#: Every Store not yet garbage-collected, for the at-fork hook.
_OPEN_STORES: weakref.WeakSet[Store] = weakref.WeakSet()


def _close_inherited_connections() -> None:
    for store in list(_OPEN_STORES):
        store._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_connections)


#: An import appends batches of whole runs of about this many events (or bytes of JSON);
#: a run longer than four times that is cut, and continued by the next batch.
IMPORT_BATCH_EVENTS = 1000
IMPORT_BATCH_BYTES = 2 * 1024 * 1024


def _compare(old: View, new: View) -> ViewChange:
    """:func:`~agui_store.diff.compare` of two views; a view with itself (a side that is
    its merge base) has no change."""
    if old is new:
        return ViewChange([], [])
    return compare(old.messages, old.state, new.messages, new.state)


def _refuse_branch_shadowing_run(tx: port.Reading, thread_pk: int, name: str) -> None:
    """A branch may not take the name of a run of its thread: the two would be the same
    revision (the run id would win, silently)."""
    if tx.run_pk(thread_pk, name) is not None:
        raise BranchError(
            f"branch name {_quote(name)} is the id of a run of this thread, and would be "
            "shadowed by it as a revision: choose another name"
        )


#: What a database URL (rather than a file path) starts with.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_url(path: str) -> bool:
    """Whether ``path`` names a PostgreSQL database instead of an SQLite file."""
    return path.startswith(POSTGRES_SCHEMES)


def _backend_for(path: str, busy_timeout_ms: int) -> port.Backend:
    """The backend a path or URL names: PostgreSQL for ``postgresql://`` URLs (psycopg, the
    ``postgres`` extra), else an SQLite file."""
    if is_url(path):
        try:
            # Imported on demand: psycopg is an optional extra.
            from agui_store.postgres import (  # type: ignore[import-not-found,attr-defined,unused-ignore]
                PostgresBackend,
            )
        except ImportError as e:
            raise InvalidArgumentError(
                f"a PostgreSQL store needs psycopg 3: pip install 'agui-store[postgres]' ({e})"
            ) from e
        backend: port.Backend = PostgresBackend(path, busy_timeout_ms=busy_timeout_ms)
        return backend
    return SqliteBackend(path, busy_timeout_ms=busy_timeout_ms)


def open(path: str | os.PathLike[str] | None = None, **options: Any) -> Store:
    """Open (creating if needed) a store: an SQLite file, or a PostgreSQL database named by a
    ``postgresql://`` URL. ``None``: ``$AGUI_STORE_DB`` or ``./agui-store.db``;
    ``":memory:"`` keeps everything in memory."""
    return Store(path, **options)
