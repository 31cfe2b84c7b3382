"""Replicating threads from one store to another as they were recorded: the engine's half
of ``copy`` (:mod:`agui_store.sync` is its edge: opening stores, progress, the summary).

Written once above the storage port, so it copies between any two backends. Runs land as
recorded (:meth:`port.Writing.insert_run`, :meth:`port.Writing.replicate_log`): run ids,
lineage, synthetic runs, inputs and echoed inputs as stored, every batch with its events,
outcome and time, creation times, branches and the thread's owner; and the pydantic-ai
conversations linked to the threads (:func:`plan_conversation`), entries, messages and
records with their revisions. Sequence numbers are the destination's own; hashes are
computed here as ``append`` computes them, over content alone
(:mod:`agui_store.history.hashing`), so a copied run has the source's hash.

Every function takes the transactions first: a plan reads both sides (:func:`plan_thread`,
:func:`plan_conversation`) and refuses a conflict before anything is written
(:class:`~agui_store.errors.SyncConflictError`); a :class:`Writer` lands the plans.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agui_store.engine import (
    arguments,
    checkpoints,
    clock,
    conversations,
    erasure,
    port,
    tombstones,
)
from agui_store.errors import (
    HashMismatchError,
    InvalidArgumentError,
    InvalidEventError,
    SyncConflictError,
)
from agui_store.history import hashing


class Source(Protocol):
    """What a copy reads of its source: a store's read transaction (:class:`port.Reading`)
    has it all, and so has an archive's thread being imported
    (:mod:`agui_store.engine.archive`)."""

    def thread(self, thread_id: str) -> tuple[int, str | None] | None:
        """As :meth:`port.Reading.thread`."""
    def thread_created_at(self, thread_pk: int) -> int:
        """As :meth:`port.Reading.thread_created_at`."""
    def replica_runs(self, thread_pk: int) -> list[port.ReplicaRun]:
        """As :meth:`port.Reading.replica_runs`."""
    def batches_of_runs(self, run_pks: Sequence[int]) -> Iterable[port.ChainedBatch]:
        """As :meth:`port.Reading.batches_of_runs`."""
    def events_of_runs(self, run_pks: Sequence[int]) -> Iterable[port.EventRow]:
        """As :meth:`port.Reading.events_of_runs`."""
    def branch_list(self, thread_pk: int) -> list[tuple[str, str, int]]:
        """As :meth:`port.Reading.branch_list`."""
    def conversation(self, conversation_id: str) -> port.ConversationRow | None:
        """As :meth:`port.Reading.conversation`."""
    def conversation_history(self, head_id: str, limit: int) -> list[port.EntryRow]:
        """As :meth:`port.Reading.conversation_history`."""
    def conversation_entry_key(self, entry_id: str) -> tuple[int, bytes, str] | None:
        """As :meth:`port.Reading.conversation_entry_key`."""
    def thread_custom_events(self, thread_id: str) -> list[tuple[str, str]]:
        """As :meth:`port.Reading.thread_custom_events`."""


#: Runs whose events one read fetches from the source while writing (bounds memory).
RUNS_PER_READ = 200

#: Events queued before one write lands them (bounds memory, and sets progress' pace).
EVENTS_PER_WRITE = 5_000

#: Called as events land: ``(events copied so far, events to copy)``.
ProgressCallback = Callable[[int, int], None]


# --- what one thread needs ------------------------------------------------------------------


@dataclass
class _SrcRun:
    pk: int
    run_id: str
    parent_id: str | None
    lineage: str
    sent_parent: str | None
    input_text: str | None
    refs_text: str | None
    synthetic: bool
    created_at: int
    parent_hash: bytes | None
    start_hash: bytes
    batches: list[port.BatchRow] = field(default_factory=list)

    def record(self) -> tuple[Any, ...]:
        """What a reader sees of the run's record (hashes and keys are local)."""
        return (
            self.parent_id,
            self.lineage,
            self.sent_parent,
            self.input_text,
            self.refs_text,
            self.synthetic,
            self.created_at,
        )

    def chain(self) -> list[bytes]:
        """The run's hashes: its chain's start, then after each batch."""
        return [self.start_hash, *(b[5] for b in self.batches)]

    def start_on(self, thread_id: str, parent_hash: bytes | None) -> bytes:
        """The run's start hash, its record and input hashed onto ``parent_hash``."""
        return hashing.start(
            thread_id=thread_id,
            run_id=self.run_id,
            lineage=self.lineage,
            sent_parent_run_id=self.sent_parent,
            synthetic=self.synthetic,
            created_at=self.created_at,
            parent_hash=parent_hash,
            input_hash=hashing.input_digest(self.input_text, self.refs_text),
        )


#: What a copy did when the source fails its hashes.
NOT_COPIED = "nothing was copied"


def check_start(thread_id: str, run: _SrcRun, done: str = NOT_COPIED) -> None:
    """Refuse a run whose record or input the source holds otherwise than its start hash
    covers: copying it, or writing it out, would give the edit hashes of its own. ``done``:
    what the refusal left undone."""
    if run.start_on(thread_id, run.parent_hash) != run.start_hash:
        raise _edited_in_source(
            thread_id, run.run_id, "its record or input differs from what its hash covers", done
        )


def check_batch(
    thread_id: str,
    run_id: str,
    before: bytes,
    rows: list[hashing.EventRow],
    batch: port.BatchRow,
    done: str = NOT_COPIED,
) -> bytes:
    """The digest of a batch (its events, ``rows`` in order, outcome and time), once found
    to be what its hash covers, chained on ``before`` (the run's hash before it, in the
    source); else refused."""
    _, first, last, outcome, appended_at, source_hash = batch
    digest = hashing.batch_digest(rows, outcome, appended_at)  # positions, not seqs
    if hashing.chain(before, digest) != source_hash:
        raise _edited_in_source(
            thread_id, run_id,
            f"its batch of seq {first}..{last} (events, outcome or time) differs from what "
            "its hash covers",
            done,
        )  # fmt: skip
    return digest


#: What a user can do about a run both sides hold with other content: runs are never
#: replaced, by a copy or an import, so one side's thread goes, and the other's comes back.
RUN_CONFLICT_ADVICE = (
    " (a run is never replaced: to keep the source's thread, erase it in the destination, "
    "then copy or import it with --restore-erased, restore_erased=True)"
)

_RECORD_FIELDS = (
    "lineage parent",
    "lineage reason",
    "sent parentRunId",
    "input",
    "input references",
    "synthetic flag",
    "created_at",
)


@dataclass
class ThreadPlan:
    """What one thread needs in the destination (:func:`plan_thread`)."""

    thread_id: str
    src_pk: int
    dst_pk: int | None
    created_at: int
    owner: str | None
    runs: list[_SrcRun]
    #: runs the destination lacks, in the source's run order
    missing: list[_SrcRun]
    #: ``(source run, destination pk, batches already there)``
    extended: list[tuple[_SrcRun, int, int]]
    present: int
    #: ``(name, run_id, updated_at)`` to set in the destination
    branches: list[tuple[str, str, int]]
    #: the destination's run pks by run id (the runs it held)
    dst_pks: dict[str, int]

    @property
    def events_to_copy(self) -> int:
        """How many events the plan lands."""
        count = sum(_batch_events(b) for run in self.missing for b in run.batches)
        for run, _, kept in self.extended:
            count += sum(_batch_events(b) for b in run.batches[kept:])
        return count

    @property
    def writes(self) -> bool:
        """Whether the plan writes anything."""
        return bool(self.missing or self.extended or self.branches or self.dst_pk is None)


def _batch_events(batch: port.BatchRow) -> int:
    return batch[2] - batch[1] + 1


def runs_of(tx: Source, thread_pk: int) -> list[_SrcRun]:
    """A thread's runs as recorded, in run order, each with its batches in order."""
    runs = [
        _SrcRun(
            pk=int(r.pk),
            run_id=str(r.run_id),
            parent_id=r.parent_run_id,
            lineage=str(r.lineage),
            sent_parent=r.sent_parent,
            input_text=r.input,
            refs_text=r.input_refs,
            synthetic=bool(r.synthetic),
            created_at=int(r.created_at),
            parent_hash=None if r.parent_hash is None else bytes(r.parent_hash),
            start_hash=bytes(r.start_hash or b""),  # none: the copy's hash checks fail
        )
        for r in tx.replica_runs(thread_pk)
    ]
    by_pk = {run.pk: run for run in runs}
    if runs:
        for b in tx.batches_of_runs(list(by_pk)):
            by_pk[int(b.run_pk)].batches.append(
                (
                    int(b.run_pk),
                    int(b.first_seq),
                    int(b.last_seq),
                    b.outcome,
                    int(b.appended_at),
                    bytes(b.hash or b""),  # none: the copy's hash checks fail
                )
            )
    return runs


def events_by_run(
    tx: Source, run_pks: Sequence[int]
) -> dict[int, list[tuple[int, str, str, str | None]]]:
    """``run pk -> [(seq, type, payload, echo refs)]``, in order."""
    out: dict[int, list[tuple[int, str, str, str | None]]] = {pk: [] for pk in run_pks}
    if run_pks:
        for run_pk, seq, kind, payload, refs in tx.events_of_runs(list(run_pks)):
            out[int(run_pk)].append((int(seq), str(kind), str(payload), refs))
    return out


def plan_thread(
    src: Source, dst: port.Reading, thread_id: str, force: bool = False, *,
    forceable: bool = True,
) -> ThreadPlan:
    """Compare one thread on both sides: what the destination lacks, or the conflict.

    The one place a thread's copy is decided: what the source holds of it is read here, so
    a rule that keeps a thread, or some of it, from leaving the source belongs here."""
    found = src.thread(thread_id)
    assert found is not None
    src_pk, owner = found
    runs = runs_of(src, src_pk)
    _refuse_unstorable(src, thread_id, src_pk, owner, runs)
    dst_found = dst.thread(thread_id)
    dst_runs: dict[str, _SrcRun] = {}
    if dst_found is not None:
        if dst_found[1] != owner:
            raise SyncConflictError(
                f"its owner (scope) is {owner!r} in the source but {dst_found[1]!r} in the "
                "destination",
                thread_id=thread_id,
            )
        dst_runs = {run.run_id: run for run in runs_of(dst, dst_found[0])}
    missing: list[_SrcRun] = []
    extended: list[tuple[_SrcRun, int, int]] = []
    present = 0
    overlapping: list[tuple[_SrcRun, _SrcRun]] = []
    for run in runs:
        there = dst_runs.get(run.run_id)
        if there is None:
            missing.append(run)
            continue
        for name, mine, theirs in zip(_RECORD_FIELDS, run.record(), there.record()):
            if mine != theirs:
                if name == "created_at":  # milliseconds since the epoch, shown as times
                    mine, theirs = clock.shown(int(mine)), clock.shown(int(theirs))
                raise SyncConflictError(
                    f"its {name} is {_shown(mine)} in the source but {_shown(theirs)} in the "
                    f"destination{RUN_CONFLICT_ADVICE}",
                    thread_id=thread_id,
                    run_id=run.run_id,
                )
        for n, (mine_b, theirs_b) in enumerate(zip(run.batches, there.batches)):
            mine_shape = (_batch_events(mine_b), mine_b[3], mine_b[4])
            theirs_shape = (_batch_events(theirs_b), theirs_b[3], theirs_b[4])
            if mine_shape != theirs_shape:
                raise SyncConflictError(
                    _batch_difference(n, mine_shape, theirs_shape) + RUN_CONFLICT_ADVICE,
                    thread_id=thread_id,
                    run_id=run.run_id,
                )
        overlapping.append((run, there))
        if len(there.batches) < len(run.batches):
            extended.append((run, there.pk, len(there.batches)))
        else:  # whole, or more of it than the source (a copy made while it streamed)
            present += 1
    _compare_events(src, dst, thread_id, overlapping)
    branches = _branches_to_set(
        src, dst, thread_id, src_pk, dst_found, runs, force, forceable=forceable
    )
    return ThreadPlan(
        thread_id=thread_id,
        src_pk=src_pk,
        dst_pk=None if dst_found is None else dst_found[0],
        created_at=src.thread_created_at(src_pk),
        owner=owner,
        runs=runs,
        missing=missing,
        extended=extended,
        present=present,
        branches=branches,
        dst_pks={run_id: run.pk for run_id, run in dst_runs.items()},
    )


def _batch_difference(
    n: int, mine: tuple[int, str | None, int], theirs: tuple[int, str | None, int]
) -> str:
    """What differs in a run's batch ``n`` on the two sides (its number of events, outcome
    and time, each ``(events, outcome, appended_at)``), in words: times as times, as a
    differing ``created_at`` is shown."""
    said = []
    if mine[0] != theirs[0]:
        said.append(f"holds {mine[0]} events in the source but {theirs[0]} in the destination")
    if mine[1] != theirs[1]:
        said.append(f"records the outcome {mine[1]!r} in the source but {theirs[1]!r} in "
                    "the destination")  # fmt: skip
    if mine[2] != theirs[2]:
        said.append(f"was appended at {clock.shown(int(mine[2]))} in the source but at "
                    f"{clock.shown(int(theirs[2]))} in the destination")  # fmt: skip
    return f"its batch {n} " + ", and ".join(said)


def _refuse_unstorable(
    src: Source, thread_id: str, src_pk: int, owner: str | None, runs: list[_SrcRun]
) -> None:
    """A thread holding a value this version refuses on intake (a NUL, which releases
    before it accepted, or an edit made outside the store) in its id, owner, a run's
    record or a branch's name is not carried anywhere: PostgreSQL cannot hold it, and a
    copy is a write like any other, refused before anything is written. (An event's
    payload and a run's input are JSON, whose text holds neither: a NUL or a lone
    surrogate is an escape, which every store holds, and the hashes cover their bytes.)
    The message names the way out, in Python, since no command line can pass a NUL."""
    ids = [("id", thread_id), ("owner", owner)]
    texts: list[tuple[str, str | None]] = []
    for run in runs:
        named = f"run {arguments.quote(run.run_id)}'s"
        ids += [(f"{named} id", run.run_id), (f"{named} sent parentRunId", run.sent_parent)]
        texts.append((f"{named} lineage reason", run.lineage))
    ids += [(f"branch {arguments.quote(str(name))}'s name", str(name))
            for name, _, _ in src.branch_list(src_pk)]  # fmt: skip
    found = arguments.first_unstorable(ids)
    if found is None:
        found = arguments.first_unstorable(texts, text=True)
    if found is not None:
        raise InvalidEventError(
            f"thread {arguments.quote(thread_id)} of the source cannot be copied: its "
            f"{found[0]} {found[1]}, and this version refuses such values; erase the thread "
            f"in the source (Store(...).delete_thread({arguments.quote(thread_id)})) or copy "
            "others by name"
        )


def _compare_events(
    src: Source,
    dst: port.Reading,
    thread_id: str,
    overlapping: list[tuple[_SrcRun, _SrcRun]],
) -> None:
    """Refuse a run whose events differ: those the destination holds must be the source's
    first ones (type, payload bytes and echo references, in order)."""
    for start in range(0, len(overlapping), RUNS_PER_READ):
        chunk = overlapping[start : start + RUNS_PER_READ]
        mine = events_by_run(src, [run.pk for run, _ in chunk])
        theirs = events_by_run(dst, [there.pk for _, there in chunk])
        for run, there in chunk:
            kept = theirs[there.pk]
            for n, (a, b) in enumerate(zip(mine[run.pk], kept)):
                if a[1:] != b[1:]:
                    part = "type" if a[1] != b[1] else "payload" if a[2] != b[2] else "echo"
                    raise SyncConflictError(
                        f"its event {n} ({a[1]}) differs in its {part}{RUN_CONFLICT_ADVICE}",
                        thread_id=thread_id,
                        run_id=run.run_id,
                    )


def _branches_to_set(
    src: Source,
    dst: port.Reading,
    thread_id: str,
    src_pk: int,
    dst_found: tuple[int, str | None] | None,
    runs: list[_SrcRun],
    force: bool,
    *,
    forceable: bool = True,
) -> list[tuple[str, str, int]]:
    """The source's branches the destination lacks or holds behind (fast-forward only,
    unless ``force``; ``forceable``: whether the caller can force, which its refusal
    advises)."""
    theirs = (
        {name: (run_id, updated) for name, run_id, updated in dst.branch_list(dst_found[0])}
        if dst_found is not None
        else {}
    )
    parent_of = {run.run_id: run.parent_id for run in runs}
    out: list[tuple[str, str, int]] = []
    for name, run_id, updated_at in src.branch_list(src_pk):
        there = theirs.get(name)
        if there is None:
            out.append((str(name), str(run_id), int(updated_at)))
            continue
        if there[0] == run_id:
            # The same tip: only a later setting of it (moved away and back) is news.
            if int(updated_at) > int(there[1]):
                out.append((str(name), str(run_id), int(updated_at)))
            continue
        if not force and not _is_ancestor(parent_of, there[0], run_id):
            raise SyncConflictError(
                f"it points at run {there[0]!r} in the destination and {run_id!r} in the "
                "source, which does not descend from it (not a fast-forward: move or delete "
                f"one side's branch first{', or force the copy' if forceable else ''})",
                thread_id=thread_id,
                branch=str(name),
            )
        out.append((str(name), str(run_id), int(updated_at)))
    return out


def _is_ancestor(parent_of: dict[str, str | None], ancestor: str, run_id: str | None) -> bool:
    """Whether ``ancestor`` is on ``run_id``'s lineage in the source."""
    while run_id is not None:
        if run_id == ancestor:
            return True
        run_id = parent_of.get(run_id)
    return False




def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- writing --------------------------------------------------------------------------------


class Writer:
    """Lands planned runs in the destination, computing its sequence numbers and hashes."""

    def __init__(
        self,
        src: Source,
        dst: port.Writing,
        total: int,
        progress: ProgressCallback | None,
    ) -> None:
        self.src = src
        self.dst = dst
        self.next_seq = dst.next_seq()
        self.total = total
        self.done = 0
        self.progress = progress
        # What the next write lands (runs are inserted as they are met, before these).
        self._events: list[tuple[int, int, str, str]] = []
        self._echoes: list[tuple[int, str]] = []
        self._batches: list[port.BatchRow] = []

    def thread(self, plan: ThreadPlan) -> list[int]:
        """Write one thread's plan; the destination pks of runs left underived."""
        dst = self.dst
        thread_pk = plan.dst_pk
        if thread_pk is None:
            thread_pk = dst.insert_thread(plan.thread_id, plan.created_at, plan.owner)
        pks = dict(plan.dst_pks)
        # Each run's hashes in the destination (its chain's start, then after each batch),
        # by run id, so that a child's parent hash is the parent's at the same point.
        chains: dict[str, list[bytes]] = {}
        src_chains = {run.run_id: run.chain() for run in plan.runs}
        # Batches land in the order the source wrote them (its sequence order), each run
        # placed just before its first: a run placed while its parent streamed covers the
        # parent's hash at that point, and checks read placement from batch order.
        missing = {run.run_id for run in plan.missing}
        items: list[tuple[_SrcRun, port.BatchRow]] = [
            (run, batch) for run in plan.missing for batch in run.batches
        ]
        for run, run_pk, kept in plan.extended:
            chains[run.run_id] = self._dst_chain(run_pk)
            items += [(run, batch) for batch in run.batches[kept:]]
        items.sort(key=lambda item: item[1][1])
        positions = {(run.pk, b[1]): at for run in plan.runs for at, b in enumerate(run.batches)}
        remaining: dict[int, int] = {}
        for run, _ in items:
            remaining[run.pk] = remaining.get(run.pk, 0) + 1
        events: dict[int, dict[int, tuple[int, str, str, str | None]]] = {}
        underived: set[int] = set()
        for n, (run, batch) in enumerate(items):
            if run.pk not in events:
                # This run's events and those of the next runs met, in one read.
                wanted: list[int] = []
                for later, _ in items[n:]:
                    if later.pk not in events and later.pk not in wanted:
                        wanted.append(later.pk)
                        if len(wanted) == RUNS_PER_READ:
                            break
                for run_pk, rows in events_by_run(self.src, wanted).items():
                    events[run_pk] = {row[0]: row for row in rows}
            if run.run_id in missing and run.run_id not in pks:
                pks[run.run_id] = self._place(plan.thread_id, thread_pk, run, pks, chains,
                                              src_chains)
            at = positions[run.pk, batch[1]]
            self._batch(
                pks[run.run_id], batch, chains[run.run_id], events[run.pk],
                _Checked(plan.thread_id, run.run_id, src_chains[run.run_id][at]),
            )
            if batch[3] is not None:
                underived.add(pks[run.run_id])
            remaining[run.pk] -= 1
            if not remaining[run.pk]:
                del events[run.pk]
        self._flush()
        for _run, run_pk, _kept in plan.extended:
            # Events after what it held change what derives from it and from runs below.
            underived.update(checkpoints.drop_derived_from(dst, run_pk))
        for name, run_id, updated_at in plan.branches:
            dst.set_branch(thread_pk, name, pks[run_id], updated_at)
        if underived:
            dst.mark_underived(sorted(underived))
        return sorted(underived)

    def _place(
        self,
        thread_id: str,
        thread_pk: int,
        run: _SrcRun,
        pks: dict[str, int],
        chains: dict[str, list[bytes]],
        src_chains: dict[str, list[bytes]],
    ) -> int:
        """Insert a run's record, hashed onto its parent's hash at the point the source's
        was when the run was placed."""
        parent_pk = None if run.parent_id is None else pks[run.parent_id]
        parent_hash = None
        if run.parent_id is not None:
            parent_chain = chains.get(run.parent_id)
            if parent_chain is None:
                assert parent_pk is not None
                parent_chain = chains[run.parent_id] = self._dst_chain(parent_pk)
            parent_hash = _same_point(src_chains[run.parent_id], parent_chain, run.parent_hash)
        input_hash = hashing.input_digest(run.input_text, run.refs_text)
        # The source's own start hash covers its record and input as the source holds them:
        # an edit made there is refused, not given fresh hashes here.
        check_start(thread_id, run)
        start_hash = run.start_on(thread_id, parent_hash)
        run_pk = self.dst.insert_run(
            port.NewRun(
                thread_pk=thread_pk,
                run_id=run.run_id,
                parent=parent_pk,
                lineage=run.lineage,
                sent_parent=run.sent_parent,
                input=run.input_text,
                input_refs=run.refs_text,
                synthetic=run.synthetic,
                created_at=run.created_at,
                parent_hash=parent_hash,
                input_hash=input_hash,
                start_hash=start_hash,
            )
        )
        chains[run.run_id] = [start_hash]
        return run_pk

    def _dst_chain(self, run_pk: int) -> list[bytes]:
        (record,) = self.dst.run_records([run_pk])
        chain = [bytes(record.start_hash or b"")]
        chain += [bytes(batch.hash or b"") for batch in self.dst.batches_of_runs([run_pk])]
        return chain

    def _batch(
        self,
        run_pk: int,
        batch: port.BatchRow,
        chain: list[bytes],
        events: dict[int, tuple[int, str, str, str | None]],
        checked: _Checked,
    ) -> None:
        """Queue one batch with the destination's next sequence numbers, hashed onto the
        run's chain as ``append`` hashes it, once its events are found to be the ones the
        source's hash covers (``checked``: the batch there, and the hash before it)."""
        _, first, last, outcome, appended_at, _ = batch
        first_seq = seq = self.next_seq
        hashed: list[hashing.EventRow] = []
        for src_seq in range(first, last + 1):
            _, kind, payload, refs = events[src_seq]
            self._events.append((seq, run_pk, kind, payload))
            if refs is not None:
                self._echoes.append((seq, refs))
            hashed.append((seq, kind, payload, refs))
            seq += 1
        digest = check_batch(checked.thread_id, checked.run_id, checked.before, hashed, batch)
        batch_hash = hashing.chain(chain[-1], digest)
        chain.append(batch_hash)
        self._batches.append((run_pk, first_seq, seq - 1, outcome, appended_at, batch_hash))
        self.next_seq = seq
        if len(self._events) >= EVENTS_PER_WRITE:
            self._flush()

    def _flush(self) -> None:
        if not self._batches:
            return
        self.dst.replicate_log(self._events, self._echoes, self._batches)
        self.done += len(self._events)
        self._events, self._echoes, self._batches = [], [], []
        if self.progress is not None:
            self.progress(self.done, self.total)


@dataclass(frozen=True)
class _Checked:
    """Where a batch being copied stands in the source: what its hash is checked against."""

    thread_id: str
    run_id: str
    before: bytes  # the run's hash before it, in the source


def _edited_in_source(
    thread_id: str, run_id: str, what: str, done: str = NOT_COPIED
) -> HashMismatchError:
    """A run the source holds otherwise than its hashes say: copying it would give the edit
    hashes of its own."""
    return HashMismatchError(
        f"in the source, {what}",
        thread_id=thread_id,
        run_id=run_id,
        advice="the source was changed outside agui-store or is damaged ('agui-store check' "
        f"on it lists what differs); {done}",
    )


def _same_point(src_chain: list[bytes], dst_chain: list[bytes], parent_hash: bytes | None) -> bytes:
    """The destination's parent hash for a run: the parent's hash at the point in its chain
    where the source's was when the run was placed (its newest, if the source's is not on
    its chain: a file whose hashes were backfilled)."""
    if parent_hash is not None and parent_hash in src_chain:
        at = src_chain.index(parent_hash)
        if at < len(dst_chain):
            return dst_chain[at]
    return dst_chain[-1]




# --- conversations --------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceEntry:
    """A conversation entry as the source holds it, verified against its hashes."""

    entry_id: str
    parent_id: str | None
    kind: str
    message: str
    address: bytes
    hash: bytes
    conversation: str


@dataclass
class ConversationPlan:
    """What one conversation needs in the destination."""

    record: conversations.Record
    #: the entries the destination lacks, each after its parent
    entries: list[SourceEntry]
    #: the destination's record key (``None``: it has none), and whether the record is written
    dst_pk: int | None
    writes_record: bool


def entry_ids(tx: Source, row: port.ConversationRow) -> list[str]:
    """The ids of every entry a stored conversation reaches (its head's history and each
    branch's), each once."""
    record = conversations.record_of(row)
    found: dict[str, None] = {}
    for tip in (record.head_id, *record.branches):
        if tip is not None and tip not in found:
            found.update(
                (str(r[0]), None) for r in tx.conversation_history(tip, conversations.EVERY)
            )
    return list(found)


def source_entries(tx: Source, record: conversations.Record) -> list[SourceEntry]:
    """Every entry a record reaches (its head's history, then each branch's), each once and
    after its parent, verified against its hashes (an entry edited outside the store is
    refused, not copied)."""
    out: dict[str, SourceEntry] = {}
    for tip in (record.head_id, *record.branches):
        if tip is None or tip in out:
            continue
        history = tx.conversation_history(tip, conversations.EVERY)
        if not history or str(history[-1][0]) != tip or history[0][1] is not None:
            # The history stops short: an entry on it is missing (a line lost from an
            # archive, a row deleted by hand).
            gone = tip if not history or str(history[-1][0]) != tip else str(history[0][1])
            raise HashMismatchError(
                f"conversation {record.conversation_id!r}: entry {gone!r}, on the history "
                "of its head or a branch, is missing in the source"
            )
        for entry_id, parent_id, kind, message, stored, address, parent_hash in history:
            entry_id = str(entry_id)
            if entry_id in out:
                continue
            address = bytes(address)
            text = str(message)
            parent = None if parent_hash is None else bytes(parent_hash)
            own = conversations.entry_hash(entry_id, str(kind), address, parent)
            if (
                conversations.message_hash(text.encode("utf-8", "surrogatepass")) != address
                or own != bytes(stored)
            ):
                raise HashMismatchError(
                    f"conversation {record.conversation_id!r}: entry {entry_id!r} fails its "
                    "hash in the source"
                )
            key = tx.conversation_entry_key(entry_id)
            out[entry_id] = SourceEntry(
                entry_id,
                None if parent_id is None else str(parent_id),
                str(kind),
                text,
                address,
                own,
                record.conversation_id if key is None else str(key[2]),
            )
    return list(out.values())


def _refuse_unstorable_conversation(
    record: conversations.Record, entries: Sequence[SourceEntry]
) -> None:
    """A conversation holding a value this version refuses on a save or an import (a NUL,
    which releases before it accepted in a revision or an entry's kind, or an edit made
    outside the store) is not carried anywhere, as a thread holding one is not: refused
    by name before anything is written."""
    ids = [("id", record.conversation_id), ("scope", record.scope), ("head", record.head_id),
           ("revision", record.revision)]  # fmt: skip
    ids += [(f"branch {n}", tip) for n, tip in enumerate(record.branches)]
    texts: list[tuple[str, str | None]] = [("fields", record.record)]
    for entry in entries:
        named = f"entry {arguments.quote(entry.entry_id)}'s"
        ids += [(f"{named} id", entry.entry_id), (f"{named} parent", entry.parent_id),
                (f"{named} kind", entry.kind), (f"{named} conversation", entry.conversation)]
        texts.append((f"{named} message", entry.message))
    found = arguments.first_unstorable(ids)
    if found is None:
        found = arguments.first_unstorable(texts, text=True)
    if found is not None:
        cid = arguments.quote(record.conversation_id)
        raise InvalidArgumentError(
            f"conversation {cid} of the source cannot be copied: its {found[0]} {found[1]}, "
            "and this version refuses such values; erase the conversation in the source "
            f"(ConversationStore(...).delete_record({cid}, ...)) or copy threads by name"
        )


def plan_conversation(
    src: Source, dst: port.Reading, conversation_id: str, thread_id: str | None, force: bool,
    *, forceable: bool = True,
) -> ConversationPlan:
    """Compare one conversation on both sides (of the thread ``thread_id``, ``None`` when no
    thread links to it): the entries the destination lacks, and whether its record is
    written (it has none, or one saved no later whose history the source's holds;
    ``force``: any other), or the conflict (``forceable``: whether the caller can force,
    which its refusal advises). A source's record saved before the destination's (an
    older copy of it: ``updated_at``), reaching nothing the destination's does not, is
    behind it and writes nothing, as a save that kept the head (a rename, new usage)
    leaves the destination's newer than it."""
    row = src.conversation(conversation_id)
    assert row is not None
    record = conversations.record_of(row)
    entries = source_entries(src, record)
    _refuse_unstorable_conversation(record, entries)
    missing: list[SourceEntry] = []
    for entry in entries:
        key = dst.conversation_entry_key(entry.entry_id)
        if key is None:
            missing.append(entry)
        elif bytes(key[1]) != entry.hash:
            raise SyncConflictError(
                f"its entry {entry.entry_id!r} has other content in the destination",
                thread_id=thread_id, conversation_id=conversation_id,
            )
    there = dst.conversation(conversation_id)
    if there is None:
        return ConversationPlan(record, missing, None, True)
    theirs = conversations.record_of(there)
    if theirs == record:
        return ConversationPlan(record, missing, int(there[0]), False)
    history = {entry.entry_id for entry in entries}
    if not force and theirs.head_id is not None and theirs.head_id not in history:
        ahead = record.head_id is not None and record.head_id in {
            entry.entry_id for entry in source_entries(dst, theirs)
        }
        raise SyncConflictError(
            f"it is at revision {theirs.revision!r} in the destination and "
            f"{record.revision!r} in the source, whose history does not hold the "
            "destination's head ("
            + ("the destination moved on from the source's: copy the other way"
               if ahead else "both moved on: save or delete one side first")
            + (", or force the copy)" if forceable else ")"),
            thread_id=thread_id, conversation_id=conversation_id,
        )
    if force:
        return ConversationPlan(record, missing, int(there[0]), True)
    reached = set(entry_ids(dst, there))
    if record.updated_at < theirs.updated_at and history <= reached:
        return ConversationPlan(record, [], int(there[0]), False)  # behind the destination's
    if record.updated_at < theirs.updated_at or not reached <= history:
        raise SyncConflictError(
            f"it is at revision {theirs.revision!r} in the destination, saved "
            f"{_saved(theirs)}, and {record.revision!r} in the source, saved "
            f"{_saved(record)}: "
            + ("the destination's holds a branch the source's does not"
               if record.updated_at >= theirs.updated_at
               else "the source's is older but holds entries the destination's does not")
            + " (both moved on: save or delete one side first"
            + (", or force the copy)" if forceable else ")"),
            thread_id=thread_id, conversation_id=conversation_id,
        )
    return ConversationPlan(record, missing, int(there[0]), True)


def _saved(record: conversations.Record) -> str:
    """When a record was saved, as a time (its ``updated_at`` is in microseconds)."""
    return clock.shown(record.updated_at // 1000)


def erased_names(dst: port.Reading, plans: Sequence[ConversationPlan]) -> frozenset[str]:
    """The conversations the plans name, as a fork's origin or as the conversation whose
    save stored an entry, that the destination erased (a tombstone of the id) and holds
    no longer, and that none of the plans lands."""
    landing = {plan.record.conversation_id for plan in plans}
    named = {entry.conversation for plan in plans for entry in plan.entries}
    named.update(o for plan in plans if (o := conversations.forked_from(plan.record)))
    hashes = {
        tombstones.conversation_hash(cid): cid
        for cid in sorted(named - landing)
        if dst.conversation(cid) is None
    }
    stones = dst.tombstoned(sorted(hashes)) if hashes else {}
    return frozenset(hashes[stone] for stone in stones)


def write_conversations(
    dst: port.Writing,
    plans: Sequence[ConversationPlan],
    replaced: list[conversations.Record] | None = None,
) -> int:
    """Land the conversations' plans, made against the same destination; how many wrote
    anything (``replaced``: as :func:`write_conversation` takes it). What the destination
    erased stays out of what they land, as the erasure left it
    (:func:`conversations.forget_erased`): a fork of a conversation it erased lands no
    longer naming it, and the entries that conversation stored are the fork's."""
    erased = erased_names(dst, plans)
    landed: dict[str, int] = {}
    written = sum(write_conversation(dst, plan, landed, replaced, erased) for plan in plans)
    if erased:
        conversations.forget_erased(dst, erased)
    return written


def write_conversation(
    dst: port.Writing,
    plan: ConversationPlan,
    landed: dict[str, int] | None = None,
    replaced: list[conversations.Record] | None = None,
    erased: Container[str] = (),
) -> bool:
    """Land a conversation's plan; whether anything was written. ``landed``: the entries
    (id -> key) written by the plans landed before it, made against the same destination:
    conversations forked from one another share entries, and each plan lists them.
    ``replaced`` is given the record it replaced, to release once every plan made with
    this one has landed (another may count on what it reached); without it, the history
    the replaced record alone reached is released at once. A record forked from one of
    ``erased`` lands no longer naming it (:func:`conversations.without_origin`): not at all
    when the destination holds it so already."""
    keys = {} if landed is None else landed

    def key_of(entry_id: str) -> int:
        if entry_id not in keys:
            found = dst.conversation_entry_key(entry_id)
            assert found is not None  # planned: the destination has it, or it came first
            keys[entry_id] = int(found[0])
        return keys[entry_id]

    wrote = False
    for entry in plan.entries:
        if entry.entry_id in keys:
            continue  # a plan landed before this one wrote it
        wrote = True
        message = dst.conversation_message_id(entry.address)
        if message is None:
            message = dst.insert_conversation_message(entry.address, entry.message)
        keys[entry.entry_id] = dst.insert_conversation_entry(
            entry.entry_id,
            None if entry.parent_id is None else key_of(entry.parent_id),
            message,
            entry.kind,
            entry.conversation,
            entry.hash,
        )
    if not plan.writes_record:
        return wrote
    record = plan.record
    there = None if plan.dst_pk is None else dst.conversation(record.conversation_id)
    forgotten = conversations.without_origin(record, erased)
    if forgotten is not None:
        record = forgotten
        if there is not None and conversations.record_of(there) == dataclasses.replace(
            record, revision=str(there.revision)
        ):
            return wrote  # the destination's, its origin forgotten by the erasure
    head = None if record.head_id is None else key_of(record.head_id)
    digest = conversations.record_hash(record)
    if plan.dst_pk is None:
        pk = dst.insert_conversation(
            record.conversation_id, head, record.scope, record.revision, record.updated_at,
            record.record, digest,
        )  # fmt: skip
        dst.set_conversation_branches(pk, [key_of(tip) for tip in record.branches])
        return True
    pk = plan.dst_pk
    assert there is not None  # planned against it, in this transaction
    dst.update_conversation(
        pk, head, record.scope, record.revision, record.updated_at, record.record, digest
    )
    dst.set_conversation_branches(pk, [key_of(tip) for tip in record.branches])
    # What the record replaced (a forced copy over a conversation both sides moved on)
    # goes where nothing reaches it any more, as a save's delete releases it.
    if replaced is None:
        conversations.release_history(dst, conversations.record_of(there))
    else:
        replaced.append(conversations.record_of(there))
    return True


# --- erasures: kept out of a copy, carried by it (agui_store.engine.erasure) -----------------


def _covered(tx: Source, thread_id: str, erased_at: int) -> int | None:
    """The key of ``tx``'s thread ``thread_id`` when a tombstone laid at ``erased_at``
    covers it (:func:`tombstones.covers`), else ``None``."""
    found = tx.thread(thread_id)
    if found is None or not tombstones.covers(erased_at, tx.thread_created_at(found[0])):
        return None
    return int(found[0])


def refuse_joining(dst: port.Reading, thread_id: str, erased_at: int) -> None:
    """Refuse to restore the erased thread ``thread_id`` into a destination that wrote a
    thread under its id since its erasure (tombstone at ``erased_at``): the two would
    join."""
    if dst.thread(thread_id) is not None and _covered(dst, thread_id, erased_at) is None:
        raise SyncConflictError(
            f"thread {arguments.quote(thread_id)} was written again in the destination "
            "since it was erased there: restoring the erased one would join the two "
            "(delete the new one first, or copy without restoring)",
            thread_id=thread_id,
        )


def leave_erased(
    src: Source, dst: port.Writing, thread_ids: Sequence[str], restore: bool
) -> list[str]:
    """The threads to copy: those the destination erased (a tombstone there covers the
    source's thread, :func:`tombstones.covers`) are left out, unless ``restore``, which takes
    their tombstones away to copy them back."""
    hashes = {tombstones.thread_hash(t): t for t in thread_ids}
    stones = dst.tombstoned(sorted(hashes)) if hashes else {}
    erased = {h for h, at in stones.items() if _covered(src, hashes[h], at) is not None}
    if restore:
        for h in sorted(erased):
            refuse_joining(dst, hashes[h], stones[h])
        if erased:
            dst.delete_tombstones(sorted(erased))
        return list(thread_ids)
    gone = {hashes[h] for h in erased}
    return [t for t in thread_ids if t not in gone]


def carry_erasures(
    src: port.Reading,
    dst: port.Writing,
    scope: str | None,
    source_stones: dict[bytes, int],
    thread_ids: Sequence[str] | None = None,
) -> tuple[int, int]:
    """The source's tombstones, carried to the destination; the threads they cover there
    (of ``scope``'s, with one) are erased, logged as erased by ``copy``, their tombstones
    at the source's times. How many threads and conversations were. A thread the source
    holds under an erased id was written after the erasure: it is copied as any thread
    is, and the destination's older thread of that id is erased first. A tombstone that
    covers a thread the source still holds (a thread written in the millisecond of its
    erasure, or by a clock behind) is not carried: the source's live thread is what it
    holds. The destination's conversations the source's tombstones cover
    (:func:`erasure.conversation_covered`: those holding an entry the erased conversation
    of their id reached, or saved at or before its erasure) are erased too, whatever
    links them to a thread. With ``thread_ids`` (a copy of those threads alone), only
    their tombstones are carried, and those of the conversations linked to them that the
    source's cover.
    ``source_stones``: the source's tombstones, as ``tombstones()`` reads them."""
    if not source_stones:
        return 0, 0
    stones = dict(source_stones)
    for thread_id in src.thread_ids(None) if thread_ids is None else thread_ids:
        stone = tombstones.thread_hash(thread_id)
        at = stones.get(stone)
        if at is not None and _covered(src, thread_id, at) is not None:
            del stones[stone]
    if thread_ids is not None:
        wanted = {tombstones.thread_hash(t) for t in thread_ids}
        stones = {h: at for h, at in stones.items() if h in wanted}
    if not stones and thread_ids is None:
        return 0, 0  # every tombstone covers a thread the source holds
    # A scoped copy erases that owner's threads and conversations alone, and lays no
    # tombstone over another owner's that it leaves: a store never holds what its own
    # tombstone says it erased.
    thread_times: dict[str, int] = {}
    pks: list[int] = []
    for thread_id in dst.thread_ids(None) if thread_ids is None else thread_ids:
        stone = tombstones.thread_hash(thread_id)
        at = stones.get(stone)
        found = None if at is None else dst.thread(thread_id)
        if at is None or found is None or _covered(dst, thread_id, at) is None:
            continue
        if scope is not None and found[1] != scope:
            del stones[stone]
            continue
        thread_times[thread_id] = at
        pks.append(found[0])
    talk_times: dict[str, int] = {}
    if thread_ids is None:
        rows = dst.conversations(None, conversations.EVERY)
    else:  # a copy of these threads: the conversations linked to them
        named = {c for t in thread_ids for c in conversations.linked(dst, t)}
        rows = [r for c in sorted(named) if (r := dst.conversation(c)) is not None]
    for row in rows:
        cid = str(row.conversation_id)
        if tombstones.conversation_hash(cid) not in source_stones:
            continue  # no conversation of its id was erased there: its history is not read
        covered = erasure.conversation_covered(
            source_stones, cid, entry_ids(dst, row), int(row.updated_at)
        )
        if covered is None:
            continue
        if scope is not None and row.scope != scope:
            stones_of_id = (tombstones.conversation_hash(cid), tombstones.entries_stone(cid))
            for stone in (*covered[1], *stones_of_id):
                stones.pop(stone, None)
            continue
        talk_times[cid] = covered[0]
        if thread_ids is not None:  # its tombstones come with it
            stones.update((s, source_stones[s]) for s in covered[1])
    talks_erased = 0
    if pks or talk_times:
        talks_erased = erasure.erase(
            dst, pks, "copy", clock.now_ms(), erased_at=thread_times,
            conversation_times=talk_times, with_linked=False,
        ).conversations  # fmt: skip
    erasure.lay_tombstones(dst, stones)
    return len(pks), talks_erased


def leave_erased_conversation(
    dst: port.Writing,
    src: Source,
    row: port.ConversationRow,
    restore: bool,
    source_stones: Container[bytes],
) -> bool:
    """Whether the destination erased this conversation of the source ``src``, which is
    then left out; ``restore`` takes the tombstones that cover it away instead. It is
    erased there when it holds an entry the erased conversation of its id reached, or was
    saved at or before that erasure (:func:`erasure.conversation_covered`). Where the
    destination's erasure laid no tombstone per entry (an earlier version's), its
    tombstone covers the id: the source's conversation comes in only when the source
    holds that tombstone too, from its own erasure, and saved the conversation since."""
    cid = str(row.conversation_id)
    named, marked = tombstones.conversation_hash(cid), tombstones.entries_stone(cid)
    if not dst.tombstoned([named]):
        return False  # no conversation of its id was erased here: its history is not read
    entries = entry_ids(src, row)
    stones = dst.tombstoned([named, marked, *(tombstones.entry_stone(cid, e) for e in entries)])
    covered = erasure.conversation_covered(stones, cid, entries, int(row.updated_at))
    if covered is None and named in stones and marked not in stones:
        # An earlier version's erasure: the id alone, whenever the source saved it.
        covered = (stones[named], [named]) if named not in source_stones else None
    if covered is None:
        return False
    if restore:
        dst.delete_tombstones(sorted({named, marked, *covered[1]} & set(stones)))
        return False
    return True


# --- a whole copy ---------------------------------------------------------------------------


@dataclass
class Replicated:
    """What :func:`replicate` wrote, and the threads whose runs are left to derive (those it
    left, and those of the threads copied that were waiting already).

    ``erased``: threads of the destination erased because the source erased them
    (``erased_conversations``: conversations); ``left_erased``: threads the destination
    erased, left out of the copy."""

    plans: list[ThreadPlan]
    conversations: int
    events: int
    touched: list[str]
    derive: list[str]
    erased: int = 0
    left_erased: int = 0
    erased_conversations: int = 0


def replicate(
    src: port.Reading,
    dst: port.Writing,
    thread_ids: Sequence[str],
    *,
    scope: str | None = None,
    force: bool = False,
    progress: ProgressCallback | None = None,
    restore_erased: bool = False,
    carry: bool = False,
) -> Replicated:
    """Copy ``thread_ids`` from ``src`` into ``dst`` with the conversations linked to them
    (with ``carry``, a whole store's copy: every conversation), of ``scope`` only when one
    is given, inside the destination's one write transaction:
    every thread and conversation is compared first, so that a conflict anywhere leaves
    the destination as it was.

    The source's erasures are first carried to the destination (:func:`carry_erasures`):
    with ``carry`` all of them, else those of the ids copied (so that a thread the source
    wrote again under an erased id replaces the erased one instead of joining it); then a
    thread the destination erased is left out (:func:`leave_erased`), unless
    ``restore_erased``."""
    source_stones = dict(src.tombstones())
    erased = carry_erasures(src, dst, scope, source_stones, None if carry else thread_ids)
    # An id the source erased and holds no thread of is copied as its erasure alone (a
    # whole store's copy names the threads the source holds).
    held = list(thread_ids) if carry else [t for t in thread_ids if src.thread(t) is not None]
    kept = leave_erased(src, dst, held, restore_erased)
    plans = [plan_thread(src, dst, t, force) for t in kept]
    talks: list[ConversationPlan] = []
    # The conversations a thread left out links to by name go with it.
    seen: set[str] = set(thread_ids) - set(kept)
    for plan in plans:
        for cid in conversations.linked(src, plan.thread_id):
            if cid in seen:
                continue
            seen.add(cid)
            found = src.conversation(cid)
            if scope is not None and (found is None or found[3] != scope):
                continue  # another owner's conversation is absent, as to every read
            if found is None or leave_erased_conversation(
                dst, src, found, restore_erased, source_stones
            ):
                continue
            talks.append(plan_conversation(src, dst, cid, plan.thread_id, force))
    if carry:  # a whole store: the conversations no thread links to as well
        for row in src.conversations(scope, conversations.EVERY):
            cid = str(row.conversation_id)
            if cid not in seen:
                seen.add(cid)
                if not leave_erased_conversation(dst, src, row, restore_erased, source_stones):
                    talks.append(plan_conversation(src, dst, cid, None, force))
    writer = Writer(src, dst, sum(p.events_to_copy for p in plans), progress)
    touched: list[str] = []
    derive: list[str] = []
    # A copy killed after its commit, while it derived, left runs waiting: derived now.
    waiting = dst.underived_threads()
    for plan in plans:
        if plan.writes:
            touched.append(plan.thread_id)
        if (plan.writes and writer.thread(plan)) or plan.dst_pk in waiting:
            derive.append(plan.thread_id)
    replaced: list[conversations.Record] = []
    written = write_conversations(dst, talks, replaced)
    for was in replaced:
        conversations.release_history(dst, was)
    return Replicated(
        plans, written, writer.done, touched, derive, erased[0], len(held) - len(kept),
        erased_conversations=erased[1],
    )  # fmt: skip

