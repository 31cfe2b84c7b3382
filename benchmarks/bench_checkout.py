"""checkout: restoring the leaf of a chain of runs, against two same-run baselines.

Chains of 10 to 2,000 runs of 50 events each (streamed text, a tool call, a state delta),
appended run by run as a live server would. One baseline is merely reading and decoding
the chain's events; the other is decoding the result (messages + state) from one JSON
document. Full replay (no checkpoints) and checkout (from checkpoints) are both measured.

    python -m benchmarks.bench_checkout [--depths 10,100,1000,2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import msgspec

import agui_store
from agui_store import testing
from agui_store.backends.sqlite import connection
from agui_store.backends.sqlite import sql as statements
from agui_store.backends.sqlite.transaction import SqliteTransaction
from agui_store.engine import checkpoints
from agui_store.store import CHECKPOINT_EVENTS
from benchmarks._common import conversation, header, median_time, scratch_dir

EVENTS_PER_RUN = 50


def build(path: str, depth: int, checkpoint_events: int = CHECKPOINT_EVENTS) -> list[float]:
    """Append the chain run by run; returns each append's time."""
    times = []
    with agui_store.open(path, checkpoint_events=checkpoint_events) as store:
        for events in conversation("t", depth, EVENTS_PER_RUN):
            t0 = time.perf_counter()
            store.append(events)
            times.append(time.perf_counter() - t0)
    return times


def read_and_decode(store: agui_store.Store, leaf_pk: int) -> int:
    conn = testing.connection(store)
    payloads = [row[3] for row in conn.execute(statements.CHAIN_EVENTS, (leaf_pk,))]
    return len(msgspec.json.decode("[" + ",".join(payloads) + "]"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--depths", default="10,100,1000,2000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--checkpoint-events", type=int, default=CHECKPOINT_EVENTS,
        help="the store's checkpoint_events (1: a checkpoint after every run)",
    )
    args = parser.parse_args()
    header("checkout: restore the leaf of a chain of 50-event runs")
    print("read+decode: the chain's events read and decoded, nothing applied (baseline)")
    print("full replay: the view replayed from the root through the reducer, no checkpoints")
    print(
        "checkout: from the nearest checkpoint (append writes one every "
        f"{args.checkpoint_events} events): the slowest of the last runs, one checkpoint apart"
    )
    print("result decode: msgspec decoding one JSON document of the result (baseline)")
    print()
    print(
        "| runs | events | read+decode ms | full replay ms | replay / read | checkout ms "
        "| result decode ms | checkout / decode | replay / checkout |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    tmp = scratch_dir("agui-bench-")
    results = {}
    verifying: dict[int, tuple[float, float, float, float]] = {}
    growth: tuple[float, float] | None = None
    for depth in (int(d) for d in args.depths.split(",")):
        path = os.path.join(tmp, f"chain-{depth}.db")
        append_times = build(path, depth, args.checkpoint_events)
        with agui_store.open(path) as store:
            leaf = f"run-{depth - 1}"
            conn = testing.connection(store)
            leaf_pk = conn.execute("SELECT id FROM runs WHERE run_id = ?", (leaf,)).fetchone()[0]
            n = read_and_decode(store, leaf_pk)
            co = store.checkout(leaf)
            assert testing.replayed_view(store, leaf_pk).messages == co.messages
            doc = msgspec.json.encode({"messages": co.messages, "state": co.state})
            read = median_time(
                lambda s=store, pk=leaf_pk: read_and_decode(s, pk), repeat=args.repeat
            )
            replay = median_time(
                lambda s=store, c=conn, pk=leaf_pk: testing.replayed_view(s, pk), repeat=args.repeat
            )
            # append checkpoints every checkpoint_events events, so a run's distance from
            # its checkpoint depends on where it falls: the slowest run of the last window
            # is the figure (the leaf itself may be checkpointed, or the farthest from it).
            spacing = args.checkpoint_events // EVENTS_PER_RUN
            window = range(max(0, depth - spacing - 1), depth)
            checkout = max(
                median_time(lambda s=store, r=f"run-{i}": s.checkout(r), repeat=args.repeat)
                for i in window
            )
            decode = median_time(lambda d=doc: msgspec.json.decode(d), repeat=args.repeat * 4)
            verifying[depth] = verification_cost(store, leaf_pk, args.repeat)
            results[depth] = (read, replay, checkout, decode)
            if depth >= 1000:
                growth = (
                    statistics.median(append_times[400:500]),
                    statistics.median(append_times[-100:]),
                )
            print(
                f"| {depth} | {n} | {read * 1e3:.1f} | {replay * 1e3:.1f} | {replay / read:.2f}x "
                f"| {checkout * 1e3:.2f} | {decode * 1e3:.2f} | {checkout / decode:.2f}x "
                f"| {replay / checkout:.0f}x |"
            )
    print()
    print(
        "tamper evidence: reading the leaf's checkpoint verified (every blob re-hashed, the "
        "addresses against its view digest, its run hash against the run's) vs unverified, "
        "same run; and check() (hashes recomputed, every checkpoint and digest compared with a "
        "replay) vs the full replay"
    )
    print("| runs | load verified ms | unverified ms | ratio | check() s | check / replay |")
    print("|---|---|---|---|---|---|")
    for depth, (verified, unverified, check, replay) in verifying.items():
        print(
            f"| {depth} | {verified * 1e3:.2f} | {unverified * 1e3:.2f} "
            f"| {verified / unverified:.2f}x | {check:.2f} | {check / replay:.1f}x |"
        )
    if growth:
        # The state of this conversation grows every run: an append should not.
        early, late = growth
        print(
            f"appending as the thread grows: median {late * 1e3:.2f} ms an append over the "
            f"last 100 runs against {early * 1e3:.2f} ms over runs 400-500: {late / early:.2f}x"
        )
    if 1000 in results:
        read, replay, _, _ = results[1000]
        print(
            f"goal: full replay at 1,000 runs <= 3x read+decode: {replay / read:.2f}x "
            f"-> {'met' if replay / read <= 3 else 'NOT met'}"
        )
    if 2000 in results:
        _, replay, checkout, decode = results[2000]
        print(
            f"goal: checkout at 2,000 runs >= 20x faster than full replay: "
            f"{replay / checkout:.0f}x -> {'met' if replay / checkout >= 20 else 'NOT met'}"
        )
        print(
            f"goal: checkout <= 3x decoding its result: {checkout / decode:.2f}x "
            f"-> {'met' if checkout / decode <= 3 else 'NOT met'}"
        )


def verification_cost(
    store: agui_store.Store, leaf_pk: int, repeat: int
) -> tuple[float, float, float, float]:
    """``(checkpoint load verified, unverified, check(), full replay)`` in seconds."""
    conn = testing.connection(store)

    def load(verify: bool) -> None:
        with connection.snapshot(conn):
            checkpoints.load(SqliteTransaction(conn), leaf_pk, verify=verify)

    verified = median_time(lambda: load(True), repeat=repeat * 2)
    unverified = median_time(lambda: load(False), repeat=repeat * 2)
    t0 = time.perf_counter()
    assert store.check().ok
    check = time.perf_counter() - t0
    replay = median_time(lambda: testing.replayed_view(store, leaf_pk), repeat=1)
    return verified, unverified, check, replay


if __name__ == "__main__":
    main()
