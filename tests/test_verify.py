"""The sequence verifier agrees with ``verifyEvents`` of the official ``@ag-ui/client`` 1.0.0.

Differential throughout: the upstream recordings, the shared oracle cases, hypothesis' legal
streams, mutations of them (drop, duplicate, swap, move, insert, re-id, odd ids, subagent
tags and lifecycles) and random walks judged one event at a time must get the same verdict,
at the same index, for the same reason, from :mod:`agui_store.protocol.verify` and from the client
(``tests/oracle``), with chunks passed raw and with chunks expanded. The named scenarios also
pin the verdict by hand, so they document the rules without node.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_store.errors import InvalidEventError, SequenceError
from agui_store.protocol.verify import SequenceVerifier, verify_events
from tests.conftest import SHARED, fixture_params
from tests.oracle_client import Oracle
from tests.strategies import TEXT, json_objects, json_values, legal_streams, patches

Event = dict[str, Any]
Verdict = dict[str, Any]

pytestmark = pytest.mark.oracle


# ---------------------------------------------------------------------------------------------
# helpers


def parsed(events: list[Event]) -> list[Event]:
    """The events as a client holds them: each parsed from its own JSON, so no two share an
    object (strategies may draw one object into several events; an object id compares by
    reference, as in JavaScript)."""
    return [json.loads(json.dumps(ev)) for ev in events]


def ours(events: list[Event], *, chunks: bool = False) -> Verdict:
    """Our verdict in the oracle's shape."""
    try:
        verify_events(parsed(events), chunks=chunks)
    except SequenceError as e:
        return {"ok": False, "index": e.index, "error": e.reason}
    return {"ok": True}


def same_reason(mine: str, theirs: str) -> bool:
    """Upstream's own words, except where upstream has none of its own.

    Iterating ``toolCalls`` that are not iterable throws a JavaScript TypeError, whose text is
    V8's and changes once the function is optimized ("object is not iterable …" at first,
    "undefined is not a function" later in the same process). We give a plain-words reason
    that ends in V8's first spelling and accept either.
    """
    if mine == theirs or mine.endswith(": " + theirs):
        return True
    return "is not iterable" in mine and theirs == "undefined is not a function"


def assert_same_verdict(oracle: Oracle, events: list[Event], *, chunks: bool = False) -> Verdict:
    """Same acceptance, same failing index, same reason as the official client."""
    theirs = oracle.verify(events, chunks=chunks)
    mine = ours(events, chunks=chunks)
    assert mine["ok"] == theirs["ok"], (mine, theirs)
    if not theirs["ok"]:
        assert mine["index"] == theirs["index"], (mine, theirs)
        assert same_reason(mine["error"], theirs["error"]), (mine, theirs)
    return mine


def _case_events(path: Path) -> list[Event]:
    data = json.loads(path.read_text(encoding="utf-8"))
    events: list[Event] = data["events"] if isinstance(data, dict) else data
    return events


CASES = sorted((SHARED / "oracle" / "cases").glob("*.json"))


def case_params() -> list[Any]:
    if CASES:
        return [pytest.param(_case_events(p), id=p.stem) for p in CASES]
    return [pytest.param(None, id="no-cases", marks=pytest.mark.skip(reason="no oracle cases"))]


def _run(*body: Event, finish: bool = True) -> list[Event]:
    events: list[Event] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, *body]
    if finish:
        events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return events


def _text(mid: str, **extra: Any) -> list[Event]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant", **extra},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": "hi", **extra},
        {"type": "TEXT_MESSAGE_END", "messageId": mid, **extra},
    ]


RUN_STARTED: Event = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
RUN_FINISHED: Event = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
RUN_ERROR: Event = {"type": "RUN_ERROR", "message": "boom"}


# ---------------------------------------------------------------------------------------------
# named scenarios: (sentence, events, index of the rejected event or None)

SCENARIOS: list[tuple[str, list[Event], int | None]] = [
    ("a run that starts, talks and finishes is legal", _run(*_text("m1")), None),
    ("a run that never finishes is legal", _run(*_text("m1"), finish=False), None),
    ("an empty stream is legal", [], None),
    ("the first event must be RUN_STARTED", [*_text("m1")], 0),
    ("a stream may begin with RUN_ERROR", [RUN_ERROR, RUN_STARTED, RUN_FINISHED], None),
    ("nothing but RUN_STARTED may follow RUN_ERROR", [RUN_STARTED, RUN_ERROR, RUN_FINISHED], 2),
    ("RUN_ERROR may not follow RUN_ERROR", [RUN_STARTED, RUN_ERROR, RUN_ERROR], 2),
    ("a late RUN_ERROR may follow RUN_FINISHED", [RUN_STARTED, RUN_FINISHED, RUN_ERROR], None),
    ("events may not follow RUN_FINISHED", [RUN_STARTED, RUN_FINISHED, *_text("m1")], 2),
    ("a second RUN_STARTED in an open run is illegal", [RUN_STARTED, RUN_STARTED], 1),
    (
        "a run after an errored run starts afresh",
        [RUN_STARTED, _text("m1")[0], RUN_ERROR, RUN_STARTED, *_text("m1"), RUN_FINISHED],
        None,
    ),
    ("a message id may be reused in a later run", [*_run(*_text("m1")), *_run(*_text("m1"))], None),
    ("a message id may be reopened after its end", _run(*_text("m1"), *_text("m1")), None),
    ("content needs an open message", _run(_text("m1")[1]), 1),
    ("a message may not start twice", _run(_text("m1")[0], _text("m1")[0]), 2),
    ("RUN_FINISHED needs every message closed", _run(_text("m1")[0]), 2),
    (
        "ids are compared as JavaScript compares them: 1 is not '1'",
        _run(
            {"type": "TEXT_MESSAGE_START", "messageId": 1},
            {"type": "TEXT_MESSAGE_END", "messageId": "1"},
        ),
        2,
    ),
    (
        "a missing id is an id of its own",
        _run(
            {"type": "TEXT_MESSAGE_START"},
            {"type": "TEXT_MESSAGE_CONTENT", "delta": "x"},
            {"type": "TEXT_MESSAGE_END"},
        ),
        None,
    ),
    (
        "tool calls may start during text messages",
        _run(
            _text("m1")[0],
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            _text("m1")[2],
        ),
        None,
    ),
    (
        "tool args need an open call",
        _run({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"}),
        1,
    ),
    (
        "RUN_FINISHED needs every tool call closed",
        _run({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"}),
        2,
    ),
    (
        "a subagent may open a step the parent has open",
        _run(
            {"type": "STEP_STARTED", "stepName": "tools"},
            {"type": "STEP_STARTED", "stepName": "tools", "subagentRunId": "s1"},
            {"type": "STEP_FINISHED", "stepName": "tools", "subagentRunId": "s1"},
            {"type": "STEP_FINISHED", "stepName": "tools"},
        ),
        None,
    ),
    (
        "a step is finished by whoever started it",
        _run(
            {"type": "STEP_STARTED", "stepName": "tools"},
            {"type": "STEP_FINISHED", "stepName": "tools", "subagentRunId": "s1"},
        ),
        2,
    ),
    (
        "RUN_FINISHED needs every step finished",
        _run({"type": "STEP_STARTED", "stepName": "a", "subagentRunId": "s1"}),
        2,
    ),
    (
        "a reasoning span and message may share an id",
        _run(
            {"type": "REASONING_START", "messageId": "r1"},
            {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "hm"},
            {"type": "REASONING_MESSAGE_END", "messageId": "r1"},
            {"type": "REASONING_END", "messageId": "r1"},
        ),
        None,
    ),
    (
        "RUN_FINISHED needs every reasoning span closed",
        _run({"type": "REASONING_START", "messageId": "r1"}),
        2,
    ),
    ("REASONING_END needs an open span", _run({"type": "REASONING_END", "messageId": "r1"}), 1),
    (
        "subagentRunId may not be null",
        _run({"type": "CUSTOM", "name": "x", "value": 1, "subagentRunId": None}),
        1,
    ),
    (
        "a continuation may not disagree with its opener's subagent",
        _run(_text("m1")[0], {**_text("m1")[1], "subagentRunId": "s1"}),
        2,
    ),
    ("a tagged message stream is legal", _run(*_text("m1", subagentRunId="s1")), None),
    (
        "a tool call belongs to the owner of its parent message",
        _run(
            *_text("m1", subagentRunId="s1"),
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c1",
                "toolCallName": "f",
                "parentMessageId": "m1",
                "subagentRunId": "s2",
            },
        ),
        4,
    ),
    (
        "an encrypted value on a tool call must agree with the call's owner",
        _run(
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "tool-call",
                "entityId": "c1",
                "encryptedValue": "x",
                "subagentRunId": "s1",
            },
        ),
        3,
    ),
    (
        "MESSAGES_SNAPSHOT seeds the owners of its messages",
        _run(
            {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "m1", "role": "assistant"}]},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "subagentRunId": "s1"},
        ),
        2,
    ),
    (
        "RUN_STARTED.input messages may not carry a null subagentRunId",
        [
            {
                **RUN_STARTED,
                "input": {"messages": [{"id": "u1", "role": "user", "subagentRunId": None}]},
            }
        ],
        0,
    ),
    (
        "a subagent lifecycle inside a run is legal",
        _run(
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "helper"},
            *_text("m1", subagentRunId="s1"),
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1", "outcome": {"type": "success"}},
        ),
        None,
    ),
    (
        "a subagent id cannot start twice in a run",
        _run(
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
        ),
        3,
    ),
    (
        "RUN_FINISHED needs every subagent finished",
        _run({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"}),
        2,
    ),
    (
        "a subagent outcome is success or suspended",
        _run(
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1", "outcome": {"type": "done"}},
        ),
        2,
    ),
    (
        "SUBAGENT_ERROR needs a message",
        _run(
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
            {"type": "SUBAGENT_ERROR", "subagentRunId": "s1"},
        ),
        2,
    ),
    (
        "an interrupt may not carry a null subagentRunId",
        [
            RUN_STARTED,
            {
                **RUN_FINISHED,
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "subagentRunId": None}],
                },
            },
        ],
        1,
    ),
    (
        "only replace: false keeps an activity's owner; replace: 0 re-owns it",
        _run(
            {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "p", "content": {}},
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": "a",
                "activityType": "p",
                "content": {},
                "replace": 0,
                "subagentRunId": "s1",
            },
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "a",
                "activityType": "p",
                "patch": [],
                "subagentRunId": "s1",
            },
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": "a",
                "activityType": "p",
                "content": {},
                "replace": False,
            },
            {"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "p", "patch": []},
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "a",
                "activityType": "p",
                "patch": [],
                "subagentRunId": "s2",
            },
        ),
        6,
    ),
    (
        "a tool result re-owns the message it mints",
        _run(
            *_text("m1"),
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "m1",
                "toolCallId": "c1",
                "content": "",
                "subagentRunId": "s1",
            },
            *_text("m1", subagentRunId="s1"),
        ),
        None,
    ),
    (
        "an untagged tool call reopened under another owner's message is rejected",
        _run(
            *_text("m1", subagentRunId="s1"),
            *_text("m2"),
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c1",
                "toolCallName": "f",
                "parentMessageId": "m1",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}", "subagentRunId": "s1"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c1",
                "toolCallName": "f",
                "parentMessageId": "m2",
            },
        ),
        10,
    ),
    (
        "an encrypted message value is checked against the reasoning message's owner",
        _run(
            {
                "type": "REASONING_MESSAGE_START",
                "messageId": "r1",
                "role": "reasoning",
                "subagentRunId": "s1",
            },
            {"type": "REASONING_MESSAGE_END", "messageId": "r1"},
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": "r1",
                "encryptedValue": "x",
                "subagentRunId": "s2",
            },
        ),
        3,
    ),
    (
        "owners are forgotten when a new run starts",
        [
            *_run(*_text("m1", subagentRunId="s1")),
            *_run(*_text("m1", subagentRunId="s2")),
        ],
        None,
    ),
    (
        "the input echo does not override an owner it repeats; the first one counts",
        [
            {
                **RUN_STARTED,
                "input": {
                    "messages": [
                        {"id": "m1", "role": "assistant", "subagentRunId": "s1"},
                        {"id": "m1", "role": "assistant"},
                    ]
                },
            },
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "subagentRunId": "s1"},
        ],
        None,
    ),
    (
        "a subagent's parent must have started in this run",
        _run(
            {
                "type": "SUBAGENT_STARTED",
                "subagentRunId": "s2",
                "name": "a",
                "parentSubagentRunId": "s1",
            }
        ),
        1,
    ),
    (
        "a finished subagent may still parent a new one",
        _run(
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
            {
                "type": "SUBAGENT_STARTED",
                "subagentRunId": "s2",
                "name": "b",
                "parentSubagentRunId": "s1",
            },
            {"type": "SUBAGENT_ERROR", "subagentRunId": "s2", "message": "x"},
        ),
        None,
    ),
    (
        "a null optional field is rejected on SUBAGENT_* events",
        _run({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a", "description": None}),
        1,
    ),
    (
        "RUN_FINISHED lists the open steps of every owner",
        _run(
            {"type": "STEP_STARTED", "stepName": "a", "subagentRunId": "s1"},
            {"type": "STEP_STARTED", "stepName": "b"},
            {"type": "STEP_STARTED", "stepName": "c", "subagentRunId": "s1"},
        ),
        4,
    ),
    (
        "an empty subagent id is not the parent agent",
        _run(
            {"type": "STEP_STARTED", "stepName": "a"},
            {"type": "STEP_FINISHED", "stepName": "a", "subagentRunId": ""},
        ),
        2,
    ),
    (
        "true is not 1 and 1.0 is 1, as in JavaScript",
        _run(
            {"type": "TOOL_CALL_START", "toolCallId": 1, "toolCallName": "f"},
            {"type": "TOOL_CALL_END", "toolCallId": 1.0},
            {"type": "TOOL_CALL_START", "toolCallId": True, "toolCallName": "f"},
            {"type": "TOOL_CALL_END", "toolCallId": 1},
        ),
        4,
    ),
    (
        "an object id never matches another event's",
        _run(
            {"type": "REASONING_START", "messageId": {}},
            {"type": "REASONING_END", "messageId": {}},
        ),
        2,
    ),
    (
        "chunk events pass unexpanded",
        _run({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"}),
        None,
    ),
    (
        "unknown and legacy event types pass",
        _run({"type": "FUTURE_EVENT"}, {"type": "THINKING_START"}),
        None,
    ),
    (
        "a snapshot's toolCalls that cannot be iterated are rejected, as the client throws",
        _run({"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "a", "toolCalls": {}}]}),
        1,
    ),
]

SCENARIO_PARAMS = [pytest.param(events, index, id=name) for name, events, index in SCENARIOS]


@pytest.mark.parametrize(("events", "index"), SCENARIO_PARAMS)
def test_each_rule_gives_the_verdict_written_beside_it(
    events: list[Event], index: int | None
) -> None:
    assert ours(events).get("index") == index


@pytest.mark.parametrize(("events", "index"), SCENARIO_PARAMS)
def test_each_named_scenario_gets_the_official_clients_verdict(
    oracle: Oracle, events: list[Event], index: int | None
) -> None:
    assert_same_verdict(oracle, events)


@pytest.mark.parametrize("events", fixture_params())
def test_every_upstream_recording_gets_the_official_clients_verdict(
    oracle: Oracle, events: list[Event] | None
) -> None:
    assert events is not None
    assert assert_same_verdict(oracle, events)["ok"]


@pytest.mark.parametrize("events", case_params())
def test_every_shared_oracle_case_gets_the_official_clients_verdict(
    oracle: Oracle, events: list[Event]
) -> None:
    assert_same_verdict(oracle, events)


# ---------------------------------------------------------------------------------------------
# the error and the public state


def test_a_sequence_error_names_the_index_the_type_and_the_rule() -> None:
    with pytest.raises(SequenceError) as caught:
        verify_events(_run(_text("m1")[1]))
    error = caught.value
    assert isinstance(error, InvalidEventError)
    assert isinstance(error, ValueError)
    assert (error.index, error.event_type) == (1, "TEXT_MESSAGE_CONTENT")
    assert "No active text message found with ID 'm1'" in error.reason
    assert str(error).startswith("event 1 (TEXT_MESSAGE_CONTENT): Cannot send")


def test_run_active_and_last_terminal_follow_the_run_lifecycle() -> None:
    v = SequenceVerifier()
    assert (v.run_active, v.last_terminal, v.started) == (False, None, False)
    v.feed(RUN_STARTED, 0)
    assert (v.run_active, v.last_terminal, v.started) == (True, None, True)
    v.feed(RUN_FINISHED, 1)
    assert (v.run_active, v.last_terminal) == (False, "RUN_FINISHED")
    v.feed(RUN_ERROR, 2)
    assert (v.run_active, v.last_terminal) == (False, "RUN_ERROR")
    v.feed(RUN_STARTED, 3)
    assert (v.run_active, v.last_terminal) == (True, None)


def test_a_stream_that_begins_with_run_error_has_no_active_run() -> None:
    v = verify_events([RUN_ERROR])
    assert (v.run_active, v.last_terminal) == (False, "RUN_ERROR")


def test_a_rejected_event_leaves_the_state_unchanged() -> None:
    v = verify_events([RUN_STARTED, RUN_FINISHED])
    bad_start = {**RUN_STARTED, "input": {"messages": [{"id": "u", "subagentRunId": None}]}}
    with pytest.raises(SequenceError):
        v.feed(bad_start, 2)
    # The failed RUN_STARTED did not reset the finished run.
    assert v.last_terminal == "RUN_FINISHED"
    with pytest.raises(SequenceError, match="already finished"):
        v.feed(_text("m1")[0], 2)


def test_the_first_event_rule_still_holds_after_a_rejected_first_event() -> None:
    v = SequenceVerifier()
    with pytest.raises(SequenceError, match="First event"):
        v.feed(_text("m1")[0], 0)
    assert not v.started
    with pytest.raises(SequenceError, match="First event"):
        v.feed(_text("m1")[0], 0)


def test_verify_events_does_not_modify_its_start() -> None:
    start = verify_events([RUN_STARTED])
    after = verify_events([RUN_FINISHED], start=start)
    assert start.run_active
    assert after.last_terminal == "RUN_FINISHED"


# ---------------------------------------------------------------------------------------------
# strategies: any event, and mutations of legal streams

MESSAGE_IDS = ["m1", "m2", "rs1", "act1", "r1"]
TOOL_IDS = ["c1", "c2", "c3"]
SUBAGENTS = ["s1", "s2", ""]
# ids as a buggy producer may spell them: JavaScript compares each of these its own way
ODD_IDS: list[Any] = [1, 1.0, 2.5, 1e21, 1e-7, True, False, None, {}, [], ["m1"], ""]
ID_FIELDS = ["messageId", "toolCallId", "parentMessageId", "entityId", "stepName"]

tags = st.sampled_from(SUBAGENTS)


ALL_KINDS = [
    "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR",
    "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
    "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
    "STEP_STARTED", "STEP_FINISHED",
    "REASONING_START", "REASONING_END", "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_ENCRYPTED_VALUE",
    "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA", "MESSAGES_SNAPSHOT",
    "SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR",
    "STATE_SNAPSHOT", "STATE_DELTA", "CUSTOM", "RAW",
    "TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK",
    "THINKING_START", "FUTURE_EVENT",
]  # fmt: skip
# The kinds that open, continue, close or (re)own something, weighted towards openers.
OWNERSHIP_KINDS = [
    "TEXT_MESSAGE_START", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
    "TOOL_CALL_START", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
    "STEP_STARTED", "STEP_FINISHED",
    "REASONING_START", "REASONING_END", "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END",
    "REASONING_ENCRYPTED_VALUE", "REASONING_ENCRYPTED_VALUE",
    "ACTIVITY_SNAPSHOT", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA", "ACTIVITY_DELTA",
    "MESSAGES_SNAPSHOT", "SUBAGENT_STARTED", "SUBAGENT_FINISHED",
    # a terminal ends the run until the next RUN_STARTED, which a busy run rejects cheaply
    "RUN_STARTED", "RUN_STARTED", "RUN_STARTED", "RUN_FINISHED", "RUN_FINISHED", "RUN_ERROR",
]  # fmt: skip


@dataclass(frozen=True)
class Pool:
    """What events draw their type, ids and tags from; the smaller, the more they collide."""

    kinds: list[str]
    messages: list[Any]
    tools: list[Any]
    steps: list[Any]
    tags: list[Any]  # "absent" leaves the field out


WIDE = Pool(ALL_KINDS, MESSAGE_IDS, TOOL_IDS, ["a", "b"], ["absent"] * 6 + [None, *SUBAGENTS])
# One id shared by every kind of entity, so that owners recorded by one kind meet the others.
TIGHT = Pool(
    OWNERSHIP_KINDS, ["x", "y"], ["x", "c"], ["x", "a"], ["absent"] * 4 + ["s1", "s1", "s2", ""]
)
# Ids and tags that are not strings, which JavaScript compares by type (and objects by
# reference): true is not 1, 1.0 is 1, null is not absent, [] is not [].
ODD = Pool(
    OWNERSHIP_KINDS,
    [1, 1.0, True, None, "1", [], {}],
    [1, True, "1", None],
    [1, True, None, 0, False],
    ["absent"] * 3 + ["s1", 1, True, 0, [], {}],
)


@st.composite
def seeded_messages(draw: st.DrawFn, pool: Pool = WIDE) -> list[Event]:
    """Messages as MESSAGES_SNAPSHOT or RUN_STARTED.input carry them, with owners."""
    out: list[Event] = []
    for _ in range(draw(st.integers(0, 3))):
        msg: Event = {
            "id": draw(st.sampled_from([*pool.messages, 7])),
            "role": draw(st.sampled_from(["user", "assistant", "reasoning", "activity", "tool"])),
        }
        owner = draw(st.sampled_from([None, "absent", "absent", *SUBAGENTS]))
        if owner != "absent":
            msg["subagentRunId"] = owner
        if draw(st.booleans()):
            call_ids = [{"id": t} for t in pool.tools]
            msg["toolCalls"] = draw(
                st.sampled_from([call_ids[:1], [*call_ids[1:], {"id": 3}], [], "c1", None, {}, 5])
            )
        out.append(msg)
    return out


@st.composite
def any_events(draw: st.DrawFn, pool: Pool = WIDE) -> Event:
    """One event of any type, with fields drawn from small pools so that they collide."""
    ids = st.sampled_from(pool.messages)
    tool_ids = st.sampled_from(pool.tools)
    kind = draw(st.sampled_from(pool.kinds))
    ev: Event = {"type": kind}
    if kind == "RUN_STARTED":
        ev |= {"threadId": "t", "runId": "rx"}
        if draw(st.booleans()):
            ev["input"] = {"threadId": "t", "runId": "rx", "messages": draw(seeded_messages(pool))}
    elif kind == "RUN_FINISHED":
        ev |= {"threadId": "t", "runId": "rx"}
        if draw(st.booleans()):
            interrupt: Event = {"id": draw(st.sampled_from(["i1", 2])), "reason": "approval"}
            owner = draw(st.sampled_from(["absent", None, "s1"]))
            if owner != "absent":
                interrupt["subagentRunId"] = owner
            ev["outcome"] = {"type": "interrupt", "interrupts": [interrupt]}
    elif kind == "RUN_ERROR":
        ev["message"] = "boom"
    elif kind.endswith("_CHUNK"):
        ev.update(draw(_chunk_fields(kind, pool)))
    elif kind.startswith("TEXT_MESSAGE") or kind.startswith("REASONING_"):
        ev["messageId"] = draw(ids)
        if kind.endswith("CONTENT") or kind.endswith("CHUNK"):
            ev["delta"] = draw(TEXT)
        if kind == "REASONING_ENCRYPTED_VALUE":
            del ev["messageId"]
            ev["entityId"] = draw(st.sampled_from([*pool.messages, *pool.tools]))
            ev["subtype"] = draw(st.sampled_from(["tool-call", "message", "other"]))
            ev["encryptedValue"] = "x"
    elif kind.startswith("TOOL_CALL"):
        ev["toolCallId"] = draw(tool_ids)
        if kind in ("TOOL_CALL_START", "TOOL_CALL_CHUNK"):
            ev["toolCallName"] = "f"
            if draw(st.booleans()):
                ev["parentMessageId"] = draw(ids)
        if kind in ("TOOL_CALL_ARGS", "TOOL_CALL_CHUNK"):
            ev["delta"] = "{}"
        if kind == "TOOL_CALL_RESULT":
            ev |= {"messageId": draw(ids), "content": draw(TEXT)}
    elif kind.startswith("STEP"):
        ev["stepName"] = draw(st.sampled_from(pool.steps))
    elif kind.startswith("ACTIVITY"):
        ev |= {"messageId": draw(ids), "activityType": "plan"}
        if kind == "ACTIVITY_SNAPSHOT":
            ev["content"] = draw(json_objects)
            if draw(st.booleans()):
                ev["replace"] = draw(st.sampled_from([True, False, 0]))
        else:
            ev["patch"] = draw(patches)
    elif kind == "MESSAGES_SNAPSHOT":
        ev["messages"] = draw(seeded_messages(pool))
    elif kind.startswith("SUBAGENT"):
        ev.update(draw(_subagent_fields(kind)))
    elif kind == "STATE_SNAPSHOT":
        ev["snapshot"] = draw(json_objects)
    elif kind == "STATE_DELTA":
        ev["delta"] = draw(patches)
    elif kind == "CUSTOM":
        ev |= {"name": "n", "value": draw(json_values)}
    elif kind == "RAW":
        ev["event"] = draw(json_values)
    if not kind.startswith("SUBAGENT"):
        tag = draw(st.sampled_from(pool.tags))
        if tag != "absent":
            ev["subagentRunId"] = tag
    return ev


@st.composite
def _chunk_fields(draw: st.DrawFn, kind: str, pool: Pool) -> Event:
    """A chunk: an opener (id, name, role) or a continuation that leaves them out."""
    fields: Event = {}
    id_field = "toolCallId" if kind == "TOOL_CALL_CHUNK" else "messageId"
    if draw(st.integers(0, 2)):
        fields[id_field] = draw(
            st.sampled_from(pool.tools if id_field == "toolCallId" else pool.messages)
        )
    if kind == "TOOL_CALL_CHUNK":
        if draw(st.integers(0, 2)):
            fields["toolCallName"] = draw(st.sampled_from(["f", "f", "g"]))
        if draw(st.integers(0, 3)) == 0:
            fields["parentMessageId"] = draw(st.sampled_from(pool.messages))
    if kind == "TEXT_MESSAGE_CHUNK" and draw(st.integers(0, 3)) == 0:
        fields["role"] = draw(st.sampled_from(["assistant", "assistant", "user"]))
    if draw(st.integers(0, 4)):
        fields["delta"] = draw(st.sampled_from(["", "a", "{}"]))
    if draw(st.integers(0, 5)) == 0:
        fields[draw(st.sampled_from(["metadata", "rawEvent", "extra"]))] = {"k": 1}
    return fields


CHUNKY = Pool(
    [
        *OWNERSHIP_KINDS,
        *["TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"] * 6,
        "SUBAGENT_FINISHED", "SUBAGENT_ERROR", "CUSTOM", "RAW",
    ],
    ["x", "y"],
    ["x", "c"],
    ["x"],
    ["absent"] * 4 + ["s1", "s1", "s2", ""],
)  # fmt: skip


@st.composite
def _subagent_fields(draw: st.DrawFn, kind: str) -> Event:
    fields: Event = {}
    sub = draw(st.sampled_from(["absent", None, 5, *SUBAGENTS, "s1", "s1"]))
    if sub != "absent":
        fields["subagentRunId"] = sub
    if kind == "SUBAGENT_STARTED":
        if draw(st.integers(0, 5)):
            fields["name"] = draw(st.sampled_from(["helper", 3]))
        for field in ("description", "parentSubagentRunId", "parentToolCallId", "parentMessageId"):
            if draw(st.integers(0, 4)) == 0:
                fields[field] = draw(st.sampled_from([None, "s1", "s2", "x"]))
    if draw(st.integers(0, 2)) == 0 or kind == "SUBAGENT_FINISHED":
        outcome = draw(
            st.sampled_from(
                [
                    "absent",
                    "absent",
                    None,
                    {"type": "success"},
                    {"type": "suspended", "interruptIds": ["i1"]},
                    {"type": "suspended", "interruptIds": None},
                    {"type": "success", "interruptIds": [1]},
                    {"type": "failed"},
                    {},
                    "success",
                ]
            )
        )
        if outcome != "absent":
            fields["outcome"] = copy.deepcopy(outcome)
    if kind == "SUBAGENT_ERROR":
        if draw(st.integers(0, 5)):
            fields["message"] = draw(st.sampled_from(["oops", 1]))
        if draw(st.integers(0, 3)) == 0:
            fields["code"] = draw(st.sampled_from([None, "E"]))
    return fields


def _pick(draw: st.DrawFn, events: list[Event]) -> int:
    """An index; rarely the first one, whose loss only ever trips the first-event rule."""
    lo = 0 if len(events) == 1 or draw(st.integers(0, 9)) == 0 else 1
    return draw(st.integers(lo, len(events) - 1))


OWNERS = ["absent", "absent", *SUBAGENTS]


@st.composite
def attributed_streams(draw: st.DrawFn) -> list[Event]:
    """A legal stream whose entities are attributed to subagents, mostly consistently.

    Each id gets an owner; events naming it carry the owner's tag or (a continuation's right)
    none. Tool calls under a parent message of another owner, seeded owners, extra
    continuations (encrypted values, activity deltas, tool results) with a right or wrong tag,
    and SUBAGENT_STARTED / FINISHED around each run make a mix of legal and illegal streams.
    """
    events = copy.deepcopy(draw(legal_streams(max_runs=2, max_steps=10, chunks=False)))
    named = sorted({ev[f] for ev in events for f in ID_FIELDS if isinstance(ev.get(f), str)})
    owner = {name: draw(st.sampled_from(OWNERS)) for name in named}
    for ev in events:
        fields = [f for f in ("messageId", "toolCallId", "stepName") if isinstance(ev.get(f), str)]
        if fields and owner[ev[fields[0]]] != "absent" and draw(st.integers(0, 3)):
            ev["subagentRunId"] = owner[ev[fields[0]]]
        seeds = ev.get("messages") or (ev.get("input") or {}).get("messages") or []
        for msg in seeds:
            if owner.get(msg["id"], "absent") != "absent" and draw(st.booleans()):
                msg["subagentRunId"] = owner[msg["id"]]
    for _ in range(draw(st.integers(0, 3)) if named and len(events) > 1 else 0):
        name = draw(st.sampled_from(named))
        extra: Event = draw(
            st.sampled_from(
                [
                    {"type": "REASONING_ENCRYPTED_VALUE", "entityId": name, "encryptedValue": "x",
                     "subtype": "tool-call"},
                    {"type": "REASONING_ENCRYPTED_VALUE", "entityId": name, "encryptedValue": "x",
                     "subtype": "message"},
                    {"type": "ACTIVITY_DELTA", "messageId": name, "activityType": "plan",
                     "patch": []},
                    {"type": "ACTIVITY_SNAPSHOT", "messageId": name, "activityType": "plan",
                     "content": {}, "replace": False},
                    {"type": "TOOL_CALL_RESULT", "messageId": name, "toolCallId": "c1",
                     "content": ""},
                ]
            )
        )  # fmt: skip
        tag = draw(st.sampled_from([owner[name], owner[name], *SUBAGENTS]))
        if tag != "absent":
            extra["subagentRunId"] = tag
        events.insert(draw(st.integers(1, len(events))), copy.deepcopy(extra))
    if draw(st.booleans()):
        events = _with_subagent_lifecycles(draw, events, sorted(set(owner.values()) - {"absent"}))
    return events


def _subagent_terminals(sub: str) -> list[Event]:
    return [
        {"type": "SUBAGENT_FINISHED", "subagentRunId": sub},
        {
            "type": "SUBAGENT_FINISHED",
            "subagentRunId": sub,
            "outcome": {"type": "suspended", "interruptIds": ["i1"]},
        },
        {"type": "SUBAGENT_ERROR", "subagentRunId": sub, "message": "x"},
    ]


def _with_subagent_lifecycles(draw: st.DrawFn, events: list[Event], subs: list[str]) -> list[Event]:
    """SUBAGENT_STARTED after each RUN_STARTED and a terminal before the run's own."""
    out: list[Event] = []
    starts = [i for i, ev in enumerate(events) if ev["type"] == "RUN_STARTED"]
    for lo, hi in itertools.pairwise([*starts, len(events)]):
        run = events[lo:hi]
        ends = [i for i, ev in enumerate(run) if ev["type"] in ("RUN_FINISHED", "RUN_ERROR")]
        cut = ends[0] if ends else len(run)
        opened: list[Event] = []
        closed: list[Event] = []
        for sub in subs:
            started: Event = {"type": "SUBAGENT_STARTED", "subagentRunId": sub, "name": "h"}
            if opened and draw(st.booleans()):
                started["parentSubagentRunId"] = opened[-1]["subagentRunId"]
            opened.append(started)
            closed.append(draw(st.sampled_from(_subagent_terminals(sub))))
        out += [run[0], *opened, *run[1:cut], *draw(st.permutations(closed)), *run[cut:]]
    return copy.deepcopy(out)


@st.composite
def mutated_streams(draw: st.DrawFn) -> list[Event]:
    """A legal or attributed stream with up to four mutations; each may or may not break it."""
    base = draw(st.one_of(legal_streams(max_runs=2, max_steps=10), attributed_streams()))
    events = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, 4))):
        how = draw(
            st.sampled_from(
                [
                    "drop", "duplicate", "swap", "move", "insert", "insert", "reid", "odd_id",
                    "tag", "tag_entity", "tag_nested", "subagent_pair", "subagent_event",
                ]
            )
        )  # fmt: skip
        if how == "insert" or not events:
            events.insert(draw(st.integers(0, len(events))), draw(any_events()))
        elif how == "drop":
            del events[_pick(draw, events)]
        elif how == "duplicate":
            i = _pick(draw, events)
            events.insert(draw(st.integers(0, len(events))), copy.deepcopy(events[i]))
        elif how == "swap":
            i, j = _pick(draw, events), _pick(draw, events)
            events[i], events[j] = events[j], events[i]
        elif how == "move":
            moved = events.pop(_pick(draw, events))
            events.insert(draw(st.integers(0, len(events))), moved)
        elif how in ("reid", "odd_id"):
            _change_an_id(draw, events, odd=how == "odd_id")
        elif how == "tag":
            i = _pick(draw, events)
            events[i]["subagentRunId"] = draw(st.sampled_from([None, *SUBAGENTS]))
        elif how == "tag_entity":
            _tag_an_entity(draw, events)
        elif how == "tag_nested":
            _tag_nested(draw, events)
        elif how == "subagent_pair":
            sub = draw(tags)
            i = draw(st.integers(0, len(events)))
            events.insert(i, {"type": "SUBAGENT_STARTED", "subagentRunId": sub, "name": "h"})
            end = draw(st.sampled_from(_subagent_terminals(sub)))
            events.insert(draw(st.integers(i + 1, len(events))), end)
        else:
            kind = draw(
                st.sampled_from(["SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR"])
            )
            ev = {"type": kind, **draw(_subagent_fields(kind))}
            events.insert(draw(st.integers(0, len(events))), ev)
    return events


def _change_an_id(draw: st.DrawFn, events: list[Event], *, odd: bool) -> None:
    spots = [(i, f) for i, ev in enumerate(events) for f in ID_FIELDS if f in ev]
    if not spots:
        return
    i, field = draw(st.sampled_from(spots))
    if odd:
        value = draw(st.sampled_from([*ODD_IDS, "missing"]))
        if value == "missing":
            del events[i][field]
        else:
            events[i][field] = copy.deepcopy(value)
    else:
        events[i][field] = draw(st.sampled_from([*MESSAGE_IDS, *TOOL_IDS, "s1", "s2"]))


def _tag_an_entity(draw: st.DrawFn, events: list[Event]) -> None:
    """Tag every event that names one id, consistently (mostly legal) or from one point on."""
    named = sorted({ev[f] for ev in events for f in ID_FIELDS if isinstance(ev.get(f), str)})
    if not named:
        return
    target = draw(st.sampled_from(named))
    sub = draw(tags)
    start = draw(st.sampled_from([0, 0, _pick(draw, events)]))
    for ev in events[start:]:
        if any(ev.get(f) == target for f in ID_FIELDS):
            ev["subagentRunId"] = sub


def _tag_nested(draw: st.DrawFn, events: list[Event]) -> None:
    """Owners inside seeded messages and interrupts, null included."""
    holders: list[list[Any]] = []
    for ev in events:
        if isinstance(ev.get("messages"), list):
            holders.append(ev["messages"])
        inp = ev.get("input")
        if isinstance(inp, dict) and isinstance(inp.get("messages"), list):
            holders.append(inp["messages"])
        outcome = ev.get("outcome")
        if isinstance(outcome, dict) and isinstance(outcome.get("interrupts"), list):
            holders.append(outcome["interrupts"])
    items = [item for h in holders for item in h if isinstance(item, dict)]
    if items:
        draw(st.sampled_from(items))["subagentRunId"] = draw(st.sampled_from([None, *SUBAGENTS]))


# ---------------------------------------------------------------------------------------------
# properties

# The profile's budget (conftest: dev 60, ci 300 examples) goes in full to the differential
# tests on whole streams; a walk asks the oracle up to 30 times per example, and the
# state-handling properties only re-check what those already compare with the oracle.
_BUDGET = settings.default.max_examples
WALKS = settings(max_examples=max(20, _BUDGET // 2))
SECONDARY = settings(max_examples=max(20, _BUDGET // 3))


@given(legal_streams())
def test_legal_streams_are_accepted_by_both(oracle: Oracle, events: list[Event]) -> None:
    assert assert_same_verdict(oracle, events)["ok"]


@given(mutated_streams())
def test_mutated_streams_get_the_official_clients_verdict_at_the_same_index(
    oracle: Oracle, events: list[Event]
) -> None:
    assert_same_verdict(oracle, events)


@given(st.lists(any_events(), max_size=12))
def test_random_event_soup_gets_the_official_clients_verdict(
    oracle: Oracle, body: list[Event]
) -> None:
    assert_same_verdict(oracle, [RUN_STARTED, *body])


@WALKS
@given(st.sampled_from([TIGHT, TIGHT, ODD]), st.data())
def test_every_step_of_a_random_walk_gets_the_official_clients_verdict(
    oracle: Oracle, pool: Pool, data: st.DataObject
) -> None:
    # Each candidate is judged after the events accepted so far, so the walk reaches deep
    # states (owners recorded by one kind of entity meeting another, subagents closed and
    # reused, runs after runs) that whole random streams rarely get to.
    accepted: list[Event] = []
    v = SequenceVerifier()
    for _ in range(30):
        if not v.run_active and data.draw(st.booleans()):
            ev = {**RUN_STARTED, "input": {"messages": data.draw(seeded_messages(pool))}}
        else:
            ev = data.draw(any_events(pool))
        index = len(accepted)
        theirs = oracle.verify([*accepted, ev])
        (ev,) = parsed([ev])
        try:
            v.check(ev, index)
        except SequenceError as e:
            assert not theirs["ok"], (ev, e.reason)
            assert theirs["index"] == index
            assert same_reason(e.reason, theirs["error"])
            continue
        assert theirs["ok"], (ev, theirs)
        v.feed(ev, index)
        accepted.append(ev)


@SECONDARY
@given(mutated_streams())
def test_skipping_rejected_events_leaves_a_stream_the_client_accepts(
    oracle: Oracle, events: list[Event]
) -> None:
    # A rejected event leaves no trace: what was accepted is a legal stream on its own.
    v = SequenceVerifier()
    accepted = []
    for i, ev in enumerate(parsed(events)):
        try:
            v.feed(ev, i)
        except SequenceError:
            continue
        accepted.append(ev)
    assert oracle.verify(accepted)["ok"]
    assert ours(accepted)["ok"]


def _verdict_in_pieces(events: list[Event], cuts: list[int]) -> Verdict:
    verifier: SequenceVerifier | None = None
    events = parsed(events)
    bounds = [0, *sorted(set(cuts)), len(events)]
    for lo, hi in itertools.pairwise(bounds):
        try:
            verifier = verify_events(events[lo:hi], start=verifier)
        except SequenceError as e:
            assert e.index is not None
            return {"ok": False, "index": lo + e.index, "error": e.reason}
    return {"ok": True}


@SECONDARY
@given(
    mutated_streams(), st.lists(st.integers(0, 40), max_size=4), st.lists(any_events(), max_size=4)
)
def test_feeding_in_pieces_equals_feeding_whole(
    events: list[Event], cuts: list[int], probe: list[Event]
) -> None:
    cuts = [c for c in cuts if c <= len(events)]
    assert _verdict_in_pieces(events, cuts) == ours(events)
    # The state after the pieces judges what follows as the state after the whole does.
    assert _verdict_in_pieces([*events, *probe], [*cuts, len(events)]) == ours([*events, *probe])


@SECONDARY
@given(mutated_streams(), st.lists(any_events(), max_size=4))
def test_checking_then_feeding_one_shared_verifier_equals_verify_events(
    events: list[Event], probe: list[Event]
) -> None:
    # check() judges as feed() does and changes nothing: were it to advance the state, the
    # feed() after it would see every opener twice.
    shared = SequenceVerifier()
    verdict: Verdict = {"ok": True}
    for i, ev in enumerate(parsed([*events, *probe])):
        try:
            shared.check(ev, i)
            shared.feed(ev, i)
        except SequenceError as e:
            verdict = {"ok": False, "index": e.index, "error": e.reason}
            break
    assert verdict == ours([*events, *probe])


def _feed_what_passes(verifier: SequenceVerifier, events: list[Event]) -> None:
    for i, ev in enumerate(parsed(events)):
        with contextlib.suppress(SequenceError):
            verifier.feed(ev, i)


@SECONDARY
@given(
    legal_streams(max_runs=2, max_steps=8), st.integers(0, 40), st.lists(any_events(), max_size=8)
)
def test_copy_isolates_state(legal: list[Event], at: int, other: list[Event]) -> None:
    head, rest = legal[:at], legal[at:]
    original = verify_events(head)
    # Whatever is fed to a copy does not reach the original...
    _feed_what_passes(original.copy(), [*other, *rest])
    verify_events(rest, start=original)
    # ...and whatever is fed to the original does not reach a copy taken before.
    kept = original.copy()
    _feed_what_passes(original, other)
    verify_events(rest, start=kept)


# ---------------------------------------------------------------------------------------------
# with chunk expansion (transformChunks, then verifyEvents), as a live client verifies


@pytest.mark.parametrize("events", fixture_params())
def test_every_upstream_recording_gets_the_clients_verdict_with_chunks_expanded(
    oracle: Oracle, events: list[Event] | None
) -> None:
    assert events is not None
    assert_same_verdict(oracle, events, chunks=True)


@pytest.mark.parametrize("events", case_params())
def test_every_shared_case_gets_the_clients_verdict_with_chunks_expanded(
    oracle: Oracle, events: list[Event]
) -> None:
    assert_same_verdict(oracle, events, chunks=True)


@pytest.mark.parametrize(("events", "index"), SCENARIO_PARAMS)
def test_each_named_scenario_gets_the_clients_verdict_with_chunks_expanded(
    oracle: Oracle, events: list[Event], index: int | None
) -> None:
    assert_same_verdict(oracle, events, chunks=True)


def test_a_chunk_reopening_a_started_message_is_rejected_only_when_chunks_expand() -> None:
    events = _run(
        _text("m1")[0],
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"},
        _text("m1")[2],
    )
    assert ours(events) == {"ok": True}
    expanded = ours(events, chunks=True)
    assert (expanded["ok"], expanded["index"]) == (False, 2)
    assert "already in progress" in expanded["error"]


def test_an_expansion_error_names_the_raw_chunk() -> None:
    with pytest.raises(SequenceError) as caught:
        verify_events(_run({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}), chunks=True)
    assert (caught.value.index, caught.value.event_type) == (1, "TEXT_MESSAGE_CHUNK")
    assert caught.value.reason == "First TEXT_MESSAGE_CHUNK must have a messageId"


@given(st.one_of(legal_streams(), mutated_streams()))
def test_streams_get_the_clients_verdict_with_chunks_expanded(
    oracle: Oracle, events: list[Event]
) -> None:
    assert_same_verdict(oracle, events, chunks=True)


@WALKS
@given(st.data())
def test_every_step_of_a_chunked_walk_gets_the_clients_verdict(
    oracle: Oracle, data: st.DataObject
) -> None:
    # One event at a time through verify_events(start=…, chunks=True): open chunk streams
    # must carry over from one piece to the next, as they do in one client subscription.
    accepted: list[Event] = []
    v = SequenceVerifier()
    for _ in range(30):
        if not v.run_active and data.draw(st.booleans()):
            ev: Event = dict(RUN_STARTED)
        else:
            ev = data.draw(any_events(CHUNKY))
        theirs = oracle.verify([*accepted, ev], chunks=True)
        try:
            after = verify_events(parsed([ev]), start=v, chunks=True)
        except SequenceError as e:
            assert not theirs["ok"], (ev, e.reason)
            assert theirs["index"] == len(accepted)
            assert same_reason(e.reason, theirs["error"])
            continue
        assert theirs["ok"], (ev, theirs)
        v = after
        accepted.append(ev)


@SECONDARY
@given(st.lists(any_events(CHUNKY), max_size=25), st.lists(st.integers(0, 26), max_size=4))
def test_feeding_a_chunked_stream_in_pieces_equals_feeding_it_whole(
    body: list[Event], cuts: list[int]
) -> None:
    events = [RUN_STARTED, *body]
    verifier: SequenceVerifier | None = None
    verdict: Verdict = {"ok": True}
    bounds = [0, *sorted({c for c in cuts if c <= len(events)}), len(events)]
    for lo, hi in itertools.pairwise(bounds):
        try:
            verifier = verify_events(events[lo:hi], start=verifier, chunks=True)
        except SequenceError as e:
            assert e.index is not None
            verdict = {"ok": False, "index": lo + e.index, "error": e.reason}
            break
    assert verdict == ours(events, chunks=True)


def test_an_object_id_continues_what_its_own_chunk_opened_as_in_the_client(
    oracle: Oracle,
) -> None:
    # Found by the random profile: transformChunks gives the START and CONTENT it makes of
    # one chunk the chunk's very messageId object, and JavaScript compares it by reference.
    started = {**RUN_STARTED, "input": {"threadId": "t", "runId": "r0", "messages": []}}
    assert_same_verdict(
        oracle,
        [
            started,
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": {}, "delta": ""},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "metadata": {}},
            {"type": "STEP_STARTED", "stepName": "s1"},
        ],
        chunks=True,
    )
    assert_same_verdict(
        oracle,
        [
            started,
            {"type": "TOOL_CALL_CHUNK", "toolCallId": {}, "toolCallName": "f", "delta": "{"},
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "delta": "}"},
        ],
        chunks=True,
    )
