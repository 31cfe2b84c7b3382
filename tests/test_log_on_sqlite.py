"""``Store.log`` a page at a time on an SQLite file: its query plan, the asyncio store and the
command line. The paging rules themselves run on every backend (tests/contract/test_log.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw

import agui_store
import agui_store.aio
from agui_store import Log
from agui_store.backends.sqlite import sql


def run(thread: str, run_id: str, parent: str | None = None) -> list[dict[str, Any]]:
    started: dict[str, Any] = {"type": "RUN_STARTED", "threadId": thread, "runId": run_id}
    if parent is not None:
        started["parentRunId"] = parent
    return [started, {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id}]


def record_tree(store: agui_store.Store, thread: str, parents: list[int | None]) -> None:
    """Runs r0, r1, ... of ``thread``; run i's lineage parent is run ``parents[i]``."""
    for i, parent in enumerate(parents):
        store.append(run(thread, f"r{i}", None if parent is None else f"r{parent}"))


def test_the_async_store_pages_the_log_too(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        record_tree(store, "t", [None, 0, 1])

    async def main() -> tuple[Log, Log]:
        async with agui_store.aio.open(path) as astore:
            first = await astore.log("HEAD", thread_id="t", limit=2)
            return first, await astore.log("HEAD", thread_id="t", cursor=first.next_cursor)

    first, rest = asyncio.run(main())
    assert [r.run_id for r in first] == ["r2", "r1"] and first.next_cursor == "r0"
    assert [r.run_id for r in rest] == ["r0"] and rest.next_cursor is None


def test_a_page_walks_the_lineage_by_primary_key_and_stops_at_its_limit(tmp_path: Path) -> None:
    """What makes a page cost its length, not the lineage's depth (the SQLite backend)."""
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        record_tree(store, "t", [None, 0])
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql.LINEAGE_RUNS, (2, None, 20))]
    conn.close()
    scans = {step for step in plan if step.startswith("SCAN")}
    assert scans <= {"SCAN chain", "SCAN CONSTANT ROW"}, plan  # no table is scanned
    assert any("SEARCH runs USING INTEGER PRIMARY KEY" in step for step in plan), plan
    walk = sql.LINEAGE_RUNS.split("WITH RECURSIVE")[1].split("\n)\n")[0]
    assert "LIMIT ?3" in walk, "the recursive walk itself must stop at the limit"


# --- the command line ---------------------------------------------------------------------


def cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agui_store", "--db", str(db), *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"},
    )


def test_the_cli_pages_the_log_with_the_command_it_prints_for_the_next_page(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        record_tree(store, "t t", [None, 0, 1, 2, 3])
    whole = cli("log", "--thread", "t t", "--json", db=db)
    assert whole.returncode == 0 and whole.stderr == ""
    seen: list[Any] = []
    done = cli("log", "--thread", "t t", "--limit", "2", "--json", db=db)
    while True:
        assert done.returncode == 0, done.stderr
        page = json.loads(done.stdout)
        assert 1 <= len(page) <= 2
        seen += page
        if not done.stderr:
            break
        prefix = "next page: "
        assert done.stderr.startswith(prefix) and done.stderr.endswith("\n")
        words = shlex.split(done.stderr[len(prefix):])
        assert words[:3] == ["agui-store", "--db", str(db)] and "--cursor" in words
        done = cli(*words[3:], db=db)
    assert seen == json.loads(whole.stdout)


def test_the_cli_text_log_pages_and_refuses_a_limit_on_the_graph(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        record_tree(store, "t", [None, 0, 1])
    first = cli("log", "--thread", "t", "--limit", "2", db=db)
    assert [line.split()[0] for line in first.stdout.splitlines()] == ["r2", "r1"]
    assert first.stderr.endswith("--limit 2 --cursor r0\n")
    last = cli("log", "--thread", "t", "--limit", "2", "--cursor", "r0", db=db)
    assert [line.split()[0] for line in last.stdout.splitlines()] == ["r0"]
    assert last.stderr == ""
    graph = cli("log", "--thread", "t", "--graph", "--limit", "2", db=db)
    assert graph.returncode == 2 and "--graph draws the thread's whole run tree" in graph.stderr
    bad = cli("log", "--thread", "t", "--limit", "0", db=db)
    assert bad.returncode == 2 and "--limit: expected an integer >= 1, not 0" in bad.stderr
    other = cli("log", "--thread", "t", "--cursor", "nosuch", db=db)
    assert other.returncode == 1 and "cursor 'nosuch' names no run of thread 't'" in other.stderr
