"""The store's ConversationStore on its own, on every backend: round trips, atomic writes
under racing processes, what a delete releases, content hashes, edits check() finds."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest

import agui_store
from agui_store import testing
from agui_store.errors import ArgumentTypeError, HashMismatchError, InvalidArgumentError
from tests.backends import dump, postgres_owner, tamper
from tests.workers.harness import Worker

# pydantic-ai needs Python 3.11: without it the tests marked pydantic_ai skip
# (tests/conftest.py).
with contextlib.suppress(ImportError):
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationEntry,
        ConversationRecord,
        InMemoryConversationStore,
    )
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.messages import (
        BinaryImage,
        CompactionPart,
        DocumentUrl,
        FilePart,
        ImageUrl,
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        NativeToolCallPart,
        NativeToolReturnPart,
        RetryFeedbackPart,
        RetryInfo,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.tools import DeferredToolRequests
    from pydantic_ai.usage import RequestUsage, RunUsage

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import T0, turn, user

_T = TypeVar("_T")

pytestmark = pytest.mark.pydantic_ai


def run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coroutine)


def every_part() -> list[ModelMessage]:
    """One message of each kind with every part type pydantic-ai has for it, provider
    details and usage included."""
    picture = BinaryImage(data=b"\x89PNG\r\n\x1a\n\x00\x01", media_type="image/png")
    return [
        ModelRequest(
            parts=[
                SystemPromptPart(content="be brief", timestamp=T0),
                UserPromptPart(
                    content=[
                        "what is in these?",
                        ImageUrl(url="https://example.com/cat.png"),
                        DocumentUrl(url="https://example.com/paper.pdf"),
                        picture,
                    ],
                    timestamp=T0,
                ),
            ],
            instructions="answer in French",
            timestamp=T0,
        ),
        ModelResponse(
            parts=[
                ThinkingPart(
                    content="a cat, a paper", signature="sig==", provider_name="anthropic",
                    provider_details={"redacted": False, "budget": [1, 2.5, None]},
                ),
                NativeToolCallPart(
                    tool_name="web_search", args={"query": "cats"}, tool_call_id="native-1",
                    provider_name="openai",
                ),
                NativeToolReturnPart(
                    tool_name="web_search", content={"results": ["a", "b"]},
                    tool_call_id="native-1", provider_name="openai", timestamp=T0,
                ),
                TextPart(content="Un chat. \u00e9\u00e8 \U0001f408", provider_details={"n": 1}),
                FilePart(content=picture, provider_name="google"),
                CompactionPart(content="earlier turns, summed up", provider_name="openai"),
                ToolCallPart(tool_name="lookup", args='{"id": 7}', tool_call_id="call-1"),
            ],
            usage=RequestUsage(input_tokens=120, output_tokens=30, details={"reasoning": 12}),
            model_name="test-model",
            provider_name="test",
            provider_details={"finish": "tool_use", "nested": {"deep": [True]}},
            provider_response_id="resp-1",
            finish_reason="tool_call",
            timestamp=T0,
        ),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    tool_name="lookup", content={"found": [1, 2]}, tool_call_id="call-1",
                    metadata={"ms": 3}, timestamp=T0,
                ),
                ToolReturnPart(
                    tool_name="lookup", content="try again", tool_call_id="call-2",
                    outcome="retried", timestamp=T0,
                ),
                RetryFeedbackPart(
                    content="answer in one word", retry=RetryInfo(cause="no_output"),
                    timestamp=T0,
                ),
            ],
            timestamp=T0,
        ),
    ]


def test_every_part_type_round_trips_as_pydantic_ais_own_serialization_keeps_it(
    store_location: str,
) -> None:
    messages = every_part()
    # pydantic-ai's own round trip is the reference: what its adapter gives back.
    reference = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
    assert reference == messages

    async def scenario() -> Any:
        async with ConversationStore(store_location) as store:
            usage = RunUsage(requests=2, input_tokens=120, output_tokens=30, details={"x": 1})
            waiting = DeferredToolRequests(
                calls=[ToolCallPart(tool_name="ask", args={"q": 1}, tool_call_id="d-1")],
                metadata={"d-1": {"why": "user input"}},
            )
            await store.save(
                Conversation(conversation_id="c", messages=messages, usage=usage,
                             deferred_tool_requests=waiting),
                scope="alice",
            )
            loaded = await store.load("c")
            record = await store.read_record("c")
            return loaded, record, usage, waiting

    loaded, record, usage, waiting = run(scenario())
    assert loaded.messages == messages
    assert [m.parts for m in loaded.messages] == [m.parts for m in messages]
    assert loaded.usage == usage and loaded.deferred_tool_requests == waiting
    assert record.scope == "alice" and record.usage == usage


def test_half_an_emoji_is_saved_and_loaded_as_pydantic_ais_in_memory_store_keeps_it(
    store_location: str,
) -> None:
    # A JavaScript client can split an emoji into two JSON escapes and send one half.
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(content="half \ud83d of it", timestamp=T0)]),
        ModelResponse(parts=[TextPart(content="and \ude00 here")], timestamp=T0),
    ]

    async def scenario() -> tuple[Any, Any]:
        reference = InMemoryConversationStore()
        await reference.save(Conversation(conversation_id="c", messages=messages))
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=messages))
            return (await reference.load("c")).messages, (await store.load("c")).messages

    reference, loaded = run(scenario())
    assert loaded == reference == messages
    with agui_store.open(store_location) as store:
        assert store.check().ok


def test_identical_messages_are_stored_once_and_each_history_keeps_its_own_entries(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            for cid in ("a", "b"):
                await store.save(Conversation(conversation_id=cid, messages=[*turn(1), *turn(1)]))
            a = await store.load_entries("a")
            b = await store.load_entries("b")
            assert [e.message for e in a] == [e.message for e in b] == [*turn(1), *turn(1)]
            assert not {e.id for e in a} & {e.id for e in b}

    run(scenario())
    with agui_store.open(store_location) as store, testing.reading(store) as tx:
        assert len(tx.every_conversation_entry()) == 8
        assert len(tx.every_conversation_message()) == 2


def test_load_with_a_limit_reads_the_last_entries_of_a_long_history(store_location: str) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            messages = [m for n in range(30) for m in turn(n)]
            await store.save(Conversation(conversation_id="c", messages=messages))
            assert (await store.load("c", limit=5)).messages == messages[-5:]
            assert (await store.load("c", limit=0)).messages == []
            assert (await store.load("c", limit=100)).messages == messages
            head = (await store.read_record("c")).head_id
            assert [e.message for e in await store.read_history(head, limit=3)] == messages[-3:]
            with pytest.raises(LookupError):
                await store.read_history("no-such-entry")

    run(scenario())


def test_an_async_store_and_a_sync_store_serve_the_same_conversations(store_location: str) -> None:
    async def scenario() -> None:
        async with agui_store.aio.open(store_location, writer="thread") as astore:
            via_async = ConversationStore(astore)
            await via_async.save(Conversation(conversation_id="c", messages=turn(1)))
            with agui_store.open(store_location) as sync:
                via_sync = ConversationStore(sync)
                assert (await via_sync.load("c")).messages == turn(1)
                await via_sync.close()
            await via_async.close()

    run(scenario())


# --- atomic writes ------------------------------------------------------------------------------


def test_a_stale_save_raises_a_conflict_and_writes_nothing(store_location: str) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            first = await store.load("c")
            second = await store.load("c")
            first.messages.extend(turn(2))
            await store.save(first)
            before = dump(store_location)
            second.messages.extend(turn(3))
            with pytest.raises(ConversationConflict):
                await store.save(second)
            assert dump(store_location) == before

    run(scenario())


def test_a_write_onto_an_entry_a_delete_released_conflicts_and_writes_nothing(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            head = (await store.read_record("c")).head_id
            await store.delete("c")
            before = dump(store_location)
            entry = ConversationEntry(parent_id=head, message=user("late"))
            record = ConversationRecord(conversation_id="d", head_id=entry.id)
            with pytest.raises(ConversationConflict):
                await store.write_record(record, new_entries=[entry], expected_revision=None)
            fork = ConversationRecord(conversation_id="e", head_id=head)
            with pytest.raises(ConversationConflict):
                await store.write_record(fork, expected_revision=None)
            assert dump(store_location) == before

    run(scenario())


def test_an_entry_id_stored_already_is_refused_by_name_and_nothing_is_written(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            entries = await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            again = ConversationEntry(id=entries[0].id, parent_id=None, message=user("x"))
            record = ConversationRecord(conversation_id="d", head_id=again.id)
            with pytest.raises(InvalidArgumentError, match=f"new entry 0: entry '{again.id}'"):
                await store.write_record(record, new_entries=[again], expected_revision=None)
            assert dump(store_location) == before

    run(scenario())


def test_an_id_or_scope_holding_a_nul_is_refused_on_every_backend_and_nothing_is_written(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            with pytest.raises(InvalidArgumentError, match=r"conversation 'x\\x00y': its id "
                               r"holds a NUL character .*; nothing was written"):
                await store.save(Conversation(conversation_id="x\x00y", messages=turn(1)))
            with pytest.raises(InvalidArgumentError, match="conversation 'd': its scope holds"):
                await store.save(Conversation(conversation_id="d", messages=turn(1)),
                                 scope="a\x00b")
            entry = ConversationEntry(id="e\x00", parent_id=None, message=user("x"))
            record = ConversationRecord(conversation_id="d", head_id=entry.id)
            with pytest.raises(InvalidArgumentError, match="its head holds a NUL"):
                await store.write_record(record, new_entries=[entry], expected_revision=None)
            assert dump(store_location) == before

    run(scenario())


def test_reads_by_an_id_that_is_not_text_find_nothing_as_pydantic_ais_own_store_does(
    store_location: str,
) -> None:
    async def scenario() -> None:
        memory = InMemoryConversationStore()
        async with ConversationStore(store_location) as store:
            for each in (memory, store):
                await each.save(Conversation(conversation_id="c", messages=turn(1)))
                for wrong in (5, b"c", None):
                    assert await each.read_record(wrong) is None  # type: ignore[arg-type]
                    assert await each.read_records(scope=wrong) == (  # type: ignore[arg-type]
                        [] if wrong is not None else await each.read_records()
                    )
                for wrong in (5, b"c"):
                    with pytest.raises(LookupError):
                        await each.read_entry(wrong)  # type: ignore[arg-type]
                    with pytest.raises(LookupError):
                        await each.read_history(wrong)  # type: ignore[arg-type]
            with pytest.raises(LookupError):
                await store.run_of_entry(5)  # type: ignore[arg-type]

    run(scenario())


def test_a_limit_that_is_no_count_is_refused_by_name_on_every_backend(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            (*_, head) = await store.save(Conversation(conversation_id="c", messages=turn(2)))
            for wrong in (-1, 1.5, "2", True):
                with pytest.raises(InvalidArgumentError, match="limit must be an integer >= 0"):
                    await store.read_history(head.id, limit=wrong)  # type: ignore[arg-type]
                with pytest.raises(InvalidArgumentError, match="limit must be an integer >= 0"):
                    await store.read_records(limit=wrong)  # type: ignore[arg-type]
            everything = await store.read_history(head.id)
            assert await store.read_history(head.id, limit=2**70) == everything
            assert len(await store.read_records(limit=2**70)) == 1

    run(scenario())


def test_a_limit_or_at_that_is_no_integer_is_refused_by_name_at_pydantic_ais_own_calls(
    store_location: str,
) -> None:
    """pydantic-ai's load, list_conversations, branch and fork compare a count with 0 (or
    slice with it) before the store sees it, where a count of another type would be a bare
    TypeError that names nothing."""
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(2)))
            loaded = await store.load("c")
            assert loaded is not None
            revision = loaded.revision
            before = dump(store_location)
            calls: list[tuple[str, Callable[[Any], Awaitable[object]]]] = [
                ("limit", lambda wrong: store.load("c", limit=wrong)),
                ("limit", lambda wrong: store.load_entries("c", limit=wrong)),
                ("limit", lambda wrong: store.list_conversations(limit=wrong)),
                ("at", lambda wrong: store.branch("c", at=wrong, expected_revision=revision)),
                ("at", lambda wrong: store.fork("c", at=wrong, new_conversation_id="f")),
            ]
            for wrong in ("2", 1.5, True, [1]):
                for name, call in calls:
                    with pytest.raises(ArgumentTypeError, match=f"^{name} must be None or an"):
                        await call(wrong)
            assert dump(store_location) == before
            with pytest.raises(UserError, match="`limit` must not be negative"):
                await store.load("c", limit=-1)  # as pydantic-ai's own store says it

    run(scenario())


def test_a_tool_return_pydantic_cannot_write_is_refused_naming_its_entry_and_nothing_is_written(
    store_location: str,
) -> None:
    unwritable = ModelRequest(parts=[ToolReturnPart(
        tool_name="lookup", content=object(), tool_call_id="c1", timestamp=T0)])

    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            with pytest.raises(InvalidArgumentError, match="cannot be saved: pydantic-ai cannot "
                               "write its message as JSON"):
                await store.save(Conversation(conversation_id="d",
                                              messages=[*turn(1), unwritable]))
            assert dump(store_location) == before

    run(scenario())


def test_a_message_pydantic_ai_could_not_read_back_is_refused_by_entry_and_nothing_is_written(
    store_location: str,
) -> None:
    # Each would be stored, and every later load of the conversation would fail validating it.
    wrong: list[tuple[Any, str]] = [
        ([*turn(1), 42], "an int"),
        ([None], "None"),
        ([{"kind": "request", "parts": []}], "a dict"),
        ([ModelRequest(parts=[42])], "a ModelRequest"),  # type: ignore[list-item]
    ]

    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            for messages, what in wrong:
                with pytest.raises(InvalidArgumentError, match=(
                    rf"conversation 'd', new entry \d \(id '[^']+'\): its message \({what}\) "
                    "cannot be saved: pydantic-ai cannot write its message as JSON it reads back"
                )):
                    await store.save(Conversation(conversation_id="d", messages=messages))
            assert dump(store_location) == before
            assert (await store.load("c")).messages == turn(1)

    run(scenario())


@pytest.mark.parametrize(
    ("conversation_id", "scope", "said"),
    [
        ("d", 5, r"conversation 'd': its scope is an int \(5\), not text"),
        (7, None, r"conversation 7: its id is an int \(7\), not text"),
        # As the store's every scope: an owner "" no erasure could name.
        ("d", "", r"conversation 'd': its scope is empty.*"),
    ],
    ids=["a scope not text", "an id not text", "an empty scope"],
)
def test_a_save_under_an_id_or_scope_no_store_could_hold_is_refused_by_name_and_writes_nothing(
    store_location: str, conversation_id: Any, scope: Any, said: str
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            with pytest.raises(InvalidArgumentError, match=f"{said}; nothing was written"):
                await store.save(
                    Conversation(conversation_id=conversation_id, messages=turn(1)), scope=scope
                )
            assert dump(store_location) == before

    run(scenario())


def test_a_stored_conversation_saved_under_a_scope_no_store_holds_is_refused_not_a_conflict(
    store_location: str,
) -> None:
    """A conflict tells the caller to load again and retry, which would conflict forever: the
    scope is refused by name, nothing is written, and the same conversation saves after."""
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            loaded = await store.load("c")
            assert loaded is not None
            loaded.messages.extend(turn(2))
            before = dump(store_location)
            for scope, error, said in [
                (5, ArgumentTypeError, r"its scope is an int \(5\), not text"),
                ("", InvalidArgumentError, "its scope is empty"),
                ("a\x00b", InvalidArgumentError, "its scope holds a NUL"),
            ]:
                with pytest.raises(error, match=f"conversation 'c': {said}"):
                    await store.save(loaded, scope=scope)
            for wrong in (None, "c", turn(2)):
                with pytest.raises(ArgumentTypeError, match="takes a pydantic-ai Conversation"):
                    await store.save(wrong)  # type: ignore[arg-type]
            assert dump(store_location) == before
            await store.save(loaded)
            again = await store.load("c")
            assert again is not None and again.messages == [*turn(1), *turn(2)]

    run(scenario())


def test_a_conversation_whose_messages_are_no_list_is_refused_by_name_and_nothing_written(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            wrong = [(None, "None"), (5, "an int"), ("hi", "a str"), (b"x", "a bytes")]
            for messages, kind in wrong:
                with pytest.raises(
                    ArgumentTypeError, match=f"conversation 'new': its messages are {kind}, not"
                ):
                    await store.save(Conversation(conversation_id="new", messages=messages))
            assert dump(store_location) == before
            assert await store.load("new") is None

    run(scenario())


@pytest.mark.parametrize(
    ("field", "value", "error", "said"),
    [
        ("kind", "a\x00b", InvalidArgumentError, "kind holds a NUL"),
        ("kind", "k" * 3000, InvalidArgumentError, "kind is 3,000 bytes long"),
        ("kind", 5, ArgumentTypeError, r"kind is an int \(5\), not text"),
        ("kind", None, ArgumentTypeError, "kind is None, not text"),
        ("id", None, ArgumentTypeError, "id is None, not text"),
    ],
    ids=["a NUL in a kind", "a kind longer than an id", "a kind not text", "no kind", "no id"],
)
def test_an_entry_whose_id_or_kind_no_store_could_hold_is_refused_by_name_and_writes_nothing(
    store_location: str, field: str, value: Any, error: type[Exception], said: str
) -> None:
    """A kind is held as an id is, on every backend, as a copy holds it: SQLite alone would
    store a NUL or a long kind that PostgreSQL and a copy refuse, and a kind or an id that
    is no text is named, not met as a constraint."""
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            entry = ConversationEntry(parent_id=None, message=user("hello"), **{field: value})
            record = ConversationRecord(conversation_id="d", head_id=entry.id)
            with pytest.raises(error, match=f"conversation 'd': its new entry 0's {said}"):
                await store.write_record(record, new_entries=[entry], expected_revision=None)
            assert dump(store_location) == before

    run(scenario())


def test_a_write_record_given_no_record_or_no_entries_is_refused_by_name_and_writes_nothing(
    store_location: str,
) -> None:
    """Each is named at the call, where an AttributeError or a TypeError from inside the
    store would say neither what nor where."""
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            record = ConversationRecord(conversation_id="d", head_id=None)
            entry = ConversationEntry(parent_id=None, message=user("hello"))
            wrong: list[tuple[Any, Any, str]] = [
                (None, (), "write_record takes a pydantic-ai ConversationRecord, not None"),
                ({"conversation_id": "d"}, (), "ConversationRecord, not a dict"),
                (ConversationRecord(conversation_id="d", head_id=None, branches=None), (),
                 "conversation 'd': its branches are None, not a list of entry ids"),
                (record, [entry, None], "conversation 'd': its new entry 1 is None, not a "
                 "pydantic-ai ConversationEntry"),
                (record, "ab", "conversation 'd': its new entries are a str, not a list of"),
                (record, 5, "conversation 'd': its new entries are an int, not a list of"),
            ]
            for given, entries, said in wrong:
                with pytest.raises(ArgumentTypeError, match=said):
                    await store.write_record(given, new_entries=entries, expected_revision=None)
            assert dump(store_location) == before

    run(scenario())


def _workers(mode: str, location: str, names: list[str], *args: str) -> list[list[str]]:
    workers = [Worker("pydantic_ai_saver", mode, location, name, *args) for name in names]
    for worker in workers:
        worker.wait_for("spawned", timeout=120)
    for worker in workers:
        worker.send("go")
    out = [worker.finish(timeout=300) for worker in workers]
    errors = [line for lines in out for line in lines if line.startswith("error")]
    assert errors == []
    return out


def test_processes_racing_on_one_revision_leave_exactly_one_winner_and_nothing_else(
    store_location: str,
) -> None:
    async def setup() -> tuple[str, str]:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="shared", messages=turn(0)))
            record = await store.read_record("shared")
            return record.revision, record.head_id

    revision, head = run(setup())
    names = [f"p{n}" for n in range(4)]
    out = _workers("race", store_location, names, "--revision", revision, "--head", head)
    said = [next(line for line in lines if line in ("won", "conflict")) for lines in out]
    assert sorted(said) == ["conflict"] * 3 + ["won"]
    winner = names[said.index("won")]

    async def after() -> None:
        async with ConversationStore(store_location) as store:
            assert (await store.load("shared")).messages == [*turn(0), user(f"{winner} wins")]
            assert store.store.check().ok
            with testing.reading(store.store) as tx:
                assert len(tx.every_conversation_entry()) == 3  # the losers left no entry

    run(after())


def test_processes_saving_turns_of_one_conversation_at_once_lose_no_turn(
    store_location: str,
) -> None:
    run(_save_first(store_location))
    names = [f"p{n}" for n in range(3)]
    saves = 6
    out = _workers("turns", store_location, names, "--saves", str(saves))
    conflicts = sum(
        json.loads(line)["conflicts"]
        for lines in out for line in lines if line.startswith("{")
    )

    async def after() -> None:
        async with ConversationStore(store_location) as store:
            loaded = await store.load("shared")
            said = [m.parts[0].content for m in loaded.messages[2:]]
            assert sorted(said) == sorted(f"{n} {i}" for n in names for i in range(saves))
            for name in names:  # each process's turns in the order it saved them
                own = [s for s in said if s.startswith(f"{name} ")]
                assert own == [f"{name} {i}" for i in range(saves)]
            report = store.store.check()
            assert report.ok, [str(p) for p in report.problems]

    run(after())
    print(f"\n{len(names)} processes x {saves} saves: {conflicts} conflicts retried")


async def _save_first(location: str) -> None:
    async with ConversationStore(location) as store:
        await store.save(Conversation(conversation_id="shared", messages=turn(0)))


# --- delete ---------------------------------------------------------------------------------------


def test_delete_releases_what_no_remaining_record_reaches_and_keeps_what_a_fork_shares(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="a", messages=[*turn(1), *turn(2)]))
            a = await store.load("a")
            branched = await store.branch("a", at=2, expected_revision=a.revision)
            branched.messages.extend(turn(3))
            await store.save(branched)
            entries = {e.message.parts[0].content: e.id for e in await store.load_entries("a")}
            left = (await store.read_record("a")).branches
            await store.fork("a", at=1, new_conversation_id="b")
            await store.delete("a")
            # The fork keeps the first message, and nothing else of "a".
            assert (await store.load("b")).messages == [user("question 1")]
            await store.read_entry(entries["question 1"])
            for gone in [entries["answer 1"], entries["question 3"], *left]:
                with pytest.raises(LookupError) as missing:
                    await store.read_entry(gone)
                assert type(missing.value).__name__ == "EntryNotFoundError"
            with testing.reading(store.store) as tx:
                assert len(tx.every_conversation_entry()) == 1
                assert len(tx.every_conversation_message()) == 1
            assert store.store.check().ok
            await store.delete("b")
            with testing.reading(store.store) as tx:
                assert tx.every_conversation_entry() == tx.every_conversation_message() == []

    run(scenario())


def test_an_entry_a_fork_keeps_names_the_fork_once_its_conversation_is_deleted(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="a", messages=[*turn(1), *turn(2)]))
            first = (await store.load_entries("a"))[0]
            await store.fork("a", at=1, new_conversation_id="c")
            await store.fork("a", at=1, new_conversation_id="b")
            await store.delete("a")
            # A new conversation of the deleted one's id stored none of the fork's history.
            await store.save(Conversation(conversation_id="a", messages=turn(5)))
            with testing.reading(store.store) as tx:
                stored = {row[1]: row[5] for row in tx.every_conversation_entry()}
            assert stored[first.id] == "b"  # the first by id of those that keep it
            assert {stored[e.id] for e in await store.load_entries("a")} == {"a"}
            assert store.store.check().ok

    run(scenario())


def test_delete_matches_pydantic_ais_in_memory_store_on_what_it_releases(
    store_location: str,
) -> None:
    """The same operations on both stores release the same entries."""

    async def scenario(store: Any) -> tuple[list[Any], int]:
        """What "b" holds after the deletes, and how many of every entry written still read."""
        await store.save(Conversation(conversation_id="a", messages=[*turn(1), *turn(2)]))
        await store.fork("a", at=3, new_conversation_id="b")
        await store.fork("a", at=1, new_conversation_id="c")
        written = {e.id for c in ("a", "b", "c") for e in await store.load_entries(c)}
        await store.delete("a")
        await store.delete("c")
        kept = 0
        for entry_id in written:
            try:
                await store.read_entry(entry_id)
            except LookupError:  # pydantic-ai's KeyError, the store's EntryNotFoundError
                continue
            kept += 1
        return [e.message for e in await store.load_entries("b")], kept

    async def both() -> None:
        mem = InMemoryConversationStore()
        async with ConversationStore(store_location) as db:
            ours = await scenario(db)
            assert await scenario(mem) == ours and ours[1] == 3
            with testing.reading(db.store) as tx:
                assert len(tx.every_conversation_entry()) == 3

    run(both())


# --- check() ------------------------------------------------------------------------------------


def _edit(location: str, backend: str, statement: str) -> None:
    """An edit made outside agui-store, by the database's owner."""
    if backend == "postgres":
        with postgres_owner(location) as conn:
            conn.execute(statement)
    else:
        import apsw

        conn = apsw.Connection(location)
        conn.execute(statement)
        conn.close()


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        (
            "UPDATE conversation_messages SET message = replace(message, 'answer 2', 'answer X')",
            "fails its content hash",
        ),
        (
            "UPDATE conversation_entries SET parent = parent - 1 WHERE parent > 1",
            "fails its hash: its id, kind, message or parent",
        ),
        ("UPDATE conversations SET scope = 'mallory'", "its record fails its hash"),
        (
            "UPDATE conversation_entries SET kind = 'other' WHERE entry_id = "
            "(SELECT max(entry_id) FROM conversation_entries)",
            "fails its hash",
        ),
    ],
    ids=["a message's text", "an entry's parent", "a record's scope", "an entry's kind"],
)
def test_check_names_a_conversation_edited_outside_the_store(
    store_location: str, backend: str, edit: str, found: str
) -> None:
    async def save() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=[*turn(1), *turn(2)]))

    run(save())
    with agui_store.open(store_location) as store:
        assert store.check().ok
    _edit(store_location, backend, edit)
    with agui_store.open(store_location) as store:
        report = store.check()
    problems = [str(p) for p in report.problems]
    assert not report.ok and any(found in p for p in problems), problems
    assert all(p.startswith("conversations") or "conversation" in p for p in problems), problems


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE conversation_messages SET message = replace(message, 'answer 1', 'answer X')",
        "UPDATE conversation_entries SET kind = 'other'",
        "UPDATE conversation_entries SET parent = NULL",
    ],
    ids=["a message's text", "an entry's kind", "an entry's parent"],
)
def test_a_load_refuses_a_history_edited_outside_the_store(
    store_location: str, backend: str, edit: str
) -> None:
    async def save() -> str | None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=[*turn(1), *turn(2)]))
            return (await store.read_record("c")).head_id

    head = run(save())
    _edit(store_location, backend, edit)

    async def load() -> None:
        async with ConversationStore(store_location) as store:
            with pytest.raises(HashMismatchError, match="conversation entry"):
                await store.load("c")
            with pytest.raises(HashMismatchError, match="conversation entry"):
                for entry in await store.read_history(head):
                    await store.read_entry(entry.id)

    run(load())


@pytest.mark.parametrize("lost", [0, 1, 3], ids=["the first", "a middle", "the head"])
def test_a_load_refuses_a_history_whose_message_row_was_deleted_instead_of_skipping_it(
    store_location: str, lost: int
) -> None:
    async def save() -> list[str]:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=[*turn(1), *turn(2)]))
            return [entry.id for entry in await store.load_entries("c") or []]

    ids = run(save())
    tamper(
        store_location,
        [
            "DELETE FROM conversation_messages WHERE id = (SELECT message FROM "
            f"conversation_entries WHERE entry_id = '{ids[lost]}')"
        ],
    )

    async def load() -> None:
        async with ConversationStore(store_location) as store:
            for limit in (None, 4 - lost):
                with pytest.raises(HashMismatchError, match=f"entry '{ids[lost]}'.*not stored"):
                    await store.load("c", limit=limit)
            with pytest.raises(HashMismatchError, match=f"entry '{ids[lost]}'.*not stored"):
                await store.read_entry(ids[lost])
            if lost < 3:  # a window that ends before the lost message reads as it was
                window = await store.load_entries("c", limit=3 - lost)
                assert [entry.id for entry in window or []] == ids[lost + 1 :]

    run(load())
