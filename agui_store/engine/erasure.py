"""Forgetting on request: the erasure verbs' logic, once for every backend.

An erasure takes whole threads out of the store, in one write transaction: their log (runs,
events, echoed inputs, batches), their branches, their derived data (checkpoints, lineage
digests, the blobs no other thread's checkpoint refers to) and the pydantic-ai conversations
linked to them (:func:`agui_store.engine.conversations.linked`). Content stored once and
shared with a thread that stays (a blob, a conversation message) stays with it.

What the store keeps of an erasure holds no content and no thread id:

- an entry in its **erasure log** (``erasures``): when, which verb, how many threads, runs,
  events, conversations and bytes, and the event sequence numbers it took out of the log.
  Each entry's hash covers its fields and the entry before it. ``check()`` reads the log to
  tell a hole an erasure left in the sequence numbers from rows deleted outside the store
  (see :mod:`agui_store.engine.integrity`);
- a **tombstone** per erased thread (:mod:`agui_store.engine.tombstones`): a hash of its id
  and when it was erased, so that ``copy`` does not bring the thread back
  (:mod:`agui_store.sync`). It covers the threads of that id created at or before that time
  (:func:`~agui_store.engine.tombstones.covers`): an id written again after its erasure
  starts a new thread, which copies carry like any other.

The physical purge (SQLite's WAL emptied into a file written with ``secure_delete``;
PostgreSQL's touched tables vacuumed) happens after the transaction commits: the store's
:meth:`~agui_store.engine.port.Backend.purge`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from agui_store.engine import checkpoints, clock, conversations, port, tombstones
from agui_store.records import ErasureReceipt, LoggedErasure, when

#: What each verb is logged as.
VERBS = ("delete_thread", "delete_owner", "prune", "copy")

#: The points of an erasure a test may stop it at (:func:`agui_store.testing.on_erasure_step`):
#: inside its transaction once the threads and runs to erase are found (``selected``) and
#: once every row is deleted and the erasure logged (``erased``), then after the commit,
#: before the purge (``committed``).
STEPS = ("selected", "erased", "committed")

#: Called with each step's name as an erasure reaches it (``None``: nothing is).
step_hook: Callable[[str], None] | None = None


def step(name: str) -> None:
    """An erasure reached step ``name`` (one of :data:`STEPS`): call the hook, if any."""
    if step_hook is not None:
        step_hook(name)

_ENCODER = msgspec.json.Encoder()


def conversation_covered(
    stones: Mapping[bytes, int], conversation_id: str, entries: Sequence[str], saved_at_us: int
) -> tuple[int, list[bytes]] | None:
    """Whether a version of a conversation (its id, the ids of the entries it reaches, when
    it was saved, in microseconds) is covered by ``stones`` (a store's tombstones): the
    time of the erasure and the tombstones that cover it, or ``None``. It is when it holds
    an entry the erased conversation of its id reached (the erased one, or one continued
    from it), or was saved at or before the erasure of its id."""
    hit = [s for s in (tombstones.entry_stone(conversation_id, e) for e in entries) if s in stones]
    if hit:
        return max(stones[s] for s in hit), hit
    named = tombstones.conversation_hash(conversation_id)
    at = stones.get(named)
    if at is not None and tombstones.covers(at, saved_at_us // 1000):
        return at, [named]
    return None


def lay_tombstones(tx: port.Writing, stones: Mapping[bytes, int]) -> None:
    """Keep a tombstone for each thread hash of ``stones`` at its time, or at the later
    time it already has (a thread written again under an erased id, and erased again)."""
    had = tx.tombstoned(sorted(stones)) if stones else {}
    later = {h: at for h, at in stones.items() if h not in had or had[h] < at}
    if not later:
        return  # a copy carrying what the destination has: nothing written
    tx.delete_tombstones(sorted(h for h in later if h in had))
    tx.insert_tombstones(sorted(later.items()))


def entry_hash(previous: bytes | None, row: Sequence[object]) -> bytes:
    """An erasure log entry's hash: its fields (``erased_at, verb, threads, runs, events,
    conversations, bytes, seqs``) and the previous entry's hash (``None``: the first)."""
    h = hashlib.sha256(b"agui-store erasure 1\x00")
    h.update(previous if previous is not None else b"\xff" * 32)
    for value in row:
        data = str(value).encode("utf-8")
        h.update(len(data).to_bytes(8, "big") + data)
    return h.digest()


def _ranges(ranges: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Sequence-number ranges, sorted and joined where they touch."""
    merged: list[list[int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return merged


@dataclass
class _Derived:
    """What erasing threads' derived data takes: the blobs no kept checkpoint refers to."""

    blob_ids: list[int]
    size: int


def erase_derived(
    tx: port.Writing, thread_pks: Sequence[int], run_pks: Sequence[int], *, dry_run: bool
) -> _Derived:
    """Erase the derived data of these threads and their runs: every structure the store
    built from their log (the search index's rows, checkpoints, lineage digests, underived
    marks) and the content-addressed blobs that no checkpoint of a kept run refers to. The
    one place derived data of erased threads goes: a derived structure added to the store
    is cleared here too."""
    erased = checkpoints.unshared_blobs(tx, run_pks)
    size = tx.blob_bytes(erased) if erased else 0
    if not dry_run:
        for thread_pk in thread_pks:
            tx.forget_thread_search(thread_pk)
        tx.erase_derived(run_pks, erased)
    return _Derived(erased, size)


def idle_threads(tx: port.Writing, before: int, scope: str | None) -> list[int]:
    """The threads ``prune`` erases (of an owner; ``None``: all): idle since ``before``
    (microseconds since the epoch), which is no batch appended since and no run left open
    (:meth:`~agui_store.engine.port.ErasureReads.idle_threads`), and no conversation linked
    to the thread (:func:`conversations.linked`, which go with it) saved since either."""
    found = tx.idle_threads(clock.ms_at_or_after(before), scope)
    newest = tx.conversations(None, 1)
    if not newest or newest[0].updated_at < before:
        return found  # no conversation saved since: nothing more to ask of each thread
    idle = []
    for pk in found:
        talks = (tx.conversation(c) for c in conversations.linked(tx, tx.thread_id(pk)))
        if all(talk is None or talk.updated_at < before for talk in talks):
            idle.append(pk)
    return idle


def idle_conversations(
    tx: port.Writing, before: int, scope: str | None, pruned: Sequence[int]
) -> list[str]:
    """The pydantic-ai conversations ``prune`` erases besides those linked to the threads it
    erases (``pruned``, keys): every one (saved under ``scope``; ``None``: any) last saved
    before ``before`` (microseconds since the epoch) that no thread that stays holds
    (:func:`conversations.linked`: the thread its id names, or one whose runs announced a
    save of it): a conversation with no AG-UI thread ages as a thread does."""
    out = []
    gone = set(pruned)
    for row in tx.conversations(scope, conversations.EVERY):
        if int(row.updated_at) >= before:
            continue
        cid = str(row.conversation_id)
        thread = tx.thread(cid)
        if thread is not None and thread[0] not in gone and cid in conversations.linked(tx, cid):
            continue  # its thread stays, and keeps it: it goes when that thread goes
        out.append(cid)
    if out:  # one a staying thread's runs announced a save of stays with that thread too
        left = {tx.thread_id(pk) for pk in gone}
        held = {
            cid
            for thread_id in tx.thread_ids(None)
            if thread_id not in left
            for cid in conversations.linked(tx, thread_id)
        }
        out = [cid for cid in out if cid not in held]
    return out


def erase(
    tx: port.Writing,
    thread_pks: Sequence[int],
    verb: str,
    now: int,
    *,
    owner: str | None = None,
    dry_run: bool = False,
    erased_at: Mapping[str, int] | None = None,
    conversation_times: Mapping[str, int] | None = None,
    with_linked: bool = True,
) -> ErasureReceipt:
    """Erase the threads ``thread_pks`` (keys), the conversations linked to them and, with
    an ``owner``, every conversation saved under that scope, and log it as ``verb`` at
    ``now`` (milliseconds since the epoch), inside the write transaction ``tx``; with
    ``dry_run``, count what would go and change nothing. The receipt's ``purged`` is left
    ``False``: the purge comes after the commit. A thread's tombstone is laid at ``now``,
    or at its time in ``erased_at`` (a copy carrying another store's erasure);
    ``conversation_times``: conversations erased as well, each with its tombstone's time
    (conversations are often named by their thread's id: the two maps are apart).
    ``with_linked=False`` leaves the threads' linked conversations to ``conversation_times``
    (a copy erases those its source's tombstones cover, not those a name links). An erased
    conversation leaves a tombstone of its id, one marking that its entries have their
    own, and one for each entry it reached (:func:`~agui_store.engine.tombstones.entry_stone`)."""
    tx.erasing()
    thread_pks = sorted(set(thread_pks))
    thread_ids = [tx.thread_id(pk) for pk in thread_pks]
    run_pks: list[int] = []
    for pk in thread_pks:
        run_pks.extend(tx.thread_run_pks(pk))
    events, size, ranges = tx.erased_log(run_pks) if run_pks else (0, 0, [])
    if not dry_run:
        step("selected")
    linked = (
        {str(row[1]) for row in tx.conversations(owner, conversations.EVERY)}
        if owner is not None
        else set()
    )
    for thread_id in thread_ids if with_linked else ():
        linked.update(conversations.linked(tx, thread_id))
    talk_times = conversation_times or {}
    linked |= set(talk_times)
    held = [cid for cid in sorted(linked) if tx.conversation(cid) is not None]
    reached: dict[str, list[str]] = {}
    found, conversation_bytes = conversations.erase(
        tx, sorted(linked), dry_run=dry_run, reached=reached
    )
    derived = erase_derived(tx, thread_pks, run_pks, dry_run=dry_run)
    receipt = ErasureReceipt(
        threads=len(thread_pks),
        runs=len(run_pks),
        events=events,
        conversations=found,
        bytes=size + conversation_bytes + derived.size,
        purged=False,
        dry_run=dry_run,
    )
    if dry_run or not (thread_pks or found):
        return receipt
    times = erased_at or {}
    if thread_pks:
        tx.erase_log(thread_pks, run_pks)
    stones = {tombstones.thread_hash(t): times.get(t, now) for t in thread_ids}
    for c in held:
        at = talk_times.get(c, now)
        stones[tombstones.conversation_hash(c)] = stones[tombstones.entries_stone(c)] = at
        stones.update((tombstones.entry_stone(c, e), at) for e in reached.get(c, ()))
    lay_tombstones(tx, stones)
    seqs = _ENCODER.encode(_ranges(ranges)).decode()
    row = (now, verb, receipt.threads, receipt.runs, events, found, receipt.bytes, seqs)
    logged = tx.erasures()
    previous = bytes(logged[-1].hash) if logged else None
    tx.insert_erasure(port.ErasureEntry(*row, entry_hash(previous, row)))
    # Nothing erased stays decoded in this connection's memory (:mod:`agui_store.engine.trust`).
    tx.trusted_blobs().forget_messages()
    step("erased")
    return receipt


def logged(tx: port.Reading) -> list[tuple[LoggedErasure, list[list[int]], bool]]:
    """The erasure log: each entry, the sequence-number ranges it took out of the log, and
    whether its hash holds (its fields and the entry before it)."""
    out: list[tuple[LoggedErasure, list[list[int]], bool]] = []
    previous: bytes | None = None
    for pk, at, verb, threads, runs, events, found, size, seqs, stored in tx.erasures():
        row = (
            int(at),
            str(verb),
            int(threads),
            int(runs),
            int(events),
            int(found),
            int(size),
            str(seqs),
        )
        sound = entry_hash(previous, row) == bytes(stored)
        try:
            ranges = [[int(a), int(b)] for a, b in msgspec.json.decode(str(seqs))]
        except (msgspec.DecodeError, TypeError, ValueError):
            ranges, sound = [], False
        entry = LoggedErasure(
            number=int(pk),
            erased_at=when(int(at)),
            verb=str(verb),
            threads=int(threads),
            runs=int(runs),
            events=int(events),
            conversations=int(found),
            bytes=int(size),
            hash=bytes(stored).hex(),
        )
        out.append((entry, ranges, sound))
        previous = bytes(stored)
    return out


__all__ = [
    "STEPS", "VERBS", "entry_hash", "erase", "erase_derived", "logged", "step",
]
