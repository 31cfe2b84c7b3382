"""Operations killed outright keep what the guides promise of them: a ``copy`` killed with
SIGKILL, before its commit or after it, leaves a store that ``check`` finds clean, and the
next copy completes it, searchable.

The kills are real and aimed at an observable state, not at a time: the copy is a CLI child
process, and the test kills it once the destination shows where the copy is (its write
transaction spilling into the WAL, or its runs committed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

import agui_store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def recording(threads: Sequence[str], deltas: int) -> list[bytes]:
    """JSON Lines: a run of one message per thread, each with a word of its own."""
    lines: list[bytes] = []
    for t, thread in enumerate(threads):
        mid = f"m{t}"
        events: list[dict[str, Any]] = [
            {"type": "RUN_STARTED", "threadId": thread, "runId": f"r{t}"},
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"word{t} "},
            *({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"more {i} "}
              for i in range(deltas)),
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": f"r{t}"},
        ]  # fmt: skip
        lines.extend(json.dumps(event).encode() + b"\n" for event in events)
    return lines


def source_store(tmp_path: Path, threads: int, deltas: int) -> Path:
    source = tmp_path / "source.jsonl"
    source.write_bytes(b"".join(recording([f"t{t}" for t in range(threads)], deltas)))
    db = tmp_path / "source.db"
    with agui_store.open(db) as store:
        store.import_file(source)
    return db


def start_copy(src: Path, dst: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, "-m", "agui_store", "copy", str(src), str(dst)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def kill_when(proc: subprocess.Popen[bytes], reached: Any) -> None:
    """SIGKILL ``proc`` as soon as ``reached()`` is true (polled), while it still runs."""
    deadline = time.monotonic() + 60
    while not reached():
        assert proc.poll() is None, "the copy ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL


def committed_runs(db: Path) -> int:
    """The runs committed in a store's file, read as any other reader would."""
    if not db.exists():
        return 0
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.setbusytimeout(1000)
        tables = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchall()
        return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0]) if tables else 0
    except apsw.BusyError:
        return 0
    finally:
        conn.close()


def contents(db: Path) -> dict[str, Any]:
    with agui_store.open(db) as store:
        return {
            thread: [(run.run_id, store.checkout(run.run_id, thread_id=thread).messages)
                     for run in store.runs(thread)]
            for thread in store.threads()
        }  # fmt: skip


def assert_complete_and_searchable(dst: Path, src: Path, threads: int) -> None:
    assert contents(dst) == contents(src)
    with agui_store.open(dst) as store:
        report = store.check()
        assert report.ok, report.problems
        assert not [w for w in report.warnings if w.check == "derived"], report.warnings
        for t in range(threads):
            assert [hit.thread_id for hit in store.search(f"word{t}")] == [f"t{t}"], t


def test_a_copy_killed_before_its_commit_leaves_an_empty_store_the_next_copy_fills(
    tmp_path: Path,
) -> None:
    threads = 300
    src = source_store(tmp_path, threads, deltas=300)
    dst = tmp_path / "new.db"
    wal = Path(f"{dst}-wal")
    proc = start_copy(src, dst)
    # The copy's one write transaction has spilled pages into the WAL: well inside it.
    kill_when(proc, lambda: wal.exists() and wal.stat().st_size > 2_000_000)

    with agui_store.open(dst) as store:
        assert store.threads() == []
        assert store.check().ok
    assert start_copy(src, dst).wait() == 0
    assert_complete_and_searchable(dst, src, threads)


def test_a_copy_killed_after_its_commit_while_it_derives_is_completed_by_the_next_copy(
    tmp_path: Path,
) -> None:
    """After its commit a copy derives each thread's runs in a transaction of its own; one
    killed there leaves runs waiting to be derived, which the next copy derives."""
    threads = 400
    src = source_store(tmp_path, threads, deltas=2)
    dst = tmp_path / "new.db"
    proc = start_copy(src, dst)
    kill_when(proc, lambda: committed_runs(dst) == threads)

    with agui_store.open(dst) as store:
        assert len(store.threads()) == threads
        assert store.check().ok
    assert start_copy(src, dst).wait() == 0
    assert_complete_and_searchable(dst, src, threads)


# An erasure's command, interrupted by Ctrl-C once its erasure committed: a child process
# that runs the command line and sends itself SIGINT at that step (on_erasure_step).
INTERRUPTED_AT_COMMIT = """
import os, signal, sys
from agui_store import cli, testing

def hook(step):
    if step == "committed":
        os.kill(os.getpid(), signal.SIGINT)

with testing.on_erasure_step(hook):
    sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_delete_interrupted_after_its_commit_says_the_thread_is_erased_and_to_purge(
    tmp_path: Path,
) -> None:
    """Ctrl-C between an erasure's commit and the end of its purge leaves the thread erased
    and the purge to the next one: the command says that, not that it rolled back."""
    source = tmp_path / "threads.jsonl"
    source.write_bytes(b"".join(recording(["kept", "gone"], deltas=3)))
    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        store.import_file(source)
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AT_COMMIT, "--db", str(db), "delete", "--thread",
         "gone", "--yes"],
        env=env, cwd=ROOT, capture_output=True, timeout=60,
    )  # fmt: skip
    message = proc.stderr.decode()
    assert proc.returncode == 130, message
    assert message.count("\n") == 1 and "Traceback" not in message
    assert "rolled back" not in message
    assert "erased" in message and "'agui-store purge'" in message
    with agui_store.open(db) as store:
        assert store.threads() == ["kept"]
        assert store.check().ok
        assert store.purge()

