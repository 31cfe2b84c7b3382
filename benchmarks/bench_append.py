"""append: events/s through the public API, next to raw apsw executemany of the same rows.

Both sides write the same rows (seq, run, type, payload JSON text) into a fresh WAL file with
the same pragmas, one transaction per batch of one 50-event run; the raw rows are encoded
before the clock starts. The public API also encodes and parses, validates each event
against its 1.0 shape, checks the sequence rules, decides lineage, writes run and batch
rows, replays the run through the reducer for its lineage digest, and writes a checkpoint
after every run (the default ``checkpoint_events=1``; a row shows 200): the ratio is what
that costs. A row shows ``derive_on_append=False`` (the log alone; the derived data is left
for ``derive()``, timed separately), and a second table a live run streamed one event per
append, next to raw one-event transactions. A third table counts, for the same appends, the
statements each one runs and the WAL frames its commit writes: figures the machine's load
does not move (every frame is a page written, and a share of a WAL checkpoint's fsyncs).

    python benchmarks/bench_append.py [--runs 400]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import apsw
import msgspec

import agui_store
from agui_store import testing
from agui_store.backends.sqlite import schema
from agui_store.history import hashing
from benchmarks._common import conversation, header, median_time, raw_connection, scratch_dir

EVENTS_PER_RUN = 50
#: A ``checkpoint_events`` no benchmark reaches: every run gets its digest, none a checkpoint.
NO_CHECKPOINTS = 10**12


def make_batches(n_runs: int) -> list[list[dict]]:
    return conversation("t", n_runs, EVENTS_PER_RUN)


#: A type code's name (the digest covers the name, as the store's does).
NAMES = {code: name for name, code in schema.EVENT_TYPE_CODES.items()}


def prebuilt_rows(batches: list[list[dict]]) -> list[list[tuple[int, int, int, str]]]:
    """The rows the store writes, built before timing: the baseline is executemany alone."""
    out, seq = [], 1
    for run_pk, batch in enumerate(batches, start=1):
        rows = []
        for ev in batch:
            # As the store lays the row out: the type as its code (schema 11).
            code = schema.EVENT_TYPE_CODES[ev["type"]]
            rows.append((seq, run_pk, code, msgspec.json.encode(ev).decode()))
            seq += 1
        out.append(rows)
    return out


def raw_apsw(path: str, all_rows: list[list[tuple[int, int, int, str]]]) -> None:
    with raw_connection(path) as conn:  # the store's connection: its pragmas and schema
        raw_apsw_rows(conn, all_rows, 1)


def raw_apsw_rows(
    conn: apsw.Connection, all_rows: list[list[tuple[int, int, int, str]]], first_pk: int
) -> None:
    """The baseline's transactions: each run's row and its events (the thread's row first)."""
    if first_pk == 1:
        conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)")
    for run_pk, rows in enumerate(all_rows, start=first_pk):
        with conn:
            conn.execute(
                "INSERT INTO runs(id, thread, run_id, lineage, created_at) "
                "VALUES (?, 1, ?, 'root', 0)",
                (run_pk, f"run-{run_pk}"),
            )
            conn.executemany(
                "INSERT INTO event_log(seq, run, type, payload) VALUES (?, ?, ?, ?)", rows
            )


def public_api(path: str, batches: list, **options: Any) -> None:
    with agui_store.open(path, **options) as store:
        for batch in batches:
            store.append(batch)


def deferred_then_derived(path: str, batches: list, times: list[tuple[float, float]]) -> None:
    """Appends that leave derived data for later, then ``derive()``: both timed, apart."""
    with agui_store.open(path, derive_on_append=False) as store:
        t0 = time.perf_counter()
        for batch in batches:
            store.append(batch)
        t1 = time.perf_counter()
        store.derive()
        times.append((t1 - t0, time.perf_counter() - t1))


def raw_per_event(path: str, all_rows: list[list[tuple[int, int, int, str]]]) -> None:
    """Raw apsw, one transaction per event (the run row with its first event)."""
    with raw_connection(path) as conn:
        conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)")
        for run_pk, rows in enumerate(all_rows, start=1):
            for n, row in enumerate(rows):
                with conn:
                    if n == 0:
                        conn.execute(
                            "INSERT INTO runs(id, thread, run_id, lineage, created_at) "
                            "VALUES (?, 1, ?, 'root', 0)",
                            (run_pk, f"run-{run_pk}"),
                        )
                    conn.execute(
                        "INSERT INTO event_log(seq, run, type, payload) VALUES (?, ?, ?, ?)", row
                    )


def streamed(path: str, batches: list) -> None:
    """A live run as a server records it: each event appended as it is produced."""
    with agui_store.open(path) as store:
        for batch in batches:
            for event in batch:
                store.append([event], thread_id="t")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    header("append: public API vs raw apsw executemany")
    batches = make_batches(args.runs)
    n = args.runs * EVENTS_PER_RUN
    tmp = scratch_dir("agui-bench-")
    counter = iter(range(10**6))

    def fresh() -> str:
        return os.path.join(tmp, f"{next(counter)}.db")

    paths: dict[str, str] = {}  # the file each median_time() round writes
    rows = prebuilt_rows(batches)
    as_json = [msgspec.json.encode(b) for b in batches]
    deferred_times: list[tuple[float, float]] = []
    # Every variant once per round, in turns, each on a new file: a machine whose load
    # changes during the benchmark moves every variant alike, not the ones timed last.
    variants: dict[str, Callable[[str], None]] = {
        "raw": lambda path: raw_apsw(path, rows),
        "api": lambda path: public_api(path, batches),
        "json": lambda path: public_api(path, as_json),
        # The trade-off the option makes: a checkpoint every 200 events of replay instead
        # of after every run (checkout of a run between two checkpoints then replays).
        "sparse": lambda path: public_api(path, batches, checkpoint_events=200),
        # Every run replayed for its lineage digest, but no checkpoint written: what the
        # derivation costs before its checkpoints.
        "digests": lambda path: public_api(path, batches, checkpoint_events=NO_CHECKPOINTS),
        # The log alone: lineage digests and checkpoints left for derive() (timed apart:
        # the same work, moved off the append path).
        "deferred": lambda path: deferred_then_derived(path, batches, deferred_times),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeat):
        for name, write in variants.items():
            path = fresh()
            t0 = time.perf_counter()
            write(path)
            times[name].append(time.perf_counter() - t0)
    raw, api, api_json, api_sparse, api_digests = (
        statistics.median(times[name]) for name in ("raw", "api", "json", "sparse", "digests")
    )
    print(
        f"{n} events in {args.runs} batches of {EVENTS_PER_RUN}, median of {args.repeat} "
        "rounds, the variants in turns"
    )
    print("| path | events/s | ratio to raw |")
    print("|---|---|---|")
    print(f"| raw apsw executemany | {n / raw:,.0f} | 1.00 |")
    print(f"| Store.append (dicts) | {n / api:,.0f} | {raw / api:.2f} |")
    print(f"| Store.append (JSON bytes) | {n / api_json:,.0f} | {raw / api_json:.2f} |")
    print(
        f"| Store.append (dicts), checkpoint_events=200 | {n / api_sparse:,.0f} "
        f"| {raw / api_sparse:.2f} |"
    )
    print(
        f"| Store.append (dicts), digests but no checkpoints | {n / api_digests:,.0f} "
        f"| {raw / api_digests:.2f} |"
    )
    api_deferred = statistics.median(t[0] for t in deferred_times)
    print(
        f"| Store.append (dicts), derive_on_append=False | {n / api_deferred:,.0f} "
        f"| {raw / api_deferred:.2f} |"
    )
    derive = statistics.median(t[1] for t in deferred_times)
    print(
        f"derive() afterwards: {derive * 1e3:.0f} ms for {args.runs} runs "
        f"({derive / args.runs * 1e3:.3f} ms a run; append with derivation costs "
        f"{(api - api_deferred) / args.runs * 1e3:.3f} ms a run more than without)"
    )
    for label, took in (("by default", api), ("with derive_on_append=False", api_deferred)):
        verdict = "met" if raw / took >= 0.5 else "NOT met"
        print(f"goal: Store.append >= 0.50 of raw, {label}: {raw / took:.2f} -> {verdict}")

    stream_runs = max(1, args.runs // 10)
    stream_batches = batches[:stream_runs]
    stream_rows = rows[:stream_runs]
    m = stream_runs * EVENTS_PER_RUN
    raw_stream = median_time(
        lambda: raw_per_event(paths["p"], stream_rows),
        repeat=args.repeat,
        setup=lambda: paths.__setitem__("p", fresh()),
    )
    api_stream = median_time(
        lambda: streamed(paths["p"], stream_batches),
        repeat=args.repeat,
        setup=lambda: paths.__setitem__("p", fresh()),
    )
    print()
    print(f"a live run streamed: {m} events of {stream_runs} runs, one event per transaction")
    print("| path | events/s | ratio to raw |")
    print("|---|---|---|")
    print(f"| raw apsw, one event per transaction | {m / raw_stream:,.0f} | 1.00 |")
    print(
        f"| Store.append, one event per call | {m / api_stream:,.0f} "
        f"| {raw_stream / api_stream:.2f} |"
    )
    print()
    print(
        "per append after the first quarter (counted, not timed: load does not move these); "
        "statement calls count an executemany once"
    )
    print("| path | statement calls | executions (executemany: one a row) | WAL frames a commit |")
    print("|---|---|---|---|")
    steady = args.runs - args.runs // 4
    for label, counted in (
        ("raw apsw executemany", io_counts(fresh(), batches, rows)),
        ("Store.append (dicts)", io_counts(fresh(), batches)),
        (
            "Store.append (dicts), digests but no checkpoints",
            io_counts(fresh(), batches, checkpoint_events=NO_CHECKPOINTS),
        ),
        (
            "Store.append (dicts), derive_on_append=False",
            io_counts(fresh(), batches, derive_on_append=False),
        ),
    ):
        print(
            f"| {label} | {counted.calls / steady:.2f} | {counted.rows / steady:.2f} "
            f"| {counted.per_commit():.2f} |"
        )
    whole = median_time(lambda: hash_runs(rows, per_event=False), repeat=args.repeat)
    per_event = median_time(lambda: hash_runs(stream_rows, per_event=True), repeat=args.repeat)
    print()
    print(
        "content hashes (each run's start, each batch's digest chained onto the run's hash), "
        "computed alone over the same rows, as a share of the appends above:"
    )
    print(
        f"50-event batches: {whole / args.runs * 1e6:.0f} us a run, "
        f"{whole / api:.1%} of Store.append; one event per append: "
        f"{per_event / m * 1e6:.1f} us an event, {per_event / api_stream:.1%} of the streamed run"
    )


class _Counts:
    """What a connection does, counted through apsw's hooks: statement calls (an
    ``executemany`` once, however many rows) and rows, and WAL frames per commit. Noise on
    a shared machine moves the times above, not these."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.calls = self.rows = 0
        self.frames: list[int] = []
        self._last: tuple[apsw.Cursor, str] | None = None  # held: no other cursor takes its id
        conn.exec_trace = self._statement
        conn.set_wal_hook(self._commit)

    def _statement(self, cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        self.rows += 1
        last = self._last
        if last is None or last[0] is not cursor or last[1] != sql or sql.startswith("BEGIN"):
            self.calls += 1  # an executemany runs its statement once a row, in a row
        self._last = (cursor, sql)
        return True

    def _commit(self, conn: apsw.Connection, name: str, frames: int) -> int:
        self.frames.append(frames)  # the WAL's size in frames after each commit
        return apsw.SQLITE_OK

    def per_commit(self) -> float:
        """Frames a commit adds (the WAL restarts after a checkpoint: those are left out)."""
        added = [b - a for a, b in zip(self.frames, self.frames[1:]) if b > a]
        return sum(added) / max(1, len(added))


def io_counts(path: str, batches: list, raw_rows: list | None = None, **options: Any) -> _Counts:
    """Statements and WAL frames of the appends after the first quarter (a steady file)."""
    warm = len(batches) // 4
    if raw_rows is not None:
        with raw_connection(path) as conn:
            raw_apsw_rows(conn, raw_rows[:warm], 1)
            counts = _Counts(conn)
            raw_apsw_rows(conn, raw_rows[warm:], warm + 1)
            conn.exec_trace = None
            return counts
    with agui_store.open(path, **options) as store:
        for batch in batches[:warm]:
            store.append(batch)
        conn = testing.connection(store)
        counts = _Counts(conn)
        for batch in batches[warm:]:
            store.append(batch)
        conn.exec_trace = None
        return counts


def hash_runs(all_rows: list[list[tuple[int, int, int, str]]], *, per_event: bool) -> None:
    """What ``append`` adds for tamper evidence: a run's start hash, then a digest of each
    batch chained onto the run's hash (a batch per run, or per event when streamed)."""
    for run_pk, rows in enumerate(all_rows, start=1):
        run_hash = hashing.start(
            thread_id="t",
            run_id=f"run-{run_pk}",
            lineage="head",
            sent_parent_run_id=None,
            synthetic=False,
            created_at=0,
            parent_hash=b"\0" * 32,
            input_hash=None,
        )
        for batch in [[r] for r in rows] if per_event else [rows]:
            digest = hashing.batch_digest(
                [(seq, NAMES[code], payload, None) for seq, _, code, payload in batch], None, 0
            )
            run_hash = hashing.chain(run_hash, digest)


if __name__ == "__main__":
    main()
