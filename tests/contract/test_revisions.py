"""Revisions as git users type them: short content hashes, chained ``~n`` and ``^``, ``@``,
and branches that are created, moved only when asked, and renamed."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import AmbiguousRunError, BranchError, InvalidArgumentError, RunNotFoundError
from agui_store.engine import clock
from tests.backends import dump
from tests.streams import run, say
from tests.workers.harness import scale

SOME = settings(
    max_examples=scale(dev=40, ci=150),
    # The store is only read: one per test serves every example.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    deadline=None,
)
#: One step of a revision's suffix, and how many lineage parents it walks.
STEPS = st.sampled_from([("~", 1), ("^", 1), ("^0", 0), ("^1", 1), ("~0", 0), ("~1", 1),
                         ("~2", 2), ("~3", 3), ("~007", 7)])


@pytest.fixture
def store(store_location: str) -> Any:
    """Thread t: r1 <- r2 <- r3, and r4 branching off r1."""
    with agui_store.open(store_location) as s:
        s.append(run("t", "r1"))
        s.append(run("t", "r2"))
        s.append(run("t", "r3"))
        s.append(run("t", "r4", parentRunId="r1"))
        yield s


def test_a_short_hash_of_four_or_more_digits_names_its_run(store: Any) -> None:
    for r in store.runs("t"):
        prefix = next(
            r.hash[:n] for n in range(4, 65)
            if sum(o.hash.startswith(r.hash[:n]) for o in store.runs("t")) == 1
        )
        assert store.get_run(prefix).run_id == r.run_id
        assert store.get_run(prefix.upper(), thread_id="t").run_id == r.run_id
        assert store.get_run(r.short_hash + "~0").run_id == r.run_id
    assert store.get_run(store.runs("t")[0].hash[:3]) is None  # three digits are not enough


def test_the_hash_log_prints_for_an_open_run_names_it(store: Any) -> None:
    """``log`` writes an open run's hash so far with a ``+`` after it."""
    store.append(run("t", "open")[:-1])  # no RUN_FINISHED: still open
    live = store.get_run("open", thread_id="t")
    assert live.status == "incomplete"
    assert store.get_run(live.short_hash + "+", thread_id="t").run_id == "open"
    assert store.get_run(live.short_hash + "+~1", thread_id="t") is not None


def test_an_ambiguous_prefix_lists_the_runs_it_fits(store: Any) -> None:
    store.append(run("t", "ab-1"))
    store.append(run("t", "ab-2"))
    with pytest.raises(AmbiguousRunError) as caught:
        store.get_run("ab-")
    assert "'ab-1'" in str(caught.value) and "'ab-2'" in str(caught.value)
    assert "begins 2 runs'" in str(caught.value)
    for i in range(3, 9):
        store.append(run("t", f"ab-{i}"))
    with pytest.raises(AmbiguousRunError, match=r"begins more than 6 runs' .*, \.\.\.; give more"):
        store.get_run("ab-")


def test_tilde_and_caret_chain_and_at_is_head(store: Any) -> None:
    assert store.get_run("@").run_id == "r4"
    assert store.get_run("r3~1~1").run_id == "r1"
    assert store.get_run("r3^^").run_id == "r1"
    assert store.get_run("r3~1^").run_id == "r1"
    assert store.get_run("r3^1").run_id == "r2"
    assert store.get_run("r3^0").run_id == "r3"
    assert store.get_run("@~1").run_id == "r1"
    with pytest.raises(RunNotFoundError, match="no ancestor that far back"):
        store.log("r3~1~1~1")
    with pytest.raises(InvalidArgumentError, match="one lineage parent"):
        store.log("r3^2")


def test_a_run_id_holding_a_tilde_takes_ancestor_steps_after_it(store: Any) -> None:
    """The longest name before the steps that is a run's id is the base: ``r~2~1`` is
    the parent of run ``r~2``, not ``r``'s third ancestor (``r`` begins several ids)."""
    store.append(run("u", "u1", *say("m1", "one")))
    store.append(run("u", "r~2", *say("m2", "two")))
    store.append(run("u", "r~20", *say("m3", "three")))
    assert store.get_run("r~2~1").run_id == "u1"
    assert store.get_run("r~20^", thread_id="u").run_id == "r~2"
    assert store.get_run("r~20~1^").run_id == "u1"
    assert store.checkout("r~2~1") == store.checkout("u1", thread_id="u")
    assert store.checkout("r~2~1").messages[-1]["content"] == "one"
    with pytest.raises(RunNotFoundError, match="no ancestor that far back"):
        store.checkout("r~2~2")
    with pytest.raises(InvalidArgumentError, match="one lineage parent"):
        store.checkout("r~2^2")


@SOME
@given(steps=st.lists(STEPS, max_size=5))
def test_chained_steps_walk_as_many_parents_as_they_add_up_to(
    store: Any, steps: list[tuple[str, int]]
) -> None:
    suffix = "".join(text for text, _ in steps)
    depth = sum(n for _, n in steps)
    for base, lineage in (("r3", ["r3", "r2", "r1"]), ("@", ["r4", "r1"])):
        if depth < len(lineage):
            assert store.get_run(base + suffix).run_id == lineage[depth]
        else:
            with pytest.raises(RunNotFoundError, match="no ancestor that far back"):
                store.log(base + suffix)


def test_a_branch_moves_only_when_asked_and_renames_keeping_its_run(store: Any) -> None:
    store.branch("idea", "r2", thread_id="t", move=False)
    with pytest.raises(BranchError, match="already exists in thread 't' \\(at run 'r2'\\)"):
        store.branch("idea", "r3", thread_id="t", move=False)
    assert store.branch("idea", "r3", thread_id="t").run_id == "r3"
    renamed = store.rename_branch("idea", "plan", thread_id="t")
    assert (renamed.name, renamed.run_id) == ("plan", "r3")
    names = {b.name: b.run_id for b in store.branches("t")}
    assert names == {"main": "r4", "plan": "r3"}
    store.branch("other", "r1", thread_id="t")
    with pytest.raises(BranchError, match="already exists in thread 't' \\(at run 'r1'\\)"):
        store.rename_branch("plan", "other", thread_id="t")
    store.rename_branch("plan", "other", thread_id="t", force=True)
    assert {b.name: b.run_id for b in store.branches("t")} == {"main": "r4", "other": "r3"}
    with pytest.raises(BranchError, match="no branch"):
        store.rename_branch("plan", "x", thread_id="t")
    with pytest.raises(BranchError, match="default branch"):
        store.rename_branch("main", "x", thread_id="t")


def test_renaming_a_branch_keeps_when_it_last_moved_as_pointing_it_where_it_is_does(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clock, "now_ms", lambda: 1_000_000)
    store.branch("idea", "r2", thread_id="t")
    moved = store.branches("t")[1].updated_at
    assert moved == datetime.datetime.fromtimestamp(1000, datetime.timezone.utc)
    monkeypatch.setattr(clock, "now_ms", lambda: 9_000_000)
    assert store.branch("idea", "r2", thread_id="t").updated_at == moved
    assert store.rename_branch("idea", "idea", thread_id="t").updated_at == moved
    assert store.rename_branch("idea", "plan", thread_id="t").updated_at == moved
    assert [(b.name, b.updated_at) for b in store.branches("t")[1:]] == [("plan", moved)]


def test_fork_refuses_a_run_id_the_thread_has_at_once(store: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="already a run of thread 't'"):
        store.fork("r1", run_id="r2")
    assert store.fork("r1", run_id="r5")["runId"] == "r5"


def test_fork_refuses_a_run_id_that_names_a_branch_of_the_thread_as_append_would_later(
    store: Any,
) -> None:
    store.branch("idea", "r1", thread_id="t")
    with pytest.raises(InvalidArgumentError, match="the name of a branch of thread 't'"):
        store.fork("r1", run_id="idea")
    body = store.fork("r1", run_id="idea2")
    assert body["runId"] == "idea2"


@pytest.mark.parametrize(
    "run_id", ["a\x00b", "\ud800", "x" * 2049, "é" * 1025], ids=["nul", "surrogate", "long", "wide"]
)
def test_fork_refuses_a_run_id_that_append_would_refuse_in_its_body(
    store: Any, store_location: str, run_id: str
) -> None:
    before = dump(store_location)
    with pytest.raises(InvalidArgumentError, match="run_id= "):
        store.fork("r1", run_id=run_id)
    with pytest.raises(agui_store.InvalidEventError):  # what the body would meet
        store.append(run("t", run_id, parentRunId="r1"))
    assert dump(store_location) == before


@pytest.mark.parametrize("name", ["a\x00b", "\ud800"], ids=["nul", "surrogate"])
def test_a_name_no_backend_stores_names_no_branch_or_run_alike_on_every_backend(
    store: Any, store_location: str, name: str
) -> None:
    store.branch("idea", "r2", thread_id="t")
    before = dump(store_location)
    for call, error, said in [
        (lambda: store.delete_branch(name, thread_id="t"), BranchError, "names no branch"),
        (lambda: store.rename_branch(name, "x", thread_id="t"), BranchError, "names no branch"),
        (lambda: store.runs("t", before=name), InvalidArgumentError, "before= .* names no run"),
        (lambda: store.log("r3", cursor=name), InvalidArgumentError, "cursor= .* names no run"),
    ]:
        with pytest.raises(error, match=said) as raised:
            call()
        assert store_location not in str(raised.value)  # the argument is named, not the store
    assert dump(store_location) == before


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda s: s.checkout(123, thread_id="t"), "a run id or ref is text, not an int (123)"),
        (lambda s: s.log(None, thread_id="t"), "a run id or ref is text, not None"),
        (lambda s: s.runs(None), "a thread id is text, not None"),
        (lambda s: s.events("r1", thread_id=5), "a thread id is text, not an int (5)"),
        (lambda s: s.branch("b", "r1", thread_id=b"t"), "a thread id is text, not a bytes"),
        (lambda s: s.get_run("r1", thread_id=5), "a thread id is text, not an int (5)"),
    ],
    ids=[
        "checkout-int", "log-none", "runs-none", "events-int-thread", "branch-bytes-thread",
        "get-run-int-thread",
    ],
)
def test_an_id_that_is_not_text_is_a_wrong_argument_not_an_absent_run_or_thread(
    store_location: str, call: Any, said: str
) -> None:
    """A number where an id goes is the caller's mistake: told so, not that the store has no
    run or thread of that name (which reads as a lookup that could succeed)."""
    with agui_store.open(store_location) as store:
        store.append(run("t", "r1"))
        with pytest.raises(agui_store.ArgumentTypeError) as refused:
            call(store)
        assert said in str(refused.value)
        assert not isinstance(refused.value, agui_store.RunNotFoundError)


def test_a_name_missing_from_the_thread_given_says_that_thread_and_those_that_hold_it(
    store: Any,
) -> None:
    store.append(run("u", "r9"))
    store.append(run("v", "r9"))
    store.append(run("v", "only-v"))
    with pytest.raises(RunNotFoundError, match=r"^no run, branch, unique run-id prefix or "
                       r"short hash 'only-v' in thread 't' \(a run of thread 'v' has that "
                       r"id\)$"):
        store.checkout("only-v~1", thread_id="t")
    with pytest.raises(RunNotFoundError, match=r"'r9' in thread 't' \(runs of threads 'u', "
                       r"'v' have that id\)$"):
        store.branch("b", "r9", thread_id="t")
    with pytest.raises(RunNotFoundError, match=r"'nope' in thread 't'$"):
        store.log("nope", thread_id="t")
    # Another owner's thread is absent, not named.
    store.append(run("w", "mine"), scope="alice")
    store.append(run("x", "theirs"), scope="bob")
    with pytest.raises(RunNotFoundError, match=r"'theirs' in thread 'w'$"):
        store.diff("mine", "theirs", thread_id="w", scope="alice")
