"""Write ``tests/data/v7.sqlite``: a store file written by agui-store at schema version 7 (the
last version without content hashes), with checkpoints, lineage digests, normalized inputs
and echoes and state patches, so that the migration to version 8 is proven to backfill every
hash, and that the file then reads back unchanged and checks clean.

It holds the version 1 fixture's conversation (``make_v1_fixture.record``), then a thread
whose client resends the whole history with every run (HttpAgent style, stored by reference),
whose producer echoes it in ``RUN_STARTED.input``, whose state grows by ``STATE_DELTA``
patches, with a branch and a live run; every complete run has a checkpoint. It also writes
``v7.expected.json``: what version 7 read back from the file.

    python tests/data/make_v7_fixture.py --from-git a3afe09

``--from-git REV`` (default a3afe09, the last commit whose schema is version 7) runs this
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
DB = HERE / "v7.sqlite"
EXPECTED = HERE / "v7.expected.json"
LAST_V7_COMMIT = "a3afe09"

sys.path.insert(0, str(HERE))
from make_v1_fixture import read_back, record  # noqa: E402


def turn(thread: str, run: str, n: int, history: list[dict[str, Any]]) -> tuple[Any, Any]:
    """A run whose input resends ``history`` plus a new user message, and whose producer
    echoes that input; the run answers and patches the state."""
    user = {"id": f"{run}-u", "role": "user", "content": f"question {n}"}
    sent = [*history, user]
    body = {
        "threadId": thread,
        "runId": run,
        "state": {"count": n - 1, "notes": ["start"] + [f"n{i}" for i in range(1, n)]},
        "messages": sent,
        "tools": [],
        "context": [],
        "forwardedProps": {"n": n},
    }
    events = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "input": body},
        {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-a", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-a", "delta": f"answer {n}"},
        {"type": "TEXT_MESSAGE_END", "messageId": f"{run}-a"},
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "replace", "path": "/count", "value": n},
                {"op": "add", "path": "/notes/-", "value": f"n{n}"},
            ],
        },
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]
    return events, body


def record_v7(store: Any) -> None:
    record(store)
    thread = "resend"
    history: list[dict[str, Any]] = []
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": thread, "runId": "s0"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"count": 0, "notes": ["start"] * 40}},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": "s0"},
        ]
    )
    for n in range(1, 5):
        events, body = turn(thread, f"s{n}", n, history)
        body["state"] = store.checkout(f"s{n - 1}", thread_id=thread).state
        events[0]["input"] = body
        store.append(events, input=body)
        history = store.checkout(f"s{n}", thread_id=thread).messages
    store.branch("retry", "s2", thread_id=thread)
    events, body = turn(thread, "s5", 5, store.checkout("s2", thread_id=thread).messages)
    body["state"] = store.checkout("s2", thread_id=thread).state
    store.append(events, input=body, branch="retry")
    events, body = turn(thread, "live", 6, store.checkout("s4", thread_id=thread).messages)
    store.append(events[:3], input=body, parent="s4")
    store.compact()


def write(db: Path, expected: Path) -> None:
    import apsw

    import agui_store
    from agui_store import schema

    if schema.SCHEMA_VERSION != 7:
        raise SystemExit(
            f"this agui_store writes schema version {schema.SCHEMA_VERSION}; "
            "run with --from-git to use version 7 code"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with agui_store.open(db) as store:
        record_v7(store)
        found = read_back(store)
    conn = apsw.Connection(str(db))  # the last connection: fold the WAL into the file
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()
    expected.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {db} ({db.stat().st_size} bytes, schema version 7) and {expected.name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--from-git",
        nargs="?",
        const=LAST_V7_COMMIT,
        metavar="REV",
        help=f"use agui_store as of this revision (default {LAST_V7_COMMIT})",
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
