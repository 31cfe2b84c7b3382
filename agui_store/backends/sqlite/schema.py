"""The SQLite schema of a store file, and its migrations.

SQL lives here as module constants so that the statement text is stable (apsw's statement
cache hits) and so that every other backend can be compared against one list of tables.

Invariants the schema itself enforces (not just the library):
- ``events``, ``runs`` and ``batches`` are append-only: UPDATE and DELETE fail inside SQLite,
  whoever the writer is (triggers below).
- A run belongs to one thread; ``(thread, run_id)`` is unique.
- Integer keys on every hot join; each hot query has an index (asserted in tests with
  ``EXPLAIN QUERY PLAN``).
"""

from __future__ import annotations

#: Bumped whenever the schema changes; recorded in ``PRAGMA user_version``.
SCHEMA_VERSION = 25

#: Marks a file as an agui-store database (``PRAGMA application_id``), ASCII "AGUI".
APPLICATION_ID = 0x41475549

CREATE_V1 = """
CREATE TABLE threads (
    id          INTEGER PRIMARY KEY,
    thread_id   TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL            -- milliseconds since the epoch
) STRICT;

CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,      -- creation order: a parent's id is always smaller
    thread        INTEGER NOT NULL REFERENCES threads(id),
    run_id        TEXT NOT NULL,
    parent        INTEGER REFERENCES runs(id),  -- the store's own lineage parent
    lineage       TEXT NOT NULL,            -- why that parent: explicit|parentRunId|messages|head|root
    parent_run_id TEXT,                     -- parentRunId as the client/producer sent it (data)
    input         TEXT,                     -- the RunAgentInput recorded for the run (JSON), if any
    synthetic     INTEGER NOT NULL DEFAULT 0,  -- 1: the store named it (a RUN_ERROR with no run)
    created_at    INTEGER NOT NULL,
    UNIQUE (thread, run_id),
    CHECK (parent IS NULL OR parent < id)
) STRICT;
CREATE INDEX runs_by_parent ON runs(parent);
CREATE INDEX runs_by_thread ON runs(thread, id);
CREATE INDEX runs_by_run_id ON runs(run_id);

CREATE TABLE events (
    seq      INTEGER PRIMARY KEY,           -- global append order
    run      INTEGER NOT NULL REFERENCES runs(id),
    type     TEXT NOT NULL,
    payload  TEXT NOT NULL                  -- the event's JSON text exactly as received
) STRICT;
CREATE INDEX events_by_run ON events(run, seq);

-- One row per run touched by one append call: what landed together, and how it ended.
CREATE TABLE batches (
    id           INTEGER PRIMARY KEY,
    run          INTEGER NOT NULL REFERENCES runs(id),
    first_seq    INTEGER NOT NULL,
    last_seq     INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    outcome      TEXT,                      -- success|interrupt|cancelled|error when the batch ends the run
    appended_at  INTEGER NOT NULL,
    CHECK (first_seq <= last_seq AND count = last_seq - first_seq + 1)
) STRICT;
CREATE INDEX batches_by_run ON batches(run, id);

-- Named branches: the only mutable table (refs move; history does not).
CREATE TABLE branches (
    thread      INTEGER NOT NULL REFERENCES threads(id),
    name        TEXT NOT NULL,
    run         INTEGER NOT NULL REFERENCES runs(id),
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (thread, name)
) STRICT, WITHOUT ROWID;
CREATE INDEX branches_by_run ON branches(run);
"""

# Version 2: content-addressed checkpoints (derived data: the raw log is never rewritten).
CREATE_V2 = """
-- JSON values addressed by the sha256 of their canonical encoding (sorted keys, compact).
-- codec 0: data is that canonical JSON text (UTF-8); codec 1: zlib of it.
-- The integer id is a local handle: rows written together sit together on disk, so reading a
-- view's messages walks neighbouring pages instead of jumping by random hash.
CREATE TABLE blobs (
    id     INTEGER PRIMARY KEY,
    hash   BLOB NOT NULL UNIQUE,
    codec  INTEGER NOT NULL CHECK (codec IN (0, 1)),
    data   BLOB NOT NULL
) STRICT;

-- The restored view at the end of a complete run. Its messages are the first ``keep`` messages
-- of ``base``'s checkpoint followed by this checkpoint's own rows in checkpoint_messages, so a
-- conversation that grows by a few messages per run stores a few rows per run.
CREATE TABLE checkpoints (
    run         INTEGER PRIMARY KEY REFERENCES runs(id),
    base        INTEGER REFERENCES checkpoints(run),
    keep        INTEGER NOT NULL,
    length      INTEGER NOT NULL,         -- number of messages in the view
    chain       INTEGER NOT NULL,         -- checkpoints walked to rebuild the message list
    state       INTEGER NOT NULL REFERENCES blobs(id),
    interrupts  INTEGER REFERENCES blobs(id),
    warnings    INTEGER REFERENCES blobs(id),
    ids_hash    BLOB NOT NULL,            -- sha256 of the message ids, for lineage rule 3
    created_at  INTEGER NOT NULL,
    CHECK (base IS NULL OR base < run)
) STRICT;
CREATE INDEX checkpoints_by_ids ON checkpoints(ids_hash, length);

CREATE TABLE checkpoint_messages (
    run      INTEGER NOT NULL REFERENCES checkpoints(run),
    pos      INTEGER NOT NULL,
    message  INTEGER NOT NULL REFERENCES blobs(id),
    PRIMARY KEY (run, pos)
) STRICT, WITHOUT ROWID;
"""

_APPEND_ONLY_TABLES = ("threads", "runs", "events", "batches")

def _refuse_changes(table: str) -> str:
    """The triggers that refuse UPDATE and DELETE on ``table``."""
    return f"""
CREATE TRIGGER {table}_are_append_only_update BEFORE UPDATE ON {table}
BEGIN SELECT RAISE(ABORT, 'agui-store: {table} are append-only'); END;
CREATE TRIGGER {table}_are_append_only_delete BEFORE DELETE ON {table}
BEGIN SELECT RAISE(ABORT, 'agui-store: {table} are append-only'); END;
"""


def _refuse_replacing(table: str, keys: str) -> str:
    """The trigger that refuses an insert whose key (``keys``, a condition on NEW) exists."""
    return f"""
CREATE TRIGGER {table}_are_append_only_replace BEFORE INSERT ON {table}
WHEN EXISTS (SELECT 1 FROM {table} WHERE {keys})
BEGIN SELECT RAISE(ABORT, 'agui-store: {table} are append-only'); END;
"""


APPEND_ONLY_TRIGGERS = "\n".join(_refuse_changes(table) for table in _APPEND_ONLY_TABLES)

#: Migrations from version N-1 to N, applied in order inside one transaction.
# Version 3: input normalization. ``runs.input_refs`` holds the input's messages as references
# into the lineage parent's view ([start, count] ranges) mixed with literal messages; the
# ``messages`` key is then left out of ``runs.input``.
CREATE_V3 = "ALTER TABLE runs ADD COLUMN input_refs TEXT;"

# Version 4: ``INSERT OR REPLACE`` deletes a conflicting row without firing DELETE triggers,
# so the append-only tables also refuse an insert whose key already exists.
_REPLACE_KEYS = {
    "threads": "id = NEW.id OR thread_id = NEW.thread_id",
    "runs": "id = NEW.id OR (thread = NEW.thread AND run_id = NEW.run_id)",
    "events": "seq = NEW.seq",
    "batches": "id = NEW.id",
}
CREATE_V4 = "\n".join(_refuse_replacing(table, keys) for table, keys in _REPLACE_KEYS.items())

# Version 5: a RUN_STARTED whose echoed ``input`` repeats its lineage is stored with that input
# normalized (as runs.input_refs does for recorded inputs); ``echo_refs`` holds what was
# taken out, and reading the event puts it back. Part of the log: append-only too.
CREATE_V5 = """
CREATE TABLE echo_refs (
    seq   INTEGER PRIMARY KEY REFERENCES events(seq),
    refs  TEXT NOT NULL
) STRICT;
CREATE TRIGGER echo_refs_are_append_only_update BEFORE UPDATE ON echo_refs
BEGIN SELECT RAISE(ABORT, 'agui-store: echo_refs are append-only'); END;
CREATE TRIGGER echo_refs_are_append_only_delete BEFORE DELETE ON echo_refs
BEGIN SELECT RAISE(ABORT, 'agui-store: echo_refs are append-only'); END;
CREATE TRIGGER echo_refs_are_append_only_replace BEFORE INSERT ON echo_refs
WHEN EXISTS (SELECT 1 FROM echo_refs WHERE seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'agui-store: echo_refs are append-only'); END;
"""

# Version 6: lineage rule 3 reads each complete run's message-id digest from a table of its
# own, so that ``append`` can write a full checkpoint every few runs instead of after every run
# (the digest is one row in one B-tree). Derived data, like checkpoints: rebuilt by ``compact``.
# Keyed by the digest, the only way rule 3 looks it up.
CREATE_V6 = """
CREATE TABLE lineage_digests (
    ids_hash  BLOB NOT NULL,              -- sha256 of the view's lineage message ids
    run       INTEGER NOT NULL REFERENCES runs(id),
    PRIMARY KEY (ids_hash, run)
) STRICT, WITHOUT ROWID;
INSERT INTO lineage_digests(ids_hash, run) SELECT ids_hash, run FROM checkpoints;
DROP INDEX checkpoints_by_ids;
"""

# Version 7: a store may leave a complete run's derived data (lineage digest, checkpoint) for
# later (``Store(derive_on_append=False)``, or a run whose view events after its end changed).
# ``underived`` lists those runs; whoever needs their digests (lineage rule 3, ``derive``,
# ``compact``) derives them first. Derived bookkeeping, not part of the log: rows come and go.
#
# Also: a checkpoint's state may be stored as the STATE_DELTA patches the client applied since
# an earlier checkpoint on its lineage whose state is stored whole (``state_base``), so that a
# state that grows a little every run is not stored, nor encoded, whole every run.
CREATE_V7 = """
CREATE TABLE underived (
    run  INTEGER PRIMARY KEY REFERENCES runs(id)
) STRICT;
-- NULL: the ``state`` blob is the state. Else it is a JSON array of JSON Patches which,
-- applied in order to that checkpoint's state (stored whole), give this one.
ALTER TABLE checkpoints ADD COLUMN state_base INTEGER REFERENCES checkpoints(run);
"""

# Version 8: content hashes (see :mod:`agui_store.history.hashing`). A run records the hash its batch
# chain starts from (``start_hash``: its record, its parent's hash when it was placed, its
# input's digest) and those two parts, so that a check can say which one differs; each batch
# records the run's hash after it. A checkpoint records the run hash it was derived at and the
# digest of its blobs' addresses. Files of older versions get theirs computed on open
# (``database.backfill_hashes``): the append-only triggers refuse that UPDATE, so the backfill
# lifts them for the moment it needs, inside the migration's transaction.
CREATE_V8 = """
ALTER TABLE runs ADD COLUMN parent_hash BLOB;  -- the parent's hash when the run was placed
ALTER TABLE runs ADD COLUMN input_hash BLOB;   -- digest of input and input_refs as stored
ALTER TABLE runs ADD COLUMN start_hash BLOB;   -- where the run's batch chain starts
ALTER TABLE batches ADD COLUMN hash BLOB;      -- the run's hash after this batch
ALTER TABLE checkpoints ADD COLUMN run_hash BLOB;   -- the run's hash it was derived at
ALTER TABLE checkpoints ADD COLUMN view_hash BLOB;  -- digest of its blobs' addresses
"""

# Version 9: ownership and request-body fidelity (docs/design/behaviour.md#live-recording and
# docs/design/restoring.md).
#
# A thread belongs to the owner (scope) that first wrote it: ``threads.owner``, set when the
# thread is created and never changed (threads stay append-only); NULL: written without a
# scope, visible to the operator (calls without a scope) only.
#
# A run whose input is a request body and whose lineage parent was not named (rule 4, the
# head) now starts from the body's messages as sent, not the head's with the body's new ones
# after them. What earlier versions derived for such runs, and for the runs below them, may
# hold the old start: it is dropped here and derived again when next needed.
CREATE_V9 = """
ALTER TABLE threads ADD COLUMN owner TEXT;
CREATE INDEX threads_by_owner ON threads(owner);
CREATE TEMP TABLE v9_rederive AS
WITH RECURSIVE below(id) AS (
    SELECT id FROM runs WHERE input IS NOT NULL AND lineage = 'head'
    UNION SELECT runs.id FROM runs JOIN below ON runs.parent = below.id
)
SELECT id FROM below;
DELETE FROM checkpoint_messages WHERE run IN (SELECT id FROM temp.v9_rederive);
DELETE FROM checkpoints WHERE run IN (SELECT id FROM temp.v9_rederive);
DELETE FROM lineage_digests WHERE run IN (SELECT id FROM temp.v9_rederive);
INSERT OR IGNORE INTO underived(run) SELECT id FROM temp.v9_rederive;
DROP TABLE temp.v9_rederive;
"""

# Version 10: checkpoints store their message list as chunks (see :mod:`agui_store.engine.checkpoints`):
# full chunks of 64 messages at fixed positions, one blob each (a JSON array), listed by a
# manifest blob shared by every checkpoint with the same chunks; the messages after them (the
# tail) as segments, blobs holding JSON arrays of consecutive messages, listed with their
# lengths by the row. ``checkout`` reads a bounded number of rows, and the file no longer
# rewrites a whole list every 64 checkpoints. Checkpoints are derived data: those of earlier
# versions are dropped, their runs listed in ``underived``, and derived again (as chunks) when
# next needed. Lineage digests stay: they do not depend on the layout. The message blobs of
# the old lists stayed (new chunks do not refer to them) until version 22 deleted them.
CREATE_V10 = """
DROP TABLE checkpoint_messages;
DROP TABLE checkpoints;
CREATE TABLE checkpoints (
    run         INTEGER PRIMARY KEY REFERENCES runs(id),
    length      INTEGER NOT NULL,         -- number of messages in the view
    chunks      INTEGER REFERENCES blobs(id),  -- manifest: JSON array of the full chunks' blob ids
    tail        TEXT NOT NULL,            -- JSON array of [blob id, count]: the segments after them
    state       INTEGER NOT NULL REFERENCES blobs(id),
    interrupts  INTEGER REFERENCES blobs(id),
    warnings    INTEGER REFERENCES blobs(id),
    ids_hash    BLOB NOT NULL,            -- sha256 of the message ids, for lineage rule 3
    created_at  INTEGER NOT NULL,
    -- NULL: the ``state`` blob is the state. Else a JSON array of JSON Patches which, applied
    -- in order to that checkpoint's state (stored whole), give this one.
    state_base  INTEGER REFERENCES checkpoints(run),
    run_hash    BLOB,                     -- the run's hash it was derived at
    view_hash   BLOB                      -- digest of its blobs' addresses
) STRICT;
INSERT OR IGNORE INTO underived(run)
SELECT DISTINCT run FROM batches WHERE outcome IS NOT NULL ORDER BY run;
"""

# Version 11: an event's type is stored as a small integer, not as its name. The name repeated
# on every row was about 18 bytes of each ~110-byte event row, all of it already in the payload:
# 1.7 MB of a 2,000-run conversation's 21 MB file. ``event_log`` holds the rows, ``type`` an
# ``event_types`` code; ``events`` is a view with the columns version 10 stored (``type`` the
# name), which every query of the store and every SQL by hand reads as before. The codes of
# AG-UI's types are fixed here (``EVENT_TYPE_CODES``), in this order, forever; a type an older
# file holds that is not among them gets the next free code. ``echo_refs`` is rebuilt to refer
# to ``event_log``. SQL by hand on ``events`` still works as on a table: INSTEAD OF triggers
# pass inserts, updates and deletes on to ``event_log`` (the code looked up), where the
# append-only guards refuse the updates and deletes as before. The store inserts into
# ``event_log`` with the code it knows.
EVENT_TYPE_NAMES: tuple[str, ...] = (
    "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "STEP_STARTED", "STEP_FINISHED",
    "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TEXT_MESSAGE_CHUNK",
    "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_CHUNK", "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT", "STATE_DELTA", "MESSAGES_SNAPSHOT", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA",
    "RAW", "CUSTOM", "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END", "REASONING_MESSAGE_CHUNK", "REASONING_END",
    "REASONING_ENCRYPTED_VALUE", "SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR",
    "THINKING_START", "THINKING_END", "THINKING_TEXT_MESSAGE_START",
    "THINKING_TEXT_MESSAGE_CONTENT", "THINKING_TEXT_MESSAGE_END",
)  # fmt: skip
#: An event type's code in ``event_log.type`` (1 upwards, in :data:`EVENT_TYPE_NAMES` order).
EVENT_TYPE_CODES: dict[str, int] = {name: n for n, name in enumerate(EVENT_TYPE_NAMES, 1)}

_EVENT_LOG_GUARDS = "\n".join(
    _refuse_changes(table) + _refuse_replacing(table, f"{key} = NEW.{key}")
    for table, key in (("event_types", "code"), ("event_log", "seq"), ("echo_refs", "seq"))
)

CREATE_V11 = (
    """
CREATE TABLE event_types (
    code  INTEGER PRIMARY KEY,
    name  TEXT NOT NULL UNIQUE
) STRICT;
INSERT INTO event_types(code, name) VALUES """
    + ", ".join(f"({code}, '{name}')" for name, code in EVENT_TYPE_CODES.items())
    + """;
INSERT INTO event_types(name)
SELECT DISTINCT type FROM events WHERE type NOT IN (SELECT name FROM event_types) ORDER BY type;
CREATE TABLE event_log (
    seq      INTEGER PRIMARY KEY,           -- global append order
    run      INTEGER NOT NULL REFERENCES runs(id),
    type     INTEGER NOT NULL REFERENCES event_types(code),
    payload  TEXT NOT NULL                  -- the event's JSON text exactly as received
) STRICT;
INSERT INTO event_log(seq, run, type, payload)
SELECT events.seq, events.run, event_types.code, events.payload
FROM events JOIN event_types ON event_types.name = events.type ORDER BY events.seq;
CREATE TABLE echo_refs_v11 (
    seq   INTEGER PRIMARY KEY REFERENCES event_log(seq),
    refs  TEXT NOT NULL
) STRICT;
INSERT INTO echo_refs_v11(seq, refs) SELECT seq, refs FROM echo_refs ORDER BY seq;
DROP TABLE echo_refs;
DROP TABLE events;
ALTER TABLE echo_refs_v11 RENAME TO echo_refs;
CREATE INDEX events_by_run ON event_log(run, seq);
CREATE VIEW events(seq, run, type, payload) AS
SELECT event_log.seq, event_log.run, event_types.name, event_log.payload
FROM event_log JOIN event_types ON event_types.code = event_log.type;
CREATE TRIGGER events_insert INSTEAD OF INSERT ON events
BEGIN
    INSERT INTO event_log(seq, run, type, payload)
    VALUES (NEW.seq, NEW.run, (SELECT code FROM event_types WHERE name = NEW.type), NEW.payload);
END;
CREATE TRIGGER events_update INSTEAD OF UPDATE ON events
BEGIN
    UPDATE event_log SET seq = NEW.seq, run = NEW.run,
        type = (SELECT code FROM event_types WHERE name = NEW.type), payload = NEW.payload
    WHERE seq = OLD.seq;
END;
CREATE TRIGGER events_delete INSTEAD OF DELETE ON events
BEGIN
    DELETE FROM event_log WHERE seq = OLD.seq;
END;
"""
    + _EVENT_LOG_GUARDS
)

# Version 12: pydantic-ai conversations (agui_store.engine.conversations), beside the AG-UI log. A
# message is stored once by content; an entry holds one message after the entry before it;
# a conversation's record points at its newest entry and at the branches it left. These rows
# move and go (a save moves the head, a delete releases what nothing reaches), so no trigger
# guards them; their content hashes let check() find an edit made outside the store.
CREATE_V12 = """
CREATE TABLE conversation_messages (
    id       INTEGER PRIMARY KEY,
    hash     BLOB NOT NULL UNIQUE,          -- sha256 of message
    message  TEXT NOT NULL                  -- one ModelMessage as pydantic-ai's JSON, keys sorted
) STRICT;

CREATE TABLE conversation_entries (
    id            INTEGER PRIMARY KEY,      -- a parent's id is always smaller
    entry_id      TEXT NOT NULL UNIQUE,     -- pydantic-ai's ConversationEntry.id
    parent        INTEGER REFERENCES conversation_entries(id),
    message       INTEGER NOT NULL REFERENCES conversation_messages(id),
    kind          TEXT NOT NULL,
    conversation  TEXT NOT NULL,            -- the conversation whose save stored it
    hash          BLOB NOT NULL,            -- covers the entry id, kind, message hash and the parent's hash
    CHECK (parent IS NULL OR parent < id)
) STRICT;
CREATE INDEX conversation_entries_by_parent ON conversation_entries(parent);
CREATE INDEX conversation_entries_by_message ON conversation_entries(message);

CREATE TABLE conversations (
    id               INTEGER PRIMARY KEY,   -- creation order: ties of updated_at list by it
    conversation_id  TEXT NOT NULL UNIQUE,
    head             INTEGER REFERENCES conversation_entries(id),
    scope            TEXT,
    revision         TEXT NOT NULL,
    updated_at       INTEGER NOT NULL,      -- microseconds since the epoch, for listing
    record           TEXT NOT NULL,         -- the record's other fields (JSON)
    hash             BLOB NOT NULL          -- covers every column above but id, and the branches
) STRICT;
CREATE INDEX conversations_by_head ON conversations(head);
CREATE INDEX conversations_by_updated_at ON conversations(updated_at DESC, id);
CREATE INDEX conversations_by_scope ON conversations(scope, updated_at DESC, id);

-- The last entries of the branches a conversation left, oldest first.
CREATE TABLE conversation_branches (
    conversation  INTEGER NOT NULL REFERENCES conversations(id),
    pos           INTEGER NOT NULL,
    entry         INTEGER NOT NULL REFERENCES conversation_entries(id),
    PRIMARY KEY (conversation, pos)
) STRICT, WITHOUT ROWID;
CREATE INDEX conversation_branches_by_entry ON conversation_branches(entry);
"""

# Version 13: the full-text search index (agui_store.engine.search), derived data. A row per
# message text a thread's runs first recorded, newest last (its id orders hits); its words
# in a contentless FTS5 table under the same rowid. The words come folded and cut by
# agui_store.history.search, joined by spaces, so the ascii tokenizer (every non-ASCII
# character is part of a word) cuts them exactly there; no positions are kept
# (detail=none): a phrase's order is checked on the message's text. The blob and position
# say where a checkpoint holds the message, which is where a hit's id, role and snippet are
# read from (else from the run's view, at ``pos``); no foreign key: the row is found by
# thread.
CREATE_V13 = """
CREATE TABLE search_messages (
    id      INTEGER PRIMARY KEY,
    thread  INTEGER NOT NULL REFERENCES threads(id),
    run     INTEGER NOT NULL,               -- the run that first recorded this text
    key     INTEGER NOT NULL,               -- 63 bits of sha256(message id, text)
    pos     INTEGER NOT NULL,               -- the message's position in that run's view
    tool    TEXT,                           -- the tool a call or a result is about
    blob    INTEGER,                        -- the chunk or segment holding it, if any
    at      INTEGER                         -- its position there
) STRICT;
CREATE UNIQUE INDEX search_messages_by_key ON search_messages(thread, key);
CREATE VIRTUAL TABLE search_words USING fts5(
    words, content='', contentless_delete=1, detail=none, tokenize='ascii'
);
"""

#: The version whose migration also indexes every stored run for search, after its SQL (13
#: made the index; 16 made its FTS5 table again; 20 cuts Chinese and Japanese text into
#: words of one character; 21 folds the capitals a decomposition gives; 24 reads the escapes
#: of JSON tool arguments and results, and bounds a message's distinct words; 25 matches
#: Hangul by whole syllables).
SEARCH_INDEX_VERSION = 25

# Version 14: erasure (agui_store.engine.erasure). ``erasures`` logs every erasure the store
# made: when, which verb, how much, and the event sequence numbers it took out of the log, so
# that ``check()`` tells a hole an erasure left from rows deleted outside the store. It holds
# no content and no thread id; each row's hash covers its fields and the row before it, and
# the log is append-only. ``tombstones`` holds a hash of each erased thread's id (never the id)
# so that ``copy`` does not bring it back. A file of an earlier version was written without
# ``secure_delete``: deleted content may linger in its free pages, so the migration to this
# version rewrites it once (``VACUUM``, :data:`REWRITE_BEFORE`).
CREATE_V14 = """
CREATE TABLE erasures (
    id             INTEGER PRIMARY KEY,
    erased_at      INTEGER NOT NULL,        -- milliseconds since the epoch
    verb           TEXT NOT NULL,           -- delete_thread|delete_owner|prune|copy
    threads        INTEGER NOT NULL,
    runs           INTEGER NOT NULL,
    events         INTEGER NOT NULL,
    conversations  INTEGER NOT NULL,
    bytes          INTEGER NOT NULL,
    seqs           TEXT NOT NULL,           -- JSON array of [first, last] seq ranges erased
    hash           BLOB NOT NULL            -- covers the fields and the previous row's hash
) STRICT;
CREATE TABLE tombstones (
    thread_hash  BLOB PRIMARY KEY,          -- sha256 of the erased thread's id, tagged
    erased_at    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
-- An erasure keeps the blobs a kept checkpoint refers to: these indexes find such a
-- checkpoint (and the rows a deleted blob, checkpoint or run would leave dangling) without
-- reading the table, so an erasure costs what it erases.
CREATE INDEX lineage_digests_by_run ON lineage_digests(run);
CREATE INDEX checkpoints_by_state ON checkpoints(state);
CREATE INDEX checkpoints_by_interrupts ON checkpoints(interrupts);
CREATE INDEX checkpoints_by_warnings ON checkpoints(warnings);
CREATE INDEX checkpoints_by_chunks ON checkpoints(chunks);
CREATE INDEX checkpoints_by_state_base ON checkpoints(state_base);
-- The tail segments each checkpoint lists (its ``tail`` column, as rows), kept by triggers.
CREATE TABLE checkpoint_segments (
    run   INTEGER NOT NULL,
    blob  INTEGER NOT NULL,
    PRIMARY KEY (run, blob)
) STRICT, WITHOUT ROWID;
CREATE INDEX checkpoint_segments_by_blob ON checkpoint_segments(blob);
INSERT OR IGNORE INTO checkpoint_segments(run, blob)
SELECT checkpoints.run, json_extract(t.value, '$[0]') FROM checkpoints, json_each(checkpoints.tail) t;
CREATE TRIGGER checkpoints_list_segments AFTER INSERT ON checkpoints
BEGIN
    INSERT OR IGNORE INTO checkpoint_segments(run, blob)
    SELECT NEW.run, json_extract(value, '$[0]') FROM json_each(NEW.tail);
END;
CREATE TRIGGER checkpoints_unlist_segments AFTER DELETE ON checkpoints
BEGIN
    DELETE FROM checkpoint_segments WHERE run = OLD.run;
END;
""" + _refuse_changes("erasures") + _refuse_replacing("erasures", "id = NEW.id")

#: The versions whose migration starts with a rewrite of the file (``VACUUM``, outside the
#: migration's transaction): a file written before ``secure_delete`` was on.
REWRITE_BEFORE = 14

#: The append-only tables an erasure deletes from, with their DELETE guards lifted for the
#: moment it needs, inside its transaction (children first).
ERASED_LOG_TABLES = ("echo_refs", "event_log", "batches", "runs", "threads", "event_types")

# Version 15: content hashes that depend on content only. A batch's hash covered its events'
# sequence numbers, which are the store's own (another store numbers the same events
# otherwise); it now covers their positions in the batch. No table changes: every run, batch
# and checkpoint hash is recomputed from the log (``migrations._rehash``), the
# erasure log's entries kept as they are (their hashes cover no batch hash).
CREATE_V15 = "-- every hash recomputed from the log, in Python\n"

# Version 16: the search index forgets a deleted row's words at once. The FTS5 table of
# version 13 (contentless_delete) only marks a deleted row, so its words stayed in the
# index's segments until they were merged, and an erasure merged the whole index: a cost
# that grew with the store. The table is made again contentless without contentless_delete,
# with FTS5's ``secure-delete`` option (SQLite 3.44 and later): a delete is told the row's
# words and takes them out of the segments that hold them. Its rows are derived data, and
# the words cannot be read out of the old table: the migration indexes every run again
# (:data:`SEARCH_INDEX_VERSION`). A new row's words wait in ``search_pending`` and go into
# the FTS5 table with the other pending rows' once there are
# :data:`agui_store.backends.sqlite.transaction.SEARCH_PENDING_ROWS` of them: FTS5 writes a
# segment per transaction that adds words, and a segment per append cost as much as the rest
# of the append's writes. Pending rows are the newest, and are searched in that table; its
# pages, emptied at each move, are reused by the next rows.
CREATE_V16 = """
DROP TABLE search_words;
DELETE FROM search_messages;
CREATE TABLE search_pending (
    id     INTEGER PRIMARY KEY,             -- the search_messages row
    words  TEXT NOT NULL                    -- its words, each once, joined by spaces
) STRICT;
CREATE VIRTUAL TABLE search_words USING fts5(
    words, content='', detail=none, tokenize='ascii'
);
INSERT INTO search_words(search_words, rank) VALUES ('secure-delete', 1);
"""

# Version 17: the search index in small pages, so that an erasure's cost does not grow with
# the store. A ``secure-delete`` finds each deleted word by reading that word's row list in
# every segment up to the row: through the list's page index where the list spans enough
# pages, else entry by entry. In FTS5's default pages of about 4 kB a common word's list in a
# middle-sized segment has no page index and is read whole, so deleting a recent thread cost
# what every older row of its words held (3x from 1,000 to 10,000 other runs in
# ``benchmarks/bench_erase``). In pages of 256 bytes the lists get their page index early and
# a delete reads a few small pages: the ratio falls to about 1.2x, the index grows by about a
# tenth, and searches cost the same. ``optimize`` writes an existing index again in the new
# pages, once (a new store has nothing to write).
CREATE_V17 = """
INSERT INTO search_words(search_words, rank) VALUES ('pgsz', 256);
INSERT INTO search_words(search_words) VALUES ('optimize');
"""

# Version 18: a new index row waits whole in ``search_pending``, not only its words. The row
# went into ``search_messages`` at once, and its ``(thread, key)`` entry, whose key is a hash,
# landed on a random leaf of that index: about a page written per message of an append (in
# a long thread as in a large store). A pending row now holds the columns of a
# ``search_messages`` row and its words, under the id it keeps; the rows move into
# ``search_messages`` and their words into the FTS5 table together (a few hundred at a time,
# :data:`agui_store.backends.sqlite.transaction.SEARCH_PENDING_ROWS`), so that index takes
# its entries in batches. The pending rows' own ``(thread, key)`` index is small (a page or
# two, whatever the store's size): a new row is looked for in both, and each refuses a
# second row of a thread's text.
CREATE_V18 = """
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
SELECT m.id, m.thread, m.run, m.key, m.pos, m.tool, m.blob, m.at, p.words
FROM search_pending p JOIN search_messages m ON m.id = p.id ORDER BY p.id;
DELETE FROM search_messages WHERE id IN (SELECT id FROM search_pending);
DROP TABLE search_pending;
ALTER TABLE search_pending_v18 RENAME TO search_pending;
CREATE UNIQUE INDEX search_pending_by_key ON search_pending(thread, key);
"""

# Version 19: the pending search rows name their thread without a foreign key. The
# constraint made SQLite look the thread up for each pending row written, and made the
# pending rows' move a delete row by row (a table with a foreign key is not emptied whole):
# about 35,000 instructions an append of four messages. A row is checked against
# ``threads`` where it is kept, in ``search_messages``, whose foreign key stays, when the
# rows move; an erasure deletes a thread's pending rows with its other rows. The words come
# as the store cuts them, in order, repeats and all, separated by spaces
# (:func:`agui_store.history.search.index_text`): FTS5 and the pending rows' search take them
# so, and no word list is made to join them.
CREATE_V19 = """
CREATE TABLE search_pending_v19 (
    id      INTEGER PRIMARY KEY,            -- the row's id in search_messages, once moved
    thread  INTEGER NOT NULL,               -- checked when the row moves to search_messages
    run     INTEGER NOT NULL,
    key     INTEGER NOT NULL,
    pos     INTEGER NOT NULL,
    tool    TEXT,
    blob    INTEGER,
    at      INTEGER,
    words   TEXT NOT NULL                   -- its words in order, separated by spaces
) STRICT;
INSERT INTO search_pending_v19(id, thread, run, key, pos, tool, blob, at, words)
SELECT id, thread, run, key, pos, tool, blob, at, words FROM search_pending ORDER BY id;
DROP TABLE search_pending;
ALTER TABLE search_pending_v19 RENAME TO search_pending;
CREATE UNIQUE INDEX search_pending_by_key ON search_pending(thread, key);
"""

# Version 20: Chinese and Japanese text indexed a character a word
# (:func:`agui_store.history.search.words`): a run of Han, Hiragana or Katakana characters was
# one word, found only by a query for the whole run or a prefix of it. The index is derived
# data: the migration empties it, with the FTS5 table made again as version 17 left it, and
# indexes every run again (:data:`SEARCH_INDEX_VERSION`). Dropping the table frees its pages,
# zeroed as every freed page is.
CREATE_V20 = """
DROP TABLE search_words;
DELETE FROM search_pending;
DELETE FROM search_messages;
CREATE VIRTUAL TABLE search_words USING fts5(
    words, content='', detail=none, tokenize='ascii'
);
INSERT INTO search_words(search_words, rank) VALUES ('secure-delete', 1);
INSERT INTO search_words(search_words, rank) VALUES ('pgsz', 256);
"""

# Version 21: a word is decomposed before it is case folded
# (:func:`agui_store.history.search.fold`): letters whose decomposition is a capital
# (mathematical and double-struck letters, ``℃``) were indexed as that capital, which no
# query finds. The index is emptied and
# made again as version 20 does, and every run indexed again.
CREATE_V21 = CREATE_V20

# Version 22: no blob is left that no checkpoint refers to. Earlier versions left the message
# lists of the layout before version 10, and the blobs of checkpoints dropped below a run
# that grew; they held views' text an erasure, which follows checkpoints, never reached.
# They are deleted (``migrations._delete_unreferenced_blobs``); the store deletes such a blob
# with the last checkpoint that refers to it from now on.
CREATE_V22 = "-- every blob no checkpoint refers to deleted, in Python\n"

# Version 23: a sequence number is never handed out again. The next one came after the
# newest event, so an erasure of the newest runs gave theirs out again, and a run later
# written on them, deleted by hand, left no hole for check() to find: the erasure's range
# explained it. The next number now comes after the last one any erasure took too (each
# entry's ranges are sorted: its last range ends highest), read through this index (made
# if missing: a file a tool set back to an older version keeps it).
CREATE_V23 = """
CREATE INDEX IF NOT EXISTS erasures_by_last_seq ON erasures(json_extract(seqs, '$[#-1][1]'));
"""

# Version 24: tool-call arguments and tool results that are JSON are found by their strings
# as read (:func:`agui_store.history.search.as_read`): the escapes were indexed as written,
# so the first word of a line after ``\n`` and every word with an escaped accent
# (``Z\u00fcrich``, as Python's ``json.dumps`` writes it) were found by no query. And a
# message's distinct words stop at 1 MB, as PostgreSQL's must
# (:data:`agui_store.history.search.MAX_DISTINCT_BYTES`). And the Latin letters no
# decomposition takes apart fold plain (``Łódź`` is ``lodz``), and invisible format
# characters inside a word (a soft hyphen) leave it whole. The index is emptied and made
# again as version 20 does, and every run indexed again.
CREATE_V24 = CREATE_V20

# Version 25: Hangul is matched a syllable at a time (:func:`agui_store.history.search.fold`
# composes the syllables NFKD takes apart): a word was indexed as its letters (jamo), so a
# prefix that ends on a syllable without a final consonant found that syllable with one too
# (``서*`` found ``석사``), and a store's words are no longer those a query folds to. The
# index is emptied and made again as version 20 does, and every run indexed again.
CREATE_V25 = CREATE_V20

MIGRATIONS: dict[int, str] = {
    1: CREATE_V1 + APPEND_ONLY_TRIGGERS,
    2: CREATE_V2,
    3: CREATE_V3,
    4: CREATE_V4,
    5: CREATE_V5,
    6: CREATE_V6,
    7: CREATE_V7,
    8: CREATE_V8,
    9: CREATE_V9,
    10: CREATE_V10,
    11: CREATE_V11,
    12: CREATE_V12,
    13: CREATE_V13,
    14: CREATE_V14,
    15: CREATE_V15,
    16: CREATE_V16,
    17: CREATE_V17,
    18: CREATE_V18,
    19: CREATE_V19,
    20: CREATE_V20,
    21: CREATE_V21,
    22: CREATE_V22,
    23: CREATE_V23,
    24: CREATE_V24,
    25: CREATE_V25,
}

#: The versions whose migration also computes values in Python, after its SQL.
BACKFILLS = frozenset({8, 15, 22})
