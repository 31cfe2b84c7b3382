"""Sequence legality of AG-UI event streams: ``verifyEvents`` of ``@ag-ui/client`` 1.0.0.

A stream is legal when the official client's ``verifyEvents`` operator lets every event
through. This module ports that state machine rule for rule (upstream source:
``sdks/typescript/packages/client/src/verify/verify.ts``, 1.0.0), so that the store accepts
exactly what the client accepts and rejects the rest with the client's own reason:

* **Run lifecycle.** The first event is ``RUN_STARTED`` or ``RUN_ERROR``. After
  ``RUN_ERROR`` only a new ``RUN_STARTED`` may follow; after ``RUN_FINISHED`` a new
  ``RUN_STARTED`` or a late ``RUN_ERROR``. A ``RUN_STARTED`` while a run is active is
  illegal; one after a terminal resets all tracking. ``RUN_FINISHED`` requires that no step,
  text message, reasoning message or span, tool call or subagent is still open.
* **Spans.** Text messages, tool calls, reasoning spans and reasoning messages are opened
  once, continued and closed only while open; an id may be reopened after its end. Steps are
  tracked per owner (the ``subagentRunId``, or the parent agent).
* **Subagents.** ``subagentRunId: null`` is rejected everywhere (also inside messages seeded
  from ``MESSAGES_SNAPSHOT`` and ``RUN_STARTED.input``); continuations must not disagree with
  the owner their entity was opened under; ``SUBAGENT_*`` events follow their own lifecycle.

Everything else passes, including ``*_CHUNK`` events (the client verifies those only after
expanding them: :func:`verify_events` with ``chunks=True``).

The verifier judges raw JSON values the way JavaScript does, because that is what the
reference does with them: ids are compared with ``===`` (``1`` is not ``"1"``, ``true`` is
not ``1``, ``null`` is not absent), and a JSON object or array never equals one from another
event. Messages reproduce upstream's wording, including JavaScript's spelling of values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, NoReturn, TypeAlias

from agui_store.errors import SequenceError
from agui_store.protocol.js import UNDEFINED, Undefined, as_double, js_string

__all__ = ["SequenceVerifier", "verify_events"]


# --------------------------------------------------------------------------------------------
# JavaScript values, as far as the verifier can see them


class _Opaque:
    """A JSON object or array used as an id.

    JavaScript compares those by reference: two parsed events never share one, but the
    events ``transformChunks`` makes from one chunk do (its START and CONTENT carry the
    chunk's very ``messageId`` object), so the wrapper equals another of the same object.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Opaque) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


# A value as a Map/Set key under JavaScript's SameValueZero: strings as themselves (the common
# case), ``null`` as None, numbers and booleans tagged so that ``True`` and ``1`` differ.
_Key: TypeAlias = "str | Undefined | tuple[str, float | bool] | _Opaque | None"


def _key(value: Any) -> _Key:
    if isinstance(value, str) or value is None or value is UNDEFINED:
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", as_double(value))
    return _Opaque(value)


def _prop(value: Any, name: str) -> Any:
    """``value.name`` for a JSON value: only objects have (own) properties."""
    if isinstance(value, Mapping):
        return value.get(name, UNDEFINED)
    return UNDEFINED


def _show(key: _Key) -> str:
    """A key spelled as a template literal spells the value it came from."""
    if isinstance(key, str):
        return key
    if isinstance(key, tuple):
        return js_string(key[1])
    if isinstance(key, _Opaque):
        return js_string(key.value)
    return js_string(key)


def _show_all(keys: Iterable[_Key]) -> str:
    """Keys listed as ``Array.from(keys).join(", ")`` lists them."""
    return ", ".join("" if k is None or k is UNDEFINED else _show(k) for k in keys)


def _owner_name(owner: _Key) -> str:
    return "(the parent agent)" if owner is UNDEFINED else _show(owner)


def _js_typeof_str(value: Any) -> str:
    """V8's description of a non-iterable value in ``for … of``."""
    if isinstance(value, Mapping):
        return "object"
    kind = "boolean" if isinstance(value, bool) else "number"
    return f"{kind} {js_string(value)}"


# --------------------------------------------------------------------------------------------
# The state machine


class _Violation(Exception):
    """A rule is broken; :meth:`SequenceVerifier.feed` adds the place."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _fail(reason: str) -> NoReturn:
    raise _Violation(reason)


_SUBAGENT_OPTIONALS: Final[Mapping[str, tuple[str, ...]]] = {
    "SUBAGENT_STARTED": (
        "description",
        "parentSubagentRunId",
        "parentToolCallId",
        "parentMessageId",
    ),
    "SUBAGENT_FINISHED": ("outcome",),
    "SUBAGENT_ERROR": ("code",),
}

# Owners (the opener's subagentRunId key, or UNDEFINED for the parent agent) per entity id.
_Owners: TypeAlias = "dict[_Key, _Key]"
_Handler: TypeAlias = "Callable[[SequenceVerifier, Mapping[str, Any], str, bool], None]"


class SequenceVerifier:
    """The state of ``verifyEvents`` over one stream, fed one event at a time.

    Events are judged in order by :meth:`feed`; a rejected event raises
    :class:`~agui_store.errors.SequenceError` and leaves the state as it was, so a caller may
    report it and go on. :meth:`copy` takes a cheap snapshot to try a batch and roll back.

    Example:
        >>> v = SequenceVerifier()
        >>> v.feed({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, 0)
        >>> v.run_active
        True
    """

    __slots__ = (
        "_chunk_tail",
        "_closed_subagents",
        "_first_seen",
        "_open_reasoning_messages",
        "_open_reasoning_spans",
        "_open_subagents",
        "_open_text",
        "_open_tools",
        "_owned_activities",
        "_owned_messages",
        "_owned_reasoning",
        "_owned_tools",
        "_run_errored",
        "_run_finished",
        "_run_started",
        "_steps",
    )

    def __init__(self) -> None:
        self._first_seen = False
        self._run_started = False
        self._run_finished = False
        self._run_errored = False
        # Open entities; dicts as insertion-ordered sets, because RUN_FINISHED lists the open
        # ids in the order they were opened, as upstream's Sets do.
        self._open_text: dict[_Key, None] = {}
        self._open_tools: dict[_Key, None] = {}
        self._open_reasoning_spans: dict[_Key, None] = {}
        self._open_reasoning_messages: dict[_Key, None] = {}
        # Owners outlive the close of their entity, for the whole run, one map per kind
        # (an id is unique only within its kind).
        self._owned_messages: _Owners = {}
        self._owned_tools: _Owners = {}
        self._owned_activities: _Owners = {}
        self._owned_reasoning: _Owners = {}
        # owner -> open step names. Nested rather than joined, so that the parent
        # (UNDEFINED) and a subagent whose id is "" stay apart.
        self._steps: dict[_Key, dict[_Key, None]] = {}
        self._open_subagents: dict[str, None] = {}
        # Subagent ids closed in this run: an id names one invocation and cannot restart.
        self._closed_subagents: set[str] = set()
        # verify_events(chunks=True) only: the raw events since the chunk lanes were last
        # known to be empty, replayed through the expansion to continue a stream in pieces.
        self._chunk_tail: tuple[Mapping[str, Any], ...] = ()

    # ---- public surface ---------------------------------------------------------------------

    @property
    def run_active(self) -> bool:
        """A run has started and has neither finished nor errored."""
        return self._run_started and not self._run_finished and not self._run_errored

    @property
    def last_terminal(self) -> Literal["RUN_FINISHED", "RUN_ERROR"] | None:
        """The terminal event that ended the current run, or ``None`` while none did.

        ``RUN_ERROR`` wins over ``RUN_FINISHED`` when a late failure followed the finish.
        """
        if self._run_errored:
            return "RUN_ERROR"
        if self._run_finished:
            return "RUN_FINISHED"
        return None

    @property
    def started(self) -> bool:
        """At least one event was accepted (so the first-event rule no longer applies)."""
        return self._first_seen

    def copy(self) -> SequenceVerifier:
        """An independent snapshot of this state (cost: the size of the current run)."""
        twin = SequenceVerifier.__new__(SequenceVerifier)
        twin._first_seen = self._first_seen
        twin._run_started = self._run_started
        twin._run_finished = self._run_finished
        twin._run_errored = self._run_errored
        twin._open_text = self._open_text.copy()
        twin._open_tools = self._open_tools.copy()
        twin._open_reasoning_spans = self._open_reasoning_spans.copy()
        twin._open_reasoning_messages = self._open_reasoning_messages.copy()
        twin._owned_messages = self._owned_messages.copy()
        twin._owned_tools = self._owned_tools.copy()
        twin._owned_activities = self._owned_activities.copy()
        twin._owned_reasoning = self._owned_reasoning.copy()
        twin._steps = {owner: names.copy() for owner, names in self._steps.items()}
        twin._open_subagents = self._open_subagents.copy()
        twin._closed_subagents = self._closed_subagents.copy()
        twin._chunk_tail = self._chunk_tail
        return twin

    def feed(self, event: Mapping[str, Any], index: int) -> None:
        """Accept ``event`` as the next one of the stream, or raise.

        Args:
            event: one AG-UI event as a JSON object (wire spelling, camelCase).
            index: its position, reported in the error.

        Raises:
            SequenceError: the event breaks a rule; the state is unchanged.
        """
        self._feed((event,), index)

    def feed_many(self, events: Iterable[Mapping[str, Any]]) -> None:
        """:meth:`feed` each event in turn, indexed from 0; on an error, the events before
        it have been accepted."""
        self._feed(events, 0)

    def _feed(self, events: Iterable[Mapping[str, Any]], first_index: int) -> None:
        for index, event in enumerate(events, first_index):
            # Most of a stream is deltas to an open text message or tool call. Without an
            # attribution, inside a live run, _judge passes them and changes nothing.
            etype = event.get("type")
            delta = _DELTAS.get(etype) if type(etype) is str else None
            if (
                delta is not None
                and self._first_seen
                and not self._run_finished
                and not self._run_errored
                and "subagentRunId" not in event
            ):
                key = event.get(delta[0])
                if type(key) is str and key in delta[1](self):
                    continue
            self._judge(event, index, commit=True)

    def check(self, event: Mapping[str, Any], index: int) -> None:
        """Raise as :meth:`feed` would, without changing the state."""
        self._judge(event, index, commit=False)

    # ---- the rules ---------------------------------------------------------------------------

    def _judge(self, event: Mapping[str, Any], index: int, *, commit: bool) -> None:
        etype = event.get("type", UNDEFINED)
        try:
            self._lifecycle(event, etype)
            self._attribution(event, etype)
            # Everything without a handler passes: state, custom, raw, chunks, unknown types.
            handler = _HANDLERS.get(etype) if isinstance(etype, str) else None
            if handler is not None:
                # A handler validates everything first and only then, when committing,
                # changes the state, so a rejected event leaves no trace.
                handler(self, event, etype, commit)
        except _Violation as violation:
            raise SequenceError(
                violation.reason,
                index=index,
                event_type=etype if isinstance(etype, str) else None,
            ) from None
        if commit:
            self._first_seen = True

    def _lifecycle(self, event: Mapping[str, Any], etype: Any) -> None:
        """Run-level order: what may come first, after a terminal, and while a run is open."""
        shown = js_string(etype)
        if self._run_errored and etype != "RUN_STARTED":
            _fail(
                f"Cannot send event type '{shown}': The run has already errored with "
                "'RUN_ERROR'. No further events can be sent."
            )
        if self._run_finished and etype not in ("RUN_ERROR", "RUN_STARTED"):
            _fail(
                f"Cannot send event type '{shown}': The run has already finished with "
                "'RUN_FINISHED'. Start a new run with 'RUN_STARTED'."
            )
        if not self._first_seen:
            if etype not in ("RUN_STARTED", "RUN_ERROR"):
                _fail("First event must be 'RUN_STARTED'")
            return
        if etype == "RUN_STARTED" and self.run_active:
            _fail(
                "Cannot send 'RUN_STARTED' while a run is still active. The previous run "
                "must be finished with 'RUN_FINISHED' before starting a new run."
            )

    @staticmethod
    def _attribution(event: Mapping[str, Any], etype: Any) -> None:
        """No-null rules of the subagent surface (the schema's, for in-process producers)."""
        if event.get("subagentRunId", UNDEFINED) is None:
            _fail(
                f"Cannot send '{js_string(etype)}' with 'subagentRunId: null'. "
                "The field is optional — omit it entirely."
            )
        optionals = _SUBAGENT_OPTIONALS.get(etype) if isinstance(etype, str) else None
        if optionals is not None:
            for field in optionals:
                if field in event and event[field] is None:
                    _fail(
                        f"Cannot send '{etype}' with '{field}: null'. "
                        "The field is optional — omit it entirely."
                    )
            # Read on every SUBAGENT_* event, as upstream does, not only on FINISHED.
            outcome = event.get("outcome", UNDEFINED)
            if outcome is not UNDEFINED and outcome is not None:
                kind = _prop(outcome, "type")
                if kind != "success" and kind != "suspended":
                    _fail(
                        f"Cannot send '{etype}' with outcome type '{js_string(kind)}'. The "
                        'outcome is either { type: "success" } or { type: "suspended" }.'
                    )
                interrupt_ids = _prop(outcome, "interruptIds")
                if interrupt_ids is None:
                    _fail(
                        f"Cannot send '{etype}' with 'outcome.interruptIds: null'. "
                        "The field is optional — omit it entirely."
                    )
                if isinstance(interrupt_ids, list) and any(
                    not isinstance(i, str) for i in interrupt_ids
                ):
                    _fail(
                        f"Cannot send '{etype}' with a non-string entry in "
                        "'outcome.interruptIds'. Interrupt ids are strings."
                    )
        if etype == "RUN_FINISHED":
            outcome = event.get("outcome")
            interrupts = _prop(outcome, "interrupts")
            if _prop(outcome, "type") == "interrupt" and isinstance(interrupts, list):
                for interrupt in interrupts:
                    if _prop(interrupt, "subagentRunId") is None:
                        _fail(
                            "Cannot send 'RUN_FINISHED' with an interrupt (id "
                            f"'{js_string(_prop(interrupt, 'id'))}') carrying "
                            "'subagentRunId: null'. The field is optional — omit it entirely."
                        )

    def _reset(self) -> None:
        """Forget the previous run: a new RUN_STARTED after a terminal."""
        for tracked in (
            self._open_text,
            self._open_tools,
            self._open_reasoning_spans,
            self._open_reasoning_messages,
            self._owned_messages,
            self._owned_tools,
            self._owned_activities,
            self._owned_reasoning,
            self._steps,
            self._open_subagents,
        ):
            tracked.clear()
        self._closed_subagents.clear()
        self._run_finished = False
        self._run_errored = False
        self._run_started = True

    # ---- ownership -----------------------------------------------------------------------------

    @staticmethod
    def _check_tag(etype: str, tag: _Key, owners: _Owners, entity: _Key, kind: str) -> None:
        """A continuation must not disagree with its entity's opener; no tag never does.

        An opener without a tag made the entity the parent agent's, which is an owner too.
        """
        if tag is UNDEFINED or entity not in owners:
            return
        owner = owners[entity]
        if owner != tag:
            _fail(
                f"Cannot send '{etype}': subagentRunId '{_show(tag)}' does not match the "
                f"{kind} '{_show(entity)}' opener's subagent '{_owner_name(owner)}'."
            )

    @staticmethod
    def _check_seed(raw_messages: Any) -> None:
        """What seeding owners from ``raw_messages`` would reject, in upstream's order."""
        if not isinstance(raw_messages, list):
            return
        for msg in raw_messages:
            if not isinstance(msg, Mapping) or not isinstance(msg.get("id"), str):
                continue
            if msg.get("subagentRunId", UNDEFINED) is None:
                _fail(
                    f"Cannot send a message (id '{msg['id']}') with 'subagentRunId: null'. "
                    "The field is optional — omit it entirely."
                )
            tool_calls = msg.get("toolCalls")
            # Upstream iterates whatever is there (`for … of`); a string iterates harmlessly.
            if tool_calls is not None and not isinstance(tool_calls, list | str):
                _fail(
                    f"Cannot read the tool calls of message '{msg['id']}': "
                    f"{_js_typeof_str(tool_calls)} is not iterable "
                    "(cannot read property Symbol(Symbol.iterator))"
                )

    def _seed(self, raw_messages: Any, *, authoritative: bool) -> None:
        """Owners from replayed history (MESSAGES_SNAPSHOT, RUN_STARTED.input.messages).

        Each message seeds the bucket its role streams through, and its tool calls go under
        the message's owner. A snapshot replaces messages in the reducer, so its owners
        replace recorded ones; the input echo is plain history and claims only free ids.
        Call :meth:`_check_seed` first.
        """
        if not isinstance(raw_messages, list):
            return
        for msg in raw_messages:
            if not isinstance(msg, Mapping) or not isinstance(msg.get("id"), str):
                continue
            role = msg.get("role")
            bucket = (
                self._owned_reasoning
                if role == "reasoning"
                else self._owned_activities
                if role == "activity"
                else self._owned_messages
            )
            owner = _key(msg.get("subagentRunId", UNDEFINED))
            if authoritative or msg["id"] not in bucket:
                bucket[msg["id"]] = owner
            tool_calls = msg.get("toolCalls")
            for call in tool_calls if isinstance(tool_calls, list) else ():
                call_id = _prop(call, "id")
                if isinstance(call_id, str) and (authoritative or call_id not in self._owned_tools):
                    self._owned_tools[call_id] = owner

    # ---- handlers: validate, then (when committing) change the state ---------------------------

    def _text_start(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        mid = _key(event.get("messageId", UNDEFINED))
        tag = _key(event.get("subagentRunId", UNDEFINED))
        if mid in self._open_text:
            _fail(
                f"Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{_show(mid)}' "
                "is already in progress. Complete it with 'TEXT_MESSAGE_END' first."
            )
        # First writer wins; a reopen by a different producer would append its content to
        # the first producer's message.
        self._check_tag(etype, tag, self._owned_messages, mid, "message")
        if commit:
            self._open_text[mid] = None
            self._owned_messages.setdefault(mid, tag)

    def _text_continue(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        mid = _key(event.get("messageId", UNDEFINED))
        if mid not in self._open_text:
            fix = (
                "Start a text message with 'TEXT_MESSAGE_START' first."
                if etype == "TEXT_MESSAGE_CONTENT"
                else "A 'TEXT_MESSAGE_START' event must be sent first."
            )
            _fail(
                f"Cannot send '{etype}' event: No active text message found with ID "
                f"'{_show(mid)}'. {fix}"
            )
        tag = _key(event.get("subagentRunId", UNDEFINED))
        self._check_tag(etype, tag, self._owned_messages, mid, "message")
        if commit and etype == "TEXT_MESSAGE_END":
            del self._open_text[mid]

    def _tool_start(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        tid = _key(event.get("toolCallId", UNDEFINED))
        if tid in self._open_tools:
            _fail(
                f"Cannot send 'TOOL_CALL_START' event: A tool call with ID '{_show(tid)}' is "
                "already in progress. Complete it with 'TOOL_CALL_END' first."
            )
        # A tool call lives inside the message parentMessageId names and has no attribution
        # of its own: a tag that disagrees with that message's owner cannot be represented.
        parent = event.get("parentMessageId", UNDEFINED)
        tag = _key(event.get("subagentRunId", UNDEFINED))
        inherited: _Key | Undefined = UNDEFINED
        has_inherited = False
        if parent is not UNDEFINED:
            parent_key = _key(parent)
            if parent_key in self._owned_messages:
                inherited = self._owned_messages[parent_key]
                has_inherited = True
                if tag is not UNDEFINED and tag != inherited:
                    _fail(
                        f"Cannot send 'TOOL_CALL_START': subagentRunId '{_show(tag)}' does not "
                        f"match its parent message '{_show(parent_key)}' owner "
                        f"'{_owner_name(inherited)}'. A tool call belongs to the message that "
                        "carries it."
                    )
        known = tid in self._owned_tools
        if known:
            existing = self._owned_tools[tid]
            self._check_tag(etype, tag, self._owned_tools, tid, "tool call")
            # An untagged reopen's effective owner is the one inherited from its parent.
            if tag is UNDEFINED and has_inherited and inherited != existing:
                _fail(
                    f"Cannot send 'TOOL_CALL_START': tool call '{_show(tid)}' is owned by "
                    f"'{_owner_name(existing)}' but its parent message '{js_string(parent)}' is "
                    f"owned by '{_owner_name(inherited)}'. A tool call belongs to the message "
                    "that carries it."
                )
        if commit:
            self._open_tools[tid] = None
            if not known:
                self._owned_tools[tid] = tag if tag is not UNDEFINED else inherited

    def _tool_continue(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        tid = _key(event.get("toolCallId", UNDEFINED))
        if tid not in self._open_tools:
            fix = (
                "Start a tool call with 'TOOL_CALL_START' first."
                if etype == "TOOL_CALL_ARGS"
                else "A 'TOOL_CALL_START' event must be sent first."
            )
            _fail(
                f"Cannot send '{etype}' event: No active tool call found with ID "
                f"'{_show(tid)}'. {fix}"
            )
        tag = _key(event.get("subagentRunId", UNDEFINED))
        self._check_tag(etype, tag, self._owned_tools, tid, "tool call")
        if commit and etype == "TOOL_CALL_END":
            del self._open_tools[tid]

    def _step_started(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        name = _key(event.get("stepName", UNDEFINED))
        owner = _key(event.get("subagentRunId", UNDEFINED))
        if name in self._steps.get(owner, ()):
            where = "" if owner is UNDEFINED else f" in subagent '{_show(owner)}'"
            _fail(f"Step \"{_show(name)}\" is already active for 'STEP_STARTED'{where}")
        if commit:
            self._steps.setdefault(owner, {})[name] = None

    def _step_finished(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        name = _key(event.get("stepName", UNDEFINED))
        owner = _key(event.get("subagentRunId", UNDEFINED))
        if name not in self._steps.get(owner, ()):
            # Open under another owner is the likelier mistake (a producer stamping "whoever
            # is active now"), so it gets its own message.
            for holder, names in self._steps.items():
                if holder != owner and name in names:
                    _fail(
                        f"Cannot send 'STEP_FINISHED' for step \"{_show(name)}\" attributed to "
                        f"{self._agent_name(owner)}: that step is open under "
                        f"{self._agent_name(holder)}. A step must be finished by whoever "
                        "started it."
                    )
            _fail(f"Cannot send 'STEP_FINISHED' for step \"{_show(name)}\" that was not started")
        if commit:
            del self._steps[owner][name]

    @staticmethod
    def _agent_name(owner: _Key) -> str:
        return "the parent agent" if owner is UNDEFINED else f"subagent '{_show(owner)}'"

    def _activity_snapshot(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        # Only a replacing snapshot re-mints the activity and so re-owns it.
        mid = _key(event.get("messageId", UNDEFINED))
        if commit and (
            mid not in self._owned_activities or event.get("replace", UNDEFINED) is not False
        ):
            self._owned_activities[mid] = _key(event.get("subagentRunId", UNDEFINED))

    def _activity_delta(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        mid = _key(event.get("messageId", UNDEFINED))
        tag = _key(event.get("subagentRunId", UNDEFINED))
        self._check_tag(etype, tag, self._owned_activities, mid, "activity")

    def _tool_result(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        # It mints the tool message; its own attribution wins (the newest mint, not the first).
        mid = event.get("messageId")
        if commit and isinstance(mid, str):
            self._owned_messages[mid] = _key(event.get("subagentRunId", UNDEFINED))

    def _reasoning_open(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        mid = _key(event.get("messageId", UNDEFINED))
        span = etype == "REASONING_START"
        # A span and the message inside it may share an id: each opener checks its own set.
        opened = self._open_reasoning_spans if span else self._open_reasoning_messages
        if mid in opened:
            _fail(
                f"Cannot send 'REASONING_START' event: A reasoning span with ID '{_show(mid)}' "
                "is already in progress. Complete it with 'REASONING_END' first."
                if span
                else f"Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID "
                f"'{_show(mid)}' is already in progress. Complete it with "
                "'REASONING_MESSAGE_END' first."
            )
        tag = _key(event.get("subagentRunId", UNDEFINED))
        # One owner for span and message alike; the first opener records it.
        self._check_tag(etype, tag, self._owned_reasoning, mid, "reasoning message")
        if commit:
            opened[mid] = None
            self._owned_reasoning.setdefault(mid, tag)

    def _reasoning_continue(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        mid = _key(event.get("messageId", UNDEFINED))
        span = etype == "REASONING_END"
        opened = self._open_reasoning_spans if span else self._open_reasoning_messages
        if mid not in opened:
            _fail(
                "Cannot send 'REASONING_END' event: No active reasoning span found with ID "
                f"'{_show(mid)}'. A 'REASONING_START' event must be sent first."
                if span
                else f"Cannot send '{etype}' event: No active reasoning message found with ID "
                f"'{_show(mid)}'. Start a reasoning message with 'REASONING_MESSAGE_START' "
                "first."
            )
        tag = _key(event.get("subagentRunId", UNDEFINED))
        self._check_tag(etype, tag, self._owned_reasoning, mid, "reasoning message")
        if commit and etype != "REASONING_MESSAGE_CONTENT":
            del opened[mid]

    def _reasoning_encrypted(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        # Ownership only; `subtype` says which kind of entity `entityId` names. "message"
        # covers text and reasoning messages alike (ids are unique per kind).
        entity = _key(event.get("entityId", UNDEFINED))
        tag = _key(event.get("subagentRunId", UNDEFINED))
        subtype = event.get("subtype", UNDEFINED)
        if subtype == "tool-call":
            self._check_tag(etype, tag, self._owned_tools, entity, "tool call")
        elif subtype == "message":
            owners = (
                self._owned_messages if entity in self._owned_messages else self._owned_reasoning
            )
            self._check_tag(etype, tag, owners, entity, "message")
        else:
            self._check_tag(etype, tag, self._owned_reasoning, entity, "reasoning message")

    def _subagent_started(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        # The subagent's own identity, not the optional tag; "" is a legal opaque id.
        sub = event.get("subagentRunId")
        if not isinstance(sub, str):
            _fail("Cannot send 'SUBAGENT_STARTED' without a 'subagentRunId'.")
        if not isinstance(event.get("name"), str):
            _fail("Cannot send 'SUBAGENT_STARTED' without a 'name'.")
        if sub in self._open_subagents:
            _fail(
                f"Cannot send 'SUBAGENT_STARTED': subagent '{sub}' is already active. "
                "Finish it with 'SUBAGENT_FINISHED' first."
            )
        if sub in self._closed_subagents:
            _fail(
                f"Cannot send 'SUBAGENT_STARTED': subagent '{sub}' has already finished in "
                "this run. Subagent IDs are per-invocation and cannot be reused."
            )
        parent = event.get("parentSubagentRunId", UNDEFINED)
        if parent is not UNDEFINED and not (
            isinstance(parent, str)
            and (parent in self._open_subagents or parent in self._closed_subagents)
        ):
            _fail(
                f"Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{js_string(parent)}' has "
                "not been started in this run."
            )
        if commit:
            self._open_subagents[sub] = None

    def _subagent_ended(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        sub = event.get("subagentRunId")
        if not isinstance(sub, str):
            _fail(f"Cannot send '{etype}' without a 'subagentRunId'.")
        if etype == "SUBAGENT_ERROR" and not isinstance(event.get("message"), str):
            _fail("Cannot send 'SUBAGENT_ERROR' without a 'message'.")
        if sub not in self._open_subagents:
            _fail(
                f"Cannot send '{etype}': no active subagent found with ID '{sub}'. "
                "A 'SUBAGENT_STARTED' event must be sent first."
            )
        if commit:
            del self._open_subagents[sub]
            self._closed_subagents.add(sub)

    def _messages_snapshot(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        messages = event.get("messages")
        self._check_seed(messages)
        if commit:
            self._seed(messages, authoritative=True)

    def _run_started_event(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        # The input echo carries replayed history the reducer applies.
        messages = _prop(event.get("input"), "messages")
        self._check_seed(messages)
        if commit:
            # Fix #2409: a run that errored is over, like one that finished, so a later run
            # of the same stream (a replayed thread) starts afresh.
            if self._run_finished or self._run_errored:
                self._reset()
            self._seed(messages, authoritative=False)
            self._run_started = True

    def _run_finished_event(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        if any(self._steps.values()):
            listed = _show_all(
                name if owner is UNDEFINED else f"{_show(name)} (subagent '{_show(owner)}')"
                for owner, names in self._steps.items()
                for name in names
            )
            _fail(f"Cannot send 'RUN_FINISHED' while steps are still active: {listed}")
        for kind, still_open in (
            ("text messages", self._open_text),
            ("reasoning messages", self._open_reasoning_messages),
            ("reasoning spans", self._open_reasoning_spans),
            ("tool calls", self._open_tools),
            ("subagents", self._open_subagents),
        ):
            if still_open:
                _fail(
                    f"Cannot send 'RUN_FINISHED' while {kind} are still active: "
                    f"{_show_all(still_open)}"
                )
        if commit:
            self._run_finished = True

    def _run_error_event(self, event: Mapping[str, Any], etype: str, commit: bool) -> None:
        # RUN_ERROR may come at any time and needs nothing closed.
        if commit:
            self._run_errored = True


_HANDLERS: Final[dict[str, _Handler]] = {
    "TEXT_MESSAGE_START": SequenceVerifier._text_start,
    "TEXT_MESSAGE_CONTENT": SequenceVerifier._text_continue,
    "TEXT_MESSAGE_END": SequenceVerifier._text_continue,
    "TOOL_CALL_START": SequenceVerifier._tool_start,
    "TOOL_CALL_ARGS": SequenceVerifier._tool_continue,
    "TOOL_CALL_END": SequenceVerifier._tool_continue,
    "STEP_STARTED": SequenceVerifier._step_started,
    "STEP_FINISHED": SequenceVerifier._step_finished,
    "ACTIVITY_SNAPSHOT": SequenceVerifier._activity_snapshot,
    "ACTIVITY_DELTA": SequenceVerifier._activity_delta,
    "TOOL_CALL_RESULT": SequenceVerifier._tool_result,
    "REASONING_START": SequenceVerifier._reasoning_open,
    "REASONING_MESSAGE_START": SequenceVerifier._reasoning_open,
    "REASONING_MESSAGE_CONTENT": SequenceVerifier._reasoning_continue,
    "REASONING_MESSAGE_END": SequenceVerifier._reasoning_continue,
    "REASONING_END": SequenceVerifier._reasoning_continue,
    "REASONING_ENCRYPTED_VALUE": SequenceVerifier._reasoning_encrypted,
    "SUBAGENT_STARTED": SequenceVerifier._subagent_started,
    "SUBAGENT_FINISHED": SequenceVerifier._subagent_ended,
    "SUBAGENT_ERROR": SequenceVerifier._subagent_ended,
    "MESSAGES_SNAPSHOT": SequenceVerifier._messages_snapshot,
    "RUN_STARTED": SequenceVerifier._run_started_event,
    "RUN_FINISHED": SequenceVerifier._run_finished_event,
    "RUN_ERROR": SequenceVerifier._run_error_event,
}

#: The delta events feed() passes straight through: the id field, and the open set it needs.
_DELTAS: Final[Mapping[str, tuple[str, Callable[[SequenceVerifier], Mapping[Any, Any]]]]] = {
    "TEXT_MESSAGE_CONTENT": ("messageId", lambda v: v._open_text),
    "TOOL_CALL_ARGS": ("toolCallId", lambda v: v._open_tools),
}


def verify_events(
    events: Iterable[Mapping[str, Any]],
    *,
    start: SequenceVerifier | None = None,
    chunks: bool = False,
) -> SequenceVerifier:
    """Judge a stream as ``verifyEvents`` does and return the state after it.

    Args:
        events: AG-UI events as JSON objects, in stream order.
        start: the state to continue from (a stream fed in pieces); it is not modified.
        chunks: ``False`` judges the events as they are, ``*_CHUNK`` events passing unexpanded
            (``verifyEvents`` alone). ``True`` expands chunks first, as a live client does
            (``transformChunks`` then ``verifyEvents``): the expansion's own errors are
            reported too, and the index is still that of the raw event. Continue a chunked
            stream only with a verifier that :func:`verify_events` returned with
            ``chunks=True`` (it carries the open chunk streams along).

    Returns:
        A new verifier holding the state after the last event.

    Raises:
        SequenceError: the first event that breaks a rule, with its index in ``events``.
    """
    verifier = start.copy() if start is not None else SequenceVerifier()
    if chunks:
        _verify_expanded(verifier, list(events))
    else:
        for index, event in enumerate(events):
            verifier.feed(event, index)
    return verifier


# Run-level events close every chunk lane (upstream's closeAllLanes).
_CLOSES_ALL_LANES: Final = frozenset(
    {"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"}
)
_CHUNK_TYPES: Final = frozenset(
    {"TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"}
)


class _Mark:
    """The type of a marker event: unknown to the expansion, so passed through untouched."""

    __slots__ = ()


# Put after every raw event, so that the expanded stream splits back into one block per raw
# event. transformChunks lets an event of a type it has no assembly for through as it is and
# without touching any lane, so the markers change nothing in the expansion.
_MARK: Final[Mapping[str, Any]] = {"type": _Mark()}


def _verify_expanded(verifier: SequenceVerifier, events: list[Mapping[str, Any]]) -> None:
    """Feed ``events`` through the chunk expansion into ``verifier``, raw indexes kept."""
    from agui_store.errors import InvalidEventError
    from agui_store.protocol.chunks import transform_chunks

    # The expansion's state is not ours to hold, so the raw events since the lanes were
    # last empty are expanded again; their blocks were already fed and are skipped.
    tail = verifier._chunk_tail
    raw = [*tail, *events]
    marked: list[Mapping[str, Any]] = []
    for event in raw:
        marked += (event, _MARK)
    failure: InvalidEventError | None = None
    try:
        expanded = transform_chunks(marked)  # type: ignore[arg-type]
    except InvalidEventError as e:
        # In the client the events before this one were verified as they were expanded, and
        # their verdict comes first: expand the prefix, feed it, then report this one.
        failure = e
        assert e.index is not None
        expanded = transform_chunks(marked[: e.index - e.index % 2])  # type: ignore[arg-type]
    position = 0
    block: list[Mapping[str, Any]] = []
    for event in expanded:
        if event is not _MARK:
            block.append(event)
            continue
        index = position - len(tail)
        if index >= 0:
            for piece in block:
                try:
                    verifier.feed(piece, index)
                except SequenceError as e:
                    raise SequenceError(
                        e.reason, index=index, event_type=_type_name(raw[position])
                    ) from None
        block = []
        position += 1
    if failure is not None:
        index = position - len(tail)
        raise SequenceError(
            failure.reason, index=index, event_type=failure.event_type, path=failure.path
        )
    if position != len(raw):  # pragma: no cover - the expansion stopped passing markers
        raise RuntimeError("transform_chunks did not pass unknown events through unchanged")
    # Lanes open only at a chunk and all close at a run-level event: keep from the first
    # chunk after the last run-level event.
    keep = len(raw)
    for i in range(len(raw) - 1, -1, -1):
        kind = raw[i].get("type")
        if kind in _CLOSES_ALL_LANES:
            break
        if kind in _CHUNK_TYPES:
            keep = i
    verifier._chunk_tail = tuple(raw[keep:])


def _type_name(event: Mapping[str, Any]) -> str | None:
    kind = event.get("type")
    return kind if isinstance(kind, str) else None
