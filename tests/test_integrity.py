"""``Store.check()`` and ``agui-store check``: every invariant broken on purpose, through a raw
connection, is reported precisely; and append-only holds inside SQLite, for any driver.

Each corruption test builds the same small store (two conversations: branches, a live run, a
run the store named itself, a late RUN_ERROR), breaks one invariant the way a buggy tool or a
hand-edit would (dropping the append-only triggers for the moment it needs to), then compares
the whole report line by line, and the CLI's exit code and output.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest

import agui_store
from agui_store import cli, testing
from agui_store.backends.sqlite import checks as sqlite_checks
from agui_store.backends.sqlite import schema
from agui_store.backends.sqlite.backend import check_file
from agui_store.cli.commands import REBUILT
from agui_store.engine import integrity
from tests.workers.harness import ROOT, dump, worker_env

V = schema.SCHEMA_VERSION


def build(path: Path) -> None:
    """The store every test starts from. Keys and seqs below are fixed by this order:

    thread 't' (#1): r1 (#1, seq 1-5, batch #1), r2 (#2, seq 6-10, batch #2, parent r1),
      r3 (#3, live: seq 11-12 batch #3, seq 13 batch #4); branch 'feature' -> r1.
    thread 'u' (#2): a synthetic run (#4, seq 14, batch #5), u1 (#5, seq 15-16 batch #6,
      then a late RUN_ERROR at seq 17, batch #7).
    """
    with agui_store.open(path) as store:
        for run_id, text in (("r1", "one"), ("r2", "two")):
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
                    {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}", "role": "assistant"},
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}", "delta": text},
                    {"type": "TEXT_MESSAGE_END", "messageId": f"m-{run_id}"},
                    {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
                ]
            )
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r3"},
                {"type": "TEXT_MESSAGE_START", "messageId": "m-r3", "role": "assistant"},
            ]
        )
        store.append(
            [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-r3", "delta": "..."}], thread_id="t"
        )
        store.append([{"type": "RUN_ERROR", "message": "failed before it started"}], thread_id="u")
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "u", "runId": "u1"},
                {"type": "RUN_FINISHED", "threadId": "u", "runId": "u1"},
            ]
        )
        store.append([{"type": "RUN_ERROR", "message": "late"}], thread_id="u")
        store.branch("feature", "r1", thread_id="t")
        store.compact()  # a checkpoint for every complete run, for the corruptions to break


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pristine") / "store.db"
    build(path)
    return path


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    shutil.copy(pristine, path)
    return path


@contextlib.contextmanager
def raw(path: Path) -> Iterator[apsw.Connection]:
    """A plain connection, as another tool would open it (foreign keys off, the default)."""
    conn = apsw.Connection(str(path))
    try:
        yield conn
    finally:
        conn.close()


@contextlib.contextmanager
def unguarded(conn: apsw.Connection, *tables: str) -> Iterator[None]:
    """Drop the append-only triggers of ``tables`` for the block, then put them back."""
    marks = ",".join("?" * len(tables))
    triggers = conn.execute(
        f"SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND tbl_name IN ({marks})",
        tables,
    ).fetchall()
    for name, _ in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    try:
        yield
    finally:
        for _, sql in triggers:
            conn.execute(sql)


def problems(path: Path) -> list[str]:
    with agui_store.open(path) as store:
        report = store.check()
    assert report.checked == EXPECTED_CHECKS
    assert bool(report) is report.ok is (not report.problems)
    return [str(p) for p in report.problems]


#: The tables of this schema version, and the checks that run on an SQLite store: the file's,
#: then the store's own.
TABLES = {name for kind, name in sqlite_checks.expected_schema() if kind == "table"}
EXPECTED_CHECKS = (*sqlite_checks.CHECKS, *integrity.CHECKS)


def run_cli(path: Path, *extra: str) -> tuple[int, str]:
    """``agui-store check`` through its real entry point, in this process."""
    import io

    out = io.StringIO()
    code = cli.main(["check", "--db", str(path), *extra], out=out)
    return code, out.getvalue()


# --- a sound file -------------------------------------------------------------------------


def test_a_sound_store_passes_every_check_and_the_cli_says_ok(db: Path) -> None:
    with agui_store.open(db) as store:
        report = store.check()
        assert report.ok and report.problems == [] and report.warnings == []
        assert report.checked == EXPECTED_CHECKS
    code, out = run_cli(db)
    assert code == 0 and out.startswith("ok (sqlite, foreign_keys, schema, lineage")
    code, out = run_cli(db, "--head")
    assert code == 0 and out.splitlines()[1] == f"head {report.head}"


UNDERIVED = (
    "derived: 1 run of 1 thread waits to be derived (an interrupted copy or import, "
    "derive_on_append=False, an older version's store, or events after a run's end left "
    "them): until they are, a search may not find their messages; 'agui-store compact' "
    "derives them"
)


def test_events_recorded_after_a_runs_end_on_purpose_are_a_warning_not_a_problem(
    db: Path,
) -> None:
    """``check_sequence=False`` records buggy producers as they are: reported, not failed."""
    with agui_store.open(db) as store:
        store.append(
            [{"type": "TEXT_MESSAGE_END", "messageId": "m-u1"}], thread_id="u", check_sequence=False
        )
        report = store.check()
    assert report.ok
    warning = (
        "runs: run 'u1' (thread 'u', #5) has events after its terminal RUN_FINISHED at seq "
        "16: seq 18 (TEXT_MESSAGE_END); only append(check_sequence=False) records that"
    )
    # The run's derived data went with the late event: it waits to be derived again.
    assert [str(w) for w in report.warnings] == [warning, UNDERIVED]
    code, out = run_cli(db)
    assert code == 0
    on_the_command_line = warning.replace(  # the option that does it there
        "append(check_sequence=False)", "import --no-sequence-check"
    )
    assert out.splitlines()[:2] == [f"warning: {on_the_command_line}", f"warning: {UNDERIVED}"]
    assert out.splitlines()[2].startswith("ok, 2 warnings (sqlite,")
    code, out = run_cli(db, "--json")
    assert json.loads(out)["warnings"][0] == {"check": "runs", "detail": warning[len("runs: ") :]}
    with agui_store.open(db) as store:
        store.compact()
        assert [str(w) for w in store.check().warnings] == [warning]


def test_a_payload_with_duplicate_keys_is_judged_as_the_store_reads_it(db: Path) -> None:
    """SQLite's json_extract takes the first of duplicate keys, the store (like JSON.parse)
    the last: the check must not report a sound event."""
    with agui_store.open(db) as store:
        store.append('{"type":"RUN_STARTED","threadId":"t","runId":"dup","type":"RUN_STARTED"}')
        store.append(
            '{"type":"STEP_STARTED","stepName":"a","type":"CUSTOM","name":"n","value":1}',
            thread_id="t",
            run_id="dup",  # the fixture leaves r3 open in thread t too
        )
        assert store.check().ok


def test_a_large_store_is_checked_in_one_pass(tmp_path: Path) -> None:
    path = tmp_path / "large.db"
    with agui_store.open(path) as store:
        for i in range(300):
            thread = f"t{i % 7}"
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": thread, "runId": f"r{i}"},
                    *[{"type": "CUSTOM", "name": "n", "value": k} for k in range(20)],
                    {"type": "RUN_FINISHED", "threadId": thread, "runId": f"r{i}"},
                ]
            )
        report = store.check()
    assert report.ok, report.problems


# --- each invariant, broken ---------------------------------------------------------------


def _corrupt_index(conn: apsw.Connection) -> None:
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute(
        "UPDATE sqlite_schema SET sql = 'CREATE INDEX events_by_run ON event_log(payload, seq)'"
        " WHERE name = 'events_by_run'"
    )
    conn.execute("PRAGMA writable_schema=OFF")


def _ghost_branch(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO branches(thread, name, run, updated_at) VALUES (1, 'ghost', 99, 0)")


def _orphan_event(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO events(seq, run, type, payload) VALUES "
        """(18, 99, 'CUSTOM', '{"type":"CUSTOM","name":"n","value":1}')"""
    )
    conn.execute(
        "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) "
        "VALUES (99, 18, 18, 1, 0)"
    )


def _lineage_cycle(conn: apsw.Connection) -> None:
    conn.execute("PRAGMA ignore_check_constraints=ON")
    with unguarded(conn, "runs"):
        conn.execute("UPDATE runs SET parent = 2 WHERE id = 1")


def _lineage_across_threads(conn: apsw.Connection) -> None:
    with unguarded(conn, "runs"):
        conn.execute("UPDATE runs SET parent = 2 WHERE id = 5")


def _lineage_reason(conn: apsw.Connection) -> None:
    with unguarded(conn, "runs"):
        conn.execute("UPDATE runs SET lineage = 'guessed' WHERE id = 2")
        conn.execute("UPDATE runs SET lineage = 'head' WHERE id = 1")


def _branch_into_another_thread(conn: apsw.Connection) -> None:
    conn.execute("UPDATE branches SET run = 5 WHERE name = 'feature'")


def _branch_shadowing_main(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO branches(thread, name, run, updated_at) VALUES (1, 'main', 1, 0)")


def _branch_of_no_thread(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO branches(thread, name, run, updated_at) VALUES (9, 'lost', 1, 0)")


def _event_cut_out_of_a_batch(conn: apsw.Connection) -> None:
    with unguarded(conn, "event_log"):
        conn.execute("DELETE FROM event_log WHERE seq = 8")


def _event_in_no_batch(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO events(seq, run, type, payload) VALUES (18, 3, "
        """'TEXT_MESSAGE_CONTENT', '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-r3","""
        """"delta":"!"}')"""
    )


def _batch_of_another_run(conn: apsw.Connection) -> None:
    with unguarded(conn, "batches"):
        conn.execute("UPDATE batches SET run = 1 WHERE id = 2")


def _overlapping_batches(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) VALUES (2, 9, 10, 2, 0)"
    )


def _batch_count(conn: apsw.Connection) -> None:
    conn.execute("PRAGMA ignore_check_constraints=ON")
    with unguarded(conn, "batches"):
        conn.execute("UPDATE batches SET count = 4 WHERE id = 2")


def _batch_outcome(conn: apsw.Connection) -> None:
    with unguarded(conn, "batches"):
        conn.execute("UPDATE batches SET outcome = 'error' WHERE id = 1")
        conn.execute("UPDATE batches SET outcome = NULL WHERE id = 7")
        conn.execute("UPDATE batches SET outcome = 'finished' WHERE id = 3")


def _run_without_run_started(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO runs(id, thread, run_id, parent, lineage, created_at) "
        "VALUES (6, 1, 'r9', 3, 'head', 0)"
    )
    conn.execute(
        "INSERT INTO events(seq, run, type, payload) VALUES (18, 6, "
        """'TEXT_MESSAGE_START', '{"type":"TEXT_MESSAGE_START","messageId":"x"}')"""
    )
    conn.execute(
        "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) VALUES (6, 18, 18, 1, 0)"
    )


def _run_with_no_events(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO runs(id, thread, run_id, parent, lineage, created_at) "
        "VALUES (6, 1, 'empty', 3, 'head', 0)"
    )


def _synthetic_run_started(conn: apsw.Connection) -> None:
    with unguarded(conn, "runs"):
        conn.execute("UPDATE runs SET synthetic = 1 WHERE id = 1")


def _second_run_started(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO events(seq, run, type, payload) VALUES (18, 3, 'RUN_STARTED', "
        """'{"type":"RUN_STARTED","threadId":"t","runId":"r3b"}')"""
    )
    conn.execute(
        "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) VALUES (3, 18, 18, 1, 0)"
    )


def _run_renamed(conn: apsw.Connection) -> None:
    with unguarded(conn, "runs"):
        conn.execute("UPDATE runs SET run_id = 'renamed' WHERE id = 1")
    with unguarded(conn, "threads"):
        conn.execute("UPDATE threads SET thread_id = 'u2' WHERE id = 2")


def _payload_not_json(conn: apsw.Connection) -> None:
    with unguarded(conn, "event_log"):
        conn.execute(
            'UPDATE event_log SET payload = \'{"type":"TEXT_MESSAGE_CONTENT",\' WHERE seq = 3'
        )
        conn.execute("UPDATE event_log SET payload = '[1, 2]' WHERE seq = 4")


def _type_column(conn: apsw.Connection) -> None:
    with unguarded(conn, "event_log"):
        conn.execute(
            "UPDATE event_log SET type = (SELECT code FROM event_types "
            "WHERE name = 'TEXT_MESSAGE_END') WHERE seq = 3"
        )


def _input_not_json(conn: apsw.Connection) -> None:
    with unguarded(conn, "runs"):
        conn.execute("UPDATE runs SET input = 'nope' WHERE id = 2")


def _application_id(conn: apsw.Connection) -> None:
    # Unmarked: still opened (recognized by its tables), and reported. Another application's
    # id makes the file refused at open instead (tests/test_opening.py).
    conn.execute("PRAGMA application_id = 0")


def _trigger_dropped(conn: apsw.Connection) -> None:
    conn.execute("DROP TRIGGER event_log_are_append_only_update")


def _trigger_disarmed(conn: apsw.Connection) -> None:
    conn.execute("DROP TRIGGER runs_are_append_only_delete")
    conn.execute(
        "CREATE TRIGGER runs_are_append_only_delete BEFORE DELETE ON runs BEGIN SELECT 1; END"
    )


def if_checkpoints(*lines: str) -> list[str]:
    """Lines expected only from a schema with checkpoints (version 2 on)."""
    return list(lines) if "checkpoints" in TABLES else []


def if_digests(*lines: str) -> list[str]:
    """Lines expected only from a schema with lineage digests (version 6 on)."""
    return list(lines) if "lineage_digests" in TABLES else []


def _digest_of_a_live_run(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO lineage_digests(ids_hash, run) VALUES (x'00', 3)")


def _checkpoint_tail_cut(conn: apsw.Connection) -> None:
    conn.execute("UPDATE checkpoints SET tail = '[]' WHERE run = 2")


def _checkpoint_tail_dangling(conn: apsw.Connection) -> None:
    conn.execute(
        "UPDATE checkpoints SET tail = json_insert(tail, '$[#]', json('[999999, 1]')) "
        "WHERE run = 2"
    )


def _checkpoint_of_a_live_run(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO checkpoints(run, length, chunks, tail, state, ids_hash, created_at) "
        "SELECT 3, length, chunks, tail, state, ids_hash, 0 FROM checkpoints WHERE run = 2"
    )


def _checkpoint_tail_not_ids(conn: apsw.Connection) -> None:
    conn.execute("""UPDATE checkpoints SET tail = '{"m": 1}' WHERE run = 2""")


def _blob_tampered(conn: apsw.Connection) -> None:
    conn.execute(
        'UPDATE blobs SET data = CAST(\'[{"role":"forged"}]\' AS BLOB) WHERE id = '
        "(SELECT tail ->> '$[0][0]' FROM checkpoints WHERE run = 1)"
    )


R1, R2, R3 = ("run 'r1' (thread 't', #1)", "run 'r2' (thread 't', #2)", "run 'r3' (thread 't', #3)")
SYN, U1 = "run 'run-error-14' (thread 'u', #4)", "run 'u1' (thread 'u', #5)"
FINE = ("an ancestor walk would never end", "a parent is always older")
RECORD = (
    "its record (run id, thread, lineage reason, sent parentRunId, synthetic flag or creation "
    "time) differs from what its hash covers"
)
EVENTS = (
    "its events (their positions, types or bytes), outcome or time differ from what the "
    "run's hash covers"
)
UNHASHED = "has no hash: it was not recorded by agui-store"

CORRUPTIONS: list[tuple[str, Callable[[apsw.Connection], None], list[str]]] = [
    (
        "a corrupt index",
        _corrupt_index,
        [
            *[f"sqlite: row {seq} missing from index events_by_run" for seq in range(1, 18)],
            "schema: index events_by_run is not what schema version {V} defines (found: CREATE "
            "INDEX events_by_run ON event_log(payload, seq))",
        ],
    ),
    (
        "a branch to a missing run",
        _ghost_branch,
        [
            "foreign_keys: a branches row names a missing runs row (through run)",
            "refs: branch 'ghost' of thread 't' points at run #99, which does not exist",
        ],
    ),
    (
        "an event of a missing run",
        _orphan_event,
        [
            "foreign_keys: batches row 8: run = 99 names no row of runs",
            "foreign_keys: events row 18: run = 99 names no row of runs",
        ],
    ),
    (
        "a lineage cycle",
        _lineage_cycle,
        [
            "sqlite: CHECK constraint failed in runs",
            f"lineage: {R1} records reason 'root' but has lineage parent {R2}",
            f"lineage: {R1} has lineage parent {R2}, recorded after it (#2 >= #1): {FINE[1]}",
            f"lineage: lineage cycle: 'r1' -> 'r2' -> 'r1' (thread 't', #1, #2): {FINE[0]}",
            f"hashes: {R1}: its lineage parent is {R2}, whose hash was * when the run was "
            "placed, but its hash covers no parent",
        ],
    ),
    (
        "a lineage parent in another thread",
        _lineage_across_threads,
        [
            f"lineage: {U1} has lineage parent {R2} in another thread: lineage stays within one "
            "thread",
            # u1's checkpoint patched the state of its former parent, no ancestor any more.
            *if_checkpoints(
                f"checkpoints: the checkpoint of {U1} stores its state as patches on the state "
                f"of {SYN}, which is not a lineage ancestor of the run"
            ),
            f"hashes: {U1}: its lineage parent is {R2}, whose hash was * when the run was "
            f"placed, but its hash covers a parent whose hash was * ({SYN})",
            f"derived: the lineage digest of {U1} is *, but a replay of the log gives *: "
            "lineage rule 3 would place runs by a view the run does not have",
            f"derived: the checkpoint of {U1} differs from a replay of the log at 0 messages "
            "where the replay has 2",
        ],
    ),
    (
        "a lineage reason that says otherwise",
        _lineage_reason,
        [
            f"lineage: {R1} has no lineage parent but records reason 'head' (a run without a "
            "parent is a 'root')",
            f"lineage: {R2} records lineage reason 'guessed', which is not one of explicit, head, "
            "messages, parentRunId, root",
            f"hashes: {R1}: {RECORD}",
            f"hashes: {R2}: {RECORD}",
        ],
    ),
    (
        "a branch into another thread",
        _branch_into_another_thread,
        [
            f"refs: branch 'feature' of thread 't' points at {U1}, in another thread: a branch "
            "points into its own thread",
        ],
    ),
    (
        "a branch shadowing the default branch",
        _branch_shadowing_main,
        [
            "refs: branch 'main' of thread 't' shadows the name every thread reserves for its "
            "default branch (it follows the newest run)",
        ],
    ),
    (
        "a branch of no thread",
        _branch_of_no_thread,
        [
            "foreign_keys: a branches row names a missing threads row (through thread)",
            "refs: branch 'lost' belongs to thread #9, which does not exist",
        ],
    ),
    (
        "an event cut out of its batch",
        _event_cut_out_of_a_batch,
        [
            f"batches: batch #2 of {R2} (seq 6..10) is missing seq 8: part of the batch is gone",
            f"hashes: {R2}: batch #2 (seq 6..10): {EVENTS}",
            f"derived: the checkpoint of {R2} differs from a replay of the log at message 1 "
            "(id 'm-r2')",
        ],
    ),
    (
        "an event in no batch",
        _event_in_no_batch,
        [
            f"batches: event seq 18 (TEXT_MESSAGE_CONTENT) of {R3} is in no batch",
        ],
    ),
    (
        "a batch holding another run's events",
        _batch_of_another_run,
        [
            f"batches: batch #2 of {R1} (seq 6..10) holds seq 6..10 of {R2}: a batch holds one "
            "run's events",
            f"batches: batch #2 of {R1} (seq 6..10) records outcome 'finished', but holds no "
            "RUN_FINISHED or RUN_ERROR",
            *if_checkpoints(
                f"checkpoints: the checkpoint of {R2}: the run is incomplete, and a checkpoint "
                "holds the view at a run's end"
            ),
            *if_digests(
                f"lineage_digests: the lineage digest of {R2}: the run is incomplete, and a "
                "digest is of the view at a run's end"
            ),
            f"hashes: {R1}: batch #2 (seq 6..10): {EVENTS}",
            f"hashes: {R2}: its lineage parent is {R1}, whose hash was * when the run was "
            f"placed, but its hash covers a parent whose hash was * ({R1})",
            f"hashes: {R3}: its lineage parent is {R2}, whose hash was * when the run was "
            f"placed, but its hash covers a parent whose hash was * ({R1})",
            f"derived: the checkpoint of {R2} was derived at run hash *, which is none of the "
            "run's: the run's hashes were rewritten since",
        ],
    ),
    (
        "two batches claiming the same events",
        _overlapping_batches,
        [
            f"batches: batch #8 of {R2} claims seq 9..10, already claimed by batch #2",
            f"hashes: {R2}: batch #8 (seq 9..10) {UNHASHED}",
        ],
    ),
    (
        "a batch count that disagrees with its range",
        _batch_count,
        [
            "sqlite: CHECK constraint failed in batches",
            f"batches: batch #2 of {R2} (seq 6..10) records count 4, but its range spans 5 events",
        ],
    ),
    (
        "batch outcomes that disagree with their events",
        _batch_outcome,
        [
            f"batches: batch #1 of {R1} (seq 1..5) records outcome 'error', but its terminal event"
            " at seq 5 ends the run as 'finished'",
            f"batches: batch #3 of {R3} (seq 11..12) records outcome 'finished', but holds no "
            "RUN_FINISHED or RUN_ERROR",
            f"batches: batch #7 of {U1} (seq 17..17) records outcome None, but its terminal event "
            "at seq 17 ends the run as 'error'",
            f"hashes: {R1}: batch #1 (seq 1..5): {EVENTS}",
            f"hashes: {R3}: batch #3 (seq 11..12): {EVENTS}",
            f"hashes: {U1}: batch #7 (seq 17..17): {EVENTS}",
        ],
    ),
    (
        "a run that does not begin with RUN_STARTED",
        _run_without_run_started,
        [
            "runs: run 'r9' (thread 't', #6) begins with TEXT_MESSAGE_START at seq 18, not "
            "RUN_STARTED",
            f"hashes: run 'r9' (thread 't', #6) {UNHASHED}",
        ],
    ),
    (
        "a run with no events",
        _run_with_no_events,
        [
            "runs: run 'empty' (thread 't', #6) has no events",
            f"hashes: run 'empty' (thread 't', #6) {UNHASHED}",
        ],
    ),
    (
        "a synthetic run holding a RUN_STARTED",
        _synthetic_run_started,
        [
            f"runs: {R1} is synthetic (the store named it for events that started no run) but "
            "holds a RUN_STARTED at seq 1",
            f"hashes: {R1}: {RECORD}",
        ],
    ),
    (
        "a second RUN_STARTED inside a run",
        _second_run_started,
        [
            f"runs: {R3} holds a second RUN_STARTED at seq 18: a RUN_STARTED always opens a "
            "new run",
            f"hashes: {R3}: batch #8 (seq 18..18) {UNHASHED}",
        ],
    ),
    (
        "a run and a thread renamed",
        _run_renamed,
        [
            "runs: run 'renamed' (thread 't', #1): its RUN_STARTED at seq 1 names runId 'r1', not "
            "'renamed'",
            "runs: run 'u1' (thread 'u2', #5): its RUN_STARTED at seq 15 names threadId 'u', not "
            "'u2'",
            f"hashes: run 'renamed' (thread 't', #1): {RECORD}",
            f"hashes: run 'run-error-14' (thread 'u2', #4): {RECORD}",
            f"hashes: run 'u1' (thread 'u2', #5): {RECORD}",
        ],
    ),
    (
        "payloads that are not JSON objects",
        _payload_not_json,
        [
            f"events: event seq 3 (TEXT_MESSAGE_CONTENT) of {R1}: the payload is not JSON: *",
            f"events: event seq 4 (TEXT_MESSAGE_END) of {R1}: the payload is not a JSON object",
            f"hashes: {R1}: batch #1 (seq 1..5): {EVENTS}",
            f"derived: {R1} has derived data (a checkpoint or lineage digest), but its log no "
            "longer replays: *",
        ],
    ),
    (
        "a type column that disagrees with the payload",
        _type_column,
        [
            f"events: event seq 3 (TEXT_MESSAGE_END) of {R1}: the payload's type is "
            "'TEXT_MESSAGE_CONTENT', but the type column says 'TEXT_MESSAGE_END'",
            f"hashes: {R1}: batch #1 (seq 1..5): {EVENTS}",
        ],
    ),
    (
        "an input that is not JSON",
        _input_not_json,
        [
            f"runs: the input of {R2} is not JSON: *",
            f"hashes: {R2}: its input differs from what its hash covers (the input as stored "
            "hashes to *, the run recorded none)",
            f"derived: {R2} has derived data (a checkpoint or lineage digest), but its log no "
            "longer replays: *",
        ],
    ),
    (
        "no application id",
        _application_id,
        [
            "schema: application_id is 0x00000000, not 0x41475549 ('AGUI'): the file does not say "
            "it is an agui-store file",
        ],
    ),
    (
        "a dropped append-only trigger",
        _trigger_dropped,
        [
            "schema: trigger event_log_are_append_only_update is missing: UPDATE of event_log "
            "is no longer refused",
        ],
    ),
    (
        "a disarmed append-only trigger",
        _trigger_disarmed,
        [
            f"schema: trigger runs_are_append_only_delete is not what schema version {V} defines "
            "(found: CREATE TRIGGER runs_are_append_only_delete BEFORE DELETE ON runs BEGIN "
            "SELECT 1; END)",
        ],
    ),
]

if "lineage_digests" in TABLES:
    CORRUPTIONS += [
        (
            "a lineage digest of a live run",
            _digest_of_a_live_run,
            [
                f"lineage_digests: the lineage digest of {R3}: the run is incomplete, and a "
                "digest is of the view at a run's end"
            ],
        ),
    ]

if "checkpoints" in TABLES:
    _FIRST = hashlib.sha256(b'[{"role":"forged"}]').hexdigest()
    CORRUPTIONS += [
        (
            "a checkpoint whose tail lost its messages",
            _checkpoint_tail_cut,
            [
                f"checkpoints: the checkpoint of {R2} holds 0 messages (0 chunks and a tail "
                "of 0), but records 2",
                f"checkpoints: checkpoint_segments lists blob ids 1, 3 for {R2}, but its "
                "checkpoint's tail does not hold them",
                f"derived: the checkpoint of {R2} cannot be read: its checkpoint holds 0 "
                "messages, not 2",
            ],
        ),
        (
            "a checkpoint whose tail names a missing blob",
            _checkpoint_tail_dangling,
            [
                f"checkpoints: the checkpoint of {R2}: segment 2 of its tail (blob id 999999) "
                "is missing, where the tail says 1",
                f"checkpoints: the checkpoint of {R2} holds 3 messages (0 chunks and a tail "
                "of 3), but records 2",
                f"checkpoints: the checkpoint of {R2}: its tail's blob ids 999999 are not in "
                "checkpoint_segments, the list an erasure reads to keep the blobs a checkpoint "
                "uses",
                f"derived: the checkpoint of {R2} cannot be read: a blob its checkpoint lists "
                "is missing",
            ],
        ),
        (
            "a checkpoint of a live run",
            _checkpoint_of_a_live_run,
            [
                f"checkpoints: the checkpoint of {R3}: the run is incomplete, and a checkpoint "
                "holds the view at a run's end",
                f"derived: the checkpoint of {R3} differs from a replay of the log at 2 "
                "messages where the replay has 3",
                f"derived: the checkpoint of {R3}: its state differs from a replay of the log",
                f"derived: the checkpoint of {R3} records no hashes: it was not written by "
                "agui-store",
            ],
        ),
        (
            "a checkpoint whose tail is not a list of blob ids",
            _checkpoint_tail_not_ids,
            [
                f"checkpoints: the checkpoint of {R2}: its tail is not a JSON array of [blob id, "
                "count] pairs",
                f"derived: the checkpoint of {R2} cannot be read: checkpoint of run 2: its "
                "tail is not a list of [blob id, count]: *",
            ],
        ),
        (
            "a tampered message blob",
            _blob_tampered,
            [
                f"blobs: blob *: its data hashes to {_FIRST}: the blob is corrupt",
                f"derived: the checkpoint of {R1} differs from a replay of the log at message 0 "
                "(id 'm-r1')",
                f"derived: the checkpoint of {R1} fails its hashes: a blob of its checkpoint "
                "does not hash to its address *",
                f"derived: the checkpoint of {R2} differs from a replay of the log at message 0 "
                "(id 'm-r1')",
                f"derived: the checkpoint of {R2} fails its hashes: a blob of its checkpoint "
                "does not hash to its address *",
            ],
        ),
    ]


def matches(found: list[str], expected: list[str]) -> bool:
    """Line by line; ``*`` in an expected line stands for any text (SQLite's own wording)."""
    import fnmatch

    if len(found) != len(expected):
        return False
    return all(
        fnmatch.fnmatchcase(f, e.replace("{V}", str(V)).replace("[", "[[]"))
        for f, e in zip(found, expected, strict=True)
    )


@pytest.mark.parametrize(
    ("corrupt", "expected"), [pytest.param(c, e, id=name) for name, c, e in CORRUPTIONS]
)
def test_each_broken_invariant_is_reported_precisely_and_fails_the_cli(
    db: Path, corrupt: Callable[[apsw.Connection], None], expected: list[str]
) -> None:
    with raw(db) as conn:
        corrupt(conn)
    found = problems(db)
    assert matches(found, expected), "\n".join(found)
    code, out = run_cli(db)
    assert code == 1
    summary = f"{len(found)} problem{'' if len(found) == 1 else 's'} ({', '.join(EXPECTED_CHECKS)})"
    derived = all(p.split(":", 1)[0] in REBUILT for p in found)
    advice = (
        f"every problem is in data derived from the log, and the log checks whole: "
        f"agui-store --db {db} rebuild derives it again"
    )
    assert out.splitlines() == [*found, summary, *([advice] if derived else [])]
    code, out = run_cli(db, "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert [f"{p['check']}: {p['detail']}" for p in report["problems"]] == found
    if derived:  # as the advice says: rebuilding leaves no problem
        with agui_store.open(db) as store:
            store.rebuild()
        assert problems(db) == []


def test_an_echo_refs_row_no_store_writes_is_named_by_its_run_and_event(db: Path) -> None:
    """A row added by another tool: on a RUN_STARTED that echoes no input, and on an event
    that is no RUN_STARTED. Each is named by its thread, run and event, not by a key the
    replay missed."""
    with raw(db) as conn:
        conn.execute("""INSERT INTO echo_refs(seq, refs) VALUES (1, '{"messages":[[0,1]]}')""")
        conn.execute("""INSERT INTO echo_refs(seq, refs) VALUES (16, '{"state":"parent"}')""")
    u1 = "run 'u1' (thread 'u', #5)"
    changed = (
        "its events (their positions, types or bytes), outcome or time differ from what the "
        "run's hash covers"
    )
    replayed = "its lineage cannot be replayed from the log: the echo_refs row of event seq"
    assert problems(db) == [
        f"hashes: {R1}: batch #1 (seq 1..5): {changed}",
        f"hashes: {u1}: batch #6 (seq 15..16): {changed}",
        f"derived: {R1}: {replayed} 1 (RUN_STARTED): the event echoes no input (a JSON "
        "object) for it to stand in",
        f"derived: {u1}: {replayed} 16 (RUN_FINISHED): it is on no RUN_STARTED",
    ]


def test_the_cli_entry_point_exits_1_on_a_broken_file_and_0_on_a_sound_one(db: Path) -> None:
    """The real command, in its own process."""
    command = shutil.which("agui-store")
    argv = [command] if command else [sys.executable, "-m", "agui_store.cli"]
    ok = subprocess.run(
        [*argv, "check", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=worker_env(),
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    with raw(db) as conn:
        _event_cut_out_of_a_batch(conn)
    broken = subprocess.run(
        [*argv, "check", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=worker_env(),
        timeout=120,
    )
    assert broken.returncode == 1
    assert "batch #2 of run 'r2' (thread 't', #2) (seq 6..10) is missing seq 8" in broken.stdout


def test_a_file_too_broken_to_open_fails_the_cli_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    completed = subprocess.run(
        [sys.executable, "-m", "agui_store.cli", "check", "--db", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=worker_env(),
        timeout=120,
    )
    assert completed.returncode == 1
    assert "agui-store check:" in completed.stderr and "Traceback" not in completed.stderr


def corrupt_events_page(db: Path) -> None:
    """Overwrite the cell pointers of the events table's root page on disk."""
    with raw(db) as conn:
        root = conn.execute(
            "SELECT rootpage FROM sqlite_schema WHERE name = 'event_log'"
        ).fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    start = (root - 1) * page_size
    data[start + 8 : start + 40] = b"\xff" * 32
    db.write_bytes(bytes(data))


def test_a_corrupted_page_is_reported_not_raised(db: Path) -> None:
    """Bytes of the events table's b-tree overwritten on disk: the check reports the damage
    (SQLite's own words, then each check it could not finish) instead of dying on it."""
    corrupt_events_page(db)
    with raw(db) as conn:
        report = check_file(conn)
    assert not report.ok
    assert report.problems[0].check == "sqlite", report.problems
    assert "Tree" in report.problems[0].detail and "page" in report.problems[0].detail
    assert all(isinstance(p.detail, str) and p.detail for p in report.problems)


def test_a_corrupted_page_is_reported_by_the_table_it_holds(db: Path) -> None:
    corrupt_events_page(db)
    with raw(db) as conn:
        root = conn.execute(
            "SELECT rootpage FROM sqlite_schema WHERE name = 'event_log'"
        ).fetchone()[0]
        report = check_file(conn)
    lines = report.problems[0].detail.splitlines()
    damaged = [line for line in lines if line.startswith("Tree ")]
    assert damaged, lines
    assert all(line.startswith(f"Tree {root} (table events) page ") for line in damaged), lines


CORRUPT_READ = (
    "database.snapshot (the read transaction Store.check runs in) ends with a bare COMMIT, "
    "which on a corrupt file raises apsw.CorruptError; translated() does not map CorruptError, "
    "so Store.check() raises instead of returning SQLite's report and 'agui-store check' dies "
    "with a traceback. End read transactions with COMMIT falling back to ROLLBACK, and map "
    "apsw.CorruptError to an AguiStoreError"
)


def test_a_corrupted_page_is_reported_by_store_check_and_the_cli(db: Path) -> None:
    corrupt_events_page(db)
    with agui_store.open(db) as store:
        report = store.check()
    assert not report.ok and report.problems[0].check == "sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "agui_store.cli", "check", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=worker_env(),
        timeout=120,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and done.stdout.startswith("sqlite: ")


def test_a_file_of_another_schema_version_is_reported_by_the_check(db: Path) -> None:
    with raw(db) as conn:
        conn.execute("PRAGMA user_version = 0")
        report = check_file(conn)
    assert [str(p) for p in report.problems] == [
        f"schema: schema version (user_version) is 0, but this agui-store reads and writes "
        f"version {V}"
    ]


def test_the_check_reads_one_consistent_state_inside_a_transaction(db: Path) -> None:
    with raw(db) as conn:
        report = check_file(conn)
        assert report.ok and conn.getautocommit()  # its own transaction, ended
        conn.execute("BEGIN")
        assert check_file(conn).ok and not conn.getautocommit()  # the caller's
        conn.execute("COMMIT")


def test_problems_are_capped_per_check_with_a_count_of_the_rest(db: Path) -> None:
    with raw(db) as conn:
        for seq in range(18, 18 + integrity.MAX_PROBLEMS_PER_CHECK + 25):
            conn.execute(
                "INSERT INTO events(seq, run, type, payload) VALUES (?, 3, 'CUSTOM', "
                """'{"type":"CUSTOM","name":"n","value":1}')""",
                (seq,),
            )
    found = problems(db)
    assert len(found) == integrity.MAX_PROBLEMS_PER_CHECK + 1
    assert found[-1] == "batches: ... and 25 more problems like these"


def test_a_megabyte_long_run_id_is_named_short_in_a_problem(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agui_store.engine import arguments

    huge = "r" * 1_000_000
    # Releases before this one took an id of any length; this one refuses it on intake.
    monkeypatch.setattr(arguments, "unstorable", lambda value: None)
    with agui_store.open(db) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": huge}])
    monkeypatch.undo()
    with raw(db) as conn:
        run = conn.execute("SELECT id FROM runs WHERE run_id = ?", (huge,)).fetchone()[0]
        conn.execute(
            "INSERT INTO events(seq, run, type, payload) VALUES (1000, ?, 'CUSTOM', "
            """'{"type":"CUSTOM","name":"n","value":1}')""",
            (run,),
        )
    # The numbers skipped before it are a hole of their own (seq 2..999).
    (found,) = [p for p in problems(db) if "event seq 1000" in p]
    assert found.startswith("batches: event seq 1000 (CUSTOM) of run 'rrrr") and len(found) < 200


# --- content-addressed blobs --------------------------------------------------------------


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


GOOD = b'{"content":"hello","id":"m1","role":"assistant"}'
BIG = json.dumps(
    {"id": "m2", "content": "compressible " * 100}, sort_keys=True, separators=(",", ":")
).encode()


def test_every_blob_is_checked_against_its_sha256(db: Path) -> None:
    """A blob's address is the sha256 of its canonical bytes: its data is decoded per its
    codec first (tests/contract/test_check.py runs the same on every backend)."""
    rows = [
        (sha(GOOD), 0, GOOD),
        (sha(BIG), 1, zlib.compress(BIG)),
        (sha(b"other"), 0, GOOD),
        (sha(b"z"), 1, b"not zlib"),
        (b"short", 0, GOOD),
    ]
    with raw(db) as conn:
        conn.executemany("INSERT INTO blobs(hash, codec, data) VALUES (?, ?, ?)", rows)
        report = check_file(conn)
    found = sorted(str(p) for p in report.problems if p.check == "blobs")
    assert found == sorted(
        [
            f"blobs: blob {sha(b'other').hex()}: its data hashes to {sha(GOOD).hex()}: the blob "
            "is corrupt",
            f"blobs: blob {sha(b'z').hex()}: its data cannot be decoded (codec = 1): Error -3 "
            "while decompressing data: incorrect header check",
            f"blobs: blob {b'short'.hex()}: the address is not a sha256 (32 bytes)",
        ]
    )


def test_a_corrupt_blob_in_a_store_fails_its_check_and_the_cli(db: Path) -> None:
    with raw(db) as conn:
        has_blobs = (
            conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'blobs'").fetchone() is not None
        )
        if not has_blobs:  # this schema version has no blobs yet: add the planned table
            conn.execute(
                "CREATE TABLE blobs (hash BLOB PRIMARY KEY, codec INTEGER NOT NULL "
                "CHECK (codec IN (0, 1)), data BLOB NOT NULL) STRICT, WITHOUT ROWID"
            )
        conn.execute("INSERT INTO blobs(hash, codec, data) VALUES (?, 0, ?)", (sha(GOOD), GOOD))
        conn.execute(
            "INSERT INTO blobs(hash, codec, data) VALUES (?, 1, ?)", (sha(BIG), zlib.compress(BIG))
        )
    # Blobs put in by hand are ones no checkpoint refers to: check names them as such.
    unreferenced = [p for p in problems(db) if "no checkpoint refers to it" in p]
    assert problems(db) == unreferenced and len(unreferenced) in (0, 2)
    tampered = b'{"tampered":1}'
    with raw(db) as conn:
        conn.execute("UPDATE blobs SET data = ? WHERE hash = ?", (tampered, sha(GOOD)))
    found = problems(db)
    assert [p for p in found if p not in unreferenced] == [
        f"blobs: blob {sha(GOOD).hex()}: its data hashes to "
        f"{hashlib.sha256(tampered).hexdigest()}: the blob is corrupt"
    ]
    assert run_cli(db)[0] == 1


def test_words_edited_in_the_full_text_index_are_named_and_rebuild_repairs_them(
    tmp_path: Path,
) -> None:
    """The FTS5 table keeps no text, but check() reads each row's terms back: a merged row's
    words swapped by hand (the old ones deleted as FTS5 needs, others put in) are named, and
    ``rebuild`` takes out what the index holds, not what the message gives, so neither they
    nor words under an id no row has are left to match a search."""
    path = tmp_path / "store.db"
    with testing.search_pending_rows(1), agui_store.open(path) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
                {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "plain answer"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
            ]
        )
    with raw(path) as conn:
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone() == (0,)
        (row,) = conn.execute("SELECT id FROM search_messages").fetchone()
        conn.execute(
            "INSERT INTO search_words(search_words, rowid, words) "
            "VALUES ('delete', ?, 'plain answer')",
            (row,),
        )
        conn.execute("INSERT INTO search_words(rowid, words) VALUES (?, 'forged answer')", (row,))
        conn.execute("INSERT INTO search_words(rowid, words) VALUES (99, 'stray')")
    with agui_store.open(path) as store:
        assert [hit.message_id for hit in store.search("forged")] == ["m1"]
    assert problems(path) == [
        f"derived: search index row #{row} of run 'r1' (thread 't', #1) holds other words "
        "than its message's text gives: a search finds the message by words it does not hold, "
        "or misses it by words it holds",
        "derived: the full-text index holds words under 1 id that no search index row has "
        "(#99): erased or replaced text may still match a search",
    ]
    assert cli.main(["rebuild", "--db", str(path)], out=io.StringIO()) == 0
    assert problems(path) == []
    with agui_store.open(path) as store:
        assert not store.search("forged")
        assert [hit.message_id for hit in store.search("plain")] == ["m1"]


# --- append-only, inside SQLite, for any driver -------------------------------------------


APPEND_ONLY = ("threads", "runs", "event_log", "event_types", "batches")

ATTACK = r"""
import json, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
statements = json.loads(sys.argv[2])
outcome = {}
for sql in statements:
    try:
        conn.execute("BEGIN")
        conn.execute(sql)
        conn.execute("COMMIT")
        outcome[sql] = "changed %d rows" % conn.total_changes
    except sqlite3.DatabaseError as e:
        conn.execute("ROLLBACK") if conn.in_transaction else None
        outcome[sql] = "refused: %s" % e
print(json.dumps(outcome))
"""


def attack(path: Path, statements: list[str]) -> dict[str, str]:
    """Run each statement in its own transaction from another process, with the standard
    library's sqlite3 (another SQLite build, another driver); report what SQLite said."""
    done = subprocess.run(
        [sys.executable, "-c", ATTACK, str(path), json.dumps(statements)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, str] = json.loads(done.stdout)
    return result


def columns(path: Path, table: str) -> list[str]:
    with raw(path) as conn:
        return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def test_update_of_every_column_and_delete_fail_inside_sqlite_for_another_driver(
    db: Path,
) -> None:
    before = dump(db)
    statements = []
    for table in APPEND_ONLY:
        for column in columns(db, table):
            statements.append(f"UPDATE {table} SET {column} = {column}")  # even a no-op
            # Another row's value (of the column's own type, so that only the trigger stops it).
            statements.append(
                f"UPDATE {table} SET {column} = (SELECT {column} FROM {table} ORDER BY rowid "
                f"DESC LIMIT 1) WHERE rowid = (SELECT min(rowid) FROM {table})"
            )
            statements.append(f"UPDATE OR REPLACE {table} SET {column} = {column}")
        statements += [
            f"DELETE FROM {table}",
            f"DELETE FROM {table} WHERE rowid = (SELECT max(rowid) FROM {table})",
        ]
    outcome = attack(db, statements)
    allowed = {
        sql: said for sql, said in outcome.items() if not said.startswith("refused: agui-store:")
    }
    assert allowed == {}, allowed
    assert len(outcome) == len(statements) > 40
    assert dump(db) == before


UPSERT_OR_REPLACE = (
    "schema.py: INSERT OR REPLACE / REPLACE INTO deletes the conflicting row without firing "
    "DELETE triggers (SQLite fires them only with PRAGMA recursive_triggers=ON), so any "
    "driver can overwrite an event, run, batch or thread; add BEFORE INSERT triggers that "
    "RAISE(ABORT, 'agui-store: ... are append-only') WHEN a row with the same key (and, for "
    "runs and threads, the same unique key) exists"
)


def test_replacing_an_existing_row_fails_inside_sqlite_for_another_driver(db: Path) -> None:
    before = dump(db)
    statements = [
        "INSERT OR REPLACE INTO events(seq, run, type, payload) VALUES "
        """(1, 1, 'RUN_STARTED', '{"type":"RUN_STARTED","threadId":"t","runId":"forged"}')""",
        "REPLACE INTO runs(id, thread, run_id, lineage, created_at) "
        "VALUES (1, 1, 'forged', 'root', 0)",
        "REPLACE INTO runs(id, thread, run_id, lineage, created_at) "
        "VALUES (100, 1, 'r2', 'root', 0)",  # same (thread, run_id) as run #2
        "INSERT OR REPLACE INTO threads(id, thread_id, created_at) VALUES (9, 't', 0)",
        "INSERT OR REPLACE INTO batches(id, run, first_seq, last_seq, count, appended_at) "
        "VALUES (1, 1, 1, 1, 1, 0)",
    ]
    outcome = attack(db, statements)
    allowed = {
        sql: said for sql, said in outcome.items() if not said.startswith("refused: agui-store:")
    }
    assert allowed == {}, allowed
    assert dump(db) == before


def test_upserts_on_history_fail_inside_sqlite_for_another_driver(db: Path) -> None:
    before = dump(db)
    statements = [
        "INSERT INTO event_log(seq, run, type, payload) VALUES (1, 1, 1, '{}') "
        "ON CONFLICT(seq) DO UPDATE SET payload = excluded.payload",
        "INSERT INTO runs(id, thread, run_id, lineage, created_at) VALUES (1, 1, 'x', 'root', 0)"
        " ON CONFLICT(id) DO UPDATE SET run_id = excluded.run_id",
    ]
    outcome = attack(db, statements)
    assert all(said.startswith("refused: agui-store:") for said in outcome.values()), outcome
    assert dump(db) == before


def test_appending_through_another_driver_is_still_allowed_and_then_checked(db: Path) -> None:
    """Append-only refuses rewrites, not appends; a bad append by another tool is what the
    check is for."""
    outcome = attack(
        db,
        [
            "INSERT INTO events(seq, run, type, payload) VALUES (18, 3, 'TEXT_MESSAGE_CONTENT', "
            """'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-r3","delta":"x"}')""",
        ],
    )
    assert all(said.startswith("changed") for said in outcome.values()), outcome
    assert problems(db) == [f"batches: event seq 18 (TEXT_MESSAGE_CONTENT) of {R3} is in no batch"]
