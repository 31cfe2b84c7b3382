"""What makes a file an SQLite database, and which file a store path names: the file's
identity, shared by the SQLite backend (a file is checked to be a store before anything is
written to it) and the exports (which never write over the store or a database)."""

from __future__ import annotations

import contextlib
import os
import urllib.parse

#: The files SQLite keeps beside a database.
SIBLINGS = ("", "-wal", "-shm", "-journal")
SQLITE_HEADER = b"SQLite format 3\x00"


def store_file(path: str) -> str | None:
    """The real file behind a store path (``None`` for an in-memory store)."""
    if path in ("", ":memory:") or path.startswith("file::memory:"):
        return None
    if path.startswith("file:"):
        parsed = urllib.parse.urlparse(path)
        if urllib.parse.parse_qs(parsed.query).get("mode") == ["memory"]:
            return None
        path = urllib.parse.unquote(parsed.path)
    return os.path.realpath(path)


def is_sqlite_file(path: str) -> bool:
    """Whether ``path`` is an existing file that begins with SQLite's header."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def remove_database(path: str) -> None:
    """Remove the database file ``path`` and the files SQLite keeps beside it."""
    for suffix in SIBLINGS:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)
