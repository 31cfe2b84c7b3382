"""The PostgreSQL schema on a real server: it installs once whoever races, the server itself
keeps the log append-only, payloads keep their bytes, the hot reads use indexes, and the
application role of a deployment can neither write around the triggers nor remove them.

Runs against the throwaway cluster of ``tests/postgres_cluster.py`` (skips without PostgreSQL,
fails in CI).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import errors
from agui_store.backends.postgres import schema as pg_schema
from agui_store.backends.postgres import sql

psycopg = pytest.importorskip("psycopg")
from psycopg import errors as pg_errors  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from agui_store.backends.locations import without_password  # noqa: E402
from agui_store.backends.sqlite import schema as sqlite_schema  # noqa: E402
from tests.streams import run, say  # noqa: E402
from tests.workers.harness import search_on_a_terminal  # noqa: E402

SEARCH_PATH = f"-c search_path={pg_schema.SCHEMA}"
ROOT = Path(__file__).resolve().parents[1]


def connect(dsn: str, **kwargs: Any) -> Any:
    return psycopg.connect(dsn, autocommit=True, options=SEARCH_PATH, **kwargs)


@pytest.fixture
def installed(postgres_store_database: str) -> str:
    return postgres_store_database


def store_tables(conn: Any) -> dict[str, list[str]]:
    """Each table of the store's schema with its columns in order."""
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
        (pg_schema.SCHEMA,),
    ).fetchall()
    tables: dict[str, list[str]] = {}
    for table, column in rows:
        tables.setdefault(table, []).append(column)
    return tables


def add_log_rows(conn: Any, *, thread_id: str = "t1", runs: int = 1) -> list[int]:
    """A thread with a chain of ``runs`` runs, one event, one batch and one echo ref each."""
    (thread,) = conn.execute(
        "INSERT INTO threads(thread_id, created_at) VALUES (%s, 0) RETURNING id", (thread_id,)
    ).fetchone()
    (seq,) = conn.execute(sql.NEXT_SEQ).fetchone()
    pks: list[int] = []
    parent = None
    for number in range(runs):
        (run,) = conn.execute(
            "INSERT INTO runs(thread, run_id, parent, lineage, created_at) "
            "VALUES (%s, %s, %s, 'head', 0) RETURNING id",
            (thread, f"{thread_id}-r{number}", parent),
        ).fetchone()
        conn.execute(
            "INSERT INTO event_pages(first_seq, run, last_seq, types, payloads) "
            "VALUES (%s, %s, %s, ARRAY['RUN_STARTED'], ARRAY['{}'])",
            (seq, run, seq),
        )
        conn.execute(
            "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) "
            "VALUES (%s, %s, %s, 1, 0)",
            (run, seq, seq),
        )
        conn.execute("INSERT INTO echo_refs(seq, refs) VALUES (%s, '[]')", (seq,))
        pks.append(run)
        parent, seq = run, seq + 1
    return pks


# --- installing -------------------------------------------------------------------------------


def test_the_schema_installs_on_an_empty_database_with_every_table_and_its_version(
    postgres_database: str,
) -> None:
    with connect(postgres_database) as conn:
        assert pg_schema.install(conn) == 0
        assert set(store_tables(conn)) == {*pg_schema.TABLES, *pg_schema.VIEWS}
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert meta == {"application": "agui-store", "schema_version": str(pg_schema.SCHEMA_VERSION)}


def test_a_command_that_reads_a_database_holding_no_store_refuses_and_creates_nothing(
    postgres_database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_store import cli

    for command in (["threads"], ["check"], ["search", "porto"]):
        assert cli.main(["--db", postgres_database, *command]) == 1
        said = capsys.readouterr().err
        assert "no store at postgresql://" in said
        assert "the database holds no agui-store schema" in said
    assert cli.main(["copy", postgres_database, str(tmp_path / "out.db")]) == 1
    assert "to copy from: the database holds no agui-store schema" in capsys.readouterr().err
    assert not (tmp_path / "out.db").exists()
    with connect(postgres_database) as conn:
        assert pg_schema.installed_version(conn) == 0
        assert not store_tables(conn)
    assert cli.main(["--db", postgres_database, "demo"]) == 0  # a command that creates one


def test_installing_again_changes_nothing(installed: str) -> None:
    with connect(installed) as conn:
        before = conn.execute(
            "SELECT c.oid, c.relname, c.xmin::text FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s ORDER BY c.oid",
            (pg_schema.SCHEMA,),
        ).fetchall()
        meta_row = conn.execute("SELECT xmin::text FROM meta ORDER BY key").fetchall()
        assert pg_schema.install(conn) == pg_schema.SCHEMA_VERSION
        after = conn.execute(
            "SELECT c.oid, c.relname, c.xmin::text FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s ORDER BY c.oid",
            (pg_schema.SCHEMA,),
        ).fetchall()
        assert conn.execute("SELECT xmin::text FROM meta ORDER BY key").fetchall() == meta_row
    assert after == before


#: An installer process: connects, says so, waits for "go" on stdin, installs, prints the result.
_INSTALLER = """
import sys
sys.path.insert(0, sys.argv[2])
import psycopg
from agui_store.backends.postgres import schema
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        print("ok", schema.install(conn), flush=True)
    except Exception as e:
        print("error", repr(e), flush=True)
"""


def test_processes_installing_on_a_fresh_database_at_once_all_succeed_and_one_creates_it(
    postgres_database: str,
) -> None:
    installers = [
        subprocess.Popen(
            [sys.executable, "-c", _INSTALLER, postgres_database, str(ROOT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for process in installers:
            assert process.stdout is not None and process.stdout.readline() == "ready\n"
        for process in installers:  # all connected: release them together
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = sorted(process.communicate(timeout=120)[0].strip() for process in installers)
    finally:
        for process in installers:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert outcomes == ["ok 0"] + [f"ok {pg_schema.SCHEMA_VERSION}"] * 3


def test_a_schema_from_a_newer_agui_store_is_refused_and_left_alone(installed: str) -> None:
    with connect(installed) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
        with pytest.raises(errors.SchemaVersionError, match="999"):
            pg_schema.install(conn)
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            "999",
        )


def test_a_copy_refusing_a_store_of_a_newer_agui_store_names_which_database_it_is(
    installed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_store import cli
    from agui_store.backends.locations import without_password

    with connect(installed) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    assert cli.main(["copy", installed, str(tmp_path / "copy.db")]) == 1
    said = capsys.readouterr().err
    assert said.startswith(f"agui-store copy: {without_password(installed)}: "), said
    assert "schema version 999, newer than" in said
    assert not (tmp_path / "copy.db").exists()


def test_a_schema_holding_another_applications_tables_is_not_taken_over(
    postgres_database: str,
) -> None:
    with connect(postgres_database) as conn:
        conn.execute(f"CREATE SCHEMA {pg_schema.SCHEMA}")
        conn.execute(f"CREATE TABLE {pg_schema.SCHEMA}.events (id int)")
        with pytest.raises(errors.NotAStoreError, match="another application"):
            pg_schema.install(conn)
        assert set(store_tables(conn)) == {"events"}


@pytest.mark.parametrize("command", ["threads", "demo"])
def test_a_database_whose_store_schema_is_another_applications_is_named_by_the_cli(
    postgres_database: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_store import cli
    from agui_store.backends.locations import without_password

    with connect(postgres_database) as conn:
        conn.execute(f"CREATE SCHEMA {pg_schema.SCHEMA}")
        conn.execute(f"CREATE TABLE {pg_schema.SCHEMA}.events (id int)")
    assert cli.main(["--db", postgres_database, command]) == 1
    said = capsys.readouterr().err
    where = without_password(postgres_database)  # as every message shows the URL
    assert said.startswith(f"agui-store {command}: {where}: "), said
    assert "another application's" in said
    assert "name another schema" not in said  # neither the CLI nor open() can
    with connect(postgres_database) as conn:
        assert set(store_tables(conn)) == {"events"}


def test_the_store_can_live_in_a_schema_of_another_name(postgres_database: str) -> None:
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        assert pg_schema.install(conn, schema="team store") == 0
        assert pg_schema.installed_version(conn, schema="team store") == pg_schema.SCHEMA_VERSION
        assert pg_schema.installed_version(conn) == 0



def test_the_storage_page_names_the_postgresql_schema_version() -> None:
    page = Path(__file__).resolve().parents[1] / "docs" / "design" / "storage.md"
    text = page.read_text(encoding="utf-8")
    assert f"its own version ({pg_schema.SCHEMA_VERSION} in this release)" in text

def test_the_deployment_guide_grants_what_application_grants_gives() -> None:
    page = (ROOT / "docs" / "guides" / "postgresql.md").read_text(encoding="utf-8")
    block = page.split("```sql\nGRANT USAGE ON SCHEMA", 1)[1].split("```", 1)[0]
    shown = " ".join(("GRANT USAGE ON SCHEMA" + block).split())
    assert shown == " ".join(pg_schema.application_grants("agui_app").split())


def test_the_tables_and_columns_mirror_the_sqlite_schema_they_copy_from(installed: str) -> None:
    """One engine reads both and ``copy`` moves rows between them: same tables, same columns
    in the same order, and every index SQLite has by name."""
    lite = apsw.Connection(":memory:")
    for version in sorted(sqlite_schema.MIGRATIONS):
        lite.execute(sqlite_schema.MIGRATIONS[version])
    assert sqlite_schema.SCHEMA_VERSION == pg_schema.MIRRORS_SQLITE_VERSION
    lite_tables = {
        name: [column[1] for column in lite.execute(f"PRAGMA table_info({name})")]
        for (name,) in lite.execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%'"
        )
    }
    # SQLite schema 11 keeps the events view's rows in event_log, their types as codes of
    # event_types: its own storage, read through the view whose columns are compared here.
    assert lite_tables.pop("event_log") == ["seq", "run", "type", "payload"]
    assert lite_tables.pop("event_types") == ["code", "name"]
    # SQLite schema 13 keeps the search index's words in an FTS5 table (and the tables FTS5
    # keeps it in); PostgreSQL keeps them in a tsvector column of search_messages.
    assert lite_tables.pop("search_words") == ["words"]
    # SQLite schema 18 keeps new index rows, with their words, in search_pending until they
    # go into search_messages and FTS5 together; PostgreSQL's GIN index keeps its own
    # pending list.
    assert lite_tables.pop("search_pending") == [
        "id", "thread", "run", "key", "pos", "tool", "blob", "at", "words"
    ]
    for name in [n for n in lite_tables if n.startswith("search_words_")]:
        lite_tables.pop(name)
    lite_indexes = {
        name
        for (name,) in lite.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL"
        )
    }
    with connect(installed) as conn:
        tables = store_tables(conn)
        indexes = {
            name
            for (name,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (pg_schema.SCHEMA,)
            )
        }
    tables.pop("meta")
    # Schema version 2 stores events a page to a row (event_pages: a row of events cost more
    # than its payload, and rows that small are never compressed); the view ``events`` keeps
    # SQLite's columns for readers, and copy moves event rows through the port, not tables.
    assert tables.pop("event_pages") == ["first_seq", "run", "last_seq", "types", "payloads"]
    with connect(installed) as conn:
        (kind,) = conn.execute(
            "SELECT relkind FROM pg_class WHERE oid = 'events'::regclass"
        ).fetchone()
    assert kind == "v"
    assert tables["search_messages"].pop() == "words"
    assert tables == lite_tables
    # SQLite's events index has no rows to serve here: event_pages_by_run serves its reads;
    # search_pending's is SQLite's alone, as the table is.
    assert lite_indexes - {"events_by_run", "search_pending_by_key"} <= indexes
    assert "event_pages_by_run" in indexes


# --- append-only ------------------------------------------------------------------------------

CHANGES = {
    "UPDATE": "UPDATE {table} SET {column} = {column}",
    "DELETE": "DELETE FROM {table}",
    "TRUNCATE": "TRUNCATE {table}",
    "TRUNCATE CASCADE": "TRUNCATE {table} CASCADE",
}
#: Log tables other tables reference: a plain TRUNCATE of one fails its foreign keys first.
REFERENCED = {"threads", "runs"}
FIRST_COLUMN = {
    "threads": "thread_id",
    "runs": "run_id",
    "event_pages": "payloads",
    "batches": "outcome",
    "echo_refs": "refs",
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("table", pg_schema.LOG_TABLES)
def test_the_server_refuses_to_change_a_log_table_even_for_its_owner(
    installed: str, table: str, change: str
) -> None:
    with connect(installed) as conn:
        add_log_rows(conn)
        before = conn.execute(f"SELECT * FROM {table}").fetchall()
        statement = CHANGES[change].format(table=table, column=FIRST_COLUMN[table])
        if change == "TRUNCATE" and table in REFERENCED:
            # The foreign keys refuse it before the trigger runs (CASCADE reaches the trigger).
            with pytest.raises(pg_errors.FeatureNotSupported, match="foreign key"):
                conn.execute(statement)
        else:
            with pytest.raises(pg_errors.RestrictViolation, match=f"{table} are append-only"):
                conn.execute(statement)
        assert conn.execute(f"SELECT * FROM {table}").fetchall() == before


def test_an_upsert_that_would_rewrite_a_log_row_is_refused(installed: str) -> None:
    with connect(installed) as conn:
        add_log_rows(conn)
        with pytest.raises(pg_errors.RestrictViolation, match="event_pages are append-only"):
            conn.execute(
                "INSERT INTO event_pages SELECT first_seq, run, last_seq, types, ARRAY['x'] "
                "FROM event_pages ON CONFLICT (first_seq) DO UPDATE SET payloads = "
                "excluded.payloads"
            )
        conn.execute(
            "INSERT INTO event_pages SELECT first_seq, run, last_seq, types, ARRAY['x'] "
            "FROM event_pages ON CONFLICT (first_seq) DO NOTHING"
        )
        assert conn.execute("SELECT payload FROM events").fetchall() == [("{}",)]


def test_refs_and_derived_tables_still_move(installed: str) -> None:
    with connect(installed) as conn:
        first, second = add_log_rows(conn, runs=2)
        conn.execute(
            "INSERT INTO branches(thread, name, run, updated_at) SELECT thread, 'main', id, 0 "
            "FROM runs WHERE id = %s",
            (first,),
        )
        conn.execute("UPDATE branches SET run = %s", (second,))
        conn.execute("INSERT INTO underived(run) VALUES (%s)", (second,))
        conn.execute("DELETE FROM underived")
        conn.execute("DELETE FROM branches")
        assert conn.execute("SELECT count(*) FROM branches").fetchone() == (0,)


# --- payload bytes ----------------------------------------------------------------------------

#: Texts jsonb would change or refuse (a test below checks that it does); the store must not.
TRICKY_PAYLOADS = [
    '{"type":"CUSTOM","name":"a","value":1,"value":2}',  # duplicate key: jsonb keeps the last
    '{"z":1,"a":2,"type":"CUSTOM"}',  # key order: jsonb sorts by length, then bytes
    '{ "type" : "CUSTOM" ,\n\t"value" : [ 1 , 2 ] }',  # whitespace: jsonb normalizes it
    '{"type":"TEXT_MESSAGE_CONTENT","delta":"caf\\u00e9 \\ud83d\\ude00 \\u0000"}',  # escapes
    '{"type":"CUSTOM","value":1.0e2,"big":12345678901234567890123}',  # number spelling
    '{"type":"CUSTOM","value":"caf\u00e9 \U0001f600 \u202e"}',  # raw non-ASCII
]


def _round_trip(conn: Any, payload: str) -> tuple[str, str, str, str]:
    runs = conn.execute("SELECT id FROM runs ORDER BY id").fetchall()
    (seq,) = conn.execute(sql.NEXT_SEQ).fetchone()
    (run,) = conn.execute(
        "INSERT INTO runs(thread, run_id, parent, lineage, input, input_refs, created_at) "
        "VALUES (1, %s, NULL, 'root', %s, %s, 0) RETURNING id",
        (f"r{len(runs)}", payload, payload),
    ).fetchone()
    conn.execute(  # as the store writes it: the arrays in binary
        "INSERT INTO event_pages(first_seq, run, last_seq, types, payloads) "
        "VALUES (%s, %s, %s, %b, %b)",
        (seq, run, seq, ["CUSTOM"], [payload]),
    )
    conn.execute("INSERT INTO echo_refs(seq, refs) VALUES (%s, %s)", (seq, payload))
    row = conn.execute(
        "SELECT events.payload, runs.input, runs.input_refs, echo_refs.refs FROM events "
        "JOIN runs ON runs.id = events.run JOIN echo_refs ON echo_refs.seq = events.seq "
        "WHERE events.seq = %s",
        (seq,),
    ).fetchone()
    return (row[0], row[1], row[2], row[3])


@pytest.fixture
def one_thread(installed: str) -> Iterator[Any]:
    with connect(installed) as conn:
        conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)")
        yield conn


@pytest.mark.parametrize("payload", TRICKY_PAYLOADS)
def test_payloads_inputs_and_echo_refs_read_back_byte_identical_where_jsonb_would_not(
    one_thread: Any, payload: str
) -> None:
    try:
        as_jsonb = one_thread.execute("SELECT %s::jsonb::text", (payload,)).fetchone()[0]
    except pg_errors.UntranslatableCharacter:  # jsonb cannot even hold "\u0000"
        as_jsonb = None
    assert as_jsonb != payload
    assert _round_trip(one_thread, payload) == (payload,) * 4
    raw = one_thread.execute(
        "SELECT convert_to(payload, 'UTF8') FROM events ORDER BY seq DESC LIMIT 1"
    ).fetchone()[0]
    assert bytes(raw) == payload.encode("utf-8")


#: Any text JSON can carry: JSON forbids raw control characters (NUL included, which text
#: cannot hold) and lone surrogates do not encode to UTF-8.
JSON_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.tuples(JSON_TEXT, JSON_TEXT), max_size=6), spacing=JSON_TEXT)
def test_any_json_text_reads_back_as_it_was_written(
    one_thread: Any, values: list[tuple[str, str]], spacing: str
) -> None:
    # Duplicate and unsorted keys kept, odd spacing between members (any text, in fact).
    payload = "{" + spacing.join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in values) + "}"
    assert _round_trip(one_thread, payload) == (payload,) * 4


def test_payload_columns_are_text_never_json(installed: str) -> None:
    with connect(installed) as conn:
        types = dict(
            ((table, column), kind)
            for table, column, kind in conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = %s",
                (pg_schema.SCHEMA,),
            )
        )
    for column in [("events", "payload"), ("runs", "input"), ("runs", "input_refs"),
                   ("echo_refs", "refs")]:  # fmt: skip
        assert types[column] == "text", column
    assert types[("event_pages", "payloads")] == "ARRAY"
    with connect(installed) as conn:
        (element,) = conn.execute(
            "SELECT format_type(atttypid, NULL) FROM pg_attribute "
            "WHERE attrelid = 'event_pages'::regclass AND attname = 'payloads'"
        ).fetchone()
    assert element == "text[]"
    assert "jsonb" not in types.values() and "json" not in types.values()


# --- query plans ------------------------------------------------------------------------------

#: A store big enough that the planner's choices are the ones production gets: 1,000 threads,
#: a 2,000-run chain with a side branch in the first, 3 runs in each other, 10 events a run
#: (the first echoing its input).
THREADS = 1000
CHAIN_RUNS = 2000
EVENTS_PER_RUN = 10


@pytest.fixture(scope="module")
def big_store(postgres_server: Any) -> Iterator[tuple[str, dict[str, int]]]:
    dsn = postgres_server.create_database()
    with connect(dsn) as conn:
        pg_schema.install(conn)
        with conn.transaction():
            marks = _fill(conn)
        conn.execute("ANALYZE")
    yield dsn, marks
    postgres_server.drop_database(dsn)


def _fill(conn: Any) -> dict[str, int]:
    with conn.cursor().copy("COPY threads(id, thread_id, created_at, owner) FROM STDIN") as copy:
        for thread in range(1, THREADS + 1):
            copy.write_row((thread, f"thread-{thread}", 0, f"owner-{thread % 7}"))
    runs: list[tuple[int, int, str, int | None]] = []
    for number in range(1, CHAIN_RUNS + 1):  # thread 1: one long chain
        runs.append((number, 1, f"chain-{number}", number - 1 or None))
    fork_at = CHAIN_RUNS // 2
    for number in range(CHAIN_RUNS + 1, CHAIN_RUNS + 51):  # a side branch off its middle
        parent = fork_at if number == CHAIN_RUNS + 1 else number - 1
        runs.append((number, 1, f"side-{number}", parent))
    for thread in range(2, THREADS + 1):
        first = len(runs) + 1
        for number in range(first, first + 3):
            runs.append(
                (number, thread, f"t{thread}-{number}", number - 1 if number > first else None)
            )
    with conn.cursor().copy(
        "COPY runs(id, thread, run_id, parent, lineage, created_at) FROM STDIN"
    ) as copy:
        for run, thread, run_id, parent in runs:
            copy.write_row((run, thread, run_id, parent, "head", 0))
    seq = 0
    with conn.cursor().copy(
        "COPY event_pages(first_seq, run, last_seq, types, payloads) FROM STDIN"
    ) as copy:
        for run, *_ in runs:  # a page a run, as a run appended whole is stored
            copy.write_row((
                seq + 1, run, seq + EVENTS_PER_RUN,
                ["TEXT_MESSAGE_CONTENT"] * EVENTS_PER_RUN,
                ['{"delta":"' + "x" * 100 + '"}'] * EVENTS_PER_RUN,
            ))  # fmt: skip
            seq += EVENTS_PER_RUN
    with conn.cursor().copy("COPY echo_refs(seq, refs) FROM STDIN") as copy:
        for index in range(len(runs)):
            copy.write_row((index * EVENTS_PER_RUN + 1, "[[0, 3]]"))
    with conn.cursor().copy(
        "COPY batches(run, first_seq, last_seq, count, appended_at) FROM STDIN"
    ) as copy:
        for index, (run, *_) in enumerate(runs):
            first = index * EVENTS_PER_RUN + 1
            copy.write_row((run, first, first + EVENTS_PER_RUN - 1, EVENTS_PER_RUN, 0))
    for table in ("threads", "runs", "batches"):
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
        )
    return {"tip": CHAIN_RUNS, "side_tip": CHAIN_RUNS + 50, "fork": fork_at, "events": seq}


def plan_scans(conn: Any, query: str, params: Any) -> list[tuple[str, str, str]]:
    """Every scan of a table in ``query``'s plan: (node type, table, index or "")."""
    (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + query, params).fetchone()
    scans: list[tuple[str, str, str]] = []

    def walk(node: dict[str, Any]) -> None:
        if "Relation Name" in node:
            index = node.get("Index Name", "")
            if node["Node Type"] == "Bitmap Heap Scan":  # the index is its child's
                index = node["Plans"][0]["Index Name"]
            scans.append((node["Node Type"], node["Relation Name"], index))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return scans


INDEXED = {"Index Scan", "Index Only Scan", "Bitmap Heap Scan"}

#: Each hot read, with its parameters and the indexes it must probe.
HOT_READS = {
    "ancestry": (sql.ANCESTORS, lambda m: (m["tip"],), {"runs_pkey"}),
    "merge base": (sql.MERGE_BASE, lambda m: {"a": m["tip"], "b": m["side_tip"]}, {"runs_pkey"}),
    "chain events": (
        sql.CHAIN_EVENT_ROWS,
        lambda m: (m["side_tip"],),
        {"runs_pkey", "event_pages_by_run"},
    ),
    "run events": (
        sql.RUN_EVENTS, lambda m: {"run": m["fork"], "after": 0}, {"event_pages_by_run"}
    ),
    "log after a cursor": (
        sql.EVENTS_AFTER,
        lambda m: {"after": m["events"] - 55, "limit": 100},
        {"event_pages_pkey"},
    ),
    "run batches": (sql.RUN_BATCHES, lambda m: (m["fork"],), {"batches_by_run"}),
    "thread runs": (sql.THREAD_RUNS, lambda m: (2,), {"runs_by_thread"}),
    "runs named": (sql.RUNS_NAMED, lambda m: ("chain-7",), {"runs_by_run_id"}),
    "owner threads": (sql.OWNER_THREADS, lambda m: ("owner-3",), {"threads_by_owner"}),
    "next seq": (sql.NEXT_SEQ, lambda m: (), {"event_pages_pkey"}),
    "grew since": (
        sql.GREW_SINCE,
        lambda m: {"seq": m["events"] - 55, "run": m["tip"], "thread": 1},
        {"event_pages_pkey", "runs_pkey"},
    ),
    "thread facts": (
        sql.THREAD_FACTS,
        lambda m: {
            "thread": 1,
            "runs": [m["fork"], m["tip"]],
            "digest": b"\x00" * 32,
            "view": m["tip"],
            "base": m["fork"],
            "probe": True,
            "seen": m["events"] - 55,
        },
        # The remembered runs by primary key, not a walk of the thread's runs; what grew
        # since a view was replayed by the pages written since.
        {"runs_pkey", "batches_by_run", "underived_pkey", "event_pages_pkey"},
    ),
}


@pytest.mark.parametrize("read", ["thread facts", "grew since"])
def test_what_grew_since_a_view_is_read_from_the_newest_pages_not_every_older_runs(
    big_store: tuple[str, dict[str, int]], read: str
) -> None:
    """The pages written since a view was replayed, a range of the primary key: never the
    pages of every run up to the view's, which grow with the store's whole history. Asked
    of the generic plan of a prepared statement, which the store runs, planned without
    the values (a custom plan sees how few pages are that new)."""
    dsn, marks = big_store
    query, params, _ = HOT_READS[read]
    values = params(marks)
    names = list(values)
    prepared = query
    for n, name in enumerate(names, 1):
        prepared = prepared.replace(f"%({name})s", f"${n}")
    with connect(dsn) as conn:
        conn.execute(f"PREPARE grew AS {prepared}")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        arguments = ", ".join(
            "decode('00', 'hex')" if isinstance(values[name], bytes)
            else f"ARRAY{values[name]}::bigint[]" if isinstance(values[name], list)
            else str(values[name]).lower()
            for name in names
        )
        scans = plan_scans(conn, f"EXECUTE grew({arguments})", None)
    assert "event_pages_by_run" not in {index for _, _, index in scans}, scans


@pytest.mark.parametrize("read", list(HOT_READS))
def test_each_hot_read_probes_its_indexes_and_scans_no_table(
    big_store: tuple[str, dict[str, int]], read: str
) -> None:
    dsn, marks = big_store
    query, params, indexes = HOT_READS[read]
    with connect(dsn) as conn:
        # Sequential scans off: at test size, hashing a small table (echo_refs here holds a
        # few thousand rows) beats probing its index, a choice that turns into a scan of the
        # whole table per read as the store grows. A query no index can serve still shows
        # its Seq Scan (at a prohibitive cost), so a missing index still fails the test.
        conn.execute("SET enable_seqscan = off")
        scans = plan_scans(conn, query, params(marks))
    assert all(kind in INDEXED for kind, _, _ in scans), scans
    used = {index for _, _, index in scans}
    assert indexes <= used, scans


def test_the_walks_give_the_answers_the_plans_are_for(
    big_store: tuple[str, dict[str, int]],
) -> None:
    """The plan test's queries are the right ones: the chain, its events and the merge base."""
    dsn, marks = big_store
    with connect(dsn) as conn:
        chain = [row[0] for row in conn.execute(sql.ANCESTORS, (marks["side_tip"],))]
        base = conn.execute(sql.MERGE_BASE, {"a": marks["tip"], "b": marks["side_tip"]}).fetchone()
        events = conn.execute(sql.CHAIN_EVENT_ROWS, (marks["side_tip"],)).fetchall()
    assert chain == [*range(1, marks["fork"] + 1), *range(CHAIN_RUNS + 1, marks["side_tip"] + 1)]
    assert base == (marks["fork"], CHAIN_RUNS - marks["fork"], 50)
    assert len(events) == len(chain) * EVENTS_PER_RUN
    assert [row[0] for row in events[::EVENTS_PER_RUN]] == chain


# --- deployment: an owner role and an application role ----------------------------------------


@pytest.fixture
def deployment(postgres_server: Any, postgres_database: str) -> Iterator[tuple[str, str]]:
    """The README's deployment on a fresh database: (owner's DSN, application's DSN).

    Roles are cluster-wide, so their names are unique to the test, and dropped after it.
    """
    suffix = uuid.uuid4().hex[:10]
    owner, app = f"agui_owner_{suffix}", f"agui_app_{suffix}"
    dbname = make_conninfo_dict(postgres_database)["dbname"]
    with connect(postgres_database) as admin:
        admin.execute(f"CREATE ROLE {owner} LOGIN")
        admin.execute(f"CREATE ROLE {app} LOGIN")
        admin.execute(f'GRANT CREATE ON DATABASE "{dbname}" TO {owner}')
    owner_dsn = make_conninfo(postgres_database, user=owner)
    app_dsn = make_conninfo(postgres_database, user=app)
    with connect(owner_dsn) as conn:
        pg_schema.install(conn)
        conn.execute(pg_schema.application_grants(app))
    try:
        yield owner_dsn, app_dsn
    finally:
        with connect(postgres_database) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)",
                ([owner, app],),
            )
            admin.execute(f"DROP OWNED BY {owner}, {app}")
            admin.execute(f"DROP ROLE {owner}")
            admin.execute(f"DROP ROLE {app}")


def make_conninfo_dict(dsn: str) -> dict[str, Any]:
    return dict(psycopg.conninfo.conninfo_to_dict(dsn))


def test_the_application_role_appends_and_reads_the_log(deployment: tuple[str, str]) -> None:
    _, app_dsn = deployment
    with connect(app_dsn) as app:
        assert pg_schema.install(app) == pg_schema.SCHEMA_VERSION  # opening: nothing to do
        with app.transaction():
            app.execute(sql.LOCK_WRITERS_SHARED)
            app.execute(sql.lock_thread("t1"))
            app.execute(sql.LOCK_EVENT_ORDER)
            add_log_rows(app, runs=3)
        assert app.execute("SELECT count(*) FROM events").fetchone() == (3,)


#: What an application role would do to write around the append-only triggers, or remove
#: them. Every one is refused with "permission denied" or "must be owner".
AROUND_THE_TRIGGERS = [
    "UPDATE event_pages SET payloads = ARRAY['{}']",
    "DELETE FROM event_pages",
    "TRUNCATE event_pages",
    "TRUNCATE threads CASCADE",
    "INSERT INTO event_pages SELECT first_seq, run, last_seq, types, ARRAY['x'] "
    "FROM event_pages ON CONFLICT (first_seq) DO UPDATE SET payloads = excluded.payloads",
    "ALTER TABLE event_pages DISABLE TRIGGER event_pages_are_append_only",
    "ALTER TABLE event_pages DISABLE TRIGGER ALL",
    "DROP TRIGGER event_pages_are_append_only ON event_pages",
    "DROP FUNCTION refuse_log_change() CASCADE",
    "SET session_replication_role = replica",
    "ALTER TABLE event_pages ALTER COLUMN payloads TYPE jsonb[] USING payloads::jsonb[]",
    "DROP TABLE event_pages CASCADE",
    "DROP VIEW events",
    "UPDATE events SET payload = '[]'",
    "DELETE FROM events",
    "DROP TRIGGER events_update ON events",
    "CREATE TABLE agui_store.shadow (x int)",
    "SELECT * FROM threads FOR UPDATE",
    "UPDATE meta SET value = '0' WHERE key = 'schema_version'",
]


@pytest.mark.parametrize("statement", AROUND_THE_TRIGGERS)
def test_the_application_role_can_neither_write_around_nor_remove_the_triggers(
    deployment: tuple[str, str], statement: str
) -> None:
    owner_dsn, app_dsn = deployment
    with connect(owner_dsn) as owner:
        add_log_rows(owner)
    with connect(app_dsn) as app, pytest.raises(pg_errors.InsufficientPrivilege):
        app.execute(statement)
    with connect(owner_dsn) as owner:
        enabled = owner.execute(
            "SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger "
            "WHERE NOT tgisinternal ORDER BY 1, 2"
        ).fetchall()
        assert owner.execute("SELECT payload FROM events").fetchall() == [("{}",)]
    assert enabled == sorted(
        [
            *(
                (table, f"{table}_are_append_only{suffix}", "O")
                for table in (*pg_schema.LOG_TABLES, "erasures")
                for suffix in ("", "_truncate")
            ),
            *(("events", f"events_{op}", "O") for op in ("insert", "update", "delete")),
            ("checkpoints", "checkpoints_list_segments", "O"),
        ]
    )


def test_the_application_role_moves_branches_and_rebuilds_derived_data(
    deployment: tuple[str, str],
) -> None:
    _, app_dsn = deployment
    with connect(app_dsn) as app:
        first, second = add_log_rows(app, runs=2)
        app.execute(
            "INSERT INTO branches(thread, name, run, updated_at) "
            "SELECT thread, 'main', id, 0 FROM runs WHERE id = %s",
            (first,),
        )
        app.execute("UPDATE branches SET run = %s", (second,))
        (blob,) = app.execute(
            "INSERT INTO blobs(hash, codec, data) VALUES ('\\x01', 0, '\\x5b5d') "
            "ON CONFLICT (hash) DO UPDATE SET hash = excluded.hash RETURNING id"
        ).fetchone()
        assert app.execute(
            "INSERT INTO blobs(hash, codec, data) VALUES ('\\x01', 0, '\\x5b5d') "
            "ON CONFLICT (hash) DO UPDATE SET hash = excluded.hash RETURNING id"
        ).fetchone() == (blob,)
        app.execute(
            "INSERT INTO checkpoints(run, length, tail, state, ids_hash, created_at) "
            "VALUES (%s, 0, '[]', %s, '\\x00', 0)",
            (first, blob),
        )
        app.execute("INSERT INTO lineage_digests(ids_hash, run) VALUES ('\\x00', %s)", (first,))
        app.execute("INSERT INTO underived(run) VALUES (%s)", (second,))
        for table in ("checkpoints", "lineage_digests", "underived"):
            app.execute(f"DELETE FROM {table}")
        app.execute("DELETE FROM branches")
        assert app.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)


def test_the_owner_role_could_disable_the_triggers_so_the_application_must_not_be_it(
    deployment: tuple[str, str],
) -> None:
    """Why two roles: the table owner may disable a trigger (within its transaction here)."""
    owner_dsn, _ = deployment
    with connect(owner_dsn) as owner:
        add_log_rows(owner)
        with pytest.raises(pg_errors.RestrictViolation):
            owner.execute("DELETE FROM echo_refs")
        with owner.transaction(force_rollback=True):
            owner.execute("ALTER TABLE echo_refs DISABLE TRIGGER echo_refs_are_append_only")
            owner.execute("DELETE FROM echo_refs")


# --- text order -------------------------------------------------------------------------------


def test_every_text_column_compares_bytes_as_sqlite_does(installed: str) -> None:
    with connect(installed) as conn:
        collations = conn.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns "
            "WHERE table_schema = %s AND data_type = 'text'",
            (pg_schema.SCHEMA,),
        ).fetchall()
    assert collations and all(collation == "C" for _, _, collation in collations), collations


IDS = ["b", "B", "a-b", "ab", "A", "a", "é", "z", "_x", "a b"]


def test_in_a_database_with_a_linguistic_collation_ids_still_sort_and_range_by_bytes(
    postgres_server: Any,
) -> None:
    from tests.postgres_cluster import with_dbname

    name = f"agui_test_icu_{uuid.uuid4().hex[:12]}"
    with postgres_server.connect() as admin:
        if not admin.execute(
            "SELECT count(*) FROM pg_collation WHERE collprovider = 'i'"
        ).fetchone()[0]:
            pytest.skip("this PostgreSQL is built without ICU: no linguistic collation to test")
        admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C' "
            "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
        )
    dsn = with_dbname(postgres_server.dsn, name)
    try:
        with connect(dsn) as conn:
            pg_schema.install(conn)
            for index, thread_id in enumerate(IDS):
                conn.execute(
                    "INSERT INTO threads(thread_id, created_at) VALUES (%s, %s)", (thread_id, index)
                )
            ordered = [row[0] for row in conn.execute("SELECT thread_id FROM threads ORDER BY 1")]
            linguistic = [
                row[0]
                for row in conn.execute(
                    'SELECT thread_id FROM threads ORDER BY thread_id COLLATE "default"'
                )
            ]
            in_range = sorted(
                row[0]
                for row in conn.execute(
                    "SELECT thread_id FROM threads WHERE thread_id >= 'a' AND thread_id < 'b'"
                )
            )
    finally:
        postgres_server.drop_database(dsn)
    by_bytes = sorted(IDS, key=lambda text: text.encode("utf-8"))
    assert ordered == by_bytes
    assert linguistic != by_bytes  # the database's own order would have differed
    assert in_range == sorted(i for i in IDS if "a" <= i < "b")


# --- plans before the server has statistics ---------------------------------------------------

#: The walks, each step of which must be a probe of an index whatever the planner knows.
WALKS = {
    "ancestry": (sql.ANCESTORS, lambda last: (last,)),
    "lineage runs (log)": (sql.LINEAGE_RUNS, lambda last: {"run": last, "depth": None,
                                                           "limit": None}),
    "merge base": (sql.MERGE_BASE, lambda last: {"a": last, "b": last - 3}),
    "nearest checkpoint": (sql.NEAREST_CHECKPOINT, lambda last: {"run": last}),
    "subtree": (sql.SUBTREE, lambda last: (last - 10,)),
    "derived descendants": (sql.DERIVED_DESCENDANTS, lambda last: (last - 10,)),
}  # fmt: skip


def _recursive_steps(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The table scans inside each Recursive Union's recursive term."""
    found: list[tuple[str, str, str]] = []

    def scans(node: dict[str, Any]) -> None:
        if "Relation Name" in node:
            found.append((node["Node Type"], node["Relation Name"], node.get("Index Name", "")))
        for child in node.get("Plans", []):
            scans(child)

    def walk(node: dict[str, Any]) -> None:
        if node["Node Type"] == "Recursive Union":
            scans(node["Plans"][1])
        for child in node.get("Plans", []):
            walk(child)

    walk(plan)
    return found


@pytest.mark.parametrize("walk", list(WALKS))
def test_each_step_of_a_walk_probes_an_index_before_the_table_is_ever_analyzed(
    installed: str, walk: str
) -> None:
    """A new store (or one autovacuum has not analyzed yet) has no statistics: the planner
    then hashed the whole runs table at every step of a walk, and a 2,000-run log took a
    second instead of 50 ms. Each step is a lateral probe the planner cannot turn into a
    join (sequential scans are NOT priced out here)."""
    with connect(installed) as conn:
        pks = add_log_rows(conn, runs=40)
        assert conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'runs'::regclass"
        ).fetchone() == (-1,)
        query, params = WALKS[walk]
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + query, params(pks[-1])).fetchone()
    steps = _recursive_steps(plan[0]["Plan"])
    assert steps and all(kind in INDEXED for kind, _, _ in steps), steps


# --- migrations -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_store_migrates_to_event_pages_with_every_event_as_it_was(
    postgres_database: str, version: int
) -> None:
    """Versions 1 and 2 held a row per event; version 3 moves them into pages (one per batch,
    at most PAGE_EVENTS each; an event no batch covers a page of its own) and reads every
    one back through the ``events`` view and the store's own reads: same seq, run, type and
    bytes. The migrated schema is the one a fresh install creates (the schema check says so)."""
    from agui_store.backends.postgres import checks

    with connect(postgres_database) as conn:
        conn.execute(f"CREATE SCHEMA {pg_schema.SCHEMA}")
        for step in range(1, version + 1):
            conn.execute(pg_schema.MIGRATIONS[step])
        conn.execute(pg_schema.WRITE_VERSION, {"application": pg_schema.APPLICATION,
                                               "version": str(version)})  # fmt: skip
        conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)")
        conn.execute(
            "INSERT INTO runs(id, thread, run_id, lineage, created_at) "
            "VALUES (1, 1, 'r1', 'root', 0), (2, 1, 'r2', 'head', 0)"
        )
        long = pg_schema.PAGE_EVENTS + 3
        payloads = [*TRICKY_PAYLOADS, "{}", *(f'{{"n":{n}}}' for n in range(long))]
        runs = [1, 1, 1, 1, 2, 2, 2, *([1] * long)]
        events = [  # r1 in two batches (seq 1-3, 4-4), r2 in one (5-7), r1 one of `long` more
            (seq, run, "CUSTOM" if seq % 2 else "RAW", payload)
            for seq, run, payload in zip(range(1, len(runs) + 1), runs, payloads, strict=True)
        ]
        stray = (len(events) + 5, 2, "CUSTOM", '{"stray":true}')  # in no batch
        for row in [*events, stray]:
            conn.execute("INSERT INTO events(seq, run, type, payload) VALUES (%s, %s, %s, %s)", row)
        conn.execute(
            "INSERT INTO batches(run, first_seq, last_seq, count, appended_at) "
            "VALUES (1, 1, 3, 3, 0), (1, 4, 4, 1, 0), (2, 5, 7, 3, 0), (1, 8, %s, %s, 0)",
            (7 + long, long),
        )
        conn.execute("INSERT INTO echo_refs(seq, refs) VALUES (5, '[[0, 1]]')")
        before = conn.execute(
            "SELECT seq, run, type, convert_to(payload, 'UTF8') FROM events ORDER BY seq"
        ).fetchall()

        assert pg_schema.install(conn) == version
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION
        after = conn.execute(
            "SELECT seq, run, type, convert_to(payload, 'UTF8') FROM events ORDER BY seq"
        ).fetchall()
        assert after == before and len(after) == len(events) + 1
        assert [(s, r, t, bytes(p).decode()) for s, r, t, p in after] == [*events, stray]
        assert conn.execute(
            "SELECT first_seq, run, last_seq FROM event_pages ORDER BY first_seq"
        ).fetchall() == [
            (1, 1, 3),
            (4, 1, 4),
            (5, 2, 7),
            (8, 1, 7 + pg_schema.PAGE_EVENTS),
            (8 + pg_schema.PAGE_EVENTS, 1, 7 + long),
            (stray[0], 2, stray[0]),
        ]
        assert conn.execute("SELECT seq, refs FROM echo_refs").fetchall() == [(5, "[[0, 1]]")]
        run_events = conn.execute(sql.RUN_EVENTS, {"run": 2, "after": 5}).fetchall()
        assert run_events == [
            (payload, None, seq, kind) for seq, _, kind, payload in [*events[5:7], stray]
        ]
        log = conn.execute(sql.EVENTS_AFTER, {"after": 0, "limit": 10_000}).fetchall()
        assert log == [*events, stray]
        with conn.transaction():
            assert list(checks.problems(conn, "schema")) == []
            assert list(checks.problems(conn, "pages")) == []
        with pytest.raises(pg_errors.RestrictViolation, match="event_pages are append-only"):
            conn.execute("DELETE FROM event_pages")


# --- the events view --------------------------------------------------------------------------


def test_sql_by_hand_on_the_events_view_reaches_the_pages_whose_guards_refuse_edits(
    installed: str,
) -> None:
    with connect(installed) as conn:
        add_log_rows(conn, runs=2)
        with pytest.raises(pg_errors.RestrictViolation, match=r"event_pages .*UPDATE refused"):
            conn.execute("UPDATE events SET payload = '[]' WHERE seq = 1")
        with pytest.raises(pg_errors.RestrictViolation, match=r"event_pages .*DELETE refused"):
            conn.execute("DELETE FROM events WHERE seq = 2")
        with pytest.raises(pg_errors.RestrictViolation, match=r"event_pages .*DELETE refused"):
            conn.execute("UPDATE events SET seq = 9 WHERE seq = 2")  # a move is a delete
        with pytest.raises(pg_errors.UniqueViolation, match="seq 2 is already an event"):
            conn.execute("INSERT INTO events VALUES (2, 1, 'CUSTOM', '{}')")
        with pytest.raises(pg_errors.NotNullViolation):
            conn.execute("INSERT INTO events VALUES (3, 1, 'CUSTOM', NULL)")
        with pytest.raises(pg_errors.ForeignKeyViolation):
            conn.execute("INSERT INTO events VALUES (3, 99, 'CUSTOM', '{}')")
        conn.execute("INSERT INTO events VALUES (3, 2, 'CUSTOM', '{\"x\": 1}')")
        assert conn.execute("SELECT * FROM event_pages WHERE first_seq = 3").fetchall() == [
            (3, 2, 3, ["CUSTOM"], ['{"x": 1}'])
        ]


#: An edit of the events view as SQL by hand: (what, seq, new seq, payload).
ViewEdit = tuple[str, int, int, str]


@st.composite
def view_edits(draw: Any) -> list[ViewEdit]:
    kinds = st.sampled_from(["update", "move", "delete", "insert"])
    return draw(
        st.lists(
            st.tuples(
                kinds, st.integers(1, 14), st.integers(-3, 20), st.text('ab"\\é😀', max_size=5)
            ),
            max_size=12,
        )
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits=view_edits())
def test_with_the_guards_lifted_the_events_view_takes_edits_as_a_table_of_events_would(
    installed: str, edits: list[ViewEdit]
) -> None:
    """Whatever updates, moves, deletes and inserts SQL by hand makes on ``events`` (the
    guards lifted, as tests/contract/test_tamper.py lifts them), the view then shows what a table of
    those rows would hold, and the pages stay well-formed (a deleted event splits its page)."""
    from agui_store.backends.postgres import checks

    with connect(installed) as conn, conn.transaction(force_rollback=True):
        conn.execute("INSERT INTO threads(id, thread_id, created_at) VALUES (1, 't', 0)")
        conn.execute(
            "INSERT INTO runs(id, thread, run_id, lineage, created_at) "
            "VALUES (1, 1, 'r1', 'root', 0), (2, 1, 'r2', 'head', 0)"
        )
        conn.execute("ALTER TABLE event_pages DISABLE TRIGGER event_pages_are_append_only")
        table = {seq: (1 if seq <= 6 else 2, "CUSTOM", f'{{"n":{seq}}}') for seq in range(1, 15)}
        for first, last in ((1, 6), (7, 7), (8, 14)):
            conn.execute(
                "INSERT INTO event_pages VALUES (%s, %s, %s, %s, %s)",
                (first, table[first][0], last, [table[s][1] for s in range(first, last + 1)],
                 [table[s][2] for s in range(first, last + 1)]),
            )  # fmt: skip
        for what, seq, new, payload in edits:
            statement, args = {
                "update": ("UPDATE events SET payload = %s WHERE seq = %s", (payload, seq)),
                "move": ("UPDATE events SET seq = %s WHERE seq = %s", (new, seq)),
                "delete": ("DELETE FROM events WHERE seq = %s", (seq,)),
                "insert": ("INSERT INTO events VALUES (%s, 2, 'RAW', %s)", (new, payload)),
            }[what]
            refused = (what == "insert" and new in table) or (
                what == "move" and seq in table and new in table and new != seq
            )
            if refused:
                with pytest.raises(pg_errors.UniqueViolation), conn.transaction():
                    conn.execute(statement, args)
                continue
            changed = conn.execute(statement, args).rowcount
            assert changed == (what == "insert" or seq in table)
            if what == "update" and seq in table:
                table[seq] = (*table[seq][:2], payload)
            elif what == "move" and seq in table:
                table[new] = table.pop(seq)
            elif what == "delete":
                table.pop(seq, None)
            elif what == "insert":
                table[new] = (2, "RAW", payload)
        assert conn.execute("SELECT * FROM events ORDER BY seq").fetchall() == [
            (seq, *row) for seq, row in sorted(table.items())
        ]
        assert list(checks.problems(conn, "pages")) == []


def test_checkpoint_chunks_are_compressed_with_lz4_where_the_server_has_it(installed: str) -> None:
    with connect(installed) as conn:
        (has_lz4,) = conn.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
            "WHERE name = 'default_toast_compression'"
        ).fetchone()
        (method,) = conn.execute(
            "SELECT attcompression FROM pg_attribute "
            "WHERE attrelid = 'blobs'::regclass AND attname = 'data'"
        ).fetchone()
    assert method == ("l" if has_lz4 else "")


#: Version 6 added erasure; version 5 had none of it.
UNDO_VERSION_6 = """
DROP TRIGGER checkpoints_list_segments ON checkpoints;
DROP FUNCTION list_checkpoint_segments();
DROP FUNCTION erase_log(bigint[], bigint[]);
DROP TABLE checkpoint_segments, tombstones, erasures;
DROP INDEX lineage_digests_by_run, checkpoints_by_state, checkpoints_by_interrupts,
    checkpoints_by_warnings, checkpoints_by_chunks;
"""


def test_a_version_4_store_is_indexed_for_search_when_it_is_opened(postgres_database: str) -> None:
    with agui_store.open(postgres_database) as store:
        for i in range(3):
            store.append([
                {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{i}"},
                {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": f"porto {i}"},
                {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{i}"},
            ])
    with connect(postgres_database) as conn:
        conn.execute(UNDO_VERSION_6)
        conn.execute("DROP TABLE search_messages")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    # stderr on a pseudo-terminal: the migration draws its bar there, naming the database.
    drawn, hits = search_on_a_terminal(postgres_database, "porto")
    assert hits == ["r2", "r1", "r0"]
    assert f"indexing {without_password(postgres_database)} for search" in drawn, drawn
    assert "3/3" in drawn
    with agui_store.open(postgres_database) as store:
        assert not store.check().problems


def _one_message(location: str, said: str) -> None:
    """A store holding one run, whose assistant message ``m1`` says ``said``."""
    with agui_store.open(location) as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": said},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        ])


def test_a_version_8_store_is_indexed_again_so_chinese_and_japanese_are_found_by_any_run(
    postgres_database: str,
) -> None:
    said = "明日東京都に行きたいです"
    _one_message(postgres_database, said)
    with connect(postgres_database) as conn:
        # Version 8's words: the sentence as one word.
        changed = conn.execute(
            "UPDATE search_messages SET words = array_to_tsvector(ARRAY[%s])", (said,)
        ).rowcount
        assert changed == 1
        conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    with agui_store.open(postgres_database) as store:
        assert [h.message_id for h in store.search("東京")] == ["m1"]
        assert [h.message_id for h in store.search(said)] == ["m1"]
        assert not store.check().problems
    with connect(postgres_database) as conn:
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM search_messages").fetchone() == (1,)


def test_a_store_whose_tables_are_not_those_of_its_version_is_refused_and_left_as_it_was(
    postgres_database: str,
) -> None:
    with agui_store.open(postgres_database) as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        ])
    with connect(postgres_database) as conn:
        # Version 8 in number, another layout: as a development build might have left it.
        conn.execute("ALTER TABLE search_messages RENAME COLUMN words TO lexemes")
        conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    with pytest.raises(agui_store.SchemaVersionError) as refused:
        agui_store.open(postgres_database).close()
    said = str(refused.value)
    assert "records agui-store schema version 8, but its tables are not that version's" in said
    assert "(search_messages)" in said and "nothing was changed" in said
    with connect(postgres_database) as conn:
        assert pg_schema.installed_version(conn) == 8
        assert conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'agui_store_layout_probe'"
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = "
            "'search_messages' AND column_name = 'lexemes'"
        ).fetchone() == (1,)


def test_a_schema_recording_this_version_over_none_of_its_tables_is_refused_at_open(
    postgres_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_store import cli

    with connect(postgres_database) as conn:
        conn.execute(f"CREATE SCHEMA {pg_schema.SCHEMA}")
        conn.execute(pg_schema.META)
        conn.execute(pg_schema.WRITE_VERSION, {
            "application": pg_schema.APPLICATION, "version": str(pg_schema.SCHEMA_VERSION),
        })
    with pytest.raises(agui_store.SchemaVersionError) as refused:
        agui_store.open(postgres_database).close()
    said = str(refused.value)
    assert (
        f"PostgreSQL schema {pg_schema.SCHEMA!r} records agui-store schema version "
        f"{pg_schema.SCHEMA_VERSION}, but it lacks tables of that version (threads, runs, "
    ) in said
    assert "nothing was changed" in said and "\n" not in said
    assert cli.main(["--db", postgres_database, "check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks tables of that version" in err
    with connect(postgres_database) as conn:
        assert set(store_tables(conn)) == {"meta"}
    # Under the installers' lock too (a connection in a transaction reads the version there).
    with (
        psycopg.connect(postgres_database, options=SEARCH_PATH) as conn,
        pytest.raises(agui_store.SchemaVersionError, match="lacks tables of that version"),
    ):
        pg_schema.install(conn)


@contextlib.contextmanager
def a_role_of_no_grants(postgres_database: str) -> Iterator[str]:
    """A login role of its own, with what every role has (CONNECT) and no grant of the
    store's: its URL to the database. Roles are cluster-wide, so it is dropped after."""
    from tests.postgres_cluster import uri

    role = f"agui_nobody_{uuid.uuid4().hex[:10]}"
    with connect(postgres_database) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
    try:
        yield uri({**make_conninfo_dict(postgres_database), "user": role})
    finally:
        with connect(postgres_database) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            admin.execute(f"DROP ROLE {role}")


def test_a_role_that_may_not_create_the_store_is_told_how_to_create_it_not_to_grant_it(
    postgres_database: str,
) -> None:
    with a_role_of_no_grants(postgres_database) as dsn:  # no CREATE on the database
        with pytest.raises(agui_store.StorageError) as refused:
            agui_store.open(dsn)
        said = str(refused.value)
        assert "permission denied for database" in said
        assert "GRANT CREATE ON DATABASE" in said  # what creating the store takes
        assert "application_grants" in said  # and then, for this role
        with connect(postgres_database) as conn:
            assert pg_schema.installed_version(conn) == 0  # nothing was created


def test_a_role_without_the_stores_grants_is_told_what_was_refused_not_that_a_read_writes(
    deployment: tuple[str, str], postgres_database: str
) -> None:
    from tests.postgres_cluster import uri

    owner_dsn, _ = deployment
    with agui_store.open(uri(make_conninfo_dict(owner_dsn))) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r1"}])
    with a_role_of_no_grants(postgres_database) as dsn:
        with pytest.raises(agui_store.StorageError) as refused, agui_store.open(dsn) as store:
            store.threads()  # a read: nothing was to be written
        said = str(refused.value)
        assert "permission denied for schema" in said and "cannot be written" not in said
        assert "application_grants" in said  # what gives this role the store


def test_the_application_role_asked_to_migrate_says_the_owner_must_open_the_store_first(
    deployment: tuple[str, str],
) -> None:
    owner_dsn, app_dsn = deployment
    with connect(owner_dsn) as conn:
        conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    with connect(app_dsn) as conn, pytest.raises(agui_store.StorageError) as refused:
        pg_schema.install(conn)
    said = str(refused.value)
    needs = f"this release needs {pg_schema.SCHEMA_VERSION}"
    assert f"is at agui-store schema version 8 and {needs}" in said
    assert "open the store once as the role that owns its tables" in said
    assert "application_grants" in said and "nothing was changed" in said
    with connect(owner_dsn) as conn:
        assert pg_schema.installed_version(conn) == 8
        assert pg_schema.install(conn) == 8
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION


def test_a_version_9_store_is_indexed_again_so_styled_capitals_are_found_by_plain_words(
    postgres_database: str,
) -> None:
    _one_message(postgres_database, "𝐇𝐞𝐥𝐥𝐨 from ℍotel Porto, 25℃")  # noqa: RUF001 (styled)
    with connect(postgres_database) as conn:
        # Version 9's words: folded before they were decomposed, so capitals stayed.
        changed = conn.execute(
            "UPDATE search_messages SET words = array_to_tsvector(%s)",
            (["Hello", "from", "Hotel", "porto", "25", "C"],),
        ).rowcount
        assert changed == 1
        conn.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    with agui_store.open(postgres_database) as store:
        assert [h.message_id for h in store.search("hello hotel")] == ["m1"]
        assert [h.message_id for h in store.search('"25 c"')] == ["m1"]
        assert not store.check().problems
    with connect(postgres_database) as conn:
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION


def test_a_version_13_store_is_indexed_again_so_the_escaped_words_of_json_results_are_found(
    postgres_database: str,
) -> None:
    from agui_store.engine import search as index
    from agui_store.history import search as rules
    from tests.streams import tool_result

    result = json.dumps({"note": "first line\nsecond line", "city": "Zürich"})
    with agui_store.open(postgres_database) as store:
        store.append(run("t", "r1", *tool_result("c1", "m1", result)))
    with connect(postgres_database) as conn:
        # Version 13's row: the key and the words of the JSON as written, escapes and all.
        changed = conn.execute(
            "UPDATE search_messages SET key = %s, words = array_to_tsvector(%s) WHERE key = %s",
            (index.message_key("m1", result), rules.words(result),
             index.message_key("m1", rules.as_read(result))),
        ).rowcount
        assert changed == 1
        conn.execute("UPDATE meta SET value = '13' WHERE key = 'schema_version'")
    with agui_store.open(postgres_database) as store:
        assert [h.message_id for h in store.search("second zurich")] == ["m1"]
        assert store.search("nsecond") == []
        assert not store.check().problems
    with connect(postgres_database) as conn:
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION


def test_a_version_10_store_loses_the_blobs_no_checkpoint_refers_to_when_it_is_opened(
    postgres_database: str,
) -> None:
    """Earlier versions left blobs behind that no checkpoint refers to; they held text an
    erasure never reached. Opening the store deletes them, and only them."""
    with agui_store.open(postgres_database, checkpoint_events=1) as store:
        store.append(run("t", "r1", *say("m1", "kept words " * 40, "assistant")))
    with connect(postgres_database) as conn:
        before = conn.execute("SELECT id FROM blobs ORDER BY id").fetchall()
        conn.execute(
            "INSERT INTO blobs(hash, codec, data) VALUES (%s, 0, %s)",
            (b"\x01" * 32, b'[{"id":"gone","content":"left behind"}]'),
        )
        conn.execute("UPDATE meta SET value = '10' WHERE key = 'schema_version'")
    with agui_store.open(postgres_database) as store:
        assert store.checkout("r1", thread_id="t").messages[0]["id"] == "m1"
        assert not store.check().problems
    with connect(postgres_database) as conn:
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION
        assert before and conn.execute("SELECT id FROM blobs ORDER BY id").fetchall() == before


def test_a_version_14_store_is_indexed_again_so_korean_is_found_by_whole_syllables(
    postgres_database: str,
) -> None:
    texts = {"m1": "석사 학위", "m2": "서울에서 만나요", "m3": "서우 친구"}
    with agui_store.open(postgres_database) as store:
        store.append(run("t", "r1", *(e for m, said in texts.items() for e in say(m, said))))
    with connect(postgres_database) as conn:
        # Version 14's words: each syllable taken apart into its letters (jamo).
        changed = conn.execute(
            "UPDATE search_messages SET words = array_to_tsvector(string_to_array("
            "normalize(array_to_string(tsvector_to_array(words), ' '), NFKD), ' '))"
        ).rowcount
        assert changed == 3
        conn.execute("UPDATE meta SET value = '14' WHERE key = 'schema_version'")
    with agui_store.open(postgres_database) as store:

        def found(query: str) -> list[str]:
            return sorted(h.message_id for h in store.search(query))

        assert found("서울에서") == ["m2"] and found("석사 학위") == ["m1"]
        assert found("서우*") == ["m3"] and found("서*") == ["m2", "m3"]
        assert not store.check().problems
    with connect(postgres_database) as conn:
        assert pg_schema.installed_version(conn) == pg_schema.SCHEMA_VERSION
