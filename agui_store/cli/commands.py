"""``agui-store``: the command line, one subcommand per store verb.

Every command that opens a store takes ``--db PATH`` (default: ``$AGUI_STORE_DB`` or
``./agui-store.db``, the same as the API); ``--json`` prints machine-readable output; long
imports show progress on a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO, TextIO, cast

from agui_store import backends
from agui_store.backends import is_url
from agui_store.cli.render import diff_text, graph
from agui_store.codec.output import FORMATS, serialize
from agui_store.engine.arguments import path_text
from agui_store.errors import (
    AguiStoreError,
    InternalError,
    InvalidArgumentError,
    NotAStoreError,
)
from agui_store.exports.targets import check_source, check_target, write_file
from agui_store.records import (
    ErasureReceipt,
    Run,
    content_text,
    counted,
    printable,
    run_line,
    short,
    transcript,
)
from agui_store.store import Store

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


class _Printable:
    """The output stream of every command, which no stored text can make fail: lone
    surrogates (legal in recorded JSON) are written as ``\\udXXX`` escapes, so text stays
    readable and ``--json`` output stays valid JSON (see :func:`records.printable`)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(printable(text))

    def __getattr__(self, name: str) -> Any:  # isatty, flush, buffer, ...
        return getattr(self._stream, name)


def _first_user_words(store: Store, run: Run) -> str:
    """First words of the last user message the run was started with (for log lines)."""
    recorded = store.input(run.run_id, thread_id=run.thread_id)
    if recorded is not None:
        return _last_user(recorded.get("messages"))
    events = store.events(run.run_id, thread_id=run.thread_id)
    for ev in events[:1]:
        echoed = ev.get("input") if isinstance(ev, dict) else None
        if isinstance(echoed, dict):
            return _last_user(echoed.get("messages"))
    return ""


def _last_user(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return content_text(m.get("content"))
    return ""


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
    """Stream the file into the store in one transaction (``Store.import_file``): all of
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
        result = store.import_file(
            _CountedReads(handle, progress),
            thread_id=args.thread,
            check_sequence=not args.no_sequence_check,
        )
    out.write(
        f"imported {counted(result.event_count, 'event')}, "
        f"{counted(result.new_run_count, 'run')} into {store.path}\n"
    )
    return 0


def cmd_threads(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``threads``: every thread id, one a line (``--json``: a JSON list)."""
    threads = store.threads()
    if args.json:
        out.write(json.dumps(threads) + "\n")
    else:
        for t in threads:
            out.write(f"{t}\n")
    return 0


def cmd_runs(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``runs --thread T``: the thread's runs in recorded order, one a line."""
    runs = store.runs(args.thread)
    if args.json:
        out.write(json.dumps([r.to_json() for r in runs], indent=2) + "\n")
    else:
        for r in runs:
            out.write(run_line(r) + "\n")
    return 0


def cmd_log(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``log REF``: the run's lineage, newest first, with the first words each run was asked;
    ``--graph`` draws the thread's run tree instead. A ``--limit`` page that is not the last
    names the command for the next page on stderr."""
    if args.graph and (args.limit is not None or args.cursor is not None):
        raise InvalidArgumentError(
            "--graph draws the thread's whole run tree: it takes no --limit or --cursor"
        )
    if args.graph:
        thread = args.thread or store.get_run(args.ref, thread_id=None).thread_id  # type: ignore[union-attr]
        runs = store.runs(thread)
        summaries = {r.run_id: _first_user_words(store, r) for r in runs}
        for line in graph(runs, summaries):
            out.write(line + "\n")
        return 0
    chain = store.log(args.ref, thread_id=args.thread, limit=args.limit, cursor=args.cursor)
    if args.json:
        out.write(json.dumps(chain.to_json(), indent=2) + "\n")
    else:
        for r in chain:
            words = _first_user_words(store, r)
            said = f'  "{short(words, 50)}"' if words else ""
            out.write(run_line(r) + said + "\n")
    if chain.next_cursor is not None:
        # On stderr, so that stdout stays the runs (and --json one JSON list) page by page.
        command = _next_page_command(args, chain[0].thread_id, chain.next_cursor)
        sys.stderr.write(f"next page: {command}\n")
    return 0


def _next_page_command(args: argparse.Namespace, thread_id: str, cursor: str) -> str:
    """The command line that prints the page after this one, ready to paste."""
    words = ["agui-store", "log", args.ref, "--thread", thread_id, "--limit", str(args.limit),
             "--cursor", cursor]
    if getattr(args, "db", None) is not None:
        words[1:1] = ["--db", args.db]
    if args.json:
        words.append("--json")
    return printable(" ".join(shlex.quote(word) for word in words))


def cmd_show(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``show REF``: the restored run as a transcript (``--json``: the checkout)."""
    co = store.checkout(args.ref, thread_id=args.thread)
    if args.json:
        out.write(json.dumps(co.to_json(), indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(transcript(co) + "\n")
    return 0


def cmd_branch(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``branch NAME REF``: point a branch at a run; ``--delete`` removes it."""
    if args.delete:
        if not args.thread:
            raise AguiStoreError("--delete needs --thread")
        store.delete_branch(args.name, thread_id=args.thread)
        out.write(f"deleted branch {args.name}\n")
        return 0
    if not args.run:
        raise AguiStoreError("branch needs a run (or ref) to point at")
    b = store.branch(args.name, args.run, thread_id=args.thread)
    out.write(f"branch {b.name} -> {b.run_id} (thread {b.thread_id})\n")
    return 0


def cmd_branches(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``branches --thread T``: the thread's branches, ``*`` marking the default."""
    items = store.branches(args.thread)
    if args.json:
        out.write(json.dumps([b.to_json() for b in items]) + "\n")
    else:
        for b in items:
            mark = "*" if b.default else " "
            out.write(f"{mark} {b.name} -> {b.run_id}\n")
    return 0


def cmd_check(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``check``: the store's integrity report; exit 1 on any problem (warnings do not
    fail it)."""
    report = store.check()
    if args.json:
        out.write(json.dumps(report.to_json()) + "\n")
    else:
        for p in report.problems:
            out.write(f"{p}\n")
        for w in report.warnings:  # legal, worth knowing: they do not fail the check
            out.write(f"warning: {w}\n")

        summary = "ok" if report.ok else counted(len(report.problems), "problem")
        if report.warnings:
            summary += f", {counted(len(report.warnings), 'warning')}"
        out.write(f"{summary} ({', '.join(report.checked)})\n")
        for e in report.erasures:  # what the erasure verbs took out: never damage
            out.write(
                f"erasure #{e.number}: {e.verb} at {e.erased_at}: {counted(e.threads, 'thread')}"
                f", {counted(e.runs, 'run')}, {counted(e.events, 'event')}, {e.bytes} bytes\n"
            )
        if args.head and report.ok and report.head is not None:  # kept elsewhere, it shows
            out.write(f"head {report.head}\n")  # a cut of the newest writes (a sound store's)
    return 0 if report.ok else 1


def cmd_compact(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``compact``: write the checkpoints complete runs lack; says how many."""
    written = store.compact(args.ref, thread_id=args.thread)
    out.write(f"wrote {counted(written, 'checkpoint')}\n")
    return 0


def cmd_export(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``export REF``: a run's history as JSON, JSON Lines or SSE; ``--reconnect-stream``: the
    short stream that restores it (``--compacted``, its old name, still works for now);
    ``--all``: the whole thread; ``--sqlite``: the analysis database."""
    if args.sqlite:
        return cmd_export_sqlite(store, args, out)
    events: Iterable[dict[str, Any]]
    if args.all:
        if not args.thread:
            raise AguiStoreError("--all exports a whole thread: name it with --thread")
        progress = Progress(sum(r.event_count for r in store.runs(args.thread)), "exporting")
        events = _counted(store.thread_events(args.thread), progress)
    elif args.reconnect_stream or args.compacted:
        if args.compacted:
            sys.stderr.write(
                "note: --compacted is now --reconnect-stream; the old name goes in the next "
                "release\n"
            )
        events = store.reconnect_stream(args.ref, thread_id=args.thread)
    else:
        events = store.history(args.ref, thread_id=args.thread)
    chunks = serialize(events, args.format)
    if args.output and args.output != "-":
        write_file(check_target(args.output, store.path), chunks)
        sys.stderr.write(f"wrote {args.output}\n")
    else:
        for chunk in chunks:
            out.write(chunk.decode("utf-8"))
    if args.all:
        progress.finish()
    return 0


def _counted(events: Iterable[dict[str, Any]], progress: Progress) -> Iterator[dict[str, Any]]:
    for event in events:
        progress.advance(1)
        yield event


def cmd_diff(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``diff A B``: what differs between two runs (three-dot: each side since the merge
    base); coloured on a terminal unless ``NO_COLOR`` is set."""
    mode = "two-dot" if args.two_dot else "three-dot"
    d = store.diff(args.a, args.b, thread_id=args.thread, mode=mode)
    if args.json:
        out.write(json.dumps(d.to_json(), indent=2, ensure_ascii=False) + "\n")
        return 0
    color = out.isatty() and "NO_COLOR" not in os.environ
    out.write(diff_text(d, color=color, stat=args.stat) + "\n")
    return 0


def cmd_fork(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``fork REF``: the RunAgentInput that starts a new run from a past one, as JSON."""
    fork = store.fork(args.ref, thread_id=args.thread, run_id=args.run_id)
    out.write(json.dumps(fork, indent=2, ensure_ascii=False) + "\n")
    return 0


def cmd_demo(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``demo``: record a demo conversation with a branch, then show its graph, a transcript
    and a diff as the commands print them."""
    import importlib.util

    from agui_store.cli.demo import record_demo

    thread, _ = record_demo(store)
    out.write(f"recorded a demo conversation into {store.path} (thread {thread})\n\n")
    out.write("$ agui-store log --graph --thread " + thread + "\n")
    runs = store.runs(thread)
    summaries = {r.run_id: _first_user_words(store, r) for r in runs}
    for line in graph(runs, summaries):
        out.write(line + "\n")
    out.write(f"\n$ agui-store show fahrenheit --thread {thread}\n")
    out.write(transcript(store.checkout("fahrenheit", thread_id=thread)) + "\n")
    out.write(f"\n$ agui-store diff porto fahrenheit --thread {thread}\n")
    out.write(diff_text(store.diff("porto", "fahrenheit", thread_id=thread)) + "\n")
    db = getattr(args, "db", None)
    where = f" {shlex.quote(db)}" if db is not None else ""
    out.write(f"\nsee it in the browser: agui-store ui{where} --thread {shlex.quote(thread)}\n")
    if importlib.util.find_spec("starlette") is None:
        out.write("(the viewer needs its extra first: pip install 'agui-store[ui]')\n")
    return 0


def cmd_ui(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """Serve the web viewer (``agui_store.ui``, the ``ui`` extra) until Ctrl+C."""
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
    if args.port:
        # uvicorn reports a taken port with a log line and a bare exit: say it here instead.
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((args.host, args.port))
            except OSError as e:
                raise AguiStoreError(
                    f"cannot listen on {args.host}:{args.port} ({e.strerror or e}): pass "
                    "another --port (0 picks a free one)"
                ) from None
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        sys.stderr.write(
            f"agui-store ui: listening on {args.host}: anyone who can reach it reads the store\n"
        )

    def ready(url: str) -> None:
        mode = "branches may be written" if args.allow_writes else "read-only"
        shown = path or backends.default_path()
        out.write(f"viewer of {shown} at {url} ({mode}; Ctrl+C stops it)\n")
        out.flush()

    # uvicorn stops on Ctrl+C, then raises it again: a normal end here.
    with Store(path) as opened, contextlib.suppress(KeyboardInterrupt):
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

    text = dumps_artifact(export_run(store, args.ref, thread_id=args.thread))
    if args.output and args.output != "-":
        write_file(check_target(args.output, store.path), [text.encode("utf-8")])
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
    """Copy threads from SRC to DST (``--db`` plays no part: both are named)."""
    from agui_store.sync import copy

    progress: Progress | None = None

    def advance(done: int, total: int) -> None:
        nonlocal progress
        if progress is None:
            progress = Progress(total, "copying")
        progress.advance(done - progress.done)

    try:
        result = copy(
            args.src, args.dst, thread_id=args.thread, force=args.force, progress=advance,
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
                    "erased": result.erased,
                    "leftErased": result.left_erased,
                }
            )
            + "\n"
        )
        return 0
    extended = f", {counted(result.runs_extended, 'run')} completed" if result.runs_extended else ""
    out.write(
        f"copied {counted(result.threads, 'thread')}, {counted(result.runs, 'run')}, "
        f"{counted(result.events, 'event')}{extended}, "
        f"{counted(result.branches, 'branch', 'branches')} "
        f"({counted(result.runs_present, 'run')} already present)\n"
    )
    if result.erased or result.left_erased:
        out.write(
            f"erased {counted(result.erased, 'thread')} the source had erased; left "
            f"{counted(result.left_erased, 'thread')} the destination had erased "
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
    if unit not in _AGE_UNITS or not number.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: a whole number and a unit, s, m, h, d or w (90d)"
        )
    return datetime.timedelta(seconds=int(number) * _AGE_UNITS[unit])


def _erase(
    args: argparse.Namespace, out: TextIO, what: str, erase: Callable[[bool], ErasureReceipt]
) -> int:
    """Run an erasure verb: a dry run to say what goes, then, with ``--yes`` or a yes on a
    terminal, the erasure. Without ``--yes`` and without a terminal to ask on, nothing is
    erased (exit 2)."""
    if not args.dry_run and not args.yes:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            _say(args.command, f"refusing to erase {what} without --yes (no terminal to ask "
                 "on); nothing was erased")
            return EXIT_USAGE
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
        _say(args.command, "name what to erase: --thread T or --owner S (one of them)")
        return EXIT_USAGE
    if args.thread is not None:
        thread = args.thread
        return _erase(args, out, f"thread {printable(thread)!r}",
                      lambda dry: store.delete_thread(thread, dry_run=dry))
    owner = args.owner
    return _erase(args, out, f"everything of owner {printable(owner)!r}",
                  lambda dry: store.delete_owner(owner, dry_run=dry))


def cmd_prune(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``prune --older-than 90d``: erase every thread (of ``--owner``) idle for longer (see
    :meth:`agui_store.Store.prune`)."""
    older, owner = args.older_than, args.owner
    return _erase(args, out, "every thread idle for longer than "
                  f"{older}" + (f" of owner {printable(owner)!r}" if owner else ""),
                  lambda dry: store.prune(before=older, scope=owner, dry_run=dry))


def _erasure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="say what would be erased; erase nothing")
    parser.add_argument("--yes", "-y", action="store_true",
                        help="erase without asking (needed without a terminal)")
# --- search -------------------------------------------------------------------------------


def cmd_search(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    """``search QUERY``: the messages the query finds, newest first, one a line: thread,
    run, role (and tool), snippet with the matched words marked (bold on a terminal,
    ``[like this]`` otherwise; ``--json``: the hits). A full page names the command for the
    next one on stderr."""
    hits = store.search(args.query, thread_id=args.thread, scope=args.owner, limit=args.limit,
                        cursor=args.cursor)
    if args.json:
        out.write(json.dumps(hits.to_json(), indent=2, ensure_ascii=False) + "\n")
    else:
        bold = out.isatty() and "NO_COLOR" not in os.environ
        marks = ("\033[1m", "\033[0m") if bold else ("[", "]")
        for hit in hits:
            role = hit.role if hit.tool_name is None else f"{hit.role}:{hit.tool_name}"
            out.write(f"{hit.thread_id}  {hit.run_id}  {role}  {hit.marked(*marks)}\n")
    if hits.next_cursor is not None:
        words = ["agui-store", "search", args.query, "--limit", str(args.limit),
                 "--cursor", hits.next_cursor]
        for option, value in (("--db", getattr(args, "db", None)), ("--thread", args.thread),
                              ("--owner", args.owner)):
            if value is not None:
                words += [option, value]
        command = printable(" ".join(shlex.quote(word) for word in words))
        sys.stderr.write(f"more: {command}{' --json' if args.json else ''}\n")
    return 0


def _search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", metavar="QUERY",
                   help='words (all must match), "a phrase", prefix*, -word to leave out')
    p.add_argument("--thread", help="only this thread")
    p.add_argument("--owner", metavar="SCOPE", help="only this owner's threads")
    p.add_argument("--limit", type=int, default=20, metavar="N",
                   help="at most N hits (default: 20)")
    p.add_argument("--cursor", help="continue after the page that gave this cursor")


COMMANDS: dict[str, tuple[Callable[[Store, argparse.Namespace, TextIO], int], str]] = {
    "import": (cmd_import, "record events from a JSON, JSON Lines or SSE file"),
    "threads": (cmd_threads, "list threads"),
    "runs": (cmd_runs, "list a thread's runs in recorded order"),
    "log": (cmd_log, "a run's lineage, newest first (--graph: the thread's run tree)"),
    "show": (cmd_show, "restore a run: transcript and state (--json for machines)"),
    "branch": (cmd_branch, "point a branch at a run (--delete to remove it)"),
    "branches": (cmd_branches, "list a thread's branches"),
    "diff": (cmd_diff, "compare two runs: each side since their merge base (or --two-dot)"),
    "fork": (cmd_fork, "print the RunAgentInput that starts a new run from a past one"),
    "compact": (cmd_compact, "write checkpoints for complete runs that lack one"),
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
    "prune": (cmd_prune, "erase every thread idle for longer than --older-than (90d); a thread "
              "with a run still open stays"),
    "search": (cmd_search, "find messages by their words, newest first, in every thread"),
    "ui": (cmd_ui, "serve a local web viewer of the store (threads, run trees, runs, diffs, "
           "forks) and open it in the browser; needs the ui extra"),
}


#: Commands that work on files alone: no store is opened (or created) for them.
NEEDS_NO_STORE = frozenset({"validate-artifact", "copy", "ui"})
#: The commands that may create the store file; every other one needs it to exist, so that a
#: mistyped ``--db`` is an error instead of a new empty store left behind.
CREATES_STORE = frozenset({"import", "demo"})


def build_parser() -> argparse.ArgumentParser:
    """The ``agui-store`` argument parser: one subcommand per entry of :data:`COMMANDS`."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db", default=argparse.SUPPRESS, metavar="PATH",
        help="store file or postgresql:// URL "
        f"(default: ${backends.DEFAULT_DB_ENV} or ./{backends.DEFAULT_DB_NAME})",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output")
    parser = argparse.ArgumentParser(
        prog="agui-store", parents=[common],
        description="Keep AG-UI conversations in one SQLite file (or PostgreSQL), like git "
        "keeps code.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {}
    for name, (_, help_text) in COMMANDS.items():
        parsers[name] = sub.add_parser(
            name, parents=[common], help=help_text, description=help_text,
            epilog=f"example: {EXAMPLES[name]}",
        )
    p = parsers["import"]
    p.add_argument("file", metavar="FILE", help="a .json, .jsonl or .sse recording (- for stdin)")
    p.add_argument("--thread", help="thread id for events that start no run")
    p.add_argument("--no-sequence-check", action="store_true",
                   help="keep well-formed but out-of-sequence streams")
    for name in ("runs", "branches"):
        parsers[name].add_argument("--thread", help="the thread (required)")
        # The positional form came first; it still works, with a note on stderr.
        parsers[name].add_argument("thread_id", nargs="?", help=argparse.SUPPRESS)
    for name in ("log", "show"):
        parsers[name].add_argument("ref", nargs="?", metavar="REF", default="HEAD",
                                   help="run id, unique prefix, branch, HEAD, REF~n")
        parsers[name].add_argument("--thread", help="thread id (when the ref is ambiguous)")
    parsers["log"].add_argument("--graph", action="store_true", help="draw the run tree")
    parsers["log"].add_argument(
        "--limit", type=int, metavar="N",
        help="at most N runs; when the lineage goes on, stderr says the command for the next "
        "page (its --cursor)")
    parsers["log"].add_argument(
        "--cursor", metavar="RUN",
        help="start the page at this run of the thread (the cursor the page before gave)")
    p = parsers["diff"]
    p.add_argument("a", metavar="A", help="run id, branch, HEAD, REF~n")
    p.add_argument("b", metavar="B", help="run id, branch, HEAD, REF~n")
    p.add_argument("--thread", help="thread id (when a ref is ambiguous)")
    p.add_argument("--stat", action="store_true", help="counts only")
    p.add_argument("--two-dot", action="store_true", help="compare the two views directly")
    p = parsers["fork"]
    p.add_argument("ref", nargs="?", metavar="REF", default="HEAD",
                   help="run id, branch, HEAD, REF~n")
    p.add_argument("--thread", help="thread id (when the ref is ambiguous)")
    p.add_argument("--run-id", help="id for the new run (default: a new UUID)")
    p = parsers["compact"]
    p.add_argument("ref", nargs="?", metavar="REF",
                   help="a run (and its ancestors); default: everything")
    p.add_argument("--thread", help="only this thread")
    p = parsers["export"]
    p.add_argument("ref", nargs="?", metavar="REF", default="HEAD",
                   help="run id, branch, HEAD, REF~n")
    p.add_argument("--thread", help="thread id (when the ref is ambiguous; required with --all)")
    p.add_argument("--all", action="store_true",
                   help="every run of the thread (--thread), in recorded order, streamed")
    p.add_argument("--reconnect-stream", action="store_true",
                   help="the short stream that restores the run (what a reconnecting client gets)")
    p.add_argument("--compacted", action="store_true",
                   help="deprecated name of --reconnect-stream")
    p.add_argument("--format", choices=FORMATS, default="jsonl")
    p.add_argument("--output", "-o", help="file to write (default: stdout)")
    p.add_argument("--sqlite", metavar="OUT.db",
                   help="write a datasette-friendly analysis database (sqlite-utils) instead")
    p.add_argument("--replace", action="store_true", help="with --sqlite: overwrite OUT.db")
    p = parsers["branch"]
    p.add_argument("name", metavar="NAME", help="the branch name")
    p.add_argument("run", nargs="?", metavar="RUN",
                   help="run id, branch, HEAD, REF~n to point the branch at")
    p.add_argument("--thread", help="thread id (when the run is ambiguous; required with --delete)")
    p.add_argument("--delete", "-d", action="store_true", help="delete the branch")
    p = parsers["analyze"]
    p.add_argument("out", metavar="OUT.db", help="the analysis database to write (not the store)")
    p.add_argument("--thread", help="only this thread")
    p.add_argument("--replace", action="store_true", help="overwrite OUT.db if it is not empty")
    p = parsers["export-artifact"]
    p.add_argument("ref", nargs="?", metavar="REF", default="HEAD",
                   help="run id, branch, HEAD, REF~n")
    p.add_argument("--thread", help="thread id (when the ref is ambiguous)")
    p.add_argument("--output", "-o", help="file to write (default: stdout)")
    parsers["validate-artifact"].add_argument("file", metavar="FILE",
                                              help="the artifact (JSON); - for stdin")
    p = parsers["copy"]
    p.add_argument("src", metavar="SRC", help="the store to copy from (it must exist)")
    p.add_argument("dst", metavar="DST", help="the store to copy to (created if missing)")
    p.add_argument("--thread", help="only this thread")
    p.add_argument("--force", action="store_true",
                   help="a branch DST holds off SRC's lineage takes SRC's tip (runs never move)")
    p.add_argument("--restore-erased", action="store_true",
                   help="copy threads DST erased back into it (else they stay erased)")
    parsers["check"].add_argument(
        "--head", action="store_true",
        help="also print the log's head (on a sound store), to keep outside the store: a later "
        "check that no longer shows it tells that the newest writes were cut")
    p = parsers["delete"]
    p.add_argument("--thread", help="the thread to erase")
    p.add_argument("--owner", metavar="SCOPE", help="the owner whose everything to erase "
                   "(instead of --thread)")
    _erasure_options(p)
    p = parsers["prune"]
    p.add_argument("--older-than", type=age, required=True, metavar="AGE",
                   help="erase threads with no activity for longer: 90d, 12h, 30m, 2w, 45s")
    p.add_argument("--owner", metavar="SCOPE", help="only this owner's threads")
    _erasure_options(p)
    p = parsers["ui"]
    p.add_argument("path", metavar="DB", nargs="?",
                   help="the store: a file or a postgresql:// URL (default: --db, "
                   f"${backends.DEFAULT_DB_ENV} or ./{backends.DEFAULT_DB_NAME})")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8642, help="port (default: 8642; 0: any free one)")
    p.add_argument("--allow-writes", action="store_true",
                   help="let the pages create and move branches (nothing else is ever written)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--thread", help="open the browser on this thread's run tree")
    _search_arguments(parsers["search"])
    p = parsers["slim"]
    p.add_argument("ref", nargs="?", metavar="REF", default="HEAD",
                   help="run id, branch, HEAD, REF~n")
    p.add_argument("--thread", help="thread id (when the ref is ambiguous)")
    p.add_argument("--preset", choices=("minimal", "standard", "full"), default="standard",
                   help="minimal: last 10, 200 chars, tool args redacted, tool results omitted; "
                   "standard: last 50, 1000 chars; full: unchanged")
    p.add_argument("--last", type=int, metavar="N", help="keep the most recent N messages")
    p.add_argument("--max-content", type=int, metavar="N",
                   help="cut message content at N characters (the … marker included)")
    return parser


#: What the exit status means (docs/reference/cli.md). Every failure prints one line on
#: stderr, ``agui-store COMMAND: what and where``; never a traceback.
EXIT_OK = 0
EXIT_STORE_ERROR = 1  # a store error (bad input, a damaged or foreign file, a full disk...),
#                       or a command's negative answer: check found problems, an invalid artifact
EXIT_USAGE = 2  # argparse: unknown command or option, missing argument
EXIT_INTERNAL = 3  # an unexpected error inside agui-store: a bug to report
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it

#: Set (to anything) to print the traceback of an internal error after its one line.
DEBUG_ENV = "AGUI_STORE_DEBUG"

#: Longest message printed: errors name places, they do not echo megabytes of input back.
MAX_MESSAGE = 1_000


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; its exit code.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
        out: where the command writes (default: stdout); errors go to stderr.

    Returns:
        0 on success; 1 when the store refuses (a missing run, a bad file, a full disk), or
        when ``check`` or ``validate-artifact`` finds a problem; 3 for a bug in agui-store;
        130 on Ctrl+C. A usage error exits 2 (argparse's one line).
    """
    out = cast(TextIO, _Printable(out or sys.stdout))
    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors: exit 2, argparse's one line
    if args.command in THREAD_REQUIRED:
        _thread_option(parser, args)
    if not hasattr(args, "json"):
        args.json = False
    path = getattr(args, "db", None)
    handler, _ = COMMANDS[args.command]
    try:
        if args.command in NEEDS_NO_STORE:  # never create a database file as a side effect
            return handler(None, args, out)  # type: ignore[arg-type]
        if args.command not in CREATES_STORE:
            _require_store_file(path if path is not None else backends.default_path())
        with Store(path) as store:
            return handler(store, args, out)
    except InternalError as e:
        return _internal(args.command, e)
    except AguiStoreError as e:
        _say(args.command, str(e))
        return EXIT_STORE_ERROR
    except BrokenPipeError:
        # The reader went away (`agui-store export | head`): not an error of ours.
        sys.stderr.close()
        return EXIT_OK
    except OSError as e:  # a file the command reads or writes itself (import FILE, -o FILE)
        where = f"{e.filename}: " if e.filename else ""
        _say(args.command, f"{where}{e.strerror or e}")
        return EXIT_STORE_ERROR
    except KeyboardInterrupt:
        _say(args.command, "interrupted (the transaction under way was rolled back)")
        return EXIT_INTERRUPTED
    except Exception as e:
        return _internal(args.command, e)


#: Commands that work on one thread and need it named (``--thread T``); the thread as a
#: positional argument works too, with a note on stderr that the form is deprecated.
THREAD_REQUIRED = frozenset({"runs", "branches"})


def _thread_option(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Take the thread from ``--thread``, or from the older positional form with a note."""
    positional = args.thread_id
    del args.thread_id
    if positional is None:
        if args.thread is None:
            parser.error(f"{args.command} needs the thread: agui-store {args.command} --thread T")
        return
    if args.thread is not None and args.thread != positional:
        parser.error(f"{args.command}: two threads given ({positional!r} and --thread "
                     f"{args.thread!r})")
    args.thread = positional
    sys.stderr.write(
        f"agui-store {args.command}: the thread as a positional argument is deprecated: "
        f"use agui-store {args.command} --thread {shlex.quote(printable(positional))}\n"
    )


def _require_store_file(path: str) -> None:
    """Refuse a store path that names no file (in-memory and URI paths are SQLite's own; a
    PostgreSQL URL names a database, which opening creates the store in)."""
    path = path_text(path)
    if path == ":memory:" or path.startswith("file:") or is_url(path):
        return
    if not os.path.lexists(path):
        raise NotAStoreError(
            f"no store at {path}: the file does not exist (record one first with agui-store "
            "import FILE or agui-store demo, or give the store's path with --db)"
        )


def _say(command: str, message: str) -> None:
    """One line on stderr: newlines folded, length bounded."""
    line = " ".join(message.split())
    if len(line) > MAX_MESSAGE:
        line = line[: MAX_MESSAGE - 1] + "…"
    sys.stderr.write(f"agui-store {command}: {line}\n")
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
