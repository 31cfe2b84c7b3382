"""Every error met working on an SQLite store, turned into the library's error tree: the one
place that decides it for this backend.

apsw's errors are read here (a busy file, a refused write, a damaged page, a full disk);
every other error goes to the rules all backends share
(:func:`agui_store.backends.errors.translate_common`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from typing import Any, TypeAlias

import apsw

from agui_store import errors
from agui_store.backends import errors as backend_errors
from agui_store.backends.sqlite import checks, files

#: An open store connection (``apsw.Connection``). apsw types every row value as the union of
#: SQLite's types; the store reads its own STRICT schema, so its modules take rows as Any
#: instead of narrowing them at each of a hundred call sites.
Conn: TypeAlias = Any


@contextlib.contextmanager
def translated(where: str, conn: Conn | None = None) -> Iterator[None]:
    """Run a block with every error but the library's own turned into the library's error
    tree (:func:`translate`). Transactions (:func:`immediate`, :func:`snapshot`) do the same
    for their whole body, so a driver error or a Python internal error raised anywhere in a
    store call comes out as an :class:`~agui_store.errors.AguiStoreError` naming the file,
    with the original chained as ``__cause__``."""
    try:
        yield
    except Exception as e:
        if isinstance(e, errors.AguiStoreError):
            raise
        raise translate(e, where, conn) from e


def translate(e: Exception, where: str, conn: Conn | None = None) -> errors.AguiStoreError:
    """The library error for any other error met working on the store at ``where``: the one
    place that decides it.

    Args:
        e: the error (not already an ``AguiStoreError``).
        where: the store's path, for the message.
        conn: the connection, to ask the operating system's errno of a failed I/O.
    """
    if isinstance(e, apsw.Error):
        return _driver_error(e, where, conn)
    return backend_errors.translate_common(e, where, database="SQLite")


#: What an operating system error means for the store, when SQLite passes one on.
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _driver_error(e: apsw.Error, where: str, conn: Conn | None) -> errors.AguiStoreError:
    """The library error for one apsw error."""
    system_errno = 0
    if conn is not None:
        with contextlib.suppress(Exception):
            system_errno = int(conn.system_errno)
    system = f": {os.strerror(system_errno)}" if system_errno else ""
    if isinstance(e, (apsw.BusyError, apsw.LockedError)):
        return errors.StoreBusyError.locked(where)
    if isinstance(e, apsw.ConstraintError):
        return errors.IntegrityError(f"{where} refused the write: {e}")
    if isinstance(e, apsw.NotADBError):
        return errors.NotAStoreError(f"{where} is not an SQLite database ({e})")
    if isinstance(e, apsw.CorruptError):
        # The file in full, as an error inside a transaction names it (``where`` is the path
        # as given when opening the file is what met the damage).
        where = _file_of(conn) or where
        place = None if conn is None else checks.damaged_place(conn)
        said = f"({e})" if place is None else f"({e}); {place}"
        return errors.CorruptStoreError(
            f"{where} is damaged: SQLite met a corrupt page {said}", advice=errors.RUN_CHECK
        )
    if isinstance(e, apsw.FullError) or system_errno in _FULL_ERRNOS:
        return errors.StorageFullError(
            f"{where}: no space left to write ({e}{system}); the failed call wrote nothing, "
            "everything acknowledged before is kept: free space and retry",
            path=where, errno=system_errno or errno.ENOSPC,
        )
    if isinstance(e, apsw.IOError):
        return errors.StorageError(
            f"{where}: I/O error ({e}{system}); the failed call wrote nothing",
            path=where, errno=system_errno or errno.EIO,
        )
    if isinstance(e, apsw.CantOpenError):
        if _in_read_only_folder(where):
            return errors.StorageError(
                f"cannot open {where}: its folder is on a read-only file system, and SQLite "
                "keeps a store's -wal and -shm files beside it; copy the store to a writable "
                "folder to read it",
                path=where, errno=errno.EROFS,
            )
        return errors.StorageError(
            f"cannot open {where} ({e}{system})", path=where, errno=system_errno or None
        )
    if isinstance(e, (apsw.ReadOnlyError, apsw.PermissionsError, apsw.AuthError)):
        folder = _unwritable_folder(where)
        if folder is not None:
            return errors.StorageError(
                f"{where} cannot be read or written: SQLite keeps a store's -wal and -shm "
                f"files beside it, even to read it, and its folder {folder} cannot be "
                "written; make the folder writable, or copy the store to one that is",
                path=where, errno=system_errno or errno.EACCES,
            )
        read_only = _read_only_file(where)
        if read_only is not None:
            name, mode = read_only
            which = "the file" if name == files.store_file(where) else f"{name}, beside it,"
            return errors.StorageError(
                f"{where} cannot be written ({e}{system}): {which} is read-only (mode "
                f"{mode:04o}) for this process; make it writable to write to the store",
                path=where, errno=system_errno or errno.EACCES,
            )
        return errors.StorageError(
            f"{where} cannot be written ({e}{system}): check the file's and its folder's "
            "permissions",
            path=where, errno=system_errno or errno.EACCES,
        )
    if isinstance(e, apsw.NoMemError):
        return errors.OutOfMemoryError(f"SQLite ran out of memory working on {where}")
    if isinstance(e, apsw.TooBigError):
        return errors.InvalidArgumentError(f"a value is larger than SQLite stores ({e})")
    if isinstance(e, apsw.InterruptError):
        return errors.AguiStoreError(f"the operation on {where} was interrupted")
    return errors.InternalError(
        f"unexpected SQLite error working on {where}: {type(e).__name__}: {e} (a bug in "
        "agui-store: please report it with this message)"
    )


def _file_of(conn: Conn | None) -> str | None:
    """The full path of the file a connection works on (``None``: no connection, or none to
    name)."""
    if conn is None:
        return None
    try:
        return str(conn.filename) or None
    except apsw.Error:
        return None


def _unwritable_folder(path: str) -> str | None:
    """The folder of the store file ``path`` if this process may not create files in it
    (where SQLite makes the -wal and -shm files), else ``None``."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        if os.path.isfile(path) and not os.access(folder, os.W_OK | os.X_OK):
            return folder
    except (OSError, ValueError):
        pass
    return None


def _read_only_file(path: str) -> tuple[str, int] | None:
    """The first of the store file ``path`` and the -wal and -shm files beside it that
    exists and this process may not write (SQLite gives them the store's mode when it makes
    them: a read of a read-only store leaves a read-only -shm, which keeps every later
    write out once the store itself is writable again), with its mode; else ``None``."""
    real = files.store_file(path)
    if real is None:
        return None
    for suffix in ("", "-wal", "-shm"):
        name = real + suffix
        try:
            if os.path.isfile(name) and not os.access(name, os.W_OK):
                return name, stat.S_IMODE(os.stat(name).st_mode)
        except (OSError, ValueError):
            pass
    return None


def _in_read_only_folder(path: str) -> bool:
    """Whether ``path`` is a file whose folder is on a file system mounted read-only."""
    try:
        if not os.path.isfile(path):
            return False
        return bool(os.statvfs(os.path.dirname(os.path.abspath(path))).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows)
        return False
