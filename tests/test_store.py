"""The store on real SQLite files: lossless append, lineage, refs, streaming, atomicity."""

from __future__ import annotations

import itertools
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agui_store
from agui_store import testing
from agui_store.backends.sqlite import schema
from agui_store.backends.sqlite import sql as statements
from agui_store.errors import (
    AguiStoreError,
    AmbiguousRunError,
    BranchError,
    InvalidEventError,
    RunNotFoundError,
    SchemaVersionError,
    SequenceError,
)
from tests.backends import dump
from tests.conftest import fixture_params
from tests.strategies import legal_streams


def run(
    thread: str, run_id: str, *body: dict[str, Any], finish: bool = True, **started: Any
) -> list[dict[str, Any]]:
    events = [{"type": "RUN_STARTED", "threadId": thread, "runId": run_id, **started}, *body]
    if finish:
        events.append({"type": "RUN_FINISHED", "threadId": thread, "runId": run_id})
    return events


def say(message_id: str, text: str, role: str | None = None) -> list[dict[str, Any]]:
    start: dict[str, Any] = {"type": "TEXT_MESSAGE_START", "messageId": message_id}
    if role:
        start["role"] = role
    return [
        start,
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


@pytest.fixture
def store(store_location: str) -> Any:
    """A store on each backend in turn (tests/conftest.py ``backend``)."""
    with agui_store.open(store_location) as s:
        yield s


@pytest.fixture
def sqlite_store(db_path: Path) -> Any:
    """A store file, for what only SQLite has (its query plans, its triggers, sqlite3)."""
    with agui_store.open(db_path) as s:
        yield s


# --- append and read back ---------------------------------------------------------------


@pytest.mark.parametrize("events", fixture_params())
def test_every_recorded_event_reads_back_json_equal(
    store: Any, events: list[dict[str, Any]]
) -> None:
    result = store.append(json.loads(json.dumps(events)))
    assert result.event_count == len(events)
    starts = [i for i, e in enumerate(events) if e["type"] == "RUN_STARTED"] + [len(events)]
    for a, b in itertools.pairwise(starts):
        rs = events[a]
        assert store.events(rs["runId"], thread_id=rs["threadId"]) == events[a:b]


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


def test_sse_text_appends_like_the_events_it_carries(store: Any) -> None:
    events = run("t", "r1", *say("m1", "hello\nworld"))
    sse = "".join(f"data: {json.dumps(e)}\r\n\r\n" for e in events)
    store.append(": keep-alive\n\n" + sse)
    assert store.events("r1") == events


def test_official_pydantic_events_are_accepted_without_depending_on_pydantic(store: Any) -> None:
    core = pytest.importorskip("ag_ui.core")
    events = [
        core.RunStartedEvent(thread_id="t", run_id="r1"),
        core.TextMessageStartEvent(message_id="m1", role="assistant"),
        core.TextMessageContentEvent(message_id="m1", delta="hi"),
        core.TextMessageEndEvent(message_id="m1"),
        core.RunFinishedEvent(thread_id="t", run_id="r1"),
    ]
    store.append(events)
    assert store.checkout("r1").messages == [{"id": "m1", "role": "assistant", "content": "hi"}]


# --- runs, status, streaming ------------------------------------------------------------


def test_a_live_run_streamed_over_several_appends_is_one_run(store: Any) -> None:
    store.append(run("t", "r1", {"type": "TEXT_MESSAGE_START", "messageId": "m"}, finish=False))
    assert store.get_run("r1").status == "incomplete"
    store.append([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a"}])
    store.append([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "b"}], thread_id="t")
    store.append(
        [
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        ]
    )
    r = store.get_run("r1")
    assert (r.status, r.event_count) == ("finished", 6)
    assert store.checkout("r1").messages[0]["content"] == "ab"


def test_a_continuation_is_checked_against_the_recorded_run(store: Any) -> None:
    store.append(run("t", "r1", finish=False))
    with pytest.raises(SequenceError) as e:
        store.append([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"}])
    assert e.value.index == 0 and e.value.event_type == "TEXT_MESSAGE_CONTENT"


def test_a_new_run_leaves_an_unfinished_one_incomplete(store: Any) -> None:
    store.append(run("t", "r1", {"type": "TEXT_MESSAGE_START", "messageId": "m"}, finish=False))
    store.append(run("t", "r2", *say("m2", "fresh")))
    assert [(r.run_id, r.status) for r in store.runs("t")] == [
        ("r1", "incomplete"),
        ("r2", "finished"),
    ]


def test_run_outcomes_become_statuses(store: Any) -> None:
    store.append(run("t", "a"))
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "b"},
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "b",
                "outcome": {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approve"}]},
            },
        ]
    )
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "c"},
            {"type": "RUN_ERROR", "message": "boom"},
        ]
    )
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "d"},
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "d",
                "outcome": {"type": "cancelled"},
            },
        ]
    )
    assert [r.status for r in store.runs("t")] == ["finished", "interrupted", "error", "cancelled"]
    assert store.checkout("b").interrupts == [{"id": "i1", "reason": "approve"}]


def test_a_late_run_error_after_run_finished_belongs_to_that_run(store: Any) -> None:
    store.append(run("t", "r1"))
    store.append([{"type": "RUN_ERROR", "message": "late"}], thread_id="t")
    r = store.get_run("r1")
    assert (r.status, r.event_count) == ("error", 3)


def test_a_stream_that_begins_with_run_error_gets_a_synthetic_run(store: Any) -> None:
    result = store.append([{"type": "RUN_ERROR", "message": "failed before start"}], thread_id="t")
    (r,) = store.runs("t")
    assert r.synthetic and r.status == "error" and r.run_id == result.run_ids[0]


def test_a_run_id_is_recorded_once_per_thread(store: Any, store_location: str) -> None:
    store.append(run("t", "r1"))
    before = dump(store_location)
    with pytest.raises(InvalidEventError, match="already recorded") as e:
        store.append(run("t", "r1"))
    assert e.value.index == 0 and e.value.path == "$.runId"
    assert dump(store_location) == before


def test_the_same_run_id_in_two_threads_is_two_runs_and_ambiguous_alone(store: Any) -> None:
    store.append(run("a", "r1", *say("m", "in a")))
    store.append(run("b", "r1", *say("m", "in b")))
    with pytest.raises(AmbiguousRunError, match="'a', 'b'"):
        store.checkout("r1")
    assert store.checkout("r1", thread_id="b").messages[0]["content"] == "in b"


def test_out_of_sequence_streams_are_kept_when_the_check_is_off(store: Any) -> None:
    events = run("t", "r1", {"type": "TEXT_MESSAGE_END", "messageId": "never-opened"})
    with pytest.raises(SequenceError):
        store.append(events)
    store.append(events, check_sequence=False)
    assert store.events("r1") == events


# --- lineage ----------------------------------------------------------------------------


def test_lineage_follows_the_first_matching_rule(store: Any) -> None:
    store.append(run("t", "r1"))
    store.append(run("t", "r2"))  # rule 4: the thread's head
    store.append(run("t", "r3", parentRunId="r1"))  # rule 2: RUN_STARTED.parentRunId
    store.append(
        run("t", "r4"),
        input={
            "threadId": "t",
            "runId": "r4",
            "parentRunId": "r2",
            "messages": [],
            "tools": [],
            "context": [],
        },
    )  # rule 2: input
    store.append(run("t", "r5", parentRunId="r3"), parent="r1")  # rule 1: explicit wins
    store.append(run("t", "r6", parentRunId="elsewhere"))  # a parent outside the thread: data
    got = {r.run_id: (r.parent_run_id, r.lineage, r.sent_parent_run_id) for r in store.runs("t")}
    assert got == {
        "r1": (None, "root", None),
        "r2": ("r1", "head", None),
        "r3": ("r1", "parentRunId", "r1"),
        "r4": ("r2", "parentRunId", "r2"),
        "r5": ("r1", "explicit", "r3"),
        "r6": ("r5", "head", "elsewhere"),
    }


def test_log_walks_the_lineage_newest_first(store: Any) -> None:
    for i in range(1, 5):
        store.append(run("t", f"r{i}"))
    store.append(run("t", "alt", parentRunId="r2"))
    assert [r.run_id for r in store.log("r4")] == ["r4", "r3", "r2", "r1"]
    assert [r.run_id for r in store.log("alt")] == ["alt", "r2", "r1"]
    assert [r.run_id for r in store.history("alt") and store.log("HEAD~1")] == ["r2", "r1"]


def test_history_is_the_ancestor_chains_events_root_first(store: Any) -> None:
    r1, r2 = run("t", "r1", *say("a", "one")), run("t", "r2", *say("b", "two"))
    store.append(r1)
    store.append(r2)
    store.append(run("t", "r3", *say("c", "other"), parentRunId="r1"))
    assert store.history("r2") == r1 + r2


def test_events_after_any_cursor_are_the_runs_events_after_it_whichever_batch_it_falls_in(
    store: Any,
) -> None:
    # A live run in batches of 2, 3 and 2 events, another thread's run between its batches:
    # its sequence numbers have a gap, and cursors fall before, inside, between and past them.
    events = run("t", "r", *say("a", "one"), *say("b", "two"), finish=False)
    assert len(events) == 7
    seqs: list[int] = []
    for n, batch in enumerate((events[:2], events[2:5], events[5:])):
        if n == 1:
            store.append(run("u", "other", *say("c", "elsewhere")))
        last = store.append(batch, thread_id="t").last_seq
        seqs += range(last - len(batch) + 1, last + 1)
    for after in range(0, seqs[-1] + 2):
        expected = [e for e, seq in zip(events, seqs) if seq > after]
        assert store.events("r", thread_id="t", after=after) == expected, after


def test_checkout_replays_only_the_branch_not_its_siblings(store: Any) -> None:
    store.append(run("t", "r1", *say("a", "root")))
    store.append(run("t", "r2", *say("b", "left")))
    store.append(run("t", "r3", *say("c", "right"), parentRunId="r1"))
    assert [m["content"] for m in store.checkout("r3").messages] == ["root", "right"]
    assert [m["content"] for m in store.checkout("r2").messages] == ["root", "left"]


def test_a_recorded_input_starts_the_run_from_what_the_client_sent(store: Any) -> None:
    user = {"id": "u1", "role": "user", "content": "hi"}
    store.append(
        run("t", "r1", *say("a1", "hello")),
        input={
            "threadId": "t",
            "runId": "r1",
            "messages": [user],
            "state": {"n": 1},
            "tools": [],
            "context": [],
        },
    )
    co = store.checkout("r1")
    assert co.messages == [user, {"id": "a1", "role": "assistant", "content": "hello"}]
    assert co.state == {"n": 1}
    assert store.input("r1")["messages"] == [user]


def test_fork_gives_the_input_for_a_new_run_from_any_past_run(store: Any) -> None:
    tools = [{"name": "f", "description": "d"}]
    store.append(
        run("t", "r1", *say("a1", "hello")),
        input={
            "threadId": "t",
            "runId": "r1",
            "messages": [],
            "state": {"k": 1},
            "tools": tools,
            "context": [],
        },
    )
    store.append(run("t", "r2", *say("a2", "later")))
    fork = store.fork("r1", run_id="r9")
    assert fork["threadId"] == "t" and fork["runId"] == "r9" and fork["parentRunId"] == "r1"
    assert fork["messages"] == [{"id": "a1", "role": "assistant", "content": "hello"}]
    assert fork["state"] == {"k": 1} and fork["tools"] == tools
    store.append(run("t", "r9", *say("a9", "branch")), input=fork)
    assert store.get_run("r9").parent_run_id == "r1"


# --- refs -------------------------------------------------------------------------------


def test_refs_resolve_run_ids_prefixes_branches_head_and_ancestors(store: Any) -> None:
    for rid in ("alpha-1", "alpha-2", "beta-3"):
        store.append(run("t", rid))
    store.branch("feature", "alpha-2", thread_id="t")
    assert store.get_run("beta").run_id == "beta-3"
    assert store.get_run("feature").run_id == "alpha-2"
    assert store.get_run("HEAD").run_id == "beta-3"
    assert store.get_run("main~2").run_id == "alpha-1"
    assert store.get_run("feature~").run_id == "alpha-1"
    with pytest.raises(AmbiguousRunError, match="prefix"):
        store.checkout("alpha")
    assert store.get_run("gamma") is None
    with pytest.raises(RunNotFoundError):
        store.checkout("HEAD~9")


def test_a_new_run_on_a_branch_advances_it(store: Any) -> None:
    store.append(run("t", "r1"))
    store.append(run("t", "r2"))
    store.branch("retry", "r1", thread_id="t")
    store.append(run("t", "r3", parentRunId="r1"))
    store.append(run("t", "r4"), branch="retry")
    assert store.get_run("retry").run_id == "r4"
    assert store.get_run("r4").parent_run_id == "r3"
    assert {b.name: b.run_id for b in store.branches("t")} == {"main": "r4", "retry": "r4"}


def test_branch_names_are_checked_and_deletion_keeps_the_runs(store: Any) -> None:
    store.append(run("t", "r1"))
    for bad in ("main", "HEAD", "has space", "x~1", "", "-x"):
        with pytest.raises(BranchError):
            store.branch(bad, "r1", thread_id="t")
    store.branch("keep", "r1", thread_id="t")
    store.delete_branch("keep", thread_id="t")
    with pytest.raises(BranchError):
        store.delete_branch("keep", thread_id="t")
    assert store.get_run("r1") is not None


# --- bad input leaves the file as it was ------------------------------------------------

BAD_BATCHES: list[tuple[Any, dict[str, Any]]] = [
    ('[{"type": "RUN_STARTED", "threadId": "t", "runId": "x"}, {"type": ', {}),
    (
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "x"}, {"type": "TEXT_MESSAGE_START"}],
        {"index": 1, "event_type": "TEXT_MESSAGE_START"},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": 7, "delta": "x"},
        ],
        {"index": 1, "path": "$.messageId"},
    ),
    (
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "x"}, ["not", "an", "object"]],
        {"index": 1},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "RUN_STARTED", "threadId": "t", "runId": "y"},
        ],
        {"index": 1, "event_type": "RUN_STARTED"},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "RUN_STARTED", "threadId": "other", "runId": "y"},
        ],
        {"index": 1, "path": "$.threadId"},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "CUSTOM", "name": "n", "value": json.loads("[" * 200 + "]" * 200)},
        ],
        {"index": 1},
    ),
    (
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "CUSTOM", "name": "n", "value": float("nan")},
        ],
        {"index": 1},
    ),
]


@pytest.mark.parametrize(("batch", "where"), BAD_BATCHES)
def test_bad_input_names_where_and_leaves_the_file_unchanged(
    store: Any, store_location: str, batch: Any, where: dict[str, Any]
) -> None:
    store.append(run("t", "r0", *say("m", "before")))
    before = dump(store_location)
    with pytest.raises(AguiStoreError) as e:
        store.append(batch)
    assert isinstance(e.value, ValueError)
    for attr, value in where.items():
        assert getattr(e.value, attr) == value, str(e.value)
    assert dump(store_location) == before


def test_a_failure_late_in_a_multi_run_batch_writes_none_of_it(
    store: Any, store_location: str
) -> None:
    store.append(run("t", "r0"))
    before = dump(store_location)
    batch = run("t", "r1") + run("t", "r2") + run("t", "r0")  # r0 again: refused at index 4
    with pytest.raises(InvalidEventError) as e:
        store.append(batch)
    assert e.value.index == 4
    assert dump(store_location) == before


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


@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=6))
def test_a_store_reopened_reads_the_same(
    tmp_path_factory: pytest.TempPathFactory, order: list[str]
) -> None:
    path = tmp_path_factory.mktemp("re") / "s.db"
    with agui_store.open(path) as s:
        for i, thread in enumerate(order):
            s.append(run(thread, f"r{i}", *say(f"m{i}", thread)))
        before = {t: [r.run_id for r in s.runs(t)] for t in s.threads()}
    with agui_store.open(path) as s:
        assert {t: [r.run_id for r in s.runs(t)] for t in s.threads()} == before


# --- input normalization and lineage rule 3 ---------------------------------------------


def http_agent_turns(store: Any, n: int, thread: str = "t") -> list[dict[str, Any]]:
    """n runs, each sent as HttpAgent sends them: the whole history plus a new user turn."""
    inputs = []
    history: list[dict[str, Any]] = []
    for i in range(n):
        user = {"id": f"u{i}", "role": "user", "content": f"question {i} " * 20}
        run_input = {
            "threadId": thread,
            "runId": f"r{i}",
            "messages": [*history, user],
            "state": {"turn": i},
            "tools": [],
            "context": [],
        }
        store.append(run(thread, f"r{i}", *say(f"a{i}", f"answer {i} " * 20)), input=run_input)
        inputs.append(run_input)
        history = store.checkout(f"r{i}").messages
    return inputs


def test_inputs_that_repeat_the_history_are_stored_by_reference_and_read_back_whole(
    sqlite_store: Any,
) -> None:
    store = sqlite_store
    inputs = http_agent_turns(store, 8)
    for sent in inputs:
        assert store.input(sent["runId"]) == sent
    refs = [
        r[0] for r in testing.connection(store).execute("SELECT input_refs FROM runs ORDER BY id")
    ]
    assert refs[0] is None  # the first run has no parent to refer to
    assert json.loads(refs[-1])["messages"][0] == [0, 14]  # seven turns of history: one range
    assert store.checkout("r7").messages[-2:] == [
        inputs[7]["messages"][-1],
        {"id": "a7", "role": "assistant", "content": "answer 7 " * 20},
    ]


def test_a_branch_without_parent_run_id_finds_its_parent_by_its_messages(store: Any) -> None:
    http_agent_turns(store, 3)
    fork = store.fork("r1", run_id="retry")
    del fork["parentRunId"]  # a client that time-travels without saying so
    fork["messages"].append({"id": "u-retry", "role": "user", "content": "again?"})
    store.append(run("t", "retry", *say("a-retry", "sure")), input=fork)
    r = store.get_run("retry")
    assert (r.parent_run_id, r.lineage) == ("r1", "messages")
    assert [m["id"] for m in store.checkout("retry").messages] == [
        "u0",
        "a0",
        "u1",
        "a1",
        "u-retry",
        "a-retry",
    ]
    assert [x.run_id for x in store.log("retry")] == ["retry", "r1", "r0"]


@pytest.mark.parametrize("every", [1, 200])
def test_checkout_from_checkpoints_equals_a_full_replay_and_survives_reopening(
    db_path: Path, every: int
) -> None:
    with agui_store.open(db_path, checkpoint_events=every) as store:
        http_agent_turns(store, 5)
        store.append(run("t", "side", *say("s", "side"), parentRunId="r2"))
        want = {
            r.run_id: testing.replayed_view(store, testing.connection(store)
                .execute("SELECT id FROM runs WHERE run_id = ?", (r.run_id,))
                .fetchone()[0],
            )
            for r in store.runs("t")
        }
    with agui_store.open(db_path) as store:
        for run_id, view in want.items():
            co = store.checkout(run_id)
            assert (co.messages, co.state) == (view.messages, view.state)
        # append checkpoints every run by default, else every few; compact fills in the rest
        assert (store.compact() > 0) == (every > 1)
        assert store.compact() == 0
        for run_id, view in want.items():
            co = store.checkout(run_id)
            assert (co.messages, co.state) == (view.messages, view.state)


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
