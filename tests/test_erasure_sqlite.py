"""Erasure in an SQLite file, byte by byte: after ``delete_thread`` returns with the purge
finished, no byte sequence unique to the erased thread is left in the database file or its
WAL (``secure_delete`` zeroes freed cells and pages, the purge rewrites every page and
truncates the WAL), while the kept
thread's are all there; a reader holding an older snapshot holds the purge back; a file
written before ``secure_delete`` was on is rewritten once when it is migrated."""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path
from typing import Any

import apsw
import pytest

import agui_store
from agui_store import testing
from agui_store.backends.sqlite import schema
from agui_store.engine import conversations
from agui_store.sync import copy
from tests.schema_history import (
    as_version_13,
    as_version_15,
    as_version_16,
    as_version_17,
    as_version_18,
)
from tests.streams import run, say

# pydantic-ai needs Python 3.11: without it the tests marked pydantic_ai skip
# (tests/conftest.py).
with contextlib.suppress(ImportError):
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.messages import BinaryContent, ToolCallPart
    from pydantic_ai.tools import DeferredToolRequests
    from pydantic_ai.usage import RunUsage

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import every_part_kind, reply, round_trip, user

#: Where a marker is planted in each thread.
PLACES = (
    "thread", "run", "message", "tool", "state", "input", "branch", "conversation", "word", "type",
)


#: An event type every planted thread logs: it stays while a thread that logs it does.
SHARED_TYPE = "PRODUCER_TYPE_7f3a"


def marker(place: str, thread: str) -> str:
    return f"MARK-{place}-{thread}-7f3a"


def word(thread: str) -> str:
    """One word of a message, as written (the search index keeps it folded: lower case)."""
    return f"Word{thread}Mark7f3a"


def needle(place: str, thread: str) -> bytes:
    """What to look for in the raw bytes: a marker, or the search index's folded word."""
    return (word(thread).lower() if place == "word" else marker(place, thread)).encode()


def raw_bytes(path: Path) -> bytes:
    """The database file and its WAL, as they are on disk."""
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def plant(path: Path, name: str) -> None:
    """A thread with a marker in each place, and its linked pydantic-ai conversation."""
    thread = marker("thread", name)
    with agui_store.open(path) as store:
        for i in range(3):
            run_id = f"{marker('run', name)}-{i}"
            store.append(
                run(
                    thread,
                    run_id,
                    *say(
                        f"{name}-m{i}",
                        f"{marker('message', name)} {i} {word(name)}",
                        "assistant",
                    ),
                    {"type": "TOOL_CALL_START", "toolCallId": f"{name}-c{i}", "toolCallName": "f"},
                    {"type": "TOOL_CALL_END", "toolCallId": f"{name}-c{i}"},
                    {
                        "type": "TOOL_CALL_RESULT",
                        "messageId": f"{name}-t{i}",
                        "toolCallId": f"{name}-c{i}",
                        "content": f"{marker('tool', name)} {i}",
                    },
                    {
                        "type": "STATE_SNAPSHOT",
                        "snapshot": {"note": f"{marker('state', name)} {i}"},
                    },
                    # Event types of their producer's, which the store names once for
                    # every event of the type: one of this thread's, one of every thread's.
                    {"type": marker("type", name), "value": i},
                    {"type": SHARED_TYPE, "value": i},
                ),
                input={
                    "threadId": thread,
                    "runId": run_id,
                    "messages": [
                        {"id": f"{name}-u{i}", "role": "user", "content": marker("input", name)}
                    ],
                    "tools": [],
                    "context": [],
                },
            )
        store.branch(marker("branch", name), f"{marker('run', name)}-1", thread_id=thread)

    async def converse() -> None:
        async with ConversationStore(str(path)) as conversations:
            await conversations.save(
                Conversation(
                    conversation_id=thread,
                    messages=[user(marker("conversation", name)), reply("noted")],
                )
            )

    asyncio.run(converse())


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("pending", [1, 256], ids=["words-in-fts5", "words-pending"])
def test_no_byte_of_an_erased_thread_is_left_in_the_file_or_its_wal(
    tmp_path: Path, pending: int
) -> None:
    path = tmp_path / "store.db"
    with testing.search_pending_rows(pending):
        plant(path, "kept")
        plant(path, "gone")
    with agui_store.open(path) as store:
        store.compact()  # checkpoints of every run: derived copies to erase too
        data = raw_bytes(path)
        for place in PLACES:
            assert needle(place, "gone") in data, place
        receipt = store.delete_thread(marker("thread", "gone"))
        assert (receipt.threads, receipt.runs, receipt.conversations) == (1, 3, 1)
        assert receipt.purged
        data = raw_bytes(path)
        for place in PLACES:
            assert needle(place, "gone") not in data, place
            assert needle(place, "kept") in data, place
        assert SHARED_TYPE.encode() in data
        assert store.check().ok


@pytest.mark.pydantic_ai
def test_the_planners_statistics_an_analyze_left_are_sampled_again_without_the_erased_keys(
    tmp_path: Path,
) -> None:
    """``ANALYZE`` (a tool's, ``PRAGMA optimize``) keeps sample keys of every index in
    ``sqlite_stat4``: thread and run ids, branch names. The purge samples them again."""
    path = tmp_path / "store.db"
    plant(path, "kept")
    plant(path, "gone")
    analyst = apsw.Connection(str(path))
    analyst.execute("ANALYZE")
    samples = b"".join(row[0] for row in analyst.execute("SELECT sample FROM sqlite_stat4"))
    analyst.close()
    assert needle("thread", "gone") in samples and needle("branch", "gone") in samples
    with agui_store.open(path) as store:
        assert store.delete_thread(marker("thread", "gone")).purged
        data = raw_bytes(path)
        for place in PLACES:
            assert needle(place, "gone") not in data, place
        analyst = apsw.Connection(str(path))
        samples = b"".join(row[0] for row in analyst.execute("SELECT sample FROM sqlite_stat4"))
        analyst.close()
        assert needle("thread", "kept") in samples  # still there, of the rows left
        assert store.check().ok


@pytest.mark.parametrize("pending", [1, 300], ids=["segment-per-append", "one-segment"])
def test_no_start_of_an_erased_word_is_left_in_the_full_text_index_pages(
    tmp_path: Path, pending: int
) -> None:
    # FTS5 keeps the start of each leaf page's first word apart from the page: with enough
    # words for many pages, erased words stand first on some of them, between kept words
    # ("card" and "hello"), so that their pages do not end the segment.
    path = tmp_path / "store.db"
    with testing.search_pending_rows(pending), agui_store.open(path) as store:
        for i in range(60):
            store.append(run("gone", f"g{i}", *say(f"g{i}-m", f"card dzqv{i:04d}x{i:06d}")))
        for i in range(300):
            store.append(run(f"kept{i}", f"k{i}", *say(f"k{i}-m", f"hello kept{i:04d}word")))
        assert b"dzqv0047x" in raw_bytes(path)
        assert store.delete_thread("gone").purged
        assert b"dzqv" not in raw_bytes(path)
        assert b"kept0047word" in raw_bytes(path)
        assert [h.thread_id for h in store.search("kept0047word")] == ["kept47"]
        assert store.check().ok


def test_no_copy_of_an_erased_row_is_left_where_sqlite_moved_it_while_deleting(
    tmp_path: Path,
) -> None:
    """Deleting rows rebuilds pages: SQLite moves cells into a neighbour and leaves a copy of
    the moved cells in the unused space of the page it rebuilt, which ``secure_delete`` does
    not zero. Long messages of varied length make it happen."""
    path = tmp_path / "store.db"
    sizes = random.Random(5)
    with agui_store.open(path) as store:
        for name in ("gone", "kept"):
            said = [
                event
                for i in range(20)
                for event in say(
                    f"{name}-m{i}",
                    f"{marker('message', name)} " + "lorem ipsum " * sizes.randrange(1, 400),
                )
            ]
            store.append(run(name, f"{name}-r", *said))
        receipt = store.delete_thread("gone")
        assert receipt.purged
        data = raw_bytes(path)
        assert marker("message", "gone").encode() not in data
        assert marker("message", "kept").encode() in data
        assert store.check().ok


@pytest.mark.pydantic_ai
def test_check_names_words_the_full_text_index_keeps_for_no_row_and_rows_it_keeps_none_for(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    with testing.search_pending_rows(1):
        plant(path, "kept")
    with agui_store.open(path) as store:
        assert store.check().ok
        conn = testing.connection(store)
        (row,) = conn.execute("SELECT min(id) FROM search_messages").fetchone()
        conn.execute(
            "CREATE VIRTUAL TABLE temp.words USING fts5vocab(main, search_words, instance)"
        )
        words = " ".join(w for (w,) in conn.execute(
            "SELECT term FROM temp.words WHERE doc = ? ORDER BY offset", (row,)
        ))
        with conn:  # an erasure that left one row's words behind, and another's taken
            conn.execute("INSERT INTO search_words(rowid, words) VALUES (99999, 'erased')")
            conn.execute(
                "INSERT INTO search_words(search_words, rowid, words) VALUES ('delete', ?, ?)",
                (row, words),
            )
        found = [str(p) for p in store.check().problems]
    assert found == [
        f"derived: the full-text index holds no words for 1 search index row (#{row}): a "
        "search cannot find their messages",
        "derived: the full-text index holds words under 1 id that no search index row has "
        "(#99999): erased or replaced text may still match a search",
    ]


def test_the_words_of_a_message_holding_half_an_emoji_leave_the_file_with_its_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    with testing.search_pending_rows(1), agui_store.open(path) as store:
        for name in ("gone", "kept"):
            store.append(
                run(marker("thread", name), f"{name}-r", *say(f"{name}-m", f"{word(name)} \ud83d"))
            )
        _erase_gone(store)
    _only_the_kept_word_is_left(path)


@pytest.mark.pydantic_ai
def test_a_reader_on_an_older_snapshot_holds_the_purge_back_until_it_is_done(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    plant(path, "gone")
    plant(path, "kept")
    reader = apsw.Connection(str(path))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM event_log").fetchall()  # holds this snapshot
    with agui_store.open(path, busy_timeout_ms=50) as store:
        receipt = store.delete_thread(marker("thread", "gone"))
        assert receipt.threads == 1 and not receipt.purged
        reader.execute("COMMIT")
        reader.close()
    # The last connection's close checkpoints the WAL into the file and removes it.
    assert marker("message", "gone").encode() not in raw_bytes(path)
    assert marker("message", "kept").encode() in raw_bytes(path)


def _as_version_13(path: Path, lingering: str) -> None:
    """Make ``path`` a file as version 13 wrote it: no erasure tables, and a deleted
    branch whose name still lingers in freed space (written without secure_delete)."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("BEGIN")
    as_version_13(conn)
    thread, run_pk = conn.execute("SELECT thread, id FROM runs LIMIT 1").fetchone()
    conn.execute(
        "INSERT INTO branches(thread, name, run, updated_at) VALUES (?, ?, ?, 0)",
        (thread, lingering, run_pk),
    )
    conn.execute("PRAGMA user_version = 13")
    conn.execute("COMMIT")
    conn.execute("DELETE FROM branches WHERE name = ?", (lingering,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()


def test_a_file_written_before_secure_delete_is_rewritten_once_when_it_is_migrated(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    with agui_store.open(path) as store:
        store.append(run("t", "r1", *say("m1", "hello")))
    lingering = "MARK-deleted-before-7f3a"
    _as_version_13(path, lingering)
    assert lingering.encode() in raw_bytes(path)
    with agui_store.open(path) as store:
        assert store.threads() == ["t"] and store.check().ok
    assert lingering.encode() not in raw_bytes(path)
    conn = apsw.Connection(str(path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    conn.close()


def test_a_purge_finishes_while_the_cursors_that_opened_the_store_are_still_alive(
    tmp_path: Path,
) -> None:
    """A cursor may live past its last reference (apsw 3.54.0 keeps them, as a tracer that
    holds on to them does): a pragma's row left unread by opening the file would keep every
    ``VACUUM`` out, and no erasure's purge would finish."""
    path = tmp_path / "store.db"
    with agui_store.open(path) as store:
        store.append(run("t", "r1", *say("m1", "hello")))
    held: list[apsw.Cursor] = []
    opening = True

    def cursor(conn: apsw.Connection) -> apsw.Cursor:
        made = apsw.Cursor(conn)
        if opening:
            held.append(made)
        return made

    def holding(conn: apsw.Connection) -> None:
        conn.cursor_factory = cursor

    apsw.connection_hooks.append(holding)
    try:
        store = agui_store.open(path)
    finally:
        apsw.connection_hooks.remove(holding)
        opening = False
    with store:
        assert held
        receipt = store.delete_thread("t")
    assert receipt.purged, receipt


@pytest.mark.pydantic_ai
def test_a_search_index_of_version_15_is_made_again_and_then_forgets_erased_words_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    plant(path, "kept")
    plant(path, "gone")
    _as_version(path, as_version_15, 15)
    _finds_both_then_forgets_the_erased_one(path)


def _as_version(path: Path, undo: Any, version: int) -> None:
    """Give the file at ``path`` an earlier version's tables (``undo``) and number."""
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN")
    undo(conn)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("COMMIT")
    conn.close()


def _finds_both_then_forgets_the_erased_one(path: Path) -> None:
    """Opened (migrated), the store finds each planted thread's word; erasing one leaves
    its word nowhere in the file, the other's where it was, and the store sound."""
    with agui_store.open(path) as store:
        for name in ("kept", "gone"):
            assert {h.thread_id for h in store.search(word(name))} == {marker("thread", name)}
        _erase_gone(store)
    _only_the_kept_word_is_left(path)


def _erase_gone(store: agui_store.Store) -> None:
    """Erase the planted thread ``gone``: its word is found no more, ``kept``'s still is,
    and the store checks sound."""
    assert store.delete_thread(marker("thread", "gone")).purged
    assert not store.search(word("gone")) and store.search(word("kept"))
    assert store.check().ok


def _only_the_kept_word_is_left(path: Path) -> None:
    """The erased thread's word is nowhere in the file's bytes, the kept one's is."""
    data = raw_bytes(path)
    assert needle("word", "gone") not in data and needle("word", "kept") in data


def _kept_says_again(store: agui_store.Store, run_id: str, n: int, parent: int) -> None:
    """Append to the thread ``kept`` a run saying its word in message ``n``, below its
    planted run ``parent``."""
    store.append(
        run(
            marker("thread", "kept"), run_id,
            *say(f"kept-m{n}", f"{marker('message', 'kept')} {n} {word('kept')}", "assistant"),
            parentRunId=f"{marker('run', 'kept')}-{parent}",
        )
    )


def _search_page_size(path: Path) -> int | None:
    conn = apsw.Connection(str(path))
    found = conn.execute("SELECT v FROM search_words_config WHERE k = 'pgsz'").fetchall()
    conn.close()
    return found[0][0] if found else None


@pytest.mark.pydantic_ai
def test_a_new_search_index_writes_small_pages_so_a_delete_reads_few(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    plant(path, "kept")
    assert _search_page_size(path) == 256


@pytest.mark.pydantic_ai
def test_a_search_index_of_version_16_is_written_again_in_small_pages_and_keeps_its_words(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    plant(path, "kept")
    plant(path, "gone")
    _as_version(path, as_version_16, 16)
    assert _search_page_size(path) is None
    _finds_both_then_forgets_the_erased_one(path)
    assert _search_page_size(path) == 256


@pytest.mark.pydantic_ai
def test_the_pending_search_rows_of_version_17_move_whole_and_are_not_indexed_twice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    with testing.search_pending_rows(4):  # some rows moved into FTS5, some pending
        plant(path, "kept")
        plant(path, "gone")
    _as_version(path, as_version_17, 17)
    with agui_store.open(path) as store:
        for name in ("kept", "gone"):
            assert {h.thread_id for h in store.search(word(name))} == {marker("thread", name)}
        assert len(store.search(word("kept"))) == 3
        # A sibling of the last run that says its message again, word for word: the text
        # the thread's index holds (moved or pending) gets no second row.
        _kept_says_again(store, "again", 2, parent=1)
        assert len(store.search(word("kept"))) == 3
        _erase_gone(store)
    _only_the_kept_word_is_left(path)


@pytest.mark.pydantic_ai
def test_the_pending_search_rows_of_version_18_are_indexed_again_and_move_when_enough_are_pending(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    with testing.search_pending_rows(1000):  # every row pending
        plant(path, "kept")
        plant(path, "gone")
    _as_version(path, as_version_18, 18)
    conn = apsw.Connection(str(path))
    pending = conn.execute("SELECT id, words FROM search_pending ORDER BY id").fetchall()
    conn.close()
    assert pending
    with testing.search_pending_rows(1000), agui_store.open(path) as store:
        conn = testing.connection(store)
        # Version 20 indexes every run again: the same rows, pending again, under new ids.
        again = conn.execute("SELECT words FROM search_pending ORDER BY id").fetchall()
        assert again == [(words,) for _, words in pending]
        assert not conn.execute("PRAGMA foreign_key_list(search_pending)").fetchall()
    with testing.search_pending_rows(4), agui_store.open(path) as store:
        conn = testing.connection(store)
        assert len(store.search(word("kept"))) == 3
        # Another run of the thread: enough rows pending, they move with the new one's.
        _kept_says_again(store, "later", 9, parent=2)
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone()[0] == 0
        assert len(store.search(word("kept"))) == 4
        _erase_gone(store)
    _only_the_kept_word_is_left(path)


@pytest.mark.pydantic_ai
def test_a_purge_that_fails_after_the_commit_leaves_a_receipt_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    plant(path, "gone")
    plant(path, "kept")
    with agui_store.open(path) as store:
        conn = testing.connection(store)

        def hold(step: str) -> None:
            if step == "committed":
                conn.execute("BEGIN")  # VACUUM cannot run inside a transaction

        with testing.on_erasure_step(hold):
            receipt = store.delete_thread(marker("thread", "gone"))
        conn.execute("ROLLBACK")
        assert receipt.threads == 1 and not receipt.purged
        assert "the purge failed" in receipt.purge_pending and "purge()" in receipt.purge_pending
        assert store.threads() == [marker("thread", "kept")]
        assert store.purge()
    assert marker("message", "gone").encode() not in raw_bytes(path)


def _copied_then_erased_in_the_source(tmp_path: Path) -> tuple[Path, Path]:
    """A source of two planted threads copied to a target, then one erased in the source:
    the next copy carries that erasure."""
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    plant(source, "gone")
    plant(source, "kept")
    copy(source, target)
    with agui_store.open(source) as store:
        store.delete_thread(marker("thread", "gone"))
    return source, target


@pytest.mark.pydantic_ai
def test_a_copy_whose_purge_a_reader_holds_back_says_so_and_the_next_purge_finishes_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source, target = _copied_then_erased_in_the_source(tmp_path)
    reader = apsw.Connection(str(target))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM event_log").fetchall()  # holds this snapshot
    with (
        caplog.at_level("WARNING", logger="agui_store.sync"),
        agui_store.open(target, busy_timeout_ms=50) as destination,
    ):
        copy(source, destination)
    [said] = [r.getMessage() for r in caplog.records if r.name == "agui_store.sync"]
    assert said.startswith("copy: erased 1 thread(s) and 1 conversation(s) the source erased;")
    assert "their purge is not finished in the destination" in said
    assert "a reader holds older pages" in said and "Store.purge()" in said
    reader.execute("COMMIT")
    with agui_store.open(target) as store:
        assert store.threads() == [marker("thread", "kept")]
        assert store.purge()
    reader.close()
    assert marker("message", "gone").encode() not in raw_bytes(target)
    assert marker("message", "kept").encode() in raw_bytes(target)


@pytest.mark.pydantic_ai
def test_a_copy_whose_purge_fails_after_the_commit_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source, target = _copied_then_erased_in_the_source(tmp_path)
    writer = apsw.Connection(str(target))

    def hold(step: str) -> None:
        if step == "committed":
            writer.execute("BEGIN IMMEDIATE")  # another writer holds the file past the timeout

    with (
        caplog.at_level("WARNING", logger="agui_store.sync"),
        testing.on_erasure_step(hold),
        agui_store.open(target, busy_timeout_ms=50) as destination,
    ):
        copy(source, destination)
    writer.execute("ROLLBACK")
    writer.close()
    [said] = [r.getMessage() for r in caplog.records if r.name == "agui_store.sync"]
    assert said.startswith("copy: erased 1 thread(s) and 1 conversation(s) the source erased;")
    assert "their purge is not finished in the destination" in said
    assert "the purge failed" in said and "purge()" in said
    with agui_store.open(target) as store:
        assert store.threads() == [marker("thread", "kept")]
        assert store.purge()
    assert marker("message", "gone").encode() not in raw_bytes(target)


@pytest.mark.pydantic_ai
def test_a_copy_that_erases_a_conversation_alone_leaves_none_of_its_bytes(
    tmp_path: Path,
) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    secret = "a-conversation-marker-7f3a"

    async def save() -> None:
        async with ConversationStore(source) as store:
            await store.save(
                Conversation(conversation_id="c", messages=[user(secret), reply("noted")]),
                scope="alice",
            )

    asyncio.run(save())
    copy(source, target)
    with agui_store.open(source) as store:
        assert store.delete_owner("alice").conversations == 1
    with agui_store.open(target) as store:
        copy(source, store)  # the store stays open: its close does not checkpoint it
        assert secret.encode() not in raw_bytes(target)


@pytest.mark.pydantic_ai
def test_an_owners_erasure_leaves_no_byte_of_any_part_of_its_conversations_branches_included(
    tmp_path: Path,
) -> None:
    """Every part kind pydantic-ai has, marked, in the history, in a branch the conversation
    left and in its record (usage, deferred tool requests); the binary contents as their
    base64. Another owner's conversation, made alike, keeps every byte."""
    import base64

    path = tmp_path / "s.db"
    gone, kept = "GoneTag7f3a", "KeptTag7f3a"

    def needles(tag: str) -> list[bytes]:
        """The tag, and each binary content marked with it as pydantic-ai writes it."""
        found = [tag.encode()]
        for message in every_part_kind(tag):
            for part in message.parts:
                content = getattr(part, "content", None)
                for item in content if isinstance(content, list) else [content]:
                    item = getattr(item, "content", item)  # a FilePart's
                    if isinstance(item, BinaryContent) and tag.encode() in item.data:
                        found.append(base64.urlsafe_b64encode(item.data).rstrip(b"="))
        assert len(found) >= 4  # the tag, and a PDF and two PNGs
        return found

    async def save() -> None:
        async with ConversationStore(path) as store:
            for tag, owner in ((gone, "alice"), (kept, "bob")):
                cid = f"c-{owner}"
                await store.save(Conversation(conversation_id=cid, messages=every_part_kind(tag)),
                                 scope=owner)  # fmt: skip
                loaded = await store.load(cid)
                assert loaded is not None
                branched = await store.branch(cid, at=1, expected_revision=loaded.revision)
                branched.messages.extend(every_part_kind(f"{tag}Branch")[1:])
                branched.usage = RunUsage(requests=1, details={f"usage{tag}": 1})
                branched.deferred_tool_requests = DeferredToolRequests(calls=[
                    ToolCallPart("ask", {"q": f"deferred{tag}"}, tool_call_id="d1")
                ])
                await store.save(branched)

    asyncio.run(save())
    before = raw_bytes(path)
    for tag in (gone, kept):
        assert all(needle in before for needle in needles(tag)), tag
        assert f"usage{tag}".encode() in before and f"deferred{tag}".encode() in before
    with agui_store.open(path) as store:
        receipt = store.delete_owner("alice")
        assert (receipt.conversations, receipt.purged) == (1, True)
    after = raw_bytes(path)
    assert [needle for needle in needles(gone) if needle in after] == []
    assert all(needle in after for needle in needles(kept))

    async def the_other_reads_as_before() -> None:
        async with ConversationStore(path) as store:
            loaded = await store.load("c-bob", scope="bob")
            assert loaded is not None
            assert loaded.messages == round_trip(
                [*every_part_kind(kept)[:1], *every_part_kind(f"{kept}Branch")[1:]]
            )
            assert await store.load("c-alice") is None

    asyncio.run(the_other_reads_as_before())


@pytest.mark.pydantic_ai
def test_an_erased_conversations_id_is_left_neither_in_a_fork_nor_in_the_entries_it_shares(
    tmp_path: Path,
) -> None:
    """A fork names the conversation it was forked from, and each entry the conversation
    whose save stored it: the fork's shared history stays, the erased id goes from both."""
    path = tmp_path / "s.db"
    gone = "ConversationIdGone7f3a"

    async def save() -> str:
        async with ConversationStore(path) as store:
            await store.save(
                Conversation(conversation_id=gone, messages=[user("hi"), reply("hello")]),
                scope="alice",
            )
            fork = await store.fork(gone, new_conversation_id="kept", scope="bob")
            fork.messages.extend([user("and then"), reply("then this")])
            await store.save(fork, scope="bob")
            loaded = await store.load("kept")
            assert loaded is not None
            return loaded.revision

    revision = asyncio.run(save())
    assert gone.encode() in raw_bytes(path)
    with agui_store.open(path) as store:
        receipt = store.delete_owner("alice")
        assert (receipt.conversations, receipt.purged) == (1, True)
        assert store.check().ok
    assert gone.encode() not in raw_bytes(path)

    async def the_fork_reads_as_before() -> list[str]:
        async with ConversationStore(path) as store:
            record = await store.read_record("kept")
            assert record is not None
            assert (record.forked_from, record.scope) == (None, "bob")
            # A save that read the fork before the erasure would write its origin back.
            assert record.revision != revision
            loaded = await store.load("kept", scope="bob")
            assert loaded is not None
            assert loaded.messages == round_trip(
                [user("hi"), reply("hello"), user("and then"), reply("then this")]
            )
            return [entry.id for entry in await store.read_history(record.head_id)]

    entries = asyncio.run(the_fork_reads_as_before())
    with agui_store.open(path) as store, store.reading() as tx:
        assert {conversations.entry_conversation(tx, e) for e in entries} == {"kept"}
