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
    """The database was written by a newer agui-store than this one, or its layout is not one
    this release opens (a version's number over another layout, a cleared SQLite
    ``user_version`` over tables, a PostgreSQL ``meta`` over none of the tables). Nothing
    was changed."""


class StoreBusyError(AguiStoreError, TimeoutError):
    """Another writer held the database for longer than the configured busy timeout, or the
    server cancelled the transaction (a deadlock, a serialization failure): nothing was
    written.

    Attributes:
        reason: what happened, in words, without the advice the message ends with.
        waited: whether the call waited out the busy timeout (``True``: a longer timeout
            may let it through) rather than being cancelled (``False``: retry).
    """

    def __init__(self, reason: str, *, waited: bool, advice: str) -> None:
        self.reason = reason
        self.waited = waited
        super().__init__(f"{reason}; {advice}")

    @classmethod
    def locked(cls, where: str, *, by: str = "another writer") -> StoreBusyError:
        """The error of a call that waited the whole busy timeout for a lock ``by`` held."""
        return cls(
            f"{where} stayed locked by {by} for longer than the busy timeout",
            waited=True, advice=f"raise busy_timeout_ms or {SHORTEN_TRANSACTIONS}",
        )


#: The other half of the advice a :class:`StoreBusyError` that waited gives.
SHORTEN_TRANSACTIONS = "shorten the other transactions"


class IntegrityError(AguiStoreError):
    """The database breaks one of the store's own invariants (see ``Store.check``)."""


class CorruptStoreError(IntegrityError):
    """The file is damaged: SQLite found a corrupt page, or a stored blob or checkpoint does
    not decode. ``agui-store check`` says where; the log itself may still be readable.

    Attributes:
        damage: what is damaged, in words, without the advice the message ends with.
    """

    def __init__(self, damage: str, *, advice: str | None = None) -> None:
        self.damage = damage
        super().__init__(damage if advice is None else f"{damage}; {advice}")


#: The advice a :class:`CorruptStoreError` met outside ``check`` gives.
RUN_CHECK = "run 'agui-store check' for details"


class NotAStoreError(AguiStoreError):
    """The path names something that is not an agui-store file: a folder, a device, a text
    or binary file, or another application's SQLite database. Nothing was written to it."""


class StorageError(AguiStoreError, OSError):
    """The file system failed the store: a missing folder, a permission, an I/O error, a
    read-only file. ``errno`` is set when the system reported one.

    The transaction that met it was rolled back: every batch acknowledged before is intact,
    and the same ``Store`` works again once the cause is gone. Except for a lost PostgreSQL
    connection (``maybe_committed``): if it was lost during the commit, the commit may have
    landed.
    """

    #: Whether the transaction that met it may have been committed all the same.
    maybe_committed = False

    def __init__(self, message: str, *, path: str | None = None, errno: int | None = None):
        super().__init__(message)
        self.path = path
        if errno is not None:
            self.errno = errno


class StorageFullError(StorageError):
    """The disk, a quota or the process's file-size limit is full (SQLITE_FULL, ENOSPC,
    EDQUOT, EFBIG). Free space and retry: the same ``Store`` works again."""


class InvalidArgumentError(AguiStoreError, ValueError):
    """An argument no store call can take: a cursor that is not a non-negative integer, a
    path holding a NUL byte, an option out of range."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of a type no store call takes, where Python's convention is a
    ``TypeError`` (``scope=7``): a ``TypeError``, and a store error as every other bad
    argument is."""


class OutOfMemoryError(AguiStoreError, MemoryError):
    """The process ran out of memory inside a store call (nothing was written)."""


class InternalError(AguiStoreError, RuntimeError):
    """An unexpected error inside agui-store: a bug. The original exception is chained as
    ``__cause__``; please report it with the message."""


class HashMismatchError(IntegrityError):
    """Stored data does not match the content hash that covers it: the file was edited
    outside agui-store (or is damaged). Raised instead of returning what it would have read.

    Attributes:
        thread_id / run_id: the run whose data failed (``None`` when not known).
        what: what differs, in words.
    """

    def __init__(
        self,
        what: str,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        advice: str = "the store was changed outside agui-store or is damaged "
        "('agui-store check' lists what differs)",
    ) -> None:
        self.what = what
        self.thread_id = thread_id
        self.run_id = run_id
        where = ""
        if run_id is not None:
            where = f"run {run_id!r}" + (f" of thread {thread_id!r}" if thread_id else "") + ": "
        super().__init__(f"{where}{what}; {advice}")


class SyncConflictError(AguiStoreError):
    """A copy between stores (:func:`agui_store.copy`), or an import, found a run, a thread's
    owner or a branch that the source (the other store, or the archive) and the destination
    hold with different content: nothing was written.

    Attributes:
        thread_id: the thread where the two stores differ (``None`` for a pydantic-ai
            conversation no thread links to).
        run_id: the run that differs (``None`` for a thread's owner).
        branch: the branch whose tips diverge (``None`` unless a branch differs).
        conversation_id: the pydantic-ai conversation that differs, if that is what does.
        what: what differs, in words.
    """

    def __init__(
        self,
        what: str,
        *,
        thread_id: str | None,
        run_id: str | None = None,
        branch: str | None = None,
        conversation_id: str | None = None,
    ) -> None:
        self.what = what
        self.thread_id = thread_id
        self.run_id = run_id
        self.branch = branch
        self.conversation_id = conversation_id
        where = f"thread {thread_id!r}"
        if conversation_id is not None:
            where = f"conversation {conversation_id!r}" + (
                f" of {where}" if thread_id not in (None, conversation_id) else ""
            )
        if run_id is not None:
            where = f"run {run_id!r} of {where}"
        if branch is not None:
            where = f"branch {branch!r} of {where}"
        super().__init__(
            f"{where} differs between the source and the destination: {what}; "
            "nothing was written"
        )
