"""Request-body fidelity (docs/design/restoring.md), differentially against the official
client.

A request body is what the client holds: ``HttpAgent`` sends its whole history with every run
and never a ``parentRunId``. A body whose parent was not named and that continues no restored
view (a fresh client on an existing thread, an edited first message) restores as exactly its
own messages and then the run's events, never with the head's messages prepended. A body that
continues a restored view (lineage rule 3) keeps the activity messages the client holds but
strips from what it sends. The reference is ``@ag-ui/client`` 1.0.0 replaying the run's
events from what the client holds (``{events, messages, state}``), computed here from the
client's side, never from the store's start rule.

Here, what an SQLite file of an older version derives again when it is migrated; the rules
themselves run on every backend in tests/contract/test_fidelity.py.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

import agui_store
from agui_store import testing
from tests.backends import checked
from tests.schema_history import as_version_8
from tests.streams import http_agent_body, reply

pytestmark = pytest.mark.oracle


def test_a_version_8_file_derives_again_what_the_amended_start_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written before the rule for resent request bodies changed (schema 8) holds
    checkpoints of a body
    placed at the head that start from the head's messages: migrating drops them (and those
    below) so that checkout gives the amended view, from checkpoints as by full replay."""
    from agui_store.engine import derivation

    path = tmp_path / "s.db"
    fresh = http_agent_body("r3", [{"id": "e1", "role": "user", "content": "edited"}])
    with monkeypatch.context() as old_rule:
        old_rule.setattr(derivation, "body_as_sent", lambda has_input, lineage: False)
        with agui_store.open(path) as store:
            store.append(reply("r1", "a1", "hi"))
            store.append(reply("r2", "a2", "fine"))
            store.append(reply("r3", "a3", "new"), input=fresh)
            store.append(reply("r4", "a4", "below"))
            assert len(store.checkout("r4").messages) == 5  # r1 and r2's, then e1, a3, a4
    conn = apsw.Connection(str(path))
    as_version_8(conn)
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    with agui_store.open(path) as store:
        db = testing.connection(store)
        underived = db.execute(
            "SELECT runs.run_id FROM underived JOIN runs ON runs.id = underived.run ORDER BY 1"
        ).fetchall()
        # Version 10 derives every checkpoint again (as chunks); version 9 also dropped the
        # lineage digests of the body's run and the one below it, which started wrong.
        assert underived == [("r1",), ("r2",), ("r3",), ("r4",)]
        digests = db.execute(
            "SELECT runs.run_id FROM lineage_digests JOIN runs ON runs.id = lineage_digests.run "
            "ORDER BY 1"
        ).fetchall()
        assert digests == [("r1",), ("r2",)]
        assert [m["id"] for m in store.checkout("r4").messages] == ["e1", "a3", "a4"]
        for pk in (3, 4):
            co = store.checkout(f"r{pk}")
            assert co.messages == testing.replayed_view(store, pk).messages
        assert store.compact() == 4 and checked(store)
