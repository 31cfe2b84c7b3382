"""End to end, real parts only: a pydantic-ai agent (a scripted ``FunctionModel``) behind
``AGUIAdapter`` with the store's ``ConversationStore`` and the ``Recorder``, in a uvicorn
server process of its own (:mod:`tests.workers.pydantic_ai_server`), driven by the official
``@ag-ui/client`` 1.0.0 ``HttpAgent`` in node (``tests/oracle/conversation_client.mjs``).

One conversation goes through several turns, a kill of the server process and a restart
(the conversation goes on where it was), a regenerate, an edit of an earlier user message
and a tool call the client answers; the conversation store and the AG-UI log then tell the
same story, linked both ways. A run whose stream the server drops is recorded as far as
the client got it, and the conversation goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agui_store
from tests.conftest import _skip_or_fail, needs_pydantic_ai
from tests.oracle_client import unavailable_reason
from tests.workers.harness import Worker

# Every test here uses pydantic-ai, which needs Python 3.11: on 3.10 the module skips.
needs_pydantic_ai()

from agui_store.integrations.pydantic_ai import ConversationStore  # noqa: E402

pytestmark = [pytest.mark.oracle]

ORACLE_DIR = Path(__file__).resolve().parents[1] / "oracle"
USER = "alice"
CONFIRM = {
    "name": "confirm",
    "description": "Ask the user to confirm something",
    "parameters": {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
}


class Client:
    """The official HttpAgent in one node process: one run per :meth:`run`."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            ["node", str(ORACLE_DIR / "conversation_client.mjs")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=ORACLE_DIR, text=True, encoding="utf-8",
        )

    def run(
        self, url: str, thread_id: str, run_id: str, messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """One run of the client holding ``messages``; what it holds after, and the events."""
        answer = self.attempt(url, thread_id, run_id, messages, tools)
        assert answer["ok"] and "error" not in answer, answer
        assert "RUN_ERROR" not in [e["type"] for e in answer["events"]], answer["events"]
        return answer

    def attempt(
        self, url: str, thread_id: str, run_id: str, messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None, headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One run as :meth:`run`, whatever becomes of it: the client's whole answer."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        command = {
            "url": url, "threadId": thread_id, "runId": run_id, "messages": messages,
            "tools": tools or [], "headers": {"X-User": USER, **(headers or {})},
        }
        self._proc.stdin.write(json.dumps(command) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        assert line, f"conversation_client.mjs died (exit {self._proc.wait(timeout=10)})"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


class Server:
    """The server process; :meth:`restart` kills it (SIGKILL) and starts another."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._start()

    def _start(self) -> None:
        self.worker = Worker("pydantic_ai_server", self.location)
        port = self.worker.wait_for("listening", timeout=120).split()[1]
        self.url = f"http://127.0.0.1:{port}/chat"

    def restart(self) -> None:
        self.worker.kill()
        self._start()

    def stop(self) -> None:
        self.worker.kill()


@pytest.fixture
def client() -> Iterator[Client]:
    reason = unavailable_reason()
    if reason:
        _skip_or_fail(reason)
    client = Client()
    yield client
    client.close()


def said(text: str) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "role": "user", "content": text}


def wait_recorded(store: agui_store.Store, thread_id: str, run_id: str) -> None:
    """Until the Recorder has written the run's end (it may land after the client's last byte)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = store.get_run(run_id, thread_id=thread_id)
        if run is not None and run.status == "finished":
            return
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} was not recorded finished")


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """What a client's messages say: role, and text or tool calls/results."""
    out: list[tuple[str, Any]] = []
    for m in messages:
        if m["role"] == "assistant" and m.get("toolCalls"):
            out.append(("tool calls", [c["function"]["name"] for c in m["toolCalls"]]))
        if m.get("content"):
            out.append((m["role"], m["content"]))
    return out


def model_texts(messages: list[Any]) -> list[tuple[str, Any]]:
    """The same of a stored pydantic-ai history."""
    from pydantic_ai.messages import (
        ModelRequest,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[tuple[str, Any]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(message, ModelRequest) and isinstance(part, UserPromptPart):
                out.append(("user", part.content))
            elif isinstance(part, ToolReturnPart):
                out.append(("tool", part.content))
            elif isinstance(part, ToolCallPart):
                out.append(("tool calls", [part.tool_name]))
            elif isinstance(part, TextPart):
                out.append(("assistant", part.content))
    return out


@contextlib.contextmanager
def conversation_served(
    store_location: str,
) -> Iterator[tuple[Server, agui_store.Store, ConversationStore, Any]]:
    """The pydantic-ai server on ``store_location``, the store and its conversation store
    opened on it, and a way to wait for their coroutines; all stopped and closed after."""
    server = Server(store_location)
    store = agui_store.open(store_location)
    conversations = ConversationStore(store)
    loop = asyncio.new_event_loop()
    try:
        yield server, store, conversations, loop.run_until_complete
    finally:
        server.stop()
        loop.run_until_complete(conversations.close())
        loop.close()
        store.close()


def test_a_conversation_survives_a_restart_and_branches_alike_in_both_views(
    store_location: str, client: Client
) -> None:
    thread = f"conv-{uuid.uuid4().hex[:12]}"
    with conversation_served(store_location) as (server, store, conversations, wait):

        def turn(run_id: str, messages: list[dict[str, Any]], **more: Any) -> list[dict[str, Any]]:
            answer = client.run(server.url, thread, run_id, messages, **more)
            saved = [
                e for e in answer["events"] if e.get("name") == "pydantic_ai_conversation_saved"
            ]
            assert len(saved) == 1 and saved[0]["value"]["conversation_id"] == thread
            wait_recorded(store, thread, run_id)
            held: list[dict[str, Any]] = answer["messages"]
            return held

        def stored() -> Any:
            conversation = wait(conversations.load(thread, scope=USER))
            assert conversation is not None
            return conversation

        # Two turns, then the server process is killed and another takes over.
        u1, u2 = said("hello"), said("how are you")
        held1 = turn("r1", [u1])
        held2 = turn("r2", [*held1, u2])
        server.restart()
        held3 = turn("r3", [*held2, said("and now?")])
        assert held3[-1]["content"].startswith("You said: and now? (3 questions so far, answer 1)")
        assert model_texts(stored().messages) == texts(held3)

        # A regenerate of the last answer: the client sends its messages up to the question.
        held4 = turn("r4", held3[:-1])
        assert held4[-1]["content"] == "You said: and now? (3 questions so far, answer 2)"
        assert model_texts(stored().messages) == texts(held4)
        record = wait(conversations.read_record(thread))
        r2, r3, r4 = (
            wait(conversations.saved_by_run(r, thread_id=thread)) for r in ("r2", "r3", "r4")
        )
        assert record.branches == [r3.head_id] and record.head_id == r4.head_id
        # A branch in both views, forking at the same point.
        ag_ui = store.diff("r3", "r4", thread_id=thread)
        assert ag_ui.merge_base is not None and ag_ui.merge_base.run_id == "r2"
        model = wait(conversations.diff(r3.head_id, r4.head_id))
        assert model.merge_base == r2.head_id
        assert [e.id for e in model.only_a] == list(r3.entry_ids)
        assert [e.id for e in model.only_b] == list(r4.entry_ids)

        # An edit of the earlier user message: the turn it started is replaced.
        edited = {**u2, "content": "how old are you"}
        held5 = turn("r5", [*held1, edited])
        assert held5[-1]["content"].startswith("You said: how old are you (2 questions so far")
        assert model_texts(stored().messages) == texts(held5)
        assert len(wait(conversations.read_record(thread)).branches) == 2

        # A tool call the client answers.
        held6 = turn("r6", [*held5, said("ask favourite colour?")], tools=[CONFIRM])
        (call,) = held6[-1]["toolCalls"]
        waiting = stored().deferred_tool_requests
        assert [c.tool_call_id for c in waiting.calls] == [call["id"]]
        answer = {"id": str(uuid.uuid4()), "role": "tool", "toolCallId": call["id"],
                  "content": "blue"}
        held7 = turn("r7", [*held6, answer], tools=[CONFIRM])
        assert held7[-1]["content"] == "Confirmed: blue"
        final = stored()
        assert final.deferred_tool_requests is None
        assert model_texts(final.messages) == texts(held7)

        # Each run names the entries it saved, and each entry its run.
        entries = wait(conversations.load_entries(thread, scope=USER))
        for entry in entries:
            run = wait(conversations.run_of_entry(entry.id))
            assert run is not None and entry.id in run.entry_ids
        assert {wait(conversations.run_of_entry(e.id)).run_id for e in entries} == {
            "r1", "r5", "r6", "r7"
        }
        # The AG-UI checkout of the last run holds what the client holds.
        assert store.checkout("r7", thread_id=thread).messages == held7
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]


def test_a_stream_the_server_drops_mid_run_is_recorded_as_far_as_the_client_got_it(
    store_location: str, client: Client
) -> None:
    thread = f"conv-{uuid.uuid4().hex[:12]}"
    with conversation_served(store_location) as (server, store, conversations, wait):
        question = said("hello")
        dropped = client.attempt(
            server.url, thread, "r1", [question], headers={"X-Drop-After": "3"}
        )
        # The client applied what came before the drop, and its run failed.
        assert dropped["ok"] and dropped["error"] == "terminated", dropped
        applied = ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
        assert [e["type"] for e in dropped["events"]] == applied
        # The store recorded the same, the run left incomplete, and holds what the client holds.
        recorded = store.get_run("r1", thread_id=thread)
        assert recorded is not None and recorded.status == "incomplete" and recorded.has_input
        assert [e["type"] for e in store.events("r1", thread_id=thread)] == applied
        assert store.checkout("r1", thread_id=thread).messages == dropped["messages"]
        # The user asks again on the same thread: the client goes on, and both views agree.
        again = client.run(server.url, thread, "r2", [question])
        wait_recorded(store, thread, "r2")
        assert store.checkout("r2", thread_id=thread).messages == again["messages"]
        conversation = wait(conversations.load(thread, scope=USER))
        assert conversation is not None
        assert model_texts(conversation.messages) == texts(again["messages"])
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
