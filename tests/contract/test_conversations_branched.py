"""After pydantic-ai's server-side ``branch()``, the client still sends its whole history,
and the AG-UI log keeps it as sent; the model goes on from the branch point. ``show``, the
viewer and ``ConversationStore.continued_from`` say which conversation entry the model
continued from, and which run saved it.

End to end with real parts: a pydantic-ai agent over a scripted ``FunctionModel`` behind
``AGUIAdapter`` with the store's ``ConversationStore`` and the ``Recorder``
(:mod:`tests.workers.pydantic_ai_server`'s app), driven over ASGI in this process."""

from __future__ import annotations

import asyncio
import io
import json
import time
import uuid
from typing import Any

import httpx

import agui_store
import agui_store.ui
from agui_store import cli
from tests.conftest import needs_pydantic_ai

# Every test here uses pydantic-ai, which needs Python 3.11: on 3.10 the module skips.
needs_pydantic_ai()

from agui_store.integrations.pydantic_ai import ConversationStore  # noqa: E402
from tests.workers.pydantic_ai_server import app_on  # noqa: E402


def said(text: str) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "role": "user", "content": text}


def test_show_and_the_viewer_say_where_the_model_continued_after_a_server_side_branch(
    store_location: str,
) -> None:
    store = agui_store.open(store_location)
    conversations = ConversationStore(store)
    app = app_on(store_location)

    async def scenario() -> list[str]:
        replies = []
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:

            async def turn(run_id: str, messages: list[dict[str, Any]]) -> None:
                body = {"threadId": "t", "runId": run_id, "state": {}, "tools": [],
                        "context": [], "forwardedProps": {}, "messages": messages}
                answer = await client.post("/chat", json=body, headers={"x-user": "alice"})
                replies.append(answer.text)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:  # the Recorder writes off the response
                    run = store.get_run(run_id, thread_id="t")
                    if run is not None and run.status == "finished":
                        return
                    await asyncio.sleep(0.02)
                raise AssertionError(f"{run_id} was not recorded")

            held: list[dict[str, Any]] = []
            for run_id, question in (("r1", "one"), ("r2", "two"), ("r3", "three")):
                await turn(run_id, [*held, said(question)])
                held = store.checkout(run_id, thread_id="t").messages
            loaded = await conversations.load("t", scope="alice")
            assert loaded is not None
            await conversations.branch("t", at=2, expected_revision=loaded.revision,
                                       scope="alice")  # back to r1's answer
            await turn("r4", [*held, said("four")])
        await app.aclose()
        return replies

    try:
        replies = asyncio.run(scenario())
        # The model saw r1's turn and the new question: two questions, not four.
        assert "You said: four (2 questions so far" in replies[-1]
        # The AG-UI log keeps what the client sent: r4 under r3, with every message.
        r4 = store.get_run("r4", thread_id="t")
        assert r4 is not None and r4.parent_run_id == "r3"
        assert len(store.checkout("r4", thread_id="t").messages) == 8

        loop = asyncio.new_event_loop()
        continued = loop.run_until_complete(conversations.continued_from("r4", thread_id="t"))
        r1 = loop.run_until_complete(conversations.saved_by_run("r1", thread_id="t"))
        r3 = loop.run_until_complete(conversations.saved_by_run("r3", thread_id="t"))
        before = loop.run_until_complete(conversations.continued_from("r3", thread_id="t"))
        loop.close()
        assert r1 is not None and r3 is not None
        assert continued is not None and continued.diverged
        assert (continued.entry_id, continued.saved_by) == (r1.head_id, "r1")
        assert continued.lineage_entry == r3.head_id
        assert before is not None and not before.diverged and before.saved_by == "r2"

        out = io.StringIO()
        assert cli.main(["--db", store_location, "show", "r4"], out=out) == 0
        assert "note: the model continued from conversation 't'" in out.getvalue()
        assert f"at entry {r1.head_id}, saved by run r1" in out.getvalue()
        out = io.StringIO()
        assert cli.main(["--db", store_location, "show", "r3"], out=out) == 0
        assert "note:" not in out.getvalue()
        out = io.StringIO()
        assert cli.main(["--db", store_location, "show", "r4", "--json"], out=out) == 0
        shown = json.loads(out.getvalue())["modelContinuedFrom"]
        assert shown["savedBy"] == "r1" and shown["diverged"] is True

        async def page(run_id: str) -> str:
            transport = httpx.ASGITransport(app=agui_store.ui.app(store))
            async with httpx.AsyncClient(transport=transport, base_url="http://ui") as ui:
                answer = await ui.get("/run", params={"thread": "t", "run": run_id})
                assert answer.status_code == 200
                return answer.text

        assert 'id="model-continued"' in asyncio.run(page("r4"))
        assert 'id="model-continued"' not in asyncio.run(page("r3"))
    finally:
        asyncio.run(conversations.close())
        store.close()
