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


#: Schema 16 made the search index's FTS5 table again, without contentless_delete and with
#: secure-delete, and keeps a new row's words in ``search_pending`` until enough are
#: pending; version 15's table marked a deleted row instead, and took every row's words at
#: once. Its words come from the index itself (fts5vocab's instance table lists each row's
#: words), the pending ones first put there.
UNDO_VERSION_16 = """
INSERT INTO search_words(rowid, words) SELECT id, words FROM search_pending;
DROP TABLE search_pending;
CREATE VIRTUAL TABLE temp.instances USING fts5vocab(main, search_words, instance);
CREATE TEMP TABLE row_words AS
SELECT doc, group_concat(term, ' ') AS words FROM temp.instances GROUP BY doc;
DROP TABLE temp.instances;
DROP TABLE search_words;
CREATE VIRTUAL TABLE search_words USING fts5(
    words, content='', contentless_delete=1, detail=none, tokenize='ascii'
);
INSERT INTO search_words(rowid, words) SELECT doc, words FROM temp.row_words;
DROP TABLE temp.row_words;
"""


#: Schema 18 keeps a new index row whole in ``search_pending`` until the pending rows move
#: together; version 17 put the row in ``search_messages`` at once and kept only its words
#: pending.
UNDO_VERSION_18 = """
INSERT INTO search_messages(id, thread, run, key, pos, tool, blob, at)
SELECT id, thread, run, key, pos, tool, blob, at FROM search_pending ORDER BY id;
CREATE TABLE search_pending_v17 (
    id     INTEGER PRIMARY KEY,
    words  TEXT NOT NULL
) STRICT;
INSERT INTO search_pending_v17(id, words) SELECT id, words FROM search_pending;
DROP TABLE search_pending;
ALTER TABLE search_pending_v17 RENAME TO search_pending;
"""


#: Schema 19 keeps the pending search rows without a foreign key to ``threads``; version 18's
#: had one (and its words each once, which a later version's rows need not be: both take
#: any words separated by spaces).
UNDO_VERSION_19 = """
CREATE TABLE search_pending_v18 (
    id      INTEGER PRIMARY KEY,            -- the row's id in search_messages, once moved
    thread  INTEGER NOT NULL REFERENCES threads(id),
    run     INTEGER NOT NULL,
    key     INTEGER NOT NULL,
    pos     INTEGER NOT NULL,
    tool    TEXT,
    blob    INTEGER,
    at      INTEGER,
    words   TEXT NOT NULL                   -- its words, each once, joined by spaces
) STRICT;
INSERT INTO search_pending_v18(id, thread, run, key, pos, tool, blob, at, words)
SELECT id, thread, run, key, pos, tool, blob, at, words FROM search_pending ORDER BY id;
DROP TABLE search_pending;
ALTER TABLE search_pending_v18 RENAME TO search_pending;
CREATE UNIQUE INDEX search_pending_by_key ON search_pending(thread, key);
"""


#: Schema 17 writes the search index in pages of 256 bytes; version 16's were FTS5's default.
UNDO_VERSION_17 = """
DELETE FROM search_words_config WHERE k = 'pgsz';
INSERT INTO search_words(search_words) VALUES ('optimize');
"""


def as_version_18(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 18's tables. Pages
    it frees are zeroed, as a store's connections (version 14 on) zero them: the words of the
    table it drops would linger in them otherwise."""
    (kept,) = conn.execute("PRAGMA secure_delete").fetchone()
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(UNDO_VERSION_19)
    conn.execute(f"PRAGMA secure_delete = {int(kept)}")


def as_version_17(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 17's tables, its
    freed pages zeroed as :func:`as_version_18` zeroes them."""
    as_version_18(conn)
    (kept,) = conn.execute("PRAGMA secure_delete").fetchone()
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(UNDO_VERSION_18)
    conn.execute(f"PRAGMA secure_delete = {int(kept)}")


def as_version_16(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 16's tables."""
    as_version_17(conn)
    conn.execute(UNDO_VERSION_17)


def as_version_15(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 15's tables."""
    as_version_16(conn)
    conn.execute(UNDO_VERSION_16)


def as_version_13(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 13's tables."""
    as_version_15(conn)
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


def as_version_8(conn: Any) -> None:
    """Give a current file (an apsw connection, foreign keys off) version 8's tables: version
    10's, with threads without owners, message lists as rows (``checkpoint_messages``), and
    checkpoints (derived data) in version 8's layout, empty: as version 8's migrations
    make them, read from a database they build in memory."""
    import apsw

    from agui_store.backends.sqlite.schema import MIGRATIONS

    as_version_10(conn)
    conn.execute("DROP INDEX threads_by_owner; ALTER TABLE threads DROP COLUMN owner")
    made = apsw.Connection(":memory:")
    for version in range(1, 9):
        made.execute(MIGRATIONS[version])
    for name in ("checkpoints", "checkpoint_messages"):
        (create,) = made.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (name,)).fetchone()
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(create)
    made.close()


# --- hashes over sequence numbers (before SQLite's version 15, PostgreSQL's version 7) ---------

_NONE = b"\xff" * 8


def _field(value: str | bytes | None) -> bytes:
    if value is None:
        return _NONE
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return len(data).to_bytes(8, "big") + data


def sequence_batch_digest(rows: list[Any], outcome: str | None, appended_at: int) -> bytes:
    """A batch's digest as earlier versions computed it: over each event's sequence number
    (the store's own), type, bytes and echo references."""
    import hashlib

    parts = [b"agui-store batch 1\x00", _field(outcome), int(appended_at).to_bytes(8, "big",
                                                                                     signed=True)]
    for seq, kind, payload, refs in rows:
        data = str(payload).encode("utf-8", "surrogatepass")
        parts += [int(seq).to_bytes(8, "big", signed=True), _field(kind),
                  len(data).to_bytes(8, "big"), data, _field(refs)]  # fmt: skip
    return hashlib.sha256(b"".join(parts)).digest()


def as_sequence_hashed(location: str) -> int:
    """Give a current store (either backend) the hashes and the schema version a store had
    when a batch's hash covered its events' sequence numbers: every run, batch and
    checkpoint hash rewritten as those versions wrote it. Returns how many stored hashes
    changed."""
    from agui_store.backends.postgres import schema as pg_schema
    from agui_store.backends.sqlite import schema as sqlite_schema
    from agui_store.history import hashing
    from tests.backends import is_postgres, owner

    pg = is_postgres(location)
    mark = "%s" if pg else "?"
    changed = 0
    with owner(location) as conn:
        runs = conn.execute(
            "SELECT r.id, t.thread_id, r.run_id, r.parent, r.lineage, r.parent_run_id, "
            "r.synthetic, r.created_at, r.parent_hash, r.input_hash, r.start_hash "
            "FROM runs r JOIN threads t ON t.id = r.thread ORDER BY r.id"
        ).fetchall()
        batches: dict[int, list[Any]] = {}
        for row in conn.execute(
            "SELECT id, run, first_seq, last_seq, outcome, appended_at, hash FROM batches "
            "ORDER BY id"
        ).fetchall():
            batches.setdefault(int(row[1]), []).append(row)
        now: dict[int, list[bytes]] = {}  # each run's chain as stored
        old: dict[int, list[bytes]] = {}  # and as the sequence numbers gave it
        renamed: dict[bytes, bytes] = {}
        for pk, thread, run_id, parent, lineage, sent, synthetic, created, p_hash, i_hash, s_hash in runs:  # noqa: E501
            parent_then = None
            if parent is not None:
                at = now[parent].index(bytes(p_hash))
                parent_then = old[parent][at]
            start = hashing.start(
                thread_id=thread, run_id=run_id, lineage=lineage, sent_parent_run_id=sent,
                synthetic=bool(synthetic), created_at=int(created), parent_hash=parent_then,
                input_hash=None if i_hash is None else bytes(i_hash),
            )  # fmt: skip
            now[pk], old[pk] = [bytes(s_hash)], [start]
            conn.execute(
                f"UPDATE runs SET parent_hash = {mark}, start_hash = {mark} WHERE id = {mark}",
                (parent_then, start, pk),
            )
            renamed[bytes(s_hash)] = start
            for b_pk, _, first, last, outcome, appended_at, b_hash in batches.get(pk, []):
                rows = conn.execute(
                    "SELECT e.seq, e.type, e.payload, echo_refs.refs FROM events e "
                    "LEFT JOIN echo_refs ON echo_refs.seq = e.seq "
                    f"WHERE e.run = {mark} AND e.seq BETWEEN {mark} AND {mark} ORDER BY e.seq",
                    (pk, first, last),
                ).fetchall()
                chained = hashing.chain(
                    old[pk][-1], sequence_batch_digest(rows, outcome, appended_at)
                )
                now[pk].append(bytes(b_hash))
                old[pk].append(chained)
                renamed[bytes(b_hash)] = chained
                changed += chained != bytes(b_hash)
                conn.execute(f"UPDATE batches SET hash = {mark} WHERE id = {mark}", (chained, b_pk))
        for run, run_hash in conn.execute("SELECT run, run_hash FROM checkpoints").fetchall():
            if run_hash is not None and bytes(run_hash) in renamed:
                conn.execute(
                    f"UPDATE checkpoints SET run_hash = {mark} WHERE run = {mark}",
                    (renamed[bytes(run_hash)], run),
                )
        # The version before the rehash (SQLite 15, PostgreSQL 7), with the tables it had.
        if pg:
            conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", ("6",))
        else:
            # Version 16 made the full-text table again and added the pending words; version
            # 17 set its page size, which a table made here lacks (18 moved the pending rows,
            # 19 dropped their foreign key; version 16's migration empties search_messages,
            # as 20's, 21's, 24's and 25's do again to index words as they fold and read them).
            conn.execute("DROP TABLE search_pending")
            conn.execute("DROP TABLE search_words")
            conn.execute("CREATE VIRTUAL TABLE search_words USING fts5(words, content='', "
                         "contentless_delete=1, detail=none, tokenize='ascii')")
            conn.execute("PRAGMA user_version = 14")
    # PostgreSQL's versions 9 and 10 empty the search index and index every run again; its
    # 11 and SQLite's 22 delete the blobs no checkpoint refers to (no table changes); its 12
    # and SQLite's 23 add an index on the erasure log, which this version has; its 13
    # narrows what erase_log erases; its 14 and 15 and SQLite's 24 and 25 empty the search
    # index and index every run again.
    assert pg_schema.SCHEMA_VERSION == 15 and sqlite_schema.SCHEMA_VERSION == 25, (
        "a later migration: say here what it undoes"
    )
    return changed
