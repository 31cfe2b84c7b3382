"""The store on real SQLite files: the file itself, its query plans, memory stores.

The behaviour every backend shares (append, lineage, refs) is in tests/contract."""

from __future__ import annotations

import inspect
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import given

import agui_store
from agui_store import testing
from agui_store.backends.sqlite import schema
from agui_store.backends.sqlite import sql as statements
from agui_store.errors import AguiStoreError, ArgumentTypeError, SchemaVersionError
from tests.strategies import legal_streams
from tests.streams import run


@pytest.fixture
def sqlite_store(db_path: Path) -> Any:
    """A store file, for what only SQLite has (its query plans, its triggers, sqlite3)."""
    with agui_store.open(db_path) as s:
        yield s


# --- append and read back ---------------------------------------------------------------


@given(stream=legal_streams(max_runs=3))
def test_generated_streams_read_back_json_equal_with_unknown_types_and_fields(
    tmp_path_factory: pytest.TempPathFactory, stream: list[dict[str, Any]]
) -> None:
    stream = [dict(e) for e in stream]
    stream[0]["x-vendor"] = {"kept": [1, 2.5, None]}
    stream.insert(1, {"type": "FUTURE_EVENT_TYPE", "payload": {"a": 1}})
    path = tmp_path_factory.mktemp("s") / "s.db"
    with agui_store.open(path) as store:
        store.append(stream)
        got = [e for r in store.runs("t") for e in store.events(r.run_id, thread_id="t")]
    assert got == stream


# --- the file ---------------------------------------------------------------------------


def test_new_files_are_private_to_their_owner(db_path: Path) -> None:
    agui_store.open(db_path).close()
    assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600


def test_the_schema_version_is_recorded_and_a_newer_file_is_refused(db_path: Path) -> None:
    agui_store.open(db_path).close()
    conn = apsw.Connection(str(db_path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    conn.execute(f"PRAGMA user_version={schema.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(SchemaVersionError, match="newer agui-store"):
        agui_store.open(db_path)


def test_events_and_runs_are_append_only_even_for_another_driver(
    sqlite_store: Any, db_path: Path
) -> None:
    store = sqlite_store
    store.append(run("t", "r1"))
    script = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1])\n"
        "bad = 0\n"
        "for sql in ['UPDATE event_log SET payload = 1', 'DELETE FROM event_log',\n"
        "            'UPDATE event_types SET name = 1', 'DELETE FROM event_types',\n"
        "            'UPDATE runs SET run_id = 1', 'DELETE FROM runs', 'DELETE FROM batches']:\n"
        "    try:\n"
        "        c.execute(sql); c.commit()\n"
        "    except sqlite3.DatabaseError as e:\n"
        "        bad += 'append-only' in str(e)\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(db_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "7"
    assert len(store.events("r1")) == 2


def test_ancestry_queries_probe_the_indexes_instead_of_scanning_events(sqlite_store: Any) -> None:
    conn = testing.connection(sqlite_store)
    for sql in (statements.CHAIN_EVENTS,):
        plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, (1,)))
        assert "SCAN event_log" not in plan and "SCAN event_types" not in plan, plan
        assert "event_log USING INDEX events_by_run" in plan, plan
        assert "event_types USING INTEGER PRIMARY KEY" in plan, plan


def test_lineage_rule_3_probes_digests_by_key_instead_of_walking_the_threads_runs(
    sqlite_store: Any,
) -> None:
    db = testing.connection(sqlite_store)
    query = "EXPLAIN QUERY PLAN " + statements.RUNS_WITH_DIGESTS
    plan = [row[3] for row in db.execute(query, ('["0a", "0b", "0c"]', 1))]
    # The digests wanted are the outer loop (a table-valued function, walked once), each one
    # a primary-key probe: never a walk over the thread's runs.
    assert plan[0].startswith("SCAN json_each VIRTUAL TABLE"), plan
    assert plan[1].startswith("SEARCH d USING PRIMARY KEY (ids_hash=?)"), plan
    assert all("SCAN" not in step for step in plan[1:]), plan


def test_what_grew_since_a_view_is_found_among_the_newest_events_not_every_older_runs(
    sqlite_store: Any,
) -> None:
    db = testing.connection(sqlite_store)
    query = "EXPLAIN QUERY PLAN " + statements.GREW_SINCE
    plan = [row[3] for row in db.execute(query, {"seq": 10, "run": 5, "thread": 1})]
    # The events written since, a range of the primary key: never the events of every run
    # up to the view's, which is the thread's whole history.
    assert any(
        step.startswith("SEARCH event_log USING INTEGER PRIMARY KEY (rowid>?)") for step in plan
    ), plan
    scans = ("SCAN event_log", "SCAN runs")
    assert not any(scan in step for step in plan for scan in scans), plan
    assert all("events_by_run" not in step for step in plan), plan


def test_a_view_older_than_the_events_a_probe_reads_is_taken_for_grown_unread(
    sqlite_store: Any,
) -> None:
    """What grew since a view is read from the events written since, up to a bound: past
    it, the view is replayed again rather than checked against every one of them."""
    sqlite_store.append(run("t", "r1"))
    busy = [{"type": "CUSTOM", "name": "n", "value": i}
            for i in range(statements.GREW_SINCE_READS)]
    with sqlite_store.reading() as tx:
        (pk,) = [pk for pk, in testing.connection(sqlite_store).execute(
            "SELECT id FROM runs WHERE run_id = 'r1'")]
        thread = tx.run_thread(pk)
        seen = tx.next_seq() - 1
    sqlite_store.append(run("u", "u1", *busy[:-3]))  # the bound less one, in another thread
    with sqlite_store.reading() as tx:
        assert not tx.grew_since(thread, pk, seen)
    sqlite_store.append(run("u", "u2"))  # two more: past the bound
    with sqlite_store.reading() as tx:
        assert tx.grew_since(thread, pk, seen)


def test_an_sqlite_file_of_something_else_is_not_taken_over(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE notes(x)")
    conn.close()
    with pytest.raises(AguiStoreError, match="another application"):
        agui_store.open(other)


def test_memory_stores_work_and_the_default_path_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with agui_store.open(":memory:") as s:
        s.append(run("t", "r1"))
        assert s.threads() == ["t"]
    monkeypatch.setenv("AGUI_STORE_DB", str(tmp_path / "env.db"))
    with agui_store.open() as s:
        assert s.path == str(tmp_path / "env.db")
    assert (tmp_path / "env.db").exists()


# --- input normalization and lineage rule 3 ---------------------------------------------


def test_the_old_name_of_the_reconnect_stream_still_answers_with_a_deprecation_warning(
    tmp_path: Path,
) -> None:
    with agui_store.open(tmp_path / "s.db") as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
            ]
        )
        with pytest.warns(DeprecationWarning, match="reconnect_stream"):
            old = store.compacted("r1")
        assert old == store.reconnect_stream("r1")


def test_a_misspelled_option_of_open_is_refused_naming_it_and_the_options_open_takes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with pytest.raises(
        ArgumentTypeError,
        match=r"^agui_store\.open\(\) takes no option 'busy_timeout'; its options are "
        r"busy_timeout_ms, max_event_bytes, max_depth, checkpoint_events, derive_on_append$",
    ):
        agui_store.open(path, busy_timeout=5000)
    assert not path.exists()


def test_the_options_open_passes_on_are_the_stores_keyword_arguments() -> None:
    # The list aio.open and the pydantic-ai ConversationStore check options against too.
    keywords = inspect.signature(agui_store.Store).parameters
    assert tuple(name for name in keywords if name != "path") == agui_store.store.OPTIONS
