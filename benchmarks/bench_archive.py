"""The archive: a whole store exported to a file and imported into a new store, against
``copy`` of the same store to a new file (the baseline, measured in the same run), and the
memory both directions take as the store grows.

The source holds ``--runs`` runs in threads of ``--runs-per-thread`` (``_common.conversation``:
streamed text, a tool call, state patches; ``--events`` a run), every thread's first run
with its request body recorded. Measured, median of ``--repeat`` runs, each into a new
destination file opened with ``derive_on_append=False`` (the log alone: derivation costs the
same after either):

- baseline: ``copy`` of the whole store to a new file;
- ``export_archive`` of the whole store to a file, then ``import_archive`` of it into a new
  file; and each alone.

Memory: tracemalloc's peak during an export and during an import of the whole store, at a
quarter of ``--runs`` and at ``--runs`` (same thread size): an archive holds one thread at
a time, so the peak follows the largest thread, not the store.

    python -m benchmarks.bench_archive [--runs 10000] [--runs-per-thread 20] [--events 10]
                                       [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from pathlib import Path

import agui_store
from benchmarks._common import conversation, header, scratch_dir


def build_source(path: Path, runs: int, per_thread: int, events: int) -> int:
    """The source store; returns its event count."""
    total = 0
    with agui_store.Store(path, derive_on_append=False) as store:
        for t in range(runs // per_thread):
            thread = f"t{t:05d}"
            for turn, run in enumerate(conversation(thread, per_thread, events)):
                body = None
                if not turn:
                    body = {"threadId": thread, "runId": run[0]["runId"], "state": {},
                            "messages": [{"id": f"u-{t}", "role": "user", "content": "hi"}],
                            "tools": [], "context": [], "forwardedProps": {}}  # fmt: skip
                store.append(run, thread_id=thread, input=body)
                total += len(run)
    return total


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def peaks(src: Path, tmp: Path, tag: str) -> tuple[int, int]:
    """tracemalloc's peak bytes during an export of ``src`` and an import of it."""
    archive = tmp / f"peak-{tag}.jsonl"
    with agui_store.Store(src) as store:
        tracemalloc.start()
        store.export_archive(archive)
        exported = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    with agui_store.Store(tmp / f"peak-{tag}.db", derive_on_append=False) as store:
        tracemalloc.start()
        store.import_archive(archive)
        imported = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return exported, imported


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--runs-per-thread", type=int, default=20)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    header(
        f"archive: {args.runs} runs in threads of {args.runs_per_thread} x {args.events} "
        "events, exported and imported against copy"
    )
    tmp = Path(scratch_dir("agui-bench-archive-"))
    src = tmp / "src.db"
    t0 = time.perf_counter()
    total = build_source(src, args.runs, args.runs_per_thread, args.events)
    print(f"source built in {time.perf_counter() - t0:.1f} s: {total} events, "
          f"{os.path.getsize(src) / 1e6:.1f} MB")

    copied, exported, imported = [], [], []
    size = 0
    for n in range(args.repeat):
        with agui_store.Store(tmp / f"copy-{n}.db", derive_on_append=False) as target:
            t0 = time.perf_counter()
            result = agui_store.copy(src, target)
            copied.append(time.perf_counter() - t0)
        assert result.events == total
        archive = tmp / f"archive-{n}.jsonl"
        with agui_store.Store(src) as store:
            t0 = time.perf_counter()
            store.export_archive(archive)
            exported.append(time.perf_counter() - t0)
        size = os.path.getsize(archive)
        with agui_store.Store(tmp / f"imported-{n}.db", derive_on_append=False) as target:
            t0 = time.perf_counter()
            added = target.import_archive(archive)
            imported.append(time.perf_counter() - t0)
        assert added.events == total
    print(f"archive: {size / 1e6:.1f} MB")
    base = median(copied)
    both = median(exported) + median(imported)
    print(f"{'':34} {'seconds':>9} {'events/s':>12} {'vs copy':>9}")
    for label, t in [
        ("copy to a new file (baseline)", base),
        ("export + import", both),
        ("export alone", median(exported)),
        ("import alone", median(imported)),
    ]:
        print(f"{label:34} {t:9.3f} {total / t:12,.0f} {t / base:9.2f}")

    small = tmp / "small.db"
    build_source(small, args.runs // 4, args.runs_per_thread, args.events)
    low = peaks(small, tmp, "small")
    high = peaks(src, tmp, "large")
    print(f"{'tracemalloc peak (MB)':34} {'export':>9} {'import':>12}")
    print(f"{f'{args.runs // 4} runs':34} {low[0] / 1e6:9.2f} {low[1] / 1e6:12.2f}")
    print(f"{f'{args.runs} runs':34} {high[0] / 1e6:9.2f} {high[1] / 1e6:12.2f}")
    print(f"{'ratio (4x the store)':34} {high[0] / low[0]:9.2f} {high[1] / low[1]:12.2f}")
    print("(an export holds the list of the store's thread ids, tens of bytes a thread, and "
          "one thread at a time)")


if __name__ == "__main__":
    main()
