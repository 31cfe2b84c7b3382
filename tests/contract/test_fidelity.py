"""Request-body fidelity (docs/design/restoring.md), differentially against the official
client.

A request body is what the client holds: ``HttpAgent`` sends its whole history with every run
and never a ``parentRunId``. A body whose parent was not named and that continues no restored
view (a fresh client on an existing thread, an edited first message) restores as exactly its
own messages and then the run's events, never with the head's messages prepended. A body that
continues a restored view (lineage rule 3) keeps the activity messages the client holds but
strips from what it sends. The reference is ``@ag-ui/client`` 1.0.0 replaying the run's
events from what the client holds (``{events, messages, state}``), computed here from the
client's side, never from the store's start rule.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from tests.backends import checked
from tests.contract.test_restore import assert_pipeline_restores
from tests.oracle_client import Oracle, as_js
from tests.strategies import json_objects, legal_streams, messages
from tests.streams import http_agent_body, reply

pytestmark = pytest.mark.oracle


class Client:
    """An HttpAgent's bookkeeping: what it holds, and what the official reducer makes of a
    run's events from there."""

    def __init__(self, oracle: Oracle, held: list[dict[str, Any]] | None = None) -> None:
        self.oracle = oracle
        self.messages: list[dict[str, Any]] = held or []
        self.state: Any = {}

    def run(self, store: Any, events: list[dict[str, Any]], **append: Any) -> dict[str, Any]:
        body = http_agent_body(events[0]["runId"], self.messages, self.state)
        store.append(events, input=body, **append)
        got = self.oracle.replay(events, messages=self.messages, state=self.state)
        assert got["ok"], got
        self.messages, self.state = got["messages"], got["state"]
        return body

    def say(self, message_id: str, text: str) -> None:
        self.messages = [*self.messages, {"id": message_id, "role": "user", "content": text}]


def _four_messages(store: Any, oracle: Oracle) -> Client:
    first = Client(oracle)
    first.say("u1", "hello")
    first.run(store, reply("r1", "a1", "hi"))
    first.say("u2", "how are you?")
    first.run(store, reply("r2", "a2", "fine"))
    assert len(store.checkout("r2").messages) == 4
    return first


@pytest.mark.parametrize("same_id", [False, True], ids=["new-id", "same-id"])
def test_a_fresh_client_that_edits_the_first_message_restores_as_it_holds_it(
    oracle: Oracle, store_location: str, same_id: bool
) -> None:
    with agui_store.open(store_location) as store:
        _four_messages(store, oracle)
        fresh = Client(oracle)
        fresh.say("u1" if same_id else "e1", "hello, edited")
        fresh.say("e2", "and a second message")
        fresh.state = {"draft": True}
        body = fresh.run(store, reply("r3", "a3", "a new answer"))
        assert len(body["messages"]) == 2
        co = store.checkout("r3")
        assert as_js([co.messages, co.state]) == as_js([fresh.messages, fresh.state])
        assert len(co.messages) == 3  # not the head's 4 first
        assert store.input("r3") == body
        # Its place in the lineage is unchanged (rule 4, the head): log and diff see it there.
        assert [r.run_id for r in store.log("r3")] == ["r3", "r2", "r1"]
        assert store.get_run("r3").lineage == "head"
        assert store.merge_base("r2", "r3").run_id == "r2"
        assert_pipeline_restores(oracle, store, "r3", "t")
        # The client goes on from what it holds: its next body continues r3's view.
        fresh.say("e3", "thanks")
        fresh.run(store, reply("r4", "a4", "welcome"))
        co = store.checkout("r4")
        assert as_js([co.messages, co.state]) == as_js([fresh.messages, fresh.state])
        assert store.get_run("r4").parent_run_id == "r3"
        assert checked(store)


def test_a_client_continuing_a_view_keeps_the_activity_messages_it_did_not_send(
    oracle: Oracle, store_location: str
) -> None:
    activity = {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": "plan",
        "activityType": "plan",
        "content": {"steps": ["look", "answer"]},
    }
    with agui_store.open(store_location) as store:
        client = Client(oracle)
        client.say("u1", "plan it")
        client.run(store, reply("r1", "a1", "planned", activity))
        assert any(m["role"] == "activity" for m in client.messages)
        client.say("u2", "go on")
        body = client.run(store, reply("r2", "a2", "done"))
        assert all(m["role"] != "activity" for m in body["messages"])
        assert store.get_run("r2").lineage == "messages"
        co = store.checkout("r2")
        assert as_js([co.messages, co.state]) == as_js([client.messages, client.state])


def test_a_body_whose_parent_is_named_may_leave_out_what_the_lineage_holds(
    oracle: Oracle, store_location: str
) -> None:
    """Only an input whose parent is named may be normalized: its messages follow the
    lineage's (what `fork` users and producers that send only new messages rely on)."""
    with agui_store.open(store_location) as store:
        client = _four_messages(store, oracle)
        events = reply("r3", "a3", "named")
        body = http_agent_body("r3", [{"id": "u3", "role": "user", "content": "only the new one"}])
        body["parentRunId"] = "r2"
        store.append(events, input=body)
        want = oracle.replay(events, messages=[*client.messages, *body["messages"]], state={})
        co = store.checkout("r3")
        assert as_js(co.messages) == as_js(want["messages"])
        assert store.input("r3") == body


@st.composite
def fresh_bodies(draw: st.DrawFn, known: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a client that restored nothing holds: a first message of its own, then any mix of
    new messages and the thread's messages, as they are or edited."""
    held = [{"id": "fresh-0", "role": "user", "content": draw(st.text(max_size=5))}]
    for _ in range(draw(st.integers(0, 4))):
        if known and draw(st.booleans()):
            m = dict(draw(st.sampled_from(known)))
            if draw(st.booleans()) and m.get("role") == "user":
                m["content"] = "edited"
            held.append(m)
        else:
            held.append(draw(messages(ids=[f"fresh-{len(held)}"])))
    unique: dict[Any, dict[str, Any]] = {}
    for m in held:
        unique.setdefault(m["id"], m)
    return list(unique.values())


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), n=st.integers(1, 3))
def test_a_body_that_continues_no_view_restores_as_sent_and_reads_back_whole(
    oracle: Oracle, new_location: Any, data: st.DataObject, n: int
) -> None:
    """Generated threads, then a fresh client's body with no parentRunId: the store's view is
    the official client's replay from that body, whatever the thread held before; and the
    body is stored by reference where it shares messages with the head, and read back
    whole."""
    with agui_store.open(new_location()) as store:
        for i in range(n):
            events = data.draw(legal_streams(min_runs=1, max_runs=1, run_ids=[f"r{i}"]))
            store.append(events)
        known = [m for m in store.checkout(f"r{n - 1}").messages if m.get("role") != "activity"]
        held = data.draw(fresh_bodies(known))
        state = data.draw(st.one_of(st.none(), json_objects))
        events = data.draw(legal_streams(min_runs=1, max_runs=1, run_ids=["fresh"]))
        body = http_agent_body("fresh", held, state)
        store.append(events, input=body)
        assert store.get_run("fresh").lineage == "head"
        assert store.input("fresh") == body
        start_state = state if state is not None else store.checkout(f"r{n - 1}").state
        want = oracle.replay(
            events, messages=json.loads(json.dumps(body["messages"])), state=start_state
        )
        assert want["ok"], want
        co = store.checkout("fresh")
        assert as_js([co.messages, co.state]) == as_js([want["messages"], want["state"]])
        assert_pipeline_restores(oracle, store, "fresh", "t")
