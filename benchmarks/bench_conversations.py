"""pydantic-ai conversations in the store: a save and a load that cost what they touch.

Three conversations on each backend (an SQLite file, and a throwaway PostgreSQL cluster):
``long`` of ``--turns`` turns (a user message and an answer each), ``short`` of 100 turns,
and ``tiny`` of 20 messages. Measured in turns, in the same run, each figure against its
baseline:

- saving one turn (two messages) at the tip of ``long`` against the same at the tip of
  ``short`` (goal: within 1.3x; the copy saved was loaded with ``limit=2``, so only the
  save is timed, as the adapter's save after a run);
- ``load(limit=20)`` of ``long`` against ``load()`` of ``tiny`` (goal: within 1.3x);
- ``load()`` of ``long`` and a save at its tip against pydantic-ai's
  ``InMemoryConversationStore`` holding the same conversation (a ratio to state).

Every call goes through the ``ConversationStore`` API on an event loop, as an app's would
(the store's calls run on its worker thread).

    python -m benchmarks.bench_conversations [--turns 2000] [--rounds 30] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationStore as Upstream
from pydantic_ai.conversation_store import InMemoryConversationStore
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart

from agui_store.integrations.pydantic_ai import ConversationStore
from benchmarks._common import header, scratch_dir, throwaway_postgres


def turn(n: int) -> list[ModelMessage]:
    return [
        ModelRequest.user_text_prompt(f"question {n}: what about the next thing?"),
        ModelResponse(parts=[TextPart(f"answer {n}: " + "a reasonable length of text " * 8)]),
    ]


def history(turns: int) -> list[ModelMessage]:
    return [m for n in range(turns) for m in turn(n)]


class Bench:
    """One store's conversations, on an event loop of its own."""

    def __init__(self, store: Upstream, turns: int) -> None:
        self.store = store
        self.loop = asyncio.new_event_loop()
        self.next = {"long": turns, "short": 100, "tiny": 10}
        for cid, n in (("long", turns), ("short", 100), ("tiny", 10)):
            self.run(self.store.save(Conversation(conversation_id=cid, messages=history(n))))

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    def timed(self, coroutine: Coroutine[Any, Any, Any]) -> float:
        t0 = time.perf_counter()
        self.loop.run_until_complete(coroutine)
        return time.perf_counter() - t0

    def save_one_turn(self, cid: str) -> float:
        conversation = self.run(self.store.load(cid, limit=2))
        conversation.messages.extend(turn(self.next[cid]))
        self.next[cid] += 1
        return self.timed(self.store.save(conversation))

    def load(self, cid: str, limit: int | None = None) -> float:
        return self.timed(self.store.load(cid, limit=limit))


def interleaved(rounds: int, **measures: Callable[[], float]) -> dict[str, float]:
    """Medians (ms) of measures taken in turns, so load on the machine falls on all alike."""
    times: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(rounds):
        for name, measure in measures.items():
            times[name].append(measure())
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def measure(name: str, location: str, turns: int, rounds: int) -> None:
    t0 = time.perf_counter()
    ours = Bench(ConversationStore(location), turns)
    memory = Bench(InMemoryConversationStore(), turns)
    print(f"\n## {name} (built in {time.perf_counter() - t0:.1f} s)\n")
    m = interleaved(
        rounds,
        save_long=lambda: ours.save_one_turn("long"),
        save_short=lambda: ours.save_one_turn("short"),
        save_memory=lambda: memory.save_one_turn("long"),
        limit_long=lambda: ours.load("long", limit=20),
        whole_tiny=lambda: ours.load("tiny"),
        whole_long=lambda: ours.load("long"),
        whole_memory=lambda: memory.load("long"),
    )
    print("| measure | ms | baseline | ms | ratio | goal |")
    print("|---|---|---|---|---|---|")
    rows = [
        (f"save a turn at turn {turns:,}", "save_long", "at turn 100", "save_short", "<= 1.3x"),
        (f"load(limit=20) at turn {turns:,}", "limit_long", "load() of 20 messages",
         "whole_tiny", "<= 1.3x"),
        (f"save a turn at turn {turns:,}", "save_long", "InMemoryConversationStore",
         "save_memory", "stated"),
        (f"load() at turn {turns:,}", "whole_long", "InMemoryConversationStore",
         "whole_memory", "stated"),
    ]  # fmt: skip
    for what, key, baseline, base_key, goal in rows:
        print(
            f"| {what} | {m[key]:.2f} | {baseline} | {m[base_key]:.2f} | "
            f"{m[key] / m[base_key]:.2f}x | {goal} |"
        )
    ours.run(ours.store.close())  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    header(f"conversations: pydantic-ai's ConversationStore API, {args.turns:,}-turn conversation")
    print(f"load average {os.getloadavg()[0]:.1f}, {args.rounds} rounds, medians")
    measure("SQLite", os.path.join(scratch_dir("agui-bench-"), "c.db"), args.turns, args.rounds)
    if not args.no_postgres:
        measure("PostgreSQL", throwaway_postgres(), args.turns, args.rounds)


if __name__ == "__main__":
    main()
