"""Copying pydantic-ai conversations between stores when one side is behind the other: a
record is replaced only by a newer one, file to file, file to database, back, and database
to database."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

import agui_store
from agui_store import SyncConflictError, cli
from agui_store.engine import conversations
from tests.backends import dump
from tests.test_sync import _NO_PG, conversations_of, locations, pair, src_dst

__all__ = ["locations", "pair", "src_dst"]  # the fixtures the tests take


async def _save(location: str, cid: str, *turns: int, usage: int | None = None) -> None:
    """Save ``turns`` onto conversation ``cid`` (a new one when absent), with ``usage``
    requests recorded when given: with no turns, a save that keeps the head."""
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.usage import RunUsage

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    async with ConversationStore(location) as conversations:
        found = await conversations.load(cid)
        if found is None:
            found = Conversation(conversation_id=cid)
        found.messages.extend(m for n in turns for m in turn(n))
        if usage is not None:
            found.usage = RunUsage(requests=usage)
        await conversations.save(found)


def save(location: str, cid: str, *turns: int, usage: int | None = None) -> None:
    asyncio.run(_save(location, cid, *turns, usage=usage))


def _nul_revision(conn: apsw.Connection) -> None:
    conn.execute("UPDATE conversations SET revision = revision || ?", ("\x00",))


def _nul_kind(conn: apsw.Connection) -> None:
    """The last entry's kind, given a NUL and its hash again, as a release that took such
    a kind stored it."""
    ((entry_id, kind, address, parent),) = conn.execute(
        "SELECT e.entry_id, e.kind, m.hash, p.hash FROM conversation_entries e "
        "JOIN conversation_messages m ON m.id = e.message "
        "LEFT JOIN conversation_entries p ON p.id = e.parent "
        "WHERE e.id = (SELECT max(id) FROM conversation_entries)"
    )
    kind += "\x00"
    conn.execute(
        "UPDATE conversation_entries SET kind = ?, hash = ? WHERE entry_id = ?",
        (kind, conversations.entry_hash(entry_id, kind, address, parent), entry_id),
    )


@pytest.mark.pydantic_ai
@pytest.mark.parametrize(
    ("edit", "field"),
    [(_nul_revision, "revision"), (_nul_kind, "entry '[^']+''s kind")],
    ids=["revision", "kind"],
)
@pytest.mark.parametrize("dst_kind", ["sqlite", pytest.param("postgres", marks=_NO_PG)])
def test_a_conversation_holding_a_nul_postgresql_cannot_hold_is_refused_by_name_and_nothing_written(
    tmp_path: Path,
    locations: Callable[[str], str],
    dst_kind: str,
    edit: Callable[[apsw.Connection], None],
    field: str,
) -> None:
    src = str(tmp_path / "old.db")
    save(src, "c", 1)
    with apsw.Connection(src) as conn:  # one turn, then written as an older release held it
        edit(conn)
    dst = locations(dst_kind)
    save(dst, "other", 1)
    before = dump(dst)
    with pytest.raises(agui_store.InvalidArgumentError) as refused:
        agui_store.copy(src, dst)
    assert re.match(
        f"conversation 'c' of the source cannot be copied: its {field} holds a NUL character",
        str(refused.value),
    )
    assert dump(dst) == before


@pytest.mark.pydantic_ai
def test_an_older_copy_of_a_conversation_saved_since_without_moving_its_head_is_not_copied_over_it(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    save(src, "c", 1)
    assert agui_store.copy(src, dst).conversations == 1
    save(dst, "c", usage=7)  # the destination saves it again, its head where it was
    newer = conversations_of(dst, ["c"])
    before = dump(dst)
    assert agui_store.copy(src, dst).conversations == 0  # the source's is behind: nothing
    assert conversations_of(dst, ["c"]) == newer
    assert dump(dst) == before
    # The other way, the newer record moves the older one forward.
    assert agui_store.copy(dst, src).conversations == 1
    assert conversations_of(src, ["c"]) == newer


@pytest.mark.pydantic_ai
def test_an_older_copy_of_a_conversation_holding_what_the_destination_lacks_is_refused(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    save(src, "c", 1)
    agui_store.copy(src, dst)
    save(src, "c", 2)  # the source moves on, then the destination saves it without a turn
    save(dst, "c", usage=7)
    before = dump(dst)
    with pytest.raises(SyncConflictError, match="both moved on") as caught:
        agui_store.copy(src, dst)
    assert caught.value.conversation_id == "c"
    assert dump(dst) == before
    assert agui_store.copy(src, dst, force=True).conversations == 1
    assert conversations_of(dst, ["c"]) == conversations_of(src, ["c"])


@pytest.mark.pydantic_ai
def test_an_older_archive_of_a_conversation_saved_since_imports_nothing_over_it(
    src_dst: tuple[str, str],
) -> None:
    src, dst = src_dst
    save(src, "c", 1)
    agui_store.copy(src, dst)
    save(dst, "c", usage=7)
    newer = conversations_of(dst, ["c"])
    archive = io.BytesIO()
    with agui_store.open(src) as store:
        store.export_archive(archive)
    archive.seek(0)
    with agui_store.open(dst) as store:
        assert store.import_archive(archive).conversations == 0
    assert conversations_of(dst, ["c"]) == newer


def test_the_copy_commands_help_says_force_replaces_a_conversation_both_saved(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    assert cli.main(["help", "copy"], out=out) == 0
    shown = out.getvalue() + capsys.readouterr().out
    force = " ".join(shown.split("--force", 2)[2].split("--restore-erased")[0].split())
    assert "conversation both saved takes SRC's record" in force
