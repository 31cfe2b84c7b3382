"""``Store.check()``: the store's own invariants, on every backend, plus its storage's.

Read-only: it reports, it never repairs. Every check runs inside one read transaction, so a
check of a store that other processes are writing sees one consistent state of it. Each problem
names what is wrong where: the run (its id, thread and key), the branch, the sequence numbers,
the batch or the table row.

The checks here are written once, above the storage port (:mod:`agui_store.engine.port`): they read
through one-purpose operations of a read transaction and hold no SQL. The log is read as a
stream (one pass in sequence order), never held whole. A backend first runs the checks of its
own storage (:meth:`~agui_store.engine.port.Inspecting.storage_checks`): for SQLite ``sqlite``
(``PRAGMA integrity_check``), ``foreign_keys`` and ``schema``
(:mod:`agui_store.backends.sqlite.checks`); for PostgreSQL ``foreign_keys``, ``pages`` and
``schema`` (:mod:`agui_store.backends.postgres.checks`).

The store's checks, in the order they run after those (``CheckReport.checked`` lists every
check that ran):

``lineage``
    Each run's lineage parent exists, belongs to the same thread and was recorded before it;
    the lineage has no cycle; the recorded reason agrees with the parent (``root`` exactly
    when there is none).
``refs``
    Each branch belongs to a thread that exists and points at a run of that thread; no branch
    shadows the names every thread reserves (``main``, ``HEAD``).
``batches``
    The batches tile the event log: every event is in exactly one batch, of its own run; a
    batch's range holds exactly ``count`` events; a batch's ``outcome`` is what its terminal
    events say (``None`` when it has none).
``runs``
    Every run has events; a run the store named itself (``synthetic``) has no RUN_STARTED,
    every other run has exactly one, first, naming the run's own ``runId`` and thread; a
    recorded input is a JSON object.
``events``
    Each payload is a JSON object whose ``type`` is the ``type`` column.
``blobs``
    Content-addressed values: every blob's data, decoded per its codec, hashes (sha256) to
    its address.
``checkpoints``
    Derived views at the end of runs: each belongs to a complete run; its manifest is a blob
    holding a JSON array of blob ids, each a chunk holding a JSON array of exactly ``CHUNK``
    messages; its tail lists segments, blobs each holding a JSON array of as many messages as
    the tail says, fewer than ``CHUNK`` in all; together they hold the checkpoint's length;
    the list of tail segments (``checkpoint_segments``, kept from the tails by the schema,
    which an erasure reads to keep the blobs a checkpoint uses) holds exactly the tails'
    blobs, no more, no fewer; every blob is one a checkpoint refers to;
    a state stored as patches is patched from a lineage ancestor's checkpoint whose state is
    stored whole.
``lineage_digests``
    Each belongs to a complete run (a digest is of the view at a run's end).
``erasures``
    (after ``conversations``) The erasure log's entries each hash their fields and the entry
    before them; no thread an erasure's tombstone covers is held again (its rows put back
    from a backup). The ``batches`` check reads the log too: the sequence numbers from 1 to
    the newest are each an event's or an erasure's, so rows deleted by hand (a whole leaf
    run with its batches and events included) leave a hole no erasure recorded.
``hashes``
    Every content hash (see :mod:`agui_store.history.hashing`) computed again from the log and
    compared link by link, so that an edit is named where it was made: a run's input against
    its input digest, its lineage parent's hash (when the run was placed) against the one it
    recorded, its record (run id, thread, lineage reason, sent ``parentRunId``, synthetic
    flag, creation time) against its start hash, and each batch's events (sequence numbers,
    types, stored bytes, echo references), outcome and time against the hash after that
    batch.
``derived``
    Every derived structure against a replay of the log (each run replayed once, onto its
    parent's view): each checkpoint's messages, state (whole or as patches), interrupts and
    warnings equal the replay; its content gives the view digest it recorded; the run hash it
    recorded is one of its run's; each lineage digest is the replay's, and every run that
    ended and is not waiting to be derived has one; every input
    and echo reference falls inside its parent's view. Down a chain, the leading full chunks
    of a checkpoint that no run could have changed since the last checkpoint found equal (no
    event named a message in them, none moved) are compared by address with that
    checkpoint's, and the rest message by message; a lineage's last checkpoint is compared
    whole. So a chain costs its length, not its square. The search index too: each row
    names a message its run's view holds with the text the row's key was made of, at the
    position the row gives (and in the checkpoint blob it names, where that run's checkpoint
    holds it); every message a derived run added or changed has a row in its thread (but in
    a thread with runs left underived, whose rows were dropped); the backend's full-text
    index holds words for every row and for no other id, and a row's words (as a set) are
    those the text of the message it names gives.

Events after a run's terminal event (other than one late RUN_ERROR after RUN_FINISHED) are
reported as *warnings*, not problems: ``append(check_sequence=False)`` records them on purpose
(recording buggy producers), and the store does not say which runs were recorded that way.
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agui_store.codec import ingest
from agui_store.engine import (
    arguments,
    checkpoints,
    clock,
    conversations,
    erasure,
    log_hashes,
    search,
    tombstones,
)
from agui_store.engine.arguments import quote
from agui_store.engine.port import IndexedMessage, Inspecting, StoredRun
from agui_store.engine.revisions import NEWEST_NAMES
from agui_store.errors import AguiStoreError, HashMismatchError, InvalidEventError
from agui_store.history import blobs, hashing, normalize
from agui_store.history.lineage import hash_ids, lineage_ids
from agui_store.history.restore import (
    RunRecord,
    View,
    apply_run,
    body_as_sent,
    named_ids,
    only_appended,
    reached,
    start_reducer,
    view_of,
)
from agui_store.history.search import index_text, message_text
from agui_store.records import CheckReport as CheckReport  # what check() returns, with its JSON
from agui_store.records import LoggedErasure, counted, status_of_terminal
from agui_store.records import Problem as Problem

#: The store's own checks, in the order they run (after the backend's storage checks).
CHECKS = (
    "lineage",
    "refs",
    "batches",
    "runs",
    "events",
    "blobs",
    "checkpoints",
    "lineage_digests",
    "hashes",
    "derived",
    "conversations",
    "erasures",
)

#: Problems listed per check; past that the report says how many more there were.
MAX_PROBLEMS_PER_CHECK = 100

#: The reasons the store records for a run's lineage parent (``runs.lineage``).
LINEAGE_REASONS = frozenset({"explicit", "parentRunId", "messages", "head", "root"})

_TERMINAL = ("RUN_FINISHED", "RUN_ERROR")

#: What a check may meet in a store too broken to finish it (besides the driver's errors).
_TOO_BROKEN = (AguiStoreError, TypeError, ValueError, LookupError, zlib.error)


def check(tx: Inspecting) -> CheckReport:
    """Run every check inside the read transaction ``tx``: its backend's storage checks,
    then the store's own."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    checked: list[str] = []
    too_broken: tuple[type[BaseException], ...] = (*_TOO_BROKEN, *tx.storage_errors)
    context = _Context(tx)
    runs: list[tuple[str, Callable[[_Collector], None]]] = [
        (name, functools.partial(_storage_check, tx, name)) for name in tx.storage_checks()
    ]
    runs += [(name, functools.partial(run, context)) for name, run in _CHECKS]
    for name, run in runs:
        checked.append(name)
        found = _Collector(name)
        try:
            with tx.contained():
                run(found)
        except too_broken as e:  # a store too broken to finish this check
            found.problem(f"could not finish the check: {type(e).__name__}: {e}")
        problems.extend(found.done(found.problems))
        warnings.extend(found.done(found.warnings))
    logged: list[LoggedErasure] = []
    head = None
    try:
        with tx.contained():
            logged = [entry for entry, _ranges, _sound in context.erasures]
            head = _head(context)
    except too_broken:  # reported by the checks above
        pass
    return CheckReport(problems, tuple(checked), warnings, logged, head)


def _head(ctx: _Context) -> str:
    """The log's head, to keep outside the store: ``<newest seq>:<digest>``, the digest
    covering that sequence number, the hash of the batch that ends there and the newest
    erasure's hash. Only a cut of the newest writes leaves no hole inside the store to
    find; a head kept elsewhere that a later check no longer shows (a lower newest
    sequence number, another digest at the same one) tells it."""
    last_seq, batch_hash = 0, b""
    for link in ctx.links.values():
        for b in link.batches:
            if b.last_seq > last_seq:
                last_seq, batch_hash = b.last_seq, b.stored or b""
    logged = ctx.erasures
    erasure_hash = bytes.fromhex(logged[-1][0].hash) if logged else b""
    digest = hashlib.sha256(
        b"agui-store head 1\x00" + str(last_seq).encode() + b"\x00" + batch_hash + b"\x00"
        + erasure_hash
    ).hexdigest()
    return f"{last_seq}:{digest}"


def _storage_check(tx: Inspecting, name: str, out: _Collector) -> None:
    for detail in tx.storage_problems(name):
        out.problem(detail)


# --- plumbing -------------------------------------------------------------------------------


class _Collector:
    """The problems and warnings of one check, capped at MAX_PROBLEMS_PER_CHECK each."""

    def __init__(self, check: str) -> None:
        self.check = check
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self._dropped = {"problems": 0, "warnings": 0}

    def problem(self, detail: str) -> None:
        self._add(self.problems, "problems", detail)

    def warning(self, detail: str) -> None:
        self._add(self.warnings, "warnings", detail)

    @property
    def reported(self) -> int:
        """How many problems were reported, those past the cap included."""
        return len(self.problems) + self._dropped["problems"]

    def _add(self, into: list[Problem], kind: str, detail: str) -> None:
        if len(into) < MAX_PROBLEMS_PER_CHECK:
            into.append(Problem(self.check, detail))
        else:
            self._dropped[kind] += 1

    def done(self, into: list[Problem]) -> list[Problem]:
        kind = "problems" if into is self.problems else "warnings"
        dropped = self._dropped[kind]
        if dropped:
            return [*into, Problem(self.check, f"... and {dropped} more {kind} like these")]
        return into


class _Context:
    """What several checks read: the runs and threads (metadata only, never payloads)."""

    def __init__(self, tx: Inspecting) -> None:
        self.tx = tx
        self._runs: dict[int, StoredRun] | None = None
        self._log: _LogPass | None = None
        self._links: dict[int, log_hashes.RunLink] | None = None
        self._complete: set[int] | None = None
        self._erasures: list[tuple[LoggedErasure, list[list[int]], bool]] | None = None

    @property
    def links(self) -> dict[int, log_hashes.RunLink]:
        """Every run's hashes, computed again from the log (see
        :mod:`agui_store.engine.log_hashes`)."""
        if self._links is None:
            self._links = log_hashes.compute(self.tx)
        return self._links

    @property
    def log(self) -> _LogPass:
        """The one pass over the event log that the batches and runs checks share."""
        if self._log is None:
            self._log = _LogPass(self)
        return self._log

    @property
    def erasures(self) -> list[tuple[LoggedErasure, list[list[int]], bool]]:
        """The erasure log, each entry with the sequence numbers it erased and whether its
        hash holds (see :func:`agui_store.engine.erasure.logged`)."""
        if self._erasures is None:
            self._erasures = erasure.logged(self.tx)
        return self._erasures

    @property
    def complete(self) -> set[int]:
        """The runs with a terminal batch."""
        if self._complete is None:
            self._complete = self.tx.complete_runs()
        return self._complete

    @property
    def runs(self) -> dict[int, StoredRun]:
        if self._runs is None:
            self._runs = {
                int(run.pk): StoredRun(  # its values as their types, whatever a hand edit stored
                    int(run.pk),
                    int(run.thread_pk),
                    str(run.run_id),
                    None if run.parent is None else int(run.parent),
                    str(run.lineage),
                    bool(run.synthetic),
                    None if run.thread_id is None else str(run.thread_id),
                )
                for run in self.tx.every_run()
            }
        return self._runs

    def name_run(self, pk: int) -> str:
        """``run 'r1' (thread 't', #3)``: how a problem names a run."""
        row = self.runs.get(pk)
        if row is None:
            return f"run #{pk} (missing)"
        thread = quote(row.thread_id) if row.thread_id is not None else f"#{row.thread_pk}"
        return f"run {quote(row.run_id)} (thread {thread}, #{pk})"


def _seq_ranges(seqs: list[int]) -> str:
    """``[3, 4, 5, 9]`` → ``3..5, 9``."""
    parts: list[str] = []
    start = prev = seqs[0]
    for s in [*seqs[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        parts.append(str(start) if start == prev else f"{start}..{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(parts)


def _status_of_terminal(event_type: str, payload: str | None) -> str:
    """The status a stored terminal event gives (a payload that is not JSON: no outcome)."""
    data = None
    if payload is not None and event_type != "RUN_ERROR":
        try:
            data = ingest.decode(payload)
        except InvalidEventError:
            data = None
    outcome = data.get("outcome") if isinstance(data, dict) else None
    return status_of_terminal({"type": event_type, "outcome": outcome})


# --- lineage and refs -----------------------------------------------------------------------


def _check_lineage(ctx: _Context, out: _Collector) -> None:
    runs = ctx.runs
    for pk, row in runs.items():
        name = ctx.name_run(pk)
        if row.lineage not in LINEAGE_REASONS:
            out.problem(
                f"{name} records lineage reason {quote(row.lineage)}, which is not one of "
                f"{', '.join(sorted(LINEAGE_REASONS))}"
            )
        if row.parent is None:
            if row.lineage != "root" and row.lineage in LINEAGE_REASONS:
                out.problem(
                    f"{name} has no lineage parent but records reason {quote(row.lineage)} "
                    "(a run without a parent is a 'root')"
                )
            continue
        if row.lineage == "root":
            out.problem(
                f"{name} records reason 'root' but has lineage parent {ctx.name_run(row.parent)}"
            )
        parent = runs.get(row.parent)
        if parent is None:
            out.problem(f"{name} has lineage parent #{row.parent}, which does not exist")
            continue
        if parent.thread_pk != row.thread_pk:
            out.problem(
                f"{name} has lineage parent {ctx.name_run(row.parent)} in another "
                "thread: lineage stays within one thread"
            )
        if row.parent >= pk:
            out.problem(
                f"{name} has lineage parent {ctx.name_run(row.parent)}, recorded after "
                f"it (#{row.parent} >= #{pk}): a parent is always older"
            )
    # Cycles: follow parent pointers; each run is visited once overall.
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in runs:
        if start in state:
            continue
        path: list[int] = []
        at: int | None = start
        while at is not None and at in runs and at not in state:
            state[at] = 1
            path.append(at)
            at = runs[at].parent
        if at is not None and state.get(at) == 1:
            cycle = path[path.index(at) :]
            names = " -> ".join(repr(runs[p].run_id) for p in [*cycle, at])
            out.problem(
                f"lineage cycle: {names} (thread {quote(runs[at].thread_id)}, "
                f"#{', #'.join(map(str, cycle))}): an ancestor walk would never end"
            )
        for p in path:
            state[p] = 2


def _check_refs(ctx: _Context, out: _Collector) -> None:
    runs = ctx.runs
    for thread_pk, name, run_pk, thread_id in ctx.tx.every_branch():
        if thread_id is None:
            out.problem(
                f"branch {quote(name)} belongs to thread #{thread_pk}, which does not exist"
            )
            continue
        where = f"branch {quote(name)} of thread {quote(thread_id)}"
        if name in NEWEST_NAMES:
            out.problem(
                f"{where} shadows the name every thread reserves for its default "
                "branch (it follows the newest run)"
            )
        run = runs.get(int(run_pk))
        if run is None:
            out.problem(f"{where} points at run #{run_pk}, which does not exist")
        elif run.thread_pk != thread_pk:
            out.problem(
                f"{where} points at {ctx.name_run(run.pk)}, in another thread: a "
                "branch points into its own thread"
            )


# --- batches, runs and events ---------------------------------------------------------------


@dataclass
class _RunEvents:
    """What one pass over the log learns about one run's events."""

    count: int = 0
    first_seq: int = 0
    first_type: str = ""
    started: list[tuple[int, str | None]] = field(default_factory=list)  # (seq, payload)
    terminal: tuple[int, str] | None = None  # (seq, type) of the first terminal event
    late_error: bool = False
    after_end: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class _Batch:
    pk: int
    run: int
    first_seq: int
    last_seq: int
    count: int
    outcome: str | None
    found: int = 0
    missing: list[int] = field(default_factory=list)
    foreign: list[tuple[int, int]] = field(default_factory=list)  # (seq, run)
    status: str | None = None
    terminal_seq: int | None = None


class _LogPass:
    """One pass over ``events`` in seq order merged with ``batches`` in range order: every
    event is read once, payloads only for RUN_STARTED and terminal events."""

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx
        self.per_run: dict[int, _RunEvents] = {}
        self.uncovered: list[tuple[int, int, str]] = []  # (seq, run, type)
        self.overlaps: list[tuple[_Batch, int, int, int]] = []  # (batch, other, lo, hi)
        self.batches: list[_Batch] = []
        self._run()

    def _events(self) -> Iterator[tuple[int, int, str, str | None]]:
        for seq, run, kind, payload in self.ctx.tx.log_in_order():
            yield int(seq), int(run), str(kind), payload

    def _observe(self, seq: int, run: int, kind: str, payload: str | None) -> None:
        info = self.per_run.get(run)
        if info is None:
            info = self.per_run[run] = _RunEvents(first_seq=seq, first_type=kind)
        info.count += 1
        if kind == "RUN_STARTED":
            info.started.append((seq, payload))
        if info.terminal is None:
            if kind in _TERMINAL:
                info.terminal = (seq, kind)
        elif (
            kind == "RUN_ERROR"
            and info.terminal[1] == "RUN_FINISHED"
            and not info.late_error
            and not info.after_end
        ):
            info.late_error = True
        else:
            info.after_end.append((seq, kind))

    def _run(self) -> None:
        events = self._events()
        current = next(events, None)
        end = 0  # highest seq claimed by a batch so far
        end_batch: _Batch | None = None
        for row in self.ctx.tx.batches_in_order():
            batch = _Batch(
                int(row.id),
                int(row.run_pk),
                int(row.first_seq),
                int(row.last_seq),
                int(row.events),
                row.outcome,
            )
            self.batches.append(batch)
            if batch.first_seq <= end and end_batch is not None:
                self.overlaps.append(
                    (batch, end_batch.pk, batch.first_seq, min(end, batch.last_seq))
                )
            while current is not None and current[0] < batch.first_seq:
                if current[0] > end:
                    self.uncovered.append((current[0], current[1], current[2]))
                self._observe(*current)
                current = next(events, None)
            expect = max(batch.first_seq, end + 1)
            while current is not None and current[0] <= batch.last_seq:
                seq, run_pk, kind, payload = current
                batch.missing.extend(range(expect, seq))
                expect = seq + 1
                batch.found += 1
                if run_pk != batch.run:
                    batch.foreign.append((seq, run_pk))
                elif kind in _TERMINAL:
                    batch.status = _status_of_terminal(kind, payload)
                    batch.terminal_seq = seq
                self._observe(*current)
                current = next(events, None)
            batch.missing.extend(range(expect, batch.last_seq + 1))
            if batch.last_seq > end:
                end, end_batch = batch.last_seq, batch
        while current is not None:
            if current[0] > end:
                self.uncovered.append((current[0], current[1], current[2]))
            self._observe(*current)
            current = next(events, None)


def _check_batches(ctx: _Context, out: _Collector) -> None:
    log = ctx.log
    for seq, run, kind in log.uncovered:
        out.problem(f"event seq {seq} ({kind}) of {ctx.name_run(run)} is in no batch")
    for batch, other, lo, hi in log.overlaps:
        claimed = str(lo) if lo == hi else f"{lo}..{hi}"
        out.problem(
            f"batch #{batch.pk} of {ctx.name_run(batch.run)} claims seq {claimed}, "
            f"already claimed by batch #{other}"
        )
    for b in log.batches:
        where = f"batch #{b.pk} of {ctx.name_run(b.run)} (seq {b.first_seq}..{b.last_seq})"
        span = b.last_seq - b.first_seq + 1
        if b.first_seq > b.last_seq:
            out.problem(f"{where} ends before it starts")
            continue
        if b.count != span:
            out.problem(f"{where} records count {b.count}, but its range spans {span} events")
        if b.missing:
            out.problem(
                f"{where} is missing seq {_seq_ranges(b.missing)}: part of the batch is gone"
            )
        foreign: dict[int, list[int]] = {}
        for seq, run in b.foreign:
            foreign.setdefault(run, []).append(seq)
        for run, seqs in foreign.items():
            out.problem(
                f"{where} holds seq {_seq_ranges(seqs)} of {ctx.name_run(run)}: a batch holds "
                "one run's events"
            )
        if b.outcome != b.status:
            if b.status is None:
                out.problem(
                    f"{where} records outcome {b.outcome!r}, but holds no RUN_FINISHED or RUN_ERROR"
                )
            else:
                out.problem(
                    f"{where} records outcome {b.outcome!r}, but its terminal event "
                    f"at seq {b.terminal_seq} ends the run as {b.status!r}"
                )
    _check_holes(ctx, out)


def _check_holes(ctx: _Context, out: _Collector) -> None:
    """Sequence numbers are handed out one after the other from 1: a number no batch holds,
    no event holds and no erasure recorded is a hole left by rows deleted outside the
    store (a whole run, say, with its batches and events)."""
    spans = [(b.first_seq, b.last_seq) for b in ctx.log.batches if b.first_seq <= b.last_seq]
    spans += [(seq, seq) for seq, _run, _kind in ctx.log.uncovered]
    for _entry, ranges, _sound in ctx.erasures:
        spans += [(a, b) for a, b in ranges]
    expect = 1
    for first, last in sorted(spans):
        if first > expect:
            hole = str(expect) if first - 1 == expect else f"{expect}..{first - 1}"
            out.problem(
                f"seq {hole}: no event, batch or erasure holds these sequence numbers: rows "
                "were deleted or renumbered outside agui-store"
            )
        expect = max(expect, last + 1)


def _check_runs(ctx: _Context, out: _Collector) -> None:
    log = ctx.log
    for pk, row in ctx.runs.items():
        name = ctx.name_run(pk)
        info = log.per_run.get(pk)
        if info is None:
            out.problem(f"{name} has no events")
            continue
        if row.synthetic:
            for seq, _ in info.started:
                out.problem(
                    f"{name} is synthetic (the store named it for events that started "
                    f"no run) but holds a RUN_STARTED at seq {seq}"
                )
        else:
            if info.first_type != "RUN_STARTED":
                out.problem(
                    f"{name} begins with {info.first_type} at seq {info.first_seq}, not RUN_STARTED"
                )
            for seq, _ in info.started[1:] if info.first_type == "RUN_STARTED" else info.started:
                out.problem(
                    f"{name} holds a second RUN_STARTED at seq {seq}: a RUN_STARTED "
                    "always opens a new run"
                )
            if info.started and info.first_type == "RUN_STARTED":
                _check_started(ctx, row, info.started[0], out)
        if info.after_end:
            assert info.terminal is not None
            seqs = _seq_ranges([s for s, _ in info.after_end])
            kinds = ", ".join(dict.fromkeys(k for _, k in info.after_end))
            out.warning(
                f"{name} has events after its terminal {info.terminal[1]} at seq "
                f"{info.terminal[0]}: seq {seqs} ({kinds}); only "
                "append(check_sequence=False) records that"
            )
    _warn_unstorable_ids(ctx, out)
    for pk, raw in ctx.tx.suspect_inputs():
        try:
            value = ingest.decode(raw)
        except InvalidEventError as e:
            out.problem(f"the input of {ctx.name_run(int(pk))} is not JSON: {e}")
            continue
        if not isinstance(value, dict):
            out.problem(f"the input of {ctx.name_run(int(pk))} is not a JSON object")


def _warn_unstorable_ids(ctx: _Context, out: _Collector) -> None:
    """Ids this version refuses on intake (a NUL, which releases before it accepted) are
    legal in the file but go nowhere else: a copy refuses their thread."""
    threads: set[str] = set()
    for pk, row in ctx.runs.items():
        thread = row.thread_id
        if thread is not None and thread not in threads:
            threads.add(thread)
            reason = arguments.unstorable(thread)
            if reason is not None:
                out.warning(
                    f"thread {quote(thread)}: its id {reason}; no copy carries the thread "
                    f"(erase it with delete_thread({quote(thread)}))"
                )
        reason = arguments.unstorable(row.run_id)
        if reason is not None:
            out.warning(f"{ctx.name_run(pk)}: its id {reason}; no copy carries its thread")


def _check_started(
    ctx: _Context, row: StoredRun, started: tuple[int, str | None], out: _Collector
) -> None:
    seq, payload = started
    try:
        data = ingest.decode(payload or "")
    except InvalidEventError:
        return  # the events check reports it
    if not isinstance(data, dict):
        return
    name = ctx.name_run(row.pk)
    if data.get("runId") != row.run_id:
        out.problem(
            f"{name}: its RUN_STARTED at seq {seq} names runId "
            f"{quote(data.get('runId'))}, not {quote(row.run_id)}"
        )
    if row.thread_id is not None and data.get("threadId") != row.thread_id:
        out.problem(
            f"{name}: its RUN_STARTED at seq {seq} names threadId "
            f"{quote(data.get('threadId'))}, not {quote(row.thread_id)}"
        )


def _check_events(ctx: _Context, out: _Collector) -> None:
    # The backend narrows the log down to suspects as far as it can tell cheaply; the codec
    # (the store's own reading of JSON: last duplicate key wins, any depth) decides, so that
    # only real problems are shown.
    for seq, run, kind, payload in ctx.tx.suspect_events():
        where = f"event seq {seq} ({kind}) of {ctx.name_run(int(run))}"
        try:
            data = ingest.decode(payload)
        except InvalidEventError as e:
            out.problem(f"{where}: the payload is not JSON: {e}")
            continue
        if not isinstance(data, dict):
            out.problem(f"{where}: the payload is not a JSON object")
        elif data.get("type") != kind:
            out.problem(
                f"{where}: the payload's type is {quote(data.get('type'))}, but the type "
                f"column says {quote(kind)}"
            )


# --- blobs ----------------------------------------------------------------------------------


def _check_blobs(ctx: _Context, out: _Collector) -> None:
    for address, codec_value, data in ctx.tx.every_blob():
        stored_address = bytes(address)
        where = f"blob {stored_address.hex()}"
        if len(stored_address) != hashlib.sha256().digest_size:
            out.problem(f"{where}: the address is not a sha256 (32 bytes)")
            continue
        try:
            content = blobs.unpack(codec_value, bytes(data))
        except (ValueError, zlib.error) as e:
            out.problem(f"{where}: its data cannot be decoded (codec = {codec_value!r}): {e}")
            continue
        actual = hashlib.sha256(content).digest()
        if actual != stored_address:
            out.problem(f"{where}: its data hashes to {actual.hex()}: the blob is corrupt")


# --- checkpoints ----------------------------------------------------------------------------


def _check_checkpoints(ctx: _Context, out: _Collector) -> None:
    runs = ctx.runs
    complete = ctx.complete
    layouts = ctx.tx.checkpoint_layouts()
    _check_state_bases(ctx, out, {int(run): base for run, _, _, _, base in layouts})
    size = checkpoints.CHUNK
    items: dict[int, int | str] = {}  # blob id -> JSON array length, or what is wrong

    def array_length(blob_id: int) -> int | str:
        """How many items the blob's JSON array holds (read once per blob)."""
        if blob_id not in items:
            row = ctx.tx.blob_content(blob_id)
            if row is None:
                items[blob_id] = "is missing"
            else:
                try:
                    value = ingest.decode(blobs.unpack(row[0], bytes(row[1])))
                    items[blob_id] = (
                        len(value) if isinstance(value, list) else "is not a JSON array"
                    )
                except (ValueError, zlib.error) as e:
                    items[blob_id] = f"cannot be read: {e}"
        return items[blob_id]

    def id_list(where: str, what: str, value: Any) -> list[int] | None:
        try:
            ids = ingest.decode(value if isinstance(value, bytes) else str(value).encode())
        except ValueError:
            ids = None
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            out.problem(f"{where}: its {what} is not a JSON array of blob ids")
            return None
        return ids

    tails: dict[int, set[int] | None] = {}  # run -> its tail's blob ids (None: unreadable)
    decoded: dict[int, list[int]] = {}  # manifest -> its chunks' blob ids, as read here
    for run, length, manifest, tail, _ in layouts:
        run = int(run)
        tails[run] = None
        where = f"the checkpoint of {ctx.name_run(run)}"
        if run in runs and run not in complete:
            out.problem(
                f"{where}: the run is incomplete, and a checkpoint holds the view at a run's end"
            )
        chunk_ids: list[int] | None = []
        if manifest is not None:
            found = array_length(int(manifest))
            if isinstance(found, str):
                out.problem(f"{where}: its manifest (blob id {manifest}) {found}")
                continue
            row = ctx.tx.blob_content(int(manifest))
            assert row is not None  # array_length read it
            chunk_ids = id_list(where, "manifest", blobs.unpack(row[0], bytes(row[1])))
            if chunk_ids is not None:
                decoded[int(manifest)] = chunk_ids
        try:
            segments = ingest.decode(str(tail).encode())
        except ValueError:
            segments = None
        if not isinstance(segments, list) or not all(
            isinstance(s, list) and len(s) == 2 and all(type(v) is int for v in s)
            for s in segments
        ):
            out.problem(f"{where}: its tail is not a JSON array of [blob id, count] pairs")
            continue
        tails[run] = {blob for blob, _ in segments}
        if chunk_ids is None:
            continue
        for at, chunk in enumerate(chunk_ids):
            found = array_length(chunk)
            if found != size:
                said = f"holds {found} messages" if isinstance(found, int) else found
                out.problem(
                    f"{where}: its chunk {at} (blob id {chunk}) {said}, where a chunk holds "
                    f"{size}"
                )
        in_tail = 0
        for at, (blob, count) in enumerate(segments):
            found = array_length(blob)
            if found != count or count <= 0:
                said = f"holds {found} messages" if isinstance(found, int) else found
                out.problem(
                    f"{where}: segment {at} of its tail (blob id {blob}) {said}, where the "
                    f"tail says {count}"
                )
            in_tail += count
        if in_tail >= size:
            out.problem(f"{where}: its tail holds {in_tail} messages, where {size} make a chunk")
        held = size * len(chunk_ids) + in_tail
        if held != length:
            out.problem(
                f"{where} holds {held} messages ({len(chunk_ids)} chunks and a tail of "
                f"{in_tail}), but records {length}"
            )
    if not out.reported:  # every manifest and tail read: what they leave out is known
        for blob in checkpoints.unreferenced_blobs(ctx.tx, decoded):
            out.problem(
                f"blob id {blob}: no checkpoint refers to it, so no erasure reaches it (it "
                "may hold an erased thread's text); a purge deletes it (Store.purge(), or "
                "'agui-store purge')"
            )
    _check_segments(ctx, out, tails)


def _check_segments(ctx: _Context, out: _Collector, tails: dict[int, set[int] | None]) -> None:
    """The list of tail segments (``checkpoint_segments``, which an erasure looks a blob's
    users up in) against the tails themselves: a blob missing from the list would be erased
    while a checkpoint still uses it, and a row the tails do not hold would keep an erased
    blob. Runs whose checkpoint's tail cannot be read are reported above and left out."""
    listed: dict[int, set[int]] = {}
    for run, blob in ctx.tx.checkpoint_segments():
        listed.setdefault(run, set()).add(blob)
    for run in sorted(tails.keys() | listed.keys()):
        tail = tails.get(run, set())
        if tail is None:
            continue
        found = listed.get(run, set())
        missing, extra = sorted(tail - found), sorted(found - tail)
        if missing:
            out.problem(
                f"the checkpoint of {ctx.name_run(run)}: its tail's blob ids "
                f"{', '.join(map(str, missing))} are not in checkpoint_segments, the list an "
                "erasure reads to keep the blobs a checkpoint uses"
            )
        if extra:
            why = (
                "but its checkpoint's tail does not hold them" if run in tails
                else "which has no checkpoint"
            )
            out.problem(
                f"checkpoint_segments lists blob ids {', '.join(map(str, extra))} for "
                f"{ctx.name_run(run)}, {why}"
            )


def _check_state_bases(ctx: _Context, out: _Collector, stored: dict[int, Any]) -> None:
    """A state stored as patches is patched from a lineage ancestor's whole state."""
    bases = {run: None if base is None else int(base) for run, base in stored.items()}
    for run, base in sorted(bases.items()):
        if base is None:
            continue
        where = f"the checkpoint of {ctx.name_run(run)}"
        if not _is_ancestor(ctx.runs, base, run):
            out.problem(
                f"{where} stores its state as patches on the state of {ctx.name_run(base)}, "
                "which is not a lineage ancestor of the run"
            )
        elif bases.get(base, 0) is not None:
            out.problem(
                f"{where} stores its state as patches on the checkpoint of "
                f"{ctx.name_run(base)}, whose own state is not stored whole"
            )


def _is_ancestor(runs: dict[int, StoredRun], ancestor: int, run: int) -> bool:
    seen: set[int] = set()
    at = runs[run].parent if run in runs else None
    while at is not None and at not in seen:
        if at == ancestor:
            return True
        seen.add(at)
        at = runs[at].parent if at in runs else None
    return False


# --- lineage digests ------------------------------------------------------------------------


def _check_lineage_digests(ctx: _Context, out: _Collector) -> None:
    complete = ctx.complete
    for run in sorted({int(run) for _, run in ctx.tx.every_lineage_digest()}):
        if run in ctx.runs and run not in complete:
            out.problem(
                f"the lineage digest of {ctx.name_run(int(run))}: the run is incomplete, and a "
                "digest is of the view at a run's end"
            )


# --- hashes ---------------------------------------------------------------------------------


def _short(value: bytes | None) -> str:
    return hashing.short(value) or "none"


def _check_hashes(ctx: _Context, out: _Collector) -> None:
    links = ctx.links
    # Which run a stored hash is of, to name the parent a run's hash says it had.
    owner: dict[bytes, int] = {}
    for link in links.values():
        if link.stored_start is not None:
            owner.setdefault(link.stored_start, link.pk)
        for b in link.batches:
            if b.stored is not None:
                owner.setdefault(b.stored, link.pk)
    for link in links.values():
        name = ctx.name_run(link.pk)
        if link.stored_start is None:
            out.problem(f"{name} has no hash: it was not recorded by agui-store")
            continue
        if not link.input_verified:
            out.problem(
                f"{name}: its input differs from what its hash covers (the input as stored "
                f"hashes to {_short(link.input_hash)}, the run recorded "
                f"{_short(link.stored_input)})"
            )
        if not link.parent_verified:
            if link.parent is None:
                now = "it has no lineage parent"
            else:
                now = (
                    f"its lineage parent is {ctx.name_run(link.parent)}, whose hash was "
                    f"{_short(link.parent_stored_then)} when the run was placed"
                )
            was = owner.get(link.stored_parent) if link.stored_parent is not None else None
            said = (
                "no parent"
                if link.stored_parent is None
                else f"a parent whose hash was {_short(link.stored_parent)}"
                + (f" ({ctx.name_run(was)})" if was is not None else "")
            )
            out.problem(f"{name}: {now}, but its hash covers {said}")
        if not link.start_verified:
            out.problem(
                f"{name}: its record (run id, thread, lineage reason, sent parentRunId, "
                "synthetic flag or creation time) differs from what its hash covers"
            )
        for b in link.batches:
            where = f"{name}: batch #{b.pk} (seq {b.first_seq}..{b.last_seq})"
            if b.stored is None:
                out.problem(f"{where} has no hash: it was not recorded by agui-store")
            elif not b.verified:
                out.problem(
                    f"{where}: its events (their positions, types or bytes), outcome or "
                    "time differ from what the run's hash covers"
                )


# --- derived structures against a replay ----------------------------------------------------


def _record(tx: Inspecting, pk: int, has_parent: bool) -> RunRecord:
    rows = tx.run_events(pk, 0)  # every event: sequence numbers start at 1
    events = ingest.decode_many([r[0] for r in rows])
    echo = None
    for at, (_, refs, seq, kind) in enumerate(rows):
        if refs is None:
            continue
        echo, wrong = _echo_refs(at, str(kind), events[at], refs, has_parent)
        if wrong is not None:
            raise ValueError(f"the echo_refs row of event seq {seq} ({kind}): {wrong}")
    _, raw_input, raw_refs, lineage = tx.run_row(pk)
    return RunRecord(
        input=ingest.decode(raw_input) if raw_input is not None else None,
        events=events,
        input_refs=ingest.decode(raw_refs) if raw_refs is not None else None,
        echo_refs=echo,
        as_sent=body_as_sent(raw_input is not None, lineage),
    )


def _echo_refs(
    at: int, kind: str, event: Any, text: str, has_parent: bool
) -> tuple[Any, str | None]:
    """The references an ``echo_refs`` row holds, and what keeps them from being ones a store
    writes (``None``: nothing): only on a run's ``RUN_STARTED``, its first event, echoing an
    input in a run with a parent whose view they refer to."""
    try:
        refs = ingest.decode(text)
    except InvalidEventError as e:
        return None, f"it is not JSON a store reads: {e}"
    if kind != "RUN_STARTED":
        return refs, "it is on no RUN_STARTED"
    if at:
        return refs, f"it is on the run's event {at + 1}, not its first"
    if not isinstance(event, dict) or not isinstance(event.get("input"), dict):
        return refs, "the event echoes no input (a JSON object) for it to stand in"
    if not has_parent:
        return refs, "its run has no parent whose view it refers to"
    return refs, normalize.refs_problem(refs)


def _first_difference(found: list[Any], replayed: list[Any], start: int = 0) -> str:
    """Where two message lists first differ; they start at position ``start`` of the view."""
    for i, (a, b) in enumerate(zip(found, replayed), start):
        if a != b:
            mid = b.get("id") if isinstance(b, dict) else None
            return f"message {i}" + (f" (id {quote(mid)})" if mid is not None else "")
    return f"{start + len(found)} messages where the replay has {start + len(replayed)}"


@dataclass
class _Replay:
    """A lineage replayed up to a run, for the runs after it: the reducer holding its view,
    the digest of its lineage ids, and what of its message list a checkpoint was last found
    equal to, so that a chain's next checkpoint compares only what changed since (a check
    that compared every checkpoint whole would cost the square of a chain's length)."""

    reducer: Any
    ids_hasher: Any = None  # hash_ids of the view's lineage ids (None: none yet)
    #: The full chunks (addresses) of the last checkpoint found equal to the replay.
    chunks: list[bytes] = field(default_factory=list)
    #: Leading positions that hold what they held then: the same objects, which no event
    #: since named (a message no event names keeps its content).
    settled: int = 0
    #: The positions of the view the last run applied added or changed.
    changed: list[int] = field(default_factory=list)

    def branch(self) -> _Replay:
        """A copy for one child of a branch point (the other children need this view)."""
        held = view_of(self.reducer)
        messages, state, interrupts, warnings = ingest.decode(
            ingest.encode([held.messages, held.state, held.interrupts, held.warnings])
        )
        reducer = start_reducer(View(messages, state, interrupts, warnings))
        reducer.take_unmoved()  # the copy holds what the parent held: count from here
        return _Replay(reducer, self.ids_hasher, self.chunks, self.settled)

    def apply(self, record: RunRecord) -> None:
        """One run onto the view; keeps the id digest and what stays settled."""
        reducer = self.reducer
        names, snapshot = named_ids(record.events)
        before = len(reducer.messages)
        reached_before = reached(reducer, names)
        apply_run(reducer, record)
        messages = reducer.messages
        unmoved = reducer.take_unmoved()
        # What derivation indexes of the run (its search index rows come from these).
        self.changed = search.changed_positions(
            messages, 0 if snapshot else min(unmoved, before), reducer.holders(names)
        )
        if snapshot or reducer.aliased:
            self.settled = 0
        else:
            self.settled = min(self.settled, unmoved, reducer.lowest_position(names))
        # A list that only grew extends the digest; any other change hashes it again.
        if self.ids_hasher is not None and only_appended(before, unmoved, reached_before, snapshot):
            new_ids = lineage_ids(messages[before:])
            self.ids_hasher = hash_ids(new_ids, self.ids_hasher)
        else:
            self.ids_hasher = hash_ids(lineage_ids(messages))

    def settled_chunks(self) -> int:
        """How many leading full chunks hold what the last equal checkpoint held."""
        return min(len(self.chunks), self.settled // checkpoints.CHUNK)

    def found_equal(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.settled = len(self.reducer.messages)


def _check_derived(ctx: _Context, out: _Collector) -> None:
    tx = ctx.tx
    runs = ctx.runs
    complete = ctx.complete
    with_checkpoint = {int(layout[0]) for layout in tx.checkpoint_layouts()}
    digests: dict[int, list[bytes]] = {}
    for digest, run in tx.every_lineage_digest():
        digests.setdefault(int(run), []).append(bytes(digest))
    run_hashes = {
        pk: {b.stored for b in link.batches if b.stored is not None}
        for pk, link in ctx.links.items()
    }
    children: dict[int, int] = {}
    for row in runs.values():
        if row.parent is not None:
            children[row.parent] = children.get(row.parent, 0) + 1
    replays: dict[int, _Replay] = {}  # lineages whose children are still to come
    index = _SearchIndex(ctx, out)
    faithful: dict[int, bool] = {}  # runs whose lineage's log is what its hashes cover
    for pk, row in runs.items():
        parent = row.parent
        if parent is None:
            replay = _Replay(start_reducer())
        else:
            if parent not in replays:
                continue  # not replayable (the lineage check, or the replay above, says why)
            children[parent] -= 1
            # At a branch point the other children need the parent's view unchanged.
            last = children[parent] == 0
            replay = replays.pop(parent) if last else replays[parent].branch()
        name = ctx.name_run(pk)
        try:
            replay.apply(_record(tx, pk, parent is not None))
        except InvalidEventError as e:
            # Events the official client itself refuses to replay: nothing may derive from
            # them (the store writes no checkpoint or digest for such a lineage).
            if pk in with_checkpoint or pk in digests:
                out.problem(
                    f"{name} has derived data (a checkpoint or lineage digest), but its log "
                    f"no longer replays: {e}"
                )
            continue
        except (AguiStoreError, ValueError, TypeError, KeyError) as e:
            out.problem(f"{name}: its lineage cannot be replayed from the log: {e}")
            continue
        before = out.reported
        # Derived data was made from the log its hashes cover: of a run whose lineage's log
        # is not that (the hashes check names where), no derived row is asked for.
        faithful[pk] = _log_holds(ctx.links.get(pk)) and (
            parent is None or faithful.get(parent, False)
        )
        if pk in complete and pk in digests:
            expected = replay.ids_hasher.digest()
            for found in digests[pk]:
                if found != expected:
                    out.problem(
                        f"the lineage digest of {name} is {found.hex()[:hashing.SHORT]}, but a "
                        f"replay of the log gives {expected.hex()[:hashing.SHORT]}: lineage "
                        "rule 3 would place runs by a view the run does not have"
                    )
        elif pk in complete and pk not in index.underived and faithful[pk]:
            out.problem(
                f"the lineage digest of {name} is missing, though the run ended and was "
                "derived: lineage rule 3 cannot place a run by the view it left"
            )
        if pk in with_checkpoint:
            # A lineage's last run compares its checkpoint whole: what sharing chunks rests
            # on (an event edits only what it names) is checked at every tip.
            skip = replay.settled_chunks() if children.get(pk) else 0
            layout = _compare_checkpoint(ctx, out, pk, replay, run_hashes.get(pk, set()), skip)
        else:
            layout = None
        # A run whose lineage's log is not what its hashes cover, or whose derived view
        # differs from the replay, has its index rows measured against another view than
        # they were made from (the checks above say why).
        index.observe(
            pk, row.thread_pk, replay.reducer.messages, replay.changed, layout,
            trusted=faithful[pk] and out.reported == before,
        )
        if children.get(pk):
            replays[pk] = replay
    index.finish()


class _SearchIndex:
    """The search index against the replay (its rows are derived data, so part of the
    ``derived`` check): each row names a message that its run's view holds with the text
    the row's key was made of, at the place the row gives, in the checkpoint blob it names
    when it names one; every message a derived run added or changed has a row in its
    thread; the backend's full-text index holds the words of every row and of no other, and
    a row's are those of its message's text."""

    def __init__(self, ctx: _Context, out: _Collector) -> None:
        self.ctx, self.out = ctx, out
        self.rows: dict[int, list[IndexedMessage]] = {}
        self.keys: dict[int, set[int]] = {}
        for row in ctx.tx.every_search_row():
            self.rows.setdefault(int(row.run), []).append(row)
            self.keys.setdefault(int(row.thread), set()).add(int(row.key))
        underived = ctx.tx.underived_runs(None)
        self.underived = {int(run) for run, _thread in underived}
        # A run left underived had its rows dropped, and another branch's run may hold one
        # of its messages, which the index finds again when the run is derived: a thread
        # waiting for that is not held to every message being indexed.
        self.waiting = {int(thread) for _run, thread in underived}
        self.without_words, self.orphan_words = ctx.tx.search_words_apart()
        self.wordless = set(self.without_words)  # reported as such in :meth:`finish`
        # Each row's words as the backend's full-text index holds them, kept as a digest of
        # the set (:func:`_words_digest`), which the words the log gives its message must
        # match: a word edited in or out finds a message by what it does not say.
        self.words: dict[int, int] = {}
        for row_id, word in ctx.tx.search_words_held():
            self.words[row_id] = (self.words.get(row_id, 0) + hash(word)) & _DIGEST_MASK

    def observe(
        self,
        pk: int,
        thread_pk: int,
        messages: list[Any],
        changed: list[int],
        layout: checkpoints.Layout | None,
        *,
        trusted: bool,
    ) -> None:
        """Run ``pk``, just replayed to ``messages`` (``changed``: the positions it added or
        changed; ``layout``: its checkpoint's, found equal to the replay, if it has one):
        its rows name what it holds; what it added is indexed. Unless not ``trusted``: the
        replay is not the view the rows were made from."""
        ctx, out = self.ctx, self.out
        rows = self.rows.pop(pk, [])
        if not trusted:
            return
        name = ctx.name_run(pk)
        # The keys of what the run added or changed, where its rows mostly point.
        added = search.index_rows(messages, changed, None)
        keys_at = {position: key for key, position, *_rest in added}
        words_of = {key: words for key, _position, _tool, words, *_rest in added}
        for row in rows:
            where = f"search index row #{row.id} of {name}"
            if int(row.thread) != thread_pk:
                out.problem(f"{where} is filed under another thread (#{row.thread})")
            elif pk not in ctx.complete:
                out.problem(f"{where} names a run that has not ended: nothing of it is indexed")
            elif keys_at.get(row.position) != int(row.key) and not (
                0 <= row.position < len(messages)
                and search.holds(messages[row.position], int(row.key))
            ):
                out.problem(
                    f"{where} names position {row.position} of the run's view, which does not "
                    "hold the message text it was made of: a hit on it would show another "
                    "message"
                )
            elif int(row.id) not in self.wordless and self.words.get(
                int(row.id), 0
            ) != _words_digest(words_of.get(int(row.key)), messages[row.position]):
                out.problem(
                    f"{where} holds other words than its message's text gives: a search "
                    "finds the message by words it does not hold, or misses it by words it "
                    "holds"
                )
            elif row.blob is not None:
                held = None if layout is None else search.in_layout(layout, row.position)
                if held != (row.blob, row.at):
                    out.problem(
                        f"{where} names blob #{row.blob} at {row.at}, which is not where the "
                        "run's checkpoint holds its message: a hit on it would show another "
                        "message"
                    )
        if pk not in ctx.complete or pk in self.underived or thread_pk in self.waiting:
            return
        keys = self.keys.get(thread_pk, set())
        for key, position, *_rest in added:
            if key not in keys:
                message_id = messages[position].get("id")
                out.problem(
                    f"the search index lacks message {quote(message_id)} as {name} left it "
                    f"(position {position}): a search cannot find it"
                )

    def finish(self) -> None:
        """The rows of runs not replayed, and the backend's words against the rows; runs
        waiting to be derived, which a search may not find yet."""
        ctx, out = self.ctx, self.out
        if self.underived:
            out.warning(
                f"{counted(len(self.underived), 'run')} of "
                f"{counted(len(self.waiting), 'thread')} "
                f"{'waits' if len(self.underived) == 1 else 'wait'} to be derived (an interrupted "
                "copy or import, derive_on_append=False, an older version's store, or events "
                "after a run's end left them): until they are, a search may not find their "
                "messages; 'agui-store compact' derives them"
            )
        for pk, rows in self.rows.items():
            ids = _ids([int(row.id) for row in rows])
            if pk not in ctx.runs:
                out.problem(
                    f"search index rows {ids} name run #{pk}, which the store does not hold: "
                    "a search can find text the store no longer keeps"
                )
            elif pk not in ctx.complete:
                out.problem(
                    f"search index rows {ids} name {ctx.name_run(pk)}, which has not ended: "
                    "nothing of it is indexed"
                )
            # Else the run's lineage does not replay: the check above says why.
        without_words, orphan_words = self.without_words, self.orphan_words
        if without_words:
            out.problem(
                "the full-text index holds no words for "
                f"{counted(len(without_words), 'search index row')} ({_ids(without_words)}): a "
                "search cannot find their messages"
            )
        if orphan_words:
            out.problem(
                f"the full-text index holds words under {counted(len(orphan_words), 'id')} that no "
                f"search index row has ({_ids(orphan_words)}): erased or replaced text may "
                "still match a search"
            )


#: A digest of a row's words: the sum of their hashes, 64 bits of it.
_DIGEST_MASK = (1 << 64) - 1


def _words_digest(words: str | None, message: Any) -> int:
    """The digest of the set of ``words`` (as :func:`agui_store.history.search.index_text`
    gives them), as :class:`_SearchIndex` keeps a row's: of ``message``'s text when ``words``
    is ``None``. The order of the words, and repeats, left out (no full-text index keeps them)."""
    if words is None:
        words = index_text(message_text(message))
    return sum(hash(word) for word in set(words.split())) & _DIGEST_MASK


def _log_holds(link: log_hashes.RunLink | None) -> bool:
    """Whether a run's log is what its hashes cover (the ``hashes`` check names what is not)."""
    return (
        link is not None
        and link.stored_start is not None
        and link.input_verified
        and link.parent_verified
        and link.start_verified
        and all(b.stored is not None and b.verified for b in link.batches)
    )


def _ids(ids: list[int]) -> str:
    """``#3, #4, ...``: the first few of a list of row ids."""
    return ", ".join(f"#{i}" for i in ids[:5]) + (", ..." if len(ids) > 5 else "")


def _compare_checkpoint(
    ctx: _Context, out: _Collector, pk: int, replay: _Replay, run_hashes: set[Any], skip: int
) -> checkpoints.Layout | None:
    """The checkpoint of run ``pk`` against the replay. Its first ``skip`` full chunks are
    the ones the replay's last equal checkpoint had there (unchanged since): they are
    compared by address (each blob's content against its address is the blobs check's).
    Its layout, when it reads back verified (the search index check places rows by it)."""
    where = f"the checkpoint of {ctx.name_run(pk)}"
    view = view_of(replay.reducer)
    found_before, replay.chunks = replay.chunks, []  # nothing found equal yet
    verified = True
    refused = ""
    try:
        try:
            # As a checkout reads it: one pass over its bytes.
            snap = checkpoints.load(ctx.tx, pk, verify=True, skip_chunks=skip)
            if snap.layout.chunk_addrs[:skip] != found_before[:skip]:
                skip = 0  # other chunks than the ones found equal: compare it whole
                snap = checkpoints.load(ctx.tx, pk, verify=True)
        except HashMismatchError as e:
            verified = False
            refused = e.what
            skip = 0
            snap = checkpoints.load(ctx.tx, pk, verify=False)
    except HashMismatchError as e:
        out.problem(f"{where} cannot be read: {e.what}")
        return None
    except (AguiStoreError, ValueError, LookupError, TypeError, zlib.error) as e:
        out.problem(f"{where} cannot be read: {e}")
        return None
    held = snap.view
    start = snap.skipped
    equal = True
    if held.messages != view.messages[start:]:
        equal = False
        out.problem(
            f"{where} differs from a replay of the log at "
            f"{_first_difference(held.messages, view.messages[start:], start)}"
        )
    for what, found, replayed in (
        ("state", held.state, view.state),
        ("pending interrupts", held.interrupts, view.interrupts),
        ("warnings", held.warnings, view.warnings),
    ):
        if found != replayed:
            verb = "differs" if what == "state" else "differ"
            out.problem(f"{where}: its {what} {verb} from a replay of the log")
    if verified:
        if equal:
            replay.found_equal(snap.layout.chunk_addrs)
        return snap.layout
    digest, recorded, run_hash = checkpoints.stored_view_digest(ctx.tx, pk)
    if recorded is None or run_hash is None:
        out.problem(f"{where} records no hashes: it was not written by agui-store")
        return None
    if bytes(recorded) != digest:
        out.problem(
            f"{where} holds other content than it was written with: its blobs give view "
            f"digest {digest.hex()[:hashing.SHORT]}, it recorded {_short(recorded)}"
        )
    if bytes(run_hash) not in run_hashes:
        out.problem(
            f"{where} was derived at run hash {_short(run_hash)}, which is none of the run's: "
            "the run's hashes were rewritten since"
        )
    elif bytes(recorded) == digest:
        # It points at the blobs it was written with, and one of them was edited in place.
        out.problem(f"{where} fails its hashes: {refused}")
    return None


def _check_conversations(ctx: _Context, out: _Collector) -> None:
    """pydantic-ai conversations: content hashes of messages, entries and records."""
    conversations.check(ctx.tx, out.problem)


def _check_erasures(ctx: _Context, out: _Collector) -> None:
    """The erasure log: each entry's hash covers its fields and the entry before it, so an
    entry edited or deleted outside the store (but the newest) breaks the chain here."""
    for entry, _ranges, sound in ctx.erasures:
        if not sound:
            out.problem(
                f"erasure #{entry.number} ({entry.verb}, {entry.erased_at}) fails its hash: "
                "it, or an entry before it, was changed or deleted outside agui-store"
            )
    _check_resurrected(ctx, out)


def _check_resurrected(ctx: _Context, out: _Collector) -> None:
    """A thread the store erased keeps a tombstone (:mod:`agui_store.engine.erasure`), which
    covers the threads of its id created at or before the erasure (a thread written under
    the id later is created after it): one of those held again is the erased thread's rows
    put back outside the store (from a backup, say), its runs or its row alone (which
    names it in the list of threads)."""
    stones = dict(ctx.tx.tombstones())
    if not stones:
        return
    erased: dict[int, tuple[str, int]] = {}
    for thread_id in ctx.tx.thread_ids(None):
        erased_at = stones.get(tombstones.thread_hash(thread_id))
        if erased_at is None:
            continue
        stored = ctx.tx.thread(thread_id)
        if stored is not None:
            erased[stored[0]] = thread_id, erased_at
    for pk, (thread_id, erased_at) in sorted(erased.items()):
        created_at = int(ctx.tx.thread_created_at(pk))
        if tombstones.covers(erased_at, created_at):
            out.problem(
                f"thread {quote(thread_id)} (#{pk}), created at {clock.shown(created_at)}, was "
                f"erased at {clock.shown(erased_at)} (its tombstone says so), but the store "
                "holds it again: its rows were put back outside agui-store, from a backup "
                f"say, and what was erased can be read again (delete_thread({quote(thread_id)}) "
                "erases it again)"
            )
    _check_resurrected_conversations(ctx, out, stones)


def _check_resurrected_conversations(
    ctx: _Context, out: _Collector, stones: dict[bytes, int]
) -> None:
    """An erased pydantic-ai conversation leaves a tombstone for each entry it reached,
    keyed by its id and the entry's (:func:`tombstones.entry_stone`): a conversation of that
    id holding one of those entries is the erased one, put back outside the store. (One
    saved anew under the id holds none; a fork, under an id of its own, is not keyed so.)
    Only the conversations whose id was erased are read."""
    for row in ctx.tx.conversations(None, conversations.EVERY):
        cid = str(row.conversation_id)
        if tombstones.entries_stone(cid) not in stones:
            continue
        record = conversations.record_of(row)
        reached: dict[str, None] = {}
        for tip in (record.head_id, *record.branches):
            if tip is not None and tip not in reached:
                history = ctx.tx.conversation_history(tip, conversations.EVERY)
                reached.update((str(entry.entry_id), None) for entry in history)
        hit = [
            at for e in reached if (at := stones.get(tombstones.entry_stone(cid, e))) is not None
        ]
        if hit:
            out.problem(
                f"conversation {quote(cid)} was erased at {clock.shown(max(hit))} (its "
                f"tombstones say so), but the store holds it again, with {len(hit)} of the "
                "entries it had: its rows were put back outside agui-store, from a backup "
                "say, and what was erased can be read again (pydantic-ai's delete, then "
                "Store.purge(), removes it again)"
            )


_CHECKS: tuple[tuple[str, Callable[[_Context, _Collector], None]], ...] = (
    ("lineage", _check_lineage),
    ("refs", _check_refs),
    ("batches", _check_batches),
    ("runs", _check_runs),
    ("events", _check_events),
    ("blobs", _check_blobs),
    ("checkpoints", _check_checkpoints),
    ("lineage_digests", _check_lineage_digests),
    ("hashes", _check_hashes),
    ("derived", _check_derived),
    ("conversations", _check_conversations),
    ("erasures", _check_erasures),
)
