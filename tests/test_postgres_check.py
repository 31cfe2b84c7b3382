"""PostgreSQL's own storage checks in ``Store.check()``: its schema's objects and triggers,
its foreign keys, its event pages, and how the checks read (server-side cursors, a failed
part leaving the transaction usable). What the owner of the tables can break is broken as
the owner (:func:`tests.backends.postgres_owner`) and named by the report. The store's own
invariants, the same on every backend, are in tests/contract/test_check.py."""

from __future__ import annotations

import pytest

import agui_store
from agui_store import testing
from agui_store.backends.postgres.schema import (
    SCHEMA_VERSION as PG_VERSION,  # named in check()'s findings
)
from tests.backends import problems, tamper
from tests.test_integrity import CORRUPTIONS, build, matches

#: What tests/test_integrity.py expects, by corruption.
EXPECTED = {name: lines for name, _, lines in CORRUPTIONS}


def test_the_log_pass_on_postgresql_reads_through_server_side_cursors(pg_built: str) -> None:
    """The log is streamed a page at a time, not fetched whole into the client."""
    with agui_store.open(pg_built) as store, testing.reading(store) as tx:
        conn = testing.connection(store)
        events, batches = iter(tx.log_in_order()), iter(tx.batches_in_order())
        assert next(events)[:3] == (1, 1, "RUN_STARTED") and next(batches)[0] == 1
        open_cursors = "SELECT count(*) FROM pg_cursors WHERE name LIKE 'agui_store_check_%'"
        assert conn.execute(open_cursors).fetchone()[0] == 2
        assert len(list(events)) == 16 and len(list(batches)) == 6
        assert conn.execute(open_cursors).fetchone()[0] == 0  # closed once read to the end


# --- PostgreSQL's own storage checks ------------------------------------------------------


@pytest.fixture
def pg_built(postgres_store_database: str) -> str:
    build(postgres_store_database)
    return postgres_store_database


def pg_owner_does(location: str, *statements: str) -> list[str]:
    """Run DDL as the tables' owner (the superuser here), then check."""
    import psycopg

    with psycopg.connect(location) as conn:
        conn.execute("SET search_path TO agui_store")
        for statement in statements:
            conn.execute(statement)
    return problems(location)


def test_a_disabled_append_only_trigger_on_postgresql_is_a_schema_problem(pg_built: str) -> None:
    assert pg_owner_does(
        pg_built, "ALTER TABLE event_pages DISABLE TRIGGER event_pages_are_append_only"
    ) == [
        "schema: trigger event_pages_are_append_only is disabled: UPDATE and DELETE of "
        "event_pages are no longer refused"
    ]


def test_a_dropped_or_replica_only_trigger_on_postgresql_is_a_schema_problem(
    pg_built: str,
) -> None:
    assert pg_owner_does(
        pg_built,
        "DROP TRIGGER runs_are_append_only_truncate ON runs",
        "ALTER TABLE batches ENABLE REPLICA TRIGGER batches_are_append_only",
    ) == [
        "schema: trigger batches_are_append_only fires only in replica sessions: UPDATE and "
        "DELETE of batches are no longer refused",
        "schema: trigger runs_are_append_only_truncate is missing: TRUNCATE of runs is no longer "
        "refused",
    ]


def test_a_disarmed_trigger_function_on_postgresql_is_a_schema_problem(pg_built: str) -> None:
    found = pg_owner_does(
        pg_built,
        "CREATE OR REPLACE FUNCTION refuse_log_change() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RETURN OLD; END $$",
    )
    assert found == [
        f"schema: function refuse_log_change is not what schema version {PG_VERSION} defines "
        "(found: BEGIN "
        "RETURN OLD; END)"
    ]


def test_foreign_keys_switched_off_on_postgresql_are_named_and_their_orphans_found(
    pg_built: str,
) -> None:
    found = pg_owner_does(
        pg_built,
        "ALTER TABLE branches DISABLE TRIGGER ALL",
        "INSERT INTO branches(thread, name, run, updated_at) VALUES (1, 'ghost', 99, 0)",
        "ALTER TABLE event_pages DROP CONSTRAINT event_pages_run_fkey",
        "INSERT INTO events(seq, run, type, payload) VALUES "
        """(18, 98, 'CUSTOM', '{"type":"CUSTOM","name":"n","value":1}')""",
    )
    assert found == [
        "foreign_keys: a branches row names a missing runs row (through run)",
        "foreign_keys: events row 18: run = 98 names no row of runs",
        "schema: the foreign key event_pages.run -> runs.id is missing: the server no longer "
        "refuses "
        "rows that name no row",
        "schema: the foreign keys of branches are not enforced: their triggers are disabled "
        "(ALTER TABLE ... DISABLE TRIGGER ALL)",
        "refs: branch 'ghost' of thread 't' points at run #99, which does not exist",
        "batches: event seq 18 (CUSTOM) of run #98 (missing) is in no batch",
    ]


def test_a_dropped_check_constraint_on_postgresql_lets_a_lineage_cycle_in_and_both_are_named(
    pg_built: str,
) -> None:
    found = pg_owner_does(
        pg_built,
        "ALTER TABLE runs DROP CONSTRAINT runs_check",
        "SET session_replication_role = replica",
        "UPDATE runs SET parent = 2 WHERE id = 1",
    )
    expected = [
        f"schema: table runs has 1 CHECK constraints, where schema version {PG_VERSION} defines 2",
        *(line for line in EXPECTED["a lineage cycle"] if not line.startswith("sqlite:")),
    ]
    assert matches(found, expected), "\n".join(found)


def test_a_changed_index_column_type_or_schema_version_on_postgresql_is_named(
    pg_built: str,
) -> None:
    assert pg_owner_does(
        pg_built,
        "DROP INDEX event_pages_by_run",
        "CREATE INDEX event_pages_by_run ON event_pages(last_seq, first_seq)",
        "DROP INDEX runs_by_run_id",
        "ALTER TABLE threads ADD COLUMN note text",
        'ALTER TABLE branches ALTER COLUMN name TYPE text COLLATE "POSIX"',
    ) == [
        f"schema: table threads has column note, which schema version {PG_VERSION} does not define",
        f"schema: column branches.name collates by 'POSIX', where schema version {PG_VERSION} "
        "defines 'C' "
        "(the store relies on byte order: run-id prefixes, sorted ids)",
        f"schema: index event_pages_by_run is not what schema version {PG_VERSION} defines "
        "(found: CREATE INDEX "
        "event_pages_by_run ON event_pages USING btree (last_seq, first_seq))",
        "schema: index runs_by_run_id is missing",
    ]
    with agui_store.open(pg_built) as store:  # opened: a store of another version is not
        import psycopg

        with psycopg.connect(pg_built) as conn:
            conn.execute("UPDATE agui_store.meta SET value = '0' WHERE key = 'schema_version'")
        assert [str(p) for p in store.check().problems] == [
            "schema: schema version (meta) is 0, but this agui-store reads and writes version "
            f"{PG_VERSION}"
        ]


def test_a_schema_version_set_back_under_later_tables_on_postgresql_is_refused_unchanged(
    pg_built: str,
) -> None:
    import psycopg

    from tests.backends import dump

    with psycopg.connect(pg_built) as conn:
        conn.execute("UPDATE agui_store.meta SET value = '5' WHERE key = 'schema_version'")
    held = dump(pg_built)
    with pytest.raises(agui_store.SchemaVersionError) as refused:
        agui_store.open(pg_built)
    assert (
        ": PostgreSQL schema 'agui_store' records agui-store schema version 5, but holds tables "
        "of a later one ("
    ) in str(refused.value)
    assert str(refused.value).endswith(
        "its version was set back outside agui-store; nothing was changed. If this release "
        f"wrote it, record its version again (schema_version {PG_VERSION} in its meta table), "
        "then run agui-store check"
    )
    assert dump(pg_built) == held
    with psycopg.connect(pg_built) as conn:
        conn.execute(
            f"UPDATE agui_store.meta SET value = '{PG_VERSION}' WHERE key = 'schema_version'"
        )
    assert problems(pg_built) == []


def test_a_check_that_cannot_finish_on_postgresql_leaves_the_others_running(
    pg_built: str,
) -> None:
    """PostgreSQL aborts a transaction at its first error: each check runs in a savepoint, so
    a table the owner dropped fails the checks that read it, and only those."""
    found = pg_owner_does(pg_built, "DROP TABLE lineage_digests")
    assert found[0] == "schema: table lineage_digests is missing"
    rest = [p for p in found[1:] if not p.startswith("schema: index")]  # its indexes went too
    assert [p.split(":")[0] for p in rest] == ["lineage_digests", "derived"]
    assert all("could not finish the check: UndefinedTable" in p for p in rest), found


def test_a_part_that_fails_with_a_stream_open_leaves_the_postgresql_transaction_usable(
    pg_built: str,
) -> None:
    """A check that fails halfway through a server-side cursor: the savepoint is rolled back,
    the cursor closed first, and the rest of the transaction reads on (closing the dropped
    cursor afterwards would have aborted it)."""
    import gc

    with agui_store.open(pg_built) as store, testing.reading(store) as tx:
        events = iter(tx.log_in_order())
        with pytest.raises(ZeroDivisionError), tx.contained():
            next(events)
            next(iter(tx.every_blob()))
            1 / 0  # noqa: B018  # a check's own failure, a stream still open
        del events
        gc.collect()  # the abandoned generator's cleanup runs now
        assert len(list(tx.log_in_order())) == 17 and tx.complete_runs() == {1, 2, 4, 5}


def test_ctrl_c_inside_a_part_is_not_lost_to_the_statement_it_cut_short(
    pg_built: str,
) -> None:
    """Ctrl-C can land while psycopg is still reading a statement's result, leaving the
    connection busy with it: the part does not go back to its savepoint on that connection
    (which would fail, "another command is already in progress", and turn the interrupt
    into a lost connection); the interrupt goes on, and the transaction ends with it."""
    with agui_store.open(pg_built) as store:
        with testing.reading(store) as tx:
            assert tx.complete_runs() == {1, 2, 4, 5}  # the transaction is open
            conn = testing.connection(store)
            with pytest.raises(KeyboardInterrupt), tx.contained():
                conn.pgconn.send_query(b"SELECT 1")  # its result not read yet
                raise KeyboardInterrupt
        assert store.check().ok  # and the store reads on


# --- PostgreSQL's event pages -------------------------------------------------------------

#: The CHECK constraints of event_pages dropped (the owner can), so that a page may then break
#: what they said.
DROP_PAGE_CHECKS = """
DO $$
DECLARE name text;
BEGIN
    FOR name IN SELECT conname FROM pg_constraint
                WHERE conrelid = 'event_pages'::regclass AND contype = 'c' LOOP
        EXECUTE format('ALTER TABLE event_pages DROP CONSTRAINT %I', name);
    END LOOP;
END
$$
"""
NO_PAGE_CHECKS = (
    f"schema: table event_pages has 0 CHECK constraints, where schema version {PG_VERSION} "
    "defines 6"
)
R1_PAGE = "pages: the page of run #1 at seq 1..5"

#: Edits of event_pages itself, each with the lines check() must report among its findings.
PAGE_EDITS: dict[str, tuple[list[str], list[str]]] = {
    "a page with fewer types than payloads": (
        [DROP_PAGE_CHECKS, "UPDATE event_pages SET types = types[1:4] WHERE first_seq = 1"],
        [
            NO_PAGE_CHECKS,
            f"{R1_PAGE} holds 4 types and 5 payloads for its 5 seqs: the events view shows "
            "other events than the range says",
        ],
    ),
    "a page longer than its range": (
        [DROP_PAGE_CHECKS, "UPDATE event_pages SET last_seq = 4 WHERE first_seq = 1"],
        [
            NO_PAGE_CHECKS,
            "pages: the page of run #1 at seq 1..4 holds 5 types and 5 payloads for its 4 "
            "seqs: the events view shows other events than the range says",
        ],
    ),
    "a page holding a NULL payload": (
        [DROP_PAGE_CHECKS, "UPDATE event_pages SET payloads[2] = NULL WHERE first_seq = 1"],
        [NO_PAGE_CHECKS, f"{R1_PAGE} holds a NULL type or payload"],
    ),
    "a page whose arrays start at 0": (
        [
            DROP_PAGE_CHECKS,
            "UPDATE event_pages SET types = ('[0:4]=' || types::text)::text[], "
            "payloads = ('[0:4]=' || payloads::text)::text[] WHERE first_seq = 1",
        ],
        [NO_PAGE_CHECKS, f"{R1_PAGE} holds arrays that are not one-dimensional from index 1"],
    ),
    "a page holding an event another page holds": (
        [
            "INSERT INTO event_pages SELECT 3, 1, 3, ARRAY[type], ARRAY[payload] FROM events "
            "WHERE seq = 3"
        ],
        [
            "pages: the page of run #1 at seq 3..3 overlaps the page at seq 1..5: seq 3..3 are "
            "stored twice",
            "hashes: run 'r1' (thread 't', #1): batch #1 (seq 1..5): its events (their positions, "
            "types or bytes), outcome or time differ from what the run's hash covers",
        ],
    ),
    "a page spanning two batches": (
        [
            "UPDATE event_pages p SET last_seq = q.last_seq, types = p.types || q.types, "
            "payloads = p.payloads || q.payloads FROM event_pages q "
            "WHERE p.first_seq = 11 AND q.first_seq = 13",
            "DELETE FROM event_pages WHERE first_seq = 13",
        ],
        [
            "pages: the page of run #3 at seq 11..13 reaches past the end of batch #3 (seq "
            "11..12), where its first event is: the store writes a page within one batch"
        ],
    ),
}


@pytest.mark.parametrize("name", list(PAGE_EDITS))
def test_a_page_that_breaks_what_its_row_says_on_postgresql_is_named(
    pg_built: str, name: str
) -> None:
    statements, lines = PAGE_EDITS[name]
    tamper(pg_built, list(statements))
    found = problems(pg_built)
    for line in lines:
        assert line in found, "\n".join(found)
    pages = [p for p in found if p.startswith("pages:")]
    assert pages == [line for line in lines if line.startswith("pages:")], pages


def test_a_page_spanning_two_batches_reads_as_it_was_and_only_the_page_check_names_it(
    pg_built: str,
) -> None:
    with agui_store.open(pg_built) as store:
        before = store.events("r3", thread_id="t")
    tamper(pg_built, PAGE_EDITS["a page spanning two batches"][0])
    assert problems(pg_built) == PAGE_EDITS["a page spanning two batches"][1]
    with agui_store.open(pg_built) as store:
        assert store.events("r3", thread_id="t") == before


def test_a_dropped_trigger_or_view_of_the_events_view_on_postgresql_is_a_schema_problem(
    pg_built: str,
) -> None:
    assert pg_owner_does(pg_built, "DROP TRIGGER events_update ON events") == [
        "schema: trigger events_update is missing: UPDATE of events by hand no longer reaches "
        "what it shows"
    ]
    assert pg_owner_does(
        pg_built,
        "DROP VIEW events",
        "CREATE VIEW events(seq, run, payload) AS SELECT first_seq, run, payloads[1] "
        "FROM event_pages",
    ) == [
        f"schema: view events has columns seq, run, payload, where schema version {PG_VERSION} "
        "defines seq, run, type, payload",
        *(
            f"schema: trigger events_{op} is missing: {op.upper()} of events by hand no longer "
            "reaches what it shows"
            for op in ("delete", "insert", "update")
        ),
    ]
