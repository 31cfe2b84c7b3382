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
"""

from __future__ import annotations

#: Addresses trusted at most, per connection (about 100 bytes each): past it, the set starts
#: again empty, and re-hashing a blob read again costs what every read cost without it.
LIMIT = 1 << 17


class TrustedBlobs:
    """The addresses of the blobs a connection has read and found to hash to them."""

    __slots__ = ("_addresses", "_version")

    def __init__(self) -> None:
        self._addresses: set[bytes] = set()
        self._version: int | None = None

    def at(self, version: int | None) -> set[bytes]:
        """The addresses trusted at the database's data version ``version`` (the
        transaction's :meth:`~agui_store.engine.port.Reading.version`, read once it has
        seen the database): none once it differs from the last one asked with, since
        another connection has committed in between (``None``: no version vouches for the
        database, as on PostgreSQL; the trust then lasts for the connection's life). The
        caller adds an address once the blob's text hashed to it."""
        if version != self._version or len(self._addresses) >= LIMIT:
            self._addresses = set()
            self._version = version
        return self._addresses
