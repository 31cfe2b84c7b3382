"""Write ``tests/data/v1.sqlite``: a store file written by agui-store at schema version 1, kept so
that every later version is proven to open, migrate and read it back unchanged, and
``v1.expected.json``: what that version read back from the file (runs, events, inputs,
branches, and each run's checkout), which newer code must still read.

    python tests/data/make_v1_fixture.py --from-git e2bf1fe [--out DIR]

The file must be written by schema version 1 code: ``--from-git REV`` (default e2bf1fe, the
last commit whose schema is version 1) runs this script on that revision's ``agui_store``.
The writing is ``tests/data/fixtures.py``'s; this script is what the file holds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: tests.data.fixtures from the repository
    sys.path.append(str(Path(__file__).resolve().parents[2]))

from tests.data.fixtures import Fixture, finished, main, read_back_v1, say, started

USER = {"id": "u1", "role": "user", "content": "What is 20 °C in Fahrenheit?"}
TOOLS = [
    {
        "name": "convert",
        "description": "unit conversion",
        "parameters": {"type": "object", "properties": {"celsius": {"type": "number"}}},
    }
]


def record(store: Any) -> None:
    """Everything the fixture holds, in the order it is appended."""
    chat = "chat"
    store.append(
        [
            started(chat, "r1"),
            *say("a1", "Let me ", "convert that."),
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c1",
                "toolCallName": "convert",
                "parentMessageId": "a1",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"celsius":'},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "20}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "68"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"unit": "F", "history": [20]}},
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/history/-", "value": 68}]},
            finished(chat, "r1", result={"fahrenheit": 68}),
        ],
        input={
            "threadId": chat,
            "runId": "r1",
            "messages": [USER],
            "state": {},
            "tools": TOOLS,
            "context": [],
            "forwardedProps": {},
        },
    )
    store.append(
        [
            started(chat, "r2"),
            *say("a2", "20 °C is 68 °F 🙂"),
            {"type": "CUSTOM", "name": "x-vendor", "value": {"kept": [1, 2.5, None]}},
            {"type": "FUTURE_EVENT_TYPE", "payload": {"from": "a newer protocol"}},
            finished(
                chat,
                "r2",
                outcome={
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "approval", "message": "Send it?"}],
                },
            ),
        ]
    )
    # A fork from r1 (parentRunId), on a branch; a late failure after it finished.
    store.append(
        [
            started(chat, "r3", parentRunId="r1"),
            {"type": "THINKING_START"},
            {"type": "THINKING_TEXT_MESSAGE_START"},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "retry in Kelvin"},
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_END"},
            *say("a3", "293.15 K"),
            finished(chat, "r3"),
        ],
        branch="retry",
    )
    store.append([{"type": "RUN_ERROR", "message": "late failure", "code": "LATE"}], thread_id=chat)
    store.branch("first", "r1", thread_id=chat)
    # A live run, streamed in three appends and never finished.
    store.append(
        [
            started(chat, "r4"),
            {"type": "TEXT_MESSAGE_START", "messageId": "a4", "role": "assistant"},
        ]
    )
    store.append(
        [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "a4", "delta": "Still "}], thread_id=chat
    )
    store.append(
        [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "a4", "delta": "typing"}], thread_id=chat
    )
    # Another thread: a run that failed before it started, then a snapshot-only run, then a
    # buggy producer's stream recorded as it was.
    other = "other"
    store.append([{"type": "RUN_ERROR", "message": "no credentials"}], thread_id=other)
    store.append(
        [
            started(other, "o1"),
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [
                    {"id": "s1", "role": "system", "content": "Be brief."},
                    {"id": "u9", "role": "user", "content": "hi"},
                    {"id": "a9", "role": "assistant", "content": "hello"},
                ],
            },
            finished(other, "o1", outcome={"type": "cancelled"}),
        ]
    )
    store.append(
        [
            started(other, "o2"),
            {"type": "TEXT_MESSAGE_END", "messageId": "never"},
            finished(other, "o2"),
        ],
        check_sequence=False,
    )


FIXTURE = Fixture(
    version=1,
    last_commit="e2bf1fe",
    record=record,
    read_back=read_back_v1,
    script=__file__,
)

if __name__ == "__main__":
    sys.exit(main(FIXTURE, __doc__ or ""))
