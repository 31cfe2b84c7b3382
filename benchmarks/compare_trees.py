"""Two source trees of agui-store (two worktrees: before and after a change), interleaved on
the same databases: the figure a change to a hot path is judged by on a busy machine.

Each tree runs in its own long-lived process with a store open on the same two files: a
10,000-run chain (``bench_log``'s) and a 1,000-run chain of 50-event runs
(``bench_checkout``'s), built once with this tree's code. Each round asks both processes the
same operation, in alternating order, so load on the machine hits both alike; the figure is
the median of the rounds' ratios (new / base). Times are each process's own CPU time
(``time.process_time``), which other work on the machine disturbs far less than wall time
(the stores are files in the page cache: a read waits for no disk). The medians of each
side's times are shown beside the ratio, but only the ratio means anything when other work
shares the machine.

    python -m benchmarks.compare_trees BASE_TREE NEW_TREE [--rounds 30]

for example with ``git worktree add --detach ../base main`` as ``BASE_TREE``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from benchmarks import bench_checkout, bench_log
from benchmarks._common import header, scratch_dir

#: One side: opens the two stores, then answers each operation named on stdin with its
#: median time in seconds.
WORKER = r"""
import sys, time
import agui_store
logs, chain = agui_store.open(sys.argv[1]), agui_store.open(sys.argv[2])
leaf = chain.runs("t")[-1].run_id
newest = logs.runs("t", limit=1)[0].run_id

def timed(call, n):
    times = []
    for _ in range(n):
        t0 = time.process_time()
        call()
        times.append(time.process_time() - t0)
    return sorted(times)[n // 2]

OPERATIONS = {
    "log(HEAD): the whole lineage": lambda: timed(lambda: logs.log("HEAD", thread_id="t"), 3),
    "runs(t): every run of the thread": lambda: timed(lambda: logs.runs("t"), 3),
    "log(HEAD, limit=20)": lambda: timed(lambda: logs.log("HEAD", thread_id="t", limit=20), 51),
    "get_run(run id)": lambda: timed(lambda: logs.get_run(newest, thread_id="t"), 101),
    "checkout(leaf of 1,000 runs)": lambda: timed(lambda: chain.checkout(leaf, thread_id="t"), 11),
}
for operation in OPERATIONS.values():
    operation()  # warm: statement caches, the stores' memory
print("ready", flush=True)
for line in sys.stdin:
    print(OPERATIONS[line.rstrip("\n")](), flush=True)
"""

OPERATIONS = [
    "log(HEAD): the whole lineage",
    "runs(t): every run of the thread",
    "log(HEAD, limit=20)",
    "get_run(run id)",
    "checkout(leaf of 1,000 runs)",
]


def start(tree: str, log_db: str, chain_db: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, log_db, chain_db],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tree,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def ask(process: subprocess.Popen[str], operation: str) -> float:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(operation + "\n")
    process.stdin.flush()
    return float(process.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    header(f"two trees interleaved: {args.base} (base) against {args.new} (new)")
    where = scratch_dir("agui-bench-")
    log_db, chain_db = os.path.join(where, "log.db"), os.path.join(where, "chain.db")
    bench_log.build(log_db, 10_000)
    bench_checkout.build(chain_db, 1000)
    base, new = start(args.base, log_db, chain_db), start(args.new, log_db, chain_db)
    print()
    print(f"| operation | base CPU ms | new CPU ms | new / base (median of {args.rounds} rounds) |")
    print("|---|---|---|---|")
    for operation in OPERATIONS:
        a_times, b_times, ratios = [], [], []
        for i in range(args.rounds):
            if i % 2:
                b = ask(new, operation)
                a = ask(base, operation)
            else:
                a = ask(base, operation)
                b = ask(new, operation)
            a_times.append(a)
            b_times.append(b)
            ratios.append(b / a)
        print(
            f"| {operation} | {statistics.median(a_times) * 1e3:.3f} | "
            f"{statistics.median(b_times) * 1e3:.3f} | {statistics.median(ratios):.3f} |",
            flush=True,
        )
    for process in (base, new):
        assert process.stdin is not None
        process.stdin.close()
        process.wait()


if __name__ == "__main__":
    main()
