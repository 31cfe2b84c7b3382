"""End to end, real parts only: uvicorn on 127.0.0.1 serving a pydantic-ai agent and an
ag-ui-langgraph endpoint behind ``agui_store.asgi.Recorder``, driven by the official
``@ag-ui/client`` 1.0.0 ``HttpAgent`` in node (through ``tests/oracle/live_client.mjs`` and the
``ReconnectingAgent`` of ``tests/oracle/reconnecting_agent.mjs``, the code the docs show).

After each scenario the store's ``checkout`` equals what the client holds.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agui_store
from agui_store.asgi import Recorder
from tests import live_servers
from tests.conftest import _skip_or_fail, needs_pydantic_ai
from tests.oracle_client import unavailable_reason

# ag-ui-langgraph 0.0.47 still calls LangGraph's deprecated get_config_jsonschema; the suite
# turns warnings into errors, which would fail every LangGraph run inside the server.
pytestmark = [
    pytest.mark.oracle,
    pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10"),
]


def owner_header(scope: dict[str, Any]) -> str | None:
    """The owner of a request: its X-User header (a stand-in for a session's user)."""
    for key, value in scope.get("headers", ()):
        if key == b"x-user":
            return str(value.decode())
    return None


class Live:
    """The server, its recorder and store, and the client, for one test module."""

    def __init__(self, store: agui_store.Store, recorder: Recorder, url: str, client: Any):
        self.store = store
        self.recorder = recorder
        self.url = url
        self.client = client

    def drive(
        self,
        endpoint: str,
        thread_id: str,
        *agents: dict[str, Any],
        user: str | None = None,
    ) -> list[dict[str, Any]]:
        """Run the agents' plans concurrently; what each client holds at the end, once
        the recorder has written everything it was sent."""
        command: dict[str, Any] = {
            "url": f"{self.url}/{endpoint}",
            "threadId": thread_id,
            "agents": list(agents),
        }
        if user is not None:
            command["headers"] = {"X-User": user}
        answer = self.client.run(command)
        self.settle()
        result: list[dict[str, Any]] = answer["agents"]
        return result

    def settle(self) -> None:
        """Wait until the recorder has written the last batch of every response."""
        deadline = time.monotonic() + 15
        while self.recorder.recording and time.monotonic() < deadline:
            time.sleep(0.005)
        assert self.recorder.recording == 0

    def assert_restores(self, run: str, thread_id: str, held: dict[str, Any]) -> None:
        checkout = self.store.checkout(run, thread_id=thread_id)
        assert checkout.messages == held["messages"]
        assert checkout.state == held["state"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    needs_pydantic_ai()  # the agents served are pydantic-ai's and LangGraph's
    reason = unavailable_reason()
    if reason:
        _skip_or_fail(reason)
    path = Path(tmp_path_factory.mktemp("live")) / "live.db"
    with agui_store.open(path) as store:
        recorder = Recorder(live_servers.agent_app(), store=store)
        client = live_servers.LiveClient()
        try:
            with live_servers.serve(recorder) as url:
                yield Live(store, recorder, url, client)
        finally:
            client.close()


@pytest.fixture(scope="module")
def owned(live: Live) -> Iterator[Live]:
    """The same agents and store behind a Recorder with owners (the X-User header)."""
    recorder = Recorder(live_servers.agent_app(), store=live.store, scope=owner_header)
    with live_servers.serve(recorder) as url:
        yield Live(live.store, recorder, url, live.client)


def new_thread() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def run(say: str, **more: Any) -> dict[str, Any]:
    return {"op": "run", "say": say, "runId": f"r-{uuid.uuid4().hex[:12]}", **more}


@pytest.mark.parametrize("endpoint", ["pydantic", "langgraph"])
def test_a_plain_run_restores_what_the_client_holds(live: Live, endpoint: str) -> None:
    thread = new_thread()
    step = run("hello there")
    (held,) = live.drive(endpoint, thread, {"steps": [step]})
    assert "error" not in held["steps"][0]
    live.assert_restores(step["runId"], thread, held)
    recorded = live.store.get_run(step["runId"], thread_id=thread)
    assert recorded is not None and recorded.status == "finished" and recorded.has_input


@pytest.mark.parametrize("endpoint", ["pydantic", "langgraph"])
def test_a_second_turn_with_a_tool_call_and_state_restores_what_the_client_holds(
    live: Live, endpoint: str
) -> None:
    thread = new_thread()
    first, second = run("hello"), run("tool weather")
    (held,) = live.drive(endpoint, thread, {"steps": [first, second]})
    assert held["state"]["topic"] == ("weather" if endpoint == "pydantic" else "tool weather")
    live.assert_restores(second["runId"], thread, held)
    parent = live.store.get_run(second["runId"], thread_id=thread)
    assert parent is not None and parent.parent_run_id == first["runId"]


def test_a_branch_sent_from_fork_restores_what_the_client_holds(live: Live) -> None:
    thread = new_thread()
    first, second = run("tool weather"), run("tool snow")
    live.drive("pydantic", thread, {"steps": [first, second]})
    fork = live.store.fork(first["runId"], thread_id=thread)
    branch = run("tool sunshine", runId=fork["runId"])
    (held,) = live.drive(
        "pydantic",
        thread,
        {"messages": fork["messages"], "state": fork["state"], "steps": [branch]},
    )
    assert held["state"]["topic"] == "sunshine" and held["state"]["turns"] == 2
    live.assert_restores(fork["runId"], thread, held)
    branched = live.store.get_run(fork["runId"], thread_id=thread)
    assert branched is not None and branched.parent_run_id == first["runId"]


def test_a_fresh_client_on_an_existing_thread_restores_exactly_what_it_holds(live: Live) -> None:
    thread = new_thread()
    live.drive("pydantic", thread, {"steps": [run("hello"), run("tool weather")]})
    edited = run("hello, edited")
    (held,) = live.drive("pydantic", thread, {"steps": [edited]})
    assert len(held["messages"]) == 2
    live.assert_restores(edited["runId"], thread, held)


def test_a_reload_is_restored_through_connect(live: Live) -> None:
    thread = new_thread()
    live.drive("pydantic", thread, {"steps": [run("hello"), run("tool weather")]})
    (reloaded,) = live.drive("pydantic", thread, {"steps": [{"op": "connect"}]})
    assert reloaded["steps"][0]["events"] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    live.assert_restores("HEAD", thread, reloaded)
    # And the reloaded client goes on: its next run continues the thread.
    (held,) = live.drive("pydantic", thread, {"steps": [{"op": "connect"}, run("tool rain")]})
    live.assert_restores("HEAD", thread, held)
    assert held["state"]["turns"] == 2


def test_a_reload_of_a_langgraph_thread_is_restored_through_connect(live: Live) -> None:
    thread = new_thread()
    live.drive("langgraph", thread, {"steps": [run("one"), run("two")]})
    (reloaded,) = live.drive("langgraph", thread, {"steps": [{"op": "connect"}]})
    live.assert_restores("HEAD", thread, reloaded)


def test_a_client_that_reloads_while_the_run_streams_follows_it_live(live: Live) -> None:
    thread = new_thread()
    streaming = run("slow 300")
    # The first client starts a slow run (1.5 s); the second "reloads" 400 ms in and follows it.
    held, follower = live.drive(
        "pydantic",
        thread,
        {"steps": [streaming]},
        {"steps": [{"op": "sleep", "ms": 400}, {"op": "connect"}]},
    )
    events = follower["steps"][1]["events"]
    assert events[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert "TEXT_MESSAGE_CONTENT" in events and events[-1] == "RUN_FINISHED"
    live.assert_restores(streaming["runId"], thread, held)
    live.assert_restores(streaming["runId"], thread, follower)


@pytest.mark.parametrize("kind", sorted(live_servers.CHUNK_STREAMS))
def test_a_client_that_reloads_while_a_stream_of_chunks_flows_follows_it_live(
    live: Live, kind: str
) -> None:
    """The chunks after the first name no message or tool call: the client continues the
    stream it has open, which the hydration's MESSAGES_SNAPSHOT ends."""
    thread = new_thread()
    streaming = run(kind)
    held, follower = live.drive(
        "chunks",
        thread,
        {"steps": [streaming]},
        {"steps": [{"op": "sleep", "ms": 400}, {"op": "connect"}]},
    )
    connected = follower["steps"][1]
    assert "error" not in connected, connected["error"]
    assert connected["events"][-1] == "RUN_FINISHED"
    live.assert_restores(streaming["runId"], thread, held)
    live.assert_restores(streaming["runId"], thread, follower)


def test_a_connect_to_an_unknown_thread_restores_nothing(live: Live) -> None:
    (held,) = live.drive("pydantic", new_thread(), {"steps": [{"op": "connect"}]})
    assert held["messages"] == [] and held["steps"][0]["events"] == []
    assert "error" not in held["steps"][0]


def test_an_aborted_run_is_left_incomplete_with_what_the_server_sent(live: Live) -> None:
    """abortRun() closes the connection; the server notices a few events later.

    The client stops applying events at once; the server, streaming fast, sends 1-4 more
    events in the 10-40 ms before the closed connection reaches it (uvicorn then cancels the
    stream). The store records what the server sent, so it holds the same messages with the
    aborted text a few deltas longer: nothing invented, the run left incomplete.
    """
    thread = new_thread()
    step = run("slow 400", abortAfter={"type": "TEXT_MESSAGE_CONTENT", "count": 20})
    (held,) = live.drive("pydantic", thread, {"steps": [step]})
    recorded = live.store.get_run(step["runId"], thread_id=thread)
    assert recorded is not None and recorded.status == "incomplete"
    checkout = live.store.checkout(step["runId"], thread_id=thread)
    assert [m["id"] for m in checkout.messages] == [m["id"] for m in held["messages"]]
    client_text, stored_text = held["messages"][-1]["content"], checkout.messages[-1]["content"]
    assert stored_text.startswith(client_text)
    assert len(stored_text.split()) < 400  # the server stopped: not the whole answer
    events = live.store.events(step["runId"], thread_id=thread)
    assert events[-1]["type"] != "RUN_FINISHED"


def test_a_stream_the_server_drops_mid_run_is_recorded_as_far_as_the_client_got_it(
    live: Live,
) -> None:
    thread = new_thread()
    step = run("hello")
    (held,) = live.drive("dropping", thread, {"steps": [step]})
    # The client applied what came before the drop, and its run failed.
    assert held["steps"][0]["events"] == list(live_servers.DROPPED_AFTER)
    assert held["steps"][0]["error"] == "terminated"
    recorded = live.store.get_run(step["runId"], thread_id=thread)
    assert recorded is not None and recorded.status == "incomplete" and recorded.has_input
    events = live.store.events(step["runId"], thread_id=thread)
    assert [e["type"] for e in events] == list(live_servers.DROPPED_AFTER)
    live.assert_restores(step["runId"], thread, held)
    # The user retries on the same thread: the client goes on, and so does the recording.
    again = run("hello again")
    (retried,) = live.drive("pydantic", thread, {"messages": held["messages"], "steps": [again]})
    assert "error" not in retried["steps"][0]
    live.assert_restores(again["runId"], thread, retried)
    parent = live.store.get_run(again["runId"], thread_id=thread)
    assert parent is not None and parent.parent_run_id == step["runId"]


def test_two_concurrent_runs_on_one_thread_are_recorded_apart(live: Live) -> None:
    """Two tabs on one conversation send a run each at the same time."""
    thread = new_thread()
    (earlier,) = live.drive("pydantic", thread, {"steps": [run("tool weather")]})
    tab = {"messages": earlier["messages"], "state": earlier["state"]}
    first, second = run("slow 60"), run("slow 50")
    one, two = live.drive("pydantic", thread, {**tab, "steps": [first]}, {**tab, "steps": [second]})
    live.assert_restores(first["runId"], thread, one)
    live.assert_restores(second["runId"], thread, two)
    a, b = (live.store.get_run(s["runId"], thread_id=thread) for s in (first, second))
    assert a is not None and b is not None and a.parent_run_id == b.parent_run_id
    # They streamed at the same time: each was written to before the other ended.
    assert a.updated_at is not None and b.updated_at is not None
    assert a.created_at < b.updated_at and b.created_at < a.updated_at


def test_another_owner_neither_writes_into_a_thread_nor_reads_it(owned: Live) -> None:
    thread = new_thread()
    (alice,) = owned.drive("pydantic", thread, {"steps": [run("hello")]}, user="alice")
    owned.assert_restores("HEAD", thread, alice)
    before = owned.store.runs(thread)
    intruder = run("tool mine")
    (bob,) = owned.drive("pydantic", thread, {"steps": [intruder]}, user="bob")
    # Bob's client got its answer untouched; nothing of it was written into Alice's thread.
    assert "error" not in bob["steps"][0] and bob["state"]["topic"] == "mine"
    assert owned.store.runs(thread) == before
    (peek,) = owned.drive("pydantic", thread, {"steps": [{"op": "connect"}]}, user="bob")
    assert peek["messages"] == []
    (nobody,) = owned.drive("pydantic", thread, {"steps": [{"op": "connect"}]})
    assert nobody["messages"] == []
    (again,) = owned.drive("pydantic", thread, {"steps": [{"op": "connect"}]}, user="alice")
    assert again["messages"] == alice["messages"]


def test_the_docs_show_exactly_the_reconnecting_agent_these_tests_run() -> None:
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "guides" / "reconnecting.md").read_text(encoding="utf-8")
    # The page includes the file when the site is built, so the two cannot differ.
    assert '--8<-- "tests/oracle/reconnecting_agent.mjs"' in page
