"""Where a command may write its output: never over the store, never over a database.

An export pointed at the store's own file once overwrote it and exited 0. Every file a
command writes goes through :func:`check_target` first, and :func:`write_file` lands it
whole or not at all (a temporary file beside the target, renamed over it at the end), so a
failed export never leaves half a file behind either.

The rule, stated once:
- the store's own file and its ``-wal``, ``-shm`` and ``-journal`` siblings are refused,
  whatever path (a symlink, a hard link, ``..``) names them;
- an existing SQLite database is refused (a file beginning with SQLite's header), unless the
  caller passes ``replace=True`` for a command whose output is itself a database;
- a folder is refused;
- any other existing regular file is replaced, as a shell's ``>`` would; through a symlink,
  the file it points to is replaced and the link stays;
- a device, a FIFO or a socket (``/dev/null``, ``/dev/stdout``, a named pipe) is written to
  as a stream, never replaced: renaming a file over ``/dev/null`` as root would leave every
  later ``> /dev/null`` on the machine filling a file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterable

from agui_store.backends.sqlite.files import SIBLINGS, SQLITE_HEADER, is_sqlite_file, store_file
from agui_store.errors import AguiStoreError

__all__ = [
    "SIBLINGS",
    "SQLITE_HEADER",
    "ExportTargetError",
    "check_source",
    "check_target",
    "copy_into_stream",
    "is_sqlite_file",
    "is_stream",
    "make_partial",
    "partial_path",
    "place_file",
    "store_file",
    "store_part",
    "write_file",
]


class ExportTargetError(AguiStoreError, ValueError):
    """An output path that would destroy data: the store's own file, a database, a folder."""


def is_stream(path: str) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a folder: a device, a FIFO
    or a socket, which output is written into, never renamed over."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def store_part(path: str, store_path: str | None) -> str | None:
    """``"file"``, ``"wal file"``... when ``path`` (resolved) is the store's own file or one
    of its siblings, whatever path names it; else ``None``."""
    own_file = store_file(store_path) if store_path is not None else None
    if own_file is None:
        return None
    for suffix in SIBLINGS:
        own = own_file + suffix
        same = path == own or (
            os.path.exists(path) and os.path.exists(own) and os.path.samefile(path, own)
        )
        if same:
            return "file" if not suffix else f"{suffix[1:]} file"
    return None


def check_source(in_path: str | os.PathLike[str], store_path: str | None) -> None:
    """Refuse to read the store's own files as input (``import``): besides making no sense,
    opening and closing them with Python's ``open`` would drop the SQLite locks this
    process holds on them (POSIX locks belong to the process, and any close releases them)."""
    shown = os.fspath(in_path)
    what = store_part(os.path.realpath(shown), store_path)
    if what is not None:
        raise ExportTargetError(
            f"{shown} is the store's own {what} ({store_path}), not a recording to import"
        )


def check_target(
    out_path: str | os.PathLike[str], store_path: str | None, *, replace: bool = False
) -> str:
    """The real path to write ``out_path`` to, or :class:`ExportTargetError` if it may not be.

    Args:
        out_path: the path the user gave.
        store_path: the open store's path (``None`` when no store is open).
        replace: allow replacing an existing SQLite database that is not the store (for an
            output that is itself a database, asked for explicitly).
    """
    shown = os.fspath(out_path)
    target = os.path.realpath(shown)
    what = store_part(target, store_path)
    if what is not None:
        raise ExportTargetError(
            f"{shown} is the store's own {what} ({store_path}): write the output to "
            "another path"
        )
    if os.path.isdir(target):
        raise ExportTargetError(f"{shown} is a folder: give a file path inside it")
    if is_stream(target):  # written into, as a stream: nothing there to refuse or replace
        return target
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise ExportTargetError(f"cannot write {shown}: folder {folder} does not exist")
    if not replace and is_sqlite_file(target):
        raise ExportTargetError(
            f"{shown} is an existing SQLite database: agui-store never writes over one; "
            "give a new path"
        )
    return target


def write_file(target: str, chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` to ``target`` whole or not at all (``target`` from check_target); a
    device or FIFO is written to as it is, a stream. An ``OSError`` names ``target``, not
    the temporary file beside it (or, for a stream, no file at all)."""
    try:
        _write_file(target, chunks)
    except OSError as e:
        if e.filename == target or e.errno is None:
            raise
        raise type(e)(e.errno, e.strerror, target) from None


def _write_file(target: str, chunks: Iterable[bytes]) -> None:
    if is_stream(target):
        with open(target, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
        return
    tmp = partial_path(target)
    try:
        with os.fdopen(make_partial(tmp), "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        place_file(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


#: The end of a temporary file's name, and the random part before it (eight characters).
_PARTIAL_SUFFIX = ".partial"
_RANDOM_PART = 8


def partial_path(target: str, *, database: bool = False) -> str:
    """A new temporary file's path beside ``target``, to write it into: named
    ``.NAME.xxxxxxxx.partial``, with NAME cut short where the whole would be longer than the
    file system takes a name (``target``'s own name may be as long as that). For a
    ``database``, the name leaves room for SQLite's ``-journal`` and ``-wal`` beside it.

    The file is not made here: :func:`make_partial` makes it inside the caller's clean-up,
    so that a signal or Ctrl-C that lands as it is made finds its path known, and it
    removed (``mkstemp`` names the file only once it exists)."""
    folder, name = os.path.split(target)
    folder = folder or "."
    try:
        longest = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255  # what Linux, macOS and Windows file systems take
    room = longest - len("..") - _RANDOM_PART - len(_PARTIAL_SUFFIX)
    if database:
        room -= max(len(suffix) for suffix in SIBLINGS)
    raw = os.fsencode(name)
    if len(raw) > room:  # cut whole characters only: the name stays readable
        name = raw[: max(room, 0)].decode("utf-8", "ignore")
    random = secrets.token_hex(_RANDOM_PART // 2)
    return os.path.join(folder, f".{name}.{random}{_PARTIAL_SUFFIX}")


def make_partial(path: str) -> int:
    """Make the temporary file :func:`partial_path` named, readable by this user alone
    (as ``mkstemp`` makes one): its descriptor, open for writing."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    return os.open(path, flags, 0o600)


def place_file(tmp: str, target: str) -> None:
    """Rename the finished temporary file ``tmp`` (from :func:`make_partial`, beside
    ``target``) over ``target``. It was made 0600: it gets the mode of the file it replaces, or
    the mode a plain ``open()`` would have given a new one."""
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)
    os.replace(tmp, target)


def copy_into_stream(source: str, target: str) -> None:
    """Copy the finished file ``source`` into the device or FIFO ``target`` (``-``: stdout),
    for outputs that must be built as a file first (a database)."""
    with open(source, "rb") as src:
        if target == "-":
            import sys

            sys.stdout.flush()
            shutil.copyfileobj(src, sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return
        with open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
