"""The PostgreSQL backend: a store in a PostgreSQL database, opened with psycopg 3.

Transactions (the port's :meth:`reading` and :meth:`writing`):

- **Reading** is ``REPEATABLE READ READ ONLY``: every query of one store call sees one
  snapshot, as SQLite's read transaction does.
- **Writing** is ``READ COMMITTED`` behind transaction-level advisory locks held to commit
  (:mod:`agui_store.backends.postgres.sql` describes them and their order). An append of one thread
  takes the writers' lock shared and the thread's lock exclusive, in its ``BEGIN`` round
  trip, so appends of different threads run side by side and those of one thread take
  turns; every other write takes the writers' lock exclusive and runs alone. An append takes
  the event-order lock when its batch's first ``seq`` is read, and holds it to commit:
  ``seq = max + 1`` is handed out in commit order, and a reader polling
  ``events(after=cursor)`` sees a prefix of the log and never skips an event. Each statement
  sees every batch committed before its locks were granted, so a run is placed on the head
  the previous writer of its thread left. REPEATABLE READ with the same locks forks
  lineages (its snapshot predates the lock wait), and SERIALIZABLE without them retries a
  write up to a thousand times under contention. The server drops the locks when a client dies,
  even by SIGKILL, and rolls its batch back.
- The wait for a lock is bounded by ``lock_timeout`` (``busy_timeout_ms``).

Every psycopg error is translated into the :mod:`agui_store.errors` tree in one place,
:func:`translate`, when a transaction exits. A lost connection (the server restarted or shut
down, the backend terminated, the network gone) is dropped, and the next call opens a new
one; when the loss is noticed before anything was sent (at ``BEGIN``), the call reconnects
once and goes on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from agui_store import errors
from agui_store.backends import errors as backend_errors
from agui_store.backends import progress
from agui_store.backends.locations import SECRETS, UNREADABLE_URL, without_password
from agui_store.backends.postgres import migrations, schema, sql
from agui_store.backends.postgres.transaction import PostgresTransaction
from agui_store.engine import derivation
from agui_store.engine.trust import TrustedBlobs

#: SQLSTATE classes and codes of a server going away: the connection is gone or going.
_GONE = (
    pg_errors.AdminShutdown,
    pg_errors.CrashShutdown,
    pg_errors.CannotConnectNow,
    pg_errors.IdleSessionTimeout,
    pg_errors.ConnectionException,
)


def translate(e: Exception, where: str) -> errors.AguiStoreError:
    """The library error for an error met working on the PostgreSQL store at ``where``: the
    one place that decides it for this backend (errors not psycopg's go to the rules every
    backend shares, :func:`agui_store.backends.errors.translate_common`)."""
    if not isinstance(e, psycopg.Error):
        return backend_errors.translate_common(e, where, database="PostgreSQL")
    state = getattr(getattr(e, "diag", None), "sqlstate", None) or ""
    if state == sql.MIGRATED_SINCE_STATE:
        return _migrated_since(where, e.diag.message_detail or "")
    if isinstance(e, _GONE) or (isinstance(e, psycopg.OperationalError) and not state):
        lost = errors.StorageError(
            f"{where}: lost the connection to the PostgreSQL server ({_first_line(e)}); what "
            "the call was writing is rolled back unless the loss came during its commit; the "
            "store reconnects on its next call"
        )
        lost.maybe_committed = True
        return lost
    if isinstance(e, pg_errors.ReadOnlySqlTransaction):  # a standby (hot standby) server
        return _on_standby(where, f" ({_first_line(e)})")
    if isinstance(e, pg_errors.LockNotAvailable):
        # A lock any session may hold: another writer's, or a LOCK TABLE by hand.
        return errors.StoreBusyError.locked(where, by="another transaction")
    if isinstance(
        e, (pg_errors.SerializationFailure, pg_errors.DeadlockDetected, pg_errors.QueryCanceled)
    ):
        return errors.StoreBusyError(
            f"{where}: the server cancelled the transaction ({_first_line(e)}); nothing was "
            "written", waited=False, advice="retry",
        )
    if isinstance(e, psycopg.IntegrityError):
        return errors.IntegrityError(f"{where} refused the write: {_first_line(e)}")
    if isinstance(e, pg_errors.DiskFull):
        return errors.StorageFullError(
            f"{where}: the server has no space left to write ({_first_line(e)}); the failed "
            "call wrote nothing, everything acknowledged before is kept",
            path=where,
        )
    if isinstance(e, pg_errors.InsufficientPrivilege) and "for database" in _first_line(e):
        # CREATE SCHEMA refused: the database holds no store, and this role may not create
        # one (what the application's grants give is for the store's tables, once they are).
        return errors.StorageError(
            f"{where} holds no store and this role may not create one ({_first_line(e)}): "
            "create it as the role that is to own its tables (GRANT CREATE ON DATABASE ... "
            "TO that role), then grant this role the store's privileges "
            "(agui_store.postgres.schema.application_grants)",
            path=where,
        )
    if isinstance(e, pg_errors.InsufficientPrivilege):
        # A read is refused as a write is: the server's words say which privilege it was.
        return errors.StorageError(
            f"{where} refused this role ({_first_line(e)}): grant the role the store's "
            "privileges (agui_store.postgres.schema.application_grants)",
            path=where,
        )
    if isinstance(e, pg_errors.OutOfMemory):
        return errors.OutOfMemoryError(f"the PostgreSQL server ran out of memory ({where})")
    if isinstance(e, psycopg.DataError):  # NUL in text, a number out of range, bad encoding
        return errors.InvalidArgumentError(
            f"a value cannot be stored in {where}: {_first_line(e)}"
        )
    return errors.InternalError(
        f"unexpected PostgreSQL error working on {where}: {type(e).__name__}: "
        f"{_first_line(e)} (a bug in agui-store: please report it with this message)"
    )


def _migrated_since(where: str, found: str) -> errors.SchemaVersionError:
    """The refusal of a write to a store whose schema version is no longer the one this
    release opened it at (:data:`sql.REFUSE_MIGRATED_SINCE`; ``found``: the version it
    records now). What this release writes (the search index's words, for one) would be of
    its own version, which a newer one neither finds nor checks clean."""
    if found.isdigit() and int(found) > schema.SCHEMA_VERSION:
        return errors.SchemaVersionError(
            f"{where} was migrated to schema version {found} by a newer agui-store while "
            f"this one (schema version {schema.SCHEMA_VERSION}) had it open; nothing was "
            "written: upgrade agui-store in this process and restart it"
        )
    return errors.SchemaVersionError(
        f"{where} records schema version {found or '(none)'}, not the "
        f"{schema.SCHEMA_VERSION} it was opened at: it was changed outside agui-store while "
        "this process had it open; nothing was written: open the store again"
    )


def _on_standby(where: str, why: str = "") -> errors.StorageError:
    """The error of a write sent to a standby server: it reads, and writes go elsewhere."""
    return errors.StorageError(
        f"{where} is a standby server, which takes no writes{why}: write to the primary "
        "server (a standby serves reads only)",
        path=where,
    )


def _forgetting(backend: weakref.ref[PostgresBackend]) -> Callable[[Any], None]:
    """A notice handler that makes the backend's connection forget the messages it kept
    (weakly held: the connection the handler belongs to does not keep its backend)."""

    def erased(_notice: Any) -> None:
        found = backend()
        if found is not None:
            found._trusted.forget_messages()

    return erased


def _connection(url: str, where: str) -> Any:
    """A new autocommit connection to ``url`` (``where``: the URL as messages show it)."""
    try:
        return psycopg.connect(url, autocommit=True)
    except psycopg.OperationalError as e:  # no server, no database, refused login
        raise errors.StorageError(
            f"cannot connect to {where}: {_first_line(e)}", path=where
        ) from e
    except psycopg.ProgrammingError as e:  # a URL libpq cannot read
        # Its message quotes the URL, password and all: only what is wrong is kept.
        what = _without_quoted_password(_first_line(e).split(' in URI: "', 1)[0], url)
        shown = "" if where == UNREADABLE_URL else f" {where}"
        raise errors.InvalidArgumentError(
            f"cannot read the PostgreSQL URL{shown}: {what}"
        ) from None
    except Exception as e:
        raise translate(e, where) from e


def _without_quoted_password(what: str, url: str) -> str:
    """libpq's complaint about a URL, without the token it quotes when that token is the
    password (one libpq cannot decode: ``invalid percent-encoded token: "..."``)."""
    head, quoted, token = what.rpartition(': "')
    if quoted and token.endswith('"') and token[:-1] in _raw_passwords(url):
        return f"{head} in the password"
    return what


def _raw_passwords(url: str) -> set[str]:
    """The password texts ``url`` spells, undecoded: the authority's and the query's."""
    rest = url.split("://", 1)[-1]
    authority, _, after = rest.partition("/")
    if "?" in authority:
        authority, _, query = authority.partition("?")
    else:
        query = after.partition("?")[2]
    found = set()
    userinfo, at, _host = authority.rpartition("@")
    if at and ":" in userinfo:
        found.add(userinfo.split(":", 1)[1])
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key in SECRETS:
            found.add(value)
    return found - {""}


def _naming(e: errors.AguiStoreError, where: str) -> errors.AguiStoreError:
    """An error :mod:`~agui_store.backends.postgres.schema` says of the store's schema (another
    application's, a newer version, one this role may not migrate), naming the database
    too: a copy's message must say which of its two stores it is."""
    if where in str(e):
        return e
    if isinstance(e, errors.StorageError):
        return errors.StorageError(f"{where}: {e}", path=where)
    if type(e) in (errors.NotAStoreError, errors.SchemaVersionError):
        return type(e)(f"{where}: {e}")
    return e


def holds_store(url: str) -> bool:
    """Whether the database ``url`` names holds the store's schema (at any version)."""
    where = without_password(url)
    conn = _connection(url, where)
    try:
        return schema.installed_version(conn) > 0
    except errors.AguiStoreError as e:
        named = _naming(e, where)
        if named is e:
            raise
        raise named from None
    except psycopg.Error as e:
        raise translate(e, where) from e
    finally:
        conn.close()


def drop_new_store(url: str) -> bool:
    """Drop the store's schema from the database ``url`` names, if it holds nothing: what a
    failed first write into a new database leaves (as SQLite's file is removed). Under the
    installers' lock and the writers' (exclusive), so a store another process has begun to
    fill is kept; and only while no other session has the store open, so one that another
    process opened at the same time, and is about to write, is kept too. Whether it was
    dropped."""
    where = without_password(url)
    conn = _connection(url, where)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                         (schema.LOCK_CLASS, schema.INSTALL_LOCK_KEY))
            conn.execute(sql.WRITER_LOCK)
            if not schema.installed_version(conn):
                return False
            row = conn.execute(sql.STORE_HOLDS_NOTHING.format(schema=schema.SCHEMA)).fetchone()
            if not (row and row[0]):
                return False
            row = conn.execute(sql.NO_STORE_OPEN).fetchone()
            if not (row and row[0]):
                return False
            conn.execute(f"DROP SCHEMA {schema.SCHEMA} CASCADE")
            return True
    except psycopg.Error as e:
        raise translate(e, where) from e
    finally:
        conn.close()


#: The tables an erasure deletes from whose indexes hold nothing of what was erased in the
#: clear: integers the store assigned (sequence numbers, run, batch, blob and message keys,
#: which the erasure log's ranges name too) and sha256 digests (content addresses, lineage
#: digests), which, like a tombstone, name nothing and confirm only an exact guess. Its purge
#: vacuums them without index cleanup: their erased rows go from the tables, and those index
#: entries wait for the next vacuum that cleans the indexes (autovacuum's), since cleaning an
#: index reads all of it, which costs the store's size.
_ERASED_OPAQUE_KEYED = (
    "event_pages", "echo_refs", "batches", "checkpoints", "underived", "checkpoint_segments",
    "lineage_digests", "blobs", "conversation_messages", "conversation_branches",
)
#: The tables an erasure deletes from whose indexes hold erased text in the clear (run and
#: thread ids, owners, branch names, the search index's words, conversation and entry ids,
#: scopes): its purge vacuums them with index cleanup forced on (by default PostgreSQL skips
#: it when few pages hold dead rows, and the erased keys would stay in the indexes).
_ERASED_TEXT_KEYED = (
    "runs", "threads", "branches", "search_messages", "conversation_entries", "conversations",
)


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


class PostgresBackend:
    """A store in a PostgreSQL database (its tables in the ``agui_store`` schema). One
    connection; not thread-safe by itself: the engine serializes calls."""

    def __init__(self, url: str, *, busy_timeout_ms: int) -> None:
        self.url = url
        self.location = url
        self.where = without_password(url)
        self.busy_timeout_ms = busy_timeout_ms
        self._closed = False
        self._conn: Any = None
        self._pid = os.getpid()
        #: Called with the thread (``None``: a write that runs alone) once a write
        #: transaction holds its locks, before it writes: a test hook
        #: (``agui_store.testing.on_write_locked``), ``None`` otherwise.
        self.on_write_locked: Callable[[str | None], None] | None = None
        self._writing: PostgresTransaction | None = None  # the write under way, if any
        self._reading: PostgresTransaction | None = None  # the read under way, if any
        self._prepared_on: Any = None  # the connection the store's statements are prepared on
        self.purge_pending = ""  # why the last purge did not finish (see purge)
        self._hears_erasures = True  # told of every erasure (not on a standby)
        self._conn = self._connect()  # errors in the URL, the server or the schema: now
        # What the connection verified of its blobs.
        self._trusted = TrustedBlobs(keeps_messages=self._hears_erasures)

    # --- connections ------------------------------------------------------------------------

    def _connect(self) -> Any:
        conn = _connection(self.url, self.where)
        try:
            schema.install(
                conn, backfill=functools.partial(_backfill, deferred=[], where=self.where)
            )
            # Session settings: the store's schema first on the path, and a bounded wait for
            # the write locks (0 would mean "forever" to PostgreSQL: 1 ms is "no wait"); and
            # the lock that says the store is open (sql.STORE_OPEN_LOCK_KEY), shared.
            conn.execute(
                "SELECT set_config('search_path', %s, false), "
                "set_config('lock_timeout', %s, false), "
                "pg_advisory_lock_shared(%s, %s)",
                (schema._ident(schema.SCHEMA), f"{max(1, self.busy_timeout_ms)}ms",
                 schema.LOCK_CLASS, sql.STORE_OPEN_LOCK_KEY),
            )
            # Told of every erasure logged on the database (sql.ERASED), the connection's
            # memory of decoded messages forgets the erased ones (agui_store.engine.trust):
            # the notice comes with the next answer the connection reads, at no round trip.
            try:
                conn.execute(sql.LISTEN_ERASED)
            except pg_errors.ReadOnlySqlTransaction:
                # A hot standby (a server in recovery) takes no LISTEN, and no notice of
                # the primary's erasures reaches it: the connection keeps no message.
                self._hears_erasures = False
            else:
                self._hears_erasures = True
                conn.add_notify_handler(_forgetting(weakref.ref(self)))
        except BaseException as e:
            with contextlib.suppress(Exception):
                conn.close()
            if isinstance(e, errors.AguiStoreError):
                named = _naming(e, self.where)
                if named is not e:
                    raise named from None
            elif isinstance(e, Exception):
                raise translate(e, self.where) from e
            raise
        return conn

    @property
    def _db(self) -> Any:
        if self._closed:
            raise errors.AguiStoreError(f"{self.where}: the store is closed")
        if os.getpid() != self._pid:
            self.after_fork()
        if self._conn is None:
            self._conn = self._connect()
            self._trusted = TrustedBlobs(keeps_messages=self._hears_erasures)
        return self._conn

    def _on_a_standby(self) -> bool:
        """Whether the server of a connection that could not listen for erasures is a
        standby still: one promoted since (a failover) is connected to again, to listen from
        now on. Asked before a write only: a standby refuses one at ``BEGIN``, with an error
        that names no standby."""
        try:
            (recovering,) = self._db.execute("SELECT pg_is_in_recovery()").fetchone()
        except psycopg.Error as e:
            raise translate(e, self.where) from e
        if not recovering:
            self._drop()
        return bool(recovering)

    def connection(self) -> Any:
        """The psycopg connection (for :mod:`agui_store.testing`)."""
        return self._db

    def _begin(self, statement: str, query: str | None = None) -> Any:
        """Start a transaction; a connection found lost here (nothing sent yet) is replaced
        once. With a ``query`` (no parameters: a simple query takes none; it may be several
        statements), it rides in the same round trip, and the rows of its last statement
        that returns rows come back with the connection: ``(conn, rows)``."""
        conn = self._db
        try:
            return self._send_begin(conn, statement, query)
        except Exception as e:
            if not _lost(conn):
                self._end(conn, rollback=True)
                raise translate(e, self.where) from e
        self._drop()
        conn = self._db
        try:
            return self._send_begin(conn, statement, query)
        except Exception as e:
            self._end(conn, rollback=True)
            raise translate(e, self.where) from e

    def _send_begin(self, conn: Any, statement: str, query: str | None) -> Any:
        if query is None:
            conn.execute(statement)
            return conn
        # The store's prepared statements are prepared in the round trip of their first
        # EXECUTE on a connection (not on opening: a store whose tables are broken still
        # opens, for check()).
        executed = sql.EXECUTED_NAME.search(query)
        prepare = sql.PREPARED.get(executed.group(1)) if executed is not None else None
        first = prepare + "; " if prepare is not None and self._prepared_on is not conn else ""
        try:
            cursor = conn.execute(statement + "; " + first + query)
        except pg_errors.InvalidSqlStatementName:
            # psycopg runs DEALLOCATE ALL after a ROLLBACK (a failed call's) on a session
            # where it prepared statements, which takes the store's own too: prepared again.
            if prepare is None:
                raise
            conn.execute("ROLLBACK")
            conn.execute(prepare)
            cursor = conn.execute(statement + "; " + query)
        if prepare is not None:
            self._prepared_on = conn
        rows: list[Any] = []
        while True:  # the query's rows: past BEGIN's and the locks', before a closing SET's
            if cursor.description is not None:
                rows = cursor.fetchall()
            if not cursor.nextset():
                return conn, rows

    def _drop(self) -> None:
        """Forget a broken connection (closing it is all that is left to do with it)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _end(self, conn: Any, *, rollback: bool) -> None:
        """End the open transaction, if any (best effort: the error being raised is the one
        to see); a connection found lost is dropped."""
        if _lost(conn):
            self._drop()
            return
        if conn.info.transaction_status == TransactionStatus.IDLE:
            return
        try:
            conn.execute("ROLLBACK" if rollback else "COMMIT")
        except Exception:
            self._drop()

    def purge(self, rewrite: bool = False) -> bool:
        """See :meth:`agui_store.engine.port.Backend.purge`: ``VACUUM`` of every table an
        erasure deletes from, outside a transaction, so that no row of them, live or dead,
        holds what was erased: with index cleanup where the indexes hold erased keys, without
        where they hold only integers and digests (:data:`_ERASED_TEXT_KEYED`,
        :data:`_ERASED_OPAQUE_KEYED`). An index keeps more than its rows, though: a vacuum
        empties a GIN key's list of rows but keeps the key (the erased words), and a
        B-tree's inner pages keep prefixes of keys as separators; freed space keeps its
        bytes. ``rewrite`` writes those tables and their indexes again instead (``VACUUM
        FULL``, which locks each table while it copies it and costs its size), leaving none
        of that. Only the tables' owner may vacuum them:
        another role (the application's, :func:`~agui_store.backends.postgres.schema.
        application_grants`) leaves it to autovacuum, and the purge is not finished
        (``False``). What the server keeps beyond the tables (WAL, replicas, backups) is
        the server's: see the erasure guide."""
        conn = self._db
        try:
            if conn.info.transaction_status != TransactionStatus.IDLE:
                self.purge_pending = (
                    "a transaction of this store was open: purge again (Store.purge(), or "
                    "'agui-store purge') once it ends"
                )
                return False
            (owner,) = conn.execute(sql.OWNS_TABLES, (schema.SCHEMA,)).fetchone()
            if not owner:
                self.purge_pending = (
                    "this role does not own the store's tables, so it cannot vacuum them: "
                    "autovacuum completes it, or 'agui-store purge' connected as their owner"
                )
                return False
            (older,) = conn.execute(sql.OLDER_SNAPSHOTS).fetchone()  # counted before VACUUM
            if rewrite:
                conn.execute(sql.vacuum_full(_ERASED_OPAQUE_KEYED + _ERASED_TEXT_KEYED))
            else:
                conn.execute(sql.vacuum(_ERASED_OPAQUE_KEYED, index_cleanup=False))
                conn.execute(sql.vacuum(_ERASED_TEXT_KEYED, index_cleanup=True))
            if not self._purge_statistics(conn, rewrite):
                return False
        except Exception as e:
            self._end(conn, rollback=True)
            raise translate(e, self.where) from e
        if older:
            self.purge_pending = (
                f"{older} transaction(s) open as the purge began may still read the erased "
                "rows, which VACUUM keeps for them: purge again (Store.purge(), or "
                "'agui-store purge') once they end"
            )
            return False
        return True

    def _purge_statistics(self, conn: Any, rewrite: bool) -> bool:
        """The planner's statistics of the tables an erasure deletes from (``ANALYZE``'s,
        autovacuum's among them) hold samples of their values: ids, owners, payloads,
        words, which ``pg_stats`` shows to any role that reads the tables. They are sampled
        again from the rows left, and the old ones vacuumed out of ``pg_statistic``, which
        only a superuser or the database's owner may do; whether that was done."""
        erased_from = list(_ERASED_OPAQUE_KEYED + _ERASED_TEXT_KEYED)
        sampled = [t for (t,) in conn.execute(
            sql.TABLES_WITH_STATISTICS, (schema.SCHEMA, erased_from)).fetchall()]
        if not sampled:
            return True
        conn.execute(sql.analyze(sampled))
        kept = self._drop_statistics_of_empty_tables(conn, sampled)
        (may,) = conn.execute(sql.MAY_VACUUM_STATISTICS).fetchone()
        if not may:
            self.purge_pending = (
                "the planner's statistics were sampled again, but pg_statistic keeps the old "
                "samples (erased values among them) until it is vacuumed, which only the "
                "database's owner or a superuser may do: 'agui-store purge' connected as one"
            )
            return False
        conn.execute(sql.vacuum_statistics(full=rewrite))
        if kept:
            self.purge_pending = (
                f"the planner's statistics of {', '.join(kept)} stay as they were sampled "
                "before the erasure, which left the table empty (ANALYZE writes none from no "
                "rows): a purge drops them unless a view reads those columns; those go with "
                "the next ANALYZE after a row is written there"
            )
            return False
        return True

    def _drop_statistics_of_empty_tables(self, conn: Any, sampled: list[str]) -> list[str]:
        """Drop the statistics of the tables among ``sampled`` the erasures left empty, which
        ``ANALYZE`` cannot sample again (an erased owner's conversations, the branches of the
        last thread that had any); the columns a view reads, which keep theirs."""
        empty = [t for (t,) in conn.execute(sql.empty_tables(sampled)).fetchall()]
        if not empty:
            return []
        columns: dict[str, list[tuple[str, str, str | None]]] = {}
        kept = []
        for table, column, kind, collation, viewed in conn.execute(
            sql.COLUMNS_WITH_STATISTICS, (schema.SCHEMA, empty)
        ).fetchall():
            if viewed:
                kept.append(f"{table}.{column}")
            else:
                columns.setdefault(table, []).append((column, kind, collation))
        for table, altered in columns.items():
            try:
                with conn.transaction():
                    # ALTER TABLE waits for every reader of the table, and every query of it
                    # then waits behind the ALTER: a short wait, else the next purge's turn.
                    conn.execute(sql.SHORT_LOCK_WAIT)
                    conn.execute(sql.drop_statistics(table, altered))
            except pg_errors.LockNotAvailable:
                kept += [f"{table}.{name} (a transaction held the table)" for name, _, _ in altered]
        return kept

    # --- transactions -----------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self) -> Iterator[PostgresTransaction]:
        """A read transaction (``REPEATABLE READ READ ONLY``); inside a write, that write's
        own; inside a read, that read's.

        ``BEGIN`` is sent with the transaction's first statement (:class:`PostgresTransaction`
        holds it until then), unless that statement may run alone, outside it
        (:meth:`PostgresTransaction.run_checkout`): then a read that sends nothing more
        opens no transaction, and costs one round trip."""
        if self._writing is not None:  # inside a write: its transaction (and its deferred
            yield self._writing  # writes, which its reads send first), opened if not yet
            return
        if self._reading is not None:  # nested: that read's, opened if not yet
            yield self._reading
            return
        conn = self._db
        if conn.info.transaction_status != TransactionStatus.IDLE:
            yield PostgresTransaction(conn, trusted=self._trusted)  # a transaction of the
            return  # connection's owner (a test's): inside it
        opened: list[Any] = []

        def begin(query: str | None) -> tuple[Any, Any]:
            if query is None:
                conn, rows = self._begin(sql.BEGIN_READING), None
            else:
                conn, rows = self._begin(sql.BEGIN_READING, query)
            opened.append(conn)
            return conn, rows

        tx = PostgresTransaction(None, begin=begin, trusted=self._trusted, alone=self._alone)
        self._reading = tx
        try:
            yield tx
        except BaseException as e:
            if opened:
                self._end(opened[0], rollback=True)
            elif self._conn is not None and _lost(self._conn):
                self._drop()
            if isinstance(e, Exception) and not isinstance(e, errors.AguiStoreError):
                raise translate(e, self.where) from e
            raise
        finally:
            self._reading = None
        if opened:
            self._end(opened[0], rollback=False)  # a read wrote nothing: COMMIT and ROLLBACK agree

    def _alone(self, statement: str, args: Any) -> list[Any]:
        """The rows of one read-only statement sent outside any transaction: the connection
        commits each statement by itself (autocommit), so the statement sees one snapshot
        and leaves no transaction open. A connection found lost is replaced once: a read
        sent again changes nothing."""
        conn = self._db
        try:
            return conn.cursor(binary=True).execute(statement, args).fetchall()  # type: ignore[no-any-return]
        except Exception:
            if not _lost(conn):
                raise
        self._drop()
        return self._db.cursor(binary=True).execute(statement, args).fetchall()  # type: ignore[no-any-return]

    @contextlib.contextmanager
    def writing(self, thread_id: str | None = None) -> Iterator[PostgresTransaction]:
        """A write transaction: of one thread's appends when ``thread_id`` is given (beside
        other threads' appends), else of a write that runs alone (``sql``'s locks).

        ``BEGIN`` and the locks are sent with the transaction's first statement, in one
        round trip (:class:`PostgresTransaction` holds them until then); a write that sends
        nothing opens no transaction."""
        if thread_id is None:
            locks = sql.WRITER_LOCK
        else:
            locks = sql.LOCK_WRITERS_SHARED + "; " + sql.lock_thread(thread_id)
        statement = sql.BEGIN_WRITING + "; " + locks + "; " + sql.REFUSE_MIGRATED_SINCE
        opened: list[Any] = []

        def begin(query: str | None) -> tuple[Any, Any]:
            if not self._hears_erasures and self._on_a_standby():
                raise _on_standby(self.where)
            if query is None:
                conn, rows = self._begin(statement), None
            else:
                conn, rows = self._begin(statement, query)
            opened.append(conn)
            if self.on_write_locked is not None:
                self.on_write_locked(thread_id)
            return conn, rows

        tx = PostgresTransaction(None, begin=begin, trusted=self._trusted)
        self._writing = tx
        try:
            yield tx
        except BaseException as e:
            if opened:
                self._end(opened[0], rollback=True)
            if isinstance(e, Exception) and not isinstance(e, errors.AguiStoreError):
                raise translate(e, self.where) from e
            raise
        finally:
            self._writing = None
        if not opened:
            return
        try:
            tx.flush()  # its deferred writes: an error in one is the call's, and rolls back
            opened[0].execute("COMMIT")
        except Exception as e:
            self._end(opened[0], rollback=True)
            raise translate(e, self.where) from e

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; later calls raise."""
        self._closed = True
        self._drop()

    def after_fork(self) -> None:
        """In a forked child: let go of the parent's connection without a word to the server.

        Closing it normally would send the server a Terminate message on the socket the
        parent still uses, ending the parent's session. The child's copy of the socket is
        replaced by ``/dev/null`` first, so libpq's goodbye goes nowhere, and the next use
        opens a connection of the child's own."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._writing = self._reading = None  # the parent's, if it forked inside one
        conn, self._conn = self._conn, None
        if conn is None:
            return
        with contextlib.suppress(Exception):
            fd = conn.pgconn.socket
            null = os.open(os.devnull, os.O_RDWR)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
            conn.close()


def _lost(conn: Any) -> bool:
    return bool(conn.closed or conn.broken)


def _backfill(conn: Any, version: int, deferred: list[int], where: str) -> None:
    """What a migration computes in Python (see :func:`schema.install`): the steps of
    :mod:`agui_store.backends.postgres.migrations` (version 7 rehashes the log); and
    version 5's index of every complete run's messages for search, with a progress bar on a
    terminal, built after the last migration (``deferred`` notes it is due): indexing reads
    runs through their hashes, which a later version may recompute. ``where``: the store,
    as the bar names it (without its password)."""
    if version in migrations.BACKFILLS:
        migrations.BACKFILLS[version](conn)
    if version == schema.SEARCH_INDEX_VERSION:
        deferred.append(version)
    if version == schema.SCHEMA_VERSION and deferred:
        with progress.on_terminal(f"indexing {where} for search", unit="runs") as shown:
            tx = PostgresTransaction(conn)
            derivation.index_every_run(tx, shown)
            tx.flush()
