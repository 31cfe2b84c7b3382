"""What the pydantic-ai conversation tests share: messages, and how two stores' answers compare.

Two stores never agree on ids (entries and revisions are minted by each) or on times, so
answers are compared as what they say: messages, usage, scopes, and each entry id replaced
by the history it ends (what it names, whatever it is called).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

#: One fixed time, so that equal texts make equal messages (stored once).
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(content=text, timestamp=T0)])


def reply(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content=text)], timestamp=T0)


def tool_call(name: str, call_id: str) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(tool_name=name, args={"q": name}, tool_call_id=call_id)], timestamp=T0
    )


def tool_return(name: str, call_id: str) -> ModelRequest:
    return ModelRequest(
        parts=[
            ToolReturnPart(tool_name=name, content=f"{name}!", tool_call_id=call_id, timestamp=T0)
        ]
    )


def turn(n: int) -> list[ModelMessage]:
    """A user message and its answer."""
    return [user(f"question {n}"), reply(f"answer {n}")]


async def history_of(store: ConversationStore, entry_id: str | None) -> Any:
    """What an entry id names: the messages of the history it ends (``"gone"``: released)."""
    try:
        return [entry.message for entry in await store.read_history(entry_id)]
    except LookupError:
        return "gone"


async def record_view(store: ConversationStore, record: ConversationRecord) -> dict[str, Any]:
    """A record as what it says, ids, revision and time aside."""
    return {
        "conversation_id": record.conversation_id,
        "head": await history_of(store, record.head_id),
        "usage": record.usage,
        "deferred_tool_requests": record.deferred_tool_requests,
        "scope": record.scope,
        "forked_from": record.forked_from,
        "forked_at": await history_of(store, record.forked_at),
        "branches": [await history_of(store, tip) for tip in record.branches],
        "format_version": record.format_version,
    }


def conversation_view(conversation: Conversation | None) -> Any:
    if conversation is None:
        return None
    return (
        conversation.conversation_id,
        conversation.messages,
        conversation.usage,
        conversation.deferred_tool_requests,
        conversation.new_message_index,
    )


def entries_view(entries: list[ConversationEntry] | None) -> Any:
    """Entries as their messages and how they link: to the entry before in the list (or the
    first one's parent given as whether it has one)."""
    if entries is None:
        return None
    ids = [entry.id for entry in entries]
    return [
        (
            entry.message,
            entry.kind,
            "previous" if n and entry.parent_id == ids[n - 1] else entry.parent_id is not None,
        )
        for n, entry in enumerate(entries)
    ]


def outcome_kind(error: BaseException) -> str:
    """How a call failed, as both stores must fail alike."""
    if isinstance(error, ConversationConflict):
        return "conflict"
    if isinstance(error, UserError):
        return "user error"
    if isinstance(error, LookupError):
        return "not found"
    raise error


def copy_conversation(conversation: Conversation, **changes: Any) -> Conversation:
    return dataclasses.replace(conversation, **changes)
