"""search: a rare and a common word in a 10,000-run store next to ``log(limit=20)`` at the tip,
what the index costs an append, and what it adds to the store's size. SQLite and PostgreSQL.

The store holds 1,000 threads of 10 runs; each run is a user question (25 words), a tool
call with its arguments (8), the tool's result (120) and an assistant answer (150), message
ids UUIDs, words drawn from a 2,000-word vocabulary (a word's frequency falls off as
1/rank, as in text). One message of the whole store holds the rare word; ``the`` starts
every answer.

- **search vs log**: the median of ``search(word, limit=20)`` over the median of
  ``log("HEAD", thread_id=<newest thread>, limit=20)``, both on the same open store; on
  SQLite also the same ratio of the process's CPU time, which other work on the machine
  does not move. Also a common word in one thread, and in the scope of an owner who holds
  two of the threads (one early, one from the middle), whose 20 answers hold it.
- **append**: 200 runs appended one per call to a new store, with the index and without it
  (:func:`agui_store.testing.without_search_index`), each next to a raw baseline of the same
  rows written in the same transactions (SQLite: apsw ``executemany`` into the store's own
  schema; PostgreSQL: the same rows through psycopg ``executemany``); the figure is how far
  the append/raw ratio moves with the index. On SQLite also the WAL frames (pages written) an
  append commits with the index and without, counted.
- **erase**: ``delete_thread`` of one of these 10-run threads (with the purge), from this
  store and from one of a tenth of its runs built the same way; the median of 5 each, and
  the large store's over the small store's (the erasure's cost should grow with what it
  erases, not with the store's search index), after one untimed erasure in each.
- **size**: the index's bytes (SQLite: the pages of its tables and index, by ``dbstat``;
  PostgreSQL: ``pg_total_relation_size`` of its table) over the bytes of the indexed text.

    python -m benchmarks.bench_search [--threads 1000] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import random
import statistics
import time
import uuid
from typing import Any

import agui_store
from agui_store import testing
from benchmarks._common import header, median_time, scratch_dir

RUNS_PER_THREAD = 10
RARE = "zanzibar"
#: The thread whose fourth run asks the one question holding :data:`RARE`.
RARE_THREAD = 17
#: The owner of two of the store's threads: a search in its scope finds its 20 answers'
#: ``the`` among every other thread's.
OWNER = "alice"


def vocabulary(size: int = 2000) -> list[str]:
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"the", "hotel", "porto", "refund", "order", "flight", "booking"}
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


class Text:
    """Sentences of words drawn with Zipf-like frequencies."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary()
        self.weights = [1 / (rank + 1) for rank in range(len(self.words))]

    def sentence(self, n: int) -> str:
        return " ".join(self.rng.choices(self.words, self.weights, k=n)).capitalize() + "."


def run_events(thread: str, run: int, text: Text, rare: bool = False) -> list[dict[str, Any]]:
    """One run: a user question, a tool call, its result, and an answer holding ``the``."""
    rid = f"run-{run}"
    question = text.sentence(25) + (f" {RARE}" if rare else "")
    call = f"call-{thread}-{run}"
    # Message ids as clients make them: UUIDs.
    u, t, r, a = (str(uuid.UUID(int=text.rng.getrandbits(128))) for _ in range(4))
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": rid,
         "input": {"threadId": thread, "runId": rid, "state": {}, "tools": [], "context": [],
                   "forwardedProps": {},
                   "messages": [{"id": u, "role": "user", "content": question}]}},
        {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "search_hotels",
         "parentMessageId": t},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call,
         "delta": '{"query": "' + text.sentence(8).rstrip(".") + '"}'},
        {"type": "TOOL_CALL_END", "toolCallId": call},
        {"type": "TOOL_CALL_RESULT", "messageId": r, "toolCallId": call,
         "content": text.sentence(120)},
        {"type": "TEXT_MESSAGE_START", "messageId": a, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": a, "delta": piece}
          for piece in _pieces("The " + text.sentence(150), 40)),
        {"type": "TEXT_MESSAGE_END", "messageId": a},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": rid},
    ]


def _pieces(text: str, size: int) -> list[str]:
    """A text streamed in deltas of ``size`` characters."""
    return [text[at : at + size] for at in range(0, len(text), size)]


def thread_events(t: int, text: Text) -> list[dict[str, Any]]:
    thread = f"thread-{t:05}"
    return [
        e for r in range(RUNS_PER_THREAD)
        for e in run_events(thread, r, text, rare=(t == RARE_THREAD and r == 3))
    ]


def indexed_text_bytes(store: agui_store.Store) -> int:
    """The bytes of every message text the index holds, each once per thread."""
    total = 0
    for thread in store.threads():
        seen: set[tuple[str, str]] = set()
        for run in store.runs(thread):
            for m in store.checkout(run.run_id, thread_id=thread).messages:
                key = (str(m.get("id")), testing.search_text(m))
                if key not in seen and testing.search_words(m):
                    seen.add(key)
                    total += len(key[1].encode())
    return total


def index_bytes(store: agui_store.Store, postgres: bool) -> int:
    conn = testing.connection(store)
    if postgres:
        row = conn.execute("SELECT pg_total_relation_size('search_messages')").fetchone()
        return int(row[0])
    rows = conn.execute(
        "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'search_%'"
    ).fetchone()
    return int(rows[0])


def owned(threads: int) -> set[int]:
    """The threads :data:`OWNER` holds: two, an early one and one from the middle."""
    return {3, threads // 2}


def build(location: str, threads: int) -> None:
    text = Text(1)
    mine = owned(threads)
    with agui_store.open(location) as store:
        for t in range(threads):
            store.append(thread_events(t, text), scope=OWNER if t in mine else None)


def median_cpu(fn: Any, repeat: int) -> float:
    """Median CPU time of this process over ``repeat`` calls of ``fn``: what other work on
    the machine does not move (SQLite's work is all in this process)."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def searching(location: str, postgres: bool, repeat: int) -> None:
    with agui_store.open(location) as store:
        tip = store.threads()[-1]
        calls = {
            "log": lambda: store.log("HEAD", thread_id=tip, limit=20),
            "rare": lambda: store.search(RARE, limit=20),
            "common": lambda: store.search("the", limit=20),
            "phrase": lambda: store.search('"the hotel"', limit=20),
            "scoped": lambda: store.search("the", thread_id=tip, limit=20),
            "owner": lambda: store.search("the", scope=OWNER, limit=20),
        }
        wall = {name: median_time(call, repeat=repeat) for name, call in calls.items()}
        # A call of a few milliseconds loses the processor to other work more often than
        # one of a fraction of one: on a loaded machine wall ratios grow, CPU ratios do not.
        cpu = {} if postgres else {name: median_cpu(call, repeat) for name, call in calls.items()}
        assert len(store.search(RARE)) == 1 and len(store.search("the")) == 20
        assert len(store.search("the", scope=OWNER)) == 2 * RUNS_PER_THREAD
        print(f"log(limit=20) at the tip: {wall['log'] * 1e3:.2f} ms")
        for key, name, bound in (
            ("rare", f"rare word ({RARE})", 3),
            ("common", "common word (the), limit=20", 10),
            ("phrase", 'phrase ("the hotel"), limit=20', None),
            ("scoped", "common word in one thread", None),
            ("owner", "common word, an owner of 2 threads", None),
        ):
            target = f" (target <= {bound}x)" if bound else ""
            on_cpu = f" | CPU time {cpu[key] / cpu['log']:.1f}x log" if cpu else ""
            print(f"| {name} | {wall[key] * 1e3:.2f} ms | {wall[key] / wall['log']:.1f}x log"
                  f"{target}{on_cpu} |")
        text_bytes = indexed_text_bytes(store)
        size = index_bytes(store, postgres)
        print(f"index: {size / 1e6:.1f} MB for {text_bytes / 1e6:.1f} MB of indexed text "
              f"= {size / text_bytes:.0%} (target <= 40%)")


def erasing(small: str, large: str) -> None:
    """``delete_thread`` of five threads from each store; the ratio of the medians."""
    medians = {}
    for name, location in (("small", small), ("large", large)):
        with agui_store.open(location) as store:
            times = []
            store.delete_thread(store.threads()[6])  # untimed: what a first erasure loads
            for thread in store.threads()[1:6]:
                t0 = time.perf_counter()
                receipt = store.delete_thread(thread)
                times.append(time.perf_counter() - t0)
                assert receipt.purged and receipt.runs == RUNS_PER_THREAD
            medians[name] = statistics.median(times)
    print(f"delete_thread of a {RUNS_PER_THREAD}-run thread: {medians['small'] * 1e3:.1f} ms "
          f"in a store a tenth the size, {medians['large'] * 1e3:.1f} ms in this one = "
          f"{medians['large'] / medians['small']:.2f}x (target <= 1.5x)")


def appending(new_location: Any, postgres: bool, runs: int, repeat: int) -> None:
    text = Text(2)
    batches = [run_events("t", r, text) for r in range(runs)]

    def with_index() -> None:
        with agui_store.open(new_location()) as store:
            for b in batches:
                store.append(b)

    def without_index() -> None:
        with testing.without_search_index(), agui_store.open(new_location()) as store:
            for b in batches:
                store.append(b)

    def raw() -> None:
        with agui_store.open(new_location()) as store:
            conn = testing.connection(store)
            rows = [[(i, len(str(e))) for i, e in enumerate(b)] for b in batches]
            if postgres:
                conn.execute("CREATE TEMP TABLE raw_rows(run int, n int, payload text)")
                for r, b in enumerate(batches):
                    with conn.transaction(), conn.cursor() as cur:
                        cur.executemany(
                            "INSERT INTO raw_rows VALUES (%s, %s, %s)",
                            [(r, i, str(e)) for i, e in enumerate(b)],
                        )
            else:
                conn.execute("CREATE TEMP TABLE raw_rows(run INTEGER, n INTEGER, payload TEXT)")
                for r, b in enumerate(batches):
                    with conn:
                        conn.executemany(
                            "INSERT INTO raw_rows VALUES (?, ?, ?)",
                            [(r, i, str(e)) for i, e in enumerate(b)],
                        )
            del rows

    times: dict[str, list[float]] = {"with": [], "without": [], "raw": []}
    for _ in range(repeat):  # in turns: a load that changes moves all three alike
        times["raw"].append(median_time(raw, repeat=1))
        times["with"].append(median_time(with_index, repeat=1))
        times["without"].append(median_time(without_index, repeat=1))
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    ratio_with, ratio_without = med["with"] / med["raw"], med["without"] / med["raw"]
    print(f"append/raw without the index: {ratio_without:.2f}; with it: {ratio_with:.2f}; "
          f"the ratio moves {ratio_with / ratio_without - 1:+.1%} (target within 10 %)")
    if not postgres:
        pages = {name: wal_frames(new_location(), batches, name == "with") for name in times
                 if name != "raw"}
        print(f"WAL frames an append (the last three quarters, counted): without the index "
              f"{pages['without']:.1f}, with it {pages['with']:.1f} "
              f"({pages['with'] / pages['without'] - 1:+.1%})")


def wal_frames(location: str, batches: list[list[dict[str, Any]]], index: bool) -> float:
    """The WAL frames an SQLite append commits, on average, over the last three quarters of
    ``batches`` appended to a new store, read from the WAL (automatic checkpoints off for
    them, as ``bench_append_pages`` counts): what the machine's load does not move."""
    warm = len(batches) // 4
    block = contextlib.nullcontext() if index else testing.without_search_index()
    with block, agui_store.open(location) as store:
        for b in batches[:warm]:
            store.append(b)
        conn = testing.connection(store)
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for b in batches[warm:]:
            store.append(b)
        with open(location + "-wal", "rb") as f:
            wal = f.read()
    page_size = int.from_bytes(wal[8:12], "big")
    frames = (len(wal) - 32) // (24 + page_size)  # a 32-byte header, a 24-byte one a frame
    return frames / (len(batches) - warm)


def throwaway_server() -> Any:
    """A throwaway socket-only PostgreSQL cluster (the tests'), destroyed when the script
    exits: a database of its own for each store."""
    from tests.postgres_cluster import PostgresCluster, PostgresServer

    cluster = PostgresCluster.create()
    atexit.register(cluster.destroy)
    return PostgresServer(dsn=cluster.dsn())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--append-runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--backends", default="sqlite,postgres",
                        help="sqlite, postgres or both (comma-separated)")
    args = parser.parse_args()
    if args.threads <= RARE_THREAD:
        parser.error(f"--threads must be at least {RARE_THREAD + 1}: thread {RARE_THREAD} "
                     f"holds the rare word")
    tmp = scratch_dir("agui-bench-search-")
    made = iter(range(10**6))
    for backend in args.backends.split(","):
        postgres = backend == "postgres"
        header(f"search on {'PostgreSQL' if postgres else 'SQLite'}: "
               f"{args.threads * RUNS_PER_THREAD:,} runs")
        server = throwaway_server() if postgres else None

        def new_location(server: Any = server) -> str:
            if server is None:
                return os.path.join(tmp, f"{next(made)}.db")
            return str(server.create_database())

        location = new_location()
        build(location, args.threads)
        searching(location, postgres, args.repeat * 3)
        small = new_location()
        build(small, max(args.threads // 10, 7))
        erasing(small, location)
        appending(new_location, postgres, args.append_runs, args.repeat)
        print()


if __name__ == "__main__":
    main()
