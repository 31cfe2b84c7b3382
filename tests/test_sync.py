"""Copying threads between stores (``agui_store.copy``, ``agui-store copy``): lossless, only
what the destination lacks, conflicts refused with nothing written.

Store locations come from ``locations(kind)``: SQLite files today; PostgreSQL databases once
``agui_store.backends.postgres.PostgresBackend`` exists (those parameters skip until then), so every
test here also runs file to database, back, and database to database.
"""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import Store, SyncConflictError, cli, testing
from agui_store.engine import clock
from agui_store.errors import ArgumentTypeError, NotAStoreError, RunNotFoundError
from tests.backends import checked, dump

try:
    from agui_store.backends.postgres import PostgresBackend  # type: ignore[attr-defined]  # noqa: F401

    HAS_POSTGRES = True
except ImportError:
    HAS_POSTGRES = False

_NO_PG = pytest.mark.skipif(
    not HAS_POSTGRES, reason="agui_store.backends.postgres.PostgresBackend does not exist yet"
)

#: (source backend, destination backend)
PAIRS = [
    pytest.param(("sqlite", "sqlite"), id="sqlite-to-sqlite"),
    pytest.param(("sqlite", "postgres"), id="sqlite-to-postgres", marks=_NO_PG),
    pytest.param(("postgres", "sqlite"), id="postgres-to-sqlite", marks=_NO_PG),
    pytest.param(("postgres", "postgres"), id="postgres-to-postgres", marks=_NO_PG),
]


@pytest.fixture(params=PAIRS)
def pair(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def locations(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """``locations(kind)``: a fresh, empty store location of a backend (``sqlite`` or
    ``postgres``)."""
    made: list[tuple[Any, str]] = []

    def make(kind: str) -> str:
        if kind == "sqlite":
            return str(tmp_path / f"store-{len(made)}-{os.urandom(3).hex()}.db")
        server = request.getfixturevalue("postgres_server")
        template = request.getfixturevalue("postgres_store_template")
        dsn = server.create_database(template=template)
        made.append((server, dsn))
        return str(dsn)

    yield make
    for server, dsn in made:
        server.drop_database(dsn)


@pytest.fixture
def src_dst(pair: tuple[str, str], locations: Callable[[str], str]) -> tuple[str, str]:
    return locations(pair[0]), locations(pair[1])


# --- building histories -------------------------------------------------------------------


def run_events(thread_id: str, run_id: str, text: str, *, echo: Any = None) -> list[dict[str, Any]]:
    started: dict[str, Any] = {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}
    if echo is not None:
        started["input"] = echo
    mid = f"{run_id}-m"
    return [
        started,
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
        {"type": "STATE_SNAPSHOT", "snapshot": {"last": run_id, "n": len(text)}},
        {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id},
    ]


def input_after(store: Store, thread_id: str, run_id: str | None, new_run: str) -> dict[str, Any]:
    """The request body a client sends after ``run_id``: its view plus a new user message
    (what the store stores normalized, by reference to that view)."""
    messages: list[dict[str, Any]] = []
    state: Any = {}
    if run_id is not None:
        view = store.checkout(run_id, thread_id=thread_id)
        messages, state = list(view.messages), view.state
    messages.append({"id": f"{new_run}-u", "role": "user", "content": f"and {new_run}?"})
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": new_run,
        "messages": messages,
        "tools": [],
        "context": [],
        "state": state,
        "forwardedProps": {},
    }
    if run_id is not None:
        body["parentRunId"] = run_id
    return body


def record_run(
    store: Store,
    thread_id: str,
    run_id: str,
    *,
    parent: str | None = None,
    with_input: bool = False,
    echo: bool = False,
    branch: str | None = None,
    scope: str | None = None,
    pieces: int = 1,
    between: Callable[[], Any] | None = None,
) -> None:
    """Record a run, in ``pieces`` batches (``between`` is called after the first: a copy
    while the run streams)."""
    body = input_after(store, thread_id, parent, run_id) if (with_input or echo) else None
    events = run_events(thread_id, run_id, f"answer {run_id}", echo=body if echo else None)
    cuts = [round(i * len(events) / pieces) for i in range(pieces + 1)]
    for n in range(pieces):
        piece = events[cuts[n] : cuts[n + 1]]
        if n == 0:
            store.append(
                piece,
                thread_id=thread_id,
                input=body if with_input else None,
                parent=parent,
                branch=branch,
                scope=scope,
            )
            if between is not None:
                between()
        else:
            store.append(piece, thread_id=thread_id, run_id=run_id, scope=scope)


def sample_history(store: Store) -> None:
    """Two threads, one owned: inputs and echoed inputs stored by reference, a branch off an
    older run, a run appended in three batches, two runs streaming at once, a synthetic run."""
    record_run(store, "t1", "r1", with_input=True)
    record_run(store, "t1", "r2", parent="r1", with_input=True, pieces=3)
    record_run(store, "t1", "r3", parent="r1", echo=True, branch="alt")
    # Two runs streaming at once, interleaved batches.
    a, b = run_events("t1", "r4", "four"), run_events("t1", "r5", "five")
    store.append(a[:2], thread_id="t1", parent="r2")
    store.append(b[:2], thread_id="t1", parent="r2")
    store.append(a[2:], thread_id="t1", run_id="r4")
    store.append(b[2:], thread_id="t1", run_id="r5")
    store.append([{"type": "RUN_ERROR", "message": "late"}], thread_id="t1")  # ends r5 again
    store.append([{"type": "RUN_ERROR", "message": "boom"}], thread_id="t3")  # synthetic
    record_run(store, "t2", "q1", scope="alice", with_input=True)
    record_run(store, "t2", "q2", scope="alice", parent="q1", echo=True)


# --- reading everything back --------------------------------------------------------------


def _run_dict(run: agui_store.Run) -> dict[str, Any]:
    """A run as a reader sees it, without what is local to one database (its sequence
    numbers): its content hash is the same in every store that holds it."""
    out = dataclasses.asdict(run)
    del out["last_seq"]
    return out


def everything(store: Store) -> dict[str, Any]:
    """Every public read of a store, JSON-comparable."""
    threads = store.threads()
    owners = {
        thread_id: next(
            (s for s in ("alice", "bob") if thread_id in store.threads(scope=s)), None
        )
        for thread_id in threads
    }
    out: dict[str, Any] = {
        "threads": threads,
        "scoped": {s: store.threads(scope=s) for s in ("alice", "bob")},
        "owners": owners,
    }
    for thread_id in threads:
        scope = owners[thread_id]
        runs = store.runs(thread_id, scope=scope)
        per_run = {}
        for run in runs:
            rid = run.run_id
            try:
                checkout = store.checkout(rid, thread_id=thread_id, scope=scope)
                view: Any = {
                    "run": _run_dict(checkout.run),
                    "messages": checkout.messages,
                    "state": checkout.state,
                    "interrupts": checkout.interrupts,
                    "warnings": checkout.warnings,
                }
            except agui_store.InvalidEventError as e:
                view = f"refused: {e}"
            per_run[rid] = {
                "events": store.events(rid, thread_id=thread_id, scope=scope),
                "input": store.input(rid, thread_id=thread_id, scope=scope),
                "log": [_run_dict(r) for r in store.log(rid, thread_id=thread_id, scope=scope)],
                "checkout": view,
            }
        out[thread_id] = {
            "runs": [_run_dict(r) for r in runs],
            "branches": [
                dataclasses.asdict(b) for b in store.branches(thread_id, scope=scope)
            ],
            "head": _run_dict(store.get_run("HEAD", thread_id=thread_id, scope=scope)),
            "per_run": per_run,
        }
    return out


def check_passes(store: Store) -> bool:
    """``check()`` on the destination: the hashes the copy computed there verify (where the
    backend has a check: see tests.backends.checked)."""
    return checked(store)


def assert_same(src: str | Store, dst: str | Store) -> None:
    with _store(src) as a, _store(dst) as b:
        assert everything(a) == everything(b)
        assert check_passes(b)


class _store:
    def __init__(self, where: str | Store) -> None:
        self.where = where
        self.opened: Store | None = None

    def __enter__(self) -> Store:
        if isinstance(self.where, Store):
            return self.where
        self.opened = agui_store.open(self.where)
        return self.opened

    def __exit__(self, *exc: object) -> None:
        if self.opened is not None:
            self.opened.close()


# --- the API ------------------------------------------------------------------------------


def test_a_copy_to_an_empty_store_reads_back_equal_in_every_public_read(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    result = agui_store.copy(src, dst)
    assert result.threads == 3 and result.threads_created == 3
    assert result.runs == 8 and result.runs_present == 0
    assert result.events == 6 * 7 + 2 and result.branches == 1
    assert_same(src, dst)


def test_copying_again_copies_nothing_and_changes_nothing(src_dst: tuple[str, str]) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    agui_store.copy(src, dst)
    with agui_store.open(dst) as store:
        before = everything(store)
        seq = store.runs("t1")[-1].last_seq
    again = agui_store.copy(src, dst)
    assert again == agui_store.CopyResult(runs_present=8)
    with agui_store.open(dst) as store:
        assert everything(store) == before
        assert store.runs("t1")[-1].last_seq == seq


def test_the_copy_keeps_inputs_stored_by_reference_and_derives_every_complete_run(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    agui_store.copy(src, dst)
    with agui_store.open(src) as a, agui_store.open(dst) as b:
        for store in (a, b):
            with testing.reading(store) as tx:
                pk = tx.thread("t1")[0]  # type: ignore[index]
                rows = {r[1]: (r[5], r[6]) for r in tx.replica_runs(pk)}
                assert rows["r2"][1] is not None  # the input by reference to r1's view
                assert not tx.underived_runs(None)
        # Lineage rule 3 works in the copy: an input repeating r4's view is placed below r4.
        body = input_after(b, "t1", "r4", "r6")
        del body["parentRunId"]
        b.append(run_events("t1", "r6", "six"), thread_id="t1", input=body)
        assert b.get_run("r6", thread_id="t1").parent_run_id == "r4"
        assert b.get_run("r6", thread_id="t1").lineage == "messages"


def test_thread_copies_that_thread_alone(src_dst: tuple[str, str]) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    result = agui_store.copy(src, dst, thread_id="t2")
    assert (result.threads, result.runs) == (1, 2)
    with agui_store.open(dst) as store:
        assert store.threads() == ["t2"]
        assert store.threads(scope="alice") == ["t2"]
    rest = agui_store.copy(src, dst)
    assert (rest.runs, rest.runs_present) == (6, 2)
    # Thread order differs (t2 was copied first); everything within each thread is equal.
    with agui_store.open(src) as a, agui_store.open(dst) as b:
        left, right = everything(a), everything(b)
        assert right["threads"] == ["t2", "t1", "t3"]
        for key in ("t1", "t2", "t3", "owners", "scoped"):
            assert left[key] == right[key]


@pytest.mark.pydantic_ai
def test_a_scope_copies_that_owners_threads_alone(src_dst: tuple[str, str]) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    import asyncio

    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    async def save() -> None:  # t2's own conversation, and one of another owner it names
        async with ConversationStore(src) as conversations:
            await conversations.save(Conversation(conversation_id="t2", messages=turn(1)),
                                     scope="alice")  # fmt: skip
            await conversations.save(Conversation(conversation_id="t1", messages=turn(2)))

    asyncio.run(save())
    with agui_store.open(src) as store:
        saved = {"type": "CUSTOM", "name": "pydantic_ai_conversation_saved",
                 "value": {"conversation_id": "t1", "entry_ids": []}}  # fmt: skip
        events = run_events("t2", "q3", "three")
        store.append([*events[:-1], saved, events[-1]], thread_id="t2", scope="alice")
    result = agui_store.copy(src, dst, scope="alice")
    assert (result.threads, result.runs, result.conversations) == (1, 3, 1)
    with agui_store.open(dst) as store:
        assert store.threads() == ["t2"] and store.threads(scope="alice") == ["t2"]
    assert conversations_of(dst, ["t1"])["t1"] is None
    with pytest.raises(RunNotFoundError, match="no thread 't1'"):
        agui_store.copy(src, dst, thread_id="t1", scope="alice")


def test_a_thread_the_source_lacks_is_a_clear_error(src_dst: tuple[str, str]) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    with pytest.raises(RunNotFoundError, match="no thread 'nope'"):
        agui_store.copy(src, dst, thread_id="nope")


def test_a_destination_holding_the_first_runs_gets_only_the_rest(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        record_run(store, "t1", "r1", with_input=True)
        record_run(store, "t1", "r2", with_input=True, parent="r1")
        # r3 streams: its first batch only.
        store.append(run_events("t1", "r3", "three")[:2], thread_id="t1", parent="r2")
    first = agui_store.copy(src, dst)
    assert (first.runs, first.events) == (3, 14)
    with agui_store.open(src) as store:
        store.append(run_events("t1", "r3", "three")[2:], thread_id="t1", run_id="r3")
        record_run(store, "t1", "r4", echo=True, parent="r3", branch="main2")
    second = agui_store.copy(src, dst)
    assert second.runs == 1 and second.runs_extended == 1 and second.runs_present == 2
    assert second.events == 4 + 6
    assert_same(src, dst)


def test_a_source_holding_the_first_part_of_a_run_the_destination_finished_copies_nothing_of_it(
    src_dst: tuple[str, str], tmp_path: Path
) -> None:
    """A copy made while the run streamed, or an archive exported then, is behind: nothing
    of the run is news to the destination, and the rest of the source still lands."""
    src, dst = src_dst
    with agui_store.open(dst) as store:
        record_run(store, "t1", "r1", with_input=True)
        store.append(run_events("t1", "r2", "two")[:2], thread_id="t1", parent="r1")
    agui_store.copy(dst, src)
    archive = tmp_path / "streaming.jsonl"
    with agui_store.open(dst) as store:
        store.export_archive(archive)
        store.append(run_events("t1", "r2", "two")[2:], thread_id="t1", run_id="r2")
    with agui_store.open(src) as store:
        record_run(store, "t2", "s1")
    result = agui_store.copy(src, dst)
    assert (result.runs, result.events, result.runs_present) == (1, 6, 2)
    with agui_store.open(dst) as store:
        summary = store.import_archive(archive)
        assert (summary.runs, summary.events) == (0, 0)
        assert store.runs("t1")[-1].status == "finished"
        assert len(store.runs("t2")) == 1 and store.check().ok


@pytest.mark.parametrize("kind", ["another application's database", "a text file"])
def test_a_copy_into_a_file_uri_naming_a_file_that_is_no_store_leaves_the_file(
    tmp_path: Path, kind: str
) -> None:
    src = tmp_path / "s.db"
    with agui_store.open(src) as store:
        record_run(store, "t1", "r1")
    other = tmp_path / "other"
    if kind == "a text file":
        other.write_text("precious\n")
    else:
        with apsw.Connection(str(other)) as conn:
            conn.execute("CREATE TABLE customers(x)")
    before = other.read_bytes()
    with pytest.raises(agui_store.AguiStoreError):
        agui_store.copy(src, f"file:{other}")
    assert other.read_bytes() == before


def test_a_run_held_on_both_sides_with_different_content_is_refused_and_nothing_written(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    with agui_store.open(dst) as store:
        record_run(store, "t3", "x1")  # something of its own, unrelated
    agui_store.copy(src, dst, thread_id="t2")
    with agui_store.open(src) as store:
        record_run(store, "t1", "r9", parent="r5")
    with agui_store.open(dst) as store:
        # The destination's own run r1 in t1: same id, other events.
        store.append(run_events("t1", "r1", "not the same"), thread_id="t1")
        before = everything(store)
    rows = dump(dst)
    with pytest.raises(SyncConflictError) as caught:
        agui_store.copy(src, dst)
    error = caught.value
    assert (error.thread_id, error.run_id) == ("t1", "r1")
    assert "run 'r1' of thread 't1'" in str(error) and "nothing was written" in str(error)
    assert dump(dst) == rows
    with agui_store.open(dst) as store:
        assert everything(store) == before


def test_a_conflict_in_the_last_thread_leaves_the_earlier_threads_uncopied(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    with agui_store.open(src) as a, agui_store.open(dst) as b:
        record_run(a, "t1", "r1")
        record_run(a, "t1", "r2", with_input=True, parent="r1")
        record_run(a, "t2", "q1")
        b.append(run_events("t2", "q1", "another answer"), thread_id="t2")
        before = everything(b)
    rows = dump(dst)
    with pytest.raises(SyncConflictError, match="run 'q1' of thread 't2'"):
        agui_store.copy(src, dst)
    assert dump(dst) == rows
    with agui_store.open(dst) as b:
        assert everything(b) == before and b.threads() == ["t2"]


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ("payload", "its event 2 \\(TEXT_MESSAGE_CONTENT\\) differs in its payload"),
        ("batches", "its batch 0 holds 6 events in the source but 3 in the destination, "
         "and records the outcome 'finished' in the source but None"),
        ("record", r"its created_at is .20\d\d-\d\d-\d\dT[\d:]{8}\.\d{3}\+00:00. in the source"),
        ("owner", "its owner \\(scope\\) is None in the source but 'bob'"),
    ],
)
def test_each_kind_of_difference_is_named(
    src_dst: tuple[str, str], change: str, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = src_dst
    # Both stores record at the same instant, so that only the difference made here differs.
    if change != "record":
        monkeypatch.setattr(clock, "now_ms", lambda: 1_700_000_000_000)
    with agui_store.open(src) as a, agui_store.open(dst) as b:
        a.append(run_events("t1", "r1", "same"), thread_id="t1")
        events = run_events("t1", "r1", "SAME" if change == "payload" else "same")
        scope = "bob" if change == "owner" else None
        if change == "batches":
            b.append(events[:3], thread_id="t1")
            b.append(events[3:], thread_id="t1", run_id="r1")
        else:
            if change == "record":
                time.sleep(0.002)
            b.append(events, thread_id="t1", scope=scope)
        before = everything(b)
    rows = dump(dst)
    with pytest.raises(SyncConflictError, match=what):
        agui_store.copy(src, dst)
    assert dump(dst) == rows
    with agui_store.open(dst) as b:
        assert everything(b) == before


def test_a_live_run_both_stores_continued_is_refused_naming_the_appends_times_as_times(
    src_dst: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = src_dst
    events = run_events("t1", "r1", "same")
    monkeypatch.setattr(clock, "now_ms", lambda: 1_700_000_000_000)
    with agui_store.open(src) as a:
        a.append(events[:2], thread_id="t1")
    agui_store.copy(src, dst)
    for location, at in ((src, 1_700_000_000_123), (dst, 1_700_000_000_456)):
        monkeypatch.setattr(clock, "now_ms", lambda at=at: at)
        with agui_store.open(location) as store:
            store.append(events[2:3], thread_id="t1", run_id="r1")
    rows = dump(dst)
    with pytest.raises(SyncConflictError) as refused:
        agui_store.copy(src, dst)
    assert refused.value.run_id == "r1"
    assert "its batch 1 was appended at 2023-11-14T22:13:20.123+00:00 in the source but at " \
        "2023-11-14T22:13:20.456+00:00 in the destination" in str(refused.value)
    assert "1700000000" not in str(refused.value)
    assert dump(dst) == rows


def test_a_branch_behind_in_the_destination_moves_forward_and_a_diverged_one_is_refused(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        record_run(store, "t1", "r1")
        record_run(store, "t1", "r2", branch="feature")
    agui_store.copy(src, dst)
    with agui_store.open(src) as store:
        record_run(store, "t1", "r3", parent="r2")  # advances feature
    result = agui_store.copy(src, dst)
    assert result.branches == 1
    assert_same(src, dst)
    # The destination moves feature back to r1; the source moves it to a new run r4 off
    # r3: the destination's tip (r1) is an ancestor of r4, a fast-forward.
    with agui_store.open(dst) as store:
        store.branch("feature", "r1", thread_id="t1")
    with agui_store.open(src) as store:
        record_run(store, "t1", "r4", parent="r3")
    agui_store.copy(src, dst)
    with agui_store.open(dst) as store:
        assert store.get_run("feature", thread_id="t1").run_id == "r4"
    # Diverged: the destination points it at a run the source's tip does not descend from.
    with agui_store.open(dst) as store:
        record_run(store, "t1", "d1", parent="r1")
        store.branch("feature", "d1", thread_id="t1")
        before = everything(store)
    with agui_store.open(src) as store:
        record_run(store, "t1", "r5", parent="r4")
    rows = dump(dst)
    with pytest.raises(SyncConflictError, match="not a fast-forward") as caught:
        agui_store.copy(src, dst)
    assert dump(dst) == rows
    assert caught.value.branch == "feature"
    with agui_store.open(dst) as store:
        assert everything(store) == before
    forced = agui_store.copy(src, dst, force=True)
    assert (forced.runs, forced.branches) == (1, 1)
    with agui_store.open(dst) as store:
        assert store.get_run("feature", thread_id="t1").run_id == "r5"
        assert store.get_run("d1", thread_id="t1").parent_run_id == "r1"  # its own run stays


def test_a_branch_set_again_at_the_same_run_takes_the_later_time(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        record_run(store, "t1", "r1")
        record_run(store, "t1", "r2")
        store.branch("pin", "r1", thread_id="t1")
    agui_store.copy(src, dst)
    with agui_store.open(src) as store:
        store.branch("pin", "r2", thread_id="t1")
        time.sleep(0.002)
        store.branch("pin", "r1", thread_id="t1")  # moved away and back
    assert agui_store.copy(src, dst).branches == 1
    assert_same(src, dst)


def test_open_stores_are_used_as_they_are_and_stay_open(src_dst: tuple[str, str]) -> None:
    src, dst = src_dst
    with agui_store.open(src) as a, agui_store.open(dst) as b:
        sample_history(a)
        b.threads()  # the destination remembers nothing stale after the copy
        agui_store.copy(a, b)
        assert everything(a) == everything(b)
        record_run(b, "t1", "r7", parent="r5")  # the destination appends on from the copy
        assert b.get_run("r7", thread_id="t1").parent_run_id == "r5"


def test_a_missing_source_is_refused_and_no_file_is_made(tmp_path: Path) -> None:
    with pytest.raises(NotAStoreError, match="to copy from: the file does not exist"):
        agui_store.copy(tmp_path / "nope.db", tmp_path / "dst.db")
    assert not (tmp_path / "nope.db").exists()
    # An empty file, or a symbolic link to nothing, holds no store either: left as it is.
    (tmp_path / "empty.db").touch()
    (tmp_path / "link.db").symlink_to(tmp_path / "nowhere.db")
    for source, reason in [("empty.db", "the file is empty"), ("link.db", "a symbolic link to")]:
        with pytest.raises(NotAStoreError, match=f"to copy from: .*{reason}"):
            agui_store.copy(tmp_path / source, tmp_path / "dst.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "link.db"]
    assert (tmp_path / "empty.db").stat().st_size == 0


def test_a_progress_that_is_no_callable_is_refused_before_anything_is_copied(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "a.db") as store:
        record_run(store, "t1", "r1")
    with pytest.raises(ArgumentTypeError, match="progress= must be None or a callable, not an int"):
        agui_store.copy(tmp_path / "a.db", tmp_path / "b.db", progress=5)  # type: ignore[arg-type]
    assert not (tmp_path / "b.db").exists()


def test_a_store_is_not_copied_onto_itself(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with agui_store.open(path) as store:
        record_run(store, "t1", "r1")
    with pytest.raises(agui_store.InvalidArgumentError, match="same store"):
        agui_store.copy(path, str(path))


def _with_an_old_thread(
    path: Path, monkeypatch: pytest.MonkeyPatch, thread_id: str, run_id: str
) -> None:
    """A file as releases before this one wrote it: they accepted ids this one refuses on
    intake (a NUL, more than 2,048 bytes), so the refusal is lifted while it is written."""
    from agui_store.engine import arguments

    monkeypatch.setattr(arguments, "unstorable", lambda value: None)
    with agui_store.open(path) as store:
        store.append(run_events(thread_id, run_id, "held by an old release"))
        record_run(store, "ok", "r1")
    monkeypatch.undo()


def _with_a_nul_thread(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_an_old_thread(path, monkeypatch, "t\x00x", "r\x001")


@pytest.mark.parametrize("dst_kind", ["sqlite", pytest.param("postgres", marks=_NO_PG)])
def test_a_thread_with_a_nul_in_its_id_is_refused_by_name_and_the_others_copy(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    locations: Callable[[str], str],
    dst_kind: str,
) -> None:
    src = tmp_path / "old.db"
    _with_a_nul_thread(src, monkeypatch)
    dst = locations(dst_kind)
    with pytest.raises(agui_store.InvalidEventError) as refused:
        agui_store.copy(src, dst)
    assert "thread 't\\x00x' of the source cannot be copied: its id holds a NUL" in str(
        refused.value
    )
    assert "delete_thread('t\\x00x')" in str(refused.value)
    with agui_store.open(dst) as store:
        assert store.threads() == []  # nothing written
    agui_store.copy(src, dst, thread_id="ok")
    with agui_store.open(src) as store:
        store.delete_thread("t\x00x")
    agui_store.copy(src, dst)
    assert_same(src, dst)


@pytest.mark.parametrize("dst_kind", ["sqlite", pytest.param("postgres", marks=_NO_PG)])
def test_a_thread_whose_id_is_too_long_to_index_is_refused_by_name_and_check_warns_of_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    locations: Callable[[str], str],
    dst_kind: str,
) -> None:
    """Releases before this one took ids of any length; PostgreSQL's indexes hold about
    2,700 bytes of one, so a copy refuses such a thread by name, as it refuses a NUL."""
    src = tmp_path / "old.db"
    _with_an_old_thread(src, monkeypatch, "t" * 3000, "r1")
    with pytest.raises(agui_store.InvalidEventError) as refused:
        agui_store.copy(src, locations(dst_kind))
    assert f"thread '{'t' * 20}" in str(refused.value)
    assert "3,000 bytes long" in str(refused.value) and "delete_thread(" in str(refused.value)
    with agui_store.open(src) as store:
        assert any("3,000 bytes long" in w.detail for w in store.check().warnings)


def _with_a_nul_branch(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with agui_store.open(path) as store:
        record_run(store, "t1", "r1", branch="keep")
    with apsw.Connection(str(path)) as conn:  # a branch no verb names, set by hand
        conn.execute("UPDATE branches SET name = ?", ("ke\x00ep",))


def _with_a_nul_sent_parent(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agui_store.engine import arguments

    monkeypatch.setattr(arguments, "unstorable", lambda value: None)  # an older release
    with agui_store.open(path) as store:
        events = run_events("t1", "r1", "held by an old release")
        events[0]["parentRunId"] = "p\x00r"
        store.append(events)
    monkeypatch.undo()


@pytest.mark.parametrize(
    ("write", "field"),
    [
        (_with_a_nul_branch, "its branch 'ke\\x00ep''s name holds a NUL"),
        (_with_a_nul_sent_parent, "its run 'r1''s sent parentRunId holds a NUL"),
    ],
    ids=["branch name", "sent parentRunId"],
)
@pytest.mark.parametrize("dst_kind", ["sqlite", pytest.param("postgres", marks=_NO_PG)])
def test_a_thread_holding_a_nul_postgresql_cannot_hold_is_refused_by_name_and_nothing_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    locations: Callable[[str], str],
    dst_kind: str,
    write: Callable[[Path, pytest.MonkeyPatch], None],
    field: str,
) -> None:
    src = tmp_path / "old.db"
    write(src, monkeypatch)
    dst = locations(dst_kind)
    with agui_store.open(dst) as store:
        record_run(store, "other", "r1")
    before = dump(dst)
    with pytest.raises(agui_store.InvalidEventError) as refused:
        agui_store.copy(src, dst)
    said = str(refused.value)
    assert said.startswith(f"thread 't1' of the source cannot be copied: {field} character")
    assert "delete_thread('t1')" in said
    assert dump(dst) == before


def test_check_warns_of_ids_no_copy_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "old.db"
    _with_a_nul_thread(src, monkeypatch)
    with agui_store.open(src) as store:
        report = store.check()
    assert report.ok
    assert [w.detail for w in report.warnings] == [
        "thread 't\\x00x': its id holds a NUL character (\\u0000), which PostgreSQL's text "
        "cannot hold; no copy carries the thread (erase it with delete_thread('t\\x00x'))",
        "run 'r\\x001' (thread 't\\x00x', #1): its id holds a NUL character (\\u0000), which "
        "PostgreSQL's text cannot hold; no copy carries its thread",
    ]


def test_progress_is_reported_up_to_the_events_copied(src_dst: tuple[str, str]) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    seen: list[tuple[int, int]] = []
    result = agui_store.copy(src, dst, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (result.events, result.events)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


# --- generated histories --------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Steps on two threads: runs below any earlier run (by parentRunId, input, echo or the
    head), on branches, in pieces, streaming two at once; a copy point between steps."""
    steps: list[tuple[Any, ...]] = []
    made: dict[str, list[str]] = {"t1": [], "t2": []}
    errored: set[str] = set()  # threads whose newest run ended in RUN_ERROR
    for n in range(draw(st.integers(1, 7))):
        thread = draw(st.sampled_from(["t1", "t2"]))
        run_id = f"{thread}-r{n}"
        kind = draw(st.sampled_from(["run", "run", "interleaved", "error", "copy"]))
        if kind == "error" and thread in errored:
            kind = "copy"
        parent = draw(st.sampled_from([None, *made[thread]])) if made[thread] else None
        if kind == "run":
            steps.append(
                (
                    "run",
                    thread,
                    run_id,
                    parent,
                    draw(st.booleans()),  # with input
                    draw(st.booleans()),  # echo
                    draw(st.sampled_from([None, "b1", "b2"])),
                    draw(st.integers(1, 3)),  # pieces
                    draw(st.booleans()),  # a copy after the first piece
                )
            )
            made[thread].append(run_id)
            errored.discard(thread)
        elif kind == "interleaved":
            steps.append(("interleaved", thread, run_id, parent))
            made[thread] += [run_id + "a", run_id + "b"]
            errored.discard(thread)
        elif kind == "error":
            steps.append(("error", thread))
            errored.add(thread)
        else:
            steps.append(("copy",))
    return steps


def play(store: Store, steps: list[tuple[Any, ...]], copy: Callable[[], None]) -> None:
    owner = {"t1": None, "t2": "alice"}
    for step in steps:
        if step[0] == "run":
            _, thread, run_id, parent, with_input, echo, branch, pieces, midway = step
            record_run(
                store,
                thread,
                run_id,
                parent=parent,
                with_input=with_input,
                echo=echo,
                branch=branch,
                scope=owner[thread],
                pieces=pieces,
                between=copy if midway else None,
            )
        elif step[0] == "interleaved":
            _, thread, run_id, parent = step
            a = run_events(thread, run_id + "a", "a")
            b = run_events(thread, run_id + "b", "b")
            store.append(a[:3], thread_id=thread, parent=parent, scope=owner[thread])
            store.append(b[:2], thread_id=thread, parent=parent, scope=owner[thread])
            copy()  # two runs open
            store.append(b[2:], thread_id=thread, run_id=run_id + "b", scope=owner[thread])
            store.append(a[3:], thread_id=thread, run_id=run_id + "a", scope=owner[thread])
        elif step[0] == "error":
            store.append(
                [{"type": "RUN_ERROR", "message": "failed"}],
                thread_id=step[1],
                scope=owner[step[1]],
            )
        else:
            copy()


def copy_forcing_rewritten_branches(src: Store, dst: str) -> None:
    """Copy; a branch the source moved off its earlier tip (``append(branch=, parent=)``
    resets it) is refused with nothing written, then copied with ``force=True``."""
    rows = dump(dst) if os.path.exists(dst) or "://" in dst else None
    try:
        agui_store.copy(src, dst)
    except SyncConflictError as e:
        assert e.branch is not None and "not a fast-forward" in str(e), e
        assert dump(dst) == rows
        agui_store.copy(src, dst, force=True)


def copied_at_any_points(
    pair: tuple[str, str], locations: Callable[[str], str], steps: list[tuple[Any, ...]]
) -> None:
    src, dst = locations(pair[0]), locations(pair[1])
    with agui_store.open(src) as a:
        play(a, steps, lambda: copy_forcing_rewritten_branches(a, dst))
        if not a.threads():
            return
        copy_forcing_rewritten_branches(a, dst)
        with agui_store.open(dst) as b:
            assert everything(a) == everything(b)
            assert check_passes(b)
        again = agui_store.copy(a, dst)
        assert (again.runs, again.events, again.branches, again.runs_extended) == (0, 0, 0, 0)


_GENERATED = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("pair", [PAIRS[0]], indirect=True)
@settings(_GENERATED, max_examples=40)
@given(steps=histories())
def test_any_history_copied_at_any_points_reads_back_equal_and_copying_again_is_a_no_op(
    pair: tuple[str, str], locations: Callable[[str], str], steps: list[tuple[Any, ...]]
) -> None:
    copied_at_any_points(pair, locations, steps)


@pytest.mark.parametrize("pair", [PAIRS[1], PAIRS[2]], indirect=True)
@settings(_GENERATED, max_examples=12)
@given(steps=histories())
def test_any_history_copied_between_backends_reads_back_equal(
    pair: tuple[str, str], locations: Callable[[str], str], steps: list[tuple[Any, ...]]
) -> None:
    copied_at_any_points(pair, locations, steps)


# --- the command line -----------------------------------------------------------------------


def run_cli(*argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    err = io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        code = cli.main(list(argv), out=out)
    finally:
        sys.stderr = old
    return code, out.getvalue(), err.getvalue()


def test_the_command_counts_one_of_a_kind_in_the_singular(src_dst: tuple[str, str]) -> None:
    src, dst = src_dst
    events = run_events("t1", "r1", "one")
    with agui_store.open(src) as store:
        store.append(events)
        store.branch("only", "r1", thread_id="t1")
    code, out, err = run_cli("copy", src, dst)
    assert (code, err) == (0, "")
    assert out == (
        f"copied 1 thread, 1 run, {len(events)} events, 1 branch, 0 conversations "
        "(0 runs already present)\n"
    )


def test_the_command_copies_reports_counts_and_a_second_run_copies_nothing(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    code, out, err = run_cli("copy", src, dst)
    assert (code, err) == (0, "")
    assert "copied 3 threads, 8 runs, 44 events" in out
    code, out, _ = run_cli("copy", src, dst, "--json")
    assert code == 0
    import json

    assert json.loads(out)["runs"] == 0 and json.loads(out)["runsPresent"] == 8
    assert_same(src, dst)


def test_the_command_copies_one_thread(src_dst: tuple[str, str]) -> None:
    src, dst = src_dst
    with agui_store.open(src) as store:
        sample_history(store)
    code, out, _ = run_cli("copy", src, dst, "--thread", "t2")
    assert code == 0 and "2 runs" in out
    with agui_store.open(dst) as store:
        assert store.threads() == ["t2"]


def test_the_command_refuses_a_conflict_in_one_line_with_exit_1(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    with agui_store.open(src) as a, agui_store.open(dst) as b:
        a.append(run_events("t1", "r1", "one"), thread_id="t1")
        b.append(run_events("t1", "r1", "other"), thread_id="t1")
    code, out, err = run_cli("copy", src, dst)
    assert code == 1 and out == ""
    assert err.startswith("agui-store copy: run 'r1' of thread 't1' differs")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_command_refuses_a_missing_source_and_creates_no_file(tmp_path: Path) -> None:
    code, _, err = run_cli("copy", str(tmp_path / "none.db"), str(tmp_path / "b.db"))
    assert code == 1 and "no store at" in err and err.count("\n") == 1
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "b.db").exists()


def test_the_command_needs_both_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["copy", str(tmp_path / "a.db")]) == cli.EXIT_USAGE
    assert "required: DST" in capsys.readouterr().err


def test_the_command_draws_progress_only_on_a_terminal(tmp_path: Path) -> None:
    src = str(tmp_path / "a.db")
    with agui_store.open(src) as store:
        sample_history(store)
    # Not a terminal (a pipe): no bar.
    piped = subprocess.run(
        [sys.executable, "-m", "agui_store", "copy", src, str(tmp_path / "b.db")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        check=False,
    )
    assert piped.returncode == 0 and piped.stderr == ""
    # A terminal: the bar is drawn on stderr, and ends with a newline.
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_store", "copy", src, str(tmp_path / "c.db")],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    assert proc.wait() == 0
    os.close(leader)
    assert b"copying [" in drawn and b"44/44" in drawn


# --- conversations ------------------------------------------------------------------------


def conversations_of(location: str, ids: list[str]) -> dict[str, Any]:
    """Each conversation's record and entries as pydantic-ai reads them (``None``: absent)."""
    import asyncio

    from agui_store.integrations.pydantic_ai import ConversationStore

    async def read() -> dict[str, Any]:
        async with ConversationStore(location) as conversations:
            out: dict[str, Any] = {}
            for cid in ids:
                record = await conversations.read_record(cid)
                out[cid] = None if record is None else (
                    record, await conversations.load_entries(cid)
                )
            return out

    return asyncio.run(read())


@pytest.mark.pydantic_ai
def test_a_copy_carries_the_conversations_linked_to_its_threads_and_again_adds_nothing(
    src_dst: tuple[str, str],
) -> None:
    import asyncio

    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    src, dst = src_dst
    saved = {"type": "CUSTOM", "name": "pydantic_ai_conversation_saved",
             "value": {"conversation_id": "side", "entry_ids": []}}  # fmt: skip
    with agui_store.open(src) as store:
        record_run(store, "t1", "r1")
        events = run_events("t1", "r2", "two")
        store.append([*events[:-1], saved, events[-1]], thread_id="t1")
        record_run(store, "t9", "z1")

    async def save(location: str, cid: str, *turns: int, branch_at: int | None = None) -> None:
        async with ConversationStore(location) as conversations:
            found = await conversations.load(cid)
            messages = [m for n in turns for m in turn(n)]
            if found is None:
                await conversations.save(Conversation(conversation_id=cid, messages=messages))
                return
            if branch_at is not None:
                found = await conversations.branch(
                    cid, at=branch_at, expected_revision=found.revision
                )
            found.messages.extend(messages)
            await conversations.save(found)

    asyncio.run(save(src, "t1", 1, 2))
    asyncio.run(save(src, "t1", 3, branch_at=2))  # a branch left behind
    asyncio.run(save(src, "side", 5))
    asyncio.run(save(src, "t9", 6))
    asyncio.run(save(src, "unlinked", 7))
    ids = ["t1", "side", "t9", "unlinked"]

    result = agui_store.copy(src, dst, thread_id="t1")
    assert result.conversations == 2
    found, expected = conversations_of(dst, ids), conversations_of(src, ids)
    assert found["t1"] == expected["t1"] and found["side"] == expected["side"]
    assert found["t9"] is None and found["unlinked"] is None
    assert agui_store.copy(src, dst, thread_id="t1").conversations == 0
    assert conversations_of(dst, ids) == found
    # A conversation saved on since moves forward in the destination.
    asyncio.run(save(src, "t1", 8))
    # A whole store's copy: t1 moved on, t9 new, and the conversation no thread links to.
    assert agui_store.copy(src, dst).conversations == 3
    assert conversations_of(dst, ids) == conversations_of(src, ids)
    with agui_store.open(dst) as store:
        assert check_passes(store)
    # Both moved on: refused with nothing written, unless forced.
    asyncio.run(save(src, "t1", 9))
    asyncio.run(save(dst, "t1", 10))
    before = dump(dst)
    with pytest.raises(SyncConflictError, match="conversation 't1'"):
        agui_store.copy(src, dst)
    assert dump(dst) == before
    assert agui_store.copy(src, dst, force=True).conversations == 1
    assert conversations_of(dst, ["t1"])["t1"][0] == conversations_of(src, ["t1"])["t1"][0]
    with agui_store.open(dst) as store:
        assert check_passes(store)
    # A conflict of the conversation no thread links to names the conversation alone.
    asyncio.run(save(src, "unlinked", 11))
    asyncio.run(save(dst, "unlinked", 12))
    with pytest.raises(SyncConflictError) as caught:
        agui_store.copy(src, dst)
    assert str(caught.value).startswith("conversation 'unlinked' differs between the source")
    assert "thread" not in str(caught.value)
    assert (caught.value.conversation_id, caught.value.thread_id) == ("unlinked", None)


@pytest.mark.pydantic_ai
def test_conversations_forked_from_one_another_copy_with_their_shared_entries_once(
    src_dst: tuple[str, str],
) -> None:
    import asyncio

    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    src, dst = src_dst

    async def save_and_fork() -> None:
        async with ConversationStore(src) as conversations:
            messages = [*turn(1), *turn(2)]
            await conversations.save(Conversation(conversation_id="c1", messages=messages))
            await conversations.fork("c1", new_conversation_id="c1-fork")
            forked = await conversations.load("c1-fork")
            assert forked is not None
            forked.messages.extend(turn(3))
            await conversations.save(forked)

    asyncio.run(save_and_fork())
    ids = ["c1", "c1-fork"]
    assert agui_store.copy(src, dst).conversations == 2
    assert conversations_of(dst, ids) == conversations_of(src, ids)
    assert agui_store.copy(src, dst).conversations == 0
    with agui_store.open(dst) as store:
        assert check_passes(store)


def test_a_run_both_stores_hold_apart_is_refused_with_advice_that_works(
    src_dst: tuple[str, str],
) -> None:
    """Runs are never replaced: the refusal says how to keep the source's thread, and doing
    what it says brings the source's run over."""
    src, dst = src_dst
    with agui_store.open(src) as a, agui_store.open(dst) as b:
        a.append(run_events("t1", "r1", "the source's"), thread_id="t1")
        b.append(run_events("t1", "r1", "the destination's"), thread_id="t1")
    with pytest.raises(SyncConflictError) as refused:
        agui_store.copy(src, dst)
    assert "to keep the source's thread, erase it in the destination" in str(refused.value)
    with agui_store.open(dst) as b:
        b.delete_thread("t1")
    agui_store.copy(src, dst, restore_erased=True)
    with agui_store.open(src) as a, agui_store.open(dst) as b:
        assert b.checkout("r1", thread_id="t1").messages == a.checkout(
            "r1", thread_id="t1"
        ).messages
