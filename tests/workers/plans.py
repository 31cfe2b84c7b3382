"""Deterministic workloads shared by the writer processes and the tests that check them.

A writer process and the test that kills or races it must agree, event for event, on what the
writer appends, without talking: each batch is a pure function of a seed and its index.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any

Event = dict[str, Any]

#: Threads the crash writer spreads its runs over.
CRASH_THREADS = ("t0", "t1", "t2")
#: The thread and run of the live (never finished) run the streaming writer appends to.
LIVE_THREAD = "live"
LIVE_RUN = "live-run"


@dataclass(frozen=True)
class Batch:
    """One ``append`` call: its events, the runs they open, and its options."""

    index: int
    thread: str
    run_ids: tuple[str, ...]
    events: list[Event]
    branch: str | None = None

    def run_events(self) -> dict[str, list[Event]]:
        """Each run's events (a batch may hold several runs of one thread)."""
        out: dict[str, list[Event]] = {}
        current = ""
        for event in self.events:
            if event["type"] == "RUN_STARTED":
                current = event["runId"]
            out.setdefault(current, []).append(event)
        return out


_ALPHABET = "abcdefghijklmnopqrstuvwxyz      .,!?éß漢字🙂"


def _text(rng: random.Random, size: int) -> str:
    # Mostly ASCII with some multi-byte characters, so byte and character counts differ.
    return "".join(rng.choices(_ALPHABET, k=size))


def _message(rng: random.Random, message_id: str, deltas: int, size: int) -> list[Event]:
    events: list[Event] = [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
    ]
    for _ in range(deltas):
        events.append(
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": message_id,
                "delta": _text(rng, rng.randint(1, size)),
            }
        )
    events.append({"type": "TEXT_MESSAGE_END", "messageId": message_id})
    return events


def _run(rng: random.Random, thread: str, run_id: str, *, big: bool) -> list[Event]:
    events: list[Event] = [{"type": "RUN_STARTED", "threadId": thread, "runId": run_id}]
    for m in range(rng.randint(1, 3)):
        events += _message(rng, f"{run_id}-m{m}", rng.randint(1, 12), 400)
    if big:
        # Big batches take long to commit; the biggest (several MB, over SQLite's 2 MB page
        # cache) spill pages into the WAL before their commit, so a kill can leave part of a
        # batch physically in the WAL, which recovery must ignore.
        parts = 3 if rng.random() < 0.4 else 1
        for part in range(parts):
            blob = _text(rng, 100) * rng.randint(1_000, 15_000)
            events.append(
                {"type": "STATE_SNAPSHOT", "snapshot": {"notes": blob, "run": run_id, "part": part}}
            )
    ending = rng.random()
    if ending < 0.75:
        events.append({"type": "RUN_FINISHED", "threadId": thread, "runId": run_id})
    elif ending < 0.85:
        events.append(
            {
                "type": "RUN_FINISHED",
                "threadId": thread,
                "runId": run_id,
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [{"id": f"{run_id}-i", "reason": "approve"}],
                },
            }
        )
    else:
        events.append({"type": "RUN_ERROR", "message": "the model gave up", "code": "E"})
    return events


def crash_batch(seed: int, index: int) -> Batch:
    """Batch ``index`` of the crash writer: one or two whole runs of one thread."""
    rng = random.Random(f"crash:{seed}:{index}")
    thread = rng.choice(CRASH_THREADS)
    runs = 2 if rng.random() < 0.25 else 1
    big = rng.random() < 0.2
    run_ids = tuple(f"s{seed}-b{index}-{k}" for k in range(runs))
    events: list[Event] = []
    for k, run_id in enumerate(run_ids):
        events += _run(rng, thread, run_id, big=big and k == 0)
    branch = "retry" if rng.random() < 0.2 else None
    return Batch(index, thread, run_ids, events, branch)


@functools.lru_cache(maxsize=100_000)
def live_batch(seed: int, index: int) -> list[Event]:
    """Batch ``index`` of the live run: it opens the run, then streams text, never ending.

    Cached: callers must not modify the events."""
    rng = random.Random(f"live:{seed}:{index}")
    if index == 0:
        return [
            {"type": "RUN_STARTED", "threadId": LIVE_THREAD, "runId": LIVE_RUN},
            {"type": "TEXT_MESSAGE_START", "messageId": "m0", "role": "assistant"},
        ]
    message = f"m{(index - 1) // 8}"
    events: list[Event] = [
        {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": message,
            "delta": _text(rng, rng.randint(1, 3000)),
        }
        for _ in range(rng.randint(1, 4))
    ]
    if index % 8 == 0:
        events += [
            {"type": "TEXT_MESSAGE_END", "messageId": message},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m{index // 8}", "role": "assistant"},
        ]
    return events


def live_prefix_sizes(seed: int, up_to: int) -> list[int]:
    """Event counts after each whole live batch: ``[0, len(b0), len(b0)+len(b1), ...]``."""
    sizes = [0]
    for index in range(up_to):
        sizes.append(sizes[-1] + len(live_batch(seed, index)))
    return sizes


@functools.lru_cache(maxsize=100_000)
def race_batch(writer: str, index: int, thread: str) -> Batch:
    """Batch ``index`` of racing writer ``writer``: one whole run in ``thread`` (cached:
    callers must not modify the events)."""
    rng = random.Random(f"race:{writer}:{index}")
    run_id = f"{writer}-{index}"
    events: list[Event] = [{"type": "RUN_STARTED", "threadId": thread, "runId": run_id}]
    for m in range(rng.randint(1, 3)):
        events += _message(rng, f"{run_id}-m{m}", rng.randint(1, 6), 200)
    events.append({"type": "RUN_FINISHED", "threadId": thread, "runId": run_id})
    return Batch(index, thread, (run_id,), events)
