"""The PostgreSQL backend's hot statements, as constants (psycopg placeholders).

Each read the engine repeats per call is served by an index; ``tests/test_postgres_schema.py``
asserts their plans. The walks follow ``runs.parent`` one primary-key probe per step, as the
SQLite statements in ``agui_store/schema.py`` do.

Locks (transaction-scoped advisory locks, released at commit or rollback, and by the server
when a client dies):

- :data:`LOCK_THREAD` serializes the writers of one thread, so each places its run on the head
  the previous one committed (READ COMMITTED: each statement sees what committed before it).
  Not ``SELECT ... FOR UPDATE`` on the thread's row: that needs UPDATE privilege, which the
  application role does not have on an append-only table. REPEATABLE READ must not be used
  here: its snapshot predates the lock wait, and it forked lineages (research/postgres.md).
- :data:`LOCK_EVENT_ORDER` is taken right before a batch's events get their ``seq`` and held to
  commit, so ``seq`` order is commit order and a reader polling ``after=cursor`` never skips a
  lower number committed late. Writers of different threads share it only for that last step.
"""

from __future__ import annotations

from agui_store.postgres.schema import LOCK_CLASS

#: Second advisory-lock key of the global event order (``LOCK_CLASS`` is the first).
EVENT_ORDER_LOCK_KEY = 2
#: First advisory-lock key of per-thread locks ("AGUT"); the second is ``hashtext(thread_id)``.
#: Two threads whose ids collide share a lock: they serialize, nothing worse.
THREAD_LOCK_CLASS = 0x41475554

LOCK_THREAD = f"SELECT pg_advisory_xact_lock({THREAD_LOCK_CLASS}, hashtext(%s))"
LOCK_EVENT_ORDER = f"SELECT pg_advisory_xact_lock({LOCK_CLASS}, {EVENT_ORDER_LOCK_KEY})"

#: The next global sequence number: read under LOCK_EVENT_ORDER (one backward probe of the
#: primary key).
NEXT_SEQ = "SELECT coalesce(max(seq), 0) + 1 FROM events"

#: The ancestor chain of a run (parameter 1), the run itself first at depth 0. Walks ``runs``
#: by primary key only.
ANCESTORS_CTE = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT %s::bigint, 0
    UNION ALL
    SELECT runs.parent, chain.depth + 1 FROM chain JOIN runs ON runs.id = chain.id
    WHERE runs.parent IS NOT NULL
)
"""

#: A run's ancestors, oldest first.
ANCESTORS = ANCESTORS_CTE + "SELECT id FROM chain ORDER BY id"

#: Every event of a run's ancestor chain with what its batch digest covers: each ancestor one
#: range probe of ``events_by_run``.
CHAIN_EVENT_ROWS = (
    ANCESTORS_CTE
    + "SELECT events.run, events.seq, events.type, events.payload, echo_refs.refs "
    "FROM chain JOIN events ON events.run = chain.id "
    "LEFT JOIN echo_refs ON echo_refs.seq = events.seq "
    "ORDER BY events.run, events.seq"
)

#: The merge base of runs ``a`` and ``b``: the deepest run on both ancestor chains, with its
#: depth below each. Both walks follow ``runs.parent`` by primary key.
MERGE_BASE = """
WITH RECURSIVE
a(id, depth) AS (
    SELECT %(a)s::bigint, 0
    UNION ALL
    SELECT runs.parent, a.depth + 1 FROM a JOIN runs ON runs.id = a.id
    WHERE runs.parent IS NOT NULL
),
b(id, depth) AS (
    SELECT %(b)s::bigint, 0
    UNION ALL
    SELECT runs.parent, b.depth + 1 FROM b JOIN runs ON runs.id = b.id
    WHERE runs.parent IS NOT NULL
)
SELECT a.id, a.depth, b.depth FROM a JOIN b ON a.id = b.id ORDER BY a.depth LIMIT 1
"""

#: One run's events after a sequence number, echoed inputs' references beside them.
RUN_EVENTS = """
SELECT events.payload, echo_refs.refs, events.seq, events.type FROM events
LEFT JOIN echo_refs ON echo_refs.seq = events.seq
WHERE events.run = %s AND events.seq > %s ORDER BY events.seq
"""

#: The global log after a cursor (``events(after=)``), in append order, a page at a time.
EVENTS_AFTER = """
SELECT events.seq, events.run, events.type, events.payload FROM events
WHERE events.seq > %s ORDER BY events.seq LIMIT %s
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
