"""Ownership (docs/design/behaviour.md#live-recording): a thread belongs to the scope that
first wrote it. Every call that
names a scope treats another owner's thread, or an unowned one, as absent: reads find
nothing, writes are refused and write nothing. ``scope=None`` is the operator."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import testing
from agui_store.errors import (
    AmbiguousRunError,
    ArgumentTypeError,
    InvalidArgumentError,
    InvalidEventError,
    RunNotFoundError,
    ScopeError,
)
from tests.backends import dump
from tests.streams import run, say
from tests.zones import NoOffset


@pytest.fixture
def store(store_location: str) -> Any:
    with agui_store.open(store_location) as s:
        yield s


def _alices_thread(store: Any) -> None:
    store.append(run("t", "r1", *say("m1", "secret")), scope="alice")
    store.append(run("t", "r2", *say("m2", "more")), scope="alice")
    store.branch("b", "r1", thread_id="t", scope="alice")


#: Every reading call, on alice's thread, by thread and by run id alone.
READS = {
    "runs": lambda s, sc, t: s.runs("t", scope=sc),
    "branches": lambda s, sc, t: s.branches("t", scope=sc),
    "thread_events": lambda s, sc, t: list(s.thread_events("t", scope=sc)),
    "events": lambda s, sc, t: s.events("r2", scope=sc, **t),
    "input": lambda s, sc, t: s.input("r2", scope=sc, **t),
    "history": lambda s, sc, t: s.history("r2", scope=sc, **t),
    "log": lambda s, sc, t: s.log("r2", scope=sc, **t),
    "checkout": lambda s, sc, t: s.checkout("r2", scope=sc, **t),
    "checkout HEAD": lambda s, sc, t: s.checkout("HEAD", scope=sc, **t),
    "checkout a branch": lambda s, sc, t: s.checkout("b", scope=sc, **t),
    "checkout a prefix~1": lambda s, sc, t: s.checkout("r2~1", scope=sc, **t),
    "compacted": lambda s, sc, t: s.reconnect_stream("r2", scope=sc, **t),
    "fork": lambda s, sc, t: s.fork("r2", run_id="next", scope=sc, **t),
    "diff": lambda s, sc, t: s.diff("r1", "r2", scope=sc, **t),
    "merge_base": lambda s, sc, t: s.merge_base("r1", "r2", scope=sc, **t),
    "is_ancestor": lambda s, sc, t: s.is_ancestor("r1", "r2", scope=sc, **t),
}


@pytest.mark.parametrize("name", list(READS))
@pytest.mark.parametrize("by_thread", [True, False], ids=["with-thread", "run-id-alone"])
def test_another_owner_reads_nothing_of_a_thread(store: Any, name: str, by_thread: bool) -> None:
    _alices_thread(store)
    thread = {"thread_id": "t"} if by_thread else {}
    read = READS[name]
    assert read(store, "alice", thread) == read(store, None, thread)  # the owner, the operator
    # As in a store without the thread: HEAD alone then names no thread at all.
    absent = AmbiguousRunError if name == "checkout HEAD" and not by_thread else RunNotFoundError
    with pytest.raises(absent):
        read(store, "bob", thread)


def test_another_owner_finds_no_thread_and_no_run(store: Any) -> None:
    _alices_thread(store)
    assert store.threads(scope="alice") == ["t"] == store.threads()
    assert store.threads(scope="bob") == []
    assert store.get_run("r1", scope="bob") is None
    assert store.get_run("r1", thread_id="t", scope="bob") is None
    assert store.get_run("r1", scope="alice").thread_id == "t"


def test_another_owner_writes_nothing_into_a_thread(store: Any, store_location: str) -> None:
    _alices_thread(store)
    store.append(run("t", "open", finish=False), scope="alice")
    before = dump(store_location)
    with pytest.raises(ScopeError, match="thread 't' belongs to another owner"):
        store.append(run("t", "r3", *say("m3", "hijack")), scope="bob")
    with pytest.raises(ScopeError):
        store.append([{"type": "RUN_ERROR", "message": "x"}], thread_id="t", scope="bob")
    with pytest.raises(ScopeError):
        store.append(
            [{"type": "RUN_ERROR", "message": "x"}], thread_id="t", run_id="open", scope="bob"
        )
    with pytest.raises(RunNotFoundError):  # the run id alone finds nothing of alice's
        store.append([{"type": "RUN_ERROR", "message": "x"}], run_id="open", scope="bob")
    with pytest.raises(InvalidEventError, match="no thread has an open run"):
        store.append([{"type": "RUN_ERROR", "message": "x"}], scope="bob")
    with pytest.raises(RunNotFoundError):
        store.branch("mine", "r1", thread_id="t", scope="bob")
    with pytest.raises(RunNotFoundError):
        store.branch("mine", "r1", scope="bob")
    with pytest.raises(RunNotFoundError):
        store.delete_branch("b", thread_id="t", scope="bob")
    with pytest.raises(RunNotFoundError):
        store.compact("r1", scope="bob")
    with pytest.raises(RunNotFoundError):
        store.compact(thread_id="t", scope="bob")
    with pytest.raises(RunNotFoundError):
        store.derive("t", scope="bob")
    assert store.compact(scope="bob") == 0 and store.derive(scope="bob") == 0
    assert dump(store_location) == before
    # Nothing of it is a failure to record for alice, whose pieces land as before.
    store.append([{"type": "RUN_ERROR", "message": "x"}], run_id="open", scope="alice")
    assert store.get_run("open").status == "error"


def test_a_thread_written_without_a_scope_is_no_scopes_to_read_or_take(
    store: Any, store_location: str
) -> None:
    """An unowned thread (the operator's, or recorded before ownership existed) is not
    visible to a scoped call: a scoped request can never read or hijack it."""
    store.append(run("t", "r1", *say("m1", "operator")))
    before = dump(store_location)
    assert store.threads(scope="alice") == []
    assert store.get_run("r1", scope="alice") is None
    with pytest.raises(RunNotFoundError):
        store.checkout("HEAD", thread_id="t", scope="alice")
    with pytest.raises(ScopeError):
        store.append(run("t", "r2"), scope="alice")
    assert dump(store_location) == before
    assert store.threads() == ["t"]


def test_the_operator_reads_and_writes_every_thread_and_the_owner_stays(store: Any) -> None:
    _alices_thread(store)
    store.append(run("t", "r3", *say("m3", "by the operator")))
    assert [r.run_id for r in store.runs("t", scope="alice")] == ["r1", "r2", "r3"]
    store.append(run("t", "r4"), scope="alice")  # still alice's
    assert testing.connection(store).execute("SELECT owner FROM threads").fetchall() == [("alice",)]


def test_a_run_id_alone_resolves_among_the_scopes_own_threads(store: Any) -> None:
    store.append(run("a", "same", *say("m1", "alice's")), scope="alice")
    store.append(run("b", "same", *say("m2", "bob's")), scope="bob")
    assert store.checkout("same", scope="alice").messages[0]["content"] == "alice's"
    assert store.checkout("same", scope="bob").messages[0]["content"] == "bob's"
    assert store.checkout("HEAD", scope="bob").run.thread_id == "b"
    assert store.checkout("sa", scope="bob").run.thread_id == "b"  # a unique prefix, for bob
    with pytest.raises(AmbiguousRunError, match=r"several threads \('a', 'b'\)"):
        store.checkout("same")  # the operator sees both
    # A scope's ambiguity names its own threads only.
    store.append(run("c", "same"), scope="bob")
    with pytest.raises(AmbiguousRunError) as e:
        store.checkout("same", scope="bob")
    assert "'a'" not in str(e.value) and "'b'" in str(e.value) and "'c'" in str(e.value)


def test_lineage_never_crosses_into_another_owners_thread(store: Any) -> None:
    store.append(run("a", "base", *say("m1", "alice's")), scope="alice")
    sent = [*store.checkout("base").messages, {"id": "u", "role": "user", "content": "?"}]
    body = {"threadId": "b", "runId": "next", "tools": [], "context": [], "messages": sent}
    store.append(run("b", "next", parentRunId="base"), input=body, scope="bob")
    got = store.get_run("next", scope="bob")
    assert (got.parent_run_id, got.lineage, got.sent_parent_run_id) == (None, "root", "base")
    with pytest.raises(RunNotFoundError):
        store.append(run("b", "again"), parent="base", scope="bob")


def test_a_scope_is_an_owners_name_or_none(store: Any) -> None:
    for bad, error in (("", InvalidArgumentError), (7, TypeError), (b"alice", TypeError)):
        with pytest.raises(error, match="scope must be None"):
            store.append(run("t", "r1"), scope=bad)
        with pytest.raises(error, match="scope must be None"):
            store.threads(scope=bad)
        with pytest.raises(error, match="scope must be None"):
            store.get_run("r1", scope=bad)
        with pytest.raises(error, match="scope must be None"):
            store.delete_owner(bad)
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        store.append(run("t", "r1"), scope="\ud800")
    assert store.threads() == []


def test_a_huge_scope_thread_id_cursor_or_diff_mode_is_named_cut_short(store: Any) -> None:
    store.append(run("t", "r1"))
    huge, also_huge = "x" * 100_000, b"y" * 100_000
    calls: list[tuple[str, Any]] = [
        ("mode", lambda: store.diff("r1", "r1", mode=huge)),
        ("scope", lambda: store.threads(scope=also_huge)),
        ("after=", lambda: store.threads(after=also_huge)),
        ("thread_id", lambda: store.record([], thread_id=also_huge)),
    ]
    for named, call in calls:
        with pytest.raises(InvalidArgumentError, match=named) as e:
            call()
        message = str(e.value)
        assert len(message) < 300 and "(100000 characters)" in message, message[:300]
    assert store.threads() == ["t"]


@pytest.mark.parametrize("value", [None, "no", 0, 1])
def test_every_yes_or_no_option_refuses_what_is_not_a_bool_and_changes_nothing(
    store: Any, store_location: str, tmp_path: Any, value: Any
) -> None:
    # Read by its truthiness, "no" would force, move or replace: each says so instead.
    from agui_store.exports.analysis import export_sqlite

    store.append(run("t", "r1"))
    store.append(run("t", "r2", parentRunId="r1"))
    store.branch("idea", "r1", thread_id="t")
    before = dump(store_location)
    events = tmp_path / "events.jsonl"
    events.write_text("")
    calls: list[tuple[str, Any]] = [
        ("move", lambda: store.branch("idea", "r2", thread_id="t", move=value)),
        ("force", lambda: store.rename_branch("idea", "main2", thread_id="t", force=value)),
        ("recent_first", lambda: store.threads(recent_first=value)),
        ("check_sequence", lambda: store.append(run("t", "r3"), check_sequence=value)),
        ("check_sequence", lambda: store.import_file(events, check_sequence=value)),
        ("force", lambda: agui_store.copy(store_location, tmp_path / "c.db", force=value)),
        ("replace", lambda: export_sqlite(store, tmp_path / "a.db", replace=value)),
        ("event_counts", lambda: export_sqlite(store, tmp_path / "a.db", event_counts=value)),
        ("derive_on_append", lambda: agui_store.open(store_location, derive_on_append=value)),
    ]
    for named, call in calls:
        with pytest.raises(ArgumentTypeError, match=f"{named}= must be True or False"):
            call()
    assert dump(store_location) == before
    assert not (tmp_path / "c.db").exists() and not (tmp_path / "a.db").exists()


def test_a_paging_argument_of_another_type_is_a_type_error_and_a_store_error(
    store: Any,
) -> None:
    store.append(run("t", "r1"))
    calls = [
        lambda: store.threads(after=5),
        lambda: store.events("r1", thread_id="t", after="5"),
        lambda: store.runs("t", before=5),
        lambda: store.log("r1", thread_id="t", cursor=5),
    ]
    for call in calls:
        with pytest.raises(ArgumentTypeError) as refused:
            call()
        assert isinstance(refused.value, TypeError) and "5" in str(refused.value)


def test_a_scope_of_another_type_is_a_type_error_and_a_store_error_in_every_read(
    store: Any,
) -> None:
    store.append(run("t", "r1"))
    reads: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("checkout", ("r1",), {}), ("log", ("r1",), {}), ("events", ("r1",), {}),
        ("diff", ("r1", "r1"), {}), ("fork", ("r1",), {}), ("merge_base", ("r1", "r1"), {}),
        ("is_ancestor", ("r1", "r1"), {}), ("input", ("r1",), {}), ("history", ("r1",), {}),
        ("search", ("r1",), {}), ("threads", (), {}), ("get_run", ("r1",), {}),
    ]
    for verb, args, kwargs in reads:
        # Checked inside a read transaction, it was taken for a bug (an InternalError).
        with pytest.raises(InvalidArgumentError, match="scope must be None") as e:
            getattr(store, verb)(*args, **kwargs, scope=7)
        assert isinstance(e.value, TypeError), verb


def test_a_scope_no_store_can_hold_is_an_argument_error_naming_the_scope(store: Any) -> None:
    store.append(run("t", "r1"), scope="alice")
    for bad in ("a\x00b", "\ud800"):
        for verb, args, kwargs in (
            ("delete_owner", (bad,), {}),
            ("delete_owner", (bad,), {"dry_run": True}),
            ("threads", (), {"scope": bad}),
            ("delete_thread", ("t",), {"scope": bad}),
        ):
            with pytest.raises(InvalidArgumentError, match=r"^scope '.*' holds a") as e:
                getattr(store, verb)(*args, **kwargs)
            assert not isinstance(e.value, InvalidEventError)
    assert store.threads(scope="alice") == ["t"]


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(2, 7),
    size=st.integers(1, 3),
    between=st.lists(
        st.lists(st.tuples(st.sampled_from(["write", "erase"]), st.integers(0, 6)), max_size=3),
        max_size=7,
    ),
)
def test_pages_of_threads_list_none_twice_and_skip_none_that_stayed_however_others_move(
    new_location: Any, count: int, size: int, between: list[list[tuple[str, int]]]
) -> None:
    """A page after the last thread of the one before, as it was listed (its id and
    ``updated_at``): writes and erasures between the pages move threads to the top or take
    them out, and no thread is listed twice, nor one left out that neither moved."""
    import time

    with agui_store.open(new_location()) as store:
        for i in range(count):
            store.append(run(f"t{i}", f"t{i}-r0", *say(f"t{i}-m0", "hi")))
            time.sleep(0.002)  # a batch's time is its millisecond
        listed: list[str] = []
        moved: set[str] = set()
        page = store.threads(recent_first=True)[:size]
        for n in range(count + len(between)):
            listed += page
            if not page:
                break
            last = store.thread(page[-1])
            assert last is not None
            for verb, i in between[n] if n < len(between) else []:
                thread = f"t{i % count}"
                if thread in moved or store.thread(thread) is None:
                    continue
                moved.add(thread)
                if verb == "write":
                    store.append(run(thread, f"{thread}-w{n}", *say(f"{thread}-w{n}", "again")))
                    time.sleep(0.002)
                else:
                    store.delete_thread(thread)
            page = store.threads(
                recent_first=True, after=last.thread_id, after_updated_at=last.updated_at
            )[:size]
        assert len(listed) == len(set(listed))
        assert {f"t{i}" for i in range(count)} - moved <= set(listed)


def test_an_after_updated_at_that_is_not_a_datetime_is_refused_for_its_type_first(
    store: Any,
) -> None:
    store.append(run("t", "r1"))
    for others in ({}, {"after": "t"}, {"after": "t", "recent_first": True}):
        with pytest.raises(TypeError, match="after_updated_at= must be a datetime, not a str"):
            store.threads(after_updated_at="2020-01-01", **others)


def test_a_page_after_an_erased_thread_reads_a_time_whose_zone_gives_no_offset_as_utc(
    store: Any,
) -> None:
    import time

    store.append(run("a", "a1", *say("a-m1", "hi")))
    time.sleep(0.002)  # a batch's time is its millisecond
    store.append(run("b", "b1", *say("b-m1", "hi")))
    at = store.thread("b").updated_at
    store.delete_thread("b")
    naive = at.astimezone(datetime.timezone.utc).replace(tzinfo=NoOffset())
    assert store.threads(recent_first=True, after="b", after_updated_at=naive) == ["a"]


def test_a_page_of_threads_after_one_that_is_gone_needs_its_time_and_bad_cursors_are_refused(
    store: Any,
) -> None:
    store.append(run("a", "a1", *say("a-m1", "hi")), scope="alice")
    store.append(run("b", "b1", *say("b-m1", "hi")), scope="bob")
    at = store.thread("a").updated_at
    assert store.threads(after="a") == ["b"]  # in recorded order too
    store.delete_thread("a")
    with pytest.raises(RunNotFoundError, match="no such thread"):
        store.threads(recent_first=True, after="a")
    assert store.threads(recent_first=True, after="a", after_updated_at=at) == []
    with pytest.raises(RunNotFoundError):  # bob's thread is not alice's to page after
        store.threads(recent_first=True, after="b", scope="alice")
    for wrong in (
        {"after_updated_at": at},
        {"after": "b", "after_updated_at": at},
        {"recent_first": True, "after": "b", "after_updated_at": "yesterday"},
        {"after": ""},
        {"after": 3},
    ):
        with pytest.raises(InvalidArgumentError):
            store.threads(**wrong)


OWNERS = st.sampled_from([None, "alice", "bob"])


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(st.tuples(OWNERS, st.sampled_from(["t", "u", "v"])), min_size=1, max_size=8)
)
def test_a_scope_sees_exactly_the_threads_it_created_as_the_operator_sees_them(
    new_location: Any, writes: list[tuple[str | None, str]]
) -> None:
    owner_of: dict[str, str | None] = {}
    with agui_store.open(new_location()) as store:
        for n, (owner, thread) in enumerate(writes):
            first = thread not in owner_of
            allowed = first or owner is None or owner_of[thread] == owner
            try:
                store.append(run(thread, f"r{n}", *say(f"m{n}", "x")), scope=owner)
            except ScopeError:
                assert not allowed
            else:
                assert allowed
                owner_of.setdefault(thread, owner)
        for scope in ("alice", "bob"):
            mine = [t for t in store.threads() if owner_of[t] == scope]
            assert store.threads(scope=scope) == mine
            for thread in owner_of:
                if thread in mine:
                    assert store.runs(thread, scope=scope) == store.runs(thread)
                    co = store.checkout("HEAD", thread_id=thread, scope=scope)
                    want = store.checkout("HEAD", thread_id=thread)
                    assert (co.messages, co.state) == (want.messages, want.state)
                else:
                    with pytest.raises(RunNotFoundError):
                        store.runs(thread, scope=scope)
                    assert store.get_run("HEAD", thread_id=thread, scope=scope) is None


def test_a_thread_names_its_owner_and_run_count_and_is_absent_to_another_scope(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        for run_id in ("a1", "a2"):
            store.append(
                [{"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
                 {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id}],
                scope="alice",
            )
        found = store.thread("t", scope="alice")
        assert found is not None
        assert (found.thread_id, found.owner, found.run_count) == ("t", "alice", 2)
        assert found.created_at == store.runs("t")[0].created_at
        assert store.thread("t") == found
        assert store.thread("t", scope="bob") is None
        assert store.thread("missing") is None


def test_threads_recent_first_lists_the_thread_written_to_last_first_of_a_scope(
    store: Any,
) -> None:
    import time

    for thread in ("a", "b", "c"):
        store.append(run(thread, f"{thread}1", *say(f"{thread}-m1", "hi")), scope="alice")
        time.sleep(0.002)  # a batch's time is its millisecond
    store.append(run("d", "d1", *say("d-m1", "hi")), scope="bob")
    time.sleep(0.002)
    store.append(run("a", "a2", *say("a-m2", "again")), scope="alice")  # a is active again
    assert store.threads() == ["a", "b", "c", "d"]  # as recorded
    assert store.threads(recent_first=True) == ["a", "d", "c", "b"]
    assert store.threads(scope="alice", recent_first=True) == ["a", "c", "b"]
    assert store.threads(scope="carol", recent_first=True) == []
