"""Small AG-UI streams written by hand: a run around some events, a text message."""

from __future__ import annotations

import json
from typing import Any


def run(
    thread: str, run_id: str, *body: dict[str, Any], finish: bool = True, **started: Any
) -> list[dict[str, Any]]:
    """A run of ``thread``: RUN_STARTED (with ``started``'s fields), ``body``, RUN_FINISHED."""
    events = [{"type": "RUN_STARTED", "threadId": thread, "runId": run_id, **started}, *body]
    if finish:
        events.append({"type": "RUN_FINISHED", "threadId": thread, "runId": run_id})
    return events


def say(message_id: str, text: str, role: str | None = None) -> list[dict[str, Any]]:
    """A text message: its start, one content event and its end."""
    start: dict[str, Any] = {"type": "TEXT_MESSAGE_START", "messageId": message_id}
    if role:
        start["role"] = role
    return [
        start,
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def tool_result(call_id: str, result_id: str, content: str, *, name: str = "lookup",
                arguments: str = "{}") -> list[dict[str, Any]]:
    """A tool call (``name`` with ``arguments``) and its result, message ``result_id``."""
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name,
         "parentMessageId": f"{call_id}-a"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
        {"type": "TOOL_CALL_RESULT", "messageId": result_id, "toolCallId": call_id,
         "content": content},
    ]


def talk(run_id: str, words: int, thread: str = "t", **started: Any) -> list[dict[str, Any]]:
    """A run of ``thread`` with one assistant message streamed a word (``w0 w1 ...``) a
    content event: ``words`` + 4 events."""
    mid = f"m-{run_id}"
    deltas = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"w{i} "}
              for i in range(words)]
    return run(thread, run_id,
               {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}, *deltas,
               {"type": "TEXT_MESSAGE_END", "messageId": mid}, **started)


def http_agent_turns(store: Any, n: int, thread: str = "t") -> list[dict[str, Any]]:
    """n runs, each sent as HttpAgent sends them: the whole history plus a new user turn."""
    inputs = []
    history: list[dict[str, Any]] = []
    for i in range(n):
        user = {"id": f"u{i}", "role": "user", "content": f"question {i} " * 20}
        run_input = {
            "threadId": thread,
            "runId": f"r{i}",
            "messages": [*history, user],
            "state": {"turn": i},
            "tools": [],
            "context": [],
        }
        store.append(run(thread, f"r{i}", *say(f"a{i}", f"answer {i} " * 20)), input=run_input)
        inputs.append(run_input)
        history = store.checkout(f"r{i}").messages
    return inputs


def http_agent_body(
    run_id: str, held: list[dict[str, Any]], state: Any = None, thread: str = "t"
) -> dict[str, Any]:
    """What HttpAgent.prepareRunAgentInput sends: its messages without activity ones, its
    state, no parentRunId."""
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": run_id,
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [m for m in json.loads(json.dumps(held)) if m.get("role") != "activity"],
    }
    if state is not None:
        body["state"] = state
    return body


def reply(
    run_id: str, message_id: str, text: str, *extra: dict[str, Any], thread: str = "t"
) -> list[dict[str, Any]]:
    """A run of ``thread`` that says one assistant message, after ``extra`` events."""
    return run(thread, run_id, *extra, *say(message_id, text, "assistant"))
