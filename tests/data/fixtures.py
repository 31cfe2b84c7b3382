"""The writer shared by the kept store files of ``tests/data`` (``make_v*_fixture.py``).

Each kept file was written by the agui-store code of one schema version, so that every later
version is proven to open, migrate and read it back unchanged. A ``make_vN_fixture.py`` script
holds only what differs between them: the version, the last commit with that version's schema,
what it records and what it reads back. This module does the rest, once: run the script on
that commit's ``agui_store`` (``--from-git``), record into a fresh file, read it back, fold the
WAL into the file, and write ``vN.sqlite`` with ``vN.expected.json``.

(``.sqlite``, not ``.db``: the repository ignores ``*.db`` files.) Regenerate only on purpose:
the point of a fixture is that it is old. ``--out DIR`` writes the pair elsewhere, to compare
what a changed script writes with the kept files without touching them.

The read-backs use only what the version they run on offers: ``read_back_v1`` what version 1
could read (versions 1 and 7 are read with it), ``read_back_v9`` adds owners, hashes, diffs,
compacted streams, forks and the integrity check.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass(frozen=True)
class Fixture:
    """What one kept file is: its schema version, the code that writes it, its content."""

    version: int
    last_commit: str  # the last commit whose schema is ``version`` (``--from-git``'s default)
    record: Callable[[Any], None]  # appends everything the file holds to an open store
    read_back: Callable[[Any], dict[str, Any]]  # what that version reads from it, as JSON
    script: str  # the make_vN_fixture.py that describes it (rerun by ``--from-git``)

    @property
    def name(self) -> str:
        return f"v{self.version}"


# --- events ----------------------------------------------------------------------------------


def started(thread: str, run: str, **extra: Any) -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": thread, "runId": run, **extra}


def finished(thread: str, run: str, **extra: Any) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": thread, "runId": run, **extra}


def say(message_id: str, *parts: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        *[{"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": p} for p in parts],
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


# --- read-backs ------------------------------------------------------------------------------


def read_back_v1(store: Any) -> dict[str, Any]:
    """What version 1 reads from a file (runs, events, inputs, branches and each run's
    checkout), compared as JSON. Only calls version 1 had: it runs on version 1 code."""
    out: dict[str, Any] = {"threads": store.threads(), "runs": {}, "branches": {}}
    for thread in store.threads():
        out["branches"][thread] = [
            {"name": b.name, "run": b.run_id, "default": b.default} for b in store.branches(thread)
        ]
        for run in store.runs(thread):
            co = store.checkout(run.run_id, thread_id=thread)
            out["runs"][f"{thread}/{run.run_id}"] = {
                "parent": run.parent_run_id,
                "lineage": run.lineage,
                "status": run.status,
                "event_count": run.event_count,
                "synthetic": run.synthetic,
                "has_input": run.has_input,
                "sent_parent": run.sent_parent_run_id,
                "branches": list(run.branches),
                "log": [r.run_id for r in store.log(run.run_id, thread_id=thread)],
                "events": store.events(run.run_id, thread_id=thread),
                "input": store.input(run.run_id, thread_id=thread),
                "checkout": {
                    "messages": co.messages,
                    "state": co.state,
                    "interrupts": co.interrupts,
                },
            }
    return json.loads(json.dumps(out))


#: The owners whose view of a file ``read_back_v9`` records ("mallory" owns nothing).
SCOPES_V9 = ("alice", "bob", "mallory")


def _run_v9(run: Any) -> dict[str, Any]:
    return {
        "parent": run.parent_run_id,
        "lineage": run.lineage,
        "status": run.status,
        "complete": run.is_complete,
        "event_count": run.event_count,
        "synthetic": run.synthetic,
        "has_input": run.has_input,
        "sent_parent": run.sent_parent_run_id,
        "branches": list(run.branches),
        "last_seq": run.last_seq,
        "hash": run.hash,
    }


def _change_v9(change: Any) -> dict[str, Any] | None:
    if change is None:
        return None
    return {
        "messages": [dataclasses.asdict(m) for m in change.messages],
        "state_patch": change.state_patch,
    }


def read_back_v9(store: Any) -> dict[str, Any]:
    """Every public read of a version 9 file, as JSON: the threads each owner sees, and for
    every thread its branches, each two whose runs differ diffed (both modes), and
    for every run its record, log, events, input, checkout, compacted stream and the input a
    fork of it sends, read as the operator and, for an owned thread, as its owner; then what
    ``check()`` reports. Only timestamps are left out (they say when it was written)."""
    out: dict[str, Any] = {
        "threads": {"*": store.threads(), **{s: store.threads(scope=s) for s in SCOPES_V9}},
        "branches": {},
        "diffs": {},
        "runs": {},
    }
    owner_of = {t: s for s in SCOPES_V9 for t in store.threads(scope=s)}
    for thread in store.threads():
        scope = owner_of.get(thread)
        branches = store.branches(thread, scope=scope)
        assert [b.run_id for b in branches] == [b.run_id for b in store.branches(thread)], (
            "the owner and the operator see the same branches"
        )
        out["branches"][thread] = [
            {"name": b.name, "run": b.run_id, "default": b.default} for b in branches
        ]
        compared: set[frozenset[str]] = set()
        for a, b in itertools.combinations(branches, 2):
            if a.run_id == b.run_id or frozenset((a.run_id, b.run_id)) in compared:
                continue
            compared.add(frozenset((a.run_id, b.run_id)))
            for mode in ("three-dot", "two-dot"):
                d = store.diff(a.name, b.name, thread_id=thread, mode=mode, scope=scope)
                out["diffs"][f"{thread}/{a.name}...{b.name}/{mode}"] = {
                    "a": d.a.run_id,
                    "b": d.b.run_id,
                    "merge_base": d.merge_base.run_id if d.merge_base else None,
                    "a_runs": [r.run_id for r in d.a_runs],
                    "b_runs": [r.run_id for r in d.b_runs],
                    "changes": _change_v9(d.changes),
                    "a_changes": _change_v9(d.a_changes),
                }
        runs = store.runs(thread, scope=scope)
        assert [_run_v9(r) for r in runs] == [_run_v9(r) for r in store.runs(thread)]
        for run in runs:
            rid, where = run.run_id, {"thread_id": thread, "scope": scope}
            co = store.checkout(rid, **where)
            assert _run_v9(store.get_run(rid, thread_id=thread)) == _run_v9(run)
            out["runs"][f"{thread}/{rid}"] = {
                **_run_v9(run),
                "log": [r.run_id for r in store.log(rid, **where)],
                "events": store.events(rid, **where),
                "input": store.input(rid, **where),
                "checkout": {
                    "messages": co.messages,
                    "state": co.state,
                    "interrupts": co.interrupts,
                    "warnings": co.warnings,
                },
                "compacted": store.reconnect_stream(rid, **where),
                "fork": store.fork(rid, run_id="next", **where),
            }
    report = store.check()
    out["check"] = {
        "ok": report.ok,
        "checked": list(report.checked),
        "problems": [str(p) for p in report.problems],
        "warnings": [str(w) for w in report.warnings],
    }
    return json.loads(json.dumps(out))


# --- writing ---------------------------------------------------------------------------------


def write(fixture: Fixture, folder: Path) -> None:
    """Record ``fixture`` into ``folder/vN.sqlite`` with the importable ``agui_store`` (which
    must write its schema version) and write what it reads back to ``vN.expected.json``."""
    import apsw

    import agui_store
    from agui_store.backends.sqlite import schema

    if fixture.version != schema.SCHEMA_VERSION:
        raise SystemExit(
            f"{agui_store.__file__} writes schema version {schema.SCHEMA_VERSION}; "
            f"run with --from-git to use version {fixture.version} code"
        )
    db, expected = folder / f"{fixture.name}.sqlite", folder / f"{fixture.name}.expected.json"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with agui_store.open(db) as store:
        fixture.record(store)
        found = fixture.read_back(store)
    conn = apsw.Connection(str(db))  # the last connection: fold the WAL into the file
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()
    expected.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(
        f"wrote {db} ({db.stat().st_size} bytes, schema version {fixture.version}, "
        f"by {Path(agui_store.__file__).parent}) and {expected.name}"
    )


def main(fixture: Fixture, description: str) -> int:
    """The command line of a ``make_vN_fixture.py`` script."""
    parser = argparse.ArgumentParser(description=description.split("\n")[0])
    parser.add_argument(
        "--from-git",
        nargs="?",
        const=fixture.last_commit,
        metavar="REV",
        help=f"use agui_store as of this revision (default {fixture.last_commit})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=HERE,
        metavar="DIR",
        help="write the file and its expected JSON here (default: tests/data, the kept ones)",
    )
    args = parser.parse_args()
    if args.from_git:
        with tempfile.TemporaryDirectory() as folder:
            archive = subprocess.run(
                ["git", "archive", args.from_git, "agui_store"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
            env = {**os.environ, "PYTHONPATH": folder}
            again = [sys.executable, fixture.script, "--out", str(args.out.resolve())]
            return subprocess.run(again, env=env, check=False).returncode
    args.out.mkdir(parents=True, exist_ok=True)
    write(fixture, args.out)
    return 0
