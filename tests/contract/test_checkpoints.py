"""Checkpoints are an optimization, never a change of meaning: a state machine drives append,
branch, live continuation, checkout, compact, reopen and checkpoint loss, and checks after
every step that checkout from checkpoints equals checkout by full replay, for every run, on
every backend."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
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
from agui_store.history import blobs
from tests.strategies import legal_streams, message_lists
from tests.streams import run, say

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
        self._patches = testing.state_patches(share=0, most=3)
        self._patches.__enter__()
        try:
            super().__init__()
        except BaseException:
            self._patches.__exit__(None, None, None)
            raise

    def teardown(self) -> None:
        self._patches.__exit__(None, None, None)
        super().teardown()


def test_states_stored_as_patches_never_change_what_checkout_restores(
    new_location: Callable[[], str], backend: str
) -> None:
    run_on(StatePatchMachine, new_location, backend)


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


def test_checkouts_without_checkpoints_replay_long_threads_exactly(store_location: str) -> None:
    # No checkpoint is written as it appends: a checkout replays the whole lineage.
    with agui_store.open(store_location, checkpoint_events=10**9) as store:
        parent = None
        for i in range(60):
            events = run("t", f"r{i}", *say(f"m{i}", f"text {i}", "assistant"))
            store.append(events, parent=parent)
            parent = f"r{i}"
        checkout = store.checkout("r59", thread_id="t")
        assert [m["content"] for m in checkout.messages] == [f"text {i}" for i in range(60)]
        assert checkout == store.checkout("HEAD", thread_id="t")
        assert store.compact() > 0  # the runs get the checkpoints they lacked
        assert store.checkout("r59", thread_id="t") == checkout
