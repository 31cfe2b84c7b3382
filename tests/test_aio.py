"""The async store: every public ``Store`` method as a coroutine run off the event loop, on a
real file, alone and from many tasks at once."""

from __future__ import annotations

import asyncio
import datetime
import gc
import inspect
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

import agui_store
from agui_store import aio, testing
from agui_store.errors import ArgumentTypeError
from agui_store.store import Store
from benchmarks._common import conversation_run

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


#: ``Store``'s doors into its transactions: they hold the store's lock on the calling
#: thread, so an AsyncStore offers them through its ``store`` (on a thread of the caller's).
DOORS = {"reading", "writing", "replicating"}


def public_methods(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in DOORS
    }


def test_async_store_has_every_public_store_method_with_the_same_parameters() -> None:
    sync_methods = public_methods(Store)
    async_methods = public_methods(aio.AsyncStore)
    assert len(sync_methods) >= 20  # the enumeration itself works
    missing = sorted(set(sync_methods) - set(async_methods))
    assert not missing, f"AsyncStore lacks {missing}: add them to agui_store/aio.py"
    for name, method in sync_methods.items():
        want = list(inspect.signature(method).parameters.values())
        got = list(inspect.signature(async_methods[name]).parameters.values())
        # record takes an async iterable where Store.record takes an iterable; everything
        # else must match exactly, annotations included.
        if name == "record":
            want = [p.replace(annotation=inspect.Parameter.empty) for p in want[1:]]
            got = [p.replace(annotation=inspect.Parameter.empty) for p in got[1:]]
        assert [(p.name, p.kind, p.default, p.annotation) for p in got] == [
            (p.name, p.kind, p.default, p.annotation) for p in want
        ], name


def test_async_store_methods_are_coroutines_and_generators_are_async_generators() -> None:
    for name, method in public_methods(Store).items():
        twin = getattr(aio.AsyncStore, name)
        if name == "record":
            continue  # returns an async iterator (checked by the recorder tests)
        if inspect.isgeneratorfunction(method):
            assert inspect.isasyncgenfunction(twin), name
        else:
            assert inspect.iscoroutinefunction(twin), name


def test_an_async_store_refuses_to_wrap_what_is_not_a_store_naming_what_it_is(
    db_path: Path,
) -> None:
    with pytest.raises(ArgumentTypeError, match="AsyncStore takes an agui_store Store, not a str"):
        aio.AsyncStore(str(db_path))  # type: ignore[arg-type]


def test_open_reads_naturally_awaited_and_in_async_with(db_path: Path) -> None:
    events = conversation_run("t", "r1", 12, 0)

    async def main() -> None:
        astore = await aio.open(db_path)
        assert isinstance(astore, aio.AsyncStore)
        await astore.append(events)
        await astore.close()
        async with aio.open(db_path) as again:
            assert [r.run_id for r in await again.runs("t")] == ["r1"]
        async with await aio.open(db_path) as third:
            assert await third.threads() == ["t"]
        with pytest.raises(agui_store.AguiStoreError, match="closed"):
            await third.threads()

    run(main())


def test_a_verb_called_on_an_opening_not_awaited_says_to_await_it(db_path: Path) -> None:
    opening = aio.open(db_path)
    with pytest.raises(AttributeError, match=r"await it \(astore = await agui_store.aio.open"):
        opening.record  # noqa: B018 (the attribute is what is wrong)
    with pytest.raises(AttributeError) as unknown:
        opening.no_such_verb  # noqa: B018
    assert "await" not in str(unknown.value)
    assert not hasattr(opening, "__len__")


def test_every_call_runs_on_the_worker_thread_not_the_loop(db_path: Path) -> None:
    seen: list[str] = []

    class Spy(Store):
        def threads(self) -> list[str]:
            seen.append(threading.current_thread().name)
            return super().threads()

    async def main() -> None:
        async with aio.AsyncStore(Spy(db_path), owns=True) as astore:
            await astore.threads()

    run(main())
    assert seen and seen[0] != threading.main_thread().name
    assert seen[0].startswith("agui-store")


def test_async_results_equal_the_sync_stores(db_path: Path) -> None:
    first = conversation_run("t", "r1", 20, 0)
    second = conversation_run("t", "r2", 20, 1)
    with agui_store.open(db_path) as store:
        store.append(first)
        store.append(second)
        store.branch("b", "r1", thread_id="t")

    async def main() -> dict[str, Any]:
        async with aio.open(db_path) as a:
            return {
                "threads": await a.threads(),
                "runs": await a.runs("t"),
                "get_run": await a.get_run("r2"),
                "events": await a.events("r2", thread_id="t", after=3),
                "thread_events": [e async for e in a.thread_events("t")],
                "input": await a.input("r1"),
                "history": await a.history("r2"),
                "log": list(await a.log("r2")),
                "checkout": await a.checkout("HEAD", thread_id="t"),
                "compacted": await a.reconnect_stream("r2"),
                "merge_base": await a.merge_base("r1", "r2", thread_id="t"),
                "is_ancestor": await a.is_ancestor("r1", "r2", thread_id="t"),
                "diff": await a.diff("b", "main", thread_id="t"),
                "check": (await a.check()).ok,
                "branches": await a.branches("t"),
                "fork": {k: v for k, v in (await a.fork("r2", run_id="x")).items()},
            }

    got = run(main())
    with agui_store.open(db_path) as store:
        want = {
            "threads": store.threads(),
            "runs": store.runs("t"),
            "get_run": store.get_run("r2"),
            "events": store.events("r2", thread_id="t", after=3),
            "thread_events": list(store.thread_events("t")),
            "input": store.input("r1"),
            "history": store.history("r2"),
            "log": list(store.log("r2")),
            "checkout": store.checkout("HEAD", thread_id="t"),
            "compacted": store.reconnect_stream("r2"),
            "merge_base": store.merge_base("r1", "r2", thread_id="t"),
            "is_ancestor": store.is_ancestor("r1", "r2", thread_id="t"),
            "diff": store.diff("b", "main", thread_id="t"),
            "check": store.check().ok,
            "branches": store.branches("t"),
            "fork": store.fork("r2", run_id="x"),
        }
    assert got == want


# --- the writer process ------------------------------------------------------------------


def test_a_refused_append_raises_the_same_error_with_its_place_through_the_writer_process(
    db_path: Path,
) -> None:
    events = conversation_run("t", "r1", 12, 0)
    events[8] = {**events[8], "delta": 7}
    with agui_store.open(":memory:") as memory, pytest.raises(agui_store.InvalidEventError) as sync:
        memory.append(events)

    async def main() -> agui_store.InvalidEventError:
        async with aio.open(db_path) as astore:
            assert astore.writer == "process"
            with pytest.raises(agui_store.InvalidEventError) as raised:
                await astore.append(events)
            assert await astore.threads() == []
            return raised.value

    got = run(main())
    want = sync.value
    assert type(got) is type(want)
    assert (str(got), got.index, got.event_type, got.path, got.reason) == (
        str(want),
        want.index,
        want.event_type,
        want.path,
        want.reason,
    )


class Unloadable:
    """A value that pickles, and fails to load in the writer process (as an instance of a
    class the parent's ``__main__`` defines does)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (int, ("not a number",))


@pytest.mark.parametrize(
    "value",
    [threading.Lock(), lambda: 1, Unloadable()],
    ids=["a lock", "a function", "a value the writer cannot load"],
)
def test_an_event_holding_what_pickle_cannot_send_is_refused_as_the_store_refuses_it(
    db_path: Path, value: Any
) -> None:
    events = conversation_run("t", "r1", 12, 0)
    events[3] = {"type": "CUSTOM", "name": "x", "value": value}
    with agui_store.open(":memory:") as memory, pytest.raises(agui_store.InvalidEventError) as sync:
        memory.append(events)

    async def main() -> agui_store.InvalidEventError:
        async with aio.open(db_path) as astore:
            assert astore.writer == "process"
            with pytest.raises(agui_store.InvalidEventError) as raised:
                await astore.append(events)
            assert await astore.threads() == []
            await astore.append(conversation_run("t", "r1", 12, 0))  # the writer goes on
            assert testing.writer_process(astore) is not None
            return raised.value

    got = run(main())
    assert (str(got), got.index, got.path) == (str(sync.value), sync.value.index, sync.value.path)


def test_appends_go_to_the_writer_process_and_reads_see_them(db_path: Path) -> None:
    async def main() -> None:
        async with aio.open(db_path) as astore:
            result = await astore.append(conversation_run("t", "r1", 12, 0))
            assert result.new_run_ids == ("r1",)
            process = testing.writer_process(astore)
            assert process is not None and process.poll() is None
            assert process.pid != os.getpid()
            # Background priority: the server's own process is served first.
            child = os.getpriority(os.PRIO_PROCESS, process.pid)
            assert child == min(os.getpriority(os.PRIO_PROCESS, 0) + testing.WRITER_NICE, 19)
            assert (await astore.get_run("r1")).status == "finished"  # type: ignore[union-attr]
            assert await astore.derive() == 0
            assert await astore.compact() == 0
        assert process.poll() is not None  # close() ended it

    run(main())


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_an_append_whose_task_is_cancelled_while_it_waits_its_turn_is_still_written(
    db_path: Path, writer: str
) -> None:
    async def main() -> None:
        async with aio.open(db_path, writer=writer) as astore:
            await astore.ready()
            # A long append in flight, and one queued behind it whose task is cancelled, as a
            # request handler is when its client goes away.
            busy = asyncio.create_task(
                astore.append(conversation_run("long", "r1", 4000, 0)))
            await asyncio.sleep(0.005)
            queued = asyncio.create_task(astore.append(conversation_run("t", "r1", 12, 0)))
            await asyncio.sleep(0)
            queued.cancel()
            await busy
            with pytest.raises(asyncio.CancelledError):
                await queued
        with Store(db_path) as store:
            assert sorted(store.threads()) == ["long", "t"]
            assert store.get_run("r1", thread_id="t").status == "finished"  # type: ignore[union-attr]

    run(main())


def test_an_error_of_the_function_in_one_read_runs_reaches_its_caller_as_it_was_raised(
    db_path: Path,
) -> None:
    class NoSuchUser(LookupError):
        pass

    def owner_of(store: Store, thread_id: str) -> str:
        store.threads()  # the store's own reads inside it go on as usual
        raise NoSuchUser(thread_id)

    async def main() -> None:
        async with aio.open(db_path, writer="thread") as astore:
            await astore.append(conversation_run("t", "r1", 12, 0))
            # The app's own error, not the store's: not reported as a bug in agui-store.
            with pytest.raises(NoSuchUser, match=r"^t$"):
                await astore.in_one_read(owner_of, "t")
            assert await astore.threads() == ["t"]

    run(main())


def test_in_one_read_of_what_is_not_callable_is_refused_at_the_call_naming_it(
    db_path: Path,
) -> None:
    async def main() -> None:
        async with aio.open(db_path, writer="thread") as astore:
            with pytest.raises(ArgumentTypeError, match=r"in_one_read.*a str \('threads'\)"):
                await astore.in_one_read("threads")  # type: ignore[arg-type]
            assert await astore.threads() == []

    run(main())


def test_a_close_made_while_another_is_closing_returns_once_the_store_is_closed(
    db_path: Path,
) -> None:
    async def main() -> None:
        astore = await aio.open(db_path)
        await astore.append(conversation_run("t", "r1", 12, 0))
        first = asyncio.create_task(astore.close())
        await asyncio.sleep(0)  # the first close has begun releasing the store
        await astore.close()  # an app's shutdown hook beside the lifespan's, say
        with pytest.raises(agui_store.AguiStoreError, match="the store is closed"):
            astore.store.threads()
        await first

    run(main())


def test_a_close_after_the_loops_executor_shut_down_releases_the_store_and_a_second_returns(
    db_path: Path,
) -> None:
    # asyncio.run shuts its default executor down before it returns: a close made after
    # that (a finalizer's) releases the store itself, and a close after it finds it closed.
    async def main() -> None:
        astore = await aio.open(db_path)
        await astore.append(conversation_run("t", "r1", 12, 0))
        await asyncio.get_running_loop().shutdown_default_executor()
        await astore.close()
        await asyncio.wait_for(astore.close(), timeout=60)
        with pytest.raises(agui_store.AguiStoreError, match="the store is closed"):
            astore.store.threads()

    run(main())


def test_a_call_on_a_closed_async_store_names_the_store(db_path: Path) -> None:
    closed = f"^{re.escape(str(db_path))}: the store is closed$"

    async def main() -> None:
        astore = await aio.open(db_path)
        await astore.close()
        with pytest.raises(agui_store.AguiStoreError, match=closed):
            await astore.threads()
        wrapped = aio.AsyncStore(Store(db_path), writer="thread")
        wrapped.store.close()  # by its owner
        with pytest.raises(agui_store.AguiStoreError, match=closed):
            await wrapped.threads()
        await wrapped.close()

    run(main())


def test_a_call_still_running_when_its_event_loop_closes_finishes_with_no_error_logged(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def read_when_released(store: Store) -> list[str]:
        release.wait()
        return store.threads()

    async def main() -> tuple[aio.AsyncStore, asyncio.Task[list[str]]]:
        astore = await aio.open(db_path, writer="thread")
        await astore.append(conversation_run("t", "r1", 12, 0))
        # Left running as asyncio.run returns: the task is cancelled, the loop closed.
        reading = asyncio.create_task(astore.in_one_read(read_when_released))
        await asyncio.sleep(0)
        return astore, reading

    astore, reading = run(main())
    assert reading.cancelled()
    release.set()
    testing.stop_threads(astore)  # waits for the read, and for what its end calls
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    astore.store.close()


def test_an_erasure_awaited_erases_what_the_writer_process_appended_and_it_appends_on(
    db_path: Path,
) -> None:
    async def main() -> None:
        async with aio.open(db_path) as astore:
            await astore.append(conversation_run("gone", "r1", 12, 0))
            await astore.append(conversation_run("kept", "k1", 12, 0))
            # A cutoff past both threads' last write: "idle for 0 s" would spare a thread
            # written in the cutoff's own millisecond.
            soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
            dry = await astore.prune(before=soon, dry_run=True)
            assert dry.threads == 2 and dry.dry_run
            receipt = await astore.delete_thread("gone")
            assert (receipt.threads, receipt.runs, receipt.purged) == (1, 1, True)
            assert (await astore.delete_owner("nobody")).threads == 0
            await astore.append(conversation_run("kept", "k2", 12, 1, parent="k1"))
            assert await astore.threads() == ["kept"]
            assert (await astore.check()).ok

    run(main())


async def writer_killed(astore: aio.AsyncStore, events: list[dict[str, Any]]) -> None:
    """Kill the store's writer process: the next write (``events``) fails saying so, and the
    one after it starts a new writer."""
    process = testing.writer_process(astore)
    assert process is not None
    process.kill()
    process.wait()
    with pytest.raises(agui_store.AguiStoreError, match="ended unexpectedly"):
        await astore.append(events)


def test_a_writer_process_that_died_is_replaced_by_the_next_write(db_path: Path) -> None:
    async def main() -> None:
        async with aio.open(db_path) as astore:
            await astore.append(conversation_run("t", "r1", 12, 0))
            await writer_killed(astore, conversation_run("t", "r2", 12, 1))
            await astore.append(conversation_run("t", "r2", 12, 1))
            assert [r.run_id for r in await astore.runs("t")] == ["r1", "r2"]
            assert (await astore.check()).ok

    run(main())


#: A program with an AsyncStore that, as a server does on Ctrl+C, goes on to append what it
#: holds: the terminal sends SIGINT to every process of its foreground process group.
CTRL_C_PROGRAM = """
import asyncio, os, signal, sys
from agui_store import aio
from benchmarks._common import conversation_run

async def main():
    async with aio.open(sys.argv[1]) as astore:
        await astore.append(conversation_run("t", "r1", 12, 0))
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server handles its own Ctrl+C
        os.killpg(os.getpgrp(), signal.SIGINT)
        await astore.append(conversation_run("t", "r2", 12, 1))

asyncio.run(main())
"""


def test_a_ctrl_c_at_the_terminal_leaves_the_writer_process_to_append_what_the_server_holds(
    db_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_PROGRAM, str(db_path)],
        # A process group of its own, as a terminal gives each command it runs.
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    with agui_store.open(db_path) as store:
        assert [r.run_id for r in store.runs("t")] == ["r1", "r2"]


def _write_recording(path: Path, thread_id: str) -> None:
    path.parent.mkdir(exist_ok=True)
    events = conversation_run(thread_id, "r1", 12, 0)
    path.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")


@pytest.mark.parametrize("as_path", [False, True], ids=["text", "Path"])
def test_a_relative_path_is_read_from_the_working_directory_of_the_call_as_the_store_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_path: bool
) -> None:
    for folder in ("a", "b"):
        _write_recording(tmp_path / folder / "run.jsonl", f"run-{folder}")
        _write_recording(tmp_path / folder / "more.jsonl", f"more-{folder}")
    source: Any = Path("run.jsonl") if as_path else "run.jsonl"

    async def main() -> list[str]:
        monkeypatch.chdir(tmp_path / "a")
        async with aio.open(tmp_path / "store.db") as astore:
            await astore.ready()  # the writer process starts in a
            monkeypatch.chdir(tmp_path / "b")
            await astore.import_file(source)
            await astore.append(Path("more.jsonl"))
            return sorted(await astore.threads())

    monkeypatch.chdir(tmp_path / "b")
    with agui_store.open(":memory:") as memory:
        memory.import_file(source)
        memory.append(Path("more.jsonl"))
        want = sorted(memory.threads())
    assert want == ["more-b", "run-b"]
    assert run(main()) == want


def test_a_store_opened_by_a_relative_path_is_written_by_a_new_writer_after_a_change_of_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "elsewhere").mkdir()

    async def main() -> list[str]:
        monkeypatch.chdir(tmp_path)
        async with aio.open("store.db") as astore:
            await astore.append(conversation_run("t", "r1", 12, 0))
            monkeypatch.chdir(tmp_path / "elsewhere")
            await writer_killed(astore, conversation_run("t", "r2", 12, 1))
            await astore.append(conversation_run("t", "r2", 12, 1))  # a new writer's
            return [r.run_id for r in await astore.runs("t")]

    assert run(main()) == ["r1", "r2"]
    assert not (tmp_path / "elsewhere" / "store.db").exists()


@pytest.mark.parametrize("path", [":memory:", "file"])
def test_the_thread_writer_and_memory_stores_append_on_the_worker_thread(
    db_path: Path, path: str
) -> None:
    target = ":memory:" if path == ":memory:" else db_path
    options = {} if path == ":memory:" else {"writer": "thread"}

    async def main() -> None:
        async with aio.open(target, **options) as astore:
            assert astore.writer == "thread"
            await astore.append(conversation_run("t", "r1", 12, 0))
            assert testing.writer_process(astore) is None
            assert (await astore.checkout("r1")).run.status == "finished"

    run(main())


def test_a_call_that_cannot_be_sent_runs_on_the_worker_thread(db_path: Path) -> None:
    events = conversation_run("t", "r1", 12, 0)
    appended_here: list[str] = []

    class Spy(Store):
        def append(self, *args: Any, **kwargs: Any) -> agui_store.AppendResult:
            appended_here.append(threading.current_thread().name)
            return super().append(*args, **kwargs)

    async def main() -> None:
        async with aio.AsyncStore(Spy(db_path), owns=True) as astore:
            await astore.append(iter(events))  # a generator does not pickle
            assert await astore.events("r1") == events
            await astore.append(conversation_run("t", "r2", 12, 1))  # this one is sent

    run(main())
    assert len(appended_here) == 1 and appended_here[0].startswith("agui-store")


def test_an_async_store_made_before_a_fork_writes_and_reads_in_the_child_and_the_parent(
    db_path: Path,
) -> None:
    """A server that forks its workers after building the app (gunicorn's ``--preload``)
    hands each child an AsyncStore, with a Recorder's, made in the parent: the child's calls
    run on threads and a writer process of its own, and the parent's go on as before."""
    from tests.test_concurrency import exit_code, in_child

    async def start() -> aio.AsyncStore:
        astore = await aio.open(db_path)
        await astore.append(conversation_run("t", "parent-1", 12, 0))
        return astore

    loop = asyncio.new_event_loop()
    try:
        astore = loop.run_until_complete(start())

        async def in_the_child() -> None:
            await astore.append(conversation_run("t", "child-1", 12, 1))
            assert [r.run_id for r in await astore.runs("t")] == ["parent-1", "child-1"]
            await astore.close()

        pid = in_child(lambda: asyncio.run(asyncio.wait_for(in_the_child(), 30)))
        assert exit_code(pid) == 0
        loop.run_until_complete(astore.append(conversation_run("t", "parent-2", 12, 2)))
        runs = loop.run_until_complete(astore.runs("t"))
        assert [r.run_id for r in runs] == ["parent-1", "child-1", "parent-2"]
        loop.run_until_complete(astore.close())
    finally:
        loop.close()


def test_an_unknown_writer_is_refused(db_path: Path) -> None:
    async def main() -> None:
        with pytest.raises(agui_store.InvalidArgumentError, match="writer= must be one of"):
            await aio.open(db_path, writer="fork")

    run(main())


def test_a_misspelled_option_of_open_is_refused_naming_it_and_the_options_open_takes(
    db_path: Path,
) -> None:
    async def main() -> None:
        with pytest.raises(
            ArgumentTypeError,
            match=r"agui_store\.aio\.open\(\) takes no option 'busy_timeout'; its options are "
            r"busy_timeout_ms, .*writer",
        ):
            await aio.open(db_path, busy_timeout=5000)
        assert not db_path.exists()

    run(main())


# --- many tasks at once -------------------------------------------------------------------


def test_many_tasks_streaming_and_reading_at_once_lose_nothing(db_path: Path) -> None:
    """Twenty tasks each stream a run in small appends while others read checkouts: every
    event lands once, in order, in its own run, and the file checks clean."""
    runs = {f"t{i}": conversation_run(f"t{i}", f"r{i}", 30, i) for i in range(20)}

    async def writer(astore: aio.AsyncStore, thread: str) -> None:
        events = runs[thread]
        for start in range(0, len(events), 4):
            await astore.append(events[start : start + 4], thread_id=thread)
            await asyncio.sleep(0)

    async def reader(astore: aio.AsyncStore, stop: asyncio.Event) -> int:
        reads = 0
        while not stop.is_set():
            for thread in await astore.threads():
                co = await astore.checkout("HEAD", thread_id=thread)
                assert co.run.thread_id == thread
                reads += 1
            await asyncio.sleep(0)
        return reads

    async def main() -> None:
        async with aio.open(db_path) as astore:
            stop = asyncio.Event()
            readers = [asyncio.create_task(reader(astore, stop)) for _ in range(3)]
            await asyncio.gather(*(writer(astore, t) for t in runs))
            stop.set()
            assert sum(await asyncio.gather(*readers)) > 0
            for thread, events in runs.items():
                assert await astore.events("HEAD", thread_id=thread) == events
                assert (await astore.checkout("HEAD", thread_id=thread)).run.status == "finished"
            assert (await astore.check()).ok

    run(main())


def test_an_async_store_dropped_without_close_leaves_no_writer_running(db_path: Path) -> None:
    async def main() -> int:
        astore = aio.AsyncStore(agui_store.open(db_path), owns=True)
        await astore.append(conversation_run("t", "r1", 12, 0))
        process = testing.writer_process(astore)
        assert process is not None
        pid = process.pid
        testing.stop_threads(astore)
        del process
        del astore
        return pid

    pid = run(main())
    gc.collect()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and not _is_zombie(pid):
        assert time.monotonic() < deadline, "the writer process outlived its AsyncStore"
        time.sleep(0.01)
    with agui_store.open(db_path) as store:
        assert store.get_run("r1").status == "finished"  # type: ignore[union-attr]


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
