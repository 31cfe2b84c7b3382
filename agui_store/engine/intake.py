"""Reading what a caller hands ``append`` and ``import_file``, before any transaction: the
events validated one by one, the ``RunAgentInput`` (a body that resends its thread's history
read without it: :mod:`agui_store.history.resent_bodies`), and the ids and names they carry.

Nothing here reads the database; what it remembers between bodies (validated chunks, the
thread's last body) is the store's :class:`~agui_store.engine.cache.Memory`. Where the batch goes
is :mod:`agui_store.engine.placement`'s to decide.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from agui_store.codec import ingest
from agui_store.engine import arguments, checkpoints
from agui_store.engine.arguments import check_scope as check_scope  # copy imports it here
from agui_store.engine.arguments import quote as _quote
from agui_store.engine.cache import Memory
from agui_store.engine.revisions import NEWEST_NAMES
from agui_store.errors import ArgumentTypeError, BranchError, InvalidEventError
from agui_store.history import nesting, resent_bodies
from agui_store.history.lineage import HASH_MARK, hash_from_marks, hash_marks, lineage_ids
from agui_store.history.normalize import SentChunks, full_chunk_addresses
from agui_store.protocol import validate

_BRANCH_NAME = re.compile(r"[A-Za-z0-9._/@+-]{1,255}")  # fullmatch: no trailing newline
# git check-ref-format's rules on those characters: no component that starts with a dot or
# ends with ".lock", no "..", no empty component, no "." at the end ("@" alone is one of
# the names of the newest run, refused before).
_BRANCH_NAME_FORBIDDEN = re.compile(r"(?:^|/)\.|\.lock(?:/|$)|\.\.|//|^/|/$|\.$")


class Input(NamedTuple):
    """A run's input as appended."""

    data: dict[str, Any]  # decoded
    raw: bytes  # its JSON text as sent (UTF-8)
    chunks: SentChunks | None  # addresses of its message list's full chunks (_validate_input)
    # What reading it gave of its messages, when it remembered them (see _read_resent): their
    # lineage ids; the sha256 state of hash_ids over the first n of those, as (n, state);
    # how many leading messages have string ids, none repeated (normalize's shared prefix).
    ids: list[Any] | None = None
    hashed: tuple[int, Any] | None = None
    distinct: int = 0


class Batch(NamedTuple):
    """A batch read and checked before its write transaction: what
    :meth:`agui_store.engine.placement.Placement.place` places."""

    incoming: list[ingest.IncomingEvent]
    types: list[str]  # each event's type
    thread_id: str | None  # the thread it names, or None: placement finds it
    run_input: Input | None = None
    parent: str | None = None  # the explicit lineage parent of the run it opens
    branch: str | None = None  # the branch the run it opens goes on
    check_sequence: bool = True
    run_id: str | None = None  # the run a batch that starts none continues
    scope: str | None = None  # the owner writing


class Intake:
    """Reads a store's appends with its limits (``max_event_bytes``, ``max_depth``) and its
    memory of earlier bodies."""

    def __init__(self, memory: Memory, max_event_bytes: int, max_depth: int) -> None:
        self.memory = memory
        self.max_event_bytes = max_event_bytes
        self.max_depth = max_depth

    def read_batch(
        self,
        events: Any,
        *,
        thread_id: str | None = None,
        input: Any = None,
        parent: str | None = None,
        branch: str | None = None,
        check_sequence: bool = True,
        run_id: str | None = None,
        scope: str | None = None,
    ) -> Batch:
        """Read and check what ``Store.append`` is handed (its arguments), all that needs no
        database, so that a bad batch is refused before the write lock is taken."""
        incoming = ingest.parse_events(
            events, max_event_bytes=self.max_event_bytes, max_depth=self.max_depth
        )
        types = self.validated(incoming)
        if branch is not None:  # its own rules (ASCII, no control character) come first
            check_branch_name(branch)
        for name, value in (("thread_id", thread_id), ("parent", parent)):
            storable(value, path=name)
        if thread_id == "":
            raise InvalidEventError("is empty: name a thread or pass None", path="thread_id")
        if run_id is not None:
            if not isinstance(run_id, str) or not run_id:
                raise InvalidEventError(
                    f"must be a run id (a non-empty string), not {run_id!r}", path="run_id"
                )
            storable(run_id, path="run_id")
        # As an event's id is refused: the scope is stored beside the events it owns.
        storable(scope, path="scope")
        check_scope(scope)
        run_input = self.parse_input(input) if input is not None else None
        if run_input is not None:
            check_input_run_id(incoming, types, run_input[0])
        thread = thread_of_batch(incoming, types, thread_id, run_input)
        return Batch(
            incoming, types, thread, run_input, parent, branch, check_sequence, run_id, scope
        )

    def validated(self, incoming: list[ingest.IncomingEvent]) -> list[str]:
        """Validate a batch's events one by one (what needs no database); their types."""
        types = validate.validate_events([ev.data for ev in incoming])
        for i, (ev, kind) in enumerate(zip(incoming, types)):
            if kind == "RUN_STARTED":
                for name in ("threadId", "runId", "parentRunId"):
                    storable(ev.data.get(name), index=i, event_type=kind, path=f"$.{name}")
                _check_run_names(ev.data, i)
        nesting.refuse_deep_writes(
            [ev.data for ev in incoming], types, self.max_depth, [ev.raw for ev in incoming]
        )
        return types

    def parse_input(self, value: Any) -> Input:
        """A run's ``RunAgentInput`` (dict, JSON text or bytes) read and validated; a body that
        resends what an earlier body of its thread sent is read from where that one ended."""
        body = _text_bytes(value)
        found = None
        if body is not None and len(body) <= self.max_event_bytes and self.memory.resent.budget:
            found = resent_bodies.envelope(body)
            read = self._read_resent(found) if found is not None else None
            if read is not None:
                return read
        if body is not None and len(body) > self.max_event_bytes:
            raise InvalidEventError(
                f"the input is {len(body)} bytes of JSON, over the limit of "
                f"{self.max_event_bytes}"
            )
        try:
            parsed = ingest.parse_events(
                value if body is None else body,
                max_event_bytes=self.max_event_bytes,
                max_depth=self.max_depth,
            )
        except InvalidEventError as e:  # named as the input, not as the batch's event 0
            reason = e.reason
            if reason.startswith("event is "):
                reason = "the input is " + reason.removeprefix("event is ")
            else:  # as the input's own checks name it (its JSON path from "$")
                reason = f"RunAgentInput: {reason}"
            raise InvalidEventError(reason, path=e.path) from None
        if len(parsed) != 1:
            raise InvalidEventError("input must be one RunAgentInput object", path="input")
        data = parsed[0].data
        chunks = self._validate_input(data)
        ids, distinct = self._remember_body(found, data, chunks) if found else (None, 0)
        return Input(data, parsed[0].raw, chunks, ids, None, distinct)

    def _read_resent(self, found: resent_bodies.Envelope) -> Input | None:
        """A body whose messages array begins with messages of the thread's last body, byte
        for byte (HttpAgent resends its history), read as the body without them; ``None``
        when it shares none (it is then read whole).

        What the full read derives from a resent message is a function of its text and was
        derived when that text was read: that it decodes to this value, within
        ``max_depth`` (it is as deep in this body as in that one), that it is a valid
        message (each is validated on its own), the addresses of the full chunks of such
        messages, their lineage ids. The rest of the body is read and validated here as the
        full read would; whatever it refuses is left to the full read, which names it in
        the whole body, as if nothing had been remembered."""
        seen = self.memory.resent.get(found.thread)
        count = resent_bodies.shared(found, seen) if seen is not None else 0
        if seen is None or not count:
            return None
        rest, added_at = resent_bodies.without_shared(found, seen, count)
        try:
            parsed = ingest.parse_events(
                rest, max_event_bytes=self.max_event_bytes, max_depth=self.max_depth
            )
            if len(parsed) != 1:
                return None
            data = parsed[0].data
            added = data.get("messages")
            if type(added) is not list:
                return None
            validate.validate_input(data)  # the other members, and the messages after those
        except InvalidEventError:
            return None
        size = checkpoints.CHUNK
        messages = seen.messages[:count] + added
        start = count // size * size
        more = full_chunk_addresses(messages, size, start)
        if not more and len(messages) - start >= size:
            return None  # a message not encodable: the full read finds out why
        chunks = {key: address for key, address in seen.chunks.items() if sum(key) <= count}
        chunks.update(more)
        self.memory.note_valid(more.values())
        # The lineage ids of the messages repeated, and their digest state (rule 3 compares
        # the parent's digest with it instead of the ids one by one).
        whole = count == len(seen.messages)
        if len(seen.ids) == len(seen.messages):  # each message has its lineage id
            shared_ids = seen.ids if whole else seen.ids[:count]
        else:
            shared_ids = lineage_ids(seen.messages[:count])
        if seen.marks is None:  # derived when first needed (see resent.Seen)
            seen.marks = hash_marks(seen.ids)
        kept = seen.marks[: len(shared_ids) // HASH_MARK + 1]  # within those
        shared_hash = hash_from_marks(shared_ids, kept)
        ids = shared_ids + lineage_ids(added)
        places, distinct = resent_bodies.id_places(
            messages, count, seen.places_before(count), min(seen.id_index()[1], count)
        )
        added_ends = resent_bodies.element_ends(b"[" + found.messages[added_at:], added_at - 1)
        if added_ends is not None:
            remembered = resent_bodies.Seen(
                found.messages,
                messages,
                ids,
                chunks,
                ends=seen.message_ends()[:count] + added_ends,
                marks=hash_marks(ids, kept),
                places=places,
                distinct=distinct,
            )
            self.memory.resent.put(found.thread, remembered)
        data["messages"] = list(messages)  # the append's own list; the memo keeps its own
        hashed = (len(shared_ids), shared_hash)
        return Input(data, found.body, chunks or None, ids, hashed, distinct)

    def _remember_body(
        self, found: resent_bodies.Envelope, data: dict[str, Any], chunks: SentChunks | None
    ) -> tuple[list[Any] | None, int]:
        """Remember what a body read whole gave, for the next body of its thread (what only
        that body needs is derived when it comes: see resent.Seen); the lineage ids of its
        messages, computed for that, and 0 (how many lead with distinct string ids: not
        computed); ``(None, 0)`` when it is not remembered."""
        messages = data.get("messages")
        if type(messages) is not list or len(messages) < resent_bodies.MIN_MESSAGES or not chunks:
            return None, 0
        ids = lineage_ids(messages)
        seen = resent_bodies.Seen(found.messages, list(messages), ids, chunks)
        self.memory.resent.put(found.thread, seen)
        return ids, 0

    def _validate_input(self, data: Any) -> SentChunks | None:
        """:func:`validate.validate_input`, skipping the messages of the full chunks (the first
        ``CHUNK`` messages, the next ``CHUNK``...) already validated in an earlier input: a
        client that resends the history (HttpAgent) costs the validation of what it adds.
        Validity is a function of a message's JSON value, which a chunk's address (the
        sha256 of its canonical text) names. Returns those addresses, which normalizing
        the input compares with the parent's stored chunks instead of encoding them again.
        """
        sent = data.get("messages") if isinstance(data, dict) else None
        size = checkpoints.CHUNK
        chunks = (
            full_chunk_addresses(sent, size) if type(sent) is list and len(sent) >= size else {}
        )
        if not chunks:
            validate.validate_input(data)
            return None
        assert isinstance(sent, list)
        unknown = self.memory.unvalidated(chunks)
        if len(unknown) == len(chunks):
            validate.validate_input(data)
        else:
            # The input with only the messages still to check: each message is validated
            # on its own, so this passes exactly when the whole input does. A failure is
            # named by validating the whole input, as if nothing had been skipped.
            rest = [m for (start, count), _ in unknown for m in sent[start : start + count]]
            rest += sent[len(chunks) * size :]
            try:
                validate.validate_input({**data, "messages": rest})
            except InvalidEventError:
                validate.validate_input(data)
                raise
        self.memory.note_valid(address for _, address in unknown)
        return chunks


def thread_of_batch(
    incoming: list[ingest.IncomingEvent],
    types: list[str],
    thread_id: str | None,
    run_input: Input | None,
) -> str | None:
    """The one thread a batch writes to; events naming another thread are refused."""
    named = thread_id
    for i, (ev, kind) in enumerate(zip(incoming, types)):
        if kind != "RUN_STARTED":
            continue
        tid = ev.data["threadId"]
        if named is None:
            named = tid
        elif tid != named:
            raise InvalidEventError(
                f"names thread {tid!r} but the batch writes to thread {named!r}; "
                "append each thread's events separately",
                index=i,
                event_type=kind,
                path="$.threadId",
            )
    if run_input is not None:
        tid = run_input[0].get("threadId")
        if named is not None and tid is not None and tid != named:
            raise InvalidEventError(
                f"the input names thread {tid!r} but the events are for thread {named!r}",
                path="input.threadId",
            )
        named = named or tid
    return named


def import_batches(
    events: Iterator[ingest.IncomingEvent],
    thread_id: str | None,
    batch_events: int,
    batch_bytes: int,
) -> Iterator[tuple[int, list[ingest.IncomingEvent], str | None, str | None]]:
    """An import's appends: ``(index of the first event in the file, events, thread, run)``,
    ``run`` naming the run a batch cut from the middle of a run continues.

    A batch holds consecutive events of one thread, as the whole stretch would be appended
    before (a RUN_STARTED naming another thread starts a batch). A stretch is cut in front
    of a RUN_STARTED that follows a terminal event, once the batch is full: there a new
    append's sequence check starts where the stretch's would be (``verifyEvents`` forgets
    everything at a RUN_STARTED after a terminal). A run longer than four batches is cut
    anywhere: the next batch continues it by name, in its thread (other runs of the thread
    may be open). Events before the file's first RUN_STARTED go where ``append`` would put
    them.
    """
    batch: list[ingest.IncomingEvent] = []
    size = 0
    offset = 0
    thread = thread_id  # the thread of the run being read
    run: str | None = None  # its id, once a RUN_STARTED was read
    # Where the batch goes: the thread and run of its first event when that continues one.
    target: tuple[str | None, str | None] = (thread_id, None)
    previous: str | None = None
    for index, event in enumerate(events):
        kind = event.type
        if kind == "RUN_STARTED":
            named = event.data.get("threadId") if thread_id is None else thread_id
            full = len(batch) >= batch_events or size >= batch_bytes
            if batch and (named != thread or (full and previous in _TERMINALS)):
                yield offset, batch, *target
                batch, size, offset = [], 0, index
            thread = named if isinstance(named, str) else None
            run_id = event.data.get("runId")
            run = run_id if isinstance(run_id, str) else None
        elif len(batch) >= 4 * batch_events or size >= 4 * batch_bytes:
            yield offset, batch, *target
            batch, size, offset = [], 0, index
        if not batch:
            target = (thread_id, None) if kind == "RUN_STARTED" else (thread, run)
        batch.append(event)
        size += len(event.raw)
        previous = kind
    if batch:
        yield offset, batch, *target


_TERMINALS = frozenset({"RUN_FINISHED", "RUN_ERROR"})


def counted_from(error: InvalidEventError, offset: int) -> InvalidEventError:
    """A batch's error with the event's index counted from the start of the file."""
    if error.index is None or offset == 0:
        return error
    try:
        return type(error)(
            error.reason,
            index=error.index + offset,
            event_type=error.event_type,
            path=error.path,
        )
    except TypeError:  # a subclass with another constructor: its own message stands
        return error


def _text_bytes(value: Any) -> bytes | None:
    """A value given as JSON text, as the bytes :func:`codec.parse_events` reads; ``None``
    for anything else (and for text that is not valid Unicode: the parser says why)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return None


def storable(
    value: Any, *, path: str, index: int | None = None, event_type: str | None = None
) -> None:
    """Ids become text columns, which must be valid UTF-8: a lone surrogate (legal in JSON
    text as an escape) cannot be stored, so it is refused here, before any SQL. So is a NUL
    character, which PostgreSQL's text cannot hold: refused on every backend alike, so that
    a store's ids copy to any other."""
    if isinstance(value, str):
        reason = arguments.unstorable(value)
        if reason is not None:
            raise InvalidEventError(reason, index=index, event_type=event_type, path=path)


def check_branch_name(name: str) -> None:
    """A branch name is a revision, so it must read back as one, like git's
    check-ref-format: 1-255 ASCII letters, digits and ``. _ / @ + -`` (no whitespace,
    control characters or ``~``), not starting with ``-``, no component starting with ``.``
    or ending with ``.lock``, no ``..``, no empty component, not ending with ``.``, not
    ``@``, and neither ``HEAD`` nor ``main``. A name that is not text is an
    :class:`~agui_store.errors.ArgumentTypeError`; a bad one a :class:`BranchError`."""
    if not isinstance(name, str):  # a programming error (a TypeError), not a bad name
        raise ArgumentTypeError(
            f"a branch name is text, not {arguments.a_kind(name)} ({_quote(name)})"
        )
    if name in NEWEST_NAMES:  # "@" too: git reads it as HEAD
        raise BranchError(f"{name!r} is reserved (the default branch follows the newest run)")
    if (
        not _BRANCH_NAME.fullmatch(name)
        or name.startswith("-")
        or _BRANCH_NAME_FORBIDDEN.search(name)
    ):
        raise BranchError(
            f"invalid branch name {_quote(name)}: use "
            "1-255 ASCII letters, digits and . _ / @ + - (no spaces or control characters, no '~', "
            "not starting with '-', no '..', '//', component starting with '.' or ending "
            "with '.lock', no '/' or '.' at the end)"
        )


def _check_run_names(started: dict[str, Any], index: int) -> None:
    """A RUN_STARTED's ids must name something: not empty, and no run may be called like
    the refs every thread has (``HEAD``, ``main``)."""
    for name in ("threadId", "runId"):
        if started.get(name) == "":
            raise InvalidEventError(
                "is empty: a run needs a non-empty id",
                index=index,
                event_type="RUN_STARTED",
                path=f"$.{name}",
            )
    if started.get("runId") in NEWEST_NAMES:
        raise InvalidEventError(
            f"run id {started['runId']!r} is the name of a ref every thread has (HEAD, @ "
            "and main name its newest run): record the run under another id",
            index=index,
            event_type="RUN_STARTED",
            path="$.runId",
        )


def check_input_run_id(
    incoming: list[ingest.IncomingEvent], types: list[str], run_input: dict[str, Any]
) -> None:
    """An input belongs to the first run its batch starts: it must name that run, as it
    must name its thread."""
    sent = run_input.get("runId")
    for i, kind in enumerate(types):
        if kind == "RUN_STARTED":
            started = incoming[i].data.get("runId")
            if sent is not None and sent != started:
                raise InvalidEventError(
                    f"the input names run {sent!r} but the batch starts run {started!r}",
                    path="input.runId",
                )
            return
