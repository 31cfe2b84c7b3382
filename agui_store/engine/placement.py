"""Placing a batch in a write transaction: which thread and run each event goes to, the
lineage of each run a batch opens (docs/design/lineage.md: explicit parent, ``parentRunId``, the
longest message-id prefix, the thread's head), the branches it advances, several open runs of one
thread (docs/design/behaviour.md#live-recording), the events, batch hashes and inputs stored by
reference to the parent's view, and, as runs complete, their derived data (on append, or left
for later).

Written once over :mod:`agui_store.engine.port` for every backend. What appends remember between
calls is the store's :class:`~agui_store.engine.cache.Memory`; the batch comes read and validated
from :mod:`agui_store.engine.intake`; deriving is :class:`~agui_store.engine.derivation.Deriver`'s.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from agui_store.codec import ingest
from agui_store.engine import checkpoints, clock, port, revisions, tombstones, verified
from agui_store.engine.arguments import quote as _quote
from agui_store.engine.cache import Memory
from agui_store.engine.derivation import Deriver, RunRow
from agui_store.engine.intake import Batch, Input
from agui_store.engine.revisions import RunKey
from agui_store.errors import (
    AmbiguousRunError,
    BranchError,
    InvalidEventError,
    OpenRunsError,
    RunNotFoundError,
    ScopeError,
    SequenceError,
)
from agui_store.history import hashing, nesting
from agui_store.history.lineage import hash_ids, lineage_ids, prefix_digests
from agui_store.history.normalize import SentChunks, normalize_input
from agui_store.history.restore import RunRecord, apply_run, body_as_sent, start_reducer
from agui_store.protocol.js import UNDEFINED
from agui_store.protocol.reducer import Reducer
from agui_store.protocol.verify import SequenceVerifier
from agui_store.records import AppendResult, status_of_terminal


@dataclass
class _Segment:
    """Consecutive events of one batch that belong to one run."""

    first_index: int
    events: list[ingest.IncomingEvent] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    run_pk: int | None = None  # an existing run continued, or the new run once inserted
    started: dict[str, Any] | None = None  # the RUN_STARTED that opens a new run
    outcome: str | None = None  # the status its last terminal event gives the run
    was_complete: bool = False  # it continues a run that had already ended
    run_row: RunRow | None = None  # a new run's row


class _CopyRefused(Exception):
    """A copy or move that nests too deeply or clones too much (``found``), at event ``at``
    of a segment, in its patch field ``field``."""

    def __init__(self, at: int, field: str, found: nesting.CopyProblem) -> None:
        super().__init__(at, field, found)
        self.at, self.field, self.found = at, field, found


class Placement:
    """Places a store's batches: over its memory and its deriver, with its options (``where``:
    the store's path, as errors name it; ``max_depth``; ``max_event_bytes``;
    ``derive_on_append``)."""

    def __init__(
        self,
        memory: Memory,
        deriver: Deriver,
        *,
        where: str,
        max_depth: int,
        max_event_bytes: int,
        derive_on_append: bool,
    ) -> None:
        self.memory = memory
        self.deriver = deriver
        self.where = where
        self.max_depth = max_depth
        self.max_event_bytes = max_event_bytes
        self.derive_on_append = derive_on_append

    def place(self, tx: port.Writing, batch: Batch) -> AppendResult:
        """Place a batch read by :meth:`agui_store.engine.intake.Intake.read_batch`, inside
        the write transaction ``tx``: the runs it opens or continues, their lineage and
        branches, its events, hashes and, as runs complete, what derives from them."""
        (
            incoming, types, thread_id, run_input, parent_ref, branch, check_sequence,
            named_run, scope,
        ) = batch  # fmt: skip
        memory = self.memory
        now = clock.now_ms()
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
        remembered = memory.thread(thread_id)
        if remembered is None:
            remembered = tx.thread(thread_id)
            if remembered is None and not starts_run:
                self._refuse_continuing_erased(tx, thread_id, named_run)
            # A thread written under an erased id is created after the erasure: a
            # tombstone covers the threads of its id created at or before it
            # (tombstones.covers), and one written in its millisecond is another.
            remembered = remembered or (
                tx.insert_thread(thread_id, now, scope, tombstones.thread_hash(thread_id)),
                scope,
            )
            memory.remember_thread(thread_id, *remembered)
        thread_pk, owner = remembered
        if scope is not None and owner != scope:
            raise ScopeError(
                f"thread {_quote(thread_id)} belongs to another owner: scope {_quote(scope)} "
                "may not write to it (nothing was written)"
            )
        newest = memory.head(tx, thread_pk)
        # The run a batch that starts none continues: the one it names, else the newest.
        continued = (
            None
            if starts_run
            else self._continued_run(tx, thread_pk, thread_id, named_run, newest, types[0])
        )

        # Sequence rules (docs/design/behaviour.md#events): a batch that does not start a run
        # continues a recorded run, so it is checked from that run's recorded state.
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
            revisions.resolve(tx, parent_ref, where=self.where, thread_pk=thread_pk)
            if parent_ref
            else None
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
                recorded = memory.run_pk_and_next_seq(tx, thread_pk, run_id)
                self._refuse_duplicate_run(tx, thread_pk, thread_id, run_id, segment, recorded)
            seq = memory.next_seq(tx)
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
                memory.remember_new_run(thread_pk, segment.run_pk, rid)
                new_run_ids.append(rid)
                run_ids.append(rid)
            else:
                if continued is None:
                    # Only RUN_ERROR (a run that failed before it started) or, without
                    # sequence checks, any event may open the thread's log.
                    segment.run_pk = self._insert_synthetic_run(
                        tx, thread_pk, thread_id, seq, now
                    )
                    memory.remember_new_run(thread_pk, segment.run_pk, None)
                    new_run_ids.append(memory.known_run_id(tx, segment.run_pk))
                else:
                    segment.run_pk = continued
                    segment.was_complete = memory.known_status(tx, continued) != "incomplete"
                    if continued != newest and not segment.was_complete:
                        # An open run with runs after it: those placed below it (lineage
                        # rule 4 takes the head, open or not) derived their views from
                        # what it held then; they are derived again when next needed.
                        self._drop_below(tx, thread_pk, continued)
                run_ids.append(memory.known_run_id(tx, segment.run_pk))
            seq = self._write_segment(tx, thread_pk, thread_id, segment, seq, run_input, now)
        last_seq = seq - 1
        if verifier is not None:
            last_pk = segments[-1].run_pk
            assert last_pk is not None
            memory.keep_verifier(last_pk, last_seq, verifier)
        return AppendResult(
            thread_id,
            tuple(dict.fromkeys(run_ids)),
            tuple(new_run_ids),
            len(incoming),
            first_seq,
            last_seq,
        )

    def _write_segment(
        self,
        tx: port.Writing,
        thread_pk: int,
        thread_id: str,
        segment: _Segment,
        first_seq: int,
        run_input: Input | None,
        now: int,
    ) -> int:
        """Write a placed segment from ``first_seq`` on: its events (a normalized echo's stored by
        reference), the batch with the run's hash after it, and, once it completes a run,
        what derives from it; the next event's ``seq``."""
        memory = self.memory
        run_pk = segment.run_pk
        assert run_pk is not None  # placed
        self._refuse_risky_copies(tx, segment, run_input, first_seq)
        rows = [
            (at, run_pk, kind, ev.raw.decode("utf-8"))
            for at, ev, kind in zip(itertools.count(first_seq), segment.events, segment.types)
        ]
        seq = first_seq + len(rows)
        echo = (
            self._normalize_echo(tx, thread_pk, run_pk, rows)
            if segment.started is not None and isinstance(segment.started.get("input"), dict)
            else None
        )
        tx.insert_events(rows)
        if echo is not None:
            tx.insert_echo_refs(*echo)
        if "RUN_FINISHED" in segment.types or "RUN_ERROR" in segment.types:
            memory.drop_copy_check(run_pk)  # what continues a complete run is rare
            for ev, kind in zip(segment.events, segment.types):
                if kind in ("RUN_FINISHED", "RUN_ERROR"):
                    segment.outcome = status_of_terminal(ev.data)
        # The run's hash after this batch: the batch's stored bytes chained onto it (the
        # events' JSON as received, but a RUN_STARTED whose echo was normalized).
        stored = [ev.raw for ev in segment.events]
        refs = {}
        if echo is not None:
            stored[0] = rows[0][3].encode("utf-8")
            refs[echo[0]] = echo[1]
        outcome = segment.outcome
        digest = hashing.batch_digest_of(first_seq, segment.types, stored, refs, outcome, now)
        batch_hash = hashing.chain(memory.known_run_hash(tx, run_pk), digest)
        tx.insert_batch(run_pk, first_seq, seq - 1, outcome, now, batch_hash)
        memory.remember_batch(thread_pk, thread_id, run_pk, outcome, seq - 1, batch_hash)
        # Before the next run of the batch is placed: its lineage and its echoed input
        # then see this one complete, as they would had it come in an append of its own.
        self._keep_checkpoint_current(tx, thread_pk, segment, now)
        return seq

    def _continued_run(
        self,
        tx: port.Reading,
        thread_pk: int,
        thread_id: str,
        named: str | None,
        newest: int | None,
        first_type: str,
    ) -> int | None:
        """The run a batch that starts none continues (docs/design/behaviour.md#live-recording):
        the run it names; else the thread's newest (``None``: the thread has none), unless several
        runs are open."""
        if named is not None:
            run_pk = self.memory.run_pk_named(tx, thread_pk, named)
            if run_pk is None:
                raise RunNotFoundError(
                    f"no run {_quote(named)} in thread {_quote(thread_id)} to continue "
                    "(a run's first batch starts with its RUN_STARTED)"
                )
            return run_pk
        open_runs = self.memory.open_runs(tx, thread_pk)
        if len(open_runs) > 1:
            names = tuple(self.memory.known_run_id(tx, pk) for pk in sorted(open_runs))
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

    def _open_above(self, tx: port.Reading, thread_pk: int, run_pk: int) -> bool:
        """Whether an open run of the thread is on ``run_pk``'s lineage, above it (a run
        continued by name may have runs below it: docs/design/behaviour.md#live-recording)."""
        above = [pk for pk in self.memory.open_runs(tx, thread_pk) if pk < run_pk]
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
        if any(self.memory.known_status(tx, pk) != "incomplete" for pk in derived):
            below = [
                pk
                for pk in checkpoints.drop_derived_from(tx, run_pk)
                if self.memory.known_status(tx, pk) != "incomplete"
            ]
            self.deriver.leave_underived(tx, thread_pk, below)

    @staticmethod
    def _segments(incoming: list[ingest.IncomingEvent], types: list[str]) -> list[_Segment]:
        """Split a batch by position: RUN_STARTED opens a run; everything else belongs to
        the run open before it (docs/design/behaviour.md#events: never match RUN_FINISHED.runId)."""
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
        candidates = self.memory.threads_with_open_head(tx)
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

    def _refuse_continuing_erased(
        self, tx: port.Reading, thread_id: str, named_run: str | None
    ) -> None:
        """A batch that starts no run, for a thread the store erased (it keeps a tombstone):
        the run it continues went with the thread. Said as such, rather than as a batch that
        lacks its RUN_STARTED."""
        erased_at = tombstones.thread_erased_at(tx, thread_id)
        if erased_at is None:
            return
        run = f"run {_quote(named_run)}" if named_run is not None else "the run it continues"
        at = clock.shown(erased_at)
        raise RunNotFoundError(
            f"thread {_quote(thread_id)} was erased at {at}: "
            f"{run} went with it; nothing was written (a new run of the thread starts with "
            "its RUN_STARTED)"
        )

    def _owner_of(self, tx: port.Reading, thread_id: str) -> str | None:
        found = tx.thread(thread_id)
        return found[1] if found else None

    def _refuse_duplicate_run(
        self, tx: port.Reading, thread_pk: int, thread_id: str, run_id: str,
        segment: _Segment, recorded: int | None,
    ) -> None:
        """Refuse a run the thread has (``recorded``: its pk, read by the caller) or whose id
        names a branch of the thread."""
        if recorded is not None:
            raise InvalidEventError(
                recorded_already(thread_id, run_id),
                index=segment.first_index,
                event_type="RUN_STARTED",
                path="$.runId",
            )
        # A run id and a branch name are both revisions: neither may hide the other.
        if (
            self.memory.may_have_branches(thread_pk)
            and tx.branch_run(thread_pk, run_id) is not None
        ):
            raise InvalidEventError(
                f"run id {_quote(run_id)} is the name of a branch of thread {_quote(thread_id)}, "
                "and would shadow it as a revision: delete or rename the branch (delete_branch, "
                "then branch under another name), or record the run under another id",
                index=segment.first_index,
                event_type="RUN_STARTED",
                path="$.runId",
            )

    def _refuse_risky_copies(
        self,
        tx: port.Writing,
        segment: _Segment,
        run_input: Input | None,
        first_seq: int,
    ) -> None:
        """Refuse a ``copy``/``move`` that would nest the state (or an activity's content)
        deeper than a snapshot may, or an event whose copies would clone more JSON than an
        event may carry (:mod:`agui_store.history.nesting`). Both depend on the state, so a segment
        holding such an operation (rare) is replayed from the run's view so far, before its
        rows (from ``first_seq`` on) are written. The view it reaches is kept for the run's
        next such segment (:meth:`_view_so_far`)."""
        risky = set(
            nesting.replayed_copies(
                [ev.data for ev in segment.events], segment.types, [ev.raw for ev in segment.events]
            )
        )
        if not risky:
            return
        fresh = [ingest.decode(ev.raw) for ev in segment.events]  # the reducer may own these
        limit = nesting.state_depth_limit(self.max_depth)
        try:
            if segment.started is not None:
                assert segment.run_row is not None
                parent_pk, recorded, _, reason = segment.run_row
                reducer = start_reducer(None if parent_pk is None else verified.view(tx, parent_pk))
                given = ingest.decode(run_input.raw) if run_input and recorded else None
                as_sent = body_as_sent(recorded is not None, reason)
                apply_run(reducer, RunRecord(input=given, events=fresh[:1], as_sent=as_sent))
                first = 1
            else:
                assert segment.run_pk is not None
                reducer = self._view_so_far(tx, segment.run_pk)
                first = 0
            for at in range(first, len(fresh)):
                event = fresh[at]
                if at in risky:
                    target = reducer.patch_target(event)
                    field = nesting.PATCH_FIELDS[segment.types[at]]
                    found = (
                        None
                        if target is UNDEFINED
                        else nesting.copy_problem(target, event[field], limit, self.max_event_bytes)
                    )
                    if found is not None:
                        raise _CopyRefused(at, field, found)
                reducer.feed([event])
        except _CopyRefused as refused:
            found = refused.found
            into = "state" if refused.field == "delta" else "activity content"
            if found.cloned:
                reason = (
                    f"copies {found.cloned} bytes of JSON into the {into} in one event; an "
                    f"event may clone at most max_event_bytes ({self.max_event_bytes}), what it "
                    "could carry, so that a few copies cannot multiply the state past what "
                    "any reader holds"
                )
            else:
                reason = (
                    f"copies a value {found.levels} levels deep into the {into}; the store "
                    f"keeps at most {limit} (max_depth {self.max_depth} less the event's own "
                    "level, what a snapshot can carry), so that every reader can read it back"
                )
            raise InvalidEventError(
                reason,
                index=segment.first_index + refused.at,
                event_type=segment.types[refused.at],
                path=f"$.{refused.field}[{found.op}]",
            ) from None
        except InvalidEventError:
            return  # the client throws on this lineage: there is no state to measure
        assert segment.run_pk is not None
        # Dropped with the other caches if the write fails (Memory.forget), and once the run
        # completes (_write_segment).
        self.memory.keep_copy_check(segment.run_pk, first_seq + len(fresh) - 1, reducer)

    def _view_so_far(self, tx: port.Reading, run_pk: int) -> Reducer:
        """A reducer holding a recorded run's view so far: the one its last copy check left,
        fed the events recorded since (a live run streaming copies costs what each append
        adds), else the view replayed from the nearest checkpoint."""
        kept = self.memory.take_copy_check(tx, run_pk)
        if kept is not None:
            seen, reducer = kept
            reducer.feed(verified.run_events(tx, run_pk, seen))
            return reducer
        return start_reducer(verified.view(tx, run_pk))

    def _insert_run(
        self,
        tx: port.Writing,
        thread_pk: int,
        started: dict[str, Any],
        index: int,
        run_input: Input | None,
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
                input_text = ingest.encode(normalized[0]).decode("utf-8")
                refs_text = ingest.encode(normalized[1]).decode("utf-8")
        if run_input is not None and input_text is None:
            input_text = run_input.raw.decode("utf-8")  # as sent
        run_pk = self._insert_run_row(
            tx,
            thread_pk,
            started["threadId"],
            started["runId"],
            parent_pk,
            reason,
            sent_parent,
            input_text,
            refs_text,
            synthetic=False,
            now=now,
        )
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
        run_input: Input | None = None,
    ) -> tuple[int | None, str]:
        """docs/design/lineage.md, first match wins: explicit; parentRunId within the thread; the
        run whose restored message ids are the longest prefix of the input's; the thread's head.
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
            ids = known if known is not None else lineage_ids(sent_messages)
            hashed = run_input.hashed if run_input is not None else None
            inferred = self._longest_prefix_run(tx, thread_pk, ids, hashed)
            if inferred is not None:
                return inferred, "messages"
        head = self.memory.head(tx, thread_pk)
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
        (``sent_chunks``, ``distinct``: what reading the input gave, see Input)."""
        if self._open_above(tx, thread_pk, parent_pk):
            return None  # a run above it still streams: its view may still change
        self.deriver.derive_underived(tx, thread_pk)  # the parent's view, kept in memory after
        cached = self.memory.cached_view(tx, thread_pk)
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
        if self.memory.known_status(tx, parent_pk) != "incomplete":
            try:
                base = verified.view(tx, parent_pk)
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
        input's message ids ``ids`` (:func:`lineage_ids` of its messages; the
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
        self.deriver.derive_underived(tx, thread_pk)  # every complete run is a candidate
        length_of: dict[bytes, int] | None = None
        cached = self.memory.cached_view(tx, thread_pk)
        if cached is not None:
            known = len(cached.lineage)
            if 0 < known <= len(ids):
                head = None
                if hashed is not None and hashed[0] <= known:
                    candidate = hash_ids(ids[hashed[0] : known], hashed[1])
                    if candidate.digest() == cached.ids_hasher.digest():
                        head = candidate
                elif ids[:known] == cached.lineage and set(map(type, cached.lineage)) == {str}:
                    head = cached.ids_hasher  # equal strings: the same digest, unhashed
                else:
                    candidate = hash_ids(ids[:known])
                    if candidate.digest() == cached.ids_hasher.digest():
                        head = candidate
                if head is not None:
                    length_of = prefix_digests(ids, head, known)
                    length_of[head.digest()] = known
        if length_of is None:
            length_of = prefix_digests(ids)
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
        if branch is not None:  # a name intake.read_batch checked
            refuse_branch_shadowing_run(tx, thread_pk, branch)
            tx.set_branch(thread_pk, branch, run_pk, now)
            self.memory.note_branched(thread_pk)
        elif parent_pk is not None and self.memory.has_branches(tx, thread_pk):
            tx.move_branches(thread_pk, parent_pk, run_pk, now)

    def _insert_synthetic_run(
        self, tx: port.Writing, thread_pk: int, thread_id: str, seq: int, now: int
    ) -> int:
        run_id = f"run-error-{seq}"
        parent_pk = self.memory.head(tx, thread_pk)
        lineage = "head" if parent_pk else "root"
        return self._insert_run_row(
            tx, thread_pk, thread_id, run_id, parent_pk, lineage, None, None, None,
            synthetic=True, now=now,
        )

    def _insert_run_row(
        self,
        tx: port.Writing,
        thread_pk: int,
        thread_id: str,
        run_id: str,
        parent_pk: int | None,
        lineage: str,
        sent_parent: str | None,
        input_text: str | None,
        refs_text: str | None,
        *,
        synthetic: bool,
        now: int,
    ) -> int:
        """Insert a run's row with its start hash (chained onto its parent's hash now, and
        its input's digest), remembered as the run's hash until its first batch; its pk."""
        parent_hash = self.memory.known_run_hash(tx, parent_pk) if parent_pk is not None else None
        input_hash = hashing.input_digest(input_text, refs_text)
        start_hash = hashing.start(
            thread_id=thread_id,
            run_id=run_id,
            lineage=lineage,
            sent_parent_run_id=sent_parent,
            synthetic=synthetic,
            created_at=now,
            parent_hash=parent_hash,
            input_hash=input_hash,
        )
        run_pk = tx.insert_run(
            port.NewRun(
                thread_pk=thread_pk,
                run_id=run_id,
                parent=parent_pk,
                lineage=lineage,
                sent_parent=sent_parent,
                input=input_text,
                input_refs=refs_text,
                synthetic=synthetic,
                created_at=now,
                parent_hash=parent_hash,
                input_hash=input_hash,
                start_hash=start_hash,
            )
        )
        self.memory.remember_run_hash(run_pk, start_hash)
        return run_pk

    def _normalize_echo(
        self, tx: port.Writing, thread_pk: int, run_pk: int, rows: list[Any]
    ) -> tuple[int, str] | None:
        """Store a RUN_STARTED's echoed input by reference to its lineage
        (docs/design/behaviour.md#compaction), like a recorded input: producers such as
        ag-ui-langgraph echo the whole history each run. ``rows[0]`` is the RUN_STARTED row; its
        payload is replaced when anything is shared, and the ``echo_refs`` row to insert after it
        is returned."""
        started = ingest.decode(rows[0][3].encode("utf-8"))
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
        rows[0] = (seq, rows[0][1], rows[0][2], ingest.encode(started).decode("utf-8"))
        return seq, ingest.encode(normalized[1]).decode("utf-8")


    def _verifier_for(self, tx: port.Reading, run_pk: int) -> SequenceVerifier:
        """The sequence state at the end of a recorded run (cached while nobody appends)."""
        cached = self.memory.verifier(tx, run_pk)
        if cached is not None:
            return cached
        last_seq = self.memory.known_last_seq(tx, run_pk)
        verifier = SequenceVerifier()
        try:
            for i, event in enumerate(verified.run_events(tx, run_pk)):
                verifier.feed(event, i)
        except SequenceError:
            # Recorded with check_sequence=False: its state is unknown, so a continuation
            # can only be judged on its own.
            verifier = SequenceVerifier()
        self.memory.keep_verifier(run_pk, last_seq, verifier)
        return verifier

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
                dropped = checkpoints.drop_derived_from(tx, segment.run_pk)
                self.deriver.leave_underived(tx, thread_pk, dropped)
            return
        if segment.outcome is None:
            return
        if not self.derive_on_append:
            self.deriver.leave_underived(tx, thread_pk, [segment.run_pk])
            return
        if self.memory.underived_may_include(thread_pk):
            # The run itself may be listed (an open run below one that changed, or below a
            # migration's): it is derived below, once, from the batch's own events.
            tx.clear_underived(segment.run_pk)
        self.deriver.derive_underived(tx, thread_pk)  # what another store left, if anything
        # The batch's own decoded events, as sent (echoes whole): fresh objects nobody else
        # holds, so the reducer may take them over.
        whole = segment.started is not None  # the batch holds the whole run
        events = [ev.data for ev in segment.events] if whole else None
        self.deriver.derive(tx, thread_pk, segment.run_pk, now, events, segment.run_row)


def refuse_branch_shadowing_run(tx: port.Reading, thread_pk: int, name: str) -> None:
    """A branch may not take the name of a run of its thread: the two would be the same
    revision (the run id would win, silently)."""
    if tx.run_pk(thread_pk, name) is not None:
        raise BranchError(
            f"branch name {_quote(name)} is the id of run {_quote(name)} of thread "
            f"{_quote(tx.thread_id(thread_pk))}, and would be shadowed by it as a revision: "
            "choose another name"
        )
    hidden = revisions.runs_hashed(tx, thread_pk, name)  # a branch wins over a short hash
    if hidden:
        raise BranchError(
            f"branch name {_quote(name)} begins the content hash of run "
            f"{_quote(hidden[0][0].run_id)} of thread {_quote(tx.thread_id(thread_pk))}, and "
            "would hide it as a revision: choose another name"
        )


def recorded_already(thread_id: str, run_id: str) -> str:
    """Why ``append`` refuses a ``RUN_STARTED`` of a run its thread holds, with advice for
    code that appends (the ASGI Recorder, whose requests cannot follow it, tells this reason
    by it and words its own)."""
    return (
        f"run {_quote(run_id)} is already recorded in thread {_quote(thread_id)}; a run is "
        "recorded once (continue a live run by appending events without a new RUN_STARTED)"
    )


def refuses_recorded_run(
    refusal: BaseException | None, thread_id: str | None, run_id: str | None
) -> bool:
    """Whether ``refusal`` is ``append``'s refusal of run ``run_id``, which thread
    ``thread_id`` holds (:func:`recorded_already`): a recorder tells it by this, and words
    advice of its own, as the store's is for code that appends."""
    return (
        isinstance(refusal, InvalidEventError)
        and thread_id is not None
        and run_id is not None
        and refusal.reason == recorded_already(thread_id, run_id)
    )
