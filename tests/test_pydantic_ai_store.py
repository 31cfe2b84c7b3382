"""The store's ConversationStore where a backend's own features show: a save beside a
PostgreSQL append in flight, migrations of older files and schemas, SQLite's query plans; and
the optional extra. The behaviour every backend shares is in
tests/contract/test_conversations.py."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

import agui_store
from agui_store import testing
from agui_store.errors import ArgumentTypeError, InvalidArgumentError
from tests.schema_history import as_version_11
from tests.workers.harness import ROOT, worker_env
from tests.zones import NoOffset

# pydantic-ai needs Python 3.11: without it the tests marked pydantic_ai skip
# (tests/conftest.py).
with contextlib.suppress(ImportError):
    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import every_part_kind, round_trip, scripted_agent, turn

_T = TypeVar("_T")


def run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coroutine)


# --- atomic writes ------------------------------------------------------------------------------


@pytest.mark.pydantic_ai
def test_on_postgresql_a_save_runs_beside_an_ag_ui_append_in_flight(
    postgres_store_database: str,
) -> None:
    """Conversation writes take turns among themselves, not with the AG-UI log's appends."""
    import threading

    location = postgres_store_database
    saved = threading.Event()

    def save_now() -> None:
        async def save() -> None:
            async with ConversationStore(location) as store:
                await store.save(Conversation(conversation_id="c", messages=turn(1)))

        run(save())
        saved.set()

    def while_appending(thread_id: str | None) -> None:
        if thread_id == "t":  # the append holds its locks until it commits
            threading.Thread(target=save_now, daemon=True).start()
            assert saved.wait(timeout=30), "the save waited for the append to commit"

    with agui_store.open(location) as store, testing.on_write_locked(store, while_appending):
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}])
    assert saved.is_set()
    with agui_store.open(location) as store:
        assert store.check().ok

# --- between backends -------------------------------------------------------------------------


@pytest.mark.pydantic_ai
def test_a_copy_from_sqlite_to_postgresql_and_back_gives_back_what_pydantic_ai_round_trips(
    tmp_path: Any, postgres_store_database: str
) -> None:
    """A real agent's turns and every part kind, with half an emoji, a NUL and a branch
    left: the same conversations, entries and revisions on either backend."""
    from pydantic_ai.messages import ModelResponse, TextPart

    source, back = str(tmp_path / "source.db"), str(tmp_path / "back.db")
    hello = "\U0001d407\U0001d41e\U0001d425\U0001d425\U0001d428"  # styled letters
    odd = [ModelResponse(parts=[TextPart(f"half \ud83d, a NUL \x00, {hello}, שָׁלוֹם")])]

    async def fill() -> list[Any]:
        async with ConversationStore(source) as store:
            result = await scripted_agent().run("look", conversation=Conversation(
                conversation_id="agent"))
            await store.save(result, scope="alice")
            await store.save(Conversation(conversation_id="parts",
                                          messages=[*every_part_kind(), *odd]))
            loaded = await store.load("parts")
            branched = await store.branch("parts", at=2, expected_revision=loaded.revision)
            branched.messages.extend(turn(1))
            await store.save(branched)
            return result.all_messages()

    async def held(location: str) -> dict[str, Any]:
        async with ConversationStore(location) as store:
            out = {}
            for record in await store.list_conversations():
                out[record.conversation_id] = (
                    record, await store.load_entries(record.conversation_id),
                    [await store.read_history(tip) for tip in record.branches],
                )
            return out

    ran = run(fill())
    before = run(held(source))
    assert [e.message for e in before["agent"][1]] == round_trip(ran)
    assert [e.message for e in before["parts"][2][0]] == round_trip([*every_part_kind(), *odd])
    assert agui_store.copy(source, postgres_store_database).conversations == 2
    assert run(held(postgres_store_database)) == before
    assert agui_store.copy(postgres_store_database, back).conversations == 2
    assert run(held(back)) == before
    for location in (postgres_store_database, back):
        with agui_store.open(location) as store:
            assert store.check().ok


# --- schema and packaging -------------------------------------------------------------------------


@pytest.mark.pydantic_ai
def test_a_version_11_file_gains_the_conversation_tables_when_opened(tmp_path: Any) -> None:
    import apsw

    from agui_store.backends.sqlite import schema

    path = str(tmp_path / "old.db")
    with agui_store.open(path) as store:
        store.append(
            [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
             {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}]
        )
    conn = apsw.Connection(path)
    with conn:
        as_version_11(conn)
        conn.execute("PRAGMA user_version = 11")
    conn.close()

    async def scenario() -> None:
        async with ConversationStore(path) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            assert (await store.load("c")).messages == turn(1)
            report = store.store.check()
            assert report.ok, [str(p) for p in report.problems]
            assert store.store.runs("t")[0].run_id == "r"

    run(scenario())
    conn = apsw.Connection(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    conn.close()


@pytest.mark.pydantic_ai
def test_a_postgresql_store_at_version_3_gains_the_conversation_tables_when_opened(
    postgres_database: str,
) -> None:
    import psycopg

    from agui_store.backends.postgres import schema as pg_schema

    with psycopg.connect(
        postgres_database, autocommit=True, options=f"-c search_path={pg_schema.SCHEMA}"
    ) as conn:
        conn.execute(f"CREATE SCHEMA {pg_schema.SCHEMA}")
        for step in (1, 2, 3):
            conn.execute(pg_schema.MIGRATIONS[step])
        conn.execute(
            pg_schema.WRITE_VERSION, {"application": pg_schema.APPLICATION, "version": "3"}
        )

    async def scenario() -> None:
        async with ConversationStore(postgres_database) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            assert (await store.load("c")).messages == turn(1)
            report = store.store.check()
            assert report.ok, [str(p) for p in report.problems]

    run(scenario())
    with psycopg.connect(postgres_database) as conn:
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION


def test_agui_store_imports_and_checks_without_pydantic_ai_and_the_integration_says_what_to_install(
    tmp_path: Any,
) -> None:
    script = f"""
import sys
sys.modules["pydantic_ai"] = None  # as if it were not installed
import agui_store
with agui_store.open({str(tmp_path / "s.db")!r}) as store:
    assert store.check().ok
try:
    import agui_store.integrations.pydantic_ai
except ImportError as e:
    print(e)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=worker_env(), capture_output=True,
        text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'agui-store[pydantic-ai]'" in done.stdout
    # Where pydantic-ai cannot be installed at all, the message says why.
    assert ("pydantic-ai needs Python 3.11" in done.stdout) is (sys.version_info < (3, 11))


@pytest.mark.pydantic_ai
def test_a_cancelled_save_lands_whole_once_its_write_waits_and_not_at_all_before_it(
    tmp_path: Any,
) -> None:
    """A save is one transaction on the store's worker thread: cancelling its task cannot
    stop that thread, so a write already begun commits whole; a save cancelled once it has
    started, while it waits its turn on the worker, writes nothing. Either way, never a part
    of one."""
    import inspect

    import apsw

    path = tmp_path / "c.db"

    async def scenario() -> None:
        # The other writer is released by the test, not by a timeout running out.
        async with ConversationStore(str(path), busy_timeout_ms=600_000) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            other = apsw.Connection(str(path))
            other.execute("BEGIN IMMEDIATE")  # another process's write in flight
            try:
                saving = asyncio.create_task(
                    store.save(Conversation(conversation_id="d", messages=turn(2)))
                )
                await _until_running("_in_write")  # the save waits for the write lock
                early = asyncio.create_task(
                    store.save(Conversation(conversation_id="early", messages=turn(1)))
                )
                # One turn of the loop runs the new task up to its first await: its read,
                # queued on the worker behind the waiting write.
                await asyncio.sleep(0)
                assert inspect.getcoroutinestate(early.get_coro()) == inspect.CORO_SUSPENDED
                assert not early.done()
                early.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await early
                saving.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await saving
            finally:
                # Released even when a check fails, so that closing the store does not wait
                # behind the held lock.
                other.execute("ROLLBACK")
                other.close()
            # The worker runs one call at a time: this load runs after the cancelled write.
            loaded = await store.load("d")
            assert loaded is not None and len(loaded.messages) == len(turn(2))
            assert await store.load("early") is None
        with agui_store.open(path) as opened:
            assert not opened.check().problems

    run(scenario())


async def _until_running(function: str) -> None:
    """Wait until a thread of this process runs ``function``; a guard against hanging."""
    deadline = time.monotonic() + 60
    while not _running(function):
        if time.monotonic() > deadline:
            pytest.fail(f"no thread ran {function} within 60 s")
        await asyncio.sleep(0.01)


def _running(function: str) -> bool:
    """Whether a thread of this process is running ``function`` (anywhere on its stack)."""
    for frame in sys._current_frames().values():
        at: Any = frame
        while at is not None:
            if at.f_code.co_name == function:
                return True
            at = at.f_back
    return False


@pytest.mark.pydantic_ai
def test_a_closed_conversation_store_says_so(tmp_path: Any) -> None:
    from agui_store.integrations.pydantic_ai import ConversationStore

    async def scenario() -> None:
        store = ConversationStore(str(tmp_path / "c.db"))
        await store.close()
        with pytest.raises(
            agui_store.AguiStoreError, match=r"c\.db: the conversation store is closed$"
        ):
            await store.load("c")
        await store.close()  # closing twice is fine

    asyncio.run(scenario())


@pytest.mark.pydantic_ai
def test_a_conversation_store_given_options_with_an_open_store_says_they_are_not_taken(
    db_path: Any,
) -> None:
    with agui_store.open(db_path) as store, pytest.raises(InvalidArgumentError, match="busy"):
        ConversationStore(store, busy_timeout_ms=5)


@pytest.mark.pydantic_ai
def test_a_conversation_store_given_a_misspelled_option_names_it_and_the_options_it_takes(
    db_path: Any,
) -> None:
    with pytest.raises(
        ArgumentTypeError,
        match=r"ConversationStore takes no option 'writer'; its options are busy_timeout_ms, ",
    ):
        ConversationStore(db_path, writer="thread")
    assert not db_path.exists()


@pytest.mark.pydantic_ai
def test_a_conversation_store_given_no_store_path_or_url_names_what_it_takes(
    db_path: Any,
) -> None:
    with agui_store.open(db_path) as store:
        conversations = ConversationStore(store)
        for wrong in (5, [str(db_path)], conversations):
            with pytest.raises(ArgumentTypeError, match="takes a Store, an AsyncStore, or a path"):
                ConversationStore(wrong)  # type: ignore[arg-type]
        run(conversations.close())


@pytest.mark.pydantic_ai
def test_a_conversation_store_used_before_a_fork_serves_the_child_and_the_parent(
    db_path: Any,
) -> None:
    """A server that forks its workers after building the app (gunicorn's ``--preload``),
    say after a startup that listed the conversations: the child's calls run on a thread of
    its own, and the parent's go on as before."""
    from tests.test_concurrency import exit_code, in_child

    loop = asyncio.new_event_loop()
    store = ConversationStore(str(db_path))
    try:
        loop.run_until_complete(store.save(Conversation(conversation_id="a", messages=turn(1))))

        async def in_the_child() -> None:
            await store.save(Conversation(conversation_id="b", messages=turn(1)))
            assert {r.conversation_id for r in await store.read_records()} == {"a", "b"}
            await store.close()

        pid = in_child(lambda: asyncio.run(asyncio.wait_for(in_the_child(), 30)))
        assert exit_code(pid) == 0
        loop.run_until_complete(store.save(Conversation(conversation_id="c", messages=turn(1))))
        records = loop.run_until_complete(store.read_records())
        assert {r.conversation_id for r in records} == {"a", "b", "c"}
        loop.run_until_complete(store.close())
    finally:
        loop.close()


# --- query plans (SQLite) -------------------------------------------------------------------------

HOT = {
    # A history: the head by its id, then one primary-key probe per entry.
    "CONVERSATION_HISTORY": ("e0", 20),
    "CONVERSATION_ENTRY": ("e0",),
    "CONVERSATION": ("c",),
    "CONVERSATIONS": (20,),
    "SCOPE_CONVERSATIONS": ("alice", 20),
    # A delete's walk: whether anything still reaches an entry.
    "CONVERSATION_ENTRY_REACHED": (1,),
    "CONVERSATION_MESSAGE_ID": (b"x",),
}


@pytest.mark.parametrize("name", sorted(HOT))
def test_each_hot_conversation_statement_probes_indexes_and_never_scans_a_table(
    db_path: Any, name: str
) -> None:
    from agui_store.backends.sqlite import sql

    with agui_store.open(db_path) as store:
        conn = testing.connection(store)
        statement = "EXPLAIN QUERY PLAN " + getattr(sql, name)
        plan = [row[3] for row in conn.execute(statement, HOT[name])]
    # A scan of what the statement built itself (the walk, the branches' subquery) is not one
    # of a table, and a listing walks its index in order, as far as its LIMIT.
    built = ("SCAN chain", "SCAN (subquery", "SCAN CTE")
    scans = [
        step for step in plan
        if step.startswith("SCAN") and not step.startswith(built) and "USING INDEX" not in step
    ]
    assert scans == [], plan
    assert "USE TEMP B-TREE FOR ORDER BY" not in plan or name == "CONVERSATION_HISTORY", plan


@pytest.mark.pydantic_ai
def test_a_conversation_store_given_no_store_opens_the_one_agui_store_open_does(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$AGUI_STORE_DB``, else ``./agui-store.db``, as ``agui_store.open(None)`` does."""

    async def save(conversations: ConversationStore, cid: str) -> str:
        async with conversations:
            await conversations.save(Conversation(conversation_id=cid, messages=turn(1)))
            return conversations.store.path

    named = tmp_path / "named.db"
    monkeypatch.setenv("AGUI_STORE_DB", str(named))
    assert run(save(ConversationStore(), "from-env")) == str(named)
    monkeypatch.delenv("AGUI_STORE_DB")
    monkeypatch.chdir(tmp_path)
    assert run(save(ConversationStore(None), "from-cwd")) == "agui-store.db"


    async def saved(path: Any) -> list[str]:
        async with ConversationStore(str(path)) as conversations:
            return [r.conversation_id for r in await conversations.read_records()]

    assert run(saved(named)) == ["from-env"]
    assert run(saved(tmp_path / "agui-store.db")) == ["from-cwd"]


@pytest.mark.pydantic_ai
def test_a_records_updated_at_in_a_zone_that_gives_no_offset_is_saved_as_a_naive_time(
    db_path: Any,
) -> None:
    """Python counts a time whose zone gives no offset as naive: it is saved as a naive time
    is, in UTC, not refused with a bare TypeError."""
    from datetime import datetime

    from pydantic_ai.conversation_store import ConversationRecord

    saved = datetime(2026, 1, 1, 12, 0, 0, tzinfo=NoOffset())

    async def scenario() -> None:
        async with ConversationStore(str(db_path)) as conversations:
            record = ConversationRecord(conversation_id="c", head_id=None, updated_at=saved)
            await conversations.write_record(record, expected_revision=None)
            read = await conversations.read_record("c")
            assert read is not None
            assert read.updated_at.replace(tzinfo=None) == datetime(2026, 1, 1, 12, 0, 0)

    run(scenario())


@pytest.mark.pydantic_ai
def test_a_records_updated_at_in_an_offset_with_seconds_reads_back_as_the_same_moment(
    db_path: Any,
) -> None:
    """pydantic writes a UTC offset in whole minutes: the moment read back is the one saved."""
    import dataclasses
    from datetime import datetime, timedelta, timezone

    from pydantic_ai.conversation_store import ConversationRecord

    offset = timezone(timedelta(hours=5, minutes=30, seconds=15))
    saved = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=offset)

    async def scenario() -> None:
        async with ConversationStore(str(db_path)) as conversations:
            record = ConversationRecord(conversation_id="c", head_id=None, updated_at=saved)
            await conversations.write_record(record, expected_revision=None)
            again = dataclasses.replace(record, conversation_id="d")
            await conversations.write_record(again, expected_revision=None)
            read = await conversations.read_record("c")
            assert read is not None and read.updated_at == saved
            listed = await conversations.read_records()
            assert [r.updated_at for r in listed] == [saved, saved]

    run(scenario())
