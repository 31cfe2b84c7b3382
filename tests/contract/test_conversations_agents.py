"""The store's ConversationStore held against pydantic-ai's own reference, on every backend:
real agents' runs (a scripted ``FunctionModel``) and every part kind pydantic-ai has load back
as its ``ModelMessagesTypeAdapter`` round trip gives them, in every time zone; through an
archive and a copy too; saves racing in one process; and what a save or a read refuses, by
name: a record pydantic-ai could not read back, entries out of order, a record edited
outside the store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import pytest

import agui_store
from agui_store.errors import HashMismatchError, InvalidArgumentError
from tests.backends import checked, dump, owner

# pydantic-ai needs Python 3.11: without it the tests marked pydantic_ai skip
# (tests/conftest.py).
with contextlib.suppress(ImportError):
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationEntry,
        ConversationRecord,
    )
    from pydantic_ai.messages import (
        BinaryContent,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.tools import DeferredToolRequests
    from pydantic_ai.usage import RunUsage

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import (
        T0,
        every_part_kind,
        round_trip,
        scripted_agent,
        turn,
        user,
    )

_T = TypeVar("_T")

pytestmark = pytest.mark.pydantic_ai


def run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coroutine)


# --- what a load gives back -----------------------------------------------------------------


def test_a_real_agents_turns_load_back_as_pydantic_ais_own_round_trip_gives_them(
    store_location: str,
) -> None:
    """Three turns of an agent, each continuing the conversation the store loaded: thinking,
    native tool calls, a tool retry, a tool's image, a file, provider details, usage."""
    agent = scripted_agent()

    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            result = None
            document = BinaryContent(data=b"%PDF-1.4", media_type="application/pdf")
            for prompt in (["look ✨", document], "again", "and once more"):
                loaded = await store.load("c", scope="alice")
                conversation = loaded or Conversation(conversation_id="c")
                result = await agent.run(prompt, conversation=conversation)
                await store.save(result, scope="alice")
                again = await store.load("c", scope="alice")
                assert again is not None
                assert again.messages == round_trip(result.all_messages())
                assert again.usage == result.usage
            assert result is not None
            kinds = {type(p).__name__ for m in result.all_messages() for p in m.parts}
            assert {"ThinkingPart", "NativeToolCallPart", "NativeToolReturnPart", "FilePart",
                    "ToolReturnPart", "UserPromptPart", "TextPart"} <= kinds  # fmt: skip
            assert any(
                getattr(p, "outcome", None) == "retried"
                for m in result.all_messages() for p in m.parts
            )
            assert len(again.messages) == len(result.all_messages()) == 18
            checked(store.store)

    run(scenario())


def test_every_part_kind_loads_back_as_pydantic_ais_own_round_trip_gives_it(
    store_location: str,
) -> None:
    messages = every_part_kind()
    reference = round_trip(messages)

    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=messages))
            loaded = await store.load("c")
            assert loaded is not None and loaded.messages == reference
            assert [m.parts for m in loaded.messages] == [m.parts for m in reference]
            # What a load gave back, saved again as a conversation built anew from it,
            # compares equal to what is stored: nothing new.
            rebuilt = Conversation(conversation_id="c", messages=round_trip(messages),
                                   revision=loaded.revision)  # fmt: skip
            assert await store.save(rebuilt) == []
            checked(store.store)

    run(scenario())


def test_a_history_built_anew_from_objects_pydantic_ais_json_changes_branches_at_them(
    store_location: str,
) -> None:
    """docs/pydantic-ai.md, Limitations: a save compares an unmarked history with the stored
    one by ``==``, and a ``BinaryContent`` of an image comes back from pydantic-ai's own JSON
    a ``BinaryImage``, which is not equal to it. The in-memory store keeps the objects."""
    from pydantic_ai.conversation_store import InMemoryConversationStore

    picture = BinaryContent(data=b"\x89PNG", media_type="image/png")
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(["see", picture], timestamp=T0)], timestamp=T0),
        ModelResponse(parts=[TextPart("a cat")], timestamp=T0),
    ]
    assert round_trip(messages) != messages

    async def saved_anew(store: Any) -> tuple[int, int, int]:
        """New entries of an unmarked save, branches left, and new entries of a marked one."""
        await store.save(Conversation(conversation_id="c", messages=messages))
        loaded = await store.load("c")
        anew = Conversation(conversation_id="c", messages=[*messages, user("more")],
                            revision=loaded.revision)  # fmt: skip
        added = len(await store.save(anew))
        left = len((await store.read_record("c")).branches)
        loaded = await store.load("c")
        loaded.messages.append(user("again"))
        return added, left, len(await store.save(loaded))

    async def scenario() -> None:
        assert await saved_anew(InMemoryConversationStore()) == (1, 0, 1)
        async with ConversationStore(store_location) as store:
            assert await saved_anew(store) == (3, 1, 1)

    run(scenario())


ZONES: list[Any] = [
    None, timezone.utc, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12)),
    timezone(timedelta(hours=5, minutes=45)),
]
with contextlib.suppress(Exception):  # the tz database is not on every machine
    from zoneinfo import ZoneInfo

    ZONES += [ZoneInfo("America/New_York"), ZoneInfo("Australia/Lord_Howe")]
MOMENTS = [
    datetime(2026, 3, 8, 2, 30),  # in no New York day: the clocks skip it
    datetime(2026, 11, 1, 1, 30, fold=1),  # twice in a New York day: the second
    datetime(1, 1, 2),
    datetime(9999, 12, 30, 23, 59, 59, 999999),
    datetime(1969, 12, 31, 23, 59, 59, 999999),
]


def test_timestamps_in_every_time_zone_load_back_as_pydantic_ais_round_trip_gives_them(
    store_location: str,
) -> None:
    histories = []
    for zone in ZONES:
        for moment in MOMENTS:
            at = moment.replace(tzinfo=zone)
            histories.append([
                ModelRequest(parts=[UserPromptPart("when?", timestamp=at)], timestamp=at),
                ModelResponse(parts=[TextPart("then")], timestamp=at),
            ])  # fmt: skip

    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            for n, messages in enumerate(histories):
                await store.save(Conversation(conversation_id=f"c{n}", messages=messages))
            for n, messages in enumerate(histories):
                loaded = await store.load(f"c{n}")
                assert loaded is not None
                reference = round_trip(messages)
                assert loaded.messages == reference
                offsets = [m.timestamp.utcoffset() for m in loaded.messages]
                assert offsets == [m.timestamp.utcoffset() for m in reference]

    run(scenario())


# --- what a save refuses ------------------------------------------------------------------------


#: A record field pydantic-ai could not read back, made when the test runs (pydantic-ai may
#: be missing), and what the error calls it.
UNREADABLE_FIELDS: dict[str, tuple[Any, str]] = {
    "usage None": (lambda: {"usage": None}, r"its usage \(None\)"),
    "usage a dict": (lambda: {"usage": {"requests": 1}}, r"its usage \(a dict\)"),
    "a fraction of a token": (
        lambda: {"usage": RunUsage(input_tokens=1.5)}, r"its usage \(a RunUsage\)"  # type: ignore[arg-type]
    ),
    "details not counts": (
        lambda: {"usage": RunUsage(details={"a": "b"})}, r"its usage \(a RunUsage\)"  # type: ignore[dict-item]
    ),
    "deferred a str": (
        lambda: {"deferred_tool_requests": "call me"}, r"its deferred_tool_requests \(a str\)"
    ),
    "a deferred call not a part": (
        lambda: {"deferred_tool_requests": DeferredToolRequests(calls=[42])},  # type: ignore[list-item]
        r"its deferred_tool_requests \(a DeferredToolRequests\)",
    ),
    "deferred metadata not JSON": (
        lambda: {"deferred_tool_requests": DeferredToolRequests(metadata={"x": {"y": object()}})},
        r"its deferred_tool_requests \(a DeferredToolRequests\)",
    ),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE_FIELDS))
def test_a_record_field_pydantic_ai_could_not_read_back_is_refused_by_name_and_nothing_written(
    store_location: str, case: str
) -> None:
    """Stored, it would fail every later read of the conversation, its delete, and every
    listing of the conversations beside it; pydantic-ai's in-memory store keeps it."""
    make, said = UNREADABLE_FIELDS[case]

    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            await store.save(Conversation(conversation_id="c", messages=turn(1)))
            before = dump(store_location)
            with pytest.raises(InvalidArgumentError, match=(
                rf"^conversation 'd': {said} cannot be saved: pydantic-ai cannot write it as "
                r"JSON it reads back \(.+\); .*nothing was written$"
            )):
                await store.save(Conversation(conversation_id="d", messages=turn(2), **make()))
            assert dump(store_location) == before
            assert [r.conversation_id for r in await store.list_conversations()] == ["c"]

    run(scenario())


def test_new_entries_out_of_order_are_refused_by_name_not_as_a_conflict_a_caller_retries(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with ConversationStore(store_location) as store:
            before = dump(store_location)
            first = ConversationEntry(id="e1", parent_id=None, message=user("one"))
            second = ConversationEntry(id="e2", parent_id="e1", message=user("two"))
            looped = ConversationEntry(id="e3", parent_id="e3", message=user("three"))
            record = ConversationRecord(conversation_id="c", head_id="e2")
            with pytest.raises(InvalidArgumentError, match=(
                r"conversation 'c', new entry 0 \(id 'e2'\): its parent is new entry 1, "
                "which comes after it; new entries are in order"
            )):
                await store.write_record(record, new_entries=[second, first],
                                         expected_revision=None)  # fmt: skip
            with pytest.raises(InvalidArgumentError, match=r"its parent is itself"):
                await store.write_record(
                    ConversationRecord(conversation_id="c", head_id="e3"),
                    new_entries=[looped], expected_revision=None,
                )
            assert dump(store_location) == before
            # In order, they land.
            await store.write_record(record, new_entries=[first, second], expected_revision=None)
            loaded = await store.load("c")
            assert loaded is not None and loaded.messages == [user("one"), user("two")]

    run(scenario())


# --- what a read refuses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE conversations SET record = '{not json'",
        "UPDATE conversations SET record = '{\"usage\": \"lots\"}'",
        "UPDATE conversations SET record = '[]'",
        "UPDATE conversations SET scope = 'mallory'",
        "UPDATE conversations SET head = NULL",
        "UPDATE conversations SET head = (SELECT min(id) FROM conversation_entries)",
    ],
    ids=["its JSON broken", "a field of the wrong type", "its JSON an array", "its scope",
         "its head gone", "its head moved"],
)
def test_a_record_edited_outside_the_store_is_refused_by_every_read_and_erasure_still_takes_it(
    new_location: Any, edit: str
) -> None:
    """Reads verify records as they verify entries: an edited record raised whatever its
    JSON made pydantic fail with (or nothing: a head gone read as an empty conversation)."""
    location = new_location()
    with agui_store.open(location) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "c", "runId": "r"},
                      {"type": "RUN_FINISHED", "threadId": "c", "runId": "r"}])  # fmt: skip

    async def save() -> None:
        async with ConversationStore(location) as store:
            await store.save(Conversation(conversation_id="c", messages=[*turn(1), *turn(2)]))

    run(save())
    with owner(location) as conn:
        conn.execute(edit)

    async def reads() -> None:
        async with ConversationStore(location) as store:
            calls = [store.load("c"), store.read_record("c"), store.list_conversations(),
                     store.load_entries("c"), store.delete("c")]  # fmt: skip
            for call in calls:
                with pytest.raises(HashMismatchError, match=(
                    r"^conversation 'c': its record fails its hash \(its head, scope, "
                    "revision, branches or fields changed\\); the store was changed outside"
                )):
                    await call

    run(reads())
    with agui_store.open(location) as store:
        assert not store.check().ok
        # The thread's erasure takes it; moved to another owner, that owner's erasure does.
        erased = store.delete_thread("c"), store.delete_owner("mallory")
        assert sum(receipt.conversations for receipt in erased) == 1
        checked(store)


# --- races in one process, archives and copies -------------------------------------------------


def test_saves_racing_in_one_process_from_several_stores_lose_no_turn(
    store_location: str,
) -> None:
    """Agents saving turns at once through four ConversationStores on one location: their
    own conversations, and one they share (a conflict is loaded again and retried)."""
    agent = scripted_agent()

    async def turns(store: ConversationStore, cid: str, n: int, scope: str | None) -> int:
        conflicts = 0
        for i in range(n):
            while True:
                loaded = await store.load(cid, scope=scope)
                conversation = loaded or Conversation(conversation_id=cid)
                result = await agent.run(f"{cid} {id(store)} {i}", conversation=conversation)
                try:
                    await store.save(result, scope=scope)
                    break
                except ConversationConflict:
                    conflicts += 1
        return conflicts

    async def scenario() -> None:
        stores = [ConversationStore(store_location) for _ in range(4)]
        try:
            own = await asyncio.gather(
                *(turns(stores[n % 4], f"c{n}", 3, f"user{n % 2}") for n in range(8))
            )
            assert sum(own) == 0
            await asyncio.gather(*(turns(store, "shared", 3, None) for store in stores))
            shared = await stores[0].load("shared")
            assert shared is not None
            prompts = [p.content for m in shared.messages for p in m.parts
                       if isinstance(p, UserPromptPart)]  # fmt: skip
            assert sorted(prompts) == sorted(
                f"shared {id(store)} {i}" for store in stores for i in range(3)
            )
            for n in range(8):
                loaded = await stores[1].load(f"c{n}", scope=f"user{n % 2}")
                assert loaded is not None and len(loaded.messages) == 3 * 6
            listed = await stores[2].list_conversations(scope="user1")
            assert sorted(r.conversation_id for r in listed) == ["c1", "c3", "c5", "c7"]
            checked(stores[3].store)
        finally:
            for store in stores:
                await store.close()

    run(scenario())


async def _everything(location: str) -> dict[str, Any]:
    """Every conversation a store holds, as what it says (its entries' ids and revisions
    copied as they are)."""
    async with ConversationStore(location) as store:
        out = {}
        for record in await store.list_conversations():
            loaded = await store.load_entries(record.conversation_id)
            branches = [await store.read_history(tip) for tip in record.branches]
            out[record.conversation_id] = (record, loaded, branches)
        return out


def test_an_archive_and_a_copy_give_back_every_part_a_real_agent_and_pydantic_ai_made(
    new_location: Any, tmp_path: Path
) -> None:
    source, imported, copied = new_location(), new_location(), new_location()
    agent = scripted_agent()
    messages = every_part_kind()
    with agui_store.open(source) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "agent", "runId": "r"},
                      {"type": "RUN_FINISHED", "threadId": "agent", "runId": "r"}],
                     scope="alice")  # fmt: skip

    async def fill() -> Any:
        async with ConversationStore(source) as store:
            result = await agent.run("look", conversation=Conversation(conversation_id="agent"))
            await store.save(result, scope="alice")
            await store.save(Conversation(conversation_id="parts", messages=messages))
            loaded = await store.load("parts")
            assert loaded is not None
            await store.branch("parts", at=1, expected_revision=loaded.revision)
            await store.fork("agent", at=2, new_conversation_id="fork", scope="bob")
            return result.all_messages()

    ran = run(fill())
    path = str(tmp_path / "all.jsonl")
    with agui_store.open(source) as store:
        assert store.export_archive(path).conversations == 3
    with agui_store.open(imported) as store:
        assert store.import_archive(path).conversations == 3
    assert agui_store.copy(source, copied).conversations == 3
    held = run(_everything(source))
    assert held["agent"][1] is not None
    assert [e.message for e in held["agent"][1]] == round_trip(ran)
    assert [e.message for e in held["parts"][2][0]] == round_trip(messages)
    for other in (imported, copied):
        assert run(_everything(other)) == held
        with agui_store.open(other) as store:
            checked(store)


# --- served over AG-UI --------------------------------------------------------------------------


def _ag_ui_app(conversations: Any) -> Any:
    """pydantic-ai's AG-UI adapter over ``conversations``, for an agent on a scripted
    streaming model: thinking, a tool the server runs, text; an image the user sends."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolReturnPart
    from pydantic_ai.models.function import DeltaThinkingPart, DeltaToolCall, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.routing import Route

    async def model(messages: list[ModelMessage], info: Any) -> Any:
        returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returned:
            yield f"the tool said {returned[0].content}"
            return
        prompts = [p for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        said = prompts[-1].content
        if "tool" in str(said):
            yield {0: DeltaToolCall(name="lookup", json_args='{"q": "x"}')}
            return
        yield {0: DeltaThinkingPart(content="hmm ✨")}
        kinds = said if isinstance(said, str) else [type(c).__name__ for c in said]
        yield f"you said {kinds} ({len(messages)} messages so far)"

    agent = Agent(FunctionModel(stream_function=model))

    @agent.tool_plain
    def lookup(q: str) -> dict[str, Any]:
        return {"found": q, "n": [1, 2]}

    async def chat(request: Any) -> Any:
        return await AGUIAdapter.dispatch_request(
            request, agent=agent, conversation_store=conversations, conversation_scope="alice"
        )

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _as_said(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with each minted id named by when it first appears, and times left out:
    what two servers say alike when they say the same."""
    import re

    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
                                               r"|pyd_ai_[0-9a-f]+", value):  # fmt: skip
        return ids.setdefault(value, f"id{len(ids)}")
    if isinstance(value, dict):
        return {k: _as_said(v, ids) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_as_said(v, ids) for v in value]
    return value


def test_pydantic_ais_ag_ui_adapter_serves_alike_over_this_store_and_its_in_memory_one(
    store_location: str,
) -> None:
    """Turns with an image, a tool the server runs, a regenerate and an edit, recorded by
    the Recorder: the same events streamed, the same history kept (times and minted ids
    aside), and the log's links to the conversation hold."""
    import base64
    import json

    import httpx
    from pydantic_ai.conversation_store import InMemoryConversationStore
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    from agui_store.asgi import Recorder

    image = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
    first = {"id": "u1", "role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "binary", "mimeType": "image/png", "data": image},
    ]}  # fmt: skip
    second = {"id": "u2", "role": "user", "content": "use the tool"}
    edited = {"id": "u2", "role": "user", "content": "use the tool again"}
    runs = [("r1", [first]), ("r2", [first, second]),
            ("r3", [first, second, {"id": "u3", "role": "user", "content": "thanks"}]),
            ("r4", [first]), ("r5", [first, edited])]  # fmt: skip

    async def serve(app: Any) -> list[Any]:
        said: list[Any] = []
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            for run_id, messages in runs:
                body = {"threadId": "t1", "runId": run_id, "state": {}, "tools": [],
                        "context": [], "forwardedProps": {}, "messages": messages}  # fmt: skip
                response = await client.post(
                    "/chat", json=body, headers={"accept": "text/event-stream"}
                )
                assert response.status_code == 200
                events = [json.loads(line[5:]) for line in response.text.splitlines()
                          if line.startswith("data:")]  # fmt: skip
                assert "RUN_ERROR" not in [e["type"] for e in events], events
                said.append(_as_said(events, {}))
        return said

    def kept(messages: list[ModelMessage]) -> Any:
        return _as_said(ModelMessagesTypeAdapter.dump_python(messages, mode="json"), {})

    async def scenario() -> None:
        memory = InMemoryConversationStore()
        in_memory = await serve(_ag_ui_app(memory))
        with agui_store.open(store_location) as store:
            conversations = ConversationStore(store)
            recorder = Recorder(_ag_ui_app(conversations), store=store, scope=lambda _: "alice")
            try:
                assert await serve(recorder) == in_memory
            finally:
                await recorder.aclose()
            reference = await memory.load("t1")
            loaded = await conversations.load("t1", scope="alice")
            assert reference is not None and loaded is not None
            assert kept(loaded.messages) == kept(round_trip(reference.messages))
            record = await conversations.read_record("t1")
            assert record is not None and len(record.branches) == 1
            saved = await conversations.saved_by_run("r5", thread_id="t1")
            assert saved is not None and saved.head_id == record.head_id
            after = await conversations.continued_from("r5", thread_id="t1")
            assert after is not None and after.saved_by == "r4" and not after.diverged
            assert [r.run_id for r in store.runs("t1")] == [run_id for run_id, _ in runs]
            await conversations.close()
            checked(store)

    run(scenario())
