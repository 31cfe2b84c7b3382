"""File size: a thread whose every run carries the client's full history as input.

``HttpAgent`` sends the whole conversation with every run. Stored as sent, inputs grow a
thread quadratically; agui-store keeps the messages its lineage already holds by reference.
The baseline is the same thread (same events, same checkpoints) stored without inputs.

    python -m benchmarks.bench_file_size [--runs 1000]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import agui_store
from agui_store import testing
from benchmarks._common import conversation, header, scratch_dir


def user_message(i: int) -> dict[str, Any]:
    return {
        "id": f"user-{i}",
        "role": "user",
        "content": f"Turn {i}: what about the weather in city number {i} tomorrow morning?",
    }


def http_agent_input(i: int, history: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``RunAgentInput`` ``HttpAgent`` posts for run i: the whole history it holds, the
    new user message, and the state."""
    return {
        "threadId": "t",
        "runId": f"run-{i}",
        "messages": [*history, user_message(i)],
        "state": {"turns": list(range(i))},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def build(path: str, runs: int, *, with_inputs: bool) -> None:
    with agui_store.open(path) as store:
        history: list[dict[str, Any]] = []
        for i, events in enumerate(conversation("t", runs, 50)):
            if with_inputs:
                sent = http_agent_input(i, history)
                if i:
                    sent["parentRunId"] = f"run-{i - 1}"
                store.append(events, input=sent)
                history = store.checkout(f"run-{i}").messages
            else:
                store.append(events)
        testing.connection(store).execute("PRAGMA wal_checkpoint(TRUNCATE)")


def size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def table_sizes(path: str) -> str:
    with agui_store.open(path) as store:
        rows = testing.connection(store).execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 6"
        ).fetchall()
    return ", ".join(f"{name} {n / 1e6:.2f} MB" for name, n in rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    header(f"file size: {args.runs} runs, every one with the client's full history as input")
    tmp = scratch_dir("agui-bench-")
    without = os.path.join(tmp, "without-inputs.db")
    with_ = os.path.join(tmp, "with-inputs.db")
    build(without, args.runs, with_inputs=False)
    build(with_, args.runs, with_inputs=True)
    a, b = size(without), size(with_)
    print("| thread | file MB | ratio |")
    print("|---|---|---|")
    print(f"| events only (baseline) | {a / 1e6:.2f} | 1.00 |")
    print(f"| events + full-history inputs | {b / 1e6:.2f} | {b / a:.2f} |")
    print(f"largest tables with inputs: {table_sizes(with_)}")
    print(f"goal: <= 1.5x -> {'met' if b / a <= 1.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
