"""What a patch's copies may clone, on every backend: at most what the event could carry
itself (``max_event_bytes``), for a state and for an activity's content alike; an event over
the limit is refused before it runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agui_store
from agui_store import InvalidEventError


def _cloned_before(document: Any, operations: list[dict[str, Any]]) -> list[int]:
    """Bytes of JSON each operation's copy clones, by hand: copies of the root to new keys."""
    sizes = []
    for op in operations:
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        sizes.append(len(text.encode("utf-8")))
        document = {**document, op["path"][1:]: json.loads(text)}
    return sizes


def test_copies_that_would_clone_more_than_an_event_carries_are_refused_before_they_run(
    store_location: str,
) -> None:
    """A copy clones its value, as the client's does: forty copies of the root beside itself,
    a patch of a thousand bytes, would double the state forty times. One event's copies may
    clone at most max_event_bytes between them (what the event could carry itself)."""
    start = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
             {"type": "STATE_SNAPSHOT", "snapshot": {"s": "x" * 100}}]
    ops = [{"op": "copy", "from": "", "path": f"/c{i}"} for i in range(40)]
    sizes = _cloned_before(start[1]["snapshot"], ops[:8])
    over = next(n for n in range(len(sizes)) if sum(sizes[: n + 1]) > 4096)
    with agui_store.open(store_location, max_event_bytes=4096) as store:
        store.append(start)

        def recorded() -> Any:
            return list(store.thread_events("t")), [r.hash for r in store.runs("t")]

        before = recorded()
        for doubling in (
            {"type": "STATE_DELTA", "delta": ops},
            # The client clones before a later operation fails the patch: refused all the same.
            {"type": "STATE_DELTA", "delta": [*ops, {"op": "test", "path": "/no", "value": 1}]},
        ):
            with pytest.raises(InvalidEventError) as caught:
                store.append([doubling], thread_id="t")
            assert recorded() == before
            assert (caught.value.index, caught.value.event_type, caught.value.path) == (
                0, "STATE_DELTA", f"$.delta[{over}]"
            )
            assert f"copies {sum(sizes[: over + 1])} bytes" in str(caught.value)
            assert "max_event_bytes (4096)" in str(caught.value)
        # The same copies up to the limit are recorded, and read back.
        store.append([{"type": "STATE_DELTA", "delta": ops[:over]}], thread_id="t")
        co = store.checkout("r1", thread_id="t")
        assert sorted(co.state) == sorted(["s", *(f"c{i}" for i in range(over))])


def test_an_activity_content_is_held_to_the_same_clone_limit(store_location: str) -> None:
    with agui_store.open(store_location, max_event_bytes=4096) as store:
        with pytest.raises(InvalidEventError) as caught:
            store.append([
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
                {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "plan",
                 "content": {"p": "y" * 1500}},
                {"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "plan",
                 "patch": [{"op": "copy", "from": "/p", "path": f"/q{i}"} for i in range(3)]},
            ])
        assert (caught.value.index, caught.value.event_type, caught.value.path) == (
            2, "ACTIVITY_DELTA", "$.patch[2]"
        )
        assert "into the activity content" in str(caught.value)
        assert store.threads() == []
