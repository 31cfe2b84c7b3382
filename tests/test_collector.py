"""The collector pause appends take (agui_store.engine.gc_pause): shared, restoring what it
found."""

from __future__ import annotations

import contextlib
import gc
import inspect
import json
import os
import threading
from collections.abc import Iterator

import pytest

import agui_store
from agui_store.engine import gc_pause
from agui_store.errors import InvalidEventError


@pytest.fixture(autouse=True)
def collector_enabled() -> Iterator[None]:
    """Every test starts with the collector on, and leaves it as it found it."""
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def run(thread: str, run_id: str) -> list[dict]:
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run_id},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id},
    ]


@contextlib.contextmanager
def _paused_by_another_thread() -> Iterator[None]:
    """The block runs while a second thread holds a pause (released after it)."""
    entered, release = threading.Event(), threading.Event()

    def holder() -> None:
        with gc_pause.paused():
            entered.set()
            release.wait(10)

    worker = threading.Thread(target=holder)
    worker.start()
    try:
        assert entered.wait(10)
        yield
    finally:
        release.set()
        worker.join(10)


def test_the_collector_is_off_inside_a_pause_and_on_again_after() -> None:
    with gc_pause.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_nested_pause_keeps_the_collector_off_until_the_outer_one_ends() -> None:
    with gc_pause.paused():
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_application_disabled_stays_disabled() -> None:
    gc.disable()
    with gc_pause.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_pause_ended_by_an_exception_turns_the_collector_back_on() -> None:
    with pytest.raises(KeyError), gc_pause.paused():
        raise KeyError("inside the pause")
    assert gc.isenabled()


def test_overlapping_pauses_in_two_threads_end_with_the_last_one() -> None:
    entered, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:
        with gc_pause.paused():
            entered.set()
            release.wait(10)
        seen.append(gc.isenabled())

    worker = threading.Thread(target=other)
    with gc_pause.paused():
        worker.start()
        assert entered.wait(10)
    # This thread's pause ended first: the other one still holds it.
    assert not gc.isenabled()
    release.set()
    worker.join(10)
    assert seen == [True]
    assert gc.isenabled()


def test_overlapping_calls_cannot_keep_the_collector_paused_past_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A busy server's calls may overlap without end: one ending a pause older than the
    # limit runs a collection, and the pause goes on for the others.
    monkeypatch.setattr(gc_pause, "MAX_PAUSE_SECONDS", 0.0)
    collections: list[str] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(phase)

    gc.callbacks.append(count)
    try:
        with _paused_by_another_thread():
            with gc_pause.paused():
                pass
            ran = len(collections)
            still_paused = not gc.isenabled()
    finally:
        gc.callbacks.remove(count)
    assert ran >= 1 and still_paused
    assert gc.isenabled()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_another_thread_pauses_gets_its_collector_back() -> None:
    with _paused_by_another_thread():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the holding thread does not exist here
            try:
                os.write(write, b"1" if gc.isenabled() else b"0")
                with gc_pause.paused():
                    pass
                os.write(write, b"1" if gc.isenabled() else b"0")
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        answer = os.read(read, 2)
        os.close(read)
    assert answer == b"11"
    assert gc.isenabled()


@pytest.mark.parametrize("enabled", [True, False])
def test_an_append_leaves_the_collector_as_it_found_it(tmp_path, enabled: bool) -> None:
    if not enabled:
        gc.disable()
    with agui_store.open(str(tmp_path / "s.db")) as store:
        store.append(run("t", "r1"))
        assert gc.isenabled() is enabled
        with pytest.raises(InvalidEventError):
            store.append([{"type": "RUN_STARTED", "threadId": "t"}])
        assert gc.isenabled() is enabled


def test_an_import_leaves_the_collector_on(tmp_path) -> None:
    source = tmp_path / "r.jsonl"
    source.write_text("\n".join(json.dumps(e) for e in run("t", "r1")) + "\n")
    with agui_store.open(str(tmp_path / "s.db")) as store:
        assert store.import_file(source).event_count == 2
    assert gc.isenabled()


def test_no_collection_runs_while_an_append_holds_its_objects(tmp_path) -> None:
    """The reason for the pause: a long input's objects, alive during the append, would
    trigger collections (one every few hundred allocations) that walk them for nothing."""
    history = [{"id": f"m{i}", "role": "user", "content": f"message {i}"} for i in range(10_000)]
    body = json.dumps({"threadId": "t", "runId": "r1", "messages": history, "state": {}})
    started: dict[str, list[int]] = {"append": [], "decode": []}
    now: list[str] = []

    # A collection runs in the thread whose allocation triggered it: count this thread's only,
    # not those of threads that earlier tests left running (servers, executors).
    this_thread = threading.get_ident()

    def note(phase: str, info: dict) -> None:
        if phase == "start" and now and threading.get_ident() == this_thread:
            started[now[0]].append(info["generation"])

    with agui_store.open(str(tmp_path / "s.db")) as store:
        # Garbage earlier tests left (clients, event loops) is collected now: its finalizers
        # would otherwise run in the append's one collection and allocate enough for another.
        gc.collect()
        gc.callbacks.append(note)
        try:
            now[:] = ["append"]
            store.append(run("t", "r1"), input=body)
            now[:] = ["decode"]  # the control: the same objects, made without the pause
            decoded = json.loads(body)
            now[:] = []
        finally:
            gc.callbacks.remove(note)
    assert len(decoded["messages"]) == 10_000
    # Made without the pause, the input's objects trigger several collections; the append
    # (which decodes the same text, and more) triggers one young collection at most: the
    # one its allocations left due, run once the pause ends.
    assert len(started["decode"]) >= 5
    assert started["append"] in ([], [0])


def test_a_paused_method_keeps_its_name_signature_and_documentation() -> None:
    append = agui_store.Store.append
    assert append.__name__ == "append"
    assert "Record events, atomically" in (append.__doc__ or "")
    assert list(inspect.signature(append).parameters)[:2] == ["self", "events"]
