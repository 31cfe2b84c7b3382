"""A worker process saving one pydantic-ai conversation that other processes save too.

    python -m tests.workers.pydantic_ai_saver turns LOCATION NAME --saves 10
    python -m tests.workers.pydantic_ai_saver race LOCATION NAME --revision REV --head ENTRY

Prints ``spawned`` once imported and starts when it reads ``go`` on stdin.

``turns``: ``--saves`` times, loads conversation ``shared``, adds the user message
``NAME i`` and saves it; on ``ConversationConflict`` it loads again and retries. Prints one
JSON line a save (``{"name", "i", "conflicts"}``), then ``done``.

``race``: one ``write_record`` of conversation ``shared`` expecting ``--revision``, with one
new entry after ``--head``; prints ``won`` or ``conflict``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback

from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
)

from agui_store.integrations.pydantic_ai import ConversationStore
from tests.pydantic_ai_conversations import user


async def turns(location: str, name: str, saves: int) -> None:
    async with ConversationStore(location) as store:
        for i in range(saves):
            conflicts = 0
            while True:
                conversation = await store.load("shared")
                assert conversation is not None
                conversation.messages.append(user(f"{name} {i}"))
                try:
                    await store.save(conversation)
                    break
                except ConversationConflict:
                    conflicts += 1
            print(json.dumps({"name": name, "i": i, "conflicts": conflicts}), flush=True)


async def race(location: str, name: str, revision: str, head: str) -> None:
    async with ConversationStore(location) as store:
        entry = ConversationEntry(parent_id=head, message=user(f"{name} wins"))
        record = ConversationRecord(conversation_id="shared", head_id=entry.id)
        try:
            await store.write_record(record, new_entries=[entry], expected_revision=revision)
            print("won", flush=True)
        except ConversationConflict:
            print("conflict", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["turns", "race"])
    parser.add_argument("location")
    parser.add_argument("name")
    parser.add_argument("--saves", type=int, default=10)
    parser.add_argument("--revision")
    parser.add_argument("--head")
    args = parser.parse_args()
    print("spawned", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    try:
        if args.mode == "turns":
            asyncio.run(turns(args.location, args.name, args.saves))
        else:
            asyncio.run(race(args.location, args.name, args.revision, args.head))
    except Exception:
        print("error " + traceback.format_exc().replace("\n", " | "), flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
