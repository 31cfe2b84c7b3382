"""docs/pydantic-ai.md: its example runs as written, and serves a conversation both views keep."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_store.errors import RunNotFoundError

DOC = Path(__file__).resolve().parents[1] / "docs" / "pydantic-ai.md"


def example() -> str:
    """The page's first Python block: the app."""
    found = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert found is not None
    return found.group(1)


@pytest.mark.pydantic_ai
def test_the_docs_example_keeps_the_conversation_and_its_ag_ui_run_in_one_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app: dict[str, Any] = {}
    exec(compile(example(), str(DOC), "exec"), app)  # the page's code, as a reader runs it
    body = {
        "threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": "m1", "role": "user", "content": "hello"}],
    }

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app["recorded"])
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            response = await client.post(
                "/chat", json=body, headers={"x-user": "alice", "accept": "text/event-stream"}
            )
            assert response.status_code == 200
            assert "pydantic_ai_conversation_saved" in response.text
        await app["recorded"].aclose()
        conversations = app["conversations"]
        conversation = await conversations.load("t1", scope="alice")
        assert conversation is not None and len(conversation.messages) == 2
        saved = await conversations.saved_by_run("r1", thread_id="t1")
        record = await conversations.read_record("t1")
        assert saved is not None and saved.head_id == record.head_id
        assert (await conversations.run_of_entry(record.head_id)).run_id == "r1"
        # The links keep to their owner, as every read of the store does.
        assert (await conversations.run_of_entry(record.head_id, scope="alice")).run_id == "r1"
        assert await conversations.run_of_entry(record.head_id, scope="bob") is None
        with pytest.raises(RunNotFoundError):
            await conversations.saved_by_run("r1", thread_id="t1", scope="bob")
        await conversations.close()

    try:
        asyncio.run(scenario())
        store = app["store"]
        assert store.get_run("r1", thread_id="t1", scope="alice").status == "finished"
        assert store.check().ok
    finally:
        app["store"].close()
    assert (tmp_path / "chat.db").exists()
