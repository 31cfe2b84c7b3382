"""The store on a real PostgreSQL server, through the public API only.

The behavioural suite runs on every backend through ``store_location`` (tests/contract);
this module holds what is PostgreSQL's own: payload bytes kept exactly in the table, text
PostgreSQL cannot hold, differential tests against an SQLite file, the plans of the port's hot
statements, many writer processes on one thread and on many with polling readers, a writer
killed mid-append, a terminated backend and a restarted server, fork, the lock timeout, the
CLI and the asyncio store on a URL.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)

import agui_store
from agui_store import cli, testing
from agui_store.backends.postgres import schema, sql
from agui_store.errors import (
    AguiStoreError,
    InvalidEventError,
    RunNotFoundError,
    SchemaVersionError,
    StorageError,
    StoreBusyError,
)
from tests.strategies import legal_streams, message_lists
from tests.streams import run, say
from tests.test_postgres_schema import deployment  # noqa: F401 (the fixture, used by name)

#: Writer processes in the concurrency tests, and batches each appends.
WRITERS = 8
BATCHES = 25


@pytest.fixture
def store_url(postgres_store_database: str) -> str:
    return postgres_store_database


@pytest.fixture
def store(store_url: str) -> Iterator[Any]:
    with agui_store.open(store_url) as s:
        yield s


def dump(url: str) -> list[Any]:
    """Every row of every store table (for "unchanged" comparisons)."""
    with psycopg.connect(url) as conn:
        out: list[Any] = []
        for table in schema.TABLES:
            rows = conn.execute(f"SELECT * FROM {schema.SCHEMA}.{table} ORDER BY 1").fetchall()
            out.append((table, rows))
        return out


# --- behaviour --------------------------------------------------------------------------


def test_text_postgresql_cannot_hold_is_refused_as_a_bad_argument_and_writes_nothing(
    store: Any, store_url: str
) -> None:
    store.append(run("t", "r0"))
    before = dump(store_url)
    with pytest.raises(AguiStoreError) as e:
        store.append(run("t\0x", "r1"))
    assert isinstance(e.value, ValueError), repr(e.value)
    assert dump(store_url) == before


def test_payloads_read_back_byte_for_byte_with_duplicate_keys_order_and_spacing(
    store: Any, store_url: str
) -> None:
    texts = [
        '{"type":"RUN_STARTED","threadId":"t","runId":"r1"}',
        '{ "type" : "CUSTOM", "name":"n", "value": {"b":1, "a":2, "b":3} ,"z" :[ 1,2 ] }',
        '{"value":{"\\u00e9":"\\ud83d\\ude00"},"name":"n","type":"CUSTOM"}',
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r1"}',
    ]
    store.append("\n".join(texts))
    with psycopg.connect(store_url) as conn:
        stored = [
            row[0]
            for row in conn.execute(
                f"SELECT payload FROM {schema.SCHEMA}.events ORDER BY seq"
            ).fetchall()
        ]
    assert stored == texts
    events = store.events("r1", thread_id="t")
    assert events[1]["value"] == {"b": 3, "a": 2}  # the last duplicate wins, as in JSON.parse
    assert list(events[2]) == ["value", "name", "type"]


def test_merge_base_diff_compacted_fork_and_derive_answer_as_an_sqlite_file_does(
    store: Any, tmp_path: Any
) -> None:
    """The same calls on PostgreSQL and on an SQLite file give the same answers."""
    results = []
    for target in (store, agui_store.open(tmp_path / "same.db")):
        target.append(run("t", "r1", *say("m1", "hello", "user")))
        target.append(run("t", "r2", *say("m2", "one", "assistant")))
        target.append(run("t", "r3", *say("m3", "two", "assistant"), parentRunId="r1"))
        target.branch("side", "r3", thread_id="t")
        target.append(run("t", "r4", *say("m4", "three", "assistant")), branch="side")
        target.append(
            run("t", "r5", {"type": "STATE_SNAPSHOT", "snapshot": {"k": [1, 2]}}), parent="r2"
        )
        results.append(
            {
                "base": target.merge_base("r4", "r5", thread_id="t").run_id,
                "ancestor": (
                    target.is_ancestor("r1", "r4", thread_id="t"),
                    target.is_ancestor("r2", "r4", thread_id="t"),
                ),
                "diff": str(target.diff("r4", "r5", thread_id="t")),
                "compacted": target.reconnect_stream("r4", thread_id="t"),
                "checkout": [
                    (c.messages, c.state)
                    for c in (target.checkout(r, thread_id="t") for r in ("r4", "r5"))
                ],
                "log": [
                    (r.run_id, r.parent_run_id, r.lineage)
                    for r in target.log("r4", thread_id="t")
                ],
                "history": target.history("r5", thread_id="t"),
                "branches": [(b.name, b.run_id) for b in target.branches("t")],
                "fork": target.fork("r3", thread_id="t", run_id="new"),
                "input": target.input("r1", thread_id="t"),
                "threads": target.threads(),
                "derive": (target.derive(), target.compact() if target is not store else 0),
            }
        )
        if target is not store:
            target.close()
    on_postgres, on_sqlite = results
    on_sqlite["derive"] = (on_sqlite["derive"][0], 0)  # compact writes checkpoints on SQLite only
    assert on_postgres == on_sqlite


def test_a_checkpoint_list_the_server_cannot_read_is_read_by_the_engines_own_parse(
    store: Any, store_url: str
) -> None:
    # A checkout reads a checkpoint's row and its blobs in one statement, the server taking
    # the blob ids from the list only where it is spelled as the engine writes it. Spelled
    # otherwise (the same JSON with spaces), the server lists none of them, and the checkout
    # reads them by the ids the engine parsed: the same view, no error.
    parent = None
    for i in range(3):
        store.append(run("t", f"r{i}", *say(f"m{i}", f"text {i}", "assistant")), parent=parent)
        parent = f"r{i}"
    before = store.checkout("r2", thread_id="t")
    with psycopg.connect(store_url) as conn:
        conn.execute(f"SET search_path TO {schema.SCHEMA}")
        conn.execute("SET session_replication_role = replica")
        (pk,) = conn.execute("SELECT id FROM runs WHERE run_id = 'r2'").fetchone()
        respelled = "UPDATE checkpoints SET tail = replace(tail, ',', ', ') WHERE run = %s"
        assert conn.execute(respelled, (pk,)).rowcount == 1
        rows = conn.execute(sql.CHECKPOINT_WITH_BLOBS, {"run": pk}).fetchall()
    assert len(rows) == 1  # the row alone: no blob listed by the server
    with agui_store.open(store_url) as fresh:
        assert fresh.checkout("r2", thread_id="t") == before
        assert fresh.check().ok


def test_check_runs_on_postgresql_its_schema_checks_then_the_stores_own(store: Any) -> None:
    store.append(run("t", "r1", *say("m1", "hi", "assistant")))
    report = store.check()
    assert report.ok, [str(p) for p in report.problems]
    assert report.checked[:3] == ("foreign_keys", "pages", "schema")
    assert "derived" in report.checked


def set_schema_version(url: str, version: int) -> None:
    """Record ``version`` in the store's ``meta``, as a release of that version's migration
    leaves it, from a connection of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {schema.SCHEMA}.meta SET value = %s WHERE key = 'schema_version'",
            (str(version),),
        )


def test_a_store_a_newer_release_migrated_while_it_was_open_takes_no_more_writes(
    store_url: str,
) -> None:
    newer = schema.SCHEMA_VERSION + 1
    refused = f"migrated to schema version {newer} by a newer agui-store"
    with agui_store.open(store_url) as store:
        store.append(run("t", "r1", *say("m1", "석사 학위")))
        store.append(run("gone", "g1"))
        set_schema_version(store_url, newer)
        before = dump(store_url)
        with pytest.raises(SchemaVersionError, match=refused):
            store.append(run("t", "r2", *say("m2", "서울에서 만나요")))
        with pytest.raises(SchemaVersionError, match=refused):
            store.delete_thread("gone")
        assert dump(store_url) == before
        assert [r.run_id for r in store.runs("t")] == ["r1"]  # reads go on
    with pytest.raises(SchemaVersionError, match=f"schema version {newer}, newer than"):
        agui_store.open(store_url)
    set_schema_version(store_url, schema.SCHEMA_VERSION)
    with agui_store.open(store_url) as store:
        store.append(run("t", "r2", *say("m2", "서울에서 만나요")))
        assert [r.run_id for r in store.runs("t")] == ["r1", "r2"]
        assert store.check().ok


def test_a_store_whose_version_was_set_back_while_it_was_open_takes_no_more_writes(
    store_url: str,
) -> None:
    with agui_store.open(store_url) as store:
        store.append(run("t", "r1"))
        set_schema_version(store_url, schema.SCHEMA_VERSION - 1)
        before = dump(store_url)
        with pytest.raises(SchemaVersionError, match=(
            f"records schema version {schema.SCHEMA_VERSION - 1}, not the "
            f"{schema.SCHEMA_VERSION} it was opened at"
        )):
            store.append(run("t", "r2"))
        assert dump(store_url) == before


@pytest.mark.pydantic_ai
def test_a_conversation_store_a_newer_release_migrated_under_saves_nothing_more(
    store_url: str,
) -> None:
    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    newer = schema.SCHEMA_VERSION + 1

    async def saves() -> None:
        async with ConversationStore(store_url) as conversations:
            talk = Conversation(conversation_id="c1")
            talk.messages.extend(turn(1))
            await conversations.save(talk)
            set_schema_version(store_url, newer)
            before = dump(store_url)
            talk.messages.extend(turn(2))
            with pytest.raises(SchemaVersionError, match=(
                f"migrated to schema version {newer} by a newer agui-store"
            )):
                await conversations.save(talk)
            assert dump(store_url) == before

    asyncio.run(saves())


@pytest.mark.parametrize("where", ["authority", "query", "sslpassword"])
def test_the_url_is_shown_without_its_password(store_url: str, where: str) -> None:
    assert store_url.startswith("postgresql:///") and "?" in store_url
    if where == "authority":
        with_password = store_url.replace("postgresql:///", "postgresql://postgres:s3cret@/")
    elif where == "query":
        with_password = store_url + "&password=s3cret"
    else:  # the passphrase of the client's SSL key: a password too
        with_password = store_url + "&sslpassword=s3cret"
    with agui_store.open(with_password) as s:  # the test server trusts local sockets
        s.append(run("t", "r1"))
        assert "s3cret" not in s.path and "s3cret" not in repr(s)
        assert s.path.split("?")[0] == with_password.split("?")[0].replace(":s3cret", "")
        with pytest.raises(RunNotFoundError) as e:
            s.checkout("nothing", thread_id="t")
        assert "s3cret" not in str(e.value)


# --- query plans of the port's hot statements -------------------------------------------


def _hot_port_reads(pk: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Each statement an append, a checkout, a log or a ref lookup runs, with parameters."""
    tip, mid, thread = pk["tip"], pk["mid"], pk["thread"]
    return {
        "run pk": (sql.RUN_PK, (thread, "r20")),
        "newest run": (sql.NEWEST_RUN, (thread,)),
        "run hash": (sql.RUN_HASH, {"run": tip}),
        "thread run summaries": (sql.THREAD_RUN_SUMMARIES, (thread,)),
        "lineage runs (a log page)": (sql.LINEAGE_RUNS, {"run": tip, "depth": None, "limit": 5}),
        "newest input": (sql.NEWEST_INPUT, (tip,)),
        "ancestor among": (sql.ANCESTOR_AMONG, (tip, [mid, mid + 1])),
        "derived descendants": (sql.DERIVED_DESCENDANTS, (mid,)),
        "events of runs": (sql.EVENTS_OF_RUNS, ([mid, tip],)),
        "batches of runs": (sql.BATCHES_OF_RUNS, ([mid, tip],)),
        "run records": (sql.RUN_RECORDS, ([mid, tip],)),
        "open runs": (sql.OPEN_RUNS, (thread,)),
        "run status": (sql.RUN_STATUS, (tip,)),
        "terminal event": (sql.TERMINAL_EVENT, (tip,)),
        "runs with digests (rule 3)": (sql.RUNS_WITH_DIGESTS, ([pk["digest"]], thread)),
        "has digest": (sql.HAS_DIGEST, (pk["digest"], mid)),
        "runs named": (sql.RUNS_NAMED_WHERE, {"run_id": "r7", "thread": thread, "scope": None}),
        "runs prefixed": (
            sql.RUNS_PREFIXED,
            {"prefix": "r1", "below": "r2", "thread": thread, "scope": None},
        ),
        "threads of run id": (sql.THREADS_OF_RUN_ID, {"run_id": "r7", "scope": None}),
        "branch run": (sql.BRANCH_RUN, (thread, "side")),
        "branch tips": (sql.BRANCH_TIPS, (thread,)),
        "run summary and branches": (sql.RUN_SUMMARY_AND_BRANCHES, (tip,)),
        "checkpoint row": (sql.SELECT_CHECKPOINT, (tip,)),
        "checkpoint with blobs": (sql.CHECKPOINT_WITH_BLOBS, {"run": tip}),
        "run checkout": (sql.RUN_CHECKOUT, {"thread_id": "t", "run_id": "r39", "scope": None}),
        "branches named": (
            sql.BRANCHES_NAMED,
            {"name": "side", "thread": thread, "scope": None},
        ),
    }


def test_the_hot_port_statements_probe_indexes_and_scan_no_table(
    store: Any, store_url: str
) -> None:
    from tests.test_postgres_schema import INDEXED, plan_scans

    parent = None
    for i in range(40):
        store.append(run("t", f"r{i}", *say(f"m{i}", f"text {i}")), parent=parent)
        parent = f"r{i}"
    store.branch("side", "r20", thread_id="t")
    for k in range(5):  # other threads, so that a thread's rows are a part of each table
        store.append(run(f"other-{k}", "r7", *say(f"o{k}", "elsewhere")))
    with psycopg.connect(store_url) as conn:
        conn.execute(f"SET search_path TO {schema.SCHEMA}")
        conn.execute("ANALYZE")
        # As in test_postgres_schema: at test size a scan beats any index, so scans are
        # priced out; a statement no index serves still shows its Seq Scan.
        conn.execute("SET enable_seqscan = off")
        (thread,) = conn.execute("SELECT id FROM threads WHERE thread_id = 't'").fetchone()
        ids = dict(conn.execute("SELECT run_id, id FROM runs WHERE thread = %s", (thread,)))
        (digest,) = conn.execute(
            "SELECT ids_hash FROM lineage_digests WHERE run = %s", (ids["r30"],)
        ).fetchone()
        marks = {"tip": ids["r39"], "mid": ids["r10"], "thread": thread, "digest": digest}
        for name, (query, params) in _hot_port_reads(marks).items():
            scans = plan_scans(conn, query, params)
            assert scans and all(kind in INDEXED for kind, _, _ in scans), (name, scans)


# --- differential: the same operations on SQLite and on PostgreSQL ---------------------


class SameOnBothBackends(RuleBasedStateMachine):
    """Random appends (new runs with and without parents and inputs, runs a restored client
    continues without naming its parent, state changes, live runs streamed in pieces),
    branches and reopenings, applied to an SQLite file and to PostgreSQL: every answer is
    the same (timestamps, sequence numbers and hashes, which cover timestamps, aside)."""

    url = ""  # set by the test: the PostgreSQL store's URL
    runs = Bundle("runs")
    live = Bundle("live")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="agui-both-")
        self.path = os.path.join(self.dir, "s.db")
        # One database for every example: each example has a thread of its own.
        self.thread = f"t-{uuid.uuid4().hex[:12]}"
        self.stores = [agui_store.open(self.path), agui_store.open(self.url)]
        self.count = 0
        self.pending: dict[str, list[dict[str, Any]]] = {}

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def both(self, call: Any) -> Any:
        """``call(store)`` on both; the same answer, or the same kind of error."""
        answers = []
        for store in self.stores:
            try:
                answers.append(("answer", call(store)))
            except AguiStoreError as e:
                answers.append(("error", type(e).__name__))
        assert answers[0] == answers[1], answers
        return answers[0][1]

    def _new_id(self) -> str:
        self.count += 1
        return f"run{self.count}"

    def _append(self, events: list[dict[str, Any]], **kwargs: Any) -> Any:
        return self.both(
            lambda s: _comparable_result(s.append(events, thread_id=self.thread, **kwargs))
        )

    @rule(
        target=runs,
        data=st.data(),
        parent=st.one_of(st.none(), runs),
        with_input=st.booleans(),
    )
    def append_run(self, data: st.DataObject, parent: str | None, with_input: bool) -> str:
        run_id = self._new_id()
        events = data.draw(
            legal_streams(
                thread_id=self.thread, min_runs=1, max_runs=1, run_ids=[run_id], max_steps=8
            )
        )
        kwargs: dict[str, Any] = {} if parent is None else {"parent": parent}
        if with_input:
            extra = data.draw(message_lists)
            kwargs["input"] = {
                "threadId": self.thread, "runId": run_id, "tools": [], "context": [],
                "messages": extra,
            }
        self._append(events, **kwargs)
        return run_id

    @rule(target=runs, base=runs)
    def continue_a_restored_run_without_naming_it(self, base: str) -> str:
        run_id = self._new_id()
        restored = self.both(lambda s: s.checkout(base, thread_id=self.thread).messages)
        history = restored if isinstance(restored, list) else []  # both refused: a new start
        sent = [*history, {"id": f"u-{run_id}", "role": "user", "content": "again"}]
        self._append(
            run(self.thread, run_id, *say(f"a-{run_id}", "ok", "assistant")),
            input={
                "threadId": self.thread, "runId": run_id, "tools": [], "context": [],
                "messages": sent,
            },
        )
        return run_id

    @rule(target=runs, parent=st.one_of(st.none(), runs), value=st.integers(0, 3))
    def change_the_state(self, parent: str | None, value: int) -> str:
        run_id = self._new_id()
        events = run(
            self.thread,
            run_id,
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n", "value": value}]},
        )
        self._append(events, **({"parent": parent} if parent is not None else {}))
        return run_id

    @rule(target=live)
    def start_live_run(self) -> str:
        run_id = self._new_id()
        self._append([{"type": "RUN_STARTED", "threadId": self.thread, "runId": run_id}])
        self.pending[run_id] = say(f"l-{run_id}", "live", "assistant")
        return run_id

    @rule(run_id=live, n=st.integers(1, 2))
    def stream_a_piece(self, run_id: str, n: int) -> None:
        piece, self.pending[run_id] = self.pending[run_id][:n], self.pending[run_id][n:]
        if piece:
            self._append(piece, run_id=run_id)

    @rule(run_id=consumes(live))
    def finish_live_run(self, run_id: str) -> None:
        rest = self.pending.pop(run_id)
        self._append([*rest, {"type": "RUN_FINISHED", "threadId": self.thread, "runId": run_id}],
                     run_id=run_id)

    @rule(name=st.sampled_from(["b1", "b2"]), run_id=runs)
    def branch(self, name: str, run_id: str) -> None:
        self.both(lambda s: s.branch(name, run_id, thread_id=self.thread).name)

    @rule(name=st.sampled_from(["b1", "b2"]))
    def delete_branch(self, name: str) -> None:
        self.both(lambda s: s.delete_branch(name, thread_id=self.thread))

    @rule()
    def reopen(self) -> None:
        for store in self.stores:
            store.close()
        self.stores = [agui_store.open(self.path), agui_store.open(self.url)]

    @invariant()
    def every_answer_is_the_same(self) -> None:
        if self.count == 0:
            return
        runs = self.both(lambda s: [_comparable_run(r) for r in s.runs(self.thread)])
        self.both(lambda s: [(b.name, b.run_id) for b in s.branches(self.thread)])
        t = self.thread
        for summary in runs:
            run_id = summary[0]
            self.both(lambda s, r=run_id: _comparable_checkout(s.checkout(r, thread_id=t)))
            self.both(lambda s, r=run_id: [_comparable_run(x) for x in s.log(r, thread_id=t)])
            self.both(lambda s, r=run_id: s.events(r, thread_id=t))
            self.both(lambda s, r=run_id: s.input(r, thread_id=t))
        if len(runs) > 1:
            a, b = runs[0][0], runs[-1][0]
            self.both(lambda s: getattr(s.merge_base(a, b, thread_id=self.thread), "run_id", None))
            self.both(lambda s: _comparable_diff(s.diff(a, b, thread_id=self.thread)))


def _comparable_result(result: Any) -> Any:
    return (result.thread_id, result.run_ids, result.new_run_ids, result.event_count)


def _comparable_run(r: Any) -> Any:
    return (r.run_id, r.parent_run_id, r.lineage, r.status, r.event_count,
            r.sent_parent_run_id, r.has_input, r.synthetic, tuple(r.branches))


def _comparable_diff(diff: Any) -> Any:
    """A diff with object keys sorted, and its state operations as a set: a view read from
    a checkpoint (SQLite) holds its objects' keys in another order than a replayed one
    (PostgreSQL, for now), and the state operations follow that order (the checkouts are
    compared key-sorted for the same reason)."""
    doc = diff.to_json()
    for side in ("changes", "aChanges"):
        if doc[side] is not None and "statePatch" in doc[side]:
            doc[side]["statePatch"] = sorted(
                json.dumps(op, sort_keys=True) for op in doc[side]["statePatch"]
            )
    return json.dumps(doc, sort_keys=True)


def _comparable_checkout(co: Any) -> Any:
    return json.dumps([co.messages, co.state, co.interrupts, co.warnings], sort_keys=True)


def test_sqlite_and_postgresql_answer_alike_under_random_operations(store_url: str) -> None:
    machine = type("OnThisServer", (SameOnBothBackends,), {"url": store_url})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=int(os.environ.get("AGUI_STORE_PG_EXAMPLES", "10")),
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


# --- many writers -----------------------------------------------------------------------


def _append_runs(url: str, name: str, thread: str, count: int, out: Any) -> None:
    """A writer process: ``count`` whole runs on ``thread``, each placed on the head."""
    try:
        with agui_store.open(url) as s:
            for i in range(count):
                result = s.append(run(thread, f"{name}-{i}", *say(f"{name}-m{i}", f"{name} {i}")))
                out.put((name, i, result.first_seq, result.last_seq))
    except BaseException as e:  # reported, so that the test fails with it
        out.put(("error", name, repr(e), 0))
        raise


def _start_writers(url: str, threads: list[str]) -> tuple[list[Any], Any]:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_append_runs, args=(url, f"w{k}", thread, BATCHES, out))
        for k, thread in enumerate(threads)
    ]
    for p in procs:
        p.start()
    return procs, out


def _collect(procs: list[Any], out: Any, expected: int) -> list[tuple[Any, ...]]:
    results = []
    deadline = time.monotonic() + 120
    while len(results) < expected and time.monotonic() < deadline:
        item = out.get(timeout=120)
        assert item[0] != "error", item
        results.append(item)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_eight_writer_processes_on_one_thread_lose_duplicate_and_fork_nothing(
    store_url: str,
) -> None:
    procs, out = _start_writers(store_url, ["shared"] * WRITERS)
    results = _collect(procs, out, WRITERS * BATCHES)
    ranges = sorted((first, last) for _, _, first, last in results)
    assert ranges[0][0] == 1
    for (_, last), (first, _) in itertools.pairwise(ranges):
        assert first == last + 1, "batches overlap or leave gaps in the global sequence"
    with agui_store.open(store_url) as s:
        runs = s.runs("shared")
        assert len(runs) == WRITERS * BATCHES == len({r.run_id for r in runs})
        assert {r.run_id for r in runs} == {f"{n}-{i}" for n, i, _, _ in results}
        # One chain: each run continues the one committed before it.
        assert [r.parent_run_id for r in runs] == [None] + [r.run_id for r in runs[:-1]]
        assert all(r.event_count == 5 and r.status == "finished" for r in runs)
        messages = s.checkout("HEAD", thread_id="shared").messages
        assert len(messages) == WRITERS * BATCHES


def test_eight_writers_on_eight_threads_and_a_polling_reader_see_every_event_once_in_order(
    store_url: str,
) -> None:
    threads = [f"thread-{k}" for k in range(WRITERS)]
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    # Per poll, the global sequence numbers the reader saw, in the order it read them.
    order: list[int] = []
    done = threading.Event()

    def reader() -> None:
        with agui_store.open(store_url) as s:
            cursors: dict[tuple[str, str], int] = {}
            while True:
                finished = done.is_set()
                for thread in s.threads():
                    for r in s.runs(thread):
                        key = (thread, r.run_id)
                        if r.last_seq <= cursors.get(key, 0):
                            continue
                        events = s.events(
                            r.run_id, thread_id=thread, after=cursors.get(key) or None
                        )
                        seen.setdefault(key, []).extend(events)
                        cursors[key] = r.last_seq
                        order.append(r.last_seq)
                if finished:
                    return
                time.sleep(0.005)

    gaps: list[tuple[int, int]] = []
    snapshots = [0]

    def log_watcher() -> None:
        """What a reader following the global log sees: in every snapshot the sequence
        numbers committed so far are 1..N with no hole, so an ``after=N`` cursor can never
        pass over an event that commits later with a lower number."""
        with psycopg.connect(store_url, autocommit=True) as conn:
            while not done.is_set():
                count, top = conn.execute(
                    f"SELECT count(*), coalesce(max(seq), 0) FROM {schema.SCHEMA}.events"
                ).fetchone()
                snapshots[0] += 1
                if count != top:
                    gaps.append((count, top))
                time.sleep(0.002)

    polling = threading.Thread(target=reader)
    watching = threading.Thread(target=log_watcher)
    polling.start()
    watching.start()
    procs, out = _start_writers(store_url, threads)
    try:
        results = _collect(procs, out, WRITERS * BATCHES)
    finally:
        done.set()
        polling.join(timeout=120)
        watching.join(timeout=120)
    assert not gaps, f"{len(gaps)} of {snapshots[0]} snapshots had a hole: {gaps[:5]}"
    assert snapshots[0] > 10
    assert len(results) == WRITERS * BATCHES
    with agui_store.open(store_url) as s:
        for thread in threads:
            for r in s.runs(thread):
                assert seen[(thread, r.run_id)] == s.events(r.run_id, thread_id=thread)
        assert sum(len(v) for v in seen.values()) == 5 * WRITERS * BATCHES
    ranges = sorted((first, last) for _, _, first, last in results)
    assert [first for first, _ in ranges[1:]] == [last + 1 for _, last in ranges[:-1]]
    # Each run was read exactly once, as one whole batch.
    assert sorted(order) == [last for _, last in ranges]


class HeldWrite:
    """A write of ``store`` run on a thread of its own and held open, locks taken and
    nothing written, at the store's write hook (``testing.on_write_locked``) until
    :meth:`release`."""

    def __init__(self, store: Any, write: Any) -> None:
        self.locked = threading.Event()
        self._released = threading.Event()
        self.failures: list[BaseException] = []
        self.locked_for: list[str | None] = []
        self._hook = testing.on_write_locked(store, self._wait)
        self._hook.__enter__()
        self._writer = threading.Thread(target=self._run, args=(write,))
        self._writer.start()
        assert self.locked.wait(60), "the held write never got its locks"

    def _wait(self, thread: str | None) -> None:
        self.locked_for.append(thread)
        self.locked.set()
        assert self._released.wait(60)

    def _run(self, write: Any) -> None:
        try:
            write()
        except BaseException as e:  # reported by release()
            self.failures.append(e)

    def release(self) -> None:
        self._released.set()
        self._writer.join(timeout=60)
        self._hook.__exit__(None, None, None)
        assert not self.failures, self.failures


def test_an_append_to_another_thread_commits_while_an_append_holds_its_transaction_open(
    store_url: str,
) -> None:
    with agui_store.open(store_url) as held, agui_store.open(
        store_url, busy_timeout_ms=200
    ) as other:
        held.append(run("a", "a1", *say("m1", "a")))
        hold = HeldWrite(held, lambda: held.append(run("a", "a2", *say("m2", "b"))))
        try:
            assert hold.locked_for == ["a"]
            # Waiting on the held append's locks would fail this one after 200 ms.
            other.append(run("b", "b1", *say("m3", "c")))
            assert [r.run_id for r in other.runs("b")] == ["b1"]
            assert [r.run_id for r in other.runs("a")] == ["a1"]
            # Appends to the held thread still take turns with it.
            with pytest.raises(StoreBusyError, match="busy timeout"):
                other.append(run("a", "a3"))
        finally:
            hold.release()
        other.append(run("a", "a3"))
        runs = other.runs("a")
        assert [r.run_id for r in runs] == ["a1", "a2", "a3"]
        assert [r.parent_run_id for r in runs] == [None, "a1", "a2"]
        # seq order is commit order: b1 committed first, then a2 right after it.
        assert runs[1].last_seq - runs[1].event_count == other.runs("b")[0].last_seq


def test_a_write_that_spans_threads_excludes_appends_and_waits_for_them(
    store_url: str,
) -> None:
    with agui_store.open(store_url) as held, agui_store.open(
        store_url, busy_timeout_ms=200
    ) as other:
        held.append(run("a", "a1"))
        other.append(run("b", "b1"))
        # An append under way: writes that may touch any thread wait for it.
        hold = HeldWrite(held, lambda: held.append(run("a", "a2")))
        try:
            with pytest.raises(StoreBusyError, match="busy timeout"):
                other.branch("feature", "b1", thread_id="b")
            with pytest.raises(StoreBusyError, match="busy timeout"):
                other.derive()
        finally:
            hold.release()
        # Such a write under way: appends of every thread wait for it.
        hold = HeldWrite(held, lambda: held.branch("feature", "a1", thread_id="a"))
        try:
            assert hold.locked_for == [None]
            with pytest.raises(StoreBusyError, match="busy timeout"):
                other.append(run("b", "b2"))
        finally:
            hold.release()
        other.append(run("b", "b2"))
        other.branch("feature", "b1", thread_id="b")
        assert [r.run_id for r in other.runs("b")] == ["b1", "b2"]
        assert {b.name: b.run_id for b in other.branches("a")}["feature"] == "a1"


def test_appends_after_a_failed_call_prepare_their_thread_check_again(store: Any) -> None:
    """psycopg deallocates every prepared statement of a session after a ROLLBACK (here a
    failed call's), the store's own check of a thread too: the next append prepares it
    again and lands."""
    store.append(run("t", "r1", *say("m1", "a")))
    for _ in range(6):  # enough executions for psycopg to prepare statements of its own
        store.runs("t")
    with pytest.raises(AguiStoreError):
        store.delete_branch("missing", thread_id="t")
    store.append(run("t", "r2", *say("m2", "b")))
    with pytest.raises(InvalidEventError):
        store.append(run("t", "r2"))  # a duplicate run: its transaction rolls back too
    store.append(run("t", "r3", *say("m3", "c")))
    assert [r.parent_run_id for r in store.runs("t")] == [None, "r1", "r2"]


def test_a_store_keeps_trusting_its_thread_while_other_threads_are_written_and_notices_its_own(
    store_url: str,
) -> None:
    """What a store remembers of its thread survives appends to other threads, and is found
    again when another store writes its thread: a run, a continuation of its open run, a
    branch."""
    with agui_store.open(store_url) as a, agui_store.open(store_url) as b:
        a.append(run("t", "r1", *say("m1", "a")))
        b.append(run("u", "u1", *say("m2", "b")))
        a.append(run("t", "r2", *say("m3", "c")))
        b.append(run("t", "r3", *say("m4", "d")))  # b writes a's thread
        a.append(run("t", "r4", *say("m5", "e")))
        runs = a.runs("t")
        assert [r.parent_run_id for r in runs] == [None, "r1", "r2", "r3"]
        # An open run of a's, ended by b: a's next piece is refused as after the end.
        a.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r5"}])
        b.append([{"type": "RUN_FINISHED", "threadId": "t", "runId": "r5"}], thread_id="t")
        b.append(run("u", "u2"))
        with pytest.raises(InvalidEventError):
            a.append(
                [{"type": "TEXT_MESSAGE_START", "messageId": "x", "role": "assistant"}],
                thread_id="t",
            )
        # A run id that b made a branch name is refused by a as it would be on a fresh store.
        b.branch("r6", "r4", thread_id="t")
        with pytest.raises(InvalidEventError, match="name of a branch"):
            a.append(run("t", "r6"))
        assert [m["content"] for m in a.checkout("r4", thread_id="t").messages] == [
            "a", "c", "d", "e"
        ]


def test_a_store_that_derives_on_append_derives_what_a_lazy_store_left_in_its_thread(
    store_url: str,
) -> None:
    """The thread check asks whether runs of the thread wait to be derived only for a store
    that derives on append; that store must still find, and derive first, a run another
    store left underived between two of its appends."""
    with agui_store.open(store_url) as eager, agui_store.open(
        store_url, derive_on_append=False
    ) as lazy:
        eager.append(run("t", "r1", *say("m1", "a")))
        lazy.append(run("t", "r2", *say("m2", "b")))
        lazy.append(run("u", "u1", *say("m3", "x")))
        with psycopg.connect(store_url) as conn:
            waiting = conn.execute("SELECT count(*) FROM agui_store.underived").fetchone()
        assert waiting == (2,)
        eager.append(run("t", "r3", *say("m4", "c")))
        with psycopg.connect(store_url) as conn:
            left = conn.execute(
                "SELECT r.run_id FROM agui_store.underived AS u "
                "JOIN agui_store.runs AS r ON r.id = u.run ORDER BY r.run_id"
            ).fetchall()
        assert left == [("u1",)]  # t's own derived first; u is not the append's business
        lazy.append(run("t", "r4", *say("m5", "d")))
        assert [m["content"] for m in eager.checkout("r4", thread_id="t").messages] == [
            "a", "b", "c", "d"
        ]
        assert eager.check().ok


def test_the_thread_check_forces_the_generic_plan_for_itself_alone(store_url: str) -> None:
    """The check runs with ``plan_cache_mode = force_generic_plan`` (re-planned every append
    otherwise); the rest of the append's transaction is planned as the server would."""
    seen: list[tuple[str, Any]] = []
    with agui_store.open(store_url) as s:
        s.append(run("t", "r1", *say("m1", "a")))

        def hook(thread: str | None) -> None:
            conn = testing.connection(s)
            seen.append((conn.execute("SHOW plan_cache_mode").fetchone()[0], thread))

        with testing.on_write_locked(s, hook):
            s.append(run("t", "r2", *say("m2", "b")))
    assert seen == [("auto", "t")]


def _append_forever(url: str, ready: Any) -> None:
    """A writer that appends big batches until killed, saying when each one starts."""
    with agui_store.open(url) as s:
        for i in range(10_000):
            body = [
                e
                for k in range(400)
                for e in say(f"k{i}-{k}", "x" * 100, "assistant")
            ]
            ready.put(("start", i))
            s.append(run("t", f"big-{i}", *body))
            ready.put(("done", i))


def test_a_writer_killed_mid_append_loses_nothing_committed_and_leaves_no_partial_batch(
    store_url: str,
) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Queue()
    proc = ctx.Process(target=_append_forever, args=(store_url, ready))
    proc.start()
    done: list[int] = []
    try:
        while len(done) < 2:
            kind, i = ready.get(timeout=60)
            if kind == "done":
                done.append(i)
        while ready.get(timeout=60)[0] != "start":
            pass
        time.sleep(0.02)  # inside the append of a batch of 1,202 events
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout=30)
    with agui_store.open(store_url, busy_timeout_ms=5_000) as s:
        runs = s.runs("t")
        assert {f"big-{i}" for i in done} <= {r.run_id for r in runs}
        assert all(r.event_count == 1 + 3 * 400 + 1 for r in runs), "a partial batch landed"
        # The killed writer's lock went with its session: the next writer gets it.
        s.append(run("t", "after", *say("m", "still here")))
        assert s.runs("t")[-1].run_id == "after"
        assert s.runs("t")[-1].parent_run_id == runs[-1].run_id


# --- a lost connection ------------------------------------------------------------------


def test_a_terminated_connection_fails_one_call_at_most_and_the_store_works_again(
    store: Any, postgres_server: Any
) -> None:
    store.append(run("t", "r1", *say("m1", "a")))
    pid = testing.connection(store).info.backend_pid
    assert postgres_server.terminate_backend(pid)
    try:
        store.append(run("t", "r2", *say("m2", "b")))
    except StorageError as e:
        assert "lost the connection" in str(e)
        store.append(run("t", "r2", *say("m2", "b")))
    assert testing.connection(store).info.backend_pid != pid
    assert [r.run_id for r in store.runs("t")] == ["r1", "r2"]
    assert [m["content"] for m in store.checkout("r2", thread_id="t").messages] == ["a", "b"]


def test_a_check_whose_connection_is_lost_midway_says_so_instead_of_reporting_problems(
    store: Any, postgres_server: Any, store_url: str
) -> None:
    store.append(run("t", "r1", *say("m1", "a")))
    pid = testing.connection(store).info.backend_pid
    outcome: list[Any] = []

    def check() -> None:
        try:
            outcome.append(store.check())
        except BaseException as e:
            outcome.append(e)

    # Another session holds a table the check reads: the check waits for it, inside its
    # read transaction, until its connection is terminated.
    with psycopg.connect(store_url) as other:
        other.execute(f"LOCK TABLE {schema.SCHEMA}.lineage_digests IN ACCESS EXCLUSIVE MODE")
        checker = threading.Thread(target=check)
        checker.start()
        assert _waits_on_a_lock(other, pid)
        assert postgres_server.terminate_backend(pid)
        checker.join(timeout=60)
        other.rollback()
    assert len(outcome) == 1 and isinstance(outcome[0], StorageError), outcome
    assert "lost the connection" in str(outcome[0])
    assert store.check().ok  # the store was never damaged


def test_a_copy_whose_source_loses_its_connection_says_so_naming_the_source(
    store: Any, postgres_server: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # More runs than one read of the source's events holds, and more events than one write
    # of the destination's: the source is read again after the destination's first write.
    runs = 210
    lines = [json.dumps(event) for n in range(runs) for event in
             run("t", f"r{n}", *(e for m in range(10) for e in say(f"m{n}-{m}", "hi")))]
    recording = tmp_path / "recording.jsonl"
    recording.write_text("\n".join(lines) + "\n")
    store.import_file(recording)
    pid = testing.connection(store).info.backend_pid
    target = tmp_path / "copy.db"

    def lose_the_source(done: int, total: int) -> None:
        if done < total:  # the first write landed: the source's server goes away
            postgres_server.terminate_backend(pid)

    with pytest.raises(StorageError) as caught:
        agui_store.copy(store, target, progress=lose_the_source)
    said = str(caught.value)
    assert said.startswith(f"{store.path}: lost the connection"), said
    assert not target.exists()  # the copy created it: removed with the failure


def _waits_on_a_lock(conn: Any, pid: int, seconds: float = 30) -> bool:
    """Whether the server backend ``pid`` comes to wait on a lock within ``seconds``
    (polled through ``conn``, another session)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        if row and row[0] == "Lock":
            return True
        time.sleep(0.01)
    return False


def test_a_migration_waits_for_the_write_under_way_and_indexes_what_it_wrote(
    store_url: str,
) -> None:
    with agui_store.open(store_url) as store:
        store.append(run("t", "r1", *say("m1", "first words")))
        hold = HeldWrite(store, lambda: store.append(run("t", "r2", *say("m2", "held words"))))
        migrated: list[BaseException] = []

        def migrate() -> None:
            try:
                agui_store.open(store_url).close()
            except BaseException as e:  # asserted below
                migrated.append(e)

        try:
            # What a store of the version before leaves: this release migrates it on open
            # (version 15 changed no table, so the tables are already that version's).
            set_schema_version(store_url, schema.SCHEMA_VERSION - 1)
            migration = threading.Thread(target=migrate)
            migration.start()
            with psycopg.connect(store_url, autocommit=True) as conn:
                waiting = None
                while waiting is None and migration.is_alive():
                    waiting = conn.execute(
                        "SELECT wait_event FROM pg_stat_activity "
                        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    ).fetchone()
                    time.sleep(0.01)
            assert waiting == ("advisory",)  # the writers' lock the held append holds
        finally:
            hold.release()
        migration.join()
        assert not migrated, migrated
        store.append(run("t", "r3", *say("m3", "later words")))
    with agui_store.open(store_url) as store:
        assert [r.run_id for r in store.runs("t")] == ["r1", "r2", "r3"]
        assert len(store.search("held")) == 1
        assert store.check().ok


def test_a_connection_terminated_inside_a_write_leaves_the_batch_absent(
    store: Any, postgres_server: Any, store_url: str
) -> None:
    store.append(run("t", "r1", *say("m1", "a")))
    before = dump(store_url)
    pid = testing.connection(store).info.backend_pid
    failure: list[BaseException] = []

    def append() -> None:
        try:
            store.append(run("t", "r2", *say("m2", "b")))
        except BaseException as e:
            failure.append(e)

    # Another session inserts run r2 and keeps its transaction open: the store's insert of
    # the same run waits for it, inside the store's write transaction, until terminated.
    with psycopg.connect(store_url) as other:
        other.execute(
            f"INSERT INTO {schema.SCHEMA}.runs(thread, run_id, lineage, created_at) "
            f"SELECT id, 'r2', 'root', 0 FROM {schema.SCHEMA}.threads WHERE thread_id = 't'"
        )
        writer = threading.Thread(target=append)
        writer.start()
        _waits_on_a_lock(other, pid)
        assert postgres_server.terminate_backend(pid)
        writer.join(timeout=30)
        other.rollback()
    assert len(failure) == 1 and isinstance(failure[0], StorageError), failure
    assert "lost the connection" in str(failure[0])
    assert dump(store_url) == before
    store.append(run("t", "r2", *say("m2", "b")))
    assert [r.run_id for r in store.runs("t")] == ["r1", "r2"]


@pytest.mark.parametrize(
    "table",
    [
        "runs",  # the run's row, its key reserved: deferred, carried by a later statement
        "batches",  # carried in the middle of the append, in front of another statement
        "checkpoints",  # the last write: sent in a statement of its own before COMMIT
    ],
)
def test_a_deferred_write_the_server_refuses_fails_the_call_and_leaves_the_batch_absent(
    store: Any, store_url: str, table: str
) -> None:
    # The run's row, its batch and its checkpoint are not sent when the engine writes them
    # but with a later statement: the server's refusal of one must still fail the append
    # that wrote it, with a store error, and roll all of it back.
    store.append(run("t", "r1", *say("m1", "a")))
    before = dump(store_url)
    with psycopg.connect(store_url, autocommit=True) as owner:
        owner.execute(
            f"CREATE FUNCTION {schema.SCHEMA}.refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'check_violation'; "
            "END $$"
        )
        owner.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON {schema.SCHEMA}.{table} "
            f"FOR EACH ROW EXECUTE FUNCTION {schema.SCHEMA}.refuse()"
        )
        with pytest.raises(agui_store.IntegrityError, match="refused by the test"):
            store.append(run("t", "r2", *say("m2", "b")))
        assert dump(store_url) == before
        owner.execute(f"DROP TRIGGER refuse ON {schema.SCHEMA}.{table}")
        owner.execute(f"DROP FUNCTION {schema.SCHEMA}.refuse()")
    store.append(run("t", "r2", *say("m2", "b")))
    assert [r.run_id for r in store.runs("t")] == ["r1", "r2"]
    assert [m["content"] for m in store.checkout("r2", thread_id="t").messages] == ["a", "b"]
    assert store.check().ok


def test_a_blob_another_writer_commits_while_an_append_stores_it_is_found_and_shared(
    store: Any, store_url: str, tmp_path: Any
) -> None:
    # Storing blobs returns the ids of those inserted and of those already there in the
    # statement's snapshot. A blob another transaction commits while that statement waits
    # on its key is in neither: the append must look it up, not lose it or store it twice.
    r1 = run("t", "r1", *say("m1", "a"))
    r2 = run("t", "r2", {"type": "STATE_SNAPSHOT", "snapshot": {"race": uuid.uuid4().hex}},
             *say("m2", "b"))
    # The blobs r2's checkpoint stores, as the same engine writes them on an SQLite file.
    with agui_store.open(str(tmp_path / "same.db")) as lite:
        lite.append(r1)
        before = {bytes(h) for (h,) in testing.connection(lite).execute("SELECT hash FROM blobs")}
        lite.append(r2)
        r2_blobs = [
            (bytes(h), c, bytes(d))
            for h, c, d in testing.connection(lite).execute("SELECT hash, codec, data FROM blobs")
            if bytes(h) not in before
        ]
    assert r2_blobs
    store.append(r1)
    pid = testing.connection(store).info.backend_pid
    failure: list[BaseException] = []

    def append() -> None:
        try:
            store.append(r2)
        except BaseException as e:
            failure.append(e)

    with psycopg.connect(store_url) as other:  # holds r2's blobs uncommitted
        other.cursor().executemany(
            f"INSERT INTO {schema.SCHEMA}.blobs(hash, codec, data) VALUES (%s, %s, %s)", r2_blobs
        )
        writer = threading.Thread(target=append)
        writer.start()
        if not _waits_on_a_lock(other, pid):
            pytest.fail("the append never waited on the other writer's blob")
        other.commit()
        writer.join(timeout=30)
    assert not failure, failure
    with psycopg.connect(store_url) as conn:
        stored = conn.execute(
            f"SELECT count(*), count(DISTINCT hash) FROM {schema.SCHEMA}.blobs"
            " WHERE hash = ANY(%s)",
            ([h for h, _, _ in r2_blobs],),
        ).fetchone()
    assert stored == (len(r2_blobs), len(r2_blobs))
    assert [m["content"] for m in store.checkout("r2", thread_id="t").messages] == ["a", "b"]
    assert store.checkout("r2", thread_id="t").state == r2[1]["snapshot"]
    assert store.check().ok


def test_a_steady_append_sends_at_most_five_statements(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Round trips are most of an append's time on PostgreSQL (each costs several times the
    # server's work for it): BEGIN with the locks and the thread check; the duplicate check
    # with the event-order lock and the seq; the checkpoint's new blobs (its state's among
    # them) carrying the writes before them (run, page, batch, digest); the checkpoint's row
    # with COMMIT's flush; COMMIT. A statement that comes back one at a time fails this.
    sent: list[str] = []
    execute = psycopg.Cursor.execute
    store.append(run("t", "r-first", *say("m-first", "first")))  # the store's connection open
    own = testing.connection(store)

    def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        # The store's own connection only: the test session's server makes and drops
        # spare databases from a thread of its own meanwhile (tests/postgres_cluster.py).
        if self.connection is own:
            sent.append(str(query)[:60])
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    counts = []
    for n in range(8):
        events = run("t", f"r{n}", *say(f"m{n}", f"answer {n}"))
        sent.clear()
        store.append(events)
        counts.append(len(sent))
    assert max(counts[3:]) <= 5, (counts, sent)
    assert len(store.runs("t")) == 9 and store.check().ok


def test_a_checkout_of_a_run_named_in_its_thread_is_one_statement_and_leaves_no_transaction(
    store: Any, monkeypatch: pytest.MonkeyPatch, postgres_server: Any
) -> None:
    # One round trip: no BEGIN, no COMMIT (one statement sees one snapshot). A ref that is
    # not a run id of the thread, a run without a checkpoint of its own, and a missing run
    # take the long way in a transaction of their own, with their answers and errors.
    store.append(run("t", "r1", *say("m1", "first")))
    store.append(run("t", "r2", *say("m2", "second")), parent="r1")
    store.branch("side", "r1", thread_id="t")
    sent: list[str] = []
    execute = psycopg.Cursor.execute
    own = testing.connection(store)

    def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if self.connection is own:  # the store's own connection only (see above)
            sent.append(str(query).split()[0])
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    for _ in range(3):
        sent.clear()
        found = store.checkout("r2", thread_id="t")
        assert [m["content"] for m in found.messages] == ["first", "second"]
        assert found.run.branches == ("main",) and sent == ["WITH"]
        assert own.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    sent.clear()
    assert store.checkout("side", thread_id="t").run.run_id == "r1"
    assert sent[0] == "WITH" and sent[1].startswith("BEGIN") and sent[-1] == "COMMIT"
    with pytest.raises(RunNotFoundError):
        store.checkout("r9", thread_id="t")
    with pytest.raises(RunNotFoundError):
        store.checkout("r2", thread_id="t", scope="someone")
    assert own.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    # The rest of the store's reads and writes on that connection are as they were.
    store.append(run("t", "r3", *say("m3", "third")), parent="r2")
    assert [r.run_id for r in store.log("r3", thread_id="t")] == ["r3", "r2", "r1"]
    assert store.check().ok
    # A connection lost before the statement: replaced, and the read sent again.
    assert postgres_server.terminate_backend(own.info.backend_pid)
    assert store.checkout("r3", thread_id="t").run.run_id == "r3"
    assert testing.connection(store) is not own


def test_the_checkout_statement_runs_prepared_with_its_generic_plan_on_a_replaced_connection_too(
    store: Any, postgres_server: Any
) -> None:
    # Planned anew, the statement costs several times what running it does (its generic
    # plan is a stack of primary-key probes): psycopg prepares it on the store's connection
    # after a few runs, and the server keeps its generic plan.
    store.append(run("t", "r1", *say("m1", "first")))
    numbered = sql.RUN_CHECKOUT
    for n, name in enumerate(("thread_id", "run_id", "scope"), 1):
        numbered = numbered.replace(f"%({name})s", f"${n}")

    def generic_plans() -> int:
        for _ in range(12):
            assert store.checkout("r1", thread_id="t").messages[-1]["content"] == "first"
        own = testing.connection(store)
        found = own.execute(
            "SELECT generic_plans FROM pg_prepared_statements WHERE statement = %s",
            (numbered,),
        ).fetchall()
        return sum(int(plans) for (plans,) in found)

    assert generic_plans() > 0
    old = testing.connection(store)
    assert postgres_server.terminate_backend(old.info.backend_pid)
    assert generic_plans() > 0 and testing.connection(store) is not old


def test_a_server_restart_between_calls_costs_at_most_one_failed_call(
    store: Any, postgres_cluster: Any
) -> None:
    store.append(run("t", "r1", *say("m1", "a")))
    postgres_cluster.stop("fast")
    with pytest.raises(StorageError, match="cannot connect to postgresql://"):
        store.append(run("t", "r2", *say("m2", "b")))
    postgres_cluster.start()
    store.append(run("t", "r2", *say("m2", "b")))
    assert [r.run_id for r in store.runs("t")] == ["r1", "r2"]


def test_the_application_role_of_the_readme_deployment_runs_the_whole_store(
    request: pytest.FixtureRequest,
) -> None:
    """Connected as the role that owns nothing and has only the grants
    ``application_grants`` prints: appends, branches moved and deleted, derive and compact
    all work, and the log tables still refuse changes."""
    from psycopg.conninfo import conninfo_to_dict

    from tests.postgres_cluster import uri

    _, app_dsn = request.getfixturevalue("deployment")  # test_postgres_schema's
    app_url = uri({key: str(value) for key, value in conninfo_to_dict(app_dsn).items()})
    with agui_store.open(app_url, derive_on_append=False) as s:
        s.append(run("t", "r1", *say("m1", "a", "user")))
        s.branch("feature", "r1", thread_id="t")
        s.append(run("t", "r2", *say("m2", "b", "assistant")), branch="feature")
        assert {b.name: b.run_id for b in s.branches("t")}["feature"] == "r2"
        s.delete_branch("feature", thread_id="t")
        assert s.derive() >= 0 and s.compact() == 0
        assert [m["content"] for m in s.checkout("r2", thread_id="t").messages] == ["a", "b"]
        with pytest.raises(psycopg.Error):
            testing.connection(s).execute(f"DELETE FROM {schema.SCHEMA}.events")
        testing.connection(s).rollback()
        s.append(run("t", "r3"))
        assert [r.run_id for r in s.runs("t")] == ["r1", "r2", "r3"]


def test_the_application_role_erases_a_thread_through_the_schema_and_deletes_no_log_row_itself(
    request: pytest.FixtureRequest,
) -> None:
    """``erase_log`` runs as the tables' owner: the application's role erases a thread
    whole, cannot vacuum (the receipt says the purge did not finish: autovacuum's), and
    its own DELETE on the log is still refused."""
    from psycopg.conninfo import conninfo_to_dict

    from tests.postgres_cluster import uri

    _, app_dsn = request.getfixturevalue("deployment")  # test_postgres_schema's
    app_url = uri({key: str(value) for key, value in conninfo_to_dict(app_dsn).items()})
    with agui_store.open(app_url) as s:
        s.append(run("gone", "r1", *say("m1", "forget me", "user")))
        s.append(run("kept", "k1", *say("m2", "keep me", "user")))
        receipt = s.delete_thread("gone")
        assert (receipt.threads, receipt.runs, receipt.purged) == (1, 1, False)
        assert "does not own the store's tables" in receipt.purge_pending
        assert str(receipt).endswith(f"; purge not finished ({receipt.purge_pending})")
        assert "checkpoint" not in str(receipt)  # SQLite's reason is not this one
        assert s.threads() == ["kept"] and s.check().ok
        with pytest.raises(psycopg.Error):
            testing.connection(s).execute(f"DELETE FROM {schema.SCHEMA}.runs")
        testing.connection(s).rollback()


def test_the_application_role_can_erase_only_whole_threads_through_erase_log(
    request: pytest.FixtureRequest,
) -> None:
    """``erase_log`` deletes as the tables' owner, for the application's role: given one
    run of a thread that stays (a hand-made call), it refuses and deletes nothing."""
    from psycopg.conninfo import conninfo_to_dict

    from tests.postgres_cluster import uri

    _, app_dsn = request.getfixturevalue("deployment")
    app_url = uri({key: str(value) for key, value in conninfo_to_dict(app_dsn).items()})
    with agui_store.open(app_url) as s:
        s.append(run("kept", "k1", *say("m1", "one", "user")))
        s.append(run("kept", "k2", *say("m2", "two", "user")))
        before = [r.run_id for r in s.runs("kept")]
    with psycopg.connect(app_dsn) as app:
        app.execute(f"SET search_path TO {schema.SCHEMA}")
        (thread,) = app.execute("SELECT id FROM threads").fetchone()
        (first,) = app.execute("SELECT min(id) FROM runs").fetchone()
        with pytest.raises(psycopg.Error, match="erases whole threads"):
            app.execute("SELECT erase_log(%s, %s)", ([thread], [first]))
    with agui_store.open(app_url) as s:
        assert [r.run_id for r in s.runs("kept")] == before and s.check().ok
        assert s.delete_thread("kept").threads == 1  # a whole thread: as before


def test_the_tables_owner_purges_the_tables_but_leaves_old_statistics_to_the_database_owner(
    request: pytest.FixtureRequest,
) -> None:
    """In the two-role deployment the tables' owner may vacuum and analyze its tables, but
    not pg_statistic, a catalog: where statistics exist its purge says what is left and
    who finishes it, and a superuser's purge does."""
    from psycopg.conninfo import conninfo_to_dict

    from tests.postgres_cluster import uri

    owner_dsn, _ = request.getfixturevalue("deployment")
    database = request.getfixturevalue("postgres_database")
    owner_url = uri({key: str(value) for key, value in conninfo_to_dict(owner_dsn).items()})
    with agui_store.open(owner_url) as s:
        s.append(run("gonezq", "r1", *say("m1", "wordzq said", "user")))
        s.append(run("kept", "k1", *say("m2", "keep me", "user")))
        with psycopg.connect(database, autocommit=True) as admin:
            admin.execute("ANALYZE")
        receipt = s.delete_thread("gonezq")
        assert receipt.threads == 1 and not receipt.purged
        assert "pg_statistic" in receipt.purge_pending
        assert "database's owner or a superuser" in receipt.purge_pending
    with agui_store.open(database) as admin_store:
        assert admin_store.purge()
    with psycopg.connect(database, autocommit=True) as admin:
        assert _erased_in_statistics(admin, ("gonezq", "wordzq")) == set()


def test_an_erasure_vacuums_every_table_it_deleted_from_the_search_index_included(
    store_url: str,
) -> None:
    """The purge's ``VACUUM`` reaches each table the erasure took rows from (PostgreSQL
    counts each table's vacuums as it ends them), the search index's rows and words too."""
    counted = (
        "SELECT relname, vacuum_count FROM pg_stat_all_tables WHERE schemaname = %s"
    )
    with agui_store.open(store_url) as s:
        for i in range(3):
            s.append(run("gone", f"g{i}", *say(f"gm{i}", f"forget these words {i}", "user")))
        s.branch("gone-branch", "g1", thread_id="gone")
        s.append(run("kept", "k1", *say("km", "keep these", "user")))
        conn = testing.connection(s)
        before = dict(conn.execute(counted, (schema.SCHEMA,)).fetchall())
        conn.rollback()
        assert s.delete_thread("gone").purged
        after = dict(conn.execute(counted, (schema.SCHEMA,)).fetchall())
        conn.rollback()
    vacuumed = {table for table, n in after.items() if n > before[table]}
    deleted_from = {
        "event_pages", "batches", "runs", "threads", "branches", "checkpoints",
        "lineage_digests", "checkpoint_segments", "blobs", "search_messages",
    }
    assert deleted_from <= vacuumed, deleted_from - vacuumed
    assert "tombstones" not in vacuumed and "erasures" not in vacuumed


def test_the_viewer_command_names_its_store_without_the_password(store_url: str) -> None:
    with agui_store.open(store_url) as s:
        s.append(run("t", "r1", *say("m1", "hello")))
    url = store_url + ("&" if "?" in store_url else "?") + "password=S3CRETPW"  # trust: unused
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_store", "ui", url, "--port", "0", "--no-browser"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert line.startswith("viewer of postgresql://") and " at http://127.0.0.1:" in line
    assert "S3CRETPW" not in line + out + err


def _bytes_in_data_files(conn: Any, needle: bytes) -> dict[str, int]:
    """How often ``needle`` stands in the data files of the store's tables, their TOAST
    tables and their indexes, as they are on disk after a checkpoint (the server's own
    reads of its files: the tests connect as its superuser)."""
    conn.execute("CHECKPOINT")
    relations = conn.execute(
        """
        WITH tables AS (
            SELECT c.oid, c.reltoastrelid FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %s AND c.relkind = 'r'
        ), heaps AS (
            SELECT oid FROM tables UNION SELECT reltoastrelid FROM tables WHERE reltoastrelid <> 0
        )
        SELECT oid::regclass::text FROM heaps
        UNION SELECT i.indexrelid::regclass::text FROM pg_index i JOIN heaps h ON i.indrelid = h.oid
        """,
        (schema.SCHEMA,),
    ).fetchall()
    found = {}
    for (relation,) in relations:
        (data,) = conn.execute(
            "SELECT pg_read_binary_file(pg_relation_filepath(%s))", (relation,)
        ).fetchone()
        if data.count(needle):
            found[relation] = data.count(needle)
    return found


def test_a_purge_that_rewrites_leaves_no_byte_of_an_erased_thread_in_the_data_files(
    store_url: str,
) -> None:
    # Enough words for the search index's GIN index to keep erased ones as keys, and rows
    # for the tables' freed space to keep their bytes: a vacuum leaves both.
    with agui_store.open(store_url) as s:
        for i in range(50):
            s.append(run("gone", f"g{i}", *say(f"g{i}-m", f"card dzqv{i:04d}secret")))
        for i in range(200):
            s.append(run(f"kept{i}", f"k{i}", *say(f"k{i}-m", f"hello kept{i:04d}word")))
        assert s.delete_thread("gone").purged
        with psycopg.connect(store_url, autocommit=True) as conn:
            left = _bytes_in_data_files(conn, b"dzqv")
            assert "agui_store.search_messages_by_words" in left  # keys with no rows
            assert s.purge(rewrite=True)
            assert _bytes_in_data_files(conn, b"dzqv") == {}
            assert _bytes_in_data_files(conn, b"kept0047word")
        assert [h.thread_id for h in s.search("kept0047word")] == ["kept47"]
        assert s.check().ok


def _erased_in_statistics(conn: Any, needles: tuple[str, ...]) -> set[str]:
    """Which of ``needles`` the planner's statistics of the store's tables show (pg_stats:
    what any role that reads the tables reads of ANALYZE's samples)."""
    rows = conn.execute(
        "SELECT concat_ws(' ', most_common_vals::text, histogram_bounds::text, "
        "most_common_elems::text) FROM pg_stats WHERE schemaname = %s",
        (schema.SCHEMA,),
    ).fetchall()
    return {n for n in needles for (text,) in rows if text and n in text}


def test_a_purge_samples_the_planners_statistics_again_and_rewrites_them_with_rewrite(
    store_url: str,
) -> None:
    """ANALYZE (autovacuum's, on its own) keeps samples of the tables' values in
    pg_statistic: the erased thread's ids, owner, branch and words. The purge samples them
    again from the rows left and vacuums the old samples out; rewriting, out of its file."""
    needles = ("gonezq", "ownerzq", "branchzq", "wordzq")
    with agui_store.open(store_url) as s:
        s.append(run("gonezq", "gonezq-r", *say("gonezq-m", "wordzq said", "user")),
                 scope="ownerzq")
        s.branch("branchzq", "gonezq-r", thread_id="gonezq")
        for i in range(3):
            s.append(run(f"kept{i}", f"k{i}", *say(f"k{i}-m", f"kept words {i}")))
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
            assert {"gonezq", "wordzq"} <= _erased_in_statistics(conn, needles)
            assert s.delete_thread("gonezq", scope="ownerzq").purged
            assert _erased_in_statistics(conn, needles) == set()
            assert _erased_in_statistics(conn, ("kept",)) == {"kept"}
            assert s.purge(rewrite=True)
            conn.execute("CHECKPOINT")
            for relation in ("pg_catalog.pg_statistic", "pg_toast.pg_toast_2619"):
                (data,) = conn.execute(
                    "SELECT pg_read_binary_file(pg_relation_filepath(%s))", (relation,)
                ).fetchone()
                assert not [n for n in needles if n.encode() in data], relation


def test_a_purge_drops_the_statistics_of_a_table_the_erasure_left_empty(store_url: str) -> None:
    """ANALYZE writes no statistics from no rows, so those it wrote before the erasure (the
    erased owner's branch names, here) would stay in pg_stats."""
    needles = ("branchzq", "ownerzq")
    with agui_store.open(store_url) as s:
        s.append(run("kept", "kept-r", *say("kept-m", "kept words", "user")))
        for i in range(3):
            s.append(run(f"gone{i}", f"gone{i}-r", *say(f"gone{i}-m", "bye", "user")),
                     scope="ownerzq")
            s.branch(f"branchzq{i}", f"gone{i}-r", thread_id=f"gone{i}")
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
            assert _erased_in_statistics(conn, needles) == set(needles)
            receipt = s.delete_owner("ownerzq")
            assert receipt.purged, receipt.purge_pending
            assert _erased_in_statistics(conn, needles) == set()
            assert _statistics_rows(conn, "branches") == 0
            s.branch("again", "kept-r", thread_id="kept")  # the table works as before
            assert [b.name for b in s.branches("kept") if not b.default] == ["again"]
        assert s.check().ok


def test_a_purge_leaves_an_empty_tables_statistics_to_the_next_while_a_reader_holds_it(
    store_url: str,
) -> None:
    """Its ALTER TABLE would wait for the reader, and every query of the table behind it."""
    with agui_store.open(store_url) as s:
        s.append(run("kept", "kept-r", *say("kept-m", "kept words", "user")))
        for i in range(3):
            s.append(run(f"gone{i}", f"gone{i}-r", *say(f"gone{i}-m", "bye", "user")))
            s.branch(f"branchzq{i}", f"gone{i}-r", thread_id=f"gone{i}")
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
            with psycopg.connect(store_url) as reader:
                reader.execute("SELECT count(*) FROM agui_store.branches").fetchall()
                for i in range(3):
                    receipt = s.delete_thread(f"gone{i}")
                assert not receipt.purged
                assert "branches.name (a transaction held the table)" in receipt.purge_pending
                assert _statistics_rows(conn, "branches") > 0
            assert s.purge()
            assert _statistics_rows(conn, "branches") == 0


def _statistics_rows(conn: Any, table: str) -> int:
    (rows,) = conn.execute(
        "SELECT count(*) FROM pg_stats WHERE schemaname = %s AND tablename = %s",
        (schema.SCHEMA, table),
    ).fetchone()
    return int(rows)


def test_a_purge_that_leaves_no_event_says_the_events_statistics_stay(store_url: str) -> None:
    """The ``events`` view reads every column of ``event_pages``, whose statistics no
    statement but a superuser's drops while the view stands."""
    with agui_store.open(store_url) as s:
        for i in range(3):
            s.append(run(f"gone{i}", f"gone{i}-r", *say(f"gone{i}-m", f"bye{i}", "user")))
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        receipt = s.prune(before=datetime.now(timezone.utc) + timedelta(days=1))
        assert receipt.threads == 3 and not receipt.purged
        assert "statistics of event_pages." in receipt.purge_pending
        s.append(run("new", "new-r", *say("new-m", "hello", "user")))
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        assert s.purge()


def test_a_transaction_begun_before_the_erasure_holds_the_purge_back_until_it_ends(
    store_url: str,
) -> None:
    """VACUUM keeps the row versions an older snapshot may still read: the receipt says the
    purge did not finish, and a purge once that transaction has ended does."""
    import psycopg

    with agui_store.open(store_url) as s:
        s.append(run("gone", "g1", *say("gm", "forget this", "user")))
        s.append(run("kept", "k1", *say("km", "keep this", "user")))
        with psycopg.connect(store_url) as reader:
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            reader.execute("SELECT count(*) FROM agui_store.runs").fetchall()  # its snapshot
            receipt = s.delete_thread("gone")
            assert receipt.threads == 1 and not receipt.purged
            assert "1 transaction(s) open as the purge began" in receipt.purge_pending
            reader.rollback()
        assert s.purge()
        # A session that wrote and waits in its transaction holds an id, not a snapshot.
        s.append(run("gone2", "g2", *say("gm2", "forget that", "user")))
        with psycopg.connect(store_url) as writer:
            writer.execute("CREATE TEMP TABLE t (x int)")  # holds a transaction id now
            receipt = s.delete_thread("gone2")
            assert not receipt.purged and "open as the purge began" in receipt.purge_pending
            writer.rollback()
        assert s.purge()


def test_a_database_that_does_not_exist_is_a_clear_store_error(store_url: str) -> None:
    missing = store_url.replace("postgresql:///agui_test_", "postgresql:///missing_")
    with pytest.raises(StorageError, match="cannot connect to postgresql:///missing_"):
        agui_store.open(missing)


def test_a_standby_server_serves_every_read_and_refuses_a_write_naming_itself(
    store_url: str, postgres_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from tests.contract.test_kept_messages import short_turns

    with agui_store.open(store_url) as primary:
        short_turns(primary, 150)
        head = primary.checkout("HEAD", thread_id="t")
    standby = postgres_cluster.standby()
    try:
        url = standby.dsn(str(conninfo_to_dict(store_url)["dbname"]))
        with agui_store.open(url) as s:
            assert s.threads() == ["t"]
            for _ in range(3):  # read again and again, as a viewer does
                assert s.checkout("HEAD", thread_id="t").messages == head.messages
            assert [hit.run_id for hit in s.search("question 7")][:1] == ["r7"]
            assert s.check().ok
            # No notice of the primary's erasures reaches a standby: it keeps no message.
            assert testing.kept_message_blobs(s) == 0
            before = s.runs("t")
            with pytest.raises(StorageError, match="is a standby server, which takes no wri"):
                s.append(run("t", "r-new"))
            with pytest.raises(StorageError, match="standby"):
                s.delete_thread("t")
            assert s.runs("t") == before
            assert cli.main(["--db", url, "branch", "b", "HEAD", "--thread", "t"]) == 1
            said = capsys.readouterr().err
            assert f"agui-store branch: {url} is a standby server" in said
            assert "Traceback" not in said and "bug" not in said
            # Promoted (a failover), the server takes the same open store's writes.
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT pg_promote(wait => true)")
            s.append(run("t", "r-new"))
            assert s.runs("t")[-1].run_id == "r-new"
    finally:
        standby.destroy()


@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("postgresql://user:secret@[::1", 'looking for matching "]" in IPv6 host address'),
        ("postgresql:///db?password=secret&connect_timeout=abc", "connect_timeout: 'abc'"),
        ("postgresql://user:secret%ZZ@/db", "invalid percent-encoded token in the password"),
        ("postgresql:///db?password=secret%ZZ", "invalid percent-encoded token in the password"),
        ("postgresql://user:secret%00@/db", "forbidden value %00 in percent-encoded value in "
         "the password"),
    ],
    ids=["an unclosed address", "a bad parameter", "a bad escape in the password",
         "a bad escape in the query's password", "a NUL in the password"],
)
def test_a_url_libpq_cannot_read_is_a_clear_error_that_keeps_the_password_out(
    url: str, what: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(agui_store.InvalidArgumentError) as caught:
        agui_store.open(url)
    said = str(caught.value)
    assert said.startswith("cannot read the PostgreSQL URL") and what in said
    assert "secret" not in said
    assert cli.main(["threads", "--db", url]) == 1  # a store error, not a bug (3)
    assert "secret" not in capsys.readouterr().err


def test_the_commands_the_cli_prints_to_paste_name_the_database_without_its_password(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from tests.postgres_cluster import uri

    # The test server trusts its socket: the password is sent and never asked for.
    url = uri({**{k: str(v) for k, v in conninfo_to_dict(store_url).items()},
               "password": "s3cret"})  # fmt: skip
    assert cli.main(["--db", url, "demo"]) == 0
    assert cli.main(["--db", url, "demo", "--json"]) == 0  # a second thread: two pages
    assert cli.main(["--db", url, "threads", "--limit", "1"]) == 0
    assert cli.main(["--db", url, "search", "the", "--limit", "1"]) == 0
    printed = capsys.readouterr()
    said = printed.out + printed.err
    assert "see it in the browser: agui-store ui 'postgresql:///" in said
    assert "next page: agui-store --db " in said and "next page: agui-store search the" in said
    assert "s3cret" not in said


def test_a_printed_command_keeps_the_urls_escaped_spaces_so_that_it_opens_the_same_store(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # libpq reads "+" as a plus sign: an escaped space printed as "+" makes another URL.
    url = (store_url + "&password=s3cret&options=-c%20statement_timeout%3D60000"
           "&application_name=team%20store")  # fmt: skip
    assert cli.main(["--db", url, "demo"]) == 0
    said = capsys.readouterr().out
    shown = said.split("see it in the browser: agui-store ui '", 1)[1].split("'", 1)[0]
    assert "s3cret" not in shown
    assert "options=-c%20statement_timeout%3D60000&application_name=team%20store" in shown
    with agui_store.open(shown) as s:  # the server trusts its socket: no password asked
        assert len(s.threads()) == 1
    with psycopg.connect(shown) as conn:
        assert conn.execute("SHOW application_name").fetchone() == ("team store",)


def test_a_writer_waiting_longer_than_its_busy_timeout_gets_a_store_busy_error(
    store_url: str,
) -> None:
    with agui_store.open(store_url, busy_timeout_ms=200) as s:
        s.append(run("t", "r1"))
        with psycopg.connect(store_url) as other:  # another writer, inside its transaction
            other.execute(sql.WRITER_LOCK)
            started = time.monotonic()
            with pytest.raises(StoreBusyError, match="busy timeout"):
                s.append(run("t", "r2"))
            assert time.monotonic() - started < 20
        s.append(run("t", "r2"))  # the other writer is gone: the lock is free
        assert [r.run_id for r in s.runs("t")] == ["r1", "r2"]
        # A lock taken by hand blocks a read too: the error names no writer then.
        with psycopg.connect(store_url) as other:
            other.execute("LOCK TABLE agui_store.runs IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreBusyError) as caught:
                s.search("r2")
            said = str(caught.value)
            assert "locked by another transaction" in said and "writer" not in said
            assert caught.value.waited


def test_a_store_used_in_a_forked_child_reconnects_there_and_the_parent_carries_on(
    store: Any,
) -> None:
    store.append(run("t", "parent-1"))
    parent_session = testing.connection(store).info.backend_pid
    pid = os.fork()
    if pid == 0:  # the child: its own connection, the parent's left alone
        code = 1
        try:
            store.append(run("t", "child-1"))
            if testing.connection(store).info.backend_pid != parent_session:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert testing.connection(store).info.backend_pid == parent_session
    store.append(run("t", "parent-2"))
    assert [r.run_id for r in store.runs("t")] == ["parent-1", "child-1", "parent-2"]


def test_a_forked_child_that_exits_normally_leaves_the_parents_session_alone(
    store: Any,
) -> None:
    """A child exiting through the interpreter finalizes what it inherited: the parent's
    connection must not say goodbye to the server on the shared socket."""
    store.append(run("t", "parent-1"))
    parent_session = testing.connection(store).info.backend_pid
    pid = os.fork()
    if pid == 0:
        store.close()  # closing in the child, then exiting normally
        os._exit(0)
    os.waitpid(pid, 0)
    store.append(run("t", "parent-2"))
    assert testing.connection(store).info.backend_pid == parent_session


def test_the_command_line_reads_a_postgresql_store_from_db_and_the_environment(
    store: Any, store_url: str
) -> None:
    store.append(run("t", "r1", *say("m1", "hello", "user")))
    store.append(run("t", "r2", *say("m2", "hi", "assistant")))
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    log = subprocess.run(
        [sys.executable, "-m", "agui_store", "--db", store_url, "log", "r2", "--thread", "t"],
        capture_output=True, text=True, env=env, check=False,
    )
    assert log.returncode == 0, log.stderr
    assert [line.split()[0] for line in log.stdout.splitlines() if line] == ["r2", "r1"]
    env["AGUI_STORE_DB"] = store_url
    threads = subprocess.run(
        [sys.executable, "-m", "agui_store", "threads", "--json"],
        capture_output=True, text=True, env=env, check=False,
    )
    assert threads.returncode == 0, threads.stderr
    assert [t["threadId"] for t in json.loads(threads.stdout)] == ["t"]


def test_the_asyncio_store_appends_through_its_writer_process_and_reads(store_url: str) -> None:
    from agui_store import aio

    async def use() -> list[Any]:
        async with aio.open(store_url) as astore:
            await astore.append(run("t", "r1", *say("m1", "async", "assistant")))
            return (await astore.checkout("r1", thread_id="t")).messages

    assert asyncio.run(use()) == [{"id": "m1", "role": "assistant", "content": "async"}]




# --- event pages (schema version 3) -----------------------------------------------------------


@st.composite
def event_rows(draw: Any) -> list[tuple[int, int, str, str]]:
    """Event rows as the engine hands them over: spans of one run's consecutive seqs, with
    gaps and run changes between them (a copy's several runs, another writer's seqs)."""
    rows: list[tuple[int, int, str, str]] = []
    seq = 0
    for run_pk, gap, length in draw(
        st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(1, 300)), max_size=8)
    ):
        seq += gap
        for _ in range(length):
            seq += 1
            rows.append((seq, run_pk, "CUSTOM", f'{{"n":{seq}}}'))
    return rows


@settings(max_examples=60, deadline=None)
@given(rows=event_rows(), data=st.data())
def test_event_rows_become_pages_of_one_batch_s_consecutive_events_and_nothing_else(
    rows: list[tuple[int, int, str, str]], data: st.DataObject
) -> None:
    from agui_store.backends.postgres.transaction import PAGE_EVENTS, pages

    seqs = [row[0] for row in rows]
    starts = frozenset(data.draw(st.lists(st.sampled_from(seqs)) if seqs else st.just([])))
    paged = pages(rows, starts)
    unpaged = [
        (first + n, run_pk, kind, payload)
        for first, run_pk, last, kinds, payloads in paged
        for n, (kind, payload) in enumerate(zip(kinds, payloads, strict=True))
    ]
    assert unpaged == rows
    for first, _, last, kinds, payloads in paged:
        assert last - first + 1 == len(payloads) == len(kinds) <= PAGE_EVENTS
        assert not starts & set(range(first + 1, last + 1))  # a batch starts a page
    for (_, run_a, last_a, _, full), (first_b, run_b, *_) in itertools.pairwise(paged):
        # a page ends only where the run changes, seqs jump, a batch starts or it is full
        assert (
            run_a != run_b or first_b != last_a + 1 or first_b in starts or len(full) == PAGE_EVENTS
        )


def test_a_run_longer_than_a_page_reads_back_whole_and_after_any_cursor(store: Any) -> None:
    from agui_store.backends.postgres.transaction import PAGE_EVENTS

    deltas = [f"part {i} \u00e9\U0001f600" for i in range(PAGE_EVENTS * 2 + 40)]
    body = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d} for d in deltas),
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    ]
    appended = run("t", "long", *body)
    result = store.append(appended)
    assert store.events("long", thread_id="t") == appended
    first = result.last_seq - len(appended) + 1
    for cut in (first - 1, first + PAGE_EVENTS - 2, first + PAGE_EVENTS - 1, result.last_seq - 1):
        tail = store.events("long", thread_id="t", after=cut)
        assert tail == appended[cut - first + 1 :], cut
    assert store.checkout("long", thread_id="t").messages[0]["content"] == "".join(deltas)
    with psycopg.connect(store.path) as conn:
        sizes = conn.execute(
            f"SELECT cardinality(payloads) FROM {schema.SCHEMA}.event_pages ORDER BY first_seq"
        ).fetchall()
    assert sizes == [(PAGE_EVENTS,), (PAGE_EVENTS,), (len(appended) - 2 * PAGE_EVENTS,)]


def test_a_failed_import_or_copy_into_a_new_database_leaves_no_store_schema_behind(
    postgres_database: str, tmp_path: Any
) -> None:
    from tests.postgres_cluster import uri

    url = uri(dict(psycopg.conninfo.conninfo_to_dict(postgres_database)))
    source = tmp_path / "s.db"
    with agui_store.open(source) as s:
        s.append(run("t", "r1", *say("m1", "hello", "user")))
    archive = tmp_path / "a.jsonl"
    with agui_store.open(source) as s, archive.open("wb") as out:
        s.export_archive(out)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(archive.read_bytes()[:300])
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    for path in (tmp_path / "missing.jsonl", cut):
        failed = subprocess.run(
            [sys.executable, "-m", "agui_store", "--db", url, "import", str(path)],
            capture_output=True, text=True, env=env, check=False,
        )
        assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
        threads = subprocess.run(
            [sys.executable, "-m", "agui_store", "--db", url, "threads"],
            capture_output=True, text=True, env=env, check=False,
        )
        assert threads.returncode == 1 and "no store at" in threads.stderr, threads.stderr
    with pytest.raises(RunNotFoundError):
        agui_store.copy(source, url, thread_id="nosuch")
    with psycopg.connect(postgres_database) as conn:
        assert schema.installed_version(conn) == 0
    agui_store.copy(source, url)  # a copy that succeeds keeps the store it made
    with agui_store.open(url) as s:
        assert s.threads() == ["t"]
    from agui_store import backends

    backends.remove_new_store(url)  # as if a failed opening raced this store's first write
    with agui_store.open(url) as s:
        assert s.threads() == ["t"]  # a store holding anything is never dropped


def test_a_new_store_open_elsewhere_is_not_dropped_by_a_failed_first_writes_cleanup(
    postgres_database: str,
) -> None:
    from agui_store import backends
    from tests.postgres_cluster import uri

    url = uri(dict(psycopg.conninfo.conninfo_to_dict(postgres_database)))
    with agui_store.open(url) as s:  # a new store, open and holding nothing yet
        # Another process's import that opened the same new database at once, and failed.
        backends.remove_new_store(url)
        s.append(run("t", "r1"))
        assert [r.run_id for r in s.runs("t")] == ["r1"]
    with psycopg.connect(postgres_database) as conn:
        assert schema.installed_version(conn) == schema.SCHEMA_VERSION
