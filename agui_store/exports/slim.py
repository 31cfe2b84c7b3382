"""The slim export: fewer, shorter messages for bandwidth- or privacy-sensitive uses
(docs/design/behaviour.md#interchange).

Pure: takes AG-UI message dicts (a :class:`~agui_store.records.Checkout`'s ``messages``) and
returns new ones; the input is never modified. What comes out is still a list of valid AG-UI
1.0 messages, so it can be sent to a client as a ``MESSAGES_SNAPSHOT``.

The four knobs, applied in this order:

1. ``drop_tool_results``: messages of role ``tool`` are omitted. The assistant message that
   made the calls **keeps its** ``toolCalls`` (what was called stays visible; only the
   results go). A reader then sees calls without results, exactly as a client does while a
   tool is still running, so nothing is invented to stand in for them.
2. ``last``: the most recent N messages of what remains (so N counts messages actually
   sent). The cut is exact: a tool result whose call fell outside the window is kept (the
   client accepts a tool message without a matching call).
3. ``max_content``: message content is cut to at most that many characters (Python
   characters, i.e. Unicode code points), the marker :data:`TRUNCATION_MARKER` (``…``)
   included, so a cut text is exactly ``max_content`` long and ends with the marker; text
   that fits is left alone. String content is cut directly. A list of content parts is cut
   as one text: text parts count their characters, other parts (image, audio, video,
   document) count none; the text part where the budget runs out is cut and ends with the
   marker, and every part after it (text or media) is dropped. Activity messages, whose
   content is a JSON object rather than text, are left as they are; tool call arguments are
   not content (see ``redact_tool_args``).
4. ``redact_tool_args``: each tool call is reduced to its id and function name:
   ``{"id", "type": "function", "function": {"name", "arguments": ""}}``. The empty
   ``arguments`` string keeps the call a valid AG-UI ``ToolCall`` (the same value a client
   holds for a call whose arguments have not streamed yet); ``metadata`` and
   ``encryptedValue`` of the call are dropped with the arguments.

Presets (:data:`PRESETS`):

============  ======  ============  ================  =================
preset        last    max_content   redact_tool_args  drop_tool_results
============  ======  ============  ================  =================
``minimal``   10      200           yes               yes
``standard``  50      1000          no                no
``full``      all     unlimited     no                no
============  ======  ============  ================  =================

``minimal`` is a glance at the end of a conversation that reveals no tool inputs or outputs;
``standard`` is a conversation view for a slow link (tool results kept, but cut at 1000
characters like every other content); ``full`` returns the messages unchanged (a deep copy).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from agui_store.engine.arguments import a_kind
from agui_store.errors import AguiStoreError, ArgumentTypeError
from agui_store.records import Checkout

__all__ = [
    "PRESETS",
    "TRUNCATION_MARKER",
    "SlimError",
    "SlimOptions",
    "slim",
    "slim_messages",
    "truncate_text",
]

#: Appended to every cut text; counts toward the length limit.
TRUNCATION_MARKER = "…"


class SlimError(AguiStoreError, ValueError):
    """A slim option is out of range, or the preset is unknown."""


@dataclass(frozen=True)
class SlimOptions:
    """The four knobs of :func:`slim_messages` (``None`` means no limit)."""

    last: int | None = None
    max_content: int | None = None
    redact_tool_args: bool = False
    drop_tool_results: bool = False


#: The named presets; see the module docstring for the reasoning behind each number.
PRESETS: Mapping[str, SlimOptions] = MappingProxyType(
    {
        "minimal": SlimOptions(
            last=10, max_content=200, redact_tool_args=True, drop_tool_results=True
        ),
        "standard": SlimOptions(last=50, max_content=1000),
        "full": SlimOptions(),
    }
)


def truncate_text(text: str, limit: int, marker: str = TRUNCATION_MARKER) -> str:
    """``text`` if it has at most ``limit`` characters, else its head plus ``marker``, exactly
    ``limit`` characters long.

    Raises:
        SlimError: when ``limit`` cannot hold the marker.
    """
    if len(text) <= limit:
        return text
    if limit < len(marker):
        raise SlimError(f"a limit of {limit} character(s) cannot hold the marker {marker!r}")
    return text[: limit - len(marker)] + marker


def _check_count(name: str, value: int | None, minimum: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise SlimError(f"{name} must be an integer or None, got {type(value).__name__}")
    if value < minimum:
        raise SlimError(f"{name} must be at least {minimum}, got {value}")


def _cut_parts(parts: list[Any], limit: int) -> list[Any]:
    """Content parts cut as one text of at most ``limit`` characters (see module docs)."""
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    ]
    if sum(len(t) for t in texts) <= limit:
        return parts
    budget = limit - len(TRUNCATION_MARKER)  # room for text before the marker
    out: list[Any] = []
    used = 0
    for part in parts:
        text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
        if not isinstance(text, str):
            out.append(part)
            continue
        if used + len(text) <= budget:
            out.append(part)
            used += len(text)
            continue
        # The budget runs out inside this part: it ends the message.
        out.append({**part, "text": text[: budget - used] + TRUNCATION_MARKER})
        break
    return out


def _slim_one(
    message: dict[str, Any], max_content: int | None, redact_tool_args: bool
) -> dict[str, Any]:
    out = copy.deepcopy(message)
    if max_content is not None:
        content = out.get("content")
        if isinstance(content, str):
            out["content"] = truncate_text(content, max_content)
        elif isinstance(content, list):
            out["content"] = _cut_parts(content, max_content)
    calls = out.get("toolCalls")
    if redact_tool_args and isinstance(calls, list):
        out["toolCalls"] = [_redact_call(c) for c in calls]
    return out


def _redact_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    redacted: dict[str, Any] = {"id": call.get("id"), "type": call.get("type", "function")}
    redacted["function"] = {"name": name, "arguments": ""}
    return redacted


def slim_messages(
    messages: Sequence[dict[str, Any]],
    *,
    last: int | None = None,
    max_content: int | None = None,
    redact_tool_args: bool = False,
    drop_tool_results: bool = False,
) -> list[dict[str, Any]]:
    """A slimmed copy of AG-UI messages (the input is left untouched).

    Args:
        messages: AG-UI message dicts, oldest first (e.g. ``Checkout.messages``).
        last: keep only the most recent N messages (after ``drop_tool_results``); ``None``
            keeps all, ``0`` none.
        max_content: cut each message's content to at most this many characters, the
            ``…`` marker included (``None``: no limit; at least 1).
        redact_tool_args: reduce each tool call to its id and function name.
        drop_tool_results: omit ``tool`` messages; the calls stay on the assistant message.

    Returns:
        New message dicts, oldest first.

    Raises:
        SlimError: when ``last`` is negative or ``max_content`` is below 1.
    """
    _check_count("last", last, 0)
    _check_count("max_content", max_content, len(TRUNCATION_MARKER))
    kept = [m for m in messages if not (drop_tool_results and m.get("role") == "tool")]
    if last is not None:
        kept = kept[-last:] if last else []
    return [_slim_one(m, max_content, redact_tool_args) for m in kept]


def _message_list(messages: object) -> list[dict[str, Any]]:
    """The messages, listed (an iterator of them too); refused, naming it, what is no list
    of message dicts: slimming it would fail deep inside with Python's own error, which
    names neither the argument nor the message."""
    if not isinstance(messages, Iterable) or isinstance(
        messages, (str, bytes, bytearray, Mapping)
    ):
        raise ArgumentTypeError(
            f"slim takes a Checkout or a list of AG-UI message dicts, not {a_kind(messages)}"
        )
    listed = list(messages)
    for index, message in enumerate(listed):
        if not isinstance(message, Mapping):
            raise ArgumentTypeError(
                "slim takes a Checkout or a list of AG-UI message dicts: message "
                f"{index} is {a_kind(message)}"
            )
    return listed


def slim(
    checkout_or_messages: Checkout | Iterable[dict[str, Any]],
    preset: str = "standard",
    **overrides: Any,
) -> list[dict[str, Any]]:
    """The slim export of a restored run (or of a message list), by preset.

    Args:
        checkout_or_messages: a :class:`Checkout` (its ``messages`` are used) or messages.
        preset: ``minimal``, ``standard`` or ``full`` (see the module docstring).
        **overrides: any of ``last``, ``max_content``, ``redact_tool_args`` and
            ``drop_tool_results``, replacing the preset's value.

    Raises:
        SlimError: for an unknown preset or an out-of-range value.
        ArgumentTypeError: for what is neither a checkout nor a list of message dicts
            (a ``TypeError`` too).
        TypeError: for an unknown override name.
    """
    try:
        options = PRESETS[preset]
    except KeyError:
        raise SlimError(
            f"unknown slim preset {preset!r}: use one of {', '.join(PRESETS)}"
        ) from None
    options = dataclasses.replace(options, **overrides)
    messages = (
        checkout_or_messages.messages
        if isinstance(checkout_or_messages, Checkout)
        else checkout_or_messages
    )
    return slim_messages(
        _message_list(messages),
        last=options.last,
        max_content=options.max_content,
        redact_tool_args=options.redact_tool_args,
        drop_tool_results=options.drop_tool_results,
    )
