"""Copying threads between two stores, like ``git push`` and ``git pull``: :func:`copy`.

Written once above the storage port (:mod:`agui_store.engine.port`), so it copies between any two
backends: SQLite file to file, SQLite to PostgreSQL and back.

A copy is lossless. Replaying the events through ``append`` would not be: the destination
would decide lineage again, stamp new times and may group batches differently. So runs land
as recorded (:meth:`port.Writing.insert_run`, :meth:`port.Writing.replicate_log`): run ids,
lineage (parent, reason, the ``parentRunId`` sent), synthetic runs, inputs and echoed inputs
as stored, every batch with its events, outcome and time, creation times, branches and the
thread's owner. Only two things are the destination's own:

- sequence numbers (``seq`` is global to one database): events get the destination's next
  ones, in the source's order;
- hashes: a batch's hash covers its events' sequence numbers, so a copied run's hashes are
  computed here as ``append`` computes them (:mod:`agui_store.history.hashing`), over the same
  record, input and events. Both sides are compared by what a reader sees, never by hash.

Derived data (lineage digests, checkpoints) is not copied: copied complete runs are listed
as underived, and derived after the copy (or left for later, as ``derive_on_append=False``
would) so that a checkout reads the same on both sides.

What a copy refuses (:class:`~agui_store.errors.SyncConflictError`, nothing written):

- a run both stores hold with different content: its record (parent, lineage reason, sent
  ``parentRunId``, input as stored, created_at, synthetic) or its batches (grouping, outcome,
  appended_at, events' type, payload and echo references in order). A run whose batches in
  the destination are the first of the source's (it was copied while still streaming) is
  not a conflict: the batches it lacks are copied;
- a thread whose owner (scope) differs;
- a branch both stores hold at different runs, unless the destination's tip is an
  ancestor of the source's (the branch then moves forward, as ``git push`` fast-forwards;
  at the same run, the later ``updated_at`` wins).
  A destination ahead of, or diverged from, the source is refused like git's
  non-fast-forward push (``force=True``, ``--force``: the source's tip wins).

One write transaction on the destination for the whole copy, after every thread was
compared: a conflict anywhere leaves the destination exactly as it was, and a copy that
fails midway (a full disk, a lost connection) writes nothing either. The destination's
writer waits for it; copy a thread at a time (``thread_id=``) to keep each copy short.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agui_store.engine import clock, erasure, port
from agui_store.engine.arguments import path_text
from agui_store.engine.intake import check_scope
from agui_store.errors import (
    InvalidArgumentError,
    NotAStoreError,
    RunNotFoundError,
    SyncConflictError,
)
from agui_store.history import hashing
from agui_store.store import Store, is_url

#: Runs whose events one read fetches from the source while writing (bounds memory).
RUNS_PER_READ = 200

#: Events queued before one write lands them (bounds memory, and sets progress' pace).
EVENTS_PER_WRITE = 5_000

#: Called as events land: ``(events copied so far, events to copy)``.
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class CopyResult:
    """What a copy did.

    Attributes:
        threads: threads that received anything (new ones included).
        threads_created: threads the destination did not hold.
        runs: runs copied.
        events: events copied (those of runs extended included).
        runs_present: runs the destination already held whole (nothing to copy).
        runs_extended: runs the destination held in part (copied while streaming): the
            batches it lacked were copied.
        branches: branches created or moved forward.
        erased: threads the destination held that the source erased: erased there too.
        left_erased: threads the destination erased, which the copy did not bring back
            (``restore_erased=True`` does).
    """

    threads: int = 0
    threads_created: int = 0
    runs: int = 0
    events: int = 0
    runs_present: int = 0
    runs_extended: int = 0
    branches: int = 0
    erased: int = 0
    left_erased: int = 0


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
class _ThreadPlan:
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
        count = sum(_batch_events(b) for run in self.missing for b in run.batches)
        for run, _, kept in self.extended:
            count += sum(_batch_events(b) for b in run.batches[kept:])
        return count

    @property
    def writes(self) -> bool:
        return bool(self.missing or self.extended or self.branches or self.dst_pk is None)


def _batch_events(batch: port.BatchRow) -> int:
    return batch[2] - batch[1] + 1


def _runs_of(tx: port.Reading, thread_pk: int) -> list[_SrcRun]:
    runs = [
        _SrcRun(
            pk=int(r[0]),
            run_id=str(r[1]),
            parent_id=r[2],
            lineage=str(r[3]),
            sent_parent=r[4],
            input_text=r[5],
            refs_text=r[6],
            synthetic=bool(r[7]),
            created_at=int(r[8]),
            parent_hash=None if r[9] is None else bytes(r[9]),
            start_hash=bytes(r[10]),
        )
        for r in tx.replica_runs(thread_pk)
    ]
    by_pk = {run.pk: run for run in runs}
    if runs:
        for run_pk, _start, first, last, outcome, appended_at, batch_hash in tx.batches_of_runs(
            list(by_pk)
        ):
            by_pk[int(run_pk)].batches.append(
                (int(run_pk), int(first), int(last), outcome, int(appended_at), bytes(batch_hash))
            )
    return runs


def _events_by_run(
    tx: port.Reading, run_pks: Sequence[int]
) -> dict[int, list[tuple[int, str, str, str | None]]]:
    """``run pk -> [(seq, type, payload, echo refs)]``, in order."""
    out: dict[int, list[tuple[int, str, str, str | None]]] = {pk: [] for pk in run_pks}
    if run_pks:
        for run_pk, seq, kind, payload, refs in tx.events_of_runs(list(run_pks)):
            out[int(run_pk)].append((int(seq), str(kind), str(payload), refs))
    return out


def _plan_thread(
    src: port.Reading, dst: port.Reading, thread_id: str, force: bool = False
) -> _ThreadPlan:
    """Compare one thread on both sides: what the destination lacks, or the conflict."""
    found = src.thread(thread_id)
    assert found is not None
    src_pk, owner = found
    runs = _runs_of(src, src_pk)
    dst_found = dst.thread(thread_id)
    dst_runs: dict[str, _SrcRun] = {}
    if dst_found is not None:
        if dst_found[1] != owner:
            raise SyncConflictError(
                f"its owner (scope) is {owner!r} in the source but {dst_found[1]!r} in the "
                "destination",
                thread_id=thread_id,
            )
        dst_runs = {run.run_id: run for run in _runs_of(dst, dst_found[0])}
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
                raise SyncConflictError(
                    f"its {name} is {_shown(mine)} in the source but {_shown(theirs)} in the "
                    "destination",
                    thread_id=thread_id,
                    run_id=run.run_id,
                )
        for n, (mine_b, theirs_b) in enumerate(zip(run.batches, there.batches)):
            mine_shape = (_batch_events(mine_b), mine_b[3], mine_b[4])
            theirs_shape = (_batch_events(theirs_b), theirs_b[3], theirs_b[4])
            if mine_shape != theirs_shape:
                raise SyncConflictError(
                    f"its batch {n} is (events, outcome, appended_at) {mine_shape} in the "
                    f"source but {theirs_shape} in the destination",
                    thread_id=thread_id,
                    run_id=run.run_id,
                )
        if len(there.batches) > len(run.batches):
            raise SyncConflictError(
                f"the destination holds {len(there.batches)} batches of it, the source "
                f"{len(run.batches)}",
                thread_id=thread_id,
                run_id=run.run_id,
            )
        overlapping.append((run, there))
        if len(there.batches) < len(run.batches):
            extended.append((run, there.pk, len(there.batches)))
        else:
            present += 1
    _compare_events(src, dst, thread_id, overlapping)
    branches = _branches_to_set(src, dst, thread_id, src_pk, dst_found, runs, force)
    return _ThreadPlan(
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


def _compare_events(
    src: port.Reading,
    dst: port.Reading,
    thread_id: str,
    overlapping: list[tuple[_SrcRun, _SrcRun]],
) -> None:
    """Refuse a run whose events differ: those the destination holds must be the source's
    first ones (type, payload bytes and echo references, in order)."""
    for start in range(0, len(overlapping), RUNS_PER_READ):
        chunk = overlapping[start : start + RUNS_PER_READ]
        mine = _events_by_run(src, [run.pk for run, _ in chunk])
        theirs = _events_by_run(dst, [there.pk for _, there in chunk])
        for run, there in chunk:
            kept = theirs[there.pk]
            for n, (a, b) in enumerate(zip(mine[run.pk], kept)):
                if a[1:] != b[1:]:
                    part = "type" if a[1] != b[1] else "payload" if a[2] != b[2] else "echo"
                    raise SyncConflictError(
                        f"its event {n} ({a[1]}) differs in its {part}",
                        thread_id=thread_id,
                        run_id=run.run_id,
                    )


def _branches_to_set(
    src: port.Reading,
    dst: port.Reading,
    thread_id: str,
    src_pk: int,
    dst_found: tuple[int, str | None] | None,
    runs: list[_SrcRun],
    force: bool,
) -> list[tuple[str, str, int]]:
    """The source's branches the destination lacks or holds behind (fast-forward only,
    unless ``force``)."""
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
                "one side's branch first, or force the copy)",
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


class _Writer:
    """Lands planned runs in the destination, computing its sequence numbers and hashes."""

    def __init__(
        self,
        src: port.Reading,
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

    def thread(self, plan: _ThreadPlan) -> list[int]:
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
                for run_pk, rows in _events_by_run(self.src, wanted).items():
                    events[run_pk] = {row[0]: row for row in rows}
            if run.run_id in missing and run.run_id not in pks:
                pks[run.run_id] = self._place(plan.thread_id, thread_pk, run, pks, chains,
                                              src_chains)
            self._batch(pks[run.run_id], batch, chains[run.run_id], events[run.pk])
            if batch[3] is not None:
                underived.add(pks[run.run_id])
            remaining[run.pk] -= 1
            if not remaining[run.pk]:
                del events[run.pk]
        self._flush()
        for _run, run_pk, _kept in plan.extended:
            # Events after what it held change what derives from it and from runs below.
            underived.update(dst.drop_derived_from(run_pk))
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
        start_hash = hashing.start(
            thread_id=thread_id,
            run_id=run.run_id,
            lineage=run.lineage,
            sent_parent_run_id=run.sent_parent,
            synthetic=run.synthetic,
            created_at=run.created_at,
            parent_hash=parent_hash,
            input_hash=input_hash,
        )
        run_pk = self.dst.insert_run(
            thread_pk,
            run.run_id,
            parent_pk,
            run.lineage,
            run.sent_parent,
            run.input_text,
            run.refs_text,
            run.synthetic,
            run.created_at,
            parent_hash,
            input_hash,
            start_hash,
        )
        chains[run.run_id] = [start_hash]
        return run_pk

    def _dst_chain(self, run_pk: int) -> list[bytes]:
        (record,) = self.dst.run_records([run_pk])
        chain = [bytes(record[11])]
        chain += [bytes(row[6]) for row in self.dst.batches_of_runs([run_pk])]
        return chain

    def _batch(
        self,
        run_pk: int,
        batch: port.BatchRow,
        chain: list[bytes],
        events: dict[int, tuple[int, str, str, str | None]],
    ) -> None:
        """Queue one batch with the destination's next sequence numbers, hashed onto the
        run's chain as ``append`` hashes it."""
        _, first, last, outcome, appended_at, _hash = batch
        first_seq = seq = self.next_seq
        hashed: list[hashing.EventRow] = []
        for src_seq in range(first, last + 1):
            _, kind, payload, refs = events[src_seq]
            self._events.append((seq, run_pk, kind, payload))
            if refs is not None:
                self._echoes.append((seq, refs))
            hashed.append((seq, kind, payload, refs))
            seq += 1
        batch_hash = hashing.chain(chain[-1], hashing.batch_digest(hashed, outcome, appended_at))
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


def _same_point(src_chain: list[bytes], dst_chain: list[bytes], parent_hash: bytes | None) -> bytes:
    """The destination's parent hash for a run: the parent's hash at the point in its chain
    where the source's was when the run was placed (its newest, if the source's is not on
    its chain: a file whose hashes were backfilled)."""
    if parent_hash is not None and parent_hash in src_chain:
        at = src_chain.index(parent_hash)
        if at < len(dst_chain):
            return dst_chain[at]
    return dst_chain[-1]


# --- the API --------------------------------------------------------------------------------


@contextlib.contextmanager
def _opened(where: Store | str | os.PathLike[str], *, must_exist: bool) -> Iterator[Store]:
    """A store given as one, or opened (and closed after) from a path or URL."""
    if isinstance(where, Store):
        yield where
        return
    path = path_text(where)
    if must_exist and not is_url(path) and path != ":memory:" and not os.path.lexists(path):
        raise NotAStoreError(f"no store at {path}: the source does not exist")
    store = Store(path)
    try:
        yield store
    finally:
        store.close()


def _same_store(a: Store, b: Store) -> bool:
    if a is b:
        return True
    if is_url(a.path) or is_url(b.path):
        return a.path == b.path
    if a.path == ":memory:" or b.path == ":memory:":
        return False
    return os.path.realpath(a.path) == os.path.realpath(b.path)


# --- erasures: kept out of a copy, carried by it (agui_store.engine.erasure) -----------------


def _leave_erased(dtx: port.Writing, thread_ids: list[str], restore: bool) -> list[str]:
    """The threads to copy: those the destination erased (it holds their tombstones) are
    left out, unless ``restore``, which takes their tombstones away to copy them back."""
    hashes = {erasure.thread_hash(t): t for t in thread_ids}
    erased = dtx.tombstoned(sorted(hashes)) if hashes else set()
    if restore:
        dtx.delete_tombstones(sorted(erased))
        return thread_ids
    gone = {hashes[h] for h in erased}
    return [t for t in thread_ids if t not in gone]


def _carry_erasures(stx: port.Reading, dtx: port.Writing, scope: str | None) -> int:
    """The source's tombstones, of threads it no longer holds, carried to the destination;
    the threads they name that the destination holds (of ``scope``'s, with one) are erased
    there, logged as erased by ``copy``. How many were."""
    held = {erasure.thread_hash(t) for t in stx.thread_ids(None)}
    stones = [(h, at) for h, at in stx.tombstones() if h not in held]
    if not stones:
        return 0
    carried = {h for h, _ in stones}
    doomed = [t for t in dtx.thread_ids(scope) if erasure.thread_hash(t) in carried]
    pks = [found[0] for t in doomed if (found := dtx.thread(t)) is not None]
    if pks:
        erasure.erase(dtx, pks, "copy", clock.now_ms())
    dtx.insert_tombstones(stones)
    return len(pks)


def copy(
    src: Store | str | os.PathLike[str],
    dst: Store | str | os.PathLike[str],
    *,
    thread_id: str | None = None,
    scope: str | None = None,
    force: bool = False,
    progress: ProgressCallback | None = None,
    restore_erased: bool = False,
) -> CopyResult:
    """Copy threads from ``src`` to ``dst`` (open stores, or paths and
    ``postgresql://`` URLs, opened and closed here: the source must exist, the destination
    is created when missing): every thread, or ``thread_id`` alone; with a ``scope``,
    only that owner's threads (another owner's thread is absent, as to every read). Only
    what ``dst`` lacks is copied, so a second copy copies nothing.

    ``force``: a branch both hold at runs where the destination's tip is not an ancestor
    of the source's (the source moved it back, or both moved it) takes the source's tip
    instead of being refused. Runs are never forced: they are append-only on both sides.

    ``progress(copied, total)`` is called as events land.

    Erasures (docs/guides/erasure.md): a thread the destination erased (it keeps a
    tombstone, a hash of the id) is not copied back, unless ``restore_erased``; a copy of
    every thread (no ``thread_id``) carries the source's erasures: the threads the source
    erased and the destination holds are erased there, and their tombstones copied.

    Raises:
        SyncConflictError: both hold a run, a thread's owner or a branch with different
            content (see the module's documentation); nothing was written.
        RunNotFoundError: ``src`` has no thread ``thread_id`` (in the ``scope``).
    """
    check_scope(scope)
    if thread_id is not None and (not isinstance(thread_id, str) or not thread_id):
        raise InvalidArgumentError(f"thread_id must be a non-empty string, not {thread_id!r}")
    with _opened(src, must_exist=True) as source, _opened(dst, must_exist=False) as target:
        if _same_store(source, target):
            raise InvalidArgumentError(
                f"the source and the destination are the same store ({source.path})"
            )
        with source._reading() as stx, target._replicating() as dtx:
            if thread_id is not None:
                found = stx.thread(thread_id)
                if found is None or (scope is not None and found[1] != scope):
                    raise RunNotFoundError(f"no thread {thread_id!r} in {source.path}")
                thread_ids = [thread_id]
            else:
                thread_ids = stx.thread_ids(scope)
            wanted = len(thread_ids)
            thread_ids = _leave_erased(dtx, thread_ids, restore_erased)
            # Every thread compared before anything is written: a conflict anywhere
            # leaves the destination as it was.
            plans = [_plan_thread(stx, dtx, t, force) for t in thread_ids]
            writer = _Writer(stx, dtx, sum(p.events_to_copy for p in plans), progress)
            touched: list[str] = []
            derive: list[str] = []
            for plan in plans:
                if not plan.writes:
                    continue
                touched.append(plan.thread_id)
                if writer.thread(plan):
                    derive.append(plan.thread_id)
            carried = _carry_erasures(stx, dtx, scope) if thread_id is None else 0
        # Derived data, as append would have written it (its own transactions: what is
        # left underived by an interruption is derived when next needed).
        if target.derive_on_append:
            for t in derive:
                target.derive(t)
        if carried:
            target.purge()
        return CopyResult(
            threads=len(touched),
            threads_created=sum(1 for p in plans if p.dst_pk is None),
            runs=sum(len(p.missing) for p in plans),
            events=writer.done,
            runs_present=sum(p.present for p in plans),
            runs_extended=sum(len(p.extended) for p in plans),
            branches=sum(len(p.branches) for p in plans),
            erased=carried,
            left_erased=wanted - len(thread_ids),
        )


__all__ = ["CopyResult", "copy"]
