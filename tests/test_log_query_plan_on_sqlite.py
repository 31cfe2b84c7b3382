"""The query plan of a page of ``Store.log`` on an SQLite file: it walks the lineage by primary
key and stops at its limit. The paging rules, the asyncio store and the command line run on
every backend (tests/contract/test_log.py)."""

from __future__ import annotations

from pathlib import Path

import apsw

import agui_store
from agui_store.backends.sqlite import sql
from tests.contract.test_log import record_tree


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
    assert "LIMIT +?3" in walk, "the recursive walk itself must stop at the limit"

