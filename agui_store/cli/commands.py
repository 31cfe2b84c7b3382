"""``agui-store``: the command line, one subcommand per store verb.

Every command that opens a store takes ``--db PATH`` (default: ``$AGUI_STORE_DB`` or
``./agui-store.db``, the same as the API); ``--json`` prints machine-readable output; long
imports show progress on a terminal.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import datetime
import difflib
import errno
import json
import logging
import os
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO, NoReturn, TextIO, cast

from agui_store import backends
from agui_store.backends import is_url, locations
from agui_store.backends.sqlite import files
from agui_store.cli import Terminated, exit_code, wildmatch
from agui_store.cli.render import diff_text, graph
from agui_store.codec.output import FORMATS, serialize
from agui_store.engine import arguments, clock, conversations, revisions
from agui_store.engine import search as search_index
from agui_store.engine.arguments import path_text
from agui_store.engine.conversations import Continuation
from agui_store.errors import (
    SHORTEN_TRANSACTIONS,
    AguiStoreError,
    AmbiguousRunError,
    BranchError,
    CorruptStoreError,
    InternalError,
    InvalidArgumentError,
    InvalidEventError,
    NotAStoreError,
    RunNotFoundError,
    StoreBusyError,
)
from agui_store.exports.targets import check_source, check_target, write_file
from agui_store.records import (
    CheckReport,
    ErasureReceipt,
    Problem,
    Run,
    content_text,
    counted,
    first_words,
    on_terminal,
    one_line,
    pasted_option,
    printable,
    run_error,
    run_line,
    shell_command,
    short,
    transcript,
    with_positional,
)
from agui_store.store import Store
from agui_store.sync import opened

EXAMPLES = {
    "import": "agui-store import recording.sse --thread t1",
    "threads": "agui-store threads",
    "runs": "agui-store runs --thread t1",
    "log": "agui-store log HEAD --thread t1 --graph",
    "show": "agui-store show run-2 --json",
    "branch": "agui-store branch retry run-1 --thread t1",
    "branches": "agui-store branches --thread t1",
    "check": "agui-store check --db chat.db",
    "compact": "agui-store compact --thread t1",
    "rebuild": "agui-store rebuild --thread t1",
    "diff": "agui-store diff main retry --thread t1 --stat",
    "fork": "agui-store fork run-1 --thread t1 > next-input.json",
    "export": "agui-store export run-2 --reconnect-stream --format sse",
    "demo": "agui-store demo",
    "analyze": "agui-store analyze analysis.db --thread t1",
    "export-artifact": "agui-store export-artifact run-2 --thread t1 -o run-2.artifact.json",
    "validate-artifact": "agui-store validate-artifact run-2.artifact.json",
    "slim": "agui-store slim HEAD --thread t1 --preset minimal --last 5",
    "copy": "agui-store copy local.db postgresql://host/agents --thread t1",
    "ui": "agui-store ui chat.db --thread t1",
    "delete": "agui-store delete --thread t1 --dry-run",
    "prune": "agui-store prune --older-than 90d --yes",
    "purge": "agui-store purge --db chat.db",
    "search": 'agui-store search "porto hotel" --limit 5',
}


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(
        self, total: int, label: str, stream: TextIO | None = None, *, unit: str = ""
    ) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.unit = unit  # "bytes": counts shown in MB
        self.done = 0
        self._last = 0.0

    def _shown(self, count: int) -> str:
        return f"{count / 1e6:.1f}" if self.unit == "bytes" else str(count)

    def advance(self, n: int) -> None:
        """Count ``n`` more done and redraw, at most every 0.1 s (and at the end)."""
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            width = 30
            filled = int(width * self.done / self.total)
            self.stream.write(
                f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                f"{self._shown(self.done)}/{self._shown(self.total)}"
                + (" MB" if self.unit == "bytes" else "")
            )
            self.stream.flush()

    def finish(self) -> None:
        """End the bar's line, so that what follows starts on a line of its own."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


class _Failed(Exception):
    """A command's negative answer (its exit code), raised through the store's opening so
    that a store the command created for nothing is removed again."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _Printable:
    """The output stream of every command, which no stored text can make fail: lone
    surrogates (legal in recorded JSON) are written as ``\\udXXX`` escapes, so text stays
    readable and ``--json`` output stays valid JSON (see :func:`records.printable`). On a
    terminal, control characters of stored text are written as escapes too
    (:func:`records.on_terminal`); a pipe or a file gets the text as stored."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        isatty = getattr(stream, "isatty", None)
        self._terminal = bool(isatty and isatty())

    def write(self, text: str) -> int:
        text = printable(text)
        try:
            return self._stream.write(on_terminal(text) if self._terminal else text)
        except OSError as e:
            self._said_where(e)

    def write_painted(self, text: str) -> int:
        """Write text that holds the CLI's own colours, its stored text already escaped."""
        try:
            return self._stream.write(printable(text))
        except OSError as e:
            self._said_where(e)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            self._said_where(e)

    def _said_where(self, e: OSError) -> NoReturn:
        """Raise ``e``, a failed write, saying it was stdout (``> /dev/full``: no space left),
        as the error of an output file names the file. A closed pipe stays what it is: the
        reader went away, which is no error. (A try in each write, not a context manager:
        a log writes a line at a time.)"""
        if isinstance(e, BrokenPipeError) or e.filename is not None:
            raise e
        if self._stream is not sys.stdout:
            raise e
        raise OSError(e.errno, f"cannot write to stdout: {e.strerror or e}") from e

    def __getattr__(self, name: str) -> Any:  # isatty, flush, buffer, ...
        return getattr(self._stream, name)


class _ClosedStdout:
    """Stdout when the shell closed it (``agui-store log >&-``): Python has none, and a
    command's first write fails with one line, as ``ls >&-`` does, instead of a bug's."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "cannot write to stdout: it is closed (>/dev/null "
                      "discards the output)")

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        return None


def _write_painted(out: TextIO, text: str) -> None:
    """Write ``text`` whose colours are the CLI's own (see :meth:`_Printable.write_painted`)."""
    (out.write_painted if isinstance(out, _Printable) else out.write)(text)


def _in_colour(out: TextIO) -> bool:
    """Whether to paint: on a terminal, unless ``NO_COLOR`` is set to something (no-color.org:
    an empty value does not count) or the terminal says it has no colours (``TERM=dumb``,
    as git reads it)."""
    return (
        out.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    )


def _labelled(store: Store, runs: Sequence[Run]) -> Iterator[tuple[Run, str]]:
    """Runs of one thread, in the order given, each with its label: the last user message
    it added to its lineage parent's view (the question a forked run or an edit asked, never
    one it inherited; after a run the client aborted, which never ended and so is no
    lineage parent, the new question, not the aborted one). A run that added no question
    and removed or edited none (a regenerate, a tool result sent back) answers the one its
    parent answered; else its label is the last user message its view holds. One at a time,
    so that a long log prints as it goes. What a run added is the diff from its parent,
    which reads what the two views do not share: a label costs what the runs added, not
    their views' length (a log of a long thread would cost the square of it)."""
    asked: dict[str, dict[str, Any] | None] = {}  # run id -> the question of its label
    for run in runs:
        said = _question(store, run, asked)
        yield run, content_text(said.get("content")) if said is not None else ""


def _question(
    store: Store, run: Run, asked: dict[str, dict[str, Any] | None]
) -> dict[str, Any] | None:
    """The user message that labels ``run`` (see :func:`_labelled`), found up its lineage as
    far as the runs that asked nothing new go; ``asked`` keeps each run's, for the next."""
    answering_the_same = []  # run ids that take the question of the run after them
    at = run
    while at.run_id not in asked:
        if at.parent_run_id is not None:
            change = store.diff(
                at.parent_run_id, at.run_id, thread_id=at.thread_id, mode="two-dot"
            )
            users = [c for c in change.messages
                     if any(m is not None and m.get("role") == "user" for m in (c.before, c.after))]
            added = [c.after for c in users if c.kind == "added" and c.after is not None]
            if added:
                asked[at.run_id] = added[-1]
                break
            parent = store.get_run(at.parent_run_id, thread_id=at.thread_id)
            if not users and parent is not None:  # the parent's questions, none new
                answering_the_same.append(at.run_id)
                at = parent
                continue
        messages = store.checkout(at.run_id, thread_id=at.thread_id).messages
        asked[at.run_id] = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    said = asked[at.run_id]
    for run_id in answering_the_same:
        asked[run_id] = said
    return said


def _summaries(store: Store, runs: Sequence[Run]) -> dict[str, str]:
    """``{run id: its label}`` (:func:`_labelled`), for a drawing that needs them all."""
    return {run.run_id: words for run, words in _labelled(store, runs)}


class UsageError(AguiStoreError):
    """A command line that asks for something the command cannot do (exit 2)."""


def _the_thread(store: Store, args: argparse.Namespace) -> str:
    """The thread a command works on: ``--thread``, or the store's only thread."""
    if args.thread is not None:
        return cast(str, args.thread)
    threads = store.threads()
    if len(threads) == 1:
        return threads[0]
    if not threads:
        raise RunNotFoundError(f"{store.path} holds no thread yet")
    raise AmbiguousRunError(
        f"the store holds {len(threads)} threads: name one with --thread T "
        "(agui-store threads lists them)"
    )


def _refuse_json(args: argparse.Namespace, why: str) -> None:
    """Refuse ``--json`` where no JSON output makes sense, saying why."""
    if args.json:
        raise UsageError(f"--json is not available here: {why}")


def _write_json(out: TextIO, value: Any) -> None:
    out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


# --- commands ---------------------------------------------------------------------------


class _CountedReads:
    """A binary file whose reads advance a progress bar by the bytes read."""

    def __init__(self, handle: BinaryIO, progress: Progress) -> None:
        self._handle = handle
        self._progress = progress

    def read(self, size: int = -1) -> bytes:
        chunk = self._handle.read(size)
        self._progress.advance(len(chunk))
        return chunk


def cmd_import(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """Stream the file into the store in one transaction (``Store.import_file``, or
    ``Store.import_archive`` for a file whose first line is an archive's header): all of
    it or nothing, in memory that does not grow with the file."""
    with contextlib.ExitStack() as stack:
        if args.file == "-":
            handle: BinaryIO = sys.stdin.buffer
            total = 0
        else:
            check_source(args.file, store.path)
            handle = stack.enter_context(open(args.file, "rb"))
            total = os.fstat(handle.fileno()).st_size
        progress = Progress(total, f"importing {args.file}", unit="bytes")
        progress.enabled &= total > 0  # a pipe has no size to measure against
        stack.callback(progress.finish)
        if _starts_an_archive(handle):
            if args.thread or args.no_sequence_check:
                raise UsageError(
                    "an archive names its threads and holds whole runs: --thread and "
                    "--no-sequence-check do not apply to it"
                )
            summary = store.import_archive(
                handle, progress=progress.advance, restore_erased=args.restore_erased
            )
            if args.json:
                _write_json(out, {
                    "threads": summary.threads, "runs": summary.runs, "events": summary.events,
                    "branches": summary.branches, "conversations": summary.conversations,
                    "leftErased": summary.left_erased, "store": store.path,
                })
            else:
                out.write(f"imported {_archive_counts(summary)} into {store.path}\n")
            if summary.left_erased:
                sys.stderr.write(
                    f"left out {counted(summary.left_erased, 'thread')} this store erased "
                    "(--restore-erased imports them)\n"
                )
            return 0
        if _starts_a_headless_archive(handle):
            raise InvalidArgumentError(
                f"{args.file}, line 1: an archive's record, but not its header line: the "
                "archive was cut at its start or edited; nothing was imported"
            )
        if args.restore_erased:
            raise InvalidArgumentError(
                "--restore-erased applies to an archive (export --all); an AG-UI event file "
                "is appended as new writes"
            )
        try:
            result = store.import_file(
                _CountedReads(handle, progress),
                thread_id=args.thread,
                check_sequence=not args.no_sequence_check,
            )
        except InvalidEventError as e:  # where in the file, then what
            raise type(e)(f"{_shown_source(args.file)}: {e}") from None
        if not result.event_count:  # a recording that failed, most likely: say so
            raise InvalidEventError(
                f"{_shown_source(args.file)}: holds no AG-UI events; nothing was imported"
            )
    if args.json:
        _write_json(out, {"events": result.event_count, "newRuns": result.new_run_count,
                          "firstSeq": result.first_seq, "lastSeq": result.last_seq,
                          "store": store.path})
        return 0
    out.write(
        f"imported {counted(result.event_count, 'event')}, "
        f"{counted(result.new_run_count, 'run')} into {store.path}\n"
    )
    sys.stderr.write(
        "note: an AG-UI event file holds events only: the runs' lineage was inferred as "
        "append infers it, and they have no recorded inputs, branches, owners or "
        "conversations (an archive, export --all, carries them)\n"
    )
    return 0


def _shown_source(file: str) -> str:
    return "stdin" if file == "-" else printable(file)


def _first_line(handle: BinaryIO) -> bytes:
    """The file's first line that holds anything (in its first 4 KiB), read without
    consuming it (:func:`agui_store.engine.archive.first_line`)."""
    from agui_store.engine import archive

    peek = getattr(handle, "peek", None)
    return archive.first_line(bytes(peek(4096)[:4096]) if peek is not None else b"")


def _starts_an_archive(handle: BinaryIO) -> bool:
    """Whether the file's first line is an archive's header."""
    from agui_store.engine import archive

    return archive.is_archive(_first_line(handle))


def _starts_a_headless_archive(handle: BinaryIO) -> bool:
    """Whether the file's first line is an archive record other than its header."""
    from agui_store.engine import archive

    return archive.is_headless_archive(_first_line(handle))


def _archive_counts(summary: Any) -> str:
    return (
        f"{counted(summary.threads, 'thread')}, {counted(summary.runs, 'run')}, "
        f"{counted(summary.events, 'event')}, "
        f"{counted(summary.branches, 'branch', 'branches')}, "
        f"{counted(summary.conversations, 'conversation')}"
    )


class _TextSink:
    """A binary writer onto a text stream (an archive to stdout)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, data: bytes) -> int:
        return self._out.write(data.decode("utf-8", "surrogatepass"))


def _export_archive(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``export --all``: the archive of a thread (``--thread``) or of the whole store."""
    progress: Progress | None = None

    def advance(done: int, total: int) -> None:
        nonlocal progress
        if progress is None:
            progress = Progress(total, "exporting")
        progress.advance(done - progress.done)

    to_file = bool(args.output and args.output != "-")
    try:
        summary = store.export_archive(
            args.output if to_file else _TextSink(out), thread_id=args.thread, progress=advance
        )
    finally:
        if progress is not None:
            progress.finish()
    if to_file:
        sys.stderr.write(f"wrote {args.output} ({_archive_counts(summary)})\n")
    return 0


def cmd_threads(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``threads``: a table of the threads, the one written to last first, a page at a time
    (``--limit``, ``--before``): owner, runs, branches, last activity and the first words
    asked."""
    if args.at is not None and args.before is None:
        raise UsageError("--at places --before's thread: it goes with --before")
    try:
        listed = store.threads(
            recent_first=True, after=args.before, after_updated_at=args.at
        )
    except RunNotFoundError:
        raise RunNotFoundError(
            f"--before {arguments.quote(args.before)}: no such thread in {store.path}"
            + ("" if args.at is not None else " (the next page's command also gives --at, "
               "which finds the place of a thread erased since)")
        ) from None
    page = listed[: args.limit]
    rows = [_thread_row(store, thread_id) for thread_id in page]
    more = args.limit < len(listed)
    if args.json:
        _write_json(out, rows)
    elif rows:
        table = [["THREAD", "OWNER", "RUNS", "BRANCHES", "LAST ACTIVITY", "FIRST WORDS"]]
        table += [
            # The whole id, a control character as its escape: it is what --thread takes.
            [one_line(r["threadId"]), short(r["owner"] or "-", 16), str(r["runCount"]),
             str(r["branchCount"]), _when(r["lastActivity"]), short(r["firstWords"], 40)]
            for r in rows
        ]
        widths = [max(_cells(row[i]) for row in table) for i in range(len(table[0]) - 1)]
        for row in table:
            cells = [cell + " " * (width - _cells(cell)) for cell, width in zip(row, widths)]
            out.write("  ".join([*cells, row[-1]]).rstrip() + "\n")
    if more and page:
        words = ["agui-store", *_db_words(args), "threads", "--limit", str(args.limit),
                 *pasted_option("--before", page[-1])]
        if rows[-1]["lastActivity"] is not None:  # where that thread is, if it moves
            at = datetime.datetime.fromisoformat(rows[-1]["lastActivity"])
            words += ["--at", clock.shown(clock.ms_before(at))]
        if args.json:
            words.append("--json")
        sys.stderr.write("next page: " + shell_command(words, _encoding(sys.stderr)) + "\n")
    return 0


def _cells(text: str) -> int:
    """How many terminal cells ``text`` takes: a wide character (CJK, fullwidth) two, a
    combining mark or a format character none, any other one."""
    return sum(
        0 if unicodedata.combining(c) or unicodedata.category(c) in ("Me", "Mn", "Cf")
        else 2 if unicodedata.east_asian_width(c) in ("W", "F")
        else 1
        for c in text
    )


def _thread_row(store: Store, thread_id: str) -> dict[str, Any]:
    """What ``threads`` shows of one thread."""
    facts = store.thread(thread_id)
    newest = store.runs(thread_id, limit=1)
    last = newest[-1] if newest else None
    # the thread's last write, to whichever run (one still open, begun before the newest)
    activity = facts.updated_at if facts is not None else None
    words = ""
    if last is not None:  # the conversation's opening question, as its newest run holds it
        words = first_words(store.checkout(last.run_id, thread_id=thread_id).messages)
    return {
        "threadId": thread_id,
        "owner": facts.owner if facts else None,
        "runCount": facts.run_count if facts else 0,
        "branchCount": sum(1 for b in store.branches(thread_id) if not b.default),
        "createdAt": facts.created_at.isoformat() if facts and facts.created_at else None,
        "lastActivity": activity.isoformat() if activity is not None else None,
        "firstWords": words,
    }


def _when(iso: str | None) -> str:
    """An ISO time as a table shows it: to the minute, UTC."""
    if iso is None:
        return "-"
    return iso[:16].replace("T", " ")


def cmd_runs(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``runs``: the thread's runs in recorded order, one a line."""
    runs = store.runs(_the_thread(store, args))
    if args.json:
        out.write(json.dumps([r.to_json() for r in runs], indent=2) + "\n")
    else:
        for r in runs:
            out.write(run_line(r) + "\n")
    return 0


def cmd_log(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``log REF``: the run's lineage, newest first, with the first words each run asked;
    ``A..B`` and ``A...B`` as git reads them; ``--all``: every branch's; ``--graph`` draws the
    thread's run tree instead (a REF's or a range's runs alone, with one). A ``--limit``
    page that is not the last names the command for the next page on stderr."""
    args.ref, span = _one_revision(store, args.ref, args.thread)
    if args.graph and (args.limit is not None or args.cursor is not None):
        raise UsageError("--graph draws whole run trees: it takes no --limit or --cursor")
    if args.all and args.ref != "HEAD":
        raise UsageError(f"--all lists every branch's runs: it takes no REF "
                         f"({arguments.quote(args.ref)}; log REF lists one lineage)")
    if args.graph:
        # The whole tree by default, as ``git log --graph --all`` draws it: HEAD's lineage
        # alone is a line. A revision or a range draws what ``log`` lists for it.
        # Each in recorded order, oldest first (graph() draws it newest first): a listing
        # of the thread's runs is in it, and a lineage or a range, listed newest first in
        # it, is reversed.
        base = None
        if args.all or args.ref == "HEAD":
            runs = store.runs(_the_thread(store, args))
        elif span is not None:
            listed, met = _log_range(store, args, *span)
            runs = listed[::-1]
            base = met if span[2] else None  # A...B: both sides meet there, git's boundary
        else:
            runs = list(store.log(args.ref, thread_id=args.thread))[::-1]
        if args.json:
            _write_json(out, [r.to_json() for r in reversed(runs)])
            return 0
        drawn = runs if base is None else [base, *runs]
        summaries = _summaries(store, drawn)
        for line in graph(drawn, summaries, None if base is None else base.run_id):
            out.write(line + "\n")
        return 0
    left = 0  # runs a --limit left out of a listing no cursor pages
    if args.all or span is not None:
        if args.cursor is not None:
            raise UsageError("--cursor pages one lineage: it takes no range or --all")
        chain = _log_all(store, args) if span is None else _log_range(store, args, *span)[0]
        if args.limit is not None:
            chain, left = chain[: args.limit], max(0, len(chain) - args.limit)
        next_cursor = None
    else:
        page = store.log(args.ref, thread_id=args.thread, limit=args.limit, cursor=args.cursor)
        chain, next_cursor = list(page), page.next_cursor
    if args.json:
        _write_json(out, [r.to_json() for r in chain])
    else:
        for r, words in _labelled(store, chain):
            said = f'  "{short(words, 50)}"' if words else ""
            out.write(run_line(r) + one_line(said) + "\n")
    if next_cursor is not None:
        # On stderr, so that stdout stays the runs (and --json one JSON list) page by page.
        command = _next_page_command(args, chain[0].thread_id, next_cursor)
        sys.stderr.write(f"next page: {command}\n")
    if left:  # no cursor pages a merge of lineages: what the limit left out is said
        sys.stderr.write(
            f"{counted(left, 'more run')}: raise the limit (--limit, -n) to list them\n"
        )
    return 0


def _one_revision(
    store: Store, refs: Sequence[str], thread: str | None
) -> tuple[str, tuple[str, str, bool] | None]:
    """``log``'s revisions as one, with its range (``None``: one lineage): none is
    ``HEAD``; a REF and a ``^REF`` (git's exclusion, in either order) are the range
    ``REF'..REF``, its sides as given. A word that is a run's whole id is that run, whatever
    it starts with or holds."""
    excluded = [r for r in refs if r.startswith("^") and store.get_run(r, thread_id=thread) is None]
    included = [r for r in refs if r not in excluded]
    if len(included) > 1 or len(excluded) > 1:
        raise UsageError(
            "log takes one REF, and one ^REF to leave out (a run's lineage is one line: "
            "A...B lists both sides since they met, --all every branch's)"
        )
    if not excluded:
        ref = included[0] if included else "HEAD"
        return ref, _range(store, ref, thread)
    if not included:  # git lists nothing then: the lineage to leave runs out of is named
        raise UsageError(f"a ^REF leaves runs out of a REF's lineage: log HEAD {excluded[0]}")
    if _range(store, included[0], thread) is not None:
        raise UsageError(f"a range ({arguments.quote(included[0])}) takes no ^REF")
    return f"{excluded[0][1:]}..{included[0]}", (excluded[0][1:], included[0], False)


def _range(store: Store, ref: str, thread: str | None) -> tuple[str, str, bool] | None:
    """``A..B`` / ``A...B`` split, unless the whole text is a run's id. A side may hold
    ``..`` itself (a run id may): of the ways to split the text, the first whose two sides
    both name something is taken, else the first (whose error then names what is
    missing); a text of more ends than two that names nothing is a usage error.

    Raises:
        UsageError: no way to split the text names both sides, and it has three ends or
            more (``a..b..c``).
    """
    spans = arguments.split_ranges(ref)
    if not spans or store.get_run(ref, thread_id=thread) is not None:
        return None
    if len(spans) > 1:
        for span in spans:
            if _names_something(store, span[0], thread) and _names_something(
                store, span[1], thread
            ):
                return span
        if len(re.split(r"\.{2,3}", ref)) > 2:  # git: "ambiguous argument 'a..b..c'"
            raise UsageError(f"{arguments.quote(ref)} names no run, and a range has two "
                             "ends: A..B or A...B")
    return spans[0]


def _names_something(store: Store, ref: str, thread: str | None) -> bool:
    """Whether a revision names a run (or several, which a thread would tell apart)."""
    try:
        return store.get_run(ref, thread_id=thread) is not None
    except AmbiguousRunError:
        return True


def _log_range(
    store: Store, args: argparse.Namespace, a: str, b: str, symmetric: bool
) -> tuple[list[Run], Run | None]:
    """``log A..B``: the runs on B's lineage that are not on A's; ``A...B``: the runs on
    either lineage since the merge base; newest first, the thread's recorded order reversed.
    With the merge base (``None``: the lineages share no run)."""
    thread = args.thread if args.thread is not None else _thread_of_both(store, a, b)
    base = store.merge_base(a, b, thread_id=thread)
    stop = base.run_id if base is not None else None
    b_side = _until(store.log(b, thread_id=thread), stop)
    if not symmetric:
        return b_side, base
    a_side = _until(store.log(a, thread_id=thread), stop)
    seen = {r.run_id for r in b_side}
    both = b_side + [r for r in a_side if r.run_id not in seen]
    return _in_recorded_order(store, both)[::-1], base


def _thread_of_both(store: Store, a: str, b: str) -> str:
    """The thread the two sides of a range name, found without ``--thread``: a lineage
    never leaves its thread, so sides in two threads are no range."""
    (run_a,), (run_b,) = store.log(a, limit=1), store.log(b, limit=1)
    if run_a.thread_id != run_b.thread_id:
        # --thread would not help: the other side is not in the thread it names.
        raise UsageError(
            f"{arguments.quote(a)} and {arguments.quote(b)} are runs of different threads "
            f"({arguments.quote(run_a.thread_id)} and {arguments.quote(run_b.thread_id)}): a "
            "range compares runs of one thread, as a lineage never leaves its thread; diff A "
            "B (two runs, not a range) compares runs of any threads"
        )
    return run_a.thread_id


def _in_recorded_order(store: Store, runs: Sequence[Run]) -> list[Run]:
    """Runs of one thread in the order the thread recorded them, oldest first: their times
    tie for runs recorded within one millisecond, and a lineage read newest first would
    then list a parent before its child."""
    if not runs:
        return []
    position = {r.run_id: i for i, r in enumerate(store.runs(runs[0].thread_id))}
    return sorted(runs, key=lambda r: position[r.run_id])


def _until(chain: Sequence[Run], stop: str | None) -> list[Run]:
    out = []
    for run in chain:
        if run.run_id == stop:
            break
        out.append(run)
    return out


def _log_all(store: Store, args: argparse.Namespace) -> list[Run]:
    """``log --all``: every run on any branch's lineage (``main`` included), newest first."""
    thread = _the_thread(store, args)
    seen: dict[str, Run] = {}
    for b in store.branches(thread):
        for run in store.log(b.run_id, thread_id=thread):
            if run.run_id in seen:
                break  # the rest of this lineage is listed already
            seen[run.run_id] = run
    return _in_recorded_order(store, list(seen.values()))[::-1]


def _db_words(args: argparse.Namespace) -> list[str]:
    """``--db`` and the store as a printed command names it: a database URL without its
    password (the command then reads it from where libpq looks: ``PGPASSWORD``,
    ``~/.pgpass``), never echoed into a terminal's scrollback."""
    db = getattr(args, "db", None)
    if db is None:
        return []
    shown = locations.without_password(db) if locations.has_password(db) else db
    return pasted_option("--db", shown if backends.is_url(db) else db)


def _next_page_command(args: argparse.Namespace, thread_id: str, cursor: str) -> str:
    """The command line that prints the page after this one, ready to paste."""
    words = with_positional(
        ["agui-store", *_db_words(args), "log"], args.ref,
        [*pasted_option("--thread", thread_id), "--limit", str(args.limit),
         *pasted_option("--cursor", cursor), *(["--json"] if args.json else [])],
    )
    return shell_command(words, _encoding(sys.stderr))


def cmd_show(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``show REF``: the restored run as a transcript (``--json``: the checkout)."""
    try:
        co = store.checkout(args.ref, thread_id=args.thread)
    except RunNotFoundError:
        span = _range(store, args.ref, args.thread)
        if span is not None and all(_names_something(store, side, args.thread)
                                    for side in span[:2]):  # git's show A..B, a log
            raise UsageError(
                f"{arguments.quote(args.ref)} is a range, and {args.command} shows one run: "
                f"{shell_command(['agui-store', 'log', args.ref])} lists its runs, "
                f"{shell_command(['agui-store', 'diff', args.ref])} compares its ends"
            ) from None
        raise
    events = store.events(co.run.run_id, thread_id=co.run.thread_id)
    continued = _model_continued_from(store, co.run, events)
    error = run_error(co.run, events)
    if args.json:
        shown = co.to_json()
        if error is not None:
            shown["runError"] = {"message": error.message, "code": error.code}
        if continued is not None:
            shown["modelContinuedFrom"] = {
                "conversationId": continued.conversation_id, "entryId": continued.entry_id,
                "savedBy": continued.saved_by, "lineageEntry": continued.lineage_entry,
                "diverged": continued.diverged,
            }
        out.write(json.dumps(shown, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(transcript(co, error) + "\n")
        if continued is not None and continued.diverged:
            out.write(printable(_diverged_note(continued)) + "\n")
    return 0


def _model_continued_from(
    store: Store, run: Run, events: list[dict[str, Any]]
) -> Continuation | None:
    """Where the model's history began, for a run that saved pydantic-ai conversation
    entries (``None`` for any other run: read only when its ``events`` announce a save)."""
    if not any(e.get("type") == "CUSTOM" and e.get("name") == conversations.SAVED_EVENT
               for e in events):
        return None
    lineage = [r.run_id for r in store.log(run.run_id, thread_id=run.thread_id)]
    with store.reading() as tx:
        return conversations.continuation(tx, run.thread_id, lineage)


def _diverged_note(continued: Continuation) -> str:
    """What ``show`` says under a run whose model saw another history than the AG-UI log."""
    start = (f"entry {continued.entry_id}" if continued.entry_id is not None
             else "the conversation's start")
    by = f", saved by run {continued.saved_by}" if continued.saved_by else ""
    return (
        f"\nnote: the model continued from conversation {continued.conversation_id!r} at "
        f"{start}{by}, not from where this run's AG-UI lineage reached (the conversation was "
        "branched on the server): the messages above are what the client sent; the model saw "
        "the conversation's history up to that entry"
    )


def cmd_branch(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``branch NAME [REV]``: create a branch at REV (default ``HEAD``); ``--force`` moves
    one that exists; ``-m OLD NEW`` renames; ``-d NAME`` deletes; no NAME lists them.
    Each change says what it did: created, moved (from where), renamed or deleted."""
    if args.list:
        if args.delete or args.move or args.force:
            raise UsageError("--list does not go with -d, -m or -f")
        patterns = [p for p in (args.name, *args.run) if p is not None]
        return cmd_branches(store, args, out, patterns=patterns)
    if args.name is None:
        if args.delete or args.move or args.force:
            flag = "-d" if args.delete else "-m" if args.move else "-f"
            raise UsageError(f"{flag} needs a branch name")
        return cmd_branches(store, args, out)
    if args.delete and args.move:
        raise UsageError("-d and -m do not go together")
    if args.delete:
        return _delete_branches(store, args, out, [args.name, *args.run])
    if len(args.run) > 1:
        said = "-m renames one branch: agui-store branch -m OLD NEW" if args.move else (
            "a branch points at one run: agui-store branch NAME REV")
        raise UsageError(f"{said} (-d deletes several)")
    if args.move:
        if not args.run:
            raise UsageError("-m renames: agui-store branch -m OLD NEW")
        thread = _the_thread(store, args)
        new = args.run[0]
        # What -f replaces, said as -d says what it deleted: where that branch was.
        replaced = None if new == args.name else (
            {b.name: b.run_id for b in store.branches(thread) if not b.default}.get(new))
        b = store.rename_branch(args.name, new, thread_id=thread, force=args.force)
        _warn_of_runs_hidden(store, args, b.thread_id, b.name)
        return _said(out, args, "renamed", b.name, b.thread_id, run=b.run_id, was=args.name,
                     replaced=replaced)
    rev = args.run[0] if args.run else "HEAD"
    found = store.get_run(rev, thread_id=args.thread)
    if found is None:
        store.log(rev, thread_id=args.thread, limit=1)  # raises the error saying what is wrong
        raise RunNotFoundError(f"no run {arguments.quote(rev)}")
    before = {b.name: b.run_id for b in store.branches(found.thread_id) if not b.default}
    was = before.get(args.name)
    b = store.branch(args.name, found.run_id, thread_id=found.thread_id, move=args.force)
    _warn_of_runs_hidden(store, args, b.thread_id, b.name)
    if was is None:
        action = "created"
    elif was == b.run_id:
        action = "unchanged"
    else:
        action = "moved"
    return _said(out, args, action, b.name, b.thread_id, run=b.run_id, was=was)


def _warn_of_runs_hidden(store: Store, args: argparse.Namespace, thread: str, name: str) -> None:
    """A warning on stderr when a branch's name begins run ids of its thread, as git warns
    of a refname that is also an abbreviation: as a revision the name is the branch now, and
    those runs need more of their id."""
    with store.reading() as tx:
        pk = revisions.thread_row(tx, thread)[0]
        hidden = revisions.runs_begun_by(tx, pk, name) if pk else []
    if not hidden:
        return
    shown = ", ".join(arguments.quote(run_id, 40) for run_id in hidden[:3])
    more = ", ..." if len(hidden) > 3 else ""
    runs, them, ids = (("id of run", "that run", "its id") if len(hidden) == 1 else
                       ("ids of runs", "those runs", "their ids"))
    _say_line(
        f"agui-store {args.command}: warning",
        f"branch name {arguments.quote(name)} begins the {runs} {shown}{more}: as a revision "
        f"{arguments.quote(name)} names the branch, so name {them} by more of {ids}",
    )


def _delete_branches(
    store: Store, args: argparse.Namespace, out: TextIO, names: Sequence[str]
) -> int:
    """``branch -d NAME...``: each branch deleted in turn, as ``git branch -d`` does; one
    that cannot be (no such branch) is an error line, the others are still deleted, and
    the command then exits 1. ``--json``: the object of a name given alone, else a list of
    the deleted branches' objects. A name given twice deletes nothing, as git refuses two
    updates of one ref."""
    twice = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if twice is not None:
        raise UsageError(f"branch {arguments.quote(twice)} is named twice: -d deletes each "
                         "branch once; nothing was deleted")
    thread = _the_thread(store, args)
    deleted: list[dict[str, Any]] = []
    failed = False
    for name in names:
        was = {b.name: b.run_id for b in store.branches(thread)}.get(name)
        try:
            store.delete_branch(name, thread_id=thread)
        except BranchError as e:
            _say(args.command, str(e))
            failed = True
            continue
        if args.json:
            deleted.append(_branch_change("deleted", name, thread, was=was))
        else:
            _said(out, args, "deleted", name, thread, was=was)
    if args.json and (deleted or len(names) > 1):
        _write_json(out, deleted[0] if len(names) == 1 else deleted)
    return EXIT_STORE_ERROR if failed else 0


def _branch_change(action: str, name: str, thread: str, *, run: str | None = None,
                   was: str | None = None) -> dict[str, Any]:
    """What ``branch`` did, as ``--json`` gives it."""
    return {"action": action, "threadId": thread, "name": name, "runId": run, "previous": was}


def _said(out: TextIO, args: argparse.Namespace, action: str, name: str, thread: str, *,
          run: str | None = None, was: str | None = None, replaced: str | None = None) -> int:
    """What ``branch`` did, as a line or (``--json``) an object; ``replaced``: the run of
    the branch a forced rename replaced."""
    if args.json:
        change = _branch_change(action, name, thread, run=run, was=was)
        if action == "renamed":
            change["replaced"] = replaced
        _write_json(out, change)
        return 0
    if action == "created":
        line = f"created branch {name} at {run}"
    elif action == "moved":
        line = f"moved branch {name} from {was} to {run}"
    elif action == "unchanged":
        line = f"branch {name} stays at {run}"
    elif action == "renamed":
        line = f"renamed branch {was} to {name} (at {run})"
        if replaced is not None:
            line += f", replacing branch {name} (was {replaced})"
    else:
        line = f"deleted branch {name} (was {was})"
    # One line a branch (branch -d A B says several): an id's newline is its escape.
    out.write(printable(one_line(f"{line} (thread {thread})")) + "\n")
    return 0


def cmd_branches(
    store: Store, args: argparse.Namespace, out: TextIO, *, patterns: Sequence[str] = ()
) -> int:
    """``branches``: the thread's branches, ``*`` marking the default; with ``patterns``
    (``branch --list``), those whose name matches one of them, as git matches them
    (:mod:`agui_store.cli.wildmatch`)."""
    items = store.branches(_the_thread(store, args))
    if patterns:
        items = [b for b in items if any(wildmatch.matches(p, b.name) for p in patterns)]
    if args.json:
        out.write(json.dumps([b.to_json() for b in items]) + "\n")
    else:
        for b in items:
            mark = "*" if b.default else " "
            out.write(one_line(f"{mark} {b.name} -> {b.run_id}") + "\n")  # a line a branch
    return 0


#: The checks whose problems lie in data derived from the log alone, which ``rebuild``
#: drops and derives again (the tests edit each kind and rebuild).
REBUILT = frozenset({"blobs", "checkpoints", "lineage_digests", "derived"})


def cmd_check(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``check``: the store's integrity report; exit 1 on any problem (warnings do not
    fail it). When every problem lies in data derived from the log, it says that
    ``rebuild`` derives it again."""
    report = store.check()
    if args.json:
        out.write(json.dumps(report.to_json()) + "\n")
    else:
        for p in report.problems:
            out.write(f"{_in_cli_words(str(p))}\n")
        for w in report.warnings:  # legal, worth knowing: they do not fail the check
            out.write(f"warning: {_in_cli_words(str(w))}\n")

        summary = "ok" if report.ok else counted(len(report.problems), "problem")
        if report.warnings:
            summary += f", {counted(len(report.warnings), 'warning')}"
        out.write(f"{summary} ({', '.join(report.checked)})\n")
        if report.problems and all(p.check in REBUILT for p in report.problems):
            out.write(
                "every problem is in data derived from the log, and the log checks whole: "
                f"{shell_command(['agui-store', *_db_words(args), 'rebuild'], _encoding(out))}"
                " derives it again\n"
            )
        for e in report.erasures:  # what the erasure verbs took out: never damage
            when = "?" if e.erased_at is None else e.erased_at.isoformat(timespec="milliseconds")
            out.write(
                f"erasure #{e.number}: {e.verb} at {when}: {counted(e.threads, 'thread')}"
                f", {counted(e.runs, 'run')}, {counted(e.events, 'event')}, "
                f"{counted(e.conversations, 'conversation')}, {e.bytes} bytes\n"
            )
        if args.head and report.ok and report.head is not None:  # kept elsewhere, it shows
            out.write(f"head {report.head}\n")  # a cut of the newest writes (a sound store's)
    return 0 if report.ok else 1


def cmd_compact(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``compact``: write the checkpoints complete runs lack; says how many."""
    written = store.compact(args.ref, thread_id=args.thread)
    if args.json:
        _write_json(out, {"checkpointsWritten": written})
    else:
        out.write(f"wrote {counted(written, 'checkpoint')}\n")
    return 0


def cmd_rebuild(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``rebuild``: derive again from the log what was derived from it; says how much."""
    with _thread_of_owner(store, args):
        derived = store.rebuild(args.thread, scope=args.owner)
    if args.json:
        _write_json(out, {"runsDerived": derived})
    else:
        out.write(f"derived {counted(derived, 'run')} again from the log\n")
    return 0


def cmd_export(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``export REF``: a run's history as JSON, JSON Lines or SSE; ``--reconnect-stream``: the
    short stream that restores it (``--compacted``, its old name, still works for now);
    ``--all``: the whole thread; ``--sqlite``: the analysis database. ``--json`` is
    ``--format json``."""
    _refuse_what_export_cannot_honour(args)
    if args.sqlite:
        return cmd_export_sqlite(store, args, out)
    if args.json:
        if args.format not in (None, "json"):
            raise UsageError(f"--json is --format json: it cannot go with --format {args.format}")
        args.format = "json"
    fmt = args.format or ("archive" if args.all else "jsonl")
    if fmt == "archive":
        if not args.all:
            raise UsageError(
                "the archive holds whole threads: export --all (--thread T for one thread)"
            )
        return _export_archive(store, args, out)
    args.format = fmt
    events: Iterable[dict[str, Any]]
    if args.all:
        if args.json and args.thread is None and len(store.threads()) > 1:
            raise UsageError(
                "--json is --format json, which holds one thread's events: name it with "
                "--thread T (the archive of every thread is export --all without --json)"
            )
        thread = _the_thread(store, args)
        sys.stderr.write(
            f"note: --format {fmt} holds the thread's events only, not its runs' inputs, "
            "lineage, branches, owner or conversations; the archive (--format archive, the "
            "default of --all) holds everything\n"
        )
        progress = Progress(sum(r.event_count for r in store.runs(thread)), "exporting")
        events = _counted(store.thread_events(thread), progress)
    elif args.reconnect_stream or args.compacted:
        if args.compacted:
            sys.stderr.write(
                "note: --compacted is now --reconnect-stream; the old name goes in the next "
                "release\n"
            )
        events = store.reconnect_stream(args.ref, thread_id=args.thread)
    else:
        events = store.history(args.ref, thread_id=args.thread)
    chunks = serialize(events, args.format or "jsonl")
    if _to_file(args.output):
        write_file(check_target(args.output, store.path), chunks)
        sys.stderr.write(f"wrote {args.output}\n")
    else:
        for chunk in chunks:
            out.write(chunk.decode("utf-8"))
    if args.all:
        progress.finish()
    return 0


def _refuse_what_export_cannot_honour(args: argparse.Namespace) -> None:
    """A usage error for options of ``export`` that exclude each other, instead of one of
    them silently ignored."""
    ref = args.ref if args.ref != "HEAD" else None  # HEAD is also the default
    stream = "--reconnect-stream" if args.reconnect_stream or args.compacted else None
    if args.sqlite:
        given = [name for name, on in (("REF", ref), ("-o", args.output), ("--all", args.all),
                                       ("--format", args.format),
                                       ("--reconnect-stream", stream)) if on]
        if given:
            raise UsageError(f"--sqlite writes the analysis database of the store (or of "
                             f"--thread T) to OUT.db: it takes no {', '.join(given)}")
        return
    if args.replace:
        raise UsageError("--replace goes with --sqlite OUT.db")
    if args.all and (ref or stream):
        extra = "REF" if ref else stream
        raise UsageError(f"--all exports the whole thread: it takes no {extra} (export REF "
                         "for one run's history)")


def _to_file(output: str | None) -> bool:
    """Whether ``-o`` names a file (``-`` and no ``-o`` are stdout)."""
    return bool(output) and output != "-"


def _counted(events: Iterable[dict[str, Any]], progress: Progress) -> Iterator[dict[str, Any]]:
    for event in events:
        progress.advance(1)
        yield event


def cmd_diff(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``diff A B``: what differs between two runs (three-dot: each side since the merge
    base); ``diff A..B`` compares the two views directly, ``diff A...B`` each side since the
    merge base, as git reads them; coloured on a terminal unless ``NO_COLOR`` is set to
    something. Two runs may be of two threads (the diff names both); a range, as in
    ``log``, is one thread's."""
    a, b = args.a, args.b
    two_dot = args.two_dot
    if args.stat and args.json:
        raise UsageError("--stat prints a summary for people; --json prints the whole diff: "
                         "pass one of them")
    for side in (a, b) if b is not None else ():
        if _range(store, side, args.thread) is not None:
            raise UsageError(f"a range ({arguments.quote(side)}) names both sides: diff A..B "
                             "takes no second run")
    if b is None:
        span = _range(store, a, args.thread)
        if span is None:
            raise UsageError(f"diff needs two runs (A B) or a range (A..B, A...B), not just "
                             f"{arguments.quote(a)}")
        a, b, symmetric = span
        if symmetric and two_dot:
            raise UsageError(f"{arguments.quote(args.a)} compares each side since the merge "
                             "base: it takes no --two-dot (A..B compares the two views)")
        two_dot = two_dot or not symmetric
        if args.thread is None:  # a range stays in one thread, as log's does
            _thread_of_both(store, a, b)
    d = store.diff(a, b, thread_id=args.thread, mode="two-dot" if two_dot else "three-dot")
    if args.json:
        out.write(json.dumps(d.to_json(), indent=2, ensure_ascii=False) + "\n")
        return 0
    color = _in_colour(out)
    text = diff_text(d, color=color, stat=args.stat) + "\n"
    if color:
        _write_painted(out, text)
    else:
        out.write(text)
    return 0


def cmd_fork(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``fork REF``: the RunAgentInput that starts a new run from a past one, as JSON (with
    or without ``--json``: it is JSON either way)."""
    fork = store.fork(args.ref, thread_id=args.thread, run_id=args.run_id)
    out.write(json.dumps(fork, indent=2, ensure_ascii=False) + "\n")
    return 0


def cmd_demo(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``demo``: record a demo conversation with a branch, then show its graph, a transcript
    and a diff as the commands print them (``--json``: what was recorded, as JSON)."""
    import importlib.util

    from agui_store.cli.demo import record_demo

    thread, run_ids = record_demo(store)
    if args.json:
        _write_json(out, {"store": store.path, "threadId": thread, "runIds": run_ids,
                          "branches": [b.to_json() for b in store.branches(thread)]})
        return 0
    out.write(f"recorded a demo conversation into {store.path} (thread {thread})\n\n")
    out.write("$ agui-store log --graph --thread " + thread + "\n")
    runs = store.runs(thread)
    summaries = _summaries(store, runs)
    for line in graph(runs, summaries):
        out.write(line + "\n")
    out.write(f"\n$ agui-store show fahrenheit --thread {thread}\n")
    out.write(transcript(store.checkout("fahrenheit", thread_id=thread)) + "\n")
    out.write(f"\n$ agui-store diff porto fahrenheit --thread {thread}\n")
    out.write(diff_text(store.diff("porto", "fahrenheit", thread_id=thread)) + "\n")
    command = shell_command(["agui-store", "ui", *_db_words(args)[1:], "--thread", thread])
    out.write(f"\nsee it in the browser: {command}\n")
    if importlib.util.find_spec("starlette") is None:
        out.write("(the viewer needs its extra first: pip install 'agui-store[ui]')\n")
    return 0


def cmd_ui(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """Serve the web viewer (``agui_store.ui``, the ``ui`` extra) until Ctrl+C."""
    _refuse_json(args, "ui serves web pages until Ctrl+C; it prints nothing to parse")
    try:
        import uvicorn  # noqa: F401  (serve() needs it; say so before opening anything)

        from agui_store import ui
    except ImportError as e:
        raise AguiStoreError(
            f"the viewer needs the ui extra: pip install 'agui-store[ui]' ({e})"
        ) from None
    import socket

    path = args.path if args.path is not None else getattr(args, "db", None)
    _require_store_file(path if path is not None else backends.default_path())
    # uvicorn reports an address it cannot take with a log line and a bare exit: say it here.
    host = printable(args.host)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            args.host, args.port, type=socket.SOCK_STREAM
        )[0]
    except (OSError, UnicodeError) as e:
        raise AguiStoreError(
            f"cannot listen on {host}: no such address here ({getattr(e, 'strerror', e)}): "
            "pass another --host"
        ) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            fix = (
                "pass another --port (0 picks a free one)"
                if e.errno in (errno.EADDRINUSE, errno.EACCES)
                else "pass another --host"
            )
            raise AguiStoreError(
                f"cannot listen on {host}:{args.port} ({e.strerror or e}): {fix}"
            ) from None
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        sys.stderr.write(
            f"agui-store ui: listening on {args.host}: anyone who can reach it reads the store\n"
        )

    def ready(url: str) -> None:
        mode = "branches may be written" if args.allow_writes else "read-only"
        shown = path or backends.default_path()
        if is_url(shown):
            shown = locations.without_password(shown)
        out.write(f"viewer of {printable(shown)} at {url} ({mode}; Ctrl+C stops it)\n")
        out.flush()

    # uvicorn stops on Ctrl+C, then raises it again: a normal end here.
    with (
        Store(path, busy_timeout_ms=args.busy_timeout) as opened,
        contextlib.suppress(KeyboardInterrupt),
    ):
        if args.thread is not None and opened.thread(args.thread) is None:
            where = path_text(opened.path)
            raise AguiStoreError(f"no thread {printable(args.thread)!r} in {where}")
        ui.serve(
            opened, host=args.host, port=args.port, allow_writes=args.allow_writes,
            open_browser=not args.no_browser, thread_id=args.thread, ready=ready,
        )
    out.write("viewer stopped\n")
    return 0


def _write_analysis(
    store: Store, out_path: str, args: argparse.Namespace, out: TextIO
) -> int:
    """The sqlite-utils analysis export, with a progress bar over the runs on a terminal."""
    from agui_store.exports.analysis import export_sqlite

    if out_path == "-" and sys.stdout.isatty():  # as gzip: binary never goes to a terminal
        raise UsageError(
            "the analysis database is binary: it is not written to a terminal; redirect "
            "stdout to a file or a pipe, or name a file"
        )

    bar: Progress | None = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = Progress(total, f"analyzing {store.path}")
        bar.advance(done - bar.done)

    try:
        summary = export_sqlite(store, out_path, thread_id=getattr(args, "thread", None),
                                progress=progress, replace=getattr(args, "replace", False))
    finally:
        if bar is not None:
            bar.finish()
    if out_path == "-":  # stdout holds the database: what was written goes to stderr
        out = sys.stderr
    if args.json:
        out.write(json.dumps(summary.to_json()) + "\n")
    else:
        out.write(
            f"wrote {counted(summary.threads, 'thread')}, {counted(summary.runs, 'run')}, "
            f"{counted(summary.messages, 'message')} ({counted(summary.view_rows, 'row')} of "
            f"views), {counted(summary.tool_calls, 'tool call')} to {out_path}\n"
        )
    return 0


def cmd_analyze(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``analyze OUT.db``: write the datasette-friendly analysis database."""
    return _write_analysis(store, args.out, args, out)


def cmd_export_sqlite(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``export --sqlite OUT.db``: the same as ``analyze OUT.db``."""
    return _write_analysis(store, args.sqlite, args, out)


def cmd_export_artifact(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """The compacted-message-snapshot artifact of a run (``agui_store.exports.artifact``)."""
    from agui_store.exports.artifact import dumps_artifact, export_run

    artifact = export_run(store, args.ref, thread_id=args.thread)
    text = dumps_artifact(artifact)
    if args.output and args.output != "-":
        data = text.encode("utf-8")
        write_file(check_target(args.output, store.path), [data])
        if args.json:  # what was written, as analyze --json says it: the run exported, not
            # the one a moving REV (HEAD, a branch) names by now
            _write_json(out, {"output": args.output, "threadId": artifact["thread_id_ref"],
                              "runId": artifact["run_id_ref"], "bytes": len(data)})
        else:
            sys.stderr.write(f"wrote the artifact of {args.ref} to {args.output}\n")
    else:
        out.write(text)
    return 0


def cmd_validate_artifact(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """Exit 0 and ``valid``, or exit 1 and the JSON path and reason of the first problem."""
    from pathlib import Path

    from agui_store.exports.artifact import ArtifactError, load_artifact

    try:
        load_artifact(sys.stdin.buffer.read() if args.file == "-" else Path(args.file))
    except ArtifactError as e:
        if args.json:
            out.write(json.dumps({"valid": False, "path": e.path, "reason": e.reason}) + "\n")
        else:
            out.write(f"invalid: {e}\n")
        return 1
    out.write(json.dumps({"valid": True}) + "\n" if args.json else "valid\n")
    return 0


def cmd_slim(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """A run's messages, slimmed by preset (``agui_store.exports.slim``), as JSON."""
    from agui_store.exports.slim import slim

    overrides = {k: v for k, v in (("last", args.last), ("max_content", args.max_content))
                 if v is not None}
    messages = slim(store.checkout(args.ref, thread_id=args.thread), args.preset, **overrides)
    out.write(json.dumps(messages, indent=2, ensure_ascii=False) + "\n")
    return 0


def cmd_copy(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """Copy threads from SRC to DST (both are named: a ``--db`` is refused, as it could be
    taken for either)."""
    from agui_store.sync import copy

    if getattr(args, "db", None) is not None:
        raise UsageError("both stores are named, SRC and DST: --db names neither (leave it "
                         "out)")

    progress: Progress | None = None

    def advance(done: int, total: int) -> None:
        nonlocal progress
        if progress is None:
            progress = Progress(total, "copying")
        progress.advance(done - progress.done)

    wait = args.busy_timeout
    try:
        with (
            opened(args.src, must_exist=True, busy_timeout_ms=wait) as source,
            opened(args.dst, must_exist=False, busy_timeout_ms=wait) as target,
        ):
            result = copy(
                source, target, thread_id=args.thread, force=args.force, progress=advance,
                restore_erased=args.restore_erased,
            )
    finally:
        if progress is not None:
            progress.finish()
    if args.json:
        out.write(
            json.dumps(
                {
                    "threads": result.threads,
                    "threadsCreated": result.threads_created,
                    "runs": result.runs,
                    "events": result.events,
                    "runsPresent": result.runs_present,
                    "runsExtended": result.runs_extended,
                    "branches": result.branches,
                    "conversations": result.conversations,
                    "erased": result.erased,
                    "leftErased": result.left_erased,
                    "erasedConversations": result.erased_conversations,
                }
            )
            + "\n"
        )
        return 0
    extended = f", {counted(result.runs_extended, 'run')} completed" if result.runs_extended else ""
    out.write(
        f"copied {counted(result.threads, 'thread')}, {counted(result.runs, 'run')}, "
        f"{counted(result.events, 'event')}{extended}, "
        f"{counted(result.branches, 'branch', 'branches')}, "
        f"{counted(result.conversations, 'conversation')} "
        f"({counted(result.runs_present, 'run')} already present)\n"
    )
    if result.erased or result.erased_conversations or result.left_erased:
        out.write(
            f"erased {counted(result.erased, 'thread')} and "
            f"{counted(result.erased_conversations, 'conversation')} the source had erased; "
            f"left {counted(result.left_erased, 'thread')} the destination had erased "
            "(--restore-erased copies them back)\n"
        )
    return 0


# --- erasure: delete and prune (docs/guides/erasure.md) ---------------------------------------

#: ``--older-than`` units: seconds, minutes, hours, days, weeks.
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def age(text: str) -> datetime.timedelta:
    """``--older-than``'s value: a number and a unit (``90d``, ``12h``, ``30m``, ``2w``,
    ``45s``)."""
    number, unit = text[:-1], text[-1:]
    if unit not in _AGE_UNITS or not (number.isascii() and number.isdigit()):
        raise argparse.ArgumentTypeError(
            f"{arguments.quote(text, 40)} is not an age: a whole number and a unit, s, m, h, "
            "d or w (90d)"
        )
    seconds = int(number) * _AGE_UNITS[unit]
    if seconds > _AGE_MOST:
        raise argparse.ArgumentTypeError(
            f"{arguments.quote(text, 40)} is too long an age: at most {_AGE_MOST // 86400}d"
        )
    return datetime.timedelta(seconds=seconds)


def _age_text(older: datetime.timedelta) -> str:
    """An age as ``--older-than`` takes it, in its largest whole unit (``90d``, ``1s``)."""
    seconds = int(older.total_seconds())
    if seconds == 0:
        return "0s"
    unit, size = next((u, n) for u, n in reversed(_AGE_UNITS.items()) if seconds % n == 0)
    return f"{seconds // size}{unit}"


#: The longest age ``--older-than`` takes: what a ``timedelta`` holds, in whole days.
_AGE_MOST = datetime.timedelta.max.days * 86400


def output_path(text: str) -> str:
    """``-o``'s value: a path, or ``-`` for stdout; not empty."""
    if not text:
        raise argparse.ArgumentTypeError(
            "expected a file path (or - for stdout), not an empty string"
        )
    return text


def input_path(text: str) -> str:
    """A file the command reads (``import FILE``), or ``-`` for stdin; not empty (an unset
    shell variable, which would read as the folder ``.`` or as a file with no name)."""
    if not text:
        raise argparse.ArgumentTypeError(
            "expected a file path (or - for stdin), not an empty string"
        )
    return text


def _utf8_word(text: str) -> str:
    """``text``, a word of the command line, unless it holds bytes that are not UTF-8 (the
    shell passes bytes; Python reads each one that is not UTF-8 as a lone surrogate, a
    thing the user never typed): then a usage error naming the word as bash reads it back
    (``$'r\\xff'``), since no id a store holds is such text."""
    if arguments.storable_text(text):
        return text
    typed = "".join(
        f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF  # a byte, escaped
        else "\\" + c if c in "\\'" else printable(one_line(c)) for c in text[:100]
    )
    cut = f"… ({len(text)} characters)" if len(text) > 100 else ""
    raise argparse.ArgumentTypeError(
        f"$'{typed}'{cut} is not valid UTF-8 text (bytes of another encoding); the ids and "
        "names a store holds are UTF-8"
    )


def revision(text: str) -> str:
    """A revision given as a word (``show REF``, ``diff A B``, ``branch NAME REV``): UTF-8
    text."""
    return _utf8_word(text)


def thread_name(text: str) -> str:
    """``--thread``'s value: a thread id, not empty."""
    if not text:
        raise argparse.ArgumentTypeError("expected a thread id, not an empty string")
    return _utf8_word(text)


def run_name(text: str) -> str:
    """A run id an option names (``log --cursor``): not empty."""
    if not text:
        raise argparse.ArgumentTypeError("expected a run id, not an empty string")
    return _utf8_word(text)


def owner_name(text: str) -> str:
    """``--owner``'s value: an owner's name, not empty, that a store can hold (the library
    would refuse it naming its ``scope`` keyword, which the command line does not have)."""
    if not text:
        raise argparse.ArgumentTypeError("expected an owner's name, not an empty string")
    reason = arguments.unstorable(_utf8_word(text))
    if reason is not None:
        raise argparse.ArgumentTypeError(f"{arguments.quote(text)} {reason}")
    return text


@contextlib.contextmanager
def _thread_of_owner(store: Store, args: argparse.Namespace) -> Iterator[None]:
    """A ``--thread`` that ``--owner`` does not hold is told as missing for that owner: the
    library's error says only that the store has no such thread, which reads as untrue to
    a user who sees it listed."""
    try:
        yield
    except RunNotFoundError:
        if args.thread is None or args.owner is None:
            raise
        raise RunNotFoundError(
            f"no thread {arguments.quote(args.thread)} of owner {arguments.quote(args.owner)} "
            f"(--owner) in {path_text(store.path)}"
        ) from None


def _erase(
    args: argparse.Namespace, out: TextIO, what: str, erase: Callable[[bool], ErasureReceipt]
) -> int:
    """Run an erasure verb: a dry run to say what goes, then, with ``--yes`` or a yes on a
    terminal, the erasure. Without ``--yes`` and without a terminal to ask on, nothing is
    erased (exit 2)."""
    if not args.dry_run and not args.yes:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise UsageError(f"refusing to erase {what} without --yes (no terminal to ask "
                             "on); nothing was erased")
        planned = erase(True)
        sys.stderr.write(f"{str(planned).replace('would erase', 'this erases', 1)}, "
                         f"for good. Erase {what}? [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            _say(args.command, "nothing was erased")
            return EXIT_STORE_ERROR
    receipt = erase(args.dry_run)
    out.write((json.dumps(receipt.to_json()) if args.json else str(receipt)) + "\n")
    return EXIT_OK


def cmd_delete(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``delete --thread T`` or ``delete --owner S``: erase a thread, or everything an owner
    has (see :meth:`agui_store.Store.delete_thread` and ``delete_owner``)."""
    if (args.thread is None) == (args.owner is None):
        raise UsageError("name what to erase: --thread T or --owner S (one of them)")
    if args.thread is not None:
        thread = args.thread
        return _erase(args, out, f"thread {printable(thread)!r}",
                      lambda dry: store.delete_thread(thread, dry_run=dry))
    owner = args.owner
    return _erase(args, out, f"everything of owner {printable(owner)!r}",
                  lambda dry: store.delete_owner(owner, dry_run=dry))


def cmd_prune(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``prune --older-than 90d``: erase every thread (of ``--owner``) idle for longer, and
    every pydantic-ai conversation last saved before then that no staying thread holds
    (see :meth:`agui_store.Store.prune`)."""
    older, owner = args.older_than, args.owner
    # The cutoff is taken once: the erasure a person agrees to on the terminal is the one
    # the question counted, not one that also takes the threads gone idle while it waited.
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        before = now - older
    except OverflowError:  # further back than a datetime goes: before every thread
        before = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    return _erase(args, out, "every thread and conversation idle for longer than "
                  f"{_age_text(older)}" + (f" of owner {printable(owner)!r}" if owner else ""),
                  lambda dry: store.prune(before=before, scope=owner, dry_run=dry))


def cmd_purge(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``purge``: finish the physical purge of erasures already committed (see
    :meth:`agui_store.Store.purge`), one that a receipt or a copy said was not finished;
    exit 1 while it still is not."""
    pending = "" if store.purge(rewrite=args.rewrite) else store.purge_pending
    if args.json:
        _write_json(out, {"purged": not pending, "purgePending": pending})
    else:
        out.write(f"purge not finished: {pending}\n" if pending else "purged\n")
    return EXIT_STORE_ERROR if pending else EXIT_OK


def _erasure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="say what would be erased; erase nothing")
    parser.add_argument("--yes", "-y", action="store_true",
                        help="erase without asking (needed without a terminal)")
# --- search -------------------------------------------------------------------------------


def cmd_search(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``search WORD...``: the messages the query finds, newest first, one a line: thread,
    run, role (and tool), snippet with the matched words marked (bold on a terminal,
    ``[like this]`` otherwise; ``--json``: ``{"hits": [...], "nextCursor": ...}``, the
    cursor ``--cursor`` continues after, ``null`` on the last page). A full page names the
    command for the next one on stderr."""
    if not args.query:
        raise UsageError("give the words to find: agui-store search porto hotel")
    # Words given apart are one query, as if quoted together (the shell took the quotes).
    query = " ".join(args.query)
    with _thread_of_owner(store, args):
        hits = store.search(query, thread_id=args.thread, scope=args.owner, limit=args.limit,
                            cursor=args.cursor)
    if args.json:
        document = {"hits": hits.to_json(), "nextCursor": hits.next_cursor}
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        bold = _in_colour(out)
        marks = ("\033[1m", "\033[0m") if bold else ("[", "]")
        for hit in hits:
            _write_painted(out, hit.line(*marks) + "\n")
    if hits.next_cursor is not None:
        options = ["--limit", str(args.limit), *pasted_option("--cursor", hits.next_cursor),
                   *_db_words(args)]
        for option, value in (("--thread", args.thread), ("--owner", args.owner)):
            if value is not None:
                options += pasted_option(option, value)
        options += ["--json"] if args.json else []
        words = with_positional(["agui-store", "search"], query, options)
        command = shell_command(words, _encoding(sys.stderr))
        sys.stderr.write(f"next page: {command}\n")
    return 0


def _query_words(
    query: list[str], extra: list[str], after_dashes: list[str]
) -> tuple[list[str], list[str]]:
    """``(the query's words, the words left unrecognized)`` of what argparse left over from
    a search: it takes the query's words once, so those after ``--`` are left when an option
    came between them and the first ones (``porto --limit 1 -- -hotel``); and a quoted query
    that begins with ``-h`` (``'-hotel porto'``) reads to it as ``-h``. A word with a space
    in it is never an option's name."""
    words, left = list(query), []
    for word in extra:
        if word in after_dashes or (word.startswith("-") and any(c.isspace() for c in word)):
            words.append(word)
        elif word != "--" or not after_dashes:
            left.append(word)
    return words, left


def _search_arguments(p: argparse.ArgumentParser) -> None:
    # Any number here, so that a query of -words alone is told where they go (argparse
    # would take them for options and say only that a WORD is missing).
    p.add_argument("query", metavar="WORD", nargs="*",
                   help='the query: words (all must match), "a phrase", prefix*, -word to '
                   "leave out; given apart or quoted together (a -word after --: porto -- "
                   "-hotel)")
    p.add_argument("--thread", type=thread_name, help="only this thread")
    p.add_argument("--owner", metavar="SCOPE", type=owner_name, help="only this owner's threads")
    p.add_argument("--limit", type=_count_option(1, most=search_index.MAX_LIMIT), default=20,
                   metavar="N", help=f"at most N hits, up to {search_index.MAX_LIMIT:,} "
                   "(default: 20)")
    p.add_argument("--cursor", type=search_cursor,
                   help="continue after the page that gave this cursor")


COMMANDS: dict[str, tuple[Callable[[Store, argparse.Namespace, TextIO], int], str]] = {
    "import": (cmd_import, "record events from a JSON, JSON Lines or SSE file"),
    "threads": (cmd_threads, "list threads"),
    "runs": (cmd_runs, "list a thread's runs in recorded order"),
    "log": (cmd_log, "a run's lineage, newest first (--graph: the thread's run tree, or "
            "REF's)"),
    "show": (cmd_show, "restore a run: transcript and state (--json for machines)"),
    "branch": (cmd_branch, "point a branch at a run (--delete to remove it)"),
    "branches": (cmd_branches, "list a thread's branches"),
    "diff": (cmd_diff, "compare two runs: each side since their merge base (or --two-dot)"),
    "fork": (cmd_fork, "print the RunAgentInput that starts a new run from a past one"),
    "compact": (cmd_compact, "write checkpoints for complete runs that lack one"),
    "rebuild": (cmd_rebuild, "derive again from the log what was derived from it (checkpoints, "
                "lineage digests, search rows): what check reports as differing from the log"),
    "export": (cmd_export, "a run's history, or the stream that restores it, as JSON/JSONL/SSE"),
    "check": (cmd_check, "check the store's integrity (exit 1 on any problem)"),
    "demo": (cmd_demo, "record a demo conversation with a branch and show it"),
    "analyze": (cmd_analyze, "write a separate, datasette-friendly SQLite database of threads, "
                "runs, views and tool calls (sqlite-utils), with full-text search"),
    "export-artifact": (cmd_export_artifact, "a finished run as an "
                        "ag-ui.compacted-message-snapshot.export.v1 artifact (JSON)"),
    "validate-artifact": (cmd_validate_artifact, "check a compacted-message-snapshot artifact "
                          "(exit 0: valid; exit 1: the path and reason)"),
    "slim": (cmd_slim, "a run's messages, slimmed for bandwidth or privacy (JSON)"),
    "copy": (cmd_copy, "copy threads from store SRC to store DST (files or postgresql:// URLs): "
             "only what DST lacks, losslessly, refusing runs that differ"),
    "delete": (cmd_delete, "erase a thread (--thread) or everything an owner has (--owner), "
               "for good: log, derived data, linked conversations"),
    "prune": (cmd_prune, "erase every thread and pydantic-ai conversation idle for longer "
              "than --older-than (required: 90d, 12h, ...); a thread with a run still open "
              "stays"),
    "purge": (cmd_purge, "finish the physical purge of erasures (a receipt or a copy that "
              "said it was not finished): SQLite rewrites the file, PostgreSQL vacuums "
              "(--rewrite: rewrites the tables)"),
    "search": (cmd_search, "find messages by their words, newest first, in every thread"),
    "ui": (cmd_ui, "serve a local web viewer of the store (threads, run trees, runs, diffs, "
           "forks) and open it in the browser; needs the ui extra"),
}


#: Commands that work on files alone: no store is opened (or created) for them.
NEEDS_NO_STORE = frozenset({"validate-artifact", "copy", "ui"})
#: The commands that write the store: Ctrl-C says what became of their transaction.
WRITES_THE_STORE = frozenset(
    {"import", "branch", "compact", "rebuild", "demo", "copy", "delete", "prune", "purge"}
)
#: The commands that may create the store file; every other one needs it to exist, so that a
#: mistyped ``--db`` is an error instead of a new empty store left behind.
CREATES_STORE = frozenset({"import", "demo"})


class _UsageError(SystemExit):
    """A usage error argparse found: ``main`` says it in one line, with what the words
    typed suggest (:func:`_usage_line`), and exits 2."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(EXIT_USAGE)
        self.prog, self.message = prog, message


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line: what is wrong and where to read more."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The destinations of the words the command takes without an option (its REFs, its
        #: FILE): a command with none reads every other word as a mistake.
        self.positionals: list[str] = []

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """argparse's, with a positional's destination kept in :attr:`positionals`."""
        action = super().add_argument(*args, **kwargs)
        if not action.option_strings:
            self.positionals.append(action.dest)
        return action

    def error(self, message: str) -> NoReturn:
        """Raise the usage error for ``main`` to say."""
        raise _UsageError(self.prog, message)

    def print_help(self, file: Any = None) -> None:
        """argparse's, except that help stdout cannot take (``--help > /dev/full``, or stdout
        closed) fails the command, as git's does (argparse ignores the failed write)."""
        _print_out(self.prog, self.format_help(), file)

    def print_usage(self, file: Any = None) -> None:
        """argparse's, written as :meth:`print_help` writes."""
        _print_out(self.prog, self.format_usage(), file)


class _Version(argparse.Action):
    """``--version``: argparse's, written as help is (:func:`_print_out`)."""

    def __init__(self, option_strings: Sequence[str], version: str, dest: str = "version",
                 help: str = "show program's version number and exit") -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)
        self.version = version

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _print_out(parser.prog, self.version + "\n", None)
        parser.exit()


def _print_out(prog: str, message: str, file: Any) -> None:
    """Help or a version, on ``file`` (``None``: stdout): one that stdout cannot take fails
    the command (:class:`_Unwritten`); a reader gone away (``--help | head -1``) is no error
    (``BrokenPipeError``, which ``main`` ends in silence)."""
    if file is not None and file is not sys.stdout:
        file.write(message)
        return
    printed = _Printable(cast(TextIO, sys.stdout or _ClosedStdout()))
    try:
        printed.write(message)
        printed.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise _Unwritten(prog, str(e.strerror or e)) from e


class _Unwritten(Exception):
    """Help or a version that stdout could not take: ``main`` says it and exits 1."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog, self.message = prog, message


def _usage_line(error: _UsageError, words: Sequence[str]) -> str:
    """The one line of a usage error: argparse's words, and where to read more. An option
    whose value begins with ``-`` (``--older-than -5d``, ``--thread -t``) lost it to
    argparse, which reads it as an option: the line says how to give it."""
    hint = f"usage: {error.prog} --help"
    wanted = re.fullmatch(r"argument (\S+): expected one argument", error.message)
    if wanted:
        names = wanted.group(1).split("/")
        long = next((name for name in names if name.startswith("--")), None)
        after = [words[i + 1] for i, word in enumerate(words[:-1]) if word in names]
        if long and after and after[0].startswith("-") and after[0] != "--":
            typed = shell_command([f"{long}={after[0]}"])
            hint = f"a value that begins with - goes after =: {typed}; {hint}"
    return f"{error.message} ({hint})"


def _moment(text: str) -> datetime.datetime:
    """An argparse type: an ISO 8601 time (``Z`` for UTC too; no zone: UTC)."""
    try:
        return clock.parse_moment(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO time (2026-01-31T09:30:00.123+00:00), not {arguments.quote(text, 40)}"
        ) from None


def _host(text: str) -> str:
    """``ui --host``: an address or a name, not empty (an empty host listens everywhere)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected an address or a host name, not an empty string")
    return text


def _count_option(minimum: int, most: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (and at most ``most``), a usage
    error otherwise."""
    expected = (
        f"an integer >= {minimum}" if most is None else f"an integer from {minimum} to {most:,}"
    )

    def parse(text: str) -> int:
        try:
            # ASCII digits, as git reads a count: int() also takes "1_0", "+3", " 7" and
            # the digits of other scripts (Arabic-Indic, fullwidth).
            if not (text.isascii() and text.lstrip("-").isdigit()):
                raise ValueError(text)
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {expected}, not {arguments.quote(text, 40)}"
            ) from None
        if value < minimum or (most is not None and value > most):
            raise argparse.ArgumentTypeError(f"expected {expected}, not {value}")
        return value

    parse.__name__ = expected
    return parse


def search_cursor(text: str) -> str:
    """``search --cursor``: the cursor of the next page a page of hits named (digits)."""
    try:
        search_index.parse_cursor(text)
    except InvalidArgumentError:
        shown = arguments.quote(text, 40)
        if text.isascii() and text.isdigit():  # digits, past every cursor
            said = f"expected the cursor a page of hits gave, not {shown}, which is past " \
                f"every cursor (at most {search_index.LARGEST_CURSOR})"
        else:
            said = f"expected the cursor a page of hits gave (digits), not {shown}"
        raise argparse.ArgumentTypeError(said) from None
    return text


#: The longest ``--busy-timeout`` (some 24 days).
MAX_BUSY_TIMEOUT_MS = backends.MAX_BUSY_TIMEOUT_MS


#: Other names of commands: git's verb for restoring a run.
ALIASES = {"show": ["checkout"]}
ALIAS_OF = {alias: name for name, aliases in ALIASES.items() for alias in aliases}
#: What an alias's help says it does: git's checkout moves HEAD and the work tree, and a
#: git user reading show's words under checkout's name would take it for that.
ALIAS_DESCRIPTIONS = {
    "checkout": "another name for show: print a run as Store.checkout restores it, its "
    "transcript and state (--json for machines); nothing in the store moves, no branch and "
    "no HEAD, as nothing in a git repository moves on git show",
}


def _common_options() -> _Parser:
    """The options every command takes, before it or after it."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--db", default=argparse.SUPPRESS, metavar="PATH",
        help="store file or postgresql:// URL "
        f"(default: ${backends.DEFAULT_DB_ENV} or ./{backends.DEFAULT_DB_NAME})",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output")
    common.add_argument(
        "--busy-timeout", type=_count_option(0, most=MAX_BUSY_TIMEOUT_MS),
        default=argparse.SUPPRESS, metavar="MS",
        help="how long to wait for another writer before giving up "
        f"(default: {backends.DEFAULT_BUSY_TIMEOUT_MS})",
    )
    return common


def _top_parser(common: argparse.ArgumentParser, *, add_help: bool = True) -> _Parser:
    """``agui-store`` with the options it takes before the command, and no command yet."""
    from agui_store import __version__

    parser = _Parser(
        prog="agui-store", parents=[common], add_help=add_help,
        description="Keep AG-UI conversations in one SQLite file (or PostgreSQL), like git "
        "keeps code.",
    )
    parser.add_argument("--version", action=_Version, version=f"agui-store {__version__}")
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``agui-store`` argument parser: one subcommand per entry of :data:`COMMANDS`."""
    common = _common_options()
    parser = _top_parser(common)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {}
    for name, (_, help_text) in COMMANDS.items():
        parsers[name] = sub.add_parser(
            name, parents=[common], help=help_text, description=help_text,
            epilog=f"example: {EXAMPLES[name]}",
        )
        # An alias is a parser of its own (argparse's aliases share the command's parser,
        # whose usage and errors would name the command), listed next to it.
        for alias in ALIASES.get(name, []):
            parsers[alias] = sub.add_parser(
                alias, parents=[common], help=f"the same as {name}",
                description=ALIAS_DESCRIPTIONS[alias],
                epilog=f"example: {EXAMPLES[name].replace(f' {name} ', f' {alias} ', 1)}",
            )
    p = parsers["import"]
    p.add_argument("file", metavar="FILE", type=input_path,
                   help="a .json, .jsonl or .sse recording (- for stdin)")
    p.add_argument("--thread", type=thread_name, help="thread id for events that start no run")
    p.add_argument("--no-sequence-check", action="store_true",
                   help="keep well-formed but out-of-sequence streams")
    p.add_argument("--restore-erased", action="store_true",
                   help="import an archive's threads this store erased (else they are left out)")
    p = parsers["threads"]
    p.add_argument("--limit", type=_count_option(1), default=50, metavar="N",
                   help="at most N threads, newest first (default: 50); stderr says the "
                   "command for the next page")
    p.add_argument("--before", metavar="THREAD", type=thread_name,
                   help="the page after this thread (the next page's command gives it)")
    p.add_argument("--at", metavar="TIME", type=_moment,
                   help="--before's thread's last activity as the page before listed it (an "
                   "ISO time, as lastActivity in --json): a page after a thread written to "
                   "or erased since starts where it was")
    for name in ("runs", "branches"):
        parsers[name].add_argument("--thread", type=thread_name, help=_THREAD_HELP)
        # The positional form came first; it still works, with a note on stderr.
        parsers[name].add_argument("thread_id", nargs="?", metavar="THREAD", type=_utf8_word,
                                    help=argparse.SUPPRESS)
    for name in ("show", *ALIASES["show"]):
        parsers[name].add_argument("ref", type=revision, nargs="?", metavar="REF", default="HEAD",
                                   help=_REV_HELP)
        parsers[name].add_argument("--thread", type=thread_name, help=_THREAD_HELP)
    # log B ^A is git's A..B: a REF and a ^REF, in either order.
    parsers["log"].add_argument("ref", type=revision, nargs="*", metavar="REF",
                                help=_REV_HELP + ", A..B, A...B; B ^A (as A..B)")
    parsers["log"].add_argument("--thread", type=thread_name, help=_THREAD_HELP)
    parsers["log"].add_argument(
        "--graph", action="store_true",
        help="draw the run tree: the thread's whole tree, or REF's lineage (A...B: both sides)")
    parsers["log"].add_argument("--all", action="store_true",
                                help="the runs of every branch's lineage, newest first")
    parsers["log"].add_argument(
        "--limit", type=_count_option(1), metavar="N",
        help="at most N runs; when the lineage goes on, stderr says the command for the next "
        "page (its --cursor)")
    parsers["log"].add_argument("-n", "--max-count", type=_count_option(1), metavar="N",
                                dest="limit", help="git's names of --limit (-N too: -3)")
    parsers["log"].add_argument(
        "--oneline", action="store_true",
        help="git's habit, taken: the log shows one line a run already")
    parsers["log"].add_argument(
        "--cursor", metavar="RUN", type=run_name,
        help="start the page at this run of the thread (the cursor the page before gave)")
    p = parsers["diff"]
    p.add_argument("a", type=revision, metavar="A",
                   help=_REV_HELP + "; or a range A..B (two-dot), A...B")
    p.add_argument("b", type=revision, metavar="B", nargs="?", help=_REV_HELP)
    p.add_argument("--thread", type=thread_name, help=_THREAD_HELP)
    p.add_argument("--stat", action="store_true", help="counts only")
    p.add_argument("--two-dot", action="store_true", help="compare the two views directly")
    p = parsers["fork"]
    p.add_argument("ref", type=revision, nargs="?", metavar="REF", default="HEAD", help=_REV_HELP)
    p.add_argument("--thread", type=thread_name, help=_THREAD_HELP)
    p.add_argument("--run-id", type=run_name,
                   help="id for the new run, not one the thread has (default: a new UUID)")
    p = parsers["compact"]
    p.add_argument("ref", type=revision, nargs="?", metavar="REF",
                   help="a run (and its ancestors); default: everything")
    p.add_argument("--thread", type=thread_name, help="only this thread")
    p = parsers["rebuild"]
    p.add_argument("--thread", type=thread_name, help="only this thread (default: every thread)")
    p.add_argument("--owner", metavar="SCOPE", type=owner_name, help="only this owner's threads")
    p = parsers["export"]
    p.add_argument("ref", type=revision, nargs="?", metavar="REF", default="HEAD", help=_REV_HELP)
    p.add_argument("--thread", type=thread_name, help=_THREAD_HELP)
    p.add_argument("--all", action="store_true",
                   help="everything of the thread (--thread), or of every thread, as an "
                   "archive (lossless); with --format json/jsonl/sse: the thread's events")
    p.add_argument("--reconnect-stream", action="store_true",
                   help="the short stream that restores the run (what a reconnecting client gets)")
    p.add_argument("--compacted", action="store_true",
                   help="deprecated name of --reconnect-stream")
    p.add_argument("--format", choices=(*FORMATS, "archive"), default=None,
                   help="AG-UI events as json, jsonl (the default; --json: json) or sse; "
                   "archive: the lossless format (the default of --all)")
    p.add_argument("--output", "-o", type=output_path, help=_OUTPUT_HELP)
    p.add_argument("--sqlite", metavar="OUT.db", type=output_path,
                   help="write a datasette-friendly analysis database (sqlite-utils) instead "
                   "(- for stdout)")
    p.add_argument("--replace", action="store_true", help="with --sqlite: overwrite OUT.db")
    p = parsers["branch"]
    p.add_argument("name", type=revision, metavar="NAME", nargs="?",
                   help="the branch name (none: list the branches)")
    p.add_argument("run", type=revision, nargs="*", metavar="REV",
                   help="where the branch points: " + _REV_HELP + " (default: HEAD); with -m, "
                   "the new name; with -d, more branches to delete; with --list, more patterns")
    p.add_argument("--thread", type=thread_name, help=_THREAD_HELP)
    p.add_argument("--force", "-f", action="store_true",
                   help="move a branch that exists (with -m: replace one named NEW)")
    p.add_argument("--move", "-m", action="store_true",
                   help="rename: agui-store branch -m OLD NEW")
    p.add_argument("--delete", "-d", "-D", action="store_true", help="delete the branch")
    p.add_argument("--list", "-l", action="store_true",
                   help="list the branches, those whose name matches NAME (a pattern: "
                   "feature/*) alone with one")
    p = parsers["analyze"]
    p.add_argument("out", metavar="OUT.db", type=output_path,
                   help="the analysis database to write (not the "
                   "store; - for stdout; a device or FIFO is written to)")
    p.add_argument("--thread", type=thread_name, help="only this thread")
    p.add_argument("--replace", action="store_true", help="overwrite OUT.db if it is not empty")
    p = parsers["export-artifact"]
    p.add_argument("ref", type=revision, nargs="?", metavar="REF", default="HEAD", help=_REV_HELP)
    p.add_argument("--thread", type=thread_name, help=_THREAD_HELP)
    p.add_argument("--output", "-o", type=output_path, help=_OUTPUT_HELP)
    parsers["validate-artifact"].add_argument("file", metavar="FILE", type=input_path,
                                              help="the artifact (JSON); - for stdin")
    p = parsers["copy"]
    p.add_argument("src", metavar="SRC", help="the store to copy from (it must exist)")
    p.add_argument("dst", metavar="DST", help="the store to copy to (created if missing)")
    p.add_argument("--thread", type=thread_name, help="only this thread")
    p.add_argument("--force", action="store_true",
                   help="a branch DST holds off SRC's lineage takes SRC's tip, and a "
                   "conversation both saved takes SRC's record (runs never move)")
    p.add_argument("--restore-erased", action="store_true",
                   help="copy threads DST erased back into it (else they stay erased)")
    parsers["check"].add_argument(
        "--head", action="store_true",
        help="also print the log's head (on a sound store), to keep outside the store: a later "
        "check that no longer shows it tells that the newest writes were cut")
    p = parsers["delete"]
    p.add_argument("--thread", type=thread_name, help="the thread to erase")
    p.add_argument("--owner", metavar="SCOPE", type=owner_name,
                   help="the owner whose everything to erase "
                   "(instead of --thread)")
    _erasure_options(p)
    p = parsers["prune"]
    p.add_argument("--older-than", type=age, required=True, metavar="AGE",
                   help="erase threads with no activity for longer: 90d, 12h, 30m, 2w, 45s")
    p.add_argument("--owner", metavar="SCOPE", type=owner_name, help="only this owner's threads")
    _erasure_options(p)
    parsers["purge"].add_argument(
        "--rewrite", action="store_true",
        help="PostgreSQL: write the tables erasures delete from again, with their indexes "
        "(VACUUM FULL, locking each while it is copied), so no index key or freed space "
        "keeps erased bytes (SQLite's purge always rewrites)")
    p = parsers["ui"]
    p.add_argument("path", metavar="DB", nargs="?",
                   help="the store: a file or a postgresql:// URL (default: --db, "
                   f"${backends.DEFAULT_DB_ENV} or ./{backends.DEFAULT_DB_NAME})")
    p.add_argument("--host", default="127.0.0.1", type=_host,
                   help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_count_option(0, 65535), default=8642,
                   help="port (default: 8642; 0: any free one)")
    p.add_argument("--allow-writes", action="store_true",
                   help="let the pages create and move branches (nothing else is ever written)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--thread", type=thread_name, help="open the browser on this thread's run tree")
    _search_arguments(parsers["search"])
    p = parsers["slim"]
    p.add_argument("ref", type=revision, nargs="?", metavar="REF", default="HEAD", help=_REV_HELP)
    p.add_argument("--thread", type=thread_name, help=_THREAD_HELP)
    p.add_argument("--preset", choices=("minimal", "standard", "full"), default="standard",
                   help="minimal: last 10, 200 chars, tool args redacted, tool results omitted; "
                   "standard: last 50, 1000 chars; full: unchanged")
    p.add_argument("--last", type=_count_option(0), metavar="N",
                   help="keep the most recent N messages")
    p.add_argument("--max-content", type=_count_option(1), metavar="N",
                   help="cut message content at N characters (the … marker included)")
    # Each command's options (an alias's too): what a mistyped option is compared with, and
    # what an option given before its command is looked up in (agui-store --thread T log).
    parser.set_defaults(command_options={
        name: tuple(re.findall(r"--[a-z][a-z-]*", p.format_usage()))
        for name, p in parsers.items()
    }, command_positionals={name: tuple(p.positionals) for name, p in parsers.items()})
    return parser


_REV_HELP = "a run id or its prefix, a short hash, a branch, HEAD (@), REV~n, REV^"
_THREAD_HELP = "the thread (default: the store's only thread; needed when it holds several)"
_OUTPUT_HELP = ("file to write (default and -: stdout); a device or FIFO is written to, a "
                "symlink through")


#: What the exit status means (docs/reference/cli.md). Every failure prints one line on
#: stderr, ``agui-store COMMAND: what and where``; never a traceback.
EXIT_OK = 0
EXIT_STORE_ERROR = 1  # a store error (bad input, a damaged or foreign file, a full disk...),
#                       or a command's negative answer: check found problems, an invalid artifact
EXIT_USAGE = 2  # argparse: unknown command or option, missing argument
EXIT_INTERNAL = 3  # an unexpected error inside agui-store: a bug to report
# EXIT_INTERRUPTED (130, Ctrl-C) and 128 + the signal for SIGTERM and SIGHUP come from
# agui_store.cli, which answers them before this module has loaded.

#: Set (to anything) to print the traceback of an internal error after its one line.
DEBUG_ENV = "AGUI_STORE_DEBUG"

#: Longest message printed: errors name places, they do not echo megabytes of input back.
MAX_MESSAGE = 500


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; its exit code.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
        out: where the command writes (default: stdout); errors go to stderr.

    Returns:
        0 on success; 1 when the store refuses (a missing run, a bad file, a full disk), or
        when ``check`` or ``validate-artifact`` finds a problem; 3 for a bug in agui-store;
        130 on Ctrl+C; 143 on SIGTERM and 129 on SIGHUP, which end a command as Ctrl+C
        does. A usage error exits 2 (argparse's one line).
    """
    stream = out or sys.stdout or cast(TextIO, _ClosedStdout())
    out = cast(TextIO, _Printable(stream))
    # psycopg logs what it ignores while tearing down a connection the server dropped ("error
    # ignored terminating <Pipeline>"); the command's own error line says what happened.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        unknown, start = _before_the_command(words)
        if unknown:  # argparse would blame them on the command, or miss them for want of one
            hint = _after_the_command(words, unknown, parser.get_default("command_options"))
            _say_line("agui-store", f"unrecognized arguments: {' '.join(unknown)} "
                      f"({hint or 'usage: agui-store --help'})")
            return EXIT_USAGE
        words = _help_as_option(words, start)
        mistyped = _not_a_command(words, start)
        if mistyped:
            _say_line("agui-store", f"{mistyped} (usage: agui-store --help)")
            return EXIT_USAGE
        words = _git_counts(words, start)
        # argparse reads -hotel as -h with "otel" after it, and fails on that: such a word
        # is an unknown one, as -porto is (search's hint says where a -word goes).
        end = words.index("--") if "--" in words else len(words)
        stray = [w for w in words[:end] if w.startswith("-h") and w != "-h"]
        # After the first --, every word is a run, another -- too (git diff -- -- -- reads
        # two paths named --); argparse drops such a -- from a positional's words, so it
        # goes in as a word argparse leaves alone, and comes back out as --.
        args, extra = parser.parse_known_args(
            [w for w in words[:end] if w not in stray] + words[end:end + 1]
            + [_DASHES if w == "--" else w for w in words[end + 1:]]
        )
        args, extra = _dashes_back(args), ["--" if w == _DASHES else w for w in extra]
    except _UsageError as e:
        _say_line(e.prog, _usage_line(e, words))
        return EXIT_USAGE
    except _Unwritten as e:
        _say_line(e.prog, e.message)
        return EXIT_STORE_ERROR
    except BrokenPipeError:  # help into a reader that went away: not an error of ours
        sys.stderr.close()
        return EXIT_OK
    except SystemExit as e:  # --help or --version (0)
        return e.code if isinstance(e.code, int) else EXIT_OK if e.code is None else EXIT_USAGE
    extra = [*stray, *extra]
    if extra and args.command == "search":
        args.query, extra = _query_words(args.query, extra, words[end + 1:])
    # An option after --, where every word is a run: argparse leaves it over, or hands it on
    # among a command's runs (log's REFs, branch's), which then hold more than the one run
    # (beside log's one ^REF to leave out) that a run id spelling an option would be.
    listed = [
        word for name in ("ref", "run")
        if isinstance(runs := getattr(args, name, None), list)
        and len([run for run in runs if not run.startswith("^")]) > 1
        for word in runs
    ]
    misplaced = [
        word for word in words[end + 1:] if (word in extra or word in listed)
        and word.split("=", 1)[0] in args.command_options.get(args.command, ())
    ]
    if extra or misplaced:  # named after the subcommand they were given to, not the top level
        prog = f"agui-store {args.command}"
        hint = f"usage: {prog} --help"
        if args.command == "search" and any(
            word.startswith("-") and not word.startswith("--") for word in extra
        ):  # a word to leave out, not a mistyped --option
            hint = f"a -word to leave out goes after --: {prog} porto -- -hotel"
        elif args.command in ("show", *ALIASES["show"]) and {"-b", "-B"} & set(extra):
            hint = f"{_branch_instead(args, extra)}; {hint}"
        elif misplaced:  # read as a run: naming it as its own nearest would puzzle
            hint = (f"{misplaced[0]} is an option, and after -- every word is a run: give it "
                    f"before --; {hint}")
        elif thread_hint := _thread_as_option(args, words[start + 1:], extra):
            hint = f"{thread_hint}; {hint}"
        elif (hasattr(args, "ref") or args.command == "diff") and any(
            re.match(r"-[^-]", word) for word in extra if word not in words[end + 1:]
        ):  # a run id such as -x1, which argparse took for an option: git's -- separates it
            hint = f"{_after_the_separator(args.command, words[start + 1:], extra)}; {hint}"
        else:  # a mistyped --option: the command's options most like it, as git names them
            nearest = [
                name for word in extra if word.startswith("--") and word != "--"
                for name in _nearest(word.split("=", 1)[0], args.command_options[args.command])
            ]
            if nearest:
                hint = f"did you mean {' or '.join(dict.fromkeys(nearest))}? {hint}"
        _say_line(prog, f"unrecognized arguments: {' '.join(extra or misplaced)} ({hint})")
        return EXIT_USAGE
    if not hasattr(args, "json"):
        args.json = False
    if not hasattr(args, "busy_timeout"):
        args.busy_timeout = backends.DEFAULT_BUSY_TIMEOUT_MS
    name = ALIAS_OF.get(args.command, args.command)  # messages keep the name typed
    with _output_encoding(stream, data=args.json or (
        name in WRITES_DATA and not getattr(args, "sqlite", None)
    )):
        return _run(args, name, out)


def _thread_as_option(
    args: argparse.Namespace, words: Sequence[str], extra: Sequence[str]
) -> str:
    """What to type when a command that takes no word but its options, and the thread as
    ``--thread T``, was given one word (``delete t1``); ``""`` for any other mistake (``show
    r1 r2`` reads its words as revisions and has no such hint)."""
    # A word after -- is a word whatever it begins with, as git reads it (delete -- -t1).
    given = [word for word in extra if word != "--"]
    after = words[words.index("--") + 1:] if "--" in words else []
    if (
        args.command_positionals[args.command]
        or "--thread" not in args.command_options[args.command]
        or getattr(args, "thread", None) is not None
        # delete erases a thread or an owner's everything: with --owner, --thread is refused
        or (args.command == "delete" and args.owner is not None)
        or len(given) != 1 or (given[0].startswith("-") and given[0] not in after)
    ):
        return ""
    rest = [word for word in words if word != "--"]
    at = rest.index(given[0]) if given[0] in rest else len(rest)
    typed = shell_command(["agui-store", args.command, *rest[:at],
                           *pasted_option("--thread", given[0]), *rest[at + 1:]])
    return f"{args.command} takes the thread as --thread T: {typed}"


#: A ``--`` after the first, as argparse gets it: no word of a command line holds a NUL.
_DASHES = "\0--"


def _dashes_back(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with each :data:`_DASHES` argparse read given back as ``--``."""
    for name, read in vars(args).items():
        if isinstance(read, list):
            setattr(args, name, ["--" if word == _DASHES else word for word in read])
        elif read == _DASHES:
            setattr(args, name, "--")
    return args


def _branch_instead(args: argparse.Namespace, extra: Sequence[str]) -> str:
    """What to type for git's ``checkout -b NAME [REV]``, which makes a branch: ``show`` (and
    ``checkout``, its other name) moves nothing, ``branch NAME REV`` makes one. argparse took
    NAME for the run to show, and left ``-b`` and REV over."""
    revs = [word for word in extra if not word.startswith("-")]
    name = args.ref if args.ref != "HEAD" else revs.pop(0) if revs else None
    thread = pasted_option("--thread", args.thread) if args.thread is not None else []
    command = shell_command(["agui-store", "branch", name, *revs[:1], *thread]) if name else (
        "agui-store branch NAME [REV]")
    return f"{args.command} moves nothing: a branch is made with {command}"


def _after_the_separator(command: str, words: Sequence[str], extra: Sequence[str]) -> str:
    """Where a run id that begins with ``-`` goes (after ``--``, as git says), with the
    command that puts it there when the words after it are revisions alone."""
    first = next(word for word in extra if re.match(r"-[^-]", word))
    at = words.index(first) if first in words else len(words)
    rest = words[at:]
    if "--" in words or any(w.startswith("-") and w not in extra for w in rest):
        return "a run id that begins with - goes after --"
    typed = shell_command(["agui-store", command, *words[:at], "--", *rest])
    return f"if {first} is a run, it goes after --: {typed}"


def _before_the_command(words: Sequence[str]) -> tuple[list[str], int]:
    """The options given before the command (``agui-store --bogus log``) that ``agui-store``
    does not take, and where the command starts in ``words``; read by the top-level parser
    itself: with everything from the command on left to it, argparse has only the words
    before the command to find unknown."""
    parser = _top_parser(_common_options(), add_help=False)
    # -h is dropped so that -hotel reads as an unknown word, not as -h with "otel" after it.
    parser.add_argument("--help", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args, unknown = parser.parse_known_args(words)
    return [word for word in unknown if word != "-h"], len(words) - len(args.command)


def _after_the_command(
    words: Sequence[str], unknown: Sequence[str], command_options: dict[str, tuple[str, ...]]
) -> str:
    """A hint for options given before the command that are the command's own (``agui-store
    --thread T log``, which git would refuse too), or ``""``."""
    command = next((word for word in words if word in command_options), None)
    if command is None:
        return ""
    options = [word for word in unknown
               if word.split("=", 1)[0] in command_options[command]]
    if not options or len(options) < len([w for w in unknown if w.startswith("-")]):
        return ""
    one = len(options) == 1
    return (f"{'an option' if one else 'options'} of {command} {'goes' if one else 'go'} after "
            f"it: agui-store {command} {' '.join(options)} ...; usage: agui-store {command} "
            "--help")


def _command_names() -> list[str]:
    """Every command's name, each followed by its aliases."""
    return [n for name in COMMANDS for n in (name, *ALIASES.get(name, []))]


def _help_as_option(words: list[str], start: int) -> list[str]:
    """The words with git's ``help COMMAND`` given as ``COMMAND --help`` (``help`` alone:
    ``--help``) and git's ``version`` as ``--version``, where the command starts at
    ``start``."""
    if start < len(words) and words[start:] == ["version"]:
        return [*words[:start], "--version"]
    if start >= len(words) or words[start] != "help":
        return words
    return [*words[:start], *words[start + 1 :], "--help"]


def _not_a_command(words: Sequence[str], start: int) -> str | None:
    """What to say when the word at ``start`` names no command, with the commands most like
    it, as git says it (argparse's "invalid choice" lists all 24 and suggests none)."""
    if start >= len(words) or words[start].startswith("-"):
        return None
    typed = words[start]
    names = _command_names()
    if typed in names:
        return None
    said = f"{arguments.quote(typed, 40)} is not an agui-store command"
    nearest = _nearest(typed, names)
    if not nearest:
        return f"{said}: choose from {', '.join(names)}"
    if len(nearest) == 1:
        return f"{said}; the most similar command is {nearest[0]}"
    return f"{said}; the most similar commands are {', '.join(nearest)}"


def _nearest(typed: str, names: Sequence[str]) -> list[str]:
    """The names most like ``typed``, most like it first: those about as close as the
    closest, so that ``checkotu`` names ``checkout`` and not ``check`` too."""
    if len(typed) > 40:  # a pasted value, not a typo of a name
        return []
    scores = sorted(
        ((difflib.SequenceMatcher(None, typed, name).ratio(), name) for name in names),
        key=lambda pair: -pair[0],
    )
    best = scores[0][0] if scores else 0.0
    return [name for score, name in scores if score >= max(0.6, best - 0.05)][:3]


#: ``log``'s options that take a value: a ``-N`` after one is that value (``--limit -1``).
_LOG_VALUED = ("--limit", "--max-count", "--cursor", "--thread", "--db", "--busy-timeout")


def _git_counts(words: list[str], start: int) -> list[str]:
    """The words with ``log``'s ``-N`` (git's count: ``log -3``) given as ``--limit=N``,
    where the command starts at ``start``: argparse would read ``-3`` as a negative number,
    the REF. Words after ``--`` stay as they are, and so does the value of an option
    (``--limit -1``), which its option then says is no count. ``-0`` is refused here, by
    the name typed.

    Raises:
        _UsageError: a count of 0 (``log -0``).
    """
    if start >= len(words) or ALIAS_OF.get(words[start], words[start]) != "log":
        return words
    end = words.index("--", start) if "--" in words[start:] else len(words)
    counts = {
        i for i, word in enumerate(words)
        if start < i < end and re.fullmatch(r"-[0-9]+", word) and not _takes_a_value(words[i - 1])
    }
    for i in sorted(counts):  # said in the words typed: --limit is not one of them
        if not words[i].strip("-0"):
            raise _UsageError(f"agui-store {words[start]}",
                              f"argument {words[i]}: expected a count >= 1 (log -3), not 0")
    return [f"--limit={word[1:]}" if i in counts else word for i, word in enumerate(words)]


def _takes_a_value(word: str) -> bool:
    """Whether ``word`` is one of ``log``'s options that take the next word as their value
    (``-n``, or a long one, as argparse takes it shortened: ``--lim``)."""
    return word == "-n" or (
        word.startswith("--") and len(word) > 2 and any(o.startswith(word) for o in _LOG_VALUED)
    )


#: Commands whose output is data (JSON, AG-UI events) with or without ``--json``.
WRITES_DATA = frozenset({"export", "fork", "slim", "export-artifact"})


def _encoding(stream: TextIO) -> str:
    """The encoding text written to ``stream`` ends in (a command line printed there for
    pasting writes what it cannot hold as escapes the shell reads back)."""
    return getattr(stream, "encoding", None) or "utf-8"


@contextlib.contextmanager
def _output_encoding(stream: TextIO, *, data: bool) -> Iterator[None]:
    """Output that the stream's encoding cannot hold (``LC_ALL=C``, ``PYTHONIOENCODING``)
    never fails a command: data (JSON, events) is written as UTF-8 whatever the terminal's
    encoding, as a file of it would be; text for people shows what the encoding lacks as
    escapes (``\\u2026``). A UTF-8 stream, or one that cannot change, is left as it is."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    reconfigure = getattr(stream, "reconfigure", None)
    try:
        unchanged = reconfigure is None or codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        unchanged = False
    if unchanged:
        yield
        return
    assert reconfigure is not None
    errors = getattr(stream, "errors", None) or "strict"
    try:
        if data:
            reconfigure(encoding="utf-8", errors="strict")
        else:
            reconfigure(errors="backslashreplace")
    except (OSError, ValueError):  # a stream already closed: the command says so
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            reconfigure(encoding=encoding, errors=errors)


def _run(args: argparse.Namespace, name: str, out: TextIO) -> int:
    """Run the parsed command ``name``; its exit code (see :func:`main`)."""
    path = getattr(args, "db", None)
    handler, _ = COMMANDS[name]
    note = None
    store: Store | None = None
    try:
        if name in POSITIONAL_THREAD:
            note = _thread_option(args)
        if name in NEEDS_NO_STORE:  # never create a database file as a side effect
            code = handler(None, args, out)  # type: ignore[arg-type]
        else:
            where = path if path is not None else backends.default_path()
            if name not in CREATES_STORE:
                _require_store_file(where)
            # A store the command creates is removed again if it fails and leaves it empty.
            with opened(
                where, must_exist=name not in CREATES_STORE, busy_timeout_ms=args.busy_timeout,
                purpose="",
            ) as store:
                code = handler(store, args, out)
                if code != EXIT_OK:
                    raise _Failed(code)
    except _Failed as e:
        return e.code
    except UsageError as e:  # where the help is, as argparse's own usage errors say
        _say(args.command, f"{e} (usage: agui-store {args.command} --help)")
        return EXIT_USAGE
    except InternalError as e:
        return _internal(args.command, e)
    except CorruptStoreError as e:
        if name != "check":
            _say(args.command, str(e))
            return EXIT_STORE_ERROR
        # check itself cannot read past it: its usual advice points back at check
        said = (f"{e.damage}; the damage keeps check from reading the store: restore it from "
                "a copy, or salvage what SQLite can still read with sqlite3's .recover")
        _say("check", said)
        return _check_could_not(args, out, said)
    except StoreBusyError as e:
        said = str(e)
        if e.waited:  # the library's advice names its keyword; a command line has an option
            said = (f"{e.reason} ({args.busy_timeout} ms); raise --busy-timeout MS or "
                    f"{SHORTEN_TRANSACTIONS}")
        _say(args.command, said)
        return _check_could_not(args, out, said) if name == "check" else EXIT_STORE_ERROR
    except AguiStoreError as e:
        _say(args.command, str(e))
        return _check_could_not(args, out, str(e)) if name == "check" else EXIT_STORE_ERROR
    except BrokenPipeError:
        # The reader went away (`agui-store export | head`): not an error of ours.
        sys.stderr.close()
        return EXIT_OK
    except OSError as e:  # a file the command reads or writes itself (import FILE, -o FILE)
        where = f"{e.filename}: " if e.filename else ""
        _say(args.command, f"{where}{e.strerror or e}")
        return EXIT_STORE_ERROR
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM or SIGHUP (Terminated)
        said = f"terminated ({e.name})" if isinstance(e, Terminated) else "interrupted"
        if store is not None and store.purge_pending:  # an erasure committed: it stands
            _say(args.command, f"{said} after the erasure committed: what it erased stays "
                 f"erased, but {store.purge_pending}")
        elif name in WRITES_THE_STORE:
            _say(args.command, f"{said} (the transaction under way was rolled back; what "
                 "committed before it is kept, and 'agui-store check' says what waits to be "
                 "derived)")
        else:
            _say(args.command, said)
        return exit_code(e)
    except Exception as e:
        return _internal(args.command, e)
    if note is not None and code == EXIT_OK:  # after the output, so an error stays one line
        sys.stderr.write(note)
    return code


def _check_could_not(args: argparse.Namespace, out: TextIO, said: str) -> int:
    """``check --json`` on a store it could not read: still one JSON document on stdout (a
    monitor reads it), failed, its one problem what the error line says."""
    if args.json:
        report = CheckReport(problems=[Problem("open", said)])
        out.write(json.dumps(report.to_json()) + "\n")
    return EXIT_STORE_ERROR


#: Commands that took the thread as a positional argument first: it still works, with a
#: note on stderr that the form is deprecated (``--thread T`` replaces it).
POSITIONAL_THREAD = frozenset({"runs", "branches"})


def _thread_option(args: argparse.Namespace) -> str | None:
    """Take the thread from the older positional form; the deprecation note to print."""
    positional = args.thread_id
    del args.thread_id
    if positional is None:
        return None
    if args.thread is not None and args.thread != positional:
        raise UsageError(f"two threads given ({arguments.quote(positional)} and --thread "
                         f"{arguments.quote(args.thread)})")
    args.thread = positional
    shown = shell_command(pasted_option("--thread", positional)) if len(positional) <= 80 else (
        "--thread T")
    return (
        f"agui-store {args.command}: the thread as a positional argument is deprecated: "
        f"use agui-store {args.command} {shown}\n"
    )


def _require_store_file(path: str) -> None:
    """Refuse a store path that names no file, or a PostgreSQL database that holds no store
    (in-memory and URI paths are SQLite's own): a command that only reads never creates
    one as a side effect."""
    path = path_text(path)
    real = files.store_file(path) if path.startswith("file:") else path  # file:x.db?mode=ro
    if real is None or real == ":memory:":
        return
    missing = backends.missing_store(real)
    if missing is not None:
        shown = locations.without_password(path) if is_url(path) else path
        raise NotAStoreError(
            f"no store at {shown}: {missing} (record one first with agui-store "
            "import FILE or agui-store demo, or give the store's path with --db)"
        )


#: The Python API's wording of an argument, and the command line's.
_CLI_WORDS = (("pass replace=True (--replace)", "pass --replace"),
              ("pass thread_id=", "pass --thread T"), ("thread_id=", "--thread"),
              ("run_id=", "--run-id"), ("moving it needs force", "moving it needs --force"),
              ("replacing it needs force", "replacing it needs --force"),
              ("only append(check_sequence=False) records that",
               "only import --no-sequence-check records that"),
              ("(delete_branch, then branch under another name)",
               "(branch -d NAME, or branch -m NAME NEW)"))


def _in_cli_words(message: str) -> str:
    """A message of the library, its Python words (``thread_id=``) in the command line's."""
    for api, cli in _CLI_WORDS:
        message = message.replace(api, cli)
    return message


def _say(command: str, message: str) -> None:
    """One line on stderr in the command line's words: newlines folded, length bounded."""
    _say_line(f"agui-store {command}", _in_cli_words(message))


def _say_line(prefix: str, message: str) -> None:
    # A message may quote what was typed or stored: its control characters are escaped.
    line = on_terminal(printable(" ".join(message.split())))
    if len(line) > MAX_MESSAGE:
        line = line[: MAX_MESSAGE - 1] + "…"
    sys.stderr.write(f"{prefix}: {line}\n")
    sys.stderr.flush()


def _internal(command: str, e: BaseException) -> int:
    if isinstance(e, InternalError):  # its message already says what to do
        _say(command, f"internal error: {e} (set {DEBUG_ENV}=1 for the traceback)")
    else:
        _say(command, f"internal error: {type(e).__name__}: {e} (a bug in agui-store: please "
                      f"report it with this message; set {DEBUG_ENV}=1 for the traceback)")
    if os.environ.get(DEBUG_ENV):
        import traceback

        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
