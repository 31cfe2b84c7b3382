"""checkout == the official client, differentially: recorded streams and generated run trees.

The reference for each run R is ``@ag-ui/client`` 1.0.0 replaying R's events from the start
docs/design/behaviour.md#restoring defines (the parent's view, taken over by R's input
where it has one). The oracle's
answer for the parent is itself the oracle's, so nothing of ours is trusted on the way.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import testing
from agui_store.history.restore import start_of_run
from tests.conftest import fixture_params
from tests.oracle_client import Oracle, as_js
from tests.strategies import json_objects, legal_streams, message_lists

pytestmark = pytest.mark.oracle


def lineage_ids(messages: list[dict[str, Any]]) -> list[Any]:
    """The message ids lineage rule 3 compares (docs/design/behaviour.md): every message's id
    but activity messages', which clients strip from the input they send."""
    return [m.get("id") for m in messages if m.get("role") != "activity"]


def run_bounds(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    starts = [i for i, e in enumerate(events) if e["type"] == "RUN_STARTED"] + [len(events)]
    return list(itertools.pairwise(starts))


@pytest.mark.parametrize("events", fixture_params())
def test_every_run_of_every_recording_restores_as_the_official_client(
    oracle: Oracle, store_location: str, events: list[dict[str, Any]]
) -> None:
    with agui_store.open(store_location) as store:
        store.append(events)
        for _, end in run_bounds(events):
            started = events[_]
            co = store.checkout(started["runId"], thread_id=started["threadId"])
            want = oracle.replay(events[:end])
            assert want["ok"], want
            assert co.messages == want["messages"]
            assert co.state == want["state"]
            assert co.interrupts == want["pendingInterrupts"]


@st.composite
def run_trees(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Runs of one thread: each with a drawn parent (explicit, parentRunId or head), an
    optional client input (full history or normalized), and a legal body."""
    runs: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 5))):
        rid = f"run{i}"
        body = draw(legal_streams(min_runs=1, max_runs=1, run_ids=[rid], max_steps=8))
        spec: dict[str, Any] = {"run_id": rid, "events": body, "parent": None, "how": "head"}
        if runs:
            spec["how"] = draw(st.sampled_from(["head", "explicit", "parentRunId"]))
            spec["parent"] = draw(st.sampled_from([r["run_id"] for r in runs]))
        if draw(st.booleans()):
            spec["input"] = {
                "threadId": "t",
                "runId": rid,
                "messages": draw(message_lists),
                "tools": [],
                "context": [],
                **({"state": draw(json_objects)} if draw(st.booleans()) else {}),
            }
            spec["history"] = draw(st.sampled_from(["full", "normalized"]))
        runs.append(spec)
    return runs


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=run_trees())
def test_generated_run_trees_with_inputs_restore_as_the_official_client(
    oracle: Oracle, new_location: Any, tree: list[dict[str, Any]]
) -> None:
    expected: dict[str, dict[str, Any]] = {}
    complete: set[str] = set()
    with agui_store.open(new_location()) as store:
        for spec in tree:
            rid = spec["run_id"]
            parent = spec["parent"]
            if spec["how"] == "head" and expected:
                parent = list(expected)[-1]
            base = expected[parent] if parent else {"messages": [], "state": {}, "interrupts": []}
            run_input = spec.get("input")
            kwargs: dict[str, Any] = {}
            if spec["how"] == "explicit" and parent:
                kwargs["parent"] = parent
            if run_input is not None:
                run_input = json.loads(json.dumps(run_input))
                if spec["history"] == "full":  # what HttpAgent sends: the whole history first
                    have = {m["id"] for m in run_input["messages"]}
                    run_input["messages"] = [
                        m for m in base["messages"] if m.get("id") not in have
                    ] + run_input["messages"]
                if spec["how"] == "parentRunId" and parent:
                    run_input["parentRunId"] = parent
                kwargs["input"] = run_input
            elif spec["how"] == "parentRunId" and parent:
                spec["events"][0] = {**spec["events"][0], "parentRunId": parent}
            echoed = spec["events"][0].get("input")
            sent = run_input if run_input is not None else echoed
            prefixed: list[Any] = []
            if spec["how"] == "head" and sent is not None:
                # Lineage rule 3: the complete run whose view's ids are the longest prefix
                # of the input's ids (the newest on a tie), before falling back to the head.
                ids = lineage_ids(sent["messages"])
                prefixed = [
                    (len(lineage_ids(expected[r]["messages"])), n, r)
                    for n, r in enumerate(expected)
                    if r in complete
                    and lineage_ids(expected[r]["messages"])
                    and ids[: len(lineage_ids(expected[r]["messages"]))]
                    == lineage_ids(expected[r]["messages"])
                ]
                if prefixed:
                    parent = max(prefixed)[2]
                    base = expected[parent]
            store.append(spec["events"], **kwargs)
            assert store.get_run(rid).parent_run_id == parent
            assert store.input(rid) == kwargs.get("input")  # whole again, normalized or not
            if any(e["type"] in ("RUN_FINISHED", "RUN_ERROR") for e in spec["events"]):
                complete.add(rid)

            messages0, state0 = start_of_run(
                json.loads(json.dumps(base["messages"])),
                base["state"],
                run_input if run_input is not None else echoed,
            )
            if run_input is not None and spec["how"] == "head" and parent and not prefixed:
                # The rule for resent request bodies (docs/design/restoring.md): a request
                # body placed at the head (its parent not named,
                # no restored view it continues) is what its client holds, as sent.
                messages0 = json.loads(json.dumps(run_input["messages"]))
                state0 = run_input.get("state", base["state"])
            want = oracle.replay(spec["events"], messages=messages0, state=state0)
            assert want["ok"], want
            finished = any(e["type"] == "RUN_FINISHED" for e in spec["events"])
            expected[rid] = {
                "messages": want["messages"],
                "state": want["state"],
                "interrupts": want["pendingInterrupts"] if finished else base["interrupts"],
            }
            co = store.checkout(rid)
            assert as_js(co.messages) == as_js(want["messages"])
            assert as_js(co.state) == as_js(want["state"])
            assert as_js(co.interrupts) == as_js(expected[rid]["interrupts"])
        # Every earlier run still restores the same once later branches exist.
        for rid, want_view in expected.items():
            co = store.checkout(rid)
            assert as_js([co.messages, co.state]) == as_js(
                [want_view["messages"], want_view["state"]]
            )


def assert_pipeline_restores(
    oracle: Oracle, store: Any, run_id: str, thread_id: str
) -> list[dict[str, Any]]:
    """The compacted stream, through the official client's full pipeline (schema enforcement,
    verification, reducer), restores exactly what checkout restores."""
    stream = store.reconnect_stream(run_id, thread_id=thread_id)
    co = store.checkout(run_id, thread_id=thread_id)
    got = oracle.replay(json.loads(json.dumps(stream)), mode="pipeline")
    assert got["ok"], got
    assert as_js(got["messages"]) == as_js(co.messages)
    assert as_js(got["state"]) == as_js(co.state)
    if co.run.status != "incomplete":  # an open run cannot state earlier interrupts
        assert as_js(got["pendingInterrupts"]) == as_js(co.interrupts)
    return stream


@pytest.mark.parametrize("events", fixture_params())
def test_the_compacted_stream_of_every_recorded_run_restores_through_the_full_client_pipeline(
    oracle: Oracle, store_location: str, events: list[dict[str, Any]]
) -> None:
    with agui_store.open(store_location) as store:
        store.append(events)
        for a, b in run_bounds(events):
            stream = assert_pipeline_restores(
                oracle, store, events[a]["runId"], events[a]["threadId"]
            )
            assert [e["type"] for e in stream][:3] == [
                "RUN_STARTED",
                "MESSAGES_SNAPSHOT",
                "STATE_SNAPSHOT",
            ]
            assert len(stream) <= 4 < b - a or b - a <= 4


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=run_trees())
def test_compacted_streams_of_generated_run_trees_restore_through_the_full_client_pipeline(
    oracle: Oracle, new_location: Any, tree: list[dict[str, Any]]
) -> None:
    with agui_store.open(new_location()) as store:
        for spec in tree:
            kwargs: dict[str, Any] = {}
            if spec["how"] == "explicit" and spec["parent"]:
                kwargs["parent"] = spec["parent"]
            if "input" in spec:
                kwargs["input"] = spec["input"]
            store.append(spec["events"], **kwargs)
        for spec in tree:
            assert_pipeline_restores(oracle, store, spec["run_id"], "t")


@pytest.mark.parametrize("events", fixture_params())
def test_echoed_inputs_appended_run_by_run_are_stored_by_reference_and_read_back_whole(
    oracle: Oracle, store_location: str, events: list[dict[str, Any]]
) -> None:
    """ag-ui-langgraph echoes the whole history in every RUN_STARTED.input: appended as a
    live server appends (one run per call), the echo is kept by reference, and every event,
    history and checkout reads back as recorded and as the client restores it."""
    with agui_store.open(store_location) as store:
        for a, b in run_bounds(events):
            store.append(events[a:b])
        tid = events[0]["threadId"]
        assert list(store.thread_events(tid)) == events
        for a, b in run_bounds(events):
            rid = events[a]["runId"]
            assert store.events(rid, thread_id=tid) == events[a:b]
            assert store.history(rid, thread_id=tid) == events[:b]
            want = oracle.replay(events[:b])
            co = store.checkout(rid, thread_id=tid)
            assert (co.messages, co.state) == (want["messages"], want["state"])
        echoes = testing.connection(store).execute("SELECT count(*) FROM echo_refs").fetchone()[0]
        shared = sum(
            1 for a, _ in run_bounds(events)[1:]
            if isinstance(events[a].get("input"), dict) and events[a]["input"].get("messages")
        )
        assert echoes <= shared and (shared == 0 or echoes > 0)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), n=st.integers(1, 4))
def test_generated_conversations_echoing_their_history_read_back_and_restore_exactly(
    oracle: Oracle, new_location: Any, data: st.DataObject, n: int
) -> None:
    """Each run echoes the conversation so far (plus new messages) in RUN_STARTED.input, as
    ag-ui-langgraph does; stored by reference, every event reads back as sent, and each
    view is the client's replay from the start that docs/design/behaviour.md#restoring
    gives an echoed input."""
    appended: list[dict[str, Any]] = []
    view: dict[str, Any] = {"messages": [], "state": {}}
    with agui_store.open(new_location()) as store:
        for i in range(n):
            rid = f"run{i}"
            body = data.draw(legal_streams(min_runs=1, max_runs=1, run_ids=[rid], max_steps=6))
            extra = data.draw(message_lists)
            have = {m["id"] for m in extra}
            echoed = [
                m
                for m in view["messages"]
                if m.get("id") not in have and m.get("role") != "activity"
            ]
            sent = {
                "threadId": "t",
                "runId": rid,
                "tools": [],
                "context": [],
                "messages": json.loads(json.dumps(echoed)) + extra,
            }
            if i:  # a linear conversation: the client names the run it continues
                sent["parentRunId"] = f"run{i - 1}"
            body[0] = {**body[0], "input": sent}
            store.append(body)
            appended += body
            assert store.events(rid) == body
            messages0, state0 = start_of_run(
                json.loads(json.dumps(view["messages"])), view["state"], sent
            )
            want = oracle.replay(body, messages=messages0, state=state0)
            assert want["ok"], want
            view = {"messages": want["messages"], "state": want["state"]}
            co = store.checkout(rid)
            assert as_js([co.messages, co.state]) == as_js([want["messages"], want["state"]])
        assert store.history(f"run{n - 1}") == appended
