"""Tamper-evident history: edits that keep the JSON valid, done for real by another driver.

Each test runs on every backend. It builds a real store, closes it, then edits it the way a
hostile user would: on SQLite with the standard library's ``sqlite3`` in another process,
append-only triggers dropped for the edit and put back after it (so the schema check sees
nothing); on PostgreSQL as the tables' owner with the tables' triggers disabled for the edit
and enabled again after it (:func:`tests.backends.postgres_owner`); on both, the ``events``
view's own triggers carry an edit of an event to where it is stored; SHA-256 recomputed
wherever a
content address would give the edit away. Then:

- ``check()`` names the edit: the check, the thread, the run and what differs;
- a checkout that reads the edited structure raises ``HashMismatchError`` (an
  ``IntegrityError``) naming the run, instead of returning what the edit made up.

The store: thread ``t`` with
  r1 (#1): a state snapshot and an answer, complete;
  r2 (#2): its input resends r1's messages plus a question (stored by reference), its
           RUN_STARTED echoes that input (stored by reference), an answer and a STATE_DELTA
           (its checkpoint stores the state as patches on r1's), complete;
  r3 (#3): live, with an input; two batches (RUN_STARTED + TEXT_MESSAGE_START, then a
           TEXT_MESSAGE_CONTENT): a checkout replays it from r2's checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agui_store
from agui_store import CorruptStoreError, HashMismatchError, IntegrityError, cli, testing
from tests.backends import dump, is_postgres, owner, placeholder, postgres_owner
from tests.workers.harness import worker_env

# pydantic-ai needs Python 3.11: without it the tests marked pydantic_ai skip
# (tests/conftest.py).
with contextlib.suppress(ImportError):
    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import reply, user

T = "t"
R1, R2, R3 = (f"run '{r}' (thread 't', #{n})" for n, r in ((1, "r1"), (2, "r2"), (3, "r3")))
EVENTS_DIFFER = (
    "its events (their positions, types or bytes), outcome or time differ from what "
    "the run's hash covers"
)


def answer(run: str, text: str) -> list[dict[str, Any]]:
    mid = f"m-{run}"
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
    ]


def build(path: str | Path) -> None:
    with agui_store.open(path) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": T, "runId": "r1"},
                {"type": "STATE_SNAPSHOT", "snapshot": {"notes": [f"note {i}" for i in range(40)]}},
                *answer("r1", "one"),
                {"type": "RUN_FINISHED", "threadId": T, "runId": "r1"},
            ]
        )
        r1 = store.checkout("r1", thread_id=T)
        body = {
            "threadId": T,
            "runId": "r2",
            "state": r1.state,
            "messages": [*r1.messages, {"id": "u2", "role": "user", "content": "and two?"}],
            "tools": [],
            "context": [],
            "forwardedProps": {"n": 2},
        }
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": T, "runId": "r2", "input": body},
                *answer("r2", "two"),
                {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/notes/-", "value": "2"}]},
                {"type": "RUN_FINISHED", "threadId": T, "runId": "r2"},
            ],
            input=body,
        )
        r2 = store.checkout("r2", thread_id=T)
        body3 = {
            **body,
            "runId": "r3",
            "state": r2.state,
            "messages": [*r2.messages, {"id": "u3", "role": "user", "content": "three?"}],
            "forwardedProps": {"n": 3},
        }
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": T, "runId": "r3"},
                {"type": "TEXT_MESSAGE_START", "messageId": "m-r3", "role": "assistant"},
            ],
            input=body3,
        )
        store.append(
            [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-r3", "delta": "thr"}], thread_id=T
        )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tamper") / "store.db"
    build(path)
    with agui_store.open(path) as store:
        report = store.check()
        assert report.ok, [str(p) for p in report.problems]
        layout = testing.connection(store).execute(  # the layout the edits below rely on
            "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(state_base) FROM "
            "checkpoints), (SELECT count(*) FROM echo_refs), (SELECT count(input_refs) FROM runs)"
        ).fetchone()
    assert layout == (2, 1, 1, 2)
    return path


@pytest.fixture
def db(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store of :func:`build`, fresh for the test, on the test's backend."""
    if backend == "sqlite":
        path = tmp_path / "store.db"
        shutil.copy(request.getfixturevalue("pristine"), path)
        return str(path)
    location = str(request.getfixturevalue("store_location"))
    build(location)
    return location


#: An edit: one statement, or each backend's spelling of it.
Edit = str | dict[str, str]


EDIT = r"""
import hashlib, json, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.create_function("sha256", 1, lambda data: hashlib.sha256(data).digest())
conn.execute("BEGIN")
# The append-only guards only: the events view's own triggers pass its edits to event_log.
triggers = conn.execute(
    "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND name LIKE '%_are_append_only_%'"
).fetchall()
for name, _ in triggers:
    conn.execute(f'DROP TRIGGER "{name}"')
for sql in json.loads(sys.argv[2]):
    conn.execute(sql)
for _, sql in triggers:
    conn.execute(sql)
conn.execute("COMMIT")
print(conn.total_changes)
"""


def edit(path: str, *statements: Edit) -> None:
    """Run the statements in one transaction, the append-only triggers off for them: on
    SQLite with the standard library's sqlite3 in another process (triggers dropped and put
    back after), on PostgreSQL as the owner (:func:`tests.backends.postgres_owner`)."""
    if is_postgres(path):
        changed = 0
        with postgres_owner(path) as conn:
            for statement in statements:
                text = statement["postgres"] if isinstance(statement, dict) else statement
                changed += conn.execute(text).rowcount
        assert changed > 0, "the edit changed nothing"
        return
    statements = tuple(s["sqlite"] if isinstance(s, dict) else s for s in statements)
    done = subprocess.run(
        [sys.executable, "-c", EDIT, str(path), json.dumps(statements)],
        capture_output=True,
        text=True,
        timeout=120,
        env=worker_env(),
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0, "the edit changed nothing"


def problems(path: str) -> list[str]:
    with agui_store.open(path) as store:
        report = store.check()
    return [str(p) for p in report.problems]


def refused(path: str, run: str) -> HashMismatchError:
    with agui_store.open(path) as store, pytest.raises(HashMismatchError) as caught:
        store.checkout(run, thread_id=T)
    error = caught.value
    assert isinstance(error, IntegrityError)
    return error


def checkout(path: str, run: str) -> dict[str, Any]:
    with agui_store.open(path) as store:
        co = store.checkout(run, thread_id=T)
    return {"messages": co.messages, "state": co.state}


def event_seq(path: str, run: str, kind: str) -> int:
    with agui_store.open(path) as store:
        mark = placeholder(path)
        row = testing.connection(store).execute(
            "SELECT events.seq FROM events JOIN runs ON runs.id = events.run "
            f"WHERE runs.run_id = {mark} AND events.type = {mark}",
            (run, kind),
        ).fetchone()
    return int(row[0])


#: The live run r3's streamed text (its newest event, seq 15, a batch of its own) edited.
R3_TEXT_EDITED: Edit = {
    "sqlite": "UPDATE events SET payload = json_set(payload, '$.delta', 'FORGED') "
    "WHERE seq = (SELECT max(seq) FROM events)",
    "postgres": "UPDATE events SET payload = jsonb_set(payload::jsonb, '{delta}', "
    "'\"FORGED\"')::text WHERE seq = (SELECT max(seq) FROM events)",
}
#: r2's answer "two" (seq 9, in r2's one batch) edited to "TWO".
R2_ANSWER_EDITED: Edit = {
    "sqlite": "UPDATE events SET payload = json_set(payload, '$.delta', 'TWO') "
    "WHERE type = 'TEXT_MESSAGE_CONTENT' AND payload LIKE '%\"two\"%'",
    "postgres": "UPDATE events SET payload = jsonb_set(payload::jsonb, '{delta}', "
    "'\"TWO\"')::text WHERE type = 'TEXT_MESSAGE_CONTENT' AND payload LIKE '%\"two\"%'",
}

#: r2's question "and two?" edited in place in the blobs holding it (its address kept).
R2_BLOB_EDITED: Edit = {
    "sqlite": """UPDATE blobs SET data = CAST(replace(CAST(data AS TEXT), '"and two?"', """
    """'"and 2?"') AS BLOB) WHERE CAST(data AS TEXT) LIKE '%"and two?"%'""",
    "postgres": """UPDATE blobs SET data = convert_to(replace(convert_from(data, """
    """'UTF8'), '"and two?"', '"and 2?"'), 'UTF8') """
    """WHERE position(convert_to('"and two?"', 'UTF8') in data) > 0""",
}


_FORGED = "CAST(replace(CAST(data AS TEXT), '\"and two?\"', '\"and FORGED?\"') AS BLOB)"
_PG_FORGED = (
    "convert_to(replace(convert_from(data, 'UTF8'), '\"and two?\"', '\"and FORGED?\"'), "
    "'UTF8')"
)
#: r2's question forged in the blobs holding it, their SHA-256 recomputed (so each blob
#: hashes to its address, a new one).
R2_BLOB_FORGED: Edit = {
    "sqlite": f"UPDATE blobs SET data = {_FORGED}, hash = sha256({_FORGED}) "
    """WHERE CAST(data AS TEXT) LIKE '%"and two?"%'""",
    "postgres": f"UPDATE blobs SET data = {_PG_FORGED}, hash = sha256({_PG_FORGED}) "
    """WHERE position(convert_to('"and two?"', 'UTF8') in data) > 0""",
}

# --- the edits --------------------------------------------------------------------------


def test_a_changed_event_is_named_and_a_checkout_replaying_it_is_refused(db: str) -> None:
    before = checkout(db, "r2")
    edit(
        db,
        # the live run's streamed text, replayed by its checkout
        R3_TEXT_EDITED,
        # a complete run's answer, whose checkpoint was derived before the edit
        R2_ANSWER_EDITED,
    )
    found = problems(db)
    assert f"hashes: {R3}: batch #4 (seq 15..15): {EVENTS_DIFFER}" in found
    assert f"hashes: {R2}: batch #2 (seq 7..12): {EVENTS_DIFFER}" in found
    assert (
        f"derived: the checkpoint of {R2} differs from a replay of the log at message 2 "
        "(id 'm-r2')" in found
    )
    error = refused(db, "r3")
    assert (error.thread_id, error.run_id) == (T, "r3")
    assert "events at seq 15..15 are not the ones its hash covers" in str(error)
    # The complete run is served from the checkpoint derived before the edit: what was
    # recorded, not what the edit says. Its events, read whole, are refused.
    assert checkout(db, "r2") == before
    with agui_store.open(db) as store:
        for read in (store.events, store.history):
            with pytest.raises(HashMismatchError, match=r"seq 7\.\.12"):
                read("r2", thread_id=T)


def test_events_after_a_cursor_refuse_an_edit_in_any_batch_they_return_part_of(
    db: str,
) -> None:
    # r2's events are one batch, seq 7..12 (RUN_STARTED, START, CONTENT "two", END,
    # STATE_DELTA, RUN_FINISHED); r3's are two, 13..14 and 15..15.
    with agui_store.open(db) as store:
        before = {after: store.events("r2", thread_id=T, after=after) for after in (8, 9, 10)}
        r3_tail = store.events("r3", thread_id=T, after=14)
    assert [len(events) for events in before.values()] == [4, 3, 2]
    edit(db, R2_ANSWER_EDITED)
    assert event_seq(db, "r2", "TEXT_MESSAGE_CONTENT") == 9
    with agui_store.open(db) as store:
        # The edited event is returned (after 8), is the cursor itself (after 9), or comes
        # before it in the same batch (after 10): the batch's hash covers all three reads.
        for after in before:
            with pytest.raises(HashMismatchError, match=r"seq 7\.\.12") as caught:
                store.events("r2", thread_id=T, after=after)
            assert (caught.value.thread_id, caught.value.run_id) == (T, "r2")
        assert store.events("r2", thread_id=T, after=12) == []  # nothing after the run
        assert store.events("r3", thread_id=T, after=14) == r3_tail  # another run's batch
    edit(db, R3_TEXT_EDITED)
    with agui_store.open(db) as store, pytest.raises(HashMismatchError, match=r"seq 15\.\.15"):
        store.events("r3", thread_id=T, after=14)


def test_an_event_edited_into_an_array_is_named_and_check_still_reports_on_the_rest(
    db: str,
) -> None:
    # Valid JSON that is no event at all: check() reports it, as it reports a changed one,
    # instead of failing on it while replaying the lineage.
    edit(db, "UPDATE events SET payload = '[1, 2]' WHERE seq = (SELECT max(seq) FROM events)")
    found = problems(db)
    assert f"hashes: {R3}: batch #4 (seq 15..15): {EVENTS_DIFFER}" in found
    assert any(
        p.startswith("derived: ") and R3 in p and "cannot be replayed" in p for p in found
    ), found
    assert refused(db, "r3").run_id == "r3"


def test_a_forged_blob_with_its_sha256_recomputed_is_named_and_refused(db: str) -> None:
    edit(db, R2_BLOB_FORGED)
    found = problems(db)
    assert not [p for p in found if p.startswith("blobs:")]  # every blob hashes to its address
    assert (
        f"derived: the checkpoint of {R2} differs from a replay of the log at message 1 "
        "(id 'u2')" in found
    )
    assert any(
        p.startswith(f"derived: the checkpoint of {R2} holds other content than it was written")
        for p in found
    ), found
    for run in ("r2", "r3"):  # r3 replays on top of r2's checkpoint
        error = refused(db, run)
        assert error.run_id == "r2"
        assert "checkpoint holds other content than it was written with" in str(error)


def test_a_blob_edited_in_place_is_named_and_refused(db: str) -> None:
    edit(db, R2_BLOB_EDITED)
    found = problems(db)
    assert any(p.startswith("blobs: blob ") and p.endswith("the blob is corrupt") for p in found)
    assert (
        f"derived: the checkpoint of {R2} differs from a replay of the log at message 1 "
        "(id 'u2')" in found
    )
    error = refused(db, "r2")
    assert "a blob of its checkpoint does not hash to its address" in str(error)
    assert any(p.startswith(f"derived: the checkpoint of {R2} fails its hashes") for p in found)


def test_a_blob_edited_after_an_open_store_read_it_is_refused_or_named_by_its_check(
    db: str,
) -> None:
    """A store trusts a blob its connection already found hashing to its address
    (:mod:`agui_store.engine.trust`): an edit made behind it afterwards is refused by its
    next read on SQLite (another connection committed), and named by its own ``check()``
    on every backend, which trusts nothing; a store opened after the edit refuses it."""
    with agui_store.open(db) as store:
        before = store.checkout("r2", thread_id=T)
        edit(db, R2_BLOB_EDITED)
        if is_postgres(db):
            # No data version vouches for a PostgreSQL database: the connection's trust
            # lasts its life, and its check() is what finds the edit.
            assert store.checkout("r2", thread_id=T).messages != before.messages
        else:
            with pytest.raises(HashMismatchError, match="does not hash to its address"):
                store.checkout("r2", thread_id=T)
        found = [str(p) for p in store.check().problems]
        assert any(p.startswith("blobs: blob ") and p.endswith("blob is corrupt") for p in found)
        assert any(p.startswith(f"derived: the checkpoint of {R2} fails its hashes") for p in found)
    assert "does not hash to its address" in str(refused(db, "r2"))


def test_a_blob_edited_after_an_open_store_kept_its_messages_is_refused_or_named_by_its_check(
    db: str,
) -> None:
    """A store read often keeps a blob's decoded messages by its address
    (:mod:`agui_store.engine.trust`), and uses them only for bytes found to be that
    address's: after an edit on SQLite the next read hashes the bytes again and refuses
    them; on PostgreSQL the trusted read answers what the address names, and ``check()``
    names the edit."""
    with agui_store.open(db) as store:
        before, *_ = [store.checkout("r2", thread_id=T).messages for _ in range(3)]
        assert testing.kept_message_blobs(store) > 0
        edit(db, R2_BLOB_EDITED)
        if is_postgres(db):
            assert store.checkout("r2", thread_id=T).messages == before
        else:
            with pytest.raises(HashMismatchError, match="does not hash to its address"):
                store.checkout("r2", thread_id=T)
        found = [str(p) for p in store.check().problems]
        assert any(p.startswith("blobs: blob ") and p.endswith("blob is corrupt") for p in found)
    assert "does not hash to its address" in str(refused(db, "r2"))


def test_a_refused_first_blob_of_a_checkout_leaves_the_same_store_answering(db: str) -> None:
    # r2's list is two segments: r1's message (edited here), then its own. The checkout
    # reads them as they arrive (PostgreSQL streams them) and refuses the first: it must
    # still read the second off the connection, or the store's next statement would meet
    # a half-read result instead of an answer.
    edit(
        db,
        {
            "sqlite": """UPDATE blobs SET data = CAST(replace(CAST(data AS TEXT), '"one"', """
            """'"uno"') AS BLOB) WHERE CAST(data AS TEXT) LIKE '%"m-r1"%"one"%' """
            """OR CAST(data AS TEXT) LIKE '%"one"%"m-r1"%'""",
            "postgres": """UPDATE blobs SET data = convert_to(replace(convert_from(data, """
            """'UTF8'), '"one"', '"uno"'), 'UTF8') """
            """WHERE position(convert_to('"m-r1"', 'UTF8') in data) > 0 """
            """AND position(convert_to('"one"', 'UTF8') in data) > 0""",
        },
    )
    with agui_store.open(db) as store:
        for _ in range(2):  # the same refusal again: nothing was left half read
            with pytest.raises(HashMismatchError, match="does not hash to its address"):
                store.checkout("r2", thread_id=T)
        assert [e["type"] for e in store.events("r1", thread_id=T)][-1] == "RUN_FINISHED"
        assert [run.run_id for run in store.log("r2", thread_id=T)] == ["r2", "r1"]


def test_a_state_edited_into_broken_json_is_refused_as_tampering_not_as_bad_input(
    db: str,
) -> None:
    """The state is checked against its address before it is decoded: its JSON failing is
    not the caller's bad input, and a forged address leaves a damaged store, not a crash."""
    cut = "substr(data, 1, length(data) - 2)"
    state_of_r1 = "WHERE id = (SELECT state FROM checkpoints WHERE run = 1)"
    edit(db, f"UPDATE blobs SET data = {cut} {state_of_r1}")
    error = refused(db, "r1")
    assert error.run_id == "r1" and "does not hash to its address" in str(error)
    assert refused(db, "r3").run_id == "r2"  # replayed on r2's checkpoint, patches on r1's
    assert any(p.startswith("blobs: blob ") for p in problems(db))
    edit(db, f"UPDATE blobs SET hash = sha256(data) {state_of_r1}")
    with agui_store.open(db) as store, pytest.raises(CorruptStoreError, match="its state is not"):
        store.checkout("r1", thread_id=T)


def test_a_checkpoint_pointed_at_another_blob_is_named_and_refused(db: str) -> None:
    edit(
        db,
        # Its two segments (r1's message, then its own two) listed the other way round.
        {
            "sqlite": "UPDATE checkpoints SET tail = json_array(tail -> '$[1]', tail -> '$[0]') "
            "WHERE run = 2",
            "postgres": "UPDATE checkpoints SET tail = jsonb_build_array(tail::jsonb -> 1, "
            "tail::jsonb -> 0)::text WHERE run = 2",
        },
    )
    found = problems(db)
    assert (
        f"derived: the checkpoint of {R2} differs from a replay of the log at message 0 "
        "(id 'm-r1')" in found
    )
    assert any(p.startswith(f"derived: the checkpoint of {R2} holds other content") for p in found)
    error = refused(db, "r2")
    assert (error.thread_id, error.run_id) == (T, "r2")


def test_checkpoint_segments_deleted_or_listed_by_hand_are_named(db: str) -> None:
    """The list an erasure reads to keep the blobs a checkpoint uses: r1's rows deleted
    (an erasure would take blobs r1 still uses) and r1's state listed for r2 (it would keep
    a blob no checkpoint's tail holds)."""
    with agui_store.open(db) as store:
        conn = testing.connection(store)
        r1_blobs = [b for (b,) in conn.execute(
            "SELECT blob FROM checkpoint_segments WHERE run = 1 ORDER BY blob"
        ).fetchall()]
        (state,) = conn.execute("SELECT state FROM checkpoints WHERE run = 1").fetchone()
    assert r1_blobs and state not in r1_blobs
    edit(
        db,
        "DELETE FROM checkpoint_segments WHERE run = 1",
        f"INSERT INTO checkpoint_segments(run, blob) VALUES (2, {state})",
    )
    assert problems(db) == [
        f"checkpoints: the checkpoint of {R1}: its tail's blob ids "
        f"{', '.join(map(str, r1_blobs))} are not in checkpoint_segments, the list an erasure "
        "reads to keep the blobs a checkpoint uses",
        f"checkpoints: checkpoint_segments lists blob ids {state} for {R2}, but its "
        "checkpoint's tail does not hold them",
    ]


def test_swapped_sequence_numbers_are_named_and_refused(db: str) -> None:
    start, content = (
        event_seq(db, "r3", "TEXT_MESSAGE_START"),
        event_seq(db, "r3", "TEXT_MESSAGE_CONTENT"),
    )
    edit(
        db,
        f"UPDATE events SET seq = -1 WHERE seq = {start}",
        f"UPDATE events SET seq = {start} WHERE seq = {content}",
        f"UPDATE events SET seq = {content} WHERE seq = -1",
    )
    found = problems(db)
    assert f"hashes: {R3}: batch #3 (seq 13..14): {EVENTS_DIFFER}" in found
    assert f"hashes: {R3}: batch #4 (seq 15..15): {EVENTS_DIFFER}" in found
    error = refused(db, "r3")
    assert "events at seq 13..14 are not the ones its hash covers" in str(error)


def test_renumbered_sequence_numbers_leave_a_hole_but_change_no_content_hash(db: str) -> None:
    """Sequence numbers are the store's own (another store numbers the same events
    otherwise): a run's events renumbered in their order are the same content, and its
    hash and its checkout say so; the numbers they left are a hole check() reports."""
    with agui_store.open(db) as store:
        before = store.get_run("r3", thread_id=T)
    view = checkout(db, "r3")
    edit(
        db,
        "UPDATE events SET seq = seq + 1000 WHERE run = 3",
        "UPDATE echo_refs SET seq = seq + 1000 WHERE seq IN (SELECT seq FROM events WHERE run = 3)",
        "UPDATE batches SET first_seq = first_seq + 1000, last_seq = last_seq + 1000 WHERE run = 3",
    )
    # The numbers left behind are a hole no erasure logged: check() names it. The content
    # is the same, so no hash differs and the run still checks out as before.
    assert problems(db) == [
        "batches: seq 13..1012: no event, batch or erasure holds these sequence numbers: "
        "rows were deleted or renumbered outside agui-store",
    ]
    assert checkout(db, "r3") == view
    with agui_store.open(db) as store:
        after = store.get_run("r3", thread_id=T)
    assert after is not None and before is not None and after.hash == before.hash


def test_a_re_pointed_parent_is_named_with_the_parent_the_hash_covers_and_refused(
    db: str,
) -> None:
    edit(db, "UPDATE runs SET parent = 1 WHERE id = 3")
    found = problems(db)
    assert any(
        p.startswith(f"hashes: {R3}: its lineage parent is {R1}, whose hash was ")
        and p.endswith(f"but its hash covers a parent whose hash was {_short(db, 'r2')} ({R2})")
        for p in found
    ), found
    error = refused(db, "r3")
    assert "lineage parent is not the one its hash covers" in str(error)


def _short(path: str, run: str) -> str:
    with agui_store.open(path) as store:
        found = store.get_run(run, thread_id=T)
    assert found is not None and found.short_hash is not None
    return found.short_hash


def test_an_edited_input_is_named_and_refused_by_input_and_checkout(db: str) -> None:
    edit(
        db,
        {
            "sqlite": "UPDATE runs SET input = json_set(input, '$.forwardedProps.n', 99) "
            "WHERE id IN (2, 3)",
            "postgres": "UPDATE runs SET input = jsonb_set(input::jsonb, '{forwardedProps,n}', "
            "'99')::text WHERE id IN (2, 3)",
        },
    )
    found = problems(db)
    for name in (R2, R3):
        assert any(
            p.startswith(f"hashes: {name}: its input differs from what its hash covers")
            for p in found
        ), found
    with agui_store.open(db) as store:
        for run in ("r2", "r3"):
            with pytest.raises(HashMismatchError, match="its input is not the one its hash"):
                store.input(run, thread_id=T)
    refused(db, "r3")  # the live run starts from its input


def test_edited_input_references_are_named(db: str) -> None:
    # r2's input names r1's messages by [start, count]: point it at fewer of them.
    edit(db, """UPDATE runs SET input_refs = '{"messages":[[0,1]]}' WHERE id = 2""")
    found = problems(db)
    assert any(
        p.startswith(f"hashes: {R2}: its input differs from what its hash covers") for p in found
    ), found
    with agui_store.open(db) as store, pytest.raises(HashMismatchError):
        store.input("r2", thread_id=T)


def test_edited_echo_references_are_named(db: str) -> None:
    edit(db, """UPDATE echo_refs SET refs = '{"messages":[[0,1]]}'""")
    assert f"hashes: {R2}: batch #2 (seq 7..12): {EVENTS_DIFFER}" in problems(db)


def test_a_forged_lineage_digest_is_named(db: str) -> None:
    edit(
        db,
        {
            "sqlite": "UPDATE lineage_digests SET ids_hash = sha256(CAST('x' AS BLOB)) "
            "WHERE run = 2",
            "postgres": "UPDATE lineage_digests SET ids_hash = sha256('x'::bytea) WHERE run = 2",
        },
    )
    found = problems(db)
    assert any(
        p.startswith(f"derived: the lineage digest of {R2} is ")
        and p.endswith("lineage rule 3 would place runs by a view the run does not have")
        for p in found
    ), found


def test_a_deleted_lineage_digest_is_named_as_missing(db: str) -> None:
    edit(db, "DELETE FROM lineage_digests WHERE run = 2")
    assert problems(db) == [
        f"derived: the lineage digest of {R2} is missing, though the run ended and was "
        "derived: lineage rule 3 cannot place a run by the view it left"
    ]


def test_forged_state_patches_with_their_address_recomputed_are_named_and_refused(
    db: str,
) -> None:
    patches = '[[{"op":"add","path":"/notes/-","value":"FORGED"}]]'
    edit(
        db,
        {
            "sqlite": f"UPDATE blobs SET data = CAST('{patches}' AS BLOB), "
            f"hash = sha256(CAST('{patches}' AS BLOB)) "
            "WHERE id = (SELECT state FROM checkpoints WHERE run = 2)",
            "postgres": f"UPDATE blobs SET data = convert_to('{patches}', 'UTF8'), "
            f"hash = sha256(convert_to('{patches}', 'UTF8')) "
            "WHERE id = (SELECT state FROM checkpoints WHERE run = 2)",
        },
    )
    found = problems(db)
    assert f"derived: the checkpoint of {R2}: its state differs from a replay of the log" in found
    refused(db, "r2")


def test_a_run_whose_own_hashes_were_rewritten_breaks_its_childs_link(db: str) -> None:
    """The hostile user who also recomputes the edited run's batch hashes (with this very
    library's algorithm) still leaves the runs below it pointing at the old hash, and the
    checkpoint derived at the old hash."""
    edit(db, R2_ANSWER_EDITED)
    if is_postgres(db):
        _rehash_on_postgres(db)
    else:
        _rehash_on_sqlite(db)
    found = problems(db)
    assert not [p for p in found if p.startswith(f"hashes: {R2}")], found
    assert any(
        p.startswith(f"hashes: {R3}: its lineage parent is {R2}, whose hash was ")
        and p.endswith("but its hash covers a parent whose hash was " + p.split()[-1])
        for p in found
    ), found
    assert any(
        p.startswith(f"derived: the checkpoint of {R2} was derived at run hash ") for p in found
    ), found
    error = refused(db, "r2")
    assert "derived from other events than the run now holds" in str(error)


def _rehash_on_postgres(location: str) -> None:
    """r2's batch hashes recomputed from its edited events, as the store computes them."""
    from agui_store.backends.postgres import sql as pg_sql
    from agui_store.history import hashing

    with postgres_owner(location) as conn:
        (start,) = conn.execute("SELECT start_hash FROM runs WHERE id = 2").fetchone()
        for pk, first, last, outcome, at in conn.execute(
            "SELECT id, first_seq, last_seq, outcome, appended_at FROM batches WHERE run = 2 "
            "ORDER BY id"
        ).fetchall():
            rows = conn.execute(
                pg_sql.BATCH_EVENTS, {"first": first, "last": last, "run": 2}
            ).fetchall()
            start = hashing.chain(start, hashing.batch_digest(rows, outcome, at))
            conn.execute("UPDATE batches SET hash = %s WHERE id = %s", (start, pk))


def _rehash_on_sqlite(db: str) -> None:
    rehash = r"""
import sqlite3, sys
from agui_store.history import hashing
from agui_store.backends.sqlite import sql as sqlite_sql
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("DROP TRIGGER batches_are_append_only_update")
start, = conn.execute("SELECT start_hash FROM runs WHERE id = 2").fetchone()
for pk, first, last, outcome, at in conn.execute(
    "SELECT id, first_seq, last_seq, outcome, appended_at FROM batches WHERE run = 2 ORDER BY id"
).fetchall():
    rows = conn.execute(sqlite_sql.BATCH_EVENTS, (first, last, 2)).fetchall()
    start = hashing.chain(start, hashing.batch_digest(rows, outcome, at))
    conn.execute("UPDATE batches SET hash = ? WHERE id = ?", (start, pk))
"""
    schema_sql = _trigger_sql(db, "batches_are_append_only_update")
    subprocess.run(
        [sys.executable, "-c", rehash + f"\nconn.execute({schema_sql!r})\n", str(db)],
        check=True,
        env=worker_env(),
        timeout=120,
    )


def _trigger_sql(path: str, name: str) -> str:
    with agui_store.open(path) as store:
        return str(
            testing.connection(store)
            .execute("SELECT sql FROM sqlite_schema WHERE name = ?", (name,))
            .fetchone()[0]
        )


# --- copy: an edit is refused, never given fresh hashes elsewhere -------------------------

INPUT_EDITED: Edit = {
    "sqlite": "UPDATE runs SET input = json_set(input, '$.forwardedProps.n', 99) WHERE id = 2",
    "postgres": "UPDATE runs SET input = jsonb_set(input::jsonb, '{forwardedProps,n}', "
    "'99')::text WHERE id = 2",
}


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (R2_ANSWER_EDITED, "in the source, its batch of seq {seqs} (events, outcome or time) "
         "differs"),
        (INPUT_EDITED, "in the source, its record or input differs from what its hash covers"),
    ],
    ids=["an event", "an input"],
)
def test_a_copy_or_an_archive_of_an_edited_store_is_refused_and_writes_nothing(
    db: str, tmp_path: Path, change: Edit, what: str
) -> None:
    """An archive carries the store's hashes, which every import checks: one of an edited
    store is refused as it is written, not when it is needed back."""
    edit(db, change)
    with agui_store.open(db) as store:
        found = [str(p) for p in store.check().problems]
    # The batch is named by its events' positions, as check names it in the source.
    seqs = [re.search(r"\(seq (\d+\.\.\d+)\)", p) for p in found if " batch #" in p]
    if "{seqs}" in what:
        assert len(seqs) == 1 and seqs[0] is not None
        what = what.format(seqs=seqs[0].group(1))
    target = tmp_path / "copy.db"
    with pytest.raises(HashMismatchError) as caught:
        agui_store.copy(db, target)
    assert caught.value.run_id == "r2" and caught.value.thread_id == T
    assert what in str(caught.value) and str(caught.value).endswith("nothing was copied")
    assert not target.exists()
    archive = tmp_path / "store.jsonl"
    for thread in (None, T):
        with agui_store.open(db) as store, pytest.raises(HashMismatchError) as caught:
            store.export_archive(archive, thread_id=thread)
        assert caught.value.run_id == "r2" and what in str(caught.value)
        assert "nothing was exported" in str(caught.value)
        assert not archive.exists()


# --- the search index: derived data, checked against the replay ---------------------------

#: The index's rows: SQLite keeps a new row pending (words and all) until enough are waiting,
#: PostgreSQL keeps every row, words included, in one table.
SEARCH_ROWS = {"sqlite": "search_pending", "postgres": "search_messages"}


def _on_search_rows(statement: str) -> dict[str, str]:
    return {backend: statement.format(rows=table) for backend, table in SEARCH_ROWS.items()}


def test_a_deleted_search_index_row_is_named_and_its_message_is_no_longer_found(
    db: str,
) -> None:
    edit(db, _on_search_rows("DELETE FROM {rows} WHERE run = 1"))
    assert (
        f"derived: the search index lacks message 'm-r1' as {R1} left it (position 0): a "
        "search cannot find it"
    ) in problems(db)
    with agui_store.open(db) as store:
        assert not store.search("one")


def test_a_search_index_row_pointed_at_another_message_of_its_checkpoint_is_named(
    db: str,
) -> None:
    edit(db, _on_search_rows("UPDATE {rows} SET at = at + 1 WHERE run = 2 AND pos = 1"))
    found = [p for p in problems(db) if "search index" in p]
    assert len(found) == 1 and found[0].startswith("derived: search index row #"), found
    assert f"of {R2} names blob #" in found[0]
    assert found[0].endswith(
        "which is not where the run's checkpoint holds its message: a hit on it would show "
        "another message"
    )


def test_a_search_index_row_naming_other_text_of_its_run_is_named(db: str) -> None:
    edit(db, _on_search_rows("UPDATE {rows} SET key = key + 1 WHERE run = 2 AND pos = 2"))
    found = problems(db)
    assert any(
        p.startswith("derived: search index row #") and f"of {R2} names position 2 " in p
        for p in found
    ), found
    assert (
        f"derived: the search index lacks message 'm-r2' as {R2} left it (position 2): a "
        "search cannot find it"
    ) in found


#: r1's answer ("one") indexed under other words (SQLite: a pending row, words and all).
R1_WORDS_FORGED: Edit = {
    "sqlite": "UPDATE search_pending SET words = 'forged one' WHERE run = 1",
    "postgres": "UPDATE search_messages SET words = 'forged one'::tsvector WHERE run = 1",
}


def test_a_search_index_row_whose_words_were_edited_is_named(db: str) -> None:
    edit(db, R1_WORDS_FORGED)
    with agui_store.open(db) as store:
        assert [hit.message_id for hit in store.search("forged")] == ["m-r1"]
    found = [p for p in problems(db) if "search index" in p]
    assert len(found) == 1, found
    assert found[0].startswith("derived: search index row #") and found[0].endswith(
        f"of {R1} holds other words than its message's text gives: a search finds the "
        "message by words it does not hold, or misses it by words it holds"
    )


def test_a_search_index_row_of_a_run_the_store_does_not_hold_is_named(db: str) -> None:
    edit(
        db,
        {
            "sqlite": "INSERT INTO search_pending(thread, run, key, pos, words) "
            "VALUES (1, 999, 5, 0, 'erased words')",
            "postgres": "INSERT INTO search_messages(thread, run, key, pos, words) "
            "VALUES (1, 999, 5, 0, 'erased words'::tsvector)",
        },
    )
    found = [p for p in problems(db) if "search index" in p]
    assert len(found) == 1, found
    assert found[0].startswith("derived: search index rows #") and found[0].endswith(
        "name run #999, which the store does not hold: a search can find text the store no "
        "longer keeps"
    )


#: What an erasure takes a thread out of, as a backup made before it holds them: its log,
#: branches and derived data. Besides, each backend's search rows, and on PostgreSQL a
#: checkpoint's segments, which SQLite's schema lists as the checkpoint is put back (the
#: owner's edits there run with that trigger on).
BACKED_UP = (
    "threads", "runs", "batches", "events", "echo_refs", "branches", "blobs", "checkpoints",
    "lineage_digests",
)
BACKED_UP_APART = {
    "sqlite": ("search_pending",),
    "postgres": ("search_messages", "checkpoint_segments"),
}


def test_an_erased_thread_put_back_from_a_backup_is_named_as_erased(backend: str, db: str) -> None:
    tables = (*BACKED_UP, *BACKED_UP_APART[backend])
    with owner(db) as conn:
        for table in tables:
            conn.execute(f"CREATE TABLE backup_{table} AS SELECT * FROM {table}")
    with agui_store.open(db) as store:
        store.delete_thread(T)
        logged = store.check().erasures[-1].erased_at
    assert logged is not None
    erased_at = logged.isoformat(timespec="milliseconds")
    with owner(db) as conn:
        for table in tables:
            conn.execute(f"INSERT INTO {table} SELECT * FROM backup_{table}")
            conn.execute(f"DROP TABLE backup_{table}")
    found = problems(db)
    assert len(found) == 1, found
    assert found[0].startswith("erasures: thread 't' (#1), created at ")
    assert found[0].endswith(
        f"was erased at {erased_at} (its tombstone says so), but the store holds it again: "
        "its rows were put back outside agui-store, from a backup say, and what was erased "
        "can be read again (delete_thread('t') erases it again)"
    )
    with agui_store.open(db) as store:
        store.delete_thread(T)
    assert problems(db) == []


def test_an_erased_threads_row_alone_put_back_is_named_as_erased(db: str) -> None:
    # No run comes back with it, but the list of threads names the erased id (and owner).
    with owner(db) as conn:
        conn.execute("CREATE TABLE backup_threads AS SELECT * FROM threads")
    with agui_store.open(db) as store:
        store.delete_thread(T)
    with owner(db) as conn:
        conn.execute("INSERT INTO threads SELECT * FROM backup_threads")
        conn.execute("DROP TABLE backup_threads")
    with agui_store.open(db) as store:
        assert T in store.threads()
    found = problems(db)
    assert len(found) == 1, found
    assert found[0].startswith("erasures: thread 't' (#1), created at ")
    assert "but the store holds it again" in found[0]
    with agui_store.open(db) as store:
        store.delete_thread(T)
    assert problems(db) == []


#: A pydantic-ai conversation's rows (of one with no branches), parents first.
CONVERSATION_TABLES = ("conversation_messages", "conversation_entries", "conversations")


@pytest.mark.pydantic_ai
def test_an_erased_conversation_put_back_from_a_backup_is_named_as_erased(db: str) -> None:
    async def save(cid: str, text: str, scope: str) -> None:
        async with ConversationStore(db) as talks:
            await talks.save(
                Conversation(conversation_id=cid, messages=[user(text), reply(f"{text}?")]),
                scope=scope,
            )

    asyncio.run(save("kept", "hello", "alice"))
    asyncio.run(save("gone", "erased words", "bob"))
    with owner(db) as conn:
        for table in CONVERSATION_TABLES:
            conn.execute(f"CREATE TABLE backup_{table} AS SELECT * FROM {table}")
    with agui_store.open(db) as store:
        assert store.delete_owner("bob").conversations == 1
        erased_at = store.check().erasures[-1].erased_at
    assert erased_at is not None and problems(db) == []
    with owner(db) as conn:
        for table in CONVERSATION_TABLES:
            conn.execute(
                f"INSERT INTO {table} SELECT * FROM backup_{table} "
                f"WHERE id NOT IN (SELECT id FROM {table})"
            )
            conn.execute(f"DROP TABLE backup_{table}")
    assert problems(db) == [
        f"erasures: conversation 'gone' was erased at "
        f"{erased_at.isoformat(timespec='milliseconds')} (its tombstones say so), but the "
        "store holds it again, with 2 of the entries it had: its rows were put back outside "
        "agui-store, from a backup say, and what was erased can be read again (pydantic-ai's "
        "delete, then Store.purge(), removes it again)"
    ]

    async def forget() -> None:
        async with ConversationStore(db) as talks:
            await talks.delete("gone", scope="bob")

    asyncio.run(forget())
    assert problems(db) == []


# --- the command line -------------------------------------------------------------------


def test_the_cli_check_fails_and_show_refuses_with_one_line_naming_the_run(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(db, "UPDATE runs SET parent = 1 WHERE id = 3")
    out = io.StringIO()
    assert cli.main(["--db", str(db), "check"], out=out) == 1
    assert f"hashes: {R3}: its lineage parent is {R1}" in out.getvalue()
    assert "rebuild" not in out.getvalue()  # an edit of the log: no rebuild undoes it
    capsys.readouterr()
    assert cli.main(["--db", str(db), "show", "r3", "--thread", T], out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run 'r3' of thread 't'" in err


def test_log_and_show_print_the_short_hash_and_json_the_whole_one(db: str) -> None:
    with agui_store.open(db) as store:
        runs = {r.run_id: r for r in store.runs(T)}
    assert all(r.hash is not None and len(r.hash) == 64 for r in runs.values())
    out = io.StringIO()
    assert cli.main(["--db", str(db), "log", "r3", "--thread", T], out=out) == 0
    lines = out.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == ["r3", "r2", "r1"]
    # After the lineage, before the user's words; "+" while live (what was recorded so far).
    assert f"[messages]  {runs['r3'].short_hash}+  " in lines[0]
    assert f"]  {runs['r2'].short_hash}  " in lines[1]
    assert lines[2].endswith(f"[root]  {runs['r1'].short_hash}")
    out = io.StringIO()
    assert cli.main(["--db", str(db), "show", "r2", "--thread", T], out=out) == 0
    assert out.getvalue().startswith(f"run r2 [{runs['r2'].short_hash}] (thread t) - finished")
    with agui_store.open(db) as store:
        html = store.log("r3", thread_id=T)._repr_html_()
    assert f"<td><code>{runs['r2'].short_hash}</code></td>" in html
    assert f"<td><code>{runs['r3'].short_hash}+</code></td>" in html
    out = io.StringIO()
    assert cli.main(["--db", str(db), "show", "r2", "--thread", T, "--json"], out=out) == 0
    shown = json.loads(out.getvalue())["run"]
    assert (shown["hash"], shown["shortHash"]) == (runs["r2"].hash, runs["r2"].short_hash)


# --- what the hash covers ---------------------------------------------------------------


def test_a_run_hash_follows_its_batches_and_its_parent_and_is_final_once_complete(
    store_location: str,
) -> None:
    def run_of(store: agui_store.Store, run: str) -> str:
        found = store.get_run(run, thread_id="h")
        assert found is not None and found.hash is not None
        return found.hash

    with agui_store.open(store_location) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "h", "runId": "a"}])
        seen = [run_of(store, "a")]
        for event in answer("a", "x"):
            store.append([event], thread_id="h")
            seen.append(run_of(store, "a"))
        store.append([{"type": "RUN_FINISHED", "threadId": "h", "runId": "a"}], thread_id="h")
        final = run_of(store, "a")
        assert len({*seen, final}) == len(seen) + 1  # every batch moves the hash on
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "h", "runId": "b"},
                {"type": "RUN_FINISHED", "threadId": "h", "runId": "b"},
            ]
        )
        assert run_of(store, "a") == final  # a child does not change its parent
        assert store.check().ok


# --- rebuilding derived data from the log -------------------------------------------------


def test_rebuild_derives_again_what_forged_derived_data_made_differ_from_the_log(
    db: str,
) -> None:
    before = {run: checkout(db, run) for run in ("r1", "r2", "r3")}
    edit(
        db,
        R2_BLOB_FORGED,
        {
            "sqlite": "UPDATE lineage_digests SET ids_hash = sha256(CAST('x' AS BLOB)) "
            "WHERE run = 1",
            "postgres": "UPDATE lineage_digests SET ids_hash = sha256('x'::bytea) WHERE run = 1",
        },
        _on_search_rows("DELETE FROM {rows} WHERE run = 1"),
    )
    found = problems(db)
    for named in (
        f"derived: the lineage digest of {R1} is ",
        f"derived: the checkpoint of {R2} differs from a replay of the log",
    ):
        assert any(p.startswith(named) for p in found), "\n".join(found)
    with agui_store.open(db) as store:
        assert not store.search("one")
        assert store.rebuild(thread_id=T) == 2  # r1 and r2; r3 is live
        assert [hit.message_id for hit in store.search("one")] == ["m-r1"]
        assert sorted(hit.message_id for hit in store.search("two")) == ["m-r2", "u2"]
    assert problems(db) == []
    assert {run: checkout(db, run) for run in ("r1", "r2", "r3")} == before


def test_rebuild_refuses_a_log_edited_since_and_leaves_the_store_as_it_was(db: str) -> None:
    edit(db, R2_ANSWER_EDITED)
    held = dump(db)
    with agui_store.open(db) as store, pytest.raises(HashMismatchError) as caught:
        store.rebuild()
    assert caught.value.run_id == "r2"
    assert "its events at seq" in str(caught.value)
    assert dump(db) == held


def test_rebuild_of_every_thread_writes_again_a_blob_edited_in_place(db: str) -> None:
    before = {run: checkout(db, run) for run in ("r1", "r2", "r3")}
    edit(db, R2_BLOB_EDITED)
    assert any(p.startswith("blobs: blob ") for p in problems(db))
    with agui_store.open(db) as store:
        assert store.rebuild() == 2
    assert problems(db) == []
    assert {run: checkout(db, run) for run in ("r1", "r2", "r3")} == before


#: Edits of data derived from the log, each of which ``check()`` names under a check that
#: ``agui-store check`` says ``rebuild`` repairs (:data:`agui_store.cli.commands.REBUILT`).
DERIVED_EDITS: dict[str, list[Edit]] = {
    "a checkpoint's tail listed the other way round": [
        {
            "sqlite": "UPDATE checkpoints SET tail = json_array(tail -> '$[1]', tail -> '$[0]') "
            "WHERE run = 2",
            "postgres": "UPDATE checkpoints SET tail = jsonb_build_array(tail::jsonb -> 1, "
            "tail::jsonb -> 0)::text WHERE run = 2",
        }
    ],
    "checkpoint segments deleted and listed by hand": [
        "DELETE FROM checkpoint_segments WHERE run = 1",
        "INSERT INTO checkpoint_segments(run, blob) "
        "SELECT 2, state FROM checkpoints WHERE run = 1",
    ],
    "a lineage digest deleted": ["DELETE FROM lineage_digests WHERE run = 1"],
    "a search row pointed at another message": [
        _on_search_rows("UPDATE {rows} SET at = at + 1 WHERE run = 2 AND pos = 1")
    ],
    "a blob edited in place": [R2_BLOB_EDITED],
    "a search row's words edited": [R1_WORDS_FORGED],
}


@pytest.mark.parametrize("edits", DERIVED_EDITS.values(), ids=DERIVED_EDITS.keys())
def test_rebuild_leaves_no_problem_an_edit_of_derived_data_made(
    db: str, edits: list[Edit]
) -> None:
    from agui_store.cli.commands import REBUILT

    before = {run: checkout(db, run) for run in ("r1", "r2", "r3")}
    edit(db, *edits)
    found = problems(db)
    assert found and {p.split(":", 1)[0] for p in found} <= REBUILT, found
    out = io.StringIO()
    assert cli.main(["--db", db, "check"], out=out) == 1
    said = out.getvalue().splitlines()[-1]
    assert said.startswith("every problem is in data derived from the log") and said.endswith(
        " rebuild derives it again"
    ), said
    assert cli.main(["--db", db, "rebuild"], out=io.StringIO()) == 0
    assert problems(db) == []
    assert {run: checkout(db, run) for run in ("r1", "r2", "r3")} == before
