"""``agui-store import`` and ``Store.import_file``: whole or nothing, each event's bytes as the
file spells them, memory that does not grow with the file, a progress bar on a terminal.

The faults are real: a bad event near the end of a file of thousands, a CLI process killed
with SIGKILL in the middle of its import, peak memory of child processes read from the
kernel (``os.wait4``), a pseudo-terminal for the progress bar.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agui_store
from agui_store.codec import ingest
from agui_store.engine import writes as import_batching
from agui_store.errors import InvalidEventError, SequenceError
from tests.strategies import legal_streams

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------------------------
# Recordings
# ---------------------------------------------------------------------------------------------


def run_events(thread: str, run: str, deltas: int) -> list[dict[str, Any]]:
    mid = f"m-{run}"
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"caf\u00e9 {i} / "}
          for i in range(deltas)),
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]


def recording(target_bytes: int, runs_per_thread: int = 4, deltas: int = 40) -> Iterator[bytes]:
    """JSON Lines of threads of a few runs, until about ``target_bytes``; ends after a run."""
    written = thread = 0
    while written < target_bytes:
        for r in range(runs_per_thread):
            for event in run_events(f"t{thread}", f"r{r}", deltas):
                line = json.dumps(event).encode() + b"\n"
                written += len(line)
                yield line
        thread += 1


def write(path: Path, lines: Iterator[bytes] | list[bytes]) -> Path:
    with path.open("wb") as out:
        out.writelines(lines)
    return path


def cli(*args: str, db: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "agui_store", "--db", str(db), *args],
        capture_output=True, input=stdin, env=env, cwd=ROOT, timeout=300,
    )


def contents(path: Path) -> dict[str, Any]:
    """Everything a reader sees in a store: threads, runs, every event."""
    with agui_store.open(path) as s:
        out: dict[str, Any] = {}
        for thread in s.threads():
            for run in s.runs(thread):
                out[f"{thread}/{run.run_id}"] = (
                    run.status, run.lineage, run.parent_run_id,
                    s.events(run.run_id, thread_id=thread),
                )
        assert s.check().ok
        return out


def payloads(path: Path) -> list[bytes]:
    """The events' stored JSON text, read with apsw directly (read-only)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [row[0].encode() for row in conn.execute("SELECT payload FROM events ORDER BY seq")]
    finally:
        conn.close()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Streaming reads the same events as reading the whole text
# ---------------------------------------------------------------------------------------------


def as_array(events: list[dict[str, Any]], indent: int | None) -> bytes:
    return json.dumps(events, indent=indent).encode()


def as_lines(events: list[dict[str, Any]], newline: str) -> bytes:
    return "".join(json.dumps(e, ensure_ascii=False) + newline for e in events).encode()


def as_sse(events: list[dict[str, Any]], newline: str) -> bytes:
    out = [f": hello{newline}"]
    for i, e in enumerate(events):
        out.append(f"event: agui{newline}id: {i}{newline}")
        out.extend(f"data: {line}{newline}" for line in json.dumps(e, indent=1).split("\n"))
        out.append(newline)
    return "".join(out).encode()


FORMS = st.sampled_from([
    lambda evs: as_array(evs, None), lambda evs: as_array(evs, 2),
    lambda evs: as_lines(evs, "\n"), lambda evs: as_lines(evs, "\r\n"),
    lambda evs: as_lines(evs, "\r"), lambda evs: as_sse(evs, "\r\n"),
    lambda evs: as_sse(evs, "\n"),
])


@given(events=legal_streams(max_runs=3), form=FORMS, read_bytes=st.integers(1, 97),
       bom=st.booleans(), fast_bytes=st.integers(1, 300))
def test_streaming_a_file_reads_the_same_events_and_bytes_as_reading_it_whole(
    events: list[dict[str, Any]], form: Any, read_bytes: int, bom: bool, fast_bytes: int
) -> None:
    text = (b"\xef\xbb\xbf" if bom else b"") + form(events)
    whole = ingest.parse_events(text)
    with pytest.MonkeyPatch.context() as mp:
        # Arrays: many elements in one msgspec call once this much is read, else one by one.
        mp.setattr(ingest, "_FAST_BYTES", fast_bytes)
        streamed = list(ingest.iter_events(io.BytesIO(text), read_bytes=read_bytes))
    assert [(e.raw, e.data) for e in streamed] == [(e.raw, e.data) for e in whole]
    assert [e.data for e in streamed] == events


BROKEN = [
    b'[{"type":"A"},]',
    b'[{"type":"A"} {"type":"B"}]',
    b'[{"type":"A"},{"type":',
    b'[{"type":"A"}',
    b'[{"type":"A"}] trailing',
    b'[{"type":"A"}, 1]',
    b'[{"type":"A"}, {"type": "B", "x": "\\ud83d"}, {"a": 1e400}]',
    b'{"type":"A"}\n{"type": "B"\n',
    b'data: {"type":"A"}\n\ndata: [1]\n\n',
    b'data: {"type":"A"}\n\ndata:\n\n',
]


#: Spaces inside the first event of an array: the array's elements are then read many at a
#: time (as a long file's are) once enough of it is in memory, whole or cut inside an event.
PADDING = b" " * 100_000


@pytest.mark.parametrize("text", BROKEN)
def test_a_broken_file_fails_streamed_where_it_fails_whole(text: bytes) -> None:
    with pytest.raises(InvalidEventError) as whole:
        ingest.parse_events(text)
    readings = [(text, read_bytes) for read_bytes in (1, 5, 1 << 20)]
    first = b'[{"type":"A"'
    if text.startswith(first):
        padded = first + PADDING + text[len(first):]
        readings += [(padded, read_bytes) for read_bytes in (70_000, 1 << 20)]
    for source, read_bytes in readings:
        with pytest.raises(InvalidEventError) as streamed:
            list(ingest.iter_events(io.BytesIO(source), read_bytes=read_bytes))
        assert streamed.value.index == whole.value.index, (streamed.value, whole.value)
        if source is not text:
            with pytest.raises(InvalidEventError) as padded_whole:
                ingest.parse_events(source)
            assert padded_whole.value.index == whole.value.index


def test_an_event_over_the_size_limit_is_refused_without_reading_it_whole() -> None:
    text = b'[{"type":"A"}, {"type": "B", "x": "' + b"x" * 300_000 + b'"}]'
    with pytest.raises(InvalidEventError, match="over the limit") as caught:
        list(ingest.iter_events(io.BytesIO(text), max_event_bytes=1000, read_bytes=4096))
    assert caught.value.index == 1
    line = b'{"type": "B", "x": "' + b"x" * 300_000 + b'"}\n'
    with pytest.raises(InvalidEventError, match="longer than the limit") as caught:
        list(ingest.iter_events(io.BytesIO(b'{"type":"A"}\n' + line), max_event_bytes=1000,
                               read_bytes=4096))
    assert caught.value.index == 1


# ---------------------------------------------------------------------------------------------
# Each event's bytes, as the file spells them
# ---------------------------------------------------------------------------------------------

#: An event whose JSON text a re-encoding would change: escapes, number spellings, spaces.
SPELLED = (
    b'{ "type" : "CUSTOM", "name": "caf\\u00e9 \\/ \\"q\\"",\t"value": '
    b'{"n": [1.0, 1e2, 1E+2, -0, -0.0, 0.5e-3, 10000000000000000000001], "u": "\\ud83d\\ude00",'
    b' "nested" : { "ok" : true } } }'
)
RUN = [
    b'{"type":"RUN_STARTED","threadId":"t","runId":"r1"}',
    SPELLED,
    b'{"type":"RUN_FINISHED","threadId":"t","runId":"r1"}',
]


def spelled_files(tmp_path: Path) -> dict[str, tuple[Path, list[bytes]]]:
    """The same events in each format, and the bytes each event must keep."""
    multi_line = SPELLED.replace(b', "nested"', b',\n "nested"')
    kept_multi = SPELLED.replace(b', "nested"', b',\n "nested"')  # data lines joined by LF
    sse = b"".join(
        b"event: agui\r\ndata: " + raw.replace(b"\n", b"\r\ndata: ") + b"\r\n\r\n"
        for raw in [RUN[0], multi_line, RUN[2]]
    )
    return {
        "json": (write(tmp_path / "r.json", [b"[\n  ", b",\n  ".join(RUN), b"\n]\n"]), RUN),
        "jsonl": (write(tmp_path / "r.jsonl", [b"  " + raw + b" \r\n" for raw in RUN]), RUN),
        "sse": (write(tmp_path / "r.sse", [sse]), [RUN[0], kept_multi, RUN[2]]),
    }


@pytest.mark.parametrize("fmt", ["json", "jsonl", "sse"])
def test_import_keeps_each_events_json_text_as_the_file_spells_it(
    tmp_path: Path, fmt: str
) -> None:
    source, kept = spelled_files(tmp_path)[fmt]
    db = tmp_path / "s.db"
    proc = cli("import", str(source), db=db)
    assert proc.returncode == 0, proc.stderr
    assert payloads(db) == kept
    with agui_store.open(db) as s:  # and reads back JSON-equal, as every event does
        assert s.events("r1", thread_id="t") == [json.loads(raw) for raw in kept]


# ---------------------------------------------------------------------------------------------
# Whole or nothing
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """A store holding one run already, closed (its WAL folded into the file)."""
    db = tmp_path / "s.db"
    with agui_store.open(db) as s:
        s.append(run_events("before", "r0", 3))
    return db


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        (b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-r1", "delta": 5}', "delta"),
        (b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-r1", "delta": "x"', "malformed"),
        (b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"}', "nope"),
    ],
    ids=["invalid-field", "malformed-json", "out-of-sequence"],
)
def test_a_bad_event_near_the_end_of_a_large_file_leaves_the_store_as_it_was(
    tmp_path: Path, seeded: Path, broken: bytes, reason: str
) -> None:
    lines = list(recording(1_500_000))
    at = len(lines) - 4  # a TEXT_MESSAGE_CONTENT of the last run
    assert b"TEXT_MESSAGE_CONTENT" in lines[at]
    lines[at] = broken + b"\n"
    source = write(tmp_path / "bad.jsonl", lines)
    before, digest = contents(seeded), file_digest(seeded)

    proc = cli("import", str(source), db=seeded)
    assert proc.returncode == 1
    message = proc.stderr.decode()
    assert message.count("\n") == 1 and "Traceback" not in message
    assert f"event {at}" in message and reason in message
    assert file_digest(seeded) == digest
    assert contents(seeded) == before

    with agui_store.open(seeded) as s:  # the same store object goes on working
        with pytest.raises(InvalidEventError) as caught:
            s.import_file(source)
        assert caught.value.index == at
        s.append(run_events("after", "r0", 1))
        assert sorted(s.threads()) == ["after", "before"]


def test_importing_the_same_file_twice_refuses_the_second_whole(
    tmp_path: Path, seeded: Path
) -> None:
    source = write(tmp_path / "r.jsonl", recording(200_000))
    assert cli("import", str(source), db=seeded).returncode == 0
    once = contents(seeded)
    proc = cli("import", str(source), db=seeded)
    assert proc.returncode == 1 and "already" in proc.stderr.decode()
    assert contents(seeded) == once


def test_an_import_killed_mid_file_leaves_the_store_as_it_was_and_a_rerun_completes(
    tmp_path: Path, seeded: Path
) -> None:
    source = write(tmp_path / "big.jsonl", recording(12_000_000))
    before = contents(seeded)
    wal = Path(f"{seeded}-wal")
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_store", "--db", str(seeded), "import", str(source)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    # Kill once the transaction has spilled pages into the WAL: well inside the import.
    while not (wal.exists() and wal.stat().st_size > 2_000_000):
        assert proc.poll() is None, "the import ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL

    assert contents(seeded) == before

    assert cli("import", str(source), db=seeded).returncode == 0
    after = contents(seeded)
    lines = source.read_bytes().count(b"\n")
    assert sum(len(v[3]) for v in after.values()) == lines + len(before["before/r0"][3])
    threads = {k.split("/")[0] for k in after}
    assert len(after) == 1 + 4 * (len(threads) - 1)  # every run once, no duplicates


# ---------------------------------------------------------------------------------------------
# The same result as appending each thread's stretch in one batch
# ---------------------------------------------------------------------------------------------


def stretches(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """What import appended before: each run of consecutive same-thread events, one batch."""
    out: list[list[dict[str, Any]]] = []
    for ev in events:
        if not out or (ev["type"] == "RUN_STARTED" and ev["threadId"] != out[-1][0]["threadId"]):
            out.append([])
        out[-1].append(ev)
    return out


def snapshot(s: agui_store.Store) -> dict[str, Any]:
    out = {}
    for thread in s.threads():
        for run in s.runs(thread):
            co = s.checkout(run.run_id, thread_id=thread)
            out[f"{thread}/{run.run_id}"] = (
                run.status, run.lineage, run.parent_run_id, run.event_count,
                s.events(run.run_id, thread_id=thread), co.messages, co.state,
            )
    return out


@settings(max_examples=40)
@given(
    streams=st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.data()), min_size=1, max_size=4
    ),
    batch_events=st.integers(1, 6),
)
def test_an_import_in_small_batches_ends_as_appending_each_threads_stretch_whole(
    streams: list[tuple[str, Any]], batch_events: int
) -> None:
    events: list[dict[str, Any]] = []
    for n, (thread, data) in enumerate(streams):
        names = [f"r{n}-{i}" for i in range(3)]
        events += data.draw(legal_streams(thread_id=thread, max_runs=3, run_ids=names))
    text = as_lines(events, "\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(import_batching, "IMPORT_BATCH_EVENTS", batch_events)
        mp.setattr(import_batching, "IMPORT_BATCH_BYTES", 1 << 30)
        imports_like_stretches(events, text)


def imports_like_stretches(events: list[dict[str, Any]], text: bytes) -> None:
    with agui_store.open(":memory:") as imported, agui_store.open(":memory:") as appended:
        try:
            for batch in stretches(events):
                appended.append(batch)
        except InvalidEventError as e:
            expected: Exception | None = e
        else:
            expected = None
        try:
            imported.import_file(io.BytesIO(text))
        except InvalidEventError as e:
            assert expected is not None and type(e) is type(expected), (e, expected)
            assert imported.threads() == []
            return
        assert expected is None
        assert snapshot(imported) == snapshot(appended)


def test_a_run_longer_than_four_batches_is_cut_and_continued_by_name_in_its_own_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(import_batching, "IMPORT_BATCH_EVENTS", 5)
    long_run = run_events("long", "r1", 100)
    open_elsewhere = run_events("other", "r0", 1)[:-1]  # another thread's run stays open
    text = as_lines(open_elsewhere + long_run, "\n")
    with agui_store.open(":memory:") as s:
        s.append(run_events("long", "r0", 1)[:-1])  # and an older run of the same thread
        result = s.import_file(io.BytesIO(text))
        assert result.event_count == len(open_elsewhere) + len(long_run)
        old, run = s.runs("long")
        assert run.status == "finished" and run.event_count == len(long_run)
        assert old.status == "incomplete" and old.event_count == 4
        assert s.checkout("r1", thread_id="long").messages[-1]["content"].count("caf\u00e9") == 100
        assert s.runs("other")[0].status == "incomplete"


def test_a_second_run_started_while_one_is_open_is_refused_across_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(import_batching, "IMPORT_BATCH_EVENTS", 2)
    never_ends = run_events("t", "r0", 5)[:-1]
    text = as_lines(never_ends + run_events("t", "r1", 1), "\n")
    with agui_store.open(":memory:") as s:
        with pytest.raises(SequenceError) as caught:
            s.import_file(io.BytesIO(text))
        assert caught.value.index == len(never_ends)
        assert s.threads() == []


# ---------------------------------------------------------------------------------------------
# Memory, progress, stdin
# ---------------------------------------------------------------------------------------------


def peak_rss_mb(argv: list[str]) -> float:
    """Peak resident memory of one child process, from the kernel."""
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PYTHONPATH"] = str(ROOT)
    with subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE) as proc:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return usage.ru_maxrss / 1024


def test_peak_memory_of_an_import_does_not_grow_with_the_file(tmp_path: Path) -> None:
    peaks = {}
    for mb in (2, 10):
        source = write(tmp_path / f"{mb}.jsonl", recording(mb * 1_000_000))
        db = tmp_path / f"{mb}.db"
        peaks[mb] = peak_rss_mb(
            [sys.executable, "-m", "agui_store", "--db", str(db), "import", str(source)]
        )
    # Reading the whole file and decoding every event at once grew by ~12x the file's size
    # (~95 MB more for these 8 MB more); streaming stays within a few MB.
    assert peaks[10] - peaks[2] < 12, peaks


def test_the_progress_bar_counts_the_bytes_read_on_a_terminal(tmp_path: Path) -> None:
    source = write(tmp_path / "r.jsonl", recording(300_000))
    size = source.stat().st_size
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PYTHONPATH"] = str(ROOT)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_store", "--db", str(tmp_path / "s.db"), "import",
         str(source)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=follower,
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert proc.wait() == 0
    # The pty adds CRs; after the bar, a note says what an AG-UI event file cannot carry.
    bars = [bar for bar in drawn.decode().split("\r") if bar.strip().startswith("importing")]
    total = f"{size / 1e6:.1f}"
    assert bars[-1].strip() == f"importing {source} [{'#' * 30}] {total}/{total} MB"


def test_the_progress_bar_stays_off_without_a_terminal_and_stdin_is_read_as_a_file(
    tmp_path: Path,
) -> None:
    text = b"".join(recording(100_000))
    proc = cli("import", "-", db=tmp_path / "s.db", stdin=text)
    # No bar: stderr holds only the note on what an AG-UI event file cannot carry.
    assert proc.returncode == 0 and proc.stderr.decode().startswith("note: an AG-UI event file")
    assert proc.stderr.count(b"\n") == 1
    lines = text.count(b"\n")
    assert proc.stdout.decode().startswith(f"imported {lines} events")


def test_an_array_with_an_escaped_lone_surrogate_keeps_every_events_bytes() -> None:
    text = b'[ {"type": "A", "n": 1.0},\n {"type": "B", "x": "\\ud83d \\u00e9"} ]'
    for events in (ingest.parse_events(text), list(ingest.iter_events(io.BytesIO(text)))):
        assert [e.raw for e in events] == [b'{"type": "A", "n": 1.0}',
                                           b'{"type": "B", "x": "\\ud83d \\u00e9"}']
        assert events[1].data["x"] == "\ud83d \u00e9"


DISK_FULL = r"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
import agui_store
db, source, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
with agui_store.open(db) as store:
    before = store.threads()
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        store.import_file(source)
    except agui_store.AguiStoreError as e:  # a store error, not the driver's
        print("failed:", type(e).__name__, e)
    else:
        raise SystemExit("the import fitted under the limit")
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert store.threads() == before, store.threads()
    result = store.import_file(source)  # the same store object, once there is space
    print("imported", result.event_count)
"""


def test_a_disk_filling_up_mid_import_leaves_the_store_as_it_was_and_it_imports_later(
    tmp_path: Path, seeded: Path
) -> None:
    source = write(tmp_path / "r.jsonl", recording(3_000_000))
    before = contents(seeded)
    limit = seeded.stat().st_size + 1_000_000
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", DISK_FULL, str(seeded), str(source), str(limit)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("failed:"), proc.stdout
    lines = source.read_bytes().count(b"\n")
    assert proc.stdout.splitlines()[-1] == f"imported {lines}"
    after = contents(seeded)
    assert after["before/r0"] == before["before/r0"]
    assert len(after) == 1 + lines // len(run_events("x", "y", 40))


def test_the_import_command_names_the_file_before_what_is_wrong_in_it(tmp_path: Path) -> None:
    db, bad = tmp_path / "s.db", tmp_path / "bad.json"
    bad.write_text('{"type": "RUN_STA')
    proc = subprocess.run(
        [sys.executable, "-m", "agui_store", "--db", str(db), "import", str(bad)],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"agui-store import: {bad}: event 0 at $.type: malformed JSON")


def _hashed_archive(
    events: list[tuple[str, str]], *, created_at: int = 1_767_225_600_000,
    lineage: str = "root", outcome: str | None = "finished", owner: str | None = None,
) -> bytes:
    """A one-run archive of thread ``t1``, run ``r1``, whose hashes are right for what it
    holds, as another tool writing the documented format would make it. ``events``:
    ``(type record, payload text)``."""
    from agui_store.history import hashing

    start = hashing.start(thread_id="t1", run_id="r1", lineage=lineage,
                          sent_parent_run_id=None, synthetic=False, created_at=created_at,
                          parent_hash=None, input_hash=None)  # fmt: skip
    rows = [(n, kind, text, None) for n, (kind, text) in enumerate(events)]
    batch = hashing.chain(start, hashing.batch_digest(rows, outcome, created_at))
    records = [
        {"record": "header", "format": "agui-store-archive", "version": 1},
        {"record": "thread", "thread_id": "t1", "owner": owner, "created_at": created_at},
        {"record": "run", "run_id": "r1", "parent_run_id": None, "lineage": lineage,
         "sent_parent_run_id": None, "synthetic": False, "created_at": created_at,
         "input": None, "input_refs": None, "parent_hash": None, "hash": start.hex()},
        {"record": "batch", "run_id": "r1", "outcome": outcome, "appended_at": created_at,
         "events": len(events), "hash": batch.hex()},
        *({"record": "event", "type": kind, "event_text": text} for kind, text in events),
        {"record": "end", "counts": {"threads": 1, "runs": 1, "events": len(events),
                                     "branches": 0, "conversations": 0}},
    ]  # fmt: skip
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


STARTED = '{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}'
FINISHED = '{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}'
CUSTOM = '{"type":"CUSTOM","name":"n","value":1}'


def test_an_archive_hashed_right_lands_only_what_append_would_have_stored(
    tmp_path: Path,
) -> None:
    """The hashes hold an archive to what it says; what it says must be what a store
    holds: JSON objects of the type the record names, that a read decodes, a RUN_STARTED of
    its own run opening it and no other, outcomes its events give, times a date holds, a
    known lineage reason and run status."""
    sound = _hashed_archive([("RUN_STARTED", STARTED), ("RUN_FINISHED", FINISHED)])
    cases = [
        (_hashed_archive([("RUN_STARTED", STARTED), ("RUN_FINISHED", "{not json")]),
         "line 6: the event is not JSON"),
        (_hashed_archive([("RUN_STARTED", STARTED), ("RUN_ERROR", FINISHED)]),
         "line 6: the record says an event of type 'RUN_ERROR', its event says 'RUN_FINISHED'"),
        (_hashed_archive([("RUN_STARTED", STARTED.replace("t1", "t9")),
                          ("RUN_FINISHED", FINISHED)]),
         "line 5: the RUN_STARTED of run 'r1' of thread 't1' names thread 't9'"),
        (_hashed_archive([("RUN_STARTED", STARTED)], created_at=10**17),
         "line 2: created_at 100000000000000000 is not a time"),
        (_hashed_archive([("RUN_STARTED", STARTED)], lineage="guess"),
         "line 3: run 'r1': lineage 'guess' is none of"),
        (_hashed_archive([("RUN_STARTED", STARTED)], outcome="done"),
         "line 4: a batch's outcome 'done' is no run status"),
        (_hashed_archive([("RUN_STARTED", STARTED)], owner=""),
         "line 2: the thread's owner: scope must be None"),
        # What every read of the run, or check(), would refuse once it landed:
        (_hashed_archive([("RUN_STARTED", STARTED), ("CUSTOM", CUSTOM.replace("1}", "1e400}")),
                          ("RUN_FINISHED", FINISHED)]),
         "line 6: the event is not JSON a store reads: at [$].value: 1e400 is out of the range"),
        (_hashed_archive([("RUN_STARTED", STARTED), ("RUN_STARTED", STARTED),
                          ("RUN_FINISHED", FINISHED)]),
         "line 6: run 'r1' of thread 't1' holds a second RUN_STARTED"),
        (_hashed_archive([("CUSTOM", CUSTOM), ("RUN_FINISHED", FINISHED)]),
         "line 5: run 'r1' of thread 't1' begins with CUSTOM, not RUN_STARTED"),
        (_hashed_archive([("RUN_STARTED", STARTED), ("CUSTOM", CUSTOM)]),
         "line 4: a batch of run 'r1' records the outcome 'finished', but holds no RUN_FINISHED"),
        (_hashed_archive([("RUN_STARTED", STARTED), ("RUN_FINISHED", FINISHED)], outcome=None),
         "line 4: a batch of run 'r1' records the outcome None, but its events end the run as "
         "'finished'"),
    ]  # fmt: skip
    with agui_store.open(tmp_path / "s.db") as store:
        for archive, words in cases:
            with pytest.raises(agui_store.InvalidArgumentError, match=words):
                store.import_archive(io.BytesIO(archive))
        assert store.threads() == []
        assert store.import_archive(io.BytesIO(sound)).runs == 1
        assert store.check().ok


def test_an_archive_behind_a_byte_order_mark_and_blank_lines_is_read_as_an_archive(
    tmp_path: Path,
) -> None:
    """Some editors write a UTF-8 byte-order mark first; neither it nor blank lines make
    the archive an AG-UI event file."""
    archive = b"\xef\xbb\xbf\n\n" + _hashed_archive(
        [("RUN_STARTED", STARTED), ("RUN_FINISHED", FINISHED)]
    )
    with agui_store.open(tmp_path / "api.db") as store:
        assert store.import_archive(io.BytesIO(archive)).runs == 1
    (tmp_path / "a.jsonl").write_bytes(archive)
    done = subprocess.run(
        [sys.executable, "-m", "agui_store", "--db", str(tmp_path / "cli.db"), "import",
         str(tmp_path / "a.jsonl")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("imported 1 thread, 1 run, 2 events")


def test_an_archive_is_written_to_and_read_from_a_text_file_as_from_a_binary_one(
    tmp_path: Path,
) -> None:
    with agui_store.open(tmp_path / "s.db") as store:
        store.import_archive(io.BytesIO(_hashed_archive(
            [("RUN_STARTED", STARTED), ("RUN_FINISHED", FINISHED)])))
        text, binary = io.StringIO(), io.BytesIO()
        store.export_archive(text)
        store.export_archive(binary)
    assert text.getvalue().encode() == binary.getvalue()
    with agui_store.open(tmp_path / "t.db") as store:
        assert store.import_archive(io.StringIO(text.getvalue())).runs == 1


def test_an_old_archive_whose_thread_time_was_moved_past_the_erasure_stays_erased(
    tmp_path: Path,
) -> None:
    """A thread record's time is not hashed, its runs' are: the erasure is held to them."""
    import re

    with agui_store.open(tmp_path / "s.db") as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
                      {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}])
        old = io.BytesIO()
        store.export_archive(old)
        store.delete_thread("t1")
        moved = re.sub(rb'("record":"thread","thread_id":"t1","owner":null,"created_at":)(\d+)',
                       lambda m: m.group(1) + str(int(m.group(2)) + 10**9).encode(),
                       old.getvalue())
        assert moved != old.getvalue()
        assert store.import_archive(io.BytesIO(moved)).left_erased == 1
        assert store.threads() == []


def _packed(archive: bytes, kind: str, tmp_path: Path) -> bytes:
    """``archive`` as a compressor or a database holds it: what a user may hand to import."""
    import bz2
    import gzip
    import lzma
    import zipfile

    if kind == "gzip":
        return gzip.compress(archive)
    if kind == "bzip2":
        return bz2.compress(archive)
    if kind == "xz":
        return lzma.compress(archive)
    if kind == "zip":
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as packed:
            packed.writestr("a.jsonl", archive)
        return out.getvalue()
    agui_store.open(tmp_path / "other.db").close()  # a store handed over instead of its export
    return (tmp_path / "other.db").read_bytes()


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("gzip", "gzip-compressed.*gzip -dc"),
        ("bzip2", "bzip2-compressed.*bzip2 -dc"),
        ("xz", "xz-compressed.*xz -dc"),
        ("zip", "a zip file.*unzip -p"),
        ("sqlite", "a SQLite database.*agui-store copy"),
    ],
)
def test_a_compressed_archive_or_a_database_is_refused_saying_what_it_is_and_how_to_read_it(
    tmp_path: Path, kind: str, words: str
) -> None:
    archive = _hashed_archive([("RUN_STARTED", STARTED), ("RUN_FINISHED", FINISHED)])
    packed = tmp_path / f"a.{kind}"
    packed.write_bytes(_packed(archive, kind, tmp_path))
    with agui_store.open(tmp_path / "s.db") as store:
        with pytest.raises(agui_store.InvalidArgumentError, match=f"line 1: input is {words}"):
            store.import_archive(packed)
        with pytest.raises(InvalidEventError, match=f"input is {words}"):
            store.import_file(packed)
        assert store.threads() == []
    target = tmp_path / "new.db"
    done = subprocess.run(
        [sys.executable, "-m", "agui_store", "--db", str(target), "import", str(packed)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert re.match(f"agui-store import: {re.escape(str(packed))}: input is {words}", done.stderr)
    assert "\x00" not in done.stderr and "\n" not in done.stderr.rstrip("\n")
    assert not target.exists()


def _two_run_archive(input_text: str | None, refs_text: str | None,
                     echo_refs: str | None = None, parent: bool = True) -> bytes:
    """An archive of thread ``t1`` whose run ``r2`` (a child of ``r1``, or a root without
    ``parent``) has the input and references given, hashed right for what it holds."""
    from agui_store.history import hashing

    at = 1_767_225_600_000
    out = [{"record": "header", "format": "agui-store-archive", "version": 1},
           {"record": "thread", "thread_id": "t1", "owner": None, "created_at": at}]
    batches, events = [], 0
    chains: dict[str, bytes] = {}
    for run, parent_id, body, refs in (("r1", None, None, None),
                                       ("r2", "r1" if parent else None, input_text, refs_text)):
        parent_hash = chains[parent_id] if parent_id else None
        start = hashing.start(thread_id="t1", run_id=run, lineage="explicit" if parent_id
                              else "root", sent_parent_run_id=None, synthetic=False,
                              created_at=at, parent_hash=parent_hash,
                              input_hash=hashing.input_digest(body, refs))
        out.append({"record": "run", "run_id": run, "parent_run_id": parent_id,
                    "lineage": "explicit" if parent_id else "root", "sent_parent_run_id": None,
                    "synthetic": False, "created_at": at, "input_text": body,
                    "input_refs_text": refs, "parent_hash": parent_hash and parent_hash.hex(),
                    "hash": start.hex()})
        started = json.dumps({"type": "RUN_STARTED", "threadId": "t1", "runId": run})
        finished = json.dumps({"type": "RUN_FINISHED", "threadId": "t1", "runId": run})
        echo = echo_refs if run == "r2" else None
        rows = [(0, "RUN_STARTED", started, echo), (1, "RUN_FINISHED", finished, None)]
        chains[run] = hashing.chain(start, hashing.batch_digest(rows, "finished", at))
        batches += [{"record": "batch", "run_id": run, "outcome": "finished", "appended_at": at,
                     "events": 2, "hash": chains[run].hex()},
                    {"record": "event", "type": "RUN_STARTED", "event_text": started,
                     **({"echo_refs_text": echo} if echo else {})},
                    {"record": "event", "type": "RUN_FINISHED", "event_text": finished}]
        events += 2
    out += batches
    out.append({"record": "end", "counts": {"threads": 1, "runs": 2, "events": events,
                                            "branches": 0, "conversations": 0}})
    return b"".join(json.dumps(r).encode() + b"\n" for r in out)  # fmt: skip


INPUT = '{"threadId":"t1","runId":"r2","tools":[],"context":[],"forwardedProps":{}}'


@pytest.mark.parametrize(
    ("archive", "words"),
    [
        (_two_run_archive("[1, 2]", None), "line 4: run 'r2': its input is not a JSON object"),
        (_two_run_archive(INPUT.replace("{}}", '{"x":1e400}}'), None),
         "line 4: run 'r2': its input is not JSON a store reads: .*1e400"),
        (_two_run_archive(None, '{"messages":[[0,1]]}'),
         "line 4: run 'r2': its input references stand for no input"),
        (_two_run_archive(INPUT, '{"messages":[[0,1]]}', parent=False),
         "line 4: run 'r2': its input references refer to a parent's view, but it has no parent"),
        (_two_run_archive(INPUT, '{"bogus":1}'), "line 4: run 'r2': its input references: it is"),
        (_two_run_archive(INPUT, "nope"), "line 4: run 'r2': its input references: not JSON"),
        (_two_run_archive(INPUT, '{"messages":[[-1,2]]}'),
         r"line 4: run 'r2': its input references: the range \[-1, 2\]"),
        (_two_run_archive(INPUT, '{"state":"child"}'),
         "line 4: run 'r2': its input references: its \"state\" is 'child'"),
        (_two_run_archive(None, None, echo_refs='{"messages":[[0,1]]}'),
         "line 9: the echo references of run 'r2': its echoed input is not a JSON object"),
        (_two_run_archive(INPUT, '{"messages":[[0,5]]}'),
         r"run 'r2' of thread 't1': input reference \[0, 5\] is outside the parent's view of 0 "
         "messages: the archive's runs cannot be replayed; nothing was imported"),
    ],
    ids=["input-array", "input-1e400", "refs-without-input", "refs-of-a-root", "refs-garbage",
         "refs-not-json", "refs-negative", "refs-state", "echo-refs-without-echo",
         "refs-past-the-parents-view"],
)
def test_an_archive_hashed_right_is_refused_where_no_read_could_give_back_a_runs_input(
    tmp_path: Path, archive: bytes, words: str
) -> None:
    with agui_store.open(tmp_path / "s.db") as store:
        with pytest.raises(agui_store.InvalidArgumentError, match=words):
            store.import_archive(io.BytesIO(archive))
        assert store.threads() == []
        sound = _two_run_archive(INPUT, '{"messages":[{"id":"u"}]}')
        assert store.import_archive(io.BytesIO(sound)).runs == 2
        assert store.input("r2", thread_id="t1") is not None
        assert store.check().ok


def test_runs_whose_input_names_messages_past_the_parents_view_fail_reads_as_a_store_error(
    tmp_path: Path,
) -> None:
    """Imported without deriving (``derive_on_append=False``), such runs land; every read
    that replays them then says which run holds what, as a damaged store, not as a crash."""
    archive = _two_run_archive(INPUT, '{"messages":[[0,5]]}')
    with agui_store.open(tmp_path / "s.db", derive_on_append=False) as store:
        assert store.import_archive(io.BytesIO(archive)).runs == 2
        with pytest.raises(agui_store.CorruptStoreError, match=r"run 'r2' of thread 't1': input "
                           r"reference \[0, 5\] is outside the parent's view of 0 messages"):
            store.derive()
        with pytest.raises(agui_store.CorruptStoreError, match=r"outside the parent's view"):
            store.checkout("r2", thread_id="t1")
    done = subprocess.run(
        [sys.executable, "-m", "agui_store", "--db", str(tmp_path / "s.db"), "log",
         "--thread", "t1"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "outside the parent's view" in done.stderr and "Traceback" not in done.stderr


#: A pydantic-ai message as a save stores it (pydantic-ai's JSON, keys sorted, no spaces).
MESSAGE = (
    '{"instructions":null,"kind":"request","parts":[{"content":"hi","part_kind":"user-prompt",'
    '"timestamp":"2026-01-01T00:00:00Z"}],"run_id":null}'
)


def _conversation_archive(
    cid: str = "c", scope: str | None = None, message: str = MESSAGE, entry_id: str = "e1",
    fields: str = "{}", updated_at: int = 1_767_225_600_000_000, kind: str = "message",
    revision: str = "r1",
) -> bytes:
    """An archive of one conversation of one entry, hashed right for what it holds."""
    from agui_store.engine import conversations

    address = conversations.message_hash(message.encode("utf-8", "surrogatepass"))
    record = conversations.Record(conversation_id=cid, head_id=entry_id, scope=scope,
                                  revision=revision, updated_at=updated_at,
                                  record=fields, branches=())
    records = [
        {"record": "header", "format": "agui-store-archive", "version": 1},
        {"record": "conversation_entry", "entry_id": entry_id, "parent_id": None,
         "kind": kind, "conversation": cid, "message_text": message,
         "hash": conversations.entry_hash(entry_id, kind, address, None).hex()},
        {"record": "conversation", "conversation_id": cid, "head_id": entry_id, "scope": scope,
         "revision": revision, "updated_at": record.updated_at, "fields_text": fields,
         "branches": [], "hash": conversations.record_hash(record).hex()},
        {"record": "end", "counts": {"threads": 0, "runs": 0, "events": 0, "branches": 0,
                                     "conversations": 1}},
    ]  # fmt: skip
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


@pytest.mark.parametrize(
    ("archive", "words"),
    [
        (_conversation_archive(scope=""), "line 3: conversation 'c': its scope is empty"),
        (_conversation_archive(cid="a\x00b"),
         r"line 3: conversation 'a\\x00b': its id holds a NUL"),
        (_conversation_archive(entry_id="e\x001"),
         r"line 2: conversation entry 'e\\x001': its id holds a NUL"),
        (_conversation_archive(message="nope"),
         "line 2: conversation entry 'e1': the message is not JSON"),
        (_conversation_archive(message=MESSAGE.replace("null,", "null, ", 1)),
         "line 2: conversation entry 'e1': its message is not a JSON object as a save stores one"),
        (_conversation_archive(fields="nope"),
         "line 3: conversation 'c': its fields are not a JSON object: "),
        (_conversation_archive(fields="[1]"),
         "line 3: conversation 'c': its fields are not a JSON object"),
        (_conversation_archive(updated_at=10**18),
         "line 3: updated_at 1000000000000000000 is not a time"),
        (_conversation_archive(updated_at=10**19),
         "line 3: updated_at 10000000000000000000 is not a time"),
        (_conversation_archive(updated_at=-1), "line 3: updated_at -1 is not a time"),
        (_conversation_archive(kind="mes\x00sage"),
         "line 2: conversation entry 'e1': its kind holds a NUL"),
        (_conversation_archive(kind=""), "line 2: conversation entry 'e1': its kind is empty"),
        (_conversation_archive(revision="r\x00"),
         "line 3: conversation 'c': its revision holds a NUL"),
    ],
    ids=["empty-scope", "nul-id", "nul-entry", "message-not-json", "message-not-canonical",
         "fields-not-json", "fields-array", "time-past-year-9999", "time-past-64-bits",
         "time-before-1970", "nul-kind", "empty-kind", "nul-revision"],
)
def test_an_archive_hashed_right_is_refused_where_a_save_could_not_have_stored_its_conversation(
    tmp_path: Path, archive: bytes, words: str
) -> None:
    with agui_store.open(tmp_path / "s.db") as store:
        with pytest.raises(agui_store.InvalidArgumentError, match=words):
            store.import_archive(io.BytesIO(archive))
        assert store.import_archive(io.BytesIO(_conversation_archive())).conversations == 1
        assert store.check().ok


def _failed_run_archive(
    thread_id: str, run_id: str = "run-error-1", sent_parent: str | None = None
) -> bytes:
    """An archive of one thread holding one run that failed before it started (a
    ``RUN_ERROR`` alone, a run the store names), hashed right for what it holds."""
    from agui_store.history import hashing

    event, at = '{"type":"RUN_ERROR","message":"boom"}', 1_767_225_600_000
    start = hashing.start(thread_id=thread_id, run_id=run_id, lineage="root",
                          sent_parent_run_id=sent_parent, synthetic=True, created_at=at,
                          parent_hash=None, input_hash=None)
    after = hashing.chain(start, hashing.batch_digest([(1, "RUN_ERROR", event, None)], "error", at))
    records = [
        {"record": "header", "format": "agui-store-archive", "version": 1},
        {"record": "thread", "thread_id": thread_id, "owner": None, "created_at": at},
        {"record": "run", "run_id": run_id, "parent_run_id": None, "lineage": "root",
         "sent_parent_run_id": sent_parent, "synthetic": True, "created_at": at, "input": None,
         "input_refs": None, "parent_hash": None, "hash": start.hex()},
        {"record": "batch", "run_id": run_id, "outcome": "error", "appended_at": at,
         "events": 1, "hash": after.hex()},
        {"record": "event", "type": "RUN_ERROR", "event": json.loads(event)},
        {"record": "end", "counts": {"threads": 1, "runs": 1, "events": 1, "branches": 0,
                                     "conversations": 0}},
    ]  # fmt: skip
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


@pytest.mark.parametrize(
    ("archive", "words"),
    [
        (_failed_run_archive(""), "line 2: the thread id '' is empty"),
        (_failed_run_archive("a\x00b"), r"line 2: the thread id 'a\\x00b' holds a NUL"),
        (_failed_run_archive("t" * 3000), "line 2: the thread id 'tttt.* is 3,000 bytes long"),
        (_failed_run_archive("t1", run_id=""), "line 3: the run id '' is empty"),
        (_failed_run_archive("t1", run_id="r\x00"), r"line 3: the run id 'r\\x00' holds a NUL"),
        (_failed_run_archive("t1", sent_parent="p\x00"),
         "line 3: run 'run-error-1': its sent_parent_run_id holds a NUL"),
        (_failed_run_archive("t1", sent_parent="p" * 3000),
         "line 3: run 'run-error-1': its sent_parent_run_id is 3,000 bytes long"),
    ],
    ids=["empty-thread", "nul-thread", "long-thread", "empty-run", "nul-run", "nul-sent-parent",
         "long-sent-parent"],
)
def test_an_archive_hashed_right_is_refused_by_line_where_append_could_not_have_stored_an_id(
    tmp_path: Path, archive: bytes, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_store import cli

    with agui_store.open(tmp_path / "s.db") as store:
        with pytest.raises(agui_store.InvalidArgumentError, match=words):
            store.import_archive(io.BytesIO(archive))
        assert store.threads() == []
        assert store.import_archive(io.BytesIO(_failed_run_archive("t1"))).runs == 1
    (tmp_path / "a.jsonl").write_bytes(archive)
    assert cli.main(["--db", str(tmp_path / "s.db"), "import", str(tmp_path / "a.jsonl")]) == 1
    assert re.search(words, capsys.readouterr().err)


@pytest.mark.pydantic_ai
def test_an_archive_whose_conversation_message_pydantic_ai_cannot_read_is_refused_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_store import cli
    from agui_store.engine import conversations
    from tests.contract.test_archive import save_conversations
    from tests.test_sync import conversations_of

    source, target = str(tmp_path / "source.db"), tmp_path / "target.db"
    save_conversations(source, [("solo", 2, False)])
    with agui_store.open(source) as store:
        out = io.BytesIO()
        store.export_archive(out)
    lines = out.getvalue().decode().splitlines()
    assert [json.loads(line)["record"] for line in lines[1:6]] == [
        *["conversation_entry"] * 4, "conversation"]
    # The head entry's reply made into a part pydantic-ai has no kind for, hashed right again.
    head, before = json.loads(lines[4]), json.loads(lines[3])
    message = head.pop("message")
    message["parts"][0]["part_kind"] = "bogus"
    text = conversations.canonical(json.dumps(message), "edited")
    head["message_text"] = text.decode()
    head["hash"] = conversations.entry_hash(
        head["entry_id"], head["kind"], conversations.message_hash(text),
        bytes.fromhex(before["hash"]),
    ).hex()
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([*lines[:4], json.dumps(head, ensure_ascii=False), *lines[5:]])
                      + "\n", encoding="utf-8")
    assert cli.main(["--db", str(target), "import", str(edited)]) == 1
    said = capsys.readouterr().err
    assert (f"{edited}, line 5: conversation entry {head['entry_id']!r} of conversation 'solo': "
            "pydantic-ai cannot read its message (") in said, said
    assert "at response.parts.0" in said, said
    assert conversations_of(str(target), ["solo"]) == {"solo": None}
    # As exported, the same archive imports, and pydantic-ai loads what it holds.
    with agui_store.open(target) as store:
        assert store.import_archive(io.BytesIO(out.getvalue())).conversations == 1
    assert conversations_of(str(target), ["solo"])["solo"] is not None
