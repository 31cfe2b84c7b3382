"""A child process that erases a thread, for the erasure's crash and concurrency tests.

    python -m tests.workers.eraser LOCATION THREAD [STEP]

Opens the store, prints ``ready``, and on reading ``go`` prints ``begin``, erases ``THREAD``
(``Store.delete_thread``) and prints ``done`` with the receipt as JSON. With a ``STEP`` (one
of ``agui_store.engine.erasure.STEPS``), the erasure stops there instead: the child prints
``at STEP`` and waits, its transaction open or its commit made, for the crash test to kill it.
"""

from __future__ import annotations

import json
import sys

import agui_store
from agui_store import testing


def main(location: str, thread: str, stop_at: str | None) -> None:
    def hook(step: str) -> None:
        if step == stop_at:
            print(f"at {step}", flush=True)
            sys.stdin.readline()  # killed before a line comes

    with agui_store.open(location) as store, testing.on_erasure_step(hook):
        print("ready", flush=True)
        sys.stdin.readline()
        print("begin", flush=True)
        receipt = store.delete_thread(thread)
        print("done " + json.dumps(receipt.to_json()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
