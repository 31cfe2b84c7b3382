"""What the store hands back, and how each of it looks: JSON, text and HTML.

Plain frozen dataclasses, so that every backend (SQLite now; PostgreSQL and an async facade
later) returns the same things. Each record carries its three presentations here, beside its
fields, so that a field added to a record is added to what it shows in one place:

- ``to_json()``: the JSON-ready dict the CLI prints for ``--json`` (the command line's
  machine-readable contract: ``runs``, ``log``, ``show``, ``branches``, ``diff``, ``check``,
  ``analyze``);
- ``str()``: readable text for a terminal (a transcript, a run list, a unified diff);
- ``_repr_html_()``: a compact table for Jupyter.

A leaf module: it imports nothing else of agui_store, so every layer may use it (a test in
``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

import html
import json
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

#: How a run ended. ``incomplete``: no RUN_FINISHED/RUN_ERROR was recorded (yet).
RUN_STATUSES = ("finished", "interrupted", "cancelled", "error", "incomplete")

#: The status a RUN_FINISHED gives, by the type of its ``outcome`` (none: ``success``).
_OUTCOME_STATUS = {"success": "finished", "interrupt": "interrupted", "cancelled": "cancelled"}

#: The statuses a RUN_FINISHED's outcome gives (:func:`status_of_terminal`).
OUTCOME_STATUSES = frozenset(_OUTCOME_STATUS.values())


def status_of_terminal(event: dict[str, Any]) -> str:
    """The status a terminal event gives its run: ``error`` for RUN_ERROR, else what the
    RUN_FINISHED's outcome says (``finished`` without one, or for a type it does not know).
    The one place the rule is written: appends and ``check()`` both ask it."""
    if event["type"] == "RUN_ERROR":
        return "error"
    outcome = event.get("outcome")
    kind = outcome.get("type") if isinstance(outcome, dict) else None
    return _OUTCOME_STATUS.get(kind or "success", "finished")

#: Why a run has the lineage parent it has (docs/design/lineage.md, first match wins).
LINEAGE_REASONS = ("explicit", "parentRunId", "messages", "head", "root")


def when(ms: int | None) -> datetime | None:
    """Milliseconds since the epoch as an aware UTC datetime."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


# --- runs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One run of a thread: its place in the lineage tree and a summary of its events.

    Attributes:
        thread_id: the thread the run belongs to.
        run_id: the run's id (``RUN_STARTED.runId``).
        parent_run_id: the lineage parent the store decided on (``None`` for a root).
        lineage: why that parent: ``explicit``, ``parentRunId``, ``messages``, ``head`` or
            ``root`` (no parent).
        status: ``finished``, ``interrupted``, ``cancelled``, ``error`` or ``incomplete``.
        event_count: number of events recorded for the run.
        created_at / updated_at: when the run was first recorded / last appended to (UTC).
        sent_parent_run_id: ``parentRunId`` as the client or producer sent it, kept as data
            even when it names a run of another thread.
        has_input: whether the RunAgentInput the client sent was recorded.
        synthetic: the store made up the run id (a stream that began with RUN_ERROR).
        branches: names of the branches that point at this run.
        last_seq: the global sequence number of its newest event.
        hash: the run's content hash (hex sha256), git style: it covers the run's record,
            its input, its parent's hash and every event, in order (see
            :mod:`agui_store.history.hashing`). Final once the run is complete; while it is live it
            is the hash of what has been recorded so far. ``short_hash`` is its first 12
            digits, as ``log`` and ``show`` print it.
    """

    thread_id: str
    run_id: str
    parent_run_id: str | None
    lineage: str
    status: str
    event_count: int
    created_at: datetime
    updated_at: datetime | None
    sent_parent_run_id: str | None = None
    has_input: bool = False
    synthetic: bool = False
    branches: tuple[str, ...] = ()
    last_seq: int | None = None
    hash: str | None = None

    @property
    def is_complete(self) -> bool:
        """Whether the run has ended (finished, interrupted or failed)."""
        return self.status != "incomplete"

    @property
    def short_hash(self) -> str | None:
        """The first 12 hex digits of the run's hash, as logs show it."""
        return self.hash[:12] if self.hash is not None else None

    def to_json(self) -> dict[str, Any]:
        """The run as ``runs --json`` and ``log --json`` print it (camelCase, as AG-UI
        spells its fields; times in ISO 8601). ``synthetic`` and ``last_seq`` are not part
        of it."""
        return {
            "threadId": self.thread_id,
            "runId": self.run_id,
            "parentRunId": self.parent_run_id,
            "lineage": self.lineage,
            "status": self.status,
            "eventCount": self.event_count,
            "createdAt": self.created_at.isoformat(),
            "updatedAt": self.updated_at.isoformat() if self.updated_at else None,
            "sentParentRunId": self.sent_parent_run_id,
            "hasInput": self.has_input,
            "branches": list(self.branches),
            "hash": self.hash,
            "shortHash": self.short_hash,
        }


class Log(list[Run]):
    """Runs newest first (what ``Store.log`` returns): a plain list that also reads well in
    a terminal (``str``) and as a table in a notebook.

    Attributes:
        next_cursor: when the log was asked for a page (``limit=``) and the lineage goes on
            below it: the id of the run the next page starts with, to pass back as
            ``cursor=``. ``None`` when the page ends at the lineage's root.
    """

    def __init__(self, runs: Iterable[Run] = (), *, next_cursor: str | None = None) -> None:
        super().__init__(runs)
        self.next_cursor = next_cursor

    def to_json(self) -> list[dict[str, Any]]:
        """The runs as JSON objects, newest first."""
        return [run.to_json() for run in self]

    def __str__(self) -> str:
        return runs_text(self)

    def _repr_html_(self) -> str:
        return runs_html(self)


@dataclass(frozen=True)
class Checkout:
    """A run restored: what the official client holds after it.

    Attributes:
        run: the run restored.
        messages: AG-UI message dicts, in the client's order.
        state: the agent state (any JSON value).
        interrupts: pending interrupts (``RUN_FINISHED.outcome.interrupts``), else ``[]``.
        warnings: what the reducer warned about on the way (failed patches, unknown ids),
            exactly where the official client warns.
    """

    run: Run
    messages: list[dict[str, Any]]
    state: Any
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What ``show --json`` prints: the run, its messages, state and pending
        interrupts (the reducer's warnings are not part of it)."""
        return {
            "run": self.run.to_json(),
            "messages": self.messages,
            "state": self.state,
            "interrupts": self.interrupts,
        }

    def __str__(self) -> str:
        return transcript(self)

    def _repr_html_(self) -> str:
        return checkout_html(self)


@dataclass(frozen=True)
class AppendResult:
    """The receipt of one ``append`` call.

    Attributes:
        thread_id: the thread the events went to.
        run_ids: the runs the batch touched, in order (new and continued).
        new_run_ids: the runs the batch started.
        event_count: how many events were stored.
        first_seq / last_seq: the global sequence numbers given to the batch.
    """

    thread_id: str
    run_ids: tuple[str, ...]
    new_run_ids: tuple[str, ...]
    event_count: int
    first_seq: int | None
    last_seq: int | None


@dataclass(frozen=True)
class ImportResult:
    """The receipt of ``Store.import_file``: what one file added, in one transaction.

    Attributes:
        event_count: how many events were stored.
        new_run_count: how many runs the file started.
        first_seq / last_seq: the global sequence numbers given to its events.
    """

    event_count: int
    new_run_count: int
    first_seq: int | None
    last_seq: int | None


@dataclass(frozen=True)
class Thread:
    """A thread's own facts (what ``Store.thread`` returns).

    Attributes:
        thread_id: the thread's id.
        owner: the scope that first wrote it (``None``: written by the operator).
        created_at: when its first run was recorded (UTC).
        run_count: how many runs it holds.
        updated_at: when it was last written to (UTC): its newest batch, which may be of
            any run (one still recording, begun before others); the order of
            ``Store.threads(recent_first=True)``.
        latest_run_id: the run that write went to.
        open_runs: how many of its runs have no end recorded (still recording, or left
            incomplete).
    """

    thread_id: str
    owner: str | None
    created_at: datetime | None
    run_count: int
    updated_at: datetime | None = None
    latest_run_id: str | None = None
    open_runs: int = 0

    def to_json(self) -> dict[str, Any]:
        """The thread as JSON: camelCase, the time in ISO 8601."""
        return {
            "threadId": self.thread_id,
            "owner": self.owner,
            "createdAt": self.created_at.isoformat() if self.created_at else None,
            "runCount": self.run_count,
            "updatedAt": self.updated_at.isoformat() if self.updated_at else None,
            "latestRunId": self.latest_run_id,
            "openRuns": self.open_runs,
        }


@dataclass(frozen=True)
class SearchHit:
    """One message a search found (what ``Store.search`` returns, newest first).

    Attributes:
        thread_id: the thread holding it.
        run_id: the run that first recorded the message with this text.
        message_id: the message's id.
        role: its role (``user``, ``assistant``, ``tool``, ``reasoning``, ...).
        tool_name: for a tool call, the tool's name; for a tool result, the name of the
            call it answers; else ``None``.
        snippet: a short piece of its text around the first match, as ``(text, matched)``
            pieces: ``matched`` marks each word the query found.
        recorded_at: when that run's last batch was recorded (UTC).
        cursor: what ``Store.search(..., cursor=cursor)`` continues after.
        position: where the message is in that run's view:
            ``store.checkout(hit.run_id, thread_id=hit.thread_id).messages[hit.position]``
            (two messages of a view may share an id: a tool result whose producer gave it
            its call's id).
    """

    thread_id: str
    run_id: str
    message_id: str
    role: str
    tool_name: str | None
    snippet: tuple[tuple[str, bool], ...]
    recorded_at: datetime | None
    cursor: str
    position: int = 0

    def marked(self, before: str = "[", after: str = "]") -> str:
        """The snippet as one line, each matched word between ``before`` and ``after``."""
        return "".join(f"{before}{t}{after}" if m else t for t, m in self.snippet)

    def to_json(self) -> dict[str, Any]:
        """The hit as JSON: camelCase, the time in ISO 8601, the snippet marked with
        ``[`` and ``]`` and as its pieces."""
        return {
            "threadId": self.thread_id,
            "runId": self.run_id,
            "messageId": self.message_id,
            "role": self.role,
            "toolName": self.tool_name,
            "snippet": self.marked(),
            "snippetParts": [[t, m] for t, m in self.snippet],
            "recordedAt": self.recorded_at.isoformat() if self.recorded_at else None,
            "cursor": self.cursor,
            "position": self.position,
        }

    def __str__(self) -> str:
        return self.line()

    def line(self, before: str = "[", after: str = "]") -> str:
        """The hit on one line: thread, run, role (with the tool's name) and the snippet
        marked (:meth:`marked`); control characters in them as escapes (:func:`one_line`)."""
        role = self.role if self.tool_name is None else f"{self.role}:{self.tool_name}"
        marked = "".join(
            f"{before}{one_line(t)}{after}" if m else one_line(t) for t, m in self.snippet
        )
        return "  ".join([one_line(self.thread_id), one_line(self.run_id), one_line(role), marked])


class SearchHits(list[SearchHit]):
    """Hits newest first (what ``Store.search`` returns): a plain list that also reads well
    in a terminal, one hit a line.

    Attributes:
        next_cursor: when more hits follow this page: what to pass back as ``cursor=``
            for the next page. ``None``: there are no more.
    """

    def __init__(self, hits: Iterable[SearchHit] = (), *, next_cursor: str | None = None) -> None:
        super().__init__(hits)
        self.next_cursor = next_cursor

    def to_json(self) -> list[dict[str, Any]]:
        """The hits as JSON objects, newest first."""
        return [hit.to_json() for hit in self]

    def __str__(self) -> str:
        return "\n".join(str(hit) for hit in self)


@dataclass(frozen=True)
class Branch:
    """A named ref to a run. ``default`` marks the thread's implicit branch, which follows
    its newest run and cannot be moved or deleted."""

    thread_id: str
    name: str
    run_id: str
    default: bool = False
    updated_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``branches THREAD --json`` prints for each branch (the thread is the one
        the command named)."""
        return {"name": self.name, "runId": self.run_id, "default": self.default}


# --- diffs ----------------------------------------------------------------------------------

ChangeKind = Literal["added", "removed", "modified"]


@dataclass(frozen=True)
class MessageChange:
    """One message that differs, keyed by its id; ``kind`` is ``added``, ``removed`` or
    ``modified``, and ``before``/``after`` are ``None`` where the message does not exist on
    that side."""

    id: Any
    kind: ChangeKind
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        """The change as a JSON object."""
        return {"id": self.id, "kind": self.kind, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class ViewChange:
    """What changed from one view to another: the messages that differ (in the new view's
    order, removals last), and ``state_patch``, the JSON Patch (RFC 6902) that turns the one
    state into the other."""

    messages: list[MessageChange] = field(default_factory=list)
    state_patch: list[dict[str, Any]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether nothing changed."""
        return not self.messages and not self.state_patch

    def counts(self) -> dict[str, int]:
        """How many messages were added, removed and modified."""
        out = {"added": 0, "removed": 0, "modified": 0}
        for change in self.messages:
            out[change.kind] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        """The change as a JSON object: messages and state patch."""
        return {
            "messages": [m.to_json() for m in self.messages],
            "statePatch": self.state_patch,
        }


@dataclass(frozen=True)
class Diff:
    """Two runs compared.

    Attributes:
        a, b: the runs compared.
        mode: ``"three-dot"`` (each side since the merge base, git and Dolt style) or
            ``"two-dot"`` (the two views directly).
        merge_base: their nearest common lineage ancestor (``None`` if they share none).
        a_runs, b_runs: the runs on each side since the merge base, newest first.
        changes: three-dot: merge base -> b; two-dot: a -> b.
        a_changes: three-dot only: merge base -> a (the other side).
    """

    a: Run
    b: Run
    mode: str
    merge_base: Run | None
    a_runs: list[Run]
    b_runs: list[Run]
    changes: ViewChange
    a_changes: ViewChange | None = None

    @property
    def messages(self) -> list[MessageChange]:
        """The message changes the comparison found."""
        return self.changes.messages

    @property
    def state_patch(self) -> list[dict[str, Any]]:
        """The state change as a JSON Patch."""
        return self.changes.state_patch

    def to_json(self) -> dict[str, Any]:
        """What ``diff --json`` prints: runs by id, each side's changes."""
        return {
            "a": self.a.run_id,
            "b": self.b.run_id,
            "aThreadId": self.a.thread_id,
            "bThreadId": self.b.thread_id,
            "mode": self.mode,
            "mergeBase": self.merge_base.run_id if self.merge_base else None,
            "aRuns": [r.run_id for r in self.a_runs],
            "bRuns": [r.run_id for r in self.b_runs],
            "changes": self.changes.to_json(),
            "aChanges": self.a_changes.to_json() if self.a_changes is not None else None,
        }

    def __str__(self) -> str:
        return printable("\n".join(diff_lines(self)))

    def _repr_html_(self) -> str:
        return diff_html(self)


# --- reports --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One broken invariant: which check, and what exactly is wrong where."""

    check: str
    detail: str

    def __str__(self) -> str:
        return f"{self.check}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        """The problem as a JSON object."""
        return {"check": self.check, "detail": self.detail}


@dataclass(frozen=True)
class ErasureReceipt:
    """What an erasure verb (``Store.delete_thread``, ``delete_owner``, ``prune``) erased,
    or with ``dry_run=True`` would erase.

    Attributes:
        threads / runs / events / conversations: how many of each went (conversations:
            the pydantic-ai conversations linked to the threads, or the owner's).
        bytes: the content that went: event payloads, recorded inputs, derived blobs no
            kept thread shares, conversation records and the entries of their histories no
            kept conversation reaches (a fork's shared history stays, and is not counted).
        purged: whether the physical purge finished: on SQLite the WAL was copied into the
            file (whose deleted cells ``secure_delete`` zeroed) and emptied; on PostgreSQL
            the touched tables were vacuumed (``True`` when nothing was erased: there is
            nothing to purge). ``False`` on a dry run, or when it could not finish
            (``purge_pending`` says why).
        dry_run: nothing was erased; the counts are what would have been.
        purge_pending: when the purge did not finish, why, and what finishes it (the
            backend's words: a reader on an older snapshot on SQLite; on PostgreSQL a role
            that does not own the tables, which leaves the vacuum to autovacuum).
    """

    threads: int
    runs: int
    events: int
    conversations: int
    bytes: int
    purged: bool
    dry_run: bool = False
    purge_pending: str = ""

    def to_json(self) -> dict[str, Any]:
        """What ``delete --json`` and ``prune --json`` print."""
        return {
            "threads": self.threads,
            "runs": self.runs,
            "events": self.events,
            "conversations": self.conversations,
            "bytes": self.bytes,
            "purged": self.purged,
            "dryRun": self.dry_run,
            "purgePending": self.purge_pending,
        }

    def __str__(self) -> str:
        verb = "would erase" if self.dry_run else "erased"
        text = (
            f"{verb} {self.threads} thread(s), {self.runs} run(s), {self.events} event(s), "
            f"{self.conversations} conversation(s), {self.bytes} bytes"
        )
        if not self.dry_run and (self.threads or self.conversations):
            text += (
                "; purge finished"
                if self.purged
                else "; purge not finished ("
                + (self.purge_pending or "purge again: Store.purge(), or 'agui-store purge'")
                + ")"
            )
        return text


@dataclass(frozen=True)
class LoggedErasure:
    """One entry of a store's erasure log, as ``check()`` reports it: no content, no
    thread id.

    Attributes:
        number: its place in the log (1 upwards, gaps where entries were deleted).
        erased_at: when.
        verb: ``delete_thread``, ``delete_owner``, ``prune`` or ``copy`` (an erasure a
            ``copy`` carried from the store that made it).
        threads / runs / events / conversations / bytes: how much went.
        hash: the entry's hash (it covers the entry before it).
    """

    number: int
    erased_at: datetime | None
    verb: str
    threads: int
    runs: int
    events: int
    conversations: int
    bytes: int
    hash: str

    def to_json(self) -> dict[str, Any]:
        """The entry as ``check --json`` lists it."""
        return {
            "number": self.number,
            "erased_at": None if self.erased_at is None else self.erased_at.isoformat(),
            "verb": self.verb,
            "threads": self.threads,
            "runs": self.runs,
            "events": self.events,
            "conversations": self.conversations,
            "bytes": self.bytes,
            "hash": self.hash,
        }


@dataclass(frozen=True)
class CheckReport:
    """What ``Store.check()`` found. Truthy when the store is sound.

    Attributes:
        problems: broken invariants; any one makes the report falsy.
        checked: the checks that ran, in order: the backend's own (SQLite: ``sqlite``,
            ``foreign_keys``, ``schema``; PostgreSQL: ``foreign_keys``, ``pages``,
            ``schema``), then the store's (``agui_store.engine.integrity.CHECKS``).
        warnings: things that are legal but worth knowing (events recorded after a run's end
            with ``check_sequence=False``); they do not make the report falsy.
        erasures: the store's erasure log (what the erasure verbs took out, never damage).
        head: the log's head: its newest sequence number, the hash of the batch ending
            there and of the newest erasure. Deleting the newest writes leaves no hole to
            find from inside the store; keep the head elsewhere and compare.
    """

    problems: list[Problem] = field(default_factory=list)
    checked: tuple[str, ...] = ()
    warnings: list[Problem] = field(default_factory=list)
    erasures: list[LoggedErasure] = field(default_factory=list)
    head: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the check found no problem."""
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def to_json(self) -> dict[str, Any]:
        """What ``check --json`` prints."""
        return {
            "ok": self.ok,
            "checked": list(self.checked),
            "problems": [p.to_json() for p in self.problems],
            "warnings": [w.to_json() for w in self.warnings],
            "erasures": [e.to_json() for e in self.erasures],
            "head": self.head,
        }


@dataclass(frozen=True)
class ExportSummary:
    """What ``agui_store.exports.analysis.export_sqlite`` wrote.

    Attributes:
        path: the analysis database.
        threads / runs: how many of each were exported.
        messages: distinct message versions (rows of ``messages``).
        view_rows: (run, position) rows of ``view_messages``: the sum of all views' lengths.
        tool_calls: rows of ``tool_calls``.
    """

    path: str
    threads: int
    runs: int
    messages: int
    view_rows: int
    tool_calls: int

    def to_json(self) -> dict[str, Any]:
        """What ``analyze --json`` (and ``export --sqlite --json``) prints."""
        return {
            "path": self.path,
            "threads": self.threads,
            "runs": self.runs,
            "messages": self.messages,
            "viewRows": self.view_rows,
            "toolCalls": self.tool_calls,
        }


# --- text for people ------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """Text any UTF-8 writer accepts: what the store reads back may hold lone surrogates
    (JSON's ``"\\ud83d"``, which JavaScript producers emit when they split an emoji), and
    those cannot be encoded. A high and low surrogate side by side join into the character
    they spell together (as JavaScript reads them); any other surrogate is written as its
    JSON escape ``\\udXXX``, which keeps JSON output valid JSON that decodes to the same text.
    """
    try:
        text.encode("utf-8")  # C speed; a regex search costs as much as a transcript
        return text
    except UnicodeEncodeError:
        pass
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", joined)


#: Control characters a terminal acts on instead of showing: C0 but tab and newline, DEL,
#: C1; and the bidirectional embeddings, overrides and isolates, which reorder what
#: follows them ("approved \u202edesufer" reads "approved refused").
_TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: The same, with tab and newline, and the Unicode line and paragraph separators: what
#: breaks a line of its own.
_LINE_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _ESCAPES.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def on_terminal(text: str) -> str:
    """``text`` as a terminal should be given it: a control character stored text holds
    (an escape sequence, a bell, a carriage return) as its escape (``\\x1b``, ``\\r``), so
    that what was recorded cannot colour the terminal, move its cursor, clear its screen
    or retitle its window."""
    return _TERMINAL_CONTROL.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` with every control character as its escape, newlines and tabs too: a field
    of a line that must stay one line (a search hit's ids)."""
    return _LINE_CONTROL.sub(_escape, text)


def pasted_option(option: str, value: str) -> list[str]:
    """An option with its value, as a command to paste gives them: ``--thread=-t`` for a
    value that begins with ``-``, which argparse would take for an option of its own."""
    return [f"{option}={value}"] if value.startswith("-") else [option, value]


def with_positional(command: list[str], value: str, options: list[str]) -> list[str]:
    """A command to paste with its positional argument ``value`` and its ``options``: the
    argument first, or last after ``--`` if it begins with ``-`` (argparse would take it
    for an option)."""
    if value.startswith("-"):
        return [*command, *options, "--", value]
    return [*command, value, *options]


def shell_command(words: Iterable[str], encoding: str = "utf-8") -> str:
    """``words`` as one line to paste into a shell, each word quoted (``shlex.quote``), and a
    word that holds what :func:`one_line` escapes, or a character ``encoding`` (the stream's
    the line is written to) cannot hold, written in ANSI-C quotes (``$'a\\nb'``,
    ``$'\\u6771'``, which bash, zsh and ksh read back as the word itself): a line that shows
    such characters as escapes inside plain quotes would hand the shell the backslashes."""
    return " ".join(_shell_word(printable(word), encoding) for word in words)


def _shell_word(word: str, encoding: str) -> str:
    if _LINE_CONTROL.search(word) is None and _holds(encoding, word):
        return shlex.quote(word)
    escaped = _IN_ANSI_C_QUOTES.sub(_ansi_c_escape, word)
    if not _holds(encoding, escaped):
        escaped = "".join(c if _holds(encoding, c) else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                          else f"\\U{ord(c):08x}" for c in escaped)
    return "$'" + escaped + "'"


def _holds(encoding: str, text: str) -> bool:
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


#: What ANSI-C quotes must escape: the backslash and the quote, and what :func:`one_line`
#: escapes (a lone surrogate is written ``\\udXXX`` by :func:`printable` before).
_IN_ANSI_C_QUOTES = re.compile(r"[\\']|" + _LINE_CONTROL.pattern)


def _ansi_c_escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in "\\'":
        return "\\" + char
    # \xHH writes a byte: past ASCII, \uHHHH writes the character, in UTF-8
    return _ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 run``, ``3 runs``, ``1 branch``, ``2 branches`` (``plural`` where ``s`` is not it)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def content_text(content: Any, separator: str = " ") -> str:
    """A message's content as plain text: a string as is, the parts of multimodal content
    joined by ``separator`` (text parts as their text, other parts, such as images or audio,
    as ``[type]``), anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type')}]")
            else:
                parts.append(json.dumps(part, ensure_ascii=False))
        return separator.join(parts)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)


def first_words(messages: Sequence[dict[str, Any]]) -> str:
    """What a conversation is about, as a listing of threads shows it: the text of the
    first user message of a view (``""``: it holds none)."""
    return next(
        (content_text(m.get("content")) for m in messages if m.get("role") == "user"), ""
    )


def message_line(m: dict[str, Any]) -> str:
    """One message as one readable line."""
    role = m.get("role", "?")
    if role == "assistant" and m.get("toolCalls"):
        calls = ", ".join(
            f"{c.get('function', {}).get('name')}({c.get('function', {}).get('arguments', '')})"
            for c in m["toolCalls"]
            if isinstance(c, dict)
        )
        text = content_text(m.get("content"))
        return f"assistant: {text + ' ' if text else ''}-> {calls}"
    if role == "tool":
        return f"tool[{m.get('toolCallId')}]: {content_text(m.get('content'))}"
    if role == "activity":
        return (
            f"activity[{m.get('activityType')}]: {json.dumps(m.get('content'), ensure_ascii=False)}"
        )
    return f"{role}: {content_text(m.get('content'))}"


def hash_label(run: Run) -> str:
    """The run's short hash as ``log`` and ``show`` print it, as git shows a commit's,
    with ``+`` after it while the run is live (the hash of what was recorded so far); ``""``
    for a run without a hash."""
    if run.short_hash is None:
        return ""
    return f"{run.short_hash}{'' if run.is_complete else '+'}"


@dataclass(frozen=True)
class RunError:
    """Why a run failed, as its ``RUN_ERROR`` says: its ``message`` and its ``code``
    (``None``: it sent none)."""

    message: str
    code: str | None


def run_error(run: Run, events: Sequence[dict[str, Any]]) -> RunError | None:
    """The error a failed run ended with, read from its events (the run's record keeps no
    message): its last terminal event, when that is a ``RUN_ERROR`` (a late one after
    ``RUN_FINISHED`` counts, as the run's status does). A message or code sent as another
    JSON value than a string is given as its JSON text."""
    if run.status != "error":
        return None
    for event in reversed(events):
        kind = event.get("type")
        if kind == "RUN_ERROR":
            code = event.get("code")
            return RunError(
                _field_text(event.get("message", "")),
                None if code is None else _field_text(code),
            )
        if kind == "RUN_FINISHED":
            return None
    return None


def _field_text(value: Any) -> str:
    """A field a producer should send as a string, as text whatever it sent."""
    return printable(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def transcript(co: Checkout, error: RunError | None = None) -> str:
    """A restored run as a readable transcript, then its state; with the ``error`` a failed
    run ended with (:func:`run_error`) under its first line. The first line names the run,
    its ids on it whole (:func:`one_line`), as ``log`` writes them; the error is one line
    too."""
    run = co.run
    label = hash_label(run)
    tag = f" [{label}]" if label else ""
    lines = [one_line(f"run {run.run_id}{tag} (thread {run.thread_id}) - {run.status}")]
    if error is not None:
        code = "" if error.code is None else f" (code {error.code})"
        lines.append(one_line(f"error: {error.message or '(no message)'}{code}"))
    lines.append("")
    lines += [message_line(m) for m in co.messages]
    if co.interrupts:
        lines += ["", "pending interrupts:"]
        lines += [
            f"  {i.get('id')}: {i.get('reason')} {i.get('message', '')}".rstrip()
            for i in co.interrupts
        ]
    lines += ["", "state:", json.dumps(co.state, indent=2, ensure_ascii=False)]
    return printable("\n".join(lines))


def run_line(run: Run) -> str:
    """One run as one line; its first word is the run id, which scripts read. A control
    character of an id or a branch name (a newline) is written as its escape
    (:func:`one_line`), so that the line stays one."""
    refs = f" ({', '.join(run.branches)})" if run.branches else ""
    parent = f" <- {run.parent_run_id} [{run.lineage}]" if run.parent_run_id else " [root]"
    label = hash_label(run)
    return one_line(
        f"{run.run_id}{refs}  {run.status}  {counted(run.event_count, 'event')}{parent}"
        f"{'  ' + label if label else ''}"
    )


def runs_text(runs: Sequence[Run]) -> str:
    """Runs as text, one line each."""
    return printable("\n".join(run_line(r) for r in runs))


def diff_lines(d: Diff, *, stat: bool = False) -> list[str]:
    """A unified view, line by line: both sides since the merge base (three-dot) or A
    against B. The first character of each line says what it is (``@`` a heading, ``+``
    added, ``-`` removed, ``~`` a state operation), which a terminal may colour. An id or a
    state path is one field of its line: its control characters are written as escapes
    (:func:`one_line`), so that no line of the diff comes from what a producer named."""
    a, b = one_line(d.a.run_id), one_line(d.b.run_id)
    base = one_line(d.merge_base.run_id) if d.merge_base else "nothing"
    dots = "..." if d.mode == "three-dot" else ".."
    lines = [f"@ diff {a}{dots}{b} (merge base: {base})"]
    if d.a.thread_id != d.b.thread_id:  # run ids are a thread's: each side's is named
        lines.append(f"  runs of two threads: {a} of thread {one_line(d.a.thread_id)}, "
                     f"{b} of thread {one_line(d.b.thread_id)}")
    if d.a.run_id == d.b.run_id and d.a.thread_id == d.b.thread_id:
        return [*lines, "  the same run: no change"]
    for side, runs in ((a, d.a_runs), (b, d.b_runs)):
        only = ", ".join(one_line(r.run_id) for r in runs) or "-"
        lines.append(f"  runs only on {side}'s side: {only}")
    sides: list[tuple[str, ViewChange]] = []
    if d.mode == "three-dot":
        assert d.a_changes is not None
        sides = [(f"{base} -> {a}", d.a_changes), (f"{base} -> {b}", d.changes)]
        # A side that is the merge base itself changed nothing: no section for it.
        sides = [side for side, runs in zip(sides, (d.a_runs, d.b_runs)) if runs]
    else:
        sides = [(f"{a} -> {b}", d.changes)]
    for title, change in sides:
        if stat:
            c = change.counts()
            lines.append(
                f"  {title}: +{c['added']} -{c['removed']} ~{c['modified']} messages, "
                f"{counted(len(change.state_patch), 'state op')}"
            )
        else:
            lines.append(f"@ {title}")
            lines += _change_lines(change)
    return lines


def _change_lines(change: ViewChange) -> list[str]:
    out: list[str] = []
    # What went before what came, as a unified diff shows it: removals, then changes, then
    # additions (each group in the view's order).
    order = {"removed": 0, "modified": 1, "added": 2}
    for m in sorted(change.messages, key=lambda m: order.get(m.kind, 1)):
        out += _message_change_lines(m)
    for op in change.state_patch:
        value = f" {json.dumps(op['value'], ensure_ascii=False)}" if "value" in op else ""
        source = f" from {one_line(op['from'])}" if "from" in op else ""
        # "" is the whole state; "/" is its key "" (a JSON Pointer, as the patch has it).
        path = one_line(op["path"]) or "(the whole state)"
        out.append(f"~ state {op['op']} {path}{source}{value}")
    return out or ["  (no change)"]


def _message_change_lines(m: MessageChange) -> list[str]:
    if m.kind == "added":
        assert m.after is not None
        return _marked("+", m.id, m.after)
    if m.kind == "removed":
        assert m.before is not None
        return _marked("-", m.id, m.before)
    assert m.before is not None and m.after is not None
    return [*_marked("-", m.id, m.before), *_marked("+", m.id, m.after)]


def _marked(mark: str, message_id: str, message: dict[str, Any]) -> list[str]:
    """A message's lines, each with the mark, as a unified diff marks every line: a line of
    its text never reads as a line of the diff's own."""
    first, *rest = message_line(message).split("\n")
    return [f"{mark} [{one_line(message_id)}] {first}", *(f"{mark} {line}" for line in rest)]


# --- HTML for notebooks ---------------------------------------------------------------------


def _cell(text: str, width: int = 120) -> str:
    return html.escape(short(text, width))


def checkout_html(co: Checkout) -> str:
    """A checkout as an HTML table, for notebooks."""
    rows = "".join(
        f"<tr><td>{_cell(str(m.get('role', '')))}</td><td><code>{_cell(str(m.get('id', '')), 24)}"
        f"</code></td><td>{_cell(message_line(m).split(': ', 1)[-1])}</td></tr>"
        for m in co.messages
    )
    state = html.escape(short(json.dumps(co.state, ensure_ascii=False), 300))
    return printable(
        f"<div><b>run {html.escape(co.run.run_id)}</b> ({html.escape(co.run.status)}, "
        f"{counted(len(co.messages), 'message')})"
        "<table><tr><th>role</th><th>id</th><th>content</th></tr>"
        f"{rows}</table><div>state: <code>{state}</code></div></div>"
    )


def runs_html(runs: Sequence[Run]) -> str:
    """Runs as an HTML table, for notebooks."""
    rows = "".join(
        f"<tr><td><code>{_cell(r.run_id, 40)}</code></td><td>{_cell(', '.join(r.branches))}</td>"
        f"<td>{_cell(r.status)}</td><td>{_cell(r.parent_run_id or '')}</td>"
        f"<td>{_cell(r.lineage)}</td><td>{r.event_count}</td>"
        f"<td>{_cell(r.created_at.isoformat(timespec='seconds'))}</td>"
        f"<td><code>{_cell(hash_label(r))}</code></td></tr>"
        for r in runs
    )
    return printable(
        "<table><tr><th>run</th><th>branches</th><th>status</th><th>parent</th>"
        f"<th>lineage</th><th>events</th><th>created</th><th>hash</th></tr>{rows}</table>"
    )


def diff_html(d: Diff) -> str:
    """A diff as HTML tables, for notebooks."""
    def table(change: ViewChange) -> str:
        rows = "".join(
            f"<tr><td>{m.kind}</td><td><code>{_cell(str(m.id), 24)}</code></td>"
            f"<td>{_cell(message_line(m.before)) if m.before else ''}</td>"
            f"<td>{_cell(message_line(m.after)) if m.after else ''}</td></tr>"
            for m in change.messages
        )
        patch = html.escape(short(json.dumps(change.state_patch, ensure_ascii=False), 300))
        return (
            f"<table><tr><th>change</th><th>id</th><th>before</th><th>after</th></tr>"
            f"{rows}</table><div>state patch: <code>{patch}</code></div>"
        )

    base = html.escape(d.merge_base.run_id) if d.merge_base else "none"
    names = f"{html.escape(d.a.run_id)} vs {html.escape(d.b.run_id)}"
    out = f"<div><b>{names}</b> ({d.mode}, merge base {base})"
    if d.a_changes is not None:
        out += f"<div>{html.escape(d.a.run_id)} side</div>{table(d.a_changes)}"
    out += f"<div>{html.escape(d.b.run_id)} side</div>{table(d.changes)}</div>"
    return printable(out)
