"""``Store.log`` and ``Store.runs`` a page at a time on every backend: ``limit`` and a cursor."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
import agui_store.aio
from agui_store import InvalidArgumentError, Log, RunNotFoundError


def run(thread: str, run_id: str, parent: str | None = None) -> list[dict[str, Any]]:
    started: dict[str, Any] = {"type": "RUN_STARTED", "threadId": thread, "runId": run_id}
    if parent is not None:
        started["parentRunId"] = parent
    return [started, {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id}]


def record_tree(store: agui_store.Store, thread: str, parents: list[int | None]) -> None:
    """Runs r0, r1, ... of ``thread``; run i's lineage parent is run ``parents[i]``."""
    for i, parent in enumerate(parents):
        store.append(run(thread, f"r{i}", None if parent is None else f"r{parent}"))


def pages(store: agui_store.Store, ref: str, limit: int, **where: Any) -> list[Log]:
    out = [store.log(ref, limit=limit, **where)]
    while out[-1].next_cursor is not None:
        out.append(store.log(ref, limit=limit, cursor=out[-1].next_cursor, **where))
    return out


@st.composite
def trees(draw: st.DrawFn) -> list[int | None]:
    """parents[i] = the index of run i's parent (None for a root): several roots, branches."""
    n = draw(st.integers(1, 30))
    return [None] + [draw(st.one_of(st.none(), st.integers(0, i - 1))) for i in range(1, n)]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parents=trees(), data=st.data())
def test_paging_through_a_lineage_gives_exactly_the_whole_log(
    new_location: Any, parents: list[int | None], data: st.DataObject
) -> None:
    with agui_store.open(new_location()) as store:
        record_tree(store, "t", parents)
        start = f"r{data.draw(st.integers(0, len(parents) - 1), label='start')}"
        limit = data.draw(st.integers(1, len(parents) + 2), label="limit")
        whole = store.log(start, thread_id="t")
        got = pages(store, start, limit, thread_id="t")
        assert [r for page in got for r in page] == whole
        assert whole.next_cursor is None
        # Full pages but the last, which is never empty (no trailing empty page to fetch).
        assert all(len(page) == limit for page in got[:-1])
        assert 1 <= len(got[-1]) <= limit
        assert [page.next_cursor for page in got[:-1]] == [page[-1].parent_run_id
                                                           for page in got[:-1]]


def test_log_and_runs_name_the_branches_at_each_run_and_only_their_threads(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        for thread in ("a", "b"):  # the same run ids and branch names in two threads
            record_tree(store, thread, [None, 0, 1])
        store.branch("fix", "r1", thread_id="a")
        store.branch("old", "r0", thread_id="b")
        for thread, names in (("a", {"r2": ("main",), "r1": ("fix",), "r0": ()}),
                              ("b", {"r2": ("main",), "r1": (), "r0": ("old",)})):  # fmt: skip
            logged = store.log("HEAD", thread_id=thread)
            assert {r.run_id: r.branches for r in logged} == names
            assert {r.run_id: r.branches for r in store.runs(thread)} == names
            paged = [r for page in pages(store, "HEAD", 1, thread_id=thread) for r in page]
            assert {r.run_id: r.branches for r in paged} == names


def test_a_logged_run_is_the_record_its_own_constructor_builds_from_its_fields(
    store_location: str,
) -> None:
    """``run_from_row`` fills a Run's fields without its ``__init__`` (for speed): each
    record must hold every field, and equal, hash and print as the one ``Run(...)`` makes."""
    with agui_store.open(store_location) as store:
        store.append(run("t", "r0"))
        started = {"type": "RUN_STARTED", "threadId": "t", "runId": "r1", "parentRunId": "r0"}
        body = {"threadId": "t", "runId": "r1", "messages": [], "tools": [], "context": []}
        store.append([started], input=body)  # a live run, with its input
        store.append([{"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"}])
        store.branch("fix", "r0", thread_id="t")
        for listed in (store.log("HEAD", thread_id="t"), store.runs("t")):
            for record in listed:
                assert set(vars(record)) == {f.name for f in dataclasses.fields(agui_store.Run)}
                rebuilt = agui_store.Run(**vars(record))
                assert rebuilt == record and hash(rebuilt) == hash(record)
                assert repr(rebuilt) == repr(record)
        r1, r0 = store.log("HEAD", thread_id="t")
        assert r1.has_input and r1.updated_at is not None and r1.updated_at >= r1.created_at
        assert r0.branches == ("fix",) and r0.status == "finished"


def test_a_page_continues_its_lineage_after_the_ref_has_moved(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        record_tree(store, "t", [None, 0, 1, 2, 3])
        first = store.log("HEAD", thread_id="t", limit=2)
        assert [r.run_id for r in first] == ["r4", "r3"] and first.next_cursor == "r2"
        store.append(run("t", "fork", "r1"))  # HEAD is now on another branch of the tree
        rest = store.log("HEAD", thread_id="t", limit=10, cursor=first.next_cursor)
        assert [r.run_id for r in rest] == ["r2", "r1", "r0"] and rest.next_cursor is None


def test_a_limit_past_the_root_or_beyond_sqlites_integers_is_the_whole_log(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        record_tree(store, "t", [None, 0, 1])
        whole = store.log("HEAD", thread_id="t")
        for limit in (3, 4, 2**63 - 1, 2**63, 10**40):
            page = store.log("HEAD", thread_id="t", limit=limit)
            assert page == whole and page.next_cursor is None


@pytest.mark.parametrize("limit", [0, -1, True, False, 1.5, "3", [2]])
def test_a_limit_that_is_not_a_positive_int_is_an_invalid_argument(
    store_location: str, limit: Any
) -> None:
    with agui_store.open(store_location) as store:
        record_tree(store, "t", [None, 0])
        with pytest.raises(InvalidArgumentError, match="limit must be an integer >= 1"):
            store.log("HEAD", thread_id="t", limit=limit)


@pytest.mark.parametrize("cursor", ["", 3, b"r1", ["r1"]])
def test_a_cursor_that_is_not_a_run_id_is_an_invalid_argument(
    store_location: str, cursor: Any
) -> None:
    with agui_store.open(store_location) as store:
        record_tree(store, "t", [None, 0])
        with pytest.raises(InvalidArgumentError, match="cursor= must be None or a run id"):
            store.log("HEAD", thread_id="t", limit=1, cursor=cursor)


# A cursor no backend can store (a NUL, a lone surrogate) is refused for what it holds
# (tests/contract/test_revisions.py).
@pytest.mark.parametrize("cursor", ["nosuch", "r", "HEAD", "main", "r1~1"])
def test_a_cursor_is_a_run_id_of_the_thread_not_a_revision(
    store_location: str, cursor: str
) -> None:
    with agui_store.open(store_location) as store:
        record_tree(store, "t", [None, 0])
        with pytest.raises(InvalidArgumentError, match="names no run of thread 't'"):
            store.log("HEAD", thread_id="t", limit=1, cursor=cursor)


def test_a_cursor_from_another_thread_is_refused(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        record_tree(store, "a", [None, 0, 1])
        store.append(run("b", "b0"))
        store.append(run("b", "b1", "b0"))
        cursor = store.log("b1", limit=1).next_cursor
        assert cursor == "b0"
        with pytest.raises(InvalidArgumentError, match="cursor 'b0' names no run of thread 'a'"):
            store.log("HEAD", thread_id="a", limit=1, cursor=cursor)
        # The same run id in two threads: the cursor is the ref's thread's run.
        store.append(run("b", "r1", "b1"))
        page = store.log("r2", thread_id="a", limit=5, cursor="r1")
        assert [(r.thread_id, r.run_id) for r in page] == [("a", "r1"), ("a", "r0")]


def test_a_scoped_log_pages_only_its_owners_thread(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(run("mine", "m0"), scope="alice")
        store.append(run("mine", "m1", "m0"), scope="alice")
        store.append(run("theirs", "x0"), scope="bob")
        page = store.log("HEAD", thread_id="mine", limit=1, scope="alice")
        assert store.log("HEAD", thread_id="mine", limit=1, cursor=page.next_cursor,
                         scope="alice") == store.log("m0", thread_id="mine")
        with pytest.raises(RunNotFoundError):
            store.log("HEAD", thread_id="mine", limit=1, cursor="m0", scope="bob")


# --- runs a page at a time ---------------------------------------------------------------


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parents=trees(), data=st.data())
def test_paging_through_a_threads_runs_newest_first_gives_exactly_every_run(
    new_location: Any, parents: list[int | None], data: st.DataObject
) -> None:
    with agui_store.open(new_location()) as store:
        record_tree(store, "t", parents)
        record_tree(store, "other", [None, 0])
        limit = data.draw(st.integers(1, len(parents) + 2), label="limit")
        whole = store.runs("t")
        got = [store.runs("t", limit=limit)]
        while got[-1]:
            got.append(store.runs("t", limit=limit, before=got[-1][0].run_id))
        assert [r for page in reversed(got) for r in page] == whole
        assert all(len(page) == limit for page in got[:-2])
        facts = store.thread("t")
        assert facts is not None and facts.run_count == len(whole)
        assert got[-1] == []


def test_a_runs_page_before_a_run_of_another_thread_is_an_invalid_argument(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        record_tree(store, "t", [None, 0])
        record_tree(store, "u", [None])
        with pytest.raises(InvalidArgumentError, match="names no run of thread 't'"):
            store.runs("t", limit=5, before="u-missing")
        with pytest.raises(InvalidArgumentError):
            store.runs("t", limit=0)
        assert [r.run_id for r in store.runs("t", before="r1")] == ["r0"]


def test_the_async_store_pages_the_log_too(store_location: str) -> None:
    path = store_location
    with agui_store.open(path) as store:
        record_tree(store, "t", [None, 0, 1])

    async def main() -> tuple[Log, Log]:
        async with agui_store.aio.open(path) as astore:
            first = await astore.log("HEAD", thread_id="t", limit=2)
            return first, await astore.log("HEAD", thread_id="t", cursor=first.next_cursor)

    first, rest = asyncio.run(main())
    assert [r.run_id for r in first] == ["r2", "r1"] and first.next_cursor == "r0"
    assert [r.run_id for r in rest] == ["r0"] and rest.next_cursor is None


# --- the command line ---------------------------------------------------------------------


def cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agui_store", "--db", str(db), *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"},
    )


def test_the_cli_pages_the_log_with_the_command_it_prints_for_the_next_page(
    store_location: str,
) -> None:
    db = store_location
    with agui_store.open(db) as store:
        record_tree(store, "t t", [None, 0, 1, 2, 3])
    whole = cli("log", "--thread", "t t", "--json", db=db)
    assert whole.returncode == 0 and whole.stderr == ""
    seen: list[Any] = []
    done = cli("log", "--thread", "t t", "--limit", "2", "--json", db=db)
    while True:
        assert done.returncode == 0, done.stderr
        page = json.loads(done.stdout)
        assert 1 <= len(page) <= 2
        seen += page
        if not done.stderr:
            break
        prefix = "next page: "
        assert done.stderr.startswith(prefix) and done.stderr.endswith("\n")
        words = shlex.split(done.stderr[len(prefix):])
        assert words[:3] == ["agui-store", "--db", str(db)] and "--cursor" in words
        done = cli(*words[3:], db=db)
    assert seen == json.loads(whole.stdout)


def test_the_cli_text_log_pages_and_refuses_a_limit_on_the_graph(store_location: str) -> None:
    db = store_location
    with agui_store.open(db) as store:
        record_tree(store, "t", [None, 0, 1])
    first = cli("log", "--thread", "t", "--limit", "2", db=db)
    assert [line.split()[0] for line in first.stdout.splitlines()] == ["r2", "r1"]
    assert first.stderr.endswith("--limit 2 --cursor r0\n")
    last = cli("log", "--thread", "t", "--limit", "2", "--cursor", "r0", db=db)
    assert [line.split()[0] for line in last.stdout.splitlines()] == ["r0"]
    assert last.stderr == ""
    graph = cli("log", "--thread", "t", "--graph", "--limit", "2", db=db)
    assert graph.returncode == 2
    assert "--graph draws whole run trees: it takes no --limit" in graph.stderr
    bad = cli("log", "--thread", "t", "--limit", "0", db=db)
    assert bad.returncode == 2 and "--limit: expected an integer >= 1, not 0" in bad.stderr
    other = cli("log", "--thread", "t", "--cursor", "nosuch", db=db)
    assert other.returncode == 1 and "cursor 'nosuch' names no run of thread 't'" in other.stderr

