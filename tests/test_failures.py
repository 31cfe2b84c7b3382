"""Every failure is a store error: damaged files, absurd arguments and cursors, driver errors.

Faults are real where they can be: a page of a real file overwritten with garbage, a
compressed blob whose bytes no longer inflate, revision strings of 5,000 digits, lone
surrogates and U+10FFFF, cursors beyond 64 bits. Each call either answers correctly or raises
one :class:`AguiStoreError` naming what and where, with the original error chained; nothing
from the driver (``apsw.*``) or from Python's internals (``zlib.error``, ``ValueError``,
``OverflowError``, ``UnicodeError``...) comes out bare. A full disk is in
``test_disk_full.py``; the command line's side of all this is in ``test_exit_codes.py``.
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import (
    AguiStoreError,
    CorruptStoreError,
    InternalError,
    InvalidArgumentError,
    NotAStoreError,
    OutOfMemoryError,
    RunNotFoundError,
    StorageError,
    StorageFullError,
    StoreBusyError,
    cli,
)
from agui_store.backends.sqlite import connection
from agui_store.engine import arguments
from tests.workers.harness import scale

SOME = settings(
    max_examples=scale(dev=150, ci=600), deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def run(run_id: str, thread: str = "t1", text: str = "hi") -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}", "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": f"m-{run_id}"},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id},
    ]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> agui_store.Store:
    """Three runs in a chain and a branch, in thread t1; one run in thread t2."""
    store = agui_store.open(tmp_path_factory.mktemp("small") / "small.db")
    for run_id in ("r1", "r2", "r3"):
        store.append(run(run_id))
    store.branch("retry", "r2", thread_id="t1")
    store.append(run("s1", thread="t2"))
    return store


# --- arguments ---------------------------------------------------------------------------------

ODD = ["\ud800", "\udfff", "\U0010ffff", "\0", "\ud7ff", "\ue000", "~", "\n", "é",
       "\U0001d7d8", "\u0663"]  # a mathematical digit zero, an Arabic-Indic digit three
#: Pieces arguments are made of: real names, suffixes, and what breaks naive parsing.
PIECES = st.one_of(
    st.sampled_from(["HEAD", "main", "r", "r1", "r3", "retry", "s1", "t1", "~", "~1", "~0",
                     "~" + "9" * 5000, "~99999999999999999999", "~-1", "~\u0663"]),
    st.sampled_from(ODD),
    st.text(st.characters(exclude_categories=()), max_size=6),
)
REVISIONS = st.lists(PIECES, min_size=0, max_size=4).map("".join)
THREADS = st.one_of(st.none(), st.sampled_from(["t1", "t2", "nope"]), REVISIONS)


def answers_or_store_error(call: Callable[[], Any]) -> Any:
    """Run ``call``: a result, or an AguiStoreError (returned); anything else fails."""
    try:
        return call()
    except AguiStoreError as e:
        assert len(str(e)) <= 2_000, "an error names places; it does not echo its input"
        return e


READS: dict[str, Callable[[agui_store.Store, str, str | None], Any]] = {
    "get_run": lambda s, r, t: s.get_run(r, thread_id=t),
    "events": lambda s, r, t: s.events(r, thread_id=t),
    "input": lambda s, r, t: s.input(r, thread_id=t),
    "history": lambda s, r, t: s.history(r, thread_id=t),
    "log": lambda s, r, t: s.log(r, thread_id=t),
    "checkout": lambda s, r, t: s.checkout(r, thread_id=t),
    "compacted": lambda s, r, t: s.reconnect_stream(r, thread_id=t),
    "fork": lambda s, r, t: s.fork(r, thread_id=t, run_id="next"),
    "diff": lambda s, r, t: s.diff(r, "r1", thread_id=t),
    "merge_base": lambda s, r, t: s.merge_base("r1", r, thread_id=t),
    "is_ancestor": lambda s, r, t: s.is_ancestor(r, "r3", thread_id=t),
    "runs": lambda s, r, t: s.runs(r),
    "branches": lambda s, r, t: s.branches(r),
}


@SOME
@given(revision=REVISIONS, thread=THREADS, read=st.sampled_from(sorted(READS)))
def test_any_revision_string_gives_an_answer_or_a_store_error(
    small: agui_store.Store, revision: str, thread: str | None, read: str
) -> None:
    answers_or_store_error(lambda: READS[read](small, revision, thread))


@SOME
@given(revision=REVISIONS, thread=THREADS)
def test_get_run_answers_none_for_any_revision_that_names_nothing(
    small: agui_store.Store, revision: str, thread: str | None
) -> None:
    found = answers_or_store_error(lambda: small.get_run(revision, thread_id=thread))
    if isinstance(found, AguiStoreError):
        assert not isinstance(found, RunNotFoundError)  # get_run says None for that
    elif found is not None:
        assert found.thread_id in ("t1", "t2")


@SOME
@given(name=REVISIONS, revision=REVISIONS)
def test_branch_writes_answer_or_raise_a_store_error_and_change_nothing_when_refused(
    small: agui_store.Store, name: str, revision: str
) -> None:
    before = small.branches("t1")
    result = answers_or_store_error(lambda: small.delete_branch(name, thread_id="t1"))
    if isinstance(result, AguiStoreError):
        assert small.branches("t1") == before
    result = answers_or_store_error(lambda: small.branch(name, revision, thread_id="t1"))
    if isinstance(result, AguiStoreError):
        assert {b.name for b in small.branches("t1")} <= {b.name for b in before} | {name}
    small.branch("retry", "r2", thread_id="t1")


@pytest.mark.parametrize(
    ("revision", "kind"),
    [
        ("HEAD~" + "9" * 5000, "no ancestor that far back"),
        ("HEAD~99999999999999999999", "no ancestor that far back"),
        ("r1~" + "0" * 5000, None),  # r1 itself
        ("\U0010ffff", "no run"),
        ("r\U0010ffff", "no run"),
        ("\ud800", "lone surrogate"),
        ("HEAD~\udfff", "lone surrogate"),
        ("r1\0", "no run"),
        ("HEAD~\u0663", "no run"),  # not ASCII digits: no ancestor count
    ],
)
def test_absurd_revisions_are_answered_correctly(
    small: agui_store.Store, revision: str, kind: str | None
) -> None:
    if kind is None:
        assert small.checkout(revision, thread_id="t1").run.run_id == "r1"
        return
    with pytest.raises(RunNotFoundError, match=kind) as caught:
        small.checkout(revision, thread_id="t1")
    assert len(str(caught.value)) < 300
    assert small.get_run(revision, thread_id="t1") is None


def test_a_prefix_ending_in_the_last_code_point_still_finds_its_run(tmp_path: Path) -> None:
    with agui_store.open(tmp_path / "max.db") as store:
        store.append(run("x\U0010ffff\U0010ffffz"))
        store.append(run("\U0010ffff\U0010ffff"))
        assert store.get_run("x\U0010ffff").run_id == "x\U0010ffff\U0010ffffz"
        assert store.get_run("\U0010ffff").run_id == "\U0010ffff\U0010ffff"
        store.append(run("a\ud7ffb"))
        assert store.get_run("a\ud7ff").run_id == "a\ud7ffb"


@given(prefix=st.text(), text=st.text())
def test_the_prefix_range_holds_exactly_the_strings_that_start_with_the_prefix(
    prefix: str, text: str
) -> None:
    """SQLite orders text by its UTF-8 bytes, which is code point order."""
    for candidate in (text, prefix + text, prefix[:-1] + text):
        bound = arguments.prefix_bound(prefix)
        in_range = candidate.encode() >= prefix.encode() and (
            bound is None or candidate.encode() < bound.encode()
        )
        assert in_range == candidate.startswith(prefix), (prefix, candidate, bound)


# --- cursors -----------------------------------------------------------------------------------

CURSORS = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=5),
    st.integers(min_value=-(10**40), max_value=10**40), st.integers(0, 40),
    st.sampled_from([2**63 - 1, 2**63, 2**64, 10**30, -1, -(2**63)]),
)


@SOME
@given(after=CURSORS)
def test_any_cursor_gives_the_events_after_it_or_a_store_error(
    small: agui_store.Store, after: Any
) -> None:
    every = small.events("r2", thread_id="t1")
    first = small.get_run("r1").last_seq + 1  # type: ignore[union-attr]
    got = answers_or_store_error(lambda: small.events("r2", thread_id="t1", after=after))
    valid = after is None or (type(after) is int and after >= 0)
    if not valid:
        assert isinstance(got, InvalidArgumentError), got
        assert isinstance(got, ValueError)
        return
    start = 0 if after is None else max(0, after - first + 1)
    assert got == every[start:]


def test_huge_and_negative_cursors_are_answered_as_documented(small: agui_store.Store) -> None:
    assert small.events("r1", thread_id="t1", after=10**30) == []
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        small.events("r1", thread_id="t1", after=-1)
    with pytest.raises(InvalidArgumentError, match="not a float"):
        small.events("r1", thread_id="t1", after=1.5)


# --- a damaged file ----------------------------------------------------------------------------


def _many_runs(path: Path, count: int = 300) -> None:
    with agui_store.open(path) as store:
        for i in range(count):
            store.append(run(f"run-{i:04d}", text=f"message {i} " + "x" * 200))
    # Closing checkpoints the WAL into the main file: the pages below are the real ones.


def _pages_of(path: Path, table: str) -> list[int]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [int(r[0]) for r in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
            (table,),
        )]
    finally:
        conn.close()


def _overwrite_page(path: Path, page: int, page_size: int = 4096) -> None:
    with open(path, "r+b") as fh:
        fh.seek((page - 1) * page_size)
        fh.write(b"\xa5\x5a" * (page_size // 2))


def test_a_corrupt_page_is_a_store_error_naming_the_file_and_check_reports_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "damaged.db"
    _many_runs(path)
    pages = _pages_of(path, "event_log")
    _overwrite_page(path, pages[len(pages) // 2])
    with agui_store.open(path) as store:
        with pytest.raises(CorruptStoreError) as caught:
            store.history("HEAD")
        assert str(path) in str(caught.value)
        assert "agui-store check" in str(caught.value)
        assert isinstance(caught.value.__cause__, apsw.CorruptError)
        report = store.check()
        assert not report.ok
        # Runs on pages left intact still read back.
        assert store.events("run-0000")[0]["runId"] == "run-0000"


@pytest.mark.parametrize(
    ("table", "read"),
    [
        ("blobs", lambda store: [store.checkout(f"run-{i:04d}") for i in range(300)]),
        ("event_log", lambda store: store.history("HEAD")),
        ("event_log", lambda store: [store.events(f"run-{i:04d}") for i in range(300)]),
        ("event_log", lambda store: store.export_archive(io.BytesIO())),
        ("runs", lambda store: store.log("HEAD")),
        ("search_messages", lambda store: store.search("message", limit=1000)),
    ],
    ids=["checkout", "history", "events", "export", "log", "search"],
)
def test_a_read_that_meets_a_corrupt_page_names_the_table_and_page_it_belongs_to(
    tmp_path: Path, table: str, read: Callable[[agui_store.Store], object]
) -> None:
    path = tmp_path / "damaged.db"
    _many_runs(path)
    pages = _pages_of(path, table)
    page = pages[len(pages) // 2]
    _overwrite_page(path, page)
    shown = "events" if table == "event_log" else table
    with agui_store.open(path) as store, pytest.raises(CorruptStoreError) as caught:
        read(store)
    said = str(caught.value)
    assert f"damage found in table {shown} (page {page})" in said, said
    assert said.startswith(f"{path} is damaged") and said.endswith("for details"), said


def test_check_on_a_store_it_cannot_open_does_not_advise_running_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "damaged.db"
    _many_runs(path)
    with open(path, "r+b") as fh:  # the schema's page, past the file header: nothing opens
        fh.seek(100)
        fh.write(b"\x07" * 40)
    assert cli.main(["log", "--db", str(path)]) == 1
    assert "run 'agui-store check'" in capsys.readouterr().err
    assert cli.main(["check", "--db", str(path)]) == 1
    said = capsys.readouterr().err
    assert said.startswith(f"agui-store check: {path}") and said.count("\n") == 1
    assert "run 'agui-store check'" not in said and ".recover" in said


def test_a_damaged_schema_met_on_opening_names_the_whole_path_and_the_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "e.db"
    _many_runs(path, count=2)
    with open(path, "r+b") as fh:  # the schema's page, past the file header
        fh.seek(100)
        fh.write(b"\x07" * 40)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorruptStoreError) as caught:
        agui_store.open("e.db")
    said = str(caught.value)
    assert said.startswith(f"{path} is damaged"), said
    assert "damage found in the schema (sqlite_schema)" in said, said
    assert cli.main(["--db", "e.db", "log"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"agui-store log: {path} is damaged"), err
    assert "damage found in the schema (sqlite_schema)" in err, err


def test_a_compressed_blob_that_no_longer_inflates_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "blob.db"
    big = {"notes": ["a fairly repetitive note about the weather"] * 400}
    with agui_store.open(path) as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
            {"type": "STATE_SNAPSHOT", "snapshot": big},
            {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
        ])
    conn = apsw.Connection(str(path))
    damaged = conn.execute("SELECT count(*) FROM blobs WHERE codec = 1").fetchone()[0]
    conn.execute("UPDATE blobs SET data = x'789c0badc0ffee' WHERE codec = 1")
    conn.close()
    assert damaged >= 1
    with agui_store.open(path) as store:
        with pytest.raises(CorruptStoreError, match="blob is damaged") as caught:
            store.checkout("r1")
        assert str(path) in str(caught.value)
        assert isinstance(caught.value.__cause__, zlib.error)
        assert not store.check().ok
        assert store.events("r1")[1]["snapshot"] == big  # the log itself is intact


def test_a_plain_blob_whose_bytes_changed_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with agui_store.open(path) as store:
        store.append(run("r1"))
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE blobs SET data = x'7b226e6f7420' WHERE codec = 0")  # '{"not '
    conn.close()
    with agui_store.open(path) as store:
        with pytest.raises(AguiStoreError):  # InvalidEventError naming the JSON fault
            store.checkout("r1")
        assert not store.check().ok


# --- the translation itself --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (apsw.BusyError("database is locked"), StoreBusyError),
        (apsw.LockedError("database table is locked"), StoreBusyError),
        (apsw.CorruptError("database disk image is malformed"), CorruptStoreError),
        (apsw.NotADBError("file is not a database"), NotAStoreError),
        (apsw.FullError("database or disk is full"), StorageFullError),
        (apsw.IOError("disk I/O error"), StorageError),
        (apsw.CantOpenError("unable to open database file"), StorageError),
        (apsw.ReadOnlyError("attempt to write a readonly database"), StorageError),
        (apsw.NoMemError("out of memory"), OutOfMemoryError),
        (apsw.TooBigError("string or blob too big"), InvalidArgumentError),
        (apsw.SQLError("no such table: x"), InternalError),
        (zlib.error("Error -3 while decompressing data"), CorruptStoreError),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
         InvalidArgumentError),
        (OverflowError("int too big to convert"), InvalidArgumentError),
        (MemoryError(), OutOfMemoryError),
        (FileNotFoundError(2, "No such file or directory"), StorageError),
        (RecursionError("maximum recursion depth exceeded"), InternalError),
        (KeyError("messages"), InternalError),
        (ValueError("bad"), InternalError),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v.__name__,
)
def test_every_error_inside_a_transaction_leaves_it_as_a_store_error_naming_the_file(
    tmp_path: Path, raised: BaseException, expected: type[AguiStoreError]
) -> None:
    """Raised inside the body of a real transaction, so the translation covers the body too,
    and the transaction is rolled back: the connection works for the next call."""
    path = tmp_path / "tx.db"
    conn = connection.connect(str(path), busy_timeout_ms=30_000)
    try:
        with pytest.raises(expected) as caught, connection.immediate(conn):
            conn.execute("INSERT INTO threads(thread_id, created_at) VALUES ('lost', 0)")
            raise raised
        assert caught.value.__cause__ is raised
        assert isinstance(caught.value, AguiStoreError)
        assert str(path) in str(caught.value) or expected is InvalidArgumentError
        assert conn.getautocommit()
        assert conn.execute("SELECT count(*) FROM threads").fetchone()[0] == 0
        with pytest.raises(expected), connection.snapshot(conn):
            raise raised
        assert conn.getautocommit()
    finally:
        conn.close()


def test_the_library_errors_are_also_the_builtins_callers_expect() -> None:
    assert issubclass(StorageError, OSError)
    assert issubclass(StorageFullError, StorageError)
    assert issubclass(InvalidArgumentError, ValueError)
    assert issubclass(OutOfMemoryError, MemoryError)
    assert issubclass(InternalError, RuntimeError)
    assert issubclass(CorruptStoreError, agui_store.IntegrityError)
    full = StorageFullError("x: no space", path="x", errno=28)
    assert full.errno == 28 and str(full) == "x: no space"


def test_bad_options_are_store_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        agui_store.open(tmp_path / "a.db", checkpoint_events=0)
    with agui_store.open(tmp_path / "b.db") as store:
        store.append(run("r1"))
        with pytest.raises(InvalidArgumentError):
            store.diff("r1", "r1", mode="four-dot")  # type: ignore[arg-type]


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    store = agui_store.open(tmp_path / "c.db")
    store.close()
    with pytest.raises(AguiStoreError, match="closed"):
        store.threads()
    assert os.path.exists(tmp_path / "c.db")


@pytest.mark.parametrize(
    ("call", "expected", "words"),
    [
        (lambda p: agui_store.open(5), InvalidArgumentError, "store path"),
        (lambda p: agui_store.open(p, busy_timeout_ms="x"), InvalidArgumentError,
         "busy_timeout_ms"),
        (lambda p: agui_store.open(p, max_depth=0), InvalidArgumentError, "max_depth"),
        (lambda p: agui_store.open(p, max_event_bytes=True), InvalidArgumentError,
         "max_event_bytes"),
        (lambda p: agui_store.open(p).append(p.parent), StorageError, "Is a directory"),
        (lambda p: agui_store.open(p).append(p.parent / "none.jsonl"), StorageError,
         "No such file"),
        (lambda p: agui_store.open(p).import_file(p.parent / "none.jsonl"), StorageError,
         "No such file"),
        (lambda p: agui_store.open(p).import_file(p.parent), StorageError, "directory"),
        (lambda p: agui_store.open(p).fork("HEAD", run_id=5), InvalidArgumentError, "run_id"),
        (lambda p: agui_store.open(p).fork("HEAD", run_id="\ud800"), InvalidArgumentError,
         "run_id"),
    ],
    ids=["a path that is a number", "a timeout that is text", "a depth of 0",
         "a size that is a bool", "events from a folder", "events from a missing file",
         "an import from a missing file", "an import from a folder",
         "a fork's run id that is a number", "a fork's run id with a lone surrogate"],
)
def test_bad_arguments_are_store_errors_naming_the_argument(
    tmp_path: Path, call: Callable[[Path], Any], expected: type[AguiStoreError], words: str
) -> None:
    path = tmp_path / "args.db"
    with agui_store.open(path) as store:
        store.append(run("r1"))
    with pytest.raises(expected, match=words):
        call(path)


def test_a_bytes_path_opens_the_same_store(tmp_path: Path) -> None:
    path = tmp_path / "bytes.db"
    with agui_store.open(os.fsencode(path)) as store:
        store.append(run("r1"))
    with agui_store.open(path) as store:
        assert store.get_run("r1") is not None
