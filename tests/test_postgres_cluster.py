"""The throwaway PostgreSQL cluster the PostgreSQL tests run on does what they rely on.

Each test's database is its own; the server can be crashed and restarted with the data kept;
sessions can be killed; and a test process that dies without cleaning up leaves no server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.postgres_cluster import (
    ClusterUnavailable,
    PostgresCluster,
    PostgresServer,
    uri,
    with_dbname,
)

psycopg = pytest.importorskip("psycopg")

ROOT = Path(__file__).resolve().parents[1]


def test_a_test_database_starts_empty_and_is_not_the_maintenance_database(
    postgres_database: str, postgres_dsn: str
) -> None:
    assert postgres_database != postgres_dsn
    with psycopg.connect(postgres_database) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
    assert tables == (0,)


def test_two_test_databases_do_not_see_each_others_tables(
    postgres_server: PostgresServer,
) -> None:
    first, second = postgres_server.create_database(), postgres_server.create_database()
    try:
        with psycopg.connect(first, autocommit=True) as conn:
            conn.execute("CREATE TABLE only_in_first (x int)")
        with psycopg.connect(second) as conn:
            seen = conn.execute("SELECT to_regclass('only_in_first') IS NULL").fetchone()
        assert seen == (True,)
    finally:
        postgres_server.drop_database(first)
        postgres_server.drop_database(second)
    postgres_server.settle()  # drops may be left to the background thread
    with postgres_server.connect() as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname = ANY(%s)",
            ([first.split("?")[0].rsplit("/", 1)[1], second.split("?")[0].rsplit("/", 1)[1]],),
        ).fetchone()
    assert left == (0,)


def test_the_server_listens_on_its_socket_only(postgres_cluster: PostgresCluster) -> None:
    with psycopg.connect(postgres_cluster.dsn()) as conn:
        listen = conn.execute("SHOW listen_addresses").fetchone()
        sockets = conn.execute("SHOW unix_socket_directories").fetchone()
    assert listen == ("",)
    assert sockets == (str(postgres_cluster.socket_dir),)


def test_a_crashed_and_restarted_server_keeps_committed_rows_and_the_old_session_is_dead(
    postgres_cluster: PostgresCluster, postgres_database: str
) -> None:
    conn = psycopg.connect(postgres_database, autocommit=True)
    conn.execute("CREATE TABLE kept (x int)")
    conn.execute("INSERT INTO kept VALUES (1)")
    postgres_cluster.stop("immediate")
    assert not postgres_cluster.running
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    conn.close()
    postgres_cluster.start()
    assert postgres_cluster.running
    with psycopg.connect(postgres_database) as again:
        assert again.execute("SELECT x FROM kept").fetchall() == [(1,)]


def test_a_test_that_leaves_the_server_stopped_still_gets_its_database_dropped(
    postgres_cluster: PostgresCluster, postgres_server: PostgresServer
) -> None:
    dsn = postgres_server.create_database()
    postgres_cluster.stop("immediate")
    postgres_server.drop_database(dsn)  # what the postgres_database fixture's teardown does
    assert postgres_cluster.running
    postgres_server.settle()  # drops may be left to the background thread
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        psycopg.connect(dsn).close()


def test_terminating_a_databases_backends_kills_its_sessions_only(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    victim = psycopg.connect(postgres_database, autocommit=True)
    bystander = psycopg.connect(postgres_server.dsn, autocommit=True)
    try:
        assert postgres_server.terminate_backends(postgres_database) == 1
        with pytest.raises(psycopg.OperationalError):
            victim.execute("SELECT 1")
        assert bystander.execute("SELECT 1").fetchone() == (1,)
    finally:
        victim.close()
        bystander.close()


def test_terminating_one_backend_by_pid_kills_that_session(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    victim = psycopg.connect(postgres_database, autocommit=True)
    other = psycopg.connect(postgres_database, autocommit=True)
    try:
        assert postgres_server.terminate_backend(victim.info.backend_pid)
        with pytest.raises(psycopg.OperationalError):
            victim.execute("SELECT 1")
        assert other.execute("SELECT 1").fetchone() == (1,)
    finally:
        victim.close()
        other.close()


def test_dsns_are_uris_that_keep_every_parameter() -> None:
    dsn = uri({"dbname": "db one", "host": "/tmp/a b", "port": "5433", "user": "u"})
    assert dsn.startswith("postgresql:///db%20one?")
    moved = with_dbname(dsn, "other")
    params = psycopg.conninfo.conninfo_to_dict(moved)
    assert params == {"dbname": "other", "host": "/tmp/a b", "port": "5433", "user": "u"}
    keyvalue = with_dbname("host=/tmp/x port=5432 user=postgres dbname=postgres", "t")
    assert psycopg.conninfo.conninfo_to_dict(keyvalue)["dbname"] == "t"


_START_AND_HANG = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.postgres_cluster import PostgresCluster
cluster = PostgresCluster.create()
print(cluster.root, flush=True)
time.sleep(600)
"""


def _postmaster_alive(root: Path) -> bool:
    pid_file = root / "data" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_test_process_killed_with_sigkill_leaves_no_server_and_no_directory(
    postgres_server: PostgresServer,
) -> None:
    if postgres_server.cluster is None:
        pytest.skip("the tests use an external server (AGUI_STORE_TEST_POSTGRES)")
    process = subprocess.Popen(
        [sys.executable, "-c", _START_AND_HANG, str(ROOT)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    root = Path(process.stdout.readline().strip())
    try:
        assert root.name.startswith("agui-store-pg-")
        assert _postmaster_alive(root)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stdout.close()
    deadline = time.monotonic() + 30
    while (root.exists() or _postmaster_alive(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not root.exists()


def _run_one_postgres_test(**env: str) -> subprocess.CompletedProcess[str]:
    """pytest, in a child, on one test that needs the server, without server binaries."""
    child_env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("AGUI_STORE_TEST_POSTGRES", "AGUI_STORE_REQUIRE_POSTGRES")
    }
    child_env.update(PYTHONPATH=str(ROOT), AGUI_STORE_PG_BINDIR="/nonexistent/bin", **env)
    return subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
            "tests/test_postgres_cluster.py::test_the_server_listens_on_its_socket_only",
        ],
        cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_without_server_binaries_the_tests_skip_and_say_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In process (a child pytest costs seconds): the cluster says what is missing, and the
    fixtures' helper turns that into a skip unless PostgreSQL is required."""
    from tests import conftest

    monkeypatch.setenv("AGUI_STORE_PG_BINDIR", "/nonexistent/bin")
    with pytest.raises(ClusterUnavailable) as missing:
        PostgresCluster.create()
    assert "no PostgreSQL server binaries" in str(missing.value)
    assert "/nonexistent/bin" in str(missing.value)
    monkeypatch.setattr(conftest, "REQUIRE_POSTGRES", False)
    with pytest.raises(pytest.skip.Exception, match="no PostgreSQL server binaries"):
        conftest._postgres_unavailable(str(missing.value))


def test_without_server_binaries_the_tests_fail_where_postgres_is_required() -> None:
    """End to end, in a child pytest, as CI runs it."""
    result = _run_one_postgres_test(AGUI_STORE_REQUIRE_POSTGRES="1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "required in CI (AGUI_STORE_REQUIRE_POSTGRES=1)" in result.stdout
    assert "no PostgreSQL server binaries" in result.stdout
