"""Content hashes of the log, git style: a run's hash covers its record, its input, its
parent's hash and every batch of its events, so that an edit anywhere in a lineage changes
the hash of every run below it. Pure: the storage layers feed it what they read or write.

How a run's hash is made (every field length-prefixed, so no two layouts collide):

- ``input_digest``: the input as stored (``runs.input`` and ``runs.input_refs``). A
  normalized input refers to its parent's view, which derives from the parent's log, which
  the parent's hash covers: hashing the stored form covers the input whole, at the cost of
  the new content only.
- ``start``: the run's record (thread, run id, lineage reason, the ``parentRunId`` that was
  sent, whether the store named it, when it was created), its parent's hash at the moment the
  run was placed, and ``input_digest``.
- each batch (one ``append`` of the run's events): ``chain(previous, batch_digest)``, where
  ``previous`` is ``start`` for the first batch and the hash of the batch before it after
  that, and ``batch_digest`` covers the batch's events (position in the batch, type, stored
  bytes, and the echo references of a normalized ``RUN_STARTED``), its outcome and its time.

Nothing a store assigns on its own goes into a hash: not the global sequence numbers (another
store numbers the same events otherwise), not row keys, not the order other threads were
written in. An event's place is its position in its batch, and a batch's place in its run is
its place in the chain, so the position of every event in its run is covered; an echo's
references name ranges of its lineage parent's view, which the parent's hash covers. The
same run therefore has the same hash in every store that holds it: after ``copy``, after an
export and import, on SQLite and on PostgreSQL. Recorded times (``created_at``,
``appended_at``) are content: ``copy`` and the lossless export keep them.

The run's hash is the hash of its newest batch: appending costs the batch, not the run or
the history. It is final once the run is complete (one late ``RUN_ERROR`` after
``RUN_FINISHED`` can still extend it, as the log itself allows).

A checkpoint (derived data) records the run hash it was derived at, and ``view_digest``: a
sha256 over the addresses of its message chunks (``messages_digest``) and of its state,
interrupts and warnings blobs, so that a checkout verifies what it reads with one pass over
the bytes it reads, and a checkpoint that shares chunks with its parent's costs what changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

#: Hashes are sha256 digests: 32 bytes.
SIZE = 32
#: How many hex digits ``short`` shows (git shows 7; a store has far fewer objects than
#: a large repository, but ids also travel in logs and tickets).
SHORT = 12

_NONE = b"\xff" * 8  # a missing field, unlike any length prefix


def _field(value: bytes | None) -> bytes:
    if value is None:
        return _NONE
    return len(value).to_bytes(8, "big") + value


def _text(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8", "surrogatepass")


def input_digest(input_text: str | None, refs_text: str | None) -> bytes | None:
    """The digest of a run's input as stored; ``None`` for a run without an input."""
    if input_text is None and refs_text is None:
        return None
    return hashlib.sha256(
        b"agui-store input 1\x00" + _field(_text(input_text)) + _field(_text(refs_text))
    ).digest()


def start(
    *,
    thread_id: str,
    run_id: str,
    lineage: str,
    sent_parent_run_id: str | None,
    synthetic: bool,
    created_at: int,
    parent_hash: bytes | None,
    input_hash: bytes | None,
) -> bytes:
    """The hash a run's batch chain starts from."""
    return hashlib.sha256(
        b"agui-store run 1\x00"
        + _field(_text(thread_id))
        + _field(_text(run_id))
        + _field(_text(lineage))
        + _field(_text(sent_parent_run_id))
        + (b"\x01" if synthetic else b"\x00")
        + int(created_at).to_bytes(8, "big", signed=True)
        + _field(parent_hash)
        + _field(input_hash)
    ).digest()


#: One event as a batch digest sees it: ``(seq, type, payload, echo refs or None)``; the
#: ``seq`` only orders the rows, the digest covers the event's position in its batch.
EventRow = tuple[int, str, str, "str | None"]


#: A type's field in a batch digest (length prefix and UTF-8 name), by type name: the
#: same few names recur on every event.
_KIND_FIELDS: dict[str, bytes] = {}


def _kind_field(kind: str) -> bytes:
    field = _KIND_FIELDS.get(kind)
    if field is None:
        field = _field(_text(kind))
        if len(_KIND_FIELDS) < 1024:  # names a producer made up stay few, or are not kept
            _KIND_FIELDS[kind] = field
    return field


def _batch_header(outcome: str | None, appended_at: int) -> list[bytes]:
    """A batch digest's buffer before its events (they follow, five fields each: position in
    the batch, type, payload length, payload, echo refs)."""
    return [
        b"agui-store batch 2\x00",
        _field(_text(outcome)),
        int(appended_at).to_bytes(8, "big", signed=True),
    ]


def batch_digest(events: Iterable[EventRow], outcome: str | None, appended_at: int) -> bytes:
    """The digest of one batch: its events in order, its outcome and its time, from the
    rows as read back (``check()``, the read paths, ``copy``). An append computes the same
    digest from the bytes it holds: :func:`batch_digest_of`."""
    # One buffer for the batch, fields inlined: a checkout verifies every batch it replays.
    parts = _batch_header(outcome, appended_at)
    for position, (_seq, kind, payload, refs) in enumerate(events):
        payload_bytes = payload.encode("utf-8", "surrogatepass")
        parts += (
            position.to_bytes(8, "big", signed=True),
            _KIND_FIELDS.get(kind) or _kind_field(kind),
            len(payload_bytes).to_bytes(8, "big"),
            payload_bytes,
            _NONE if refs is None else _field(_text(refs)),
        )
    return hashlib.sha256(b"".join(parts)).digest()


def batch_digest_of(
    first_seq: int,
    kinds: Sequence[str],
    payloads: Sequence[bytes],
    refs: Mapping[int, str],
    outcome: str | None,
    appended_at: int,
) -> bytes:
    """:func:`batch_digest` of the events an append is writing, as it holds them: sequence
    numbers from ``first_seq`` on, their types, their stored text already in UTF-8, and the
    echo references by sequence number (``first_seq`` only locates them: the digest covers
    positions in the batch). The same digest, without encoding each payload again (this runs
    on every append)."""
    parts = _batch_header(outcome, appended_at)
    add = parts.extend
    seq = first_seq
    for kind, payload in zip(kinds, payloads):
        ref = refs.get(seq) if refs else None
        add(
            (
                (seq - first_seq).to_bytes(8, "big", signed=True),
                _KIND_FIELDS.get(kind) or _kind_field(kind),
                len(payload).to_bytes(8, "big"),
                payload,
                _NONE if ref is None else _field(_text(ref)),
            )
        )
        seq += 1
    return hashlib.sha256(b"".join(parts)).digest()


def chain(previous: bytes, batch: bytes) -> bytes:
    """The run's hash after a batch."""
    return hashlib.sha256(b"agui-store chain 1\x00" + previous + batch).digest()


def messages_digest(addresses: Iterable[bytes]) -> bytes:
    """The digest of a message list stored as chunks (:mod:`agui_store.engine.checkpoints`): over
    the addresses (sha256 of their text) of its full chunks then of its tail's messages, in
    list order. A Merkle digest: a checkpoint that shares its chunks with another extends the
    shared addresses, so writing one costs what changed, and verifying one hashes each text
    it reads once."""
    return hashlib.sha256(b"agui-store chunks 1\x00" + b"".join(addresses)).digest()


def view_digest(
    messages: bytes,
    state: bytes,
    state_base: bytes | None,
    interrupts: bytes | None,
    warnings: bytes | None,
) -> bytes:
    """The digest of a checkpoint's content: the digest of its message chunks
    (:func:`messages_digest`) and the addresses (sha256 of their text) of its state,
    interrupts and warnings blobs. ``state_base`` is the address of the whole state that
    ``state`` (then a list of patches) applies to."""
    return hashlib.sha256(
        b"agui-store view 1\x00"
        + _field(messages)
        + _field(state)
        + _field(state_base)
        + _field(interrupts)
        + _field(warnings)
    ).digest()


def short(value: bytes | None) -> str | None:
    """The hash as git shows a commit id: the first hex digits."""
    return None if value is None else value.hex()[:SHORT]
