"""Lineage and refs on every backend: which run a run continues, history, checkout of a
branch, fork, and the names that resolve to runs."""

from __future__ import annotations

from typing import Any

import pytest

import agui_store
from agui_store.errors import (
    AmbiguousRunError,
    BranchError,
    RunNotFoundError,
)
from tests.streams import http_agent_turns, run, say


@pytest.fixture
def store(store_location: str) -> Any:
    """A store on each backend in turn (tests/contract/conftest.py)."""
    with agui_store.open(store_location) as s:
        yield s


# --- lineage ----------------------------------------------------------------------------


def test_lineage_follows_the_first_matching_rule(store: Any) -> None:
    store.append(run("t", "r1"))
    store.append(run("t", "r2"))  # rule 4: the thread's head
    store.append(run("t", "r3", parentRunId="r1"))  # rule 2: RUN_STARTED.parentRunId
    store.append(
        run("t", "r4"),
        input={
            "threadId": "t",
            "runId": "r4",
            "parentRunId": "r2",
            "messages": [],
            "tools": [],
            "context": [],
        },
    )  # rule 2: input
    store.append(run("t", "r5", parentRunId="r3"), parent="r1")  # rule 1: explicit wins
    store.append(run("t", "r6", parentRunId="elsewhere"))  # a parent outside the thread: data
    got = {r.run_id: (r.parent_run_id, r.lineage, r.sent_parent_run_id) for r in store.runs("t")}
    assert got == {
        "r1": (None, "root", None),
        "r2": ("r1", "head", None),
        "r3": ("r1", "parentRunId", "r1"),
        "r4": ("r2", "parentRunId", "r2"),
        "r5": ("r1", "explicit", "r3"),
        "r6": ("r5", "head", "elsewhere"),
    }


def test_log_walks_the_lineage_newest_first(store: Any) -> None:
    for i in range(1, 5):
        store.append(run("t", f"r{i}"))
    store.append(run("t", "alt", parentRunId="r2"))
    assert [r.run_id for r in store.log("r4")] == ["r4", "r3", "r2", "r1"]
    assert [r.run_id for r in store.log("alt")] == ["alt", "r2", "r1"]
    assert [r.run_id for r in store.history("alt") and store.log("HEAD~1")] == ["r2", "r1"]


def test_history_is_the_ancestor_chains_events_root_first(store: Any) -> None:
    r1, r2 = run("t", "r1", *say("a", "one")), run("t", "r2", *say("b", "two"))
    store.append(r1)
    store.append(r2)
    store.append(run("t", "r3", *say("c", "other"), parentRunId="r1"))
    assert store.history("r2") == r1 + r2


def test_checkout_replays_only_the_branch_not_its_siblings(store: Any) -> None:
    store.append(run("t", "r1", *say("a", "root")))
    store.append(run("t", "r2", *say("b", "left")))
    store.append(run("t", "r3", *say("c", "right"), parentRunId="r1"))
    assert [m["content"] for m in store.checkout("r3").messages] == ["root", "right"]
    assert [m["content"] for m in store.checkout("r2").messages] == ["root", "left"]


def test_fork_gives_the_input_for_a_new_run_from_any_past_run(store: Any) -> None:
    tools = [{"name": "f", "description": "d"}]
    store.append(
        run("t", "r1", *say("a1", "hello")),
        input={
            "threadId": "t",
            "runId": "r1",
            "messages": [],
            "state": {"k": 1},
            "tools": tools,
            "context": [],
        },
    )
    store.append(run("t", "r2", *say("a2", "later")))
    fork = store.fork("r1", run_id="r9")
    assert fork["threadId"] == "t" and fork["runId"] == "r9" and fork["parentRunId"] == "r1"
    assert fork["messages"] == [{"id": "a1", "role": "assistant", "content": "hello"}]
    assert fork["state"] == {"k": 1} and fork["tools"] == tools
    store.append(run("t", "r9", *say("a9", "branch")), input=fork)
    assert store.get_run("r9").parent_run_id == "r1"


# --- refs -------------------------------------------------------------------------------


def test_refs_resolve_run_ids_prefixes_branches_head_and_ancestors(store: Any) -> None:
    for rid in ("alpha-1", "alpha-2", "beta-3"):
        store.append(run("t", rid))
    store.branch("feature", "alpha-2", thread_id="t")
    assert store.get_run("beta").run_id == "beta-3"
    assert store.get_run("feature").run_id == "alpha-2"
    assert store.get_run("HEAD").run_id == "beta-3"
    assert store.get_run("main~2").run_id == "alpha-1"
    assert store.get_run("feature~").run_id == "alpha-1"
    with pytest.raises(AmbiguousRunError, match="ambiguous: it begins 2 runs"):
        store.checkout("alpha")
    assert store.get_run("gamma") is None
    with pytest.raises(RunNotFoundError):
        store.checkout("HEAD~9")


def test_a_new_run_on_a_branch_advances_it(store: Any) -> None:
    store.append(run("t", "r1"))
    store.append(run("t", "r2"))
    store.branch("retry", "r1", thread_id="t")
    store.append(run("t", "r3", parentRunId="r1"))
    store.append(run("t", "r4"), branch="retry")
    assert store.get_run("retry").run_id == "r4"
    assert store.get_run("r4").parent_run_id == "r3"
    assert {b.name: b.run_id for b in store.branches("t")} == {"main": "r4", "retry": "r4"}


def test_branch_names_are_checked_and_deletion_keeps_the_runs(store: Any) -> None:
    store.append(run("t", "r1"))
    for bad in ("main", "HEAD", "has space", "x~1", "", "-x"):
        with pytest.raises(BranchError):
            store.branch(bad, "r1", thread_id="t")
    store.branch("keep", "r1", thread_id="t")
    store.delete_branch("keep", thread_id="t")
    with pytest.raises(BranchError):
        store.delete_branch("keep", thread_id="t")
    assert store.get_run("r1") is not None


# --- input normalization and lineage rule 3 ---------------------------------------------


def test_a_branch_without_parent_run_id_finds_its_parent_by_its_messages(store: Any) -> None:
    http_agent_turns(store, 3)
    fork = store.fork("r1", run_id="retry")
    del fork["parentRunId"]  # a client that time-travels without saying so
    fork["messages"].append({"id": "u-retry", "role": "user", "content": "again?"})
    store.append(run("t", "retry", *say("a-retry", "sure")), input=fork)
    r = store.get_run("retry")
    assert (r.parent_run_id, r.lineage) == ("r1", "messages")
    assert [m["id"] for m in store.checkout("retry").messages] == [
        "u0",
        "a0",
        "u1",
        "a1",
        "u-retry",
        "a-retry",
    ]
    assert [x.run_id for x in store.log("retry")] == ["retry", "r1", "r0"]
