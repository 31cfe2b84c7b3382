"""The read verbs: what the store's reading verbs return (a run's record, a thread's runs, a
log page, a checkout, the reconnect stream, the fork input, a recorded input, a history),
each built in one read transaction on the verified loader (:mod:`agui_store.engine.verified`),
which checks everything it reads against its hashes. Written once, over
:class:`agui_store.engine.port.Reading`, for every backend.
"""

from __future__ import annotations

from typing import Any

from agui_store.codec import ingest
from agui_store.engine import arguments, port, revisions, verified
from agui_store.engine.revisions import DEFAULT_BRANCH, RunKey
from agui_store.errors import InvalidArgumentError
from agui_store.history import hashing, resume
from agui_store.history.normalize import expand_input
from agui_store.records import Checkout, Log, Run, Thread, when


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
        RunNotFoundError: no thread ``thread_id`` (in ``scope``) in the store at ``where``;
            one it erased says when.
    """
    if thread_id is None:
        return list(tx.thread_ids(scope))
    revisions.require_thread(tx, thread_id, scope, where)
    return [thread_id]


def thread_summary(tx: port.Reading, pk: int, thread_id: str) -> Thread:
    """A thread's record: its owner, creation time, number of runs and last write."""
    found = tx.thread(thread_id)
    owner = found[1] if found else None
    activity = tx.thread_activity(pk)
    latest, written, open_runs = activity if activity is not None else (None, None, 0)
    return Thread(
        thread_id, owner, when(tx.thread_created_at(pk)), tx.thread_run_count(pk),
        when(written), latest, open_runs,
    )


def threads_after(
    tx: port.Reading, ids: list[str], after: str, updated_at: int | None
) -> int | None:
    """Where the threads listed after thread ``after`` start in ``ids`` (the thread written
    to last first): just after it, while it was last written at ``updated_at``
    (milliseconds; ``None``: wherever it is now). Once written again, or erased, it took its
    place with it: they start at the first thread last written before ``updated_at``, found
    by halving (a thread written in that same millisecond counts as listed, as ties are
    listed in an order no time tells). ``None``: ``after`` is gone and no time tells its
    place."""

    def written(thread_id: str) -> int | None:
        found = tx.thread(thread_id)
        activity = None if found is None else tx.thread_activity(found[0])
        return None if activity is None else activity[1]

    if after in ids:
        here = ids.index(after)
        if updated_at is None or written(after) == updated_at:
            return here + 1
    elif updated_at is None:
        return None
    low, high = 0, len(ids)
    while low < high:
        middle = (low + high) // 2
        if (written(ids[middle]) or -1) >= updated_at:
            low = middle + 1
        else:
            high = middle
    return low


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
    found = verified.view(tx, pk)
    return Checkout(run, found.messages, found.state, found.interrupts, found.warnings)


def checkout_ref(
    tx: port.Reading,
    ref: str,
    *,
    where: str,
    thread_id: str | None = None,
    scope: str | None = None,
) -> Checkout:
    """The run a revision names, restored (:func:`checkout` of what
    :func:`~agui_store.engine.revisions.resolve` finds, and its errors): a run id of the
    thread ``thread_id`` is read in one operation first (:func:`checkout_named`)."""
    if thread_id is not None:
        found = checkout_named(tx, ref, thread_id, scope)
        if found is not None:
            return found
    key = revisions.resolve(tx, ref, where=where, thread_id=thread_id, scope=scope)
    return checkout(tx, key.pk)


def checkout_named(
    tx: port.Reading, run_id: str, thread_id: str, scope: str | None
) -> Checkout | None:
    """The run ``run_id`` of the thread ``thread_id`` (of the owner ``scope``), restored
    from its own checkpoint as one operation reads them
    (:meth:`~agui_store.engine.port.Reading.run_checkout`), verified as :func:`view`
    verifies a checkpoint. ``None`` when the name is not a run of that thread (a branch,
    a ref, a missing thread or run: :func:`~agui_store.engine.revisions.resolve` says which)
    or the run has no checkpoint of its own: the caller takes the long way, which reads
    again from the start, since the answer may come from a snapshot of its own."""
    if not (
        isinstance(run_id, str) and run_id and isinstance(thread_id, str)
        and arguments.storable_text(run_id) and arguments.storable_text(thread_id)
    ):
        return None  # resolve() says what is wrong with them
    found = tx.run_checkout(thread_id, run_id, scope)
    if found is None:
        return None
    snapshot = verified.checkpoint_read(tx, found)
    if snapshot is None:
        return None
    names = found.branches
    if found.newest:
        names.insert(0, DEFAULT_BRANCH)
    run = run_from_row(found.summary, {found.pk: names})
    restored = snapshot.view
    return Checkout(
        run, restored.messages, restored.state, restored.interrupts, restored.warnings
    )


def reconnect_stream(tx: port.Reading, pk: int) -> list[dict[str, Any]]:
    """The short stream that restores a run (:func:`agui_store.history.resume.reconnect_stream`)."""
    return resume.reconnect_stream(run_record(tx, pk), verified.view(tx, pk), tx.terminal_event(pk))


def fork_input(tx: port.Reading, pk: int, run_id: str) -> dict[str, Any]:
    """The ``RunAgentInput`` that starts run ``run_id`` from this run
    (:func:`agui_store.history.resume.fork_input`)."""
    return resume.fork_input(run_record(tx, pk), verified.view(tx, pk), tx.newest_input(pk), run_id)


def events(tx: port.Reading, pk: int, after: int) -> list[dict[str, Any]]:
    """A run's events after the sequence number ``after``, checked against the run's hashes
    (:func:`agui_store.engine.verified.run_events`)."""
    return verified.run_events(tx, pk, after, verify=True)


def recorded_input(tx: port.Reading, pk: int) -> dict[str, Any] | None:
    """The ``RunAgentInput`` recorded for a run, whole (what it names by reference put
    back from its parent's view), checked against the run's hash; ``None`` if it has none."""
    raw, raw_refs, parent_pk, recorded = tx.run_input(pk)
    if hashing.input_digest(raw, raw_refs) != recorded:
        raise verified.mismatch(tx, pk, "its input is not the one its hash covers")
    if raw is None:
        return None
    value: dict[str, Any] = ingest.decode(raw.encode("utf-8"))
    if raw_refs is not None:
        assert parent_pk is not None  # refs name what the parent's view holds
        base = verified.view(tx, parent_pk)
        refs = ingest.decode(raw_refs.encode("utf-8"))
        value = expand_input(value, refs, base.messages, base.state)
    return value


def history(tx: port.Reading, pk: int) -> list[dict[str, Any]]:
    """The events of a run's whole ancestor chain, root first, checked against the runs'
    hashes."""
    chain, grouped, normalized = verified.chain_payloads(tx, pk)
    if not normalized:
        return ingest.decode_many([p for run_pk in chain for p in grouped.get(run_pk, [])])
    # Rare: the runs holding an echo stored by reference are read through the expanding path.
    out: list[dict[str, Any]] = []
    for run_pk in chain:
        if run_pk in normalized:
            out += verified.run_events(tx, run_pk)
        else:
            out += ingest.decode_many(grouped.get(run_pk, []))
    return out
