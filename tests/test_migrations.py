"""Schema versions: old files open, migrate and read back unchanged; newer files are refused
clearly and left alone; new files are private to their owner.

``tests/data/v1.sqlite`` was written by schema version 1 code (``tests/data/make_v1_fixture.py``)
with what that version read back from it in ``v1.expected.json``; ``v7.sqlite`` and ``v9.sqlite``
likewise by versions 7 and 9 (``tests/data/fixtures.py`` writes them all). The tests open
copies of them, never the kept files themselves: opening migrates.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import agui_store
from agui_store import AguiStoreError, SchemaVersionError, ScopeError, testing
from agui_store.backends.sqlite import schema
from agui_store.protocol import model
from tests.data.fixtures import read_back_v1, read_back_v9
from tests.schema_history import as_version_12
from tests.workers.harness import ROOT, Worker, dump, search_on_a_terminal, worker_env

DATA = Path(__file__).resolve().parent / "data"
FIXTURES = sorted(DATA.glob("v*.sqlite"))


def pragma(path: Path, name: str) -> int:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    path = tmp_path / "v1.db"
    shutil.copy(DATA / "v1.sqlite", path)
    return path


def test_the_kept_fixture_is_a_version_1_file_no_test_has_migrated() -> None:
    assert pragma(DATA / "v1.sqlite", "user_version") == 1
    assert pragma(DATA / "v1.sqlite", "application_id") == schema.APPLICATION_ID
    assert not Path(f"{DATA / 'v1.sqlite'}-wal").exists()


def test_a_version_1_file_opens_migrated_and_reads_back_what_version_1_read(v1: Path) -> None:
    expected = json.loads((DATA / "v1.expected.json").read_text(encoding="utf-8"))
    with agui_store.open(v1) as store:
        assert read_back_v1(store) == expected
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
    assert pragma(v1, "user_version") == schema.SCHEMA_VERSION
    assert pragma(v1, "application_id") == schema.APPLICATION_ID
    with agui_store.open(v1) as store:  # and once more, already migrated
        assert read_back_v1(store) == expected


def test_a_migrated_file_takes_new_appends_where_version_1_left_off(v1: Path) -> None:
    with agui_store.open(v1) as store:
        # The live run recorded by version 1 continues, and finishes.
        store.append(
            [
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a4", "delta": "..."},
                {"type": "TEXT_MESSAGE_END", "messageId": "a4"},
                {"type": "RUN_FINISHED", "threadId": "chat", "runId": "r4"},
            ],
            thread_id="chat",
        )
        run = store.get_run("r4", thread_id="chat")
        assert run is not None and (run.status, run.event_count) == ("finished", 7)
        assert store.checkout("r4", thread_id="chat").messages[-1] == {
            "id": "a4",
            "role": "assistant",
            "content": "Still typing...",
        }
        # A new run on the branch version 1 wrote.
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "chat", "runId": "r5"},
                {"type": "RUN_FINISHED", "threadId": "chat", "runId": "r5"},
            ],
            branch="first",
        )
        r5 = store.get_run("r5", thread_id="chat")
        assert r5 is not None and r5.parent_run_id == "r1"
        assert not store.check().problems


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name for f in FIXTURES])
def test_every_kept_fixture_opens_with_this_version_and_checks_clean(
    fixture: Path, tmp_path: Path
) -> None:
    path = tmp_path / fixture.name
    shutil.copy(fixture, path)
    with agui_store.open(path) as store:
        assert store.threads()
        assert not store.check().problems
    assert pragma(path, "user_version") == schema.SCHEMA_VERSION


def test_several_processes_opening_an_old_file_at_once_migrate_it_once(
    v1: Path, tmp_path: Path
) -> None:
    workers = [
        Worker("racer", "writer", str(v1), f"M{p}", "--threads", "2", "--runs", "3")
        for p in range(3)
    ]
    for w in workers:
        w.wait_for("spawned", timeout=60)
    for w in workers:
        w.send("go")
    for w in workers:
        lines = w.finish(timeout=120)
        assert not [line for line in lines if line.startswith("error")], lines
    expected = json.loads((DATA / "v1.expected.json").read_text(encoding="utf-8"))
    with agui_store.open(v1) as store:
        found = read_back_v1(store)
        assert not store.check().problems
    # The racers wrote to conversations of their own: the old ones read back unchanged.
    assert {k: v for k, v in found["runs"].items() if k in expected["runs"]} == expected["runs"]
    assert len(found["runs"]) == len(expected["runs"]) + 3 * 2 * 3
    assert pragma(v1, "user_version") == schema.SCHEMA_VERSION


def test_migrations_cover_every_version_in_order() -> None:
    assert sorted(schema.MIGRATIONS) == list(range(1, schema.SCHEMA_VERSION + 1))


# --- newer files ----------------------------------------------------------------------------


def test_a_file_from_a_newer_version_is_refused_clearly_and_left_untouched(v1: Path) -> None:
    with agui_store.open(v1):
        pass
    conn = apsw.Connection(str(v1))
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.close()
    before = dump(v1)
    with pytest.raises(SchemaVersionError) as caught:
        agui_store.open(v1)
    error = caught.value
    assert isinstance(error, AguiStoreError)
    message = str(error)
    assert str(v1) in message and f"schema version {schema.SCHEMA_VERSION + 1}" in message
    assert f"reads up to {schema.SCHEMA_VERSION}" in message and "upgrade agui-store" in message
    assert dump(v1) == before
    done = subprocess.run(
        [sys.executable, "-m", "agui_store.cli", "threads", "--db", str(v1)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=worker_env(),
        timeout=120,
    )
    assert done.returncode == 1 and "newer agui-store" in done.stderr
    assert "Traceback" not in done.stderr
    assert dump(v1) == before


def test_an_sqlite_file_of_another_application_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE notes(body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.close()
    before = dump(path)
    with pytest.raises(AguiStoreError, match="another application"):
        agui_store.open(path)
    assert dump(path) == before


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with agui_store.open(path) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}])
        assert not store.check().problems
    assert pragma(path, "user_version") == schema.SCHEMA_VERSION


# --- file modes -----------------------------------------------------------------------------


@pytest.fixture
def umask() -> Iterator[Any]:
    previous = os.umask(0o022)
    os.umask(previous)

    def set_umask(mask: int) -> None:
        os.umask(mask)

    yield set_umask
    os.umask(previous)


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o000])
def test_new_files_and_their_wal_and_shm_are_readable_by_their_owner_only(
    tmp_path: Path, umask: Any, mask: int
) -> None:
    umask(mask)
    path = tmp_path / "private.db"
    with agui_store.open(path) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}])
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        assert wal.exists() and shm.exists()
        assert {f.name: mode(f) for f in (path, wal, shm)} == {
            path.name: "0o600",
            wal.name: "0o600",
            shm.name: "0o600",
        }
    assert mode(path) == "0o600"


def test_a_file_created_by_the_cli_is_private_too(tmp_path: Path, umask: Any) -> None:
    path = tmp_path / "cli.db"
    recording = tmp_path / "run.jsonl"
    recording.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n',
        encoding="utf-8",
    )
    umask(0)  # the child inherits it
    done = subprocess.run(
        [sys.executable, "-m", "agui_store.cli", "import", str(recording), "--db", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=worker_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert mode(path) == "0o600"


# --- version 7 -> 8: content hashes backfilled ----------------------------------------------


@pytest.fixture
def v7(tmp_path: Path) -> Path:
    path = tmp_path / "v7.db"
    shutil.copy(DATA / "v7.sqlite", path)
    return path


def test_a_version_7_file_gets_every_hash_backfilled_and_reads_back_what_version_7_read(
    v7: Path,
) -> None:
    assert pragma(DATA / "v7.sqlite", "user_version") == 7
    expected = json.loads((DATA / "v7.expected.json").read_text(encoding="utf-8"))
    with agui_store.open(v7) as store:
        assert read_back_v1(store) == expected
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
        assert "hashes" in report.checked and "derived" in report.checked
        hashes = {(t, r.run_id): r.hash for t in store.threads() for r in store.runs(t)}
        # Its checkpoints were dropped by the migration to version 10 (chunked lists), and
        # are derived again, with hashes, from the backfilled log.
        assert store.derive() > 0
        assert read_back_v1(store) == expected
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
    assert all(h is not None and len(h) == 64 for h in hashes.values()), hashes
    assert len(set(hashes.values())) == len(hashes)
    conn = apsw.Connection(str(v7), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        unhashed = conn.execute(
            "SELECT (SELECT count(*) FROM runs WHERE start_hash IS NULL), "
            "(SELECT count(*) FROM batches WHERE hash IS NULL), "
            "(SELECT count(*) FROM checkpoints WHERE run_hash IS NULL OR view_hash IS NULL), "
            "(SELECT count(*) FROM checkpoints)"
        ).fetchone()
    finally:
        conn.close()
    assert unhashed[:3] == (0, 0, 0) and unhashed[3] > 0
    with agui_store.open(v7) as store:  # reopened: the same hashes, nothing recomputed
        assert {(t, r.run_id): r.hash for t in store.threads() for r in store.runs(t)} == hashes


def test_a_migrated_version_7_file_continues_its_live_run_and_chains_new_runs_onto_its_hashes(
    v7: Path,
) -> None:
    with agui_store.open(v7) as store:
        live = store.get_run("live", thread_id="resend")
        assert live is not None and live.status == "incomplete"
        store.append(
            [
                {"type": "TEXT_MESSAGE_END", "messageId": "live-a"},
                {"type": "RUN_FINISHED", "threadId": "resend", "runId": "live"},
            ],
            thread_id="resend",
        )
        finished = store.get_run("live", thread_id="resend")
        assert finished is not None and finished.hash != live.hash
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "resend", "runId": "after"},
                {"type": "RUN_FINISHED", "threadId": "resend", "runId": "after"},
            ]
        )
        assert store.checkout("after", thread_id="resend").messages[-1]["id"] == "live-a"
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]


# --- version 9: the schema before the engine written once above the storage port ---


@pytest.fixture
def v9(tmp_path: Path) -> Path:
    path = tmp_path / "v9.db"
    shutil.copy(DATA / "v9.sqlite", path)
    return path


def v9_expected() -> dict[str, Any]:
    expected: dict[str, Any] = json.loads((DATA / "v9.expected.json").read_text(encoding="utf-8"))
    return expected


#: What check() covers that a version 9 file did not have: the conversation tables, the
#: erasure log.
CHECKS_ADDED_SINCE_V9 = ("conversations", "erasures")
#: What check()'s report says that it did not: the erasure log and the log's head.
REPORTED_SINCE_V9 = ("erasures", "head")


def assert_reads_back(found: dict[str, Any], expected: dict[str, Any]) -> None:
    """Equal, compared a part and a run at a time so that a failure names what differs."""
    assert found.keys() == expected.keys()
    for part in ("threads", "branches", "diffs"):
        assert found[part] == expected[part], part
    # check() covers what later versions added too; the rest of its report is the same.
    checked = [c for c in found["check"]["checked"] if c not in CHECKS_ADDED_SINCE_V9]
    report = {k: v for k, v in found["check"].items() if k not in REPORTED_SINCE_V9}
    # The runs version 10 left to derive again (it dropped every checkpoint), which a
    # version 9 check did not mention.
    warnings = [w for w in report["warnings"] if "wait to be derived" not in w]
    assert {**report, "checked": checked, "warnings": warnings} == expected["check"]
    assert list(found["runs"]) == list(expected["runs"])
    for run, read in expected["runs"].items():
        for what, value in read.items():
            if what in HASHES_RECOMPUTED_SINCE_V9:
                continue
            assert found["runs"][run][what] == value, f"{run}: {what}"


#: What a version 9 file read that version 15 computes again: a run's hash, which covered
#: the file's own sequence numbers and covers positions since (check() vouches for them).
HASHES_RECOMPUTED_SINCE_V9 = ("hash",)


def test_the_kept_version_9_file_holds_everything_version_9_can_hold() -> None:
    kept = DATA / "v9.sqlite"
    assert pragma(kept, "user_version") == 9
    assert not Path(f"{kept}-wal").exists()
    conn = apsw.Connection(str(kept), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        counts = {
            name: conn.execute(query).fetchone()[0]
            for name, query in {
                "owned threads": "SELECT count(*) FROM threads WHERE owner IS NOT NULL",
                "unowned threads": "SELECT count(*) FROM threads WHERE owner IS NULL",
                "synthetic runs": "SELECT count(*) FROM runs WHERE synthetic",
                "forks": "SELECT count(*) FROM runs WHERE lineage = 'parentRunId'",
                "request bodies": "SELECT count(*) FROM runs WHERE input IS NOT NULL",
                "inputs by reference": "SELECT count(*) FROM runs WHERE input_refs IS NOT NULL",
                "echoes": "SELECT count(*) FROM echo_refs",
                "branches": "SELECT count(*) FROM branches",
                "checkpoints": "SELECT count(*) FROM checkpoints",
                "underived runs": "SELECT count(*) FROM underived",
                "unhashed runs": "SELECT count(*) FROM runs WHERE start_hash IS NULL",
            }.items()
        }
        kinds = {row[0] for row in conn.execute("SELECT DISTINCT type FROM events")}
    finally:
        conn.close()
    assert counts.pop("unhashed runs") == 0
    assert all(counts.values()), counts
    assert {
        "TOOL_CALL_RESULT",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "MESSAGES_SNAPSHOT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_ENCRYPTED_VALUE",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
        "RUN_ERROR",
    } <= kinds
    runs = v9_expected()["runs"]
    assert {r["status"] for r in runs.values()} >= {"finished", "error", "incomplete"}
    assert {r["lineage"] for r in runs.values()} >= {"root", "head", "messages", "parentRunId"}


def test_a_version_9_file_opens_with_this_version_and_reads_back_what_version_9_read(
    v9: Path,
) -> None:
    expected = v9_expected()
    with agui_store.open(v9) as store:
        assert_reads_back(read_back_v9(store), expected)
    assert pragma(v9, "user_version") == schema.SCHEMA_VERSION
    assert pragma(v9, "application_id") == schema.APPLICATION_ID
    with agui_store.open(v9) as store:  # and once more, already migrated
        assert_reads_back(read_back_v9(store), expected)


def test_a_migrated_version_9_file_derives_what_it_left_underived_without_changing_a_read(
    v9: Path,
) -> None:
    with agui_store.open(v9) as store:
        # Version 10 dropped every checkpoint (chunked lists since): every complete run is
        # derived again, besides what version 9 itself left underived.
        conn = testing.connection(store)
        complete = dict(
            conn.execute(
                "SELECT threads.thread_id, count(DISTINCT batches.run) FROM batches "
                "JOIN runs ON runs.id = batches.run JOIN threads ON threads.id = runs.thread "
                "WHERE batches.outcome IS NOT NULL GROUP BY threads.thread_id"
            ).fetchall()
        )
        assert store.derive("bulk", scope="bob") == complete["bulk"] >= 2
        assert store.derive() == sum(complete.values()) - complete["bulk"]
        assert store.derive() == 0
        assert_reads_back(read_back_v9(store), v9_expected())


def test_a_migrated_version_9_file_takes_appends_of_every_kind_afterwards(v9: Path) -> None:
    with agui_store.open(v9) as store:
        # The live run continues and finishes.
        live = store.get_run("p3", thread_id="ops")
        assert live is not None and live.status == "incomplete"
        store.append(
            [
                {"type": "TEXT_MESSAGE_END", "messageId": "m4"},
                {"type": "RUN_FINISHED", "threadId": "ops", "runId": "p3"},
            ],
            thread_id="ops",
            run_id="p3",
        )
        done = store.get_run("p3", thread_id="ops")
        assert done is not None and done.status == "finished" and done.hash != live.hash
        assert store.checkout("p3", thread_id="ops").messages[-1] == {
            "id": "m4",
            "role": "assistant",
            "content": "Still running",
        }
        # The owner's HttpAgent client sends its whole history again: placed below h5.
        held = store.checkout("retry", thread_id="help", scope="alice")
        sent = [*held.messages, {"id": "u6", "role": "user", "content": "And in Rankine?"}]
        body = {
            "threadId": "help",
            "runId": "h6",
            "state": held.state,
            "messages": sent,
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "help", "runId": "h6"},
                {"type": "RUN_FINISHED", "threadId": "help", "runId": "h6"},
            ],
            input=body,
            scope="alice",
        )
        h6 = store.get_run("h6", thread_id="help", scope="alice")
        assert h6 is not None and h6.parent_run_id == "h5" and h6.lineage == "messages"
        assert store.checkout("h6", thread_id="help").messages == sent
        assert store.input("h6", thread_id="help") == body
        assert [b.run_id for b in store.branches("help") if b.name == "retry"] == ["h6"]
        # Another owner's write is refused and changes nothing.
        before = read_back_v9(store)
        with pytest.raises(ScopeError):
            store.append([{"type": "RUN_STARTED", "threadId": "help", "runId": "x"}], scope="bob")
        assert read_back_v9(store) == before
        # The underived thread takes a run; its earlier runs read as they did.
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "bulk", "runId": "b4"},
                {"type": "RUN_FINISHED", "threadId": "bulk", "runId": "b4"},
            ],
            scope="bob",
        )
        b4 = store.get_run("b4", thread_id="bulk")
        assert b4 is not None and b4.parent_run_id == "b3"
        # Every run recorded by version 9 but the one continued reads as it did (but for
        # the branches that moved).
        found = read_back_v9(store)["runs"]
        for run, read in v9_expected()["runs"].items():
            if run != "ops/p3":
                for what in ("branches", *HASHES_RECOMPUTED_SINCE_V9):
                    del found[run][what], read[what]
                assert found[run] == read, run
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]


def test_a_version_9_file_drops_its_checkpoints_opening_and_derives_them_again_as_chunks(
    v9: Path,
) -> None:
    with agui_store.open(v9) as store:
        conn = testing.connection(store)
        # Opening only drops: the runs are listed to derive when next needed. The blobs of
        # the dropped lists go with them (version 22): nothing refers to them.
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 0
        complete = {
            int(r[0])
            for r in conn.execute("SELECT DISTINCT run FROM batches WHERE outcome IS NOT NULL")
        }
        underived = {int(r[0]) for r in conn.execute("SELECT run FROM underived")}
        assert complete <= underived
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
        assert store.compact() > 0  # what derive leaves between checkpoints too
        layouts = conn.execute("SELECT length, chunks, tail FROM checkpoints").fetchall()
        assert layouts and all(json.loads(tail) is not None for _, _, tail in layouts)
        assert_reads_back(read_back_v9(store), v9_expected())  # now from chunks
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]


def test_version_11_keeps_every_event_row_as_it_was_with_its_type_as_a_code(v9: Path) -> None:
    """Version 11 moves the log into ``event_log`` (the type a code) behind an ``events`` view
    with the old columns: every row reads back byte for byte, in order, echo refs included."""
    old = apsw.Connection(str(v9))
    before = old.execute("SELECT seq, run, type, payload FROM events ORDER BY seq").fetchall()
    refs_before = old.execute("SELECT seq, refs FROM echo_refs ORDER BY seq").fetchall()
    old.close()
    assert before and refs_before
    agui_store.open(v9).close()
    new = apsw.Connection(str(v9))
    try:
        assert (
            new.execute("SELECT seq, run, type, payload FROM events ORDER BY seq").fetchall()
            == before
        )
        assert new.execute("SELECT seq, refs FROM echo_refs ORDER BY seq").fetchall() == refs_before
        coded = dict(new.execute("SELECT seq, type FROM event_log").fetchall())
        assert {seq: schema.EVENT_TYPE_NAMES[coded[seq] - 1] for seq, *_ in before} == {
            seq: kind for seq, _, kind, _ in before
        }
        kinds = {
            row[0] for row in new.execute("SELECT type FROM sqlite_schema WHERE name = 'events'")
        }
        assert kinds == {"view"}
    finally:
        new.close()


def test_the_event_type_codes_cover_every_type_and_never_move() -> None:
    """Codes are stored in files: AG-UI's types keep the codes version 11 gave them."""
    assert set(schema.EVENT_TYPE_NAMES) == model.EVENT_TYPES | model.LEGACY_EVENT_TYPES
    assert schema.EVENT_TYPE_NAMES[:3] == ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR")
    assert schema.EVENT_TYPE_CODES["THINKING_TEXT_MESSAGE_END"] == 36
    assert len(set(schema.EVENT_TYPE_CODES.values())) == len(schema.EVENT_TYPE_NAMES)


def test_an_event_inserted_into_the_view_by_hand_lands_in_the_log_with_its_code(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}])
    conn = apsw.Connection(str(path))
    try:
        conn.execute(
            "INSERT INTO events(seq, run, type, payload) VALUES "
            '(2, 1, \'RUN_FINISHED\', \'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}\')'
        )
        assert conn.execute("SELECT type FROM event_log WHERE seq = 2").fetchone() == (2,)
        assert conn.execute("SELECT type FROM events WHERE seq = 2").fetchone() == ("RUN_FINISHED",)
    finally:
        conn.close()


def test_a_type_no_code_was_fixed_for_gets_the_next_free_code_and_reads_back_by_name(
    tmp_path: Path,
) -> None:
    """AG-UI's types have fixed codes; any other type a stream carries (one a later version of
    the protocol adds) gets a code of its own instead of failing the batch."""
    with agui_store.open(tmp_path / "s.db") as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                      {"type": "X_FUTURE_EVENT"}, {"type": "CUSTOM", "name": "c", "value": {}}])
        conn = testing.connection(store)
        assert conn.execute("SELECT type FROM events WHERE seq >= 2 ORDER BY seq").fetchall() == [
            ("X_FUTURE_EVENT",),
            ("CUSTOM",),
        ]
        code = conn.execute("SELECT type FROM event_log WHERE seq = 2").fetchone()[0]
        assert code == len(schema.EVENT_TYPE_NAMES) + 1


def test_a_version_12_file_is_indexed_for_search_opening_with_a_progress_bar_on_a_terminal(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v12.db"
    with agui_store.open(path) as store:
        for i in range(3):
            store.append([
                {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{i}"},
                {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": f"porto {i}"},
                {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{i}"},
            ])
    conn = apsw.Connection(str(path))
    as_version_12(conn)
    conn.execute("PRAGMA user_version = 12")
    conn.close()
    # stderr on a pseudo-terminal: the migration draws its bar there.
    drawn, hits = search_on_a_terminal(path, "porto")
    assert hits == ["r2", "r1", "r0"]
    assert "for search" in drawn and "3/3" in drawn
    assert pragma(path, "user_version") == schema.SCHEMA_VERSION
    with agui_store.open(path) as store:
        assert not store.check().problems


def _old_words(text: str) -> str:
    """The words version 19 gave the index: a run of Chinese or Japanese characters whole."""
    import re
    import unicodedata

    folded = unicodedata.normalize("NFKD", text.casefold())
    return " ".join(re.findall(r"[^\W_]+", folded))


def test_a_version_19_file_is_indexed_again_so_chinese_and_japanese_are_found_by_any_run(
    tmp_path: Path,
) -> None:
    from tests.streams import run, say

    path = tmp_path / "store.db"
    said = "明日東京都に行きたいです"
    with testing.search_pending_rows(1000), agui_store.open(path) as store:
        store.append(run("t", "r1", *say("m1", said)))
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN")
    # Version 19's words for the pending row: the sentence as one word.
    conn.execute("UPDATE search_pending SET words = ?", (_old_words(said),))
    assert conn.changes() == 1
    conn.execute("PRAGMA user_version = 19")
    conn.execute("COMMIT")
    conn.close()
    with agui_store.open(path) as store:
        assert pragma(path, "user_version") == schema.SCHEMA_VERSION
        assert [h.message_id for h in store.search("東京")] == ["m1"]
        assert [h.message_id for h in store.search(_old_words(said))] == ["m1"]
        assert store.check().ok


def _one_message(tmp_path: Path) -> Path:
    """A store file at this version holding one run of one message."""
    from tests.streams import run, say

    path = tmp_path / "store.db"
    with agui_store.open(path) as store:
        store.append(run("t", "r1", *say("m1", "hello")))
    return path


def test_a_file_whose_tables_are_not_those_of_its_version_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    from tests.schema_history import as_version_18

    path = _one_message(tmp_path)
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN")
    as_version_18(conn)  # version 18's tables, labelled 17: a development build's layout
    conn.execute("PRAGMA user_version = 17")
    conn.execute("COMMIT")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError) as refused:
        agui_store.open(path)
    said = str(refused.value)
    assert f"{path} records schema version 17, but its tables are not that version's" in said
    assert "(search_pending)" in said and "nothing was changed" in said
    assert path.read_bytes() == before and pragma(path, "user_version") == 17


def _set_back(path: Path, version: int) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


@pytest.mark.parametrize("version", [17, 16, 15, 10, 7, 1])
def test_a_file_whose_version_was_set_back_is_refused_saying_so_and_left_as_it_was(
    tmp_path: Path, version: int
) -> None:
    path = _one_message(tmp_path)
    _set_back(path, version)
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError) as refused:
        agui_store.open(path)
    said = str(refused.value)
    assert said.startswith(
        f"{path} records schema version {version}, but holds tables of a later one ("
    ), said
    assert said.endswith(
        "): its version was set back outside agui-store; nothing was changed. If this release "
        f"wrote it, record its version again (its user_version set to {schema.SCHEMA_VERSION}), "
        "then run agui-store check"
    ), said
    assert path.read_bytes() == before
    _set_back(path, schema.SCHEMA_VERSION)  # as the error says
    with agui_store.open(path) as store:
        assert store.check().ok and [h.message_id for h in store.search("hello")] == ["m1"]


@pytest.mark.parametrize("version", range(18, schema.SCHEMA_VERSION))
def test_a_file_set_back_to_a_version_whose_migrations_repeat_is_left_as_it_was(
    tmp_path: Path, version: int
) -> None:
    path = _one_message(tmp_path)
    before = dump(path)
    _set_back(path, version)
    with agui_store.open(path) as store:
        assert store.check().ok
    assert dump(path) == before


def _as_version(path: Path, version: int) -> None:
    """Give a file of this version the tables of ``version`` (13: one old enough to be
    rewritten before its migration), and record that version."""
    from tests.schema_history import as_version_13

    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN")
    if version == 13:
        as_version_13(conn)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("COMMIT")
    conn.close()


@pytest.mark.parametrize("version", [schema.SCHEMA_VERSION - 1, 13])
def test_a_file_that_cannot_be_written_says_its_migration_is_what_needs_to_write(
    tmp_path: Path, version: int
) -> None:
    assert 13 < schema.REWRITE_BEFORE <= schema.SCHEMA_VERSION - 1
    path = _one_message(tmp_path)
    _as_version(path, version)
    before = sorted(p.name for p in tmp_path.iterdir())
    # Immutable: no one may write it, root included (where the file system keeps the flag).
    if shutil.which("chattr") is None or subprocess.run(
        ["chattr", "+i", str(path)], capture_output=True
    ).returncode:
        pytest.skip("the file system keeps no immutable flag here")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "agui_store", "threads", "--db", str(path)],
            capture_output=True, text=True, env=worker_env(),
        )
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (
        f"{path} is at schema version {version}, and this release migrates it to "
        f"{schema.SCHEMA_VERSION} before it reads it, which failed:" in proc.stderr
    ), proc.stderr
    assert "cannot be written" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no -wal, no -shm left
    assert pragma(path, "user_version") == version


def _threads_in_files_of_at_most(path: Path, room: int) -> subprocess.CompletedProcess[str]:
    """``agui-store threads`` on ``path`` in a process that writes no file past ``room``
    bytes (a full disk, as the process meets it)."""
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (room, room))

    return subprocess.run(
        [sys.executable, "-m", "agui_store", "threads", "--db", str(path)],
        capture_output=True, text=True, env=worker_env(), preexec_fn=limited,
    )


def test_a_disk_without_room_for_the_shm_file_is_told_by_the_read_that_failed(
    tmp_path: Path,
) -> None:
    """The first read of an old file needs its ``-shm`` (32 kB): with no room for it, the
    read fails, and the error told is that one, not the failure of ending the transaction
    SQLite had already ended."""
    path = _one_message(tmp_path)
    _as_version(path, schema.SCHEMA_VERSION - 1)
    before = dump(path)
    room = 16 * 1024

    proc = _threads_in_files_of_at_most(path, room)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{path}: no space left to write" in proc.stderr, proc.stderr
    assert "free space and retry" in proc.stderr, proc.stderr
    assert "no transaction is active" not in proc.stderr, proc.stderr
    assert dump(path) == before
    with agui_store.open(path) as store:
        assert store.check().ok and [h.message_id for h in store.search("hello")] == ["m1"]


def test_a_disk_that_fills_while_an_old_file_is_rewritten_says_its_migration_needed_the_room(
    tmp_path: Path,
) -> None:
    """A file old enough to be rewritten (VACUUM) before its migration, on a disk with room
    for a few pages more than the open needs: the rewrite fails, is told as the migration's,
    and the file migrates once there is room."""
    path = _one_message(tmp_path)
    _as_version(path, 13)
    before = dump(path)
    room = 64 * 1024  # the -shm file's 32 kB fits; the rewrite's copy of the file does not
    assert path.stat().st_size > room

    proc = _threads_in_files_of_at_most(path, room)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        f"{path} is at schema version 13, and this release migrates it to "
        f"{schema.SCHEMA_VERSION} before it reads it, which failed:" in proc.stderr
    ), proc.stderr
    assert "free space and retry" in proc.stderr, proc.stderr
    assert pragma(path, "user_version") == 13 and dump(path) == before
    with agui_store.open(path) as store:
        assert store.check().ok and [h.message_id for h in store.search("hello")] == ["m1"]


def test_a_version_20_file_is_indexed_again_so_styled_capitals_are_found_by_plain_words(
    tmp_path: Path,
) -> None:
    from tests.streams import run, say

    path = tmp_path / "store.db"
    with testing.search_pending_rows(1000), agui_store.open(path) as store:
        store.append(run("t", "r1", *say("m1", "𝐇𝐞𝐥𝐥𝐨 from ℍotel Porto, 25℃")))  # noqa: RUF001
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN")
    # Version 20's words for the pending row: folded before they were decomposed.
    conn.execute("UPDATE search_pending SET words = 'Hello from Hotel porto 25 C'")
    assert conn.changes() == 1
    conn.execute("PRAGMA user_version = 20")
    conn.execute("COMMIT")
    conn.close()
    with agui_store.open(path) as store:
        assert pragma(path, "user_version") == schema.SCHEMA_VERSION
        assert [h.message_id for h in store.search("hello hotel")] == ["m1"]
        assert [h.message_id for h in store.search('"25 c"')] == ["m1"]
        assert store.check().ok


def test_a_version_23_file_is_indexed_again_so_the_escaped_words_of_json_results_are_found(
    tmp_path: Path,
) -> None:
    from agui_store.engine import search as index
    from agui_store.history import search as rules
    from tests.streams import run, tool_result

    path = tmp_path / "store.db"
    result = json.dumps({"note": "first line\nsecond line", "city": "Zürich"})
    with testing.search_pending_rows(1000), agui_store.open(path) as store:
        store.append(run("t", "r1", *tool_result("c1", "m1", result)))
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN")
    # Version 23's row: the key and the words of the JSON as written, escapes and all.
    conn.execute("UPDATE search_pending SET key = ?, words = ? WHERE key = ?",
                 (index.message_key("m1", result), rules.index_text(result),
                  index.message_key("m1", rules.as_read(result))))
    assert conn.changes() == 1
    conn.execute("PRAGMA user_version = 23")
    conn.execute("COMMIT")
    conn.close()
    with agui_store.open(path) as store:
        assert pragma(path, "user_version") == schema.SCHEMA_VERSION
        assert [h.message_id for h in store.search("second zurich")] == ["m1"]
        assert store.search("nsecond") == []
        assert store.check().ok


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_file_of_an_old_version_number_with_another_layout_is_refused_before_any_rewrite(
    tmp_path: Path, journal: str
) -> None:
    """A version old enough to be rewritten (VACUUM) before its migration is checked for its
    layout first, and before the file is switched to WAL: the refusal says nothing was
    changed, and nothing was."""
    path = _one_message(tmp_path)
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA user_version = {schema.REWRITE_BEFORE - 1}")
    conn.execute(f"PRAGMA journal_mode = {journal}").fetchall()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError, match="nothing was changed"):
        agui_store.open(path)
    assert path.read_bytes() == before
    assert pragma(path, "user_version") == schema.REWRITE_BEFORE - 1


def test_a_store_file_whose_schema_version_was_cleared_is_refused_by_name_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    path = _one_message(tmp_path)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError) as refused:
        agui_store.open(path)
    assert "records no schema version (user_version 0)" in str(refused.value)
    assert str(path) in str(refused.value)
    assert path.read_bytes() == before
    proc = subprocess.run(
        [sys.executable, "-m", "agui_store", "threads", "--db", str(path)],
        capture_output=True, text=True, env=worker_env(),
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "records no schema version" in proc.stderr


def test_a_version_24_file_is_indexed_again_so_korean_is_found_by_whole_syllables(
    tmp_path: Path,
) -> None:
    import unicodedata

    from tests.streams import run, say

    path = tmp_path / "store.db"
    texts = {"m1": "석사 학위", "m2": "서울에서 만나요", "m3": "서우 친구"}
    with testing.search_pending_rows(1000), agui_store.open(path) as store:
        store.append(run("t", "r1", *(e for m, said in texts.items() for e in say(m, said))))
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN")
    # Version 24's words: each syllable taken apart into its letters (jamo).
    for said in texts.values():
        conn.execute("UPDATE search_pending SET words = ? WHERE words = ?",
                     (unicodedata.normalize("NFKD", said), said))
        assert conn.changes() == 1
    conn.execute("PRAGMA user_version = 24")
    conn.execute("COMMIT")
    conn.close()
    with agui_store.open(path) as store:
        assert pragma(path, "user_version") == schema.SCHEMA_VERSION

        def found(query: str) -> list[str]:
            return sorted(h.message_id for h in store.search(query))

        assert found("서울에서") == ["m2"] and found("석사 학위") == ["m1"]
        assert found("서우*") == ["m3"] and found("서*") == ["m2", "m3"]
        assert store.check().ok


def test_a_store_a_newer_release_migrated_while_it_was_open_takes_no_more_writes(
    tmp_path: Path,
) -> None:
    from tests.streams import run, say

    path = tmp_path / "store.db"
    with agui_store.open(path) as store:
        store.append(run("t", "r1", *say("m1", "석사 학위")))
        # What a newer release's migration leaves: its version, recorded while this
        # process still has the file open (its index words, say, are the newer release's).
        newer = apsw.Connection(str(path))
        newer.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
        newer.close()
        with pytest.raises(SchemaVersionError, match=(
            f"migrated to schema version {schema.SCHEMA_VERSION + 1} by a newer agui-store"
        )):
            store.append(run("t", "r2", *say("m2", "서울에서 만나요")))
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION}")
    conn.close()
    with agui_store.open(path) as store:
        assert [r.run_id for r in store.runs("t")] == ["r1"]
        assert store.check().ok


def test_a_file_another_process_holds_while_it_is_migrated_is_told_as_the_migration_waited_out(
    tmp_path: Path,
) -> None:
    from agui_store import StoreBusyError
    from tests.streams import run, say

    path = tmp_path / "store.db"
    with agui_store.open(path) as store:
        store.append(run("t", "r1", *say("m1", "석사 학위")))
    old = schema.SCHEMA_VERSION - 1
    migrating = apsw.Connection(str(path))
    migrating.execute(f"PRAGMA user_version = {old}")
    # Another process opening the same old file first: it holds the write lock while it
    # indexes every run again, which takes minutes in a large store.
    migrating.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusyError, match=(
            f"at schema version {old}, and this release migrates it to "
            f"{schema.SCHEMA_VERSION}.*another process.*open it again once"
        )) as raised:
            agui_store.open(path, busy_timeout_ms=50)
        assert raised.value.waited
    finally:
        migrating.execute("ROLLBACK")
        migrating.close()
    assert pragma(path, "user_version") == old
    with agui_store.open(path) as store:
        assert [h.message_id for h in store.search("석사")] == ["m1"] and store.check().ok
