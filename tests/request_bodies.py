"""Request bodies as HttpAgent sends them (the whole history, then a new turn), and what a
store records of them: for the tests of bodies that resend the history."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pytest

import agui_store
from agui_store import testing
from agui_store.codec import ingest
from agui_store.errors import InvalidEventError
from tests.backends import dump

CHUNK = 64
THREAD = "t"
#: Shallow enough that a message nested a few levels too deep is quick to write.
MAX_DEPTH = 12


def user(i: int, text: str | None = None) -> dict[str, Any]:
    return {"id": f"u{i}", "role": "user", "content": text if text is not None else f"q {i}"}


def reply(run: int) -> dict[str, Any]:
    """The message a run's events make, as the client keeps it after the run."""
    return {"id": f"a{run}", "role": "assistant", "content": f"answer {run}"}


def run_events(run: int, thread: str = THREAD) -> list[dict[str, Any]]:
    rid = f"run-{run}"
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": rid},
        {"type": "TEXT_MESSAGE_START", "messageId": f"a{run}", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"a{run}", "delta": f"answer {run}"},
        {"type": "TEXT_MESSAGE_END", "messageId": f"a{run}"},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": rid},
    ]


def request(run: int, messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "threadId": THREAD,
        "runId": f"run-{run}",
        "state": {"turn": run},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def encode_messages(
    messages: list[Any], spaced: int | None = None, reverse: int | None = None
) -> bytes:
    parts = []
    for i, m in enumerate(messages):
        if i == reverse and isinstance(m, dict):
            parts.append(msgspec.json.encode(dict(reversed(list(m.items())))))
        elif i == spaced:
            parts.append(json.dumps(m).encode())
        else:
            parts.append(msgspec.json.encode(m))
    return b"[" + b",".join(parts) + b"]"


def body_text(run: int, messages: list[Any], array: bytes | None = None, **extra: Any) -> bytes:
    """The body, compact, with the messages array written as ``array`` when given."""
    placeholder = "@@messages@@"
    text = msgspec.json.encode(request(run, placeholder, **extra))  # type: ignore[arg-type]
    return text.replace(b'"' + placeholder.encode() + b'"', array or encode_messages(messages))


#: What the clock decides: when a run was written, and the hashes that cover it.
CLOCK = ("created_at", "updated_at", "hash")


def read_back(
    store: agui_store.Store, thread: str = THREAD, leave: tuple[str, ...] = CLOCK
) -> list[Any]:
    """Everything a reader sees of the thread, less the clock (times, and hashes over them)."""
    out: list[Any] = []
    for run in store.runs(thread):
        facts = dataclasses.asdict(run)
        out.append({k: v for k, v in facts.items() if k not in leave})
        out.append(store.input(run.run_id, thread_id=thread))
        out.append(list(store.events(run.run_id, thread_id=thread)))
        view = store.checkout(run.run_id, thread_id=thread)
        out.append((view.messages, view.state))
    return out


@contextmanager
def texts_parsed() -> Iterator[list[bytes]]:
    """The JSON texts ``codec.parse_events`` reads (the real parser runs)."""
    seen: list[bytes] = []
    parse = ingest.parse_events

    def spy(source: Any, **kwargs: Any) -> Any:
        if isinstance(source, bytes):
            seen.append(source)
        return parse(source, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ingest, "parse_events", spy)
        yield seen


def refusal_and_rows(location: str, texts: list[bytes], remember: bool) -> tuple[str, list[Any]]:
    """Append the bodies in turn; the last one's refusal, and the rows before and after it."""
    with agui_store.open(location, max_depth=MAX_DEPTH) as store:
        if not remember:
            testing.read_bodies_whole(store)
        for run, text in enumerate(texts[:-1]):
            store.append(run_events(run), input=text)
        before = dump(location)
        with pytest.raises(InvalidEventError) as refused:
            store.append(run_events(len(texts) - 1), input=texts[-1])
        assert dump(location) == before  # left exactly as it was
        return str(refused.value), [r.run_id for r in store.runs(THREAD)]
