"""A pydantic-ai AG-UI server keeping its conversations in an agui-store store, recorded.

    python -m tests.workers.pydantic_ai_server LOCATION

A real pydantic-ai ``Agent`` over a scripted ``FunctionModel`` (no network) behind
``AGUIAdapter.dispatch_request`` with :class:`~agui_store.integrations.pydantic_ai.
ConversationStore`, the whole app behind :class:`agui_store.asgi.Recorder`, on one store,
served by uvicorn on a free port of 127.0.0.1. Prints ``listening PORT``; runs until killed,
so a test can kill it mid-conversation and start it again on the same store.

The scripted model reads the history it is sent: ``ask <question>`` calls the client's tool
``confirm``; after the client's answer it says ``Confirmed: <answer>``; anything else is
answered with what was said, how many questions the history holds and how many answers this
process has given (a regenerate is told apart from the answer it replaces).

A request with ``X-Drop-After: N`` has its answer dropped after N chunks: the server fails
mid-run, under the Recorder, and uvicorn drops the stream, as when an agent crashes.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter

import agui_store
from agui_store.asgi import Recorder
from agui_store.integrations.pydantic_ai import ConversationStore


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode())
    return None


def _user(scope: dict[str, Any]) -> str | None:
    return _header(scope, b"x-user")


def _dropping(app: Any) -> Any:
    """``app``, failing after ``X-Drop-After`` chunks of an answer when a request says so."""

    async def dropping(scope: dict[str, Any], receive: Any, send: Any) -> None:
        after = _header(scope, b"x-drop-after")
        if after is None:
            await app(scope, receive, send)
            return
        left = int(after)

        async def send_until_dropped(message: dict[str, Any]) -> None:
            nonlocal left
            if message["type"] == "http.response.body" and message.get("body"):
                if left == 0:
                    raise RuntimeError("the server failed mid-run")
                left -= 1
            await send(message)

        await app(scope, receive, send_until_dropped)

    return dropping


def app_on(location: str) -> Any:
    store = agui_store.open(location)
    conversations = ConversationStore(store)
    answers = 0

    async def model(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        nonlocal answers
        questions = [
            part.content
            for message in messages if isinstance(message, ModelRequest)
            for part in message.parts if isinstance(part, UserPromptPart)
        ]
        last = messages[-1]
        returned = [p for p in getattr(last, "parts", []) if isinstance(p, ToolReturnPart)]
        text = str(questions[-1]) if questions else ""
        if returned:
            yield f"Confirmed: {returned[-1].content}"
            return
        if text.startswith("ask "):
            yield {0: DeltaToolCall(name="confirm", json_args=json.dumps({"question": text[4:]}))}
            return
        answers += 1
        yield f"You said: {text} ({len(questions)} questions so far, answer {answers})"

    agent = Agent(FunctionModel(stream_function=model))
    app = FastAPI()

    @app.post("/chat")
    async def chat(request: Request) -> Any:
        return await AGUIAdapter.dispatch_request(
            request, agent=agent, conversation_store=conversations,
            conversation_scope=request.headers.get("x-user"),
        )

    return Recorder(_dropping(app), store=store, scope=_user)


def main() -> None:
    location = sys.argv[1]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn serves them
    config = uvicorn.Config(app_on(location), log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    print(f"listening {sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
