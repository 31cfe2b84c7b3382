"""``Store``'s archive verbs: everything a store holds, written out and read back losslessly
(docs/reference/archive.md).

The format is :mod:`agui_store.engine.archive`'s, and an import lands through the same code
as :func:`agui_store.copy`; a path is checked and written by the rules every export keeps
(:mod:`agui_store.exports.targets`: never over the store, never over a database).
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agui_store.engine import archive, intake, reads, revisions
from agui_store.engine.arguments import a_kind, check_progress, check_thread_id, flag, quote
from agui_store.errors import (
    ArgumentTypeError,
    CorruptStoreError,
    InvalidArgumentError,
    StorageError,
)
from agui_store.exports.targets import check_source, check_target, write_file
from agui_store.facade.base import Facade

__all__ = ["ArchiveVerbs"]


class ArchiveVerbs(Facade):
    """``Store``'s :meth:`export_archive` and :meth:`import_archive`."""

    def export_archive(
        self,
        target: str | os.PathLike[str] | Any,
        *,
        thread_id: str | None = None,
        scope: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> archive.ArchiveResult:
        """Write everything the store holds for a thread, or for every thread, in the
        lossless archive format (docs/reference/archive.md): runs with their inputs,
        lineage, status, times and content hashes, events byte for byte, branches, owners,
        and the pydantic-ai conversations linked to the threads (with no ``thread_id``: every
        conversation, the owner's alone with a ``scope``). :meth:`import_archive` reads it
        back.

        Read from one snapshot, a thread at a time (memory follows the largest thread). A
        path is written whole or not at all (never over the store or a database).

        Args:
            target: a path, or a file object (binary, or text: ``io.StringIO``, a file
                opened with ``"w"``).
            thread_id: only this thread (and its conversations).
            scope: only this owner's threads (another owner's thread is absent).
            progress: called as ``progress(threads written, threads)``.

        Raises:
            RunNotFoundError: no thread ``thread_id`` (in the ``scope``).
            InvalidArgumentError: ``target`` is an empty path, or one holding a NUL byte or
                a lone surrogate; ``thread_id`` is not a non-empty string (an
                ``ArgumentTypeError``, a ``TypeError`` too, when it is no string).
            ArgumentTypeError: ``target`` is neither a path nor a file object, or
                ``progress`` is not callable (a ``TypeError`` too).
        """
        _check_file(target, "target", "write")
        check_progress(progress)
        check_thread_id(thread_id)
        intake.check_scope(scope)
        counts = archive.ArchiveResult()
        with self.reading() as tx:
            ids = reads.chosen_threads(tx, thread_id, scope, self.path)
            lines = archive.export_lines(
                tx, ids, whole_store=thread_id is None, scope=scope,
                counts=counts, progress=progress,
            )  # fmt: skip
            # A failed write (a full disk, a reader gone: `| head`) is the target's, not the
            # store's: raised as it is, after the read transaction ends.
            failed: OSError | None = None
            try:
                if isinstance(target, (str, os.PathLike)):
                    write_file(check_target(target, self.path), lines)
                elif isinstance(target, io.TextIOBase):  # a text file: the lines are UTF-8
                    for line in lines:
                        target.write(line.decode("utf-8", "surrogatepass"))
                else:
                    for line in lines:
                        target.write(line)
            except OSError as e:
                failed = e
        if failed is not None:
            raise failed
        return counts

    def import_archive(
        self,
        source: str | os.PathLike[str] | Any,
        *,
        progress: Callable[[int], None] | None = None,
        restore_erased: bool = False,
    ) -> archive.ArchiveResult:
        """Import an archive :meth:`export_archive` wrote, whole or not at all: what the
        store lacks of it is added as it was recorded (same run ids, parents, inputs,
        events, status, times, content hashes, branches, owners and conversations), and
        what it holds already is left as it is, so importing again adds nothing.

        A thread this store erased (it keeps a tombstone) is left out with its
        conversations, as :func:`agui_store.copy` leaves it, and counted in
        ``left_erased``; ``restore_erased=True`` takes the tombstone away and imports it.

        Read a line at a time, landed a thread at a time, all in one write transaction.

        Args:
            source: a path, or a file object (binary, or text).
            progress: called with the size of each line read.
            restore_erased: import threads this store erased, too.

        Raises:
            StorageError: a path that cannot be read (none, a folder, no permission).
            InvalidArgumentError: a line that is not an archive record, or a cut archive;
                ``source`` is an empty path, or one holding a NUL byte or a lone surrogate.
            SchemaVersionError: an archive of a newer version.
            HashMismatchError: a record, input or event that is not the one its hash
                covers (an edited archive).
            SyncConflictError: the store holds a run, a thread's owner, a branch or a
                conversation with other content (as :func:`agui_store.copy` refuses it).
            ArgumentTypeError: ``source`` is neither a path nor a file object,
                ``progress`` is not callable, or ``restore_erased`` is not a bool (a
                ``TypeError`` too).
        """
        _check_file(source, "source", "read")
        check_progress(progress)
        flag("restore_erased", restore_erased)  # "no" would bring the erased back
        with contextlib.ExitStack() as stack:
            if isinstance(source, (str, os.PathLike)):
                where = os.fspath(source)
                check_source(where, self.path)
                try:
                    handle: Any = stack.enter_context(Path(where).open("rb"))
                except OSError as e:
                    raise StorageError(
                        f"cannot read the archive {where}: {e.strerror or e}",
                        path=where, errno=e.errno,
                    ) from e
            else:
                where, handle = getattr(source, "name", "the archive"), source
            with self.replicating() as tx:
                result, underived = archive.import_lines(
                    tx, handle, where=str(where), progress=progress,
                    restore_erased=restore_erased,
                )
                if underived and self.derive_on_append:
                    # What the import left, derived as append would have, in its own
                    # transaction: an archive whose runs cannot be replayed (an input naming
                    # messages its parent's view lacks) is refused whole, not landed for
                    # every read of its thread to fail.
                    self._writes.forget()  # the rows landed past what the store remembers
                    try:
                        self._writes.derive(
                            tx, revisions.threads_to_derive(tx, None, None, self.path)
                        )
                    except CorruptStoreError as e:
                        raise InvalidArgumentError(
                            f"{where}: {e.damage}: the archive's runs cannot be replayed; "
                            "nothing was imported"
                        ) from None
        return result


def _check_file(path: Any, role: str, method: str) -> None:
    """An archive's ``target`` or ``source`` (its ``role``): a file object with the
    ``method`` the verb calls (``write``, ``read``), or a path that names a file, refused at
    the call when it is empty or holds what no file name can (a NUL byte, a lone
    surrogate)."""
    if not isinstance(path, (str, os.PathLike)):
        if not callable(getattr(path, method, None)):
            raise ArgumentTypeError(
                f"an archive's {role} is a path or a file object to {method}, not "
                f"{a_kind(path)}"
            )
        return
    text = os.fsdecode(path)  # a path of bytes as the file system reads it
    if not text:
        raise InvalidArgumentError(
            f"an archive's {role} path is empty: a path is needed (or a file object)"
        )
    if "\0" in text:
        raise InvalidArgumentError(f"an archive's {role} path {quote(text)} holds a NUL byte")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        raise InvalidArgumentError(
            f"an archive's {role} path {quote(text)} holds a lone surrogate (an unpaired "
            "\\ud800-\\udfff escape), which no file name can hold"
        ) from None
