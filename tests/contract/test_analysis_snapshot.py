"""The analysis export on every backend: it reads the store as of one moment, as the archive
does, so that what other connections write or erase while it runs neither fails it nor
leaves half a thread in it."""

from __future__ import annotations

from pathlib import Path

import sqlite_utils

import agui_store
from agui_store.exports.analysis import export_sqlite
from tests.streams import run, say


def _threads(store: agui_store.Store, *names: str) -> None:
    for name in names:
        for turn in range(2):
            store.append(run(name, f"{name}-r{turn}", *say(f"{name}-m{turn}", f"{name} {turn}")))


def _exported(out: Path) -> list[tuple[str, str]]:
    db = sqlite_utils.Database(out)
    try:
        return [
            (row[0], row[1])
            for row in db.execute(
                "SELECT threads.thread_id, runs.run_id FROM runs "
                "JOIN threads ON threads.id = runs.thread ORDER BY runs.id"
            ).fetchall()
        ]
    finally:
        db.close()


def test_a_thread_erased_while_the_export_runs_neither_fails_it_nor_is_cut_in_half(
    store_location: str, tmp_path: Path
) -> None:
    # The erasing store's purge waits its busy timeout for the export's snapshot, which ends
    # only once the erasure returns: a short one keeps that wait short.
    with (
        agui_store.open(store_location) as store,
        agui_store.open(store_location, busy_timeout_ms=500) as other,
    ):
        _threads(store, "a", "b", "c")
        before = _exported_of(store, tmp_path / "before.db")

        def erase_midway(done: int, total: int) -> None:
            if done == 1:  # "a" is half written; "b" and "c" are still to come
                other.delete_thread("a")
                other.delete_thread("c")

        summary = export_sqlite(store, tmp_path / "during.db", progress=erase_midway)
        assert (summary.threads, summary.runs) == (3, 6)
        assert _exported(tmp_path / "during.db") == before
        assert store.threads() == ["b"]


def test_runs_appended_while_the_export_runs_are_left_for_the_next_one(
    store_location: str, tmp_path: Path
) -> None:
    with agui_store.open(store_location) as store, agui_store.open(store_location) as other:
        _threads(store, "a", "b")
        before = _exported_of(store, tmp_path / "before.db")

        def append_midway(done: int, total: int) -> None:
            if done == 1:
                _threads(other, "c")
                other.append(run("b", "b-r2", *say("b-m2", "b 2")))

        summary = export_sqlite(store, tmp_path / "during.db", progress=append_midway)
        assert (summary.threads, summary.runs) == (2, 4)
        assert _exported(tmp_path / "during.db") == before


def _exported_of(store: agui_store.Store, out: Path) -> list[tuple[str, str]]:
    export_sqlite(store, out)
    return _exported(out)
