"""Checkpoints are an optimization, never a change of meaning: a state machine drives append,
branch, live continuation, checkout, compact, reopen and checkpoint loss, and checks after
every step that checkout from checkpoints equals checkout by full replay, for every run."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import agui_store
from agui_store import testing
from agui_store.backends.sqlite.transaction import SqliteTransaction
from agui_store.codec import ingest
from agui_store.engine import checkpoints
from agui_store.history import blobs
from tests.strategies import legal_streams, message_lists

# Each example of these machines is 12 steps, and after every step the invariants check out
# and fully replay every run so far: one example costs as much as dozens of a plain
# property's, and each machine cost 35-45 s in CI at 300 examples. The machines keep
# their 12 steps (the depth at which checkpoints, branches, reopening and checkpoint loss
# meet) and CI runs 100 sequences of them per machine, 4,800 steps over the four machines;
# the dev profile's budget (60) is below that and stays.
MACHINE = settings(stateful_step_count=12, max_examples=min(settings.default.max_examples, 100))
#: On PostgreSQL every example is one or two new databases and each step a few round trips
#: per run replayed: the same machines, fewer sequences (the suite stays within its budget).
POSTGRES_MACHINE = settings(MACHINE, max_examples=min(MACHINE.max_examples, 6))


class CheckpointMachine(RuleBasedStateMachine):
    runs = Bundle("runs")
    live = Bundle("live")
    every = 1  # checkpoint_events: a checkpoint after every complete run
    #: Makes a fresh store location (a file path, or a new PostgreSQL database's URL): set by
    #: :func:`run_on` for the backend under test; a temporary file when run by hypothesis alone.
    new_location: Callable[[], str] | None = None

    def __init__(self) -> None:
        super().__init__()
        self.path = self._location()
        self.store = agui_store.open(self.path, checkpoint_events=self.every)
        self.count = 0
        self.open_run: str | None = None
        self.pending: dict[str, list[dict[str, Any]]] = {}  # live runs: what is still to come
        self.sent: dict[str, list[dict[str, Any]]] = {}  # live runs: what was appended

    def _location(self) -> str:
        if type(self).new_location is not None:
            return type(self).new_location()  # type: ignore[misc]
        return str(Path(tempfile.mkdtemp(prefix="agui-sm-")) / "s.db")

    def teardown(self) -> None:
        self.store.close()

    def _new_id(self) -> str:
        self.count += 1
        return f"run{self.count}"

    def _body(self, data: st.DataObject, run_id: str) -> list[dict[str, Any]]:
        return data.draw(legal_streams(min_runs=1, max_runs=1, run_ids=[run_id], max_steps=8))

    @rule(
        target=runs,
        data=st.data(),
        with_input=st.sampled_from(["none", "full", "partial"]),
        parent=st.one_of(st.none(), runs),
    )
    def append_run(self, data: st.DataObject, with_input: str, parent: str | None) -> str:
        run_id = self._new_id()
        events = self._body(data, run_id)
        kwargs: dict[str, Any] = {}
        if parent is not None:
            kwargs["parent"] = parent
        if with_input != "none":
            base = self.store.checkout(parent).messages if parent else []
            extra = data.draw(message_lists)
            have = {m["id"] for m in extra}
            history = [m for m in base if m.get("id") not in have]
            kwargs["input"] = {
                "threadId": "t",
                "runId": run_id,
                "tools": [],
                "context": [],
                "messages": (history if with_input == "full" else history[:1]) + extra,
            }
        self.store.append(events, **kwargs)
        if not any(e["type"] in ("RUN_FINISHED", "RUN_ERROR") for e in events):
            self.open_run = run_id
        return run_id

    @rule(target=runs, data=st.data(), base=runs)
    def continue_a_restored_run_without_naming_it(self, data: st.DataObject, base: str) -> str:
        """What a client that went back in time sends: the view it restored and a new
        message, no parentRunId; lineage rule 3 finds the parent."""
        run_id = self._new_id()
        events = self._body(data, run_id)
        try:
            restored = self.store.checkout(base, thread_id="t").messages
        except agui_store.InvalidEventError:
            restored = []  # a lineage the client itself cannot replay
        sent = [*restored, {"id": f"u-{run_id}", "role": "user", "content": "again"}]
        self.store.append(
            events,
            input={"threadId": "t", "runId": run_id, "tools": [], "context": [], "messages": sent},
        )
        if not any(e["type"] in ("RUN_FINISHED", "RUN_ERROR") for e in events):
            self.open_run = run_id
        return run_id

    @rule(target=runs, parent=st.one_of(st.none(), runs), value=st.integers(0, 3))
    def change_the_state(self, parent: str | None, value: int) -> str:
        """A run whose one patch applies to any object state (generated patches mostly
        fail), so that states change by patches across runs."""
        run_id = self._new_id()
        self.store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
                {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n", "value": value}]},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
            ],
            **({"parent": parent} if parent is not None else {}),
        )
        return run_id

    @rule(target=live, data=st.data())
    def start_live_run(self, data: st.DataObject) -> str:
        run_id = self._new_id()
        events = [
            e for e in self._body(data, run_id) if e["type"] not in ("RUN_FINISHED", "RUN_ERROR")
        ]
        self.store.append(events[:1])
        self.pending[run_id] = events[1:]
        self.sent[run_id] = events[:1]
        return run_id

    def _stream(self, live_run: str, pieces: list[dict[str, Any]], **kwargs: Any) -> None:
        self.store.append(pieces, **kwargs)
        self.sent[live_run] += pieces

    @rule(run_id=live, n=st.integers(1, 3), name_the_thread=st.booleans())
    def stream_a_piece_of_a_live_run(self, run_id: str, n: int, name_the_thread: bool) -> None:
        """Pieces of several open runs of one thread, interleaved (two tabs, a detached
        run): each batch names its run, with or without its thread."""
        piece, self.pending[run_id] = self.pending[run_id][:n], self.pending[run_id][n:]
        if piece:
            thread = {"thread_id": "t"} if name_the_thread else {}
            self._stream(run_id, piece, run_id=run_id, **thread)

    @precondition(lambda self: bool(self.pending))
    @rule()
    def stream_a_piece_naming_no_run(self) -> None:
        """Without a name a piece continues the newest run, unless several runs are open:
        then it is refused, naming them, and nothing is written."""
        runs = self.store.runs("t")
        open_runs = [r.run_id for r in runs if r.status == "incomplete"]
        newest = runs[-1].run_id
        piece = self.pending.get(newest, [])[:1]
        if not piece:
            return
        if len(open_runs) > 1:
            db = testing.connection(self.store)
            before = db.execute("SELECT count(*) FROM events").fetchone()[0]
            with pytest.raises(agui_store.OpenRunsError) as refused:
                self.store.append(piece, thread_id="t")
            assert refused.value.run_ids == tuple(open_runs)
            after = (
                testing.connection(self.store).execute("SELECT count(*) FROM events").fetchone()[0]
            )
            assert after == before
            return
        self.pending[newest] = self.pending[newest][1:]
        self._stream(newest, piece, thread_id="t")

    @rule(run_id=consumes(live))
    def finish_live_run(self, run_id: str) -> None:
        rest = self.pending.pop(run_id)
        self._stream(run_id, [*rest, {"type": "RUN_ERROR", "message": "cut"}], run_id=run_id)

    @invariant()
    def every_live_run_holds_exactly_the_pieces_sent_to_it(self) -> None:
        for run_id, sent in self.sent.items():
            assert self.store.events(run_id, thread_id="t") == sent, run_id

    @rule(name=st.sampled_from(["b1", "b2"]), run_id=runs)
    def branch(self, name: str, run_id: str) -> None:
        self.store.branch(name, run_id, thread_id="t")

    @rule()
    def compact(self) -> None:
        self.store.compact()

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = agui_store.open(self.path, checkpoint_events=self.every)

    @rule()
    def lose_every_checkpoint(self) -> None:
        """A file from before checkpoints, or one whose derived data was dropped."""
        drop_derived(self.store, "checkpoints", "lineage_digests")
        self.store.close()
        self.store = agui_store.open(self.path, checkpoint_events=self.every)

    @precondition(lambda self: self.count > 0)
    @invariant()
    def checkout_from_checkpoints_equals_full_replay(self) -> None:
        conn = testing.connection(self.store)
        for pk, run_id in conn.execute("SELECT id, run_id FROM runs").fetchall():
            co = self.store.checkout(run_id, thread_id="t")
            want = testing.replayed_view(self.store, pk)
            assert json.dumps([co.messages, co.state, co.interrupts], sort_keys=True) == json.dumps(
                [want.messages, want.state, want.interrupts], sort_keys=True
            ), run_id

    @invariant()
    def every_blob_matches_its_hash(self) -> None:
        for digest, kind, data in testing.connection(self.store).execute(
            "SELECT hash, codec, data FROM blobs"
        ):
            assert blobs.digest(blobs.unpack(kind, data)) == digest


def drop_derived(store: agui_store.Store, *tables: str) -> None:
    """Delete every row of derived tables, through the store's own connection (the SQL is the
    same on both backends), as a file from before them, or one that lost them, has none."""
    conn = testing.connection(store)
    for table in tables:
        conn.execute(f"DELETE FROM {table}")


def run_on(machine: type[CheckpointMachine], new_location: Callable[[], str], backend: str) -> None:
    """Run a machine with its stores on ``backend``, in locations ``new_location`` makes."""
    bound = type(machine.__name__, (machine,), {"new_location": staticmethod(new_location)})
    run_state_machine_as_test(
        bound, settings=POSTGRES_MACHINE if backend == "postgres" else MACHINE
    )


def test_checkpoints_never_change_what_checkout_restores(
    new_location: Callable[[], str], backend: str
) -> None:
    run_on(CheckpointMachine, new_location, backend)


class SparseCheckpointMachine(CheckpointMachine):
    every = 12  # a checkpoint every few generated runs: checkouts replay from an older one


def test_sparse_checkpoints_never_change_what_checkout_restores(
    new_location: Callable[[], str], backend: str
) -> None:
    run_on(SparseCheckpointMachine, new_location, backend)


class StatePatchMachine(CheckpointMachine):
    """States stored as the patches since the last whole one, whatever their size, and a
    whole state again after every third patch: checkout must not tell the difference."""

    def __init__(self) -> None:
        self._limits = (checkpoints.STATE_PATCH_SHARE, checkpoints.MAX_STATE_PATCHES)
        checkpoints.STATE_PATCH_SHARE, checkpoints.MAX_STATE_PATCHES = 0, 3
        super().__init__()

    def teardown(self) -> None:
        checkpoints.STATE_PATCH_SHARE, checkpoints.MAX_STATE_PATCHES = self._limits
        super().teardown()


def test_states_stored_as_patches_never_change_what_checkout_restores(
    new_location: Callable[[], str], backend: str
) -> None:
    run_on(StatePatchMachine, new_location, backend)


def test_a_state_that_grows_by_patches_is_stored_as_patches_between_whole_states(
    tmp_path: Path,
) -> None:
    with agui_store.open(tmp_path / "s.db") as store:
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
            pk = conn.execute("SELECT id FROM runs WHERE run_id = ?", (f"r{i}",)).fetchone()[0]
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
        pk = conn.execute("SELECT id FROM runs WHERE run_id = 'snap'").fetchone()[0]
        base = conn.execute("SELECT state_base FROM checkpoints WHERE run = ?", (pk,)).fetchone()
        assert base == (None,) and store.checkout("snap").state == {"log": []}
        assert store.check().ok
    # Reopened, the store continues the patches from what it loads.
    with agui_store.open(tmp_path / "s.db") as store:
        _talk(store, "after", words=1)
        assert store.checkout("after").state == {"log": []}
        assert store.check().ok


def test_a_checkpoint_patched_from_a_state_that_is_not_whole_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        for i in range(3):
            _talk(store, f"r{i}", words=1)
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE checkpoints SET state_base = 2 WHERE run = 3")
    conn.execute("UPDATE checkpoints SET state_base = 1 WHERE run = 2")
    conn.close()
    with agui_store.open(path) as store:
        problems = [str(p) for p in store.check().problems]
        assert any("whose own state is not stored whole" in p for p in problems), problems
        with pytest.raises(
            agui_store.CorruptStoreError, match="not a checkpoint whose state is stored whole"
        ):
            store.checkout("r2")


class _Mirrored:
    """A store that defers derived data and a default one, each on a file of its own, fed
    the same calls: what they decide must never differ."""

    def __init__(self, deferred: agui_store.Store, eager: agui_store.Store) -> None:
        self.deferred, self.eager = deferred, eager

    def _both(self, name: str, *args: Any, **kwargs: Any) -> Any:
        outcomes: list[tuple[Any, agui_store.AguiStoreError | None]] = []
        for store in (self.deferred, self.eager):
            try:
                outcomes.append((getattr(store, name)(*args, **kwargs), None))
            except agui_store.AguiStoreError as e:
                outcomes.append((None, e))
        assert type(outcomes[0][1]) is type(outcomes[1][1]), (name, outcomes)
        if outcomes[0][1] is not None:
            raise outcomes[0][1]  # raised by both stores
        return outcomes[0][0]

    def append(self, *args: Any, **kwargs: Any) -> Any:
        return self._both("append", *args, **kwargs)

    def branch(self, *args: Any, **kwargs: Any) -> Any:
        return self._both("branch", *args, **kwargs)

    def close(self) -> None:
        self.deferred.close()
        self.eager.close()

    def __getattr__(self, name: str) -> Any:  # reads go to the deferring store
        return getattr(self.deferred, name)


class DeferredDerivationMachine(CheckpointMachine):
    """``derive_on_append=False``: appends leave digests and checkpoints for later. Every
    lineage decision, checkout and compaction must come out as a default store's does."""

    def _open(self) -> _Mirrored:
        return _Mirrored(
            agui_store.open(self.path, derive_on_append=False),
            agui_store.open(self.eager_path, checkpoint_events=self.every),
        )

    def __init__(self) -> None:
        super().__init__()
        self.store.close()
        self.eager_path = self._location()
        self.store = self._open()  # type: ignore[assignment]

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = self._open()  # type: ignore[assignment]

    @rule()
    def derive(self) -> None:
        self.store.deferred.derive()  # type: ignore[attr-defined]

    @rule()
    def compact(self) -> None:
        self.store.deferred.compact()  # type: ignore[attr-defined]
        self.store.eager.compact()  # type: ignore[attr-defined]

    @rule()
    def lose_every_checkpoint(self) -> None:
        for store in (self.store.deferred, self.store.eager):  # type: ignore[attr-defined]
            drop_derived(store, "checkpoints", "lineage_digests", "underived")
        self.store.close()
        self.store = self._open()  # type: ignore[assignment]

    @invariant()
    def both_stores_decide_the_same_lineage(self) -> None:
        def tree(store: agui_store.Store) -> list[tuple[Any, ...]]:
            runs = store.runs("t") if "t" in store.threads() else []
            return [(r.run_id, r.parent_run_id, r.lineage, r.status) for r in runs]

        assert tree(self.store.deferred) == tree(self.store.eager)  # type: ignore[attr-defined]


def test_deferred_derivation_never_changes_a_decision_or_a_checkout(
    new_location: Callable[[], str], backend: str
) -> None:
    run_on(DeferredDerivationMachine, new_location, backend)


def test_a_deferring_store_writes_the_log_alone_and_derive_fills_in_the_rest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path, derive_on_append=False) as store:
        for i in range(4):
            _talk(store, f"r{i}", words=2)
        conn = testing.connection(store)

        def count(table: str) -> int:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

        assert (count("checkpoints"), count("lineage_digests"), count("underived")) == (0, 0, 4)
        assert store.checkout("r3").messages == testing.replayed_view(store, 4).messages
        assert store.derive() == 4
        assert (count("checkpoints"), count("lineage_digests"), count("underived")) == (4, 4, 0)
        assert store.derive() == 0 and store.compact() == 0
        assert store.check().ok


def test_derive_of_one_thread_leaves_the_others_and_refuses_a_thread_it_does_not_have(
    tmp_path: Path,
) -> None:
    with agui_store.open(tmp_path / "s.db", derive_on_append=False) as store:
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
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path, derive_on_append=False) as deferring:
        for i in range(3):
            _talk(deferring, f"r{i}", words=2)
        sent = [*deferring.checkout("r1").messages, {"id": "u", "role": "user", "content": "?"}]
    # Another store, deriving as it appends, must still see r0..r2 as candidates.
    with agui_store.open(path) as store:
        assert _lineage_of_a_run_sent(store, sent) == ("r1", "messages")
        assert (
            testing.connection(store).execute("SELECT count(*) FROM underived").fetchone()[0] == 0
        )


def test_events_after_a_runs_end_leave_it_and_its_descendants_to_be_derived_again(
    tmp_path: Path,
) -> None:
    with agui_store.open(tmp_path / "s.db") as store:
        for i in range(3):
            _talk(store, f"r{i}", words=1)
        store.append(
            [{"type": "TEXT_MESSAGE_START", "messageId": "late", "role": "assistant"}],
            thread_id="t",
            check_sequence=False,
        )
        conn = testing.connection(store)
        assert conn.execute("SELECT run FROM underived").fetchall() == [(3,)]
        # The next run derives r2 anew first: its view now holds the late message.
        _talk(store, "r3", words=1)
        assert conn.execute("SELECT count(*) FROM underived").fetchone()[0] == 0
        ids = [m["id"] for m in store.checkout("r3").messages]
        assert "late" in ids
        assert store.checkout("r2").messages == testing.replayed_view(store, 3).messages


def test_a_checkpointed_conversation_shares_history_between_branches(tmp_path: Path) -> None:
    with agui_store.open(tmp_path / "s.db") as store:
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


def test_a_message_object_shared_by_two_positions_is_restored_shared(tmp_path: Path) -> None:
    """Two messages with one id, then a MESSAGES_SNAPSHOT naming it: the client keeps one
    object at both positions and later edits reach both. A checkpoint cannot say that, so
    such a view is restored by replay, and equals the client's."""
    with agui_store.open(tmp_path / "s.db") as store:
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


def test_a_run_the_client_cannot_replay_does_not_block_later_appends(tmp_path: Path) -> None:
    """verifyEvents lets a nameless first TOOL_CALL_CHUNK through; transformChunks throws on
    it. Recording it is legal; only restoring it fails, exactly where the client fails."""
    with agui_store.open(tmp_path / "s.db") as store:
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
    tmp_path: Path,
) -> None:
    with agui_store.open(tmp_path / "s.db", derive_on_append=False) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "u", "runId": "bad"},
                {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "delta": "{}"},
                {"type": "RUN_FINISHED", "threadId": "u", "runId": "bad"},
            ]
        )
        for i in range(3):
            _talk(store, f"r{i}", words=1)
        # Each of r0..r2 gets its checkpoint; "bad" has none to get, as on append.
        assert store.compact() == 3
        assert store.compact() == 0
        with pytest.raises(agui_store.InvalidEventError, match="toolCallName"):
            store.checkout("bad")
        assert store.check().ok


def _talk(store: agui_store.Store, run_id: str, words: int, **started: Any) -> None:
    mid = f"m-{run_id}"
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": run_id, **started},
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
            *(
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"w{i} "}
                for i in range(words)
            ),
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
        ]
    )


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


def _replay_debt(conn: apsw.Connection) -> dict[int, int]:
    """For each run: the events a checkout replays after its nearest checkpoint."""
    debt = {}
    for (pk,) in conn.execute("SELECT id FROM runs ORDER BY id").fetchall():
        _, after = checkpoints.nearest(SqliteTransaction(conn), pk)
        marks = ",".join("?" * len(after))
        debt[pk] = (
            conn.execute(f"SELECT count(*) FROM events WHERE run IN ({marks})", after).fetchone()[0]
            if after
            else 0
        )
    return debt


@pytest.mark.parametrize("every", [1, 30, 200])
def test_append_keeps_every_checkout_within_checkpoint_events_of_replay(
    tmp_path: Path, every: int
) -> None:
    with agui_store.open(tmp_path / "s.db", checkpoint_events=every) as store:
        for i in range(40):
            _talk(store, f"r{i}", words=i % 7)  # runs of 4 to 10 events
        conn = testing.connection(store)
        sizes = dict(conn.execute("SELECT run, count(*) FROM events GROUP BY run").fetchall())
        for pk, debt in _replay_debt(conn).items():
            assert debt < every + sizes[pk], (pk, debt)
        written = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        if every == 1:
            assert written == 40 and store.compact() == 0
        else:  # one per `every` events, no more: appending is cheaper by that much
            assert 1 <= written <= sum(sizes.values()) // every


def test_lineage_rule_3_finds_a_run_that_has_no_checkpoint(tmp_path: Path) -> None:
    with agui_store.open(tmp_path / "s.db", checkpoint_events=10_000) as store:
        for i in range(3):
            _talk(store, f"r{i}", words=2)
        assert (
            testing.connection(store).execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 0
        )
        # A client that restored r1 sends its messages: r1 is the parent, not the head (r2).
        sent = [*store.checkout("r1").messages, {"id": "u", "role": "user", "content": "again"}]
        assert _lineage_of_a_run_sent(store, sent) == ("r1", "messages")


def test_checkpoint_events_must_be_a_positive_integer(tmp_path: Path) -> None:
    for bad in (0, -5, 2.5, True, "200"):
        with pytest.raises(ValueError, match="checkpoint_events"):
            agui_store.open(tmp_path / "s.db", checkpoint_events=bad)


@pytest.mark.parametrize("reopen", [False, True])
def test_rule_3_takes_an_input_longer_than_sqlites_limit_on_parameters(
    tmp_path: Path, reopen: bool
) -> None:
    # Every prefix of the input's ids is a candidate; SQLite takes 32,766 parameters at most.
    path = tmp_path / "s.db"
    store = agui_store.open(path)
    for i in range(3):
        _talk(store, f"r{i}", words=1)
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
            _talk(store, f"r{i}", words=1)
        real = [
            pk for (pk,) in testing.connection(store).execute("SELECT id FROM runs ORDER BY id")
        ]
        records = testing.records(store, [*real, *range(1000, 34_000)])
        assert [len(r.events) for r in records[:3]] == [5, 5, 5]
        assert all(not r.events for r in records[3:])


@pytest.mark.parametrize("derive_on_append", [True, False])
def test_a_run_echoing_the_run_before_it_in_the_same_batch_descends_from_that_run(
    tmp_path: Path, derive_on_append: bool
) -> None:
    # r1 completes inside the batch; the echo of r2 holds r1's messages, so rule 3 must see
    # r1 (longest prefix), not only r0, which was complete before the batch came.
    with agui_store.open(tmp_path / "s.db", derive_on_append=derive_on_append) as store:
        _talk(store, "r0", words=1)
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


@given(st.lists(st.one_of(st.text(), st.integers(-(2**53), 2**53), st.none(), st.booleans())))
def test_the_lineage_digest_of_ids_is_the_one_fed_an_id_at_a_time(ids: list[Any]) -> None:
    # hash_ids encodes the ids as one array in C; stored digests were made one id at a time
    # (and lone surrogates, which msgspec refuses, still go that way).
    one_by_one = hashlib.sha256()
    for mid in ids:
        one_by_one.update(ingest.canonical_bytes(mid) + b"\x00")
    assert checkpoints.hash_ids(ids).digest() == one_by_one.digest()
