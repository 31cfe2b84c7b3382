"""Hypothesis strategies for AG-UI values and *legal* AG-UI event streams.

A legal stream is one the official ``verifyEvents`` 1.0.0 accepts: every run starts with
RUN_STARTED, text messages / tool calls / steps / reasoning are opened before they continue
and closed before RUN_FINISHED (RUN_ERROR may cut them off). Within that, the generator goes
for the corners upstream handles specially: id reuse across runs, interleaved text and tool
streams, parallel tool calls, patches that fail, MESSAGES_SNAPSHOT mid-message, activity
messages, reasoning, chunk events, interrupts, and RUN_ERROR after RUN_FINISHED.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

SAFE_INT = 2**53 - 1  # JSON numbers the JS client reads back exactly

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-SAFE_INT, max_value=SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False, width=64)
    | st.text(max_size=12)
)
json_keys = st.text(min_size=1, max_size=6)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_keys, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(json_keys, json_values, max_size=4)

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
IDS = ["m1", "m2", "m3", "t1", "t2", "a1"]
TOOL_IDS = ["c1", "c2", "c3"]
STATE_KEYS = ["a", "b", "list"]


@st.composite
def messages(draw: st.DrawFn, ids: list[str] | None = None) -> dict[str, Any]:
    """One AG-UI message (user, assistant with tool calls, tool, system, developer)."""
    mid = draw(st.sampled_from(ids or ["u1", "u2", "u3", "x1", "m1"]))
    role = draw(st.sampled_from(["user", "assistant", "tool", "system", "developer"]))
    msg: dict[str, Any] = {"id": mid, "role": role}
    if role == "assistant":
        if draw(st.booleans()):
            msg["content"] = draw(TEXT)
        if draw(st.booleans()):
            msg["toolCalls"] = [
                {
                    "id": draw(st.sampled_from(TOOL_IDS)),
                    "type": "function",
                    "function": {"name": draw(st.sampled_from(["f", "g"])), "arguments": "{}"},
                }
            ]
    elif role == "tool":
        msg["content"] = draw(TEXT)
        msg["toolCallId"] = draw(st.sampled_from(TOOL_IDS))
    else:
        msg["content"] = draw(TEXT)
    return msg


message_lists = st.lists(messages(), max_size=4, unique_by=lambda m: m["id"])


def _patch_ops() -> st.SearchStrategy[dict[str, Any]]:
    path = st.sampled_from(["/a", "/b", "/list", "/list/0", "/list/-", "/a/x", "/missing/deep"])
    return st.one_of(
        st.builds(lambda p, v: {"op": "add", "path": p, "value": v}, path, json_values),
        st.builds(lambda p, v: {"op": "replace", "path": p, "value": v}, path, json_values),
        st.builds(lambda p: {"op": "remove", "path": p}, path),
        st.builds(lambda p, v: {"op": "test", "path": p, "value": v}, path, json_scalars),
        st.builds(lambda f, p: {"op": "copy", "from": f, "path": p}, path, path),
        st.builds(lambda f, p: {"op": "move", "from": f, "path": p}, path, path),
    )


patches = st.lists(_patch_ops(), min_size=1, max_size=3)


@st.composite
def _run_body(
    draw: st.DrawFn, *, chunks: bool, max_steps: int
) -> tuple[list[dict[str, Any]], bool]:
    """Events inside one run, and whether everything was closed at the end."""
    events: list[dict[str, Any]] = []
    open_text: list[str] = []
    open_tools: list[str] = []
    open_steps: list[str] = []
    open_reasoning: list[str] = []
    started_tools: list[str] = []
    for _ in range(draw(st.integers(0, max_steps))):
        free_text = [i for i in IDS if i not in open_text]
        free_tools = [i for i in TOOL_IDS if i not in open_tools]
        choices = ["text_start", "state", "custom", "step", "messages_snapshot", "activity"]
        if free_text:
            choices += ["text_start"]
        if open_text:
            choices += ["text_content", "text_content", "text_end"]
        if free_tools:
            choices += ["tool_start"]
        if open_tools:
            choices += ["tool_args", "tool_end"]
        if started_tools:
            choices += ["tool_result"]
        if open_steps:
            choices += ["step_end"]
        choices += ["reasoning"]
        if open_reasoning:
            choices += ["reasoning_content", "reasoning_end"]
        if chunks and not open_text and not open_tools:
            choices += ["text_chunk", "tool_chunk"]
        kind = draw(st.sampled_from(choices))
        if kind == "text_start":
            if not free_text:
                continue
            mid = draw(st.sampled_from(free_text))
            ev: dict[str, Any] = {"type": "TEXT_MESSAGE_START", "messageId": mid}
            role = draw(st.sampled_from([None, "assistant", "user", "system", "developer"]))
            if role:
                ev["role"] = role
            if draw(st.integers(0, 4)) == 0:
                ev["metadata"] = draw(json_objects)
            events.append(ev)
            open_text.append(mid)
        elif kind == "text_content":
            mid = draw(st.sampled_from(open_text))
            events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": draw(TEXT)})
        elif kind == "text_end":
            mid = draw(st.sampled_from(open_text))
            open_text.remove(mid)
            events.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
        elif kind == "tool_start":
            tid = draw(st.sampled_from(free_tools))
            ev = {
                "type": "TOOL_CALL_START",
                "toolCallId": tid,
                "toolCallName": draw(st.sampled_from(["f", "g"])),
            }
            parent = draw(st.sampled_from([None, *IDS]))
            if parent:
                ev["parentMessageId"] = parent
            events.append(ev)
            open_tools.append(tid)
            started_tools.append(tid)
        elif kind == "tool_args":
            tid = draw(st.sampled_from(open_tools))
            events.append(
                {
                    "type": "TOOL_CALL_ARGS",
                    "toolCallId": tid,
                    "delta": draw(st.sampled_from(['{"q":', '"x"', "}", "", "1"])),
                }
            )
        elif kind == "tool_end":
            tid = draw(st.sampled_from(open_tools))
            open_tools.remove(tid)
            events.append({"type": "TOOL_CALL_END", "toolCallId": tid})
        elif kind == "tool_result":
            tid = draw(st.sampled_from(started_tools))
            events.append(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": draw(st.sampled_from(["r1", "r2", tid])),
                    "toolCallId": tid,
                    "content": draw(TEXT),
                }
            )
        elif kind == "state":
            if draw(st.booleans()):
                events.append(
                    {"type": "STATE_SNAPSHOT", "snapshot": draw(json_objects | json_values)}
                )
            else:
                events.append({"type": "STATE_DELTA", "delta": draw(patches)})
        elif kind == "custom":
            if draw(st.booleans()):
                events.append({"type": "CUSTOM", "name": draw(TEXT), "value": draw(json_values)})
            else:
                events.append({"type": "RAW", "event": draw(json_values)})
        elif kind == "step":
            name = draw(st.sampled_from(["s1", "s2"]))
            if name in open_steps:
                continue
            open_steps.append(name)
            events.append({"type": "STEP_STARTED", "stepName": name})
        elif kind == "step_end":
            name = draw(st.sampled_from(open_steps))
            open_steps.remove(name)
            events.append({"type": "STEP_FINISHED", "stepName": name})
        elif kind == "messages_snapshot":
            events.append({"type": "MESSAGES_SNAPSHOT", "messages": draw(message_lists)})
        elif kind == "activity":
            aid = draw(st.sampled_from(["act1", "act2", "m1"]))
            if draw(st.booleans()):
                ev = {
                    "type": "ACTIVITY_SNAPSHOT",
                    "messageId": aid,
                    "activityType": "plan",
                    "content": draw(json_objects),
                }
                if draw(st.booleans()):
                    ev["replace"] = draw(st.booleans())
                events.append(ev)
            else:
                events.append(
                    {
                        "type": "ACTIVITY_DELTA",
                        "messageId": aid,
                        "activityType": "plan",
                        "patch": draw(patches),
                    }
                )
        elif kind == "reasoning":
            rid = draw(st.sampled_from(["rs1", "rs2"]))
            if rid in open_reasoning:
                continue
            open_reasoning.append(rid)
            events.append(
                {"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"}
            )
        elif kind == "reasoning_content":
            rid = draw(st.sampled_from(open_reasoning))
            events.append(
                {"type": "REASONING_MESSAGE_CONTENT", "messageId": rid, "delta": draw(TEXT)}
            )
        elif kind == "reasoning_end":
            rid = draw(st.sampled_from(open_reasoning))
            open_reasoning.remove(rid)
            events.append({"type": "REASONING_MESSAGE_END", "messageId": rid})
        elif kind == "text_chunk":
            mid = draw(st.sampled_from(IDS))
            for i in range(draw(st.integers(1, 3))):
                ev = {"type": "TEXT_MESSAGE_CHUNK", "messageId": mid, "delta": draw(TEXT)}
                if i == 0 and draw(st.booleans()):
                    ev["role"] = "assistant"
                events.append(ev)
        elif kind == "tool_chunk":
            tid = draw(st.sampled_from(TOOL_IDS))
            events.append(
                {"type": "TOOL_CALL_CHUNK", "toolCallId": tid, "toolCallName": "f", "delta": "{"}
            )
            events.append({"type": "TOOL_CALL_CHUNK", "toolCallId": tid, "delta": "}"})
            started_tools.append(tid)
    closed = draw(st.booleans())
    if closed:
        # Close everything so that RUN_FINISHED is legal, in a drawn order.
        closers: list[dict[str, Any]] = (
            [{"type": "TEXT_MESSAGE_END", "messageId": m} for m in open_text]
            + [{"type": "TOOL_CALL_END", "toolCallId": t} for t in open_tools]
            + [{"type": "STEP_FINISHED", "stepName": s} for s in open_steps]
            + [{"type": "REASONING_MESSAGE_END", "messageId": r} for r in open_reasoning]
        )
        events.extend(draw(st.permutations(closers)))
    return events, closed


@st.composite
def legal_streams(
    draw: st.DrawFn,
    *,
    thread_id: str = "t",
    min_runs: int = 1,
    max_runs: int = 3,
    max_steps: int = 12,
    chunks: bool = True,
    run_ids: list[str] | None = None,
) -> list[dict[str, Any]]:
    """A whole legal stream of one or more runs in one thread."""
    out: list[dict[str, Any]] = []
    n_runs = draw(st.integers(min_runs, max_runs))
    for i in range(n_runs):
        run_id = run_ids[i] if run_ids else f"r{i}"
        started: dict[str, Any] = {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}
        if draw(st.integers(0, 3)) == 0:
            started["input"] = {
                "threadId": thread_id,
                "runId": run_id,
                "messages": draw(message_lists),
                "tools": [],
                "context": [],
            }
        out.append(started)
        body, closed = draw(_run_body(chunks=chunks, max_steps=max_steps))
        out.extend(body)
        if closed and draw(st.integers(0, 5)) > 0:
            finished: dict[str, Any] = {
                "type": "RUN_FINISHED",
                "threadId": thread_id,
                "runId": run_id,
            }
            outcome = draw(st.sampled_from([None, "success", "interrupt", "cancelled"]))
            if outcome == "interrupt":
                finished["outcome"] = {
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "approval", "message": draw(TEXT)}],
                }
            elif outcome:
                finished["outcome"] = {"type": outcome}
            out.append(finished)
            if draw(st.integers(0, 6)) == 0:
                out.append({"type": "RUN_ERROR", "message": "late failure"})
        elif i < n_runs - 1 or draw(st.booleans()):
            out.append({"type": "RUN_ERROR", "message": draw(TEXT), "code": "E"})
    return out
