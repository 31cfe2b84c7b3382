"""The one error tree of agui-store.

Every error the library raises derives from :class:`AguiStoreError`. Leaves also derive from
the builtin that fits, so ``except ValueError`` and ``except LookupError`` keep working for
callers that do not know this library.
"""

from __future__ import annotations


class AguiStoreError(Exception):
    """Root of every error agui-store raises."""


class InvalidEventError(AguiStoreError, ValueError):
    """An event, or the batch it came in, is not acceptable.

    Attributes:
        index: position of the offending event in the batch (``None`` when the batch itself
            could not be read, e.g. malformed JSON before any event).
        event_type: the offending event's ``type`` when it has one.
        path: JSON path of the offending value inside the event (``$`` is the event).
        reason: what is wrong, without the location prefix.
    """

    def __init__(
        self,
        reason: str,
        *,
        index: int | None = None,
        event_type: str | None = None,
        path: str = "$",
    ) -> None:
        self.reason = reason
        self.index = index
        self.event_type = event_type
        self.path = path
        where = []
        if index is not None:
            where.append(f"event {index}")
        if event_type is not None:
            where.append(f"({event_type})")
        if path and path != "$":
            where.append(f"at {path}")
        prefix = " ".join(where)
        super().__init__(f"{prefix}: {reason}" if prefix else reason)


class SequenceError(InvalidEventError):
    """The events are well-formed one by one but their order breaks an AG-UI rule."""


class RunNotFoundError(AguiStoreError, LookupError):
    """A run id, prefix or ref names no run."""


class AmbiguousRunError(AguiStoreError, LookupError):
    """A run id or prefix names more than one run (in different threads, or by prefix)."""


class OpenRunsError(AmbiguousRunError):
    """A batch that starts no run and names none (``append(..., run_id=)``) reached a thread
    with several open runs: which one it continues is ambiguous, so nothing was written.

    Attributes:
        thread_id: the thread.
        run_ids: its open runs, oldest first.
    """

    def __init__(self, message: str, *, thread_id: str, run_ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.run_ids = run_ids


class ScopeError(AguiStoreError, PermissionError):
    """A call with a ``scope`` tried to write to a thread that belongs to another owner (or
    to none): nothing was written. Reads in a scope treat such a thread as absent instead."""


class BranchError(AguiStoreError, ValueError):
    """A branch name is invalid or a branch operation is not allowed."""


class SchemaVersionError(AguiStoreError):
    """The database file was written by a newer agui-store than this one."""


class StoreBusyError(AguiStoreError, TimeoutError):
    """Another writer held the database for longer than the configured busy timeout."""


class IntegrityError(AguiStoreError):
    """The database breaks one of the store's own invariants (see ``Store.check``)."""
