"""The reducer, differentially against the official client (``@ag-ui/client`` 1.0.0).

Every comparison replays the same events through :mod:`agui_store.protocol.reducer` and through the
client's own ``transformChunks`` + ``defaultApplyEvents`` (``tests/oracle``), and compares the
parsed JSON of ``messages``, ``state`` and ``pendingInterrupts``, and how many warnings each
gave. Where the client throws, the reducer must raise :class:`InvalidEventError`.

Generating a stream costs more than checking it, so each generated stream is checked for
everything at once (``assert_generated_stream_matches_the_client``): the client's view, the
chunks the client's ``transformChunks`` synthesizes, and feeding it in any split.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from agui_store.errors import InvalidEventError
from agui_store.protocol.reducer import ReducedView, Reducer, reduce_events, transform_chunks
from tests.conftest import SHARED, fixture_params
from tests.oracle_client import HARNESS_DIR, UNSET, Oracle, as_js, unavailable_reason
from tests.strategies import (
    TEXT,
    json_objects,
    json_values,
    legal_streams,
    message_lists,
    messages,
    patches,
)

pytestmark = pytest.mark.oracle

CASES = SHARED / "oracle" / "cases"
TERMINALS = ("RUN_FINISHED", "RUN_ERROR")
# Warnings of the chunk stage; the oracle process runs with them suppressed.
TRANSFORM_WARNING = "[ag-ui][transform]"


def as_json(value: Any) -> Any:
    """The value as the client would see it after a JSON round trip."""
    return json.loads(json.dumps(value))


def client_view(answer: dict[str, Any]) -> dict[str, Any]:
    return as_js(
        {
            "messages": answer["messages"],
            "state": answer["state"],
            "pendingInterrupts": answer["pendingInterrupts"],
        }
    )


def our_view(view: ReducedView | Reducer) -> dict[str, Any]:
    if isinstance(view, Reducer):
        view = view.view()
    return as_json(
        {
            "messages": view.messages,
            "state": view.state,
            "pendingInterrupts": view.pending_interrupts,
        }
    )


def explain(text: str) -> None:
    """Add ``text`` to a failing hypothesis example's report (a no-op outside one)."""
    with contextlib.suppress(InvalidArgument):
        note(text)


def reducer_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if not w.startswith(TRANSFORM_WARNING)]


def assert_matches_client(
    oracle: Oracle,
    events: list[dict[str, Any]],
    *,
    messages: list[dict[str, Any]] | None = None,
    state: Any = UNSET,
    mode: str = "reducer",
) -> ReducedView | None:
    """Replay through both and compare; ``None`` when both refused the stream."""
    answer = oracle.replay(events, messages=messages, state=state, mode=mode)
    start_state = {} if state is UNSET else state
    before = copy.deepcopy((events, messages, start_state))
    if not answer["ok"]:
        explain(f"client error: {answer['error']}")
        with pytest.raises(InvalidEventError):
            reduce_events(events, messages=messages, state=start_state, expand_chunks=mode != "raw")
        return None
    view = reduce_events(events, messages=messages, state=start_state, expand_chunks=mode != "raw")
    assert our_view(view) == client_view(answer)
    # The finest split there is: one event per feed.
    one_by_one = Reducer(messages, start_state, expand_chunks=mode != "raw")
    for item in events:
        one_by_one.feed([item])
    assert our_view(one_by_one) == our_view(view)
    assert len(reducer_warnings(view.warnings)) == len(answer["warnings"]), (
        view.warnings,
        answer["warnings"],
    )
    assert (events, messages, start_state) == before, "the reducer modified its input"
    return view


# --------------------------------------------------------------------------------------
# Recorded upstream streams and hand-written cases
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("events", fixture_params())
def test_replaying_every_recorded_stream_matches_the_official_client(
    oracle: Oracle, events: list[dict[str, Any]]
) -> None:
    assert_matches_client(oracle, events)


@pytest.mark.parametrize("events", fixture_params())
def test_every_run_boundary_of_a_recorded_stream_matches_the_official_client(
    oracle: Oracle, events: list[dict[str, Any]]
) -> None:
    # One reducer fed run by run must hold, after each run, what the client holds after
    # replaying the stream up to there.
    reducer = Reducer()
    start = 0
    for end, event in enumerate(events, start=1):
        if event["type"] not in TERMINALS:
            continue
        reducer.feed(events[start:end])
        start = end
        answer = oracle.replay(events[:end])
        assert answer["ok"], answer
        assert our_view(reducer) == client_view(answer), f"after event {end - 1}"


@pytest.mark.parametrize("events", fixture_params())
def test_handing_over_freshly_decoded_events_gives_the_same_result_as_copying(
    events: list[dict[str, Any]],
) -> None:
    copied = reduce_events(events)
    owned = Reducer(copy=False)
    owned.feed(as_json(events))
    assert our_view(owned) == our_view(copied)
    assert owned.warnings == copied.warnings


def oracle_cases() -> list[Any]:
    paths = sorted(CASES.glob("*.json")) if CASES.is_dir() else []
    if not paths:
        return [pytest.param(None, id="no-cases", marks=pytest.mark.skip(f"no {CASES}"))]
    return [pytest.param(path, id=path.stem) for path in paths]


@pytest.mark.parametrize("path", oracle_cases())
def test_each_hand_written_oracle_case_matches_the_official_client(
    oracle: Oracle, path: Path
) -> None:
    case = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(case, dict):
        assert_matches_client(
            oracle, case["events"], messages=case.get("messages"), state=case.get("state", UNSET)
        )
    else:
        assert_matches_client(oracle, case)
        assert_matches_client(oracle, case, mode="raw")


# --------------------------------------------------------------------------------------
# Random legal streams
# --------------------------------------------------------------------------------------

start_states = json_objects | json_values
#: Where a generated stream is cut to be fed in pieces: positions modulo its length + 1.
CUTS = st.lists(st.integers(0, 10_000), max_size=6)


@given(events=legal_streams(), messages=message_lists, state=start_states, cuts=CUTS)
def test_random_legal_streams_from_random_starts_match_the_official_client(
    oracle: Oracle,
    chunk_oracle: ChunkOracle,
    events: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    state: Any,
    cuts: list[int],
) -> None:
    assert_generated_stream_matches_the_client(
        oracle, chunk_oracle, events, cuts, messages=messages, state=state
    )


@pytest.mark.parametrize("stream", ["content", "chunks", "reasoning", "tool args"])
def test_thousands_of_deltas_make_one_text_with_its_keys_where_the_client_has_them(
    oracle: Oracle, stream: str
) -> None:
    """Each delta extends the text in place (the reducer once copied the whole text for
    each one): the text must come out whole, in the message's key order, as the client's."""
    deltas = [f"{i} " for i in range(3000)]
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    if stream == "content":
        events.append({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
        events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d} for d in deltas]
    elif stream == "chunks":
        events += [{"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "role": "assistant",
                    "delta": d} for d in deltas]
    elif stream == "reasoning":
        events.append({"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "reasoning"})
        events += [{"type": "REASONING_MESSAGE_CONTENT", "messageId": "m", "delta": d}
                   for d in deltas]
    else:
        events.append({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"})
        events += [{"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": d} for d in deltas]
    # Metadata after the text (a key added behind it), then more deltas onto it.
    if stream != "tool args":
        events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "!",
                       "metadata": {"k": 1}})
        events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "?"})
    events += [{"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}]
    ours = reduce_events(events)
    client = oracle.replay(events)
    assert client["ok"]
    assert as_js(ours.messages) == as_js(client["messages"])
    for mine, theirs in zip(ours.messages, client["messages"]):
        assert list(mine) == list(theirs)
    text = "".join(deltas)
    if stream == "tool args":
        assert ours.messages[0]["toolCalls"][0]["function"]["arguments"] == text
    else:
        assert ours.messages[0]["content"] == text + "!?"


def test_an_unexpanded_chunk_is_an_error_in_raw_mode_as_in_the_client(oracle: Oracle) -> None:
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "x"},
    ]
    assert not oracle.replay(events, mode="raw")["ok"]
    with pytest.raises(InvalidEventError) as raised:
        reduce_events(events, expand_chunks=False)
    assert raised.value.index == 1
    assert raised.value.event_type == "TEXT_MESSAGE_CHUNK"


# --------------------------------------------------------------------------------------
# Corner cases: anything shape-valid, in any order
# --------------------------------------------------------------------------------------

MESSAGE_IDS = ["m1", "m2", "a1", "c1", "r1"]  # c1 is also a tool call id
TOOL_CALL_IDS = ["c1", "c2", "c3"]
ACTIVITY_TYPES = ["plan", "search"]


#: A field left out of an event or a message (as opposed to one that is ``null``).
ABSENT = object()


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field value, or ``ABSENT``."""
    return st.just(ABSENT) | strategy


tags = optional(st.sampled_from(["s1", "s2", None]))
metadata_values = optional(json_objects)


def event(type: str, **fields: Any) -> dict[str, Any]:
    """An event with the fields given, less those that are ``ABSENT``."""
    return {"type": type, **{k: v for k, v in fields.items() if v is not ABSENT}}


@st.composite
def tool_calls(draw: st.DrawFn) -> list[dict[str, Any]]:
    calls = []
    for tcid in draw(st.lists(st.sampled_from(TOOL_CALL_IDS), max_size=2)):
        call: dict[str, Any] = {
            "id": tcid,
            "type": "function",
            "function": {"name": draw(st.sampled_from(["f", "g"])), "arguments": "{}"},
        }
        if draw(st.integers(0, 4)) == 0:
            call["metadata"] = draw(json_objects)
        if draw(st.integers(0, 4)) == 0:
            call["encryptedValue"] = "enc"
        calls.append(call)
    return calls


@st.composite
def rich_messages(draw: st.DrawFn) -> dict[str, Any]:
    """Any role, with the optional fields the reducer treats specially."""
    role = draw(
        st.sampled_from(
            ["user", "assistant", "tool", "system", "developer", "activity", "reasoning"]
        )
    )
    msg: dict[str, Any] = {"id": draw(st.sampled_from(MESSAGE_IDS)), "role": role}
    if role == "activity":
        msg["activityType"] = draw(st.sampled_from(ACTIVITY_TYPES))
        msg["content"] = draw(json_objects)
    elif role == "assistant":
        if draw(st.booleans()):
            msg["content"] = draw(TEXT)
        if draw(st.booleans()):
            msg["toolCalls"] = draw(tool_calls())
    elif role == "tool":
        msg["toolCallId"] = draw(st.sampled_from(TOOL_CALL_IDS))
        msg["content"] = draw(TEXT | st.just([{"type": "text", "text": "part"}]))
    elif role == "user":
        msg["content"] = draw(TEXT | st.just([{"type": "text", "text": "hi"}]))
        if draw(st.integers(0, 5)) == 0:
            # Not a 1.0 field on a user message, but the reducer alone keeps it, and the
            # client finds tool calls in any message that has them.
            msg["toolCalls"] = draw(tool_calls())
    else:
        msg["content"] = draw(TEXT)
    sub = draw(tags)
    if sub is not ABSENT:
        msg["subagentRunId"] = sub
    if draw(st.integers(0, 3)) == 0:
        msg["metadata"] = draw(json_objects)
    return msg


# Duplicate ids on purpose: the client then holds one message object at two positions.
rich_message_lists = st.integers(0, 5).flatmap(
    lambda size: st.lists(rich_messages(), min_size=size, max_size=size)
)

authoritative_metadata = st.one_of(
    st.just(ABSENT),
    st.sampled_from([None, [], ["plan"], ["search"], ["plan", "search"], [1], "plan"]).map(
        lambda types: {"@ag-ui/client": {"authoritativeActivityTypes": types}}
    ),
    st.sampled_from([{"@ag-ui/client": "invalid"}, {"@ag-ui/client": {}}, {"other": 1}]),
)

interrupts = st.lists(
    st.builds(
        lambda i, sub: (
            {"id": i, "reason": "approval"} | ({} if sub is ABSENT else {"subagentRunId": sub})
        ),
        st.sampled_from(["i1", "i2"]),
        tags,
    ),
    max_size=2,
)
outcomes = st.one_of(
    st.just(ABSENT),
    st.just({"type": "success"}),
    st.builds(
        lambda ids: {"type": "success", "pendingToolCallIds": ids},
        st.lists(st.sampled_from(TOOL_CALL_IDS), max_size=2),
    ),
    st.just({"type": "cancelled"}),
    st.builds(lambda items: {"type": "interrupt", "interrupts": items}, interrupts),
)


def events_of(kind: Any, **fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    """Events of a type; type and fields strategies or constants, ``ABSENT`` leaves one out."""
    strategies = {
        name: value if isinstance(value, st.SearchStrategy) else st.just(value)
        for name, value in {"type": kind, **fields}.items()
    }
    return st.fixed_dictionaries(strategies).map(lambda drawn: event(**drawn))


def chaotic_events() -> st.SearchStrategy[dict[str, Any]]:
    mid = st.sampled_from(MESSAGE_IDS)
    tcid = st.sampled_from(TOOL_CALL_IDS)
    meta = metadata_values
    roles = optional(st.sampled_from(["assistant", "user", "system", "developer"]))
    tool_names = st.sampled_from(["f", "g"])
    results = TEXT | st.just([{"type": "text", "text": "r"}])
    states = json_values | json_objects | st.sampled_from([None, False, 0, "", [], {}])
    run_input = st.builds(
        lambda ms: {"threadId": "t", "runId": "r", "messages": ms, "tools": [], "context": []},
        rich_message_lists,
    )
    return st.one_of(
        events_of(
            "TEXT_MESSAGE_START",
            messageId=mid,
            role=roles,
            name=optional(st.just("bot")),
            subagentRunId=tags,
            metadata=meta,
        ),
        events_of("TEXT_MESSAGE_CONTENT", messageId=mid, delta=TEXT, metadata=meta),
        events_of("TEXT_MESSAGE_END", messageId=mid, metadata=meta),
        events_of(
            "TEXT_MESSAGE_CHUNK",
            messageId=optional(mid),
            role=roles,
            delta=optional(TEXT),
            name=optional(st.just("bot")),
            subagentRunId=tags,
            metadata=meta,
            rawEvent=optional(json_objects),
            unknownField=optional(st.just("x")),
        ),
        events_of(
            "TOOL_CALL_START",
            toolCallId=tcid,
            toolCallName=tool_names,
            parentMessageId=optional(mid | st.just("")),
            subagentRunId=tags,
            metadata=meta,
        ),
        events_of(
            "TOOL_CALL_ARGS",
            toolCallId=tcid,
            delta=st.sampled_from(['{"q":', '"x"}', ""]),
            metadata=meta,
        ),
        events_of("TOOL_CALL_END", toolCallId=tcid, metadata=meta),
        events_of(
            "TOOL_CALL_CHUNK",
            toolCallId=optional(tcid),
            toolCallName=optional(tool_names),
            parentMessageId=optional(mid),
            delta=optional(st.sampled_from(["{", "}"])),
            subagentRunId=tags,
            metadata=meta,
            unknownField=optional(st.just("x")),
        ),
        events_of(
            "TOOL_CALL_RESULT",
            messageId=mid | tcid,
            toolCallId=tcid,
            content=results,
            role=optional(st.just("tool")),
            subagentRunId=tags,
            metadata=meta,
        ),
        events_of(
            "REASONING_MESSAGE_START",
            messageId=mid,
            role="reasoning",
            subagentRunId=tags,
            metadata=meta,
        ),
        events_of("REASONING_MESSAGE_CONTENT", messageId=mid, delta=TEXT, metadata=meta),
        events_of("REASONING_MESSAGE_END", messageId=mid, metadata=meta),
        events_of(
            "REASONING_MESSAGE_CHUNK",
            messageId=optional(mid),
            delta=optional(TEXT),
            role=optional(st.just("reasoning")),  # not a described field: remainder
            subagentRunId=tags,
            metadata=meta,
        ),
        events_of("REASONING_START", messageId=mid, metadata=meta),
        events_of("REASONING_END", messageId=mid, metadata=meta),
        events_of(
            "REASONING_ENCRYPTED_VALUE",
            subtype=st.sampled_from(["tool-call", "message"]),
            entityId=mid | tcid,
            encryptedValue=st.sampled_from(["e1", "e2"]),
            metadata=meta,
        ),
        events_of("STATE_SNAPSHOT", snapshot=states, metadata=meta),
        events_of("STATE_DELTA", delta=patches),
        events_of(
            "MESSAGES_SNAPSHOT", messages=rich_message_lists, metadata=authoritative_metadata
        ),
        events_of(
            "ACTIVITY_SNAPSHOT",
            messageId=mid,
            activityType=st.sampled_from(ACTIVITY_TYPES),
            content=json_objects,
            replace=optional(st.booleans()),
            subagentRunId=tags,
            metadata=meta,
        ),
        events_of(
            "ACTIVITY_DELTA",
            messageId=mid,
            activityType=st.sampled_from(ACTIVITY_TYPES),
            patch=patches | st.just([{"op": "add", "path": "/k", "value": 1}]),
            metadata=meta,
        ),
        events_of("RUN_STARTED", threadId="t", runId="r", input=optional(run_input)),
        events_of("RUN_FINISHED", threadId="t", runId="r", outcome=outcomes),
        events_of("RUN_ERROR", message="boom"),
        events_of(
            st.sampled_from(["SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR"]),
            subagentRunId=st.sampled_from(["s1", "s2"]) | st.none(),
            name="sub",
            message="m",
        ),
        events_of(
            st.sampled_from(["STEP_STARTED", "STEP_FINISHED"]), stepName="s", subagentRunId=tags
        ),
        events_of("CUSTOM", name="c", value=json_values),
        events_of("RAW", event={"x": 1}),
        events_of("THINKING_TEXT_MESSAGE_START"),  # legacy: passes through untouched
    )


@st.composite
def chaotic_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    # A drawn length: hypothesis's own list sizes stay short for elements this big.
    size = draw(st.integers(0, 25))
    # Often a snapshot first: with ids the start repeats, that is how the client comes to
    # hold one message object at two positions.
    snapshot = events_of("MESSAGES_SNAPSHOT", messages=rich_message_lists)
    first = draw(st.lists(snapshot, max_size=1))
    return first + draw(st.lists(chaotic_events(), min_size=size, max_size=size))


@given(
    events=chaotic_streams(),
    messages=rich_message_lists,
    state=start_states,
    mode=st.sampled_from(["reducer", "raw"]),
    cuts=CUTS,
)
def test_any_shape_valid_events_in_any_order_match_the_official_client(
    oracle: Oracle,
    chunk_oracle: ChunkOracle,
    events: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    state: Any,
    mode: str,
    cuts: list[int],
) -> None:
    # Orphans (content for unknown ids, activity ids reused by text), reused ids, chunks in
    # several subagent lanes, snapshots with activity and reasoning under every kind of
    # authority declaration, encrypted values, interrupts, non-object states; with chunk
    # expansion, and raw (where a chunk is an error).
    assert_generated_stream_matches_the_client(
        oracle, chunk_oracle, events, cuts, messages=messages, state=state, mode=mode
    )


def assert_feeding_it_in_any_split_equals_feeding_it_whole(
    events: list[Any], cuts: list[int], *, messages: Any, state: Any, expand_chunks: bool
) -> None:
    """Fed in pieces cut at ``cuts``, the reducer ends where it ends fed the whole stream at
    once: the same view and warnings, or the same refused event."""
    start = {} if state is UNSET else state
    whole = Reducer(messages, start, expand_chunks=expand_chunks)
    try:
        whole.feed(events)
    except InvalidEventError as e:
        failed_at: int | None = e.index
    else:
        failed_at = None
    pieces = Reducer(messages, start, expand_chunks=expand_chunks)
    bounds = [0, *sorted({cut % (len(events) + 1) for cut in cuts}), len(events)]
    try:
        for lo, hi in itertools.pairwise(bounds):
            pieces.feed(events[lo:hi])
    except InvalidEventError as e:
        assert e.index == failed_at
    else:
        assert failed_at is None
    assert our_view(pieces) == our_view(whole)
    assert pieces.warnings == whole.warnings


def assert_generated_stream_matches_the_client(
    oracle: Oracle,
    chunk_oracle: ChunkOracle,
    events: list[dict[str, Any]],
    cuts: list[int],
    *,
    messages: Any = None,
    state: Any = UNSET,
    mode: str = "reducer",
) -> None:
    """Everything a generated stream is checked for (generating it costs most of a test's
    time, so each stream is checked for all of it): the client's view of it, one event at a
    time and whole (:func:`assert_matches_client`); its chunks expanded as the client's
    ``transformChunks`` alone expands them; and fed cut anywhere, the same as whole."""
    assert_matches_client(oracle, events, messages=messages, state=state, mode=mode)
    assert_expands_chunks_like_the_client(chunk_oracle, events)
    assert_feeding_it_in_any_split_equals_feeding_it_whole(
        events, cuts, messages=messages, state=state, expand_chunks=mode != "raw"
    )


@st.composite
def subagent_chunk_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chunks of the parent and two subagents interleaved, tagged on the opener only or on
    every chunk, with explicit events and subagent terminals in between."""
    out: list[dict[str, Any]] = [event("RUN_STARTED", threadId="t", runId="r")]
    for _ in range(draw(st.integers(1, 20))):
        lane = draw(st.sampled_from([ABSENT, "s1", "s2"]))
        kind = draw(st.sampled_from(["text", "tool", "reasoning", "explicit", "terminal"]))
        tag_every = draw(st.booleans())
        opens = draw(st.booleans())
        tag = lane if (opens or tag_every) else ABSENT
        if kind == "text":
            out.append(
                event(
                    "TEXT_MESSAGE_CHUNK",
                    delta=draw(TEXT),
                    subagentRunId=tag,
                    messageId=draw(st.sampled_from(MESSAGE_IDS)) if opens else ABSENT,
                )
            )
        elif kind == "tool":
            out.append(
                event(
                    "TOOL_CALL_CHUNK",
                    delta="{}",
                    subagentRunId=tag,
                    toolCallId=draw(st.sampled_from(TOOL_CALL_IDS)) if opens else ABSENT,
                    toolCallName="f" if opens else ABSENT,
                    parentMessageId=draw(optional(st.sampled_from(MESSAGE_IDS)))
                    if opens
                    else ABSENT,
                )
            )
        elif kind == "reasoning":
            out.append(
                event(
                    "REASONING_MESSAGE_CHUNK",
                    delta=draw(TEXT),
                    subagentRunId=tag,
                    messageId=draw(st.sampled_from(["r1", "r2"])) if opens else ABSENT,
                )
            )
        elif kind == "explicit":
            out.append(event("STEP_STARTED", stepName="x", subagentRunId=lane))
        else:
            out.append(
                event(
                    draw(st.sampled_from(["SUBAGENT_FINISHED", "SUBAGENT_ERROR"])),
                    subagentRunId=lane if lane is not ABSENT else None,
                    message="m",
                )
            )
    if draw(st.booleans()):
        out.append(event("RUN_FINISHED", threadId="t", runId="r"))
    return out


@given(events=subagent_chunk_streams(), cuts=CUTS)
def test_chunks_assembled_in_subagent_lanes_match_the_official_client(
    oracle: Oracle, chunk_oracle: ChunkOracle, events: list[dict[str, Any]], cuts: list[int]
) -> None:
    assert_generated_stream_matches_the_client(oracle, chunk_oracle, events, cuts)


# --------------------------------------------------------------------------------------
# transformChunks alone, against the client's own
# --------------------------------------------------------------------------------------

TRANSFORM_SCRIPT = """
import { transformChunks } from "@ag-ui/client";
import { createInterface } from "node:readline";
import { from, lastValueFrom } from "rxjs";
import { toArray } from "rxjs/operators";
for await (const line of createInterface({ input: process.stdin })) {
  const warnings = [];
  const warn = console.warn;
  console.warn = (...a) => warnings.push(a.map(String).join(" "));
  let answer;
  try {
    const events = await lastValueFrom(
      from(JSON.parse(line)).pipe(transformChunks(), toArray()));
    answer = { ok: true, events, warnings };
  } catch (e) {
    answer = { ok: false, error: String(e) };
  } finally {
    console.warn = warn;
  }
  process.stdout.write(JSON.stringify(answer) + "\\n");
}
"""


class ChunkOracle:
    """The client's ``transformChunks`` alone, one JSON line per stream."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "SUPPRESS_TRANSFORMATION_WARNINGS"}
        self._proc = subprocess.Popen(
            ["node", "--input-type=module", "-e", TRANSFORM_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=HARNESS_DIR,  # resolves @ag-ui/client from the harness's node_modules
            env=env,
            text=True,
            encoding="utf-8",
        )
        self._lock = threading.Lock()

    def transform(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(events, ensure_ascii=False) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the transformChunks process died")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=10)
        self._proc.stdout.close()


@pytest.fixture(scope="module")
def chunk_oracle() -> Iterator[ChunkOracle]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    handle = ChunkOracle()
    yield handle
    handle.close()


def assert_expands_chunks_like_the_client(
    chunk_oracle: ChunkOracle, events: list[dict[str, Any]]
) -> None:
    """Chunks expand to exactly the events the client's ``transformChunks`` synthesizes, with
    as many warnings; where it throws, expanding them is an error."""
    answer = chunk_oracle.transform(events)
    if not answer["ok"]:
        explain(answer["error"])
        with pytest.raises(InvalidEventError):
            transform_chunks(events)
        return
    assert as_js(as_json(transform_chunks(events))) == as_js(answer["events"])
    reducer = Reducer()
    reducer.feed(events)
    transform_warnings = [w for w in reducer.warnings if w.startswith(TRANSFORM_WARNING)]
    assert len(transform_warnings) == len(answer["warnings"])


def test_a_continuation_chunk_that_contradicts_its_opener_is_an_error(
    oracle: Oracle,
) -> None:
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{"},
        {"type": "TOOL_CALL_CHUNK", "toolCallName": "g", "delta": "}"},
    ]
    assert not oracle.replay(events)["ok"]
    with pytest.raises(InvalidEventError) as raised:
        Reducer().feed(events)
    assert (raised.value.index, raised.value.path) == (2, "$.toolCallName")


# --------------------------------------------------------------------------------------
# Specific semantics, each pinned against the client
# --------------------------------------------------------------------------------------


def test_a_tool_result_goes_after_its_assistant_message_and_the_results_already_there(
    oracle: Oracle,
) -> None:
    events = [
        event("RUN_STARTED", threadId="t", runId="r"),
        event("TOOL_CALL_START", toolCallId="c1", toolCallName="f", parentMessageId="a"),
        event("TOOL_CALL_START", toolCallId="c2", toolCallName="f", parentMessageId="a"),
        event("TEXT_MESSAGE_START", messageId="m"),
        event("TEXT_MESSAGE_CONTENT", messageId="m", delta="later text"),
        event("TOOL_CALL_RESULT", messageId="r1", toolCallId="c1", content="one"),
        event("TOOL_CALL_RESULT", messageId="r2", toolCallId="c2", content="two"),
        event("RUN_FINISHED", threadId="t", runId="r"),
    ]
    view = assert_matches_client(oracle, events)
    assert view is not None
    assert [m["id"] for m in view.messages] == ["a", "r1", "r2", "m"]
    assert "content" not in view.messages[0]  # a created parent has no content key


def test_a_snapshot_keeps_local_positions_and_client_only_activity_and_reasoning(
    oracle: Oracle,
) -> None:
    start = [
        {"id": "act", "role": "activity", "activityType": "plan", "content": {"s": 1}},
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "why", "role": "reasoning", "content": "thinking"},
        {"id": "gone", "role": "assistant", "content": "dropped"},
    ]
    events = [
        event(
            "MESSAGES_SNAPSHOT",
            messages=[
                {"id": "new", "role": "assistant", "content": "appended", "subagentRunId": None},
                {"id": "u1", "role": "user", "content": "edited"},
            ],
        )
    ]
    view = assert_matches_client(oracle, events, messages=start)
    assert view is not None
    assert [m["id"] for m in view.messages] == ["act", "u1", "why", "new"]
    assert "subagentRunId" not in view.messages[3]


def test_a_message_held_twice_stays_one_object_after_a_snapshot_as_in_the_client(
    oracle: Oracle,
) -> None:
    # Two local messages share an id; the snapshot maps both onto its one message, so text
    # streamed into it afterwards shows at both positions.
    start = [
        {"id": "m1", "role": "assistant", "content": "a"},
        {"id": "m1", "role": "assistant", "content": "b"},
    ]
    events = [
        event("MESSAGES_SNAPSHOT", messages=[{"id": "m1", "role": "assistant", "content": "s"}]),
        event("TEXT_MESSAGE_CONTENT", messageId="m1", delta="+"),
        event("TOOL_CALL_START", toolCallId="c1", toolCallName="f", parentMessageId="m1"),
        event("TOOL_CALL_RESULT", messageId="r", toolCallId="c1", content="ok"),
        event(
            "ACTIVITY_SNAPSHOT",
            messageId="m1",
            activityType="plan",
            content={"x": 1},
            metadata={"on": "the new activity message only"},
        ),
    ]
    view = assert_matches_client(oracle, events, messages=start)
    assert view is not None
    assert view.messages[2]["content"] == "s+"


def test_pending_interrupts_follow_the_last_finished_run(oracle: Oracle) -> None:
    interrupted = event(
        "RUN_FINISHED",
        threadId="t",
        runId="r1",
        outcome={
            "type": "interrupt",
            "interrupts": [{"id": "i", "reason": "approval", "subagentRunId": None}],
        },
    )
    run = [event("RUN_STARTED", threadId="t", runId="r1"), interrupted]
    view = assert_matches_client(oracle, run)
    assert view is not None
    assert view.pending_interrupts == [{"id": "i", "reason": "approval"}]
    # A run that errors leaves them; one that finishes clears them.
    errored = [
        *run,
        event("RUN_STARTED", threadId="t", runId="r2"),
        event("RUN_ERROR", message="x"),
    ]
    view = assert_matches_client(oracle, errored)
    assert view is not None and view.pending_interrupts
    cleared = [
        *errored,
        event("RUN_STARTED", threadId="t", runId="r3"),
        event("RUN_FINISHED", threadId="t", runId="r3"),
    ]
    view = assert_matches_client(oracle, cleared)
    assert view is not None and view.pending_interrupts == []


@pytest.mark.parametrize("snapshot", [None, False, 0, "", [], {}, [1, {"a": None}]])
def test_a_state_snapshot_replaces_the_state_with_any_json_value(
    oracle: Oracle, snapshot: Any
) -> None:
    events = [
        event("STATE_SNAPSHOT", snapshot=snapshot),
        event("STATE_DELTA", delta=[{"op": "add", "path": "/0", "value": "x"}]),
    ]
    assert_matches_client(oracle, events, state={"before": True})


def test_a_failing_state_patch_leaves_the_state_unchanged_and_warns(oracle: Oracle) -> None:
    events = [
        event(
            "STATE_DELTA",
            delta=[
                {"op": "add", "path": "/a", "value": 1},
                {"op": "remove", "path": "/missing"},
            ],
        )
    ]
    view = assert_matches_client(oracle, events, state={"keep": 1})
    assert view is not None
    assert view.state == {"keep": 1}
    assert len(view.warnings) == 1


def test_metadata_is_merged_shallowly_onto_the_message_or_the_tool_call(oracle: Oracle) -> None:
    events = [
        event("TEXT_MESSAGE_START", messageId="m", metadata={"a": 1, "n": {"x": 1}}),
        event("TEXT_MESSAGE_END", messageId="m", metadata={"n": {"y": 2}, "b": 2}),
        event(
            "TOOL_CALL_START",
            toolCallId="c",
            toolCallName="f",
            parentMessageId="m",
            metadata={"t": 1},
        ),
        event("TOOL_CALL_END", toolCallId="c", metadata={"t": 2, "u": 3}),
        event("RUN_STARTED", threadId="t", runId="r", metadata={"ignored": True}),
    ]
    view = assert_matches_client(oracle, events)
    assert view is not None
    assert view.messages[0]["metadata"] == {"a": 1, "n": {"y": 2}, "b": 2}
    assert view.messages[0]["toolCalls"][0]["metadata"] == {"t": 2, "u": 3}


def test_run_started_appends_only_the_input_messages_not_already_held(oracle: Oracle) -> None:
    start = [{"id": "u1", "role": "user", "content": "old"}]
    events = [
        event(
            "RUN_STARTED",
            threadId="t",
            runId="r",
            input={
                "threadId": "t",
                "runId": "r",
                "messages": [
                    {"id": "u1", "role": "user", "content": "new"},
                    {"id": "u2", "role": "user", "content": "hi", "subagentRunId": None},
                    {"id": "u2", "role": "user", "content": "dup"},
                ],
                "tools": [],
                "context": [],
            },
        )
    ]
    view = assert_matches_client(oracle, events, messages=start)
    assert view is not None
    assert view.messages == [
        {"id": "u1", "role": "user", "content": "old"},
        {"id": "u2", "role": "user", "content": "hi"},
    ]


def test_activity_snapshots_and_deltas_replace_merge_and_keep_metadata(oracle: Oracle) -> None:
    events = [
        event(
            "ACTIVITY_SNAPSHOT",
            messageId="a",
            activityType="plan",
            content={"n": 1},
            subagentRunId="s1",
            metadata={"k": 1},
        ),
        event(
            "ACTIVITY_SNAPSHOT",
            messageId="a",
            activityType="plan",
            content={"n": 2},
            replace=False,
            metadata={"j": 2},
        ),
        event("ACTIVITY_SNAPSHOT", messageId="a", activityType="search", content={"n": 3}),
        event(
            "ACTIVITY_DELTA",
            messageId="a",
            activityType="plan",
            patch=[{"op": "add", "path": "/m", "value": [1]}],
        ),
        event("ACTIVITY_DELTA", messageId="missing", activityType="plan", patch=[]),
        event("TEXT_MESSAGE_START", messageId="u", role="user"),
        event("ACTIVITY_DELTA", messageId="u", activityType="plan", patch=[]),
        event("ACTIVITY_SNAPSHOT", messageId="u", activityType="plan", content={}, replace=False),
        event("TEXT_MESSAGE_CONTENT", messageId="a", delta="ignored"),
        event("ACTIVITY_SNAPSHOT", messageId="u", activityType="plan", content={"took": "over"}),
    ]
    view = assert_matches_client(oracle, events)
    assert view is not None
    assert view.messages[0] == {
        "id": "a",
        "role": "activity",
        "activityType": "plan",
        "content": {"n": 3, "m": [1]},
        "metadata": {"k": 1, "j": 2},
    }


@pytest.mark.parametrize("types", [None, [], ["plan"], ["search"], [1], "plan", ABSENT])
def test_a_snapshot_deletes_only_the_activity_types_it_declares_it_owns(
    oracle: Oracle, types: Any
) -> None:
    start = [
        {"id": "p", "role": "activity", "activityType": "plan", "content": {}},
        {"id": "s", "role": "activity", "activityType": "search", "content": {}},
        {"id": "u", "role": "user", "content": "hi"},
    ]
    declared = {} if types is ABSENT else {"@ag-ui/client": {"authoritativeActivityTypes": types}}
    for carried in ([], [{"id": "q", "role": "activity", "activityType": "plan", "content": {}}]):
        events = [event("MESSAGES_SNAPSHOT", messages=[start[2], *carried], metadata=declared)]
        assert_matches_client(oracle, events, messages=start)


def test_encrypted_values_attach_to_tool_calls_and_messages_but_not_activity(
    oracle: Oracle,
) -> None:
    start = [
        {
            "id": "u",
            "role": "user",
            "content": "hi",
            "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
            ],
        },
        {
            "id": "a",
            "role": "assistant",
            "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
            ],
        },
        {"id": "x", "role": "activity", "activityType": "plan", "content": {}},
    ]
    events = [
        event("REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId="c1", encryptedValue="e1"),
        event("REASONING_ENCRYPTED_VALUE", subtype="message", entityId="u", encryptedValue="e2"),
        event("REASONING_ENCRYPTED_VALUE", subtype="message", entityId="x", encryptedValue="e3"),
        event("REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId="c9", encryptedValue="e"),
        event("TOOL_CALL_RESULT", messageId="r", toolCallId="c1", content="ok"),
        event("TOOL_CALL_ARGS", toolCallId="c1", delta="{}"),
    ]
    view = assert_matches_client(oracle, events, messages=start)
    assert view is not None
    assert [m["id"] for m in view.messages] == ["u", "a", "r", "x"]


def test_activity_held_twice_is_replaced_and_patched_at_its_first_position_only(
    oracle: Oracle,
) -> None:
    start = [
        {"id": "x", "role": "activity", "activityType": "plan", "content": {"n": 1}},
        {"id": "x", "role": "activity", "activityType": "plan", "content": {"n": 2}},
    ]
    snapshot = {"id": "x", "role": "activity", "activityType": "plan", "content": {"n": 0}}
    for tail in (
        [event("ACTIVITY_SNAPSHOT", messageId="x", activityType="search", content={"s": 1})],
        [
            event(
                "ACTIVITY_DELTA",
                messageId="x",
                activityType="plan",
                metadata={"k": 1},
                patch=[{"op": "add", "path": "/d", "value": 1}],
            )
        ],
        [
            event(
                "ACTIVITY_DELTA",
                messageId="x",
                activityType="plan",
                metadata={"k": 1},
                patch=[{"op": "remove", "path": "/missing"}],
            ),
            event("TEXT_MESSAGE_START", messageId="x"),
        ],
    ):
        events = [event("MESSAGES_SNAPSHOT", messages=[snapshot]), *tail]
        assert_matches_client(oracle, events, messages=start)


@pytest.mark.parametrize(
    "outcome",
    [
        {"type": "interrupt"},
        {"type": "interrupt", "interrupts": [None]},
        {"type": "interrupt", "interrupts": "i1"},
        {"type": "success", "pendingToolCallIds": None},
        {"type": "success", "pendingToolCallIds": []},
        {"type": "weird"},
        "success",
    ],
)
def test_a_run_finished_outcome_the_client_cannot_read_is_an_error_as_in_the_client(
    oracle: Oracle, outcome: Any
) -> None:
    events = [
        event("RUN_STARTED", threadId="t", runId="r"),
        event("RUN_FINISHED", threadId="t", runId="r", outcome=outcome),
    ]
    assert_matches_client(oracle, events)


@pytest.mark.parametrize(
    "patch",
    [
        [{"op": "copy", "from": "/missing", "path": ""}],
        [{"op": "move", "from": "/missing", "path": ""}, {"op": "add", "path": "/a", "value": 1}],
        [{"op": "copy", "from": "/missing", "path": ""}, {"op": "replace", "path": "", "value": 2}],
    ],
)
def test_a_patch_that_leaves_the_client_with_undefined_keeps_the_state_it_shows(
    oracle: Oracle, patch: list[dict[str, Any]]
) -> None:
    # The client's working state becomes undefined, which it never emits: it goes on
    # showing the last state, and the next patch starts from nothing.
    events = [event("STATE_DELTA", delta=patch), event("STATE_DELTA", delta=patch[-1:])]
    assert_matches_client(oracle, events, state={"shown": True})


# --------------------------------------------------------------------------------------
# The API itself
# --------------------------------------------------------------------------------------


def test_the_reducer_never_modifies_the_start_or_the_events_it_was_given() -> None:
    start = [{"id": "m", "role": "assistant", "content": "a", "metadata": {"k": [1]}}]
    state = {"s": [1]}
    snapshot = [{"id": "m", "role": "assistant", "content": "b"}]
    events = [
        event("MESSAGES_SNAPSHOT", messages=snapshot),
        event("TEXT_MESSAGE_CONTENT", messageId="m", delta="c", metadata={"k": [2]}),
        event("STATE_SNAPSHOT", snapshot=state),
    ]
    before = copy.deepcopy((start, state, events))
    reducer = Reducer(start, {"x": 1})
    reducer.feed(events)
    reducer.messages[0]["content"] += "!"
    reducer.state["s"].append(2)
    assert (start, state, events) == before


def test_reset_start_begins_a_run_from_new_messages_and_state() -> None:
    reducer = Reducer()
    reducer.feed(
        [
            event("TEXT_MESSAGE_START", messageId="m"),
            event("TEXT_MESSAGE_CHUNK", messageId="k", delta="open"),
        ]
    )
    reducer.reset_start([{"id": "u", "role": "user", "content": "x"}], [1])
    reducer.feed(
        [
            event("TEXT_MESSAGE_CONTENT", messageId="u", delta="y"),
            event("STATE_DELTA", delta=[{"op": "add", "path": "/-", "value": 2}]),
            # The chunk stream of the run before ended with it: nothing to close here.
            event("RUN_STARTED", threadId="t", runId="r"),
        ]
    )
    assert reducer.messages == [{"id": "u", "role": "user", "content": "xy"}]
    assert reducer.state == [1, 2]
    assert reducer.warnings == []
    same = reducer.messages
    reducer.reset_start(reducer.messages, None)
    assert reducer.messages is same and reducer.state is None


def test_errors_name_the_position_of_the_event_across_feeds() -> None:
    reducer = Reducer()
    reducer.feed([event("RUN_STARTED", threadId="t", runId="r")])
    with pytest.raises(InvalidEventError) as raised:
        reducer.feed([event("STEP_STARTED", stepName="s"), event("TEXT_MESSAGE_CHUNK", delta="x")])
    assert raised.value.index == 2
    assert raised.value.event_type == "TEXT_MESSAGE_CHUNK"
    assert raised.value.path == "$.messageId"
    assert isinstance(raised.value, ValueError)


def test_reduce_events_defaults_to_no_messages_and_an_empty_object_state() -> None:
    view = reduce_events([])
    assert view == ReducedView(messages=[], state={}, pending_interrupts=[], warnings=[])
    assert reduce_events([], state=None).state is None


@pytest.mark.parametrize(
    "chunk",
    [
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": {}, "delta": "hi"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": [1], "role": "assistant", "delta": "hi"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": {}, "toolCallName": "f", "delta": "{}"},
    ],
)
def test_an_object_id_reaches_what_its_own_chunk_opened_as_in_the_client(
    oracle: Oracle, chunk: dict[str, Any]
) -> None:
    # The events transformChunks makes from one chunk share its id object, which JavaScript
    # compares by reference; two events parsed apart never do.
    started = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    assert_matches_client(oracle, [started, chunk])
    assert_matches_client(oracle, [started, chunk, json.loads(json.dumps(chunk))])


@given(
    st.lists(messages(), max_size=5),  # ids may repeat: first match wins
    st.lists(messages(), max_size=3),
    legal_streams(min_runs=1, max_runs=1, max_steps=6),
)
def test_a_run_whose_input_extends_the_list_continues_it_as_a_full_reindex_would(
    base: list[dict[str, Any]], extra: list[dict[str, Any]], events: list[dict[str, Any]]
) -> None:
    # What restore does for an input stored by reference: the reducer's own message objects
    # followed by new ones. Continuing the list must index exactly as starting anew does.
    def run(continued: bool) -> ReducedView:
        start = copy.deepcopy(base)
        reducer = Reducer(start, {"a": 1}, copy=False)
        sent = [*start, *copy.deepcopy(extra)]
        if continued:
            assert reducer.continue_start(sent, {"b": 2})
        else:
            reducer.reset_start(sent, {"b": 2})
        with contextlib.suppress(InvalidEventError):
            reducer.feed(copy.deepcopy(events))
        return reducer.view()

    def plain(view: ReducedView) -> str:
        return json.dumps([view.messages, view.state, view.pending_interrupts, view.warnings])

    assert plain(run(True)) == plain(run(False))


@given(
    st.lists(messages(), max_size=5),  # ids may repeat: first match wins
    st.lists(messages(ids=["n1", "n2", "n3", "u1"]), max_size=3),
    legal_streams(min_runs=1, max_runs=1, max_steps=6),
)
def test_a_run_whose_input_sends_only_new_messages_extends_the_list_as_a_full_reindex_would(
    base: list[dict[str, Any]], sent: list[dict[str, Any]], events: list[dict[str, Any]]
) -> None:
    # What restore does for an input that names its parent and sends what is new: the
    # parent's list followed by the sent messages whose ids it does not hold.
    held = {m["id"] for m in base}
    extra = [m for m in sent if m["id"] not in held]

    def run(extended: bool) -> ReducedView | None:
        start = copy.deepcopy(base)
        reducer = Reducer(start, {"a": 1}, copy=False)
        added = copy.deepcopy(extra)
        if extended:
            if not reducer.extend_start(added, {"b": 2}):
                return None
        else:
            reducer.reset_start([*start, *added], {"b": 2})
        with contextlib.suppress(InvalidEventError):
            reducer.feed(copy.deepcopy(events))
        return reducer.view()

    def plain(view: ReducedView | None) -> str:
        assert view is not None
        return json.dumps([view.messages, view.state, view.pending_interrupts, view.warnings])

    extended = run(True)
    note(f"extended: {extended is not None}")
    if len({m["id"] for m in extra}) == len(extra):  # new ids, none twice: always taken
        assert plain(extended) == plain(run(False))
    else:
        assert extended is None


def test_extending_the_list_refuses_a_held_id_an_id_sent_twice_and_a_copying_reducer() -> None:
    own = [{"id": "a", "role": "user", "content": "hi"}]
    reducer = Reducer(own, {}, copy=False)
    assert not reducer.extend_start([{"id": "a", "role": "user", "content": "again"}], {})
    twice = [{"id": "b", "role": "user", "content": "x"}, {"id": "b", "role": "user"}]
    assert not reducer.extend_start(twice, {})
    assert not reducer.extend_start(["not a message"], {})
    assert not reducer.extend_start(None, {})
    assert reducer.messages == own and reducer.messages is own
    assert not Reducer(own, {}).extend_start([{"id": "c", "role": "user"}], {})
    assert reducer.extend_start([{"id": "c", "role": "user", "content": "new"}], {"s": 1})
    assert [m["id"] for m in reducer.messages] == ["a", "c"] and reducer.state == {"s": 1}
    assert reducer.holds_id("c") and reducer.first_position("c") == 1


#: The events that can move a message: a new list, an insert, a position given a new object.
_MOVERS = {"MESSAGES_SNAPSHOT", "TOOL_CALL_RESULT", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA"}


@given(
    st.lists(messages(), max_size=5),
    st.lists(
        st.tuples(
            legal_streams(min_runs=1, max_runs=1, max_steps=8),
            st.none() | st.sampled_from(["c1", "c2", "c3"]),  # a late result for the list's
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_the_unmoved_prefix_it_reports_holds_the_same_objects_as_before(
    base: list[dict[str, Any]], runs: list[tuple[list[dict[str, Any]], str | None]]
) -> None:
    # A caller shares what did not move (chunks, digests) on the strength of this count.
    reducer = Reducer(copy.deepcopy(base), {}, copy=False)
    assert reducer.take_unmoved() == 0  # a new list: nothing stood before it
    for events, late_call in runs:
        if late_call is not None:
            late = {"type": "TOOL_CALL_RESULT", "messageId": "late", "toolCallId": late_call}
            events = [events[0], {**late, "content": "x"}, *events[1:]]
        before = list(reducer.messages)
        with contextlib.suppress(InvalidEventError):
            reducer.feed(copy.deepcopy(events))
        unmoved = reducer.take_unmoved()
        after = reducer.messages
        assert unmoved <= min(len(before), len(after))
        assert all(after[i] is before[i] for i in range(unmoved))
        if not {ev["type"] for ev in events} & _MOVERS:
            assert unmoved == len(before)  # a run that only appends moves nothing


def test_a_late_tool_result_moves_the_positions_from_where_it_lands() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    start = [
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "u1", "role": "user", "content": "next"},
    ]
    reducer = Reducer(start, {}, copy=False)
    reducer.take_unmoved()
    late = {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1", "content": "x"}
    reducer.feed([late])
    assert [m["id"] for m in reducer.messages] == ["a1", "r1", "u1"]
    assert reducer.take_unmoved() == 1
    assert reducer.take_unmoved() == 3  # counted anew from the list as it is now


def test_an_input_that_is_not_the_list_and_new_messages_is_left_to_a_full_start() -> None:
    own = [{"id": "a", "role": "user", "content": "hi"}]
    reducer = Reducer(own, {}, copy=False)
    assert not reducer.continue_start([{"id": "a", "role": "user", "content": "hi"}], {})
    assert not reducer.continue_start([own[0], own[0]], {})  # one object at two places
    assert not reducer.continue_start([own[0], "not a message"], {})
    assert not reducer.continue_start(None, {})
    assert reducer.messages == own and reducer.messages is own
