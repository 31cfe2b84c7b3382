"""Deriving a run's view and its checkpoint: the replay that continues a cached view, and
the checkpoint written as a delta of the lineage's last one.

A store keeps, per thread, the view of the newest run it derived (:class:`CachedView`: the
reducer holding it, the lineage ids and their digest state), so that the next run costs a
replay of that run alone (:func:`replayed_to` rebuilds it from the nearest checkpoint when
it is missing). What the runs since the lineage's last checkpoint did is counted in
:class:`SinceCheckpoint`, and :func:`write_checkpoint` stores the new checkpoint sharing the
old one's chunks: only positions that moved, or that an event since then could have
reached, are compared and stored again (:func:`message_chunks`), and a state changed by a
few small ``STATE_DELTA`` patches is stored as them (:func:`state_patches`). Written once,
over :mod:`agui_store.engine.port`, for every backend. :class:`Deriver` derives complete runs in a
write transaction, from the view the store's memory keeps: when (on append, or left for
``derive()``) is the placing of the batch's decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agui_store.codec import ingest
from agui_store.engine import checkpoints, clock, port, search, verified
from agui_store.engine.arguments import quote
from agui_store.engine.cached_view import CachedView, SinceCheckpoint
from agui_store.errors import RUN_CHECK, CorruptStoreError, InvalidEventError
from agui_store.history.lineage import hash_ids, lineage_ids
from agui_store.history.restore import (
    RunRecord,
    apply_run,
    body_as_sent,
    named_ids,
    only_appended,
    reached,
    start_reducer,
    view_of,
)
from agui_store.protocol.reducer import Reducer

if TYPE_CHECKING:
    from agui_store.engine.cache import Memory


def replayed_to(tx: port.Reading, run_pk: int | None) -> CachedView:
    """view(run) (the empty view for ``None``) in a reducer, replayed from the nearest
    checkpoint, with its lineage ids and their digest state, and what the runs since
    that checkpoint did."""
    if run_pk is None:
        reducer = start_reducer()
        since = SinceCheckpoint.start(0, None, None)
    else:
        found, after = checkpoints.nearest(tx, run_pk)
        snap = verified.load_checkpoint(tx, found) if found is not None else None
        reducer = start_reducer(snap.view if snap is not None else None)
        if snap is not None:
            reducer.track_state(snap.state_patches)
        reducer.take_unmoved()  # counts from the checkpoint's list
        since = SinceCheckpoint.start(len(reducer.messages), snap, found)
        for record in verified.records(tx, after):
            since.note(record)
            apply_run(reducer, record)
    lineage = lineage_ids(reducer.messages)
    return CachedView(run_pk, reducer, hash_ids(lineage), since, lineage)

def write_checkpoint(
    tx: port.Writing,
    run_pk: int,
    reducer: Reducer,
    since: SinceCheckpoint,
    digest: bytes,
    now: int,
    run_hash: bytes,
) -> bool:
    """Store the reducer's view as the run's checkpoint, sharing the chunks of
    ``since``'s; on success ``since.layout`` describes the new one."""
    view = view_of(reducer)
    patches = state_patches(reducer, since)
    # A short state text (most are) is stored by the statement that stores the new
    # message blobs, without a look-up of its own.
    text = checkpoints.state_text(view, patches)
    packed = checkpoints.pack_small(text)
    along = () if packed is None else (packed,)
    chunks = message_chunks(tx, view.messages, since, reducer, along)
    if chunks is None:
        # One message object at two positions (repeated ids, then a MESSAGES_SNAPSHOT):
        # the client edits both through one id. One blob per position would lose that
        # sharing, so this run keeps no checkpoint; later runs replay from an older one.
        return False
    layout, ids = chunks
    stored_state = None if packed is None else (ids[packed[0]], packed[0], len(text))
    anchor_address = since.state_address if patches is not None else None
    stored, address = checkpoints.write(
        tx,
        run_pk,
        view,
        layout,
        digest,
        now,
        patches,
        run_hash=run_hash,
        anchor_address=anchor_address,
        stored_state=stored_state,
    )
    since.layout = layout
    if patches is None:  # the state stored whole: later ones patch this one
        since.state_anchor, since.state_bytes, since.state_address = run_pk, stored, address
        reducer.track_state()
    return True


def state_patches(reducer: Reducer, since: SinceCheckpoint) -> tuple[int, list[Any]] | None:
    """``(state base, patches)`` to store the reducer's state as the STATE_DELTA patches
    applied since the lineage's last whole state, when there are few and they are small
    next to that state; ``None``: store it whole."""
    deltas = reducer.state_deltas
    if since.state_anchor is None or deltas is None:
        return None
    if len(deltas) > checkpoints.MAX_STATE_PATCHES:
        return None
    if deltas and checkpoints.STATE_PATCH_SHARE * len(ingest.encode(deltas)) > since.state_bytes:
        return None
    return since.state_anchor, deltas


def message_chunks(
    tx: port.Writing,
    messages: list[dict[str, Any]],
    since: SinceCheckpoint,
    reducer: Reducer,
    along: Sequence[tuple[bytes, int, bytes]] = (),
) -> tuple[checkpoints.Layout, dict[bytes, int]] | None:
    """Store the message list as chunks sharing those of ``since``'s checkpoint, and
    ``along`` (see :func:`checkpoints.lay_out`); its layout and ``along``'s ids, or ``None``
    (nothing stored) when one message object stands at two positions (a checkpoint cannot
    say that).

    A position keeps its place in the base checkpoint when it holds the same object (the
    reducer reports how many leading positions do: ``since.unmoved``) and no run since
    could have changed it: no id their events named reaches it. So the common case costs
    the new messages, not the whole history.
    """
    if reducer.aliased:
        return None  # only a snapshot (or an input) puts one object at two positions
    base = since.layout if since.run_pk is not None else None
    if base is None or since.snapshot:
        return checkpoints.lay_out(tx, messages, base, along=along)
    keep, changed = unchanged(messages, since, reducer)
    return checkpoints.lay_out(tx, messages, base, keep, changed, along)


def unchanged(
    messages: list[dict[str, Any]], since: SinceCheckpoint, reducer: Reducer
) -> tuple[int, list[int]]:
    """How long a prefix of ``messages`` holds the objects the base checkpoint's list held
    there, and the positions in that prefix whose message the runs since may have changed
    (their events named it)."""
    keep = min(since.unmoved, since.length, len(messages))
    # Few: the messages the runs' events name; the ones past the prefix are stored anyway.
    held = reducer.holders(since.names)
    return keep, search.held_before(messages, keep, held) if held else []


def index_every_run(
    tx: port.Writing, progress: Callable[[int, int], None] | None = None
) -> int:
    """Index the messages of every complete run's view for search, as deriving each would
    have (:func:`agui_store.engine.search.index_run`): what a store written before the index
    existed needs. Each run continues its parent's view when that was the run before it
    (a thread's runs mostly are), else replays from the nearest checkpoint; a message is
    read back, for its snippet, from the run's own checkpoint when it has one. Calls
    ``progress(done, total)`` as runs are done. Returns how many runs were indexed."""
    run_pks = tx.all_run_pks()
    total = len(run_pks)
    cached: tuple[int, Reducer] | None = None
    indexed = 0
    for done, run_pk in enumerate(run_pks, 1):
        if progress is not None and (done % 100 == 0 or done == total):
            progress(done, total)
        if verified.status(tx, run_pk) == "incomplete":
            continue
        parent_pk, raw_input, raw_refs, reason = tx.run_row(run_pk)
        try:
            reducer = (
                cached[1]
                if cached is not None and cached[0] == parent_pk
                else replayed_to(tx, parent_pk).reducer
            )
            cached = None
            record = RunRecord(
                input=ingest.decode(raw_input.encode("utf-8")) if raw_input else None,
                events=verified.run_events(tx, run_pk),
                input_refs=ingest.decode(raw_refs.encode("utf-8")) if raw_refs else None,
                as_sent=body_as_sent(raw_input is not None, reason),
            )
            names, snapshot = named_ids(record.events)
            reducer.take_unmoved()
            before = len(reducer.messages)
            apply_run(reducer, record)
        except InvalidEventError:
            continue  # a view the client cannot derive: checkout raises, nothing to find
        unmoved = reducer.take_unmoved()
        start = 0 if snapshot else min(unmoved, before)
        messages = reducer.messages
        positions = search.changed_positions(messages, start, reducer.holders(names))
        search.index_run(
            tx, tx.run_thread(run_pk), run_pk, messages, positions,
            checkpoints.layout_of(tx, run_pk),
        )
        cached = (run_pk, reducer)
        indexed += 1
    return indexed


#: What replaying a run needs of its row: ``(parent, input, input_refs, lineage)``.
RunRow = tuple[int | None, str | None, str | None, str]


def _of_run(tx: port.Reading, run_pk: int, e: CorruptStoreError) -> CorruptStoreError:
    """``e`` met deriving a run, naming that run: derivation reads many runs' rows."""
    names = tx.run_names(run_pk)
    if names is None:
        return e
    thread_id, run_id = names
    return CorruptStoreError(
        f"run {quote(run_id)} of thread {quote(thread_id)}: {e.damage}", advice=RUN_CHECK
    )


class Deriver:
    """Derives complete runs inside a store's write transactions, continuing the views its
    memory keeps: on append (:mod:`agui_store.engine.placement` says when), what appends left
    for later, and what ``compact`` forces. ``checkpoint_events``: the store's option (a
    checkpoint when the runs since the last one on the lineage hold that many events)."""

    def __init__(self, memory: Memory, checkpoint_events: int) -> None:
        self.memory = memory
        self.checkpoint_events = checkpoint_events

    def derive(
        self,
        tx: port.Writing,
        thread_pk: int,
        run_pk: int,
        now: int,
        events: list[dict[str, Any]] | None = None,
        run_row: RunRow | None = None,
        *,
        force_checkpoint: bool = False,
    ) -> None:
        """:meth:`_complete` a run, for a lineage the client can replay."""
        try:
            self._complete(
                tx, thread_pk, run_pk, now, events, run_row, force_checkpoint=force_checkpoint
            )
        except InvalidEventError:
            # The lineage replays into something the official client itself would throw on
            # (e.g. a first TOOL_CALL_CHUNK without a name, which verifyEvents lets through):
            # the events are legal to record, the view cannot be derived. No digest, no
            # checkpoint; checkout raises what the client would.
            self.memory.drop_view(thread_pk)

    def leave_underived(self, tx: port.Writing, thread_pk: int, run_pks: list[int]) -> None:
        """Note runs whose derived data is missing, for whoever needs it next."""
        tx.mark_underived(run_pks)
        # The cached view no longer leads to the thread's next run.
        self.memory.drop_view(thread_pk)
        self.memory.note_underived(thread_pk)

    def derive_underived(self, tx: port.Writing, thread_pk: int | None) -> int:
        """Derive what was left for later, in a thread (``None``: everywhere), in run order
        (a parent before its runs): their lineage digests, and checkpoints per
        ``checkpoint_events``. Returns how many runs were derived."""
        underived = self.memory.underived_threads(tx)
        if thread_pk is not None and thread_pk not in underived:
            return 0
        if thread_pk is None and not underived:
            return 0
        rows = tx.underived_runs(thread_pk)
        now = clock.now_ms()
        derived = 0
        for run_pk, run_thread in rows:
            tx.clear_underived(run_pk)
            if self.memory.known_status(tx, run_pk) == "incomplete":
                continue  # below a run that changed; it is noted again when it completes
            if tx.has_checkpoint(run_pk):
                continue  # compact got there first
            try:
                self.derive(tx, run_thread, run_pk, now)
            except CorruptStoreError as e:
                raise _of_run(tx, run_pk, e) from None
            derived += 1
        self.memory.note_derived(thread_pk)
        return derived

    def write_checkpoints(
        self, tx: port.Writing, threads: Sequence[int | None], run_pks: Iterable[int]
    ) -> int:
        """Write a checkpoint for every complete run of ``run_pks`` that has none, after
        deriving what ``threads`` left for later (``None``: every thread), so that each run
        continues the view its parent left in memory. Returns how many were written."""
        before = tx.checkpoint_count()
        # Digests lost while their checkpoints stayed: the checkpoint has it.
        tx.digests_from_checkpoints()
        for thread_pk in threads:
            self.derive_underived(tx, thread_pk)
        now = clock.now_ms()
        for pk in run_pks:
            if tx.has_checkpoint(pk) or verified.status(tx, pk) == "incomplete":
                continue
            self.derive(tx, tx.run_thread(pk), pk, now, force_checkpoint=True)
        return tx.checkpoint_count() - before

    def _complete(
        self,
        tx: port.Writing,
        thread_pk: int,
        run_pk: int,
        now: int,
        events: list[dict[str, Any]] | None = None,
        run_row: RunRow | None = None,
        *,
        force_checkpoint: bool = False,
    ) -> bool:
        """Replay a complete run onto its parent's view and store what derives from it: its
        lineage digest, and its checkpoint when due (or forced). Returns whether a
        checkpoint was written.

        Args:
            events: the run's events as just appended, decoded and owned by the store, when
                the batch held all of them (else they are read back).
            run_row: the run's ``(parent, input, input_refs, lineage)`` when the caller has
                them.
        """
        if run_row is None:
            run_row = tx.run_row(run_pk)
        parent_pk, raw_input, raw_refs, reason = run_row
        cached = self.memory.cached_view(tx, thread_pk)
        self.memory.drop_view(thread_pk)
        if cached is None or cached.run_pk != parent_pk:
            cached = replayed_to(tx, parent_pk)
        # Consumed: the reducer, the digest state and the id list go on from the parent's.
        reducer, hasher, since, lineage = (
            cached.reducer,
            cached.ids_hasher,
            cached.since,
            cached.lineage,
        )
        record = RunRecord(
            input=ingest.decode(raw_input.encode("utf-8")) if raw_input else None,
            events=events if events is not None else verified.run_events(tx, run_pk),
            input_refs=ingest.decode(raw_refs.encode("utf-8")) if raw_refs else None,
            as_sent=body_as_sent(raw_input is not None, reason),
        )
        names, snapshot = since.note(record)
        # What the digest needs to tell a list that grew from one that changed: whether the
        # run left the list's objects where they stood (the reducer reports it, so nothing
        # here copies or compares the history), and the id and kind of each message the
        # run's events can reach.
        since.settle(reducer.take_unmoved())  # runs replayed since the checkpoint, if any
        before = len(reducer.messages)
        reached_before = reached(reducer, names)
        apply_run(reducer, record)
        messages = reducer.messages
        unmoved = reducer.take_unmoved()
        since.settle(unmoved)
        if only_appended(before, unmoved, reached_before, snapshot):
            new_ids = lineage_ids(messages[before:])
            hasher = hash_ids(new_ids, hasher)
            lineage.extend(new_ids)
        else:
            lineage = lineage_ids(messages)
            hasher = hash_ids(lineage)
        digest = bytes(hasher.digest())
        tx.insert_digest(digest, run_pk)
        written = False
        if force_checkpoint or since.events >= self.checkpoint_events:
            written = write_checkpoint(
                tx, run_pk, reducer, since, digest, now, self.memory.known_run_hash(tx, run_pk)
            )
            if written:
                since = SinceCheckpoint(
                    run_pk,
                    since.layout,  # the new checkpoint's (write_checkpoint set it)
                    len(messages),
                    len(messages),
                    state_anchor=since.state_anchor,
                    state_bytes=since.state_bytes,
                    state_address=since.state_address,
                )
        # The messages the run added or changed, found by their words from now on, each
        # read back from the checkpoint just written when there is one.
        start = 0 if snapshot else min(unmoved, before)
        positions = search.changed_positions(messages, start, reducer.holders(names))
        search.index_run(
            tx, thread_pk, run_pk, messages, positions, since.layout if written else None
        )
        self.memory.keep_view(
            thread_pk,
            CachedView(run_pk, reducer, hasher, since, lineage, self.memory.newest_seq()),
        )
        return written
