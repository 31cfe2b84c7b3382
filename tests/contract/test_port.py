"""The storage port, through the store's one door into it: ``Store.reading()`` and
``Store.writing()`` yield the port a backend implements (:mod:`agui_store.engine.port`), on
every backend alike."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import agui_store
from tests.backends import dump
from tests.streams import run, say


def test_a_read_transaction_yields_the_port_and_sees_what_was_appended(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        # Asserted after the block: an error inside a transaction is the store's to report.
        with store.reading() as tx:
            found = tx.thread("t")
            run_pk = None if found is None else tx.run_pk(found[0], "r1")
            names = None if run_pk is None else (tx.run_id(run_pk), tx.run_status(run_pk))
        assert names == ("r1", "finished")


def test_a_lookup_of_a_name_holding_a_nul_finds_nothing_on_every_backend(
    store_location: str,
) -> None:
    """No backend stores an id with a NUL (PostgreSQL's text cannot hold one): looking one
    up is a miss, as for any name the store lacks, not an error about storing it."""
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        store.branch("b", "r1", thread_id="t")
        with store.reading() as tx:
            pk = tx.thread("t")
            found = (
                tx.thread("t\x00"), tx.threads_of_run_id("r1\x00", None),
                tx.runs_named("r1\x00", None, None), tx.branches_named("b\x00", None, None),
                tx.run_checkout("t", "r1\x00", None), tx.run_checkout("t\x00", "r1", None),
            )
        assert pk is not None and found == (None, [], [], [], None, None)
        assert store.thread("t\x00") is None and store.get_run("r1\x00", thread_id="t") is None
        with pytest.raises(agui_store.RunNotFoundError):
            store.checkout("r1\x00", thread_id="t")
        with pytest.raises(agui_store.RunNotFoundError):
            store.log("b\x00", thread_id="t")
        with pytest.raises(agui_store.RunNotFoundError):
            store.checkout("r\x00", thread_id="t")  # as a prefix of an id


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


class _Refused(Exception):
    """An error of the caller's own, raised inside a block of the store's door."""


@pytest.mark.parametrize("raised", [_Refused("changed my mind"), KeyError("t"), ValueError("no")])
def test_an_error_a_write_block_raises_itself_comes_out_as_raised_after_the_rollback(
    store_location: str, raised: Exception
) -> None:
    """As sqlite-utils' ``atomic()``: the block's own error is the caller's, not a bug in
    agui-store; the store is left as it was and goes on."""
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        before = dump(store_location)
        with pytest.raises(type(raised)) as caught, store.writing() as tx:
            tx.insert_thread("u", 1, None)
            raise raised
        assert caught.value is raised and type(caught.value) is type(raised)
        assert caught.value.__cause__ is None and caught.value.__context__ is None
        assert dump(store_location) == before
        store.append(run("t", "r2"))
        assert [r.run_id for r in store.runs("t")] == ["r1", "r2"]


def test_an_error_a_read_block_raises_itself_comes_out_as_raised(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        raised = _Refused("not this one")
        with pytest.raises(_Refused) as caught, store.reading() as tx:
            assert tx.thread("t") is not None and store.threads() == ["t"]
            raise raised
        assert caught.value is raised and caught.value.__context__ is None
        assert store.threads() == ["t"]


@pytest.mark.parametrize("door", ["reading", "writing"])
def test_an_error_of_the_port_inside_a_block_is_still_the_stores_own(
    store_location: str, door: str
) -> None:
    """What the database refuses in a call the block makes of the port is reported by the
    store, as outside a block."""
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        before = dump(store_location)
        refused = pytest.raises(agui_store.InvalidArgumentError, match="a text argument holds")
        with refused, getattr(store, door)() as tx:
            tx.threads_of_run_id("r\ud800", None)
        with pytest.raises(agui_store.IntegrityError, match="refused"), store.writing() as wtx:
            wtx.insert_thread("u", 1, None)
            wtx.insert_thread("t", 1, None)
        assert dump(store_location) == before


def test_an_interrupt_inside_a_write_block_rolls_back_and_comes_out_as_raised(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        before = dump(store_location)
        interrupt = KeyboardInterrupt()
        with pytest.raises(KeyboardInterrupt) as caught, store.writing() as tx:
            tx.insert_thread("u", 1, None)
            raise interrupt
        assert caught.value is interrupt
        assert dump(store_location) == before
        assert store.threads() == ["t"]


def test_a_generator_closed_inside_a_write_block_rolls_back_and_a_break_out_of_a_loop_commits(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        before = dump(store_location)

        def inserting() -> Iterator[int]:
            with store.writing() as tx:
                yield tx.insert_thread("u", 1, None)
                yield tx.insert_thread("v", 1, None)

        rows = inserting()
        next(rows)
        rows.close()  # GeneratorExit at the yield inside the block
        assert dump(store_location) == before and store.threads() == []
        with store.writing() as tx:
            for thread_id in ["w", "x"]:
                tx.insert_thread(thread_id, 1, None)
                break
        assert store.threads() == ["w"]


def test_a_write_transaction_commits_when_its_block_ends(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        with store.writing("u") as tx:
            tx.insert_thread("u", 1, None)
        assert store.threads() == ["u"]
        store.append(run("u", "r1"))
        assert [r.run_id for r in store.runs("u")] == ["r1"]


@pytest.mark.parametrize("door", ["reading", "writing"])
def test_a_verb_that_writes_inside_a_transaction_is_refused_by_name_and_changes_nothing(
    store_location: str, door: str
) -> None:
    """A verb commits a transaction of its own: begun inside another of the same store's,
    it is refused by the store, alike on every backend, and the block's own reads go on."""
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1", *say("m1", "kept")))
        before = dump(store_location)
        with getattr(store, door)() as tx:
            with pytest.raises(agui_store.InvalidArgumentError) as refused:
                store.delete_thread("t")
            with pytest.raises(agui_store.InvalidArgumentError):
                store.append(run("u", "r1"))
            assert tx.thread("t") is not None and store.threads() == ["t"]
        assert f"a write cannot begin inside store.{door}() of the same store" in str(
            refused.value
        )
        assert dump(store_location) == before
        store.delete_thread("t")  # after the block, as the message says
        assert store.threads() == []


def test_the_location_opens_the_same_store_again(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        with agui_store.open(store.location) as again:
            assert again.threads() == ["t"]
        assert store.location == store_location


def test_two_stores_open_on_one_database_name_the_same_one_and_two_databases_do_not(
    new_location: Any,
) -> None:
    """``database()`` names what a transaction reads, not how the store was reached: a copy
    refuses a store into itself by it."""
    first, second = new_location(), new_location()
    with (
        agui_store.open(first) as one,
        agui_store.open(first) as again,
        agui_store.open(second) as other,
        one.reading() as a,
        again.reading() as b,
        other.reading() as c,
    ):
        names = (a.database(), b.database(), c.database())
    assert names[0] == names[1]
    assert names[0] != names[2]


def test_a_store_reopened_reads_the_same(store_location: str) -> None:
    """Threads written in turns, then the store closed and opened again: the same threads,
    runs, hashes and views."""

    def seen(store: agui_store.Store) -> Any:
        return {
            thread: (
                [(r.run_id, r.hash) for r in store.runs(thread)],
                store.checkout("HEAD", thread_id=thread),
            )
            for thread in store.threads()
        }

    with agui_store.open(store_location) as store:
        for i, thread in enumerate(["a", "b", "a", "c", "b", "a"]):
            store.append(run(thread, f"r{i}", *say(f"m{i}", thread)))
        before = seen(store)
    with agui_store.open(store_location) as store:
        assert seen(store) == before


def test_a_conversation_and_its_entries_read_back_through_the_port_as_named_rows(
    store_location: str,
) -> None:
    from agui_store.engine import conversations
    from agui_store.engine.port import ConversationRow, EntryRow

    record = conversations.Record(
        conversation_id="c", head_id="e2", scope="alice", revision="v1", updated_at=7,
        record='{"conversation_id":"c"}', branches=(),
    )
    entries = [
        conversations.Entry("e1", None, "request", '{"parts":[]}'),
        conversations.Entry("e2", "e1", "response", '{"parts":[1]}'),
    ]
    with agui_store.open(store_location) as store:
        with store.writing(conversations.WRITERS_KEY) as tx:
            conversations.write_record(tx, conversations.prepare(record, entries), None)
        with store.reading() as tx:
            row = tx.conversation("c")
            history = tx.conversation_history("e2", 10)
            listed = tx.conversations("alice", 10)
    assert isinstance(row, ConversationRow) and listed == [row]
    assert (row.conversation_id, row.head_id, row.scope, row.revision, row.updated_at) == (
        "c", "e2", "alice", "v1", 7
    )
    assert all(isinstance(entry, EntryRow) for entry in history)
    assert [(e.entry_id, e.parent_id, e.kind) for e in history] == [
        ("e1", None, "request"), ("e2", "e1", "response")
    ]
    assert history[1].parent_hash == history[0].hash


def test_the_wide_rows_read_back_through_the_port_as_named_rows(store_location: str) -> None:
    from agui_store.engine import port

    with agui_store.open(store_location) as store:
        store.append(run("t", "r1", *say("hello", "t")))
        store.append(run("t", "r2", *say("again", "t")))
        r2 = store.get_run("r2", thread_id="t")
        messages = len(store.checkout("HEAD", thread_id="t").messages)
        counts = [r.event_count for r in store.runs("t")]
        with store.reading() as tx:
            found = tx.thread("t")
            assert found is not None
            thread_pk = found[0]
            pks = tx.thread_run_pks(thread_pk)
            summaries = tx.thread_run_summaries(thread_pk)
            page = tx.thread_run_page(thread_pk, pks[-1] + 1, 1)
            lineage = tx.lineage_runs(pks[-1], None, None)
            one, _, newest = tx.run_summary_and_branches(pks[-1])
            records = sorted(tx.run_records(pks))
            replicas = tx.replica_runs(thread_pk)
            batches = list(tx.batches_of_runs(pks))
            checkpoint = tx.checkpoint_row(pks[-1])
            addresses = tx.checkpoint_addresses(pks[-1])
            hashed = list(tx.hashed_runs())
            every = list(tx.every_run())
            in_order = list(tx.batches_in_order())
            hashed_batches = tx.hashed_batches()
    assert all(type(s) is port.RunSummary for s in [*summaries, *page, *lineage, one])
    assert [s.run_id for s in summaries] == ["r1", "r2"] and newest
    assert page == [one] == lineage[:1] and one == summaries[1]
    assert (one.parent_run_id, one.outcome) == ("r1", "finished")
    assert r2 is not None and one.hash is not None and one.hash.hex() == r2.hash
    assert [(r.run_id, bool(r.parent_verified)) for r in records] == [("r1", 1), ("r2", 1)]
    assert all(type(r) is port.RunRecordRow for r in records)
    assert [(r.run_id, r.parent_run_id) for r in replicas] == [("r1", None), ("r2", "r1")]
    assert all(type(r) is port.ReplicaRun for r in replicas)
    assert [type(b) for b in batches] == [port.ChainedBatch] * 2
    assert batches[0].start_hash == records[0].start_hash and batches[1].hash == one.hash
    assert type(checkpoint) is port.CheckpointRow and checkpoint.length == messages
    assert type(addresses) is port.CheckpointAddresses
    assert addresses.view_hash == checkpoint.view_hash
    assert [(type(h), h.run_id) for h in hashed] == [(port.HashedRun, r) for r in ("r1", "r2")]
    assert [(type(e), e.thread_id) for e in every] == [(port.StoredRun, "t")] * 2
    assert [(type(b), b.events) for b in in_order] == [(port.LogBatch, n) for n in counts]
    assert [b.hash for b in hashed_batches] == [b.hash for b in batches]


def test_the_words_of_each_search_row_read_back_once_and_a_threads_go_with_its_rows(
    store_location: str,
) -> None:
    from agui_store import testing

    with agui_store.open(store_location) as store:
        with testing.search_pending_rows(1):  # SQLite: its words moved into the FTS5 table
            store.append(run("t", "r1", *say("m1", "Hello hello, world", "assistant")))
        store.append(run("u", "r2", *say("m2", "other words", "assistant")))  # pending
        with store.reading() as tx:
            rows = {row.thread: row.id for row in tx.every_search_row()}
            held = list(tx.search_words_held())
            t, u = (found[0] for found in (tx.thread("t"), tx.thread("u")) if found)
        assert sorted(held) == sorted(
            [(rows[t], "hello"), (rows[t], "world"), (rows[u], "other"), (rows[u], "words")]
        )
        with store.writing() as wtx:
            wtx.forget_search_as_held([t])
        with store.reading() as tx:
            assert [row.thread for row in tx.every_search_row()] == [u]
            assert sorted(tx.search_words_held()) == [(rows[u], "other"), (rows[u], "words")]
            assert tx.search_words_apart() == ([], [])
        assert not store.search("hello") and [h.message_id for h in store.search("other")] == [
            "m2"
        ]


def test_a_run_named_in_its_thread_reads_back_with_its_checkpoint_in_one_operation(
    store_location: str,
) -> None:
    from agui_store.engine import port

    with agui_store.open(store_location) as store:
        store.append(run("t", "r1", *say("hello", "t")), scope="ann")
        store.append(run("t", "r2", *say("again", "t")), scope="ann")
        store.branch("side", "r1", thread_id="t", scope="ann")
        with store.reading() as tx:  # the transaction's first operation: maybe alone
            first = tx.run_checkout("t", "r1", None)
        with store.reading() as tx:
            found = tx.thread("t")
            assert found is not None
            r1 = tx.run_pk(found[0], "r1")
            assert r1 is not None
            summary, names, newest = tx.run_summary_and_branches(r1)
            checkpoint = tx.checkpoint_row(r1)
            again = tx.run_checkout("t", "r1", "ann")  # not the first: inside the transaction
            absent = [
                tx.run_checkout("t", "r9", None),
                tx.run_checkout("u", "r1", None),
                tx.run_checkout("t", "r1", "bob"),
            ]
    assert first is not None and again is not None and absent == [None, None, None]
    for answer in (first, again):
        assert type(answer) is port.RunCheckout and type(answer.summary) is port.RunSummary
        assert (answer.pk, answer.summary, answer.branches, answer.newest) == (
            r1, summary, names, newest
        ) and (names, newest) == (["side"], False)
        assert type(answer.checkpoint) is port.CheckpointRow and answer.checkpoint == checkpoint
        assert answer.blobs is None or [b[0] for b in answer.blobs] == [
            blob_id for blob_id, _ in json.loads(checkpoint.tail)
        ]


def test_a_run_placed_through_the_port_reads_back_field_for_field(store_location: str) -> None:
    from agui_store.engine import port

    with agui_store.open(store_location) as store, store.writing("u") as tx:
        thread_pk = tx.insert_thread("u", 1, None)
        new = port.NewRun(
            thread_pk=thread_pk, run_id="r1", parent=None, lineage="first",
            sent_parent="p0", input='{"messages":[]}', input_refs=None, synthetic=True,
            created_at=5, parent_hash=None, input_hash=b"i" * 32, start_hash=b"s" * 32,
        )
        run_pk = tx.insert_run(new)
        (replica,) = tx.replica_runs(thread_pk)
    assert replica == port.ReplicaRun(
        pk=run_pk, run_id="r1", parent_run_id=None, lineage="first", sent_parent="p0",
        input='{"messages":[]}', input_refs=None, synthetic=True, created_at=5, parent_hash=None,
        start_hash=b"s" * 32,
    )


def test_a_threads_activity_names_its_last_write_and_counts_its_open_runs(
    store_location: str,
) -> None:
    """The last write may go to a run begun before others, still recording."""
    with agui_store.open(store_location) as store:
        store.append(run("t", "slow")[:1])  # opened, not ended
        store.append(run("t", "fast"))
        store.append(run("t", "open")[:1])
        store.append(run("t", "slow")[1:], thread_id="t", run_id="slow")  # ended last
        store.append(run("other", "o1"))
        with store.reading() as tx:
            found = tx.thread("t")
            activity = None if found is None else tx.thread_activity(found[0])
        thread = store.thread("t")
        runs = {r.run_id: r for r in store.runs("t")}
    assert activity is not None and activity[0] == "slow" and activity[2] == 1
    assert thread is not None and thread.latest_run_id == "slow" and thread.open_runs == 1
    assert thread.updated_at == runs["slow"].updated_at
    assert max(r.updated_at for r in runs.values() if r.updated_at) == thread.updated_at


def test_the_newest_erasure_counts_up_with_each_erasure_logged_on_any_connection(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store, agui_store.open(store_location) as other:
        with store.reading() as tx:
            assert tx.newest_erasure() == 0
        for thread in ("a", "b"):
            other.append(run(thread, "r1"))
        other.delete_thread("a")
        with store.reading() as tx:
            first = tx.newest_erasure()
        store.delete_thread("b")
        with other.reading() as tx:
            assert 0 < first < tx.newest_erasure()
