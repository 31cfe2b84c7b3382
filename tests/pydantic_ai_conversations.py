"""What the pydantic-ai conversation tests share: messages, and how two stores' answers compare.

Two stores never agree on ids (entries and revisions are minted by each) or on times, so
answers are compared as what they say: messages, usage, scopes, and each entry id replaced
by the history it ends (what it names, whatever it is called).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RequestUsage,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

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


# --- pydantic-ai's own reference, real agents and every part kind -------------------------------


def round_trip(messages: list[ModelMessage]) -> list[ModelMessage]:
    """What pydantic-ai's own serialization gives back: ``ModelMessagesTypeAdapter``'s JSON
    mode and validation (its ``dump_json`` refuses half an emoji, which a ``str`` holds)."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    dumped = ModelMessagesTypeAdapter.dump_python(messages, mode="json", warnings="error")
    return ModelMessagesTypeAdapter.validate_python(dumped)


def every_part_kind(tag: str = "") -> list[ModelMessage]:
    """A message of each kind holding every part and content type pydantic-ai has, with
    every optional field set somewhere (``tag`` marks each text, to find it in raw bytes).

    Some come back changed from pydantic-ai's own JSON (a ``BinaryAudio`` in a speech part
    as a ``BinaryContent``, a legacy ``RetryPromptPart`` as the part it stands for): compare
    a load with :func:`round_trip`, not with these objects."""
    import warnings
    from datetime import timedelta

    from pydantic_ai import messages as m

    zone = timezone(timedelta(hours=-3, minutes=-30))
    at = datetime(2026, 2, 3, 4, 5, 6, 7, tzinfo=zone)
    naive = datetime(2026, 2, 3, 4, 5, 6, 7)
    png = m.BinaryImage(data=b"\x89PNG\r\n\x1a\n" + bytes(range(256)) + tag.encode(),
                        media_type="image/png")  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated: what a history of 2.x held
        legacy: list[Any] = [
            m.RetryPromptPart(content=f"bad{tag}", tool_name="t", tool_call_id="x", timestamp=at),
            m.RetryPromptPart(content=f"no tool{tag}", timestamp=at),
        ]
    return [
        m.ModelRequest(
            parts=[
                m.SystemPromptPart(f"system{tag}", timestamp=naive, dynamic_ref="d",
                                   metadata={"k": [1]}),
                m.UserPromptPart(
                    [
                        f"look{tag} ✨", m.TextContent(f"text content{tag}", metadata={"m": 1}),
                        m.ImageUrl(url="https://example.com/x.png",
                                   vendor_metadata={"detail": "high"}),
                        m.VideoUrl(url="https://example.com/v.mp4"),
                        m.AudioUrl(url="https://example.com/a.mp3", force_download=True),
                        m.DocumentUrl(url="https://example.com/d.pdf",
                                      media_type="application/pdf", identifier="doc1"),
                        png, m.BinaryAudio(data=b"RIFF....WAVE", media_type="audio/wav"),
                        m.BinaryContent(data=b"%PDF-1.4" + tag.encode(),
                                        media_type="application/pdf"),
                        m.CachePoint(ttl="1h"),
                        m.UploadedFile(file_id="file-1", provider_name="openai",
                                       media_type="image/png"),
                    ],
                    timestamp=at,
                ),
                m.SpeechPart(speaker="user", transcript=f"hello{tag}",
                             audio=m.BinaryAudio(data=b"\x00\x01", media_type="audio/wav"),
                             timestamps=[m.SpeechTimestamp(text="hello", start_ms=0,
                                                           duration_ms=500)]),
                m.ToolAvailabilityDeltaPart(tools_added=["a", "b"], tool_call_id="z"),
                m.CapabilityLoadDeltaPart(loaded=["cap"]),
                m.ModelSettingsDeltaPart(settings={"thinking": "high"}, top_level=True),
                m.InstructionDeltaPart(id=None, content=f"delta{tag}", base_hash="h"),
                m.InstructionBaselinePart(instructions=[
                    m.InstructionPart(f"base{tag}"), m.InstructionDigest(content_hash="abc"),
                ]),
                m.CompactionPart(content=f"summary{tag}", metadata={"x": 1}),
            ],
            timestamp=at, instructions=f"instructions{tag}", run_id="run-1",
            conversation_id="c", metadata={"ü": "ß"},
        ),
        m.ModelResponse(
            parts=[
                m.TextPart(f"cited{tag}", citations=[m.Citation(
                    [m.WebCitationSource("https://w", title="W", excerpts=["e"]),
                     m.DocumentCitationSource(document_id="d")],
                    anchor=m.ContentCitationAnchor(start=0, end=3),
                )]),
                m.ThinkingPart(f"thinking{tag}", signature=f"signature{tag}", id="t",
                               provider_name="anthropic",
                               provider_details={"redacted": True}),
                m.ToolSearchCallPart(args={"queries": ["weather"]}, tool_call_id="ts1"),
                m.NativeToolSearchCallPart(args={"queries": ["x"]}, tool_call_id="nts1",
                                           provider_name="anthropic"),
                m.NativeToolSearchReturnPart(tool_call_id="nts1", timestamp=at,
                                             content={"discovered_tools": [{"name": "w"}]}),
                m.LoadCapabilityCallPart(tool_call_id="lc1", args={"id": "cap"}),
                m.NativeToolCallPart("code_execution", f'{{"code": "1+1 {tag}"}}',
                                     tool_call_id="n2", provider_name="openai"),
                m.NativeToolReturnPart("code_execution", [1, {"b": 2, "a": f"out{tag}"}],
                                       tool_call_id="n2", outcome="failed", timestamp=naive),
                m.FilePart(png, id="f1", provider_name="google"),
                m.SpeechPart(speaker="assistant", transcript=f"hi{tag}", interrupted_at_ms=10),
                m.CompactionPart(content=None),
                m.ToolCallPart("lookup", {"nested": {"z": 1, "a": [True, None, 1.5, -0.0, 1e300]},
                                          "q": f"args{tag}"}, tool_call_id="x"),
                m.ToolCallPart("t2", None, tool_call_id="y"),
            ],
            usage=m.RequestUsage(input_tokens=1, output_tokens=2, cache_write_tokens=3,
                                 cache_read_tokens=4, input_audio_tokens=5, details={"a": 1}),
            model_name="m", model_id="mid", timestamp=at, provider_name="p",
            provider_url="https://p", canonical_system="sys",
            provider_details={"n": {"b": 1, "a": f"details{tag}"}},
            provider_response_id="rid", finish_reason="tool_call", run_id="run-1",
            conversation_id="c", metadata={"m": 1},
            workspace_ref=m.WorkspaceRef(provider="local", id="w1"), history_digest="hd",
            failed_attempts=[m.ModelRequestAttempt(
                model_name="m0", outcome="error", error="boom", timestamp=at,
                duration=timedelta(seconds=1.5),
            )],
        ),
        m.ModelRequest(
            parts=[
                m.ToolSearchReturnPart(tool_call_id="ts1", timestamp=at, content={
                    "discovered_tools": [{"name": "weather"}], "message": "m"}),
                m.LoadCapabilityReturnPart(tool_call_id="lc1", timestamp=at, content={
                    "message": "loaded", "instructions": "use it"}),
                m.ToolReturnPart("lookup", [png, f"returned{tag}", {"k": 2**70}],
                                 tool_call_id="x", metadata={"big": 2**80}, timestamp=at),
                m.ToolReturnPart("t2", "denied", tool_call_id="y", outcome="denied",
                                 timestamp=at),
                m.RetryFeedbackPart(
                    [{"type": "missing", "loc": ("a", 0), "msg": "Field required",
                      "input": {}}],
                    retry=m.RetryInfo(cause="validation_error"), timestamp=at,
                ),
                *legacy,
            ],
            timestamp=at,
        ),
    ]


def scripted_agent() -> Any:
    """A real pydantic-ai ``Agent`` on a scripted ``FunctionModel`` (no network) whose turns
    hold thinking, a native tool's call and return, a tool that asks for a retry, a tool
    returning an image, a file the model made, provider details and usage."""
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(message, ModelResponse) for message in messages) % 3
        if step == 0:
            return ModelResponse(
                parts=[
                    ThinkingPart("let me think ✨", signature="sig==", provider_name="anthropic"),
                    NativeToolCallPart("web_search", {"query": "cats", "b": 1, "a": 2},
                                       tool_call_id="n1", provider_name="openai"),
                    NativeToolReturnPart("web_search", {"results": [1, 2.5, None, "ü"]},
                                         tool_call_id="n1", provider_name="openai"),
                    ToolCallPart("flaky", {"x": 1}, tool_call_id=f"c{len(messages)}"),
                    ToolCallPart("picture", "{}", tool_call_id=f"p{len(messages)}"),
                ],
                usage=RequestUsage(input_tokens=10, output_tokens=5, cache_read_tokens=3,
                                   details={"reasoning_tokens": 2}),
                model_name="scripted", provider_details={"finish": "tool_use", "z": {"y": [1]}},
                provider_response_id=f"r{len(messages)}",
                timestamp=datetime(2026, 3, 4, 5, 6, 7, 891011,
                                   tzinfo=timezone(timedelta(hours=5, minutes=30))),
            )
        if step == 1:
            return ModelResponse(parts=[ToolCallPart("flaky", {"x": 2})])
        return ModelResponse(parts=[
            FilePart(BinaryImage(data=b"\x89PNG\x00\xff" * 50, media_type="image/png")),
            TextPart(f"done 🐈 \u200d ñ \x00 after {len(messages)} messages"),
        ])

    agent = Agent(FunctionModel(model), instructions="be terse")
    tries: dict[int, int] = {}

    @agent.tool_plain
    def flaky(x: int) -> str:
        if x == 1:
            raise ModelRetry("try again with x=2")
        tries[x] = tries.get(x, 0) + 1
        return f"ok {x}"

    @agent.tool_plain
    def picture() -> BinaryContent:
        return BinaryContent(data=b"GIF89a\x00\x01", media_type="image/gif")

    return agent
