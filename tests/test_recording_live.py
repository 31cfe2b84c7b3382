"""The in-process recorder with real producers and real endings, no network.

pydantic-ai's ``AGUIAdapter(agent, run_input).run_stream()`` over a scripted ``FunctionModel``
(streamed text, a tool call, state through deps) and ag-ui-langgraph's ``LangGraphAgent`` over a
small scripted graph (no LLM) are recorded with ``astore.record``; the run then restores exactly
as the official client holds it after replaying the recorded events from the request. Then the
ways a stream ends early: the producer raising, the consumer breaking out, the task cancelled,
and the batches that must reach the file while the stream is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import pytest
from ag_ui.core import EventType, RunAgentInput, StateSnapshotEvent, UserMessage
from ag_ui_langgraph import LangGraphAgent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

import agui_store
from agui_store import aio, testing
from agui_store.recording import AsyncBatcher
from benchmarks._common import conversation_run
from tests.oracle_client import Oracle, as_js

# pydantic-ai needs Python 3.11: without it the tests marked pydantic_ai skip
# (tests/conftest.py).
with contextlib.suppress(ImportError):
    from pydantic_ai import Agent, RunContext, ToolReturn
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    from tests.live_servers import last_prompt

T = TypeVar("T")

#: How long a producer waits for its events to show up in the file before the test fails.
#: Generous: the recorder writes within 0.1 s; a loaded CI machine may take far longer.
VISIBLE_WITHIN = 30.0


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def request(thread: str, run_id: str, text: str, state: Any = None) -> RunAgentInput:
    return RunAgentInput(
        thread_id=thread,
        run_id=run_id,
        messages=[UserMessage(id=f"u-{run_id}", role="user", content=text)],
        state=state if state is not None else {},
        tools=[],
        context=[],
        forwarded_props={},
    )


def wire(value: Any) -> Any:
    """A pydantic object as its JSON reads."""
    return json.loads(value.model_dump_json(by_alias=True))


def assert_restores_as_the_client_holds_it(
    oracle: Oracle, store: agui_store.Store, run_input: RunAgentInput
) -> None:
    """checkout == the official client after replaying the recorded events, starting from
    the request's messages and state (a fresh thread: the request is all it held)."""
    body = wire(run_input)
    events = store.events(run_input.run_id, thread_id=run_input.thread_id)
    want = oracle.replay(events, messages=body["messages"], state=body["state"])
    assert want["ok"], want
    co = store.checkout(run_input.run_id, thread_id=run_input.thread_id)
    assert as_js(co.messages) == as_js(want["messages"])
    assert as_js(co.state) == as_js(want["state"])


# --- pydantic-ai ------------------------------------------------------------------------


@dataclass
class Deps:
    """Receives the client's state (pydantic-ai's StateHandler protocol)."""

    state: dict[str, Any] = field(default_factory=dict)


async def scripted_model(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """``tool <topic>`` calls set_topic, then says what it set; anything else is echoed in
    a few text deltas."""
    text, after_tool = last_prompt(messages)
    verb, _, rest = text.partition(" ")
    if verb == "tool" and not after_tool:
        yield {0: DeltaToolCall(name="set_topic", json_args=json.dumps({"topic": rest}))}
    elif verb == "tool":
        for word in ("The ", "topic ", "is ", rest):
            yield word
    else:
        for word in f"You said: {text}".split(" "):
            yield word + " "


def pydantic_agent() -> Agent[Deps, str]:
    agent = Agent(FunctionModel(stream_function=scripted_model), deps_type=Deps)

    @agent.tool
    async def set_topic(ctx: RunContext[Deps], topic: str) -> ToolReturn:
        """Remember the topic in the shared state."""
        state = {**ctx.deps.state, "topic": topic, "turns": ctx.deps.state.get("turns", 0) + 1}
        return ToolReturn(
            return_value=f"topic set to {topic}",
            metadata=[StateSnapshotEvent(type=EventType.STATE_SNAPSHOT, snapshot=state)],
        )

    return agent


@pytest.mark.pydantic_ai
@pytest.mark.oracle
@pytest.mark.parametrize("text", ["hello there", "tool weather"])
def test_a_pydantic_ai_run_recorded_in_process_restores_as_the_client_holds_it(
    oracle: Oracle, db_path: Path, text: str
) -> None:
    run_input = request("t", "r1", text, state={"turns": 2})
    adapter = AGUIAdapter(agent=pydantic_agent(), run_input=run_input)

    async def main() -> list[Any]:
        async with aio.open(db_path) as astore:
            stream = adapter.run_stream(deps=Deps())
            return [e async for e in astore.record(stream, input=run_input)]

    passed = run(main())
    with agui_store.open(db_path) as store:
        assert store.events("r1", thread_id="t") == [wire(e) for e in passed]
        assert store.input("r1", thread_id="t") == wire(run_input)
        assert store.get_run("r1", thread_id="t").status == "finished"  # type: ignore[union-attr]
        assert_restores_as_the_client_holds_it(oracle, store, run_input)
        co = store.checkout("r1", thread_id="t")
        if text.startswith("tool"):
            assert co.state == {"turns": 3, "topic": "weather"}
            assert any(m.get("role") == "tool" for m in co.messages)
        assert co.messages[-1]["role"] == "assistant" and co.messages[-1]["content"]


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("chunked", [False, True])
def test_a_pydantic_ai_run_recorded_as_its_encoded_event_stream_keeps_each_event_it_sent(
    db_path: Path, chunked: bool
) -> None:
    """What ``encode_stream`` yields (``data: {...}`` and a blank line an event, the bytes
    an SSE response sends) records the events themselves, also cut into chunks anywhere and
    ending without its last blank line; the same run recorded from ``run_stream`` holds the
    same events."""
    run_input = request("t", "r1", "tool weather", state={"turns": 2})
    adapter = AGUIAdapter(agent=pydantic_agent(), run_input=run_input)

    async def main() -> list[str]:
        frames = [f async for f in adapter.encode_stream(adapter.run_stream(deps=Deps()))]
        text = "".join(frames)
        if chunked:  # cut every 7 characters, the last blank line left out
            text = text.removesuffix("\n")
            frames = [text[i : i + 7] for i in range(0, len(text), 7)]

        async def sent() -> Any:
            for frame in frames:
                yield frame

        async with aio.open(db_path) as astore:
            assert [f async for f in astore.record(sent(), input=run_input)] == frames
        return [json.loads(line.removeprefix("data: ")) for line in text.split("\n\n") if line]

    events = run(main())
    with agui_store.open(db_path) as store:
        assert store.events("r1", thread_id="t") == events
        assert store.get_run("r1", thread_id="t").status == "finished"  # type: ignore[union-attr]
        assert store.checkout("r1", thread_id="t").state == {"turns": 3, "topic": "weather"}
    frames = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
    with agui_store.open(db_path.with_name("sync.db")) as store:  # a Store's record too
        assert list(store.record(frames)) == frames
        assert store.events("r1", thread_id="t") == events


# --- ag-ui-langgraph --------------------------------------------------------------------


class GraphState(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    lookups: int


def scripted_graph() -> Any:
    """agent -> tool -> agent: the first call asks for a lookup, the tool answers, the
    second call replies with it. No model: the nodes return the messages themselves."""

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(content=f"found: {last.content}", id="ai-final")]}
        call = {"name": "lookup", "args": {"q": str(last.content)}, "id": "call-1"}
        return {"messages": [AIMessage(content="", tool_calls=[call], id="ai-call")]}

    def tool(state: dict[str, Any]) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        answer = ToolMessage(content=f"{call['args']['q']}!", tool_call_id=call["id"], id="tm-1")
        return {"messages": [answer], "lookups": state.get("lookups", 0) + 1}

    def route(state: dict[str, Any]) -> str:
        return "tool" if getattr(state["messages"][-1], "tool_calls", None) else END

    graph = StateGraph(GraphState)
    graph.add_node("agent", agent)
    graph.add_node("tool", tool)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tool", END])
    graph.add_edge("tool", "agent")
    return graph.compile(checkpointer=MemorySaver())


@pytest.mark.oracle
# ag-ui-langgraph 0.0.47 still calls the graph's get_config_jsonschema, deprecated in LangGraph 1.0
@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_a_langgraph_run_recorded_in_process_restores_as_the_client_holds_it(
    oracle: Oracle, db_path: Path
) -> None:
    run_input = request("lg", "r1", "weather")
    agent = LangGraphAgent(name="scripted", graph=scripted_graph())

    async def main() -> list[Any]:
        async with aio.open(db_path) as astore:
            return [e async for e in astore.record(agent.run(run_input), input=run_input)]

    passed = run(main())
    assert [e.type for e in passed][-1] == EventType.RUN_FINISHED
    with agui_store.open(db_path) as store:
        assert store.events("r1", thread_id="lg") == [wire(e) for e in passed]
        assert_restores_as_the_client_holds_it(oracle, store, run_input)
        co = store.checkout("r1", thread_id="lg")
        assert co.run.status == "finished"
        assert co.messages[-1]["content"] == "found: weather!"
        assert co.state.get("lookups") == 1


# --- endings: what passed is recorded, nothing is invented ------------------------------


class ProducerFailed(Exception):
    pass


async def failing_producer(events: list[dict[str, Any]], after: int) -> AsyncIterator[Any]:
    for event in events[:after]:
        await asyncio.sleep(0)
        yield event
    raise ProducerFailed("the model went away")


def recorded(db_path: Path, thread: str, run_id: str) -> tuple[list[dict[str, Any]], str]:
    with agui_store.open(db_path) as store:
        found = store.get_run(run_id, thread_id=thread)
        assert found is not None
        return store.events(run_id, thread_id=thread), found.status


def test_a_producer_that_raises_leaves_what_passed_recorded_and_the_run_incomplete(
    db_path: Path,
) -> None:
    events = conversation_run("t", "r1", 40, 0)

    async def main() -> list[Any]:
        passed: list[Any] = []
        async with aio.open(db_path) as astore:
            with pytest.raises(ProducerFailed):
                async for event in astore.record(failing_producer(events, 17)):
                    passed.append(event)
        return passed

    passed = run(main())
    assert passed == events[:17]
    assert recorded(db_path, "t", "r1") == (events[:17], "incomplete")


def test_a_sync_producer_that_raises_leaves_what_passed_recorded(db_path: Path) -> None:
    events = conversation_run("t", "r1", 40, 0)

    def producer() -> Iterator[dict[str, Any]]:
        yield from events[:23]
        raise ProducerFailed("the model went away")

    with agui_store.open(db_path) as store, pytest.raises(ProducerFailed):
        for _ in store.record(producer()):
            pass
    assert recorded(db_path, "t", "r1") == (events[:23], "incomplete")


@pytest.mark.parametrize("how", ["aclosing", "left to the garbage collector"])
def test_a_consumer_that_breaks_out_leaves_what_it_received_recorded(
    db_path: Path, how: str
) -> None:
    events = conversation_run("t", "r1", 40, 0)
    producer_closed = asyncio.Event()

    async def producer() -> AsyncIterator[Any]:
        try:
            for event in events:
                await asyncio.sleep(0)
                yield event
        finally:
            producer_closed.set()

    async def main() -> None:
        async with aio.open(db_path) as astore:
            received = 0
            if how == "aclosing":
                async with aclosing(astore.record(producer())) as stream:
                    async for _ in stream:
                        received += 1
                        if received == 12:
                            break
            else:
                async for _ in astore.record(producer()):
                    received += 1
                    if received == 12:
                        break
            # The producer is closed with the recorder (at once, or when the loop finalizes
            # the abandoned generator); close() waits for any recorder still open.
            await asyncio.wait_for(producer_closed.wait(), VISIBLE_WITHIN)

    run(main())
    assert recorded(db_path, "t", "r1") == (events[:12], "incomplete")


def test_a_sync_consumer_that_breaks_out_leaves_what_it_received_recorded(db_path: Path) -> None:
    events = conversation_run("t", "r1", 40, 0)
    with agui_store.open(db_path) as store:
        for n, _ in enumerate(store.record(iter(events)), 1):
            if n == 9:
                break
    assert recorded(db_path, "t", "r1") == (events[:9], "incomplete")


def test_a_cancelled_task_leaves_what_passed_recorded_and_the_run_incomplete(
    db_path: Path,
) -> None:
    events = conversation_run("t", "r1", 40, 0)
    stuck = asyncio.Event()

    async def producer() -> AsyncIterator[Any]:
        for event in events[:15]:
            await asyncio.sleep(0)
            yield event
        stuck.set()
        await asyncio.Event().wait()  # a model that never answers
        yield events[15]

    async def main() -> None:
        async with aio.open(db_path) as astore:

            async def consume() -> None:
                async for _ in astore.record(producer()):
                    pass

            task = asyncio.create_task(consume())
            await stuck.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    run(main())
    assert recorded(db_path, "t", "r1") == (events[:15], "incomplete")


def test_tasks_still_recording_when_asyncio_run_returns_leave_what_they_received_recorded(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The program returns while its recordings run and never closes the AsyncStore:
    ``asyncio.run`` cancels every task left, the recorder's own writers among them, in the
    middle of an append. Each run still holds exactly what its consumer received."""
    runs = [("t0", "r0"), ("t0", "r1"), ("t1", "r2"), ("t1", "r3")]
    received: dict[str, list[Any]] = {run_id: [] for _, run_id in runs}
    release = threading.Event()

    def busy_until_released(store: agui_store.Store) -> None:
        release.wait()  # the store's worker is busy: the first batches wait their turn

    async def main() -> tuple[aio.AsyncStore, list[asyncio.Future[Any]]]:
        astore = await aio.open(db_path, writer="thread")
        blocking = asyncio.ensure_future(astore.in_one_read(busy_until_released))
        real = astore.append_batch
        appending = asyncio.Event()
        appends = 0

        def counted(batch: Any, options: Any) -> Any:  # the real append, counted
            nonlocal appends
            appends += 1
            if appends == len(runs):
                appending.set()
            return real(batch, options)

        astore.append_batch = counted  # type: ignore[method-assign]
        stuck = [asyncio.Event() for _ in runs]

        async def producer(thread: str, run_id: str, n: int) -> AsyncIterator[Any]:
            events = conversation_run(thread, run_id, 40, 0)
            for event in events[:5]:
                yield event
            await appending.wait()  # every first batch is being appended
            for event in events[5 : 5 + n]:  # and these wait in the next batch
                yield event
            stuck[n].set()
            await asyncio.Event().wait()  # a model that never answers
            yield events[-1]

        async def consume(thread: str, run_id: str, n: int) -> None:
            async for event in astore.record(producer(thread, run_id, n)):
                received[run_id].append(event)

        consumers = [
            asyncio.ensure_future(consume(thread, run_id, n))
            for n, (thread, run_id) in enumerate(runs)
        ]
        for event in stuck:
            await event.wait()
        release.set()
        # asyncio.run cancels the tasks left, and closes the loop. The program still holds
        # its tasks (the loop keeps only weak references to them).
        return astore, [blocking, *consumers]

    astore, tasks = run(main())
    assert all(task.done() for task in tasks)
    gc.collect()  # a task destroyed while pending is told as it is collected
    testing.stop_threads(astore)
    astore.store.close()
    for thread, run_id in runs:
        assert recorded(db_path, thread, run_id) == (received[run_id], "incomplete")
    with agui_store.open(db_path) as store:
        assert store.check().ok
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


# --- batches reach the file while the stream runs ---------------------------------------


def visible_count(path: Path, thread: str, run_id: str) -> int:
    with agui_store.open(path) as other:  # another connection: only what was committed
        found = other.get_run(run_id, thread_id=thread)
        return 0 if found is None else found.event_count


def wait_until_visible(path: Path, thread: str, run_id: str, count: int) -> None:
    deadline = time.monotonic() + VISIBLE_WITHIN
    while visible_count(path, thread, run_id) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} events never became visible to another store")
        time.sleep(0.01)


def test_events_reach_the_file_while_the_async_stream_is_still_running(db_path: Path) -> None:
    """The producer pauses after each part and goes on only once another store on the same
    file sees every event so far: the recording cannot wait for the end of the stream."""
    events = conversation_run("t", "r1", 30, 0)
    seen_before_the_end: list[int] = []

    async def producer() -> AsyncIterator[Any]:
        for part in (events[:1], events[1:10], events[10:29]):
            for event in part:
                yield event
            upto = events.index(part[-1]) + 1
            await asyncio.to_thread(wait_until_visible, db_path, "t", "r1", upto)
            seen_before_the_end.append(upto)
        yield events[29]

    async def main() -> None:
        async with aio.open(db_path) as astore:
            async for _ in astore.record(producer()):
                pass

    run(main())
    assert seen_before_the_end == [1, 10, 29]
    assert recorded(db_path, "t", "r1") == (events, "finished")


def test_events_reach_the_file_while_the_sync_stream_is_still_running(db_path: Path) -> None:
    events = conversation_run("t", "r1", 30, 0)
    seen_before_the_end: list[int] = []

    def producer() -> Iterator[dict[str, Any]]:
        for part in (events[:1], events[1:10], events[10:29]):
            yield from part
            upto = events.index(part[-1]) + 1
            wait_until_visible(db_path, "t", "r1", upto)
            seen_before_the_end.append(upto)
        yield events[29]

    with agui_store.open(db_path) as store:
        for _ in store.record(producer()):
            pass
    assert seen_before_the_end == [1, 10, 29]
    assert recorded(db_path, "t", "r1") == (events, "finished")


def test_the_sync_recorder_never_appends_on_the_consumers_thread(db_path: Path) -> None:
    appended_on: set[str] = set()

    class Spy(agui_store.Store):
        def append(self, *args: Any, **kwargs: Any) -> agui_store.AppendResult:
            appended_on.add(threading.current_thread().name)
            return super().append(*args, **kwargs)

    with Spy(db_path) as store:
        for _ in store.record(conversation_run("t", "r1", 30, 0)):
            pass
    assert appended_on and threading.current_thread().name not in appended_on


# --- several runs ------------------------------------------------------------------------


def test_two_runs_of_one_thread_recorded_at_once_are_kept_apart(db_path: Path) -> None:
    """Two tabs on one thread: their batches interleave, and each continues its own run."""
    first = conversation_run("t", "r1", 60, 0)
    second = conversation_run("t", "r2", 60, 1)
    turn = [asyncio.Event(), asyncio.Event()]

    async def producer(events: list[dict[str, Any]], me: int) -> AsyncIterator[Any]:
        for start in range(0, len(events), 10):
            await turn[me].wait()
            turn[me].clear()
            for event in events[start : start + 10]:
                yield event
            # Let the other stream go, once this part is in the file.
            await asyncio.to_thread(
                wait_until_visible, db_path, "t", events[0]["runId"], start + 10
            )
            turn[1 - me].set()

    async def main() -> None:
        async with aio.open(db_path) as astore:

            async def consume(events: list[dict[str, Any]], me: int) -> None:
                async for _ in astore.record(producer(events, me)):
                    pass

            turn[0].set()
            await asyncio.gather(consume(first, 0), consume(second, 1))

    run(main())
    assert recorded(db_path, "t", "r1") == (first, "finished")
    assert recorded(db_path, "t", "r2") == (second, "finished")


def test_a_stream_of_two_runs_in_batches_of_one_event_records_both(db_path: Path) -> None:
    events = conversation_run("t", "r1", 12, 0) + conversation_run("t", "r2", 12, 1)

    async def main() -> None:
        async with aio.open(db_path) as astore:
            async with AsyncBatcher(astore, max_bytes=1) as batcher:
                for event in events:
                    batcher.add_event(event)
                    await batcher.flush()
            assert batcher.recorded == 24 and batcher.run_id == "r2"

    run(main())
    assert recorded(db_path, "t", "r1") == (events[:12], "finished")
    assert recorded(db_path, "t", "r2") == (events[12:], "finished")


def test_a_run_recorded_for_an_owner_belongs_to_it(db_path: Path) -> None:
    events = conversation_run("t", "r1", 30, 0)

    async def main() -> None:
        async with aio.open(db_path) as astore:
            async for _ in astore.record(failing_producer(events, 12), scope="alice"):
                pass

    with pytest.raises(ProducerFailed):
        run(main())
    with agui_store.open(db_path) as store:
        assert store.events("r1", thread_id="t", scope="alice") == events[:12]
        assert store.get_run("r1", thread_id="t", scope="bob") is None
