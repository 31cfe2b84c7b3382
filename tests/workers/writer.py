"""A writer process for the crash tests: appends batches and reports each one on stdout.

    python -m tests.workers.writer runs DB SEED [--count N]
    python -m tests.workers.writer live DB SEED [--count N]

It prints ``spawned`` once imported, then waits for a line on stdin: ``go START`` (``runs``:
the first batch index to append) or ``go`` (``live``: it finds where the live run stopped
itself). It then opens the store, prints ``ready INDEX`` and loops: ``begin I``, the
``append`` call, ``acked I`` once ``append`` has returned. A test kills it at any moment with
SIGKILL; every ``acked`` line is a promise the file must keep.

``runs`` appends :func:`tests.workers.plans.crash_batch` batches (whole runs, sometimes two
runs in one batch, sometimes on a branch); ``live`` streams :func:`~tests.workers.plans.live_batch`
batches into one run that never ends, resuming after the last batch the file holds.
"""

from __future__ import annotations

import argparse
import os
import sys

import agui_store
from tests.workers import plans


def say(line: str) -> None:
    # One write() per line: unbuffered, and whole even when the process dies right after.
    os.write(1, (line + "\n").encode())


def write_runs(path: str, seed: int, start: int, count: int | None) -> None:
    with agui_store.open(path) as store:
        say(f"ready {start}")
        index = start
        while count is None or index < start + count:
            batch = plans.crash_batch(seed, index)
            say(f"begin {index}")
            store.append(batch.events, branch=batch.branch)
            say(f"acked {index} {' '.join(batch.run_ids)}")
            index += 1


def live_resume_index(store: agui_store.Store, seed: int) -> int:
    """The index of the next live batch: the file must hold whole batches only."""
    run = store.get_run(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD)
    if run is None:
        return 0
    held = len(store.events(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD))
    index, total = 0, 0
    while total < held:
        total += len(plans.live_batch(seed, index))
        index += 1
    if total != held:
        raise SystemExit(f"the live run holds {held} events: not a whole number of batches")
    return index


def write_live(path: str, seed: int, count: int | None) -> None:
    with agui_store.open(path) as store:
        index = start = live_resume_index(store, seed)
        say(f"ready {start}")
        while count is None or index < start + count:
            say(f"begin {index}")
            store.append(plans.live_batch(seed, index), thread_id=plans.LIVE_THREAD)
            say(f"acked {index}")
            index += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["runs", "live"])
    parser.add_argument("db")
    parser.add_argument("seed", type=int)
    parser.add_argument("--count", type=int, help="stop after this many batches")
    parser.add_argument("--no-wait", action="store_true", help="start at once (runs: at 0)")
    args = parser.parse_args(argv)
    say("spawned")
    start = 0
    if not args.no_wait:
        words = sys.stdin.readline().split()
        if not words or words[0] != "go":
            return 2
        start = int(words[1]) if len(words) > 1 else 0
    if args.mode == "runs":
        write_runs(args.db, args.seed, start, args.count)
    else:
        write_live(args.db, args.seed, args.count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
