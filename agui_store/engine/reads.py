"""The read paths: a run's events, replay records and view, and the run records listings
return (with the branches naming them), read through the storage port.

Everything read back is verified against the hashes written with it before it is used: a
run's record, input and parent link against its start hash (:func:`verified_runs`), its
events against its batches' chained digests (:func:`verify_batches`), a checkpoint's blobs
against their addresses (:mod:`agui_store.engine.checkpoints`). A failure is a
:class:`HashMismatchError` naming the run (:func:`mismatch`). A view comes from the run's own
checkpoint, else from the nearest one up its lineage with the runs after it replayed
(:func:`view`); :func:`replayed_view` ignores checkpoints, the reference they are checked
against. Written once, over :class:`agui_store.engine.port.Reading`, for every backend.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

from agui_store.codec import ingest
from agui_store.engine import arguments, checkpoints, port
from agui_store.engine.revisions import DEFAULT_BRANCH, RunKey
from agui_store.errors import HashMismatchError, InvalidArgumentError, RunNotFoundError
from agui_store.history import hashing, resume
from agui_store.history.normalize import expand_input
from agui_store.history.restore import RunRecord, View, body_as_sent, restore
from agui_store.records import Checkout, Log, Run, Thread, when


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


def run_record(tx: port.Reading, pk: int) -> Run:
    """A run's record: its metadata and the branches naming it."""
    row, names, newest = tx.run_summary_and_branches(pk)
    if newest:
        names.insert(0, DEFAULT_BRANCH)
    return run_from_row(row, {pk: names})


def branch_names(
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


def run_from_row(row: port.RunSummary, branches: dict[int, list[str]]) -> Run:
    """The run record of a :class:`~agui_store.engine.port.RunSummary` row, named by
    ``branches``."""
    # Unpacked (mypy checks the names against the row type's fields, in order): a log reads
    # thousands of rows, and one unpacking costs less than fourteen attribute reads.
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
    created = when(created_at)
    # Filled in as a frozen dataclass's __init__ would, without it: that __init__ sets each
    # of the fourteen fields through object.__setattr__, which costs about as much as the
    # rest of a log of thousands of runs (bench_log measures it). A test checks the record
    # equals Run(...) of the same fields, so a field added to Run and missed here fails it.
    # Its instance dict is filled key by key: a call with fourteen keywords would build a
    # dict of them first and then copy it (an eighth of this function's time).
    run: Run = _new(Run)
    fields = run.__dict__
    fields["thread_id"] = thread_id
    fields["run_id"] = run_id
    fields["parent_run_id"] = parent_run_id
    fields["lineage"] = lineage
    fields["status"] = outcome or "incomplete"
    fields["event_count"] = int(count or 0)
    fields["created_at"] = created
    # Most runs are recorded in one append: one conversion serves both (converting times is
    # a sixth of a log's time otherwise).
    fields["updated_at"] = created if updated_at == created_at else when(updated_at)
    fields["sent_parent_run_id"] = sent_parent
    fields["has_input"] = bool(has_input)
    fields["synthetic"] = bool(synthetic)
    fields["branches"] = tuple(branches.get(pk, ()))
    fields["last_seq"] = last_seq
    fields["hash"] = bytes(run_hash).hex() if run_hash is not None else None
    return run


_new = object.__new__


# --- what the store's reading verbs return, each from one read transaction -----------------


def chosen_threads(
    tx: port.Reading, thread_id: str | None, scope: str | None, where: str
) -> list[str]:
    """The threads a verb over a whole store or one thread covers (``export_archive``,
    ``copy``): ``thread_id`` alone, which must exist in ``scope``, else every thread of
    ``scope`` (``None``: of every owner).

    Raises:
        RunNotFoundError: no thread ``thread_id`` (in ``scope``) in the store at ``where``.
    """
    if thread_id is None:
        return list(tx.thread_ids(scope))
    found = tx.thread(thread_id)
    if found is None or (scope is not None and found[1] != scope):
        raise RunNotFoundError(f"no thread {arguments.quote(thread_id)} in {where}")
    return [thread_id]


def thread_summary(tx: port.Reading, pk: int, thread_id: str) -> Thread:
    """A thread's record: its owner, creation time and number of runs."""
    found = tx.thread(thread_id)
    owner = found[1] if found else None
    return Thread(thread_id, owner, when(tx.thread_created_at(pk)), tx.thread_run_count(pk))


def run_page(
    tx: port.Reading, thread_pk: int, thread_id: str, size: int | None, before: str | None
) -> list[Run]:
    """A thread's runs in recorded order: every one, or the newest ``size`` recorded before
    the run ``before`` names (the thread's newest when ``None``)."""
    if size is None and before is None:
        rows = tx.thread_run_summaries(thread_pk)
    else:
        below = arguments.MAX_INT64
        if before is not None:
            named = tx.run_pk(thread_pk, before) if arguments.storable_text(before) else None
            if named is None:
                raise InvalidArgumentError(
                    f"before= {arguments.quote(before)} names no run of thread "
                    f"{arguments.quote(thread_id)}"
                )
            below = named
        rows = tx.thread_run_page(thread_pk, below, size or arguments.MAX_INT64)[::-1]
    names = branch_names(tx, [r.pk for r in rows], [thread_pk])
    return [run_from_row(r, names) for r in rows]


def log_page(tx: port.Reading, key: RunKey, cursor: str | None, size: int | None) -> Log:
    """The lineage of ``key``'s run, newest first: ``size`` runs from the run ``cursor``
    names (a run of the same thread), or from ``key``'s run itself."""
    first = key.pk
    if cursor is not None:
        # Text SQLite cannot hold names no run.
        named = tx.run_pk(key.thread_pk, cursor) if arguments.storable_text(cursor) else None
        if named is None:
            raise InvalidArgumentError(
                f"cursor {arguments.quote(cursor)} names no run of thread "
                f"{arguments.quote(tx.thread_id(key.thread_pk))}: a cursor continues the log "
                "of the thread it came from"
            )
        first = named
    rows = tx.lineage_runs(first, None, size)
    # A lineage never leaves its thread (docs/design/lineage.md).
    names = branch_names(tx, [r.pk for r in rows], [key.thread_pk])
    runs = [run_from_row(r, names) for r in rows]
    # The last run's parent starts the next page (None at the root, or the whole log).
    more = runs[-1].parent_run_id if runs and len(runs) == size else None
    return Log(runs, next_cursor=more)


def checkout(tx: port.Reading, pk: int) -> Checkout:
    """A run restored: the messages and state the official client holds after it."""
    run = run_record(tx, pk)
    found = view(tx, pk)
    return Checkout(run, found.messages, found.state, found.interrupts, found.warnings)


def reconnect_stream(tx: port.Reading, pk: int) -> list[dict[str, Any]]:
    """The short stream that restores a run (:func:`agui_store.history.resume.reconnect_stream`)."""
    return resume.reconnect_stream(run_record(tx, pk), view(tx, pk), tx.terminal_event(pk))


def fork_input(tx: port.Reading, pk: int, run_id: str) -> dict[str, Any]:
    """The ``RunAgentInput`` that starts run ``run_id`` from this run
    (:func:`agui_store.history.resume.fork_input`)."""
    return resume.fork_input(run_record(tx, pk), view(tx, pk), tx.newest_input(pk), run_id)


def recorded_input(tx: port.Reading, pk: int) -> dict[str, Any] | None:
    """The ``RunAgentInput`` recorded for a run, whole (what it names by reference put
    back from its parent's view), checked against the run's hash; ``None`` if it has none."""
    raw, raw_refs, parent_pk, recorded = tx.run_input(pk)
    if hashing.input_digest(raw, raw_refs) != recorded:
        raise mismatch(tx, pk, "its input is not the one its hash covers")
    if raw is None:
        return None
    value: dict[str, Any] = ingest.decode(raw.encode("utf-8"))
    if raw_refs is not None:
        assert parent_pk is not None  # refs name what the parent's view holds
        base = view(tx, parent_pk)
        refs = ingest.decode(raw_refs.encode("utf-8"))
        value = expand_input(value, refs, base.messages, base.state)
    return value


def history(tx: port.Reading, pk: int) -> list[dict[str, Any]]:
    """The events of a run's whole ancestor chain, root first, checked against the runs'
    hashes."""
    chain, grouped, normalized = chain_payloads(tx, pk)
    if not normalized:
        return ingest.decode_many([p for run_pk in chain for p in grouped.get(run_pk, [])])
    # Rare: the runs holding an echo stored by reference are read through the expanding path.
    out: list[dict[str, Any]] = []
    for run_pk in chain:
        if run_pk in normalized:
            out += run_events(tx, run_pk)
        else:
            out += ingest.decode_many(grouped.get(run_pk, []))
    return out
