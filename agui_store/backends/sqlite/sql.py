"""Every statement the SQLite backend runs for the engine, as named constants.

One constant per operation of :mod:`agui_store.engine.port` (the transaction's method of the same
name in lower case runs it). Constant text keeps apsw's statement cache hitting. The
``EXPLAIN QUERY PLAN`` of the hot ones is asserted in tests (``CROSS JOIN`` pins a join
order where SQLite's planner would otherwise pick a scan).

``col = +?`` (and ``LIMIT +?``) in a statement that joins (or orders) keeps it prepared once:
since SQLite 3.54 a bare ``col = ?`` (or ``LIMIT ?``) there marks the parameter as one whose
value may change the plan, and apsw clears a cached statement's bindings before it runs it
again, which makes SQLite parse and plan the whole statement anew on every run (in a
checkout's statements, and in a log page's walk of the lineage, that costs more than running
them). The unary ``+`` changes neither the value, nor its affinity, nor the plan
(``EXPLAIN QUERY PLAN`` still searches by the key).
"""

from __future__ import annotations

import functools

# --- shared parts -----------------------------------------------------------------------------

#: The ancestor chain of a run, the run itself first. Walks ``runs`` by primary key only.
ANCESTORS_CTE = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT ?, 0
    UNION ALL
    SELECT runs.parent, chain.depth + 1 FROM chain JOIN runs ON runs.id = chain.id
    WHERE runs.parent IS NOT NULL
)
"""

#: The merge base of two runs: the deepest run on both lineages, with its depth below each.
#: A parent's key is always smaller than its child's, so stepping whichever side has the
#: larger key up to its parent meets the base after as many steps as the two runs are from
#: it, not from the root (each step one primary-key probe); a NULL (a root passed) ends the
#: walk without a base.
MERGE_BASE = """
WITH RECURSIVE walk(a, b, da, db) AS (
    SELECT ?1, ?2, 0, 0
    UNION ALL
    SELECT CASE WHEN walk.a > walk.b THEN runs.parent ELSE walk.a END,
           CASE WHEN walk.b > walk.a THEN runs.parent ELSE walk.b END,
           walk.da + (walk.a > walk.b), walk.db + (walk.b > walk.a)
    FROM walk JOIN runs ON runs.id = max(walk.a, walk.b)
    WHERE walk.a != walk.b
)
SELECT a, da, db FROM walk WHERE a = b LIMIT 1
"""

#: Per-run summaries: event count, last event, latest outcome, last append time.
RUN_COLUMNS = """
    runs.id, threads.thread_id, runs.run_id, parent_runs.run_id, runs.lineage,
    runs.parent_run_id, typeof(runs.input) != 'null', runs.synthetic, runs.created_at,
    (SELECT sum(b.count) FROM batches b WHERE b.run = runs.id),
    (SELECT max(b.last_seq) FROM batches b WHERE b.run = runs.id),
    (SELECT max(b.appended_at) FROM batches b WHERE b.run = runs.id),
    (SELECT b.outcome FROM batches b WHERE b.run = runs.id AND b.outcome IS NOT NULL
        ORDER BY b.id DESC LIMIT 1),
    coalesce((SELECT b.hash FROM batches b WHERE b.run = runs.id ORDER BY b.id DESC LIMIT 1),
        runs.start_hash)
"""

#: A run's hash: its newest batch's (its chain's start while it has none).
RUN_HASH = """
SELECT coalesce((SELECT b.hash FROM batches b WHERE b.run = ?1 ORDER BY b.id DESC LIMIT 1),
    (SELECT start_hash FROM runs WHERE id = ?1))
"""
RUN_FROM = """
FROM runs JOIN threads ON threads.id = runs.thread
LEFT JOIN runs AS parent_runs ON parent_runs.id = runs.parent
"""
SELECT_RUN = "SELECT" + RUN_COLUMNS + RUN_FROM

# --- threads --------------------------------------------------------------------------------

THREAD = "SELECT id, owner FROM threads WHERE thread_id = ?"
#: Created after the erasure its tombstone (the third value's) names, if any.
INSERT_THREAD = (
    "INSERT INTO threads(thread_id, created_at, owner) VALUES (?, max(?, coalesce("
    "(SELECT erased_at + 1 FROM tombstones WHERE thread_hash = ?), 0)), ?) RETURNING id"
)
THREAD_ID = "SELECT thread_id FROM threads WHERE id = ?"
THREAD_CREATED_AT = "SELECT created_at FROM threads WHERE id = ?"
#: Thread ids visible to a scope (NULL: every thread), oldest first.
THREAD_IDS = "SELECT thread_id FROM threads WHERE ?1 IS NULL OR owner = ?1 ORDER BY id"
THREAD_PKS = "SELECT id FROM threads WHERE ?1 IS NULL OR owner = ?1 ORDER BY id LIMIT ?2"
#: The same, the thread written to last first (its newest batch's time; a thread with none
#: last).
THREAD_IDS_BY_ACTIVITY = """
SELECT t.thread_id FROM threads t WHERE ?1 IS NULL OR t.owner = ?1
ORDER BY (SELECT max(b.appended_at) FROM runs r JOIN batches b ON b.run = r.id
          WHERE r.thread = t.id) DESC, t.id DESC
"""
OWNED_THREAD_PKS = "SELECT id FROM threads WHERE owner = ? ORDER BY id"
#: Threads whose newest run has no terminal batch.
THREADS_WITH_OPEN_HEAD = """
SELECT threads.thread_id FROM threads JOIN runs ON runs.id =
    (SELECT max(id) FROM runs WHERE runs.thread = threads.id)
WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE b.run = runs.id AND b.outcome IS NOT NULL)
"""

# --- runs -----------------------------------------------------------------------------------

RUN_PK = "SELECT id FROM runs WHERE thread = ? AND run_id = ?"
RUN_ID = "SELECT run_id FROM runs WHERE id = ?"
RUN_PARENT = "SELECT parent FROM runs WHERE id = ?"
RUN_THREAD = "SELECT thread FROM runs WHERE id = ?"
RUN_ROW = "SELECT parent, input, input_refs, lineage FROM runs WHERE id = ?"
RUN_INPUT = "SELECT input, input_refs, parent, input_hash FROM runs WHERE id = ?"
RUN_NAMES = (
    "SELECT threads.thread_id, runs.run_id FROM runs JOIN threads "
    "ON threads.id = runs.thread WHERE runs.id = ?"
)
NEWEST_RUN = "SELECT id FROM runs WHERE thread = +? ORDER BY id DESC LIMIT 1"
HAS_CHILD = "SELECT 1 FROM runs WHERE parent = ? LIMIT 1"
#: Its id is the connection's last insert rowid (no RETURNING: a result row costs more).
INSERT_RUN = """
INSERT INTO runs(thread, run_id, parent, lineage, parent_run_id, input, input_refs, synthetic,
                 created_at, parent_hash, input_hash, start_hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
#: The incomplete runs of a thread (no batch with an outcome).
OPEN_RUNS = (
    "SELECT id FROM runs WHERE thread = ? AND NOT EXISTS (SELECT 1 FROM "
    "batches b WHERE b.run = runs.id AND b.outcome IS NOT NULL)"
)
RUN_STATUS = (
    "SELECT outcome FROM batches WHERE run = ? AND outcome IS NOT NULL "
    "ORDER BY id DESC LIMIT 1"
)
RUN_LAST_SEQ = "SELECT max(last_seq) FROM batches WHERE run = ?"
#: The threads holding a run id (within a scope's threads; NULL: all), a few.
THREADS_OF_RUN_ID = (
    "SELECT threads.thread_id FROM runs JOIN threads ON threads.id = runs.thread "
    "WHERE runs.run_id = ?1 AND (?2 IS NULL OR threads.owner = ?2) LIMIT 6"
)
#: Runs named ``?1`` in thread ``?2`` (NULL: any), of owner ``?3`` (NULL: any). Looked up
#: without a thread, each row also names another thread with a *branch* of that name, so the
#: ambiguity check costs no second statement.
RUNS_NAMED = """
SELECT runs.id, runs.thread, threads.thread_id,
  CASE WHEN ?2 IS NULL THEN (
    SELECT other.thread_id FROM branches JOIN threads AS other ON other.id = branches.thread
    WHERE branches.name = +?1 AND branches.thread != runs.thread LIMIT 1) END
FROM runs JOIN threads ON threads.id = runs.thread
WHERE runs.run_id = +?1 AND (?2 IS NULL OR runs.thread = +?2)
  AND (?3 IS NULL OR threads.owner = +?3) LIMIT 5
"""
#: Runs whose id starts with ``?1`` (below ``?2``, its upper bound; NULL: none), as RUNS_NAMED.
RUNS_PREFIXED = """
SELECT runs.id, runs.thread, runs.run_id FROM runs JOIN threads ON threads.id = runs.thread
WHERE runs.run_id >= ?1 AND (?2 IS NULL OR runs.run_id < ?2)
  AND (?3 IS NULL OR runs.thread = ?3) AND (?4 IS NULL OR threads.owner = ?4) LIMIT 7
"""
THREAD_RUN_PKS = "SELECT id FROM runs WHERE thread = ? ORDER BY id"
THREAD_RUN_COUNT = "SELECT count(*) FROM runs WHERE thread = ?"
THREAD_ACTIVITY = """
SELECT r.run_id, b.appended_at,
       (SELECT count(*) FROM runs o WHERE o.thread = ?1
        AND NOT EXISTS (SELECT 1 FROM batches e WHERE e.run = o.id AND e.outcome IS NOT NULL))
FROM runs r JOIN batches b ON b.run = r.id WHERE r.thread = ?2
ORDER BY b.appended_at DESC, b.id DESC LIMIT 1
"""
OWNER_RUN_PKS = (
    "SELECT runs.id FROM runs JOIN threads ON threads.id = runs.thread "
    "WHERE threads.owner = ? ORDER BY runs.id"
)
ALL_RUN_PKS = "SELECT id FROM runs ORDER BY id"
THREADS_OF_RUNS = "SELECT DISTINCT thread FROM runs WHERE id IN (SELECT value FROM json_each(?))"

# --- lineage --------------------------------------------------------------------------------

#: A run's ancestors and itself, root first (a parent's key is always smaller).
ANCESTORS = ANCESTORS_CTE + "SELECT id FROM chain ORDER BY id"
#: Whether one of the runs in the JSON array ``?2`` is on ``?1``'s lineage.
ANCESTOR_AMONG = (
    ANCESTORS_CTE + "SELECT 1 FROM chain WHERE id IN (SELECT value FROM json_each(?2)) LIMIT 1"
)
#: The runs below ``?`` (all depths) not already listed as underived.
DERIVED_DESCENDANTS = """
WITH RECURSIVE sub(id) AS (
    SELECT id FROM runs WHERE parent = ?
    UNION ALL SELECT runs.id FROM runs JOIN sub ON runs.parent = sub.id
)
SELECT id FROM sub WHERE id NOT IN (SELECT run FROM underived)
"""
#: The newest recorded input on a run's lineage.
NEWEST_INPUT = (
    ANCESTORS_CTE
    + "SELECT runs.input FROM chain CROSS JOIN runs ON runs.id = chain.id "
    "WHERE runs.input IS NOT NULL ORDER BY chain.depth LIMIT 1"
)
#: Run summaries of a lineage, newest first, above depth ``?2`` (NULL: all of it), at most
#: ``?3`` of them (-1: no limit). The limit is on the recursive walk itself, which stops
#: after ``?3`` runs: a page of a deep lineage (``log(limit=)``) reads its own runs only (a
#: LIMIT after ``ORDER BY`` would walk and summarize the whole chain to sort it first).
LINEAGE_RUNS = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT ?1, 0
    UNION ALL
    SELECT runs.parent, chain.depth + 1 FROM chain JOIN runs ON runs.id = chain.id
    WHERE runs.parent IS NOT NULL
    LIMIT +?3
)
SELECT""" + RUN_COLUMNS + """FROM chain CROSS JOIN runs ON runs.id = chain.id
JOIN threads ON threads.id = runs.thread
LEFT JOIN runs AS parent_runs ON parent_runs.id = runs.parent
WHERE ?2 IS NULL OR chain.depth < ?2 ORDER BY chain.depth
"""
#: A run's summary (SELECT_RUN's columns), then the branches at the run (a JSON array, by
#: name) and whether it is its thread's newest run: what one run's record shows, in one
#: statement.
RUN_SUMMARY_AND_BRANCHES = (
    "SELECT"
    + RUN_COLUMNS
    + """,
    (SELECT json_group_array(name) FROM (
        SELECT b.name FROM branches b WHERE b.thread = runs.thread AND b.run = runs.id
        ORDER BY b.name)),
    runs.id = (SELECT n.id FROM runs n WHERE n.thread = runs.thread ORDER BY n.id DESC LIMIT 1)
"""
    + RUN_FROM
    + " WHERE runs.id = +?"
)
THREAD_RUN_SUMMARIES = SELECT_RUN + " WHERE runs.thread = ? ORDER BY runs.id"
#: The newest ``?3`` runs of thread ``?1`` recorded before run ``?2``, newest first: a page
#: of ``runs(limit=, before=)`` walks the primary key backwards, whatever the thread's length.
THREAD_RUN_PAGE = (
    SELECT_RUN + " WHERE runs.thread = +?1 AND runs.id < +?2 ORDER BY runs.id DESC LIMIT +?3"
)
assert RUN_FROM in SELECT_RUN

# --- events ---------------------------------------------------------------------------------

#: An event row: ``type`` is its ``event_types`` code (schema version 11).
INSERT_EVENT = "INSERT INTO event_log(seq, run, type, payload) VALUES (?, ?, ?, ?)"
#: A type no code was fixed for (never one AG-UI defines): it gets the next free code.
ADD_EVENT_TYPE = "INSERT OR IGNORE INTO event_types(name) VALUES (?)"
EVENT_TYPE_CODE = "SELECT code FROM event_types WHERE name = ?"
#: The next sequence number: after the newest event's and the last an erasure took
#: (schema version 23), so that none is ever handed out again.
NEXT_SEQ = (
    "SELECT max(coalesce((SELECT max(seq) FROM events), 0), coalesce((SELECT "
    "max(json_extract(seqs, '$[#-1][1]')) FROM erasures), 0)) + 1"
)
INSERT_ECHO_REFS = "INSERT INTO echo_refs(seq, refs) VALUES (?, ?)"
#: A run's events after a sequence number, with their echo refs.
RUN_EVENTS = """
SELECT events.payload, echo_refs.refs, events.seq, events.type FROM events
LEFT JOIN echo_refs ON echo_refs.seq = events.seq
WHERE events.run = ? AND events.seq > ? ORDER BY events.seq
"""
#: The events of the runs in a JSON array, run by run, with their echo refs.
EVENTS_OF_RUNS = """
SELECT events.run, events.seq, events.type, events.payload, echo_refs.refs
FROM events LEFT JOIN echo_refs ON echo_refs.seq = events.seq
WHERE events.run IN (SELECT value FROM json_each(?)) ORDER BY events.run, events.seq
"""
#: Every event of a run's ancestor chain, with its echo refs (each ancestor one range probe
#: of ``events_by_run``: CROSS JOIN keeps the chain the outer loop).
CHAIN_EVENTS = (
    ANCESTORS_CTE
    + "SELECT events.run, events.seq, events.type, events.payload, echo_refs.refs "
    "FROM chain CROSS JOIN events ON events.run = chain.id "
    "LEFT JOIN echo_refs ON echo_refs.seq = events.seq"
)
#: The newest terminal event of a run.
TERMINAL_EVENT = (
    "SELECT payload FROM events WHERE run = ? AND type IN ('RUN_FINISHED', 'RUN_ERROR') "
    "ORDER BY seq DESC LIMIT 1"
)

# --- batches and hashes ---------------------------------------------------------------------

INSERT_BATCH = (
    "INSERT INTO batches(run, first_seq, last_seq, count, outcome, appended_at, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
#: What verifying runs' records against their hashes reads, for the runs in a JSON array.
#: A thread's runs as recorded, in run order (what a copy to another store needs).
REPLICA_RUNS = """
SELECT runs.id, runs.run_id, parent.run_id, runs.lineage, runs.parent_run_id, runs.input,
       runs.input_refs, runs.synthetic, runs.created_at, runs.parent_hash, runs.start_hash
FROM runs LEFT JOIN runs AS parent ON parent.id = runs.parent
WHERE runs.thread = ? ORDER BY runs.id
"""
RUN_RECORDS = """
SELECT runs.id, threads.thread_id, runs.run_id, runs.lineage, runs.parent_run_id,
       runs.synthetic, runs.created_at, runs.input, runs.input_refs, runs.parent_hash,
       runs.input_hash, runs.start_hash,
       CASE WHEN runs.parent IS NULL THEN runs.parent_hash IS NULL
       ELSE runs.parent_hash IN (
           SELECT p.start_hash FROM runs AS p WHERE p.id = runs.parent
           UNION ALL SELECT b.hash FROM batches AS b WHERE b.run = runs.parent)
       END
FROM runs JOIN threads ON threads.id = runs.thread
WHERE runs.id IN (SELECT value FROM json_each(?))
"""
#: The batches of the runs in a JSON array, in order, with each run's chain start.
BATCHES_OF_RUNS = """
SELECT batches.run, runs.start_hash, batches.first_seq, batches.last_seq, batches.outcome,
       batches.appended_at, batches.hash
FROM batches JOIN runs ON runs.id = batches.run
WHERE batches.run IN (SELECT value FROM json_each(?)) ORDER BY batches.run, batches.id
"""

#: A run's batches after a sequence number (run, after, run): those from the one holding the
#: event after it on, the hash of the batch before them as their chain start. Batches are
#: numbered in the order of their sequence numbers, so the one before is found by walking
#: back from the newest: the cost follows the batches returned, not the run.
BATCHES_OF_RUN_AFTER = """
WITH previous AS (
    SELECT id, hash FROM batches WHERE run = ? AND last_seq <= ? ORDER BY id DESC LIMIT 1
)
SELECT b.run,
       CASE WHEN EXISTS (SELECT 1 FROM previous) THEN (SELECT hash FROM previous)
            ELSE runs.start_hash END,
       b.first_seq, b.last_seq, b.outcome, b.appended_at, b.hash
FROM batches AS b JOIN runs ON runs.id = b.run
WHERE b.run = ? AND b.id > coalesce((SELECT id FROM previous), 0)
ORDER BY b.id
"""

# --- branches -------------------------------------------------------------------------------

BRANCH_RUN = "SELECT run FROM branches WHERE thread = ? AND name = ?"
HAS_BRANCHES = "SELECT EXISTS (SELECT 1 FROM branches WHERE thread = ?)"
SET_BRANCH = """
INSERT INTO branches(thread, name, run, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT(thread, name) DO UPDATE SET run = excluded.run, updated_at = excluded.updated_at
"""
MOVE_BRANCHES = "UPDATE branches SET run = ?, updated_at = ? WHERE thread = ? AND run = ?"
DELETE_BRANCH = "DELETE FROM branches WHERE thread = ? AND name = ?"
BRANCH_TIPS = "SELECT run, name FROM branches WHERE thread = +? ORDER BY name"
BRANCH_LIST = """
SELECT branches.name, runs.run_id, branches.updated_at FROM branches
JOIN runs ON runs.id = branches.run WHERE branches.thread = ? ORDER BY name
"""
#: Branches named ``?1`` in thread ``?2`` (NULL: any) of owner ``?3`` (NULL: any).
BRANCHES_NAMED = """
SELECT branches.run, branches.thread FROM branches JOIN threads ON threads.id = branches.thread
WHERE branches.name = ?1 AND (?2 IS NULL OR branches.thread = ?2)
  AND (?3 IS NULL OR threads.owner = ?3) LIMIT 2
"""

# --- derived data ---------------------------------------------------------------------------

INSERT_DIGEST = "INSERT OR IGNORE INTO lineage_digests(ids_hash, run) VALUES (?, ?)"
HAS_DIGEST = "SELECT 1 FROM lineage_digests WHERE ids_hash = ? AND run = ?"
#: Whether a run of a thread up to a run key holds an event after a seq, read from the
#: newest events, those written since, up to GREW_SINCE_READS of them (each run's thread
#: found by its key); more than that answers yes, unread. A range of the primary key: it
#: never walks the events of every older run.
GREW_SINCE_READS = 4096
GREW_SINCE = f"""
SELECT count(*) = {GREW_SINCE_READS}
       OR coalesce(max(e.run <= :run AND (SELECT thread FROM runs WHERE id = e.run) = :thread), 0)
FROM (SELECT run FROM event_log WHERE seq > :seq ORDER BY seq LIMIT {GREW_SINCE_READS}) AS e
"""
#: Lineage rule 3: the runs of a thread whose lineage digest is one of a JSON array of hex
#: digests. CROSS JOIN keeps the digests the outer loop (a primary-key probe each); a plain
#: JOIN lets SQLite walk the thread's runs and probe every digest for each.
RUNS_WITH_DIGESTS = """
SELECT d.run, d.ids_hash FROM (SELECT unhex(value) AS h FROM json_each(?1)) AS wanted
CROSS JOIN lineage_digests AS d ON d.ids_hash = wanted.h
CROSS JOIN runs ON runs.id = d.run
WHERE runs.thread = ?2
"""
#: Digests lost while their checkpoints stayed: the checkpoint has it.
DIGESTS_FROM_CHECKPOINTS = (
    "INSERT OR IGNORE INTO lineage_digests(ids_hash, run) SELECT ids_hash, run FROM checkpoints"
)
MARK_UNDERIVED = "INSERT OR IGNORE INTO underived(run) SELECT value FROM json_each(?)"
CLEAR_UNDERIVED = "DELETE FROM underived WHERE run = ?"
UNDERIVED_THREADS = (
    "SELECT DISTINCT runs.thread FROM underived JOIN runs ON runs.id = underived.run"
)
UNDERIVED_RUNS = """
SELECT underived.run, runs.thread FROM underived JOIN runs ON runs.id = underived.run
WHERE ?1 IS NULL OR runs.thread = ?1 ORDER BY underived.run
"""
CHECKPOINT_COUNT = "SELECT count(*) FROM checkpoints"

# --- checkpoints (chunked message lists: agui_store.engine.checkpoints) ---------------------------

#: A run's ancestors up to (and including) the nearest one with a checkpoint, newest first.
#: ``stop`` is 1 on the row that has a checkpoint.
NEAREST = """
WITH RECURSIVE chain(id, depth, stop) AS (
    SELECT ?1, 0, EXISTS (SELECT 1 FROM checkpoints WHERE checkpoints.run = ?1)
    UNION ALL
    SELECT runs.parent, chain.depth + 1,
           EXISTS (SELECT 1 FROM checkpoints WHERE checkpoints.run = runs.parent)
    FROM chain JOIN runs ON runs.id = chain.id
    WHERE chain.stop = 0 AND runs.parent IS NOT NULL
)
SELECT id, stop FROM chain ORDER BY depth
"""

#: A checkpoint: its list's length, tail ids and manifest, its single blobs, its state base,
#: the addresses and digest it recorded, and whether the run hash it was derived at is one of
#: the run's (its newest, usually).
SELECT_CHECKPOINT = """
SELECT c.length, c.tail, m.data, s.codec, s.data, i.codec, i.data, w.codec, w.data,
       c.state_base, s.hash, i.hash, w.hash, c.view_hash,
       CASE WHEN c.run_hash = (SELECT b.hash FROM batches b WHERE b.run = c.run
                               ORDER BY b.id DESC LIMIT 1) THEN 1
            ELSE EXISTS (SELECT 1 FROM batches b WHERE b.run = c.run AND b.hash = c.run_hash)
       END,
       c.chunks, m.codec,
       -- the state base's checkpoint, and the state its patches apply to (state base,
       -- codec, data, address): read here rather than by one more statement
       bc.run, bc.state_base, bs.codec, bs.data, bs.hash
FROM checkpoints c JOIN blobs s ON s.id = c.state
LEFT JOIN blobs m ON m.id = c.chunks
LEFT JOIN blobs i ON i.id = c.interrupts
LEFT JOIN blobs w ON w.id = c.warnings
LEFT JOIN checkpoints bc ON bc.run = c.state_base
LEFT JOIN blobs bs ON bs.id = bc.state
WHERE c.run = +?
"""

#: Blobs by id in the order of a JSON array of ids: json_each walks it in order and each row
#: is one integer-key probe (``CROSS JOIN`` keeps the array the outer loop).
BLOBS_IN_ORDER = """
SELECT ids.value, blobs.codec, blobs.data, blobs.hash
FROM json_each(?) AS ids CROSS JOIN blobs ON blobs.id = ids.value
"""

#: Their addresses only (a digest recomputed from what a checkpoint points at).
ADDRESSES_IN_ORDER = """
SELECT ids.value, blobs.hash FROM json_each(?) AS ids CROSS JOIN blobs ON blobs.id = ids.value
"""

SELECT_BLOB_ID = "SELECT id FROM blobs WHERE hash = ?"

#: The ids of blobs whose addresses are in a JSON array of hex digests (each one a key probe).
SELECT_BLOB_IDS = """
SELECT blobs.id, blobs.hash FROM json_each(?) AS wanted
CROSS JOIN blobs ON blobs.hash = unhex(wanted.value)
"""

#: One blob unless its address is stored: the connection's changes() say whether it was,
#: and its last insert rowid is then the new blob's id (no RETURNING: a result row per blob
#: cost more than the two calls).
INSERT_NEW_BLOB = (
    "INSERT INTO blobs(hash, codec, data) VALUES (?, ?, ?) ON CONFLICT(hash) DO NOTHING"
)


INSERT_CHECKPOINT = (
    "INSERT INTO checkpoints(run, length, chunks, tail, state, interrupts, warnings, "
    "ids_hash, created_at, state_base, run_hash, view_hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

HAS_CHECKPOINT = "SELECT 1 FROM checkpoints WHERE run = ?"

STATE_ADDRESS = (
    "SELECT blobs.hash FROM checkpoints JOIN blobs ON blobs.id = checkpoints.state "
    "WHERE checkpoints.run = ?"
)

#: A run and every run below it.
SUBTREE = (
    "WITH RECURSIVE sub(id) AS (SELECT ? UNION ALL SELECT runs.id FROM runs "
    "JOIN sub ON runs.parent = sub.id) SELECT id FROM sub"
)

DELETE_CHECKPOINTS = "DELETE FROM checkpoints WHERE run IN (SELECT value FROM json_each(?))"

DELETE_LINEAGE_DIGESTS = (
    "DELETE FROM lineage_digests WHERE run IN (SELECT value FROM json_each(?))"
)

#: A checkpoint's own blobs' addresses, the whole state it patches (if it does), what it
#: recorded (the view digest and the run hash it was derived at), and its chunk lists.
SELECT_ADDRESSES = """
SELECT s.hash, i.hash, w.hash, a.hash, c.view_hash, c.run_hash, m.codec, m.data, c.tail
FROM checkpoints c JOIN blobs s ON s.id = c.state
LEFT JOIN blobs m ON m.id = c.chunks
LEFT JOIN blobs i ON i.id = c.interrupts
LEFT JOIN blobs w ON w.id = c.warnings
LEFT JOIN checkpoints ac ON ac.run = c.state_base
LEFT JOIN blobs a ON a.id = ac.state
WHERE c.run = ?
"""

#: The whole state a checkpoint's state is patched from.

# --- check(): whole-store reads of agui_store.engine.integrity, each in key order -----------------

#: Every run with its thread's id (NULL: the thread is missing).
EVERY_RUN = """
SELECT runs.id, runs.thread, runs.run_id, runs.parent, runs.lineage, runs.synthetic,
       threads.thread_id
FROM runs LEFT JOIN threads ON threads.id = runs.thread ORDER BY runs.id
"""

#: Every branch with its thread's id (NULL: the thread is missing).
EVERY_BRANCH = """
SELECT branches.thread, branches.name, branches.run, threads.thread_id
FROM branches LEFT JOIN threads ON threads.id = branches.thread
ORDER BY branches.thread, branches.name
"""

#: The log in append order, payloads only where a check reads them.
LOG_IN_ORDER = """
SELECT seq, run, type,
       CASE WHEN type IN ('RUN_STARTED', 'RUN_FINISHED', 'RUN_ERROR') THEN payload END
FROM events ORDER BY seq
"""

#: The batches in the order of the ranges they claim.
BATCHES_IN_ORDER = (
    "SELECT id, run, first_seq, last_seq, count, outcome FROM batches ORDER BY first_seq, id"
)

#: Events whose payload may not be a JSON object of their type: SQLite's JSON functions find
#: the suspects; the engine's codec decides.
SUSPECT_EVENTS = """
SELECT seq, run, type, payload FROM events
WHERE CASE WHEN json_valid(payload)
      THEN json_type(payload) IS NOT 'object' OR json_extract(payload, '$.type') IS NOT type
      ELSE 1 END
ORDER BY seq
"""

#: Recorded inputs that may not be JSON objects.
SUSPECT_INPUTS = """
SELECT id, input FROM runs
WHERE input IS NOT NULL AND (NOT json_valid(input) OR json_type(input) IS NOT 'object')
ORDER BY id
"""

EVERY_BLOB = "SELECT hash, codec, data FROM blobs ORDER BY hash"

BLOB_CONTENT = "SELECT codec, data FROM blobs WHERE id = ?"

CHECKPOINT_LAYOUTS = "SELECT run, length, chunks, tail, state_base FROM checkpoints ORDER BY run"

CHECKPOINT_SEGMENTS = "SELECT run, blob FROM checkpoint_segments ORDER BY run, blob"

COMPLETE_RUNS = "SELECT DISTINCT run FROM batches WHERE outcome IS NOT NULL"

EVERY_LINEAGE_DIGEST = "SELECT ids_hash, run FROM lineage_digests ORDER BY run, ids_hash"

#: Every run as its hashes cover it (agui_store.engine.log_hashes).
HASHED_RUNS = """
SELECT runs.id, runs.thread, threads.thread_id, runs.run_id, runs.parent, runs.lineage,
       runs.parent_run_id, runs.synthetic, runs.created_at, runs.input, runs.input_refs,
       runs.parent_hash, runs.input_hash, runs.start_hash
FROM runs LEFT JOIN threads ON threads.id = runs.thread ORDER BY runs.id
"""

#: Every batch in the order it was written.
HASHED_BATCHES = (
    "SELECT id, run, first_seq, last_seq, outcome, appended_at, hash FROM batches ORDER BY id"
)

#: A batch's events as its digest covers them (the ones of its run inside its range).
BATCH_EVENTS = """
SELECT events.seq, events.type, events.payload, echo_refs.refs FROM events
LEFT JOIN echo_refs ON echo_refs.seq = events.seq
WHERE events.seq BETWEEN ?1 AND ?2 AND events.run = ?3 ORDER BY events.seq
"""


# --- opening a file and migrating it ----------------------------------------------------------

APPLICATION_ID = "PRAGMA application_id"
USER_VERSION = "PRAGMA user_version"
TABLES_AND_VIEWS = "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view')"
SCHEMA_OBJECT_COUNT = "SELECT count(*) FROM sqlite_schema"
#: The file's own tables and views (SQLite's internal ones aside).
SCHEMA_STATEMENTS = (
    "SELECT name, sql FROM sqlite_schema WHERE type IN ('table', 'view') "
    "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
)
SCHEMA_TABLES = (
    "SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'view') "
    "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name"
)


def table_columns(name: str) -> str:
    """A table's or view's columns (``PRAGMA table_info``), its name quoted."""
    return "PRAGMA table_info(\"" + name.replace('"', '""') + "\")"


ENTER_WAL = "PRAGMA journal_mode=WAL"
#: What every connection sets: NORMAL in WAL mode survives a killed process (a committed
#: transaction is in the WAL), only a power cut can lose the last transactions; foreign keys
#: are checked.
SYNCHRONOUS_NORMAL = "PRAGMA synchronous=NORMAL"
FOREIGN_KEYS_ON = "PRAGMA foreign_keys=ON"


def mmap_size(size: int) -> str:
    """How much of the file reads may map into memory (a pragma takes no bound value)."""
    return f"PRAGMA mmap_size={int(size)}"


def set_application_id(application_id: int) -> str:
    """Mark the file as an agui-store file (a pragma takes no bound value)."""
    return f"PRAGMA application_id={int(application_id)}"


def set_user_version(version: int) -> str:
    """Record the file's schema version."""
    return f"PRAGMA user_version={int(version)}"


#: An append-only trigger's definition, to drop it for a migration's backfill and put it back.
#: Deleted content is overwritten with zeros, in the file and in the pages written to the WAL:
#: on from a connection's first write, so that no copy of erased data lingers in free space.
SECURE_DELETE_ON = "PRAGMA secure_delete = ON"
#: Copy the WAL into the file and empty it (``busy``, pages in the WAL, pages copied).
WAL_CHECKPOINT_TRUNCATE = "PRAGMA wal_checkpoint(TRUNCATE)"
#: Rewrite the file from its live content alone (free pages and slack space go).
VACUUM = "VACUUM"
#: Whether the planner's statistics exist (``sqlite_stat1``, and ``sqlite_stat4`` where the
#: library has it): an ``ANALYZE`` run on the file (by a tool, ``PRAGMA optimize``) keeps
#: sample keys of the indexes there, thread and run ids, owners and branch names among them.
HAS_STATISTICS = "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'"
#: Sample every index again, from the rows left.
ANALYZE = "ANALYZE"
#: Write the full-text index again as one segment of its live words. FTS5 keeps, for each
#: leaf page of a segment, the start of the page's first word in ``search_words_idx``; a
#: word's delete takes it out of the leaf but leaves that row, and ``VACUUM`` copies it as a
#: live row. Only a segment written anew holds no start of a deleted word. ``optimize``
#: leaves an index of one segment as it is, so a row of its own (rowid 0, which no index
#: row takes, and a word of no text) makes a second one first, and goes again after.
REWRITE_SEARCH_WORDS = """
INSERT INTO search_words(rowid, words) VALUES (0, '0');
INSERT INTO search_words(search_words) VALUES ('optimize');
INSERT INTO search_words(search_words, rowid, words) VALUES ('delete', 0, '0');
"""

TRIGGER_DEFINITION = "SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = ?"


def drop_trigger(name: str) -> str:
    """Drop trigger ``name`` (one of the schema's own: a name never bound from input)."""
    return 'DROP TRIGGER "' + name.replace('"', '""') + '"'


#: Version 8's backfill: the hashes computed from the log (agui_store.engine.log_hashes).
BACKFILL_RUN_HASHES = (
    "UPDATE runs SET parent_hash = ?, input_hash = ?, start_hash = ? WHERE id = ?"
)
BACKFILL_BATCH_HASH = "UPDATE batches SET hash = ? WHERE id = ?"
CHECKPOINT_COLUMNS = "PRAGMA table_info(checkpoints)"
CHECKPOINT_RUNS = "SELECT run FROM checkpoints ORDER BY run"
BACKFILL_CHECKPOINT_HASHES = "UPDATE checkpoints SET run_hash = ?, view_hash = ? WHERE run = ?"
CHECKPOINT_RUN_HASHES = "SELECT run, run_hash FROM checkpoints ORDER BY run"
REHASH_CHECKPOINT = "UPDATE checkpoints SET run_hash = ? WHERE run = ?"


# --- check(): what the file's own checks read (agui_store.backends.sqlite.checks) ----------

CHECK_INTEGRITY_CHECK = "PRAGMA integrity_check"
#: The first damaged page of the file, to name it in the error of a call that met damage.
CHECK_FIRST_DAMAGE = "PRAGMA quick_check(1)"
#: The table or index each b-tree of the file is (by its root page), to name a damaged one.
CHECK_ROOT_PAGES = "SELECT rootpage, type, name FROM sqlite_schema WHERE rootpage > 0"

CHECK_FOREIGN_KEY_CHECK = "PRAGMA foreign_key_check"

#: Every object a schema defines, with its SQL (SQLite's own indexes have none).
CHECK_SCHEMA_OBJECTS = (
    "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
)


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def check_foreign_key_list(table: str) -> str:
    """The foreign keys of ``table``, a table SQLite's foreign key check named."""
    return f"PRAGMA foreign_key_list({_quoted(table)})"


def check_row_values(table: str, columns: list[str]) -> str:
    """The values of ``columns`` in the row of ``table`` with the bound rowid."""
    return f"SELECT {', '.join(map(_quoted, columns))} FROM {_quoted(table)} WHERE rowid = ?"

# --- pydantic-ai conversations (agui_store.engine.conversations) ---

#: A conversation's record: ``(pk, conversation_id, head entry_id, scope, revision,
#: updated_at, record, hash, branch entry_ids as a JSON array by position)``.
CONVERSATION_COLUMNS = """
    c.id, c.conversation_id, head.entry_id, c.scope, c.revision, c.updated_at, c.record, c.hash,
    (SELECT json_group_array(entry_id) FROM (
        SELECT e.entry_id FROM conversation_branches b
        JOIN conversation_entries e ON e.id = b.entry
        WHERE b.conversation = c.id ORDER BY b.pos))
FROM conversations c LEFT JOIN conversation_entries head ON head.id = c.head
"""
CONVERSATION = "SELECT" + CONVERSATION_COLUMNS + "WHERE c.conversation_id = ?"
#: Records newest ``updated_at`` first (ties: the first created first), at most ``limit``:
#: a walk of ``conversations_by_updated_at``.
CONVERSATIONS = (
    "SELECT" + CONVERSATION_COLUMNS + "ORDER BY c.updated_at DESC, c.id LIMIT ?"
)
#: The same of one scope: a walk of ``conversations_by_scope``.
SCOPE_CONVERSATIONS = (
    "SELECT" + CONVERSATION_COLUMNS + "WHERE c.scope = ? "
    "ORDER BY c.updated_at DESC, c.id LIMIT ?"
)
#: The history ending at an entry, root first: ``(entry_id, parent entry_id, kind, message,
#: hash, message hash, parent's hash)`` of at most ``limit`` entries, walking ``parent`` one
#: primary-key probe a step.
CONVERSATION_HISTORY = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT id, 1 FROM conversation_entries WHERE entry_id = ?
    UNION ALL
    SELECT e.parent, chain.depth + 1 FROM chain JOIN conversation_entries e ON e.id = chain.id
    WHERE e.parent IS NOT NULL AND chain.depth < ?
)
SELECT e.entry_id, p.entry_id, e.kind, m.message, e.hash, m.hash, p.hash
FROM chain CROSS JOIN conversation_entries e ON e.id = chain.id
LEFT JOIN conversation_entries p ON p.id = e.parent
JOIN conversation_messages m ON m.id = e.message
ORDER BY chain.depth DESC
"""
#: One entry, as :data:`CONVERSATION_HISTORY` gives it.
CONVERSATION_ENTRY = """
SELECT e.entry_id, p.entry_id, e.kind, m.message, e.hash, m.hash, p.hash
FROM conversation_entries e
LEFT JOIN conversation_entries p ON p.id = e.parent
JOIN conversation_messages m ON m.id = e.message
WHERE e.entry_id = ?
"""
#: ``(pk, hash, conversation)`` of an entry.
CONVERSATION_ENTRY_KEY = (
    "SELECT id, hash, conversation FROM conversation_entries WHERE entry_id = ?"
)
CONVERSATION_MESSAGE_ID = "SELECT id FROM conversation_messages WHERE hash = ?"
INSERT_CONVERSATION_MESSAGE = (
    "INSERT INTO conversation_messages(hash, message) VALUES (?, ?) RETURNING id"
)
INSERT_CONVERSATION_ENTRY = """
INSERT INTO conversation_entries(entry_id, parent, message, kind, conversation, hash)
VALUES (?, ?, ?, ?, ?, ?) RETURNING id
"""
INSERT_CONVERSATION = """
INSERT INTO conversations(conversation_id, head, scope, revision, updated_at, record, hash)
VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id
"""
UPDATE_CONVERSATION = """
UPDATE conversations SET head = ?, scope = ?, revision = ?, updated_at = ?, record = ?, hash = ?
WHERE id = ?
"""
DELETE_CONVERSATION = "DELETE FROM conversations WHERE id = ?"
DELETE_CONVERSATION_BRANCHES = "DELETE FROM conversation_branches WHERE conversation = ?"
INSERT_CONVERSATION_BRANCH = (
    "INSERT INTO conversation_branches(conversation, pos, entry) VALUES (?, ?, ?)"
)
#: What releasing an entry asks: ``(parent, message, still reached, conversation that
#: stored it)``, where it is still reached while an entry follows it or a record's head or
#: branch names it.
CONVERSATION_ENTRY_REACHED = """
SELECT e.parent, e.message,
    EXISTS (SELECT 1 FROM conversation_entries c WHERE c.parent = e.id)
    OR EXISTS (SELECT 1 FROM conversations r WHERE r.head = e.id)
    OR EXISTS (SELECT 1 FROM conversation_branches b WHERE b.entry = e.id),
    e.conversation
FROM conversation_entries e WHERE e.id = ?
"""
DELETE_CONVERSATION_ENTRY = "DELETE FROM conversation_entries WHERE id = ?"
SET_ENTRY_CONVERSATION = "UPDATE conversation_entries SET conversation = ? WHERE id = ?"
#: ``(pk, entry_id)`` of the entries naming one of the conversations (a JSON array), by pk.
ENTRIES_STORED_BY = """
SELECT id, entry_id FROM conversation_entries
WHERE conversation IN (SELECT value FROM json_each(?)) ORDER BY id
"""
#: Deletes a message (its key given twice) no entry holds any more.
DELETE_UNUSED_CONVERSATION_MESSAGE = """
DELETE FROM conversation_messages WHERE id = ?
AND NOT EXISTS (SELECT 1 FROM conversation_entries WHERE message = ?)
"""
#: check(): ``(pk, hash, message)`` of every message, by pk.
EVERY_CONVERSATION_MESSAGE = "SELECT id, hash, message FROM conversation_messages ORDER BY id"
#: check(): ``(pk, entry_id, parent, message, kind, conversation, hash)`` of every entry, by pk.
EVERY_CONVERSATION_ENTRY = """
SELECT id, entry_id, parent, message, kind, conversation, hash FROM conversation_entries
ORDER BY id
"""
#: check(): every record as :data:`CONVERSATION` reads it, by pk.
EVERY_CONVERSATION = "SELECT" + CONVERSATION_COLUMNS + "ORDER BY c.id"
#: check(): messages no entry holds.
UNUSED_CONVERSATION_MESSAGES = """
SELECT m.id FROM conversation_messages m
WHERE NOT EXISTS (SELECT 1 FROM conversation_entries e WHERE e.message = m.id) ORDER BY m.id
"""
#: The CUSTOM events of a thread's runs: ``(run_id, payload)`` in recorded order.
THREAD_CUSTOM_EVENTS = """
SELECT runs.run_id, events.payload FROM threads
JOIN runs ON runs.thread = threads.id
JOIN events ON events.run = runs.id
WHERE threads.thread_id = ? AND events.type = 'CUSTOM' ORDER BY events.seq
"""


# --- erasure (agui_store.engine.erasure) ---------------------------------------------------

#: ``?1``: the time (ms) before which a thread's newest activity must be; ``?2``: the owner
#: (NULL: any). A thread with a run still open is in use: never cut in the middle.
IDLE_THREADS = """
SELECT t.id FROM threads t
WHERE (?2 IS NULL OR t.owner = ?2) AND t.created_at < ?1
AND NOT EXISTS (
    SELECT 1 FROM runs r JOIN batches b ON b.run = r.id
    WHERE r.thread = t.id AND (b.appended_at >= ?1 OR NOT EXISTS (
        SELECT 1 FROM batches e WHERE e.run = r.id AND e.outcome IS NOT NULL)))
ORDER BY t.id
"""
ERASED_BATCHES = (
    "SELECT first_seq, last_seq FROM batches WHERE run IN (SELECT value FROM json_each(?)) "
    "ORDER BY first_seq"
)
ERASED_EVENT_BYTES = (
    "SELECT count(*), coalesce(sum(length(CAST(payload AS BLOB))), 0) FROM event_log "
    "WHERE run IN (SELECT value FROM json_each(?))"
)
ERASED_INPUT_BYTES = (
    "SELECT coalesce(sum(coalesce(length(CAST(input AS BLOB)), 0) "
    "+ coalesce(length(CAST(input_refs AS BLOB)), 0)), 0) FROM runs "
    "WHERE id IN (SELECT value FROM json_each(?))"
)
ERASED_CHECKPOINTS = (
    "SELECT run, state, interrupts, warnings, chunks, tail FROM checkpoints "
    "WHERE run IN (SELECT value FROM json_each(?)) ORDER BY run"
)
#: ``?1``: candidate blob ids, ``?2``: the erased runs (JSON arrays). Each candidate looked up
#: in the indexes of what a checkpoint refers to (``checkpoint_segments``: its tail).
BLOBS_USED_ELSEWHERE = """
WITH erased(run) AS (SELECT value FROM json_each(?2))
SELECT c.value FROM json_each(?1) c WHERE
    EXISTS (SELECT 1 FROM checkpoints k WHERE k.state = c.value AND k.run NOT IN erased)
    OR EXISTS (SELECT 1 FROM checkpoints k WHERE k.interrupts = c.value AND k.run NOT IN erased)
    OR EXISTS (SELECT 1 FROM checkpoints k WHERE k.warnings = c.value AND k.run NOT IN erased)
    OR EXISTS (SELECT 1 FROM checkpoints k WHERE k.chunks = c.value AND k.run NOT IN erased)
    OR EXISTS (SELECT 1 FROM checkpoint_segments s WHERE s.blob = c.value AND s.run NOT IN erased)
"""
MANIFESTS_ELSEWHERE = (
    "SELECT DISTINCT chunks FROM checkpoints WHERE chunks IS NOT NULL "
    "AND run NOT IN (SELECT value FROM json_each(?))"
)
BLOB_BYTES = (
    "SELECT coalesce(sum(length(data)), 0) FROM blobs WHERE id IN (SELECT value FROM json_each(?))"
)
ERASE_ECHO_REFS = (
    "DELETE FROM echo_refs WHERE seq IN (SELECT seq FROM event_log "
    "WHERE run IN (SELECT value FROM json_each(?)))"
)
ERASE_EVENTS = "DELETE FROM event_log WHERE run IN (SELECT value FROM json_each(?))"
#: The codes of the event types no built-in name holds (``?2``: the highest built-in code)
#: that the runs ``?1`` logged: a producer's own type names, which ``event_types`` keeps once
#: for every event of the type.
ERASED_OWN_EVENT_TYPES = (
    "SELECT DISTINCT type FROM event_log WHERE run IN (SELECT value FROM json_each(?1)) "
    "AND type > ?2"
)
#: Those of the codes ``?`` that no event holds any more. An erasure's alone: each one's
#: search reads the log (no index has the type), and only an erased thread with a type of
#: its own producer's gets here.
ERASE_UNUSED_EVENT_TYPES = (
    "DELETE FROM event_types WHERE code IN (SELECT value FROM json_each(?)) "
    "AND NOT EXISTS (SELECT 1 FROM event_log WHERE event_log.type = event_types.code)"
)
ERASE_BATCHES = "DELETE FROM batches WHERE run IN (SELECT value FROM json_each(?))"
ERASE_UNDERIVED = "DELETE FROM underived WHERE run IN (SELECT value FROM json_each(?))"
ERASE_BRANCHES = "DELETE FROM branches WHERE thread IN (SELECT value FROM json_each(?))"
ERASE_RUNS = "DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))"
ERASE_THREADS = "DELETE FROM threads WHERE id IN (SELECT value FROM json_each(?))"
EVERY_BLOB_ID = "SELECT id FROM blobs"
ERASE_BLOBS = "DELETE FROM blobs WHERE id IN (SELECT value FROM json_each(?))"
NEWEST_ERASURE = "SELECT coalesce(max(id), 0) FROM erasures"
ERASURES = (
    "SELECT id, erased_at, verb, threads, runs, events, conversations, bytes, seqs, hash "
    "FROM erasures ORDER BY id"
)
INSERT_ERASURE = (
    "INSERT INTO erasures(erased_at, verb, threads, runs, events, conversations, bytes, seqs, "
    "hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
TOMBSTONED = (
    "SELECT thread_hash, erased_at FROM tombstones WHERE thread_hash IN (SELECT unhex(value) FROM "
    "json_each(?))"
)
TOMBSTONES = "SELECT thread_hash, erased_at FROM tombstones ORDER BY thread_hash"
INSERT_TOMBSTONE = "INSERT OR IGNORE INTO tombstones(thread_hash, erased_at) VALUES (?, ?)"
DELETE_TOMBSTONE = "DELETE FROM tombstones WHERE thread_hash = ?"
# --- full-text search (agui_store.engine.search) --------------------------------------------

@functools.lru_cache(maxsize=16)
def search_keys_held(keys: int) -> str:
    """The statement giving which of ``keys`` keys (``?2`` on) a thread's (``?1``) index rows
    hold, moved or pending (schema version 18), as ``(key, NULL, NULL)`` rows; each table's
    unique ``(thread, key)`` index answers. Then one row ``(NULL, next id, oldest pending
    id)``: the id the next index row takes, above every row's (hits page by id; pending ids
    are above every moved row's), and the oldest pending row's id (NULL: none is pending),
    whose span tells when enough rows are pending to move
    (:data:`agui_store.backends.sqlite.transaction.SEARCH_PENDING_ROWS`; deleted rows leave
    gaps: a bound, not a count). One statement for both: an append runs it once. A
    statement per count: the IN list is parameters, which SQLite reads faster than a JSON
    array."""
    listed = ", ".join(f"?{i + 2}" for i in range(keys))
    return (
        f"SELECT key, NULL, NULL FROM search_messages WHERE thread = ?1 AND key IN ({listed})\n"
        f"UNION ALL\n"
        f"SELECT key, NULL, NULL FROM search_pending WHERE thread = ?1 AND key IN ({listed})\n"
        f"UNION ALL\n"
        f"SELECT NULL, coalesce((SELECT max(id) FROM search_pending),"
        f" (SELECT max(id) FROM search_messages), 0) + 1, (SELECT min(id) FROM search_pending)"
    )


#: A new index row with its words (in order, separated by spaces), pending.
INSERT_SEARCH_PENDING = """
INSERT INTO search_pending(id, thread, run, key, pos, tool, blob, at, words)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
#: The pending rows into ``search_messages`` (their unique index's entries in one go) and
#: their words into the FTS5 table, then out of ``search_pending``.
FLUSH_SEARCH_WORDS = """
INSERT INTO search_messages(id, thread, run, key, pos, tool, blob, at)
SELECT id, thread, run, key, pos, tool, blob, at FROM search_pending ORDER BY id;
INSERT INTO search_words(rowid, words) SELECT id, words FROM search_pending ORDER BY id;
DELETE FROM search_pending;
"""

#: Pending candidates, newest first (every pending row is newer than every row of the FTS5
#: table): their words matched in search_pending (``{match}``: an ``instr`` per word, from
#: :func:`agui_store.backends.sqlite.transaction.pending_condition`).
SEARCH_PENDING_CANDIDATES = """
SELECT m.id, t.thread_id, m.run, r.run_id, m.pos, m.tool, m.blob, m.at,
       (SELECT b.appended_at FROM batches b WHERE b.run = m.run ORDER BY b.id DESC LIMIT 1)
FROM search_pending m
JOIN threads t ON t.id = m.thread
JOIN runs r ON r.id = m.run
WHERE m.id < :below AND ({match})
  AND (:thread IS NULL OR m.thread = :thread) AND (:scope IS NULL OR t.owner = :scope)
ORDER BY m.id DESC LIMIT :limit
"""

#: Candidates, newest first, with ids from ``?6`` up to below ``?2``: the FTS5 table drives
#: (its rowid order is the rows' ids), so a LIMIT stops the scan of a common word's list
#: early, and the bounds keep it to a thread's rows (:data:`THREAD_SEARCH_IDS`).
SEARCH_CANDIDATES = """
SELECT m.id, t.thread_id, m.run, r.run_id, m.pos, m.tool, m.blob, m.at,
       (SELECT b.appended_at FROM batches b WHERE b.run = m.run ORDER BY b.id DESC LIMIT 1)
FROM search_words w
JOIN search_messages m ON m.id = w.rowid
JOIN threads t ON t.id = m.thread
JOIN runs r ON r.id = m.run
WHERE search_words MATCH ?1 AND w.rowid < ?2 AND w.rowid >= ?6
  AND (?3 IS NULL OR m.thread = ?3) AND (?4 IS NULL OR t.owner = ?4)
ORDER BY w.rowid DESC LIMIT ?5
"""
#: The lowest and highest id of a thread's rows in the FTS5 table (NULLs: none there), read
#: from the thread's entries in the ``(thread, key)`` index (a read of the thread's size): a
#: search in a thread scans a word's list between them only, not back to the start of the
#: store (a read of the store's size) when the thread holds fewer hits than asked.
THREAD_SEARCH_IDS = "SELECT min(id), max(id) FROM search_messages WHERE thread = ?"

#: How many threads an owner holds, counted up to ``?2``.
OWNER_THREADS = "SELECT count(*) FROM (SELECT 1 FROM threads WHERE owner = ?1 LIMIT ?2)"
#: How many rows of the FTS5 table an owner's threads hold, counted up to ``?2`` (through
#: their entries in the ``(thread, key)`` index).
OWNER_SEARCH_ROWS = """
SELECT count(*) FROM (
    SELECT 1 FROM threads t JOIN search_messages m ON m.thread = t.id WHERE t.owner = ?1
    LIMIT ?2
)
"""
#: The lowest and highest id of each of an owner's threads' rows in the FTS5 table: where a
#: search in the owner's scope finds its hits (:data:`SEARCH_CANDIDATES` between them), not
#: back to the start of the store.
OWNER_SEARCH_SPANS = """
SELECT min(m.id), max(m.id) FROM threads t JOIN search_messages m ON m.thread = t.id
WHERE t.owner = ?1 GROUP BY t.id
"""

#: The index rows of a thread, of runs whose derived data is dropped (a scan: a rare path):
#: id, key, run, position, blob, position there (what their words are read back from).
#: Last, whether the row is pending (its words are in search_pending alone).
THREAD_SEARCH_ROWS = """
SELECT id, key, run, pos, blob, at, 0 FROM search_messages WHERE thread = ?1
UNION ALL
SELECT id, key, run, pos, blob, at, 1 FROM search_pending WHERE thread = ?1
"""
RUNS_SEARCH_ROWS = """
SELECT id, key, run, pos, blob, at, 0 FROM search_messages
WHERE run IN (SELECT value FROM json_each(?1))
UNION ALL
SELECT id, key, run, pos, blob, at, 1 FROM search_pending
WHERE run IN (SELECT value FROM json_each(?1))
"""
#: Every index row, pending or merged, for check(): ``port.IndexedMessage``.
EVERY_SEARCH_ROW = """
SELECT id, thread, run, key, pos, blob, at FROM search_messages
UNION ALL
SELECT id, thread, run, key, pos, blob, at FROM search_pending
ORDER BY id
"""
#: Merged rows whose words FTS5 lacks, and FTS5 rowids no merged row has (a pending row's
#: words are in its own row until it is merged): scans of both, for check().
SEARCH_ROWS_WITHOUT_WORDS = """
SELECT id FROM search_messages WHERE id NOT IN (SELECT rowid FROM search_words) ORDER BY id
"""
SEARCH_WORDS_WITHOUT_ROWS = """
SELECT rowid FROM search_words WHERE rowid NOT IN (SELECT id FROM search_messages) ORDER BY rowid
"""
#: The words each index row holds, for check(): a pending row's as it keeps them, a merged
#: row's out of the FTS5 table (``SEARCH_INSTANCES_TABLE`` made first), a term per row once.
PENDING_SEARCH_WORDS = "SELECT id, words FROM search_pending"
EVERY_SEARCH_INSTANCE = "SELECT doc, term FROM temp.search_instances"
#: A row's words out of the contentless FTS5 table: it is told them (``secure-delete`` takes
#: them out of its segments at once).
DELETE_SEARCH_WORDS = "INSERT INTO search_words(search_words, rowid, words) VALUES ('delete', ?, ?)"
DELETE_SEARCH_MESSAGES = """
DELETE FROM search_pending WHERE id IN (SELECT value FROM json_each(:ids));
DELETE FROM search_messages WHERE id IN (SELECT value FROM json_each(:ids));
"""
#: The words the FTS5 index holds for given rows, by a scan of it: for a row whose message no
#: longer holds its text (the instance table of ``fts5vocab``, made for the connection).
SEARCH_INSTANCES_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.search_instances "
    "USING fts5vocab(main, search_words, instance)"
)
#: The words the FTS5 index holds under ids that are not another thread's row (the threads'
#: own rows' and ids no row has): what ``rebuild`` takes out of it, by a scan of it.
SEARCH_INSTANCES_BUT_OTHERS = (
    "SELECT doc, term FROM temp.search_instances WHERE doc NOT IN (SELECT id FROM "
    "search_messages WHERE thread NOT IN (SELECT value FROM json_each(?1)))"
)
DELETE_THREADS_SEARCH_ROWS = """
DELETE FROM search_pending WHERE thread IN (SELECT value FROM json_each(:threads));
DELETE FROM search_messages WHERE thread IN (SELECT value FROM json_each(:threads));
"""
SEARCH_INSTANCES = (
    "SELECT doc, term FROM temp.search_instances WHERE doc IN (SELECT value FROM json_each(?))"
)
