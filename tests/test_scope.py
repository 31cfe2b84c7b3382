"""Ownership on an SQLite file of an older version: its threads, written before scopes, come
out of the migration unowned. The ownership rules themselves run on every backend
(tests/contract/test_scopes.py)."""

from __future__ import annotations

from pathlib import Path

import apsw

import agui_store
from agui_store.backends.sqlite import schema
from tests.backends import checked
from tests.schema_history import as_version_8
from tests.streams import run, say


def test_a_version_8_file_migrates_with_its_threads_unowned(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        store.append(run("t", "r1", *say("m1", "old")))
    conn = apsw.Connection(str(path))
    as_version_8(conn)
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    with agui_store.open(path) as store:
        assert store.threads() == ["t"] and store.threads(scope="alice") == []
        assert store.checkout("r1").messages[0]["content"] == "old"
        assert checked(store)
    assert schema.SCHEMA_VERSION >= 9
