"""What the store hands back: runs, restored views, append receipts, branches.

Plain frozen dataclasses with no behaviour beyond presentation, so that every backend (SQLite
now; PostgreSQL and an async facade later) returns the same things.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

#: How a run ended. ``incomplete``: no RUN_FINISHED/RUN_ERROR was recorded (yet).
RUN_STATUSES = ("finished", "interrupted", "cancelled", "error", "incomplete")

#: Why a run has the lineage parent it has (SPEC §2, first match wins).
LINEAGE_REASONS = ("explicit", "parentRunId", "messages", "head", "root")


def _when(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


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
            :mod:`agui_store.hashing`). Final once the run is complete; while it is live it
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
        return self.status != "incomplete"

    @property
    def short_hash(self) -> str | None:
        return self.hash[:12] if self.hash is not None else None


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

    def __str__(self) -> str:
        from agui_store.render import transcript

        return transcript(self)

    def _repr_html_(self) -> str:
        from agui_store.render import checkout_html

        return checkout_html(self)


class Log(list[Run]):
    """Runs newest first (what ``Store.log`` returns): a plain list that also reads well in
    a terminal (``str``) and as a table in a notebook."""

    def __str__(self) -> str:
        from agui_store.render import runs_text

        return runs_text(self)

    def _repr_html_(self) -> str:
        from agui_store.render import runs_html

        return runs_html(self)


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
class Branch:
    """A named ref to a run. ``default`` marks the thread's implicit branch, which follows
    its newest run and cannot be moved or deleted."""

    thread_id: str
    name: str
    run_id: str
    default: bool = False
    updated_at: datetime | None = None


def when(ms: int | None) -> datetime | None:
    """Milliseconds since the epoch as an aware UTC datetime."""
    return _when(ms)
