"""Opening a path refuses what is not a store before writing a byte to it, and creates
what it creates private.

Every refusal is checked on real files, through the API and through the real command line
(``python -m agui_store``): the file is byte-for-byte what it was, no ``-wal`` or ``-shm``
appeared beside it, and the error names the path. Another application's database is made in
both journal modes SQLite has (a rollback journal; WAL), because opening one in WAL mode used
to switch it before refusing it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest

import agui_store
from agui_store import (
    AguiStoreError,
    InvalidArgumentError,
    NotAStoreError,
    SchemaVersionError,
    StorageError,
)
from agui_store.backends.sqlite import schema

ROOT = Path(__file__).resolve().parents[1]
EVENTS = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
]


def folder_state(folder: Path) -> dict[str, str]:
    """Every file in a folder and the sha256 of its bytes: equal states, nothing changed."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def cli(*args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> (
    subprocess.CompletedProcess[str]
):
    """The real entry point, as a user runs it."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "agui_store", *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int, *names: str) -> None:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])


# --- files that are not stores ----------------------------------------------------------------


def _text(path: Path) -> None:
    path.write_text("name,value\nalpha,1\n", encoding="utf-8")


def _binary(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 40 + os.urandom(4096))


def _other_app(path: Path, journal: str, *, app_id: int = 0, user_version: int = 0) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes(body) VALUES ('keep me'), ('and me')")
    if app_id:
        conn.execute(f"PRAGMA application_id={app_id}")
    if user_version:
        conn.execute(f"PRAGMA user_version={user_version}")
    conn.close()


def _rollback_db(path: Path) -> None:
    _other_app(path, "DELETE")


def _wal_db(path: Path) -> None:
    _other_app(path, "WAL")


def _marked_db(path: Path) -> None:
    _other_app(path, "WAL", app_id=0x47504B47)  # GeoPackage's application_id


def _versioned_empty_db(path: Path) -> None:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA user_version=12")  # an application's schema marker, no tables yet
    conn.close()


def _store_header_on_garbage(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))


FOREIGN = {
    "a text file": _text,
    "a random binary": _binary,
    "another application's database (rollback journal)": _rollback_db,
    "another application's database (WAL)": _wal_db,
    "another application's database with its own application_id": _marked_db,
    "another application's database with a user_version and no tables": _versioned_empty_db,
    "garbage behind SQLite's header": _store_header_on_garbage,
}


@pytest.fixture(params=list(FOREIGN), ids=list(FOREIGN))
def foreign(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    path = folder / "data.db"
    FOREIGN[request.param](path)
    for sibling in ("-wal", "-shm"):  # what the maker left: closed cleanly, nothing beside
        assert not Path(f"{path}{sibling}").exists()
    return path


def test_opening_a_file_that_is_not_a_store_refuses_it_and_leaves_it_byte_for_byte(
    foreign: Path,
) -> None:
    before = folder_state(foreign.parent)
    with pytest.raises(NotAStoreError) as caught:
        agui_store.open(foreign)
    assert str(foreign) in str(caught.value)
    assert "untouched" in str(caught.value)
    assert folder_state(foreign.parent) == before


def test_the_command_line_refuses_it_in_one_line_and_leaves_it_byte_for_byte(
    foreign: Path,
) -> None:
    before = folder_state(foreign.parent)
    for command in (["threads"], ["demo"]):
        result = cli("--db", str(foreign), *command)
        assert_one_line_error(result, 1, str(foreign), f"agui-store {command[0]}:")
        assert folder_state(foreign.parent) == before


@pytest.mark.parametrize("make", [_rollback_db, _wal_db, _marked_db], ids=["rollback", "WAL",
                                                                         "application_id"])
def test_the_other_applications_database_still_holds_its_rows_in_its_journal_mode(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    path = tmp_path / "theirs.db"
    make(path)
    mode = path.read_bytes()[18]  # 1: rollback journal, 2: WAL
    with pytest.raises(NotAStoreError):
        agui_store.open(path)
    assert path.read_bytes()[18] == mode
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT body FROM notes ORDER BY id").fetchall() == [
            ("keep me",), ("and me",)
        ]
    finally:
        conn.close()


# --- what opens --------------------------------------------------------------------------------


def test_a_zero_byte_file_is_a_new_empty_store(tmp_path: Path) -> None:
    """What a store file is between its creation and its first write (a crash there leaves
    one): opening it makes the store, as SQLite treats an empty file as an empty database."""
    path = tmp_path / "empty.db"
    path.touch()
    with agui_store.open(path) as store:
        assert store.threads() == []
        store.append(EVENTS)
    with agui_store.open(path) as store:
        assert [r.run_id for r in store.runs("t1")] == ["r1"]


def test_an_sqlite_database_with_nothing_in_it_becomes_a_store(tmp_path: Path) -> None:
    """No tables, no application_id, no user_version: nothing to destroy and no owner."""
    path = tmp_path / "blank.db"
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("VACUUM")
    conn.close()
    with agui_store.open(path) as store:
        store.append(EVENTS)
        assert store.check().ok


def test_new_store_files_carry_the_agui_store_application_id(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    agui_store.open(path).close()
    header = path.read_bytes()[:100]
    assert int.from_bytes(header[68:72], "big") == schema.APPLICATION_ID == 0x41475549


def test_a_store_without_its_application_id_is_still_recognized_by_its_tables(
    tmp_path: Path,
) -> None:
    """Files are marked since schema version 1, but one whose mark was lost (a copy through
    a tool that resets it) is still a store: its tables say so."""
    path = tmp_path / "unmarked.db"
    with agui_store.open(path) as store:
        store.append(EVENTS)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA application_id=0")
    conn.close()
    with agui_store.open(path) as store:
        assert [r.run_id for r in store.runs("t1")] == ["r1"]


def test_a_store_re_marked_with_another_applications_id_is_refused_untouched(
    tmp_path: Path,
) -> None:
    """The mark is what the file says it is: another application's id wins over our tables."""
    path = tmp_path / "claimed.db"
    with agui_store.open(path) as store:
        store.append(EVENTS)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA application_id = 7")
    conn.close()
    before = folder_state(tmp_path)
    with pytest.raises(NotAStoreError, match="application_id 0x00000007"):
        agui_store.open(path)
    assert folder_state(tmp_path) == before


def test_a_newer_store_in_rollback_journal_mode_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "newer.db"
    with agui_store.open(path) as store:
        store.append(EVENTS)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=DELETE")  # as a copy made by `sqlite3 .backup` is
    conn.execute(f"PRAGMA user_version={schema.SCHEMA_VERSION + 1}")
    conn.close()
    before = folder_state(tmp_path)
    with pytest.raises(SchemaVersionError, match="newer agui-store"):
        agui_store.open(path)
    assert folder_state(tmp_path) == before


# --- bad paths ---------------------------------------------------------------------------------


def test_a_folder_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(NotAStoreError, match="is a folder"):
        agui_store.open(tmp_path)
    assert_one_line_error(cli("--db", str(tmp_path), "threads"), 1, str(tmp_path), "folder")


def test_a_path_in_a_missing_folder_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "store.db"
    with pytest.raises(StorageError, match="does not exist") as caught:
        agui_store.open(path)
    assert isinstance(caught.value, OSError)
    assert_one_line_error(cli("--db", str(path), "threads"), 1, str(path.parent))
    assert not path.parent.exists()


def test_a_nul_byte_in_the_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="NUL"):
        agui_store.open(f"{tmp_path}/a\0b.db")
    assert list(tmp_path.iterdir()) == []


def test_a_path_that_is_not_utf8_text_is_refused_naming_it_before_any_file_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone surrogate (typed as an escape, or what undecodable bytes decode to) has no
    UTF-8 form for SQLite or a URL to take."""
    monkeypatch.chdir(tmp_path)  # a short path: a long one is quoted cut short
    for path in ("d/\ud800.db", b"d/\xff.db"):
        with pytest.raises(InvalidArgumentError) as refused:
            agui_store.open(path)
        message = str(refused.value)
        assert "store path" in message and "surrogate" in message
        assert message.encode("utf-8")  # printable as it is
        assert "\\ud800.db" in message or "\\udcff.db" in message
    assert list(tmp_path.iterdir()) == []


def test_an_empty_store_path_is_refused_in_the_api_and_on_the_command_line(
    tmp_path: Path,
) -> None:
    """SQLite opens an empty path as a private temporary database: a store that would
    vanish, with everything recorded into it, when it closes."""
    for empty in ("", b""):
        with pytest.raises(InvalidArgumentError, match="store path is empty"):
            agui_store.open(empty)
    with pytest.raises(InvalidArgumentError, match="store path is empty"):
        agui_store.copy("", str(tmp_path / "copy.db"))
    for command in (["threads"], ["demo"], ["log", "HEAD", "--thread", "t"]):
        result = cli("--db", "", *command)
        assert_one_line_error(result, 1, "store path is empty", f"agui-store {command[0]}:")
    assert_one_line_error(cli("copy", "", str(tmp_path / "copy.db")), 1, "store path is empty")
    assert list(tmp_path.iterdir()) == []


def test_a_device_is_refused() -> None:
    with pytest.raises(NotAStoreError, match="not a regular file"):
        agui_store.open("/dev/null")


def _without_file_permission_override() -> tuple[str, ...]:
    """A command prefix under which file permissions apply (root bypasses them)."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions cannot be made to apply")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search")


@pytest.fixture
def unreadable(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "locked.db"
    with agui_store.open(path) as store:
        store.append(EVENTS)
    path.chmod(0)
    yield path
    path.chmod(0o600)


def test_an_unreadable_file_is_a_storage_error_on_the_command_line(unreadable: Path) -> None:
    result = cli("--db", str(unreadable), "threads", prefix=_without_file_permission_override())
    assert_one_line_error(result, 1, str(unreadable))
    assert "ermission" in result.stderr


def test_an_unreadable_file_is_a_storage_error_through_the_api(unreadable: Path) -> None:
    code = (
        "import agui_store, sys\n"
        "try:\n"
        f"    agui_store.open({str(unreadable)!r})\n"
        "except agui_store.StorageError as e:\n"
        "    print(type(e).__name__, isinstance(e, PermissionError) or e.errno, e)\n"
        "    sys.exit(0)\n"
        "sys.exit(5)\n"
    )
    result = subprocess.run(
        [*_without_file_permission_override(), sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert str(unreadable) in result.stdout


def test_a_store_in_a_folder_that_cannot_be_written_names_the_folder_and_the_way_out(
    tmp_path: Path,
) -> None:
    """SQLite makes the -wal and -shm files beside a store even to read it."""
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "store.db"
    with agui_store.open(path) as store:
        store.append(EVENTS)
    folder.chmod(0o555)
    try:
        result = cli("--db", str(path), "log", prefix=_without_file_permission_override())
    finally:
        folder.chmod(0o755)
    assert_one_line_error(result, 1, str(path))
    assert f"its folder {folder} cannot be written" in result.stderr
    assert "-wal and -shm" in result.stderr


def test_a_write_refused_by_a_read_only_file_names_that_file(tmp_path: Path) -> None:
    """SQLite gives the -wal and -shm files it makes the store's mode: a read of a read-only
    store leaves a read-only -shm, which keeps writes out once the store is writable again."""
    path = tmp_path / "store.db"
    with agui_store.open(path) as store:
        store.append(EVENTS)
    prefix = _without_file_permission_override()
    path.chmod(0o444)
    try:
        assert cli("--db", str(path), "threads", prefix=prefix).returncode == 0
        result = cli("--db", str(path), "compact", prefix=prefix)
        assert_one_line_error(result, 1, f"{path} cannot be written")
        assert "the file is read-only (mode 0444)" in result.stderr
        path.chmod(0o600)
        result = cli("--db", str(path), "compact", prefix=prefix)
        assert_one_line_error(result, 1, f"{path} cannot be written")
        assert f"{path}-shm, beside it, is read-only (mode 0444)" in result.stderr
    finally:
        path.chmod(0o600)
        for sibling in (f"{path}-wal", f"{path}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(sibling, 0o600)
    assert cli("--db", str(path), "compact", prefix=prefix).returncode == 0


# --- file modes --------------------------------------------------------------------------------


def _mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o000], ids=["umask 022", "permissive umask 000"])
def test_the_database_its_wal_and_its_shm_are_created_0600(tmp_path: Path, mask: int) -> None:
    path = tmp_path / "private.db"
    with umask(mask), agui_store.open(path) as store:
        store.append(EVENTS)
        for name in (path, f"{path}-wal", f"{path}-shm"):
            assert os.path.exists(name), name
            assert _mode(name) == 0o600, (name, oct(_mode(name)))


@pytest.mark.parametrize("mask", [0o022, 0o000], ids=["umask 022", "permissive umask 000"])
def test_through_a_symlink_to_a_file_not_yet_there_the_target_is_created_0600(
    tmp_path: Path, mask: int
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    target = real / "store.db"
    link = tmp_path / "link.db"
    link.symlink_to(target)
    with umask(mask), agui_store.open(link) as store:
        store.append(EVENTS)
        assert link.is_symlink()
        for name in (target, f"{target}-wal", f"{target}-shm"):
            assert os.path.exists(name), name
            assert _mode(name) == 0o600, (name, oct(_mode(name)))
    with agui_store.open(target) as store:
        assert [r.run_id for r in store.runs("t1")] == ["r1"]


def test_every_refusal_is_a_store_error(foreign: Path) -> None:
    """The tree's root catches them all, whatever the leaf."""
    with pytest.raises(AguiStoreError):
        agui_store.open(foreign)


@contextlib.contextmanager
def read_only_mount(folder: Path) -> Iterator[Path]:
    """``folder`` seen through a read-only bind mount (needs root and mount: skipped without)."""
    view = folder.parent / f"{folder.name}-read-only"
    view.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"a bind mount needs root: {mounted.stderr.decode().strip()}")
    try:
        remounted = subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(view)], capture_output=True
        )
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount read-only: {remounted.stderr.decode().strip()}")
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=True)


def test_a_store_in_a_read_only_folder_is_refused_with_why(tmp_path: Path) -> None:
    folder = tmp_path / "stores"
    folder.mkdir()
    with agui_store.open(folder / "s.db") as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                      {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}])
    with read_only_mount(folder) as view, pytest.raises(StorageError) as refused:
        agui_store.open(view / "s.db")
    assert "read-only file system" in str(refused.value) and "-wal" in str(refused.value)


#: A recording interrupted by Ctrl-C, then the store opened again at once: the async store's
#: connections are still closing, the last one checkpointing the WAL, which holds the new
#: store's marks alone.
_REOPENED_AFTER_CTRL_C = """
import asyncio, os, signal, sys
import agui_store, agui_store.aio

async def agent():
    yield {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    yield {"type": "TEXT_MESSAGE_START", "messageId": "a", "role": "assistant"}
    for i in range(1000):
        await asyncio.sleep(0.01)
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": f"{i} "}

async def main():
    store = await agui_store.aio.open(sys.argv[1])
    asyncio.get_running_loop().call_later(0.5, os.kill, os.getpid(), signal.SIGINT)
    async for _ in store.record(agent()):
        pass

try:
    asyncio.run(main())
except KeyboardInterrupt:
    pass
with agui_store.open(sys.argv[1]) as store:
    print(len(store.events("r", thread_id="t")) > 2)
"""


def test_a_new_store_opened_again_while_its_last_connection_closes_waits_for_it(
    tmp_path: Path,
) -> None:
    for attempt in range(4):  # a race: the reopening fell in the closing most times
        path = tmp_path / f"chat-{attempt}.db"
        done = subprocess.run([sys.executable, "-c", _REOPENED_AFTER_CTRL_C, str(path)],
                              capture_output=True, text=True, timeout=120,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert done.stdout.split() == ["True"], done.stderr[-2000:]


def test_an_archive_given_as_a_store_is_named_an_archive_with_the_import_that_reads_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    with agui_store.open(tmp_path / "source.db") as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
                      {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}])  # fmt: skip
        store.export_archive(folder / "backup.jsonl")
    archive = folder / "backup.jsonl"
    before = folder_state(folder)
    with pytest.raises(NotAStoreError, match=r"is an agui-store archive .*, not a store: import"):
        agui_store.open(archive)
    for command in (["copy", str(archive), str(folder / "new.db")], ["--db", str(archive), "log"]):
        result = cli(*command)
        assert_one_line_error(result, 1, str(archive), "agui-store --db STORE import")
    assert folder_state(folder) == before
