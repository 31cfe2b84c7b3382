"""``Store.check()`` on every backend: the store's own invariants, written once above the port,
report the same problems on SQLite and PostgreSQL (PostgreSQL's own storage checks are in
tests/test_postgres_check.py).

Each corruption builds the store of tests/test_integrity.py, breaks one invariant as a hostile
or buggy tool would (on SQLite with the append-only triggers dropped for the moment, on
PostgreSQL as the owner with the tables' append-only and foreign-key triggers disabled for the
moment, :func:`tests.backends.postgres_owner`; on both the ``events`` view's own triggers carry
an edit of an event to where it is stored), and compares the report line by line with the
lines tests/test_integrity.py expects on SQLite, leaving out the SQLite file's own checks.
"""

from __future__ import annotations

import hashlib
import io
import json
import zlib

import pytest

import agui_store
from agui_store import cli
from agui_store.engine import integrity
from tests.backends import (
    Statement,
    backend_of,
    owner,
    placeholder,
    problems,
    report_of,
    tamper,
)
from tests.test_integrity import BIG, CORRUPTIONS, GOOD, build, matches

#: Corruptions that need no backend's own feature, by the name tests/test_integrity.py gives
#: them; a dict gives each backend its own spelling.
PORTABLE: dict[str, list[Statement]] = {
    "a branch to a missing run": [
        "INSERT INTO branches(thread, name, run, updated_at) VALUES (1, 'ghost', 99, 0)"
    ],
    "an event of a missing run": [
        "INSERT INTO events(seq, run, type, payload) VALUES "
        """(18, 99, 'CUSTOM', '{"type":"CUSTOM","name":"n","value":1}')""",
        "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) "
        "VALUES (99, 18, 18, 1, 0)",
    ],
    "a lineage parent in another thread": ["UPDATE runs SET parent = 2 WHERE id = 5"],
    "a lineage reason that says otherwise": [
        "UPDATE runs SET lineage = 'guessed' WHERE id = 2",
        "UPDATE runs SET lineage = 'head' WHERE id = 1",
    ],
    "a branch into another thread": ["UPDATE branches SET run = 5 WHERE name = 'feature'"],
    "a branch shadowing the default branch": [
        "INSERT INTO branches(thread, name, run, updated_at) VALUES (1, 'main', 1, 0)"
    ],
    "a branch of no thread": [
        "INSERT INTO branches(thread, name, run, updated_at) VALUES (9, 'lost', 1, 0)"
    ],
    "an event cut out of its batch": ["DELETE FROM events WHERE seq = 8"],
    "an event in no batch": [
        "INSERT INTO events(seq, run, type, payload) VALUES (18, 3, "
        """'TEXT_MESSAGE_CONTENT', '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-r3","""
        """"delta":"!"}')"""
    ],
    "a batch holding another run's events": ["UPDATE batches SET run = 1 WHERE id = 2"],
    "two batches claiming the same events": [
        "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) VALUES (2, 9, 10, 2, 0)"
    ],
    "batch outcomes that disagree with their events": [
        "UPDATE batches SET outcome = 'error' WHERE id = 1",
        "UPDATE batches SET outcome = NULL WHERE id = 7",
        "UPDATE batches SET outcome = 'finished' WHERE id = 3",
    ],
    "a run that does not begin with RUN_STARTED": [
        "INSERT INTO runs(id, thread, run_id, parent, lineage, created_at) "
        "VALUES (6, 1, 'r9', 3, 'head', 0)",
        "INSERT INTO events(seq, run, type, payload) VALUES (18, 6, "
        """'TEXT_MESSAGE_START', '{"type":"TEXT_MESSAGE_START","messageId":"x"}')""",
        "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) "
        "VALUES (6, 18, 18, 1, 0)",
    ],
    "a run with no events": [
        "INSERT INTO runs(id, thread, run_id, parent, lineage, created_at) "
        "VALUES (6, 1, 'empty', 3, 'head', 0)"
    ],
    "a synthetic run holding a RUN_STARTED": ["UPDATE runs SET synthetic = 1 WHERE id = 1"],
    "a second RUN_STARTED inside a run": [
        "INSERT INTO events(seq, run, type, payload) VALUES (18, 3, 'RUN_STARTED', "
        """'{"type":"RUN_STARTED","threadId":"t","runId":"r3b"}')""",
        "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) "
        "VALUES (3, 18, 18, 1, 0)",
    ],
    "a run and a thread renamed": [
        "UPDATE runs SET run_id = 'renamed' WHERE id = 1",
        "UPDATE threads SET thread_id = 'u2' WHERE id = 2",
    ],
    "payloads that are not JSON objects": [
        """UPDATE events SET payload = '{"type":"TEXT_MESSAGE_CONTENT",' WHERE seq = 3""",
        "UPDATE events SET payload = '[1, 2]' WHERE seq = 4",
    ],
    "a type column that disagrees with the payload": [
        "UPDATE events SET type = 'TEXT_MESSAGE_END' WHERE seq = 3"
    ],
    "an input that is not JSON": ["UPDATE runs SET input = 'nope' WHERE id = 2"],
    "a lineage digest of a live run": [
        {
            "sqlite": "INSERT INTO lineage_digests(ids_hash, run) VALUES (x'00', 3)",
            "postgres": "INSERT INTO lineage_digests(ids_hash, run) VALUES ('\\x00', 3)",
        }
    ],
    "a checkpoint whose tail lost its messages": [
        "UPDATE checkpoints SET tail = '[]' WHERE run = 2"
    ],
    "a checkpoint whose tail names a missing blob": [
        {
            "sqlite": "UPDATE checkpoints SET tail = json_insert(tail, '$[#]', "
            "json('[999999, 1]')) WHERE run = 2",
            "postgres": "UPDATE checkpoints SET tail = (tail::jsonb || '[[999999, 1]]')::text "
            "WHERE run = 2",
        }
    ],
    "a checkpoint of a live run": [
        "INSERT INTO checkpoints(run, length, chunks, tail, state, ids_hash, created_at) "
        "SELECT 3, length, chunks, tail, state, ids_hash, 0 FROM checkpoints WHERE run = 2",
        # Its tail's segments listed as the schema's trigger lists them (the PostgreSQL
        # owner's edits run with the tables' triggers off).
        {
            "sqlite": "SELECT 1",
            "postgres": "INSERT INTO checkpoint_segments(run, blob) "
            "SELECT 3, blob FROM checkpoint_segments WHERE run = 2",
        },
    ],
    "a checkpoint whose tail is not a list of blob ids": [
        """UPDATE checkpoints SET tail = '{"m": 1}' WHERE run = 2"""
    ],
    "a tampered message blob": [
        {
            "sqlite": """UPDATE blobs SET data = CAST('[{"role":"forged"}]' AS BLOB) WHERE id = """
            "(SELECT tail ->> '$[0][0]' FROM checkpoints WHERE run = 1)",
            "postgres": """UPDATE blobs SET data = convert_to('[{"role":"forged"}]', 'UTF8') """
            "WHERE id = (SELECT (tail::jsonb -> 0 ->> 0)::bigint FROM checkpoints WHERE run = 1)",
        }
    ],
}

#: What tests/test_integrity.py expects, by corruption.
EXPECTED = {name: lines for name, _, lines in CORRUPTIONS}

#: The SQLite file's own checks: the ones a portable corruption is not about.
FILE_CHECKS = ("sqlite", "schema")


def storage_checks(location: str) -> tuple[str, ...]:
    return (
        ("sqlite", "foreign_keys", "schema")
        if backend_of(location) == "sqlite"
        else ("foreign_keys", "pages", "schema")
    )


@pytest.fixture
def built(store_location: str) -> str:
    build(store_location)
    return store_location


def run_cli(location: str, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(["check", "--db", location, *extra], out=out)
    return code, out.getvalue()


def test_a_sound_store_passes_every_check_on_every_backend(built: str) -> None:
    report = report_of(built)
    assert report.ok, [str(p) for p in report.problems]
    assert report.checked == (*storage_checks(built), *integrity.CHECKS)
    assert run_cli(built) == (0, f"ok ({', '.join(report.checked)})\n")


def test_the_cli_command_checks_either_backend_in_its_own_process(built: str) -> None:
    """``agui-store check --db PATH_OR_URL``: exit 0 on a sound store, 1 and the problem on a
    broken one."""
    import subprocess
    import sys

    from tests.workers.harness import ROOT, worker_env

    def command() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agui_store.cli", "check", "--db", built],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=worker_env(),
            timeout=120,
        )

    sound = command()
    assert sound.returncode == 0, sound.stderr
    assert sound.stdout.startswith("ok (") and "derived" in sound.stdout
    tamper(built, PORTABLE["an event cut out of its batch"])
    broken = command()
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert "batch #2 of run 'r2' (thread 't', #2) (seq 6..10) is missing seq 8" in broken.stdout


def test_events_after_a_runs_end_are_a_warning_on_every_backend(built: str) -> None:
    with agui_store.open(built) as store:
        store.append(
            [{"type": "TEXT_MESSAGE_END", "messageId": "m-u1"}], thread_id="u", check_sequence=False
        )
        report = store.check()
    assert report.ok
    assert [str(w) for w in report.warnings] == [
        "runs: run 'u1' (thread 'u', #5) has events after its terminal RUN_FINISHED at seq "
        "16: seq 18 (TEXT_MESSAGE_END); only append(check_sequence=False) records that",
        "derived: 1 run of 1 thread waits to be derived (an interrupted copy or import, "
        "derive_on_append=False, an older version's store, or events after a run's end left "
        "them): until they are, a search may not find their messages; 'agui-store compact' "
        "derives them",
    ]


def test_a_payload_with_duplicate_keys_is_judged_as_the_store_reads_it_on_every_backend(
    built: str,
) -> None:
    with agui_store.open(built) as store:
        store.append('{"type":"RUN_STARTED","threadId":"t","runId":"dup","type":"RUN_STARTED"}')
        store.append(
            '{"type":"STEP_STARTED","stepName":"a","type":"CUSTOM","name":"n","value":1}',
            thread_id="t",
            run_id="dup",
        )
        assert store.check().ok


def test_a_log_longer_than_a_page_of_the_stream_is_checked_to_its_end(store_location: str) -> None:
    """More events than a server-side cursor fetches at once (PostgreSQL), an edit at the end."""
    from agui_store.backends.postgres.transaction import STREAM_PAGE_ROWS

    runs = STREAM_PAGE_ROWS // 20 + 20
    with agui_store.open(store_location) as store:
        for i in range(runs):
            thread = f"t{i % 7}"
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": thread, "runId": f"r{i}"},
                    *[{"type": "CUSTOM", "name": "n", "value": k} for k in range(20)],
                    {"type": "RUN_FINISHED", "threadId": thread, "runId": f"r{i}"},
                ]
            )
        assert store.check().ok
    last = runs * 22
    tamper(store_location, [f"UPDATE events SET type = 'CUSTOM' WHERE seq = {last}"])
    assert problems(store_location) == [
        f"batches: batch #{runs} of run 'r{runs - 1}' (thread 't{(runs - 1) % 7}', #{runs}) "
        f"(seq {last - 21}..{last}) records outcome 'finished', but holds no RUN_FINISHED or "
        "RUN_ERROR",
        f"events: event seq {last} (CUSTOM) of run 'r{runs - 1}' (thread 't{(runs - 1) % 7}', "
        f"#{runs}): the payload's type is 'RUN_FINISHED', but the type column says 'CUSTOM'",
        f"hashes: run 'r{runs - 1}' (thread 't{(runs - 1) % 7}', #{runs}): batch #{runs} (seq "
        f"{last - 21}..{last}): its events (their positions, types or bytes), outcome or "
        "time differ from what the run's hash covers",
    ]


def test_problems_are_capped_per_check_on_every_backend(built: str) -> None:
    tamper(
        built,
        [
            "INSERT INTO events(seq, run, type, payload) VALUES "
            f"""({seq}, 3, 'CUSTOM', '{{"type":"CUSTOM","name":"n","value":1}}')"""
            for seq in range(18, 18 + integrity.MAX_PROBLEMS_PER_CHECK + 25)
        ],
    )
    found = problems(built)
    assert len(found) == integrity.MAX_PROBLEMS_PER_CHECK + 1
    assert found[-1] == "batches: ... and 25 more problems like these"


@pytest.mark.parametrize("name", list(PORTABLE))
def test_each_broken_invariant_is_reported_alike_on_every_backend(built: str, name: str) -> None:
    tamper(built, PORTABLE[name])
    found = problems(built)
    expected = [line for line in EXPECTED[name] if line.split(":")[0] not in FILE_CHECKS]
    assert matches(found, expected), "\n".join(found)
    code, out = run_cli(built, "--json")
    assert code == 1
    assert [f"{p['check']}: {p['detail']}" for p in json.loads(out)["problems"]] == found


def test_every_blob_is_checked_against_its_sha256_on_every_backend(built: str) -> None:
    def sha(data: bytes) -> bytes:
        return hashlib.sha256(data).digest()

    rows = [
        (sha(GOOD), 0, GOOD),
        (sha(BIG), 1, zlib.compress(BIG)),
        (sha(b"other"), 0, GOOD),
        (sha(b"z"), 1, b"not zlib"),
        (b"short", 0, GOOD),
    ]
    mark = placeholder(built)
    with owner(built) as conn:
        for row in rows:
            conn.execute(
                f"INSERT INTO blobs(hash, codec, data) VALUES ({mark}, {mark}, {mark})", row
            )
    found = problems(built)
    assert len([p for p in found if "no checkpoint refers to it" in p]) == len(rows)
    assert sorted(p for p in found if p.startswith("blobs: ")) == sorted(
        [
            f"blobs: blob {sha(b'other').hex()}: its data hashes to {sha(GOOD).hex()}: the blob "
            "is corrupt",
            f"blobs: blob {sha(b'z').hex()}: its data cannot be decoded (codec = 1): Error -3 "
            "while decompressing data: incorrect header check",
            f"blobs: blob {b'short'.hex()}: the address is not a sha256 (32 bytes)",
        ]
    )


def test_an_edited_event_that_stays_valid_json_is_named_by_its_hash_on_every_backend(
    built: str,
) -> None:
    """Tamper evidence (tests/contract/test_tamper.py): an answer rewritten in place."""
    tamper(
        built, ["UPDATE events SET payload = replace(payload, '\"one\"', '\"ONE\"') WHERE seq = 3"]
    )
    assert problems(built) == [
        "hashes: run 'r1' (thread 't', #1): batch #1 (seq 1..5): its events (their positions, "
        "types or bytes), outcome or time differ from what the run's hash covers",
        "derived: the checkpoint of run 'r1' (thread 't', #1) differs from a replay of the log "
        "at message 0 (id 'm-r1')",
        "derived: the checkpoint of run 'r2' (thread 't', #2) differs from a replay of the log "
        "at message 0 (id 'm-r1')",
    ]


# --- PostgreSQL's own storage checks ------------------------------------------------------


def test_a_check_sees_one_consistent_state_while_another_writer_appends(built: str) -> None:
    """The log pass, the batches, the hashes and the replay read one snapshot: a writer
    committing between them must not make a sound store look broken."""
    import threading

    stop = threading.Event()
    appended: list[int] = []

    def write() -> None:
        with agui_store.open(built) as writer:
            i = 0
            while not stop.is_set():
                writer.append(
                    [
                        {"type": "RUN_STARTED", "threadId": "w", "runId": f"w{i}"},
                        *[{"type": "CUSTOM", "name": "n", "value": k} for k in range(5)],
                        {"type": "RUN_FINISHED", "threadId": "w", "runId": f"w{i}"},
                    ]
                )
                appended.append(i)
                i += 1

    thread = threading.Thread(target=write)
    thread.start()
    try:
        with agui_store.open(built) as store:
            reports = []
            while len(reports) < 3 or len(appended) < 3:
                reports.append(store.check())
    finally:
        stop.set()
        thread.join()
    assert all(r.ok for r in reports), [[str(p) for p in r.problems] for r in reports]
    assert report_of(built).ok
