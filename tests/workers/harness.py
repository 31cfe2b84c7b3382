"""What the crash, concurrency and hostile-input tests share: worker processes, file dumps,
a WAL inspector and the size of each run (dev or CI profile).

Real processes only: workers are started with the same interpreter and this checkout on their
``PYTHONPATH``, so they import exactly the code under test.
"""

from __future__ import annotations

import ast
import os
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import apsw

ROOT = Path(__file__).resolve().parents[2]

#: ``HYPOTHESIS_PROFILE=ci`` (as tests/conftest.py reads it) makes every loop here bigger.
CI = os.environ.get("HYPOTHESIS_PROFILE", "dev") == "ci"


def scale(dev: int, ci: int) -> int:
    """How many times to do something: ``dev`` locally, ``ci`` under the CI profile."""
    return ci if CI else dev


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    env["PYTHONUNBUFFERED"] = "1"
    return env


def search_on_a_terminal(location: str | os.PathLike[str], query: str) -> tuple[str, list[str]]:
    """Open the store at ``location`` in a new process whose stderr is a pseudo-terminal (so a
    migration draws its progress bar there) and search it for ``query``: ``(what was drawn,
    the run ids of the hits)``."""
    script = (
        "import sys\n"
        "import agui_store\n"
        "with agui_store.open(sys.argv[1]) as store:\n"
        "    print([h.run_id for h in store.search(sys.argv[2])])\n"
    )
    leader, follower = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, os.fspath(location), query],
            stdout=subprocess.PIPE, stderr=follower, env=worker_env(), cwd=ROOT, check=True,
        )
    finally:
        os.close(follower)
    try:
        drawn = os.read(leader, 4096).decode()
    finally:
        os.close(leader)
    return drawn, ast.literal_eval(done.stdout.decode().strip())


class Worker:
    """A ``python -m tests.workers.<module>`` child speaking one line per message on stdout."""

    #: Every worker not yet reaped: a test that fails halfway leaves its others running, with
    #: their pipes open, and :func:`reap` (run after every test) ends them there rather than
    #: letting them outlive the test and warn, unclosed, in another one.
    running: list[Worker] = []

    def __init__(self, module: str, *args: str) -> None:
        self.argv = [sys.executable, "-m", f"tests.workers.{module}", *args]
        self.proc = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=worker_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        self._buffer = b""
        self.lines: list[tuple[float, str]] = []  # (monotonic time read, line)
        self._seen = 0
        Worker.running.append(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def _pump(self, timeout: float) -> bool:
        """Read what is available (waiting up to ``timeout``); False at end of output."""
        ready, _, _ = select.select([self._fd], [], [], max(timeout, 0))
        if not ready:
            return True
        chunk = os.read(self._fd, 65536)
        if not chunk:
            return False
        self._buffer += chunk
        now = time.monotonic()
        *complete, self._buffer = self._buffer.split(b"\n")
        self.lines.extend((now, line.decode()) for line in complete)
        return True

    def next_line(self, timeout: float = 30.0) -> str:
        """The next line not returned yet; fails with the worker's stderr if it ended."""
        deadline = time.monotonic() + timeout
        while self._seen >= len(self.lines):
            if not self._pump(deadline - time.monotonic()):
                self.fail("ended")
            if time.monotonic() > deadline:
                self.fail(f"said nothing for {timeout} s")
        self._seen += 1
        return self.lines[self._seen - 1][1]

    def wait_for(self, prefix: str, timeout: float = 30.0) -> str:
        while True:
            line = self.next_line(timeout)
            if line.startswith(prefix):
                return line
            if line.startswith("error"):
                self.fail(line)

    def fail(self, why: str) -> None:
        self.proc.kill()
        self.close_stdin()
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        self.proc.wait(timeout=30)
        self._close_pipes()
        raise AssertionError(
            f"worker {' '.join(self.argv[2:])} {why}; stdout so far: "
            f"{[line for _, line in self.lines][-5:]}; stderr: {err.decode()[-3000:]}"
        )

    def _close_pipes(self) -> None:
        self.close_stdin()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        if self in Worker.running:
            Worker.running.remove(self)

    def kill(self) -> None:
        """SIGKILL, then collect everything it wrote before dying."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        while self._pump(0.0):
            if not select.select([self._fd], [], [], 0)[0]:
                break
        self._close_pipes()

    def finish(self, timeout: float = 120.0) -> list[str]:
        """Wait for a clean exit and return all of its lines (fails on a non-zero exit)."""
        self.close_stdin()
        deadline = time.monotonic() + timeout
        while self._pump(deadline - time.monotonic()):
            if time.monotonic() > deadline:
                self.fail(f"did not finish within {timeout} s")
        code = self.proc.wait(timeout=30)
        assert self.proc.stderr is not None
        err = self.proc.stderr.read().decode()
        self._close_pipes()
        if code != 0:
            # A worker reports what it caught on stdout, as ``error`` lines: show them too.
            said = [line for _, line in self.lines if line.startswith("error")]
            raise AssertionError(
                f"worker {' '.join(self.argv[2:])} exited {code}: "
                f"{chr(10).join(said[-40:])}{chr(10)}stderr: {err[-3000:]}"
            )
        return [line for _, line in self.lines]

    def all_lines(self) -> list[str]:
        return [line for _, line in self.lines]


def reap() -> None:
    """End every worker a test left running (it failed before it finished them)."""
    for worker in list(Worker.running):
        if worker.proc.poll() is None:
            worker.proc.kill()
            worker.proc.wait(timeout=30)
        worker._close_pipes()


def dump(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything a store file holds: every table's rows, the schema and the pragmas that
    matter. Two equal dumps mean the file's content did not change."""
    conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        out: dict[str, Any] = {
            "user_version": conn.execute("PRAGMA user_version").fetchone(),
            "application_id": conn.execute("PRAGMA application_id").fetchone(),
            "schema": conn.execute(
                "SELECT type, name, sql FROM sqlite_schema ORDER BY type, name"
            ).fetchall(),
        }
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') ORDER BY name"
        ).fetchall():
            out[name] = conn.execute(f'SELECT * FROM "{name}" ORDER BY 1').fetchall()
        return out
    finally:
        conn.close()


def wal_tail(path: str | os.PathLike[str]) -> tuple[int, int]:
    """``(committed frames, frames after the last commit)`` of a file's WAL, counting only
    frames of the WAL's current generation (same salts as its header). Frames after the last
    commit are a transaction that was being written when its process died."""
    wal = Path(os.fspath(path) + "-wal")
    if not wal.exists():
        return 0, 0
    data = wal.read_bytes()
    if len(data) < 32:
        return 0, 0
    magic, _version, page_size, _seq, salt1, salt2 = struct.unpack(">IIIIII", data[:24])
    if magic not in (0x377F0682, 0x377F0683):
        return 0, 0
    frame = 24 + page_size
    committed = pending = 0
    for offset in range(32, len(data) - frame + 1, frame):
        _page, commit_size, s1, s2 = struct.unpack(">IIII", data[offset : offset + 16])
        if (s1, s2) != (salt1, salt2):
            break
        pending += 1
        if commit_size:
            committed += pending
            pending = 0
    return committed, pending
