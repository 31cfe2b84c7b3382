"""Export and import are lossless in every format, for a run's history and a whole thread."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

import agui_store
from agui_store.codec.ingest import parse_events
from agui_store.codec.output import FORMATS, serialize
from tests.conftest import fixture_params
from tests.strategies import legal_streams


def round_trip(events: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    return [e.data for e in parse_events(b"".join(serialize(events, fmt)))]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("events", fixture_params())
def test_every_recording_exported_and_imported_as_a_whole_thread_is_unchanged(
    tmp_path: Path, events: list[dict[str, Any]], fmt: str
) -> None:
    tid = events[0]["threadId"]
    with agui_store.open(tmp_path / "a.db") as a, agui_store.open(tmp_path / "b.db") as b:
        a.append(events)
        exported = list(a.thread_events(tid))
        assert exported == events
        b.append(round_trip(exported, fmt))
        for run in a.runs(tid):
            assert b.events(run.run_id, thread_id=tid) == a.events(run.run_id, thread_id=tid)
            x, y = a.checkout(run.run_id, thread_id=tid), b.checkout(run.run_id, thread_id=tid)
            assert (x.messages, x.state) == (y.messages, y.state)


@given(stream=legal_streams(max_runs=3))
def test_generated_streams_survive_every_format(stream: list[dict[str, Any]]) -> None:
    for fmt in FORMATS:
        assert round_trip(stream, fmt) == stream


def test_a_whole_thread_exports_from_the_command_line_with_a_progress_bar_only_on_a_terminal(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        from agui_store.cli.demo import record_demo

        thread, _ = record_demo(store)
        want = list(store.thread_events(thread))
    out = tmp_path / "thread.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agui_store",
            "export",
            "--all",
            "--thread",
            thread,
            "-o",
            str(out),
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "[#" not in proc.stderr  # not a terminal: no bar
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert got == want and len(got) == 49
