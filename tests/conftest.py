"""Shared test fixtures: the official-client oracle, the upstream recordings, stores on disk."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.oracle_client import Oracle, unavailable_reason

# Hypothesis profiles: "dev" is quick for the edit-test loop, "ci" digs deeper but keeps the
# whole suite well under the CI budget on 2 cores. HYPOTHESIS_PROFILE picks one.
#
# CI's budget, by kind of test: a property gets 200 examples (3.3x a dev run; at 300 the suite
# took 21 min of a 20-minute budget, and a second backend will run many tests again). A test
# whose examples cost more or less sets its own beside it, relative to the profile's:
# state machines run fewer, longer examples (tests/test_checkpoints.py), the differential
# "thousands of streams" properties more (tests/test_compaction.py).
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # CI is a gate: the same examples every run, so a red build means a change broke
    # something. Random exploration happens in every developer's runs (the dev profile).
    derandomize=True,
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

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


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"
