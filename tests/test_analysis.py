"""The sqlite-utils analysis export: a separate database equal to what the store restores.

The store is read through its API (apsw); OUT.db is read here with sqlite-utils (the stdlib
``sqlite3``), which is fine: it is another file. That the library itself never points
``sqlite3`` at the store file is checked in a subprocess with an audit hook.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

import agui_store
from agui_store.cli import cmd_export_sqlite
from agui_store.cli.demo import record_demo
from agui_store.engine import clock
from agui_store.errors import ArgumentTypeError, InvalidArgumentError, RunNotFoundError
from agui_store.exports.analysis import ExportTargetError, content_text, export_sqlite, iso
from tests.conftest import fixture_params

TABLES = {"threads", "runs", "messages", "view_messages", "tool_calls", "event_counts",
          "branches", "export_info"}
VIEWS = {"run_messages", "run_tool_calls"}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def store(db_path: Path) -> Iterator[Any]:
    with agui_store.open(db_path) as s:
        yield s


@pytest.fixture
def demo(store: Any) -> tuple[Any, str]:
    thread, _ = record_demo(store)
    return store, thread


@contextmanager
def opened(path: Path | str) -> Iterator[sqlite_utils.Database]:
    db = sqlite_utils.Database(path)
    try:
        yield db
    finally:
        db.close()


def rows(db: sqlite_utils.Database, sql: str, params: Any = ()) -> list[dict[str, Any]]:
    cur = db.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def expected_tool_calls(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(call id, function name, arguments, the answer in this view) in view order."""
    answers: dict[Any, Any] = {}
    for m in messages:
        if m.get("role") == "tool":
            answers.setdefault(m.get("toolCallId"), m.get("content"))
    return [
        (c["id"], c["function"]["name"], c["function"]["arguments"], answers.get(c["id"]))
        for m in messages for c in m.get("toolCalls") or ()
    ]


def assert_export_equals_store(store: Any, out: Path) -> None:
    """Every run's lineage row, view and tool calls in OUT.db equal what the store gives."""
    with opened(out) as db:
        assert list(db.execute("PRAGMA foreign_key_check")) == []
        assert rows(db, "PRAGMA integrity_check") == [{"integrity_check": "ok"}]
        assert [r["thread_id"] for r in rows(db, "SELECT thread_id FROM threads ORDER BY id")] \
            == store.threads()
        for thread in store.threads():
            runs = store.runs(thread)
            got = rows(db, """
                SELECT runs.*, parent.run_id AS parent_key_run_id FROM runs
                JOIN threads ON threads.id = runs.thread
                LEFT JOIN runs AS parent ON parent.id = runs.parent
                WHERE threads.thread_id = ? ORDER BY runs.id""", [thread])
            assert [r["run_id"] for r in got] == [r.run_id for r in runs]
            for run, row in zip(runs, got, strict=True):
                assert row["parent_key_run_id"] == row["parent_run_id"] == run.parent_run_id
                assert (row["lineage"], row["status"], row["event_count"]) == (
                    run.lineage, run.status, run.event_count)
                assert row["sent_parent_run_id"] == run.sent_parent_run_id
                assert (bool(row["has_input"]), bool(row["synthetic"])) == (
                    run.has_input, run.synthetic)
                assert json.loads(row["branches"]) == list(run.branches)
                for column, moment in (("created_at", run.created_at),
                                       ("updated_at", run.updated_at)):
                    assert ISO.match(row[column]), row[column]
                    assert abs(clock.parse_moment(row[column]) - moment) \
                        <= timedelta(milliseconds=1)

                co = store.checkout(run.run_id, thread_id=thread)
                assert json.loads(row["state"]) == co.state
                assert json.loads(row["interrupts"]) == co.interrupts
                assert row["message_count"] == len(co.messages)
                view = rows(db, "SELECT * FROM run_messages WHERE run = ? ORDER BY position",
                            [row["id"]])
                assert [json.loads(v["json"]) for v in view] == co.messages
                assert [v["position"] for v in view] == list(range(len(co.messages)))
                for v, m in zip(view, co.messages, strict=True):
                    assert (v["message_id"], v["role"], v["tool_call_id"], v["name"]) == (
                        m.get("id"), m.get("role"), m.get("toolCallId"), m.get("name"))
                    assert v["content"] == content_text(m.get("content"))
                    assert (v["run_id"], v["thread_id"]) == (run.run_id, thread)
                calls = rows(db, "SELECT * FROM run_tool_calls WHERE run = ? "
                             "ORDER BY message_position, position", [row["id"]])
                assert [(c["tool_call_id"], c["function_name"], c["arguments"], c["result"])
                        for c in calls] == expected_tool_calls(co.messages)

                counts = {r["type"]: r["count"] for r in rows(
                    db, "SELECT type, count FROM event_counts WHERE run = ?", [row["id"]])}
                types = [e["type"] for e in store.events(run.run_id, thread_id=thread)]
                assert counts == {t: types.count(t) for t in set(types)}


def export(store: Any, out: Path, **options: Any) -> Any:
    summary = export_sqlite(store, out, **options)
    assert summary.path == os.path.realpath(out)
    return summary


# --- the demo conversation ----------------------------------------------------------------


def test_the_demo_exports_its_tables_views_and_declared_foreign_keys(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    out = tmp_path / "analysis.db"
    export(store, out)
    with opened(out) as db:
        assert set(db.table_names()) >= TABLES
        assert set(db.view_names()) == VIEWS
        fks = {(fk.table, fk.column, fk.other_table, fk.other_column)
               for name in TABLES for fk in db.table(name).foreign_keys}
        assert fks == {
            ("runs", "thread", "threads", "id"), ("runs", "parent", "runs", "id"),
            ("messages", "thread", "threads", "id"), ("messages", "first_run", "runs", "id"),
            ("view_messages", "run", "runs", "id"),
            ("view_messages", "message", "messages", "id"),
            ("tool_calls", "thread", "threads", "id"),
            ("tool_calls", "message", "messages", "id"),
            ("tool_calls", "first_run", "runs", "id"),
            ("tool_calls", "result_message", "messages", "id"),
            ("event_counts", "run", "runs", "id"),
            ("branches", "thread", "threads", "id"), ("branches", "run", "runs", "id"),
        }
        # Every foreign key column leads an index (or the primary key), so joins are lookups.
        for table, column, _, _ in fks:
            leading = {ix.columns[0] for ix in db.table(table).indexes}
            assert column in leading | {db.table(table).pks[0]}, (table, column)
        assert db.table("runs").pks == ["id"]
        assert db.table("view_messages").pks == ["run", "position"]
        assert db.table("messages").detect_fts() == "messages_fts"
    assert_export_equals_store(store, out)


def test_run_lineage_rows_follow_the_branches_of_the_demo(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, thread = demo
    out = tmp_path / "analysis.db"
    export(store, out)
    with opened(out) as db:
        got = rows(db, "SELECT run_id, parent_run_id, depth, lineage, branches FROM runs "
                       "ORDER BY id")
        branches = rows(db, "SELECT name, runs.run_id, is_default FROM branches "
                            "JOIN runs ON runs.id = branches.run ORDER BY name")
    assert got == [
        {"run_id": "run-1", "parent_run_id": None, "depth": 0, "lineage": "root",
         "branches": "[]"},
        {"run_id": "run-2", "parent_run_id": "run-1", "depth": 1, "lineage": "parentRunId",
         "branches": '["porto"]'},
        {"run_id": "run-3", "parent_run_id": "run-1", "depth": 1, "lineage": "parentRunId",
         "branches": '["main","fahrenheit"]'},
    ]
    assert branches == [{"name": "fahrenheit", "run_id": "run-3", "is_default": 0},
                        {"name": "main", "run_id": "run-3", "is_default": 1},
                        {"name": "porto", "run_id": "run-2", "is_default": 0}]
    assert [b.name for b in store.branches(thread)] == ["main", "fahrenheit", "porto"]


def test_each_message_version_is_stored_once_however_many_views_show_it(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, thread = demo
    summary = export(store, tmp_path / "analysis.db")
    views = [store.checkout(r.run_id, thread_id=thread).messages for r in store.runs(thread)]
    distinct = {json.dumps(m, sort_keys=True) for view in views for m in view}
    assert summary.messages == len(distinct) == 10
    assert summary.view_rows == sum(len(v) for v in views) == 18
    assert (summary.threads, summary.runs, summary.tool_calls) == (1, 3, 2)


def test_new_in_run_marks_only_what_a_run_added_to_its_parents_view(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    out = tmp_path / "analysis.db"
    export(store, out)
    with opened(out) as db:
        added = rows(db, "SELECT run_id, message_id FROM run_messages WHERE new_in_run "
                         "ORDER BY run, position")
    assert [(r["run_id"], r["message_id"]) for r in added] == [
        ("run-1", "user-1"), ("run-1", "assistant-1"), ("run-1", "call-1-result"),
        ("run-1", "assistant-2"),
        ("run-2", "user-2"), ("run-2", "assistant-3"), ("run-2", "call-2-result"),
        ("run-2", "assistant-4"),
        ("run-3", "user-3"), ("run-3", "assistant-5"),
    ]


def test_full_text_search_finds_a_word_of_a_message_once(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    out = tmp_path / "analysis.db"
    export(store, out)
    with opened(out) as db:
        found = list(db.table("messages").search("Fahrenheit"))
        assert [m["message_id"] for m in found] == ["user-3"]
        lisbon = rows(db, "SELECT messages.message_id FROM messages_fts "
                          "JOIN messages ON messages.id = messages_fts.rowid "
                          "WHERE messages_fts MATCH ? ORDER BY messages.id", ["lisbon"])
        # Three texts mention Lisbon; each is one row, not one per run that shows it.
        assert [r["message_id"] for r in lisbon] == ["user-1", "assistant-2", "assistant-5"]
        # The triggers keep the index current if someone edits the file afterwards.
        db.execute("UPDATE messages SET content = 'now about Madrid' WHERE message_id = 'user-3'")
        db.conn.commit()
        assert [m["message_id"] for m in db.table("messages").search("Madrid")] == ["user-3"]


def test_tool_calls_carry_their_function_arguments_and_result(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    out = tmp_path / "analysis.db"
    export(store, out)
    with opened(out) as db:
        calls = rows(db, """
            SELECT tool_calls.tool_call_id, function_name, arguments, result,
                   runs.run_id AS first_run, m.message_id AS message, r.message_id AS answer
            FROM tool_calls JOIN runs ON runs.id = tool_calls.first_run
            JOIN messages AS m ON m.id = tool_calls.message
            JOIN messages AS r ON r.id = tool_calls.result_message ORDER BY tool_calls.id""")
    assert calls == [
        {"tool_call_id": "call-1", "function_name": "get_weather",
         "arguments": '{"city": "Lisbon"}', "result": '{"temp": 21, "sky": "sunny"}',
         "first_run": "run-1", "message": "assistant-1", "answer": "call-1-result"},
        {"tool_call_id": "call-2", "function_name": "get_weather",
         "arguments": '{"city": "Porto"}', "result": '{"temp": 17, "sky": "cloudy"}',
         "first_run": "run-2", "message": "assistant-3", "answer": "call-2-result"},
    ]
    assert json.loads(calls[0]["arguments"]) == {"city": "Lisbon"}


# --- the real recordings ------------------------------------------------------------------


@pytest.mark.parametrize("events", fixture_params())
def test_every_recording_exports_views_and_tool_calls_equal_to_checkout(
    store: Any, tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    store.append(json.loads(json.dumps(events)))
    out = tmp_path / "analysis.db"
    export(store, out)
    assert_export_equals_store(store, out)
    texts = [
        (m.get("id"), word)
        for t in store.threads() for r in store.runs(t)
        for m in store.checkout(r.run_id, thread_id=t).messages
        for word in re.findall(r"[A-Za-z]{5,}", content_text(m.get("content")) or "")[:1]
    ]
    if texts:
        message_id, word = texts[-1]
        with opened(out) as db:
            found = [m["message_id"] for m in db.table("messages").search(word, quote=True)]
        assert message_id in found


# --- versions, answers, batches -----------------------------------------------------------


def frontend_tool_thread(store: Any) -> None:
    """A frontend tool called in run-1, answered "yes" in run-2 and "no" on a fork (run-3)."""
    user = {"id": "u1", "role": "user", "content": "Delete the file?"}
    store.append([
        {"type": "RUN_STARTED", "threadId": "t", "runId": "run-1"},
        {"type": "TOOL_CALL_START", "toolCallId": "call-1", "toolCallName": "confirm",
         "parentMessageId": "a1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": '{"question": "sure?"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "call-1"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "run-1"},
    ], input={"threadId": "t", "runId": "run-1", "messages": [user], "state": {},
              "tools": [], "context": []})
    for run_id, answer in (("run-2", "yes"), ("run-3", "no")):
        fork = store.fork("run-1", thread_id="t", run_id=run_id)
        fork["messages"].append({"id": f"r-{run_id}", "role": "tool", "toolCallId": "call-1",
                                 "content": answer})
        store.append([
            {"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
        ], input=fork)


def test_a_store_or_output_path_of_the_wrong_type_is_refused_naming_what_it_is(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    with pytest.raises(ArgumentTypeError, match=r"writes to a path .* not None"):
        export_sqlite(store, None)
    with pytest.raises(ArgumentTypeError, match=r"export_sqlite .*Store.* not a str"):
        export_sqlite(str(store.path), tmp_path / "analysis.db")
    assert not (tmp_path / "analysis.db").exists()


def test_an_async_store_given_to_export_sqlite_is_refused_saying_to_pass_the_store_it_wraps(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    astore = agui_store.aio.AsyncStore(store, writer="thread")
    try:
        with pytest.raises(ArgumentTypeError) as refused:
            export_sqlite(astore, tmp_path / "analysis.db")  # type: ignore[arg-type]
    finally:
        asyncio.run(astore.close())
    said = str(refused.value)
    assert said.startswith("export_sqlite ") and "not an AsyncStore" in said
    assert "astore.store" in said
    assert not (tmp_path / "analysis.db").exists()


@pytest.mark.parametrize(
    ("options", "error", "said"),
    [
        ({"progress": 5}, ArgumentTypeError, "progress= must be None or a callable, not an int"),
        ({"batch_size": "x"}, InvalidArgumentError, "batch_size must be an integer >= 1, not 'x'"),
        ({"batch_size": True}, InvalidArgumentError, "batch_size must be an integer >= 1, not Tr"),
        ({"batch_size": 0}, InvalidArgumentError, "batch_size must be an integer >= 1, not 0"),
    ],
)
def test_a_progress_or_batch_size_of_the_wrong_kind_is_refused_before_anything_is_written(
    demo: tuple[Any, str], tmp_path: Path, options: dict[str, Any], error: type, said: str
) -> None:
    store, _ = demo
    before = sorted(tmp_path.iterdir())
    with pytest.raises(error, match=said):
        export_sqlite(store, tmp_path / "analysis.db", **options)
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize("batch_size", [1, 7, 2000])
def test_a_call_answered_in_later_runs_keeps_each_branchs_answer(
    store: Any, tmp_path: Path, batch_size: int
) -> None:
    frontend_tool_thread(store)
    out = tmp_path / "analysis.db"
    export(store, out, batch_size=batch_size)
    assert_export_equals_store(store, out)
    with opened(out) as db:
        calls = rows(db, "SELECT tool_call_id, result FROM tool_calls")
        per_run = rows(db, "SELECT run_id, result FROM run_tool_calls ORDER BY run")
    # One call (one assistant message version), first answered by run-2.
    assert calls == [{"tool_call_id": "call-1", "result": "yes"}]
    assert per_run == [{"run_id": "run-1", "result": None}, {"run_id": "run-2", "result": "yes"},
                       {"run_id": "run-3", "result": "no"}]


def test_a_message_a_later_run_changes_gets_a_second_version(store: Any, tmp_path: Path) -> None:
    store.append([
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "draft answer"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
        {"type": "MESSAGES_SNAPSHOT", "messages": [
            {"id": "m1", "role": "assistant", "content": "final answer"},
            {"id": "u2", "role": "user", "content": [
                {"type": "text", "text": "what about"},
                {"type": "image", "source": {"type": "url", "value": "https://x/y.png"}},
                {"type": "text", "text": "this picture"}]}]},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"},
    ], check_sequence=False)
    out = tmp_path / "analysis.db"
    export(store, out)
    assert_export_equals_store(store, out)
    with opened(out) as db:
        got = rows(db, "SELECT run_id, message_id, content, new_in_run FROM run_messages "
                       "ORDER BY run, position")
    assert got == [
        {"run_id": "r1", "message_id": "m1", "content": "draft answer", "new_in_run": 1},
        {"run_id": "r2", "message_id": "m1", "content": "final answer", "new_in_run": 1},
        {"run_id": "r2", "message_id": "u2", "content": "what about\nthis picture",
         "new_in_run": 1},
    ]
    with opened(out) as db:
        versions = rows(db, "SELECT message_id, first_run FROM messages ORDER BY id")
    assert versions == [{"message_id": "m1", "first_run": 1}, {"message_id": "m1", "first_run": 2},
                        {"message_id": "u2", "first_run": 2}]


def test_small_batches_write_the_same_rows_as_one_big_batch(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    frontend_tool_thread(store)
    dumps = []
    for size in (1, 5000):
        out = tmp_path / f"b{size}.db"
        export(store, out, batch_size=size)
        with opened(out) as db:
            dumps.append({name: rows(db, f"SELECT * FROM [{name}]")
                          for name in TABLES - {"export_info"}})
    assert dumps[0] == dumps[1]


def test_one_thread_is_exported_alone_and_an_unknown_one_writes_nothing(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, thread = demo
    frontend_tool_thread(store)
    out = tmp_path / "analysis.db"
    summary = export(store, out, thread_id="t")
    assert (summary.threads, summary.runs) == (1, 3)
    with opened(out) as db:
        assert [r["thread_id"] for r in db.table("threads").rows] == ["t"]
        assert db.table("export_info").get(1)["thread_filter"] == "t"
    with pytest.raises(RunNotFoundError, match="nope"):
        export_sqlite(store, tmp_path / "other.db", thread_id="nope")
    assert sorted(os.listdir(tmp_path)) == ["analysis.db", "store.db", "store.db-shm",
                                            "store.db-wal"]
    assert thread in store.threads()


def test_progress_reports_the_total_up_front_then_each_run(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    frontend_tool_thread(store)
    calls: list[tuple[int, int]] = []
    export_sqlite(store, tmp_path / "analysis.db", progress=lambda d, t: calls.append((d, t)))
    assert calls == [(n, 6) for n in range(7)]


def test_an_interrupted_export_leaves_no_file_behind(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    out = tmp_path / "out"
    out.mkdir()

    def stop(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_sqlite(store, out / "analysis.db", progress=stop)
    assert os.listdir(out) == []


# --- where it may write -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_the_stores_own_file_and_its_siblings_are_refused(
    demo: tuple[Any, str], db_path: Path, suffix: str
) -> None:
    store, thread = demo
    before = {p: p.stat().st_size for p in db_path.parent.iterdir()}
    with pytest.raises(ExportTargetError, match="the store's own"):
        export_sqlite(store, str(db_path) + suffix, replace=True)
    # Also through another spelling of the same path.
    other = db_path.parent / "." / ".." / db_path.parent.name / (db_path.name + suffix)
    with pytest.raises(ExportTargetError, match="the store's own"):
        export_sqlite(store, other, replace=True)
    assert {p: p.stat().st_size for p in db_path.parent.iterdir()}.keys() == before.keys()
    assert store.check().ok and len(store.runs(thread)) == 3


def test_a_link_to_the_store_file_is_refused(demo: tuple[Any, str], db_path: Path) -> None:
    store, _ = demo
    link = db_path.parent / "link.db"
    os.link(db_path, link)
    with pytest.raises(ExportTargetError, match="the store's own"):
        export_sqlite(store, link, replace=True)


def test_an_existing_file_is_replaced_only_when_asked(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    out = tmp_path / "analysis.db"
    out.write_bytes(b"")  # an empty file (from mktemp, say) is fair game
    export(store, out)
    with pytest.raises(ExportTargetError, match="replace=True"):
        export_sqlite(store, out)
    frontend_tool_thread(store)
    assert export(store, out, replace=True).runs == 6
    with pytest.raises(ExportTargetError, match="is a folder"):
        export_sqlite(store, tmp_path, replace=True)


def test_iso_times_are_utc_with_milliseconds() -> None:
    moment = datetime.fromtimestamp(1_714_557_600.123, tz=datetime.now().astimezone().tzinfo)
    assert iso(moment) == "2024-05-01T10:00:00.123Z"
    assert iso(None) is None


def test_content_text_keeps_text_and_flattens_text_parts_only() -> None:
    assert content_text("hi") == "hi"
    assert content_text([{"type": "text", "text": "a"}, {"type": "binary", "data": "x"},
                         {"type": "text", "text": "b"}]) == "a\nb"
    assert content_text([{"type": "image"}]) is None
    assert content_text({"kind": "activity"}) is None
    assert content_text(None) is None
    assert content_text("lone \ud800 surrogate") == "lone \\ud800 surrogate"


# --- no sqlite3 on the store file; the command line ---------------------------------------

AUDIT_SCRIPT = textwrap.dedent("""
    import json, os, sys

    connected = []

    def hook(event, args):
        if event == "sqlite3.connect":  # its path as bytes on Python 3.10
            connected.append(os.fsdecode(args[0]))

    sys.addaudithook(hook)

    import agui_store
    from agui_store.exports.analysis import export_sqlite
    from agui_store.cli import main
    from agui_store.cli.demo import record_demo

    store_path, out_path = sys.argv[1:3]
    with agui_store.open(store_path) as store:
        record_demo(store)
        export_sqlite(store, out_path)
    main(["analyze", out_path, "--replace", "--db", store_path])
    print(json.dumps(connected))
""")


def test_the_library_never_opens_the_store_file_with_sqlite3(tmp_path: Path) -> None:
    store_path, out_path = tmp_path / "store.db", tmp_path / "analysis.db"
    proc = subprocess.run(
        [sys.executable, "-c", AUDIT_SCRIPT, str(store_path), str(out_path)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    connected = json.loads(proc.stdout.splitlines()[-1])
    assert len(connected) == 2  # the hook saw both exports
    store_files = {os.path.realpath(str(store_path) + s) for s in ("", "-wal", "-shm")}
    for path in connected:
        assert os.path.realpath(path) not in store_files
        # sqlite-utils wrote a temporary file next to OUT.db, then moved it into place.
        assert Path(path).parent == tmp_path and Path(path).name.startswith(".analysis.db.")
    assert out_path.exists()


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    proc = subprocess.run([sys.executable, "-m", "agui_store", *args], capture_output=True,
                          text=True, env=env, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_analyze_into_a_folder_it_cannot_write_names_the_target_not_its_temporary_file(
    tmp_path: Path,
) -> None:
    db, folder = tmp_path / "store.db", tmp_path / "out"
    folder.mkdir()
    cli("demo", "--db", str(db))
    # Immutable: no file may be made in it, root included (where the file system keeps it).
    if shutil.which("chattr") is None or subprocess.run(
        ["chattr", "+i", str(folder)], capture_output=True
    ).returncode:
        pytest.skip("the file system keeps no immutable flag here")
    try:
        refused = cli("analyze", str(folder / "x.db"), "--db", str(db), ok=False)
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr == (
        f"agui-store analyze: cannot write the analysis database {folder / 'x.db'}: "
        "Operation not permitted; nothing was left behind\n"
    )
    assert list(folder.iterdir()) == []


def test_the_analyze_command_writes_the_database_and_refuses_the_store_file(
    tmp_path: Path,
) -> None:
    db, out = tmp_path / "store.db", tmp_path / "analysis.db"
    cli("demo", "--db", str(db))
    said = cli("analyze", str(out), "--db", str(db)).stdout
    assert "1 thread, 3 runs, 10 messages" in said and str(out) in said
    with opened(out) as analysis:
        assert analysis.table("runs").count == 3
        assert [m["message_id"] for m in analysis.table("messages").search("Porto")] \
            == ["user-2", "assistant-4"]
    refused = cli("analyze", str(db), "--db", str(db), ok=False)
    assert refused.returncode == 1 and "the store's own file" in refused.stderr
    again = cli("analyze", str(out), "--db", str(db), ok=False)
    assert again.returncode == 1 and "--replace" in again.stderr
    summary = json.loads(cli("analyze", str(out), "--db", str(db), "--replace", "--json").stdout)
    assert summary["runs"] == 3 and summary["path"] == os.path.realpath(out)
    assert "example: agui-store analyze" in cli("analyze", "-h").stdout


def test_the_export_command_hook_writes_the_same_database(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, thread = demo
    out = tmp_path / "analysis.db"
    args = argparse.Namespace(sqlite=str(out), thread=thread, replace=False, json=True)
    with open(tmp_path / "stdout.txt", "w+", encoding="utf-8") as stdout:
        assert cmd_export_sqlite(store, args, stdout) == 0
        stdout.seek(0)
        assert json.loads(stdout.read())["runs"] == 3
    assert_export_equals_store(store, out)


def test_the_analysis_database_gets_the_mode_a_new_file_gets_or_keeps_the_one_it_replaces(
    demo: tuple[Any, str], tmp_path: Path
) -> None:
    store, _ = demo
    out = tmp_path / "analysis.db"
    previous = os.umask(0o022)
    try:
        export(store, out)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # as export -o's files, not mkstemp's 0600
    out.chmod(0o640)
    export(store, out, replace=True)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
