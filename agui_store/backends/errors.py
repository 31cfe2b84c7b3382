"""The errors every backend translates alike: those that do not come from its driver.

Each backend translates its driver's errors into :mod:`agui_store.errors` in one place (its
``translate``), and hands every other error to :func:`translate_common`, so that a damaged
blob, an unstorable argument or running out of memory reads the same on every backend, with
the backend's own name where the limit is the database's.
"""

from __future__ import annotations

import os
import zlib

from agui_store import errors


def translate_common(e: Exception, where: str, *, database: str) -> errors.AguiStoreError:
    """The library error for an error that is not the driver's, met working on the store at
    ``where``.

    Args:
        e: the error (neither an ``AguiStoreError`` nor the driver's own).
        where: the store's path or address, for the message.
        database: the database's name for messages about its limits (``"SQLite"``).
    """
    if isinstance(e, zlib.error):
        return errors.CorruptStoreError(
            f"{where}: a stored blob is damaged (zlib: {e})", advice=errors.RUN_CHECK
        )
    if isinstance(e, UnicodeEncodeError):  # binding a str argument the database's text cannot hold
        return errors.InvalidArgumentError(
            f"a text argument holds {e.object[e.start:e.end]!r} ({e.reason}): no text stored "
            f"in {where} can hold that"
        )
    if isinstance(e, UnicodeDecodeError):
        return errors.CorruptStoreError(
            f"{where}: stored text is not valid UTF-8 ({e.reason})", advice=errors.RUN_CHECK
        )
    if isinstance(e, OverflowError):  # binding an int beyond the database's 64 bits
        return errors.InvalidArgumentError(
            f"a number is out of {database}'s 64-bit integer range ({e}) for {where}"
        )
    if isinstance(e, MemoryError):
        return errors.OutOfMemoryError(f"ran out of memory working on {where}")
    if isinstance(e, OSError):  # a file the call reads besides the store (import_file's source)
        shown = os.fsdecode(e.filename) if e.filename is not None else where
        return errors.StorageError(f"{shown}: {e.strerror or e}", path=shown, errno=e.errno)
    if isinstance(e, RecursionError):
        return errors.InternalError(
            f"data nested too deeply for Python's recursion limit while working on {where}"
        )
    return errors.InternalError(
        f"unexpected {type(e).__name__} working on {where}: {e} (a bug in agui-store: "
        "please report it with this message)"
    )
