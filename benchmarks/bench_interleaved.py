"""Several runs of one thread streamed at once: ``append(..., run_id=)`` one event per call,
the runs' events interleaved round-robin (what a recorder of 20 concurrent streams of one
thread writes), next to the same runs streamed one after the other through the same code,
and next to raw apsw one-event transactions in the interleaved order.

What append remembers between calls (sequence state, last sequence number, open runs) is
kept per run, so switching runs on every event should cost about what streaming one run at
a time costs. Two shapes: runs whose request bodies place them by their messages (lineage
rule 3, each below the conversation's last complete run), and runs without inputs (rule 4:
each below the run started before it, still open, so pieces of an older run reach runs
below it).

    python -m benchmarks.bench_interleaved [--runs 20] [--events 50]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import msgspec

import agui_store
from agui_store.backends.sqlite import schema
from benchmarks._common import conversation_run, header, median_time, raw_connection, scratch_dir


def make_runs(n_runs: int, n_events: int) -> list[list[dict[str, Any]]]:
    runs = [conversation_run("t", f"run-{i}", n_events, i) for i in range(n_runs)]
    for events in runs:  # each run sets the state its patches change
        events.insert(1, {"type": "STATE_SNAPSHOT", "snapshot": {"turns": []}})
        events.pop(-3)  # a text delta: keep exactly n_events events
    return runs


def interleave(runs: list[list[dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """(run index, event) round-robin over the runs."""
    out = []
    for at in range(max(map(len, runs))):
        out += [(i, events[at]) for i, events in enumerate(runs) if at < len(events)]
    return out


def seed(store: agui_store.Store) -> list[dict[str, Any]]:
    """A complete first run; returns its view's messages (what a client's body resends)."""
    events = conversation_run("t", "seed", 12, 999)
    events.insert(1, {"type": "STATE_SNAPSHOT", "snapshot": {"turns": []}})
    store.append(events)
    return store.checkout("seed").messages


def body(run_id: str, history: list[dict[str, Any]], n: int) -> dict[str, Any]:
    new = {"id": f"user-{n}", "role": "user", "content": "hello"}
    return {"threadId": "t", "runId": run_id, "messages": [*history, new], "tools": [],
            "context": [], "state": {"turns": []}}


def stream(path: str, order: list[tuple[int, dict[str, Any]]], with_inputs: bool) -> None:
    with agui_store.open(path) as store:
        history = seed(store)
        for i, event in order:
            run_id = f"run-{i}"
            if event["type"] == "RUN_STARTED" and with_inputs:
                store.append([event], run_id=run_id, input=body(run_id, history, i))
            else:
                store.append([event], thread_id="t", run_id=run_id)


def raw(path: str, order: list[tuple[int, dict[str, Any]]]) -> None:
    """Raw apsw, one transaction per event (the run row with its first event)."""
    rows = [(i, msgspec.json.encode(ev).decode(), ev["type"]) for i, ev in order]
    with raw_connection(path) as conn:
        conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)")
        started: set[int] = set()
        for seq, (i, payload, kind) in enumerate(rows, start=1):
            with conn:
                if i not in started:
                    conn.execute(
                        "INSERT INTO runs(id, thread, run_id, lineage, created_at) "
                        "VALUES (?, 1, ?, 'root', 0)",
                        (i + 1, f"run-{i}"),
                    )
                    started.add(i)
                conn.execute(  # as the store lays the row out: the type as its code
                    "INSERT INTO event_log(seq, run, type, payload) VALUES (?, ?, ?, ?)",
                    (seq, i + 1, schema.EVENT_TYPE_CODES[kind], payload),
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    header("append(run_id=): runs of one thread streamed at once, one event per call")
    runs = make_runs(args.runs, args.events)
    interleaved = interleave(runs)
    sequential = [(i, ev) for i, events in enumerate(runs) for ev in events]
    tmp = scratch_dir("agui-bench-")
    counter = iter(range(10**6))

    def fresh() -> str:
        return os.path.join(tmp, f"{next(counter)}.db")

    n = len(interleaved)
    t_raw = median_time(lambda: raw(fresh(), interleaved), repeat=args.repeat)
    print(f"{args.runs} runs x {args.events} events = {n} events, one event per transaction")
    print("| how | inputs | events/s | vs sequential | vs raw |")
    print("|---|---|---:|---:|---:|")
    print(f"| raw apsw, interleaved | - | {n / t_raw:,.0f} | - | 1.00 |")
    for with_inputs in (True, False):
        label = "bodies (rule 3)" if with_inputs else "none (rule 4)"
        t_seq = median_time(
            lambda inputs=with_inputs: stream(fresh(), sequential, inputs), repeat=args.repeat
        )
        t_mix = median_time(
            lambda inputs=with_inputs: stream(fresh(), interleaved, inputs), repeat=args.repeat
        )
        print(f"| Store.append, one run after another | {label} | {n / t_seq:,.0f} | 1.00 "
              f"| {t_raw / t_seq:.2f} |")
        print(f"| Store.append, interleaved (run_id=) | {label} | {n / t_mix:,.0f} "
              f"| {t_seq / t_mix:.2f} | {t_raw / t_mix:.2f} |")


if __name__ == "__main__":
    main()
