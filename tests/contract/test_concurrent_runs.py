"""Several runs of one thread streaming at once (docs/design/behaviour.md#live-recording):
``append(..., run_id=)`` names the
open run a batch continues; an unnamed batch is refused when the run it would continue is
ambiguous. Everything on real SQLite files."""

from __future__ import annotations

from typing import Any

import pytest

import agui_store
from agui_store import testing
from agui_store.errors import (
    AmbiguousRunError,
    InvalidEventError,
    OpenRunsError,
    RunNotFoundError,
    SequenceError,
)
from tests.backends import checked, dump
from tests.streams import run, say


@pytest.fixture
def store(store_location: str) -> Any:
    with agui_store.open(store_location) as s:
        yield s


def _open_two_runs(store: Any) -> None:
    store.append(run("t", "r0", *say("m0", "before")))
    store.append(run("t", "a", {"type": "TEXT_MESSAGE_START", "messageId": "ma"}, finish=False))
    store.append(run("t", "b", {"type": "TEXT_MESSAGE_START", "messageId": "mb"}, finish=False))


def _piece(message_id: str, text: str) -> list[dict[str, Any]]:
    return [{"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text}]


def _end(message_id: str, run_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
    ]


def test_interleaved_pieces_of_two_open_runs_are_recorded_apart(store: Any) -> None:
    _open_two_runs(store)
    store.append(_piece("ma", "a1"), run_id="a")
    store.append(_piece("mb", "b1"), thread_id="t", run_id="b")
    store.append(_piece("ma", "a2"), thread_id="t", run_id="a")
    store.append(_end("mb", "b"), run_id="b")
    store.append(_piece("ma", "a3"), run_id="a")
    store.append(_end("ma", "a"), run_id="a")
    assert [e.get("delta") for e in store.events("a") if "delta" in e] == ["a1", "a2", "a3"]
    assert [e.get("delta") for e in store.events("b") if "delta" in e] == ["b1"]
    assert store.checkout("a").messages[-1] == {
        "id": "ma",
        "role": "assistant",
        "content": "a1a2a3",
    }
    assert store.checkout("b").messages[-1] == {"id": "mb", "role": "assistant", "content": "b1"}
    assert [(r.run_id, r.status) for r in store.runs("t")] == [
        ("r0", "finished"),
        ("a", "finished"),
        ("b", "finished"),
    ]
    assert checked(store)


def test_each_run_is_sequence_checked_against_its_own_events(store: Any) -> None:
    _open_two_runs(store)
    # "mb" was started in run b, not in run a: for run a it is an unknown message.
    with pytest.raises(SequenceError) as e:
        store.append(_piece("mb", "x"), run_id="a")
    assert e.value.index == 0
    store.append(_piece("mb", "x"), run_id="b")  # the same piece is legal in its own run


def test_an_unnamed_piece_is_refused_naming_the_open_runs_and_writes_nothing(
    store: Any, store_location: str
) -> None:
    _open_two_runs(store)
    before = dump(store_location)
    with pytest.raises(OpenRunsError) as e:
        store.append(_piece("mb", "x"), thread_id="t")
    assert e.value.run_ids == ("a", "b") and e.value.thread_id == "t"
    assert "'a', 'b'" in str(e.value) and "run_id=" in str(e.value)
    assert isinstance(e.value, AmbiguousRunError) and isinstance(e.value, LookupError)
    assert dump(store_location) == before
    # Once one of them has ended, an unnamed piece continues the newest run, as before.
    store.append(_end("ma", "a"), run_id="a")
    store.append(_piece("mb", "y"), thread_id="t")
    assert store.checkout("b").messages[-1]["content"] == "y"


def test_an_unnamed_piece_continues_the_newest_run_when_only_that_one_is_open(
    store: Any,
) -> None:
    store.append(run("t", "r1", *say("m1", "done")))
    store.append(run("t", "r2", {"type": "TEXT_MESSAGE_START", "messageId": "m2"}, finish=False))
    store.append(_piece("m2", "live"))  # no thread, no run: the one open run of the store
    assert store.checkout("r2").messages[-1]["content"] == "live"


def test_a_run_named_without_its_thread_finds_it_while_unambiguous(store: Any) -> None:
    store.append(run("t", "x", {"type": "TEXT_MESSAGE_START", "messageId": "m"}, finish=False))
    store.append(run("u", "y", {"type": "TEXT_MESSAGE_START", "messageId": "n"}, finish=False))
    result = store.append(_piece("m", "hi"), run_id="x")
    assert (result.thread_id, result.run_ids) == ("t", ("x",))
    store.append(run("u", "x", finish=False))
    with pytest.raises(AmbiguousRunError, match=r"several threads \('t', 'u'\): pass thread_id="):
        store.append(_piece("m", "again"), run_id="x")
    store.append(_piece("m", "again"), run_id="x", thread_id="t")
    assert store.checkout("x", thread_id="t").messages[-1]["content"] == "hiagain"


def test_a_named_run_that_does_not_exist_is_refused_and_nothing_is_written(
    store: Any, store_location: str
) -> None:
    _open_two_runs(store)
    before = dump(store_location)
    with pytest.raises(RunNotFoundError, match=r"no run 'c' in thread 't' to continue"):
        store.append(_piece("ma", "x"), thread_id="t", run_id="c")
    with pytest.raises(RunNotFoundError, match=r"no run 'c' to continue"):
        store.append(_piece("ma", "x"), run_id="c")
    # Not in a thread that does not exist either: the thread is not created.
    with pytest.raises(RunNotFoundError, match=r"no run 'a' in thread 'new'"):
        store.append(_piece("ma", "x"), thread_id="new", run_id="a")
    assert dump(store_location) == before
    assert store.threads() == ["t"]


def test_a_complete_named_run_takes_only_what_a_complete_run_takes(store: Any) -> None:
    _open_two_runs(store)
    store.append(_end("ma", "a"), run_id="a")
    with pytest.raises(SequenceError):
        store.append(_piece("ma", "late"), run_id="a")
    # A late RUN_ERROR after RUN_FINISHED belongs to that run, named or newest.
    store.append([{"type": "RUN_ERROR", "message": "late"}], run_id="a")
    assert store.get_run("a").status == "error"
    assert store.get_run("b").status == "incomplete"


def test_a_batch_that_starts_a_run_may_name_it_but_not_another(
    store: Any, store_location: str
) -> None:
    store.append(run("t", "r1", finish=False), run_id="r1")
    assert store.get_run("r1").status == "incomplete"
    before = dump(store_location)
    with pytest.raises(InvalidEventError) as e:
        store.append(run("t", "r2"), run_id="r1")
    assert (e.value.index, e.value.event_type, e.value.path) == (0, "RUN_STARTED", "$.runId")
    assert "starts run 'r2' but names run_id='r1'" in str(e.value)
    for bad in ("", 7):
        with pytest.raises(InvalidEventError, match="run_id: must be a run id"):
            store.append(_piece("m", "x"), run_id=bad)
    assert dump(store_location) == before


def test_a_named_piece_that_ends_one_run_and_starts_the_next_splits_there(store: Any) -> None:
    _open_two_runs(store)
    result = store.append(
        [*_end("ma", "a"), *run("t", "c", *say("mc", "next"))], run_id="a"
    )
    assert result.run_ids == ("a", "c") and result.new_run_ids == ("c",)
    assert store.get_run("a").status == "finished"
    assert store.get_run("b").status == "incomplete"


def test_continuing_an_open_run_below_which_runs_were_placed_derives_them_again(
    store: Any,
) -> None:
    """Lineage rule 4 takes the head, open or not: a run placed below an open run derived
    its view from what that run held then; once the open run grows, checkout of the run
    below it follows (its checkpoint is dropped, and derived again)."""
    store.append(run("t", "a", {"type": "TEXT_MESSAGE_START", "messageId": "ma"}, finish=False))
    store.append(run("t", "b", *say("mb", "below")))
    assert store.get_run("b").parent_run_id == "a"
    store.append(_piece("ma", "grown"), run_id="a")
    for rid in ("a", "b"):
        co = store.checkout(rid)
        assert co.messages == testing.replayed_view(store, rid).messages
    assert store.checkout("b").messages[0]["content"] == "grown"
    store.append(run("t", "c", *say("mc", "after")))  # derives b again on the way
    assert store.checkout("c").messages[0]["content"] == "grown"
    assert checked(store)


def test_two_stores_on_one_file_stream_two_runs_of_a_thread(store_location: str) -> None:
    """What each store remembers between appends is per run, and given up when the other
    wrote: the interleaved pieces land where they are named."""
    with agui_store.open(store_location) as one, agui_store.open(store_location) as two:
        one.append(run("t", "a", {"type": "TEXT_MESSAGE_START", "messageId": "ma"}, finish=False))
        two.append(run("t", "b", {"type": "TEXT_MESSAGE_START", "messageId": "mb"}, finish=False))
        for i in range(3):
            one.append(_piece("ma", f"a{i}"), run_id="a")
            two.append(_piece("mb", f"b{i}"), run_id="b")
        with pytest.raises(OpenRunsError):
            one.append(_piece("ma", "x"), thread_id="t")
        one.append(_end("ma", "a"), run_id="a")
        two.append(_end("mb", "b"), run_id="b")
        assert one.checkout("a").messages[-1]["content"] == "a0a1a2"
        assert two.checkout("b").messages[-1]["content"] == "b0b1b2"
        assert checked(one)


def test_an_input_below_a_run_still_streaming_is_not_stored_by_reference(store: Any) -> None:
    """A run's input is stored as references into its parent's view only once that view is
    final: a run above it that is still open (and continued by name) would change it."""
    store.append(run("t", "a", {"type": "TEXT_MESSAGE_START", "messageId": "ma"}, finish=False))
    store.append(run("t", "b", *say("mb", "below")))  # lineage rule 4: below the open run
    sent = [*store.checkout("b").messages, {"id": "u", "role": "user", "content": "next"}]
    body = {"threadId": "t", "runId": "c", "tools": [], "context": [], "messages": sent}
    store.append(run("t", "c", *say("mc", "reply")), input=body)
    assert store.get_run("c").parent_run_id == "b"
    store.append(_piece("ma", "grown"), run_id="a")  # b's view changes under c's input
    assert store.input("c") == body
    assert store.checkout("c").messages == testing.replayed_view(store, "c").messages
    assert checked(store)


def test_an_open_run_left_underived_above_completes_once_derived(store: Any) -> None:
    """Events after a complete run's end (check_sequence=False), named to it, leave the open
    run below it underived too; when that run completes it is derived once, from its own
    events."""
    store.append(run("t", "x", *say("mx", "done")))
    store.append(run("t", "y", {"type": "TEXT_MESSAGE_START", "messageId": "my"}, finish=False))
    store.append(
        [{"type": "TEXT_MESSAGE_START", "messageId": "late"}], run_id="x", check_sequence=False
    )
    store.append(_end("my", "y"), run_id="y")
    for rid in ("x", "y"):
        assert store.checkout(rid).messages == testing.replayed_view(store, rid).messages
    assert [m["id"] for m in store.checkout("y").messages] == ["mx", "late", "my"]
    assert checked(store)
