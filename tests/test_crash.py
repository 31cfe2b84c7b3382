"""Crash safety: writer processes SIGKILLed at random moments lose nothing they acknowledged
and never leave part of a batch behind.

The writers (``tests/workers/writer.py``) append deterministic batches and print ``acked I``
after each ``append`` returns. The tests kill them with SIGKILL, aimed at random points of an
``append`` call (and sometimes of opening the file), then reopen the file and compare it with
what the writer would have appended: every acknowledged batch is there, whole; the batch in
flight is there whole or not at all; nothing else is there; ``PRAGMA integrity_check`` and
``Store.check()`` pass. Then the next writer continues from where the file stops.

Sizes scale with the hypothesis profile (``HYPOTHESIS_PROFILE=ci``: more kills). Set
``AGUI_STORE_CRASH_SEED`` to replay one sequence of workloads (kill timing stays random).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import apsw
import pytest

import agui_store
from agui_store.backends.sqlite import schema
from tests.workers import plans
from tests.workers.harness import Worker, scale, wal_tail

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("AGUI_STORE_CRASH_SEED", random.randrange(1_000_000)))

RUN_KILLS = scale(dev=14, ci=72)
LIVE_KILLS = scale(dev=10, ci=48)
KILLS_PER_FILE = 12
CREATE_KILLS = scale(dev=4, ci=16)

_STATUS = {"success": "finished", "interrupt": "interrupted", "cancelled": "cancelled"}


def expected_status(events: list[plans.Event]) -> str:
    last = events[-1]
    if last["type"] == "RUN_ERROR":
        return "error"
    if last["type"] == "RUN_FINISHED":
        return _STATUS[(last.get("outcome") or {}).get("type", "success")]
    return "incomplete"


@dataclass
class Tally:
    """What the kills hit, for the assertions and the closing summary."""

    kills: int = 0
    in_append: int = 0  # the last line was "begin I": the kill landed inside append()
    in_open: int = 0  # killed before the store was open
    torn_commits: int = 0  # the WAL ended with frames of a commit cut short
    in_flight_kept: int = 0  # the batch in flight had committed before the kill
    in_flight_lost: int = 0  # ... or had not (it is absent, whole)
    acked: int = 0
    seconds_per_byte: list[float] = field(default_factory=list)

    def count_survivors(self, acked: int, acked_upto: int, in_flight: Any, held: int) -> None:
        """After a kill: ``acked`` batches were acknowledged; the file now ``held`` up to
        the batch in flight, if any, or not."""
        self.acked += acked
        if in_flight is not None:
            if held > acked_upto:
                self.in_flight_kept += 1
            else:
                self.in_flight_lost += 1

    def summary(self, label: str) -> str:
        return (
            f"{label}: {self.kills} SIGKILLs survived (seed {SEED}), {self.in_append} inside "
            f"append(), {self.in_open} while opening, {self.torn_commits} with a commit cut "
            f"short in the WAL; batch in flight kept {self.in_flight_kept}, absent "
            f"{self.in_flight_lost}; {self.acked} acknowledged batches, all present"
        )


def kill_somewhere(
    worker: Worker, start: int, tally: Tally, rng: random.Random, size: Callable[[int], int]
) -> None:
    """Let the worker run, then SIGKILL it: mostly inside an append() call (preferably of a
    big batch, whose commit takes long enough to be hit), at a random fraction of how long
    that append should take; sometimes while it opens the file."""
    if rng.random() < 0.12:
        time.sleep(rng.uniform(0, 0.02))
    else:
        ahead = list(range(start, start + 6))
        target = max(ahead, key=size) if rng.random() < 0.6 else rng.choice(ahead[:3])
        worker.wait_for("ready")
        worker.wait_for(f"begin {target}")
        per_byte = statistics.median(tally.seconds_per_byte[-30:] or [3e-8])
        expected = per_byte * size(target) + 0.001
        # Half the time anywhere in the call, half the time in its second half, where the
        # transaction, the commit and the WAL checkpoint after it happen.
        window = (0.0, 1.3) if rng.random() < 0.5 else (0.55, 1.05)
        time.sleep(expected * rng.uniform(*window))
    worker.kill()
    tally.kills += 1
    lines = worker.all_lines()
    if not any(line.startswith("ready") for line in lines):
        tally.in_open += 1
    elif lines[-1].startswith("begin"):
        tally.in_append += 1
    begun: dict[int, float] = {}
    for at, line in worker.lines:
        word, _, rest = line.partition(" ")
        if word in ("begin", "acked"):
            index = int(rest.split(" ")[0])
            if word == "begin":
                begun[index] = at
            elif index in begun and size(index) > 100_000:
                tally.seconds_per_byte.append((at - begun[index]) / size(index))


def acked_and_in_flight(worker: Worker) -> tuple[list[int], int | None]:
    acked: list[int] = []
    in_flight = None
    for line in worker.all_lines():
        word, _, rest = line.partition(" ")
        if word == "begin":
            in_flight = int(rest.split(" ")[0])
        elif word == "acked":
            acked.append(int(rest.split(" ")[0]))
            in_flight = None
    return acked, in_flight


def assert_sqlite_intact(path: Path) -> tuple[int, int]:
    """``PRAGMA integrity_check`` from a plain connection; returns (events, runs) counts."""
    conn = apsw.Connection(str(path))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        return int(events), int(runs)
    finally:
        conn.close()


# --- whole runs ---------------------------------------------------------------------------


@cache
def crash_batch_size(seed: int, index: int) -> int:
    return len(json.dumps(plans.crash_batch(seed, index).events))


@cache
def live_batch_size(seed: int, index: int) -> int:
    return len(json.dumps(plans.live_batch(seed, index)))


def verify_runs_file(
    path: Path, seed: int, verified: int, acked_upto: int, in_flight: int | None
) -> int:
    """Check the file after a kill; return how many batches it holds (a prefix of the plan)."""
    with agui_store.open(path) as store:
        held = verified
        for index in range(verified, acked_upto + 3):
            batch = plans.crash_batch(seed, index)
            found = [store.get_run(r, thread_id=batch.thread) for r in batch.run_ids]
            if all(run is None for run in found):
                break
            assert all(run is not None for run in found), (
                f"batch {index} is in the file only in part: runs {batch.run_ids}, found "
                f"{[run.run_id if run else None for run in found]}"
            )
            for run_id, events in batch.run_events().items():
                assert store.events(run_id, thread_id=batch.thread) == events, (
                    f"run {run_id} of batch {index} holds other events than were appended"
                )
                run = store.get_run(run_id, thread_id=batch.thread)
                assert run is not None and run.status == expected_status(events)
                assert run.event_count == len(events)
            held = index + 1
        assert held >= acked_upto, (
            f"batches {held}..{acked_upto - 1} were acknowledged but are not in the file"
        )
        assert held <= acked_upto + (1 if in_flight == acked_upto else 0), (
            f"the file holds batch {held - 1}, which was never appended"
        )
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
    events, runs = assert_sqlite_intact(path)
    planned = [plans.crash_batch(seed, i) for i in range(held)]
    assert events == sum(len(b.events) for b in planned), "extra or missing events"
    assert runs == sum(len(b.run_ids) for b in planned), "extra or missing runs"
    return held


def test_a_writer_killed_at_random_moments_keeps_every_acknowledged_run_whole(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    tally = Tally()
    files = -(-RUN_KILLS // KILLS_PER_FILE)
    for number in range(files):
        path = tmp_path / f"runs-{number}.db"
        seed = SEED + number
        held = 0
        kills = min(KILLS_PER_FILE, RUN_KILLS - tally.kills)
        worker = Worker("writer", "runs", str(path), str(seed))
        for kill in range(kills):
            # The next writer imports while this one writes, is killed and its file is
            # checked (importing agui_store is most of a kill's time otherwise); it touches
            # the file only once told where to start.
            upcoming = Worker("writer", "runs", str(path), str(seed)) if kill + 1 < kills else None
            worker.wait_for("spawned")
            worker.send(f"go {held}")
            kill_somewhere(worker, held, tally, rng, partial(crash_batch_size, seed))
            acked, in_flight = acked_and_in_flight(worker)
            assert not acked or acked == list(range(held, held + len(acked)))
            torn = wal_tail(path)[1]
            tally.torn_commits += bool(torn)
            acked_upto = held + len(acked)
            new_held = verify_runs_file(path, seed, held, acked_upto, in_flight)
            tally.count_survivors(len(acked), acked_upto, in_flight, new_held)
            held = new_held
            if upcoming is not None:
                worker = upcoming
    print("\n" + tally.summary("whole runs"), file=sys.stderr)
    assert tally.kills == RUN_KILLS
    # The kills were aimed at append(): most must have landed inside one.
    assert tally.in_append >= RUN_KILLS // 2, tally.summary("whole runs")
    assert tally.acked > 0


# --- one live run -------------------------------------------------------------------------


def verify_live_file(path: Path, seed: int, acked_upto: int, in_flight: int | None) -> int:
    with agui_store.open(path) as store:
        run = store.get_run(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD)
        if run is None:
            assert acked_upto == 0, "acknowledged live batches are gone"
            return 0
        events = store.events(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD)
        sizes = plans.live_prefix_sizes(seed, acked_upto + 2)
        assert len(events) in sizes, (
            f"the live run holds {len(events)} events: part of a batch ({sizes[-4:]})"
        )
        held = sizes.index(len(events))
        assert held >= acked_upto, f"acknowledged live batches {held}..{acked_upto - 1} are gone"
        assert held <= acked_upto + (1 if in_flight == acked_upto else 0)
        expected = [e for i in range(held) for e in plans.live_batch(seed, i)]
        assert events == expected
        assert run.status == "incomplete" and run.event_count == len(expected)
        assert store.checkout(plans.LIVE_RUN, thread_id=plans.LIVE_THREAD).messages
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
    total, runs = assert_sqlite_intact(path)
    assert (total, runs) == (sizes[held], 1)
    return held


def test_a_live_run_streamed_in_many_appends_keeps_what_was_acknowledged_and_stays_incomplete(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED + 1)
    tally = Tally()
    files = -(-LIVE_KILLS // KILLS_PER_FILE)
    for number in range(files):
        path = tmp_path / f"live-{number}.db"
        seed = SEED + 100 + number
        held = 0
        kills = min(KILLS_PER_FILE, LIVE_KILLS - tally.kills)
        worker = Worker("writer", "live", str(path), str(seed))
        for kill in range(kills):
            # The next writer imports meanwhile (see the runs test above).
            upcoming = Worker("writer", "live", str(path), str(seed)) if kill + 1 < kills else None
            worker.wait_for("spawned")
            worker.send("go")
            kill_somewhere(worker, held, tally, rng, partial(live_batch_size, seed))
            acked, in_flight = acked_and_in_flight(worker)
            ready = [line for line in worker.all_lines() if line.startswith("ready")]
            if ready:  # the writer found where the file stopped: exactly where we did
                assert ready[0] == f"ready {held}"
            tally.torn_commits += bool(wal_tail(path)[1])
            acked_upto = held + len(acked)
            new_held = verify_live_file(path, seed, acked_upto, in_flight)
            tally.count_survivors(len(acked), acked_upto, in_flight, new_held)
            held = new_held
            if upcoming is not None:
                worker = upcoming
    print("\n" + tally.summary("live run"), file=sys.stderr)
    assert tally.kills == LIVE_KILLS
    assert tally.in_append >= LIVE_KILLS // 2, tally.summary("live run")
    assert tally.acked > 0


# --- creating the file --------------------------------------------------------------------


def test_a_writer_killed_while_it_creates_the_file_leaves_a_file_that_opens(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED + 2)
    outcomes = {"before open": 0, "after open": 0}

    def writer(number: int) -> Worker:
        return Worker("writer", "runs", str(tmp_path / f"new-{number}.db"), str(SEED))

    upcoming: Worker | None = writer(0)
    for number in range(CREATE_KILLS):
        path = tmp_path / f"new-{number}.db"
        assert upcoming is not None
        worker = upcoming
        # The next writer imports while this one is killed and its file checked.
        upcoming = writer(number + 1) if number + 1 < CREATE_KILLS else None
        worker.wait_for("spawned")
        worker.send("go 0")
        time.sleep(rng.uniform(0, 0.03))
        worker.kill()
        opened = any(line.startswith("ready") for line in worker.all_lines())
        outcomes["after open" if opened else "before open"] += 1
        with agui_store.open(path) as store:
            assert store.check().ok
            acked, _ = acked_and_in_flight(worker)
            held = len(store.threads())
            assert held or not acked
            store.append(plans.crash_batch(SEED, 10_000).events)
        conn = apsw.Connection(str(path))
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        conn.close()
    print(f"\nfile creation: {CREATE_KILLS} SIGKILLs, {outcomes}", file=sys.stderr)
