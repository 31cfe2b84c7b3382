"""Write ``tests/data/v9.sqlite``: a store file written by agui-store at schema version 9, kept so
that the versions after it are proven to migrate it on open and read it back unchanged, and
``v9.expected.json``: every public read of it by version 9 (``fixtures.read_back_v9``).

It holds what version 9 can hold, in three threads:

- ``help``, owned by ``alice`` (``scope=``): a client that resends its whole history with every
  run (HttpAgent: request bodies, no ``parentRunId``, no echo) through a tool call, a state
  snapshot and deltas, reasoning (with an encrypted value), activity, steps and an interrupt;
  a fresh client whose body edits the first message (it restores as exactly its own
  messages: docs/design/behaviour.md#restoring); branches on the runs before and after
  that edit; and a fork of an earlier run
  on a branch of its own.
- ``ops``, owned by nobody: a RUN_ERROR-only (synthetic) run, two runs streamed interleaved
  (``run_id=``), a late RUN_ERROR after one of them finished, a branch, and a live run left
  open with a messages snapshot.
- ``bulk``, owned by ``bob``, written by a store with ``derive_on_append=False`` and never
  derived: its last complete runs have no lineage digest and no checkpoint in the file (the
  first was derived when the second's lineage needed it); the second run's producer echoes
  its request in ``RUN_STARTED.input``.

Every run has a hash.

    python tests/data/make_v9_fixture.py --from-git REV [--out DIR]

``--from-git REV`` (default 6906989, this script's commit, whose schema is version 9) runs it on
that revision's ``agui_store``. The writing is ``tests/data/fixtures.py``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: tests.data.fixtures from the repository
    sys.path.append(str(Path(__file__).resolve().parents[2]))

from tests.data.fixtures import Fixture, finished, main, read_back_v9, say, started

SYSTEM = {"id": "s0", "role": "system", "content": "Answer in one line."}
TOOLS = [
    {
        "name": "weather",
        "description": "today's weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
CONTEXT = [{"description": "locale", "value": "en-GB"}]


def user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def body(
    thread: str, run: str, messages: list[dict[str, Any]], state: Any, **extra: Any
) -> dict[str, Any]:
    """An HttpAgent request body: the whole history the client holds, and its state."""
    return {
        "threadId": thread,
        "runId": run,
        "state": state,
        "messages": messages,
        "tools": TOOLS,
        "context": CONTEXT,
        "forwardedProps": {"model": "scripted"},
        **extra,
    }


def next_body(store: Any, thread: str, run: str, after: str, question: dict[str, Any]) -> Any:
    """What the client sends after run ``after``: what it holds then, and a new question."""
    held = store.checkout(after, thread_id=thread)
    messages = [m for m in held.messages if m.get("role") != "activity"]
    return body(thread, run, [*messages, question], held.state)


def record_help(store: Any) -> None:
    """An owned thread of an HttpAgent client: every run carries the whole history."""
    t, alice = "help", {"scope": "alice"}
    first = body(t, "h1", [SYSTEM, user("u1", "Weather in Paris?")], {})
    store.append(
        [
            started(t, "h1"),
            {"type": "STATE_SNAPSHOT", "snapshot": {"units": "metric", "asked": []}},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c1",
                "toolCallName": "weather",
                "parentMessageId": "a1",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"city":'},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"Paris"}'},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "18 °C"},
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/asked/-", "value": "Paris"}]},
            *say("a1b", "18 °C and ", "sunny ☀"),
            finished(t, "h1", result={"city": "Paris", "celsius": 18}),
        ],
        input=first,
        **alice,
    )
    store.append(
        [
            started(t, "h2"),
            {"type": "REASONING_START", "messageId": "r2"},
            {"type": "REASONING_MESSAGE_START", "messageId": "r2", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r2", "delta": "Paris again: "},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r2", "delta": "use the cache"},
            {"type": "REASONING_MESSAGE_END", "messageId": "r2"},
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": "r2",
                "encryptedValue": "ZW5jcnlwdGVk",
            },
            {"type": "REASONING_END", "messageId": "r2"},
            {
                "type": "STATE_DELTA",
                "delta": [
                    {"op": "add", "path": "/asked/-", "value": "Paris"},
                    {"op": "replace", "path": "/units", "value": "imperial"},
                ],
            },
            *say("a2", "64 °F"),
            finished(t, "h2"),
        ],
        input=next_body(store, t, "h2", "h1", user("u2", "And in Fahrenheit?")),
        **alice,
    )
    store.append(
        [
            started(t, "h3"),
            {"type": "STEP_STARTED", "stepName": "plan"},
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": "act3",
                "activityType": "plan",
                "content": {"steps": ["look up", "book"], "done": 0},
            },
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "act3",
                "activityType": "plan",
                "patch": [{"op": "replace", "path": "/done", "value": 1}],
            },
            {"type": "STEP_FINISHED", "stepName": "plan"},
            *say("a3", "Book the 9:40 train?"),
            finished(
                t,
                "h3",
                outcome={
                    "type": "interrupt",
                    "interrupts": [{"id": "i3", "reason": "approval", "message": "Book it?"}],
                },
            ),
        ],
        input=next_body(store, t, "h3", "h2", user("u3", "Book me a train there.")),
        **alice,
    )
    # A fresh client whose history edits the first question: no parent named, so the body
    # restores as exactly its own messages, never with the head's before them
    # (docs/design/behaviour.md#restoring).
    edited = body(t, "h4", [SYSTEM, user("u1", "Weather in Lyon?")], {"units": "metric"})
    store.append([started(t, "h4"), *say("a4", "21 °C"), finished(t, "h4")], input=edited, **alice)
    store.branch("before-edit", "h3", thread_id=t, **alice)
    store.branch("edited", "h4", thread_id=t, **alice)
    # A fork of h2, the way a client starts one: the input fork() gives, plus a question.
    forked = store.fork("h2", thread_id=t, run_id="h5", **alice)
    forked["messages"].append(user("u5", "And in Kelvin?"))
    store.append(
        [started(t, "h5", parentRunId="h2"), *say("a5", "291 K"), finished(t, "h5")],
        input=forked,
        branch="retry",
        **alice,
    )


def record_ops(store: Any) -> None:
    """An unowned thread: interleaved runs, a failure with no run, a live run."""
    t = "ops"
    # A run that failed before it started: the store names it (a synthetic run).
    store.append([{"type": "RUN_ERROR", "message": "quota exceeded", "code": "QUOTA"}], thread_id=t)
    store.append([started(t, "p1"), *say("m1", "Indexing")[:2]])
    store.append([started(t, "p2"), {"type": "TEXT_MESSAGE_START", "messageId": "m2"}])
    store.append(
        [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "Sending"}],
        thread_id=t,
        run_id="p2",
    )
    store.append(
        [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " 40%"},
            {"type": "CUSTOM", "name": "progress", "value": {"done": 0.4}},
        ],
        thread_id=t,
        run_id="p1",
    )
    store.append([{"type": "TEXT_MESSAGE_END", "messageId": "m2"}, finished(t, "p2")], run_id="p2")
    store.append(
        [
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RAW", "event": {"vendor": "x", "n": [1, 2.5, None]}, "source": "x"},
            finished(t, "p1", result={"indexed": 40}),
        ],
        thread_id=t,
        run_id="p1",
    )
    store.branch("pinned", "p1", thread_id=t)
    # A late failure, after the run it names had finished.
    store.append([{"type": "RUN_ERROR", "message": "hook failed"}], thread_id=t, run_id="p2")
    store.append(
        [
            started(t, "p3"),
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [
                    user("q1", "status?"),
                    {"id": "m3", "role": "assistant", "content": "checking"},
                ],
            },
            {"type": "TEXT_MESSAGE_START", "messageId": "m4", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m4", "delta": "Still "},
        ]
    )
    store.append(
        [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m4", "delta": "running"}], thread_id=t
    )


def record_bulk(path: str) -> None:
    """A thread of another owner, appended with ``derive_on_append=False`` and left so."""
    import agui_store

    t, bob = "bulk", {"scope": "bob"}
    with agui_store.open(path, derive_on_append=False) as store:
        history = [user("v1", "Summarise the report.")]
        store.append(
            [started(t, "b1"), *say("w1", "It is long."), finished(t, "b1")],
            input=body(t, "b1", history, {"pages": 1}),
            **bob,
        )
        history += [{"id": "w1", "role": "assistant", "content": "It is long."}]
        history += [user("v2", "Shorter?")]
        second = body(t, "b2", history, {"pages": 1})
        store.append(
            [
                started(t, "b2", input=second),  # the producer echoes the request
                {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/pages", "value": 2}]},
                *say("w2", "Long."),
                finished(t, "b2"),
            ],
            input=second,
            **bob,
        )
        store.append([started(t, "b3"), *say("w3", "Done."), finished(t, "b3")], **bob)


def record(store: Any) -> None:
    """Everything the fixture holds, in the order it is appended."""
    record_help(store)
    record_ops(store)
    record_bulk(store.path)


FIXTURE = Fixture(
    version=9,
    last_commit="6906989",
    record=record,
    read_back=read_back_v9,
    script=__file__,
)

if __name__ == "__main__":
    sys.exit(main(FIXTURE, __doc__ or ""))
