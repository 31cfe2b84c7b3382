"""Real AG-UI servers for the live-recording tests and benchmark, and the real client.

- :func:`agent_app`: a FastAPI app serving a pydantic-ai agent (``AGUIAdapter.dispatch_request``
  over a scripted ``FunctionModel``) at ``/pydantic``, an ag-ui-langgraph endpoint over a
  small scripted graph at ``/langgraph``, at ``/dropping`` an agent that fails mid-run
  (the server drops its stream), and at ``/chunks`` a run answered in chunk events. No LLM,
  no network beyond 127.0.0.1.
- :func:`turns_app`: one response holding several runs, one after the other (a recorded
  conversation's turns), which waits mid-run while the test holds it (:data:`HOLDS`).
- :func:`serve`: uvicorn on a free port of 127.0.0.1, in a thread, stopped on exit.
- :class:`LiveClient`: the official ``@ag-ui/client`` 1.0.0 ``HttpAgent`` in node
  (``tests/oracle/live_client.mjs``).

The scripted model reads the last user message: ``tool <topic>`` calls a tool that sets the
state; ``count <n>`` streams ``n`` text deltas at once; ``slow <n>`` streams ``n`` deltas 5 ms
apart; anything else is echoed back in a few deltas.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from ag_ui.core import EventType, StateSnapshotEvent
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

# pydantic-ai needs Python 3.11: without it the tests marked pydantic_ai skip
# (tests/conftest.py).
with contextlib.suppress(ImportError):
    from pydantic_ai import Agent, RunContext, ToolReturn
    from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter

ORACLE_DIR = Path(__file__).resolve().parent / "oracle"


class GraphState(TypedDict, total=False):
    """The scripted graph's state: its messages and a topic (what AG-UI sees as state)."""

    messages: Annotated[list[Any], add_messages]
    topic: str


@dataclass
class Deps:
    """Receives the client's state (pydantic-ai's StateHandler protocol)."""

    state: dict[str, Any] = field(default_factory=dict)


def last_prompt(messages: list[ModelMessage]) -> tuple[str, bool]:
    """The last user text, and whether the model is called back after a tool (shared by the
    scripted models of the end-to-end and the in-process recording tests)."""
    after_tool = False
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                after_tool = True
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content, after_tool
    return "", after_tool


def agent_app() -> Any:
    """The FastAPI app with both producers."""

    async def model(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        text, after_tool = last_prompt(messages)
        verb, _, rest = text.partition(" ")
        if verb == "tool" and not after_tool:
            yield {0: DeltaToolCall(name="set_topic", json_args=json.dumps({"topic": rest}))}
        elif verb == "tool":
            for word in ("The ", "topic ", "is ", rest):
                yield word
        elif verb in ("count", "slow"):
            for i in range(int(rest)):
                yield f"{i} "
                if verb == "slow":
                    await asyncio.sleep(0.005)
        else:
            for word in f"You said: {text}".split(" "):
                yield word + " "

    agent = Agent(FunctionModel(stream_function=model), deps_type=Deps)

    @agent.tool
    async def set_topic(ctx: RunContext[Deps], topic: str) -> ToolReturn:
        """Remember the topic in the shared state."""
        state = {**ctx.deps.state, "topic": topic, "turns": ctx.deps.state.get("turns", 0) + 1}
        return ToolReturn(
            return_value=f"topic set to {topic}",
            metadata=[StateSnapshotEvent(type=EventType.STATE_SNAPSHOT, snapshot=state)],
        )

    app = FastAPI()

    @app.post("/pydantic")
    async def pydantic_endpoint(request: Request) -> Any:
        return await AGUIAdapter.dispatch_request(request, agent=agent, deps=Deps())

    @app.post("/dropping")
    async def dropping_endpoint(request: Request) -> Any:
        return StreamingResponse(dropped_run(await request.json()), media_type="text/event-stream")

    @app.post("/chunks")
    async def chunks_endpoint(request: Request) -> Any:
        return StreamingResponse(chunked_run(await request.json()), media_type="text/event-stream")

    add_langgraph(app)
    return app


#: What the first chunk of each kind names, which the chunks after it leave out.
CHUNK_STREAMS: dict[str, dict[str, Any]] = {
    "text": {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "role": "assistant"},
    "tool": {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "look_up"},
    "reasoning": {"type": "REASONING_MESSAGE_CHUNK", "messageId": "r"},
}


async def chunked_run(run_input: dict[str, Any]) -> AsyncIterator[bytes]:
    """A run that answers in one stream of chunks of the kind the last message names (a key
    of :data:`CHUNK_STREAMS`): the first names it, the 300 after it only carry a delta, 5 ms
    apart, as chunk producers send them."""
    ids = {"threadId": run_input["threadId"], "runId": run_input["runId"]}
    first = CHUNK_STREAMS[run_input["messages"][-1]["content"]]
    suffix = f"-{ids['runId']}"
    named = {k: v + suffix if k in ("messageId", "toolCallId") else v for k, v in first.items()}
    events = [
        {"type": "RUN_STARTED", **ids},
        {**named, "delta": "{"},
        *({"type": first["type"], "delta": f"{i} "} for i in range(300)),
        {"type": "RUN_FINISHED", **ids},
    ]
    for event in events:
        yield f"data: {json.dumps(event)}\n\n".encode()
        await asyncio.sleep(0.005)


#: What :func:`dropped_run` sends before it fails.
DROPPED_AFTER = ("RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT")


async def dropped_run(run_input: dict[str, Any]) -> AsyncIterator[bytes]:
    """The start of a run's answer, then an error: uvicorn drops the stream mid-run."""
    ids = {"threadId": run_input["threadId"], "runId": run_input["runId"]}
    events = [
        {"type": "RUN_STARTED", **ids},
        {"type": "TEXT_MESSAGE_START", "messageId": f"m-{ids['runId']}", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{ids['runId']}", "delta": "Half "},
    ]
    for event in events:
        yield f"data: {json.dumps(event)}\n\n".encode()
        await asyncio.sleep(0.005)
    raise RuntimeError("the agent failed mid-run")


#: Request run id -> a semaphore the response of :func:`turns_app` acquires in the middle of
#: each of its runs: the test releases it once it has done what it does there.
HOLDS: dict[str, threading.Semaphore] = {}


def turns_app(recorded: list[dict[str, Any]]) -> Any:
    """A FastAPI app answering ``POST /turns`` with every run of ``recorded`` in one
    response (:func:`consecutive_runs`)."""
    app = FastAPI()

    @app.post("/turns")
    async def turns_endpoint(request: Request) -> Any:
        run_input = await request.json()
        runs = runs_named_for(run_input, recorded)
        stream = consecutive_runs(runs, held_as=run_input["runId"])
        return StreamingResponse(stream, media_type="text/event-stream")

    return app


def runs_named_for(
    run_input: dict[str, Any], recorded: list[dict[str, Any]]
) -> list[list[dict[str, Any]]]:
    """The runs of ``recorded``, each from its RUN_STARTED, in the request's thread: the first
    is the request's run, the next ``<runId>-2``, ``<runId>-3``..."""
    runs: list[list[dict[str, Any]]] = []
    for event in recorded:
        if event["type"] == "RUN_STARTED":
            runs.append([])
        runs[-1].append(dict(event))
    for number, run in enumerate(runs, start=1):
        run_id = run_input["runId"] if number == 1 else f"{run_input['runId']}-{number}"
        for event in run:
            if "runId" in event:
                event.update(threadId=run_input["threadId"], runId=run_id)
            event.pop("input", None)  # the recording's request, naming its own ids
    return runs


async def consecutive_runs(
    runs: list[list[dict[str, Any]]], *, held_as: str
) -> AsyncIterator[bytes]:
    """``runs``, their events 2 ms apart, each run's last event in one chunk with the next
    run's RUN_STARTED (as a server writes what it has at once); in the middle of each run it
    waits for ``HOLDS[held_as]`` when there is one."""
    hold = HOLDS.get(held_as)
    ending = b""  # the last event of the run before
    for run in runs:
        for at, event in enumerate(run):
            if hold is not None and at == len(run) // 2:
                while not hold.acquire(blocking=False):
                    await asyncio.sleep(0.005)
            frame = f"data: {json.dumps(event)}\n\n".encode()
            if at == len(run) - 1:
                ending = frame
                continue
            yield ending + frame
            ending = b""
            await asyncio.sleep(0.002)
    yield ending


def add_langgraph(app: Any) -> None:
    """An ag-ui-langgraph endpoint at /langgraph over a one-node scripted graph."""

    def reply(state: dict[str, Any]) -> dict[str, Any]:
        last = state["messages"][-1].content if state.get("messages") else ""
        return {"messages": [AIMessage(content=f"echo: {last}")], "topic": str(last)}

    graph = StateGraph(GraphState)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    compiled = graph.compile(checkpointer=MemorySaver())
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="echo", graph=compiled), "/langgraph")


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """uvicorn serving ``app`` on a free port of 127.0.0.1; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


class LiveClient:
    """The official ``HttpAgent`` in one long-lived node process (``live_client.mjs``)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            ["node", str(ORACLE_DIR / "live_client.mjs")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ORACLE_DIR,
            env={**os.environ, "SUPPRESS_TRANSFORMATION_WARNINGS": "1"},
            text=True,
            encoding="utf-8",
        )

    def run(self, command: dict[str, Any]) -> dict[str, Any]:
        """One command (see live_client.mjs); its answer, or RuntimeError."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(command) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("live_client.mjs died")
        answer: dict[str, Any] = json.loads(line)
        if not answer["ok"]:
            raise RuntimeError(answer["error"])
        return answer

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
