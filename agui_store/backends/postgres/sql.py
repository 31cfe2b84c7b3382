"""The PostgreSQL backend's hot statements, as constants (psycopg placeholders).

Each read the engine repeats per call is served by an index; ``tests/test_postgres_schema.py``
asserts their plans. The walks follow ``runs.parent`` one primary-key probe per step, as the
SQLite statements in ``agui_store/backends/sqlite/schema.py`` do.

Locks (transaction-scoped advisory locks, released at commit or rollback, and by the server
when a client dies), always taken in this order, so two writers never wait on each other in
a circle:

1. The writers' lock (:data:`WRITERS_LOCK_KEY`): an append of one thread takes it *shared*
   (:data:`LOCK_WRITERS_SHARED`), so appends of different threads run side by side; every
   other write (branches, derive, compact, import, copy: anything that may touch several
   threads or the store's global facts) takes it *exclusive* (:data:`WRITER_LOCK`) and so
   runs alone, as a migration does; each write then checks the schema version
   (:data:`REFUSE_MIGRATED_SINCE`).
2. The thread's lock (:func:`lock_thread`), exclusive, by an append: the writers of one
   thread take turns, so each places its run on the head the previous one committed (READ
   COMMITTED: each statement sees what committed before it). Not ``SELECT ... FOR UPDATE``
   on the thread's row: that needs UPDATE privilege, which the application role does not
   have on an append-only table. REPEATABLE READ must not be used here: its snapshot
   predates the lock wait, so two appends to one thread would fork its lineage.
3. The event-order lock (:data:`LOCK_EVENT_ORDER`), exclusive, taken right before a batch's
   events get their ``seq`` (:data:`NEXT_SEQ_LOCKED`) and held to commit, so ``seq`` order is
   commit order and a reader polling ``after=cursor`` never skips a lower number committed
   late. Appends of different threads serialize only from that step to their commit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from psycopg import sql as psycopg_sql

from agui_store.backends.postgres.schema import LOCK_CLASS, SCHEMA_VERSION, WRITERS_LOCK_KEY

#: Second advisory-lock key of the global event order (``LOCK_CLASS`` is the first).
EVENT_ORDER_LOCK_KEY = 2
#: Second advisory-lock key every open store's connection holds shared for its session
#: (``LOCK_CLASS`` is the first): a new store's schema that a failed first write would drop
#: stays while another session has the store open (:data:`NO_STORE_OPEN`).
STORE_OPEN_LOCK_KEY = 4
#: First advisory-lock key of per-thread locks ("AGUT"); the second is
#: :func:`thread_lock_key`. Two threads whose keys collide share a lock: they take turns,
#: nothing worse.
THREAD_LOCK_CLASS = 0x41475554

LOCK_EVENT_ORDER = f"SELECT pg_advisory_xact_lock({LOCK_CLASS}, {EVENT_ORDER_LOCK_KEY})"
#: What an append of one thread takes first: other threads' appends take it too.
LOCK_WRITERS_SHARED = f"SELECT pg_advisory_xact_lock_shared({LOCK_CLASS}, {WRITERS_LOCK_KEY})"
#: What every other write takes first: it waits for the appends under way and runs alone.
WRITER_LOCK = f"SELECT pg_advisory_xact_lock({LOCK_CLASS}, {WRITERS_LOCK_KEY})"

#: The SQLSTATE of :data:`REFUSE_MIGRATED_SINCE` (of no class PostgreSQL defines).
MIGRATED_SINCE_STATE = "AGSV1"
#: Sent after a write's locks, in its ``BEGIN`` round trip: refuses the write, before its
#: first statement runs, when the store no longer records the schema version this release
#: opened it at (a newer release migrated it, or it was set back by hand), raising
#: :data:`MIGRATED_SINCE_STATE` with the version found as its detail. A migration holds the
#: writers' lock exclusive (:func:`~agui_store.backends.postgres.schema.install`), and READ
#: COMMITTED gives this statement a snapshot taken after the locks were granted: it sees any
#: migration that committed. A ``DO`` block rather than a ``SELECT`` whose answer the client
#: checks: the write's first statement, which rides in the same round trip, never runs
#: against tables of a version this release does not know, whose errors would hide the
#: refusal; about 0.07 ms of the server's CPU a write (the block is compiled each time).
REFUSE_MIGRATED_SINCE = (
    "DO $$BEGIN IF (SELECT value FROM meta WHERE key = 'schema_version') IS DISTINCT FROM "
    f"'{SCHEMA_VERSION}' THEN RAISE EXCEPTION USING ERRCODE = '{MIGRATED_SINCE_STATE}', "
    "MESSAGE = 'the store''s schema version changed since it was opened', DETAIL = "
    "coalesce((SELECT value FROM meta WHERE key = 'schema_version'), ''); END IF; END$$"
)

#: Whether no other session has the store open (taken, the lock is the caller's until its
#: transaction ends).
NO_STORE_OPEN = f"SELECT pg_try_advisory_xact_lock({LOCK_CLASS}, {STORE_OPEN_LOCK_KEY})"

#: Whether a store holds nothing a write leaves: no thread, run, blob, conversation,
#: erasure or tombstone (its meta rows are the schema's own).
STORE_HOLDS_NOTHING = "SELECT " + " AND ".join(
    f"NOT EXISTS (SELECT 1 FROM {{schema}}.{table})"
    for table in ("threads", "runs", "blobs", "conversations", "erasures", "tombstones")
)


def thread_lock_key(thread_id: str) -> int:
    """The thread lock's second key: 32 bits of a hash of the thread id, computed here so
    that the lock is taken in the ``BEGIN`` round trip (a simple query takes no parameters,
    and an integer needs no quoting)."""
    digest = hashlib.blake2b(thread_id.encode("utf-8", "surrogatepass"), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_thread(thread_id: str) -> str:
    """The statement taking a thread's lock (an append holds it to commit)."""
    return f"SELECT pg_advisory_xact_lock({THREAD_LOCK_CLASS}, {thread_lock_key(thread_id)})"


#: Whether a run of the thread up to run %(view)s holds an event after seq %(seen)s, read
#: from the newest pages, those written since, up to GREW_SINCE_READS of them (each run's
#: thread found by its key); more than that answers yes, unread. A range of the primary
#: key: ``p.run + 0`` keeps the planner off event_pages_by_run, which would walk the pages
#: of every older run.
GREW_SINCE_READS = 4096
GREW_SINCE_PAGES = f"""
(SELECT count(*) = {GREW_SINCE_READS}
        OR coalesce(bool_or(p.run + 0 <= %(view)s
                            AND (SELECT runs.thread FROM runs WHERE runs.id = p.run) = %(thread)s),
                    false)
 FROM (SELECT run FROM event_pages WHERE first_seq > %(seen)s ORDER BY first_seq
       LIMIT {GREW_SINCE_READS}) AS p)"""
#: What an append of a thread checks, under the thread's lock, of what its store remembers
#: (``PostgresTransaction.thread_facts``): the thread's newest run, whether it has
#: branches, the last ``seq`` of each remembered run of the thread (its other runs are left
#: out), whether a cached view's lineage digest and checkpoint base are still there and no
#: run of its lineage grew since it was replayed (GREW_SINCE_PAGES), and,
#: when asked (``probe``), whether runs of the thread wait to be derived. Its cost must not
#: grow with the thread: each remembered run is one probe of ``runs_pkey`` (a scalar
#: subquery, which the planner cannot turn into a walk of ``runs_by_thread``: that walk read
#: every run of the thread, 0.1 ms at 150 runs and growing), and ``underived`` is walked
#: itself (a short list: runs whose derived data waits for a writer), each of its runs one
#: probe of ``runs_pkey``, instead of probing it once per run of the thread. A store that
#: leaves derivation for later (``derive_on_append=False``) fills ``underived`` and has no
#: use for the answer: it does not ask, and the walk is not run.
THREAD_FACTS = """
SELECT (SELECT id FROM runs WHERE thread = %(thread)s ORDER BY id DESC LIMIT 1),
       EXISTS (SELECT 1 FROM branches WHERE thread = %(thread)s),
       ARRAY(SELECT ARRAY[known.id, (SELECT coalesce(max(b.last_seq), 0) FROM batches AS b
                                     WHERE b.run = known.id)]
             FROM unnest(%(runs)s::bigint[]) AS known(id)
             WHERE (SELECT runs.thread FROM runs WHERE runs.id = known.id) = %(thread)s),
       EXISTS (SELECT 1 FROM lineage_digests WHERE ids_hash = %(digest)s AND run = %(view)s)
       AND %(seen)s::bigint IS NOT NULL AND NOT """ + GREW_SINCE_PAGES + """,
       %(base)s::bigint IS NULL OR EXISTS (SELECT 1 FROM checkpoints WHERE run = %(base)s),
       %(probe)s::boolean AND EXISTS (
           SELECT 1 FROM underived
           WHERE (SELECT runs.thread FROM runs WHERE runs.id = underived.run) = %(thread)s)
"""
#: THREAD_FACTS prepared once per connection (in its first EXECUTE's round trip): it rides in an
#: append's ``BEGIN`` round trip, a simple query, which psycopg cannot prepare itself, and
#: planning its five parts every time cost more than the round trip it saves.
PREPARE_THREAD_FACTS = (
    "PREPARE agui_store_thread_facts(bigint, bigint[], bytea, bigint, bigint, boolean, bigint) AS "
    + THREAD_FACTS.replace("%(thread)s", "$1").replace("%(runs)s", "$2")
    .replace("%(digest)s", "$3").replace("%(view)s", "$4").replace("%(base)s", "$5")
    .replace("%(probe)s", "$6").replace("%(seen)s", "$7")
)


def execute_thread_facts(
    thread: int, runs: list[int], digest: bytes, view: int | None, base: int | None,
    probe: bool, seen: int | None,
) -> str:
    """The EXECUTE of THREAD_FACTS with its arguments written out: numbers and bytes only,
    so nothing needs quoting, and psycopg's binding on this side (a ClientCursor) is not
    paid for (it cost about 0.2 ms an append).

    It runs with the generic plan, always. Left to choose (``plan_cache_mode = auto``), the
    server compares the generic plan's estimate with the custom plans' and, the array's
    length unknown to the first, planned the statement anew on every append: 0.25 ms of
    0.55 for BEGIN, the locks and the check together. The generic plan is the same probes.
    The setting goes back to what it was right after, for the rest of the transaction."""

    def key(value: int | None) -> str:
        return "NULL" if value is None else str(int(value))

    keys = ",".join(str(int(pk)) for pk in runs)
    return (
        "SET LOCAL plan_cache_mode = force_generic_plan; "
        f"EXECUTE agui_store_thread_facts({int(thread)}, ARRAY[{keys}]::bigint[], "
        f"decode('{bytes(digest).hex()}', 'hex'), {key(view)}, {key(base)}, "
        f"{'true' if probe else 'false'}, {key(seen)}); "
        "SET LOCAL plan_cache_mode TO DEFAULT"
    )


#: The statements the store prepares itself, by name (an EXECUTE finds its PREPARE here
#: when psycopg deallocated it).
PREPARED = {"agui_store_thread_facts": PREPARE_THREAD_FACTS}
#: The name a query's EXECUTE runs (group 1).
EXECUTED_NAME = re.compile(r"\bEXECUTE (\w+)\(")
#: Events are stored a page to a row (``event_pages``, schema version 3): these unnest a
#: page ``p`` into its events ``e``, the event's seq being ``p.first_seq + e.n - 1``.
UNNEST_PAGE = (
    "CROSS JOIN LATERAL unnest(p.types, p.payloads) WITH ORDINALITY AS e(type, payload, n)"
)
EVENT_SEQ = "(p.first_seq + e.n - 1)"

#: The next global sequence number, read under LOCK_EVENT_ORDER: after the newest event's
#: (one backward probe of the primary key: pages never overlap, so the one that starts last
#: ends last) and after the last one an erasure took (schema version 12: one probe of its
#: index), so that none is ever handed out again.
NEXT_SEQ = (
    "SELECT greatest(coalesce((SELECT last_seq FROM event_pages ORDER BY first_seq DESC "
    "LIMIT 1), 0), coalesce((SELECT max((seqs::jsonb -> -1 ->> 1)::bigint) FROM erasures), "
    "0)) + 1"
)
#: NEXT_SEQ in one round trip with the event-order lock before it, as a statement of its own
#: (READ COMMITTED: a snapshot taken after the lock was granted, which sees every batch
#: committed before).
NEXT_SEQ_LOCKED = LOCK_EVENT_ORDER + "; " + NEXT_SEQ

#: What names the database a connection reads, whatever address reached it: the server's
#: start time (no two servers share it) and the database's oid (Transaction.database).
DATABASE = (
    "SELECT pg_postmaster_start_time()::text, oid FROM pg_database "
    "WHERE datname = current_database()"
)

#: A key for a new run's row (``runs.id`` is an identity column; its sequence is the store's).
RESERVE_RUN_KEY = "nextval(pg_get_serial_sequence('runs', 'id'))"


def run_pk_and_next_seq(conn: Any, thread_pk: int, run_id: str) -> str:
    """The duplicate-run check of a batch's first run, then NEXT_SEQ_LOCKED with a key for
    the run's row: one simple query (three statements, the last two as NEXT_SEQ_LOCKED's,
    so the number is read after the lock was granted). The run id is written out as a
    literal quoted by psycopg (a simple query takes no parameters)."""
    run = psycopg_sql.Literal(run_id).as_string(conn)
    return (
        f"SELECT id FROM runs WHERE thread = {int(thread_pk)} AND run_id = {run}; "
        f"{LOCK_EVENT_ORDER}; {NEXT_SEQ}, {RESERVE_RUN_KEY}"
    )


#: The ancestor chain of a run (parameter 1), the run itself first at depth 0. Walks ``runs``
#: by primary key only.
ANCESTORS_CTE = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT %s::bigint, 0
    UNION ALL
    SELECT step.parent, chain.depth + 1 FROM chain CROSS JOIN LATERAL (
        SELECT runs.parent FROM runs WHERE runs.id = chain.id OFFSET 0) AS step
    WHERE step.parent IS NOT NULL
)
"""

#: A run's ancestors, oldest first.
ANCESTORS = ANCESTORS_CTE + "SELECT id FROM chain ORDER BY id"

#: Every event of a run's ancestor chain with what its batch digest covers: each ancestor one
#: range probe of ``event_pages_by_run``.
CHAIN_EVENT_ROWS = (
    ANCESTORS_CTE
    + f"SELECT p.run, {EVENT_SEQ}, e.type, e.payload, echo_refs.refs "
    f"FROM chain JOIN event_pages p ON p.run = chain.id {UNNEST_PAGE} "
    f"LEFT JOIN echo_refs ON echo_refs.seq = {EVENT_SEQ} "
    "ORDER BY p.run, p.first_seq, e.n"
)

#: The merge base of runs ``a`` and ``b``: the deepest run on both ancestor chains, with its
#: depth below each. A parent's key is smaller than its child's, so stepping the side with
#: the larger key up to its parent (a primary-key probe) meets the base after as many steps
#: as the runs are from it, not from the root.
MERGE_BASE = """
WITH RECURSIVE walk(a, b, da, db) AS (
    SELECT %(a)s::bigint, %(b)s::bigint, 0, 0
    UNION ALL
    SELECT CASE WHEN walk.a > walk.b THEN step.parent ELSE walk.a END,
           CASE WHEN walk.b > walk.a THEN step.parent ELSE walk.b END,
           walk.da + (walk.a > walk.b)::int, walk.db + (walk.b > walk.a)::int
    FROM walk CROSS JOIN LATERAL (
        SELECT runs.parent FROM runs WHERE runs.id = greatest(walk.a, walk.b) OFFSET 0) AS step
    WHERE walk.a <> walk.b
)
SELECT a, da, db FROM walk WHERE a = b LIMIT 1
"""

#: One run's events after a sequence number, echoed inputs' references beside them: the
#: run's pages that end after it (a range probe of ``event_pages_by_run``).
RUN_EVENTS = f"""
SELECT e.payload, echo_refs.refs, {EVENT_SEQ}, e.type FROM event_pages p {UNNEST_PAGE}
LEFT JOIN echo_refs ON echo_refs.seq = {EVENT_SEQ}
WHERE p.run = %(run)s AND p.last_seq > %(after)s AND {EVENT_SEQ} > %(after)s
ORDER BY p.first_seq, e.n
"""

#: The global log after a cursor, in append order, at most a limit of events: from the page
#: holding the cursor on (primary-key probes and a forward range).
EVENTS_AFTER = f"""
SELECT {EVENT_SEQ}, p.run, e.type, e.payload FROM event_pages p {UNNEST_PAGE}
WHERE p.first_seq >= coalesce(
        (SELECT max(first_seq) FROM event_pages WHERE first_seq <= %(after)s), 0)
  AND {EVENT_SEQ} > %(after)s
ORDER BY p.first_seq, e.n LIMIT %(limit)s
"""

#: A run's batches in the order they landed.
RUN_BATCHES = """
SELECT id, first_seq, last_seq, count, outcome, appended_at, hash FROM batches
WHERE run = %s ORDER BY id
"""

#: A thread's runs in creation order.
THREAD_RUNS = "SELECT id, run_id, parent FROM runs WHERE thread = %s ORDER BY id"

#: The runs a run id names (in any thread).
RUNS_NAMED = "SELECT id, thread FROM runs WHERE run_id = %s"

#: The threads an owner (scope) wrote.
OWNER_THREADS = "SELECT id, thread_id FROM threads WHERE owner = %s ORDER BY id"

# --- the port's operations (agui_store.engine.port), one constant per operation -------------------
#
# Transactions (agui_store.backends.postgres.backend): readers see one snapshot; writers run READ
# COMMITTED behind the locks above, so each statement sees every batch committed before it,
# ``seq = max + 1`` is assigned in commit order, and a reader polling ``after=cursor`` sees a
# prefix of the log.

BEGIN_READING = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
BEGIN_WRITING = "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE"

#: Per-run summaries (the port's RunSummary columns): the run's row, and what its batches
#: say, aggregated in ONE probe of ``batches_by_run`` per run (:data:`RUN_FACTS`: five
#: correlated subqueries cost five). ``sum`` of bigint is numeric in PostgreSQL: cast back so
#: the engine gets ints.
RUN_COLUMNS = """
    runs.id, threads.thread_id, runs.run_id, parent_runs.run_id, runs.lineage,
    runs.parent_run_id, runs.input IS NOT NULL, runs.synthetic, runs.created_at,
    facts.events, facts.last_seq, facts.appended_at, facts.outcome,
    coalesce(facts.hash, runs.start_hash)
"""
#: The batches' facts of ``runs`` (joined after it): event count, last seq, last append,
#: the newest outcome set, the newest batch's hash.
RUN_FACTS = """
CROSS JOIN LATERAL (
    SELECT sum(b.count)::bigint AS events, max(b.last_seq) AS last_seq,
           max(b.appended_at) AS appended_at,
           (array_agg(b.outcome ORDER BY b.id DESC) FILTER (WHERE b.outcome IS NOT NULL))[1]
               AS outcome,
           (array_agg(b.hash ORDER BY b.id DESC))[1] AS hash
    FROM batches b WHERE b.run = runs.id) AS facts
"""
RUN_FROM = (
    """
FROM runs JOIN threads ON threads.id = runs.thread
LEFT JOIN runs AS parent_runs ON parent_runs.id = runs.parent
"""
    + RUN_FACTS
)
SELECT_RUN = "SELECT" + RUN_COLUMNS + RUN_FROM

#: A run's hash: its newest batch's (its chain's start while it has none).
RUN_HASH = """
SELECT coalesce(
    (SELECT b.hash FROM batches b WHERE b.run = %(run)s ORDER BY b.id DESC LIMIT 1),
    (SELECT start_hash FROM runs WHERE id = %(run)s))
"""

# threads
THREAD = "SELECT id, owner FROM threads WHERE thread_id = %s"
#: Created after the erasure its tombstone (the third value's) names, if any.
INSERT_THREAD = (
    "INSERT INTO threads(thread_id, created_at, owner) VALUES (%s, GREATEST(%s, "
    "(SELECT erased_at + 1 FROM tombstones WHERE thread_hash = %s)), %s) RETURNING id"
)
THREAD_ID = "SELECT thread_id FROM threads WHERE id = %s"
THREAD_CREATED_AT = "SELECT created_at FROM threads WHERE id = %s"
#: A thread's runs as recorded, in run order (what a copy to another store needs).
REPLICA_RUNS = """
SELECT runs.id, runs.run_id, parent.run_id, runs.lineage, runs.parent_run_id, runs.input,
       runs.input_refs, runs.synthetic, runs.created_at, runs.parent_hash, runs.start_hash
FROM runs LEFT JOIN runs AS parent ON parent.id = runs.parent
WHERE runs.thread = %s ORDER BY runs.id
"""
#: Thread ids visible to a scope (NULL: every thread), oldest first.
THREAD_IDS = (
    "SELECT thread_id FROM threads WHERE %(scope)s::text IS NULL OR owner = %(scope)s "
    "ORDER BY id"
)
#: The same, the thread written to last first (its newest batch's time; a thread with none
#: last).
THREAD_IDS_BY_ACTIVITY = """
SELECT t.thread_id FROM threads t WHERE %(scope)s::text IS NULL OR t.owner = %(scope)s
ORDER BY (SELECT max(b.appended_at) FROM runs r JOIN batches b ON b.run = r.id
          WHERE r.thread = t.id) DESC NULLS LAST, t.id DESC
"""
THREAD_PKS = (
    "SELECT id FROM threads WHERE %(scope)s::text IS NULL OR owner = %(scope)s "
    "ORDER BY id LIMIT %(limit)s"
)
OWNED_THREAD_PKS = "SELECT id FROM threads WHERE owner = %s ORDER BY id"
THREADS_WITH_OPEN_HEAD = """
SELECT threads.thread_id FROM threads JOIN runs ON runs.id =
    (SELECT max(id) FROM runs WHERE runs.thread = threads.id)
WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE b.run = runs.id AND b.outcome IS NOT NULL)
"""

# runs
RUN_PK = "SELECT id FROM runs WHERE thread = %s AND run_id = %s"
RUN_ID = "SELECT run_id FROM runs WHERE id = %s"
RUN_PARENT = "SELECT parent FROM runs WHERE id = %s"
RUN_THREAD = "SELECT thread FROM runs WHERE id = %s"
RUN_ROW = "SELECT parent, input, input_refs, lineage FROM runs WHERE id = %s"
RUN_INPUT = "SELECT input, input_refs, parent, input_hash FROM runs WHERE id = %s"
RUN_NAMES = (
    "SELECT threads.thread_id, runs.run_id FROM runs JOIN threads "
    "ON threads.id = runs.thread WHERE runs.id = %s"
)
NEWEST_RUN = "SELECT id FROM runs WHERE thread = %s ORDER BY id DESC LIMIT 1"
HAS_CHILD = "SELECT 1 FROM runs WHERE parent = %s LIMIT 1"
INSERT_RUN = """
INSERT INTO runs(thread, run_id, parent, lineage, parent_run_id, input, input_refs, synthetic,
                 created_at, parent_hash, input_hash, start_hash)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id
"""
#: INSERT_RUN with the run's key given (taken from the sequence by
#: :func:`run_pk_and_next_seq`), so that nothing needs to come back.
INSERT_RUN_KEYED = """
INSERT INTO runs(id, thread, run_id, parent, lineage, parent_run_id, input, input_refs,
                 synthetic, created_at, parent_hash, input_hash, start_hash)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""
OPEN_RUNS = (
    "SELECT id FROM runs WHERE thread = %s AND NOT EXISTS (SELECT 1 FROM "
    "batches b WHERE b.run = runs.id AND b.outcome IS NOT NULL)"
)
RUN_STATUS = (
    "SELECT outcome FROM batches WHERE run = %s AND outcome IS NOT NULL "
    "ORDER BY id DESC LIMIT 1"
)
RUN_LAST_SEQ = "SELECT max(last_seq) FROM batches WHERE run = %s"
THREADS_OF_RUN_ID = """
SELECT threads.thread_id FROM runs JOIN threads ON threads.id = runs.thread
WHERE runs.run_id = %(run_id)s AND (%(scope)s::text IS NULL OR threads.owner = %(scope)s) LIMIT 6
"""
#: Runs with an id, in a thread (NULL: any), of an owner (NULL: any); the port's
#: ``runs_named`` (RUNS_NAMED above is the plain lookup whose plan a test asserts).
RUNS_NAMED_WHERE = """
SELECT runs.id, runs.thread, threads.thread_id,
  CASE WHEN %(thread)s::bigint IS NULL THEN (
    SELECT other.thread_id FROM branches JOIN threads AS other ON other.id = branches.thread
    WHERE branches.name = %(run_id)s AND branches.thread != runs.thread LIMIT 1) END
FROM runs JOIN threads ON threads.id = runs.thread
WHERE runs.run_id = %(run_id)s AND (%(thread)s::bigint IS NULL OR runs.thread = %(thread)s)
  AND (%(scope)s::text IS NULL OR threads.owner = %(scope)s) LIMIT 5
"""
#: Runs whose id is in ``[prefix, below)`` (``below`` NULL: no upper bound). ``COLLATE "C"``
#: compares code points, as SQLite's BINARY does, whatever the database's collation.
RUNS_PREFIXED = """
SELECT runs.id, runs.thread, runs.run_id FROM runs JOIN threads ON threads.id = runs.thread
WHERE runs.run_id COLLATE "C" >= %(prefix)s
  AND (%(below)s::text IS NULL OR runs.run_id COLLATE "C" < %(below)s)
  AND (%(thread)s::bigint IS NULL OR runs.thread = %(thread)s)
  AND (%(scope)s::text IS NULL OR threads.owner = %(scope)s) LIMIT 7
"""
THREAD_RUN_PKS = "SELECT id FROM runs WHERE thread = %s ORDER BY id"
THREAD_RUN_COUNT = "SELECT count(*) FROM runs WHERE thread = %s"
THREAD_ACTIVITY = """
SELECT r.run_id, b.appended_at,
       (SELECT count(*) FROM runs o WHERE o.thread = %s
        AND NOT EXISTS (SELECT 1 FROM batches e WHERE e.run = o.id AND e.outcome IS NOT NULL))
FROM runs r JOIN batches b ON b.run = r.id WHERE r.thread = %s
ORDER BY b.appended_at DESC, b.id DESC LIMIT 1
"""
OWNER_RUN_PKS = (
    "SELECT runs.id FROM runs JOIN threads ON threads.id = runs.thread "
    "WHERE threads.owner = %s ORDER BY runs.id"
)
ALL_RUN_PKS = "SELECT id FROM runs ORDER BY id"
THREADS_OF_RUNS = "SELECT DISTINCT thread FROM runs WHERE id = ANY(%s::bigint[])"
#: A run's summary (SELECT_RUN's columns), then the branches at the run (by name) and
#: whether it is its thread's newest run: what one run's record shows, in one statement.
RUN_SUMMARY_AND_BRANCHES = (
    "SELECT"
    + RUN_COLUMNS
    + """,
    ARRAY(SELECT b.name FROM branches b WHERE b.thread = runs.thread AND b.run = runs.id
          ORDER BY b.name COLLATE "C"),
    runs.id = (SELECT n.id FROM runs n WHERE n.thread = runs.thread ORDER BY n.id DESC LIMIT 1)
"""
    + RUN_FROM
    + " WHERE runs.id = %s"
)
THREAD_RUN_SUMMARIES = SELECT_RUN + " WHERE runs.thread = %s ORDER BY runs.id"
#: The newest runs of a thread recorded before a run, newest first (``runs(limit=)``).
THREAD_RUN_PAGE = (
    SELECT_RUN + " WHERE runs.thread = %s AND runs.id < %s ORDER BY runs.id DESC LIMIT %s"
)
RUN_RECORDS = """
SELECT runs.id, threads.thread_id, runs.run_id, runs.lineage, runs.parent_run_id,
       runs.synthetic, runs.created_at, runs.input, runs.input_refs, runs.parent_hash,
       runs.input_hash, runs.start_hash,
       CASE WHEN runs.parent IS NULL THEN runs.parent_hash IS NULL
       ELSE coalesce(runs.parent_hash IN (
           SELECT p.start_hash FROM runs AS p WHERE p.id = runs.parent
           UNION ALL SELECT b.hash FROM batches AS b WHERE b.run = runs.parent), false)
       END
FROM runs JOIN threads ON threads.id = runs.thread
WHERE runs.id = ANY(%s::bigint[])
"""

# lineage
ANCESTOR_AMONG = ANCESTORS_CTE + "SELECT 1 FROM chain WHERE id = ANY(%s::bigint[]) LIMIT 1"
DERIVED_DESCENDANTS = """
WITH RECURSIVE sub(id) AS (
    SELECT id FROM runs WHERE parent = %s
    UNION ALL SELECT child.id FROM sub CROSS JOIN LATERAL (
        SELECT runs.id FROM runs WHERE runs.parent = sub.id OFFSET 0) AS child
)
SELECT id FROM sub WHERE id NOT IN (SELECT run FROM underived)
"""
#: A run and every run below it (what dropping derived data from a run reaches).
SUBTREE = """
WITH RECURSIVE sub(id) AS (
    SELECT %s::bigint
    UNION ALL SELECT child.id FROM sub CROSS JOIN LATERAL (
        SELECT runs.id FROM runs WHERE runs.parent = sub.id OFFSET 0) AS child
)
SELECT id FROM sub
"""
NEWEST_INPUT = (
    ANCESTORS_CTE
    + "SELECT runs.input FROM chain JOIN runs ON runs.id = chain.id "
    "WHERE runs.input IS NOT NULL ORDER BY chain.depth LIMIT 1"
)
#: Run summaries of a lineage, newest first, above a depth (NULL: all of it), at most a
#: limit of them (NULL: no limit). The limit bounds the recursive walk itself (PostgreSQL
#: takes no LIMIT inside a recursive term: the depth does it), so a page of a deep lineage
#: (``log(limit=)``) reads its own runs only.
LINEAGE_RUNS = (
    """
WITH RECURSIVE chain(id, depth) AS (
    SELECT %(run)s::bigint, 0
    UNION ALL
    SELECT step.parent, chain.depth + 1 FROM chain CROSS JOIN LATERAL (
        SELECT runs.parent FROM runs WHERE runs.id = chain.id OFFSET 0) AS step
    WHERE step.parent IS NOT NULL
      AND (%(limit)s::bigint IS NULL OR chain.depth + 1 < %(limit)s)
)
SELECT"""
    + RUN_COLUMNS
    + "FROM chain JOIN runs ON runs.id = chain.id "
    "JOIN threads ON threads.id = runs.thread "
    "LEFT JOIN runs AS parent_runs ON parent_runs.id = runs.parent "
    + RUN_FACTS
    + "WHERE (%(depth)s::bigint IS NULL OR chain.depth < %(depth)s) "
    "AND (%(limit)s::bigint IS NULL OR %(limit)s > 0) ORDER BY chain.depth"
)

# events
#: One page of events. The arrays go in binary (``%b``): no quoting of every payload.
INSERT_PAGE = (
    "INSERT INTO event_pages(first_seq, run, last_seq, types, payloads) "
    "VALUES (%s, %s, %s, %b, %b)"
)
INSERT_ECHO_REFS = "INSERT INTO echo_refs(seq, refs) VALUES (%s, %s)"
EVENTS_OF_RUNS = f"""
SELECT p.run, {EVENT_SEQ}, e.type, e.payload, echo_refs.refs
FROM event_pages p {UNNEST_PAGE} LEFT JOIN echo_refs ON echo_refs.seq = {EVENT_SEQ}
WHERE p.run = ANY(%s::bigint[]) ORDER BY p.run, p.first_seq, e.n
"""
CHAIN_EVENTS = CHAIN_EVENT_ROWS
TERMINAL_EVENT = (
    f"SELECT e.payload FROM event_pages p {UNNEST_PAGE} "
    "WHERE p.run = %s AND e.type IN ('RUN_FINISHED', 'RUN_ERROR') "
    "ORDER BY p.first_seq DESC, e.n DESC LIMIT 1"
)

# batches
INSERT_BATCH = (
    "INSERT INTO batches(run, first_seq, last_seq, count, outcome, appended_at, hash) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
BATCHES_OF_RUNS = """
SELECT batches.run, runs.start_hash, batches.first_seq, batches.last_seq, batches.outcome,
       batches.appended_at, batches.hash
FROM batches JOIN runs ON runs.id = batches.run
WHERE batches.run = ANY(%s::bigint[]) ORDER BY batches.run, batches.id
"""

#: A run's batches after a sequence number (run, after, run): those from the one holding the
#: event after it on, the hash of the batch before them as their chain start. Batches are
#: numbered in the order of their sequence numbers, so the one before is found by walking
#: back from the newest: the cost follows the batches returned, not the run.
BATCHES_OF_RUN_AFTER = """
WITH previous AS (
    SELECT id, hash FROM batches WHERE run = %s AND last_seq <= %s ORDER BY id DESC LIMIT 1
)
SELECT b.run,
       CASE WHEN EXISTS (SELECT 1 FROM previous) THEN (SELECT hash FROM previous)
            ELSE runs.start_hash END,
       b.first_seq, b.last_seq, b.outcome, b.appended_at, b.hash
FROM batches AS b JOIN runs ON runs.id = b.run
WHERE b.run = %s AND b.id > coalesce((SELECT id FROM previous), 0)
ORDER BY b.id
"""

# branches
BRANCH_RUN = "SELECT run FROM branches WHERE thread = %s AND name = %s"
HAS_BRANCHES = "SELECT EXISTS (SELECT 1 FROM branches WHERE thread = %s)"
SET_BRANCH = """
INSERT INTO branches(thread, name, run, updated_at) VALUES (%s, %s, %s, %s)
ON CONFLICT (thread, name) DO UPDATE SET run = excluded.run, updated_at = excluded.updated_at
"""
MOVE_BRANCHES = "UPDATE branches SET run = %s, updated_at = %s WHERE thread = %s AND run = %s"
DELETE_BRANCH = "DELETE FROM branches WHERE thread = %s AND name = %s"
#: By name in code-point order (SQLite's BINARY collation), whatever the database's.
BRANCH_TIPS = 'SELECT run, name FROM branches WHERE thread = %s ORDER BY name COLLATE "C"'
BRANCH_LIST = """
SELECT branches.name, runs.run_id, branches.updated_at FROM branches
JOIN runs ON runs.id = branches.run WHERE branches.thread = %s ORDER BY name COLLATE "C"
"""
BRANCHES_NAMED = """
SELECT branches.run, branches.thread FROM branches JOIN threads ON threads.id = branches.thread
WHERE branches.name = %(name)s AND (%(thread)s::bigint IS NULL OR branches.thread = %(thread)s)
  AND (%(scope)s::text IS NULL OR threads.owner = %(scope)s) LIMIT 2
"""

# derived data
INSERT_DIGEST = (
    "INSERT INTO lineage_digests(ids_hash, run) VALUES (%s, %s) ON CONFLICT DO NOTHING"
)
HAS_DIGEST = "SELECT 1 FROM lineage_digests WHERE ids_hash = %s AND run = %s"
#: Whether a run of a thread up to a run key holds an event after a seq (THREAD_FACTS asks
#: it too, of its view): GREW_SINCE_PAGES.
GREW_SINCE = (
    "SELECT " + GREW_SINCE_PAGES.replace("%(seen)s", "%(seq)s").replace("%(view)s", "%(run)s")
)
#: Lineage rule 3: the thread's runs whose lineage digest is one of an array of digests (a
#: primary-key probe per digest).
RUNS_WITH_DIGESTS = """
SELECT d.run, d.ids_hash FROM lineage_digests AS d JOIN runs ON runs.id = d.run
WHERE d.ids_hash = ANY(%s::bytea[]) AND runs.thread = %s
"""
DIGESTS_FROM_CHECKPOINTS = (
    "INSERT INTO lineage_digests(ids_hash, run) SELECT ids_hash, run FROM checkpoints "
    "ON CONFLICT DO NOTHING"
)
DROP_DIGESTS = "DELETE FROM lineage_digests WHERE run = ANY(%s::bigint[])"
MARK_UNDERIVED = (
    "INSERT INTO underived(run) SELECT unnest(%s::bigint[]) ON CONFLICT DO NOTHING"
)
CLEAR_UNDERIVED = "DELETE FROM underived WHERE run = %s"
UNDERIVED_THREADS = (
    "SELECT DISTINCT runs.thread FROM underived JOIN runs ON runs.id = underived.run"
)
UNDERIVED_RUNS = """
SELECT underived.run, runs.thread FROM underived JOIN runs ON runs.id = underived.run
WHERE %(thread)s::bigint IS NULL OR runs.thread = %(thread)s ORDER BY underived.run
"""
CHECKPOINT_COUNT = "SELECT count(*) FROM checkpoints"


# --- checkpoints (chunked message lists: agui_store.engine.checkpoints) ---------------------------

#: A run's ancestors up to (and including) the nearest one with a checkpoint, newest first.
NEAREST_CHECKPOINT = """
WITH RECURSIVE chain(id, depth, stop) AS (
    SELECT %(run)s::bigint, 0, EXISTS (SELECT 1 FROM checkpoints c WHERE c.run = %(run)s)
    UNION ALL
    SELECT step.parent, chain.depth + 1,
           -- a scalar probe of the primary key (an EXISTS may be hashed: a scan a step)
           (SELECT true FROM checkpoints c WHERE c.run = step.parent) IS NOT NULL
    FROM chain CROSS JOIN LATERAL (
        SELECT runs.parent FROM runs WHERE runs.id = chain.id OFFSET 0) AS step
    WHERE NOT chain.stop AND step.parent IS NOT NULL
)
SELECT id, stop FROM chain ORDER BY depth
"""
HAS_CHECKPOINT = "SELECT 1 FROM checkpoints WHERE run = %s"
#: The columns of SQLite's ``SELECT_CHECKPOINT``, in its order.
SELECT_CHECKPOINT = """
SELECT c.length, c.tail, m.data, s.codec, s.data, i.codec, i.data, w.codec, w.data,
       c.state_base, s.hash, i.hash, w.hash, c.view_hash,
       CASE WHEN c.run_hash = (SELECT b.hash FROM batches b WHERE b.run = c.run
                               ORDER BY b.id DESC LIMIT 1) THEN 1
            WHEN EXISTS (SELECT 1 FROM batches b WHERE b.run = c.run AND b.hash = c.run_hash)
            THEN 1 ELSE 0
       END,
       c.chunks, m.codec,
       -- the state base's checkpoint, and the state its patches apply to (state base,
       -- codec, data, address): read here rather than by one more statement
       base.run, base.state_base, base.codec, base.data, base.hash
FROM checkpoints c JOIN blobs s ON s.id = c.state
LEFT JOIN blobs m ON m.id = c.chunks
LEFT JOIN blobs i ON i.id = c.interrupts
LEFT JOIN blobs w ON w.id = c.warnings
-- a probe of the primary key (OFFSET 0: as a plain join it was merged with a scan of
-- every checkpoint)
LEFT JOIN LATERAL (
    SELECT bc.run, bc.state_base, bs.codec, bs.data, bs.hash
    FROM checkpoints bc JOIN blobs bs ON bs.id = bc.state WHERE bc.run = c.state_base OFFSET 0
) AS base ON true
WHERE c.run = %s
"""
SELECT_ADDRESSES = """
SELECT s.hash, i.hash, w.hash, a.hash, c.view_hash, c.run_hash, m.codec, m.data, c.tail
FROM checkpoints c JOIN blobs s ON s.id = c.state
LEFT JOIN blobs m ON m.id = c.chunks
LEFT JOIN blobs i ON i.id = c.interrupts
LEFT JOIN blobs w ON w.id = c.warnings
LEFT JOIN checkpoints ac ON ac.run = c.state_base
LEFT JOIN blobs a ON a.id = ac.state
WHERE c.run = %s
"""
STATE_ADDRESS = (
    "SELECT blobs.hash FROM checkpoints JOIN blobs ON blobs.id = checkpoints.state "
    "WHERE checkpoints.run = %s"
)
def _listed_blobs(run: str, before: int) -> str:
    """The blobs a checkpoint's list names (``run``: the SQL that gives its run), as rows of
    ``before`` NULLs then ``BLOBS_IN_ORDER``'s columns: its chunks in manifest order, then
    its tail segments in order, each a ``UNION ALL`` branch to follow a first row. The ids
    are read from the manifest and the tail only where they are what the engine writes (a
    plain array of integers; the tail's ``[id, count]`` pairs, split as text: the matches
    of a regular expression cost a quarter of the statement); anything else lists none,
    and the engine, which compares the ids with the ones it parsed, reads the blobs by its
    own. Each branch is read in list order (``UNION ALL`` appends them as written; no sort
    holds the first row back)."""
    nulls = ", ".join(["NULL"] * before)
    return rf"""
UNION ALL
SELECT {nulls}, b.id, b.codec, b.data, b.hash
FROM (
    SELECT x.id, x.n FROM checkpoints c JOIN blobs m ON m.id = c.chunks
    CROSS JOIN LATERAL (SELECT encode(m.data, 'escape') AS ids) AS t
    CROSS JOIN LATERAL unnest(string_to_array(substr(t.ids, 2, length(t.ids) - 2), ',')::bigint[])
        WITH ORDINALITY AS x(id, n)
    WHERE c.run = {run} AND m.codec = 0 AND t.ids ~ '^\[([0-9]{{1,18}}(,[0-9]{{1,18}})*)?\]$'
    ORDER BY x.n
) AS chunk CROSS JOIN LATERAL (
    SELECT * FROM blobs WHERE blobs.id = chunk.id OFFSET 0) AS b
UNION ALL
SELECT {nulls}, b.id, b.codec, b.data, b.hash
FROM (
    SELECT split_part(x.pair, ',', 1)::bigint AS id, x.n FROM checkpoints c
    CROSS JOIN LATERAL unnest(string_to_array(
        substr(c.tail, 3, greatest(length(c.tail) - 4, 0)), '],[')) WITH ORDINALITY AS x(pair, n)
    WHERE c.run = {run}
      AND c.tail ~ '^\[(\[[0-9]{{1,18}},[0-9]{{1,18}}\](,\[[0-9]{{1,18}},[0-9]{{1,18}}\])*)?\]$'
    ORDER BY x.n
) AS segment CROSS JOIN LATERAL (
    SELECT * FROM blobs WHERE blobs.id = segment.id OFFSET 0) AS b
"""


#: A checkpoint's row (``SELECT_CHECKPOINT``'s columns, then four NULLs) followed by its
#: chunks and tail segments in list order (22 NULLs, then ``BLOBS_IN_ORDER``'s columns,
#: :func:`_listed_blobs`): a checkpoint's reads in one round trip.
CHECKPOINT_WITH_BLOBS = (
    "SELECT * FROM ("
    + SELECT_CHECKPOINT.replace("%s", "%(run)s")
    + """) AS head CROSS JOIN (SELECT NULL::bigint, NULL::smallint, NULL::bytea, NULL::bytea)
    AS no_blob"""
    + _listed_blobs("%(run)s", 22)
)
#: The port's ``run_checkout``: the run ``%(run_id)s`` of the thread ``%(thread_id)s`` (of
#: the owner ``%(scope)s``; NULL: any), found once (``target``), and what restoring it
#: reads, in one statement: a first row of its summary (``RUN_COLUMNS``), the branches at
#: it and whether it is its thread's newest run (as ``RUN_SUMMARY_AND_BRANCHES``), its
#: checkpoint's row (``SELECT_CHECKPOINT``'s columns) and four NULLs; then its chunks and
#: tail segments as ``CHECKPOINT_WITH_BLOBS`` lists them (38 NULLs first). No row: no such
#: run, or no checkpoint of its own.
RUN_CHECKOUT = (
    """
WITH target AS MATERIALIZED (
    SELECT runs.id FROM threads JOIN runs ON runs.thread = threads.id
    WHERE threads.thread_id = %(thread_id)s AND runs.run_id = %(run_id)s
      AND (%(scope)s::text IS NULL OR threads.owner = %(scope)s)
)
SELECT"""
    + RUN_COLUMNS
    + """,
    ARRAY(SELECT b.name FROM branches b WHERE b.thread = runs.thread AND b.run = runs.id
          ORDER BY b.name COLLATE "C"),
    runs.id = (SELECT n.id FROM runs n WHERE n.thread = runs.thread ORDER BY n.id DESC LIMIT 1),
    head.*, NULL::bigint, NULL::smallint, NULL::bytea, NULL::bytea
FROM target JOIN runs ON runs.id = target.id JOIN threads ON threads.id = runs.thread
LEFT JOIN runs AS parent_runs ON parent_runs.id = runs.parent"""
    + RUN_FACTS
    + "CROSS JOIN LATERAL ("
    + SELECT_CHECKPOINT.replace("%s", "runs.id")
    + " OFFSET 0) AS head"
    + _listed_blobs("(SELECT id FROM target)", 38)
)
#: Blobs by id in the order of an array of ids (each one a primary-key probe).
BLOBS_IN_ORDER = """
SELECT b.id, b.codec, b.data, b.hash
FROM unnest(%s::bigint[]) WITH ORDINALITY AS ids(id, n) JOIN blobs b ON b.id = ids.id
ORDER BY ids.n
"""
ADDRESSES_IN_ORDER = """
SELECT b.id, b.hash
FROM unnest(%s::bigint[]) WITH ORDINALITY AS ids(id, n) JOIN blobs b ON b.id = ids.id
ORDER BY ids.n
"""
SELECT_BLOB_ID = "SELECT id FROM blobs WHERE hash = %s"
SELECT_BLOB_IDS = "SELECT id, hash FROM blobs WHERE hash = ANY(%s::bytea[])"
#: Store blobs unless their address is there. The ids of those stored come back, and of those
#: found there: stored by a transaction committed before the statement began (its snapshot,
#: which does not hold the rows it inserts, so no blob comes twice). A checkpoint whose state
#: or chunks were stored before then costs no second look-up. One stored by a transaction
#: that commits while this one runs is in neither part: the engine looks up what is missing
#: (``checkpoints.store_blobs``).
INSERT_OR_FIND_BLOBS = """
WITH stored AS (
    INSERT INTO blobs(hash, codec, data)
    SELECT * FROM unnest(%s::bytea[], %s::smallint[], %s::bytea[])
    ON CONFLICT (hash) DO NOTHING RETURNING id, hash)
SELECT id, hash FROM stored
UNION ALL SELECT id, hash FROM blobs WHERE hash = ANY(%s::bytea[])
"""
INSERT_CHECKPOINT = """
INSERT INTO checkpoints(run, length, chunks, tail, state, interrupts, warnings, ids_hash,
                        created_at, state_base, run_hash, view_hash)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""
DROP_CHECKPOINTS = "DELETE FROM checkpoints WHERE run = ANY(%s::bigint[])"

# --- check(): whole-store reads of agui_store.engine.integrity, each in key order
# ------------------ The long ones are read through a server-side cursor
# (PostgresTransaction._stream): the log is never held whole, on the server's side or the client's.

#: Each check runs inside a savepoint: one that fails leaves the transaction usable.
SAVEPOINT_CHECK = "SAVEPOINT agui_store_check"
ROLLBACK_TO_CHECK = "ROLLBACK TO SAVEPOINT agui_store_check"
RELEASE_CHECK = "RELEASE SAVEPOINT agui_store_check"

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

#: The log in append order, payloads only where a check reads them: page by page in the
#: primary key's order, which is seq order as long as no two pages overlap (the ``pages``
#: check of :mod:`agui_store.backends.postgres.checks` reports pages that do).
LOG_IN_ORDER = f"""
SELECT {EVENT_SEQ}, p.run, e.type,
       CASE WHEN e.type IN ('RUN_STARTED', 'RUN_FINISHED', 'RUN_ERROR') THEN e.payload END
FROM event_pages p {UNNEST_PAGE} ORDER BY p.first_seq, e.n
"""

#: The batches in the order of the ranges they claim.
BATCHES_IN_ORDER = (
    "SELECT id, run, first_seq, last_seq, count, outcome FROM batches ORDER BY first_seq, id"
)

#: Events whose payload may not be a JSON object of their type. PostgreSQL 15 cannot test
#: text for JSON without raising (``IS JSON`` came in 16), so every event is a suspect and
#: the engine's codec decides.
SUSPECT_EVENTS = (
    f"SELECT {EVENT_SEQ}, p.run, e.type, e.payload FROM event_pages p {UNNEST_PAGE} "
    "ORDER BY p.first_seq, e.n"
)

#: Recorded inputs that may not be JSON objects: all of them, as for events.
SUSPECT_INPUTS = "SELECT id, input FROM runs WHERE input IS NOT NULL ORDER BY id"

EVERY_BLOB = "SELECT hash, codec, data FROM blobs ORDER BY hash"

BLOB_CONTENT = "SELECT codec, data FROM blobs WHERE id = %s"

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

#: A batch's events as its digest covers them (the ones of its run inside its range): the
#: run's pages that reach into the range (a range probe of ``event_pages_by_run``).
BATCH_EVENTS = f"""
SELECT {EVENT_SEQ}, e.type, e.payload, echo_refs.refs FROM event_pages p {UNNEST_PAGE}
LEFT JOIN echo_refs ON echo_refs.seq = {EVENT_SEQ}
WHERE p.run = %(run)s AND p.first_seq <= %(last)s AND p.last_seq >= %(first)s
  AND {EVENT_SEQ} BETWEEN %(first)s AND %(last)s
ORDER BY {EVENT_SEQ}
"""


# --- check(): the server's catalogue, read by agui_store.backends.postgres.checks ---------

#: Every column of the schema's tables, in table order.
CHECK_COLUMNS = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), coll.collname
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_collation coll ON coll.oid = a.attcollation
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND a.attnum > 0
  AND NOT a.attisdropped
ORDER BY c.relname, a.attnum
"""

#: Every constraint: ``(table, name, kind, validated, first column, referenced table)``.
CHECK_CONSTRAINTS = """
SELECT c.relname, con.conname, con.contype, con.convalidated,
       (SELECT attname FROM pg_attribute WHERE attrelid = con.conrelid
        AND attnum = con.conkey[1]),
       rc.relname
FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class rc ON rc.oid = con.confrelid
WHERE n.nspname = %(schema)s
ORDER BY c.relname, con.conname
"""

CHECK_INDEXES = """
SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %(schema)s
"""

#: Every trigger, the foreign keys' own (internal) ones too.
CHECK_TRIGGERS = """
SELECT c.relname, t.tgname, t.tgenabled, t.tgisinternal, pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s
ORDER BY c.relname, t.tgname
"""

#: Every view with its columns in order.
CHECK_VIEWS = """
SELECT c.relname, array_agg(a.attname::text ORDER BY a.attnum)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = %(schema)s AND c.relkind = 'v'
GROUP BY c.relname
"""

#: Every page of events, in seq order, with the shape of its arrays and the batch (of its run)
#: its first event is in: what the ``pages`` check judges (the arrays stay on the server).
CHECK_PAGE_SHAPES = """
SELECT p.first_seq, p.run, p.last_seq, cardinality(p.types), cardinality(p.payloads),
       coalesce(array_ndims(p.types) = 1 AND array_lower(p.types, 1) = 1
                AND array_ndims(p.payloads) = 1 AND array_lower(p.payloads, 1) = 1, false),
       EXISTS (SELECT 1 FROM unnest(p.types) AS t(v) WHERE v IS NULL)
         OR EXISTS (SELECT 1 FROM unnest(p.payloads) AS t(v) WHERE v IS NULL),
       b.id, b.first_seq, b.last_seq
FROM {schema}.event_pages p
LEFT JOIN LATERAL (
    SELECT id, first_seq, last_seq FROM {schema}.batches
    WHERE run = p.run AND first_seq <= p.first_seq AND p.first_seq <= last_seq
    ORDER BY id LIMIT 1
) b ON true
ORDER BY p.first_seq
"""

CHECK_FUNCTIONS = """
SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %(schema)s
"""

CHECK_META = "SELECT key, value FROM {schema}.meta"

#: Rows naming a missing row through one reference: ``(primary key or NULL, value)``.
CHECK_ORPHANS = """
SELECT {key}, t.{column} FROM {schema}.{table} t
WHERE t.{column} IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {schema}.{target} r WHERE r.{target_column} = t.{column})
ORDER BY 1
"""

# --- pydantic-ai conversations (agui_store.engine.conversations) ---
# Named and ordered as SQLite's (agui_store.sqlite.sql), with the same parameters.

#: A conversation's record: ``(pk, conversation_id, head entry_id, scope, revision,
#: updated_at, record, hash, branch entry_ids as a JSON array by position)``.
CONVERSATION_COLUMNS = """
    c.id, c.conversation_id, head.entry_id, c.scope, c.revision, c.updated_at, c.record, c.hash,
    (SELECT coalesce(json_agg(e.entry_id ORDER BY b.pos), '[]')::text
     FROM conversation_branches b JOIN conversation_entries e ON e.id = b.entry
     WHERE b.conversation = c.id)
FROM conversations c LEFT JOIN conversation_entries head ON head.id = c.head
"""
CONVERSATION = "SELECT" + CONVERSATION_COLUMNS + "WHERE c.conversation_id = %s"
#: Records newest ``updated_at`` first (ties: the first created first), at most ``limit``:
#: a walk of ``conversations_by_updated_at``.
CONVERSATIONS = (
    "SELECT" + CONVERSATION_COLUMNS + "ORDER BY c.updated_at DESC, c.id LIMIT %s"
)
#: The same of one scope: a walk of ``conversations_by_scope``.
SCOPE_CONVERSATIONS = (
    "SELECT" + CONVERSATION_COLUMNS + "WHERE c.scope = %s "
    "ORDER BY c.updated_at DESC, c.id LIMIT %s"
)
#: The history ending at an entry, root first: ``(entry_id, parent entry_id, kind, message,
#: hash, message hash, parent's hash)`` of at most ``limit`` entries, walking ``parent`` one
#: primary-key probe a step.
CONVERSATION_HISTORY = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT id, 1 FROM conversation_entries WHERE entry_id = %s
    UNION ALL
    SELECT e.parent, chain.depth + 1 FROM chain JOIN conversation_entries e ON e.id = chain.id
    WHERE e.parent IS NOT NULL AND chain.depth < %s
)
SELECT e.entry_id, p.entry_id, e.kind, m.message, e.hash, m.hash, p.hash
FROM chain JOIN conversation_entries e ON e.id = chain.id
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
WHERE e.entry_id = %s
"""
#: ``(pk, hash, conversation)`` of an entry.
CONVERSATION_ENTRY_KEY = (
    "SELECT id, hash, conversation FROM conversation_entries WHERE entry_id = %s"
)
CONVERSATION_MESSAGE_ID = "SELECT id FROM conversation_messages WHERE hash = %s"
INSERT_CONVERSATION_MESSAGE = (
    "INSERT INTO conversation_messages(hash, message) VALUES (%s, %s) RETURNING id"
)
INSERT_CONVERSATION_ENTRY = """
INSERT INTO conversation_entries(entry_id, parent, message, kind, conversation, hash)
VALUES (%s, %s, %s, %s, %s, %s) RETURNING id
"""
INSERT_CONVERSATION = """
INSERT INTO conversations(conversation_id, head, scope, revision, updated_at, record, hash)
VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id
"""
UPDATE_CONVERSATION = """
UPDATE conversations SET head = %s, scope = %s, revision = %s, updated_at = %s, record = %s,
    hash = %s
WHERE id = %s
"""
DELETE_CONVERSATION = "DELETE FROM conversations WHERE id = %s"
DELETE_CONVERSATION_BRANCHES = "DELETE FROM conversation_branches WHERE conversation = %s"
INSERT_CONVERSATION_BRANCH = (
    "INSERT INTO conversation_branches(conversation, pos, entry) VALUES (%s, %s, %s)"
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
FROM conversation_entries e WHERE e.id = %s
"""
DELETE_CONVERSATION_ENTRY = "DELETE FROM conversation_entries WHERE id = %s"
SET_ENTRY_CONVERSATION = "UPDATE conversation_entries SET conversation = %s WHERE id = %s"
#: ``(pk, entry_id)`` of the entries naming one of the conversations (a text array), by pk.
ENTRIES_STORED_BY = """
SELECT id, entry_id FROM conversation_entries WHERE conversation = ANY(%s) ORDER BY id
"""
#: Deletes a message (its key given twice) no entry holds any more.
DELETE_UNUSED_CONVERSATION_MESSAGE = """
DELETE FROM conversation_messages WHERE id = %s
AND NOT EXISTS (SELECT 1 FROM conversation_entries WHERE message = %s)
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
WHERE threads.thread_id = %s AND events.type = 'CUSTOM' ORDER BY events.seq
"""


# --- erasure (agui_store.engine.erasure) ---------------------------------------------------

#: Threads of an owner (NULL: any) created before ``before`` (ms) with no batch since and no
#: run left open: a thread in use is never cut in the middle.
IDLE_THREADS = """
SELECT t.id FROM threads t
WHERE (%(scope)s::text IS NULL OR t.owner = %(scope)s) AND t.created_at < %(before)s
AND NOT EXISTS (
    SELECT 1 FROM runs r JOIN batches b ON b.run = r.id
    WHERE r.thread = t.id AND (b.appended_at >= %(before)s OR NOT EXISTS (
        SELECT 1 FROM batches e WHERE e.run = r.id AND e.outcome IS NOT NULL)))
ORDER BY t.id
"""
ERASED_BATCHES = (
    "SELECT first_seq, last_seq FROM batches WHERE run = ANY(%s::bigint[]) ORDER BY first_seq"
)
ERASED_EVENT_BYTES = """
SELECT coalesce(sum(last_seq - first_seq + 1), 0)::bigint,
       coalesce(sum((SELECT sum(octet_length(p)) FROM unnest(payloads) AS p)), 0)::bigint
FROM event_pages WHERE run = ANY(%s::bigint[])
"""
ERASED_INPUT_BYTES = (
    "SELECT coalesce(sum(coalesce(octet_length(input), 0) "
    "+ coalesce(octet_length(input_refs), 0)), 0)::bigint FROM runs WHERE id = ANY(%s::bigint[])"
)
ERASED_CHECKPOINTS = (
    "SELECT run, state, interrupts, warnings, chunks, tail FROM checkpoints "
    "WHERE run = ANY(%s::bigint[]) ORDER BY run"
)
#: Each candidate looked up in the indexes of what a checkpoint refers to
#: (``checkpoint_segments``: its tail), one candidate at a time (LATERAL ... LIMIT 1): as
#: EXISTS clauses the planner hashes each whole table once, which costs the store's size.
BLOBS_USED_ELSEWHERE = """
SELECT c.id FROM unnest(%(blobs)s::bigint[]) AS c(id)
CROSS JOIN LATERAL (
    SELECT 1 FROM (
        SELECT run FROM checkpoints WHERE state = c.id
        UNION ALL SELECT run FROM checkpoints WHERE interrupts = c.id
        UNION ALL SELECT run FROM checkpoints WHERE warnings = c.id
        UNION ALL SELECT run FROM checkpoints WHERE chunks = c.id
        UNION ALL SELECT run FROM checkpoint_segments WHERE blob = c.id
    ) refs WHERE NOT (refs.run = ANY(%(runs)s::bigint[])) LIMIT 1
) used
"""
MANIFESTS_ELSEWHERE = (
    "SELECT DISTINCT chunks FROM checkpoints WHERE chunks IS NOT NULL "
    "AND NOT (run = ANY(%s::bigint[]))"
)
BLOB_BYTES = (
    "SELECT coalesce(sum(octet_length(data)), 0)::bigint FROM blobs WHERE id = ANY(%s::bigint[])"
)
#: For the rest of an erasure's transaction (see ``PostgresTransaction.erasing``).
PREFER_INDEXES = "SET LOCAL enable_seqscan = off"
ERASE_UNDERIVED = "DELETE FROM underived WHERE run = ANY(%s::bigint[])"
EVERY_BLOB_ID = "SELECT id FROM blobs"
ERASE_BLOBS = "DELETE FROM blobs WHERE id = ANY(%s::bigint[])"
ERASE_BRANCHES = "DELETE FROM branches WHERE thread = ANY(%s::bigint[])"
#: The log's rows, deleted by the schema's ``erase_log`` as the tables' owner.
ERASE_LOG = "SELECT erase_log(%s::bigint[], %s::bigint[])"
NEWEST_ERASURE = "SELECT coalesce(max(id), 0) FROM erasures"
#: An erasure's notice to every connection of the database (delivered at its commit), and
#: a connection's listening for it.
ERASED = "NOTIFY agui_store_erased"
LISTEN_ERASED = "LISTEN agui_store_erased"
ERASURES = (
    "SELECT id, erased_at, verb, threads, runs, events, conversations, bytes, seqs, hash "
    "FROM erasures ORDER BY id"
)
INSERT_ERASURE = (
    "INSERT INTO erasures(erased_at, verb, threads, runs, events, conversations, bytes, seqs, "
    "hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
TOMBSTONED = (
    "SELECT thread_hash, erased_at FROM tombstones WHERE thread_hash = ANY(%s::bytea[])"
)
TOMBSTONES = "SELECT thread_hash, erased_at FROM tombstones ORDER BY thread_hash"
INSERT_TOMBSTONE = (
    "INSERT INTO tombstones(thread_hash, erased_at) VALUES (%s, %s) ON CONFLICT DO NOTHING"
)
DELETE_TOMBSTONE = "DELETE FROM tombstones WHERE thread_hash = %s"
#: The client sessions of this database in a transaction that holds a snapshot or a
#: transaction id, counted as a purge starts: a row version such a transaction may still
#: read survives the purge's VACUUM, even when the transaction ends while VACUUM runs.
OLDER_SNAPSHOTS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
    "AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)"
)

#: Whether the connection's role owns every one of the store's tables (only an owner may
#: vacuum them).
OWNS_TABLES = (
    "SELECT coalesce(bool_and(pg_has_role(c.relowner, 'USAGE')), false) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
)


#: Which of the store's tables (parameter 2, in schema parameter 1) the planner holds
#: statistics of: ANALYZE's samples of their values, readable to any role that reads them.
TABLES_WITH_STATISTICS = (
    "SELECT DISTINCT tablename FROM pg_stats WHERE schemaname = %s AND tablename = ANY(%s) "
    "ORDER BY tablename"
)

#: Whether the connection's role may vacuum ``pg_statistic``: a superuser, or the
#: database's owner (a catalog is not the tables' owner's).
MAY_VACUUM_STATISTICS = (
    "SELECT r.rolsuper OR pg_has_role(d.datdba, 'USAGE') FROM pg_roles r, pg_database d "
    "WHERE r.rolname = current_user AND d.datname = current_database()"
)


def empty_tables(tables: Sequence[str]) -> str:
    """Which of the store's tables ``tables`` hold no row: ``ANALYZE`` of an empty table keeps
    the statistics it had (PostgreSQL writes them only from a sample of rows)."""
    return " UNION ALL ".join(
        f"SELECT '{table}' WHERE NOT EXISTS (SELECT FROM {table})" for table in tables
    )


#: The columns of the store's tables (parameter 2, in schema parameter 1) the planner holds
#: statistics of, with their type as written (``format_type``), their collation where it is
#: not their type's, and whether a view reads them (the ``events`` view reads
#: ``event_pages``'): ``ALTER COLUMN ... TYPE`` of a column to its own type drops its
#: statistics, which no other statement but a superuser's may, and a view's column refuses it.
COLUMNS_WITH_STATISTICS = """
SELECT DISTINCT s.tablename, s.attname, format_type(a.atttypid, a.atttypmod),
       CASE WHEN a.attcollation <> t.typcollation
            THEN quote_ident(cn.nspname) || '.' || quote_ident(co.collname) END,
       EXISTS (SELECT FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
               WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = a.attrelid
                 AND d.refobjsubid = a.attnum AND r.ev_class <> a.attrelid)
FROM pg_stats s
JOIN pg_namespace n ON n.nspname = s.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = s.attname
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
WHERE s.schemaname = %s AND s.tablename = ANY(%s)
ORDER BY 1, 2
"""


#: How long a purge's ``ALTER TABLE`` waits for a table's lock, in its own transaction.
SHORT_LOCK_WAIT = "SET LOCAL lock_timeout = '200ms'"


def drop_statistics(table: str, columns: Sequence[tuple[str, str, str | None]]) -> str:
    """``ALTER TABLE`` of the store's table ``table`` that gives each of ``columns`` (name,
    type as written, collation or None) its own type again: no row is written (the type
    stays binary the same) and PostgreSQL drops the columns' statistics."""
    return f"ALTER TABLE {table} " + ", ".join(
        f"ALTER COLUMN {_ident(name)} TYPE {kind}"
        + ("" if collation is None else f" COLLATE {collation}")
        for name, kind, collation in columns
    )


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def analyze(tables: Sequence[str]) -> str:
    """``ANALYZE`` of the store's tables ``tables``: their statistics sampled again."""
    return "ANALYZE " + ", ".join(tables)


def vacuum_statistics(*, full: bool) -> str:
    """``VACUUM`` of ``pg_statistic``, where the statistics ``ANALYZE`` replaced stay as
    dead rows: ``full`` writes it again into new files."""
    return f"VACUUM {'(FULL) ' if full else ''}pg_catalog.pg_statistic"


def vacuum(tables: tuple[str, ...], *, index_cleanup: bool) -> str:
    """``VACUUM`` of the store's tables ``tables`` (the schema's own names), their indexes
    cleaned (``INDEX_CLEANUP ON``: even when few pages hold dead rows) or not (``OFF``)."""
    return f"VACUUM (INDEX_CLEANUP {'ON' if index_cleanup else 'OFF'}) " + ", ".join(tables)


def vacuum_full(tables: tuple[str, ...]) -> str:
    """``VACUUM FULL`` of the store's tables ``tables``: each written again, with its TOAST
    table and its indexes, into new files (the old ones are removed)."""
    return "VACUUM (FULL) " + ", ".join(tables)

# --- full-text search (agui_store.engine.search) --------------------------------------------

#: A run's index rows, the message texts the thread's index does not hold yet, in one
#: statement: the words come joined by spaces (a word holds none) and are taken as lexemes.
INSERT_SEARCH_MESSAGES = """
INSERT INTO search_messages(thread, run, key, pos, tool, blob, at, words)
SELECT %s, %s, k, p, t, b, a, array_to_tsvector(string_to_array(w, ' '))
FROM unnest(%s::bigint[], %s::integer[], %s::text[], %s::bigint[], %s::integer[], %s::text[])
     WITH ORDINALITY AS u(k, p, t, b, a, w, n)
ORDER BY n
ON CONFLICT (thread, key) DO NOTHING
"""

#: How many rows hold a query's words (as :data:`SEARCH_CANDIDATES` filters them), counted
#: through the GIN index up to :data:`SEARCH_MANY`: what chooses how the candidates are read.
#: The planner cannot tell a rare word from a common one by its statistics (a word absent
#: from them is taken as fairly common), and walking the key backwards for a rare word reads
#: every row.
SEARCH_MANY = 1000
_SEARCH_WHERE = """
WHERE words @@ %(query)s::tsquery AND id < %(before)s
  AND (%(thread)s::bigint IS NULL OR thread = %(thread)s::bigint)
  AND (%(scope)s::text IS NULL OR thread IN (SELECT id FROM threads WHERE owner = %(scope)s::text))
"""
SEARCH_PROBE = f"""
SELECT count(*) FROM (SELECT 1 FROM search_messages {_SEARCH_WHERE} LIMIT {SEARCH_MANY}) AS found
"""

#: Candidates, newest first, for a query many rows hold: along the key backwards, stopping
#: at the limit; their names joined to those rows alone.
SEARCH_CANDIDATES = f"""
SELECT m.id, t.thread_id, m.run, r.run_id, m.pos, m.tool, m.blob, m.at,
       (SELECT b.appended_at FROM batches b WHERE b.run = m.run ORDER BY b.id DESC LIMIT 1)
FROM (
    SELECT id, thread, run, pos, tool, blob, at FROM search_messages {_SEARCH_WHERE}
    ORDER BY id DESC LIMIT %(limit)s
) AS m
JOIN threads t ON t.id = m.thread
JOIN runs r ON r.id = m.run
ORDER BY m.id DESC
"""

#: The same, for a query fewer than :data:`SEARCH_MANY` rows hold: every one of them through
#: the GIN index, then the newest (``+ 0`` keeps the planner off the key's order).
SEARCH_FEW_CANDIDATES = SEARCH_CANDIDATES.replace(
    "ORDER BY id DESC LIMIT", "ORDER BY id + 0 DESC LIMIT"
)

#: How many index rows an owner's threads hold, counted through the ``(thread, key)`` index
#: up to ``few``: an owner with fewer is searched from its own rows
#: (:data:`SEARCH_OWNER_CANDIDATES`).
SEARCH_OWNER_ROWS = """
SELECT count(*) FROM (
    SELECT 1 FROM search_messages
    WHERE thread = ANY(ARRAY(SELECT id FROM threads WHERE owner = %(scope)s::text))
    LIMIT %(few)s
) AS found
"""

#: Candidates, newest first, of an owner with few index rows: those rows first (through the
#: ``(thread, key)`` index), then their words checked. Through the GIN index, as the
#: planner reads the other statements for a scope, a common word read every row that holds
#: it, of every owner, to keep the few of this one's (48-117 ms for an owner of 2 threads
#: of 1,000, against 8-13 ms for every owner's).
SEARCH_OWNER_CANDIDATES = """
WITH owned AS MATERIALIZED (
    SELECT id, thread, run, pos, tool, blob, at, words FROM search_messages
    WHERE thread = ANY(ARRAY(SELECT id FROM threads WHERE owner = %(scope)s::text))
      AND id < %(before)s
)
SELECT m.id, t.thread_id, m.run, r.run_id, m.pos, m.tool, m.blob, m.at,
       (SELECT b.appended_at FROM batches b WHERE b.run = m.run ORDER BY b.id DESC LIMIT 1)
FROM (
    SELECT id, thread, run, pos, tool, blob, at FROM owned WHERE words @@ %(query)s::tsquery
    ORDER BY id DESC LIMIT %(limit)s
) AS m
JOIN threads t ON t.id = m.thread
JOIN runs r ON r.id = m.run
ORDER BY m.id DESC
"""

#: Every index row, for check(): ``port.IndexedMessage``.
EVERY_SEARCH_ROW = "SELECT id, thread, run, key, pos, blob, at FROM search_messages ORDER BY id"

#: Each index row's lexemes, for check().
SEARCH_WORDS_HELD = (
    "SELECT m.id, w FROM search_messages m, unnest(tsvector_to_array(m.words)) AS w"
)

#: A thread's index rows (one table: the words are a column).
DELETE_THREAD_SEARCH = "DELETE FROM search_messages WHERE thread = %s"

#: The index rows of threads ``rebuild`` derives again.
DELETE_THREADS_SEARCH = "DELETE FROM search_messages WHERE thread = ANY(%s)"

#: The index rows of runs whose derived data is dropped.
DROP_RUNS_SEARCH = "DELETE FROM search_messages WHERE run = ANY(%s)"


# --- migrations computed in Python (agui_store.backends.postgres.migrations) ------------------

CHECKPOINT_RUN_HASHES = "SELECT run, run_hash FROM checkpoints ORDER BY run"
REHASH_RUN = "UPDATE runs SET parent_hash = %s, input_hash = %s, start_hash = %s WHERE id = %s"
REHASH_BATCH = "UPDATE batches SET hash = %s WHERE id = %s"
REHASH_CHECKPOINT = "UPDATE checkpoints SET run_hash = %s WHERE run = %s"
LIFT_RUN_GUARDS = (
    "ALTER TABLE runs DISABLE TRIGGER runs_are_append_only; "
    "ALTER TABLE batches DISABLE TRIGGER batches_are_append_only"
)
RESTORE_RUN_GUARDS = (
    "ALTER TABLE runs ENABLE TRIGGER runs_are_append_only; "
    "ALTER TABLE batches ENABLE TRIGGER batches_are_append_only"
)
