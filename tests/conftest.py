"""Shared test fixtures: the official-client oracle, the upstream recordings, stores on disk."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.oracle_client import Oracle, unavailable_reason
from tests.postgres_cluster import ClusterUnavailable, PostgresCluster, PostgresServer
from tests.workers.harness import Worker, reap

# Hypothesis profiles: "dev" is quick for the edit-test loop, "ci" digs deeper but keeps the
# whole suite well under the CI budget on 2 cores. HYPOTHESIS_PROFILE picks one.
#
# CI's budget, by kind of test: a property gets 60 examples, as many as a dev run but the same
# ones every time (at 300 the suite took 21 min of a 20-minute budget on SQLite alone; with
# PostgreSQL running many tests a second time, 200 was on course for over an hour). A test
# whose examples cost more or less sets its own beside it, relative to the profile's:
# state machines run fewer, longer examples (tests/contract/test_checkpoints.py), the
# differential "thousands of streams" properties more (tests/test_compaction.py).
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # CI is a gate: the same examples every run, so a red build means a change broke
    # something. Random exploration happens in every developer's runs (the dev profile).
    derandomize=True,
    print_blob=True,
)
# CI's pass on the lowest versions the pyproject allows: every test runs, the properties on
# fewer (fixed) examples, so that both passes fit CI's time budget.
settings.register_profile(
    "ci-lowest",
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_report_header() -> str:
    """The versions the run meets, first in its output: a failure names what it ran on."""
    import importlib.metadata

    found = []
    for name in ("apsw", "msgspec", "jsonpatch", "sqlite-utils", "psycopg", "pydantic-ai-slim"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    import apsw

    return f"dependencies: {', '.join(found)}; SQLite {apsw.sqlite_lib_version()}"

# In CI the differential tests must run: a missing node or ../shared is a failure there,
# not a skip (AGUI_STORE_REQUIRE_ORACLE=1 is set by .ci/run).
REQUIRE = os.environ.get("AGUI_STORE_REQUIRE_ORACLE") == "1"

SHARED = Path(os.environ.get("AGUI_STORE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
FIXTURES = SHARED / "fixtures"


def _skip_or_fail(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def load_fixture_streams() -> list[tuple[str, list[dict[str, Any]]]]:
    """Every recorded upstream stream in ../shared/fixtures, as (name, events)."""
    streams: list[tuple[str, list[dict[str, Any]]]] = []
    for path in sorted(FIXTURES.glob("*/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            streams.extend((f"{path.stem}:{key}", value) for key, value in data.items())
        else:
            streams.append((path.stem, data))
    return streams


FIXTURE_STREAMS = load_fixture_streams() if FIXTURES.is_dir() else []
FIXTURE_IDS = [name for name, _ in FIXTURE_STREAMS]


@pytest.fixture
def fixture_streams() -> list[tuple[str, list[dict[str, Any]]]]:
    if not FIXTURE_STREAMS:
        _skip_or_fail(f"the upstream recordings are not at {FIXTURES} (../shared/fixtures)")
    return FIXTURE_STREAMS


def fixture_params() -> list[Any]:
    """Parametrize over the recordings; one skipped param with the reason when absent."""
    if FIXTURE_STREAMS:
        return [pytest.param(events, id=name) for name, events in FIXTURE_STREAMS]
    mark = pytest.mark.skipif(not REQUIRE, reason=f"no upstream recordings at {FIXTURES}")
    return [pytest.param(None, id="no-fixtures", marks=mark)]


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    reason = unavailable_reason()
    if reason:
        _skip_or_fail(reason)
    handle = Oracle()
    yield handle
    handle.close()


@pytest.fixture(autouse=True)
def _no_worker_outlives_its_test() -> Iterator[None]:
    yield
    if Worker.running:
        reap()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


# --- PostgreSQL -----------------------------------------------------------------------------
# The PostgreSQL tests run against AGUI_STORE_TEST_POSTGRES (a DSN of a role that may create
# databases) when set, else a throwaway cluster started here for the session. Without server
# binaries or psycopg they skip with the reason; in CI (AGUI_STORE_REQUIRE_POSTGRES=1, set by
# .ci/run) they fail instead.
REQUIRE_POSTGRES = os.environ.get("AGUI_STORE_REQUIRE_POSTGRES") == "1"


def _postgres_unavailable(reason: str) -> None:
    if REQUIRE_POSTGRES:
        pytest.fail(f"required in CI (AGUI_STORE_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(reason)


#: Clones of each template database the session's server keeps made ahead, and drops left
#: to its background thread (PostgresServer.spares): about 0.2 s of setup per PostgreSQL
#: test, over hundreds of tests, then runs beside the tests instead of before each.
SPARE_DATABASES = 2


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _postgres_unavailable("psycopg is not installed (pip install 'psycopg[binary]')")
    external = os.environ.get("AGUI_STORE_TEST_POSTGRES")
    if external:
        server = PostgresServer(dsn=external, spares=SPARE_DATABASES)
        try:
            yield server
        finally:
            server.close()
        return
    try:
        cluster = PostgresCluster.create()
    except ClusterUnavailable as reason:
        _postgres_unavailable(str(reason))
    server = PostgresServer(dsn=cluster.dsn(), cluster=cluster, spares=SPARE_DATABASES)
    try:
        yield server
    finally:
        server.close()
        cluster.destroy()


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """The DSN of the session's server (its maintenance database), as a postgresql:// URI."""
    return postgres_server.dsn


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database of this test's own (a DSN), dropped afterwards."""
    dsn = postgres_server.create_database()
    yield dsn
    postgres_server.drop_database(dsn)


@pytest.fixture(scope="session")
def postgres_store_template(postgres_server: PostgresServer) -> Iterator[str]:
    """The name of a database holding an empty store (schema installed), to clone per test."""
    import psycopg

    from agui_store.backends.postgres import schema

    dsn = postgres_server.create_database()
    with psycopg.connect(dsn, autocommit=True) as conn:
        schema.install(conn)
    yield str(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"])
    postgres_server.drop_database(dsn)


@pytest.fixture
def postgres_store_database(
    postgres_server: PostgresServer, postgres_store_template: str
) -> Iterator[str]:
    """A fresh database of this test's own with an empty store installed (a DSN): cloning
    the installed template skips the DDL (0.15 s against 0.4 s for a new database plus
    install, on a busy 2-core machine)."""
    dsn = postgres_server.create_database(template=postgres_store_template)
    yield dsn
    postgres_server.drop_database(dsn)


@pytest.fixture
def postgres_cluster(postgres_server: PostgresServer) -> Iterator[PostgresCluster]:
    """The throwaway cluster itself, for tests that stop, crash or restart the server.

    Skips against an external server (AGUI_STORE_TEST_POSTGRES): the tests may not stop it.
    Whatever the test did, the server is running again afterwards.
    """
    cluster = postgres_server.cluster
    if cluster is None:
        pytest.skip("AGUI_STORE_TEST_POSTGRES names an external server, which tests never stop")
    yield cluster
    postgres_server.ensure_running()


# --- pydantic-ai -----------------------------------------------------------------------------
# The tests marked pydantic_ai use pydantic-ai: the durable ConversationStore's, and the live
# recordings of its AG-UI adapter. pydantic-ai needs Python 3.11 (from its 2.55.0 on), so the
# test extra installs it there only, and on Python 3.10 these tests skip saying so. On 3.11+ a
# missing pydantic-ai skips them with the reason; in CI (AGUI_STORE_REQUIRE_PYDANTIC_AI=1, set
# by .ci/run) it fails them instead. A module whose every test needs it calls
# needs_pydantic_ai() before its imports; a module that mixes them imports pydantic-ai under
# ``contextlib.suppress(ImportError)`` and marks the tests that use it.
REQUIRE_PYDANTIC_AI = os.environ.get("AGUI_STORE_REQUIRE_PYDANTIC_AI") == "1"
#: Whether this Python can run pydantic-ai at all (its own floor).
PYDANTIC_AI = sys.version_info >= (3, 11)
PYDANTIC_AI_NEEDS = "pydantic-ai needs Python 3.11"


def needs_pydantic_ai() -> None:
    """Skip the calling test, or module, when pydantic-ai cannot run here: on Python 3.10, or
    (outside CI) when it is not installed. In CI on 3.11+ a missing pydantic-ai fails."""
    if not PYDANTIC_AI:
        pytest.skip(
            f"{PYDANTIC_AI_NEEDS}; this is Python {platform.python_version()}",
            allow_module_level=True,
        )
    try:
        import pydantic_ai  # noqa: F401
    except ImportError as e:
        if REQUIRE_PYDANTIC_AI:
            pytest.fail(
                f"required in CI (AGUI_STORE_REQUIRE_PYDANTIC_AI=1): pydantic-ai: {e}",
                pytrace=False,
            )
        pytest.skip(f"pydantic-ai is not installed: {e}", allow_module_level=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("pydantic_ai"):
        needs_pydantic_ai()


# --- every backend ------------------------------------------------------------------------
#
# The store's behavioural tests live in tests/contract and run once per backend through its
# fixture (tests/contract/conftest.py: ``store_location``, ``new_location``, ``backend``).
# Tests of one backend's own features (file modes, triggers through sqlite3, query plans, the
# cluster's roles) stay outside it and take ``db_path`` or the PostgreSQL fixtures above.
