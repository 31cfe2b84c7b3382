"""The store's ConversationStore against pydantic-ai's own InMemoryConversationStore.

A hypothesis state machine runs every operation on both, on SQLite and on PostgreSQL: save
(new, continued, rewritten, from a stale copy), load with and without ``limit``, branch
(``at`` and ``from_entry``, into the current history and into a branch left), fork, list,
delete, scopes. Every answer must be the same (entry ids, revisions and times aside: each
store mints its own), and so must everything both hold after each step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.conftest import needs_pydantic_ai

# Every test here uses pydantic-ai, which needs Python 3.11: on 3.10 the module skips.
needs_pydantic_ai()

from pydantic_ai.conversation import Conversation  # noqa: E402
from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore  # noqa: E402
from pydantic_ai.tools import DeferredToolRequests  # noqa: E402
from pydantic_ai.usage import RunUsage  # noqa: E402

from agui_store.integrations.pydantic_ai import ConversationStore as DurableStore  # noqa: E402
from tests.pydantic_ai_conversations import (  # noqa: E402
    conversation_view,
    entries_view,
    outcome_kind,
    record_view,
    reply,
    tool_call,
    tool_return,
    user,
)

_T = TypeVar("_T")

CONVERSATIONS = ["c1", "c2", "c3"]
SCOPES = [None, "alice", "bob"]
#: Few texts, so that equal messages recur (stored once) and histories share prefixes.
messages = st.one_of(
    st.sampled_from(["hi", "again", "why?"]).map(user),
    st.sampled_from(["hello", "because", "ok"]).map(reply),
    st.sampled_from(["search", "fetch"]).map(lambda name: tool_call(name, f"call-{name}")),
    st.sampled_from(["search", "fetch"]).map(lambda name: tool_return(name, f"call-{name}")),
)
usages = st.builds(RunUsage, requests=st.integers(0, 3), input_tokens=st.integers(0, 50))
deferred = st.none() | st.builds(
    lambda name: DeferredToolRequests(calls=[tool_call(name, f"deferred-{name}").parts[0]]),  # type: ignore[list-item]
    st.sampled_from(["search", "fetch"]),
)
limits = st.none() | st.integers(0, 4)

MACHINE = settings(stateful_step_count=25, max_examples=min(settings.default.max_examples, 60))
#: PostgreSQL: a new database an example and round trips every call.
POSTGRES_MACHINE = settings(MACHINE, max_examples=min(MACHINE.max_examples, 12))


class ConversationMachine(RuleBasedStateMachine):
    """pydantic-ai's in-memory store (``mem``) and this one (``db``), driven alike."""

    new_location: Callable[[], str] | None = None

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        location = (
            type(self).new_location()  # type: ignore[misc]
            if type(self).new_location is not None
            else str(Path(tempfile.mkdtemp(prefix="agui-conv-")) / "s.db")
        )
        self.mem: ConversationStore = InMemoryConversationStore()
        self.db = DurableStore(location)
        #: Conversations loaded from both, kept to save later (maybe stale by then).
        self.held: list[tuple[Conversation, Conversation]] = []

    def teardown(self) -> None:
        self.run(self.db.close())
        self.loop.close()

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return self.loop.run_until_complete(coroutine)

    def both(self, call: Callable[[ConversationStore], Coroutine[Any, Any, _T]]) -> tuple[Any, Any]:
        """``call`` on each store: its result, or how it failed."""
        out = []
        for store in (self.mem, self.db):
            try:
                out.append(("ok", self.run(call(store))))
            except Exception as e:  # compared: both must fail alike
                out.append(("failed", outcome_kind(e)))
        return out[0], out[1]

    def same(
        self, view: Callable[[Any], Any], call: Callable[[ConversationStore], Any]
    ) -> tuple[Any, Any]:
        mem, db = self.both(call)
        seen = [o if o[0] == "failed" else ("ok", view(o[1])) for o in (mem, db)]
        assert seen[0] == seen[1]
        return mem, db

    # --- saves ------------------------------------------------------------------------------

    @rule(
        cid=st.sampled_from(CONVERSATIONS),
        new=st.lists(messages, min_size=0, max_size=4),
        scope=st.sampled_from(SCOPES),
        usage=usages,
        waiting=deferred,
    )
    def save_a_new_conversation(
        self, cid: str, new: list[Any], scope: str | None, usage: RunUsage, waiting: Any
    ) -> None:
        def call(store: ConversationStore) -> Any:
            conversation = Conversation(
                conversation_id=cid, messages=list(new), usage=dataclasses.replace(usage),
                deferred_tool_requests=waiting,
            )
            return store.save(conversation, scope=scope)

        self.same(entries_view, call)

    @rule(
        cid=st.sampled_from(CONVERSATIONS),
        limit=limits,
        scope=st.sampled_from(SCOPES),
        keep=st.booleans(),
    )
    def load(self, cid: str, limit: int | None, scope: str | None, keep: bool) -> None:
        mem, db = self.same(
            conversation_view, lambda store: store.load(cid, limit=limit, scope=scope)
        )
        self.same(entries_view, lambda store: store.load_entries(cid, limit=limit, scope=scope))
        if keep and mem[0] == "ok" and mem[1] is not None:
            self.held.append((mem[1], db[1]))

    @precondition(lambda self: self.held)
    @rule(
        pick=st.integers(0, 100),
        new=st.lists(messages, min_size=1, max_size=3),
        scope=st.sampled_from(SCOPES),
        usage=usages,
        waiting=deferred,
    )
    def continue_a_held_conversation(
        self, pick: int, new: list[Any], scope: str | None, usage: RunUsage, waiting: Any
    ) -> None:
        """Append to a loaded copy and save it: a conflict if another save came between."""
        pair = self.held[pick % len(self.held)]

        def call(store: ConversationStore) -> Any:
            conversation = pair[0] if store is self.mem else pair[1]
            conversation.messages.extend(new)
            conversation.usage = dataclasses.replace(usage)
            conversation.deferred_tool_requests = waiting
            return store.save(conversation, scope=scope)

        self.same(entries_view, call)

    @precondition(lambda self: self.held)
    @rule(
        pick=st.integers(0, 100),
        cut=st.integers(0, 6),
        new=st.lists(messages, min_size=0, max_size=3),
        windowed=st.booleans(),
    )
    def save_a_rewritten_history(self, pick: int, cut: int, new: list[Any], windowed: bool) -> None:
        """A history rewritten (cut and extended, as by compaction) and saved without the
        mark of what was stored: compared with the stored one, it branches off the last
        message both share."""
        pair = self.held[pick % len(self.held)]

        def call(store: ConversationStore) -> Any:
            held = pair[0] if store is self.mem else pair[1]
            kept = held.messages[: max(0, len(held.messages) - cut)]
            rewritten = Conversation(
                conversation_id=held.conversation_id,
                messages=[*kept, *new],
                usage=held.usage,
                revision=held.revision,
                new_message_index=len(kept) if windowed else None,
            )
            return store.save(rewritten)

        self.same(entries_view, call)

    # --- branches and forks ---------------------------------------------------------------

    def _revisions(self, cid: str) -> tuple[str | None, str | None]:
        records = [self.run(store.read_record(cid)) for store in (self.mem, self.db)]
        return tuple(r.revision if r is not None else None for r in records)  # type: ignore[return-value]

    def _entry_at(self, store: ConversationStore, cid: str, line: int, position: int) -> str:
        """An entry by where it stands: in the current history (``line`` 0) or in the
        ``line``-th newest branch left, at ``position`` (counted from its end, wrapped)."""
        record = self.run(store.read_record(cid))
        if record is None:
            return "no-such-entry"
        tips = [record.head_id, *reversed(record.branches)]
        tip = tips[line % len(tips)]
        history = self.run(store.read_history(tip))
        if not history:
            return "no-such-entry"
        return history[-1 - position % len(history)].id

    @rule(
        cid=st.sampled_from(CONVERSATIONS),
        at=st.none() | st.integers(-1, 6),
        line=st.integers(0, 3),
        position=st.integers(0, 6),
        stale=st.booleans(),
        scope=st.sampled_from(SCOPES),
    )
    def branch(
        self, cid: str, at: int | None, line: int, position: int, stale: bool, scope: str | None
    ) -> None:
        revisions = self._revisions(cid)

        def call(store: ConversationStore) -> Any:
            revision = "stale" if stale else revisions[0 if store is self.mem else 1]
            from_entry = None if at is not None else self._entry_at(store, cid, line, position)
            return store.branch(
                cid, at=at, from_entry=from_entry, expected_revision=revision, scope=scope
            )

        self.same(conversation_view, call)

    @rule(
        cid=st.sampled_from(CONVERSATIONS),
        new_cid=st.sampled_from(CONVERSATIONS),
        how=st.sampled_from(["all", "at", "from_entry"]),
        at=st.integers(-1, 6),
        line=st.integers(0, 3),
        position=st.integers(0, 6),
        scope=st.sampled_from(SCOPES),
        source_scope=st.sampled_from(SCOPES),
    )
    def fork(
        self, cid: str, new_cid: str, how: str, at: int, line: int, position: int,
        scope: str | None, source_scope: str | None,
    ) -> None:
        def call(store: ConversationStore) -> Any:
            from_entry = (
                self._entry_at(store, cid, line, position) if how == "from_entry" else None
            )
            return store.fork(
                cid,
                at=at if how == "at" else None,
                from_entry=from_entry,
                new_conversation_id=new_cid,
                scope=scope,
                source_scope=source_scope,
            )

        self.same(conversation_view, call)

    # --- listing and deleting ---------------------------------------------------------------

    @rule(scope=st.sampled_from(SCOPES), limit=limits)
    def list_conversations(self, scope: str | None, limit: int | None) -> None:
        async def call(store: ConversationStore) -> Any:
            records = await store.list_conversations(scope=scope, limit=limit)
            return [await record_view(store, record) for record in records]

        self.same(lambda views: views, call)

    @rule(cid=st.sampled_from(CONVERSATIONS), scope=st.sampled_from(SCOPES))
    def delete(self, cid: str, scope: str | None) -> None:
        self.same(lambda none: none, lambda store: store.delete(cid, scope=scope))

    # --- what both hold -----------------------------------------------------------------

    @invariant()
    def both_hold_the_same_conversations(self) -> None:
        async def everything(store: ConversationStore) -> Any:
            out = {}
            for cid in CONVERSATIONS:
                record = await store.read_record(cid)
                out[cid] = None if record is None else await record_view(store, record)
            return out

        assert self.run(everything(self.mem)) == self.run(everything(self.db))

    @invariant()
    def the_store_checks_clean(self) -> None:
        report = self.db.store.check()
        assert report.ok, [str(p) for p in report.problems]


def test_the_durable_store_answers_as_pydantic_ais_own_in_memory_store(
    new_location: Callable[[], str], backend: str
) -> None:
    bound = type(
        "ConversationMachineOn" + backend.title(),
        (ConversationMachine,),
        {"new_location": staticmethod(new_location)},
    )
    run_state_machine_as_test(
        bound, settings=POSTGRES_MACHINE if backend == "postgres" else MACHINE
    )

