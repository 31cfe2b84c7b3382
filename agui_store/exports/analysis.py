"""The analysis export: a store's threads, runs, restored views and tool calls as a separate,
datasette-friendly SQLite database written with sqlite-utils (docs/design/behaviour.md#interchange).

The store file is read only through the :class:`~agui_store.store.Store` API (apsw); the
analysis database is written only with sqlite-utils (the stdlib ``sqlite3``). Two SQLite
libraries on one file in one process can corrupt it (their POSIX locks do not see each
other), so the export refuses to write into the store's own file or its ``-wal``/``-shm``/
``-journal`` siblings, and never opens the store with ``sqlite3``.

The database it writes (``agui-store analyze OUT.db``; ``datasette OUT.db`` to browse it):

``threads``
    ``id`` (integer key), ``thread_id``, ``run_count``, ``created_at``, ``updated_at``.
``runs``
    One row per run with its lineage: ``thread`` → threads, ``parent`` → runs (the lineage
    parent), ``parent_run_id``, ``lineage`` (why that parent), ``depth``, ``status``,
    ``event_count``, ``message_count`` (length of its view), ``created_at``/``updated_at``
    (ISO 8601 UTC, millisecond precision, ``Z``), ``branches`` (JSON array),
    ``sent_parent_run_id``, ``has_input``, ``synthetic``, and the view's ``state``,
    ``interrupts`` and reducer ``warnings`` as JSON text.
``messages``
    Each distinct message *version* of a thread once: ``message_id``, ``role``, ``content``
    (text; text parts of multimodal content joined by newlines; ``NULL`` for non-text
    content such as an activity's payload), ``name``, ``tool_call_id``, ``json`` (the whole
    message), ``thread`` → threads and ``first_run`` → runs (the first run, in recorded order,
    whose view holds this version). Full-text search on ``content`` (``messages_fts``).
``view_messages``
    Each run's restored view, exactly: one row per (``run``, ``position``) → ``message``.
``run_messages`` (view)
    ``view_messages`` joined with ``messages``, ``runs`` and ``threads``: one row per
    (run, position) with the message's columns, plus ``new_in_run`` (1 when the run's lineage
    parent's view does not hold this version: the run added or changed it).
``tool_calls``
    Each tool call of each assistant message version once: ``tool_call_id``,
    ``function_name``, ``arguments`` (the JSON text the model wrote, as recorded),
    ``message`` → messages, ``first_run`` → runs, ``position`` in the message's ``toolCalls``,
    and ``result``/``result_message`` (→ messages): the first tool message that answered it,
    in the first view (recorded order) that holds an answer.
``run_tool_calls`` (view)
    One row per (run, tool call in its view) with the result *that view* holds: branches may
    answer the same call differently.
``event_counts``
    Events of each run by type (``run``, ``type``, ``count``).
``branches``
    The named branches of each thread and the thread's default one (``is_default``).
``export_info``
    One row: where the data came from and when.

Why versions plus positions, not one full row per (run, position): a thread of *n* runs each
adding a few messages holds O(n²) (run, message) pairs. Repeating whole messages for each
pair makes the file quadratic in text and full-text search return every message once per
run that shows it; three integers per pair keep the views exact and cheap, each text once.
``run_messages`` reads like the repeated table (``WHERE run_id = ? ORDER BY position``), and
``WHERE new_in_run`` gives only what a run added.

Tables are plain (not ``STRICT``) and JSON is text, so that older SQLite tools read them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import apsw
import sqlite_utils

from agui_store.backends.sqlite.files import remove_database
from agui_store.codec import ingest
from agui_store.engine import arguments
from agui_store.errors import AguiStoreError, ArgumentTypeError, StorageError
from agui_store.exports.targets import (
    SIBLINGS,
    ExportTargetError,
    check_target,
    copy_into_stream,
    is_sqlite_file,
    is_stream,
    make_partial,
    partial_path,
    place_file,
)
from agui_store.records import ExportSummary as ExportSummary  # what export_sqlite returns
from agui_store.records import Run
from agui_store.store import Store, check_store

#: ``progress(done_runs, total_runs)``: called once with ``done_runs=0``, then after each run.
ProgressCallback = Callable[[int, int], None]

#: Rows buffered (over all tables) before they are written.
DEFAULT_BATCH_SIZE = 2000


# --- schema -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    name: str
    columns: dict[str, type]
    pk: str | tuple[str, ...]
    not_null: tuple[str, ...] = ()
    foreign_keys: tuple[tuple[str, str, str], ...] = ()  # (column, other table, other column)
    indexes: tuple[tuple[str, ...], ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()


# Created in this order, so that a foreign key names a table created before it (or itself).
_TABLES = (
    _Table(
        "threads",
        {"id": int, "thread_id": str, "run_count": int, "created_at": str, "updated_at": str},
        pk="id",
        not_null=("thread_id",),
        unique=(("thread_id",),),
    ),
    _Table(
        "runs",
        {
            "id": int,
            "thread": int,
            "run_id": str,
            "parent": int,
            "parent_run_id": str,
            "lineage": str,
            "depth": int,
            "status": str,
            "event_count": int,
            "message_count": int,
            "created_at": str,
            "updated_at": str,
            "branches": str,
            "sent_parent_run_id": str,
            "has_input": int,
            "synthetic": int,
            "state": str,
            "interrupts": str,
            "warnings": str,
        },
        pk="id",
        not_null=("thread", "run_id", "lineage", "depth", "status", "event_count"),
        foreign_keys=(("thread", "threads", "id"), ("parent", "runs", "id")),
        indexes=(("run_id",), ("parent",), ("created_at",)),
        unique=(("thread", "run_id"),),
    ),
    _Table(
        "messages",
        {
            "id": int,
            "thread": int,
            "first_run": int,
            "message_id": str,
            "role": str,
            "content": str,
            "name": str,
            "tool_call_id": str,
            "json": str,
        },
        pk="id",
        not_null=("thread", "first_run", "json"),
        foreign_keys=(("thread", "threads", "id"), ("first_run", "runs", "id")),
        indexes=(("thread", "message_id"), ("first_run",), ("tool_call_id",), ("role",)),
    ),
    _Table(
        "view_messages",
        {"run": int, "position": int, "message": int},
        pk=("run", "position"),
        not_null=("message",),
        foreign_keys=(("run", "runs", "id"), ("message", "messages", "id")),
        indexes=(("message", "run"),),
    ),
    _Table(
        "tool_calls",
        {
            "id": int,
            "thread": int,
            "message": int,
            "first_run": int,
            "position": int,
            "tool_call_id": str,
            "type": str,
            "function_name": str,
            "arguments": str,
            "result": str,
            "result_message": int,
        },
        pk="id",
        not_null=("thread", "message", "first_run", "position"),
        foreign_keys=(
            ("thread", "threads", "id"),
            ("message", "messages", "id"),
            ("first_run", "runs", "id"),
            ("result_message", "messages", "id"),
        ),
        indexes=(
            ("message",),
            ("first_run",),
            ("tool_call_id",),
            ("result_message",),
            ("function_name",),
        ),
    ),
    _Table(
        "event_counts",
        {"run": int, "type": str, "count": int},
        pk=("run", "type"),
        not_null=("count",),
        foreign_keys=(("run", "runs", "id"),),
    ),
    _Table(
        "branches",
        {"thread": int, "name": str, "run": int, "is_default": int},
        pk=("thread", "name"),
        not_null=("run", "is_default"),
        foreign_keys=(("thread", "threads", "id"), ("run", "runs", "id")),
        indexes=(("run",),),
    ),
    _Table(
        "export_info",
        {
            "id": int,
            "source": str,
            "thread_filter": str,
            "exported_at": str,
            "agui_store_version": str,
            "sqlite_utils_version": str,
        },
        pk="id",
    ),
)

#: One row per (run, position) of each run's view, with the message's columns.
RUN_MESSAGES_SQL = """SELECT
    view_messages.run AS run,
    runs.run_id AS run_id,
    threads.thread_id AS thread_id,
    view_messages.position AS position,
    messages.id AS message,
    messages.message_id AS message_id,
    messages.role AS role,
    messages.content AS content,
    messages.name AS name,
    messages.tool_call_id AS tool_call_id,
    messages.json AS json,
    NOT EXISTS (
        SELECT 1 FROM view_messages AS parent_view
        WHERE parent_view.message = view_messages.message AND parent_view.run = runs.parent
    ) AS new_in_run
FROM view_messages
JOIN runs ON runs.id = view_messages.run
JOIN threads ON threads.id = runs.thread
JOIN messages ON messages.id = view_messages.message"""

#: One row per (run, tool call in the run's view), with the answer that view holds.
RUN_TOOL_CALLS_SQL = """SELECT
    view_messages.run AS run,
    runs.run_id AS run_id,
    threads.thread_id AS thread_id,
    tool_calls.id AS tool_call,
    tool_calls.tool_call_id AS tool_call_id,
    tool_calls.message AS message,
    view_messages.position AS message_position,
    tool_calls.position AS position,
    tool_calls.function_name AS function_name,
    tool_calls.arguments AS arguments,
    (
        SELECT answer.id FROM messages AS answer
        JOIN view_messages AS answer_view
            ON answer_view.message = answer.id AND answer_view.run = view_messages.run
        WHERE answer.tool_call_id = tool_calls.tool_call_id AND answer.role = 'tool'
        ORDER BY answer_view.position LIMIT 1
    ) AS result_message,
    (
        SELECT answer.content FROM messages AS answer
        JOIN view_messages AS answer_view
            ON answer_view.message = answer.id AND answer_view.run = view_messages.run
        WHERE answer.tool_call_id = tool_calls.tool_call_id AND answer.role = 'tool'
        ORDER BY answer_view.position LIMIT 1
    ) AS result
FROM view_messages
JOIN tool_calls ON tool_calls.message = view_messages.message
JOIN runs ON runs.id = view_messages.run
JOIN threads ON threads.id = runs.thread"""

_VIEWS = [("run_messages", RUN_MESSAGES_SQL), ("run_tool_calls", RUN_TOOL_CALLS_SQL)]


# --- public entry point -------------------------------------------------------------------


def export_sqlite(
    store: Store,
    out_path: str | os.PathLike[str],
    *,
    thread_id: str | None = None,
    progress: ProgressCallback | None = None,
    replace: bool = False,
    event_counts: bool = True,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> ExportSummary:
    """Write an analysis database of the store (or one thread) to ``out_path``.

    Read from one snapshot of the store (``store.reading()``, as ``export_archive``): what
    other connections write or erase meanwhile is in the next export, not in half of this
    one. Runs are restored one at a time (``store.checkout``) and their rows written in
    batches, so memory holds one run's view plus one thread's message index, whatever the
    store's size. The database is built in a temporary file next to ``out_path`` and moved into
    place when complete: an interrupted export leaves no half-written ``out_path``.

    Args:
        store: the store to read (only through its API).
        out_path: the analysis database to write (a new path, or an empty file); a device
            or FIFO, or ``-`` for stdout, gets the finished database's bytes.
        thread_id: export only this thread.
        progress: ``progress(done_runs, total_runs)``, first with 0 once the total is known.
        replace: overwrite ``out_path`` when it exists and is not empty.
        event_counts: also count each run's events by type (``event_counts``; reads every
            event once).
        batch_size: rows buffered before a write.

    Raises:
        ExportTargetError: ``out_path`` is the store's own file (or a sibling of it), a
            folder, or an existing non-empty file and ``replace`` is false.
        RunNotFoundError: ``thread_id`` names no thread.
        ArgumentTypeError: ``store`` is no store, ``out_path`` no path, or ``progress``
            no callable.
        InvalidArgumentError: ``batch_size`` is no integer of at least 1.
    """
    arguments.flag("replace", replace)
    arguments.flag("event_counts", event_counts)
    arguments.check_progress(progress)  # not at the first run, with a thread half written
    check_store("export_sqlite", store)
    if not isinstance(out_path, (str, os.PathLike)):
        raise ArgumentTypeError(
            "export_sqlite writes to a path (text or a path object), not "
            f"{arguments.a_kind(out_path)}"
        )
    arguments.positive_int("batch_size", batch_size)
    target = _check_target(store, out_path, replace=replace)
    folder, name = os.path.split(target)
    # A device, a FIFO or stdout gets the finished database's bytes: it is built in the
    # temporary folder (never beside a device, in /dev) and copied into the stream.
    streaming = target == "-" or is_stream(target)
    if streaming:
        folder, name = tempfile.gettempdir(), "agui-store-analysis.db"
    tmp = partial_path(os.path.join(folder, name), database=True)
    try:
        try:
            os.close(make_partial(tmp))
        except OSError as e:
            raise _cannot_write(target, e) from e
        # One snapshot, as the archive reads: a thread erased or a run appended by another
        # connection meanwhile neither fails the export nor leaves half a thread in it.
        with store.reading(), _writing_to(target):
            summary = _build(store, tmp, target, thread_id, progress, batch_size, event_counts)
        # Outside the read transaction, which would take a reader gone (`analyze - | head`)
        # for an error of the store.
        with _writing_to(target):
            if streaming:
                copy_into_stream(tmp, target)
                os.remove(tmp)
            else:
                _fsync(tmp)
                place_file(tmp, target)
    except BaseException:
        remove_database(tmp)
        raise
    return summary


def _build(
    store: Store,
    tmp: str,
    target: str,
    thread_id: str | None,
    progress: ProgressCallback | None,
    batch_size: int,
    event_counts: bool,
) -> ExportSummary:
    """Write the analysis database of ``store`` into the new file ``tmp``."""
    threads = [thread_id] if thread_id is not None else store.threads()
    total = sum(len(store.runs(t)) for t in threads)  # RunNotFoundError for an unknown thread
    if progress is not None:
        progress(0, total)
    db = sqlite_utils.Database(tmp)
    try:
        # A private temporary file, moved into place only when complete: durability of
        # each batch buys nothing, so skip the syncs (the file is synced once, after).
        db.execute("PRAGMA synchronous = OFF")
        writer = _Writer(db, batch_size=max(1, batch_size), event_counts=event_counts)
        writer.create_schema()
        writer.info(store, thread_id)
        done = 0
        for tid in threads:
            for _ in writer.thread(store, tid):
                done += 1
                if progress is not None:
                    progress(done, total)
        writer.finish()
        return writer.summary(target)
    finally:
        db.close()


@contextlib.contextmanager
def _writing_to(target: str) -> Iterator[None]:
    """A full disk or an I/O error of the output's file system comes out as an error of
    writing ``target``, not of the store; a reader that went away (``analyze - | head``) is
    no error of writing, and goes on as it is."""
    try:
        yield
    except (sqlite3.OperationalError, OSError) as e:
        if isinstance(e, (AguiStoreError, BrokenPipeError)):
            raise
        raise _cannot_write(target, e) from e


def _cannot_write(target: str, e: BaseException) -> StorageError:
    # The system's words alone: an OSError's text names the temporary file beside the
    # target, a name the user never gave and that is gone.
    said = e.strerror if isinstance(e, OSError) and e.strerror else e
    return StorageError(
        f"cannot write the analysis database {target}: {said}; nothing was left behind",
        path=target, errno=e.errno if isinstance(e, OSError) else None,
    )


# --- the target file ----------------------------------------------------------------------


def _check_target(store: Store, out_path: str | os.PathLike[str], *, replace: bool) -> str:
    """Where the analysis database goes: ``targets.check_target``, and no silent replace."""
    shown = os.fspath(out_path)
    if shown == "-":  # stdout
        return shown
    target = check_target(shown, store.path, replace=True)
    if is_stream(target):
        return target
    if os.path.exists(target) and os.path.getsize(target) > 0:
        if not replace:
            raise ExportTargetError(
                f"{shown} exists and is not empty: pass replace=True (--replace) to overwrite it"
            )
        if is_sqlite_file(target) and not _is_analysis_database(target):
            raise ExportTargetError(
                f"{shown} is a SQLite database that is not an agui-store analysis export "
                "(it has no export_info table): agui-store never replaces one; give a new path"
            )
        for suffix in SIBLINGS[1:]:
            if os.path.exists(target + suffix):
                raise ExportTargetError(
                    f"{shown}{suffix} exists: {shown} is open elsewhere or was not closed "
                    "cleanly; close it (or remove that file) before replacing it"
                )
    return target


def _is_analysis_database(path: str) -> bool:
    """Whether the SQLite file at ``path`` holds this module's ``export_info`` table.

    Opened read-only and immutable, so that looking writes nothing (no -wal, no -shm).
    """
    uri = "file:" + urllib.parse.quote(path) + "?immutable=1"
    try:
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        try:
            rows = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'export_info'"
            ).fetchall()
        finally:
            conn.close()
    except apsw.Error:
        return False
    return bool(rows)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- rows ---------------------------------------------------------------------------------


def iso(moment: datetime | None) -> str | None:
    """A UTC time as ISO 8601 text with milliseconds (``2024-05-01T10:00:00.123Z``): the
    precision the store keeps, and text that sorts in time order."""
    if moment is None:
        return None
    ms = round(moment.timestamp() * 1000)
    whole = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return whole.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def content_text(content: Any) -> str | None:
    """A message's text: a string as is, the text parts of multimodal content joined by
    newlines, ``None`` for anything else (the ``json`` column keeps it whole)."""
    if isinstance(content, str):
        return _sql_text(content)
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ]
        return _sql_text("\n".join(texts)) if texts else None
    return None


def _sql_text(value: Any) -> str | None:
    """Text SQLite can store: lone surrogates (valid in JSON escapes, not in UTF-8) are
    written as ``\\udXXX``."""
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _installed(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _json(value: Any) -> str:
    return ingest.encode(value).decode("utf-8")


def _digest(message: Any) -> bytes:
    return hashlib.blake2b(ingest.canonical_bytes(message), digest_size=16).digest()


@dataclass
class _Thread:
    """What the writer remembers while it writes one thread (dropped after it)."""

    pk: int
    runs: dict[str, tuple[int, int]]  # run id -> (key, lineage depth)
    messages: dict[bytes, int]  # digest of a message version -> key
    calls: dict[tuple[int, int], tuple[int, bool]]  # (message key, index) -> (key, answered)


class _Writer:
    """Buffers rows and writes them in batches; assigns every integer key itself."""

    def __init__(self, db: sqlite_utils.Database, *, batch_size: int, event_counts: bool):
        self.db = db
        self.batch_size = batch_size
        self.event_counts = event_counts
        self.pending: dict[str, list[dict[str, Any]]] = {t.name: [] for t in _TABLES}
        self.pending_calls: dict[int, dict[str, Any]] = {}
        self.buffered = 0
        self.counts = {"threads": 0, "runs": 0, "messages": 0, "view_messages": 0, "tool_calls": 0}

    def create_schema(self) -> None:
        for t in _TABLES:
            keys = (t.pk,) if isinstance(t.pk, str) else t.pk
            self.db.table(t.name).create(
                dict(t.columns),
                pk=t.pk,
                foreign_keys=list(t.foreign_keys),
                not_null=[*keys, *t.not_null],
            )

    def info(self, store: Store, thread_id: str | None) -> None:
        self._add(
            "export_info",
            {
                "id": 1,
                "source": _sql_text(store.path),
                "thread_filter": _sql_text(thread_id),
                "exported_at": iso(datetime.now(timezone.utc)),
                "agui_store_version": _installed("agui-store"),
                "sqlite_utils_version": _installed("sqlite-utils"),
            },
        )

    def thread(self, store: Store, thread_id: str) -> Iterator[str]:
        """Write one thread; yields after each run."""
        runs = store.runs(thread_id)
        pk = self.counts["threads"] + 1
        self.counts["threads"] = pk
        self._add(
            "threads",
            {
                "id": pk,
                "thread_id": _sql_text(thread_id),
                "run_count": len(runs),
                "created_at": iso(min((r.created_at for r in runs), default=None)),
                "updated_at": iso(max((r.updated_at or r.created_at for r in runs), default=None)),
            },
        )
        state = _Thread(pk, {}, {}, {})
        for listed in runs:
            self._run(store, state, listed)
            yield listed.run_id
        for branch in store.branches(thread_id):
            key = state.runs.get(branch.run_id)
            if key is not None:  # always, from one snapshot: the thread's runs hold it
                self._add(
                    "branches",
                    {
                        "thread": pk,
                        "name": _sql_text(branch.name),
                        "run": key[0],
                        "is_default": int(branch.default),
                    },
                )

    def _run(self, store: Store, thread: _Thread, listed: Run) -> None:
        co = store.checkout(listed.run_id, thread_id=listed.thread_id)
        run = co.run
        pk = self.counts["runs"] + 1
        self.counts["runs"] = pk
        parent = thread.runs.get(run.parent_run_id) if run.parent_run_id is not None else None
        depth = parent[1] + 1 if parent is not None else 0
        thread.runs[run.run_id] = (pk, depth)
        self._add(
            "runs",
            {
                "id": pk,
                "thread": thread.pk,
                "run_id": _sql_text(run.run_id),
                "parent": parent[0] if parent is not None else None,
                "parent_run_id": _sql_text(run.parent_run_id),
                "lineage": run.lineage,
                "depth": depth,
                "status": run.status,
                "event_count": run.event_count,
                "message_count": len(co.messages),
                "created_at": iso(run.created_at),
                "updated_at": iso(run.updated_at),
                "branches": _json(list(run.branches)),
                "sent_parent_run_id": _sql_text(run.sent_parent_run_id),
                "has_input": int(run.has_input),
                "synthetic": int(run.synthetic),
                "state": _json(co.state),
                "interrupts": _json(co.interrupts),
                "warnings": _json(co.warnings),
            },
        )
        keys = [self._message(thread, pk, m) for m in co.messages]
        for position, key in enumerate(keys):
            self._add("view_messages", {"run": pk, "position": position, "message": key})
        self.counts["view_messages"] += len(keys)
        self._tool_calls(thread, pk, co.messages, keys)
        if self.event_counts:
            by_type: dict[str, int] = {}
            for event in store.events(run.run_id, thread_id=run.thread_id):
                kind = str(event.get("type")) if isinstance(event, dict) else "?"
                by_type[kind] = by_type.get(kind, 0) + 1
            for kind, count in sorted(by_type.items()):
                self._add("event_counts", {"run": pk, "type": _sql_text(kind), "count": count})

    def _message(self, thread: _Thread, run_pk: int, message: Any) -> int:
        digest = _digest(message)
        key = thread.messages.get(digest)
        if key is not None:
            return key
        key = self.counts["messages"] + 1
        self.counts["messages"] = key
        thread.messages[digest] = key
        m = message if isinstance(message, dict) else {}
        self._add(
            "messages",
            {
                "id": key,
                "thread": thread.pk,
                "first_run": run_pk,
                "message_id": _sql_text(m.get("id")),
                "role": _sql_text(m.get("role")),
                "content": content_text(m.get("content")),
                "name": _sql_text(m.get("name")),
                "tool_call_id": _sql_text(m.get("toolCallId")),
                "json": _json(message),
            },
        )
        return key

    def _tool_calls(
        self, thread: _Thread, run_pk: int, messages: Sequence[Any], keys: list[int]
    ) -> None:
        # The answer each call has in this view: the first tool message naming it.
        answers: dict[str, tuple[int, str | None]] = {}
        for m, key in zip(messages, keys, strict=True):
            if isinstance(m, dict) and m.get("role") == "tool":
                call_id = m.get("toolCallId")
                if isinstance(call_id, str) and call_id not in answers:
                    answers[call_id] = (key, content_text(m.get("content")))
        for m, key in zip(messages, keys, strict=True):
            calls = m.get("toolCalls") if isinstance(m, dict) else None
            if not isinstance(calls, list):
                continue
            for index, call in enumerate(calls):
                if not isinstance(call, dict):
                    continue
                call_id = call.get("id")
                answer = answers.get(call_id) if isinstance(call_id, str) else None
                known = thread.calls.get((key, index))
                if known is not None:
                    if not known[1] and answer is not None:
                        self._answer(known[0], answer)
                        thread.calls[(key, index)] = (known[0], True)
                    continue
                pk = self.counts["tool_calls"] + 1
                self.counts["tool_calls"] = pk
                thread.calls[(key, index)] = (pk, answer is not None)
                function = call.get("function")
                function = function if isinstance(function, dict) else {}
                arguments = function.get("arguments")
                row = {
                    "id": pk,
                    "thread": thread.pk,
                    "message": key,
                    "first_run": run_pk,
                    "position": index,
                    "tool_call_id": _sql_text(call_id),
                    "type": _sql_text(call.get("type")),
                    "function_name": _sql_text(function.get("name")),
                    "arguments": (
                        _sql_text(arguments)
                        if isinstance(arguments, str)
                        else None
                        if arguments is None
                        else _json(arguments)
                    ),
                    "result_message": answer[0] if answer else None,
                    "result": answer[1] if answer else None,
                }
                self.pending_calls[pk] = row
                self._add("tool_calls", row)

    def _answer(self, call_pk: int, answer: tuple[int, str | None]) -> None:
        """A later view answers a call an earlier one left open (a frontend tool's result
        comes in the next run's input)."""
        row = self.pending_calls.get(call_pk)
        if row is not None:
            row["result_message"], row["result"] = answer
            return
        with self.db.conn:
            self.db.execute(
                "UPDATE tool_calls SET result_message = ?, result = ? WHERE id = ?",
                [answer[0], answer[1], call_pk],
            )

    def _add(self, table: str, row: dict[str, Any]) -> None:
        self.pending[table].append(row)
        self.buffered += 1
        if self.buffered >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        for name, rows in self.pending.items():
            if rows:
                self.db.table(name).insert_all(rows, batch_size=self.batch_size)
                rows.clear()
        self.pending_calls.clear()
        self.buffered = 0

    def finish(self) -> None:
        self.flush()
        # Indexes after the rows: building one at the end is cheaper than keeping it current.
        for t in _TABLES:
            table = self.db.table(t.name)
            for columns in t.unique:
                table.create_index(columns, unique=True)
            for columns in t.indexes:
                table.create_index(columns)
            # Every foreign key column leads some index (the key, a listed one, or its own).
            keys = (t.pk,) if isinstance(t.pk, str) else t.pk
            leading = {keys[0], *(cols[0] for cols in (*t.unique, *t.indexes))}
            for column, _, _ in t.foreign_keys:
                if column not in leading:
                    table.create_index([column])
        for name, sql in _VIEWS:
            self.db.create_view(name, sql)
        # Populated once from the rows; the triggers keep it current if the file is edited.
        self.db.table("messages").enable_fts(["content"], create_triggers=True)
        self.db.analyze()

    def summary(self, path: str) -> ExportSummary:
        c = self.counts
        return ExportSummary(
            path, c["threads"], c["runs"], c["messages"], c["view_messages"], c["tool_calls"]
        )
