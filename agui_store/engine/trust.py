"""What one database connection has verified of the blobs it read: a blob is trusted after
its first read on the connection hashes to its address.

A blob's row is never rewritten (content-addressed, append-only), so a read that found its
text hashing to its address vouches for the next read of it on the same connection; a
checkout that restores a long conversation then pays SHA-256 for what it reads for the first
time only (``benchmarks/bench_short_turns.py`` measures it). The rest of a read's checks still
run every time: the addresses against the checkpoint's view digest, the checkpoint's run hash
against the run's. On SQLite the trust lasts while no other connection has committed to the
file (its data version): an edit made behind the store's back is found by the next read, as
when every read re-hashed. ``check()`` trusts nothing: it hashes every blob
(docs/design/hashes.md says which check finds which edit).

A backend keeps one :class:`TrustedBlobs` per connection and hands it out with each
transaction (:meth:`agui_store.engine.port.Reading.trusted_blobs`); the engine alone reads
and fills it (:func:`agui_store.engine.checkpoints.load`).

A connection also keeps the messages of the message blobs it read twice, decoded, when each
message is flat (its values strings, numbers, booleans or null): a server restores the same
thread at every turn, and all but the tip's blobs are the ones it read at the turn before. A
read still reads each blob's bytes and checks them as above (hashing them again after another
connection wrote, on SQLite); only their decoding is spared, for a copy of each kept message (a flat
dict's copy shares nothing the caller can change). What is kept is named by address, and
used only for bytes found to be that address's, so it outlasts the trust: the bytes decode
to the same messages whoever wrote since. A blob the database no longer holds (erased by any
connection) is never answered from memory. An erasure on this connection forgets all that
is kept; so does another connection's: on SQLite the first read after it, whose data
version tells that another connection wrote (the erasure log's newest key then tells
whether it erased); on PostgreSQL the notice every erasure sends to the connections that
listen (as each store's does), which comes with the next answer the connection reads; a
connection to a standby server, which can neither listen nor hear of the primary's erasures,
keeps no message.
Past
:data:`KEPT_BYTES` of kept messages in memory (their dicts, keys and values, as
:func:`sys.getsizeof` counts them: a short message's dict takes several times its text),
the least recently read go.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

#: Addresses trusted at most, per connection (about 100 bytes each): past it, the set starts
#: again empty, and re-hashing a blob read again costs what every read cost without it.
LIMIT = 1 << 17


#: The memory the decoded messages a connection keeps take, at most (each blob's list, its
#: dicts, their keys and values, as :func:`sys.getsizeof` counts them; keys the decoder
#: shares are counted all the same): past it, the least recently read go. A short message's
#: dict takes four to ten times its JSON text.
KEPT_BYTES = 24 << 20


class TrustedBlobs:
    """The addresses of the blobs a connection has read and found to hash to them, and the
    decoded messages of the flat message blobs it read more than once."""

    __slots__ = (
        "_addresses", "_erasures", "_keeps", "_kept", "_kept_bytes", "_seen", "_unchecked",
        "_version",
    )

    def __init__(self, *, keeps_messages: bool = True) -> None:
        """``keeps_messages=False``: keep no decoded message, for a connection that no
        erasure would make forget them (one that cannot listen for them)."""
        self._keeps = keeps_messages
        self._addresses: set[bytes] = set()
        self._version: int | None = None
        #: address -> (its messages, the memory they take), least recently read first
        self._kept: dict[bytes, tuple[list[dict[str, Any]], int]] = {}
        self._kept_bytes = 0
        self._seen: set[bytes] = set()  # the message blobs read once, whose messages are not kept
        #: Whether another connection wrote since the kept messages were last held against
        #: the erasure log, and the newest erasure it held then (``None``: never held).
        self._unchecked = False
        self._erasures: int | None = None

    def at(self, version: int | None) -> set[bytes]:
        """The addresses trusted at the database's data version ``version`` (the
        transaction's :meth:`~agui_store.engine.port.Reading.version`, read once it has
        seen the database): none once it differs from the last one asked with, since
        another connection has committed in between (``None``: no version vouches for the
        database, as on PostgreSQL; the trust then lasts for the connection's life). The
        caller adds an address once the blob's text hashed to it."""
        if version != self._version or len(self._addresses) >= LIMIT:
            self._unchecked = self._unchecked or version != self._version
            self._addresses = set()
            self._version = version
        return self._addresses

    def kept_since(self, newest_erasure: Callable[[], int]) -> TrustedBlobs:
        """Itself, once the messages it keeps are held against the erasure log, when
        another connection wrote since they last were: ``newest_erasure()`` (the
        transaction's :meth:`~agui_store.engine.port.Reading.newest_erasure`) tells an
        erasure logged since, by any connection, and then all that is kept is forgotten,
        as after an erasure on this connection. Asked for by a read that trusts, after
        :meth:`at`."""
        if self._unchecked:
            self._unchecked = False
            if self._kept or self._seen:
                newest = newest_erasure()
                if newest != self._erasures:
                    self.forget_messages()
                self._erasures = newest
        return self

    def kept_messages(self, address: bytes) -> list[dict[str, Any]] | None:
        """The messages kept of the blob at ``address`` (never to be changed: the caller
        hands out copies), ``None`` when none are. Only for bytes just found to be the
        address's (trusted or hashed)."""
        found = self._kept.pop(address, None)
        if found is None:
            return None
        self._kept[address] = found  # read most recently: the last to go
        return found[0]

    def keep_messages(self, address: bytes, text: bytes, messages: list[Any]) -> bool:
        """Keep the messages just decoded from ``text``, the bytes of ``address``, when the
        connection read them before and each is a flat dict; say whether they were kept
        (the caller then hands out copies of them, never these). The text of an array of
        objects holds a ``[`` and a ``{`` for each object, and more when a value is nested
        or a string holds one: as many as that means that nothing is nested."""
        if not self._keeps:
            return False
        if address not in self._seen:
            if len(self._seen) >= LIMIT:
                self._seen = set()
            self._seen.add(address)
            return False
        if (
            len(text) > KEPT_BYTES // 4
            or text.count(b"[") != 1
            or text.count(b"{") != len(messages)
            or not all(type(m) is dict for m in messages)
        ):
            return False
        size = _size(messages)
        if size > KEPT_BYTES // 4:
            return False
        self._seen.discard(address)
        self._kept[address] = (messages, size)
        self._kept_bytes += size
        while self._kept_bytes > KEPT_BYTES:
            oldest = next(iter(self._kept))
            self._kept_bytes -= self._kept.pop(oldest)[1]
        return True

    def kept_blobs(self) -> int:
        """How many blobs' messages are kept."""
        return len(self._kept)

    def forget_messages(self) -> None:
        """Drop every kept message (after an erasure: nothing erased stays in memory)."""
        self._kept = {}
        self._kept_bytes = 0
        self._seen = set()


def _size(messages: list[dict[str, Any]]) -> int:
    """The memory a list of flat messages takes: the list, each dict, its keys and values."""
    size = sys.getsizeof
    return size(messages) + sum(
        size(m) + sum(size(k) + size(v) for k, v in m.items()) for m in messages
    )
