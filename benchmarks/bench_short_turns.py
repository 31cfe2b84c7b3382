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
against its floor there (one query for the answer from the thread and run ids: the run's
record, its state and its message blobs in order, trusted as read; plus their decode) and
against LangGraph ``PostgresSaver.get_tuple``.

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
import itertools
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
from agui_store import Checkout, testing
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


def alternating(
    fns: dict[str, Callable[[], Any]],
    repeat: int,
    untimed: dict[str, Callable[[], Any]] | None = None,
) -> dict[str, float]:
    """Median seconds of each function, called in turns ``repeat`` times (after one call
    each to warm up), the cyclic collector run between calls so none pays for another's
    garbage; ``untimed[name]`` is called before each call of ``fns[name]``, untimed."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            if untimed and name in untimed:
                untimed[name]()
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
    writes = itertools.count()

    def another_write() -> None:
        """A run of another thread, appended by another connection: the store's next read
        trusts nothing it verified before (:mod:`agui_store.engine.trust`)."""
        run_id = f"other-{time.time_ns()}-{next(writes)}"
        other.append([
            {"type": "RUN_STARTED", "threadId": "other", "runId": run_id},
            {"type": "RUN_FINISHED", "threadId": "other", "runId": run_id},
        ])

    with agui_store.open(path) as store, agui_store.open(path) as other:
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
        # Apart: a read after another connection's write hashes every blob again, and
        # the reads after it would not be a server's next read.
        first = alternating(
            {
                "after a write": lambda: store.checkout(newest, thread_id=THREAD),
                "get_tuple": lambda: saver.get_tuple(config),
            },
            repeat,
            untimed={"after a write": another_write},
        )
        figures["after a write"] = first["after a write"]
        figures["after a write / get_tuple"] = first["after a write"] / first["get_tuple"]
    conn.close()
    figures["messages"] = len(messages)
    return figures


#: The floor on PostgreSQL: one query for the answer, from the names the checkout is given
#: (thread and run ids), in the store's schema: the run's record (what ``Run`` holds: its
#: ids, parent, times, event count, outcome, hash and branch names), its state (with the
#: state it is a patch of, when it is stored as one), interrupts and warnings, then its
#: message blobs in list order (the chunks its manifest names, then its tail segments).
#: It trusts what it reads: no address is read or checked, and the lists of ids are parsed
#: without looking at their shape. Its decode follows.
FLOOR_QUERY = r"""
WITH run AS MATERIALIZED (
    SELECT runs.*, threads.thread_id FROM agui_store.threads
    JOIN agui_store.runs ON runs.thread = threads.id
    WHERE threads.thread_id = %(thread_id)s AND runs.run_id = %(run_id)s
), ids AS (  -- the manifest's chunks (part 1), then the tail's segments (part 2), in order
    SELECT 1 AS part, x.n, x.id FROM run JOIN agui_store.checkpoints c ON c.run = run.id
    JOIN agui_store.blobs m ON m.id = c.chunks
    CROSS JOIN LATERAL unnest(string_to_array(btrim(encode(m.data, 'escape'), '[]'), ',')::bigint[])
        WITH ORDINALITY AS x(id, n)
    UNION ALL
    SELECT 2, x.n, split_part(x.pair, ',', 1)::bigint
    FROM run JOIN agui_store.checkpoints c ON c.run = run.id
    CROSS JOIN LATERAL unnest(string_to_array(btrim(c.tail, '[]'), '],['))
        WITH ORDINALITY AS x(pair, n)
)
SELECT * FROM (
    SELECT 0 AS part, 0::bigint AS n, run.thread_id, run.run_id, parent.run_id, run.lineage,
           run.parent_run_id, run.input IS NOT NULL, run.synthetic, run.created_at,
           facts.events, facts.last_seq, facts.appended_at, facts.outcome,
           coalesce(facts.hash, run.start_hash),
           ARRAY(SELECT b.name FROM agui_store.branches b
                 WHERE b.thread = run.thread AND b.run = run.id ORDER BY b.name COLLATE "C"),
           run.id = (SELECT max(n.id) FROM agui_store.runs n WHERE n.thread = run.thread),
           s.data AS state, bs.data AS state_base, i.data AS interrupts, w.data AS warnings,
           NULL::bytea AS messages
    FROM run LEFT JOIN agui_store.runs parent ON parent.id = run.parent
    CROSS JOIN LATERAL (
        SELECT sum(b.count)::bigint AS events, max(b.last_seq) AS last_seq,
               max(b.appended_at) AS appended_at,
               (array_agg(b.outcome ORDER BY b.id DESC)
                   FILTER (WHERE b.outcome IS NOT NULL))[1] AS outcome,
               (array_agg(b.hash ORDER BY b.id DESC))[1] AS hash
        FROM agui_store.batches b WHERE b.run = run.id) AS facts
    JOIN agui_store.checkpoints c ON c.run = run.id
    JOIN agui_store.blobs s ON s.id = c.state
    LEFT JOIN agui_store.checkpoints base ON base.run = c.state_base
    LEFT JOIN agui_store.blobs bs ON bs.id = base.state
    LEFT JOIN agui_store.blobs i ON i.id = c.interrupts
    LEFT JOIN agui_store.blobs w ON w.id = c.warnings
    UNION ALL
    SELECT ids.part, ids.n, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, b.data
    FROM ids JOIN agui_store.blobs b ON b.id = ids.id
) AS answer ORDER BY part, n
"""


def postgres_floor(dsn: str, newest: str, answer: Checkout) -> Callable[[], Any]:
    """The floor of a checkout of ``newest`` on PostgreSQL: :data:`FLOOR_QUERY`, then the
    decode of its state and message blobs, on a connection of its own left open (closed
    when the script exits). Checked once against ``answer``, the store's checkout; it
    holds for this benchmark's thread, whose state never changes: each run stores it as
    an empty patch of the first run's, which the floor decodes and does not apply."""
    import psycopg

    raw = psycopg.connect(dsn, autocommit=True)
    atexit.register(raw.close)
    cursor = raw.cursor(binary=True)
    names = {"thread_id": THREAD, "run_id": newest}
    decode = msgspec.json.decode

    def floor() -> tuple[tuple[Any, ...], Any, list[Any]]:
        head, *rows = cursor.execute(FLOOR_QUERY, names).fetchall()
        patches = decode(head[17])
        state = decode(head[18]) if head[18] is not None else patches
        return head, state, [m for row in rows for m in decode(row[21])]

    head, state, messages = floor()
    assert head[18] is None or decode(head[17]) == [], "the state changes in this thread"
    assert messages == answer.messages and state == answer.state, "the floor reads another answer"
    assert head[3] == answer.run.run_id and head[10] == answer.run.event_count
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
        answer = store.checkout(newest, thread_id=THREAD)
        assert answer.messages == messages
        floor = postgres_floor(dsn, newest, answer)
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
            floor = postgres_floor(location, newest, store.checkout(newest, thread_id=THREAD))
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
    raw.execute("PREPARE bench_checkout(text, text, text) AS " + _numbered(sql.RUN_CHECKOUT))
    raw.execute("PREPARE bench_floor(text, text) AS " + _numbered(FLOOR_QUERY))
    raw.execute("SET plan_cache_mode = force_generic_plan")
    calls = {
        "checkout statement": f"EXECUTE bench_checkout('{THREAD}', '{newest}', NULL)",
        "floor query": f"EXECUTE bench_floor('{THREAD}', '{newest}')",
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
    names = {"thread_id": THREAD, "run_id": newest}
    cursor = raw.cursor(binary=True)
    head, *rows = cursor.execute(FLOOR_QUERY, names).fetchall()
    texts = [t for t in (head[17], head[18], *(row[21] for row in rows)) if t is not None]
    floor = postgres_floor(dsn, newest, store.checkout(newest, thread_id=THREAD))
    parts = alternating(
        {
            "checkout statement": lambda: cursor.execute(sql.RUN_CHECKOUT, args).fetchall(),
            "floor query": lambda: cursor.execute(FLOOR_QUERY, names).fetchall(),
            "decode": lambda: [msgspec.json.decode(t) for t in texts],
            "checkout": lambda: store.checkout(newest, thread_id=THREAD),
            "floor": floor,
        },
        count,
    )
    spent = ", ".join(f"{name} {seconds * 1e3:.3f} ms" for name, seconds in parts.items())
    print(f"median of {count} in turns: {spent}")


def _numbered(statement: str) -> str:
    """``statement`` (the checkout's or the floor's) with its named placeholders numbered,
    as psycopg prepares it."""
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
        "| decode ms | checkout / decode | after a write ms | after a write / get_tuple |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    tmp = args.files or scratch_dir("agui-bench-turns-")
    os.makedirs(tmp, exist_ok=True)
    results: dict[int, dict[str, float]] = {}
    for n in sizes:
        f = results[n] = sqlite_figures(tmp, n, args.seed, args.repeat)
        print(
            f"| {n:,} | {int(f['messages']):,} | {f['checkout'] * 1e3:.3f} "
            f"| {f['get_tuple'] * 1e3:.3f} | {f['checkout'] / f['get_tuple']:.2f}x "
            f"| {f['decode'] * 1e3:.3f} | {f['checkout'] / f['decode']:.2f}x "
            f"| {f['after a write'] * 1e3:.3f} | {f['after a write / get_tuple']:.2f}x |"
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
