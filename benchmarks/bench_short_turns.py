"""checkout of a short-turn conversation: against LangGraph and against its own decode.

A thread of short turns: one user message and one assistant reply a run, the user's message
arriving in the client's whole history, sent as each run's input (``RunAgentInput``, as the
ASGI Recorder stores the request body), the reply streamed as events. Its newest run is
restored with the store kept open, as a server restores one thread after another, and timed
in turns with its baselines, in one process, so that the machine's load weighs on all alike:

- LangGraph ``SqliteSaver.get_tuple`` on an open connection to a file holding that run's
  checkpoint (the same messages as plain dicts): what a LangGraph app reads to restore it;
- msgspec decoding the messages (and state) from one JSON document: the floor, building the
  dicts the checkout returns and nothing else.

``--postgres`` builds the same thread on a throwaway PostgreSQL cluster and times checkout
against its floor there (one query returning the message blobs' texts in order, plus the
decode of the answer) and against LangGraph ``PostgresSaver.get_tuple``.

Goals: checkout <= 1.0x get_tuple at 2,000 runs; <= 1.25x the decode of its answer at 10,000
runs; on PostgreSQL, <= 1.0x its floor and <= 1.0x PostgresSaver.get_tuple.

    pip install langgraph-checkpoint-sqlite langgraph-checkpoint-postgres  # baselines only
    python -m benchmarks.bench_short_turns [--runs 2000,10000] [--repeat 301] [--postgres]
        [--files DIR]
    python -m benchmarks.bench_short_turns --runs 2000 --profile 200   # cProfile, top 25
    python -m benchmarks.bench_short_turns --runs 2000 --profile 200 --postgres  # and round trips
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import gc
import os
import pstats
import random
import sqlite3
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

import agui_store
from agui_store import testing
from benchmarks._common import header, scratch_dir, throwaway_postgres
from benchmarks.bench_langgraph import THREAD, LangGraphThread, prose

#: LangGraph checkpoints kept before the newest one (get_tuple reads the newest only).
LG_KEEP = 2


def turns(n_runs: int, seed: int) -> list[tuple[str, str, str]]:
    """``(run id, user message, assistant reply)`` of each run: short turns."""
    rng = random.Random(seed)
    return [
        (f"r{i}", prose(rng, rng.randint(20, 90)), prose(rng, rng.randint(40, 180)))
        for i in range(n_runs)
    ]


def run_events(run_id: str, reply: str) -> list[dict[str, Any]]:
    """The run's stream: the reply in three deltas."""
    mid = f"a-{run_id}"
    third = max(1, len(reply) // 3)
    deltas = [reply[:third], reply[third : 2 * third], reply[2 * third :]]
    return [
        {"type": "RUN_STARTED", "threadId": THREAD, "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": d} for d in deltas if d),
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
        {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run_id},
    ]


def build(location: str, n_runs: int, seed: int) -> list[dict[str, Any]]:
    """The thread in a store, each run appended with the client's request body (its whole
    history, bytes as received); returns the newest run's messages."""
    history: list[dict[str, Any]] = []
    with agui_store.open(location) as store:
        for run_id, user, reply in turns(n_runs, seed):
            history.append({"id": f"u-{run_id}", "role": "user", "content": user})
            body = {
                "threadId": THREAD,
                "runId": run_id,
                "state": {},
                "messages": history,
                "tools": [],
                "context": [],
                "forwardedProps": {},
            }
            store.append(run_events(run_id, reply), input=msgspec.json.encode(body))
            history.append({"id": f"a-{run_id}", "role": "assistant", "content": reply})
        messages: list[dict[str, Any]] = store.checkout(f"r{n_runs - 1}", thread_id=THREAD).messages
    assert messages == history
    return messages


def alternating(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Median seconds of each function, called in turns ``repeat`` times (after one call
    each to warm up), the cyclic collector run between calls so none pays for another's
    garbage."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def sqlite_figures(tmp: str, n: int, seed: int, repeat: int) -> dict[str, float]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = os.path.join(tmp, f"turns-{n}.db")
    lg_path = os.path.join(tmp, f"turns-{n}-langgraph.db")
    if os.path.exists(path):  # kept by an earlier run (--files): the same seed's thread
        with agui_store.open(path) as store:
            messages = store.checkout(f"r{n - 1}", thread_id=THREAD).messages
    else:
        messages = build(path, n, seed)
    if os.path.exists(lg_path):
        os.remove(lg_path)
    lg = LangGraphThread(lg_path)
    for i in range(LG_KEEP, -1, -1):
        lg.put_run(f"r{n - 1 - i}", messages[: len(messages) - 2 * i])
    lg.close()
    newest = f"r{n - 1}"
    config = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
    conn = sqlite3.connect(lg_path, check_same_thread=False)
    saver = SqliteSaver(conn)
    with agui_store.open(path) as store:
        answer = store.checkout(newest, thread_id=THREAD)
        found = saver.get_tuple(config)
        assert found is not None and found.checkpoint["channel_values"]["messages"] == messages
        document = msgspec.json.encode({"messages": answer.messages, "state": answer.state})
        figures = alternating(
            {
                "checkout": lambda: store.checkout(newest, thread_id=THREAD),
                "get_tuple": lambda: saver.get_tuple(config),
                "decode": lambda: msgspec.json.decode(document),
            },
            repeat,
        )
    conn.close()
    figures["messages"] = len(messages)
    return figures


#: The floor on PostgreSQL: one query returning the newest checkpoint's message blobs in list
#: order (what a store that kept the answer as chunks must read at least), in the store's
#: schema; their decode follows.
FLOOR_IDS = """
SELECT m.data, c.tail FROM agui_store.checkpoints c JOIN agui_store.runs r ON r.id = c.run
LEFT JOIN agui_store.blobs m ON m.id = c.chunks WHERE r.run_id = %s
"""
FLOOR_QUERY = """
SELECT b.data FROM unnest(%s::bigint[]) WITH ORDINALITY AS ids(id, n)
JOIN agui_store.blobs b ON b.id = ids.id ORDER BY ids.n
"""


def floor_ids(conn: Any, newest: str) -> list[int]:
    """The ids of ``newest``'s message blobs in list order, read on ``conn``."""
    row = conn.execute(FLOOR_IDS, (newest,)).fetchone()
    assert row is not None, f"{newest} has no checkpoint"
    manifest, tail = row
    ids: list[int] = msgspec.json.decode(manifest) if manifest else []
    return ids + [blob_id for blob_id, _ in msgspec.json.decode(tail)]


def postgres_floor(dsn: str, newest: str, messages: list[Any]) -> Callable[[], list[Any]]:
    """The floor of a checkout of ``newest`` on PostgreSQL: one query for its message
    blobs' texts in list order (their ids found beforehand, untimed), then their decode,
    on a connection of its own left open (closed when the script exits)."""
    import psycopg

    raw = psycopg.connect(dsn, autocommit=True)
    atexit.register(raw.close)
    ids = floor_ids(raw, newest)
    cursor = raw.cursor(binary=True)

    def floor() -> list[Any]:
        rows = cursor.execute(FLOOR_QUERY, (ids,)).fetchall()
        return [m for (data,) in rows for m in msgspec.json.decode(data)]

    assert floor() == messages
    return floor


def postgres_figures(n: int, seed: int, repeat: int) -> dict[str, float]:
    from benchmarks.bench_postgres_langgraph import PostgresThread

    dsn = throwaway_postgres()
    messages = build(dsn, n, seed)
    newest = f"r{n - 1}"
    lg = PostgresThread(dsn)
    for i in range(LG_KEEP, -1, -1):
        lg.put_run(f"r{n - 1 - i}", messages[: len(messages) - 2 * i])
    config = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
    found = lg.saver.get_tuple(config)
    assert found is not None and found.checkpoint["channel_values"]["messages"] == messages
    with agui_store.open(dsn) as store:
        floor = postgres_floor(dsn, newest, messages)
        assert store.checkout(newest, thread_id=THREAD).messages == messages
        trips = round_trips(store, lambda: store.checkout(newest, thread_id=THREAD))
        figures = alternating(
            {
                "checkout": lambda: store.checkout(newest, thread_id=THREAD),
                "get_tuple": lambda: lg.saver.get_tuple(config),
                "floor": floor,
            },
            repeat,
        )
    lg.close()
    figures["messages"] = len(messages)
    figures["round trips"] = trips
    return figures


def round_trips(store: agui_store.Store, fn: Callable[[], Any], count: int = 5) -> float:
    """Round trips ``fn`` makes to the server on ``store``'s connection, per call: psycopg
    sends one per ``execute`` of a client-side cursor (and fetches its rows with it)."""
    import psycopg

    own = testing.connection(store)
    sent = 0
    execute = psycopg.Cursor.execute

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        sent += self.connection is own
        return execute(self, *args, **kwargs)

    psycopg.Cursor.execute = counted  # type: ignore[method-assign]
    try:
        for _ in range(count):
            fn()
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    return sent / count


def built(location: str, n: int) -> list[Any] | None:
    """The newest run's messages of the thread an earlier run of this script left at
    ``location`` (``None``: it holds none of ``n`` runs)."""
    with agui_store.open(location) as store:
        try:
            return store.checkout(f"r{n - 1}", thread_id=THREAD).messages
        except agui_store.RunNotFoundError:
            return None


def profile(
    n: int, seed: int, count: int, postgres: bool = False, dsn: str | None = None
) -> None:
    """cProfile of ``count`` checkouts of the newest run (the top 25 by own time); on
    PostgreSQL, with the round trips per checkout and the median time of a checkout and
    of its floor, timed in turns outside the profile. ``dsn``: a database of an earlier
    run's, whose thread is used again (built there when it is missing)."""
    newest = f"r{n - 1}"
    if postgres:
        location = dsn or throwaway_postgres()
    else:
        location = os.path.join(scratch_dir("agui-bench-turns-"), "profile.db")
    messages = built(location, n) if dsn else None
    if messages is None:
        messages = build(location, n, seed)
    with agui_store.open(location) as store:
        store.checkout(newest, thread_id=THREAD)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(count):
            store.checkout(newest, thread_id=THREAD)
        profiler.disable()
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(25)
        if postgres:
            checkout = lambda: store.checkout(newest, thread_id=THREAD)  # noqa: E731
            print(f"round trips per checkout: {round_trips(store, checkout):.2f}")
            floor = postgres_floor(location, newest, messages)
            figures = alternating(
                {"checkout": lambda: store.checkout(newest, thread_id=THREAD), "floor": floor},
                count,
            )
            print(
                f"median of {count} in turns: checkout {figures['checkout'] * 1e3:.3f} ms, "
                f"floor {figures['floor'] * 1e3:.3f} ms, "
                f"{figures['checkout'] / figures['floor']:.2f}x"
            )
            postgres_split(store, location, newest, count)


def postgres_split(store: agui_store.Store, dsn: str, newest: str, count: int) -> None:
    """Where a PostgreSQL checkout's time goes beside its floor's: whether the store's
    connection runs the checkout statement prepared, with its generic plan (its plans so
    far); the server's planning and execution of each statement, rows not sent (``EXPLAIN
    ANALYZE`` of an ``EXECUTE`` of the generic plan, medians); and, timed in turns, each
    statement with its rows, the decode of the answer, the checkout and the floor."""
    import psycopg

    from agui_store.backends.postgres import schema, sql

    own = testing.connection(store)
    for generic, custom in own.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s",
        (_numbered(sql.RUN_CHECKOUT),),
    ):
        print(
            f"checkout statement prepared on the store's connection: {generic} generic "
            f"plans, {custom} custom"
        )
    raw = psycopg.connect(dsn, autocommit=True)
    atexit.register(raw.close)
    raw.execute(f"SET search_path TO {schema.SCHEMA}")
    ids = floor_ids(raw, newest)
    raw.execute("PREPARE bench_checkout(text, text, text) AS " + _numbered(sql.RUN_CHECKOUT))
    raw.execute("PREPARE bench_floor(bigint[]) AS " + FLOOR_QUERY.replace("%s", "$1"))
    raw.execute("SET plan_cache_mode = force_generic_plan")
    calls = {
        "checkout statement": f"EXECUTE bench_checkout('{THREAD}', '{newest}', NULL)",
        "floor query": f"EXECUTE bench_floor(ARRAY{ids}::bigint[])",
    }
    server: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in calls}
    for _ in range(count):
        for name, call in calls.items():
            plan = "\n".join(
                line for (line,) in raw.execute("EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) " + call)
            )
            for times, label in zip(server[name], ("Planning", "Execution")):
                times.append(float(plan.split(f"{label} Time: ")[1].split()[0]))
    for name, (planning, execution) in server.items():
        print(
            f"server, {name}: planning {statistics.median(planning):.3f} ms, "
            f"execution {statistics.median(execution):.3f} ms (rows not sent)"
        )
    args = {"thread_id": THREAD, "run_id": newest, "scope": None}
    cursor = raw.cursor(binary=True)
    texts = [data for (data,) in cursor.execute(FLOOR_QUERY, (ids,))]
    floor = postgres_floor(dsn, newest, [m for t in texts for m in msgspec.json.decode(t)])
    parts = alternating(
        {
            "checkout statement": lambda: cursor.execute(sql.RUN_CHECKOUT, args).fetchall(),
            "floor query": lambda: cursor.execute(FLOOR_QUERY, (ids,)).fetchall(),
            "decode": lambda: [m for t in texts for m in msgspec.json.decode(t)],
            "checkout": lambda: store.checkout(newest, thread_id=THREAD),
            "floor": floor,
        },
        count,
    )
    spent = ", ".join(f"{name} {seconds * 1e3:.3f} ms" for name, seconds in parts.items())
    print(f"median of {count} in turns: {spent}")


def _numbered(statement: str) -> str:
    """``statement`` (the checkout's) with its named placeholders numbered, as psycopg
    prepares it."""
    for n, name in enumerate(("thread_id", "run_id", "scope"), 1):
        statement = statement.replace(f"%({name})s", f"${n}")
    return statement


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default="2000,10000")
    parser.add_argument("--repeat", type=int, default=301)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--postgres", action="store_true", help="also on PostgreSQL")
    parser.add_argument("--profile", type=int, default=0, help="profile this many checkouts")
    parser.add_argument(
        "--dsn", help="with --profile --postgres: this database instead of a throwaway one"
    )
    parser.add_argument(
        "--files",
        help="keep the SQLite stores in this folder, and reuse those there (building 10,000 "
        "runs takes minutes)",
    )
    args = parser.parse_args()
    sizes = [int(r) for r in args.runs.split(",")]
    if args.profile:
        profile(sizes[0], args.seed, args.profile, args.postgres, args.dsn)
        return
    header("checkout of a short-turn conversation's newest run (store open, timed in turns)")
    print(f"median of {args.repeat} alternating rounds, one process")
    print()
    print(
        "| runs | messages | checkout ms | get_tuple ms | checkout / get_tuple "
        "| decode ms | checkout / decode |"
    )
    print("|---|---|---|---|---|---|---|")
    tmp = args.files or scratch_dir("agui-bench-turns-")
    os.makedirs(tmp, exist_ok=True)
    results: dict[int, dict[str, float]] = {}
    for n in sizes:
        f = results[n] = sqlite_figures(tmp, n, args.seed, args.repeat)
        print(
            f"| {n:,} | {int(f['messages']):,} | {f['checkout'] * 1e3:.3f} "
            f"| {f['get_tuple'] * 1e3:.3f} | {f['checkout'] / f['get_tuple']:.2f}x "
            f"| {f['decode'] * 1e3:.3f} | {f['checkout'] / f['decode']:.2f}x |"
        )
    pg: dict[int, dict[str, float]] = {}
    if args.postgres:
        print()
        print("PostgreSQL (a throwaway local cluster, over its socket):")
        print()
        print(
            "| runs | round trips | checkout ms | floor ms | checkout / floor "
            "| PostgresSaver.get_tuple ms | checkout / get_tuple |"
        )
        print("|---|---|---|---|---|---|---|")
        for n in sizes[:1]:
            f = pg[n] = postgres_figures(n, args.seed, max(51, args.repeat // 3))
            print(
                f"| {n:,} | {f['round trips']:.0f} | {f['checkout'] * 1e3:.3f} "
                f"| {f['floor'] * 1e3:.3f} "
                f"| {f['checkout'] / f['floor']:.2f}x | {f['get_tuple'] * 1e3:.3f} "
                f"| {f['checkout'] / f['get_tuple']:.2f}x |"
            )
    print()
    if 2000 in results:
        ratio = results[2000]["checkout"] / results[2000]["get_tuple"]
        print(
            f"goal: checkout <= 1.0x get_tuple at 2,000 runs: {ratio:.2f}x "
            f"-> {'met' if ratio <= 1.0 else 'NOT met'}"
        )
    if 10000 in results:
        ratio = results[10000]["checkout"] / results[10000]["decode"]
        print(
            f"goal: checkout <= 1.25x the decode of its answer at 10,000 runs: {ratio:.2f}x "
            f"-> {'met' if ratio <= 1.25 else 'NOT met'}"
        )
    for n, f in pg.items():
        floor, saver = f["checkout"] / f["floor"], f["checkout"] / f["get_tuple"]
        print(
            f"goal: PostgreSQL checkout <= 1.0x its floor at {n:,} runs: {floor:.2f}x "
            f"-> {'met' if floor <= 1.0 else 'NOT met'}"
        )
        print(
            f"goal: PostgreSQL checkout <= 1.0x PostgresSaver.get_tuple at {n:,} runs: "
            f"{saver:.2f}x -> {'met' if saver <= 1.0 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
