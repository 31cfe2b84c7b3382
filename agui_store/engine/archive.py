"""The archive: a lossless, versioned JSON Lines format for a thread or a whole store, out of
a store and into one (docs/reference/archive.md describes it for other tools).

A line is one JSON object whose ``record`` names what it is. The first is the header, which
names the format and its version; then, for each thread, its record, its runs' records, its
batches in the order they were written (each followed by its events), its branches and the
pydantic-ai conversations linked to it (each entry, then the record); a whole store's export
ends with the conversations no thread links to; the last line counts what came before, so a
cut file is refused, not half read. Events, inputs, echo references and conversation
messages are embedded as their stored JSON text, byte for byte (a text that spans lines is
written as a JSON string under ``*_text`` instead: one record, one line; so is a text holding
an escaped surrogate, which a JSON reader may refuse when it is not half of a pair: half an
emoji, as JavaScript producers split one). Every run and batch
carries its content hash, which an import recomputes and compares before it writes.

Both directions hold one thread (and its conversations) at a time: memory follows the
largest thread, not the store. An import lands through the engine's replication
(:mod:`agui_store.engine.replication`), as ``copy`` does, so it refuses what ``copy`` refuses
(a run both hold with other content, another owner, a diverged branch or conversation) and
adds nothing the store holds already. It writes in the caller's one write transaction: a
refused or damaged file leaves the store as it was.
"""

from __future__ import annotations

import binascii
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from agui_store import records
from agui_store.codec import ingest, json
from agui_store.engine import (
    arguments,
    conversations,
    intake,
    port,
    replication,
    tombstones,
)
from agui_store.errors import (
    BranchError,
    HashMismatchError,
    InvalidArgumentError,
    InvalidEventError,
    SchemaVersionError,
)
from agui_store.history import hashing, normalize

#: The header's ``format``.
FORMAT = "agui-store-archive"
#: The header's ``version``: what this agui-store writes, and the newest it reads.
VERSION = 1

_ENCODE = msgspec.json.encode
_NULL = msgspec.Raw(b"null")


@dataclass
class ArchiveResult:
    """What an export wrote, or what an import added.

    Attributes:
        threads: threads written (an import: threads that received anything).
        runs: runs written (an import: runs the store lacked).
        events: events written (an import: events the store lacked).
        branches: branches written (an import: created or moved forward).
        conversations: pydantic-ai conversations written (an import: created or moved on).
        left_erased: an import: threads the store erased (it holds their tombstones),
            left out with the conversations the archive links to them
            (``restore_erased=True`` imports them).
    """

    threads: int = 0
    runs: int = 0
    events: int = 0
    branches: int = 0
    conversations: int = 0
    left_erased: int = 0


# --- writing ---------------------------------------------------------------------------------


def _miscount(counted: Any, held: Any) -> str:
    """What a count the end record gives and the archive's own say of its lines."""
    if isinstance(counted, dict) and isinstance(held, dict):
        fewer = any(held.get(k, 0) < v for k, v in counted.items() if isinstance(v, int))
        more = any(v > counted.get(k, 0) for k, v in held.items() if isinstance(v, int))
        if more and not fewer:
            return "lines were repeated or added"
        if more:
            return "lines are missing and others were added"
    return "lines are missing"


def _hex(value: Any) -> str | None:
    return None if value is None else bytes(value).hex()


#: An escaped UTF-16 surrogate in JSON text (``\ud83d``): what msgspec refuses unpaired.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _json(text: str | None, name: str, out: dict[str, Any]) -> None:
    """Embed stored JSON text under ``name`` as it is, or as a string under ``name_text``
    when it spans lines (a JSON Lines record is one line) or escapes a surrogate (so that
    each line reads with any JSON reader)."""
    if text is None:
        out[name] = None
    elif "\n" in text or "\r" in text or _SURROGATE_ESCAPE.search(text):
        out[f"{name}_text"] = text
    else:
        out[name] = msgspec.Raw(text.encode("utf-8", "surrogatepass"))


def _line(record: dict[str, Any]) -> bytes:
    return _ENCODE(record) + b"\n"


def header() -> bytes:
    """The first line of every archive."""
    return _line({"record": "header", "format": FORMAT, "version": VERSION})


def export_lines(
    tx: port.Reading,
    thread_ids: Sequence[str],
    *,
    whole_store: bool,
    scope: str | None = None,
    counts: ArchiveResult | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[bytes]:
    """The archive of ``thread_ids`` (with the conversations linked to them; ``whole_store``:
    every other conversation too; ``scope``: only that owner's threads and conversations), line by
    line, inside one read transaction. ``counts``
    is filled in as lines are made; ``progress(threads done, threads)`` is called after
    each thread."""
    counts = ArchiveResult() if counts is None else counts
    written: set[str] = set()
    yield header()
    for done, thread_id in enumerate(thread_ids, 1):
        yield from _thread_lines(tx, thread_id, counts)
        if progress is not None:
            progress(done, len(thread_ids))
        for cid in conversations.linked(tx, thread_id):
            found = tx.conversation(cid)
            if scope is not None and (found is None or found[3] != scope):
                continue  # another owner's conversation is absent, as to every read
            if cid not in written:
                written.add(cid)
                counts.conversations += 1
                yield from _conversation_lines(tx, cid)
    if whole_store:
        for row in tx.conversations(scope, conversations.EVERY):
            cid = str(row[1])
            if cid not in written:
                written.add(cid)
                counts.conversations += 1
                yield from _conversation_lines(tx, cid)
    yield _line({"record": "end", "counts": _counts(counts)})


def _counts(result: ArchiveResult) -> dict[str, int]:
    return {
        "threads": result.threads,
        "runs": result.runs,
        "events": result.events,
        "branches": result.branches,
        "conversations": result.conversations,
    }


def _thread_lines(tx: port.Reading, thread_id: str, counts: ArchiveResult) -> Iterator[bytes]:
    found = tx.thread(thread_id)
    assert found is not None
    pk, owner = found
    runs = replication.runs_of(tx, pk)
    counts.threads += 1
    counts.runs += len(runs)
    yield _line(
        {
            "record": "thread",
            "thread_id": thread_id,
            "owner": owner,
            "created_at": tx.thread_created_at(pk),
        }
    )
    for run in runs:
        # An archive carries the source's hashes: a run edited outside the store would be
        # refused by every import of it, so it is refused here, before the file is whole.
        replication.check_start(thread_id, run, _NOT_EXPORTED)
        record: dict[str, Any] = {
            "record": "run",
            "run_id": run.run_id,
            "parent_run_id": run.parent_id,
            "lineage": run.lineage,
            "sent_parent_run_id": run.sent_parent,
            "synthetic": run.synthetic,
            "created_at": run.created_at,
        }
        _json(run.input_text, "input", record)
        _json(run.refs_text, "input_refs", record)
        record["parent_hash"] = _hex(run.parent_hash)
        record["hash"] = run.start_hash.hex()
        yield _line(record)
    # Batches in the order they were written, each run's events read a few runs at a time
    # and let go once its last batch is out.
    items = sorted(
        ((run, batch) for run in runs for batch in run.batches), key=lambda item: item[1][1]
    )
    remaining: dict[int, int] = {}
    for run, _ in items:
        remaining[run.pk] = remaining.get(run.pk, 0) + 1
    events: dict[int, dict[int, tuple[int, str, str, str | None]]] = {}
    chained = {run.pk: run.start_hash for run in runs}  # each run's hash so far
    for n, (run, batch) in enumerate(items):
        if run.pk not in events:
            wanted: list[int] = []
            for later, _ in items[n:]:
                if later.pk not in events and later.pk not in wanted:
                    wanted.append(later.pk)
                    if len(wanted) == replication.RUNS_PER_READ:
                        break
            for run_pk, rows in replication.events_by_run(tx, wanted).items():
                events[run_pk] = {row[0]: row for row in rows}
        _, first, last, outcome, appended_at, batch_hash = batch
        mine = events[run.pk]
        rows = [mine[seq] for seq in range(first, last + 1)]
        replication.check_batch(thread_id, run.run_id, chained[run.pk], rows, batch, _NOT_EXPORTED)
        chained[run.pk] = batch_hash
        yield _line(
            {
                "record": "batch",
                "run_id": run.run_id,
                "outcome": outcome,
                "appended_at": appended_at,
                "events": last - first + 1,
                "hash": batch_hash.hex(),
            }
        )
        for _, kind, payload, refs in rows:
            record = {"record": "event", "type": kind}
            _json(payload, "event", record)
            if refs is not None:
                _json(refs, "echo_refs", record)
            yield _line(record)
        counts.events += last - first + 1
        remaining[run.pk] -= 1
        if not remaining[run.pk]:
            del events[run.pk]
    for name, run_id, updated_at in tx.branch_list(pk):
        counts.branches += 1
        yield _line(
            {"record": "branch", "name": name, "run_id": run_id, "updated_at": updated_at}
        )


#: What an export did when the store fails its hashes.
_NOT_EXPORTED = "nothing was exported (a file named is not written)"


def _conversation_lines(tx: port.Reading, conversation_id: str) -> Iterator[bytes]:
    row = tx.conversation(conversation_id)
    assert row is not None
    record = conversations.record_of(row)
    for entry in replication.source_entries(tx, record):
        line: dict[str, Any] = {
            "record": "conversation_entry",
            "entry_id": entry.entry_id,
            "parent_id": entry.parent_id,
            "kind": entry.kind,
            "conversation": entry.conversation,
        }
        _json(entry.message, "message", line)
        line["hash"] = entry.hash.hex()
        yield _line(line)
    line = {
        "record": "conversation",
        "conversation_id": record.conversation_id,
        "head_id": record.head_id,
        "scope": record.scope,
        "revision": record.revision,
        "updated_at": record.updated_at,
    }
    _json(record.record, "fields", line)
    line["branches"] = list(record.branches)
    line["hash"] = bytes(row[7]).hex()
    yield _line(line)


# --- reading ---------------------------------------------------------------------------------


class _Line(msgspec.Struct):
    """Any record of an archive: the fields of every kind, each optional."""

    record: str
    format: str | None = None
    version: int | None = None
    thread_id: str | None = None
    owner: str | None = None
    created_at: int | None = None
    run_id: str | None = None
    parent_run_id: str | None = None
    lineage: str | None = None
    sent_parent_run_id: str | None = None
    synthetic: bool = False
    input: msgspec.Raw = _NULL
    input_text: str | None = None
    input_refs: msgspec.Raw = _NULL
    input_refs_text: str | None = None
    parent_hash: str | None = None
    hash: str | None = None
    outcome: str | None = None
    appended_at: int | None = None
    events: int | None = None
    type: str | None = None
    event: msgspec.Raw = _NULL
    event_text: str | None = None
    echo_refs: msgspec.Raw = _NULL
    echo_refs_text: str | None = None
    name: str | None = None
    updated_at: int | None = None
    entry_id: str | None = None
    parent_id: str | None = None
    kind: str | None = None
    conversation: str | None = None
    message: msgspec.Raw = _NULL
    message_text: str | None = None
    conversation_id: str | None = None
    head_id: str | None = None
    scope: str | None = None
    revision: str | None = None
    fields: msgspec.Raw = _NULL
    fields_text: str | None = None
    branches: list[str] = msgspec.field(default_factory=list)
    counts: dict[str, int] | None = None


_DECODER = msgspec.json.Decoder(_Line)


#: The events that end a run: the last of a batch gives its ``outcome``.
_TERMINALS = frozenset({"RUN_FINISHED", "RUN_ERROR"})

#: The statuses a batch's ``outcome`` may record (None: a batch without a terminal event).
_OUTCOMES = frozenset({"error", *records.OUTCOME_STATUSES})

#: The times an archive may give, in milliseconds since the epoch: from 1970 to the end of
#: year 9999, the span a ``datetime`` holds (a time past it cannot be shown).
_LATEST_MS = 253_402_300_799_999


def _moment(value: Any, name: str, where: str, *, micro: bool = False) -> int:
    """A record's time, refused outside :data:`_LATEST_MS`'s span (``micro``: a time in
    microseconds, as a conversation's ``updated_at`` is)."""
    moment = _need(value, name, where)
    latest, unit = (_LATEST_MS, "milliseconds")
    if micro:
        latest, unit = latest * 1000 + 999, "microseconds"
    if not isinstance(moment, int) or not 0 <= moment <= latest:
        raise InvalidArgumentError(
            f"{where}: {name} {moment!r} is not a time ({unit} since 1970, before year 10000)"
        )
    return moment


def _text(raw: msgspec.Raw, text: str | None) -> str | None:
    if text is not None:
        return text
    data = bytes(raw)
    return None if data == b"null" else data.decode("utf-8", "surrogatepass")


#: The records an archive holds after its header line.
RECORDS = frozenset(
    {"thread", "run", "batch", "event", "branch", "conversation_entry", "conversation", "end"}
)


#: UTF-8's byte-order mark, which some editors write first: not part of the archive.
_BOM = b"\xef\xbb\xbf"


def first_line(head: bytes) -> bytes:
    """The first line of a file that holds anything, from its first bytes ``head``: after
    a byte-order mark and blank lines, which a reader skips."""
    for line in head.removeprefix(_BOM).split(b"\n"):
        if line.strip():
            return line
    return b""


def is_headless_archive(first_line: bytes) -> bool:
    """Whether a file's first line is an archive record other than its header: an archive
    cut at its start, which would otherwise read as AG-UI events without a ``type``."""
    found = _object_of(first_line)
    return found is not None and "type" not in found and found.get("record") in RECORDS


def is_archive(first_line: bytes) -> bool:
    """Whether a file's first line is an archive's header."""
    found = _object_of(first_line)
    return found is not None and found.get("format") == FORMAT


def _object_of(line: bytes) -> dict[str, Any] | None:
    """The JSON object a line holds, or ``None``: no JSON (or JSON nested deeper than the
    decoder recurses, ``[[[[...``), or JSON of another kind."""
    try:
        found = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


@dataclass
class _Run:
    pk: int
    record: port.ReplicaRun
    chain: list[bytes]


@dataclass
class _Section:
    """One thread of an archive (or none: the conversations at the end), as a replication
    source (:class:`agui_store.engine.replication.Source`)."""

    where: str
    thread_id: str | None = None
    owner: str | None = None
    created_at: int = 0
    runs: dict[str, _Run] = field(default_factory=dict)
    batches: list[port.ChainedBatch] = field(default_factory=list)
    events: list[port.EventRow] = field(default_factory=list)
    branches: list[tuple[str, str, int]] = field(default_factory=list)
    entries: dict[str, tuple[str | None, str, str, bytes, bytes, str]] = field(
        default_factory=dict
    )
    records: dict[str, port.ConversationRow] = field(default_factory=dict)
    run_lines: dict[str, int] = field(default_factory=dict)  # a run's record: its line
    batch_lines: list[int] = field(default_factory=list)  # each batch's record: its line
    opened: set[int] = field(default_factory=set)  # the runs whose first event was read
    _by_run: dict[int, list[port.EventRow]] | None = None

    # The source's side of replication.Source, over the lines read.
    def thread(self, thread_id: str) -> tuple[int, str | None] | None:
        """See :class:`agui_store.engine.replication.Source`."""
        return (1, self.owner) if thread_id == self.thread_id else None

    def thread_created_at(self, thread_pk: int) -> int:
        """See :class:`agui_store.engine.replication.Source`."""
        return self.created_at

    def replica_runs(self, thread_pk: int) -> list[port.ReplicaRun]:
        """See :class:`agui_store.engine.replication.Source`."""
        return [run.record for run in self.runs.values()]

    def batches_of_runs(self, run_pks: Sequence[int]) -> Iterable[port.ChainedBatch]:
        """See :class:`agui_store.engine.replication.Source`."""
        wanted = set(run_pks)
        return [b for b in self.batches if b.run_pk in wanted]

    def events_of_runs(self, run_pks: Sequence[int]) -> Iterable[port.EventRow]:
        """See :class:`agui_store.engine.replication.Source`."""
        if self._by_run is None:
            self._by_run = {}
            for row in self.events:
                self._by_run.setdefault(row[0], []).append(row)
        return [row for pk in run_pks for row in self._by_run.get(pk, ())]

    def branch_list(self, thread_pk: int) -> list[tuple[str, str, int]]:
        """See :class:`agui_store.engine.replication.Source`."""
        return self.branches

    def conversation(self, conversation_id: str) -> port.ConversationRow | None:
        """See :class:`agui_store.engine.replication.Source`."""
        return self.records.get(conversation_id)

    def thread_custom_events(self, thread_id: str) -> list[tuple[str, str]]:
        """The thread's ``CUSTOM`` events, ``(run id, payload)``, in recorded order (where
        its runs announce conversation saves)."""
        if thread_id != self.thread_id:
            return []
        names = {run.pk: run_id for run_id, run in self.runs.items()}
        return [(names[row[0]], row[3]) for row in self.events if row[2] == "CUSTOM"]

    def conversation_history(self, head_id: str, limit: int) -> list[port.EntryRow]:
        """See :class:`agui_store.engine.replication.Source`."""
        out: list[port.EntryRow] = []
        at: str | None = head_id
        while at is not None and at in self.entries and len(out) < limit:
            parent, kind, message, address, own, _ = self.entries[at]
            parent_hash = None if parent is None else self.entries.get(parent, (None,) * 5)[4]
            out.append(port.EntryRow(at, parent, kind, message, own, address, parent_hash))
            at = parent
        return out[::-1]

    def conversation_entry_key(self, entry_id: str) -> tuple[int, bytes, str] | None:
        """See :class:`agui_store.engine.replication.Source`."""
        found = self.entries.get(entry_id)
        return None if found is None else (0, found[4], found[5])


def _hash(value: str | None, where: str) -> bytes | None:
    if value is None:
        return None
    try:
        return binascii.unhexlify(value)
    except (binascii.Error, ValueError):
        raise InvalidArgumentError(f"{where}: the hash {value!r} is not hex") from None


def _verify(section: _Section) -> None:
    """Refuse a thread whose records, inputs or events are not the ones its hashes cover
    (an archive edited or cut by hand), before anything of it is written."""
    chains = {run_id: run.chain for run_id, run in section.runs.items()}
    starts: dict[int, bytes] = {}
    for run_id, run in section.runs.items():
        record = run.record
        parent_id, p_hash, s_hash = record.parent_run_id, record.parent_hash, record.start_hash
        # The start hash covers the parent's hash, not its id: a record that names no parent
        # but keeps a parent hash lost its parent (an edited or misspelt field), and would
        # land as a root whose input refers to a view it does not have.
        if (parent_id is None and p_hash is not None) or (parent_id is not None and (
            parent_id not in chains or p_hash is None or p_hash not in chains[parent_id]
        )):  # fmt: skip
            raise _edited(
                section, section.run_lines[run_id],
                f"run {run_id!r} of thread {section.thread_id!r}: "
                + ("it names no parent_run_id, but has a parent hash" if parent_id is None else
                   f"its parent {parent_id!r} is not in the archive, or its parent hash is none "
                   "of that run's"),
            )  # fmt: skip
        expected = hashing.start(
            thread_id=section.thread_id or "",
            run_id=run_id,
            lineage=record.lineage,
            sent_parent_run_id=record.sent_parent,
            synthetic=record.synthetic,
            created_at=record.created_at,
            parent_hash=p_hash,
            input_hash=hashing.input_digest(record.input, record.input_refs),
        )
        if expected != s_hash:
            raise _edited(
                section, section.run_lines[run_id],
                f"run {run_id!r} of thread {section.thread_id!r}: its record or input is not "
                "the one its hash covers",
            )
        starts[run.pk] = s_hash
    by_run: dict[int, list[port.EventRow]] = {}
    for row in section.events:
        by_run.setdefault(row[0], []).append(row)
    previous = dict(starts)
    names = {run.pk: run_id for run_id, run in section.runs.items()}
    for line, (run_pk, first, last, outcome, appended_at, batch_hash) in zip(
        section.batch_lines,
        ((b.run_pk, b.first_seq, b.last_seq, b.outcome, b.appended_at, b.hash)
         for b in section.batches),
        strict=True,
    ):
        rows = [(seq, kind, payload, refs) for _, seq, kind, payload, refs in by_run[run_pk]
                if first <= seq <= last]  # fmt: skip
        digest = hashing.batch_digest(rows, outcome, appended_at)
        if hashing.chain(previous[run_pk], digest) != batch_hash:
            raise _edited(
                section, line,
                f"run {names[run_pk]!r} of thread {section.thread_id!r}: its events on lines "
                f"{line + 1}-{line + 1 + last - first} are not the ones this batch's hash covers",
            )
        previous[run_pk] = batch_hash


#: What a hash that fails in an archive means, and what the import did about it.
_EDITED = (
    "the archive was changed after it was written, or is damaged (or the store it was "
    "exported from had been edited outside agui-store: 'agui-store check' there tells); "
    "nothing was imported"
)


def _edited(section: _Section, line: int, what: str) -> HashMismatchError:
    """The error for an archive's thread whose content is not what its hashes cover: at the
    line of the record whose hash fails."""
    where = section.where.rsplit(", line ", 1)[0]
    return HashMismatchError(
        f"{where}, line {line}: {what}",
        advice=_EDITED,
    )


class _Reader:
    """Reads an archive's lines into sections and lands each one as it ends."""

    def __init__(
        self,
        dst: port.Writing,
        where: str,
        progress: Callable[[int], None] | None,
        restore_erased: bool = False,
    ) -> None:
        self.dst = dst
        self.restore_erased = restore_erased
        self.where = where
        self.progress = progress
        self.result = ArchiveResult()
        self.underived = False  # whether runs were left to derive (not which: memory)
        self.seen = ArchiveResult()  # what the archive held, against its end record
        self.section = _Section(where)
        self.seq = 0
        self.batch_left = 0
        self.batch_run = 0
        self.batch_run_id = ""
        self.batch_line = 0
        self.batch_outcome: str | None = None
        self.batch_status: str | None = None  # what the batch's last terminal event says
        self.batch_synthetic = False
        self.ended = False
        # Where each thread's section and each conversation's record began: a store holds
        # each once, so a file holding one twice (two archives joined) is no store's.
        self.thread_lines: dict[str, int] = {}
        self.conversation_lines: dict[str, int] = {}

    def at(self, number: int) -> str:
        return f"{self.where}, line {number}"

    def read(self, lines: Iterable[bytes]) -> None:
        number = 0
        headed = False
        for number, line in enumerate(lines, 1):
            if self.progress is not None:
                self.progress(len(line))
            if isinstance(line, str):  # a file opened as text
                line = line.encode("utf-8", "surrogatepass")
            if not headed:  # an editor's byte-order mark, blank lines: nothing yet
                line = line.removeprefix(_BOM)
            if not line.strip():
                continue
            try:
                rec = _DECODER.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                foreign = None if headed else ingest.foreign_file(line)
                raise InvalidArgumentError(
                    f"{self.at(number)}: {foreign or f'not an archive record: {e}'}"
                ) from None
            if not headed:
                self.header(rec, number)
                headed = True
                continue
            if self.ended:
                raise InvalidArgumentError(f"{self.at(number)}: a record after the end record")
            try:
                self.record(rec, number)
            except UnicodeDecodeError as e:  # in a value the record keeps as its JSON
                raise InvalidArgumentError(
                    f"{self.at(number)}: not UTF-8 text ({e.reason}, byte {e.start} of a "
                    "value): the archive is damaged"
                ) from None
        if number == 0:
            raise InvalidArgumentError(f"{self.where}: the file is empty")
        if not self.ended:
            raise InvalidArgumentError(
                f"{self.where}: the archive stops at line {number}, before its end record "
                "(a cut file): nothing was imported"
            )

    def header(self, rec: _Line, number: int) -> None:
        if rec.record != "header" or rec.format != FORMAT or rec.version is None:
            raise InvalidArgumentError(
                f"{self.at(number)}: not an agui-store archive (its first line names no "
                f"format {FORMAT!r} and version)"
            )
        if rec.version > VERSION:
            raise SchemaVersionError(
                f"{self.where} is an archive of version {rec.version}, written by a newer "
                f"agui-store (this one reads up to {VERSION}): upgrade agui-store to import it"
            )

    def record(self, rec: _Line, number: int) -> None:
        where = self.at(number)
        kind = rec.record
        section = self.section
        if self.batch_left and kind != "event":
            raise InvalidArgumentError(f"{where}: {self.batch_left} events of a batch missing")
        if kind == "thread":
            self.land()
            try:
                intake.check_scope(rec.owner)  # as append takes an owner
            except (InvalidEventError, InvalidArgumentError, TypeError) as e:
                raise InvalidArgumentError(f"{where}: the thread's owner: {e}") from None
            thread_id = _id(rec.thread_id, "thread", where)
            self._once(self.thread_lines, "thread", thread_id, "section", number)
            created_at = _moment(rec.created_at, "created_at", where)
            section = self.section = _Section(where, thread_id, rec.owner, created_at)
            self.seen.threads += 1
        elif kind == "run":
            run_id = _id(rec.run_id, "run", where)
            if section.thread_id is None or run_id in section.runs:
                raise InvalidArgumentError(
                    f"{where}: run {run_id!r} outside a thread, or twice in it"
                )
            unstorable = arguments.first_unstorable(
                [("parent_run_id", rec.parent_run_id),
                 ("sent_parent_run_id", rec.sent_parent_run_id)]
            )  # fmt: skip
            if unstorable is not None:
                raise InvalidArgumentError(
                    f"{where}: run {run_id!r}: its {unstorable[0]} {unstorable[1]}; append "
                    "refuses such ids, so no store holds one"
                )
            lineage = _need(rec.lineage, "lineage", where)
            if lineage not in records.LINEAGE_REASONS:
                raise InvalidArgumentError(
                    f"{where}: run {run_id!r}: lineage {lineage!r} is none of "
                    f"{', '.join(records.LINEAGE_REASONS)}"
                )
            pk = len(section.runs) + 1
            start = _hash(_need(rec.hash, "hash", where), where)
            assert start is not None
            run_input = _text(rec.input, rec.input_text)
            input_refs = _text(rec.input_refs, rec.input_refs_text)
            # A parent hash without a parent id is refused when the thread's hashes are
            # checked, as the edit it is.
            _readable_input(run_id, run_input, input_refs,
                            rec.parent_run_id or rec.parent_hash, where)  # fmt: skip
            section.runs[run_id] = _Run(
                pk,
                port.ReplicaRun(
                    pk=pk,
                    run_id=run_id,
                    parent_run_id=rec.parent_run_id,
                    lineage=lineage,
                    sent_parent=rec.sent_parent_run_id,
                    input=run_input,
                    input_refs=input_refs,
                    synthetic=rec.synthetic,
                    created_at=_moment(rec.created_at, "created_at", where),
                    parent_hash=_hash(rec.parent_hash, where),
                    start_hash=start,
                ),
                [start],
            )
            section.run_lines[run_id] = number
            self.seen.runs += 1
        elif kind == "batch":
            run_id = _need(rec.run_id, "run_id", where)
            run = section.runs.get(run_id)
            count = _need(rec.events, "events", where)
            if run is None or count < 1:
                raise InvalidArgumentError(
                    f"{where}: a batch of run {run_id!r}, which no run record before it names, "
                    "or of no events"
                )
            if rec.outcome is not None and rec.outcome not in _OUTCOMES:
                raise InvalidArgumentError(
                    f"{where}: a batch's outcome {rec.outcome!r} is no run status"
                )
            batch_hash = _hash(_need(rec.hash, "hash", where), where)
            assert batch_hash is not None
            first = self.seq + 1
            section.batches.append(
                port.ChainedBatch(
                    run_pk=run.pk,
                    start_hash=run.chain[-1],
                    first_seq=first,
                    last_seq=first + count - 1,
                    outcome=rec.outcome,
                    appended_at=_moment(rec.appended_at, "appended_at", where),
                    hash=batch_hash,
                )
            )
            section.batch_lines.append(number)
            run.chain.append(batch_hash)
            self.batch_left, self.batch_run, self.batch_run_id = count, run.pk, run_id
            self.batch_line, self.batch_outcome, self.batch_status = number, rec.outcome, None
            self.batch_synthetic = run.record.synthetic
        elif kind == "event":
            if not self.batch_left:
                raise InvalidArgumentError(f"{where}: an event outside a batch")
            payload = _text(rec.event, rec.event_text)
            if payload is None:
                raise InvalidArgumentError(f"{where}: an event record without its event")
            echo_refs = _text(rec.echo_refs, rec.echo_refs_text)
            event_type = self._event_type(payload, _need(rec.type, "type", where), where,
                                          echo_refs)  # fmt: skip
            self._in_run(event_type, where)
            self.seq += 1
            section.events.append((self.batch_run, self.seq, event_type, payload, echo_refs))
            self.batch_left -= 1
            self.seen.events += 1
            if not self.batch_left and self.batch_outcome != self.batch_status:
                raise InvalidArgumentError(
                    f"{self.at(self.batch_line)}: a batch of run {self.batch_run_id!r} records "
                    f"the outcome {self.batch_outcome!r}, but "
                    + ("holds no RUN_FINISHED or RUN_ERROR" if self.batch_status is None else
                       f"its events end the run as {self.batch_status!r}")
                )  # fmt: skip
        elif kind == "branch":
            if section.thread_id is None:
                raise InvalidArgumentError(f"{where}: a branch outside a thread")
            name, run_id = _need(rec.name, "name", where), _need(rec.run_id, "run_id", where)
            try:
                intake.check_branch_name(name)
            except BranchError as e:
                raise InvalidArgumentError(f"{where}: {e}") from None
            if run_id not in section.runs:
                raise InvalidArgumentError(
                    f"{where}: branch {name!r} points at run {run_id!r}, which no run record "
                    "of its thread before it names"
                )
            section.branches.append((name, run_id, _moment(rec.updated_at, "updated_at", where)))
            self.seen.branches += 1
        elif kind == "conversation_entry":
            entry_id = _need(rec.entry_id, "entry_id", where)
            message = _text(rec.message, rec.message_text)
            own = _hash(_need(rec.hash, "hash", where), where)
            assert own is not None
            if message is None:
                raise InvalidArgumentError(f"{where}: entry {entry_id!r} without its message")
            kind = _need(rec.kind, "kind", where)
            _stored_message(entry_id, rec.parent_id, kind, message, where)
            cid = _need(rec.conversation, "conversation", where)
            unread = _unreadable_message(message)
            if unread is not None:
                raise InvalidArgumentError(
                    f"{where}: conversation entry {entry_id!r} of conversation {cid!r}: "
                    f"pydantic-ai cannot read its message ({unread}), so every load of the "
                    "conversation would fail; a message is a ModelRequest or ModelResponse of "
                    "pydantic-ai's parts"
                )
            address = conversations.message_hash(message.encode("utf-8", "surrogatepass"))
            section.entries[entry_id] = (rec.parent_id, kind, message, address, own, cid)
        elif kind == "conversation":
            cid = _need(rec.conversation_id, "conversation_id", where)
            self._once(self.conversation_lines, "conversation", cid, "record", number)
            fields = _text(rec.fields, rec.fields_text)
            stored = _hash(_need(rec.hash, "hash", where), where)
            assert stored is not None
            row = port.ConversationRow(
                0, cid, rec.head_id, rec.scope, _need(rec.revision, "revision", where),
                _moment(rec.updated_at, "updated_at", where, micro=True),
                _need(fields, "fields", where),
                stored, _ENCODE(rec.branches).decode(),
            )  # fmt: skip
            record = conversations.record_of(row)
            if conversations.record_hash(record) != stored:
                raise HashMismatchError(
                    f"{where}: conversation {cid!r}: its record is not the one its hash covers",
                    advice=_EDITED,
                )
            _stored_record(record, where)
            section.records[cid] = row
            self.seen.conversations += 1
        elif kind == "end":
            self.land()
            self.ended = True
            held = _counts(self.seen)
            if rec.counts != held:
                raise InvalidArgumentError(
                    f"{where}: the end record counts {rec.counts}, but the archive holds "
                    f"{held}: {_miscount(rec.counts, held)}"
                )
        else:
            raise InvalidArgumentError(f"{where}: unknown record {kind!r}")

    def _once(self, lines: dict[str, int], kind: str, key: str, part: str, number: int) -> None:
        """Refuse the ``part`` of ``kind`` ``key`` at line ``number`` when an earlier line
        began one (``lines``: where each began)."""
        first = lines.setdefault(key, number)
        if first != number:
            raise InvalidArgumentError(
                f"{self.at(number)}: a second {part} of {kind} {key!r} (the first begins on "
                f"line {first}): an archive holds each {kind} once, as a store does; nothing "
                "was imported"
            )

    def _event_type(
        self, payload: str, kind: str, where: str, echo_refs: str | None = None
    ) -> str:
        """The type of an event as ``append`` would have stored it: a JSON object whose type
        is the record's, a ``RUN_STARTED`` naming its own thread and run, echo references
        only on a ``RUN_STARTED`` echoing an input, in a run with a parent. The hashes hold
        an archive to what it says; these hold it to what a store holds."""
        # Decoded as every read of the run decodes it: a value reads refuse (a number out of
        # a double's range, 1e400) would leave the run unreadable once landed.
        try:
            data = ingest.decode(payload)
        except InvalidEventError as e:
            raise InvalidArgumentError(
                f"{where}: the event is not JSON a store reads: {e}"
            ) from None
        if not isinstance(data, dict):
            raise InvalidArgumentError(f"{where}: the event is not a JSON object") from None
        said, thread, run = data.get("type"), data.get("threadId"), data.get("runId")
        if kind in _TERMINALS:
            self.batch_status = records.status_of_terminal(data)
        if echo_refs is not None:
            parent = self.section.runs[self.batch_run_id].record.parent_run_id
            wrong = (
                "they are on no RUN_STARTED" if kind != "RUN_STARTED" else
                "its echoed input is not a JSON object" if not isinstance(data.get("input"), dict)
                else "its run has no parent whose view they refer to"
                if parent is None else _refs_problem(echo_refs)
            )  # fmt: skip
            if wrong is not None:
                raise InvalidArgumentError(
                    f"{where}: the echo references of run {self.batch_run_id!r}: {wrong}"
                )
        if said != kind:
            raise InvalidArgumentError(
                f"{where}: the record says an event of type {kind!r}, its event says "
                f"{said!r}"
            )
        if kind == "RUN_STARTED" and (
            thread != self.section.thread_id or run != self.batch_run_id
        ):
            raise InvalidArgumentError(
                f"{where}: the RUN_STARTED of run {self.batch_run_id!r} of thread "
                f"{self.section.thread_id!r} names thread {thread!r} and run {run!r}"
            )
        return kind

    def _in_run(self, kind: str, where: str) -> None:
        """Refuse an event where ``check()`` would call the store damaged: a run that does
        not begin with its ``RUN_STARTED``, or holds a second one (a synthetic run, which
        the store named for events that started none, holds none)."""
        section = self.section
        first = self.batch_run not in section.opened
        section.opened.add(self.batch_run)
        if kind == "RUN_STARTED" and (self.batch_synthetic or not first):
            raise InvalidArgumentError(
                f"{where}: run {self.batch_run_id!r} of thread {section.thread_id!r} holds a "
                + ("RUN_STARTED, but is synthetic (named by the store for events that started "
                   "no run)" if self.batch_synthetic else
                   "second RUN_STARTED: a RUN_STARTED always opens a new run")
            )  # fmt: skip
        if first and not self.batch_synthetic and kind != "RUN_STARTED":
            raise InvalidArgumentError(
                f"{where}: run {self.batch_run_id!r} of thread {section.thread_id!r} begins "
                f"with {kind}, not RUN_STARTED"
            )

    def land(self) -> None:
        """Write what the section read that the store lacks."""
        section = self.section
        dst = self.dst
        if self._erased(section):
            # The conversations the erased thread links to go with it. Any other lands as
            # those at the end do: a whole store's archive ends with the conversations no
            # thread links to, which read as part of its last thread's section.
            assert section.thread_id is not None
            linked = set(conversations.linked(section, section.thread_id))
            section = _Section(section.where, entries=section.entries, records={
                cid: row for cid, row in section.records.items() if cid not in linked})
            self._erased(section)
        elif section.thread_id is not None:
            _verify(section)
            plan = replication.plan_thread(section, dst, section.thread_id, forceable=False)
            if plan.writes:
                writer = replication.Writer(section, dst, plan.events_to_copy, None)
                if writer.thread(plan):
                    self.underived = True
                self.result.threads += 1
                self.result.runs += len(plan.missing)
                self.result.events += writer.done
                self.result.branches += len(plan.branches)
        # The closing section also holds the conversations no thread links to: an error
        # names the thread of those the thread links to alone.
        thread_id = section.thread_id
        linked = set() if thread_id is None else set(conversations.linked(section, thread_id))
        for cid in section.records:
            row = section.conversation(cid)
            if row is not None and replication.leave_erased_conversation(
                dst, section, row, self.restore_erased, frozenset()  # an archive has no tombstones
            ):
                continue  # erased here: left out, as copy leaves it
            try:
                talk = replication.plan_conversation(
                    section, dst, cid, thread_id if cid in linked else None, False,
                    forceable=False,
                )
            except HashMismatchError as e:  # in the archive: named there, not in a store
                raise HashMismatchError(f"{section.where}: {e.what}", advice=_EDITED) from None
            self.result.conversations += replication.write_conversations(dst, [talk])


    def _erased(self, section: _Section) -> bool:
        """Whether the store erased the section's thread (a tombstone covers it,
        :func:`tombstones.covers`), which is then left out with the conversations that follow
        it, as ``copy`` leaves it (its tombstone is taken away to import it anew when
        restoring). A conversation of the closing section named by an erased thread's id
        is left out as well."""
        dst = self.dst
        if section.thread_id is None:
            # A conversation named by a thread erased here, and last saved before that
            # erasure, went with the thread (stores erasing before conversations had
            # tombstones of their own laid none for it).
            names = {tombstones.thread_hash(cid): cid for cid in section.records}
            stones = dst.tombstoned(sorted(names)) if names else {}
            gone = {
                stone
                for stone, at in stones.items()
                if (row := section.conversation(names[stone])) is not None
                and int(row.updated_at) // 1000 <= at
            }
            if not self.restore_erased:  # restored, the thread's tombstone stays
                for stone in gone:
                    del section.records[names[stone]]
            return False
        stone = tombstones.thread_hash(section.thread_id)
        at = dst.tombstoned([stone]).get(stone)
        # The thread record's time is not hashed; its runs' times are (a thread whose runs
        # an edit moved past the erasure fails its hashes when it lands).
        created = min([section.created_at, *(r.record.created_at for r in section.runs.values())])
        if at is None or not tombstones.covers(at, created):
            return False
        if self.restore_erased:
            replication.refuse_joining(dst, section.thread_id, at)
            dst.delete_tombstones([stone])
            return False
        self.result.left_erased += 1
        return True


def _refs_problem(text: str) -> str | None:
    """What keeps stored references (an input's, or a ``RUN_STARTED``'s echoed input's)
    from reading back, or ``None``."""
    try:
        refs = ingest.decode(text)
    except InvalidEventError as e:
        return f"not JSON a store reads: {e}"
    return normalize.refs_problem(refs)


def _readable_input(
    run_id: str, text: str | None, refs: str | None, parent: str | None, where: str
) -> None:
    """Refuse a run record whose input no read could give back: an input that is not a
    JSON object, references without an input, without a parent whose view they refer to,
    or not of the form the store writes (an input as stored, not as sent: its hash covers
    what the record says, not that a store could have written it)."""
    wrong = None
    if text is not None:
        try:
            if not isinstance(ingest.decode(text), dict):
                wrong = "its input is not a JSON object"
        except InvalidEventError as e:
            wrong = f"its input is not JSON a store reads: {e}"
    if wrong is None and refs is not None:
        if text is None:
            wrong = "its input references stand for no input"
        elif parent is None:
            wrong = "its input references refer to a parent's view, but it has no parent"
        elif (found := _refs_problem(refs)) is not None:
            wrong = f"its input references: {found}"
    if wrong is not None:
        raise InvalidArgumentError(f"{where}: run {run_id!r}: {wrong}")


def _stored_message(
    entry_id: str, parent_id: str | None, kind: str, message: str, where: str
) -> None:
    """Refuse a conversation entry a save could not have stored: an id, parent or kind no
    store can hold (an empty kind names none), or a message that is not a JSON object in
    the one text a save stores it as (keys sorted, no spaces), which every load reads
    back."""
    found = arguments.first_unstorable([("id", entry_id), ("parent", parent_id), ("kind", kind)])
    wrong = None if found is None else f"its {found[0]} {found[1]}"
    if wrong is None and not kind:
        wrong = "its kind is empty"
    if wrong is None:
        try:
            text = conversations.canonical(message, f"entry {entry_id!r}")
        except InvalidArgumentError as e:
            wrong = str(e).removeprefix(f"entry {entry_id!r}: ")
        else:
            if text != message.encode("utf-8", "surrogatepass") or text[:1] != b"{":
                wrong = "its message is not a JSON object as a save stores one (keys sorted)"
    if wrong is not None:
        raise InvalidArgumentError(f"{where}: conversation entry {entry_id!r}: {wrong}")


@functools.cache
def _model_messages() -> Any:
    """pydantic-ai's ``ModelMessagesTypeAdapter``, which every load of a conversation reads
    its messages with; ``None`` without pydantic-ai (a message is then held only to the JSON
    a save stores)."""
    try:
        from pydantic_ai.messages import ModelMessagesTypeAdapter
    except ImportError:
        return None
    return ModelMessagesTypeAdapter


def _unreadable_message(message: str) -> str | None:
    """Why pydantic-ai cannot read a stored message back, read as a load reads it
    (:mod:`agui_store.integrations.pydantic_ai`), on one line and cut; ``None`` when it can
    (or without pydantic-ai to ask)."""
    adapter = _model_messages()
    if adapter is None:
        return None
    try:
        if _SURROGATE_ESCAPE.search(message) is None:
            adapter.validate_json(f"[{message}]")
        else:  # half an emoji, which pydantic's JSON parser refuses and a str holds
            adapter.validate_python([json.decode(message)])
    except ValueError as e:  # pydantic's ValidationError: its first error, where it is
        found = e.errors() if hasattr(e, "errors") else []
        if not found:
            return " ".join(str(e).split())[:200]
        place = ".".join(str(step) for step in found[0]["loc"][1:])  # [0]: the list's item
        said = " ".join(str(found[0]["msg"]).split())
        said = said if len(said) <= 200 else said[:200] + "..."
        return f"{said}, at {place}" if place else said
    return None


def _stored_record(record: conversations.Record, where: str) -> None:
    """Refuse a conversation record a save could not have stored: ids, a scope or branches
    no store can hold (a NUL; the empty scope, which no erasure names), or fields that are
    not a JSON object, which every load reads."""
    try:
        conversations.refuse_unstorable(record, ())
        fields = ingest.decode(record.record)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{where}: {e}".removesuffix("; nothing was written")) from None
    except InvalidEventError as e:
        fields = e
    if not isinstance(fields, dict):
        raise InvalidArgumentError(
            f"{where}: conversation {record.conversation_id!r}: its fields are not a JSON object"
            + (f": {fields}" if isinstance(fields, InvalidEventError) else "")
        )


def _id(value: Any, what: str, where: str) -> str:
    """A thread's or run's id, refused where ``append`` refuses it: empty (no verb names
    it, nor erases it), or one no store can hold (:func:`arguments.unstorable`)."""
    found: str = _need(value, f"{what}_id", where)
    reason = "is empty" if not found else arguments.unstorable(found)
    if reason is not None:
        raise InvalidArgumentError(
            f"{where}: the {what} id {arguments.quote(found)} {reason}; append refuses such "
            "ids, so no store holds one"
        )
    return found


def _need(value: Any, name: str, where: str) -> Any:
    if value is None:
        raise InvalidArgumentError(f"{where}: the record has no {name}")
    return value


def import_lines(
    dst: port.Writing,
    lines: Iterable[bytes],
    *,
    where: str,
    progress: Callable[[int], None] | None = None,
    restore_erased: bool = False,
) -> tuple[ArchiveResult, bool]:
    """Import an archive's lines into ``dst`` (one write transaction): what it added, and
    whether it left runs to derive. ``progress(n)`` is called with each line's size. A
    thread ``dst`` erased is left out (counted in ``left_erased``), unless
    ``restore_erased``.

    Raises:
        InvalidArgumentError: a line that is not an archive record, or a cut archive.
        SchemaVersionError: an archive of a newer version.
        HashMismatchError: a record, input or event that is not the one its hash covers.
        SyncConflictError: as ``copy`` raises it.
    """
    reader = _Reader(dst, where, progress, restore_erased)
    reader.read(lines)
    return reader.result, reader.underived


__all__ = [
    "FORMAT",
    "RECORDS",
    "VERSION",
    "ArchiveResult",
    "export_lines",
    "first_line",
    "import_lines",
    "is_archive",
    "is_headless_archive",
]
