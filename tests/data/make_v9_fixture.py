"""Write ``tests/data/v9.sqlite``: a store file written by agui-store at schema version 9 (the
last version whose checkpoints store message lists as per-message rows and deltas), so that
the migration to version 10 (chunked lists) is proven on a file written by that code: its
checkpoints are dropped and derived again, and the file reads back what version 9 read.

It holds the version 7 fixture's threads (``make_v7_fixture.record_v7``: inputs stored by
reference, echoes, state patches, a branch, a live run) and a thread long enough for full
chunks (150 messages), with a run whose MESSAGES_SNAPSHOT edits an early message and a late
tool result. It also writes ``v9.expected.json``: what version 9 read back from the file
(of the long thread, a few runs).

    python tests/data/make_v9_fixture.py --from-git 6906989

``--from-git REV`` (default 6906989, the last commit whose schema is version 9) runs this
script on that revision's ``agui_store``. Regenerate only on purpose.
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
DB = HERE / "v9.sqlite"
EXPECTED = HERE / "v9.expected.json"
LAST_V9_COMMIT = "6906989"

sys.path.insert(0, str(HERE))
from make_v1_fixture import read_back  # noqa: E402
from make_v7_fixture import record_v7  # noqa: E402


def long_thread(store: Any) -> None:
    """75 runs of a question and an answer, then a snapshot that edits message 3, then a
    run whose tool result arrives for a call made 140 messages earlier."""
    thread = "long"
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": thread, "runId": "call"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c0",
                "toolCallName": "lookup",
                "parentMessageId": "call-a",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c0", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c0"},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": "call"},
        ]
    )
    for n in range(75):
        run = f"l{n}"
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": thread, "runId": run},
                {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-u", "role": "user"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-u", "delta": f"q{n}"},
                {"type": "TEXT_MESSAGE_END", "messageId": f"{run}-u"},
                {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-a", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-a", "delta": f"a{n}"},
                {"type": "TEXT_MESSAGE_END", "messageId": f"{run}-a"},
                {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
            ]
        )
    messages = store.checkout("l74", thread_id=thread).messages
    messages[3] = {**messages[3], "content": "edited by a snapshot"}
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": thread, "runId": "snap"},
            {"type": "MESSAGES_SNAPSHOT", "messages": messages},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": "snap"},
        ]
    )
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": thread, "runId": "late"},
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "late-r",
                "toolCallId": "c0",
                "content": "found it",
            },
            {"type": "RUN_FINISHED", "threadId": thread, "runId": "late"},
        ]
    )


def write(db: Path, expected: Path) -> None:
    import apsw

    import agui_store
    from agui_store import schema

    if schema.SCHEMA_VERSION != 9:
        raise SystemExit(
            f"this agui_store writes schema version {schema.SCHEMA_VERSION}; "
            "run with --from-git to use version 9 code"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with agui_store.open(db) as store:
        record_v7(store)
        long_thread(store)
        found = read_back(store)
    # The long thread's runs read back alike: a few of them keep the file small.
    kept = {"long/call", "long/l0", "long/l31", "long/l74", "long/snap", "long/late"}
    found["runs"] = {
        key: run for key, run in found["runs"].items() if not key.startswith("long/") or key in kept
    }
    conn = apsw.Connection(str(db))  # the last connection: fold the WAL into the file
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()
    expected.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {db} ({db.stat().st_size} bytes, schema version 9) and {expected.name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--from-git",
        nargs="?",
        const=LAST_V9_COMMIT,
        metavar="REV",
        help=f"use agui_store as of this revision (default {LAST_V9_COMMIT})",
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
