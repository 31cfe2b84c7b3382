"""A small, realistic conversation with a branch, recorded the way a live server would.

Two runs of a weather assistant (a backend tool call, state deltas, a follow-up), then a
time-travel branch: the user goes back to the first answer and asks something else. Each run
is appended with the ``RunAgentInput`` the client sent, as ``HttpAgent`` sends it. The two
branches are named (``porto`` and ``fahrenheit``) and differ, so that ``diff porto fahrenheit``
has something to show on each side.
"""

from __future__ import annotations

import uuid
from typing import Any

from agui_store.store import Store


def _text(message_id: str, text: str) -> list[dict[str, Any]]:
    words = text.split(" ")
    deltas = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": d} for d in deltas),
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def _tool(call_id: str, parent: str, name: str, args: str, result: str) -> list[dict[str, Any]]:
    half = len(args) // 2
    return [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": name,
            "parentMessageId": parent,
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args[:half]},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args[half:]},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{call_id}-result",
            "toolCallId": call_id,
            "content": result,
            "role": "tool",
        },
    ]


TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def record_demo(store: Store) -> tuple[str, list[str]]:
    """Record the demo conversation in a new thread; returns (thread_id, run ids)."""
    thread = f"demo-{uuid.uuid4().hex[:8]}"
    user1 = {"id": "user-1", "role": "user", "content": "What's the weather in Lisbon?"}
    state0 = {"units": "celsius", "cities": []}

    run1: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "run-1"},
        {"type": "STEP_STARTED", "stepName": "plan"},
        *_tool(
            "call-1",
            "assistant-1",
            "get_weather",
            '{"city": "Lisbon"}',
            '{"temp": 21, "sky": "sunny"}',
        ),
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/cities/-", "value": "Lisbon"}]},
        {"type": "STEP_FINISHED", "stepName": "plan"},
        *_text("assistant-2", "It is 21°C and sunny in Lisbon right now."),
        {"type": "RUN_FINISHED", "threadId": thread, "runId": "run-1"},
    ]
    store.append(
        run1,
        input={
            "threadId": thread,
            "runId": "run-1",
            "messages": [user1],
            "state": state0,
            "tools": TOOLS,
            "context": [],
        },
    )

    after1 = store.checkout("run-1", thread_id=thread)
    user2 = {"id": "user-2", "role": "user", "content": "And in Porto?"}
    run2: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "run-2"},
        *_tool(
            "call-2",
            "assistant-3",
            "get_weather",
            '{"city": "Porto"}',
            '{"temp": 17, "sky": "cloudy"}',
        ),
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/cities/-", "value": "Porto"}]},
        *_text("assistant-4", "Porto is cooler: 17°C and cloudy."),
        {"type": "RUN_FINISHED", "threadId": thread, "runId": "run-2"},
    ]
    store.append(
        run2,
        input={
            "threadId": thread,
            "runId": "run-2",
            "parentRunId": "run-1",
            "messages": [*after1.messages, user2],
            "state": after1.state,
            "tools": TOOLS,
            "context": [],
        },
    )

    # Time travel: back to the first answer, ask something else instead of "And in Porto?".
    store.branch("fahrenheit", "run-1", thread_id=thread)
    fork = store.fork("fahrenheit", thread_id=thread, run_id="run-3")
    fork["messages"].append(
        {"id": "user-3", "role": "user", "content": "Can you give me that in Fahrenheit?"}
    )
    run3: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "run-3"},
        {
            "type": "STATE_DELTA",
            "delta": [{"op": "replace", "path": "/units", "value": "fahrenheit"}],
        },
        *_text("assistant-5", "Sure: 21°C is about 70°F in Lisbon."),
        {"type": "RUN_FINISHED", "threadId": thread, "runId": "run-3"},
    ]
    store.append(run3, input=fork)
    # The side the user left gets a name too: two named branches, one on each side of run-1.
    store.branch("porto", "run-2", thread_id=thread)
    store.branch("fahrenheit", "run-3", thread_id=thread)
    return thread, ["run-1", "run-2", "run-3"]
