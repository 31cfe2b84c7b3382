"""What earlier schema versions looked like, for tests that turn a file written by this
version back into an older one's shape before opening it (``tests/data`` keeps real old
files; these tests need a small, specific one)."""

from __future__ import annotations

from typing import Any

#: Schema 11 moved the log's rows into ``event_log`` (types as codes of ``event_types``)
#: behind an ``events`` view; version 10 had ``events`` as a table, and ``echo_refs``
#: referring to it.
UNDO_VERSION_11 = """
DROP VIEW events;
CREATE TABLE events (
    seq      INTEGER PRIMARY KEY,
    run      INTEGER NOT NULL REFERENCES runs(id),
    type     TEXT NOT NULL,
    payload  TEXT NOT NULL
) STRICT;
INSERT INTO events(seq, run, type, payload)
SELECT event_log.seq, event_log.run, event_types.name, event_log.payload
FROM event_log JOIN event_types ON event_types.code = event_log.type ORDER BY event_log.seq;
CREATE TABLE echo_refs_v10 (
    seq   INTEGER PRIMARY KEY REFERENCES events(seq),
    refs  TEXT NOT NULL
) STRICT;
INSERT INTO echo_refs_v10(seq, refs) SELECT seq, refs FROM echo_refs;
DROP TABLE echo_refs;
ALTER TABLE echo_refs_v10 RENAME TO echo_refs;
DROP TABLE event_log;
DROP TABLE event_types;
CREATE INDEX events_by_run ON events(run, seq);
"""

#: Schema 12 added the pydantic-ai conversation tables; version 11 had none.
UNDO_VERSION_12 = """
DROP TABLE conversation_branches;
DROP TABLE conversations;
DROP TABLE conversation_entries;
DROP TABLE conversation_messages;
"""


#: Schema 13 added the search index; version 12 had none.
UNDO_VERSION_13 = """
DROP TABLE search_words;
DROP TABLE search_messages;
"""


#: Schema 14 added erasure: the erasure log, tombstones, checkpoint_segments and the
#: indexes an erasure looks blobs up in; version 13 had none.
UNDO_VERSION_14 = """
DROP TRIGGER erasures_are_append_only_update;
DROP TRIGGER erasures_are_append_only_delete;
DROP TRIGGER erasures_are_append_only_replace;
DROP TRIGGER checkpoints_list_segments;
DROP TRIGGER checkpoints_unlist_segments;
DROP INDEX lineage_digests_by_run;
DROP INDEX checkpoints_by_state;
DROP INDEX checkpoints_by_interrupts;
DROP INDEX checkpoints_by_warnings;
DROP INDEX checkpoints_by_chunks;
DROP INDEX checkpoints_by_state_base;
DROP TABLE checkpoint_segments;
DROP TABLE tombstones;
DROP TABLE erasures;
"""


def as_version_13(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 13's tables."""
    conn.execute(UNDO_VERSION_14)


def as_version_12(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 12's tables."""
    as_version_13(conn)
    conn.execute(UNDO_VERSION_13)


def as_version_11(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 11's tables."""
    as_version_12(conn)
    conn.execute(UNDO_VERSION_12)


def as_version_10(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 10's log tables."""
    as_version_11(conn)
    conn.execute(UNDO_VERSION_11)
