"""The official client's reducer in Python: what ``@ag-ui/client`` 1.0.0 holds after a stream.

Upstream runs every event through ``transformChunks`` (``*_CHUNK`` shorthand expanded into
START / CONTENT / END) and then ``defaultApplyEvents`` (the events folded into ``messages``
and ``state``). This module does both, incrementally: a :class:`Reducer` can be fed a stored
run in as many pieces as it likes and ends where feeding the whole stream would end.

Behaviour follows the client's code, not its documentation, down to the corners that a
store has to reproduce to restore a conversation exactly: reused message ids, tool-call
parents created without ``content``, tool results placed after their assistant message,
the MESSAGES_SNAPSHOT merge that keeps positions and client-only activity and reasoning,
metadata folded key by key, and patches that fail atomically. Where the client warns and
goes on, the reducer appends to :attr:`Reducer.warnings` and goes on; where the client
throws, it raises :class:`~agui_store.errors.InvalidEventError`.

The reducer is the hot path of ``checkout``, so it mutates in place and keeps indexes (message
by id, tool call by id) where the client scans the message list, while keeping the client's
first-match semantics and observable order. Events are assumed to have their 1.0 shape (the
store validates on append); a malformed event never raises a ``TypeError`` here, but only
shape-valid streams are guaranteed to match the client.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec

from agui_store.errors import InvalidEventError
from agui_store.protocol.chunks import ChunkExpander, StreamError, event_type, transform_chunks
from agui_store.protocol.js import (
    UNDEFINED,
    Undefined,
    clone_messages,
    clone_value,
    identity_key,
    js_plus,
    js_string,
    spread,
    strict_equal,
    truthy,
)
from agui_store.protocol.patch import PatchError, apply_patch

__all__ = [
    "ACTIVITY_HISTORY_METADATA",
    "ReducedView",
    "Reducer",
    "authoritative_activity_types",
    "reduce_events",
    "transform_chunks",
]

Event = dict[str, Any]
Message = dict[str, Any]


#: The metadata key under which a snapshot declares which activity types it owns.
ACTIVITY_HISTORY_METADATA: Final = "@ag-ui/client"

_SCALARS: Final = frozenset({str, int, float, bool, type(None)})

_GET_ID = operator.itemgetter("id")


# --------------------------------------------------------------------------------------
# defaultApplyEvents
# --------------------------------------------------------------------------------------


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET


def authoritative_activity_types(event: Event) -> list[Any] | Undefined | None:
    """Which activity types a MESSAGES_SNAPSHOT owns (``@ag-ui/client`` convention).

    ``None``: all of them. A list: those types (an invalid declaration owns none, ``[]``).
    ``UNDEFINED``: no declaration, so legacy inference applies (a snapshot carrying any
    activity owns them all).
    """
    metadata = event.get("metadata")
    if not truthy(metadata) or type(metadata) is not dict:
        return UNDEFINED
    if ACTIVITY_HISTORY_METADATA not in metadata:
        return UNDEFINED
    value = metadata[ACTIVITY_HISTORY_METADATA]
    if type(value) is not dict:
        return []
    if "authoritativeActivityTypes" not in value:
        return UNDEFINED
    types = value["authoritativeActivityTypes"]
    if types is None:
        return None
    if type(types) is list and all(type(t) is str for t in types):
        return list(types)
    return []


Handler = Callable[["Reducer", Event], None]


class Reducer:
    """Incremental: the official client's messages and state as events arrive.

    Feeding a stream in any split gives the same result as feeding it whole: the chunk
    expansion and the message indexes carry over between :meth:`feed` calls.

    Attributes:
        messages: the conversation, AG-UI message dicts in the client's order. It is the
            reducer's own working list: read it (or copy it) between feeds; change it only
            through :meth:`reset_start`.
        state: the agent state, any JSON value.
        pending_interrupts: ``RUN_FINISHED.outcome.interrupts`` of the last run that
            finished (``[]`` after a success or cancellation; untouched by RUN_STARTED and
            RUN_ERROR), as ``AbstractAgent.pendingInterrupts``.
        warnings: one line per warning the client would have logged, in order.
    """

    def __init__(
        self,
        messages: list[Message] | None = None,
        state: Any = _UNSET,
        *,
        copy: bool = True,
        expand_chunks: bool = True,
        pending_interrupts: list[dict[str, Any]] | None = None,
    ) -> None:
        """Start from ``messages`` and ``state`` (default: no messages, ``{}``).

        Args:
            messages: the messages the client holds before the first event.
            state: the state it holds (any JSON value, ``None`` included).
            copy: ``True`` copies the start values and every event payload that ends up in
                ``messages``/``state``. ``False`` hands over ownership of all of it: the start
                values and the events fed later become the reducer's to mutate and to share
                (freshly decoded events; the hot path of ``checkout``).
            expand_chunks: ``False`` applies events raw, like ``defaultApplyEvents`` alone: a
                ``*_CHUNK`` event is then an error.
            pending_interrupts: the interrupts left pending before the first event.
        """
        self._copy = copy
        self.warnings: list[str] = []
        self._chunks = ChunkExpander(self.warnings)
        self._handlers = _FEED_HANDLERS if expand_chunks else _APPLY_HANDLERS
        self._fed = 0
        self.pending_interrupts: list[dict[str, Any]] = (
            [] if pending_interrupts is None else list(pending_interrupts)
        )
        self.messages: list[Message] = []
        self.state: Any = {}
        self._by_id: dict[Any, Message] = {}
        self._tool_calls: dict[Any, tuple[Message, dict[str, Any]]] = {}
        self._aliased = False
        # The leading positions that have held the same objects since take_unmoved() (see
        # there): appends leave it, an insert or an assignment lowers it, a new list zeroes it.
        self._unmoved = 0
        # After a snapshot without a value the client's state is undefined: it keeps showing
        # the last state, and the next STATE_DELTA patches UNDEFINED instead of it.
        self._state_undefined = False
        #: The STATE_DELTA patches applied since :meth:`track_state` (in order: applied to
        #: the state it saw, they give the current one), or ``None`` when the state was
        #: replaced since (a snapshot, a run's input) or tracking is off.
        self.state_deltas: list[Any] | None = None
        self.reset_start([] if messages is None else messages, {} if state is _UNSET else state)

    # -- public ------------------------------------------------------------------------

    def feed(self, events: Iterable[Event]) -> None:
        """Apply events (``*_CHUNK`` expanded first), continuing from earlier feeds.

        Raises:
            InvalidEventError: where the client throws (see :func:`transform_chunks`, an
                unexpanded chunk with ``expand_chunks=False``, an interrupt outcome whose
                ``interrupts`` is not a list). ``index`` counts every event fed to this
                reducer so far; the events before it have been applied.
        """
        handlers = self._handlers
        lanes = self._chunks.lanes
        by_id = self._by_id
        tool_calls = self._tool_calls
        index = self._fed
        event: Any = None
        try:
            for event in events:
                if lanes:
                    self._through_lanes(event)
                    index += 1
                    continue
                kind = event.get("type")
                # The two events of every streamed token, inlined for their plain case (a
                # string delta onto a string, no metadata); anything else takes the handler.
                if kind == "TEXT_MESSAGE_CONTENT":
                    mid = event.get("messageId")
                    m = by_id.get(mid) if type(mid) is str else None
                    if m is not None and "metadata" not in event:
                        content = m.get("content")
                        delta = event.get("delta")
                        if (
                            type(content) is str
                            and type(delta) is str
                            and m.get("role") != "activity"
                        ):
                            m["content"] = ""  # see _append_content
                            content += delta
                            m["content"] = content
                            index += 1
                            continue
                elif kind == "TOOL_CALL_ARGS":
                    tcid = event.get("toolCallId")
                    found = tool_calls.get(tcid) if type(tcid) is str else None
                    if found is not None and "metadata" not in event:
                        function = found[1].get("function")
                        if type(function) is dict:
                            args = function.get("arguments")
                            delta = event.get("delta")
                            if type(args) is str and type(delta) is str:
                                function["arguments"] = ""  # see _append_content
                                args += delta
                                function["arguments"] = args
                                index += 1
                                continue
                handler = handlers.get(kind)
                if handler is not None:
                    handler(self, event)
                index += 1
        except StreamError as e:
            raise InvalidEventError(
                e.reason, index=index, event_type=event_type(event), path=e.path
            ) from None
        finally:
            self._fed = index

    def reset_start(self, messages: list[Message], state: Any) -> None:
        """Start a new run from ``messages`` and ``state``, as the client does for each run.

        The client runs each run through a fresh ``transformChunks``, so a chunk stream the
        previous run left open is dropped (with no synthesized END). Pending interrupts and
        warnings carry over. Handing back :attr:`messages` itself costs nothing; any other
        list is indexed anew (and copied unless ``copy=False``).
        """
        self._chunks.lanes.clear()
        if messages is not self.messages:
            self.messages = clone_messages(messages) if self._copy else messages
            self._unmoved = 0
            self._reindex()
        if state is not self.state:
            self.state_deltas = None
        self.state = clone_value(state) if self._copy and state is not self.state else state
        self._state_undefined = False

    def track_state(self, applied: list[Any] | None = None) -> None:
        """Record the STATE_DELTA patches applied from now on in :attr:`state_deltas`
        (continuing ``applied``, the ones that led to the current state, when given)."""
        self.state_deltas = [] if applied is None else applied

    def patch_target(self, event: Event) -> Any:
        """The document a ``STATE_DELTA`` or ``ACTIVITY_DELTA`` would patch now (the state,
        or the activity message's content), as the handlers below find it; ``UNDEFINED``
        when the event patches nothing. Read-only: the store asks it before an event is fed,
        to measure what the patch builds (:mod:`agui_store.history.nesting`)."""
        if event.get("type") == "STATE_DELTA":
            return UNDEFINED if self._state_undefined else self.state
        existing = self._find(event.get("messageId", UNDEFINED))
        if existing is None or existing.get("role") != "activity":
            return UNDEFINED
        content = existing.get("content")
        return {} if content is None else content

    def continue_start(self, sent: Any, state: Any) -> bool:
        """:meth:`reset_start` for a run whose input is this reducer's own messages (the same
        objects, as an input stored by reference expands to) followed by new ones: those are
        appended and indexed, the rest of the list keeps its index. ``False``, with nothing
        done, for any other input (``reset_start`` then indexes the whole list)."""
        messages = self.messages
        n = len(messages)
        if self._copy or type(sent) is not list or len(sent) < n:
            return False
        if not all(map(operator.is_, sent, messages)):
            return False
        extra = sent[n:]
        if extra:
            if set(map(type, extra)) != {dict}:
                return False
            # New objects only: one object at two places is what a reindex looks for.
            fresh = set(map(id, extra))
            if len(fresh) < len(extra) or not fresh.isdisjoint(map(id, messages)):
                return False
        self._start_with(extra, state)
        return True

    def extend_start(self, extra: Any, state: Any) -> bool:
        """:meth:`reset_start` with this reducer's list followed by ``extra``: what a client
        that sends only its new messages starts from. They are appended and indexed; the
        rest of the list keeps its objects and its index, so the run costs what it adds,
        not the history. ``False``, with nothing done, unless the reducer owns what it is
        given (``copy=False``) and ``extra`` are messages (dicts) whose ids are all new: held
        by no message of the list, none twice (then none is an object the list holds, and
        the list keeps one object per position). ``reset_start`` then takes the list whole.
        """
        if self._copy or type(extra) is not list:
            return False
        if extra:
            if set(map(type, extra)) != {dict}:
                return False
            keys = [m.get("id", UNDEFINED) for m in extra]
            keys = [k if type(k) is str else identity_key(k) for k in keys]
            if len(set(keys)) < len(keys) or not self._by_id.keys().isdisjoint(keys):
                return False
        self._start_with(extra, state)
        return True

    def _start_with(self, extra: list[Message], state: Any) -> None:
        """Start a run from the list followed by ``extra`` (new objects), and ``state``."""
        self._chunks.lanes.clear()
        messages = self.messages
        for m in extra:
            messages.append(m)
            self._index_pushed(m)
        if state is not self.state:
            self.state_deltas = None
        self.state = state
        self._state_undefined = False

    def holds_id(self, mid: str) -> bool:
        """Whether a message of the list has this (string) id."""
        return mid in self._by_id

    def first_position(self, mid: str) -> int | None:
        """Where the first message with this (string) id stands (``None``: no message has
        it); found from the index, searching the list for that object only."""
        m = self._by_id.get(mid)
        return None if m is None else self._position(m)

    def lowest_position(self, ids: Iterable[str]) -> int:
        """The lowest position holding a message these ids reach (:meth:`holders`); the
        list's length when none does. What a run naming them may have edited in place
        starts there."""
        return min((self._position(m) for m in self.holders(ids)), default=len(self.messages))

    def take_unmoved(self) -> int:
        """How many leading positions of the list hold the same objects (in place, perhaps
        edited) as at the previous call: appends and edits in place leave a position
        alone; an insert before the end, a position given another object, or a new list
        (a snapshot, a run's input taken whole) moves it. Counting starts anew from the list
        as it is now, so a caller learns what one run did to the list without copying it
        (the first call after construction counts from the start list: 0).
        """
        unmoved = min(self._unmoved, len(self.messages))
        self._unmoved = len(self.messages)
        return unmoved

    @property
    def aliased(self) -> bool:
        """Whether one message object stands at two positions (the client can hold that:
        a snapshot maps two local copies of an id onto one message)."""
        return self._aliased

    def holders(self, ids: Iterable[str]) -> list[Message]:
        """The messages an event naming these ids would reach: the message with that id, or
        the one holding a tool call with that id (first match, as the client finds them).

        Lets a caller learn what a run may have changed without scanning every message.
        """
        found: list[Message] = []
        for name in ids:
            m = self._by_id.get(name)
            if m is not None:
                found.append(m)
            held = self._tool_calls.get(name)
            if held is not None:
                found.append(held[0])
        return found

    def ids_unique(self) -> bool:
        """Whether every message has an id of its own. Then no message object was swapped
        for another (only a list with a repeated id does that, or a snapshot), so a
        position that holds an equal message holds the same one."""
        return len(self._by_id) == len(self.messages)

    def view(self) -> ReducedView:
        """The current result (sharing the reducer's lists; copy before feeding more)."""
        return ReducedView(
            messages=self.messages,
            state=self.state,
            pending_interrupts=self.pending_interrupts,
            warnings=self.warnings,
        )

    # -- indexes -----------------------------------------------------------------------

    def _reindex(self) -> None:
        """Rebuild the id indexes from scratch (first match wins, as ``Array.find``)."""
        if self._reindex_plain():
            return
        by_id: dict[Any, Message] = {}
        tool_calls: dict[Any, tuple[Message, dict[str, Any]]] = {}
        repeated = False
        for m in self.messages:
            if type(m) is not dict:
                continue
            mid = m.get("id", UNDEFINED)
            k = mid if type(mid) is str else identity_key(mid)
            if k in by_id:
                repeated = True
            else:
                by_id[k] = m
            calls = m.get("toolCalls")
            if type(calls) is list:
                for call in calls:
                    if type(call) is dict:
                        cid = call.get("id", UNDEFINED)
                        key = cid if type(cid) is str else identity_key(cid)
                        tool_calls.setdefault(key, (m, call))
        # Refilled, not replaced: feed() holds on to these two dicts.
        self._by_id.clear()
        self._by_id.update(by_id)
        self._tool_calls.clear()
        self._tool_calls.update(tool_calls)
        # One object at two positions only ever shares an id with itself, so a list with
        # unique ids has none; with repeated ids, look.
        self._aliased = repeated and len({id(m) for m in self.messages}) < len(self.messages)

    def _reindex_plain(self) -> bool:
        """:meth:`_reindex` for the common list (every message a dict with a string id of its
        own, tool calls with string ids), mostly in C: a checkout that replays a few runs
        after a checkpoint indexes thousands of messages. ``False``: not that list."""
        messages = self.messages
        if not messages:
            return False
        if set(map(type, messages)) != {dict}:
            return False
        try:
            ids = list(map(_GET_ID, messages))
        except KeyError:
            return False
        if set(map(type, ids)) != {str}:
            return False
        by_id = dict(zip(ids, messages))
        if len(by_id) != len(messages):
            return False  # a repeated id: the loop keeps the first and looks for aliasing
        holders = [m for m in messages if "toolCalls" in m]
        lists = [m["toolCalls"] for m in holders]
        if lists and set(map(type, lists)) != {list}:
            return False
        owned = [(m, call) for m, calls in zip(holders, lists) for call in calls]
        calls = [pair[1] for pair in owned]
        if calls and set(map(type, calls)) != {dict}:
            return False
        try:
            call_ids = list(map(_GET_ID, calls))
        except KeyError:
            return False
        if call_ids and set(map(type, call_ids)) != {str}:
            return False
        # First match wins (as setdefault in the loop): the reversed pairs, last write wins.
        tool_calls = dict(zip(reversed(call_ids), reversed(owned)))
        self._by_id.clear()
        self._by_id.update(by_id)
        self._tool_calls.clear()
        self._tool_calls.update(tool_calls)
        self._aliased = False
        return True

    def _index_pushed(self, m: Message) -> None:
        """Index a message just appended to the end of the list."""
        mid = m.get("id", UNDEFINED)
        self._by_id.setdefault(mid if type(mid) is str else identity_key(mid), m)
        calls = m.get("toolCalls")
        if type(calls) is list:
            for call in calls:
                if type(call) is dict:
                    cid = call.get("id", UNDEFINED)
                    key = cid if type(cid) is str else identity_key(cid)
                    self._tool_calls.setdefault(key, (m, call))

    def _position(self, m: Message) -> int:
        """Index of the first position holding ``m`` (the same object)."""
        msgs = self.messages
        if self._aliased:
            for i, other in enumerate(msgs):
                if other is m:
                    return i
        else:
            # Objects are unique: search from the end, where the live messages are.
            for i in range(len(msgs) - 1, -1, -1):
                if msgs[i] is m:
                    return i
        raise AssertionError("indexed message is not in the list")  # pragma: no cover

    def _replace_at(self, m: Message, new: Message) -> Message:
        """``messages[findIndex(id)] = new``: a new object at the first position of ``m``.

        Returns the object now at that position (``m`` itself, updated in place, when it
        sits at no other position: the same thing, without a search).
        """
        if not self._aliased:
            had_calls = bool(m.get("toolCalls"))
            m.clear()
            m.update(new)
            if had_calls:
                self._reindex()
            return m
        at = self._position(m)
        self.messages[at] = new
        self._unmoved = min(self._unmoved, at)
        self._reindex()
        return new

    def _merge_event_metadata(self, target: dict[str, Any], event: Event) -> None:
        """Merge the event's ``metadata`` into ``target`` when the event carries one."""
        metadata = event.get("metadata", UNDEFINED)
        if metadata is not UNDEFINED:
            self._merge_metadata(target, metadata)

    def _merge_metadata(self, target: dict[str, Any], incoming: Any) -> None:
        """Fold an event's metadata into its target, key by key, the last write winning."""
        added = spread(incoming, clone=self._copy)
        existing = target.get("metadata", UNDEFINED)
        if existing is UNDEFINED:
            target["metadata"] = added
        elif type(existing) is dict:
            target["metadata"] = {**existing, **added}
        else:
            target["metadata"] = {**spread(existing, clone=False), **added}

    def _find(self, mid: Any) -> Message | None:
        return self._by_id.get(mid if type(mid) is str else identity_key(mid))

    def _streaming_target(self, event: Event, label: str, kinds: str) -> Message | None:
        """The message a CONTENT/END event continues, or ``None`` after the client's warning."""
        mid = event.get("messageId", UNDEFINED)
        m = self._by_id.get(mid if type(mid) is str else identity_key(mid))
        if m is None:
            self.warnings.append(f"{label}: No message found with ID '{js_string(mid)}'")
            return None
        if m.get("role") == "activity":
            self.warnings.append(
                f"{label}: Message '{js_string(mid)}' is an activity message — message ids must "
                f"be unique across activity and {kinds} messages"
            )
            return None
        return m

    def _tool_call(self, tcid: Any) -> tuple[Message, dict[str, Any]] | None:
        return self._tool_calls.get(tcid if type(tcid) is str else identity_key(tcid))

    # -- chunks ------------------------------------------------------------------------

    def _through_lanes(self, event: Event) -> None:
        apply = _APPLY_HANDLERS
        for expanded in self._chunks.expand(event):
            handler = apply.get(expanded.get("type"))
            if handler is not None:
                handler(self, expanded)

    def _reject_chunk(self, event: Event) -> None:
        raise StreamError(f"{event.get('type')} must be transformed before being applied")

    # -- text --------------------------------------------------------------------------

    def _on_text_start(self, event: Event) -> None:
        mid = event.get("messageId", UNDEFINED)
        existing = self._find(mid)
        if existing is not None and existing.get("role") == "activity":
            self.warnings.append(
                f"TEXT_MESSAGE_START: Message '{js_string(mid)}' is an activity message — message "
                "ids must be unique across activity and text messages"
            )
            return
        target = existing
        if target is None:
            role = event.get("role", UNDEFINED)
            target = {} if mid is UNDEFINED else {"id": mid}
            target["role"] = "assistant" if role is UNDEFINED else role
            target["content"] = ""
            if "name" in event:
                target["name"] = event["name"]
            sub = event.get("subagentRunId")
            if sub is not None:
                target["subagentRunId"] = sub
            self.messages.append(target)
            self._by_id[mid if type(mid) is str else identity_key(mid)] = target
        self._merge_event_metadata(target, event)

    def _on_text_content(self, event: Event) -> None:
        # The hottest handler (one event per streamed token): the lookup is inlined.
        mid = event.get("messageId", UNDEFINED)
        m = self._by_id.get(mid if type(mid) is str else identity_key(mid))
        if m is None or m.get("role") == "activity":
            self._streaming_target(event, "TEXT_MESSAGE_CONTENT", "text")  # warns
            return
        self._append_content(m, event)

    def _append_content(self, m: Message, event: Event) -> None:
        """``content += delta`` as JavaScript does it, then the event's metadata."""
        content = m.get("content")
        delta = event.get("delta", UNDEFINED)
        if type(content) is str and type(delta) is str:
            # ``m["content"] = content + delta`` copies the whole text for every delta (the
            # dict still holds it), which made a message of 80,000 deltas take seconds; the
            # client's JavaScript strings are ropes and do not copy. With the dict's hold
            # dropped first, ``+=`` on the only reference extends the string in place
            # (CPython), keeping the key's place in the message.
            m["content"] = ""
            content += delta
            m["content"] = content
        else:
            m["content"] = (content if type(content) is str else "") + js_string(delta)
        self._merge_event_metadata(m, event)

    def _on_text_end(self, event: Event) -> None:
        m = self._streaming_target(event, "TEXT_MESSAGE_END", "text")
        if m is not None:
            self._merge_event_metadata(m, event)

    # -- reasoning ---------------------------------------------------------------------

    def _on_reasoning_start(self, event: Event) -> None:
        mid = event.get("messageId", UNDEFINED)
        existing = self._find(mid)
        if existing is not None and existing.get("role") == "activity":
            self.warnings.append(
                f"REASONING_MESSAGE_START: Message '{js_string(mid)}' is an activity message — "
                "message ids must be unique across activity and reasoning messages"
            )
            return
        target = existing
        if target is None:
            target = {} if mid is UNDEFINED else {"id": mid}
            target["role"] = "reasoning"
            target["content"] = ""
            sub = event.get("subagentRunId")
            if sub is not None:
                target["subagentRunId"] = sub
            self.messages.append(target)
            self._by_id[mid if type(mid) is str else identity_key(mid)] = target
        self._merge_event_metadata(target, event)

    def _on_reasoning_content(self, event: Event) -> None:
        m = self._streaming_target(event, "REASONING_MESSAGE_CONTENT", "reasoning")
        if m is None:
            return
        self._append_content(m, event)

    def _on_reasoning_end(self, event: Event) -> None:
        m = self._streaming_target(event, "REASONING_MESSAGE_END", "reasoning")
        if m is not None:
            self._merge_event_metadata(m, event)

    def _on_encrypted_value(self, event: Event) -> None:
        # Attaches a blob to an entity that exists; its metadata stays on the event.
        entity = event.get("entityId", UNDEFINED)
        value = event.get("encryptedValue", UNDEFINED)
        target: dict[str, Any] | None = None
        if event.get("subtype") == "tool-call":
            found = self._tool_call(entity)
            if found is not None and found[0].get("role") == "assistant":
                target = found[1]
            elif found is not None:
                target = self._scan_tool_call(entity, assistant_only=True)
        else:
            m = self._find(entity)
            if m is not None and m.get("role") != "activity":
                target = m
        if target is not None:
            if value is UNDEFINED:
                target.pop("encryptedValue", None)
            else:
                target["encryptedValue"] = value

    def _scan_tool_call(self, tcid: Any, *, assistant_only: bool) -> dict[str, Any] | None:
        """The first tool call ``tcid`` of the first (assistant) message holding it."""
        for m in self.messages:
            if type(m) is not dict or (assistant_only and m.get("role") != "assistant"):
                continue
            calls = m.get("toolCalls")
            if type(calls) is list:
                for call in calls:
                    if type(call) is dict and strict_equal(call.get("id", UNDEFINED), tcid):
                        return call
        return None

    # -- tool calls --------------------------------------------------------------------

    def _on_tool_start(self, event: Event) -> None:
        tcid = event.get("toolCallId", UNDEFINED)
        name = event.get("toolCallName", UNDEFINED)
        found = self._tool_call(tcid)
        if found is not None:
            # Idempotent: a start replayed for a call already held only renames it.
            call = found[1]
            held = call.get("function")
            old = held.get("name", UNDEFINED) if type(held) is dict else UNDEFINED
            if type(held) is dict and not strict_equal(old, name):
                self.warnings.append(
                    f"TOOL_CALL_START: tool call '{js_string(tcid)}' already exists with name "
                    f"'{js_string(old)}' — updating it to '{js_string(name)}'"
                )
                if name is UNDEFINED:
                    held.pop("name", None)
                else:
                    held["name"] = name
            self._merge_event_metadata(call, event)
            return

        parent_id = event.get("parentMessageId", UNDEFINED)
        target: Message | None = None
        created_id: Any = UNDEFINED
        if truthy(parent_id):
            existing = self._find(parent_id)
            if existing is not None and existing.get("role") == "assistant":
                target = existing
            elif existing is not None:
                self.warnings.append(
                    f"TOOL_CALL_START: parentMessageId '{js_string(parent_id)}' matches a "
                    f"'{js_string(existing.get('role', UNDEFINED))}' message, not assistant — "
                    "falling back to toolCallId"
                )
                created_id = tcid
            else:
                created_id = parent_id
        else:
            created_id = tcid
        if target is None:
            target = {} if created_id is UNDEFINED else {"id": created_id}
            target["role"] = "assistant"
            target["toolCalls"] = []
            created_key = created_id if type(created_id) is str else identity_key(created_id)
            # "Created" means a new id: a parent minted under an id already in use (the
            # tool call id of a colliding message) does not take the event's subagent tag.
            is_new = created_key not in self._by_id
            sub = event.get("subagentRunId")
            if is_new and sub is not None:
                target["subagentRunId"] = sub
            self.messages.append(target)
            self._by_id.setdefault(created_key, target)
        calls = target.get("toolCalls")
        if calls is None:
            calls = target["toolCalls"] = []
        function: dict[str, Any] = {} if name is UNDEFINED else {"name": name}
        function["arguments"] = ""
        call = {} if tcid is UNDEFINED else {"id": tcid}
        call["type"] = "function"
        call["function"] = function
        if type(calls) is list:
            calls.append(call)
            self._tool_calls[tcid if type(tcid) is str else identity_key(tcid)] = (target, call)
        self._merge_event_metadata(call, event)

    def _on_tool_args(self, event: Event) -> None:
        tcid = event.get("toolCallId", UNDEFINED)
        found = self._tool_calls.get(tcid if type(tcid) is str else identity_key(tcid))
        if found is None:
            self.warnings.append(
                f"TOOL_CALL_ARGS: No message found containing tool call with ID '{js_string(tcid)}'"
            )
            return
        call = found[1]
        function = call.get("function")
        if type(function) is not dict:
            return  # the client throws reading `.arguments` of nothing; not a 1.0 message
        delta = event.get("delta", UNDEFINED)
        args = function.get("arguments", UNDEFINED)
        if type(args) is str and type(delta) is str:
            function["arguments"] = ""  # see _append_content
            args += delta
            function["arguments"] = args
        else:
            function["arguments"] = js_plus(args, delta)
        self._merge_event_metadata(call, event)

    def _on_tool_end(self, event: Event) -> None:
        tcid = event.get("toolCallId", UNDEFINED)
        found = self._tool_call(tcid)
        if found is None:
            self.warnings.append(
                f"TOOL_CALL_END: No message found containing tool call with ID '{js_string(tcid)}'"
            )
            return
        self._merge_event_metadata(found[1], event)

    def _on_tool_result(self, event: Event) -> None:
        mid = event.get("messageId", UNDEFINED)
        tcid = event.get("toolCallId", UNDEFINED)
        message: Message = {} if mid is UNDEFINED else {"id": mid}
        if tcid is not UNDEFINED:
            message["toolCallId"] = tcid
        role = event.get("role")
        message["role"] = role if truthy(role) else "tool"
        if "content" in event:
            content = event["content"]
            message["content"] = clone_value(content) if self._copy else content
        sub = event.get("subagentRunId")
        if sub is not None:
            message["subagentRunId"] = sub
        self._merge_event_metadata(message, event)

        # Right after the assistant message that issued the call, after any tool results
        # already there (parallel results keep their order); appended when there is none.
        owner: Message | None = None
        found = self._tool_call(tcid)
        if found is not None:
            owner = found[0] if found[0].get("role") == "assistant" else self._scan_owner(tcid)
        k = mid if type(mid) is str else identity_key(mid)
        msgs = self.messages
        if owner is None:
            msgs.append(message)
            self._by_id.setdefault(k, message)
            return
        at = self._position(owner) + 1
        n = len(msgs)
        while at < n and msgs[at].get("role") == "tool":
            at += 1
        first = self._by_id.get(k)
        msgs.insert(at, message)
        self._unmoved = min(self._unmoved, at)  # before the end: what follows moves
        if first is None or (first is not owner and self._position(first) > at):
            self._by_id[k] = message  # it now comes before every other message with its id
        if self._aliased:
            self._reindex()

    def _scan_owner(self, tcid: Any) -> Message | None:
        for m in self.messages:
            if type(m) is not dict or m.get("role") != "assistant":
                continue
            calls = m.get("toolCalls")
            if type(calls) is list and any(
                type(c) is dict and strict_equal(c.get("id", UNDEFINED), tcid) for c in calls
            ):
                return m
        return None

    # -- state -------------------------------------------------------------------------

    def _on_state_snapshot(self, event: Event) -> None:
        if "snapshot" not in event:
            # The client's state becomes undefined, which it never shows: it keeps showing
            # the last state while the next patch starts from nothing.
            self._state_undefined = True
            self.state_deltas = None
            return
        snapshot = event["snapshot"]
        self.state = clone_value(snapshot) if self._copy else snapshot
        self._state_undefined = False
        self.state_deltas = None

    def _on_state_delta(self, event: Event) -> None:
        base = UNDEFINED if self._state_undefined else self.state
        try:
            # A new document (the old state is never changed): untouched subtrees are shared
            # with the old state, values from the event are copies.
            delta: Any = event.get("delta")
            state = apply_patch(base, delta)
        except PatchError as e:
            # Atomic: a patch that fails leaves the state as it was.
            self.warnings.append(f"Failed to apply state patch: {e}")
            return
        if state is UNDEFINED or base is not self.state:
            self.state_deltas = None  # not a patch of the state shown before it
        elif self.state_deltas is not None:
            self.state_deltas.append(delta)
        if state is UNDEFINED:
            self._state_undefined = True
        else:
            self.state = state
            self._state_undefined = False

    # -- messages snapshot -------------------------------------------------------------

    def _on_messages_snapshot(self, event: Event) -> None:
        raw = event.get("messages")
        incoming: list[Message] = []
        if type(raw) is list:
            copy = self._copy
            for m in raw:
                if type(m) is dict:
                    if "subagentRunId" in m and m["subagentRunId"] is None:
                        # A runtime null tag reads as absent and must not persist.
                        m = {k: v for k, v in m.items() if k != "subagentRunId"}
                    if copy:
                        m = clone_value(m)
                incoming.append(m)
        by_id: dict[Any, Message] = {}
        has_activity = has_reasoning = False
        for m in incoming:
            if type(m) is not dict:
                continue
            mid = m.get("id", UNDEFINED)
            by_id[mid if type(mid) is str else identity_key(mid)] = m
            role = m.get("role")
            if role == "activity":
                has_activity = True
            elif role == "reasoning":
                has_reasoning = True

        # Local messages the snapshot leaves out are deleted, except client-only ones:
        # activity of a type the snapshot does not own, and reasoning when it carries none.
        owned = authoritative_activity_types(event)

        def preserved(m: Message) -> bool:
            role = m.get("role")
            if role == "activity":
                if type(owned) is list:
                    atype = m.get("activityType", UNDEFINED)
                    return not any(strict_equal(atype, t) for t in owned)
                return owned is UNDEFINED and not has_activity
            return role == "reasoning" and not has_reasoning

        kept: list[Message] = []
        present: set[Any] = set()
        for m in self.messages:
            if type(m) is not dict:
                continue
            mid = m.get("id", UNDEFINED)
            k = mid if type(mid) is str else identity_key(mid)
            replacement = by_id.get(k)
            if replacement is not None:
                kept.append(replacement)  # keeps its local position, takes the new version
            elif preserved(m):
                kept.append(m)
            else:
                continue
            present.add(k)
        for m in incoming:
            if type(m) is not dict:
                kept.append(m)
                continue
            mid = m.get("id", UNDEFINED)
            if (mid if type(mid) is str else identity_key(mid)) not in present:
                kept.append(m)
        self.messages = kept
        self._unmoved = 0
        self._reindex()

    # -- activity ----------------------------------------------------------------------

    def _on_activity_snapshot(self, event: Event) -> None:
        mid = event.get("messageId", UNDEFINED)
        existing = self._find(mid)
        replace = event.get("replace")
        replace = True if replace is None else truthy(replace)
        content = event.get("content", UNDEFINED)
        if content is not UNDEFINED and self._copy:
            content = clone_value(content)
        atype = event.get("activityType", UNDEFINED)
        sub = event.get("subagentRunId")

        def minted() -> Message:
            m: Message = {} if mid is UNDEFINED else {"id": mid}
            m["role"] = "activity"
            if atype is not UNDEFINED:
                m["activityType"] = atype
            if content is not UNDEFINED:
                m["content"] = content
            if sub is not None:
                m["subagentRunId"] = sub
            return m

        target: Message | None = None
        if existing is None:
            target = minted()
            self.messages.append(target)
            self._by_id[mid if type(mid) is str else identity_key(mid)] = target
        elif existing.get("role") == "activity":
            target = existing
            if replace:
                # Content and attribution are re-minted; accumulated metadata carries over.
                updated = dict(existing)
                for name, value in (
                    ("activityType", atype),
                    ("content", content),
                    ("subagentRunId", UNDEFINED if sub is None else sub),
                ):
                    if value is UNDEFINED:
                        updated.pop(name, None)
                    else:
                        updated[name] = value
                target = self._replace_at(existing, updated)
        elif replace:
            target = self._replace_at(existing, minted())
        if target is not None:
            self._merge_event_metadata(target, event)

    def _on_activity_delta(self, event: Event) -> None:
        mid = event.get("messageId", UNDEFINED)
        existing = self._find(mid)
        if existing is None:
            return
        if existing.get("role") != "activity":
            self.warnings.append(
                f"ACTIVITY_DELTA: Message '{js_string(mid)}' is not an activity message"
            )
            return
        # The metadata does not depend on the patch: a stale path costs the message nothing.
        self._merge_event_metadata(existing, event)
        base = existing.get("content")
        if base is None:
            base = {}
        patch: Any = event.get("patch")
        if patch is None:
            patch = []
        try:
            content = apply_patch(base, patch)
        except PatchError as e:
            self.warnings.append(f"Failed to apply activity patch for '{js_string(mid)}': {e}")
            return
        updated = dict(existing)
        if content is UNDEFINED:
            updated.pop("content", None)
        else:
            updated["content"] = content
        atype = event.get("activityType", UNDEFINED)
        if atype is UNDEFINED:
            updated.pop("activityType", None)
        else:
            updated["activityType"] = atype
        self._replace_at(existing, updated)

    # -- runs --------------------------------------------------------------------------

    def _on_run_started(self, event: Event) -> None:
        run_input = event.get("input")
        sent = run_input.get("messages") if type(run_input) is dict else None
        if not truthy(sent):
            return
        if type(sent) is not list:
            raise StreamError("RUN_STARTED input.messages is not iterable", "$.input.messages")
        # Messages not already held are appended; a held id is never updated.
        for m in sent:
            if type(m) is not dict:
                continue
            mid = m.get("id", UNDEFINED)
            if (mid if type(mid) is str else identity_key(mid)) in self._by_id:
                continue
            if "subagentRunId" in m and m["subagentRunId"] is None:
                m = {k: v for k, v in m.items() if k != "subagentRunId"}
            if self._copy:
                m = clone_value(m)
            self.messages.append(m)
            self._index_pushed(m)

    def _on_run_finished(self, event: Event) -> None:
        outcome = event.get("outcome")
        kind = outcome.get("type") if type(outcome) is dict else None
        if kind == "interrupt":
            assert type(outcome) is dict
            interrupts = outcome.get("interrupts")
            if type(interrupts) is not list:
                raise StreamError(
                    "RUN_FINISHED outcome 'interrupt' carries no interrupts list",
                    "$.outcome.interrupts",
                )
            pending: list[Any] = []
            for interrupt in interrupts:
                if interrupt is None:
                    raise StreamError(
                        "RUN_FINISHED outcome 'interrupt' carries a null interrupt",
                        "$.outcome.interrupts",
                    )
                if type(interrupt) is dict and interrupt.get("subagentRunId", 0) is None:
                    interrupt = {k: v for k, v in interrupt.items() if k != "subagentRunId"}
                pending.append(clone_value(interrupt) if self._copy else interrupt)
            self.pending_interrupts = pending
            return
        if (
            kind == "success"
            and type(outcome) is dict
            and outcome.get("pendingToolCallIds", 0) is None
        ):
            # The client reads `.length` of the named list before anything else.
            raise StreamError(
                "RUN_FINISHED outcome 'success' has pendingToolCallIds null",
                "$.outcome.pendingToolCallIds",
            )
        self.pending_interrupts = []


# Events without an entry change nothing (RUN_ERROR, STEP_*, RAW, CUSTOM, REASONING_START /
# _END, SUBAGENT_*, unknown types): the client only runs subscriber hooks for them.
_APPLY_HANDLERS: Final[dict[Any, Handler]] = {
    "TEXT_MESSAGE_START": Reducer._on_text_start,
    "TEXT_MESSAGE_CONTENT": Reducer._on_text_content,
    "TEXT_MESSAGE_END": Reducer._on_text_end,
    "TOOL_CALL_START": Reducer._on_tool_start,
    "TOOL_CALL_ARGS": Reducer._on_tool_args,
    "TOOL_CALL_END": Reducer._on_tool_end,
    "TOOL_CALL_RESULT": Reducer._on_tool_result,
    "STATE_SNAPSHOT": Reducer._on_state_snapshot,
    "STATE_DELTA": Reducer._on_state_delta,
    "MESSAGES_SNAPSHOT": Reducer._on_messages_snapshot,
    "ACTIVITY_SNAPSHOT": Reducer._on_activity_snapshot,
    "ACTIVITY_DELTA": Reducer._on_activity_delta,
    "REASONING_MESSAGE_START": Reducer._on_reasoning_start,
    "REASONING_MESSAGE_CONTENT": Reducer._on_reasoning_content,
    "REASONING_MESSAGE_END": Reducer._on_reasoning_end,
    "REASONING_ENCRYPTED_VALUE": Reducer._on_encrypted_value,
    "RUN_STARTED": Reducer._on_run_started,
    "RUN_FINISHED": Reducer._on_run_finished,
    "TEXT_MESSAGE_CHUNK": Reducer._reject_chunk,
    "TOOL_CALL_CHUNK": Reducer._reject_chunk,
    "REASONING_MESSAGE_CHUNK": Reducer._reject_chunk,
}
_FEED_HANDLERS: Final[dict[Any, Handler]] = {
    **_APPLY_HANDLERS,
    "TEXT_MESSAGE_CHUNK": Reducer._through_lanes,
    "TOOL_CALL_CHUNK": Reducer._through_lanes,
    "REASONING_MESSAGE_CHUNK": Reducer._through_lanes,
}


class ReducedView(msgspec.Struct, frozen=True, kw_only=True):
    """What the official client holds after a stream.

    Attributes:
        messages: AG-UI message dicts, in the client's order.
        state: the agent state (any JSON value).
        pending_interrupts: interrupts of the last RUN_FINISHED with an interrupt outcome
            (``[]`` once a later run finishes otherwise).
        warnings: what the client warned about on the way, in order.
    """

    messages: list[Message]
    state: Any
    pending_interrupts: list[dict[str, Any]]
    warnings: list[str]


def reduce_events(
    events: Iterable[Event],
    *,
    messages: list[Message] | None = None,
    state: Any = _UNSET,
    expand_chunks: bool = True,
) -> ReducedView:
    """Replay a stream as ``@ag-ui/client`` 1.0.0 does and return what it ends up holding.

    Example:
        >>> view = reduce_events([
        ...     {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        ...     {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "Hi"},
        ...     {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ... ])
        >>> view.messages
        [{'id': 'm', 'role': 'assistant', 'content': 'Hi'}]

    Args:
        events: the events, in stream order (nothing in them is modified).
        messages: the messages held before the first event (copied).
        state: the state held before the first event (copied; default ``{}``).
        expand_chunks: ``False`` skips ``transformChunks`` (a chunk is then an error).

    Raises:
        InvalidEventError: where the client throws (see :meth:`Reducer.feed`).
    """
    reducer = Reducer(messages, state, expand_chunks=expand_chunks)
    reducer.feed(events)
    return reducer.view()
