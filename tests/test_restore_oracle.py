"""checkout == the official client, differentially: recorded streams and generated run trees.

The reference for each run R is ``@ag-ui/client`` 1.0.0 replaying R's events from the start
docs/design/behaviour.md#restoring defines (the parent's view, taken over by R's input
where it has one). The oracle's
answer for the parent is itself the oracle's, so nothing of ours is trusted on the way.

Here, recordings appended whole and run by run, compared on an SQLite file (the rows the two
leave); the differential checkouts run on every backend in tests/contract/test_restore.py.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

import agui_store
from agui_store import testing
from tests.conftest import fixture_params
from tests.oracle_client import Oracle

pytestmark = pytest.mark.oracle


def run_bounds(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    starts = [i for i, e in enumerate(events) if e["type"] == "RUN_STARTED"] + [len(events)]
    return list(itertools.pairwise(starts))


@pytest.mark.parametrize("events", fixture_params())
def test_recordings_appended_run_by_run_restore_like_appended_whole(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    with (
        agui_store.open(tmp_path / "whole.db") as whole,
        agui_store.open(tmp_path / "parts.db") as parts,
    ):
        whole.append(events)
        for a, b in run_bounds(events):
            parts.append(events[a:b])
        for a, _ in run_bounds(events):
            rid, tid = events[a]["runId"], events[a]["threadId"]
            x, y = whole.checkout(rid, thread_id=tid), parts.checkout(rid, thread_id=tid)
            assert (x.messages, x.state) == (y.messages, y.state)


@pytest.mark.parametrize("events", fixture_params())
def test_a_recording_appended_in_one_batch_stores_what_run_by_run_appends_store(
    oracle: Oracle, tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    """Each run of a batch is placed after the one before it completed: its lineage and its
    echoed input see that run, as they would had each come in an append of its own."""
    tid = events[0]["threadId"]
    with agui_store.open(tmp_path / "one.db") as one, agui_store.open(tmp_path / "each.db") as each:
        one.append(events)
        for a, b in run_bounds(events):
            each.append(events[a:b])
        for table in ("runs", "echo_refs"):
            columns = "run_id, parent, lineage, input_refs" if table == "runs" else "refs"
            query = f"SELECT {columns} FROM {table} ORDER BY 1"
            rows = testing.connection(one).execute(query).fetchall()
            assert rows == testing.connection(each).execute(query).fetchall()
        assert list(one.thread_events(tid)) == events
        for a, b in run_bounds(events):
            want = oracle.replay(events[:b])
            co = one.checkout(events[a]["runId"], thread_id=tid)
            assert (co.messages, co.state) == (want["messages"], want["state"])
