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

from agui_store.engine import port, verified
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
    """What one store remembers between calls, behind methods: no other module reads or
    writes its state directly, so every rule about when a fact may be trusted is here.

    ``derive_on_append``: the store's option (appends that derive what they complete ask
    after what is left underived)."""

    def __init__(self, derive_on_append: bool) -> None:
        self.derive_on_append = derive_on_append
        # Sequence state of each open run, so that a live run streamed in many small appends
        # is not re-verified from its start each time. Keyed by run (two runs of a thread may
        # stream at once); valid while the run's last sequence number is unchanged (another
        # writer invalidates it).
        self._verifiers: dict[int, tuple[int, SequenceVerifier]] = {}
        self._views: dict[int, CachedView] = {}
        # The view a live run's last copy check reached (placement's _refuse_risky_copies),
        # so that a run streaming JSON Patch copies is not replayed from its start at every
        # append: run -> (the run's last sequence number the view has seen, the reducer
        # holding it). Valid while that number is at most the run's (what came after it is
        # read and fed); a few runs at most (COPY_CHECKS_KEPT).
        self._copy_checks: dict[int, tuple[int, Reducer]] = {}
        # Threads whose cached view another writer may have made stale (see cached_view).
        self._unverified: set[int] = set()
        self._known = Known()
        # Addresses of message chunks that validated (see Intake._validate_input): a fact
        # about their content, true in any store and never stale.
        self._valid_chunks: set[bytes] = set()
        # The messages of the last request body of recent threads, and what their JSON text
        # gave (see Intake._read_resent): facts about that text, true in any store and
        # never stale.
        self._resent = resent_bodies.Memo()

    # --- lifecycle ------------------------------------------------------------------------

    def forget(self) -> None:
        """Drop what it remembers of the database (after a failed write, or in a forked
        child); facts about texts stay true."""
        self._verifiers.clear()
        self._views.clear()
        self._copy_checks.clear()
        self._known = Known()

    def forget_everything(self) -> None:
        """Drop every cache, facts about texts included: the next call is cold."""
        self.forget()
        self._valid_chunks.clear()
        self._resent.clear()

    def after_fork(self, same_process: bool) -> None:
        """In a forked child: the bodies' memory drops its lock; what the parent knew of the
        database is dropped unless this is still the process that learnt it."""
        self._resent.after_fork()
        if not same_process:
            self.forget()

    def close(self) -> None:
        """The store closes: what it read of request bodies goes."""
        self._resent.clear()

    # --- request bodies and validated chunks -----------------------------------------------

    @property
    def resent(self) -> resent_bodies.Memo:
        """What the store remembers of the request bodies it read (an object of its own,
        with its own rules: :class:`agui_store.history.resent_bodies.Memo`)."""
        return self._resent

    def read_bodies_whole(self) -> None:
        """Remember nothing of request bodies from now on (every body is read whole)."""
        self._resent = resent_bodies.Memo(budget=0)

    def unvalidated(
        self, chunks: dict[tuple[int, int], bytes]
    ) -> list[tuple[tuple[int, int], bytes]]:
        """The ``(span, address)`` of the chunks not known to have validated."""
        valid = self._valid_chunks
        return [(span, address) for span, address in chunks.items() if address not in valid]

    def note_valid(self, addresses: Iterable[bytes]) -> None:
        """Remember the addresses of chunks whose messages validated (Intake._validate_input)."""
        fresh = [address for address in addresses if address not in self._valid_chunks]
        if len(self._valid_chunks) + len(fresh) > VALID_CHUNKS_LIMIT:
            self._valid_chunks.clear()
        self._valid_chunks.update(fresh)

    # --- cached views, copy checks and sequence state ---------------------------------------

    def newest_seq(self) -> int | None:
        """The newest event this transaction holds, when an append of it told (``None``:
        not known without a query)."""
        next_seq = self._known.next_seq
        return None if next_seq is None else next_seq - 1

    def keep_view(self, thread_pk: int, view: CachedView) -> None:
        """Keep the view a thread's newest derived run left (what its next run continues)."""
        self._views[thread_pk] = view

    def drop_view(self, thread_pk: int) -> None:
        """Forget a thread's cached view: it no longer leads to the thread's next run."""
        self._views.pop(thread_pk, None)

    def keep_copy_check(self, run_pk: int, seen: int, reducer: Reducer) -> None:
        """Keep the view a run's copy check reached, the oldest kept forgotten past
        ``COPY_CHECKS_KEPT``."""
        self._copy_checks.pop(run_pk, None)
        self._copy_checks[run_pk] = (seen, reducer)
        if len(self._copy_checks) > COPY_CHECKS_KEPT:
            del self._copy_checks[next(iter(self._copy_checks))]

    def take_copy_check(self, tx: port.Reading, run_pk: int) -> tuple[int, Reducer] | None:
        """The view a run's last copy check reached and the last ``seq`` it saw, taken out
        of the cache (the caller keeps it again once it has fed it), while it is still
        behind the run (another writer may have rewritten what it saw)."""
        kept = self._copy_checks.pop(run_pk, None)
        if kept is not None and kept[0] <= self.known_last_seq(tx, run_pk):
            return kept
        return None

    def drop_copy_check(self, run_pk: int) -> None:
        """Forget a run's copy check (the run completed)."""
        self._copy_checks.pop(run_pk, None)

    def verifier(self, tx: port.Reading, run_pk: int) -> SequenceVerifier | None:
        """A run's sequence state at its end, while the run is as it was when kept."""
        cached = self._verifiers.get(run_pk)
        if cached and cached[0] == self.known_last_seq(tx, run_pk):
            return cached[1]
        return None

    def keep_verifier(self, run_pk: int, last_seq: int, verifier: SequenceVerifier) -> None:
        """Keep a run's sequence state at ``last_seq`` while it is open (a complete run's is
        dropped: what continues a complete run is rare, and found again if it comes)."""
        if self._known.statuses.get(run_pk) == "incomplete":
            self._verifiers[run_pk] = (last_seq, verifier)
        else:
            self._verifiers.pop(run_pk, None)

    def keep_caches_small(self, thread_id: str) -> None:
        """Between an import's batches: keep what the next batch may use (the cached view
        and sequence state of the thread just written), not every thread's view, so that
        memory does not grow with the threads of a large file. What is dropped is found
        again in the file when needed."""
        thread_pk = self._known.thread_pks.get(thread_id)
        for pk in [pk for pk in self._views if pk != thread_pk]:  # keyed by thread
            del self._views[pk]
        # Keyed by run, newest last: the run a next batch may continue is among the last.
        for pk in list(self._verifiers)[:-4]:
            del self._verifiers[pk]
        remembered = (v for v in vars(self._known).values() if isinstance(v, (dict, set)))
        if sum(len(v) for v in remembered) > KNOWN_LIMIT:
            self._known = Known()

    # --- facts about the database ----------------------------------------------------------

    def notice_other_writes(self, tx: port.Reading, thread_id: str | None = None) -> None:
        """Inside a write transaction: when anything was written since this store's last
        append (by another connection, or by its own other methods), what it remembers of
        the database is found again, and its cached views are checked before use. Where
        writers of other threads may have committed (the version is None), what it
        remembers of ``thread_id``, the thread an append holds the lock of, is checked
        instead, in one query."""
        version = tx.version()
        if version is not None:
            if version != self._known.version:
                self._known = Known()
                self._unverified = set(self._views)
            return
        remembered = self._known
        self._known = remembered.lasting()
        self._unverified = set(self._views)
        thread_pk = remembered.thread_pks.get(thread_id) if thread_id is not None else None
        if thread_pk is not None:
            self.check_thread_facts(tx, thread_pk, remembered)

    def check_thread_facts(self, tx: port.Reading, thread_pk: int, remembered: Known) -> None:
        """Keep what ``remembered`` holds of a thread and still holds: a run's facts while
        its last ``seq`` is what this store left (a batch changes it), the thread's open
        runs while its newest run and each open one are unchanged (a run opens only as the
        newest), and its cached view while the derived data it stands on is there. Runs of
        the thread are written only under its lock, which this transaction holds."""
        cached = self._views.get(thread_pk)
        view = (
            (bytes(cached.ids_hasher.digest()), cached.run_pk, cached.seen_seq)
            if cached is not None and cached.run_pk is not None
            else None
        )
        # The runs whose facts are worth a probe: the newest (the next run's parent), the
        # open ones and those streamed (their sequence state is kept); any other is read
        # again if an append needs it, so the check costs the same on the 2,000th run.
        worth = set(remembered.open_runs.get(thread_pk, ())) | set(self._verifiers)
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
        if newest is None:
            # A thread this store wrote holds runs: none left, another store erased it since
            # (agui_store.engine.erasure), and what never changes changed: start afresh.
            self._known = Known()
            self._views.clear()
            self._unverified = set()
            return
        known = self._known
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
        self._unverified.discard(thread_pk)
        if cached is not None and not view_holds:
            del self._views[thread_pk]

    def remember_version(self, tx: port.Reading) -> None:
        """At the end of an append: the commit adds one to the data version, so the next
        append sees exactly that unless something else was written in between."""
        version = tx.version()
        self._known.version = None if version is None else version + 1

    def next_seq(self, tx: port.Writing) -> int:
        """The next event's sequence number (remembered between the segments of a batch
        and, where the version vouches for it, between appends)."""
        known = self._known
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
        run_hash: bytes,
    ) -> None:
        """What a segment just written (of run ``run_pk``, ending at ``last_seq`` with the
        run's hash ``run_hash``, and ending the run with ``outcome`` if not ``None``)
        changes in the facts appends remember."""
        known = self._known
        assert run_pk is not None
        known.next_seq = last_seq + 1
        known.last_seqs[run_pk] = last_seq
        known.run_hashes[run_pk] = run_hash
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
        newest = self._known.newest
        if thread_pk not in newest:
            newest[thread_pk] = tx.newest_run(thread_pk)
        return newest[thread_pk]

    def known_run_id(self, tx: port.Reading, run_pk: int) -> str:
        """A run's id, read once and then remembered."""
        run_ids = self._known.run_ids
        if run_pk not in run_ids:
            run_ids[run_pk] = tx.run_id(run_pk)
        return run_ids[run_pk]

    def known_status(self, tx: port.Reading, run_pk: int) -> str:
        """A run's status, read once and then remembered until a write changes it."""
        statuses = self._known.statuses
        if run_pk not in statuses:
            statuses[run_pk] = verified.status(tx, run_pk)
        return statuses[run_pk]

    def known_last_seq(self, tx: port.Reading, run_pk: int) -> int:
        """A run's last ``seq``, read once and then remembered until a write changes it."""
        last_seqs = self._known.last_seqs
        if run_pk not in last_seqs:
            last_seqs[run_pk] = tx.run_last_seq(run_pk)
        return last_seqs[run_pk]

    def known_run_hash(self, tx: port.Reading, run_pk: int) -> bytes:
        """A run's hash now: its newest batch's (remembered between appends)."""
        run_hashes = self._known.run_hashes
        if run_pk not in run_hashes:
            run_hashes[run_pk] = tx.run_hash(run_pk)
        return run_hashes[run_pk]

    def cached_view(self, tx: port.Reading, thread_pk: int) -> CachedView | None:
        """The thread's view in memory, when the file still holds what it stands on.

        Another writer can make it stale: events that continue a run of its lineage (a live
        run below later ones, or a run after its end with ``check_sequence=False``) drop
        what derives from that run, which may be derived again before this store looks.
        Three probes tell, once after each write of another: the digest and the checkpoint
        it stands on are there, and no run of its lineage grew since it was replayed.
        """
        cached = self._views.get(thread_pk)
        if cached is None or thread_pk not in self._unverified:
            return cached
        self._unverified.discard(thread_pk)
        since_cp = cached.since.run_pk
        digest_kept = (
            cached.run_pk is not None
            and cached.seen_seq is not None
            and tx.has_digest(bytes(cached.ids_hasher.digest()), cached.run_pk)
            and not tx.grew_since(thread_pk, cached.run_pk, cached.seen_seq)
        )
        base_gone = since_cp is not None and not tx.has_checkpoint(since_cp)
        if not digest_kept or base_gone:
            del self._views[thread_pk]
            return None
        return cached

    def thread(self, thread_id: str) -> tuple[int, str | None] | None:
        """A thread's ``(pk, owner)``, when remembered."""
        pk = self._known.thread_pks.get(thread_id)
        return None if pk is None else (pk, self._known.owners[pk])

    def remember_thread(self, thread_id: str, pk: int, owner: str | None) -> None:
        """A thread's pk and owner, which never change."""
        self._known.thread_pks[thread_id] = pk
        self._known.owners[pk] = owner

    def run_pk_and_next_seq(self, tx: port.Reading, thread_pk: int, run_id: str) -> int | None:
        """The pk of the thread's run ``run_id`` (``None``: there is none), reading the next
        event's sequence number in the same round trip when it is not remembered."""
        known = self._known
        if known.next_seq is None:
            recorded, known.next_seq = tx.run_pk_and_next_seq(thread_pk, run_id)
            return recorded
        return tx.run_pk(thread_pk, run_id)

    def run_pk_named(self, tx: port.Reading, thread_pk: int, run_id: str) -> int | None:
        """The pk of the thread's run ``run_id`` (``None``: there is none), remembered once
        found."""
        run_pks = self._known.run_pks
        found = run_pks.get((thread_pk, run_id))
        if found is None:
            found = tx.run_pk(thread_pk, run_id)
            if found is not None:
                run_pks[(thread_pk, run_id)] = found
        return found

    def remember_new_run(self, thread_pk: int, run_pk: int, run_id: str | None) -> None:
        """A run just inserted: the thread's newest, open; ``run_id``: its id, when the
        caller has it at hand."""
        known = self._known
        known.newest[thread_pk] = run_pk
        known.statuses[run_pk] = "incomplete"
        if run_id is not None:
            known.run_ids[run_pk] = run_id
            known.run_pks[(thread_pk, run_id)] = run_pk

    def remember_run_hash(self, run_pk: int, run_hash: bytes) -> None:
        """A run's hash now (a new run's start hash)."""
        self._known.run_hashes[run_pk] = run_hash

    def open_runs(self, tx: port.Reading, thread_pk: int) -> set[int]:
        """The thread's incomplete runs (remembered between appends; do not change the set)."""
        open_runs = self._known.open_runs
        if thread_pk not in open_runs:
            open_runs[thread_pk] = tx.open_runs(thread_pk)
        return open_runs[thread_pk]

    def threads_with_open_head(self, tx: port.Reading) -> set[str]:
        """The threads whose newest run is open (remembered between appends; do not change
        the set)."""
        known = self._known
        if known.open_threads is None:
            known.open_threads = tx.threads_with_open_head()
        return known.open_threads

    def may_have_branches(self, thread_pk: int) -> bool:
        """Whether the thread may have stored branches (``True`` when not known)."""
        return self._known.branched.get(thread_pk, True)

    def has_branches(self, tx: port.Reading, thread_pk: int) -> bool:
        """Whether the thread has stored branches (read once, then remembered)."""
        branched = self._known.branched
        if thread_pk not in branched:
            branched[thread_pk] = tx.has_branches(thread_pk)
        return branched[thread_pk]

    def note_branched(self, thread_pk: int) -> None:
        """The thread has a stored branch now."""
        self._known.branched[thread_pk] = True

    def underived_may_include(self, thread_pk: int) -> bool:
        """Whether the thread may have runs left underived (``True`` when not known)."""
        underived = self._known.underived
        return underived is None or thread_pk in underived

    def underived_threads(self, tx: port.Reading) -> set[int]:
        """The threads with runs left underived (read once, then remembered; do not change
        the set)."""
        known = self._known
        if known.underived is None:
            known.underived = tx.underived_threads()
        return known.underived

    def note_underived(self, thread_pk: int) -> None:
        """The thread has runs left underived now."""
        if self._known.underived is not None:
            self._known.underived.add(thread_pk)

    def note_derived(self, thread_pk: int | None) -> None:
        """Nothing is left underived in the thread (``None``: anywhere) now."""
        underived = self._known.underived
        if underived is not None:
            if thread_pk is None:
                underived.clear()
            else:
                underived.discard(thread_pk)
