"""A worker that fills the disk under a store, for real, and then makes room again.

    python -m tests.workers.fullness rlimit DB
    python -m tests.workers.fullness tmpfs DB FILLER

``rlimit``: lowers this process's RLIMIT_FSIZE a little above the store's files (SIGXFSZ
ignored, so a write past it fails with EFBIG instead of killing the process), appends until
a write fails, then raises the limit again. ``tmpfs``: DB lives on a small tmpfs; FILLER
takes all but a little of its space, appends run until ENOSPC, then FILLER is deleted.

Either way, the same ``Store`` object then appends again and checks the file. The worker
prints one JSON line: which batches were acknowledged, which raised (and what), what came
after the room was made. The test reads the file afterwards itself too.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from typing import Any

import agui_store

#: Enough text per batch that a few batches cross any small margin.
TEXT = "the quick brown fox jumps over the lazy dog; " * 400


def batch(index: int) -> list[dict[str, Any]]:
    run_id = f"run-{index:04d}"
    message = f"m-{index}"
    return [
        {"type": "RUN_STARTED", "threadId": "full", "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": f"{index}: {TEXT}"},
        {"type": "TEXT_MESSAGE_END", "messageId": message},
        {"type": "RUN_FINISHED", "threadId": "full", "runId": run_id},
    ]


def largest_file(db: str) -> int:
    return max(os.path.getsize(db + s) if os.path.exists(db + s) else 0
               for s in ("", "-wal", "-shm"))


def fill(filler: str) -> None:
    """Write ``filler`` until the file system has no room left."""
    chunk = b"\0" * 65536
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError:
                if len(chunk) == 1:
                    return
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)


def main() -> int:
    mode, db = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    store = agui_store.open(db)
    acked: list[str] = []
    failures: list[dict[str, Any]] = []
    index = 0
    for _ in range(3):  # room enough for these
        store.append(batch(index))
        acked.append(f"run-{index:04d}")
        index += 1
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if mode == "rlimit":
        resource.setrlimit(resource.RLIMIT_FSIZE, (largest_file(db) + 160 * 1024, hard))
    else:
        fill(sys.argv[3])
    while len(failures) < 3 and index < 500:
        try:
            store.append(batch(index))
            acked.append(f"run-{index:04d}")
        except Exception as e:  # the test asserts what these are
            failures.append({
                "run": f"run-{index:04d}",
                "type": type(e).__name__,
                "mro": [c.__name__ for c in type(e).__mro__],
                "errno": getattr(e, "errno", None),
                "message": str(e),
                "cause": type(e.__cause__).__name__ if e.__cause__ else None,
            })
        index += 1
    # Make room: the same Store object must work again.
    if mode == "rlimit":
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    else:
        os.remove(sys.argv[3])
    after: list[str] = []
    for _ in range(3):
        store.append(batch(index))
        after.append(f"run-{index:04d}")
        index += 1
    report = store.check()
    present = [r.run_id for r in store.runs("full")]
    store.close()
    print(json.dumps({
        "acked": acked, "failures": failures, "after": after, "present": present,
        "check_ok": report.ok, "problems": [str(p) for p in report.problems],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
