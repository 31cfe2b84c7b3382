"""Erasure on every backend (docs/guides/erasure.md): ``delete_thread``, ``delete_owner`` and
``prune`` erase what they name and nothing else, dry runs count without erasing, shared
content stays with the threads that keep it, check() reports erasures as erasures and rows
deleted by hand as tampering, and copy keeps an erased thread erased."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import io
import time
from collections.abc import Callable
from typing import Any

import pytest

import agui_store
import agui_store.aio
from agui_store import testing
from agui_store.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    RunNotFoundError,
    SyncConflictError,
)
from agui_store.history import blobs
from agui_store.sync import copy
from tests.backends import checked, dump, owner, problems, tamper
from tests.streams import run, say
from tests.workers.harness import Worker
from tests.zones import NoOffset

# pydantic-ai needs Python 3.11: without it the tests marked pydantic_ai skip
# (tests/conftest.py).
with contextlib.suppress(ImportError):
    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn


def _input(thread: str, run_id: str, text: str, state: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run_id,
        "messages": [{"id": f"u-{run_id}", "role": "user", "content": text}],
        "state": state,
        "tools": [],
        "context": [],
    }


def _thread(store: Any, thread: str, runs: int = 3, *, scope: str | None = None) -> None:
    """``runs`` complete runs of ``thread``, each with an input, a message and a state."""
    for i in range(runs):
        store.append(
            run(
                thread,
                f"{thread}-r{i}",
                *say(f"{thread}-m{i}", f"said in {thread} {i}", "assistant"),
                {"type": "STATE_SNAPSHOT", "snapshot": {"thread": thread, "turn": i}},
            ),
            input=_input(thread, f"{thread}-r{i}", f"asked in {thread} {i}", {"turn": i}),
            scope=scope,
        )


def _shared(store: Any, thread: str) -> None:
    """Two runs whose content is the same in every thread made with it (the blobs of
    their checkpoints are stored once, shared)."""
    for i in range(2):
        store.append(
            run(thread, f"{thread}-s{i}", *say(f"shared-m{i}", "the same words " * 30)),
            input=_input(thread, f"{thread}-s{i}", "the same question", {"same": True}),
        )


def _reads(store: Any, thread: str) -> Any:
    """What a reader sees of a thread, and the hashes that vouch for it."""
    return [
        (r.run_id, r.hash, store.checkout(r.run_id, thread_id=thread).to_json())
        for r in store.runs(thread)
    ]


def test_deleting_a_thread_erases_it_and_every_other_thread_reads_as_before(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        for t in ("a", "b", "c"):
            _thread(store, t)
        store.branch("b-branch", "b-r1", thread_id="b")
        before = {t: _reads(store, t) for t in ("a", "c")}
        receipt = store.delete_thread("b")
        assert (receipt.threads, receipt.runs, receipt.events) == (1, 3, 3 * 6)
        assert receipt.bytes > 0 and not receipt.dry_run
        assert store.threads() == ["a", "c"]
        assert {t: _reads(store, t) for t in ("a", "c")} == before
        with pytest.raises(RunNotFoundError):
            store.runs("b")
        report = store.check()
    assert report.ok, report.problems
    rows = repr(dump(store_location))  # every row of every table
    assert "said in b" not in rows and "asked in b" not in rows and "b-branch" not in rows
    assert "said in a" in rows and "asked in c" in rows
    (logged,) = report.erasures
    assert (logged.verb, logged.threads, logged.runs, logged.events) == ("delete_thread", 1, 3, 18)


def _blob_texts(store: Any) -> list[bytes]:
    """Every blob the store holds, as its text."""
    rows = testing.connection(store).execute("SELECT codec, data FROM blobs").fetchall()
    return [blobs.unpack(codec, bytes(data)) for codec, data in rows]


def test_runs_derived_again_below_a_growing_run_leave_no_blob_behind_for_an_erasure_to_miss(
    store_location: str,
) -> None:
    """Two runs of a thread at once: a whole run lands on one still streaming, which then
    grows, so what was derived below it is dropped and derived again. The blobs of what was
    dropped go with it: an erasure of the thread then leaves none of its text, and a store
    whose every thread is erased holds no blob at all."""
    with agui_store.open(store_location, checkpoint_events=1) as store:  # a checkpoint a run
        _thread(store, "keep")
        _thread(store, "v", 2)
        streamed = run("v", "A", *say("a-m", "words of the open run " * 20, "assistant"))
        streamed.insert(3, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a-m", "delta": "more"})
        store.append(streamed[:1])  # RUN_STARTED: A is open
        store.append(streamed[1:3], thread_id="v", run_id="A")  # its message, not yet whole
        for i in range(3):  # whole runs land on A while it is open
            store.append(run("v", f"B{i}", *say(f"b-m{i}", f"secret of B{i} " * 30, "user")))
        store.append(streamed[3:], thread_id="v", run_id="A")  # A grows and finishes
        store.append(run("v", "C", *say("c-m", "secret of C " * 30, "user")))
        before = _reads(store, "keep")
        store.delete_thread("v")
        left = [t for t in _blob_texts(store) if b"secret of" in t or b"open run" in t]
        assert left == [] and _reads(store, "keep") == before
        assert checked(store)
        store.delete_thread("keep")
        assert _blob_texts(store) == []


def test_a_batch_continuing_a_run_of_an_erased_thread_is_refused_as_erased(
    store_location: str,
) -> None:
    """A recorder still streaming when its thread was erased: its next pieces name the
    erasure (not a missing RUN_STARTED), write nothing and bring nothing back; a new run
    of the same id starts a new thread."""
    piece = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "more"}]
    with agui_store.open(store_location) as store:
        store.append(run("v", "A", *say("m", "streaming")[:2], finish=False))
        store.delete_thread("v")
        before = dump(store_location)
        for named in ({"thread_id": "v"}, {"thread_id": "v", "run_id": "A"}):
            with pytest.raises(RunNotFoundError, match="thread 'v' was erased at 20"):
                store.append(piece, **named)
        assert dump(store_location) == before and store.threads() == []
        store.append(run("v", "B"))
        assert [r.run_id for r in store.runs("v")] == ["B"]


def test_erasing_a_thread_again_says_when_it_was_erased_and_changes_nothing(
    store_location: str,
) -> None:
    """A request to forget a thread, made twice (a retried script), is told the first one
    was carried out; an owner's scope is told nothing of other owners' erasures."""
    with agui_store.open(store_location) as store:
        _thread(store, "a", 1, scope="alice")
        _thread(store, "b", 1)
        store.delete_thread("a")
        before = dump(store_location)
        for dry_run in (True, False):
            with pytest.raises(RunNotFoundError, match=r"no thread 'a' in .*: it was erased at 20"):
                store.delete_thread("a", dry_run=dry_run)
        with pytest.raises(RunNotFoundError) as refused:
            store.delete_thread("a", scope="alice")
        assert "erased" not in str(refused.value)
        with pytest.raises(RunNotFoundError) as refused:
            store.delete_thread("never")
        assert "erased" not in str(refused.value)
    assert dump(store_location) == before


#: Every verb given a thread's id to read or write it, as a call on a store.
_THREAD_VERBS: dict[str, Callable[[agui_store.Store, str, str | None], object]] = {
    "runs": lambda store, t, scope: store.runs(t, scope=scope),
    "branches": lambda store, t, scope: store.branches(t, scope=scope),
    "delete_branch": lambda store, t, scope: store.delete_branch("b", thread_id=t, scope=scope),
    "log": lambda store, t, scope: store.log("main", thread_id=t, scope=scope),
    "search": lambda store, t, scope: store.search("hello", thread_id=t, scope=scope),
    "derive": lambda store, t, scope: store.derive(t, scope=scope),
    "rebuild": lambda store, t, scope: store.rebuild(t, scope=scope),
    "compact": lambda store, t, scope: store.compact(thread_id=t, scope=scope),
    "export_archive": lambda store, t, scope: store.export_archive(
        io.BytesIO(), thread_id=t, scope=scope
    ),
    "delete_thread": lambda store, t, scope: store.delete_thread(t, scope=scope),
}


@pytest.mark.parametrize("verb", sorted(_THREAD_VERBS))
def test_a_verb_given_an_erased_thread_says_when_it_was_erased_and_changes_nothing(
    store_location: str, verb: str
) -> None:
    """A thread the store forgot is told so, and when, by every verb that names it, as a
    second erasure of it is; an owner's scope is told nothing of other owners' erasures,
    and a thread never written nothing of erasures."""
    call = _THREAD_VERBS[verb]
    with agui_store.open(store_location) as store:
        _thread(store, "a", 1, scope="alice")
        store.delete_thread("a")
        before = dump(store_location)
        with pytest.raises(RunNotFoundError, match=r"no thread 'a' in .*: it was erased at 20"):
            call(store, "a", None)
        for scope in ("alice", "bob"):
            with pytest.raises(RunNotFoundError) as refused:
                call(store, "a", scope)
            assert "was erased" not in str(refused.value)
        with pytest.raises(RunNotFoundError) as refused:
            call(store, "never", None)
        assert "was erased" not in str(refused.value)
    assert dump(store_location) == before


def test_a_dry_run_returns_the_receipt_of_the_erasure_and_changes_nothing(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _thread(store, "a")
        _thread(store, "b", scope="alice")
    rows = dump(store_location)
    with agui_store.open(store_location) as store:
        dry = [
            store.delete_thread("a", dry_run=True),
            store.delete_owner("alice", dry_run=True),
            store.prune(before=datetime.timedelta(0), dry_run=True),
        ]
    assert dump(store_location) == rows
    assert all(r.dry_run and not r.purged for r in dry)
    with agui_store.open(store_location) as store:
        done = store.delete_thread("a")
    assert (dry[0].threads, dry[0].runs, dry[0].events, dry[0].bytes) == (
        done.threads,
        done.runs,
        done.events,
        done.bytes,
    )
    assert dry[2].threads == 2


def test_an_erasure_that_finds_nothing_says_there_was_nothing_to_purge_and_a_dry_run_never_purges(
    store_location: str,
) -> None:
    """``purged`` says the physical purge finished: an erasure that erased nothing has
    nothing to purge, and its line makes no claim about one; a dry run purges nothing."""
    long_ago = datetime.datetime(2000, 1, 1)
    with agui_store.open(store_location) as store:
        _thread(store, "a", 1, scope="alice")
    before = dump(store_location)
    with agui_store.open(store_location) as store:
        nothing = [
            store.delete_owner("nobody"),
            store.prune(before=long_ago),
            store.prune(before=datetime.timedelta(0), scope="nobody"),
        ]
        dry = [
            store.delete_owner("nobody", dry_run=True),
            store.prune(before=long_ago, dry_run=True),
            store.delete_owner("alice", dry_run=True),
        ]
    assert dump(store_location) == before
    for receipt in nothing:
        assert (receipt.threads, receipt.purged, receipt.purge_pending) == (0, True, "")
        assert str(receipt) == (
            "erased 0 thread(s), 0 run(s), 0 event(s), 0 conversation(s), 0 bytes"
        )
    assert [r.purged for r in dry] == [False, False, False]
    assert dry[2].threads == 1 and "purge" not in str(dry[2])


def test_a_dry_run_flag_that_is_not_a_bool_is_refused_before_anything_is_read_or_erased(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _thread(store, "a")
        _thread(store, "b", scope="alice")
    rows = dump(store_location)
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("delete_thread", ("a",), {}),
        ("delete_owner", ("alice",), {}),
        ("prune", (), {"before": datetime.timedelta(0)}),
    ]
    with agui_store.open(store_location) as store:
        for verb, args, kwargs in calls:
            for flag in (None, "no", 0, 1):
                with pytest.raises(ArgumentTypeError, match="dry_run= must be True or False"):
                    getattr(store, verb)(*args, **kwargs, dry_run=flag)
        with pytest.raises(ArgumentTypeError, match="rewrite= must be True or False"):
            store.purge(rewrite="no")

    async def through_async_store() -> None:
        async with agui_store.aio.open(store_location, writer="thread") as astore:
            for verb, args, kwargs in calls:
                with pytest.raises(ArgumentTypeError, match="dry_run="):
                    await getattr(astore, verb)(*args, **kwargs, dry_run=None)

    asyncio.run(through_async_store())
    assert dump(store_location) == rows


def test_content_shared_with_a_kept_thread_stays_and_that_thread_reads_as_before(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _shared(store, "kept")
        _shared(store, "gone")
        before = _reads(store, "kept")
        store.delete_thread("gone")
        assert _reads(store, "kept") == before
        assert store.check().ok


def test_a_thread_id_of_the_wrong_type_to_erase_is_a_type_error_and_erases_nothing(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _thread(store, "5", 1)
        before = dump(store_location)
        for value in (5, b"5", None):
            with pytest.raises(ArgumentTypeError, match="thread_id must be a non-empty string"):
                store.delete_thread(value)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="thread_id must be a non-empty string"):
            store.delete_thread("")
        assert dump(store_location) == before


def test_a_scope_erases_only_its_owners_threads(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        _thread(store, "alices", scope="alice")
        _thread(store, "bobs", scope="bob")
        _thread(store, "operators")
        before = {t: _reads(store, t) for t in ("bobs", "operators")}
        with pytest.raises(RunNotFoundError):
            store.delete_thread("bobs", scope="alice")
        receipt = store.delete_owner("alice")
        assert receipt.threads == 1
        assert store.threads() == ["bobs", "operators"]
        assert {t: _reads(store, t) for t in ("bobs", "operators")} == before
        assert store.delete_owner("nobody").threads == 0
        with pytest.raises(InvalidArgumentError):
            store.delete_owner(None)  # type: ignore[arg-type]
        assert store.check().ok


def test_prune_erases_the_threads_idle_before_the_cutoff_but_never_one_still_in_use(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _thread(store, "old")
        store.append(run("streaming", "s1", *say("s-m1", "still talking"), finish=False))
        time.sleep(0.01)  # the cutoff falls between two milliseconds
        cutoff = datetime.datetime.now(datetime.timezone.utc)
        time.sleep(0.01)
        _thread(store, "new")
        store.append(run("old-but-active", "o1", *say("o-m1", "hi")))
        receipt = store.prune(before=cutoff)
        assert receipt.threads == 1
        assert store.threads() == ["streaming", "new", "old-but-active"]
        with pytest.raises(InvalidArgumentError):
            store.prune(before="90d")  # type: ignore[arg-type]
        assert store.check().ok


def test_prune_takes_a_thread_last_active_any_fraction_of_a_millisecond_before_the_cutoff(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _thread(store, "t", 1)
        last = store.runs("t")[-1].updated_at
        assert last is not None and last.microsecond % 1000 == 0  # times are whole ms
        for after, erased in [(0, 0), (1, 1), (500, 1), (999, 1)]:
            cutoff = last + datetime.timedelta(microseconds=after)
            assert store.prune(before=cutoff, dry_run=True).threads == erased, after


def test_prune_takes_a_cutoff_whose_zone_gives_no_offset_as_a_naive_one_in_utc(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _thread(store, "t", 1)
        last = store.runs("t")[-1].updated_at
        assert last is not None
        for after, erased in [(0, 0), (1, 1)]:
            cutoff = (last + datetime.timedelta(milliseconds=after)).replace(tzinfo=NoOffset())
            assert store.prune(before=cutoff, dry_run=True).threads == erased, after
        assert store.threads() == ["t"]


@pytest.mark.pydantic_ai
def test_prune_keeps_a_thread_whose_conversation_was_saved_after_the_cutoff(
    store_location: str,
) -> None:
    async def scenario() -> None:
        with agui_store.open(store_location) as store:
            _thread(store, "saved-later")
            _thread(store, "idle")
        async with ConversationStore(store_location) as conversations:
            await conversations.save(Conversation(conversation_id="idle", messages=turn(1)))
            time.sleep(0.01)
            cutoff = datetime.datetime.now(datetime.timezone.utc)
            time.sleep(0.01)
            await conversations.save(
                Conversation(conversation_id="saved-later", messages=turn(1))
            )
            with agui_store.open(store_location) as store:
                assert store.prune(before=cutoff, dry_run=True).threads == 1
                receipt = store.prune(before=cutoff)
                assert (receipt.threads, receipt.conversations) == (1, 1)
                assert store.threads() == ["saved-later"]
                assert store.check().ok
            assert await conversations.load("saved-later") is not None
            assert await conversations.load("idle") is None

    asyncio.run(scenario())


@pytest.mark.pydantic_ai
def test_prune_erases_an_idle_conversation_no_thread_holds_but_not_one_a_kept_thread_holds(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as conversations:
            for cid, scope in (("lonely", None), ("alices", "alice"), ("busy", None)):
                await conversations.save(Conversation(conversation_id=cid, messages=turn(1)),
                                         scope=scope)  # fmt: skip
            time.sleep(0.01)
            cutoff = datetime.datetime.now(datetime.timezone.utc)
            time.sleep(0.01)
            await conversations.save(Conversation(conversation_id="fresh", messages=turn(1)))
            with agui_store.open(store_location) as store:
                _thread(store, "busy")  # written after the cutoff: it stays, and holds "busy"
                assert store.prune(before=cutoff, scope="bob").conversations == 0
                assert store.prune(before=cutoff, dry_run=True).conversations == 2
                receipt = store.prune(before=cutoff, scope="alice")
                assert (receipt.threads, receipt.conversations) == (0, 1)
                receipt = store.prune(before=cutoff)
                assert (receipt.threads, receipt.conversations, receipt.purged) == (0, 1, True)
                assert store.check().ok
            kept = sorted(r.conversation_id for r in await conversations.read_records())
            assert kept == ["busy", "fresh"]

    asyncio.run(scenario())


@pytest.mark.pydantic_ai
def test_prune_keeps_an_idle_conversation_a_kept_threads_runs_announced_a_save_of(
    store_location: str,
) -> None:
    """A conversation saved under another name than its thread's is held by the thread
    whose run announced the save: it stays while that thread does, and goes with it."""
    saved = {"type": "CUSTOM", "name": "pydantic_ai_conversation_saved",
             "value": {"conversation_id": "notes", "entry_ids": []}}  # fmt: skip
    _saved(store_location, "notes", 1)
    with agui_store.open(store_location) as store:
        store.append(run("t", "t-saves", saved))
    time.sleep(0.01)
    cutoff = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(0.01)
    with agui_store.open(store_location) as store:
        _thread(store, "t", 1)  # written after the cutoff: "t" stays, and holds "notes"
        receipt = store.prune(before=cutoff)
        assert (receipt.threads, receipt.conversations) == (0, 0)
        assert store.threads() == ["t"]
    assert _said(store_location, "notes") == turn(1)
    with agui_store.open(store_location) as store:
        assert store.prune(before=datetime.timedelta(0)).conversations == 1
        assert store.check().ok
    assert _said(store_location, "notes") is None


@pytest.mark.pydantic_ai
def test_the_conversations_linked_to_a_thread_go_with_it(store_location: str) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as conversations:
            await conversations.save(Conversation(conversation_id="a", messages=turn(1)))
            await conversations.save(Conversation(conversation_id="other", messages=turn(1)))
            with agui_store.open(store_location) as store:
                _thread(store, "a")
                receipt = store.delete_thread("a")
                assert receipt.conversations == 1
                assert store.check().ok
            assert await conversations.load("a") is None
            kept = await conversations.load("other")
            assert kept is not None and kept.messages == turn(1)

    asyncio.run(scenario())


@pytest.mark.pydantic_ai
def test_an_erased_conversations_bytes_count_each_entry_once_however_many_branches_reach_it(
    store_location: str,
) -> None:
    async def scenario() -> tuple[int, int]:
        async with ConversationStore(store_location) as conversations:
            once = Conversation(conversation_id="a", messages=[*turn(1), *turn(2)])
            await conversations.save(once, scope="alice")
            with agui_store.open(store_location) as store:
                before = store.delete_owner("alice", dry_run=True).bytes
            for n in (3, 4, 5):  # three regenerates of the last answer: branches sharing 3
                record = await conversations.read_record("a")
                again = await conversations.branch(
                    "a", at=3, scope="alice", expected_revision=record.revision
                )
                again.messages.append(turn(n)[1])
                await conversations.save(again, scope="alice")
            return before, len((await conversations.read_record("a")).branches)

    linear_bytes, branches = asyncio.run(scenario())
    assert branches == 3
    with agui_store.open(store_location) as store:
        with testing.reading(store) as tx:
            entries = tx.every_conversation_entry()
            texts = {int(pk): str(text) for pk, _hash, text in tx.every_conversation_message()}
            (record,) = tx.every_conversation()
        # Each entry's message once, and the record: what the erasure takes.
        stored = sum(len(texts[int(entry[3])].encode()) for entry in entries)
        stored += len(str(record.record).encode())
        dry = store.delete_owner("alice", dry_run=True)
        done = store.delete_owner("alice")
    assert len(entries) == 7 and linear_bytes < stored
    assert dry.bytes == done.bytes == stored


def _stored_conversation_bytes(location: str) -> tuple[int, dict[str, int]]:
    """The bytes of each stored entry's message, and of each conversation's record."""
    with agui_store.open(location) as store, testing.reading(store) as tx:
        texts = {int(pk): str(text) for pk, _hash, text in tx.every_conversation_message()}
        entries = sum(len(texts[int(e[3])].encode()) for e in tx.every_conversation_entry())
        records = {str(r.conversation_id): len(str(r.record).encode())
                   for r in tx.every_conversation()}
        return entries, records


@pytest.mark.pydantic_ai
def test_an_owners_erasure_counts_the_bytes_that_went_not_the_history_another_owners_fork_keeps(
    store_location: str,
) -> None:
    """Alice's conversation, forked by Bob after two turns, then two forks of her own from
    it: her erasure takes her records and her third turn; the history Bob's fork keeps
    stays and is not counted, and what two of her conversations shared counts once."""
    _saved(store_location, "A", 1, 2, scope="alice")
    _forked(store_location, "A", "B", scope="bob", source_scope="alice")
    _saved(store_location, "A", 3, scope="alice")
    _forked(store_location, "A", "A2", scope="alice", source_scope="alice")
    entries, records = _stored_conversation_bytes(store_location)
    with agui_store.open(store_location) as store:
        dry = store.delete_owner("alice", dry_run=True)
        done = store.delete_owner("alice")
    assert _records(store_location) == ["B"]
    went = entries - _stored_conversation_bytes(store_location)[0] + records["A"] + records["A2"]
    assert (dry.conversations, done.conversations) == (2, 2)
    assert dry.bytes == done.bytes == went


@pytest.mark.pydantic_ai
def test_erased_conversations_stay_erased_through_copies_and_archives(
    new_location: Any, tmp_path: Any
) -> None:
    store_a, replica = new_location(), new_location()
    archive = str(tmp_path / "before.jsonl")

    async def save(location: str) -> None:
        async with ConversationStore(location) as conversations:
            await conversations.save(Conversation(conversation_id="t1", messages=turn(1)))
            await conversations.save(
                Conversation(conversation_id="c-al", messages=turn(2)), scope="al"
            )
            await conversations.save(Conversation(conversation_id="kept", messages=turn(3)))

    def held(location: str) -> list[str]:
        async def listed() -> list[str]:
            async with ConversationStore(location) as conversations:
                return sorted(r.conversation_id for r in await conversations.list_conversations())

        return asyncio.run(listed())

    with agui_store.open(store_a) as store:
        _thread(store, "t1")
    asyncio.run(save(store_a))
    with agui_store.open(store_a) as store:
        store.export_archive(archive)
    copy(store_a, replica)
    with agui_store.open(store_a) as store:
        assert store.delete_thread("t1").conversations == 1
        assert store.delete_owner("al").conversations == 1
    # The replica, older, brings back neither conversation; nor does the older archive.
    copy(replica, store_a)
    assert held(store_a) == ["kept"]
    with agui_store.open(store_a) as store:
        store.import_archive(archive)
    assert held(store_a) == ["kept"]
    # A copy of every thread carries the erasures to the replica, and counts them.
    carried = copy(store_a, replica)
    assert (carried.erased, carried.erased_conversations) == (1, 2)
    assert held(replica) == ["kept"]
    with agui_store.open(replica) as store:
        assert store.check().ok


@pytest.mark.pydantic_ai
def test_a_conversation_saved_again_after_its_erasure_copies_once_and_is_never_erased_by_a_copy(
    new_location: Any,
) -> None:
    here, there = new_location(), new_location()

    async def save(location: str, conversation: Conversation) -> None:
        async with ConversationStore(location) as conversations:
            await conversations.save(conversation)

    def messages(location: str) -> Any:
        async def loaded() -> Any:
            async with ConversationStore(location) as conversations:
                found = await conversations.load("c")
                return None if found is None else found.messages

        return asyncio.run(loaded())

    asyncio.run(save(here, Conversation(conversation_id="c", messages=turn(1))))
    copy(here, there)
    with agui_store.open(here) as store:
        _thread(store, "c", 1)
        assert store.delete_thread("c").conversations == 1
    time.sleep(0.005)  # times are in milliseconds: the new save comes after the erasure
    asyncio.run(save(here, Conversation(conversation_id="c", messages=turn(2))))
    # The first copy erases the version the erasure covered and brings the new one...
    assert copy(here, there).conversations == 1
    assert messages(there) == turn(2)
    # ...and the next finds nothing to do: no erasure, no rewrite.
    assert copy(here, there).conversations == 0
    assert copy(there, here).conversations == 0
    with agui_store.open(there) as store:
        assert [e.verb for e in store.check().erasures] == ["copy"]
    with agui_store.open(here) as store:
        assert [e.verb for e in store.check().erasures] == ["delete_thread"]
    # The destination going on from it keeps its turn: the older source is refused.

    async def go_on(location: str) -> None:
        async with ConversationStore(location) as conversations:
            loaded = await conversations.load("c")
            assert loaded is not None
            loaded.messages.extend(turn(3))
            await conversations.save(loaded)

    asyncio.run(go_on(there))
    with pytest.raises(SyncConflictError, match="the destination moved on from the source"):
        copy(here, there)
    assert messages(there) == [*turn(2), *turn(3)]
    assert copy(there, here).conversations == 1
    assert messages(here) == [*turn(2), *turn(3)]


def _saved(location: str, cid: str, *turns: int, scope: str | None = None) -> None:
    """Save conversation ``cid`` with these turns, or add them to the one stored."""

    async def go() -> None:
        async with ConversationStore(location) as store:
            found = await store.load(cid, scope=scope)
            if found is None:
                found = Conversation(conversation_id=cid, messages=[])
            for n in turns:
                found.messages.extend(turn(n))
            await store.save(found, scope=scope)

    asyncio.run(go())


def _said(location: str, cid: str, scope: str | None = None) -> Any:
    """The messages of conversation ``cid``, or ``None``."""

    async def go() -> Any:
        async with ConversationStore(location) as store:
            found = await store.load(cid, scope=scope)
            return None if found is None else found.messages

    return asyncio.run(go())


def _erasure_verbs(location: str) -> list[str]:
    with agui_store.open(location) as store:
        report = store.check()
    assert report.ok, report.problems
    return [e.verb for e in report.erasures]


@pytest.mark.pydantic_ai
def test_a_conversation_continued_elsewhere_from_an_erased_one_is_erased_where_it_arrives(
    new_location: Any,
) -> None:
    here, there = new_location(), new_location()
    _saved(here, "c", 1)
    copy(here, there)
    with agui_store.open(here) as store:
        _thread(store, "c", 1)
        assert store.delete_thread("c").conversations == 1
    time.sleep(0.005)
    _saved(there, "c", 2)  # continued after the erasure: it holds the erased turn
    copy(here, there)
    assert _said(there, "c") is None
    copy(there, here)
    assert _said(here, "c") is None
    # Nothing is left to carry: copies both ways copy and erase nothing more.
    assert copy(here, there).conversations == copy(there, here).conversations == 0
    assert _erasure_verbs(here) == ["delete_thread"] and _erasure_verbs(there) == ["copy"]


@pytest.mark.pydantic_ai
def test_a_copy_of_one_thread_carries_its_conversations_erasure_and_then_copies_nothing(
    new_location: Any,
) -> None:
    here, there = new_location(), new_location()
    with agui_store.open(here) as store:
        _thread(store, "t", 1)
    _saved(here, "t", 1)
    copy(here, there)
    with agui_store.open(here) as store:
        assert store.delete_thread("t").conversations == 1
    time.sleep(0.005)
    with agui_store.open(here) as store:
        _thread(store, "t", 1)  # the thread and its conversation written again
    _saved(here, "t", 2)
    copy(here, there, thread_id="t")
    assert _said(there, "t") == turn(2)
    for _ in range(2):
        assert copy(there, here).conversations == copy(here, there).conversations == 0
    assert _erasure_verbs(here) == ["delete_thread"] and _erasure_verbs(there) == ["copy"]
    assert _said(here, "t") == _said(there, "t") == turn(2)


@pytest.mark.pydantic_ai
def test_an_owners_erasure_stays_through_a_copy_of_another_owners_scope(
    new_location: Any,
) -> None:
    here, there = new_location(), new_location()
    _saved(here, "c-bob", 1, scope="bob")
    _saved(here, "c-al", 2, scope="al")
    copy(here, there)
    with agui_store.open(here) as store:
        assert store.delete_owner("bob").conversations == 1
    copy(here, there, scope="al")
    assert _said(there, "c-bob", scope="bob") == turn(1)  # another owner's: left alone
    copy(there, here)
    assert _said(here, "c-bob", scope="bob") is None
    copy(here, there)  # a whole copy carries it
    assert _said(there, "c-bob", scope="bob") is None
    assert _said(there, "c-al", scope="al") == turn(2)


@pytest.mark.pydantic_ai
def test_an_archive_restoring_a_conversation_leaves_the_erased_thread_of_its_name_erased(
    new_location: Any, tmp_path: Any
) -> None:
    here, replica = new_location(), new_location()
    archive = str(tmp_path / "talk.jsonl")
    _saved(here, "c", 1)
    with agui_store.open(here) as store:
        store.export_archive(archive)  # the conversation alone: no thread yet
        _thread(store, "c", 2)
    copy(here, replica)
    with agui_store.open(here) as store:
        assert store.delete_thread("c").conversations == 1
        result = store.import_archive(archive, restore_erased=True)
        assert (result.conversations, result.threads) == (1, 0)
    assert _said(here, "c") == turn(1)
    # The thread was not in the archive: it stays erased, and a copy leaves it out.
    assert copy(replica, here).left_erased == 1
    with agui_store.open(here) as store:
        assert store.threads() == []


@pytest.mark.parametrize("value", [None, "no", 0, 1])
def test_a_restore_erased_that_is_not_a_bool_is_refused_before_anything_comes_back(
    new_location: Any, tmp_path: Any, value: Any
) -> None:
    # Read by its truthiness, "no" would bring an erased thread back.
    here, there = new_location(), new_location()
    archive = str(tmp_path / "before.jsonl")
    with agui_store.open(here) as store:
        _thread(store, "t", 2)
        store.export_archive(archive)
    copy(here, there)
    for place in (here, there):
        with agui_store.open(place) as store:
            store.delete_thread("t")
    with agui_store.open(here) as store:  # "t" is back in here only
        store.import_archive(archive, restore_erased=True)
    before = dump(there)
    with agui_store.open(there) as store, pytest.raises(
        ArgumentTypeError, match="restore_erased= must be True or False"
    ):
        store.import_archive(archive, restore_erased=value)
    with pytest.raises(ArgumentTypeError, match="restore_erased= must be True or False"):
        copy(here, there, restore_erased=value)
    assert dump(there) == before


def test_an_archive_refuses_to_restore_an_erased_thread_into_one_written_again_under_its_id(
    new_location: Any, tmp_path: Any
) -> None:
    here = new_location()
    archive = str(tmp_path / "before.jsonl")
    with agui_store.open(here) as store:
        _thread(store, "t", 2)
        store.export_archive(archive)
        store.delete_thread("t")
    time.sleep(0.005)
    with agui_store.open(here) as store:
        store.append(run("t", "new-1", *say("new-m1", "written again")))
        before = dump(here)
        with pytest.raises(SyncConflictError, match="written again in the destination"):
            store.import_archive(archive, restore_erased=True)
    assert dump(here) == before


@pytest.mark.pydantic_ai
def test_a_forced_copy_releases_the_history_the_record_it_replaced_reached(
    new_location: Any,
) -> None:
    here, there = new_location(), new_location()
    _saved(here, "c", 1, scope="al")
    copy(here, there)
    _saved(here, "c", 2, scope="al")
    _saved(there, "c", 3, scope="al")  # both moved on
    with pytest.raises(SyncConflictError, match="both moved on"):
        copy(here, there)
    copy(here, there, force=True)
    assert _said(there, "c", scope="al") == [*turn(1), *turn(2)]
    with agui_store.open(there) as store:
        assert store.check().ok
        assert store.delete_owner("al").conversations == 1
    with owner(there) as conn:
        for table in ("conversation_entries", "conversation_messages"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table


def _forked(location: str, cid: str, new: str, *, scope: str, source_scope: str) -> None:
    async def go() -> None:
        async with ConversationStore(location) as store:
            await store.fork(cid, new_conversation_id=new, scope=scope, source_scope=source_scope)

    asyncio.run(go())


def _records(location: str) -> list[str]:
    async def go() -> list[str]:
        async with ConversationStore(location) as store:
            return sorted(r.conversation_id for r in await store.read_records())

    return asyncio.run(go())


def _origins(location: str) -> dict[str, str | None]:
    """Each conversation's ``forked_from``, by id."""

    async def go() -> dict[str, str | None]:
        async with ConversationStore(location) as store:
            return {r.conversation_id: r.forked_from for r in await store.read_records()}

    return asyncio.run(go())


@pytest.mark.pydantic_ai
def test_an_erased_conversation_whose_messages_a_fork_keeps_stays_erased_and_the_fork_stays(
    new_location: Any, tmp_path: Any
) -> None:
    here, replica, other = new_location(), new_location(), new_location()
    archive = str(tmp_path / "replica.jsonl")
    _saved(here, "A", 1, 2, scope="alice")
    _forked(here, "A", "B", scope="bob", source_scope="alice")  # every entry of A shared
    copy(here, replica)
    copy(here, other)
    with agui_store.open(replica) as store:
        store.export_archive(archive)
    with agui_store.open(here) as store:
        assert store.delete_owner("alice").conversations == 1
    # A stays erased through a copy back and an import; B, another conversation, stays.
    copy(replica, here)
    with agui_store.open(here) as store:
        store.import_archive(archive)
    assert _records(here) == ["B"]
    assert _origins(here) == {"B": None}  # the replica's B named A: it lands naming none
    copy(here, other)
    assert _records(other) == ["B"]
    assert _said(other, "B", scope="bob") == [*turn(1), *turn(2)]


@pytest.mark.pydantic_ai
def test_an_erasure_takes_its_id_off_the_entries_an_earlier_conversation_of_that_id_stored(
    store_location: str,
) -> None:
    """A conversation deleted (not erased) while a fork keeps its history, then saved anew
    under its id: erasing the new one leaves that id on none of the entries the fork kept."""
    _saved(store_location, "secret-id", 1, scope="alice")
    _forked(store_location, "secret-id", "kept", scope="bob", source_scope="alice")

    async def delete() -> None:
        async with ConversationStore(store_location) as store:
            await store.delete("secret-id", scope="alice")

    asyncio.run(delete())
    _saved(store_location, "secret-id", 2, scope="alice")
    with agui_store.open(store_location) as store:
        assert store.delete_owner("alice").conversations == 1
    with agui_store.open(store_location) as store, testing.reading(store) as tx:
        named = {str(entry[5]) for entry in tx.every_conversation_entry()}
    assert named == {"kept"}
    assert _records(store_location) == ["kept"]
    assert _said(store_location, "kept", scope="bob") == turn(1)
    assert _erasure_verbs(store_location) == ["delete_owner"]  # check() holds it clean


@pytest.mark.pydantic_ai
def test_a_fork_made_in_the_destination_alone_stays_when_its_origins_erasure_arrives(
    new_location: Any,
) -> None:
    here, there = new_location(), new_location()
    _saved(here, "A", 1, scope="alice")
    copy(here, there)
    _forked(there, "A", "B", scope="bob", source_scope="alice")
    _saved(there, "B", 5, scope="bob")
    with agui_store.open(here) as store:
        store.delete_owner("alice")
    copy(here, there)
    assert _records(there) == ["B"]  # as the erasure in the store holding both keeps it
    assert _said(there, "B", scope="bob") == [*turn(1), *turn(5)]


@pytest.mark.pydantic_ai
def test_a_copy_from_a_replica_brings_an_erased_conversations_id_back_into_no_fork(
    new_location: Any,
) -> None:
    """A fork names its origin, and an entry the conversation that stored it: the replica's
    fork, older than the one the erasure left, and a fork made in the replica alone land
    naming the erased conversation nowhere, nor do the forks of the replica once the
    erasure is copied to it."""
    here, replica = new_location(), new_location()
    gone = "ConversationIdGone7f3a"
    _saved(here, gone, 1, scope="alice")
    _forked(here, gone, "kept", scope="bob", source_scope="alice")
    _saved(here, gone, 2, scope="alice")  # entries the fork made here does not share
    copy(here, replica)
    _forked(replica, gone, "later", scope="bob", source_scope="alice")
    with agui_store.open(here) as store:
        assert store.delete_owner("alice").conversations == 1
    assert gone not in repr(dump(here))
    landed = copy(replica, here)
    with agui_store.open(here) as store:
        assert checked(store)
        store.purge()
    assert gone not in repr(dump(here))
    assert _origins(here) == {"kept": None, "later": None}
    assert landed.conversations == 1  # "later": "kept" is here as the erasure left it
    assert _said(here, "later", scope="bob") == [*turn(1), *turn(2)]
    assert copy(replica, here).conversations == 0
    copy(here, replica)  # the erasure, carried to the replica
    with agui_store.open(replica) as store:
        assert checked(store)
    assert gone not in repr(dump(replica))
    assert _origins(replica) == {"kept": None, "later": None}
    assert _said(replica, "kept", scope="bob") == turn(1)


@pytest.mark.pydantic_ai
def test_a_forced_copy_releases_what_it_replaced_only_after_every_conversation_landed(
    new_location: Any,
) -> None:
    here, there = new_location(), new_location()
    _saved(here, "A", 1, 2)
    copy(here, there)
    _forked(here, "A", "B", scope=None, source_scope=None)  # B shares A's entries

    async def delete(location: str) -> None:
        async with ConversationStore(location) as store:
            await store.delete("A")

    asyncio.run(delete(here))
    _saved(here, "A", 7)  # saved anew: B alone reaches the old entries
    _saved(there, "A", 3)  # the destination's A moved on
    assert copy(here, there, force=True).conversations == 2
    assert _said(there, "B") == [*turn(1), *turn(2)] and _said(there, "A") == turn(7)
    with agui_store.open(there) as store:
        assert store.check().ok


@pytest.mark.pydantic_ai
def test_a_copy_that_erases_conversations_alone_logs_its_erasure_in_the_destination(
    new_location: Any,
) -> None:
    here, there = new_location(), new_location()
    _saved(here, "A", 1, scope="alice")
    copy(here, there)
    with agui_store.open(here) as store:
        store.delete_owner("alice")
    result = copy(here, there)
    assert result.erased == 0 and _records(there) == []
    assert _erasure_verbs(there) == ["copy"]


@pytest.mark.pydantic_ai
def test_a_copy_of_another_owners_scope_lays_no_tombstone_over_what_it_leaves(
    new_location: Any,
) -> None:
    here, there, laptop = new_location(), new_location(), new_location()
    with agui_store.open(here) as store:
        _thread(store, "t-bob", 1, scope="bob")
        _thread(store, "t-al", 1, scope="al")
    _saved(here, "c-bob", 1, scope="bob")
    copy(here, there)
    copy(here, laptop)
    with agui_store.open(here) as store:
        assert store.delete_owner("bob").threads == 1
    copy(here, there, scope="al")
    # Bob's work, continued elsewhere, still reaches the store the scoped copy left it in.
    with agui_store.open(laptop) as store:
        store.append(run("t-bob", "t-bob-new", *say("m-new", "bob again")), scope="bob")
    _saved(laptop, "c-bob", 2, scope="bob")
    result = copy(laptop, there)
    assert (result.runs, result.conversations, result.left_erased) == (1, 1, 0)
    with agui_store.open(there) as store:
        assert len(store.runs("t-bob")) == 2
    assert _said(there, "c-bob", scope="bob") == turn(1) + turn(2)
    copy(here, there)  # a whole copy carries bob's erasure
    with agui_store.open(there) as store:
        assert store.threads(scope="bob") == []
    assert _said(there, "c-bob", scope="bob") is None


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("thread_owner", ["alice", None])
def test_another_owners_conversation_named_like_the_thread_stays(
    store_location: str, thread_owner: str | None
) -> None:
    """Whether the thread is another owner's or the operator's (no owner)."""

    async def scenario() -> None:
        async with ConversationStore(store_location) as conversations:
            await conversations.save(
                Conversation(conversation_id="x", messages=turn(1)), scope="bob"
            )
            with agui_store.open(store_location) as store:
                _thread(store, "x", 1, scope=thread_owner)
                assert store.delete_thread("x", scope=thread_owner).conversations == 0
            kept = await conversations.load("x", scope="bob")
            assert kept is not None and kept.messages == turn(1)

    asyncio.run(scenario())


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("thread_owner", ["alice", None])
def test_a_copy_or_archive_of_a_thread_carries_the_conversations_its_erasure_would_take(
    new_location: Any, tmp_path: Any, thread_owner: str | None
) -> None:
    """Bob's conversation named like another owner's thread, or the operator's, is not that
    thread's: neither its erasure, nor a copy or an archive of it alone carries it."""
    here, there, restored = new_location(), new_location(), new_location()
    with agui_store.open(here) as store:
        _thread(store, "x", 1, scope=thread_owner)
    _saved(here, "x", 1, scope="bob")
    _saved(here, "x-" + str(thread_owner), 2, scope=thread_owner)
    with agui_store.open(here) as store:
        store.append(
            [{"type": "RUN_STARTED", "threadId": "x", "runId": "x-saves"},
             {"type": "CUSTOM", "name": "pydantic_ai_conversation_saved",
              "value": {"conversation_id": "x-" + str(thread_owner), "entry_ids": []}},
             {"type": "RUN_FINISHED", "threadId": "x", "runId": "x-saves"}],
            scope=thread_owner,
        )
        store.export_archive(str(tmp_path / "x.jsonl"), thread_id="x")
    assert copy(here, there, thread_id="x").conversations == 1
    assert _said(there, "x", scope="bob") is None
    assert _said(there, "x-" + str(thread_owner), scope=thread_owner) == turn(2)
    with agui_store.open(restored) as store:
        assert store.import_archive(str(tmp_path / "x.jsonl")).conversations == 1
    assert _said(restored, "x", scope="bob") is None
    with agui_store.open(here) as store:
        assert store.delete_thread("x", scope=thread_owner).conversations == 1
    assert _said(here, "x", scope="bob") == turn(1)


@pytest.mark.pydantic_ai
def test_a_copy_of_an_erased_thread_leaves_another_owners_conversation_of_its_name(
    new_location: Any,
) -> None:
    """The destination holds alice's thread x and bob's conversation x, both older than
    alice's erasure of x (with her own conversation x) in the source, where she wrote x
    again: a copy of thread x replaces her old thread there, and bob's conversation is not
    hers to take with it."""
    here, there = new_location(), new_location()
    for location in (here, there):
        with agui_store.open(location) as store:
            _thread(store, "x", 1, scope="alice")
    _saved(there, "x", 1, scope="bob")
    _saved(here, "x", 2, scope="alice")
    time.sleep(0.01)  # the erasure is later than every write it covers
    with agui_store.open(here) as store:
        assert store.delete_thread("x", scope="alice").conversations == 1
    time.sleep(0.01)
    with agui_store.open(here) as store:
        store.append(run("x", "x-again", *say("m-again", "again")), scope="alice")
    copy(here, there, thread_id="x")
    with agui_store.open(there) as store:
        assert [r.run_id for r in store.runs("x")] == ["x-again"]
    assert _said(there, "x", scope="bob") == turn(1)


def test_check_reports_a_leaf_run_deleted_by_hand_as_tampering_and_an_erasure_as_none(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _thread(store, "a", runs=2)
        _thread(store, "b", runs=2)
        store.delete_thread("b")
        _thread(store, "c", runs=1)
    assert problems(store_location) == []
    # The newest run of thread a, whole, its search index rows too: no other row names it.
    tamper(
        store_location,
        [
            {
                "sqlite": "DELETE FROM search_pending WHERE run = 2",
                "postgres": "DELETE FROM search_messages WHERE run = 2",
            },
            {
                "sqlite": "DELETE FROM event_log WHERE run = 2",
                "postgres": "DELETE FROM event_pages WHERE run = 2",
            },
            "DELETE FROM batches WHERE run = 2",
            "DELETE FROM lineage_digests WHERE run = 2",
            "DELETE FROM checkpoint_segments WHERE run = 2",  # SQLite's trigger does it too
            "DELETE FROM checkpoints WHERE run = 2",
            "DELETE FROM runs WHERE id = 2",
        ],
    )
    found = problems(store_location)
    assert found[0].startswith("batches: seq 7..12: no event"), found
    # The blobs the deleted checkpoint alone held are left behind: check names those too.
    assert found[1:] and all(
        p.startswith("checkpoints: blob id ") and "no checkpoint refers to it" in p
        for p in found[1:]
    ), found


def test_no_sequence_number_an_erasure_took_is_handed_out_again_so_a_later_cut_shows(
    store_location: str,
) -> None:
    """The newest thread erased, a run written after it would have the erased numbers
    again, and the erasure's range would explain its deletion by hand."""
    with agui_store.open(store_location) as store:
        _thread(store, "a", runs=2)  # seq 1..12
        _thread(store, "newest", runs=1)  # seq 13..18, the end of the log
        store.delete_thread("newest")
        _thread(store, "late", runs=1)
        _thread(store, "after", runs=1)
        assert checked(store)
    late = "(SELECT id FROM runs WHERE run_id = 'late-r0')"
    tamper(  # thread late's only run, whole, with every row that names it
        store_location,
        [
            {
                "sqlite": f"DELETE FROM search_pending WHERE run = {late}",
                "postgres": f"DELETE FROM search_messages WHERE run = {late}",
            },
            {
                "sqlite": f"DELETE FROM event_log WHERE run = {late}",
                "postgres": f"DELETE FROM event_pages WHERE run = {late}",
            },
            *(f"DELETE FROM {table} WHERE run = {late}" for table in (
                "batches", "lineage_digests", "checkpoint_segments", "checkpoints")),
            f"DELETE FROM runs WHERE id = {late}",
        ],
    )  # fmt: skip
    found = problems(store_location)
    assert found and found[0].startswith("batches: seq 19..24: no event"), found


def test_check_reports_checkpoint_segments_deleted_by_hand_but_not_those_an_erasure_took(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _shared(store, "a")
        _shared(store, "b")
        _thread(store, "c", runs=2)
        store.delete_thread("b")
        store.delete_thread("c")
    assert problems(store_location) == []
    # Without its rows, the next erasure would take blobs a-s0's checkpoint still uses.
    tamper(store_location, ["DELETE FROM checkpoint_segments WHERE run = 1"])
    found = problems(store_location)
    assert len(found) == 1 and found[0].startswith(
        "checkpoints: the checkpoint of run 'a-s0' (thread 'a', #1): its tail's blob ids "
    ), found


def test_check_reports_a_blob_no_checkpoint_refers_to_and_a_purge_deletes_it(
    store_location: str,
) -> None:
    """A view's text left in a blob that no checkpoint refers to (as earlier versions left
    some) is out of every erasure's reach: check() names it, and purge() takes it."""
    leftover = b'[{"id":"m","role":"user","content":"a leftover secret"}]'
    address = blobs.digest(leftover).hex()
    with agui_store.open(store_location) as store:
        _thread(store, "a", runs=2)
        before = _reads(store, "a")
    tamper(store_location, [{
        "sqlite": f"INSERT INTO blobs(hash, codec, data) VALUES (X'{address}', 0, "
                  f"X'{leftover.hex()}')",
        "postgres": f"INSERT INTO blobs(hash, codec, data) VALUES ('\\x{address}', 0, "
                    f"'\\x{leftover.hex()}')",
    }])  # fmt: skip
    found = problems(store_location)
    assert len(found) == 1 and found[0].startswith("checkpoints: blob id "), found
    assert "no checkpoint refers to it" in found[0] and "agui-store purge" in found[0]
    with agui_store.open(store_location) as store:
        assert store.purge()
        assert not any(b"leftover" in text for text in _blob_texts(store))
        assert _reads(store, "a") == before
        assert checked(store)


def test_an_erasure_log_entry_deleted_by_hand_is_reported(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        for t in ("a", "b", "c"):
            _thread(store, t, runs=1)
        store.delete_thread("a")
        store.delete_thread("b")
    tamper(store_location, ["DELETE FROM erasures WHERE id = 1"])
    found = problems(store_location)
    assert any(p.startswith("batches: seq 1..6: no event") for p in found), found
    assert any(p.startswith("erasures: erasure #2 (delete_thread") for p in found), found


def test_copy_keeps_an_erased_thread_erased_in_both_directions(new_location: Any) -> None:
    laptop, team = new_location(), new_location()
    with agui_store.open(laptop) as store:
        _thread(store, "a")
        _thread(store, "b")
    copy(laptop, team)
    backup = new_location()
    copy(laptop, backup)
    with agui_store.open(team) as store:
        store.delete_thread("a")
    # The laptop still holds "a": a copy to the team's store does not bring it back...
    result = copy(laptop, team)
    assert result.threads_created == 0
    with agui_store.open(team) as store:
        assert store.threads() == ["b"]
    # ...and a copy back carries the erasure to the laptop.
    copy(team, laptop)
    with agui_store.open(laptop) as store:
        assert store.threads() == ["b"]
        report = store.check()
    assert report.ok and [e.verb for e in report.erasures] == ["copy"]
    # Only the explicit option brings it back from a store that still holds it.
    assert copy(backup, team, thread_id="a").left_erased == 1
    copy(backup, team, restore_erased=True)
    with agui_store.open(team) as store:
        assert store.threads() == ["b", "a"]
        assert store.check().ok


@pytest.mark.pydantic_ai
def test_a_copy_of_one_thread_the_source_erased_carries_its_erasure_and_nothing_else(
    new_location: Any,
) -> None:
    """The thread is gone from the source, its tombstone is not: a copy of that thread
    erases it where it was copied to, with its conversation, and leaves the rest."""
    laptop, team = new_location(), new_location()
    with agui_store.open(laptop) as store:
        _thread(store, "a")
        _thread(store, "b")
    _saved(laptop, "a", 1)
    copy(laptop, team)
    with agui_store.open(team) as store:
        kept = _reads(store, "b")
    with agui_store.open(laptop) as store:
        store.delete_thread("a")
    with pytest.raises(RunNotFoundError, match="no thread 'a'"):  # a tombstone has no owner
        copy(laptop, team, thread_id="a", scope="al")
    result = copy(laptop, team, thread_id="a")
    assert (result.threads, result.erased, result.erased_conversations) == (0, 1, 1)
    assert result.left_erased == 0
    with agui_store.open(team) as store:
        assert store.threads() == ["b"] and _reads(store, "b") == kept
    assert _said(team, "a") is None and _erasure_verbs(team) == ["copy"]
    again = copy(laptop, team, thread_id="a")  # nothing left to carry
    assert (again.erased, again.erased_conversations, again.left_erased) == (0, 0, 0)
    with pytest.raises(RunNotFoundError, match="no thread 'c'"):  # neither held nor erased
        copy(laptop, team, thread_id="c")


def _written_again(location: str, thread: str) -> None:
    """``thread`` erased, then a new thread written under its id."""
    with agui_store.open(location) as store:
        store.delete_thread(thread)
        time.sleep(0.005)  # creation times are in milliseconds: the new thread comes after
        store.append(run(thread, "new-1", *say("new-m1", "written again")))


def test_a_copy_erases_the_thread_an_id_named_before_it_was_written_again(
    new_location: Any,
) -> None:
    laptop, team = new_location(), new_location()
    with agui_store.open(laptop) as store:
        _thread(store, "a")
        _thread(store, "b")
    copy(laptop, team)
    _written_again(laptop, "a")
    result = copy(laptop, team)
    assert (result.erased, result.threads_created, result.left_erased) == (1, 1, 0)
    with agui_store.open(team) as store:
        assert [r.run_id for r in store.runs("a")] == ["new-1"]
        assert store.search("said") == store.search("said", thread_id="b") != []
        report = store.check()
    assert report.ok and [e.verb for e in report.erasures] == ["copy"]
    assert copy(laptop, team).threads_created == 0


def test_a_thread_written_again_under_an_erased_id_copies_back_into_the_store_that_erased_it(
    new_location: Any, tmp_path: Any
) -> None:
    laptop, team = new_location(), new_location()
    with agui_store.open(laptop) as store:
        _thread(store, "a")
    _written_again(laptop, "a")
    copy(laptop, team)
    with agui_store.open(team) as store:
        store.append(run("a", "new-2", *say("new-m2", "and again")), thread_id="a")
    result = copy(team, laptop)
    assert (result.left_erased, result.runs) == (0, 1)
    with agui_store.open(laptop) as store:
        assert [r.run_id for r in store.runs("a")] == ["new-1", "new-2"]
    # An archive of it imports too.
    archive = str(tmp_path / "a.jsonl")
    with agui_store.open(team) as store:
        store.export_archive(archive)
    with agui_store.open(laptop) as store:
        store.delete_thread("a")
        assert store.import_archive(archive).left_erased == 1  # erased after it was written


def test_an_eraser_killed_at_each_step_leaves_all_or_nothing_erased_and_check_sound(
    store_location: str,
) -> None:
    """A real child process erases, stops where it says (agui_store.testing.on_erasure_step)
    and is killed there: before any delete, after every delete but before the commit, after
    the commit but before the purge."""
    with agui_store.open(store_location) as store:
        for t in ("kept", "gone"):
            for i in range(10):
                store.append(run(t, f"{t}-r{i}", *say(f"{t}-m{i}", f"{t} words {i} " * 20)))
        kept = _reads(store, "kept")
    for step, erased in (("selected", False), ("erased", False), ("committed", True)):
        eraser = Worker("eraser", store_location, "gone", step)
        eraser.wait_for("ready")
        eraser.send("go")
        eraser.wait_for(f"at {step}")
        eraser.kill()
        with agui_store.open(store_location) as store:
            assert store.threads() == (["kept"] if erased else ["kept", "gone"]), step
            if not erased:
                assert len(store.runs("gone")) == 10
            assert _reads(store, "kept") == kept
            report = store.check()
            assert report.ok, (step, report.problems)
            assert len(report.erasures) == (1 if erased else 0), step
            if erased:  # the purge the killed eraser never ran
                assert store.purge()


def test_writers_of_other_threads_lose_nothing_while_an_erasure_runs(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        for i in range(60):
            store.append(run("gone", f"g{i}", *say(f"gm{i}", f"gone words {i} " * 20)))
    eraser = Worker("eraser", store_location, "gone")
    eraser.wait_for("ready")
    eraser.send("go")
    eraser.wait_for("begin")
    with agui_store.open(store_location) as store:
        for i in range(30):
            store.append(run("busy", f"b{i}", *say(f"bm{i}", f"busy words {i}")))
    eraser.wait_for("done")
    eraser.finish()
    with agui_store.open(store_location) as store:
        assert store.threads() == ["busy"]
        assert [r.run_id for r in store.runs("busy")] == [f"b{i}" for i in range(30)]
        assert store.check().ok


def test_a_store_that_wrote_a_thread_another_store_erased_appends_to_its_id_anew(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as writer, agui_store.open(store_location) as eraser:
        writer.append(run("t", "r1", *say("m1", "before")))
        writer.append(run("t", "r2", *say("m2", "before")))
        eraser.delete_thread("t")
        writer.append(run("t", "r3", *say("m3", "after")))
        assert [r.run_id for r in writer.runs("t")] == ["r3"]
        assert [m["content"] for m in writer.checkout("r3").messages] == ["after"]
        assert writer.check().ok


def test_a_whole_copy_carries_a_thread_its_source_holds_beside_a_tombstone_of_its_id(
    new_location: Any,
) -> None:
    """A scoped copy carries every tombstone and erases only that owner's threads, so the
    destination may hold another owner's thread under a tombstone of its id: copied on,
    that thread is the source's to give, not an erased one."""
    source, middle, last = new_location(), new_location(), new_location()
    with agui_store.open(source) as store:
        _thread(store, "a", 1, scope="alice")
        _thread(store, "x", 1, scope="bob")
    copy(source, middle)
    with agui_store.open(source) as store:
        store.delete_thread("x")
    copy(source, middle, scope="alice")
    result = copy(middle, last)
    assert (result.threads_created, result.left_erased) == (2, 0)
    with agui_store.open(last) as store:
        assert sorted(store.threads()) == ["a", "x"]


def test_a_copy_of_one_thread_written_again_replaces_the_erased_one_instead_of_joining_it(
    new_location: Any,
) -> None:
    laptop, team = new_location(), new_location()
    with agui_store.open(laptop) as store:
        _thread(store, "a", 2)
    copy(laptop, team)
    _written_again(laptop, "a")
    copy(laptop, team, thread_id="a")
    with agui_store.open(team) as store:
        assert [r.run_id for r in store.runs("a")] == ["new-1"]
        assert store.search("said") == []
        assert store.check().ok
    # Restoring the erased thread from a store that still holds it would join the two.
    backup = new_location()
    with agui_store.open(backup) as store:
        _thread(store, "b", 1)
    copy(backup, team)
    with agui_store.open(team) as store:
        store.delete_thread("b")
    with agui_store.open(team) as store:
        time.sleep(0.005)
        store.append(run("b", "new-b", *say("new-mb", "written again")))
    with pytest.raises(agui_store.SyncConflictError, match="written again in the destination"):
        copy(backup, team, restore_erased=True)


@pytest.mark.pydantic_ai
def test_a_thread_and_a_conversation_of_one_id_keep_their_own_erasure_times(
    new_location: Any,
) -> None:
    source, replica = new_location(), new_location()

    async def save(n: int, scope: str | None = None) -> None:
        async with ConversationStore(source) as conversations:
            await conversations.save(
                Conversation(conversation_id="x", messages=turn(n)), scope=scope
            )

    with agui_store.open(source) as store:
        _thread(store, "x", 1)
    asyncio.run(save(1))
    copy(source, replica)
    with agui_store.open(source) as store:
        store.delete_thread("x")  # the thread and its conversation
    time.sleep(0.005)
    asyncio.run(save(2, scope="bob"))  # the conversation saved again, then the thread
    time.sleep(0.005)
    with agui_store.open(source) as store:
        store.append(run("x", "new-1", *say("new-m1", "written again")))
    time.sleep(0.005)
    with agui_store.open(source) as store:
        store.delete_owner("bob")  # the conversation's tombstone is now later than the thread
    copy(source, replica)
    with agui_store.open(replica) as store:
        assert [r.run_id for r in store.runs("x")] == ["new-1"]


@pytest.mark.pydantic_ai
def test_a_conversation_continued_in_a_replica_after_its_erasure_stays_erased(
    new_location: Any,
) -> None:
    store_a, replica = new_location(), new_location()

    async def first() -> None:
        async with ConversationStore(store_a) as conversations:
            await conversations.save(
                Conversation(conversation_id="c-al", messages=turn(1)), scope="al"
            )

    async def continued() -> None:
        async with ConversationStore(replica) as conversations:
            found = await conversations.load("c-al", scope="al")
            assert found is not None
            found.messages.extend(turn(2))
            await conversations.save(found, scope="al")

    async def held() -> Any:
        async with ConversationStore(store_a) as conversations:
            return await conversations.load("c-al", scope="al")

    asyncio.run(first())
    copy(store_a, replica)
    with agui_store.open(store_a) as store:
        assert store.delete_owner("al").conversations == 1
    time.sleep(0.005)
    asyncio.run(continued())
    copy(replica, store_a)
    assert asyncio.run(held()) is None


def test_a_thread_written_in_its_erasures_own_millisecond_is_a_new_one_to_check_and_to_copy(
    new_location: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One millisecond for every write: the erasure and the thread written again under its
    # id share it, as a fast script's delete and append can.
    monkeypatch.setattr("agui_store.engine.clock.now_ms", lambda: 1_767_225_600_000)
    here, there = new_location(), new_location()
    with agui_store.open(here) as store:
        store.append(run("t", "r1", *say("m1", "erased words")))
        store.delete_thread("t")
        store.append(run("t", "r2", *say("m2", "written again")))
        assert store.check().ok, [str(p) for p in store.check().problems]
    copy(here, there)
    with agui_store.open(there) as store:
        assert [m["content"] for m in store.checkout("r2", thread_id="t").messages] == [
            "written again"
        ]
        assert store.check().ok
