"""Write ``tests/data/v7.sqlite``: a store file written by agui-store at schema version 7 (the
last version without content hashes), with checkpoints, lineage digests, normalized inputs
and echoes and state patches, so that the migration to version 8 is proven to backfill every
hash, and that the file then reads back unchanged and checks clean.

It holds the version 1 fixture's conversation (``make_v1_fixture.record``), then a thread
whose client resends the whole history with every run (HttpAgent style, stored by reference),
whose producer echoes it in ``RUN_STARTED.input``, whose state grows by ``STATE_DELTA``
patches, with a branch and a live run; every complete run has a checkpoint. It also writes
``v7.expected.json``: what version 7 read back from the file.

    python tests/data/make_v7_fixture.py --from-git a3afe09 [--out DIR]

``--from-git REV`` (default a3afe09, the last commit whose schema is version 7) runs this
script on that revision's ``agui_store``. The writing is ``tests/data/fixtures.py``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: tests.data.fixtures from the repository
    sys.path.append(str(Path(__file__).resolve().parents[2]))

from tests.data.fixtures import Fixture, main, read_back_v1
from tests.data.make_v1_fixture import record


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


FIXTURE = Fixture(
    version=7,
    last_commit="a3afe09",
    record=record_v7,
    read_back=read_back_v1,
    script=__file__,
)

if __name__ == "__main__":
    sys.exit(main(FIXTURE, __doc__ or ""))
