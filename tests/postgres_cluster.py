"""A throwaway PostgreSQL cluster for the tests: initdb into a temp dir, socket only, no TCP.

``PostgresCluster.create()`` runs ``initdb`` into a fresh ``mkdtemp`` directory and starts the
server listening on a Unix socket inside that directory only (``listen_addresses = ''``), so
several clusters coexist and nothing is reachable from the network. ``destroy()`` stops it
with ``pg_ctl stop -m immediate`` and removes the directory, whatever state it is in.

When we are root (CI containers), ``initdb`` and ``pg_ctl`` refuse to run, so they run as the
``postgres`` OS user through ``runuser``; root then connects over the socket (trust auth).
Every parent of the cluster's directory must be reachable by that user, hence ``/tmp`` (or
``AGUI_STORE_PG_TMPDIR``, which ``.ci/run`` points at a directory of its own so that its exit
trap can find and stop whatever a killed pytest left behind).

Three safety nets stop the server if the test process never gets to ``destroy()``:
``atexit``; a watchdog process that waits for the test process's end (its stdin pipe closes
when the test process dies, even by SIGKILL) and then stops and removes the cluster; and
``.ci/run``'s trap. The tests that need the server stopped, restarted or a backend killed
(the connection-loss tests) call :meth:`stop`, :meth:`start` and
:meth:`PostgresServer.terminate_backends`.

This module imports only the standard library at import time: the watchdog runs it as a
script (``python postgres_cluster.py --watch ...``), and psycopg is imported where needed.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

#: The OS user that runs the server when we are root (Debian's packages create it).
SERVER_USER = "postgres"
#: The database role the tests connect as: initdb's superuser.
SUPERUSER = "postgres"
#: Every throwaway cluster's directory starts with this, under ``cluster_parent()``.
DIR_PREFIX = "agui-store-pg-"
#: The port only names the socket file (``.s.PGSQL.<port>``): no TCP listener exists.
PORT = 5432

#: Test-only settings: durability against a machine crash traded for speed (a test cluster
#: dies with its data). ``synchronous_commit`` stays on: with it off, a commit returns before
#: its WAL leaves the server's memory, so ``stop -m immediate`` (the crash the connection-loss
#: tests cause) loses committed rows. ``fsync = off`` is safe against that crash: the WAL is in
#: the OS's page cache, which outlives the server process.
SERVER_SETTINGS = {
    "listen_addresses": "''",
    "fsync": "off",
    "full_page_writes": "off",
    # The concurrency tests run 8 writers and a reader, each maybe with a pool.
    "max_connections": "200",
}


class ClusterUnavailable(RuntimeError):
    """The machine cannot run a throwaway cluster: the message says what is missing."""


def find_bindir() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, newest version first.

    ``$AGUI_STORE_PG_BINDIR`` if set (and only it). Else Debian's place, which keeps the
    server binaries out of PATH (/usr/lib/postgresql/<major>/bin), then PATH.
    """
    chosen = os.environ.get("AGUI_STORE_PG_BINDIR")
    if chosen:
        bindir = Path(chosen)
        tools = ("initdb", "pg_ctl", "postgres")
        return bindir if all((bindir / tool).is_file() for tool in tools) else None
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda path: int(Path(path).parent.name) if Path(path).parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).resolve().parent))
    for candidate in candidates:
        bindir = Path(candidate)
        if all((bindir / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def cluster_parent() -> Path:
    """Where clusters are made: ``$AGUI_STORE_PG_TMPDIR`` if set, else ``/tmp``.

    Not ``tempfile.gettempdir()``: that may be a 0700 directory of root's, which the
    ``postgres`` user cannot traverse.
    """
    return Path(os.environ.get("AGUI_STORE_PG_TMPDIR") or "/tmp")


def _run_as() -> str | None:
    """The user to run the server tools as: ``postgres`` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise ClusterUnavailable(
            f"running as root, and initdb refuses root, but there is no {SERVER_USER!r} OS "
            "user to run it as (installing the postgresql package creates one)"
        ) from None
    if shutil.which("runuser") is None:
        raise ClusterUnavailable("running as root and runuser is missing (util-linux)")
    return SERVER_USER


def uri(params: dict[str, str]) -> str:
    """A ``postgresql://`` URI carrying every libpq parameter as a query parameter.

    libpq accepts any parameter (host as a socket directory included) in the query string, so
    this holds whatever a key/value DSN held.
    """
    rest = {key: value for key, value in params.items() if key != "dbname"}
    dbname = quote(params.get("dbname", ""), safe="")
    # quote, not urlencode's default quote_plus: libpq does not read "+" as a space.
    query = urlencode(rest, quote_via=quote)
    return f"postgresql:///{dbname}?{query}" if query else f"postgresql:///{dbname}"


def with_dbname(dsn: str, dbname: str) -> str:
    """``dsn`` (URI or key/value) pointed at database ``dbname``, as a URI."""
    from psycopg.conninfo import conninfo_to_dict

    params = {key: str(value) for key, value in conninfo_to_dict(dsn).items()}
    params["dbname"] = dbname
    return uri(params)


@dataclass
class PostgresCluster:
    """One initdb'd cluster in ``root`` (``root/data``, its socket in ``root`` itself)."""

    root: Path
    bindir: Path
    run_as: str | None
    _watchdog: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    # --- life cycle ---------------------------------------------------------------------

    @classmethod
    def create(cls) -> PostgresCluster:
        """initdb and start a new cluster; raises ClusterUnavailable when that cannot work."""
        bindir = find_bindir()
        if bindir is None:
            where = os.environ.get("AGUI_STORE_PG_BINDIR") or "/usr/lib/postgresql/*/bin or PATH"
            raise ClusterUnavailable(
                f"no PostgreSQL server binaries (initdb, pg_ctl, postgres) in {where}; install "
                "the postgresql package, or set AGUI_STORE_TEST_POSTGRES to the DSN of a "
                "server the tests may use"
            )
        run_as = _run_as()
        parent = cluster_parent()
        parent.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=parent))
        cluster = cls(root=root, bindir=bindir, run_as=run_as)
        atexit.register(cluster.destroy)
        try:
            if run_as is not None:
                record = pwd.getpwnam(run_as)
                os.chown(root, record.pw_uid, record.pw_gid)
            os.chmod(root, 0o755)
            cluster._start_watchdog()
            cluster._initdb()
            cluster.start()
        except BaseException:
            cluster.destroy()
            raise
        return cluster

    def standby(self) -> PostgresCluster:
        """A hot standby of this cluster (``pg_basebackup -R``, streaming from it), started:
        it serves reads of every database the cluster holds now or later, and takes no
        writes. The caller destroys it."""
        root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=self.root.parent))
        standby = PostgresCluster(root=root, bindir=self.bindir, run_as=self.run_as)
        atexit.register(standby.destroy)
        try:
            if self.run_as is not None:
                record = pwd.getpwnam(self.run_as)
                os.chown(root, record.pw_uid, record.pw_gid)
            os.chmod(root, 0o755)
            standby._start_watchdog()
            standby._tool(
                "pg_basebackup",
                "-h", str(self.socket_dir), "-p", str(PORT), "-U", SUPERUSER,
                "-D", str(standby.data_dir), "-R", "-X", "stream", "--no-sync", "--checkpoint=fast",
            )  # fmt: skip
            with (standby.data_dir / "postgresql.conf").open("a", encoding="utf-8") as handle:
                handle.write(f"unix_socket_directories = '{standby.socket_dir}'\n")
            standby.start()
        except BaseException:
            standby.destroy()
            raise
        return standby

    def destroy(self) -> None:
        """Stop the server (immediate: nothing to keep) and remove its directory. Idempotent."""
        _stop_and_remove(self.root, self.bindir, self.run_as)
        if self._watchdog is not None:
            # Closing its stdin is the watchdog's signal; it finds nothing left to clean.
            with contextlib.suppress(OSError):
                if self._watchdog.stdin is not None:
                    self._watchdog.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=10)
            self._watchdog = None

    def start(self) -> None:
        """Start the server and wait until it accepts connections (after :meth:`stop` too)."""
        self._tool(
            "pg_ctl",
            "-D", str(self.data_dir),
            "-l", str(self.root / "server.log"),
            "-w", "-t", "60",
            "start",
        )  # fmt: skip

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server: ``immediate`` is a crash (no checkpoint), ``fast`` a clean stop."""
        self._tool("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")

    @property
    def running(self) -> bool:
        """Whether the server runs (``pg_ctl status``: a stale pid file after a crash is not)."""
        try:
            self._tool("pg_ctl", "-D", str(self.data_dir), "status")
        except RuntimeError:
            return False
        return True

    # --- where it is ----------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root

    def dsn(self, dbname: str = "postgres") -> str:
        return uri(
            {"dbname": dbname, "host": str(self.socket_dir), "port": str(PORT), "user": SUPERUSER}
        )

    def log(self) -> str:
        """The server's log, for a failing test's message."""
        try:
            return (self.root / "server.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    # --- internals ------------------------------------------------------------------------

    def _initdb(self) -> None:
        self._tool(
            "initdb",
            "-D", str(self.data_dir),
            "-U", SUPERUSER,
            "--auth=trust",
            "-E", "UTF8",
            # The C locale exists everywhere and sorts text by bytes, as SQLite does.
            "--locale=C",
            "--no-sync",
        )  # fmt: skip
        settings = dict(SERVER_SETTINGS)
        settings["unix_socket_directories"] = f"'{self.socket_dir}'"
        settings["port"] = str(PORT)
        lines = "".join(f"{key} = {value}\n" for key, value in settings.items())
        conf = self.data_dir / "postgresql.conf"
        with conf.open("a", encoding="utf-8") as handle:
            handle.write("\n# agui-store tests: a throwaway cluster\n" + lines)

    def _tool(self, name: str, *args: str) -> None:
        _run_tool(self.bindir, self.run_as, self.root, name, *args)

    def _start_watchdog(self) -> None:
        """A process that outlives us only to clean up: it waits for EOF on its stdin.

        Its own session, so a Ctrl-C to the terminal's process group does not kill it before
        it has stopped the server.
        """
        spec = json.dumps(
            {"root": str(self.root), "bindir": str(self.bindir), "run_as": self.run_as}
        )
        self._watchdog = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--watch", spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def _run_tool(bindir: Path, run_as: str | None, root: Path, name: str, *args: str) -> None:
    command = [str(bindir / name), *args]
    if run_as is not None:
        command = ["runuser", "-u", run_as, "--", *command]
    # Output to a file, not a pipe: pg_ctl's server child would inherit a pipe and keep it
    # open, and reading it to EOF would wait for the server to exit.
    with tempfile.TemporaryFile() as output:
        # cwd: the tools chdir-check their cwd, and root's home is not the postgres user's.
        completed = subprocess.run(
            command, cwd=root, stdin=subprocess.DEVNULL, stdout=output, stderr=output, check=False
        )
        if completed.returncode != 0:
            output.seek(0)
            text = output.read().decode("utf-8", "replace")
            log = ""
            with contextlib.suppress(OSError):
                log = (root / "server.log").read_text(encoding="utf-8", errors="replace")[-4000:]
            raise RuntimeError(
                f"{' '.join(command)} exited with {completed.returncode}:\n{text}"
                + (f"\nserver log:\n{log}" if log else "")
            )


def _stop_and_remove(root: Path, bindir: Path, run_as: str | None) -> None:
    """Stop the cluster in ``root`` if its server runs, then remove ``root``. Never raises."""
    if (root / "data" / "postmaster.pid").exists():
        try:
            _run_tool(bindir, run_as, root, "pg_ctl", "-D", str(root / "data"), "-m", "immediate",
                      "-w", "stop")  # fmt: skip
        except (OSError, RuntimeError):
            _kill_postmaster(root / "data")
    shutil.rmtree(root, ignore_errors=True)


def _kill_postmaster(data_dir: Path) -> None:
    """SIGKILL the postmaster named by ``postmaster.pid``: the last resort when pg_ctl failed."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
        os.kill(pid, 9)


@dataclass
class PostgresServer:
    """The server the tests use: a throwaway cluster, or one named by AGUI_STORE_TEST_POSTGRES.

    ``dsn`` connects as a role that may create databases; each test gets its own database
    (``create_database``) so tests never see each other's rows.
    """

    dsn: str
    cluster: PostgresCluster | None = None
    databases: list[str] = field(default_factory=list)
    #: Clones of each template to keep made ahead, and drops to leave to a background thread
    #: (0: every clone made and every drop done when asked, as the benchmarks want). A clone
    #: takes about 0.15-0.25 s of server time and the tests make hundreds: made ahead, that
    #: time overlaps the tests' own work on the machine's other core.
    spares: int = 0
    _ready: dict[str, deque[str]] = field(default_factory=dict, init=False, repr=False)
    _making: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _jobs: deque[tuple[str, str]] = field(default_factory=deque, init=False, repr=False)
    _wake: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)
    _worker: threading.Thread | None = field(default=None, init=False, repr=False)
    _busy: bool = field(default=False, init=False, repr=False)
    _closing: bool = field(default=False, init=False, repr=False)

    def connect(self, **kwargs: Any) -> Any:
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True, **kwargs)

    def create_database(self, template: str = "template1") -> str:
        """A new, empty database cloned from ``template``; returns its DSN."""
        if self.spares:
            with self._wake:
                ready = self._ready.setdefault(template, deque())
                name = ready.popleft() if ready else None
                # Top the spares up again (templates never change once made).
                wanted = self.spares - len(ready) - self._making.get(template, 0)
                for _ in range(wanted):
                    self._making[template] = self._making.get(template, 0) + 1
                    self._jobs.append(("make", template))
                self._start_worker()
                self._wake.notify_all()
            if name is not None:
                return with_dbname(self.dsn, name)
        return with_dbname(self.dsn, self._clone(template))

    def drop_database(self, dsn: str) -> None:
        """Drop a database made by :meth:`create_database`, closing its sessions first
        (with spares: soon, by the background thread)."""
        from psycopg.conninfo import conninfo_to_dict

        name = str(conninfo_to_dict(dsn)["dbname"])
        # Here, not in the background thread: a test may stop the server on purpose, and
        # only the teardown of the test that left it stopped may start it again.
        self.ensure_running()
        if self.spares:
            with self._wake:
                self._jobs.append(("drop", name))
                self._start_worker()
                self._wake.notify_all()
            return
        self._drop(name)

    def settle(self) -> None:
        """Wait until the background thread has done everything asked of it so far."""
        with self._wake:
            while self._jobs or self._busy:
                self._wake.wait()

    def close(self) -> None:
        """Stop the background thread after its queued work, then drop every database still
        standing: unused spares, and any a background drop missed (the server was down)."""
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        if self._worker is not None:
            self._worker.join(timeout=120)
        self.ensure_running()
        for name in list(self.databases):
            with contextlib.suppress(Exception):
                self._drop(name)

    def _clone(self, template: str) -> str:
        from psycopg import sql

        name = f"agui_test_{uuid.uuid4().hex[:16]}"
        with self.connect() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )
        with self._wake:
            self.databases.append(name)
        return name

    def _drop(self, name: str) -> None:
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        with self._wake:
            if name in self.databases:
                self.databases.remove(name)

    def _start_worker(self) -> None:  # called holding self._wake
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="spare-databases", daemon=True)
            self._worker.start()

    def _work(self) -> None:
        while True:
            with self._wake:
                while not self._jobs and not self._closing:
                    self._wake.wait()
                if not self._jobs:
                    return
                kind, name = self._jobs.popleft()
                self._busy = True
            try:
                if kind == "make":
                    made = self._clone(name)
                    with self._wake:
                        self._ready.setdefault(name, deque()).append(made)
                else:
                    self._drop(name)
            except Exception:
                # The server is down (a test stopped it) or refused. A spare is given up:
                # create_database clones when none is ready. A database a drop missed is
                # still in self.databases, for close().
                pass
            finally:
                with self._wake:
                    if kind == "make":
                        self._making[name] -= 1
                    self._busy = False
                    self._wake.notify_all()

    def ensure_running(self) -> None:
        """Start the throwaway cluster again if a test stopped or crashed it."""
        if self.cluster is not None and not self.cluster.running:
            self.cluster.start()

    def terminate_backends(self, dsn: str) -> int:
        """``pg_terminate_backend`` every session on ``dsn``'s database; returns how many.

        What a DBA's kill or a failover does to a client: its connection dies mid-statement.
        """
        from psycopg.conninfo import conninfo_to_dict

        name = str(conninfo_to_dict(dsn)["dbname"])
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            ).fetchall()
        return sum(1 for (killed,) in rows if killed)

    def terminate_backend(self, pid: int) -> bool:
        """``pg_terminate_backend`` one session (``conn.info.backend_pid``)."""
        with self.connect() as conn:
            row = conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
        return bool(row and row[0])


def _watch(spec: str) -> None:
    """The watchdog's body: block until the test process is gone, then clean up after it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    config = json.loads(spec)
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(65536):
            pass
    # The test process may have restarted the server a moment ago: give pg_ctl a clean read.
    time.sleep(0.05)
    _stop_and_remove(Path(config["root"]), Path(config["bindir"]), config["run_as"])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--watch":
        _watch(sys.argv[2])
    else:
        sys.exit("usage: postgres_cluster.py --watch SPEC (started by PostgresCluster.create)")
