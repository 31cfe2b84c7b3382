"""The AG-UI 1.0 event model: msgspec structs for every event, message and part, and validation.

The structs mirror ``ag_ui.core`` 1.0.0 (same class names, snake_case attributes, camelCase on
the wire) and the zod schemas of ``@ag-ui/core`` 1.0.0 (same required fields and kinds). They are
*views*: the store keeps the producer's bytes, and
:func:`agui_store.protocol.validate.validate_event` only decides whether an event may be kept
(the rules below are what it checks).

Leniency, calibrated against the official client (``@ag-ui/client`` 1.0.0), whose inbound
pipeline is ``CompatibilityBoundary`` then ``enforceEvents`` (zod):

* Unknown event types and unknown fields are accepted (a newer protocol). ``enforceEvents`` drops
  or strips them with a warning; a store keeps them.
* An unknown *member* of a discriminated union (a message ``role``, content part ``type``, part
  source ``type``, patch ``op`` or outcome ``type`` that 1.0 does not know, e.g. the retired
  ``{"type": "binary"}`` part) is accepted without looking inside: ``enforceEvents`` strips such a
  member rather than failing. A *missing* or non-string discriminator is rejected: that is a
  broken object, not a newer one (``enforceEvents`` would silently drop it; we refuse to).
* ``null`` is accepted exactly where the client's always-on ``CompatibilityBoundary`` turns it
  into absence before validation: ``rawEvent``; ``result`` of ``RUN_FINISHED`` and
  ``SUBAGENT_FINISHED``; ``parentMessageId`` of ``TOOL_CALL_START`` and ``TOOL_CALL_CHUNK``;
  ``RUN_FINISHED.outcome``; ``metadata`` of media content parts; and, inside a
  ``RunAgentInput``, ``state``, ``forwardedProps``, ``tools[].parameters`` and
  ``resume[].payload``. Everywhere else an optional field is absent or of its kind, never
  ``null`` (zod and the cross-SDK null-omission rule).
* The 0.x ``THINKING_*`` events are accepted and validated against their 0.x shape (the client
  converts them to ``REASONING_*``).
* Integers (``timestamp``, token counts) are JSON numbers with an integral value inside
  ``±(2**53 - 1)``, as zod's ``z.int()`` and ``ag_ui.core`` say: ``1.0`` is an integer (JavaScript
  cannot tell it from ``1``), ``1.5``, ``true`` and ``"1"`` are not.
"""

from typing import Annotated, Any, ClassVar, Literal, get_args

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = [
    "EVENT_STRUCTS",
    "EVENT_TYPES",
    "LEGACY_EVENT_TYPES",
    "MAX_SAFE_INTEGER",
    "ActivityDeltaEvent",
    "ActivityMessage",
    "ActivitySnapshotEvent",
    "AddOperation",
    "AguiStruct",
    "AssistantMessage",
    "AudioPart",
    "BaseEvent",
    "BaseMessage",
    "ContentPart",
    "Context",
    "CopyOperation",
    "CustomEvent",
    "DataSource",
    "DeveloperMessage",
    "DocumentPart",
    "Event",
    "FileSource",
    "FunctionCall",
    "ImagePart",
    "Interrupt",
    "JsonPatchOperation",
    "Message",
    "MessagesSnapshotEvent",
    "MoveOperation",
    "PartSource",
    "RawEvent",
    "ReasoningEncryptedValueEvent",
    "ReasoningEndEvent",
    "ReasoningMessage",
    "ReasoningMessageChunkEvent",
    "ReasoningMessageContentEvent",
    "ReasoningMessageEndEvent",
    "ReasoningMessageStartEvent",
    "ReasoningStartEvent",
    "RemoveOperation",
    "ReplaceOperation",
    "ResumeEntry",
    "RunAgentInput",
    "RunErrorEvent",
    "RunFinishedCancelledOutcome",
    "RunFinishedEvent",
    "RunFinishedInterruptOutcome",
    "RunFinishedOutcome",
    "RunFinishedSuccessOutcome",
    "RunStartedEvent",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "StepFinishedEvent",
    "StepStartedEvent",
    "SubagentErrorEvent",
    "SubagentFinishedEvent",
    "SubagentFinishedOutcome",
    "SubagentFinishedSuccessOutcome",
    "SubagentFinishedSuspendedOutcome",
    "SubagentStartedEvent",
    "SystemMessage",
    "TestOperation",
    "TextMessageChunkEvent",
    "TextMessageContentEvent",
    "TextMessageEndEvent",
    "TextMessageStartEvent",
    "TextPart",
    "ThinkingEndEvent",
    "ThinkingStartEvent",
    "ThinkingTextMessageContentEvent",
    "ThinkingTextMessageEndEvent",
    "ThinkingTextMessageStartEvent",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallArgsEvent",
    "ToolCallChunkEvent",
    "ToolCallEndEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "UrlSource",
    "UserMessage",
    "VideoPart",
]

# --------------------------------------------------------------------------------------------
# Field kinds shared by the structs
# --------------------------------------------------------------------------------------------

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer a JSON number survives a JavaScript round trip with (zod ``z.int()``)."""

SafeInt = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
Count = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
JsonPointer = Annotated[str, Meta(pattern=r"^(/([^/~]|~[01])*)*$")]
Metadata = dict[str, Any]
JsonObject = dict[str, Any]
# Any JSON value except null (zod: ``z.any().refine(v => v !== null)`` where the client's
# compatibility boundary does not translate null to absence).
NonNullJson = dict[str, Any] | list[Any] | str | int | float | bool
TextMessageRole = Literal["developer", "system", "assistant", "user"]
ReasoningEncryptedValueSubtype = Literal["tool-call", "message"]
ResumeStatus = Literal["resolved", "cancelled"]


class AguiStruct(
    msgspec.Struct,
    rename="camel",
    omit_defaults=True,
    forbid_unknown_fields=False,
    kw_only=True,
):
    """Base of every AG-UI struct: camelCase on the wire, unset optionals omitted.

    Subclasses repeat ``kw_only=True``: msgspec inherits it, but type checkers read dataclass
    parameters per class statement (PEP 681) and would reject required-after-optional fields.
    """


# --------------------------------------------------------------------------------------------
# Content parts
# --------------------------------------------------------------------------------------------


class TextPart(AguiStruct, tag_field="type", tag="text", kw_only=True):
    """A text piece of a multimodal message's content (``type: "text"``)."""

    text: str
    id: str | UnsetType = UNSET
    metadata: NonNullJson | UnsetType = UNSET


class DataSource(AguiStruct, tag_field="type", tag="data", kw_only=True):
    """A media part's bytes carried inline: ``value`` is the base64 text, ``mime_type`` says
    what the bytes are."""

    value: str
    mime_type: str


class UrlSource(AguiStruct, tag_field="type", tag="url", kw_only=True):
    """A media part's bytes at a URL (``value``), fetched by whoever needs them."""

    value: str
    mime_type: str | UnsetType = UNSET


class FileSource(AguiStruct, tag_field="type", tag="file", kw_only=True):
    """A media part's bytes already held by a model provider: ``value`` is the handle it issued
    (a file id), opaque to everyone else; ``provider`` names who issued it."""

    value: str
    provider: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET


PartSource = DataSource | UrlSource | FileSource


class _MediaPart(AguiStruct, tag_field="type", kw_only=True):
    source: PartSource
    id: str | UnsetType = UNSET
    # null: CompatibilityBoundary drops a null media-part metadata (pre-1.0 producers sent it).
    metadata: Any = UNSET


class ImagePart(_MediaPart, tag="image", kw_only=True):
    """An image in a message's content; ``source`` says where its bytes are."""


class AudioPart(_MediaPart, tag="audio", kw_only=True):
    """An audio clip in a message's content; ``source`` says where its bytes are."""


class VideoPart(_MediaPart, tag="video", kw_only=True):
    """A video in a message's content; ``source`` says where its bytes are."""


class DocumentPart(_MediaPart, tag="document", kw_only=True):
    """A document (a PDF, say) in a message's content; ``source`` says where its bytes are."""


ContentPart = TextPart | ImagePart | AudioPart | VideoPart | DocumentPart

# --------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------


class FunctionCall(AguiStruct, kw_only=True):
    """What a tool call invokes: the tool's ``name`` and its ``arguments`` as JSON text, kept as
    written (a model may write arguments that are not valid JSON)."""

    name: str
    arguments: str


class ToolCall(AguiStruct, kw_only=True):
    """One tool call an assistant message makes. ``id`` is what the answering tool message names
    as its ``tool_call_id``; ``encrypted_value`` is a provider's opaque value, returned to it
    unread."""

    id: str
    type: Literal["function"]
    function: FunctionCall
    encrypted_value: str | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class BaseMessage(AguiStruct, tag_field="role", kw_only=True):
    """Fields every message carries; ``role`` is the tag.

    ``subagent_run_id`` names the subagent invocation that produced the message (absent: the agent
    itself did); ``metadata`` is free-form extra information.
    """

    id: str
    subagent_run_id: str | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET


class DeveloperMessage(BaseMessage, tag="developer", kw_only=True):
    """Instructions from the application's developer to the model (``role: "developer"``).
    ``encrypted_value``, here and on the other messages, is a provider's opaque value, returned
    to it unread on a later turn."""

    content: str
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class SystemMessage(BaseMessage, tag="system", kw_only=True):
    """Instructions from the system: a system prompt (``role: "system"``)."""

    content: str
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class AssistantMessage(BaseMessage, tag="assistant", kw_only=True):
    """What the agent said (``role: "assistant"``): its text, the tool calls it made, or both."""

    content: str | UnsetType = UNSET
    tool_calls: list[ToolCall] | UnsetType = UNSET
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class UserMessage(BaseMessage, tag="user", kw_only=True):
    """What the user sent (``role: "user"``): text, or a list of content parts for a multimodal
    message."""

    content: str | list[ContentPart]
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class ToolMessage(BaseMessage, tag="tool", kw_only=True):
    """What a tool returned (``role: "tool"``), answering the assistant's call ``tool_call_id``;
    ``error`` says why the tool failed, beside whatever content it still returned."""

    content: str | list[ContentPart]
    tool_call_id: str
    error: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class ActivityMessage(BaseMessage, tag="activity", kw_only=True):
    """Structured progress shown beside the conversation (a plan, a progress card), kept in its
    place among the messages (``role: "activity"``); ``activity_type`` names the kind, the
    producer's own, and ``content`` is its payload object."""

    activity_type: str
    content: JsonObject


class ReasoningMessage(BaseMessage, tag="reasoning", kw_only=True):
    """A span of the agent's reasoning, as a message (``role: "reasoning"``)."""

    content: str
    encrypted_value: str | UnsetType = UNSET


Message = (
    DeveloperMessage
    | SystemMessage
    | AssistantMessage
    | UserMessage
    | ToolMessage
    | ActivityMessage
    | ReasoningMessage
)

# --------------------------------------------------------------------------------------------
# JSON Patch (RFC 6902)
# --------------------------------------------------------------------------------------------


class AddOperation(AguiStruct, tag_field="op", tag="add", kw_only=True):
    """JSON Patch ``add`` (RFC 6902): put ``value`` at ``path``, inserting into an array."""

    path: JsonPointer
    value: Any


class RemoveOperation(AguiStruct, tag_field="op", tag="remove", kw_only=True):
    """JSON Patch ``remove`` (RFC 6902): delete the value at ``path``."""

    path: JsonPointer


class ReplaceOperation(AguiStruct, tag_field="op", tag="replace", kw_only=True):
    """JSON Patch ``replace`` (RFC 6902): replace the value at ``path``, which must exist."""

    path: JsonPointer
    value: Any


class MoveOperation(AguiStruct, tag_field="op", tag="move", kw_only=True):
    """JSON Patch ``move`` (RFC 6902): move the value at ``from`` (``from_`` here) to ``path``."""

    from_: JsonPointer = msgspec.field(name="from")
    path: JsonPointer


class CopyOperation(AguiStruct, tag_field="op", tag="copy", kw_only=True):
    """JSON Patch ``copy`` (RFC 6902): copy the value at ``from`` (``from_`` here) to ``path``."""

    from_: JsonPointer = msgspec.field(name="from")
    path: JsonPointer


class TestOperation(AguiStruct, tag_field="op", tag="test", kw_only=True):
    """JSON Patch ``test`` (RFC 6902): the patch fails unless the value at ``path`` is ``value``."""

    __test__: ClassVar[bool] = False  # not a pytest test class, whatever its name says
    path: JsonPointer
    value: Any


JsonPatchOperation = (
    AddOperation
    | RemoveOperation
    | ReplaceOperation
    | MoveOperation
    | CopyOperation
    | TestOperation
)

# --------------------------------------------------------------------------------------------
# Run input, interrupts, outcomes, usage
# --------------------------------------------------------------------------------------------


class Tool(AguiStruct, kw_only=True):
    """A tool the client offers the agent for a run; ``parameters`` is the JSON Schema of its
    arguments, carried unread."""

    name: str
    description: str
    parameters: Any = UNSET  # any JSON; null tolerated (CompatibilityBoundary)
    metadata: Metadata | UnsetType = UNSET


class Context(AguiStruct, kw_only=True):
    """A described piece of background information the client gives the agent for a run, apart from
    the conversation."""

    description: str
    value: str


class ResumeEntry(AguiStruct, kw_only=True):
    """The client's answer to one interrupt, sent with the run that continues from it: ``status``
    says whether it was resolved or cancelled, ``payload`` is the answer itself."""

    interrupt_id: str
    status: ResumeStatus
    payload: Any = UNSET  # any JSON; null tolerated (CompatibilityBoundary)
    metadata: Metadata | UnsetType = UNSET


class RunAgentInput(AguiStruct, kw_only=True):
    """The request that starts a run (and is echoed back in ``RUN_STARTED.input``).

    Attributes:
        messages: the conversation so far, in order.
        parent_run_id: the run that spawned this one.
        state: the agent state the run starts from.
        tools, context: what the client offers the agent for this run.
        forwarded_props: application values passed through to the agent unread.
        resume: answers to the interrupts a previous run ended with, when this run continues it.
    """

    thread_id: str
    run_id: str
    messages: list[Message]
    protocol_version: str | UnsetType = UNSET
    parent_run_id: str | UnsetType = UNSET
    state: Any = UNSET  # any JSON; zod turns null into absence
    tools: list[Tool] | UnsetType = UNSET
    context: list[Context] | UnsetType = UNSET
    forwarded_props: Any = UNSET  # any JSON; null tolerated (CompatibilityBoundary)
    resume: list[ResumeEntry] | UnsetType = UNSET


class Interrupt(AguiStruct, kw_only=True):
    """Something a run stops on until the client answers it (an approval, a missing value).

    Attributes:
        reason: why the run stopped, in the producer's own words.
        message: a prompt for whoever answers.
        tool_call_id: the tool call it concerns, when it asks to approve one.
        response_schema: the JSON Schema an answer is expected to match.
        expires_at: when it stops being answerable (by convention an ISO 8601 time).
    """

    id: str
    reason: str
    message: str | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    response_schema: JsonObject | UnsetType = UNSET
    expires_at: str | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET
    subagent_run_id: str | UnsetType = UNSET


class RunFinishedSuccessOutcome(AguiStruct, tag_field="type", tag="success", kw_only=True):
    """The run completed (the same as no outcome); ``pending_tool_call_ids`` names the tool calls
    it left for the application to answer in the next run's input."""

    pending_tool_call_ids: list[str] | UnsetType = UNSET


class RunFinishedInterruptOutcome(AguiStruct, tag_field="type", tag="interrupt", kw_only=True):
    """The run is paused on ``interrupts``; the next run answers them in its input's ``resume``."""

    interrupts: Annotated[list[Interrupt], Meta(min_length=1)]


class RunFinishedCancelledOutcome(AguiStruct, tag_field="type", tag="cancelled", kw_only=True):
    """The run was stopped before it completed, without failing: nothing waits to be resumed."""


RunFinishedOutcome = (
    RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
)


class SubagentFinishedSuccessOutcome(AguiStruct, tag_field="type", tag="success", kw_only=True):
    """The subagent completed its work (the same as no outcome)."""


class SubagentFinishedSuspendedOutcome(AguiStruct, tag_field="type", tag="suspended", kw_only=True):
    """The subagent is paused on outside input; ``interrupt_ids`` names the run's interrupts it
    raised itself."""

    interrupt_ids: list[str] | UnsetType = UNSET


SubagentFinishedOutcome = SubagentFinishedSuccessOutcome | SubagentFinishedSuspendedOutcome


class TokenUsage(AguiStruct, kw_only=True):
    """Token counts for one provider and model.

    ``input_tokens`` and ``output_tokens`` are totals; ``reasoning_tokens``,
    ``cached_input_tokens`` and ``cache_write_input_tokens`` are parts of them, never additions;
    ``total_tokens`` is the two totals summed.
    """

    provider: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    input_tokens: Count | UnsetType = UNSET
    output_tokens: Count | UnsetType = UNSET
    total_tokens: Count | UnsetType = UNSET
    reasoning_tokens: Count | UnsetType = UNSET
    cached_input_tokens: Count | UnsetType = UNSET
    cache_write_input_tokens: Count | UnsetType = UNSET


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


class BaseEvent(AguiStruct, tag_field="type", kw_only=True):
    """Fields every event carries. ``type`` is the struct's tag (``to_dict(e)["type"]``)."""

    timestamp: SafeInt | UnsetType = UNSET
    raw_event: Any = UNSET  # any JSON; null tolerated (CompatibilityBoundary)
    metadata: Metadata | UnsetType = UNSET


class _AttributableEvent(BaseEvent, kw_only=True):
    subagent_run_id: str | UnsetType = UNSET


class TextMessageStartEvent(_AttributableEvent, tag="TEXT_MESSAGE_START", kw_only=True):
    """TEXT_MESSAGE_START: opens a streamed text message (``role`` absent means assistant)."""

    message_id: str
    role: TextMessageRole | UnsetType = UNSET
    name: str | UnsetType = UNSET


class TextMessageContentEvent(_AttributableEvent, tag="TEXT_MESSAGE_CONTENT", kw_only=True):
    """TEXT_MESSAGE_CONTENT: a piece of a streamed text message's text (``delta``, maybe empty)."""

    message_id: str
    delta: str


class TextMessageEndEvent(_AttributableEvent, tag="TEXT_MESSAGE_END", kw_only=True):
    """TEXT_MESSAGE_END: closes a streamed text message."""

    message_id: str


class TextMessageChunkEvent(_AttributableEvent, tag="TEXT_MESSAGE_CHUNK", kw_only=True):
    """TEXT_MESSAGE_CHUNK: shorthand for a text message's start, content and end; a chunk without
    ``message_id`` continues the message already open."""

    message_id: str | UnsetType = UNSET
    role: TextMessageRole | UnsetType = UNSET
    delta: str | UnsetType = UNSET
    name: str | UnsetType = UNSET


class ToolCallStartEvent(_AttributableEvent, tag="TOOL_CALL_START", kw_only=True):
    """TOOL_CALL_START: opens a tool call; ``parent_message_id`` is the assistant message holding
    it."""

    tool_call_id: str
    tool_call_name: str
    parent_message_id: str | UnsetType | None = UNSET  # null: legacy (CompatibilityBoundary)


class ToolCallArgsEvent(_AttributableEvent, tag="TOOL_CALL_ARGS", kw_only=True):
    """TOOL_CALL_ARGS: a piece of a tool call's arguments text (``delta``)."""

    tool_call_id: str
    delta: str


class ToolCallEndEvent(_AttributableEvent, tag="TOOL_CALL_END", kw_only=True):
    """TOOL_CALL_END: closes a tool call; its arguments are complete."""

    tool_call_id: str


class ToolCallChunkEvent(_AttributableEvent, tag="TOOL_CALL_CHUNK", kw_only=True):
    """TOOL_CALL_CHUNK: shorthand for a tool call's start, arguments and end; a chunk without
    ``tool_call_id`` continues the call already open."""

    tool_call_id: str | UnsetType = UNSET
    tool_call_name: str | UnsetType = UNSET
    parent_message_id: str | UnsetType | None = UNSET  # null: legacy (CompatibilityBoundary)
    delta: str | UnsetType = UNSET


class ToolCallResultEvent(_AttributableEvent, tag="TOOL_CALL_RESULT", kw_only=True):
    """TOOL_CALL_RESULT: what a tool returned, becoming the tool message ``message_id`` that answers
    ``tool_call_id``."""

    message_id: str
    tool_call_id: str
    content: str | list[ContentPart]
    role: Literal["tool"] | UnsetType = UNSET


class StateSnapshotEvent(_AttributableEvent, tag="STATE_SNAPSHOT", kw_only=True):
    """STATE_SNAPSHOT: replaces the agent state whole with ``snapshot`` (any JSON value, null
    included)."""

    snapshot: Any  # required; any JSON value, null included


class StateDeltaEvent(_AttributableEvent, tag="STATE_DELTA", kw_only=True):
    """STATE_DELTA: changes the agent state by a JSON Patch (``delta``)."""

    delta: list[JsonPatchOperation]


class MessagesSnapshotEvent(BaseEvent, tag="MESSAGES_SNAPSHOT", kw_only=True):
    """MESSAGES_SNAPSHOT: the whole list of the conversation's messages, in order, as the producer
    knows them."""

    messages: list[Message]


class ActivitySnapshotEvent(_AttributableEvent, tag="ACTIVITY_SNAPSHOT", kw_only=True):
    """ACTIVITY_SNAPSHOT: the content of the activity message ``message_id``; ``replace`` false asks
    to keep content already there (absent means replace)."""

    message_id: str
    activity_type: str
    content: JsonObject
    replace: bool | UnsetType = UNSET


class ActivityDeltaEvent(_AttributableEvent, tag="ACTIVITY_DELTA", kw_only=True):
    """ACTIVITY_DELTA: changes an activity message's content by a JSON Patch (``patch``)."""

    message_id: str
    activity_type: str
    patch: list[JsonPatchOperation]


class RawEvent(_AttributableEvent, tag="RAW", kw_only=True):
    """RAW: a provider's own event (``event``) passed through untranslated; ``source`` names the
    provider or framework."""

    event: Any  # required; any JSON value
    source: str | UnsetType = UNSET


class CustomEvent(_AttributableEvent, tag="CUSTOM", kw_only=True):
    """CUSTOM: an application's own event, ``value`` under the name ``name``."""

    name: str
    value: Any  # required; any JSON value


class RunStartedEvent(BaseEvent, tag="RUN_STARTED", kw_only=True):
    """RUN_STARTED: opens a run of a thread; ``input`` echoes the request it started from."""

    thread_id: str
    run_id: str
    protocol_version: str | UnsetType = UNSET
    parent_run_id: str | UnsetType = UNSET
    input: RunAgentInput | UnsetType = UNSET


class RunFinishedEvent(BaseEvent, tag="RUN_FINISHED", kw_only=True):
    """RUN_FINISHED: closes a run that did not fail.

    ``result`` is its return value, if any; ``outcome`` says why it ended (absent: success);
    ``usage`` holds one token count per provider and model.
    """

    thread_id: str
    run_id: str
    result: Any = UNSET  # any JSON; null tolerated (CompatibilityBoundary)
    outcome: RunFinishedOutcome | UnsetType | None = UNSET  # null: legacy (CompatibilityBoundary)
    usage: list[TokenUsage] | UnsetType = UNSET


class RunErrorEvent(BaseEvent, tag="RUN_ERROR", kw_only=True):
    """RUN_ERROR: ends a run that failed, with a ``message`` for a person and maybe a ``code``."""

    message: str
    code: str | UnsetType = UNSET
    usage: list[TokenUsage] | UnsetType = UNSET


class StepStartedEvent(_AttributableEvent, tag="STEP_STARTED", kw_only=True):
    """STEP_STARTED: opens a named step within a run."""

    step_name: str


class StepFinishedEvent(_AttributableEvent, tag="STEP_FINISHED", kw_only=True):
    """STEP_FINISHED: closes the step of the same name."""

    step_name: str


class ReasoningStartEvent(_AttributableEvent, tag="REASONING_START", kw_only=True):
    """REASONING_START: opens a span of reasoning, which may hold several reasoning messages."""

    message_id: str


class ReasoningMessageStartEvent(_AttributableEvent, tag="REASONING_MESSAGE_START", kw_only=True):
    """REASONING_MESSAGE_START: opens a streamed reasoning message."""

    message_id: str
    role: Literal["reasoning"]


class ReasoningMessageContentEvent(
    _AttributableEvent, tag="REASONING_MESSAGE_CONTENT", kw_only=True
):
    """REASONING_MESSAGE_CONTENT: a piece of a streamed reasoning message's text."""

    message_id: str
    delta: str


class ReasoningMessageEndEvent(_AttributableEvent, tag="REASONING_MESSAGE_END", kw_only=True):
    """REASONING_MESSAGE_END: closes a streamed reasoning message."""

    message_id: str


class ReasoningMessageChunkEvent(_AttributableEvent, tag="REASONING_MESSAGE_CHUNK", kw_only=True):
    """REASONING_MESSAGE_CHUNK: shorthand for a reasoning message's start, content and end."""

    message_id: str | UnsetType = UNSET
    delta: str | UnsetType = UNSET


class ReasoningEndEvent(_AttributableEvent, tag="REASONING_END", kw_only=True):
    """REASONING_END: closes a span of reasoning."""

    message_id: str


class ReasoningEncryptedValueEvent(
    _AttributableEvent, tag="REASONING_ENCRYPTED_VALUE", kw_only=True
):
    """REASONING_ENCRYPTED_VALUE: a provider's encrypted reasoning, to return to it unread;
    ``entity_id`` is the message or tool call (as ``subtype`` says) it belongs to."""

    subtype: ReasoningEncryptedValueSubtype
    entity_id: str
    encrypted_value: str


class SubagentStartedEvent(BaseEvent, tag="SUBAGENT_STARTED", kw_only=True):
    """SUBAGENT_STARTED: a subagent invocation begins.

    Everything it produces afterwards carries its ``subagent_run_id``. The ``parent_*`` fields
    say what spawned it: an enclosing subagent, a tool call, the message holding that call.
    """

    subagent_run_id: str
    name: str
    description: str | UnsetType = UNSET
    parent_subagent_run_id: str | UnsetType = UNSET
    parent_tool_call_id: str | UnsetType = UNSET
    parent_message_id: str | UnsetType = UNSET


class SubagentFinishedEvent(BaseEvent, tag="SUBAGENT_FINISHED", kw_only=True):
    """SUBAGENT_FINISHED: a subagent invocation's part of the run ends, completed or suspended
    (``outcome``); ``result`` is its return value, if any."""

    subagent_run_id: str
    result: Any = UNSET  # any JSON; null tolerated (CompatibilityBoundary)
    outcome: SubagentFinishedOutcome | UnsetType = UNSET


class SubagentErrorEvent(BaseEvent, tag="SUBAGENT_ERROR", kw_only=True):
    """SUBAGENT_ERROR: a subagent invocation failed; the run itself may go on."""

    subagent_run_id: str
    message: str
    code: str | UnsetType = UNSET


# 0.x reasoning events (removed in 1.0, still emitted by deployed producers; the 1.0 client
# converts them to REASONING_*). Shapes as in @ag-ui/core 0.0.x.


class ThinkingStartEvent(BaseEvent, tag="THINKING_START", kw_only=True):
    """THINKING_START (0.x): opens a span of reasoning; ``REASONING_START`` in 1.0."""

    title: str | UnsetType = UNSET


class ThinkingEndEvent(BaseEvent, tag="THINKING_END", kw_only=True):
    """THINKING_END (0.x): closes a span of reasoning; ``REASONING_END`` in 1.0."""


class ThinkingTextMessageStartEvent(BaseEvent, tag="THINKING_TEXT_MESSAGE_START", kw_only=True):
    """THINKING_TEXT_MESSAGE_START (0.x): opens a reasoning message (REASONING_MESSAGE_START)."""


class ThinkingTextMessageContentEvent(BaseEvent, tag="THINKING_TEXT_MESSAGE_CONTENT", kw_only=True):
    """THINKING_TEXT_MESSAGE_CONTENT (0.x): a piece of a reasoning message's text;
    ``REASONING_MESSAGE_CONTENT`` in 1.0."""

    delta: str


class ThinkingTextMessageEndEvent(BaseEvent, tag="THINKING_TEXT_MESSAGE_END", kw_only=True):
    """THINKING_TEXT_MESSAGE_END (0.x): closes a reasoning message (REASONING_MESSAGE_END)."""


Event = (
    TextMessageStartEvent
    | TextMessageContentEvent
    | TextMessageEndEvent
    | TextMessageChunkEvent
    | ToolCallStartEvent
    | ToolCallArgsEvent
    | ToolCallEndEvent
    | ToolCallChunkEvent
    | ToolCallResultEvent
    | StateSnapshotEvent
    | StateDeltaEvent
    | MessagesSnapshotEvent
    | ActivitySnapshotEvent
    | ActivityDeltaEvent
    | RawEvent
    | CustomEvent
    | RunStartedEvent
    | RunFinishedEvent
    | RunErrorEvent
    | StepStartedEvent
    | StepFinishedEvent
    | ReasoningStartEvent
    | ReasoningMessageStartEvent
    | ReasoningMessageContentEvent
    | ReasoningMessageEndEvent
    | ReasoningMessageChunkEvent
    | ReasoningEndEvent
    | ReasoningEncryptedValueEvent
    | SubagentStartedEvent
    | SubagentFinishedEvent
    | SubagentErrorEvent
    | ThinkingStartEvent
    | ThinkingEndEvent
    | ThinkingTextMessageStartEvent
    | ThinkingTextMessageContentEvent
    | ThinkingTextMessageEndEvent
)
"""Every event struct: the 31 of protocol 1.0 and the 5 legacy ``THINKING_*``, tagged on type."""

_LEGACY_STRUCTS: tuple[type[BaseEvent], ...] = (
    ThinkingStartEvent,
    ThinkingEndEvent,
    ThinkingTextMessageStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
)


def _tag_of(cls: type[msgspec.Struct]) -> str:
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


EVENT_STRUCTS: dict[str, type[BaseEvent]] = {_tag_of(c): c for c in get_args(Event)}
"""Event type → its struct class (36 entries)."""

LEGACY_EVENT_TYPES: frozenset[str] = frozenset(_tag_of(c) for c in _LEGACY_STRUCTS)
"""The 0.x ``THINKING_*`` event types, accepted and kept."""

EVENT_TYPES: frozenset[str] = frozenset(EVENT_STRUCTS) - LEGACY_EVENT_TYPES
"""The 31 event types of AG-UI 1.0."""

assert len(EVENT_TYPES) == 31 and len(LEGACY_EVENT_TYPES) == 5
