"""Worker processes for the concurrency tests.

    python -m tests.workers.racer writer DB NAME --threads 3 --runs 20 [--share-store]
    python -m tests.workers.racer live DB SEED --batches 200 [--pause-ms 2]
    python -m tests.workers.racer reader DB SEED

Each prints ``spawned`` once imported and starts when it reads ``go`` on stdin, so that all
workers of a test start at the same moment (all of them open the file then, racing to create
it when it is new).

``writer``: ``--threads`` threads append ``--runs`` whole runs each
(:func:`tests.workers.plans.race_batch`), alternating between the thread's own conversation
(``NAME.T``) and one conversation every writer shares (``shared``); with ``--share-store`` the
threads share one ``Store``, otherwise each opens its own. Default settings otherwise. Prints
one JSON line per append (the ``AppendResult`` range) and ``error ...`` lines for anything
raised, then ``done``.

``live``: streams ``--batches`` batches into the live run (small batches, one per ``append``).

``reader``: until stdin closes, polls the file and checks that everything it sees is made of
whole batches: the live run's event count is always at a batch boundary with exactly the
planned events, and every raced run it sees is complete. Prints a JSON summary at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

import agui_store
from tests.workers import plans

SHARED_THREAD = "shared"


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def conversation_of(writer: str, index: int) -> str:
    return writer if index % 2 == 0 else SHARED_THREAD


def run_writer(args: argparse.Namespace) -> int:
    failed = threading.Event()
    shared = agui_store.open(args.db) if args.share_store else None
    barrier = threading.Barrier(args.threads)

    def work(t: int) -> None:
        name = f"{args.name}.{t}"
        try:
            store = shared or agui_store.open(args.db)
            barrier.wait()
            for index in range(args.runs):
                thread = conversation_of(name, index)
                batch = plans.race_batch(name, index, thread)
                result = store.append(batch.events)
                say(
                    json.dumps(
                        {
                            "writer": name,
                            "index": index,
                            "thread": thread,
                            "run_ids": list(result.new_run_ids),
                            "first_seq": result.first_seq,
                            "last_seq": result.last_seq,
                            "count": result.event_count,
                        }
                    )
                )
            if store is not shared:
                store.close()
        except BaseException as e:  # report everything: the test asserts there is nothing
            failed.set()
            barrier.abort()  # the other threads must not wait for this one forever
            say(f"error {name} {type(e).__module__}.{type(e).__name__}: {e}")
            for line in traceback.format_exc().splitlines():
                say(f"error-trace {line}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(args.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if shared is not None:
        shared.close()
    say("done")
    return 1 if failed.is_set() else 0


def run_live(args: argparse.Namespace) -> int:
    with agui_store.open(args.db) as store:
        for index in range(args.batches):
            store.append(plans.live_batch(args.seed, index), thread_id=plans.LIVE_THREAD)
            say(f"acked {index}")
            time.sleep(args.pause_ms / 1000)  # tokens arrive over time
    say("done")
    return 0


def check_whole(
    store: agui_store.Store, seed: int, sizes: list[int], seen: dict[str, Any]
) -> list[str]:
    """One poll: what is wrong with what the reader sees now (nothing, if all is whole)."""
    problems: list[str] = []
    live = (
        store.events(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD)
        if store.get_run(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD)
        else []
    )
    while sizes[-1] < len(live):
        sizes.append(sizes[-1] + len(plans.live_batch(seed, len(sizes) - 1)))
    if len(live) not in sizes:
        problems.append(f"the live run shows {len(live)} events, not a whole number of batches")
    else:
        held = sizes.index(len(live))
        expected = [e for i in range(held) for e in plans.live_batch(seed, i)]
        if live != expected:
            problems.append(f"the live run's {held} batches differ from what was appended")
        seen["live_counts"].add(len(live))
    threads = [t for t in store.threads() if t != plans.LIVE_THREAD]
    if threads:  # one conversation per poll, in turn, so that polls stay quick
        thread = threads[seen["polls"] % len(threads)]
        for run in store.runs(thread):
            writer, _, index = run.run_id.rpartition("-")
            batch = plans.race_batch(writer, int(index), thread)
            events = store.events(run.run_id, thread_id=thread)
            if events != batch.events or run.event_count != len(batch.events):
                problems.append(
                    f"run {run.run_id} shows {len(events)} of {len(batch.events)} events"
                )
            seen["runs_checked"] += 1
    return problems


def run_reader(args: argparse.Namespace) -> int:
    seen: dict[str, Any] = {"polls": 0, "runs_checked": 0, "live_counts": set()}
    problems: list[str] = []
    sizes = [0]
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    with agui_store.open(args.db) as store:
        while not stop.is_set():
            try:
                problems += check_whole(store, args.seed, sizes, seen)
            except BaseException as e:
                problems.append(f"{type(e).__module__}.{type(e).__name__}: {e}")
            seen["polls"] += 1
    say(
        json.dumps(
            {
                "polls": seen["polls"],
                "runs_checked": seen["runs_checked"],
                "live_counts": len(seen["live_counts"]),
                "problems": problems[:20],
            }
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    w = sub.add_parser("writer")
    w.add_argument("db")
    w.add_argument("name")
    w.add_argument("--threads", type=int, default=3)
    w.add_argument("--runs", type=int, default=20)
    w.add_argument("--share-store", action="store_true")
    live = sub.add_parser("live")
    live.add_argument("db")
    live.add_argument("seed", type=int)
    live.add_argument("--batches", type=int, default=200)
    live.add_argument("--pause-ms", type=float, default=0.0)
    r = sub.add_parser("reader")
    r.add_argument("db")
    r.add_argument("seed", type=int)
    args = parser.parse_args(argv)
    say("spawned")
    if sys.stdin.readline().strip() != "go":
        return 2
    role = {"writer": run_writer, "live": run_live, "reader": run_reader}[args.role]
    return role(args)


if __name__ == "__main__":
    sys.exit(main())
