"""The verified loader: a run's events, replay records, checkpoints and views, read through
the storage port and checked against the hashes written with them before anything uses them.

A run's record, input and parent link are checked against its start hash
(:func:`verified_runs`), its events against its batches' chained digests
(:func:`verify_batches`), a checkpoint's blobs against their addresses and its view digest
(:mod:`agui_store.engine.checkpoints`, trusting the blobs this connection already verified:
:mod:`agui_store.engine.trust`). A failure is a :class:`HashMismatchError` naming the run
(:func:`mismatch`). A view comes from the run's own checkpoint, else from the nearest one up
its lineage with the runs after it replayed (:func:`view`); :func:`replayed_view` ignores
checkpoints, the reference they are checked against. The read verbs built on this are
:mod:`agui_store.engine.reads`. Written once, over :class:`agui_store.engine.port.Reading`,
for every backend.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

from agui_store.codec import ingest
from agui_store.engine import checkpoints, port
from agui_store.errors import HashMismatchError
from agui_store.history import hashing
from agui_store.history.normalize import expand_input
from agui_store.history.restore import RunRecord, View, body_as_sent, restore


def view(tx: port.Reading, pk: int) -> View:
    """view(R): from the nearest checkpoint on R's lineage, replaying only what follows."""
    # R's own checkpoint first (a complete run has one unless checkpoint_events > 1):
    # then no walk up the lineage.
    own = own_checkpoint(tx, pk)
    if own is not None:
        return own.view
    found, after = checkpoints.nearest(tx, pk)
    start = load_checkpoint(tx, found).view if found is not None else None
    if not after:
        assert start is not None
        return start
    return restore(records(tx, after), start=start)


def views_past_shared(tx: port.Reading, pks: list[int], *, skip_shared: bool = True) -> list[View]:
    """The views of runs to compare, without the leading blobs (chunks, then tail
    segments) their checkpoints all share, with what they share read once (see
    :func:`checkpoints.load_past_shared`): git compares trees by hash the same way.
    Runs that are not all checkpointed themselves get their whole views. The views may
    share objects: for reading only."""
    try:
        loaded = checkpoints.load_past_shared(tx, pks, skip_shared=skip_shared, trust=True)
    except HashMismatchError as e:
        run_pk = getattr(e, "run_pk", None)
        if run_pk is None:
            raise
        raise mismatch(tx, run_pk, e.what) from None
    if loaded is not None:
        return [snapshot.view for snapshot in loaded]
    return [view(tx, pk) for pk in pks]


def load_checkpoint(tx: port.Reading, pk: int, *, skip_chunks: int = 0) -> checkpoints.Snapshot:
    """A checkpoint, verified against its hashes as it is read (refused, naming its run,
    when it fails them)."""
    try:
        return checkpoints.load(tx, pk, trust=True, skip_chunks=skip_chunks)
    except HashMismatchError as e:
        raise mismatch(tx, pk, e.what) from None


def own_checkpoint(tx: port.Reading, pk: int) -> checkpoints.Snapshot | None:
    """A run's own checkpoint (``None``: it has none), verified as
    :func:`load_checkpoint` verifies it."""
    try:
        return checkpoints.load_if_any(tx, pk, trust=True)
    except HashMismatchError as e:
        raise mismatch(tx, pk, e.what) from None


def replayed_view(tx: port.Reading, pk: int) -> View:
    """view(R) by full replay of its lineage, ignoring checkpoints (the reference)."""
    return restore(records(tx, tx.ancestors(pk)))


def records(tx: port.Reading, run_pks: list[int]) -> list[RunRecord]:
    """Inputs and decoded events of runs (root first: keys grow along a lineage),
    verified against the runs' batch hashes as they are read."""
    grouped: dict[int, list[str]] = {}
    rows: dict[int, list[Any]] = {}
    echo_refs: dict[int, Any] = {}
    for run_pk, seq, kind, payload, refs in tx.events_of_runs(run_pks):
        grouped.setdefault(run_pk, []).append(payload)
        rows.setdefault(run_pk, []).append((seq, kind, payload, refs))
        if refs is not None:
            echo_refs[run_pk] = ingest.decode(refs.encode("utf-8"))
    inputs = verified_runs(tx, run_pks)
    verify_batches(tx, run_pks, rows)
    decoded = ingest.decode_many([p for pk in run_pks for p in grouped.get(pk, ())])
    records, at = [], 0
    for pk in run_pks:
        n = len(grouped.get(pk, ()))
        raw_input, raw_refs, lineage = inputs.get(pk, (None, None, ""))
        records.append(
            RunRecord(
                input=ingest.decode(raw_input.encode("utf-8")) if raw_input else None,
                events=decoded[at : at + n],
                input_refs=ingest.decode(raw_refs.encode("utf-8")) if raw_refs else None,
                echo_refs=echo_refs.get(pk),
                as_sent=body_as_sent(raw_input is not None, lineage),
            )
        )
        at += n
    return records


def verified_runs(
    tx: port.Reading, pks: Sequence[int]
) -> dict[int, tuple[str | None, str | None, str]]:
    """The inputs of runs about to be replayed (``run -> (input, input_refs, lineage)``), once
    each run's record, input and parent link are verified against its hashes: what
    decides where its replay starts from and what it starts with."""
    inputs: dict[int, tuple[str | None, str | None, str]] = {}
    for run in tx.run_records(pks):
        pk = int(run.pk)
        if hashing.input_digest(run.input, run.input_refs) != run.input_hash:
            raise mismatch(tx, pk, "its input is not the one its hash covers")
        if not run.parent_verified:
            raise mismatch(tx, pk, "its lineage parent is not the one its hash covers")
        if run.start_hash is None or run.start_hash != hashing.start(
            thread_id=run.thread_id,
            run_id=run.run_id,
            lineage=run.lineage,
            sent_parent_run_id=run.sent_parent,
            synthetic=bool(run.synthetic),
            created_at=run.created_at,
            parent_hash=run.parent_hash,
            input_hash=run.input_hash,
        ):
            raise mismatch(tx, pk, "its record is not the one its hash covers")
        if run.input is not None:
            inputs[pk] = (run.input, run.input_refs, run.lineage)
    return inputs


def verify_logs(tx: port.Reading, pks: Sequence[int]) -> None:
    """Runs' records, inputs and events checked against their hashes, nothing decoded:
    what a rebuild derives from (:meth:`agui_store.engine.writes.Writes.rebuild`)."""
    rows: dict[int, list[Any]] = {}
    for run_pk, seq, kind, payload, refs in tx.events_of_runs(pks):
        rows.setdefault(run_pk, []).append((seq, kind, payload, refs))
    verified_runs(tx, pks)
    verify_batches(tx, pks, rows)


def verify_batches(
    tx: port.Reading,
    pks: Sequence[int],
    rows: dict[int, list[Any]],
    *,
    batches: Iterable[port.ChainedBatch] | None = None,
) -> None:
    """The events read for runs (``rows``: run -> ``(seq, type, payload, refs)``) are
    the ones their batch hashes cover: each batch's digest, chained from the hash before
    it, gives the hash it recorded. Costs a hash of what was read.

    ``batches``: the batches the rows are from, as ``tx.batches_of_runs(pks)`` gives them
    (the default), or a run's last ones (``tx.batches_of_run_after``)."""
    previous: dict[int, bytes | None] = {}
    covered: dict[int, int] = {}
    seqs = {run_pk: [e[0] for e in events] for run_pk, events in rows.items()}
    if batches is None:
        batches = tx.batches_of_runs(pks)
    for batch in batches:
        run_pk, first, last, recorded = batch.run_pk, batch.first_seq, batch.last_seq, batch.hash
        events = rows.get(run_pk, [])
        i = bisect.bisect_left(seqs.get(run_pk, []), first)
        j = bisect.bisect_right(seqs.get(run_pk, []), last)
        covered[run_pk] = covered.get(run_pk, 0) + (j - i)
        before = previous.get(run_pk, batch.start_hash)
        if (
            recorded is None
            or before is None
            or hashing.chain(
                before, hashing.batch_digest(events[i:j], batch.outcome, batch.appended_at)
            )
            != recorded
        ):
            raise mismatch(
                tx,
                int(run_pk),
                f"its events at seq {first}..{last} are not the ones its hash covers",
            )
        previous[run_pk] = recorded
    for run_pk, events in rows.items():
        if covered.get(run_pk, 0) != len(events):
            raise mismatch(tx, int(run_pk), "it holds events that none of its batch hashes covers")


def chain_payloads(tx: port.Reading, pk: int) -> tuple[list[int], dict[int, list[str]], set[int]]:
    """Ancestor run keys root first, each one's payloads in order, verified against the
    runs' hashes as they are read, and the runs holding an echo stored by reference."""
    grouped: dict[int, list[str]] = {}
    rows: dict[int, list[Any]] = {}
    normalized: set[int] = set()
    for run_pk, seq, kind, payload, refs in tx.chain_events(pk):
        grouped.setdefault(run_pk, []).append(payload)
        rows.setdefault(run_pk, []).append((seq, kind, payload, refs))
        if refs is not None:
            normalized.add(run_pk)
    chain = tx.ancestors(pk)
    verified_runs(tx, chain)
    verify_batches(tx, chain, rows)
    return chain, grouped, normalized


def run_events(tx: port.Reading, run_pk: int, after: int = 0, *, verify: bool = False) -> list[Any]:
    """A run's events after the sequence number ``after``, decoded, echoed inputs stored by
    reference put back whole; ``verify``: checked against the run's hashes first.

    A batch's hash covers all of its events, so a cursor inside a batch reads (and hashes)
    the batch from its start, and returns what follows the cursor: the cost follows what is
    returned, not the run."""
    if not verify:
        rows = tx.run_events(run_pk, after)
    else:
        verified_runs(tx, [run_pk])
        batches = list(tx.batches_of_run_after(run_pk, after))
        read_from = min(after, batches[0].first_seq - 1) if batches else after
        rows = tx.run_events(run_pk, read_from)
        verify_batches(
            tx, [run_pk], {run_pk: [(r[2], r[3], r[0], r[1]) for r in rows]}, batches=batches
        )
        if read_from < after:
            rows = [r for r in rows if r[2] > after]
    events = ingest.decode_many([r[0] for r in rows])
    for event, (_, refs, _, _) in zip(events, rows):
        if refs is not None:
            parent_pk = tx.run_parent(run_pk)
            assert parent_pk is not None  # an echo is stored by reference to its parent
            base = view(tx, parent_pk)
            event["input"] = expand_input(
                event["input"], ingest.decode(refs.encode("utf-8")), base.messages, base.state
            )
    return events


def status(tx: port.Reading, run_pk: int) -> str:
    """A run's status as recorded: what its last terminal event made it, else incomplete."""
    return tx.run_status(run_pk) or "incomplete"


def mismatch(tx: port.Reading, pk: int, what: str) -> HashMismatchError:
    """The error for a run whose stored data does not match its hashes, naming the run."""
    names = tx.run_names(pk)
    if names is None:
        return HashMismatchError(what)
    return HashMismatchError(what, thread_id=names[0], run_id=names[1])


def checkpoint_read(tx: port.Reading, found: port.RunCheckout) -> checkpoints.Snapshot | None:
    """A run's own checkpoint as :meth:`~agui_store.engine.port.Reading.run_checkout` read
    it, verified as :func:`own_checkpoint` verifies one, and refused naming the run from the
    answer itself (a statement more could see another snapshot). ``None``: its blobs were
    not the ones its list names, and it is to be read the long way."""
    try:
        return checkpoints.load_read(tx, found.pk, found.checkpoint, found.blobs, trust=True)
    except HashMismatchError as e:
        summary = found.summary
        raise HashMismatchError(e.what, thread_id=summary[1], run_id=summary[2]) from None
