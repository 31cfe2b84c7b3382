"""``agui-store log``: a thread's lineage with each run's label, against the same listing
without labels (``log --json``), in the same run, at two thread lengths.

A run's label is the question it added to its parent's view, which the CLI reads from the
two-dot diff of the two (what the views do not share): a label should cost about the same
at any depth, so the whole log should grow with the thread's length, not with its square.
Two threads: ``--runs`` runs of one question and one answer each, and one question followed
by ``--runs`` runs that add only an answer (a tool result sent back, a regenerate), which
take the question of the run before them; a second store of each holds a quarter of the
runs. Each command runs in this process (``agui_store.cli.main``), its output kept in
memory; the median of ``--repeat`` runs.

    python -m benchmarks.bench_cli_log [--runs 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import os

import agui_store
from agui_store import cli
from benchmarks._common import header, median_time, scratch_dir


def turn(i: int, asks: bool) -> list[dict[str, object]]:
    run_id = f"r{i}"
    events: list[dict[str, object]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": run_id}]
    said = (("user", f"question {i}"),) if asks else ()
    for role, text in (*said, ("assistant", f"answer {i}")):
        mid = f"{run_id}-{role}"
        events += [
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": role},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text},
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
        ]
    return [*events, {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id}]


def build(path: str, runs: int, every_run_asks: bool) -> None:
    with agui_store.open(path) as store:
        for i in range(runs):
            store.append(turn(i, asks=every_run_asks or i == 0))


def timed(path: str, *args: str, repeat: int) -> float:
    def run() -> None:
        out = io.StringIO()
        assert cli.main(["--db", path, "log", "--thread", "t", *args], out=out) == 0

    return median_time(run, repeat=repeat)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    header(f"agui-store log with labels, against log --json, at {args.runs // 4:,} and "
           f"{args.runs:,} runs")
    scratch = scratch_dir("agui-bench-")
    sizes = (args.runs // 4, args.runs)
    for shape, every_run_asks in (("each run asks a question", True),
                                  ("one question, then runs that add only an answer", False)):
        print()
        print(f"{shape}:")
        print()
        print("| runs | log --json (no labels) | log (labels) | log / log --json |")
        print("|---|---|---|---|")
        took: dict[int, float] = {}
        for runs in sizes:
            path = os.path.join(scratch, f"log-{runs}-{every_run_asks}.db")
            build(path, runs, every_run_asks)
            bare = timed(path, "--json", repeat=args.repeat)
            took[runs] = timed(path, repeat=args.repeat)
            print(f"| {runs:,} | {bare * 1e3:.0f} ms | {took[runs] * 1e3:.0f} ms | "
                  f"{took[runs] / bare:.1f} |")
        small, large = sizes
        print()
        print(f"{large // small}x the runs: log takes {took[large] / took[small]:.1f}x the "
              f"time (linear: {large // small}x; the square: {(large // small) ** 2}x)")

if __name__ == "__main__":
    main()
