"""What a store remembers between calls: facts its appends left in the database, the views
they derived, the sequence state of open runs, and what it read of request bodies.

Each is a cache of something the database (or a body's text) holds, so each can be
dropped at any time and found again: :meth:`Memory.forget` after a failed write or in a
forked child. Facts about the database are trusted while its data version says nothing
was written since (:meth:`Memory.notice_other_writes`); facts about a text (a validated
chunk's address, a remembered body) are true in any store and never stale.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agui_store.engine import port, reads
from agui_store.engine.cached_view import CachedView
from agui_store.history import resent_bodies
from agui_store.protocol.verify import SequenceVerifier

if TYPE_CHECKING:
    from agui_store.protocol.reducer import Reducer

#: How many runs and threads an import remembers (:class:`Known`) before forgetting them all.
KNOWN_LIMIT = 10_000
#: How many live runs' copy-check views a store keeps (each holds a run's whole view).
COPY_CHECKS_KEPT = 4
#: How many validated chunk addresses a store remembers (64 messages each) before
#: forgetting them all: about 2 MB, a million messages' worth.
VALID_CHUNKS_LIMIT = 16_384


@dataclass
class Known:
    """What this store's appends left in the file: trusted while SQLite's data version says
    nothing was written since (by another connection, or by this store's other methods),
    it spares each append the queries that would find it again. Where writers of other
    threads commit at any time (PostgreSQL: the port's ``version()`` is None), only what
    never changes is kept between transactions (:meth:`lasting`), and what an append
    remembers of its own thread is checked under the thread's lock
    (:meth:`Memory.check_thread_facts`)."""

    version: int | None = None  # the data version our last append's commit produced
    thread_pks: dict[str, int] = field(default_factory=dict)
    owners: dict[int, str | None] = field(default_factory=dict)  # thread pk -> its owner
    newest: dict[int, int | None] = field(default_factory=dict)  # thread pk -> newest run
    next_seq: int | None = None
    branched: dict[int, bool] = field(default_factory=dict)  # thread pk -> has branches
    # Of the runs appends touch (a live run streamed in many small appends touches one):
    run_ids: dict[int, str] = field(default_factory=dict)  # run pk -> run id
    last_seqs: dict[int, int] = field(default_factory=dict)  # run pk -> its last event
    statuses: dict[int, str] = field(default_factory=dict)  # run pk -> status
    run_hashes: dict[int, bytes] = field(default_factory=dict)  # run pk -> its hash now
    run_pks: dict[tuple[int, str], int] = field(default_factory=dict)  # (thread, run id) -> pk
    # Thread pk -> its incomplete runs: an unnamed continuation must find exactly one.
    open_runs: dict[int, set[int]] = field(default_factory=dict)
    # The threads whose newest run is open, for a batch that names no thread.
    open_threads: set[str] | None = None
    # The threads with complete runs whose derived data was left for later (``underived``).
    underived: set[int] | None = None

    def lasting(self) -> Known:
        """What no write can change: the threads' keys and owners, the runs' keys and ids
        (all forgotten once they hold more than ``KNOWN_LIMIT`` entries, so that a store
        appending for months keeps a bounded memory)."""
        if len(self.run_ids) + len(self.run_pks) + len(self.thread_pks) > KNOWN_LIMIT:
            return Known()
        return Known(
            thread_pks=self.thread_pks,
            owners=self.owners,
            run_ids=self.run_ids,
            run_pks=self.run_pks,
        )


class Memory:
    """What one store remembers between calls. ``derive_on_append``: the store's option
    (appends that derive what they complete ask after what is left underived)."""

    def __init__(self, derive_on_append: bool) -> None:
        self.derive_on_append = derive_on_append
        # Sequence state of each open run, so that a live run streamed in many small appends
        # is not re-verified from its start each time. Keyed by run (two runs of a thread may
        # stream at once); valid while the run's last sequence number is unchanged (another
        # writer invalidates it).
        self.verifiers: dict[int, tuple[int, SequenceVerifier]] = {}
        self.views: dict[int, CachedView] = {}
        # The view a live run's last copy check reached (placement's _refuse_risky_copies),
        # so that a run streaming JSON Patch copies is not replayed from its start at every
        # append: run -> (the run's last sequence number the view has seen, the reducer
        # holding it). Valid while that number is at most the run's (what came after it is
        # read and fed); a few runs at most (COPY_CHECKS_KEPT).
        self.copy_checks: dict[int, tuple[int, Reducer]] = {}
        # Threads whose cached view another writer may have made stale (see cached_view).
        self.unverified: set[int] = set()
        self.known = Known()
        # Addresses of message chunks that validated (see Intake._validate_input): a fact
        # about their content, true in any store and never stale.
        self.valid_chunks: set[bytes] = set()
        # The messages of the last request body of recent threads, and what their JSON text
        # gave (see Intake._read_resent): facts about that text, true in any store and
        # never stale.
        self.resent = resent_bodies.Memo()

    def forget(self) -> None:
        """Drop in-memory caches (after a failed write, or in a forked child)."""
        self.verifiers.clear()
        self.views.clear()
        self.copy_checks.clear()
        self.known = Known()

    def keep_copy_check(self, run_pk: int, seen: int, reducer: Reducer) -> None:
        """Keep the view a run's copy check reached (``copy_checks``), the oldest kept
        forgotten past ``COPY_CHECKS_KEPT``."""
        self.copy_checks.pop(run_pk, None)
        self.copy_checks[run_pk] = (seen, reducer)
        if len(self.copy_checks) > COPY_CHECKS_KEPT:
            del self.copy_checks[next(iter(self.copy_checks))]

    def keep_caches_small(self, thread_id: str) -> None:
        """Between an import's batches: keep what the next batch may use (the cached view
        and sequence state of the thread just written), not every thread's view, so that
        memory does not grow with the threads of a large file. What is dropped is found
        again in the file when needed."""
        thread_pk = self.known.thread_pks.get(thread_id)
        for pk in [pk for pk in self.views if pk != thread_pk]:  # keyed by thread
            del self.views[pk]
        # Keyed by run, newest last: the run a next batch may continue is among the last.
        for pk in list(self.verifiers)[:-4]:
            del self.verifiers[pk]
        remembered = (v for v in vars(self.known).values() if isinstance(v, (dict, set)))
        if sum(len(v) for v in remembered) > KNOWN_LIMIT:
            self.known = Known()

    def notice_other_writes(self, tx: port.Reading, thread_id: str | None = None) -> None:
        """Inside a write transaction: when anything was written since this store's last
        append (by another connection, or by its own other methods), what it remembers of
        the database is found again, and its cached views are checked before use. Where
        writers of other threads may have committed (the version is None), what it
        remembers of ``thread_id``, the thread an append holds the lock of, is checked
        instead, in one query."""
        version = tx.version()
        if version is not None:
            if version != self.known.version:
                self.known = Known()
                self.unverified = set(self.views)
            return
        remembered = self.known
        self.known = remembered.lasting()
        self.unverified = set(self.views)
        thread_pk = remembered.thread_pks.get(thread_id) if thread_id is not None else None
        if thread_pk is not None:
            self.check_thread_facts(tx, thread_pk, remembered)

    def check_thread_facts(self, tx: port.Reading, thread_pk: int, remembered: Known) -> None:
        """Keep what ``remembered`` holds of a thread and still holds: a run's facts while
        its last ``seq`` is what this store left (a batch changes it), the thread's open
        runs while its newest run and each open one are unchanged (a run opens only as the
        newest), and its cached view while the derived data it stands on is there. Runs of
        the thread are written only under its lock, which this transaction holds."""
        cached = self.views.get(thread_pk)
        view = (
            (bytes(cached.ids_hasher.digest()), cached.run_pk)
            if cached is not None and cached.run_pk is not None
            else None
        )
        # The runs whose facts are worth a probe: the newest (the next run's parent), the
        # open ones and those streamed (their sequence state is kept); any other is read
        # again if an append needs it, so the check costs the same on the 2,000th run.
        worth = set(remembered.open_runs.get(thread_pk, ())) | set(self.verifiers)
        newest_known = remembered.newest.get(thread_pk)
        if newest_known is not None:
            worth.add(newest_known)
        newest, branched, last_seqs, view_holds, underived = tx.thread_facts(
            thread_pk,
            sorted(worth & remembered.last_seqs.keys()),
            view,
            cached.since.run_pk if cached is not None else None,
            # Only an append that derives what it completes asks: it derives what is left
            # of its thread first. One that leaves it for later only adds to the list.
            probe_underived=self.derive_on_append,
        )
        known = self.known
        known.newest[thread_pk] = newest
        known.branched[thread_pk] = branched
        # Of the threads with underived runs, only this one's entry is known: an append
        # touches no other thread (derive() of all threads runs in a transaction of its own,
        # which finds the whole set again). Not asked: not known (None: read when needed).
        if self.derive_on_append:
            known.underived = {thread_pk} if underived else set()
        unchanged: set[int] = set()
        for run_pk, last_seq in last_seqs.items():
            known.last_seqs[run_pk] = last_seq
            if remembered.last_seqs[run_pk] != last_seq:
                continue
            unchanged.add(run_pk)
            if run_pk in remembered.statuses:
                known.statuses[run_pk] = remembered.statuses[run_pk]
            if run_pk in remembered.run_hashes:
                known.run_hashes[run_pk] = remembered.run_hashes[run_pk]
        open_runs = remembered.open_runs.get(thread_pk)
        if (
            open_runs is not None
            and remembered.newest.get(thread_pk, -1) == newest
            and open_runs <= unchanged
        ):
            known.open_runs[thread_pk] = open_runs
        self.unverified.discard(thread_pk)
        if cached is not None and not view_holds:
            del self.views[thread_pk]

    def remember_version(self, tx: port.Reading) -> None:
        """At the end of an append: the commit adds one to the data version, so the next
        append sees exactly that unless something else was written in between."""
        version = tx.version()
        self.known.version = None if version is None else version + 1

    def next_seq(self, tx: port.Writing) -> int:
        """The next event's sequence number (remembered between the segments of a batch
        and, where the version vouches for it, between appends)."""
        known = self.known
        if known.next_seq is None:
            known.next_seq = tx.next_seq()
        return known.next_seq

    def remember_batch(
        self,
        thread_pk: int,
        thread_id: str,
        run_pk: int | None,
        outcome: str | None,
        last_seq: int,
    ) -> None:
        """What a segment just written (of run ``run_pk``, ending it with ``outcome`` if
        not ``None``) changes in the facts appends remember."""
        known = self.known
        assert run_pk is not None
        known.last_seqs[run_pk] = last_seq
        if outcome is not None:
            known.statuses[run_pk] = outcome
        is_open = known.statuses.get(run_pk) == "incomplete"
        open_runs = known.open_runs.get(thread_pk)
        if open_runs is not None:
            if is_open:
                open_runs.add(run_pk)
            else:
                open_runs.discard(run_pk)
        if known.open_threads is not None and known.newest.get(thread_pk) == run_pk:
            if is_open:
                known.open_threads.add(thread_id)
            else:
                known.open_threads.discard(thread_id)

    def head(self, tx: port.Reading, thread_pk: int) -> int | None:
        """The thread's newest run, inside an append (remembered between appends)."""
        newest = self.known.newest
        if thread_pk not in newest:
            newest[thread_pk] = tx.newest_run(thread_pk)
        return newest[thread_pk]

    def known_run_id(self, tx: port.Reading, run_pk: int) -> str:
        """A run's id, read once and then remembered."""
        run_ids = self.known.run_ids
        if run_pk not in run_ids:
            run_ids[run_pk] = tx.run_id(run_pk)
        return run_ids[run_pk]

    def known_status(self, tx: port.Reading, run_pk: int) -> str:
        """A run's status, read once and then remembered until a write changes it."""
        statuses = self.known.statuses
        if run_pk not in statuses:
            statuses[run_pk] = reads.status(tx, run_pk)
        return statuses[run_pk]

    def known_last_seq(self, tx: port.Reading, run_pk: int) -> int:
        """A run's last ``seq``, read once and then remembered until a write changes it."""
        last_seqs = self.known.last_seqs
        if run_pk not in last_seqs:
            last_seqs[run_pk] = tx.run_last_seq(run_pk)
        return last_seqs[run_pk]

    def known_run_hash(self, tx: port.Reading, run_pk: int) -> bytes:
        """A run's hash now: its newest batch's (remembered between appends)."""
        run_hashes = self.known.run_hashes
        if run_pk not in run_hashes:
            run_hashes[run_pk] = tx.run_hash(run_pk)
        return run_hashes[run_pk]

    def cached_view(self, tx: port.Reading, thread_pk: int) -> CachedView | None:
        """The thread's view in memory, when the file still holds what it stands on.

        Another writer can make it stale: events recorded after a run's end (with
        ``check_sequence=False``) drop that run's digest and checkpoints, and those below.
        Two key probes tell, once after each such write.
        """
        cached = self.views.get(thread_pk)
        if cached is None or thread_pk not in self.unverified:
            return cached
        self.unverified.discard(thread_pk)
        since_cp = cached.since.run_pk
        digest_kept = cached.run_pk is not None and tx.has_digest(
            bytes(cached.ids_hasher.digest()), cached.run_pk
        )
        base_gone = since_cp is not None and not tx.has_checkpoint(since_cp)
        if not digest_kept or base_gone:
            del self.views[thread_pk]
            return None
        return cached


    def note_valid(self, addresses: Iterable[bytes]) -> None:
        """Remember the addresses of chunks whose messages validated (Intake._validate_input)."""
        fresh = [address for address in addresses if address not in self.valid_chunks]
        if len(self.valid_chunks) + len(fresh) > VALID_CHUNKS_LIMIT:
            self.valid_chunks.clear()
        self.valid_chunks.update(fresh)
