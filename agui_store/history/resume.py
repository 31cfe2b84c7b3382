"""What a client is handed to carry on from a stored run: the short stream that restores it
when the client reconnects, and the ``RunAgentInput`` that starts a new run from it.

Both are built from values (the run's record, its restored view, the recorded events they
need), so that every backend gives the same; ``Store.reconnect_stream`` and ``Store.fork``
read those values and hand them here.
"""

from __future__ import annotations

from typing import Any

from agui_store.codec import ingest
from agui_store.history.restore import View
from agui_store.records import Run


def reconnect_stream(run: Run, view: View, terminal: str | None) -> list[dict[str, Any]]:
    """The events that restore ``run`` in the official client: ``RUN_STARTED``,
    ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT`` and the run's terminal event (``terminal``: its
    JSON text as recorded; ``None`` while the run is open, which then ends without one). The
    terminal event keeps its outcome, with the interrupts the view holds pending."""
    ids = {"threadId": run.thread_id, "runId": run.run_id}
    started: dict[str, Any] = {"type": "RUN_STARTED", **ids}
    if run.parent_run_id is not None:
        started["parentRunId"] = run.parent_run_id
    stream: list[dict[str, Any]] = [
        started,
        {"type": "MESSAGES_SNAPSHOT", "messages": view.messages},
        {"type": "STATE_SNAPSHOT", "snapshot": view.state},
    ]
    if terminal is None:
        # Still open: a live recorder continues it. Interrupts an earlier run left pending
        # cannot be stated without ending the run, so they are not in this stream.
        return stream
    original = ingest.decode(terminal.encode("utf-8"))
    if original["type"] == "RUN_ERROR":
        if view.interrupts:
            # Interrupts an earlier run left pending survive this run's failure in the
            # client; RUN_FINISHED then a late RUN_ERROR is the legal way to say both.
            stream.append(
                {
                    "type": "RUN_FINISHED",
                    **ids,
                    "outcome": {"type": "interrupt", "interrupts": view.interrupts},
                }
            )
        stream.append({k: original[k] for k in ("type", "message", "code") if k in original})
        return stream
    finished: dict[str, Any] = {"type": "RUN_FINISHED", **ids}
    for name in ("result", "usage"):
        if name in original:
            finished[name] = original[name]
    outcome = original.get("outcome")
    if view.interrupts:
        finished["outcome"] = {"type": "interrupt", "interrupts": view.interrupts}
    elif isinstance(outcome, dict) and outcome.get("type") != "interrupt":
        finished["outcome"] = outcome
    stream.append(finished)
    return stream


def fork_input(run: Run, view: View, newest_input: str | None, run_id: str) -> dict[str, Any]:
    """The ``RunAgentInput`` that starts run ``run_id`` from ``run``: messages and state are
    the view; tools, context and forwarded props come from the newest recorded input of the
    lineage (``newest_input``, its JSON text), since a client resends the same ones."""
    recorded = ingest.decode(newest_input.encode("utf-8")) if newest_input else {}
    return {
        "threadId": run.thread_id,
        "runId": run_id,
        "parentRunId": run.run_id,
        "state": view.state,
        "messages": [m for m in view.messages if m.get("role") != "activity"],
        "tools": recorded.get("tools", []),
        "context": recorded.get("context", []),
        "forwardedProps": recorded.get("forwardedProps", {}),
    }
