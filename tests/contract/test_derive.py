"""Checkpoints and derived data on every backend: how states are stored (whole, or as
patches), deferred derivation and ``derive``, how far a checkout replays, lineage rule 3 over
what was derived or left for later, inputs stored by reference to their lineage, and runs the
client cannot replay. SQLite's limit on parameters is SQLite's own
(tests/test_sqlite_parameter_limits.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agui_store
from agui_store import testing
from agui_store.engine import checkpoints
from tests.backends import placeholder, tamper
from tests.streams import http_agent_turns, run, say, talk


def pk_of(store: agui_store.Store, run_id: str, thread_id: str = "t") -> int:
    """The key of a run of a thread, through the store's read door."""
    with store.reading() as tx:
        found = tx.thread(thread_id)
        pk = None if found is None else tx.run_pk(found[0], run_id)
    assert pk is not None, run_id
    return pk


def test_a_state_that_grows_by_patches_is_stored_as_patches_between_whole_states(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r0"},
                {"type": "STATE_SNAPSHOT", "snapshot": {"log": ["x" * 40] * 50}},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r0"},
            ]
        )
        for i in range(1, 150):
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{i}"},
                    {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/log/-", "value": i}]},
                    # A failing patch changes nothing, and is not among the stored ones.
                    {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/nothing"}]},
                    {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{i}"},
                ]
            )
        conn = testing.connection(store)
        whole, patched = conn.execute(
            "SELECT count(*) - count(state_base), count(state_base) FROM checkpoints"
        ).fetchone()
        assert whole + patched == 150
        # Whole again when the patches reach a quarter of the whole state's size: about
        # every 12 runs here (each patch adds ~50 bytes to a state of ~2 kB).
        assert 5 <= whole <= 20 and patched >= 130
        for i in (0, 1, 63, 64, 65, 149):
            pk = pk_of(store, f"r{i}")
            assert store.checkout(f"r{i}").state == testing.replayed_view(store, pk).state
        assert store.checkout("r149").state["log"][-3:] == [147, 148, 149]
        # A snapshot replaces the state: the next checkpoint stores it whole.
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "snap"},
                {"type": "STATE_SNAPSHOT", "snapshot": {"log": []}},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "snap"},
            ]
        )
        pk = pk_of(store, "snap")
        base = conn.execute(
            f"SELECT state_base FROM checkpoints WHERE run = {placeholder(store_location)}", (pk,)
        ).fetchone()
        assert base == (None,) and store.checkout("snap").state == {"log": []}
        assert store.check().ok
    # Reopened, the store continues the patches from what it loads.
    with agui_store.open(store_location) as store:
        store.append(talk("after", words=1))
        assert store.checkout("after").state == {"log": []}
        assert store.check().ok


def test_a_checkpoint_patched_from_a_state_that_is_not_whole_is_reported(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        for i in range(3):
            store.append(talk(f"r{i}", words=1))
        r0, r1, r2 = (pk_of(store, f"r{i}") for i in range(3))
    tamper(
        store_location,
        [
            f"UPDATE checkpoints SET state_base = {r1} WHERE run = {r2}",
            f"UPDATE checkpoints SET state_base = {r0} WHERE run = {r1}",
        ],
    )
    with agui_store.open(store_location) as store:
        problems = [str(p) for p in store.check().problems]
        assert any("whose own state is not stored whole" in p for p in problems), problems
        with pytest.raises(
            agui_store.CorruptStoreError, match="not a checkpoint whose state is stored whole"
        ):
            store.checkout("r2")


def test_a_deferring_store_writes_the_log_alone_and_derive_fills_in_the_rest(
    store_location: str,
) -> None:
    path = store_location
    with agui_store.open(path, derive_on_append=False) as store:
        for i in range(4):
            store.append(talk(f"r{i}", words=2))
        conn = testing.connection(store)

        def count(table: str) -> int:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

        assert (count("checkpoints"), count("lineage_digests"), count("underived")) == (0, 0, 4)
        assert store.checkout("r3").messages == testing.replayed_view(
            store, pk_of(store, "r3")
        ).messages
        assert store.derive() == 4
        assert (count("checkpoints"), count("lineage_digests"), count("underived")) == (4, 4, 0)
        assert store.derive() == 0 and store.compact() == 0
        assert store.check().ok


def test_derive_of_one_thread_leaves_the_others_and_refuses_a_thread_it_does_not_have(
    store_location: str,
) -> None:
    with agui_store.open(store_location, derive_on_append=False) as store:
        for thread in ("t", "u"):
            for i in range(2):
                store.append(
                    [
                        {"type": "RUN_STARTED", "threadId": thread, "runId": f"{thread}{i}"},
                        {"type": "RUN_FINISHED", "threadId": thread, "runId": f"{thread}{i}"},
                    ]
                )
        assert store.derive("u") == 2
        left = (
            testing.connection(store)
            .execute(
                "SELECT runs.run_id FROM underived JOIN runs ON runs.id = underived.run ORDER BY 1"
            )
            .fetchall()
        )
        assert left == [("t0",), ("t1",)]
        with pytest.raises(agui_store.RunNotFoundError, match="no thread 'nope'"):
            store.derive("nope")
        assert store.derive() == 2 and store.derive() == 0


def test_lineage_rule_3_derives_what_a_deferring_store_left_before_it_decides(
    store_location: str,
) -> None:
    path = store_location
    with agui_store.open(path, derive_on_append=False) as deferring:
        for i in range(3):
            deferring.append(talk(f"r{i}", words=2))
        sent = [*deferring.checkout("r1").messages, {"id": "u", "role": "user", "content": "?"}]
    # Another store, deriving as it appends, must still see r0..r2 as candidates.
    with agui_store.open(path) as store:
        assert _lineage_of_a_run_sent(store, sent) == ("r1", "messages")
        assert (
            testing.connection(store).execute("SELECT count(*) FROM underived").fetchone()[0] == 0
        )


def test_events_after_a_runs_end_leave_it_and_its_descendants_to_be_derived_again(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        for i in range(3):
            store.append(talk(f"r{i}", words=1))
        store.append(
            [{"type": "TEXT_MESSAGE_START", "messageId": "late", "role": "assistant"}],
            thread_id="t",
            check_sequence=False,
        )
        conn = testing.connection(store)
        assert conn.execute("SELECT run FROM underived").fetchall() == [(pk_of(store, "r2"),)]
        # The next run derives r2 anew first: its view now holds the late message.
        store.append(talk("r3", words=1))
        assert conn.execute("SELECT count(*) FROM underived").fetchone()[0] == 0
        ids = [m["id"] for m in store.checkout("r3").messages]
        assert "late" in ids
        r2 = pk_of(store, "r2")
        assert store.checkout("r2").messages == testing.replayed_view(store, r2).messages


def test_a_checkpointed_conversation_shares_history_between_branches(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        say = lambda mid, text: [  # noqa: E731
            {"type": "TEXT_MESSAGE_START", "messageId": mid},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text},
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
        ]
        for i in range(10):
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{i}"},
                    *say(f"m{i}", "x" * 300),
                    {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{i}"},
                ]
            )
        for i in range(3):
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": "t", "runId": f"b{i}", "parentRunId": "r9"},
                    *say(f"n{i}", "y" * 300),
                    {"type": "RUN_FINISHED", "threadId": "t", "runId": f"b{i}"},
                ]
            )
        store.compact()  # a checkpoint for every run (append writes one every few runs)
        conn = testing.connection(store)
        # 13 runs, 13 distinct messages: each stored once, however many views hold it.
        assert (
            conn.execute("SELECT count(*) FROM blobs WHERE length(data) > 200").fetchone()[0] == 13
        )
        # Shorter than a chunk, so each list is a tail of segments (one per run here): every
        # branch's starts with the segments of the run it forked from.
        tails = {
            run_id: json.loads(tail)
            for run_id, tail in conn.execute(
                "SELECT runs.run_id, checkpoints.tail FROM checkpoints "
                "JOIN runs ON runs.id = checkpoints.run"
            )
        }
        assert len(tails) == 13
        for i in range(3):
            assert tails[f"b{i}"][:10] == tails["r9"]
        assert len({blob for tail in tails.values() for blob, _ in tail}) == 13


def test_a_message_object_shared_by_two_positions_is_restored_shared(store_location: str) -> None:
    """Two messages with one id, then a MESSAGES_SNAPSHOT naming it: the client keeps one
    object at both positions and later edits reach both. A checkpoint cannot say that, so
    such a view is restored by replay, and equals the client's."""
    with agui_store.open(store_location) as store:
        twice = [
            {"id": "m1", "role": "user", "content": "a"},
            {"id": "m1", "role": "user", "content": "b"},
        ]
        store.append(
            [
                {
                    "type": "RUN_STARTED",
                    "threadId": "t",
                    "runId": "r1",
                    "input": {"threadId": "t", "runId": "r1", "messages": twice},
                },
                {
                    "type": "MESSAGES_SNAPSHOT",
                    "messages": [{"id": "m1", "role": "assistant", "content": "s"}],
                },
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
            ]
        )
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
                {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "+"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"},
            ]
        )
        assert [m["content"] for m in store.checkout("r2").messages] == ["s+", "s+"]


def test_a_run_the_client_cannot_replay_does_not_block_later_appends(store_location: str) -> None:
    """verifyEvents lets a nameless first TOOL_CALL_CHUNK through; transformChunks throws on
    it. Recording it is legal; only restoring it fails, exactly where the client fails."""
    with agui_store.open(store_location) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
                {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "delta": "{}"},
            ]
        )
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"},
            ]
        )
        assert [r.status for r in store.runs("t")] == ["incomplete", "finished"]
        try:
            store.checkout("r2")
        except agui_store.InvalidEventError as e:
            assert e.event_type == "TOOL_CALL_CHUNK" and e.path == "$.toolCallName"
        else:
            raise AssertionError("the client throws on this lineage; so must checkout")


def test_compact_skips_a_run_the_client_cannot_replay_and_compacts_the_rest(
    store_location: str,
) -> None:
    with agui_store.open(store_location, derive_on_append=False) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "u", "runId": "bad"},
                {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "delta": "{}"},
                {"type": "RUN_FINISHED", "threadId": "u", "runId": "bad"},
            ]
        )
        for i in range(3):
            store.append(talk(f"r{i}", words=1))
        # Each of r0..r2 gets its checkpoint; "bad" has none to get, as on append.
        assert store.compact() == 3
        assert store.compact() == 0
        with pytest.raises(agui_store.InvalidEventError, match="toolCallName"):
            store.checkout("bad")
        assert store.check().ok


def _lineage_of_a_run_sent(store: agui_store.Store, sent: list[Any]) -> tuple[Any, str]:
    """Append a run whose input is ``sent`` and no parent: its parent and why (rule 3)."""
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "again"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "again"},
        ],
        input={"threadId": "t", "runId": "again", "messages": sent},
    )
    again = store.get_run("again")
    assert again is not None
    return again.parent_run_id, again.lineage


def _replay_debt(store: agui_store.Store, mark: str) -> dict[int, int]:
    """For each run: the events a checkout replays after its nearest checkpoint."""
    debt = {}
    conn = testing.connection(store)
    for (pk,) in conn.execute("SELECT id FROM runs ORDER BY id").fetchall():
        with testing.reading(store) as tx:
            _, after = checkpoints.nearest(tx, pk)
        marks = ",".join([mark] * len(after))
        debt[pk] = (
            conn.execute(f"SELECT count(*) FROM events WHERE run IN ({marks})", after).fetchone()[0]
            if after
            else 0
        )
    return debt


@pytest.mark.parametrize("every", [1, 30, 200])
def test_append_keeps_every_checkout_within_checkpoint_events_of_replay(
    store_location: str, every: int
) -> None:
    with agui_store.open(store_location, checkpoint_events=every) as store:
        for i in range(40):
            store.append(talk(f"r{i}", words=i % 7))  # runs of 4 to 10 events
        conn = testing.connection(store)
        sizes = dict(conn.execute("SELECT run, count(*) FROM events GROUP BY run").fetchall())
        for pk, debt in _replay_debt(store, placeholder(store_location)).items():
            assert debt < every + sizes[pk], (pk, debt)
        written = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        if every == 1:
            assert written == 40 and store.compact() == 0
        else:  # one per `every` events, no more: appending is cheaper by that much
            assert 1 <= written <= sum(sizes.values()) // every


def test_lineage_rule_3_finds_a_run_that_has_no_checkpoint(store_location: str) -> None:
    with agui_store.open(store_location, checkpoint_events=10_000) as store:
        for i in range(3):
            store.append(talk(f"r{i}", words=2))
        assert (
            testing.connection(store).execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 0
        )
        # A client that restored r1 sends its messages: r1 is the parent, not the head (r2).
        sent = [*store.checkout("r1").messages, {"id": "u", "role": "user", "content": "again"}]
        assert _lineage_of_a_run_sent(store, sent) == ("r1", "messages")


def test_checkpoint_events_must_be_a_positive_integer(store_location: str) -> None:
    for bad in (0, -5, 2.5, True, "200"):
        with pytest.raises(ValueError, match="checkpoint_events"):
            agui_store.open(store_location, checkpoint_events=bad)


@pytest.mark.parametrize("derive_on_append", [True, False])
def test_a_run_echoing_the_run_before_it_in_the_same_batch_descends_from_that_run(
    store_location: str, derive_on_append: bool
) -> None:
    # r1 completes inside the batch; the echo of r2 holds r1's messages, so rule 3 must see
    # r1 (longest prefix), not only r0, which was complete before the batch came.
    with agui_store.open(store_location, derive_on_append=derive_on_append) as store:
        store.append(talk("r0", words=1))
        r0 = store.checkout("r0").messages
        said = {"id": "m-r1", "role": "assistant", "content": "w0 "}
        batch = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r1", "parentRunId": "r0"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m-r1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-r1", "delta": "w0 "},
            {"type": "TEXT_MESSAGE_END", "messageId": "m-r1"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
            {
                "type": "RUN_STARTED",
                "threadId": "t",
                "runId": "r2",
                "input": {"threadId": "t", "runId": "r2", "messages": [*r0, said]},
            },
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"},
        ]
        store.append(batch)
        r2 = store.get_run("r2")
        assert r2 is not None
        assert (r2.parent_run_id, r2.lineage) == ("r1", "messages")
        assert store.events("r2")[0] == batch[5]  # the echo reads back whole


def test_inputs_that_repeat_the_history_are_stored_by_reference_and_read_back_whole(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        _inputs_stored_by_reference(store)


def _inputs_stored_by_reference(store: agui_store.Store) -> None:
    inputs = http_agent_turns(store, 8)
    for sent in inputs:
        assert store.input(sent["runId"]) == sent
    refs = [
        r[0] for r in testing.connection(store).execute("SELECT input_refs FROM runs ORDER BY id")
    ]
    assert refs[0] is None  # the first run has no parent to refer to
    assert json.loads(refs[-1])["messages"][0] == [0, 14]  # seven turns of history: one range
    assert store.checkout("r7").messages[-2:] == [
        inputs[7]["messages"][-1],
        {"id": "a7", "role": "assistant", "content": "answer 7 " * 20},
    ]


@pytest.mark.parametrize("every", [1, 200])
def test_checkout_from_checkpoints_equals_a_full_replay_and_survives_reopening(
    store_location: str, every: int
) -> None:
    with agui_store.open(store_location, checkpoint_events=every) as store:
        http_agent_turns(store, 5)
        store.append(run("t", "side", *say("s", "side"), parentRunId="r2"))
        want = {
            r.run_id: testing.replayed_view(store, pk_of(store, r.run_id))
            for r in store.runs("t")
        }
    with agui_store.open(store_location) as store:
        for run_id, view in want.items():
            co = store.checkout(run_id)
            assert (co.messages, co.state) == (view.messages, view.state)
        # append checkpoints every run by default, else every few; compact fills in the rest
        assert (store.compact() > 0) == (every > 1)
        assert store.compact() == 0
        for run_id, view in want.items():
            co = store.checkout(run_id)
            assert (co.messages, co.state) == (view.messages, view.state)

