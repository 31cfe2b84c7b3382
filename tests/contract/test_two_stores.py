"""Two stores open on one database, taking turns: what one remembers of a thread (its
newest run, the next sequence number, its branches, a live run, a view) holds only while the
other has written nothing; a write by the other, even one that wrote nothing, must not be
taken for its own. Many writer processes at once are each backend's own
(tests/test_concurrency.py, tests/test_postgres_store.py)."""

from __future__ import annotations

from typing import Any

import pytest

import agui_store
from agui_store import testing
from tests.backends import checked
from tests.streams import run, say


def one_run(run_id: str) -> list[dict[str, Any]]:
    return run("t", run_id)


def test_two_stores_take_turns_without_trusting_stale_facts(store_location: str) -> None:
    """Each append remembers the thread's newest run, the next sequence number and whether
    the thread has branches while nobody else wrote; a write by another connection (even a
    branch) must make it look again."""
    with agui_store.open(store_location) as a, agui_store.open(store_location) as b:
        a.append(one_run("a1"))
        b.append(one_run("b1"))  # a's newest run and next seq are stale now
        a.append(one_run("a2"))
        b.branch("feature", "a2", thread_id="t")  # a has seen no branch in this thread
        a.append(one_run("a3"))
        assert [r.run_id for r in a.log("a3", thread_id="t")] == ["a3", "a2", "b1", "a1"]
        assert {br.name: br.run_id for br in a.branches("t")}["feature"] == "a3"
        db = testing.connection(a)
        seqs = [row[0] for row in db.execute("SELECT seq FROM events ORDER BY seq")]
        assert seqs == list(range(1, 9))
        assert checked(a)


def test_a_live_run_another_store_ended_or_joined_is_seen_by_the_next_streamed_append(
    store_location: str,
) -> None:
    """A store streaming a live run remembers the run's status, its last sequence number
    and which threads have an open run; another writer's append must make it look again."""
    start = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r1"}]
    text = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    with agui_store.open(store_location) as a, agui_store.open(store_location) as b:
        a.append(start)
        a.append([text])  # no thread named: t's run is the only open one
        # b opens a run in another thread: a batch naming no thread is now ambiguous.
        b.append([{"type": "RUN_STARTED", "threadId": "u", "runId": "u1"}])
        with pytest.raises(agui_store.InvalidEventError, match="several threads have open runs"):
            a.append([{"type": "TEXT_MESSAGE_END", "messageId": "m"}])
        # b ends t's run: a's next event for it breaks the sequence rules, from b's state.
        b.append(
            [
                {"type": "TEXT_MESSAGE_END", "messageId": "m"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
            ],
            thread_id="t",
        )
        with pytest.raises(agui_store.InvalidEventError):
            a.append(
                [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}], thread_id="t"
            )
        finished = a.get_run("r1", thread_id="t")
        assert finished is not None and finished.status == "finished"
        # Only u's run is open now, so a batch naming no thread goes there.
        result = a.append([{"type": "RUN_FINISHED", "threadId": "u", "runId": "u1"}])
        assert result.thread_id == "u"
        assert checked(a)


def test_a_write_that_wrote_nothing_does_not_make_another_stores_next_write_look_like_its_own(
    store_location: str,
) -> None:
    """A store trusts what it remembers while the database says its own last commit was the
    last one; a call that committed nothing must not claim the next one."""
    with agui_store.open(store_location) as a, agui_store.open(store_location) as b:
        a.append(one_run("a1"))
        a.append([])  # commits nothing
        a.derive()  # nothing to derive: commits nothing either
        b.append(one_run("b1"))  # the one write a must notice
        a.append(one_run("a2"))
        assert [r.run_id for r in a.log("a2", thread_id="t")] == ["a2", "b1", "a1"]
        assert checked(a)


def test_a_view_another_store_changed_is_not_reused_from_memory(store_location: str) -> None:
    """Events recorded after a run's end (check_sequence=False) change its view; a store
    that kept that view in memory must not build the next run's checkpoint on it, nor
    decide lineage rule 3 from it."""
    with agui_store.open(store_location) as a, agui_store.open(store_location) as b:
        a.append(run("t", "r1", *say("m-r1", "one", "assistant")))  # a keeps r1's view
        b.append(
            [
                {"type": "TEXT_MESSAGE_START", "messageId": "late", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "late", "delta": "after the end"},
            ],
            thread_id="t",
            check_sequence=False,
        )
        a.append(run("t", "r2", *say("m-r2", "two", "assistant")))
        pk = testing.connection(a).execute("SELECT id FROM runs WHERE run_id = 'r2'").fetchone()[0]
        view = a.checkout("r2", thread_id="t").messages
        assert view == testing.replayed_view(a, pk).messages
        assert [m["id"] for m in view] == ["m-r1", "late", "m-r2"]
        # Lineage rule 3 compares digests of what each run's view holds: r2's own is that of
        # the view with the late message, so a client resending it continues from r2.
        a.append(
            run("t", "r3", *say("m-r3", "three", "assistant")),
            input={
                "threadId": "t",
                "runId": "r3",
                "state": {},
                "messages": view,
                "tools": [],
                "context": [],
                "forwardedProps": {},
            },
        )
        r3 = a.get_run("r3", thread_id="t")
        assert r3 is not None and r3.parent_run_id == "r2"


def texts(store: agui_store.Store, run_id: str) -> list[tuple[str, Any]]:
    return [(m["id"], m.get("content")) for m in store.checkout(run_id, thread_id="t").messages]


def test_a_view_one_store_built_over_a_live_run_another_store_ended_is_not_built_on(
    store_location: str,
) -> None:
    """A run that completes while the run below it is still streaming is derived from what
    that run held then; when the other writer's events end it, what was derived is dropped
    and derived again. The first store's view in memory must not be taken for the new one,
    though the same message ids stand in both."""
    with agui_store.open(store_location) as a, agui_store.open(store_location) as b:
        a.append(run("t", "a", *say("a-q", "first", "user")))
        b.append(run("t", "p", {"type": "TEXT_MESSAGE_START", "messageId": "pm",
                                "role": "assistant"}, finish=False))
        a.append(run("t", "c", *say("c-q", "under the live run", "user")))
        b.append(
            [
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "pm", "delta": "late text"},
                {"type": "TEXT_MESSAGE_END", "messageId": "pm"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "p"},
            ],
            thread_id="t",
            run_id="p",
        )
        a.append(run("t", "d", *say("d-q", "after it", "user")))
        assert [r.parent_run_id for r in a.runs("t")] == [None, "a", "p", "c"]
        assert texts(a, "d") == [
            ("a-q", "first"), ("pm", "late text"), ("c-q", "under the live run"),
            ("d-q", "after it"),
        ]
        assert checked(a)


def test_a_view_one_store_built_is_not_built_on_after_another_store_continued_a_run_below_it(
    store_location: str,
) -> None:
    """Events recorded after a run's end (sequence checks off) drop what derives from it;
    another store may derive it again before the first store's next append, which must
    then not continue its view of before."""
    with agui_store.open(store_location) as a, agui_store.open(store_location) as b:
        a.append(run("t", "a", *say("m", "first", "assistant")))
        a.append(run("t", "c", *say("c-q", "second", "user")))
        b.append(
            [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": " and more"}],
            thread_id="t",
            run_id="a",
            check_sequence=False,
        )
        b.compact()  # derives again what the late event dropped
        a.append(run("t", "d", *say("d-q", "third", "user")))
        assert texts(a, "d") == [
            ("m", "first and more"), ("c-q", "second"), ("d-q", "third"),
        ]
        assert checked(a)


@pytest.mark.parametrize("busy_timeout_ms", [2**31, 2**40])
def test_a_busy_timeout_longer_than_the_database_can_wait_is_refused_naming_the_option(
    store_location: str, busy_timeout_ms: int
) -> None:
    with pytest.raises(agui_store.InvalidArgumentError) as caught:
        agui_store.open(store_location, busy_timeout_ms=busy_timeout_ms)
    assert str(caught.value).startswith(
        f"busy_timeout_ms must be at most 2147483647, not {busy_timeout_ms} (some 24 days"
    )
    with agui_store.open(store_location, busy_timeout_ms=2**31 - 1) as store:
        store.append(one_run("r1"))
        assert [r.run_id for r in store.runs("t")] == ["r1"]
