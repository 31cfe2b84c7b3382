"""The storage port, through the store's one door into it: ``Store.reading()`` and
``Store.writing()`` yield the port a backend implements (:mod:`agui_store.engine.port`), on
every backend alike."""

from __future__ import annotations

import pytest

import agui_store
from tests.backends import dump
from tests.streams import run


def test_a_read_transaction_yields_the_port_and_sees_what_was_appended(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        # Asserted after the block: an error inside a transaction is the store's to report.
        with store.reading() as tx:
            found = tx.thread("t")
            run_pk = None if found is None else tx.run_pk(found[0], "r1")
            names = None if run_pk is None else (tx.run_id(run_pk), tx.run_status(run_pk))
        assert names == ("r1", "finished")


def test_a_write_transaction_that_raises_leaves_the_store_as_it_was(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        before = dump(store_location)
        with pytest.raises(RuntimeError, match="changed my mind"), store.writing() as tx:
            tx.insert_thread("u", 1, None)
            raise RuntimeError("changed my mind")
        assert dump(store_location) == before
        assert store.threads() == ["t"]
        # The store goes on: its next append lands on what it remembered before.
        store.append(run("t", "r2"))
        assert [r.run_id for r in store.runs("t")] == ["r1", "r2"]


def test_a_write_transaction_commits_when_its_block_ends(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        with store.writing("u") as tx:
            tx.insert_thread("u", 1, None)
        assert store.threads() == ["u"]
        store.append(run("u", "r1"))
        assert [r.run_id for r in store.runs("u")] == ["r1"]


def test_the_location_opens_the_same_store_again(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        with agui_store.open(store.location) as again:
            assert again.threads() == ["t"]
        assert store.location == store_location
