"""Shared helpers for the benchmark scripts: environment header, timing, synthetic runs."""

from __future__ import annotations

import atexit
import contextlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import apsw
import msgspec

import agui_store
from agui_store import testing


def header(title: str) -> None:
    print(f"# {title}")
    print(
        f"python {platform.python_version()} | apsw {apsw.apsw_version()} | "
        f"sqlite {apsw.sqlite_lib_version()} | msgspec {msgspec.__version__} | "
        f"{platform.machine()} | {os.cpu_count()} cores | {sys.platform}"
    )


def median_time(
    fn: Callable[[], Any], *, repeat: int = 5, setup: Callable[[], Any] | None = None
) -> float:
    """Median wall time of ``fn`` over ``repeat`` runs (``setup`` untimed before each)."""
    times = []
    for _ in range(repeat):
        if setup:
            setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def scratch_dir(prefix: str) -> str:
    """A new temporary directory for a benchmark's databases, removed when the script exits
    (however it exits short of a kill): a 10,000-run benchmark leaves hundreds of megabytes."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def throwaway_postgres() -> str:
    """A new database on a throwaway socket-only PostgreSQL cluster (the tests',
    ``tests/postgres_cluster.py``), destroyed when the script exits."""
    from tests.postgres_cluster import PostgresCluster, PostgresServer

    cluster = PostgresCluster.create()
    atexit.register(cluster.destroy)
    return PostgresServer(dsn=cluster.dsn()).create_database()


@contextlib.contextmanager
def raw_connection(path: str) -> Iterator[apsw.Connection]:
    """The connection a store opens on ``path`` (its schema, pragmas and busy timeout), for
    the raw-apsw baselines: they write their rows with ``with conn:`` (apsw's transaction),
    bypassing everything the store does. Reached through the documented test hook
    :func:`agui_store.testing.connection`."""
    with agui_store.open(path) as store:
        yield testing.connection(store)


def conversation_run(
    thread: str, run_id: str, n_events: int, turn: int, parent: str | None = None
) -> list[dict[str, Any]]:
    """A realistic run of exactly ``n_events`` events: streamed text, a tool call, state."""
    started: dict[str, Any] = {"type": "RUN_STARTED", "threadId": thread, "runId": run_id}
    if parent:
        started["parentRunId"] = parent
    events: list[dict[str, Any]] = [started]
    call = f"call-{turn}"
    events += [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call,
            "toolCallName": "search",
            "parentMessageId": f"a-{turn}-tool",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": '{"q": "weather"}'},
        {"type": "TOOL_CALL_END", "toolCallId": call},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"r-{turn}",
            "toolCallId": call,
            "content": "sunny, 21C",
        },
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/turns/-", "value": turn}]},
    ]
    mid = f"a-{turn}"
    events.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
    n_deltas = n_events - len(events) - 2
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"word{i} "}
        for i in range(n_deltas)
    ]
    events.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
    events.append({"type": "RUN_FINISHED", "threadId": thread, "runId": run_id})
    assert len(events) == n_events
    return events


def conversation(thread: str, n_runs: int, n_events: int) -> list[list[dict[str, Any]]]:
    """A chain of ``n_runs`` runs of ``n_events`` events each; the first run sets the state
    the later ones patch (without it every STATE_DELTA would fail and pile up warnings)."""
    runs = [conversation_run(thread, f"run-{i}", n_events, i) for i in range(n_runs)]
    if runs:
        runs[0].insert(1, {"type": "STATE_SNAPSHOT", "snapshot": {"turns": []}})
        runs[0].pop(-3)  # a text delta: keep exactly n_events events
    return runs


