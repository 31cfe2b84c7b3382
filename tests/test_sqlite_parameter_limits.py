"""SQLite's limit on bound parameters (32,766): lists of keys or ids longer than it go to
SQLite as one JSON array. What checkpoints and derivation do on every backend is
tests/contract/test_derive.py and tests/contract/test_checkpoints.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import agui_store
from agui_store import testing
from tests.streams import talk


@pytest.mark.parametrize("reopen", [False, True])
def test_rule_3_takes_an_input_longer_than_sqlites_limit_on_parameters(
    tmp_path: Path, reopen: bool
) -> None:
    # Every prefix of the input's ids is a candidate; SQLite takes 32,766 parameters at most.
    path = tmp_path / "s.db"
    store = agui_store.open(path)
    for i in range(3):
        store.append(talk(f"r{i}", words=1))
    if reopen:  # a store that appended nothing yet has no view in memory to try first
        store.close()
        store = agui_store.open(path)
    many = [{"id": f"u{i}", "role": "user", "content": "?"} for i in range(33_000)]
    for run_id, base in (("long", "r2"), ("side", "r1")):
        history = store.checkout(base).messages
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
            ],
            input={"threadId": "t", "runId": run_id, "messages": [*history, *many]},
        )
        run = store.get_run(run_id)
        assert run is not None
        assert (run.parent_run_id, run.lineage) == (base, "messages")
    store.close()


def test_replaying_more_runs_than_sqlite_takes_parameters_reads_them_all(tmp_path: Path) -> None:
    # A lineage with no checkpoint to start from is replayed whole: its runs go to SQLite as
    # one JSON array, not one parameter each (a chain of 33,000 runs would be too slow here,
    # so the list holds the real runs among runs that do not exist).
    with agui_store.open(tmp_path / "s.db") as store:
        for i in range(3):
            store.append(talk(f"r{i}", words=1))
        real = [
            pk for (pk,) in testing.connection(store).execute("SELECT id FROM runs ORDER BY id")
        ]
        records = testing.records(store, [*real, *range(1000, 34_000)])
        assert [len(r.events) for r in records[:3]] == [5, 5, 5]
        assert all(not r.events for r in records[3:])

