"""A run's content hash depends on the run's content and lineage alone: the same thread has
the same hashes in every store that holds it, however its writes were numbered, and a store
written when hashes covered its own sequence numbers is rehashed when it is opened."""

from __future__ import annotations

from typing import Any

import pytest

import agui_store
from agui_store.engine import clock
from tests.backends import checked
from tests.schema_history import as_sequence_hashed
from tests.test_sync import record_run, run_events, sample_history


def hashes(store: agui_store.Store) -> dict[tuple[str, str], Any]:
    """Every run's content hash, by thread and run id."""
    out: dict[tuple[str, str], Any] = {}
    for thread_id in store.threads():
        for scope in (None, "alice"):
            if thread_id in store.threads(scope=scope):
                for run in store.runs(thread_id, scope=scope):
                    out[thread_id, run.run_id] = run.hash
    return out


def write_thread(store: agui_store.Store, between: Any = None) -> None:
    """One thread: inputs, an echo, a fork, a run in three batches, two runs streaming at
    once; ``between()`` is called between its writes."""
    step = between or (lambda: None)
    record_run(store, "t", "r1", with_input=True)
    step()
    record_run(store, "t", "r2", parent="r1", with_input=True, pieces=3, between=between)
    step()
    record_run(store, "t", "r3", parent="r1", echo=True, branch="alt")
    step()
    a, b = run_events("t", "r4", "four"), run_events("t", "r5", "five")
    store.append(a[:2], thread_id="t", parent="r2")
    step()
    store.append(b[:2], thread_id="t", parent="r2")
    store.append(a[2:], thread_id="t", run_id="r4")
    step()
    store.append(b[2:], thread_id="t", run_id="r5")


def test_the_same_thread_has_the_same_hashes_however_the_store_numbered_its_events(
    new_location: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recorded times are content: both stores record the thread at the same moments.
    monkeypatch.setattr(clock, "now_ms", lambda: 1_700_000_000_000)
    with agui_store.open(new_location()) as alone, agui_store.open(new_location()) as busy:
        write_thread(alone)
        # Other threads written first and between every write of it: its events get other
        # sequence numbers, its runs other keys.
        record_run(busy, "other", "o0", with_input=True)
        counter = iter(range(1, 100))

        def interleave() -> None:
            n = next(counter)
            busy.append(run_events("other", f"o{n}", "x" * n), thread_id="other")

        write_thread(busy, interleave)
        mine = {key: h for key, h in hashes(busy).items() if key[0] == "t"}
        assert mine == hashes(alone)
        assert all(h is not None for h in mine.values()) and len(mine) == 5
        assert checked(alone) and checked(busy)


def test_a_store_hashed_over_its_sequence_numbers_is_rehashed_when_opened_and_checks_sound(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        sample_history(store)
        # An erasure too: its log entry must verify after the rehash, its hole stay logged.
        record_run(store, "gone", "g1", with_input=True)
        store.delete_thread("gone")
        store.derive()
        expected = hashes(store)
        assert checked(store)
        erasures = store.check().erasures
        assert len(erasures) == 1
    assert as_sequence_hashed(store_location) > 0
    with agui_store.open(store_location) as store:
        assert hashes(store) == expected
        assert checked(store)
        assert store.check().erasures == erasures
        # What is appended afterwards chains onto the rehashed runs.
        record_run(store, "t1", "r6", parent="r3", with_input=True)
        assert checked(store)
