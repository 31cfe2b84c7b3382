"""Write ``tests/data/v1.sqlite``: a store file written by agui-store at schema version 1, kept so
that every later version is proven to open, migrate and read it back unchanged.

(``.sqlite``, not ``.db``: the repository ignores ``*.db`` files.) It also writes
``v1.expected.json``: what that version read back from the file (runs, events,
inputs, branches, and each run's checkout), which newer code must still read.

    python tests/data/make_v1_fixture.py                  # with the checkout's agui_store
    python tests/data/make_v1_fixture.py --from-git e2bf1fe

The file must be written by schema version 1 code. When the importable ``agui_store`` is newer,
``--from-git REV`` (default: e2bf1fe, the last commit whose schema is version 1) extracts that
revision's ``agui_store`` package with ``git archive`` into a temporary folder and runs this
script again on it. Regenerate only on purpose: the point of the fixture is that it is old.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DB = HERE / "v1.sqlite"
EXPECTED = HERE / "v1.expected.json"
LAST_V1_COMMIT = "e2bf1fe"

USER = {"id": "u1", "role": "user", "content": "What is 20 °C in Fahrenheit?"}
TOOLS = [
    {
        "name": "convert",
        "description": "unit conversion",
        "parameters": {"type": "object", "properties": {"celsius": {"type": "number"}}},
    }
]


def started(thread: str, run: str, **extra: Any) -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": thread, "runId": run, **extra}


def finished(thread: str, run: str, **extra: Any) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": thread, "runId": run, **extra}


def say(message_id: str, *parts: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        *[{"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": p} for p in parts],
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
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


def read_back(store: Any) -> dict[str, Any]:
    """What a version of agui-store reads from the file: compared as JSON."""
    out: dict[str, Any] = {"threads": store.threads(), "runs": {}, "branches": {}}
    for thread in store.threads():
        out["branches"][thread] = [
            {"name": b.name, "run": b.run_id, "default": b.default} for b in store.branches(thread)
        ]
        for run in store.runs(thread):
            co = store.checkout(run.run_id, thread_id=thread)
            out["runs"][f"{thread}/{run.run_id}"] = {
                "parent": run.parent_run_id,
                "lineage": run.lineage,
                "status": run.status,
                "event_count": run.event_count,
                "synthetic": run.synthetic,
                "has_input": run.has_input,
                "sent_parent": run.sent_parent_run_id,
                "branches": list(run.branches),
                "log": [r.run_id for r in store.log(run.run_id, thread_id=thread)],
                "events": store.events(run.run_id, thread_id=thread),
                "input": store.input(run.run_id, thread_id=thread),
                "checkout": {
                    "messages": co.messages,
                    "state": co.state,
                    "interrupts": co.interrupts,
                },
            }
    return json.loads(json.dumps(out))


def write(db: Path, expected: Path) -> None:
    import apsw

    import agui_store
    from agui_store import schema

    if schema.SCHEMA_VERSION != 1:
        raise SystemExit(
            f"this agui_store writes schema version {schema.SCHEMA_VERSION}; "
            "run with --from-git to use version 1 code"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with agui_store.open(db) as store:
        record(store)
        found = read_back(store)
    conn = apsw.Connection(str(db))  # the last connection: fold the WAL into the file
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()
    expected.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {db} ({db.stat().st_size} bytes, schema version 1) and {expected.name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--from-git",
        nargs="?",
        const=LAST_V1_COMMIT,
        metavar="REV",
        help=f"use agui_store as of this revision (default {LAST_V1_COMMIT})",
    )
    args = parser.parse_args()
    if args.from_git:
        with tempfile.TemporaryDirectory() as folder:
            archive = subprocess.run(
                ["git", "archive", args.from_git, "agui_store"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
            env = {**os.environ, "PYTHONPATH": folder}
            return subprocess.run([sys.executable, __file__], env=env, check=False).returncode
    write(DB, EXPECTED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
