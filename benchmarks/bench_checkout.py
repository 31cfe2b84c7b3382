"""checkout: restoring the leaf of a chain of runs, next to merely reading and decoding the
same events.

Chains of 10, 100 and 1,000 runs of 50 events each (streamed text, a tool call, a state
delta). The baseline reads the chain's payloads with the same ancestry query and decodes
them with msgspec; checkout additionally replays them through the official reducer's rules.

    python benchmarks/bench_checkout.py [--depths 10,100,1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import msgspec

import agui_store
from agui_store import schema
from benchmarks._common import conversation_run, header, median_time

EVENTS_PER_RUN = 50


def build(path: str, depth: int) -> None:
    with agui_store.open(path) as store:
        for i in range(depth):
            events = conversation_run("t", f"run-{i}", EVENTS_PER_RUN, i)
            if i == 0:
                events.insert(1, {"type": "STATE_SNAPSHOT", "snapshot": {"turns": []}})
                events.pop(-3)  # keep exactly 50 events
            store.append(events)


def read_and_decode(store: agui_store.Store, leaf_pk: int) -> int:
    conn = store._db
    payloads = [p for _, p in conn.execute(schema.CHAIN_EVENTS, (leaf_pk,))]
    return len(msgspec.json.decode("[" + ",".join(payloads) + "]"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--depths", default="10,100,1000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    header("checkout: restore the leaf of a chain vs read+decode its events")
    tmp = tempfile.mkdtemp(prefix="agui-bench-")
    print("| depth (runs) | events | read+decode ms | checkout ms | ratio |")
    print("|---|---|---|---|---|")
    ratios = {}
    for depth in (int(d) for d in args.depths.split(",")):
        path = os.path.join(tmp, f"chain-{depth}.db")
        build(path, depth)
        with agui_store.open(path) as store:
            leaf = f"run-{depth - 1}"
            leaf_pk = store._db.execute("SELECT id FROM runs WHERE run_id = ?", (leaf,)).fetchone()[0]
            n = read_and_decode(store, leaf_pk)
            base = median_time(lambda: read_and_decode(store, leaf_pk), repeat=args.repeat)
            co = median_time(lambda: store.checkout(leaf), repeat=args.repeat)
            ratios[depth] = co / base
            print(f"| {depth} | {n} | {base * 1000:.1f} | {co * 1000:.1f} | {co / base:.2f}x |")
    if 1000 in ratios:
        verdict = "met" if ratios[1000] <= 3 else "NOT met"
        print(f"goal: checkout at depth 1000 <= 3x read+decode -> {verdict}")


if __name__ == "__main__":
    main()
