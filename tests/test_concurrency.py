"""Concurrent writers and readers, in several processes and threads, with default settings.

Writers wait for each other (bounded by ``busy_timeout_ms``) instead of failing; nothing is lost
or duplicated; each batch lands as one contiguous range of the global sequence; readers only
ever see whole batches; a ``Store`` may be shared between threads; after ``fork()`` a child
gets its own connection and the parent's file stays whole.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import agui_store
from agui_store import AguiStoreError, StoreBusyError
from tests.workers import plans
from tests.workers.harness import ROOT, Worker, dump, scale, worker_env
from tests.workers.racer import SHARED_THREAD, conversation_of

pytestmark = pytest.mark.slow

PROCESSES = 3
THREADS = 3
RUNS = scale(dev=12, ci=60)


def start_all(workers: list[Worker]) -> None:
    for w in workers:
        w.wait_for("spawned", timeout=60)
    for w in workers:
        w.send("go")


def results_of(lines: list[str]) -> list[dict[str, Any]]:
    errors = [line for line in lines if line.startswith("error")]
    assert not errors, "\n".join(errors)
    return [json.loads(line) for line in lines if line.startswith("{")]


def assert_races_recorded_exactly(
    path: Path, results: list[dict[str, Any]], writers: list[str]
) -> None:
    """Every acknowledged run is there with its events, at the range append() reported;
    nothing else is; ranges never interleave; each writer's runs are in its program order;
    the shared conversation's runs form one chain in recorded order."""
    assert len(results) == len(writers) * RUNS
    by_writer: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by_writer[r["writer"]].append(r)
    assert sorted(by_writer) == sorted(writers)
    ranges = sorted((r["first_seq"], r["last_seq"]) for r in results)
    for (_, last), (first, _) in itertools.pairwise(ranges):
        assert first == last + 1, "batches interleave or leave gaps in the global sequence"
    assert ranges[0][0] == 1
    with agui_store.open(path) as store:
        for name, mine in by_writer.items():
            assert [r["index"] for r in mine] == list(range(RUNS))
            seqs = [r["first_seq"] for r in mine]
            assert seqs == sorted(seqs), f"{name}'s runs are out of its program order"
            for r in mine:
                batch = plans.race_batch(name, r["index"], r["thread"])
                assert r["run_ids"] == list(batch.run_ids)
                assert r["last_seq"] - r["first_seq"] + 1 == r["count"] == len(batch.events)
                run = store.get_run(batch.run_ids[0], thread_id=r["thread"])
                assert run is not None and run.last_seq == r["last_seq"]
                assert run.event_count == len(batch.events) and run.status == "finished"
                assert store.events(batch.run_ids[0], thread_id=r["thread"]) == batch.events
        shared = store.runs(SHARED_THREAD)
        assert len(shared) == sum(1 for r in results if r["thread"] == SHARED_THREAD)
        assert [run.parent_run_id for run in shared] == [None] + [
            run.run_id for run in shared[:-1]
        ], "each run of the shared conversation continues the one recorded before it"
        assert sum(len(store.runs(t)) for t in store.threads()) == len(results)
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
    conn = apsw.Connection(str(path))
    try:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == ranges[-1][1]
        # One batch row per append, covering exactly the reported range.
        rows = conn.execute("SELECT first_seq, last_seq FROM batches ORDER BY first_seq")
        assert [tuple(row) for row in rows] == ranges
    finally:
        conn.close()


def test_writer_processes_and_threads_racing_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    # Created up front: racing to create a file is the next test's subject.
    agui_store.open(path).close()
    names = [f"P{p}" for p in range(PROCESSES)]
    workers = [
        Worker(
            "racer",
            "writer",
            str(path),
            name,
            "--threads",
            str(THREADS),
            "--runs",
            str(RUNS),
            *(["--share-store"] if p == 0 else []),
        )
        for p, name in enumerate(names)
    ]
    started = time.monotonic()
    start_all(workers)
    results = [r for w in workers for r in results_of(w.finish(timeout=180))]
    elapsed = time.monotonic() - started
    writers = [f"{name}.{t}" for name in names for t in range(THREADS)]
    assert_races_recorded_exactly(path, results, writers)
    print(
        f"\nrace: {PROCESSES} processes x {THREADS} threads x {RUNS} runs = {len(results)} "
        f"appends, {sum(r['count'] for r in results)} events in {elapsed:.1f} s, "
        "no errors",
        file=sys.stderr,
    )


@pytest.mark.parametrize("begun", [False, True], ids=["no file yet", "file begun"])
def test_a_new_file_opened_while_another_writer_creates_it_is_not_taken_for_a_foreign_file(
    tmp_path: Path, begun: bool
) -> None:
    """Another writer creates the store between any two statements of this one's opening.

    An ``apsw.connection_hooks`` tracer stops the opening connections before their k-th
    statement (while they hold no transaction) and lets another connection create the store
    right then: every interleaving a second process could produce, one at a time,
    deterministically. Whatever the moment, the opener gets a working store. "File begun":
    the other writer has already put the new file in WAL mode and holds it open, so the
    opener first reads the file's marks and tables, read-only, to tell it from a foreign one."""
    failures: list[str] = []
    injected = 0
    for k in range(12):
        path = tmp_path / f"new-{k}.db"
        creator = apsw.Connection(str(path)) if begun else None
        if creator is not None:
            creator.execute("PRAGMA journal_mode=WAL").fetchall()
            creator.execute("SELECT count(*) FROM sqlite_schema").fetchall()  # keeps its WAL
        state: dict[str, Any] = {"seen": 0, "busy": False, "at": None}

        def hook(
            conn: apsw.Connection, k: int = k, path: Path = path, state: dict[str, Any] = state
        ) -> None:
            if state["busy"]:
                return  # the other writer's own connection: not traced

            def tracer(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
                if state["seen"] == k and conn.getautocommit() and not state["busy"]:
                    state["busy"] = True
                    try:
                        agui_store.open(path).close()  # the other writer creates the store
                    finally:
                        state["busy"] = False
                    state["at"] = sql
                state["seen"] += 1
                return True

            conn.exec_trace = tracer

        apsw.connection_hooks.append(hook)
        try:
            with agui_store.open(path) as store:
                store.append(plans.race_batch("w", k, "t").events)
        except AguiStoreError as e:
            failures.append(f"the other writer created the file before {state['at']!r}: {e}")
        finally:
            apsw.connection_hooks.remove(hook)
            if creator is not None:
                creator.close()
        injected += state["at"] is not None
    assert injected >= 5, "the tracer found too few moments to interleave"
    assert failures == []


def test_threads_sharing_one_store_append_and_read_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    threads_n = 6
    results: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    reads = [0]
    barrier = threading.Barrier(threads_n + 1)
    done = threading.Event()

    with agui_store.open(path) as store:

        def write(t: int) -> None:
            name = f"T{t}"
            try:
                barrier.wait()
                for index in range(RUNS):
                    thread = conversation_of(name, index)
                    batch = plans.race_batch(name, index, thread)
                    got = store.append(batch.events)
                    results.append(
                        {
                            "writer": name,
                            "index": index,
                            "thread": thread,
                            "run_ids": list(got.new_run_ids),
                            "first_seq": got.first_seq,
                            "last_seq": got.last_seq,
                            "count": got.event_count,
                        }
                    )
            except BaseException as e:
                errors.append(e)

        def read() -> None:
            try:
                barrier.wait()
                while not done.is_set():
                    for thread in store.threads():
                        for run in store.runs(thread):
                            assert run.status == "finished"
                            assert len(store.events(run.run_id, thread_id=thread)) == (
                                run.event_count
                            )
                        store.checkout("HEAD", thread_id=thread)
                    reads[0] += 1
            except BaseException as e:
                errors.append(e)

        writers = [threading.Thread(target=write, args=(t,)) for t in range(threads_n)]
        reader = threading.Thread(target=read)
        for th in [*writers, reader]:
            th.start()
        for th in writers:
            th.join(timeout=180)
        done.set()
        reader.join(timeout=60)
    assert not errors, errors
    assert reads[0] > 0
    global_results = sorted(results, key=lambda r: (r["writer"], r["index"]))
    assert_races_recorded_exactly(path, global_results, [f"T{t}" for t in range(threads_n)])


def _holds_batches(path: Path) -> bool:
    """Whether the store at ``path`` exists with its tables, readable by a plain connection."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.CantOpenError:
        return False
    try:
        conn.execute("SELECT count(*) FROM batches").fetchone()
        return True
    except apsw.Error:
        return False
    finally:
        conn.close()


def test_readers_see_only_whole_batches_while_writers_stream_and_race(tmp_path: Path) -> None:
    path = tmp_path / "readers.db"
    seed = 7
    batches = scale(dev=300, ci=1200)
    writers = [
        Worker("racer", "writer", str(path), f"W{p}", "--threads", "2", "--runs", str(RUNS))
        for p in range(2)
    ]
    live = Worker(
        "racer", "live", str(path), str(seed), "--batches", str(batches), "--pause-ms", "3"
    )
    readers = [Worker("racer", "reader", str(path), str(seed)) for _ in range(2)]
    start_all([*writers, live, *readers])
    # A reader in this process too, on a plain read-only connection, polling the raw tables:
    # the events and the batch rows that cover them always agree within one transaction.
    stop = threading.Event()
    raw_polls = [0]
    raw_problems: list[str] = []

    def poll_raw() -> None:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        conn.set_busy_timeout(5000)
        try:
            while not stop.is_set():
                conn.execute("BEGIN")  # one read transaction for both counts
                events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
                covered = conn.execute("SELECT coalesce(sum(count), 0) FROM batches").fetchone()[0]
                conn.execute("COMMIT")
                if events != covered:
                    raw_problems.append(f"{events} events but batches cover {covered}")
                raw_polls[0] += 1
                time.sleep(0.002)
        finally:
            conn.close()

    raw = threading.Thread(target=poll_raw)
    # The workers create the store: on a busy machine that can take a while.
    deadline = time.monotonic() + 60
    while not _holds_batches(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    raw.start()
    for w in [*writers, live]:
        lines = w.finish(timeout=180)
        assert not [line for line in lines if line.startswith("error")], lines[-5:]
    stop.set()
    raw.join(timeout=60)
    summaries = [json.loads(r.finish(timeout=120)[-1]) for r in readers]
    for summary in summaries:
        assert summary["problems"] == []
        assert summary["polls"] > 10 and summary["live_counts"] > 5, summary
    assert raw_problems == [] and raw_polls[0] > 10
    with agui_store.open(path) as store:
        expected = [e for i in range(batches) for e in plans.live_batch(seed, i)]
        assert store.events(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD) == expected
        assert store.get_run(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD).status == "incomplete"
        assert store.check().ok
    print(
        f"\nreaders: {[s['polls'] for s in summaries]} polls by 2 reader processes, "
        f"{raw_polls[0]} raw polls, {[s['live_counts'] for s in summaries]} distinct live "
        f"run lengths seen, {[s['runs_checked'] for s in summaries]} runs checked whole",
        file=sys.stderr,
    )


# --- busy timeout -------------------------------------------------------------------------


HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
print("released", flush=True)
"""


class LockHolder:
    """Another process (stdlib sqlite3) holding the write lock until told to let go."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=worker_env(),
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "holding\n"

    def release(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "released\n"
        self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[Path, Any, LockHolder]]:
    """A store of one run (``w-0`` of ``t``), as it was, and another process holding its
    write lock until released."""
    path = tmp_path / "busy.db"
    with agui_store.open(path) as store:
        store.append(plans.race_batch("w", 0, "t").events)
    before = dump(path)
    holder = LockHolder(path)
    try:
        yield path, before, holder
    finally:
        holder.kill()


def test_a_writer_blocked_longer_than_its_busy_timeout_gets_a_clear_store_busy_error(
    locked: tuple[Path, Any, LockHolder],
) -> None:
    path, before, holder = locked
    with agui_store.open(path, busy_timeout_ms=200) as store:
        # Readers are not blocked by a writer (WAL).
        assert [r.run_id for r in store.runs("t")] == ["w-0"]
        for attempt in (
            lambda: store.append(plans.race_batch("w", 1, "t").events),
            lambda: store.branch("b", "w-0", thread_id="t"),
        ):
            started = time.monotonic()
            with pytest.raises(StoreBusyError) as caught:
                attempt()
            waited = time.monotonic() - started
            assert 0.18 <= waited < 5, f"waited {waited:.2f} s for a 0.2 s busy timeout"
            error = caught.value
            assert isinstance(error, AguiStoreError) and isinstance(error, TimeoutError)
            assert "busy timeout" in str(error) and "locked" in str(error)
            assert not isinstance(error.__cause__, StoreBusyError)
        assert dump(path) == before
        holder.release()
        store.append(plans.race_batch("w", 1, "t").events)
        assert [r.run_id for r in store.runs("t")] == ["w-0", "w-1"]


def test_a_command_that_waits_out_its_busy_timeout_names_the_option_that_raises_it(
    locked: tuple[Path, Any, LockHolder],
) -> None:
    path, before, holder = locked
    argv = [sys.executable, "-m", "agui_store", "branch", "b", "w-0", "--thread", "t",
            "--db", str(path)]
    waited = subprocess.run(
        [*argv, "--busy-timeout", "150"], capture_output=True, text=True, cwd=ROOT,
        env=worker_env(), timeout=60,
    )
    assert waited.returncode == 1 and waited.stdout == ""
    said = waited.stderr.strip()
    assert said.splitlines() == [said] and "Traceback" not in said
    assert "locked by another writer" in said and "(150 ms)" in said
    assert "--busy-timeout MS" in said and "busy_timeout_ms" not in said
    assert dump(path) == before
    holder.release()
    subprocess.run([*argv, "--busy-timeout", "150"], check=True, cwd=ROOT,
                   env=worker_env(), capture_output=True, timeout=60)
    with agui_store.open(path) as store:
        assert {(b.name, b.run_id) for b in store.branches("t")} >= {("b", "w-0")}


def test_a_blocked_writer_waits_with_the_default_timeout_and_lands_when_the_lock_is_freed(
    locked: tuple[Path, Any, LockHolder],
) -> None:
    path, _, holder = locked
    timer = threading.Timer(0.6, holder.release)
    timer.start()
    started = time.monotonic()
    with agui_store.open(path) as store:
        store.append(plans.race_batch("w", 1, "t").events)
        waited = time.monotonic() - started
        assert waited >= 0.5, "the append did not wait for the other writer"
        assert [r.run_id for r in store.runs("t")] == ["w-0", "w-1"]
    timer.join()


# --- fork ---------------------------------------------------------------------------------


def in_child(work: Any) -> int:
    """Fork; run ``work()`` in the child and exit with 0 (or 1 on any exception)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns into pytest
        code = 1
        try:
            work()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def exit_code(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_store_used_in_a_forked_child_reopens_there_and_the_parent_carries_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fork.db"
    with agui_store.open(path) as store:
        store.append(plans.race_batch("parent", 0, "t").events)
        pid = in_child(lambda: store.append(plans.race_batch("child", 0, "t").events))
        assert exit_code(pid) == 0
        store.append(plans.race_batch("parent", 1, "t").events)
        assert [r.run_id for r in store.runs("t")] == ["parent-0", "child-0", "parent-1"]
        assert store.check().ok


def test_a_store_opened_by_a_relative_path_is_reopened_in_a_forked_child_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child opens the file the parent opened, not the same name in the directory the
    process moved to since (a daemon changes to / before it forks its workers)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    with agui_store.open("fork.db") as store:
        store.append(plans.race_batch("parent", 0, "t").events)
        os.chdir(elsewhere)
        pid = in_child(lambda: store.append(plans.race_batch("child", 0, "t").events))
        assert exit_code(pid) == 0
        assert [r.run_id for r in store.runs("t")] == ["parent-0", "child-0"]
    assert not (elsewhere / "fork.db").exists()


@pytest.mark.parametrize("child_store", ["the inherited Store", "a new Store"])
def test_what_a_forked_child_appends_survives_the_parent_closing_its_store(
    tmp_path: Path, child_store: str
) -> None:
    """The parent closes its store while the child keeps appending (a worker pool, a
    daemon that forks), then the child exits: its acknowledged appends must all be in the
    file. SQLite's rule (its test/forkdemo.c): a child must close the connections it
    inherited before it opens its own; otherwise it shares the parent's lock bookkeeping,
    holds no real lock, and the parent's close deletes the WAL the child is writing to."""
    path = tmp_path / "fork.db"
    parent_done_r, parent_done_w = os.pipe()
    child_acks_r, child_acks_w = os.pipe()
    store = agui_store.open(path)
    store.append(plans.race_batch("parent", 0, "t").events)

    def child() -> None:
        mine = store if child_store == "the inherited Store" else agui_store.open(path)
        mine.append(plans.race_batch("child", 0, "t").events)
        os.write(child_acks_w, b"0\n")
        os.read(parent_done_r, 1)  # the parent has closed its store
        for index in range(1, 4):
            mine.append(plans.race_batch("child", index, "t").events)
            os.write(child_acks_w, f"{index}\n".encode())
        # No close(): the child ends with os._exit, as multiprocessing's children do (or is
        # killed). What append() acknowledged must already be safe.

    pid = in_child(child)
    os.close(child_acks_w)
    assert os.read(child_acks_r, 2) == b"0\n"
    store.close()
    os.write(parent_done_w, b"x")
    assert exit_code(pid) == 0
    acks = b""
    while chunk := os.read(child_acks_r, 100):
        acks += chunk
    assert acks.split() == [b"1", b"2", b"3"]
    with agui_store.open(path) as reopened:
        assert [r.run_id for r in reopened.runs("t")] == [
            "parent-0",
            "child-0",
            "child-1",
            "child-2",
            "child-3",
        ], "appends the child was told had landed are gone"
        assert reopened.check().ok


