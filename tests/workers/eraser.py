"""A worker process that erases a thread, for the crash and concurrency tests of erasure.

    python -m tests.workers.eraser LOCATION THREAD

Opens the store, prints ``ready``, and on reading ``go`` prints ``begin``, erases ``THREAD``
(``Store.delete_thread``) and prints ``done`` with the receipt as JSON. The crash test kills
it between ``begin`` and ``done``.
"""

from __future__ import annotations

import json
import sys

import agui_store


def main(location: str, thread: str) -> None:
    with agui_store.open(location) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        print("begin", flush=True)
        receipt = store.delete_thread(thread)
        print("done " + json.dumps(receipt.to_json()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
