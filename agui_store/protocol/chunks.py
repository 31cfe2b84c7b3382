"""Upstream's ``transformChunks``: chunk events (``TEXT_MESSAGE_CHUNK``,
``TOOL_CALL_CHUNK``, ``REASONING_MESSAGE_CHUNK``) expanded into the start, content and end
events they stand for, lane by lane, as ``@ag-ui/client`` 1.0.0 expands them before its
reducer (:mod:`agui_store.protocol.reducer`) and its verifier see the stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from agui_store.errors import InvalidEventError
from agui_store.protocol.js import UNDEFINED, identity_key, js_string, strict_equal

Event = dict[str, Any]

# The properties each chunk shape describes (the zod schema's own field list); anything else
# a chunk carries is its "remainder", which rides on the events synthesized from it.
_BASE_FIELDS: Final = frozenset({"type", "timestamp", "rawEvent", "metadata", "subagentRunId"})
_TEXT_CHUNK_FIELDS: Final = _BASE_FIELDS | {"messageId", "role", "delta", "name"}
_TOOL_CHUNK_FIELDS: Final = _BASE_FIELDS | {
    "toolCallId",
    "toolCallName",
    "parentMessageId",
    "delta",
}
_REASONING_CHUNK_FIELDS: Final = _BASE_FIELDS | {"messageId", "delta"}

# Events that close the pending chunk stream of their own lane before passing through.
_CLOSES_OWN_LANE: Final = frozenset(
    {
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "CUSTOM",
        "STEP_STARTED",
        "STEP_FINISHED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    }
)
# Run-level events (and the snapshot that restates the whole conversation) close every lane.
_CLOSES_ALL_LANES: Final = frozenset(
    {"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"}
)
_CHUNK_TYPES: Final = frozenset(
    {"TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"}
)

# kind -> (END type, id field, CONTENT type, chunk type, entity name, field sets)
_KINDS: Final[dict[str, tuple[str, str, str, str, str, frozenset[str]]]] = {
    "text": (
        "TEXT_MESSAGE_END",
        "messageId",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CHUNK",
        "text message",
        _TEXT_CHUNK_FIELDS,
    ),
    "tool": (
        "TOOL_CALL_END",
        "toolCallId",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_CHUNK",
        "tool call",
        _TOOL_CHUNK_FIELDS,
    ),
    "reasoning": (
        "REASONING_MESSAGE_END",
        "messageId",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CHUNK",
        "reasoning message",
        _REASONING_CHUNK_FIELDS,
    ),
}
_KIND_OF_CHUNK: Final = {
    "TEXT_MESSAGE_CHUNK": "text",
    "TOOL_CALL_CHUNK": "tool",
    "REASONING_MESSAGE_CHUNK": "reasoning",
}


class StreamError(Exception):
    """A stream the client throws on; the caller adds the event's position."""

    def __init__(self, reason: str, path: str = "$") -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path


class _Lane:
    """The one stream a lane (a subagent, or the parent agent) is assembling from chunks.

    ``fields`` holds what the opener established, only for the fields it carried (an absent
    one stays absent, ``null`` stays ``None``), plus the role the text opener defaulted to.
    """

    __slots__ = ("entity_id", "fields", "kind")

    def __init__(self, kind: str, entity_id: Any, fields: dict[str, Any]) -> None:
        self.kind = kind
        self.entity_id = entity_id
        self.fields = fields


def _lane_key(tag: Any) -> Any:
    """The lane a tag names: ``None`` for the parent agent (an absent or null tag)."""
    if tag is None or tag is UNDEFINED:
        return None
    return tag if type(tag) is str else identity_key(tag)


class ChunkExpander:
    """``transformChunks``: one pending stream per lane, closed by synthesized END events."""

    __slots__ = ("lanes", "warnings")

    def __init__(self, warnings: list[str]) -> None:
        self.lanes: dict[Any, _Lane] = {}
        self.warnings = warnings

    def expand(self, event: Event) -> list[Event]:
        """The events one event of the stream stands for, in order: a chunk, the events it
        expands to; any other event, the ends of the lanes it closes and then itself."""
        kind = event.get("type")
        if kind in _CLOSES_OWN_LANE:
            if not self.lanes:
                return [event]
            return [*self._close(_lane_key(event.get("subagentRunId"))), event]
        if kind in _CLOSES_ALL_LANES:
            out: list[Event] = []
            for owner in list(self.lanes):
                out.extend(self._close(owner))
            out.append(event)
            return out
        if kind == "SUBAGENT_FINISHED" or kind == "SUBAGENT_ERROR":
            owner = event.get("subagentRunId")
            if owner is None:  # an untagged terminal must not close the parent's lane
                return [event]
            return [*self._close(_lane_key(owner)), event]
        chunk_kind = _KIND_OF_CHUNK.get(kind) if type(kind) is str else None
        if chunk_kind is None:
            # RAW, ACTIVITY_*, REASONING_ENCRYPTED_VALUE, SUBAGENT_STARTED, and types this
            # stage has no assembly for (legacy THINKING_*, newer protocols): untouched.
            return [event]
        return self._chunk(chunk_kind, event)

    def _close(self, owner: Any) -> list[Event]:
        lane = self.lanes.pop(owner, None)
        if lane is None:
            return []
        end_type, id_field = _KINDS[lane.kind][:2]
        end: Event = {"type": end_type, id_field: lane.entity_id}
        if "subagentRunId" in lane.fields:
            end["subagentRunId"] = lane.fields["subagentRunId"]
        return [end]

    def _resolve_lane(self, kind: str, entity_id: Any, tag: Any) -> Any:
        """Which lane a chunk belongs to (its id first, then its tag, then inference)."""
        _, id_field, _, chunk_type, entity, _ = _KINDS[kind]
        key = _lane_key(tag)
        if entity_id is not UNDEFINED:
            for owner, lane in self.lanes.items():
                if lane.kind == kind and strict_equal(lane.entity_id, entity_id):
                    if key is not None and key != owner:
                        holder = "(the parent agent)" if owner is None else js_string(owner)
                        raise StreamError(
                            f"Cannot continue {entity} '{js_string(entity_id)}': chunk "
                            f"subagentRunId '{js_string(tag)}' does not match the open stream's "
                            f"subagent '{holder}'.",
                            "$.subagentRunId",
                        )
                    return owner
            return key
        if key is not None:
            return key
        parent = self.lanes.get(None)
        if parent is not None and parent.kind == kind:
            return None
        candidates = [owner for owner, lane in self.lanes.items() if lane.kind == kind]
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            raise StreamError(
                f"Ambiguous {chunk_type}: it carries neither a {id_field} nor a subagentRunId, "
                f"but {len(candidates)} lanes have an open {entity}. Attribute the chunk to "
                "the subagent it belongs to."
            )
        return None

    def _chunk(self, kind: str, chunk: Event) -> list[Event]:
        _, id_field, content_type, chunk_type, entity, described = _KINDS[kind]
        remainder = {k: v for k, v in chunk.items() if k not in described} or None
        entity_id = chunk.get(id_field, UNDEFINED)
        tag = chunk.get("subagentRunId", UNDEFINED)
        lane_key = self._resolve_lane(kind, entity_id, tag)
        pending = self.lanes.get(lane_key)
        out: list[Event] = []
        if (
            pending is not None
            and pending.kind == kind
            and (entity_id is UNDEFINED or strict_equal(entity_id, pending.entity_id))
        ):
            # A continuation may repeat what its opener said, but only with the same value.
            agreeing: tuple[str, ...]
            if kind == "text":
                agreeing = ("role", "name")
            elif kind == "tool":
                agreeing = ("toolCallName", "parentMessageId")
            else:
                agreeing = ()
            for name in agreeing:
                incoming = chunk.get(name, UNDEFINED)
                established = pending.fields.get(name, UNDEFINED)
                if incoming is not UNDEFINED and not strict_equal(incoming, established):
                    said = "(absent)" if established is UNDEFINED else f"'{js_string(established)}'"
                    raise StreamError(
                        f"Cannot continue {entity} '{js_string(pending.entity_id)}': chunk {name} "
                        f"'{js_string(incoming)}' does not match the open stream's {name} {said}.",
                        f"$.{name}",
                    )
            fields = pending.fields
            entity_id = pending.entity_id
        else:
            out.extend(self._close(lane_key))
            if entity_id is UNDEFINED:
                raise StreamError(f"First {chunk_type} must have a {id_field}", f"$.{id_field}")
            fields = {}
            opener: Event
            if kind == "text":
                role = chunk.get("role", UNDEFINED)
                fields["role"] = "assistant" if role is UNDEFINED else role
                opener = {
                    "type": "TEXT_MESSAGE_START",
                    "messageId": entity_id,
                    "role": fields["role"],
                }
                if "name" in chunk:
                    fields["name"] = opener["name"] = chunk["name"]
            elif kind == "tool":
                if "toolCallName" not in chunk:
                    raise StreamError(
                        "First TOOL_CALL_CHUNK must have a toolCallName", "$.toolCallName"
                    )
                fields["toolCallName"] = chunk["toolCallName"]
                opener = {
                    "type": "TOOL_CALL_START",
                    "toolCallId": entity_id,
                    "toolCallName": chunk["toolCallName"],
                }
                if "parentMessageId" in chunk:
                    fields["parentMessageId"] = opener["parentMessageId"] = chunk["parentMessageId"]
            else:
                opener = {
                    "type": "REASONING_MESSAGE_START",
                    "messageId": entity_id,
                    "role": "reasoning",
                }
            if tag is not UNDEFINED:
                # A null tag is kept, not read as absent: it is a violation the next stages name.
                fields["subagentRunId"] = opener["subagentRunId"] = tag
            if "metadata" in chunk:
                opener["metadata"] = chunk["metadata"]
            self.lanes[lane_key] = _Lane(kind, entity_id, fields)
            out.append(opener)

        delta = chunk.get("delta", UNDEFINED)
        raw = chunk.get("rawEvent", UNDEFINED)
        metadata = chunk.get("metadata", UNDEFINED)
        owner = tag if tag is not UNDEFINED else fields.get("subagentRunId", UNDEFINED)
        carried = False
        if (
            delta is not UNDEFINED
            or raw is not UNDEFINED
            or (
                # A continuation carrying only metadata, a provider payload, a null tag or
                # unrecognised material still reaches the reducer, as a zero-length content event.
                not out and (metadata is not UNDEFINED or tag is None or remainder is not None)
            )
        ):
            content: Event = dict(remainder) if remainder else {}
            content["type"] = content_type
            content[id_field] = entity_id
            content["delta"] = "" if delta is UNDEFINED else delta
            if owner is not UNDEFINED:
                content["subagentRunId"] = owner
            if metadata is not UNDEFINED:
                content["metadata"] = metadata
            if raw is not UNDEFINED:
                content["rawEvent"] = raw
            out.append(content)
            carried = True
        if remainder is not None and not carried and out:
            # An opener-only chunk: the remainder rides the opener, which keeps its own values.
            last = out[-1]
            shadowed = [k for k in remainder if k in last]
            if shadowed:
                names = ", ".join(f"'{k}'" for k in shadowed)
                self.warnings.append(
                    f"[ag-ui][transform] A {chunk_type} carried {names}, which the synthesized "
                    f"{last['type']} already describes. The synthesized value is kept and the "
                    "chunk's is dropped."
                )
            out[-1] = {**remainder, **last}
        return out


def transform_chunks(events: Iterable[Event]) -> list[Event]:
    """Expand ``*_CHUNK`` shorthand as ``transformChunks`` of ``@ag-ui/client`` 1.0.0 does.

    Chunks become START / CONTENT (ARGS) events, and a synthesized END closes a stream when
    its lane moves on (another id, an explicit event of that lane, a run-level event, a
    MESSAGES_SNAPSHOT, its subagent's terminal). A stream still open when the input ends
    gets no END, exactly as upstream. Other events pass through as the same objects.

    Args:
        events: AG-UI event dicts, in stream order.

    Returns:
        The expanded events.

    Raises:
        InvalidEventError: where the client throws: a first chunk without its id (or a tool
            chunk without its name), a continuation that contradicts its opener, an
            untagged continuation that several subagent lanes could own.
    """
    expander = ChunkExpander([])
    out: list[Event] = []
    index = 0
    event: Any = None
    try:
        for event in events:
            out.extend(expander.expand(event))
            index += 1
    except StreamError as e:
        raise InvalidEventError(
            e.reason, index=index, event_type=event_type(event), path=e.path
        ) from None
    return out


def event_type(event: Any) -> str | None:
    """An event's ``type`` when it is a dict with a string one, else ``None``."""
    kind = event.get("type") if type(event) is dict else None
    return kind if type(kind) is str else None
