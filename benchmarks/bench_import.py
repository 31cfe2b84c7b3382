"""import: throughput and peak memory of ``agui-store import`` on a generated recording.

A recording of about ``--mb`` megabytes is generated into a temporary folder (many threads
of a few 50-event runs: streamed text, a tool call, state patches, escapes and number
spellings), then imported by ``python -m agui_store import`` in a child process. The
baseline, in the same run, is raw apsw: a child process that reads the same file line by
line and ``executemany``-s the same rows (seq, run, type, payload) into a store file with
the same pragmas, in one transaction, with no parsing beyond the line split and no
validation. Each child's peak RSS comes from ``os.wait4`` (``ru_maxrss``) for that child
alone.

    python -m benchmarks.bench_import [--mb 100] [--format jsonl|json|sse] [--before a3afe09]

``--before REV`` also imports with the code of a git revision (``git archive``), e.g.
``a3afe09``, the code before streaming import, which read the whole file and decoded every
event at once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._common import conversation, header

ROOT = Path(__file__).resolve().parents[1]
RUNS_PER_THREAD = 5
EVENTS_PER_RUN = 50


def recording_events() -> Iterator[dict[str, Any]]:
    """Events of one thread after another, a few runs each, without end."""
    thread = 0
    while True:
        for run in conversation(f"thread-{thread}", RUNS_PER_THREAD, EVENTS_PER_RUN):
            for event in run:
                if event["type"] == "TEXT_MESSAGE_CONTENT":
                    event["delta"] += "caf\u00e9 / "  # json.dumps writes \u00e9
                elif event["type"] == "TOOL_CALL_RESULT":
                    event["rawEvent"] = {"score": 1.0, "big": 1e2, "zero": -0.0}
                yield event
        thread += 1


def write_recording(path: Path, target_bytes: int, fmt: str) -> int:
    """Write about ``target_bytes`` of recording in ``fmt``, ending with a complete run;
    returns its event count. Never all in memory."""
    count = written = 0
    with path.open("w", encoding="utf-8") as out:
        if fmt == "json":
            out.write("[\n")
        for event in recording_events():
            text = json.dumps(event)
            if fmt == "json":
                text = ("," if count else "") + text + "\n"
            elif fmt == "jsonl":
                text = text + "\n"
            else:
                text = f"event: agui\r\ndata: {text}\r\n\r\n"
            out.write(text)
            written += len(text)
            count += 1
            if written >= target_bytes and event["type"] == "RUN_FINISHED":
                break
        if fmt == "json":
            out.write("]\n")
    return count


RAW_IMPORT = r"""
import sys
sys.path.insert(0, sys.argv[3])
import msgspec
from agui_store.backends import DEFAULT_BUSY_TIMEOUT_MS
from agui_store.backends.sqlite import connection
from agui_store.backends.sqlite.schema import EVENT_TYPE_CODES  # the rows as the store lays out
conn = connection.connect(sys.argv[2], busy_timeout_ms=DEFAULT_BUSY_TIMEOUT_MS)
INSERT = "INSERT INTO event_log(seq, run, type, payload) VALUES (?, ?, ?, ?)"
types = msgspec.json.Decoder()
seq, run, runs, batch = 0, 0, {}, []
with connection.immediate(conn):
    with open(sys.argv[1], "rb") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            event = types.decode(line)
            kind = event["type"]
            if kind == "RUN_STARTED":
                thread = runs.get(event["threadId"])
                if thread is None:
                    thread = runs[event["threadId"]] = len(runs) + 1
                    conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (?, ?, 0)",
                                 (thread, event["threadId"]))
                run += 1
                conn.execute("INSERT INTO runs(id, thread, run_id, lineage, created_at) "
                             "VALUES (?, ?, ?, 'root', 0)", (run, thread, event["runId"]))
            seq += 1
            batch.append((seq, run, EVENT_TYPE_CODES[kind], line.decode()))
            if len(batch) >= 1000:
                conn.executemany(INSERT, batch)
                batch = []
        conn.executemany(INSERT, batch)
conn.close()
"""


def measured(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child process (run in ``cwd``, so that
    ``python -m`` imports the package ``PYTHONPATH`` names, not the one in this folder)."""
    t0 = time.perf_counter()
    with subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE) as proc:
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024  # kilobytes on Linux


def raw_import_cmd(recording: Path, db: Path) -> list[str]:
    """The baseline: :data:`RAW_IMPORT` of a JSON Lines ``recording`` into ``db``."""
    return [sys.executable, "-c", RAW_IMPORT, str(recording), str(db), str(ROOT)]


def import_cmd(recording: Path, db: Path) -> list[str]:
    return [sys.executable, "-m", "agui_store", "--db", str(db), "import", str(recording)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=20.0, help="recording size (MB)")
    parser.add_argument("--format", choices=("jsonl", "json", "sse"), default="jsonl")
    parser.add_argument("--before", metavar="REV",
                        help="also import with the code of this git revision (its peak memory)")
    parser.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    args = parser.parse_args()
    header(f"import: a {args.mb:g} MB {args.format} recording")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        recording = folder / f"recording.{args.format}"
        events = write_recording(recording, int(args.mb * 1e6), args.format)
        size = recording.stat().st_size
        jsonl = recording
        if args.format != "jsonl":  # the baseline reads JSON Lines: same rows, same payloads
            jsonl = folder / "recording.jsonl"
            write_recording(jsonl, int(args.mb * 1e6), "jsonl")
        print(f"{size / 1e6:.1f} MB, {events} events, "
              f"{events // (RUNS_PER_THREAD * EVENTS_PER_RUN)} threads of "
              f"{RUNS_PER_THREAD} runs")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        raw_s, raw_mb = measured(raw_import_cmd(jsonl, folder / "raw.db"), env, folder)
        imp_s, imp_mb = measured(import_cmd(recording, folder / "store.db"), env, folder)
        print(f"{'':34}{'seconds':>9}{'events/s':>11}{'MB/s':>7}{'peak RSS':>10}")
        for name, secs, peak in (("raw apsw executemany (1 tx)", raw_s, raw_mb),
                                 ("agui-store import", imp_s, imp_mb)):
            print(f"{name:34}{secs:9.1f}{events / secs:11.0f}{size / 1e6 / secs:7.1f}"
                  f"{peak:8.0f} MB")
        print(f"import throughput vs raw: {raw_s / imp_s:.2f}; peak RSS {imp_mb:.0f} MB "
              f"for {size / 1e6:.0f} MB ({imp_mb / (size / 1e6):.2f}x the file)")
        for db in ("raw.db", "store.db"):
            for suffix in ("", "-wal", "-shm"):
                (folder / f"{db}{suffix}").unlink(missing_ok=True)
        if args.before:
            before = folder / "before"
            before.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "agui_store"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
            old_s, old_mb = measured(import_cmd(recording, folder / "before.db"),
                                     {**os.environ, "PYTHONPATH": str(before)}, folder)
            print(f"{args.before}: {old_s:.1f} s, peak RSS {old_mb:.0f} MB "
                  f"({old_mb / (size / 1e6):.2f}x the file)")


if __name__ == "__main__":
    main()
