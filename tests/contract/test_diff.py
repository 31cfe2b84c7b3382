"""Time travel you can see, on every backend: merge bases, diffs, the run graph and notebook
rendering."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store.cli.demo import record_demo
from agui_store.cli.render import graph
from agui_store.history.diff import compare, state_patch
from agui_store.protocol.patch import apply_patch
from tests.conftest import fixture_params
from tests.strategies import legal_streams


def run(thread: str, run_id: str, text: str, **started: Any) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run_id, **started},
        {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}", "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": f"m-{run_id}"},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": f"/{run_id}", "value": text}]},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id},
    ]


@st.composite
def trees(draw: st.DrawFn) -> list[int | None]:
    """parents[i] = the index of run i's parent (None for a root)."""
    n = draw(st.integers(1, 12))
    return [None] + [draw(st.integers(0, i - 1)) for i in range(1, n)]


def ancestors(parents: list[int | None], i: int) -> list[int]:
    chain = [i]
    while parents[chain[-1]] is not None:
        chain.append(parents[chain[-1]])  # type: ignore[arg-type]
    return chain


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parents=trees(), data=st.data())
def test_merge_bases_and_ancestry_match_a_model_at_every_depth(
    new_location: Any, parents: list[int | None], data: st.DataObject
) -> None:
    with agui_store.open(new_location()) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r0"},
                {"type": "STATE_SNAPSHOT", "snapshot": {}},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r0"},
            ]
        )
        for i, p in enumerate(parents[1:], start=1):
            store.append(run("t", f"r{i}", f"text {i}"), parent=f"r{p}")
        a = data.draw(st.integers(0, len(parents) - 1))
        b = data.draw(st.integers(0, len(parents) - 1))
        chain_a, chain_b = ancestors(parents, a), ancestors(parents, b)
        want = next(x for x in chain_a if x in chain_b)
        assert store.merge_base(f"r{a}", f"r{b}").run_id == f"r{want}"
        assert store.is_ancestor(f"r{a}", f"r{b}") == (a in chain_b)
        d = store.diff(f"r{a}", f"r{b}")
        assert [r.run_id for r in d.a_runs] == [f"r{x}" for x in chain_a[: chain_a.index(want)]]
        assert [r.run_id for r in d.b_runs] == [f"r{x}" for x in chain_b[: chain_b.index(want)]]
        added = {c.id for c in d.changes.messages if c.kind == "added"}
        assert added == {f"m-r{x}" for x in chain_b[: chain_b.index(want)]}


def test_three_dot_shows_each_side_since_the_merge_base_and_two_dot_the_views(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        thread, _ = record_demo(store)
        d = store.diff("run-2", "fahrenheit", thread_id=thread)
        assert d.mode == "three-dot" and d.merge_base.run_id == "run-1"
        assert [c.id for c in d.a_changes.messages] == [
            "user-2",
            "assistant-3",
            "call-2-result",
            "assistant-4",
        ]
        assert [c.id for c in d.changes.messages] == ["user-3", "assistant-5"]
        assert d.state_patch == [{"op": "replace", "path": "/units", "value": "fahrenheit"}]
        two = store.diff("run-2", "run-3", thread_id=thread, mode="two-dot")
        kinds = {c.id: c.kind for c in two.messages}
        assert kinds == {
            "user-3": "added",
            "assistant-5": "added",
            "user-2": "removed",
            "assistant-3": "removed",
            "call-2-result": "removed",
            "assistant-4": "removed",
        }
        removed = next(c for c in two.messages if c.id == "user-2")
        assert removed.before == {"id": "user-2", "role": "user", "content": "And in Porto?"}
        base = store.checkout("run-2", thread_id=thread).state
        assert apply_patch(base, two.state_patch) == store.checkout("run-3", thread_id=thread).state


MULTI_RUN = [
    p
    for p in fixture_params()
    if p.values[0] is None or sum(e["type"] == "RUN_STARTED" for e in p.values[0]) >= 2
]


@pytest.mark.parametrize("events", MULTI_RUN)
def test_recorded_runs_forked_and_compared_show_exactly_what_each_side_added(
    store_location: str, events: list[dict[str, Any]]
) -> None:
    starts = [i for i, e in enumerate(events) if e["type"] == "RUN_STARTED"] + [len(events)]
    runs = [events[a:b] for a, b in itertools.pairwise(starts)]
    with agui_store.open(store_location) as store:
        for run_events in runs[:-1]:
            store.append(run_events)
        # Replay the last run again as a sibling of the second to last: a fork.
        last = copy.deepcopy(runs[-1])
        last[0]["runId"] = "forked"
        base_id = runs[-3][0]["runId"] if len(runs) >= 3 else None
        tid = runs[0][0]["threadId"]
        store.append(last, parent=base_id) if base_id else store.append(last)
        prev = runs[-2][0]["runId"]
        d = store.diff(prev, "forked", thread_id=tid, mode="two-dot")
        a, b = store.checkout(prev, thread_id=tid), store.checkout("forked", thread_id=tid)
        assert apply_patch(copy.deepcopy(a.state), d.state_patch) == b.state
        ids_b = [m["id"] for m in b.messages]
        assert {c.id for c in d.messages if c.kind == "added"} <= set(ids_b)


def test_the_graph_draws_forks_like_git_log_graph(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        for rid, parent in [("a", None), ("b", "a"), ("c", "b"), ("d", "a"), ("e", "c")]:
            store.append(run("t", rid, rid), **({"parent": parent} if parent else {}))
        lines = graph(store.runs("t"))
    assert [line.split(" ev")[0] for line in lines] == [
        "* e (main) finished 6",
        "| * d finished 6",
        "* | c finished 6",
        "* | b finished 6",
        "|/",
        "* a finished 6",
    ]


def test_checkouts_logs_and_diffs_render_for_terminals_and_notebooks(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        thread, _ = record_demo(store)
        co = store.checkout("run-3", thread_id=thread)
        assert "user: Can you give me that in Fahrenheit?" in str(co)
        assert co._repr_html_().count("<tr>") == len(co.messages) + 1
        assert f"({co.run.status}, {len(co.messages)} messages)" in co._repr_html_()
        store.append(run("solo", "one", "hi"))  # one message
        assert "(finished, 1 message)" in store.checkout("one", thread_id="solo")._repr_html_()
        log = store.log("run-3", thread_id=thread)
        assert isinstance(log, list) and [r.run_id for r in log] == ["run-3", "run-1"]
        assert str(log).splitlines()[0].startswith("run-3 (main, fahrenheit)")
        assert "<table>" in log._repr_html_()
        d = store.diff("run-2", "run-3", thread_id=thread)
        assert "+ [user-3] user: Can you give me that in Fahrenheit?" in str(d)
        assert "merge base run-1" in d._repr_html_()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stream=legal_streams(max_runs=3))
def test_diffing_a_run_with_itself_shows_no_change(
    new_location: Any, stream: list[dict[str, Any]]
) -> None:
    with agui_store.open(new_location()) as store:
        store.append(stream)
        for r in store.runs("t"):
            d = store.diff(r.run_id, r.run_id)
            assert d.merge_base.run_id == r.run_id and d.changes.empty and d.a_changes.empty
            assert state_patch(1, 1) == []


def _grown(run_id: str, count: int) -> list[dict[str, Any]]:
    """Events adding ``count`` assistant messages."""
    out: list[dict[str, Any]] = []
    for i in range(count):
        mid = f"{run_id}-{i}"
        out += [
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"{run_id} says {i}"},
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
        ]
    return out


@st.composite
def _edits(draw: st.DrawFn) -> dict[str, Any]:
    """What one run does to its parent's view: add messages (enough to cross chunk
    boundaries), or resend the list edited in place (snapshot), and change the state or not."""
    return {
        "grow": draw(st.integers(0, 70)),
        "snapshot": draw(
            st.none()
            | st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["edit", "drop", "dup"])),
                       max_size=3)
        ),
        "state": draw(st.sampled_from(["same", "delta", "snapshot"])),
    }


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=30)
@given(parents=trees(), data=st.data())
def test_a_diff_that_skips_what_its_sides_share_equals_the_diff_of_replayed_views(
    new_location: Any, parents: list[int | None], data: st.DataObject
) -> None:
    """Diff reads its sides' checkpoints past the chunks and tail segments they share, the
    state they share once: whatever the tree, its changes are those of the whole views,
    replayed from the log with no checkpoint (``testing.replayed_view``)."""
    from agui_store import testing

    with agui_store.open(new_location()) as store:
        for i, parent in enumerate(parents):
            edits = data.draw(_edits())
            run_id = f"r{i}"
            body = _grown(run_id, edits["grow"])
            if edits["snapshot"] is not None and parent is not None:
                messages = store.checkout(f"r{parent}").messages
                for at, what in edits["snapshot"]:
                    if not messages:
                        break
                    k = at % len(messages)
                    if what == "edit":
                        messages[k] = {**messages[k], "content": f"edited by {run_id}"}
                    elif what == "drop":
                        del messages[k]
                    else:  # the same id twice: diff tells them apart by occurrence
                        messages.insert(k, {**messages[k], "content": f"again in {run_id}"})
                body = [{"type": "MESSAGES_SNAPSHOT", "messages": messages}, *body]
            if edits["state"] == "delta":
                body.append(
                    {"type": "STATE_DELTA",
                     "delta": [{"op": "add", "path": f"/{run_id}", "value": [i, "x"]}]}
                )
            elif edits["state"] == "snapshot" or parent is None:
                # A large state, so that the runs after it store theirs as patches on it.
                body.append(
                    {"type": "STATE_SNAPSHOT", "snapshot": {"only": run_id, "big": "x" * 4000}}
                )
            started: dict[str, Any] = {"type": "RUN_STARTED", "threadId": "t", "runId": run_id}
            store.append(
                [started, *body, {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id}],
                parent=None if parent is None else f"r{parent}",
            )
        views = {i: testing.replayed_view(store, f"r{i}", thread_id="t")
                 for i in range(len(parents))}
        records = {r.run_id: r for r in store.runs("t")}
        for _ in range(3):
            a = data.draw(st.integers(0, len(parents) - 1))
            b = data.draw(st.integers(0, len(parents) - 1))
            chain_a, chain_b = ancestors(parents, a), ancestors(parents, b)
            base = next(x for x in chain_a if x in chain_b)
            va, vb, vbase = views[a], views[b], views[base]
            three = store.diff(f"r{a}", f"r{b}")
            assert three.merge_base is not None and three.merge_base.run_id == f"r{base}"
            assert three.changes == compare(vbase.messages, vbase.state, vb.messages, vb.state)
            assert three.a_changes == compare(vbase.messages, vbase.state, va.messages, va.state)
            assert three.a_runs == [records[f"r{x}"] for x in chain_a[: chain_a.index(base)]]
            assert (three.a, three.b) == (records[f"r{a}"], records[f"r{b}"])
            assert three.merge_base == records[f"r{base}"]
            assert three.b_runs == [records[f"r{x}"] for x in chain_b[: chain_b.index(base)]]
            two = store.diff(f"r{a}", f"r{b}", mode="two-dot")
            assert two.changes == compare(va.messages, va.state, vb.messages, vb.state)


def test_a_three_dot_diff_of_unrelated_runs_with_the_same_long_history_shows_all_of_it(
    store_location: str,
) -> None:
    """Two threads holding the same 70 messages share their first chunk's blob, but with no
    merge base each side is compared with an empty view: every message is added."""
    messages = [{"id": f"m{i}", "role": "user", "content": f"hello {i}"} for i in range(70)]
    with agui_store.open(store_location) as store:
        for thread in ("t", "u"):
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": thread, "runId": f"{thread}-0"},
                    {"type": "MESSAGES_SNAPSHOT", "messages": messages},
                    {"type": "RUN_FINISHED", "threadId": thread, "runId": f"{thread}-0"},
                ]
            )
        found = store.diff("t-0", "u-0")
        assert found.merge_base is None
        assert [c.id for c in found.changes.messages] == [m["id"] for m in messages]
        assert [c.id for c in found.a_changes.messages] == [m["id"] for m in messages]
        assert store.diff("t-0", "u-0", mode="two-dot").changes.empty


def test_a_diff_of_two_runs_whose_states_are_patches_on_one_state_equals_the_replayed_one(
    store_location: str,
) -> None:
    """Runs after a large state store theirs as the patches since it: the nearer run's
    state is made once and the farther one continues it with the patches that follow."""
    from agui_store import testing

    with agui_store.open(store_location) as store:
        for i in range(8):
            if i == 0:
                body = [{"type": "STATE_SNAPSHOT", "snapshot": {"big": "x" * 4000, "n": []}}]
            else:
                second = (
                    {"op": "replace", "path": "/big", "value": f"{i}"}
                    if i == 5
                    else {"op": "add", "path": f"/r{i}", "value": True}
                )
                body = [
                    {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n/-", "value": i}]},
                    {"type": "STATE_DELTA", "delta": [second]},
                ]
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{i}"},
                    *body,
                    {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{i}"},
                ]
            )
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "side", "parentRunId": "r3"},
                {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/n/0"}]},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "side"},
            ]
        )
        views = {r: testing.replayed_view(store, r, thread_id="t")
                 for r in ("r2", "r3", "r4", "r7", "side")}
        for a, b in (("r2", "r7"), ("r4", "r7"), ("side", "r7"), ("r7", "r2"), ("side", "r4")):
            base = store.merge_base(a, b)
            assert base is not None
            vbase = views[base.run_id]
            found = store.diff(a, b)
            assert found.changes.state_patch == state_patch(vbase.state, views[b].state)
            assert found.a_changes.state_patch == state_patch(vbase.state, views[a].state)
            two = store.diff(a, b, mode="two-dot")
            assert two.changes.state_patch == state_patch(views[a].state, views[b].state)
            assert apply_patch(views[a].state, two.changes.state_patch) == views[b].state
