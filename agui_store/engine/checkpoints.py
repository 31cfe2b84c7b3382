"""Content-addressed checkpoints: the restored view at the end of a run, kept as blobs.

A checkpoint holds a run's final view (messages, state, pending interrupts, warnings). Its
message list is cut at fixed positions into chunks of ``CHUNK`` messages: positions 0-63,
64-127, and so on. Each full chunk is one blob (the canonical JSON array of its messages,
addressed by its sha256), listed in order by a small manifest blob (a JSON array of the
chunks' blob ids). The messages after the last full chunk (the tail, fewer than ``CHUNK``)
are segments: each a blob holding a JSON array of consecutive messages (usually what one run
added), listed with their lengths by the checkpoint row itself.

So a run that adds a few messages writes one segment of them and a new tail list; every
``CHUNK`` messages it writes one chunk and one manifest. A message edited in place (a
MESSAGES_SNAPSHOT, a late TOOL_CALL_RESULT) rewrites the chunk that holds it and the
manifest: copy on write, the other chunks are shared. Branches share the chunks before their
fork, and ``checkout`` reads one checkpoint row, its manifest, and its chunks and tail blobs
by key: a bounded number of rows (``len / CHUNK + CHUNK``), no walk up the lineage.
Chunks and segments alike are JSON arrays of messages: the list is their insides joined.

Every complete run also has a lineage digest (``lineage_digests``: the sha256 of its view's
message ids, what lineage rule 3 compares), with or without a checkpoint.

Both are derived data: they can be dropped and rebuilt from the raw log at any time, and
``checkout`` from a checkpoint equals a full replay (hypothesis state machines check it).
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from agui_store.codec import ingest
from agui_store.engine import gc_pause
from agui_store.engine.port import (
    CheckpointRow,
    ErasedCheckpoint,
    NewCheckpoint,
    Reading,
    Writing,
)
from agui_store.engine.trust import TrustedBlobs
from agui_store.errors import CorruptStoreError, HashMismatchError, InvalidEventError
from agui_store.history import blobs, hashing
from agui_store.history.diff import common_start
from agui_store.history.lineage import HASH_MARK as HASH_MARK  # the names' old home
from agui_store.history.lineage import hash_from_marks as hash_from_marks
from agui_store.history.lineage import hash_ids as hash_ids
from agui_store.history.lineage import hash_marks as hash_marks
from agui_store.history.lineage import lineage_ids as lineage_ids
from agui_store.history.lineage import prefix_digests as prefix_digests
from agui_store.history.restore import View
from agui_store.protocol.patch import PatchError, apply_patch, known_plain

#: A chunk's messages, read in one call: what it fails on is read again by the codec
#: (:func:`_chunk_messages`), which reads what msgspec alone does not, or says why not.
_JSON_ARRAY = msgspec.json.Decoder(list).decode
_IDS = msgspec.json.Decoder(list[int])
_SEGMENTS = msgspec.json.Decoder(list[tuple[int, int]])

#: Messages in a full chunk. Fixed positions: an edit rewrites the chunk that holds it only.
CHUNK = 64

#: Whether full chunks are kept zlib-compressed when that pays. Off: every chunk is read by
#: every checkout of a run at or below it, and inflating them cost more than the rest of a
#: checkout on the measuring machine (zlib inflated these chunks at 75 MB/s there, where
#: they shrank 3.1x). Tail segments are compressed instead: one
#: is written by every run, and a checkout reads a few of them at most.
COMPRESS_CHUNKS = False
#: A tail segment of at least this many bytes is kept compressed when that saves at least
#: ``SEGMENT_MIN_SAVING`` (a run's new messages, a few KB of JSON, shrink about 2x).
SEGMENT_COMPRESS_MIN_BYTES = 1024
SEGMENT_MIN_SAVING = 0.15


#: A checkpoint's state is stored as patches on its state base's while they number at most
#: ``MAX_STATE_PATCHES`` and their JSON text is at most 1/``STATE_PATCH_SHARE`` of the base
#: state's: loading one applies them all, and beyond that the whole state is smaller.
MAX_STATE_PATCHES = 64
STATE_PATCH_SHARE = 4


@dataclass
class Layout:
    """Where a checkpoint's message list is stored: its manifest (``None``: no full chunk),
    the blob ids and addresses of its full chunks, and of its tail's segments with how many
    messages each holds."""

    manifest: int | None = None
    chunk_ids: list[int] = field(default_factory=list)
    chunk_addrs: list[bytes] = field(default_factory=list)
    tail_ids: list[int] = field(default_factory=list)
    tail_addrs: list[bytes] = field(default_factory=list)
    tail_counts: list[int] = field(default_factory=list)

    def digest(self) -> bytes:
        """Its messages digest (:func:`hashing.messages_digest`)."""
        return hashing.messages_digest([*self.chunk_addrs, *self.tail_addrs])

    def pieces(self) -> list[tuple[bytes, int]]:
        """Its message list in consecutive pieces, ``(address, count)`` each: the full chunks,
        then the tail's segments (what an input that resends the list is compared with)."""
        chunks = zip(self.chunk_addrs, itertools.repeat(CHUNK))
        return [*chunks, *zip(self.tail_addrs, self.tail_counts)]


@dataclass
class Snapshot:
    """A checkpoint loaded: the view, where its list is stored, and where its state comes
    from: the checkpoint whose state is stored whole (``state_anchor``, itself when
    ``state_patches`` is None) and the patches since."""

    view: View
    layout: Layout
    state_anchor: int = 0
    state_patches: list[Any] | None = None
    state_bytes: int = 0  # the JSON text of the anchor's whole state
    skipped: int = 0  # messages left out at the start of ``view.messages`` (a diff's)
    # The address of the anchor's whole state: the next checkpoint that patches it covers
    # it in its view digest, known here so that writing that one needs no query for it.
    state_address: bytes | None = None


def store_value(tx: Writing, value: Any) -> int:
    """The id of a JSON value's blob, storing it unless it is there. Looked up before it is
    compressed: a run that leaves a large state as it was costs no compression."""
    return store_text(tx, ingest.canonical_bytes(value))[0]


def store_text(tx: Writing, text: bytes) -> tuple[int, bytes]:
    """:func:`store_value` of a value already in its canonical encoding; with its address."""
    digest = blobs.digest(text)
    found = tx.blob_id(digest)
    if found is not None:
        return found, digest
    return store_blobs(tx, [(digest, *blobs.compress(text))])[digest], digest


def store_blobs(tx: Writing, packed: list[tuple[bytes, int, bytes]]) -> dict[bytes, int]:
    """The ids of packed blobs ``(address, codec, data)`` by address, storing those that
    are not there (a look-up for those that were)."""
    if not packed:
        return {}
    ids = tx.insert_new_blobs(packed)
    there = [p[0] for p in packed if p[0] not in ids]  # stored before: look them up
    if there:
        ids.update(tx.blob_ids(there))
    return ids


def nearest(tx: Reading, run_pk: int) -> tuple[int | None, list[int]]:
    """The nearest run of the lineage (itself included) with a checkpoint (``None``: none),
    and the lineage's runs after it, root first."""
    walk = tx.checkpoint_walk(run_pk)
    found = walk[-1][0] if walk and walk[-1][1] else None
    after = [pk for pk, stop in reversed(walk) if not stop]
    return found, after


def chunk_text(texts: Sequence[bytes]) -> bytes:
    """A chunk's stored text: the JSON array of its messages' canonical texts."""
    return b"[" + b",".join(texts) + b"]"


def pack_chunk(text: bytes) -> tuple[bytes, int, bytes]:
    """``(hash, codec, data)`` of a full chunk's text."""
    if COMPRESS_CHUNKS:
        return blobs.digest(text), *blobs.compress(text)
    return blobs.digest(text), blobs.PLAIN, text


def pack_segment(text: bytes) -> tuple[bytes, int, bytes]:
    """``(hash, codec, data)`` of a tail segment's text."""
    if len(text) >= SEGMENT_COMPRESS_MIN_BYTES:
        packed = zlib.compress(text, 6)
        if len(packed) <= len(text) * (1 - SEGMENT_MIN_SAVING):
            return blobs.digest(text), blobs.ZLIB, packed
    return blobs.digest(text), blobs.PLAIN, text


def _id_list(run_pk: int, what: str, text: Any) -> list[int]:
    try:
        return _IDS.decode(text)
    except msgspec.DecodeError as e:
        raise CorruptStoreError(
            f"checkpoint of run {run_pk}: its {what} is not a list of blob ids: {e}"
        ) from None


def _segment_list(run_pk: int, text: Any) -> list[tuple[int, int]]:
    try:
        return _SEGMENTS.decode(text)
    except msgspec.DecodeError as e:
        raise CorruptStoreError(
            f"checkpoint of run {run_pk}: its tail is not a list of [blob id, count]: {e}"
        ) from None


def segment_ids(run_pk: int, tail: Any) -> list[int]:
    """The blob ids of a checkpoint's tail segments, from its ``tail`` column."""
    return [blob_id for blob_id, _ in _segment_list(run_pk, tail)]


def manifest_chunks(tx: Reading, manifest_ids: Iterable[int]) -> dict[int, list[int]]:
    """The chunk blob ids each of these manifests lists, by manifest."""
    found: dict[int, list[int]] = {}
    for blob_id, codec_id, data, _address in tx.blobs_in_order(sorted(set(manifest_ids))):
        found[int(blob_id)] = _id_list(-1, f"manifest {blob_id}", blobs.unpack(codec_id, data))
    return found


def _referred(rows: Iterable[ErasedCheckpoint]) -> tuple[set[int], set[int]]:
    """The blobs these checkpoints refer to themselves (state, interrupts, warnings, tail
    segments), and their manifests (whose chunks they refer to through them)."""
    blob_ids: set[int] = set()
    manifests: set[int] = set()
    for run, state, interrupts, warnings, manifest, tail in rows:
        blob_ids.update(int(b) for b in (state, interrupts, warnings) if b is not None)
        if manifest is not None:
            manifests.add(int(manifest))
        blob_ids.update(segment_ids(int(run), tail))
    return blob_ids, manifests


def unshared_blobs(tx: Reading, run_pks: Sequence[int]) -> list[int]:
    """The blobs the checkpoints of these runs refer to (state, interrupts, warnings,
    manifest, its chunks, tail segments) that no checkpoint of another run does: those that
    go when these checkpoints go. Blobs are shared by content, so a blob goes with the last
    checkpoint that refers to it; one left behind would hold a view's text that no erasure
    could find."""
    candidates, manifests = _referred(tx.erased_checkpoints(run_pks))
    chunks: set[int] = set()
    for ids in manifest_chunks(tx, manifests).values():
        chunks.update(ids)
    candidates |= manifests | chunks
    used = tx.blobs_used_elsewhere(sorted(candidates), run_pks) if candidates else set()
    if chunks - used:
        # A chunk is shared through another checkpoint's manifest: read those that could.
        others = [m for m in tx.manifests_elsewhere(run_pks) if m not in manifests or m in used]
        for ids in manifest_chunks(tx, others).values():
            used.update(c for c in ids if c in chunks)
    return sorted(candidates - used)


def unreferenced_blobs(tx: Reading, known: Mapping[int, list[int]] | None = None) -> list[int]:
    """Every blob no checkpoint refers to. A blob goes with the last checkpoint that refers
    to it, so none should be left; earlier versions left some (the message lists of the
    layout before chunks, the blobs of checkpoints dropped below a run that grew). Such a
    blob holds a view's text that an erasure, which follows checkpoints, never reaches.
    ``known``: chunk lists of manifests the caller has decoded already, by manifest."""
    referenced, manifests = _referred(tx.erased_checkpoints(tx.all_run_pks()))
    known = known or {}
    for ids in [*manifest_chunks(tx, manifests - known.keys()).values(), *known.values()]:
        referenced.update(ids)
    return sorted(set(tx.every_blob_id()) - referenced - manifests)


def delete_unreferenced_blobs(tx: Writing) -> int:
    """Delete every blob no checkpoint refers to (:func:`unreferenced_blobs`); how many."""
    garbage = unreferenced_blobs(tx)
    if garbage:
        tx.delete_blobs(garbage)
    return len(garbage)


def drop_derived_from(tx: Writing, run_pk: int) -> list[int]:
    """Drop what was derived from a run and every run below it (their checkpoints, lineage
    digests and search rows), with the blobs no other checkpoint refers to; the runs."""
    below = [run_pk, *tx.derived_descendants(run_pk)]  # an underived run has no checkpoint
    garbage = unshared_blobs(tx, below)
    dropped = tx.drop_derived_from(run_pk)
    if garbage:
        tx.delete_blobs(garbage)
    return dropped


def load(
    tx: Reading,
    run_pk: int,
    *,
    verify: bool = True,
    trust: bool = False,
    skip_chunks: int = 0,
) -> Snapshot:
    """Decode a checkpoint into fresh objects (the caller may mutate them): its row with its
    manifest, then its chunks and tail segments in list order with one query, each decoded
    on its own. The layout (ids and addresses) comes with every load, at no extra cost.

    ``verify`` (the default) checks what is read against what the checkpoint recorded, at the
    cost of one pass over the bytes read: each chunk and segment text against its address,
    and those addresses, the state, interrupts and warnings against its view digest (so a
    blob edited, forged with its address recomputed, or a row or list pointed at another
    blob, all fail); and that the run hash it was derived at is one of its run's. A failure
    raises :class:`HashMismatchError` (naming the run by key only: the caller knows its
    names).

    ``trust``: a blob this connection read before and found to hash to its address is not
    hashed again (:mod:`agui_store.engine.trust`); the other checks run all the same.
    Reads trust; ``check()`` does not.

    ``skip_chunks``: leave out the first full chunks (``view.messages`` then starts at
    ``skip_chunks * CHUNK``). Only their addresses are read, for the view digest.
    """
    row, layout = _header(tx, run_pk)
    skip = min(skip_chunks, len(layout.chunk_ids))
    return _finish(tx, run_pk, row, layout, skip, _Reads(tx, trust), verify=verify)


def load_if_any(tx: Reading, run_pk: int, *, trust: bool = False) -> Snapshot | None:
    """:func:`load` of a run's own checkpoint, ``None`` when it has none: its row is the
    probe (a checkout of a complete run needs no walk up its lineage)."""
    row, blob_rows = tx.checkpoint_with_blobs(run_pk)
    try:
        if row is None:
            return None
        layout = _layout(run_pk, row)
        return _finish(tx, run_pk, row, layout, 0, _Reads(tx, trust), blob_rows=blob_rows)
    finally:
        _close(blob_rows)  # read to the end already, unless something failed first


def load_read(
    tx: Reading,
    run_pk: int,
    row: CheckpointRow,
    blob_rows: list[tuple[int, int, bytes, bytes]] | None,
    *,
    trust: bool = False,
) -> Snapshot | None:
    """:func:`load` of a checkpoint whose row, and maybe blobs, were read already
    (:meth:`~agui_store.engine.port.Reading.run_checkout`), verified alike. With the blobs
    given, nothing more is read: ``None`` when they are not the ones its layout lists (the
    backend could not list them), for the caller to load it the long way. Without them,
    they are read (:meth:`~agui_store.engine.port.Reading.blobs_in_order`)."""
    layout = _layout(run_pk, row)
    try:
        return _finish(
            tx, run_pk, row, layout, 0, _Reads(tx, trust), blob_rows=blob_rows, given_only=True
        )
    except _Unlisted:
        return None


def load_past_shared(
    tx: Reading, run_pks: Sequence[int], *, skip_shared: bool = True, trust: bool = False
) -> list[Snapshot] | None:
    """Checkpoints loaded to be compared (a diff), verified as :func:`load` verifies them,
    reading what they share once: git compares trees by hash the same way.

    Each view leaves out the leading blobs (full chunks, then tail segments) that every
    checkpoint's list starts with (``Snapshot.skipped`` counts their messages): the same
    blob at the same place holds the same messages on every side, so comparing what follows
    finds the same changes (positions and repeated ids shift alike on every side). Their
    addresses are read once, for the view digests. A state base several checkpoints patch
    is read and decoded once, and checkpoints whose states have the same addresses (the
    same whole state, or the same patches on the same base) share one state object:
    comparing them costs nothing; a state whose patches continue another's (a descendant's
    on the same base) is that state with the patches that follow applied. The views share
    objects, so they are for reading only.

    ``skip_shared=False`` leaves nothing out (what is read once still is).
    ``None`` when one of the runs has no checkpoint.
    """
    headers = []
    for run_pk in run_pks:
        try:
            headers.append(_header(tx, run_pk))
        except _NoCheckpoint:
            return None
    lists = [[*layout.chunk_ids, *layout.tail_ids] for _, layout in headers]
    skip = shared_prefix(lists) if skip_shared else 0
    reads = _Reads(tx, trust)
    # Ancestors first (a parent's key is smaller): a descendant's state continues theirs.
    loaded = {
        run_pk: _finish(tx, run_pk, row, layout, skip, reads)
        for run_pk, (row, layout) in sorted(zip(run_pks, headers), key=lambda x: x[0])
    }
    return [loaded[run_pk] for run_pk in run_pks]


def layout_of(tx: Reading, run_pk: int) -> Layout | None:
    """Where a run's checkpoint keeps its message list (blob ids and counts, no
    addresses), ``None`` when the run has no checkpoint: its row and manifest alone."""
    try:
        return _header(tx, run_pk)[1]
    except _NoCheckpoint:
        return None


class _NoCheckpoint(CorruptStoreError):
    """The run has no checkpoint (an error for :func:`load`, an answer for a diff)."""


class _Unlisted(Exception):
    """The blobs read with a checkpoint's row are not the ones its layout lists, and no
    more may be read (:func:`load_read`)."""


class _Reads:
    """What loading several checkpoints together reads once: the addresses of the blobs
    they all start with, and the states they patch (or hold) by address; and the addresses
    of the blobs found to hash to them (:mod:`agui_store.engine.trust`)."""

    def __init__(self, tx: Reading, trust: bool) -> None:
        # Asked for once the transaction has read the database (its header row): the data
        # version is then the one of what it reads.
        self._trusted: set[bytes] | None = None
        self._tx = tx if trust else None
        self.prefix: list[bytes] | None = None
        self.bases: dict[int, tuple[Any, int, bytes]] = {}
        self.states: dict[tuple[bytes, bytes | None], Any] = {}
        #: by state base: (patch list's text, how many patches, the state they make)
        self.patched: dict[int, list[tuple[bytes, int, Any]]] = {}

    def patched_state(
        self, run_pk: int, state_base: int, text: bytes, patches: Any, document: Any
    ) -> Any:
        """The state a checkpoint's patches make of its state base's ``document``,
        continuing from a state loaded before whose patch list this one's starts with
        (the state of a run nearer the base, on the same lineage): only the patches after
        it are applied. The patches are one per run, so applying them in two steps is
        what recording them did."""
        start, done = document, 0
        for earlier, count, state in self.patched.get(state_base, ()):
            # A canonical JSON array that starts with another's elements and a comma
            # holds those elements first.
            if done < count < len(patches) and text.startswith(earlier[:-1] + b","):
                start, done = state, count
        state = _patched(run_pk, start, patches[done:])
        self.patched.setdefault(state_base, []).append((text, len(patches), state))
        return state

    def trusted(self) -> set[bytes]:
        """The addresses whose blobs need no hashing: what the connection verified before
        (trusting), else what this load verified so far. A blob found to hash to its
        address is added."""
        if self._trusted is None:
            tx = self._tx
            self._trusted = set() if tx is None else tx.trusted_blobs().at(tx.version())
        return self._trusted

    def kept(self) -> TrustedBlobs | None:
        """The connection's memory of the blobs it read, when trusting (else ``None``: a
        load that trusts nothing decodes everything it reads), asked for after
        :meth:`trusted`."""
        tx = self._tx
        return None if tx is None else tx.trusted_blobs().kept_since(tx.newest_erasure)

    def prefix_addresses(self, tx: Reading, blob_ids: list[int]) -> list[bytes]:
        if self.prefix is None or len(self.prefix) != len(blob_ids):
            self.prefix = [bytes(a) for _, a in tx.addresses_in_order(blob_ids)]
        return self.prefix


def _header(tx: Reading, run_pk: int) -> tuple[CheckpointRow, Layout]:
    """A checkpoint's row and where its list is stored (ids and counts; no addresses yet)."""
    row = tx.checkpoint_row(run_pk)
    if row is None:
        raise _NoCheckpoint(f"run {run_pk} has no checkpoint")
    return row, _layout(run_pk, row)


def _layout(run_pk: int, row: CheckpointRow) -> Layout:
    """Where a checkpoint's list is stored, from its row (ids and counts; no addresses)."""
    manifest, m_data = row.manifest, row.manifest_data
    layout = Layout(int(manifest) if manifest is not None else None)
    if manifest is not None:
        if m_data is None or row.manifest_codec is None:
            raise CorruptStoreError(f"checkpoint of run {run_pk}: its manifest blob is missing")
        layout.chunk_ids = _id_list(run_pk, "manifest", blobs.unpack(row.manifest_codec, m_data))
    segments = _segment_list(run_pk, row.tail)
    layout.tail_ids = [blob_id for blob_id, _ in segments]
    layout.tail_counts = [count for _, count in segments]
    return layout


def _finish(
    tx: Reading,
    run_pk: int,
    row: CheckpointRow,
    layout: Layout,
    skip: int,
    reads: _Reads,
    *,
    verify: bool = True,
    blob_rows: Iterable[tuple[int, int, bytes, bytes]] | None = None,
    given_only: bool = False,
) -> Snapshot:
    """A checkpoint's view from its row and layout, leaving out the first ``skip`` blobs of
    its list (full chunks, then tail segments). ``blob_rows``: its blobs as the backend
    read them with its row (:meth:`~agui_store.engine.port.Reading.checkpoint_with_blobs`), used
    when they are the ones its layout lists; when they are not, read again, or, with
    ``given_only``, :class:`_Unlisted` raised."""
    state_base, s_addr = row.state_base, row.state_address
    if verify and not row.run_hash_ok:
        raise _mismatch(
            run_pk,
            "its checkpoint was derived from other events than the run now holds (the run "
            "hash it recorded is none of the run's)",
        )
    trusted = reads.trusted() if verify else None
    text = _single_blob(run_pk, row.state_codec, row.state_data, s_addr, trusted)
    patches: list[Any] | None = None
    state_bytes = len(text)
    anchor_addr = None
    document: Any = None
    if state_base is not None:
        state_base = int(state_base)
        patches = _decoded(run_pk, "state patches", text)
        document, state_bytes, anchor_addr = _state_base(run_pk, state_base, row, reads, trusted)
    # The same state text (on the same state base) is the same state: decoded once.
    key = (bytes(s_addr), anchor_addr)
    if key in reads.states:
        state = reads.states[key]
    else:
        state = (
            _decoded(run_pk, "state", text)
            if patches is None or state_base is None
            else reads.patched_state(run_pk, state_base, text, patches, document)
        )
        reads.states[key] = state
    interrupts, warnings = [], []
    # A blob's codec and data come together (one joined row), or neither.
    if row.interrupts_data is not None and row.interrupts_codec is not None:
        text = _single_blob(
            run_pk, row.interrupts_codec, row.interrupts_data, row.interrupts_address, trusted
        )
        interrupts = _decoded(run_pk, "interrupts", text)
    if row.warnings_data is not None and row.warnings_codec is not None:
        text = _single_blob(
            run_pk, row.warnings_codec, row.warnings_data, row.warnings_address, trusted
        )
        warnings = _decoded(run_pk, "warnings", text)
    n_chunks = len(layout.chunk_ids)
    listed = [*layout.chunk_ids, *layout.tail_ids]
    skip = min(skip, len(listed))
    addrs: list[bytes] = []
    if skip:
        addrs = list(reads.prefix_addresses(tx, listed[:skip]))
    wanted = listed[skip:]
    read: list[int] = []
    rows = blob_rows if blob_rows is not None and not skip else tx.blobs_in_order(wanted)
    kept = reads.kept() if verify else None
    messages, undecodable = _read_message_blobs(run_pk, rows, addrs, read, trusted, kept)
    if rows is blob_rows and read != wanted:
        if given_only:
            raise _Unlisted(f"checkpoint of run {run_pk}: other blobs than its list")
        # The backend listed other blobs than the layout (it could not read a compressed
        # or unusual manifest, or one is missing): read the layout's, as without it.
        del addrs[skip:]
        rows = tx.blobs_in_order(wanted)
        messages, undecodable = _read_message_blobs(run_pk, rows, addrs, [], trusted, kept)
    if len(addrs) != len(listed):
        raise _mismatch(run_pk, "a blob its checkpoint lists is missing")
    layout.chunk_addrs, layout.tail_addrs = addrs[:n_chunks], addrs[n_chunks:]
    if verify:
        others = (s_addr, anchor_addr, row.interrupts_address, row.warnings_address)
        _verify(run_pk, layout.digest(), row.view_hash, others)
    if undecodable is not None:  # after the digests: a forged blob is named as forged
        raise undecodable
    skipped = min(skip, n_chunks) * CHUNK + sum(layout.tail_counts[: max(0, skip - n_chunks)])
    if len(messages) + skipped != row.length:
        count = len(messages) + skipped
        raise _mismatch(run_pk, f"its checkpoint holds {count} messages, not {row.length}")
    view = View(messages, state, interrupts, warnings)
    anchor = bytes(s_addr) if state_base is None else anchor_addr
    return Snapshot(view, layout, int(state_base or run_pk), patches, state_bytes, skipped, anchor)


def shared_prefix(lists: Sequence[Sequence[int]]) -> int:
    """How many leading blob ids every list shares: the same blob at the same place holds
    the same messages there (content-addressed), so comparing views may skip them. Found by
    halving with slice comparisons (:func:`agui_store.history.diff.common_start`: a manifest lists
    hundreds of chunks)."""
    if not lists:
        return 0
    first = lists[0]
    shared = min(len(ids) for ids in lists)
    for other in lists[1:]:
        shared = common_start(first, other, shared)
    return shared


def _mismatch(run_pk: int, what: str) -> HashMismatchError:
    error = HashMismatchError(what)
    error.run_pk = run_pk  # type: ignore[attr-defined]  # the caller names the run
    return error


def _single_blob(
    run_pk: int, codec_id: int, data: bytes, address: Any, trusted: set[bytes] | None,
    what: str = "a blob of its checkpoint",
) -> bytes:
    """The text of one of a checkpoint's single blobs (state, interrupts, warnings, or the
    state its patches apply to: ``what``), checked against its address before anything
    decodes it (unless ``trusted`` holds the address; ``None``: not checked): a forged blob
    is named as forged, not as the JSON it fails to be."""
    text = blobs.unpack(codec_id, data)  # a failure is translated when the transaction ends
    if trusted is not None:
        address = bytes(address)
        if address not in trusted:
            if blobs.digest(text) != address:
                raise _mismatch(
                    run_pk,
                    f"{what} does not hash to its address {address.hex()[:hashing.SHORT]}",
                )
            trusted.add(address)
    return text


def _decoded(run_pk: int, what: str, text: bytes) -> Any:
    """A checkpoint's stored JSON, decoded; a text that is not JSON is a damaged store (it
    was written as JSON), not bad input."""
    try:
        return ingest.decode(text)
    except InvalidEventError as e:
        raise CorruptStoreError(
            f"checkpoint of run {run_pk}: its {what} is not JSON: {e}"
        ) from None


def _verify(
    run_pk: int,
    messages: bytes,
    view_hash: Any,
    others: tuple[Any, Any, Any, Any],
) -> None:
    """A checkpoint's content (message blobs' addresses, single blobs' addresses) against
    the digest the checkpoint recorded."""
    if view_hash is None or hashing.view_digest(messages, *others) != view_hash:
        raise _mismatch(
            run_pk,
            "its checkpoint holds other content than it was written with (a message blob "
            "edited or forged, or a list pointed at another blob)",
        )


def stored_view_digest(tx: Reading, run_pk: int) -> tuple[bytes, bytes | None, bytes | None]:
    """``(view digest of what the checkpoint points at now, the digest recorded, the run
    hash recorded)``: what a check compares. From the addresses only (each blob's content
    against its address is the blobs check's)."""
    row = tx.checkpoint_addresses(run_pk)
    ids = [blob_id for blob_id, _ in _segment_list(run_pk, row.tail)]
    if row.manifest_data is not None and row.manifest_codec is not None:  # both or neither
        manifest = blobs.unpack(row.manifest_codec, row.manifest_data)
        ids = _id_list(run_pk, "manifest", manifest) + ids
    found = dict(
        (int(i), bytes(h))
        for i, h in tx.addresses_in_order(ids)
    )
    addresses = [found.get(i, b"") for i in ids]
    digest = hashing.view_digest(
        hashing.messages_digest(addresses),
        row.state,
        row.state_base_state,
        row.interrupts,
        row.warnings,
    )
    return digest, row.view_hash, row.run_hash


def _read_message_blobs(
    run_pk: int,
    rows: Iterable[tuple[Any, int, bytes, bytes]],
    addrs: list[bytes],
    ids: list[int],
    trusted: set[bytes] | None,
    kept: TrustedBlobs | None = None,
) -> tuple[list[Any], CorruptStoreError | None]:
    """The messages of a checkpoint's chunks and segments (JSON arrays), read in list order,
    each checked against its address (unless ``trusted`` holds it; ``None``: none checked)
    and decoded as it arrives: a backend that streams them (PostgreSQL) sends the next while
    this one is decoded. Their addresses are appended to ``addrs``, their ids to ``ids``.
    ``kept``: the connection's memory of the blobs it read (:mod:`agui_store.engine.trust`),
    whose kept messages a blob it read before is copied from instead of decoded.

    ``rows`` is always read to the end, whatever is wrong (a stream left half read would
    hold the connection): a blob that fails its address (or cannot be unpacked) raises
    after the last row; one that is not a JSON array of messages is returned instead, to be
    raised once the checkpoint's digests passed, as when every blob was checked before
    any was decoded (a forged blob is reported as forged, not as bad JSON).

    Each is decoded on its own and the lists joined: joining the texts first would copy the
    whole view once more (tens of MB at 10,000 runs). The garbage collector is paused
    meanwhile: a view is tens of thousands of new dicts, and each collection they trigger
    walks every object the process holds, so a long view decoded with it running costs
    more than its length.
    """
    messages: list[Any] = []
    failure: Exception | None = None  # raised once the rows are read
    undecodable: CorruptStoreError | None = None
    try:
        # Shared with appends and other threads' checkouts (agui_store.engine.gc_pause).
        with gc_pause.paused():
            for b_id, b_codec, b_data, b_addr in rows:
                address = bytes(b_addr)
                addrs.append(address)
                ids.append(b_id)
                if failure is not None:
                    continue
                try:
                    text = blobs.unpack(b_codec, b_data)
                except Exception as e:  # raised below, as before, once the rows are read
                    failure = e
                    continue
                if trusted is not None and address not in trusted:
                    if blobs.digest(text) != address:
                        failure = _mismatch(
                            run_pk,
                            f"a blob of its checkpoint does not hash to its address "
                            f"{address.hex()[:hashing.SHORT]}",
                        )
                        continue
                    trusted.add(address)
                if undecodable is not None:
                    continue
                if kept is not None:  # the text is the address's (kept is given with trusted)
                    found = kept.kept_messages(address)
                    if found is not None:
                        messages += map(dict.copy, found)  # the kept ones stay as decoded
                        continue
                try:
                    found = _JSON_ARRAY(text)
                except Exception:  # rare: the codec reads it (a lone surrogate), or says why not
                    slow = _chunk_messages(run_pk, text)
                    if isinstance(slow, CorruptStoreError):
                        undecodable = slow
                    else:
                        messages += slow
                    continue
                if kept is not None and kept.keep_messages(address, text, found):
                    messages += map(dict.copy, found)
                else:
                    messages += found
    finally:
        # An error the loop does not catch (MemoryError, KeyboardInterrupt) leaves a stream
        # half read: closing it now cancels and drains it, before the transaction ends.
        _close(rows)
    if failure is not None:
        raise failure
    return messages, undecodable


def _chunk_messages(run_pk: int, text: bytes) -> list[Any] | CorruptStoreError:
    """A chunk's messages as :func:`agui_store.codec.ingest.decode` reads them (what msgspec
    alone does not, a lone surrogate escaped say), or why its text is not a JSON array."""
    try:
        found = ingest.decode(text)
    except InvalidEventError as e:
        return CorruptStoreError(
            f"checkpoint of run {run_pk}: its message chunks are not JSON: {e}"
        )
    if not isinstance(found, list):
        return CorruptStoreError(
            f"checkpoint of run {run_pk}: a chunk of its messages is not a JSON array"
        )
    return found


def _close(rows: Iterable[Any] | None) -> None:
    """Close a backend's stream of rows (a no-op once read to the end, or for a list)."""
    close = getattr(rows, "close", None)
    if close is not None:
        close()


def _state_base(
    run_pk: int,
    state_base: int,
    row: CheckpointRow,
    reads: _Reads,
    trusted: set[bytes] | None,
) -> tuple[Any, int, bytes]:
    """The whole state a checkpoint's patches apply to (its state base's, decoded once for
    all the checkpoints ``reads`` serves), the size of its text, and its address, from the
    state base's checkpoint as ``row`` (the checkpoint's) holds it."""
    if state_base in reads.bases:
        return reads.bases[state_base]
    if (
        row.base_run is None
        or row.base_state_base is not None
        or row.base_state_codec is None
        or row.base_state_data is None
        or row.base_state_address is None
    ):
        raise CorruptStoreError(
            f"checkpoint of run {run_pk}: its state base {state_base} is not a checkpoint "
            "whose state is stored whole"
        )
    address = bytes(row.base_state_address)
    text = _single_blob(run_pk, row.base_state_codec, row.base_state_data, address, trusted,
                        "the state its checkpoint patches")
    # Decoded JSON is plain: the patches need not walk it to find out.
    found = reads.bases[state_base] = (
        known_plain(_decoded(run_pk, "state base's state", text)),
        len(text),
        address,
    )
    return found


def _patched(run_pk: int, document: Any, patches: Any) -> Any:
    """A state base's state with a checkpoint's patches applied (they all applied when they
    were recorded, so they apply as one); ``document`` is not touched."""
    try:
        return apply_patch(document, [op for patch in patches for op in patch])
    except (PatchError, TypeError) as e:
        raise CorruptStoreError(
            f"checkpoint of run {run_pk}: its state patches do not apply: {e}"
        ) from e


def lay_out(
    tx: Writing,
    messages: Sequence[Any],
    base: Layout | None,
    keep: int = 0,
    changed: Iterable[int] = (),
    along: Sequence[tuple[bytes, int, bytes]] = (),
) -> tuple[Layout, dict[bytes, int]]:
    """Store a message list as chunks, sharing what it has in common with ``base`` (the
    layout of an earlier checkpoint of its lineage); returns its layout, and the ids of
    ``along``: other packed blobs of the checkpoint (its state), stored by the same
    statement as its new chunks and segments.

    The first ``keep`` positions hold the messages ``base``'s list held there, except those
    in ``changed``: a chunk of those is shared, and so is a tail segment (copy on write: a
    changed position rewrites its chunk, or its segment, and the manifest). Anything
    else is encoded and stored unless a blob with its address is there already (a branch
    that arrives at the same content shares it too). The common case, a list that grew by a
    few messages, costs a segment of those messages, the tail list, and every ``CHUNK`` of
    them a chunk and a manifest.
    """
    base = base if base is not None else Layout()
    n = len(messages)
    full = n // CHUNK
    dirty = {pos // CHUNK for pos in changed}
    # The base's chunks that stand in the unchanged prefix, copied as one slice (a long
    # list has hundreds: a loop over them would cost every run the length of the history);
    # then the few that are new or dirty, each encoded whole.
    shared_chunks = min(len(base.chunk_ids), keep // CHUNK, full)
    out = Layout(
        chunk_ids=base.chunk_ids[:shared_chunks], chunk_addrs=base.chunk_addrs[:shared_chunks]
    )
    new: dict[bytes, tuple[bytes, int, bytes]] = {}
    pending: list[tuple[list[int], int, bytes]] = []  # (list, index, address) to resolve
    rewrite = sorted({k for k in dirty if k < shared_chunks} | set(range(shared_chunks, full)))
    out.chunk_ids.extend([0] * (full - shared_chunks))
    out.chunk_addrs.extend([b""] * (full - shared_chunks))
    for k in rewrite:
        lo, hi = k * CHUNK, (k + 1) * CHUNK
        packed = pack_chunk(chunk_text([ingest.canonical_bytes(m) for m in messages[lo:hi]]))
        new[packed[0]] = packed
        out.chunk_addrs[k] = packed[0]
        pending.append((out.chunk_ids, k, packed[0]))
    changed_set = set(changed)
    # The base's segments that stand where they stood, unchanged: by their first position.
    shared: dict[int, tuple[int, bytes, int]] = {}
    lo = len(base.chunk_ids) * CHUNK
    for blob_id, address, count in zip(base.tail_ids, base.tail_addrs, base.tail_counts):
        hi = lo + count
        if lo >= full * CHUNK and hi <= keep and changed_set.isdisjoint(range(lo, hi)):
            shared[lo] = (blob_id, address, count)
        lo = hi
    pos = full * CHUNK
    while pos < n:
        found = shared.get(pos)
        if found is not None:
            out.tail_ids.append(found[0])
            out.tail_addrs.append(found[1])
            out.tail_counts.append(found[2])
            pos += found[2]
            continue
        end = pos + 1  # a new segment: up to the next shared one
        while end < n and end not in shared:
            end += 1
        packed = pack_segment(chunk_text([ingest.canonical_bytes(m) for m in messages[pos:end]]))
        new[packed[0]] = packed
        pending.append((out.tail_ids, len(out.tail_ids), packed[0]))
        out.tail_ids.append(0)
        out.tail_addrs.append(packed[0])
        out.tail_counts.append(end - pos)
        pos = end
    for packed in along:
        new.setdefault(packed[0], packed)
    ids = store_blobs(tx, list(new.values()))
    for listed, at, address in pending:
        listed[at] = ids[address]
    if out.chunk_ids == base.chunk_ids and base.manifest is not None:
        out.manifest = base.manifest
    elif out.chunk_ids:
        out.manifest = store_text(tx, ingest.canonical_bytes(out.chunk_ids))[0]
    return out, ids


def state_text(view: View, state_patches: tuple[int, list[Any]] | None) -> bytes:
    """The text a checkpoint stores its state as: the patches on its state base's when
    given, else the state whole."""
    return ingest.canonical_bytes(state_patches[1] if state_patches is not None else view.state)


def pack_small(text: bytes) -> tuple[bytes, int, bytes] | None:
    """``(hash, codec, data)`` of a text too short to compress, which can be stored along
    the chunks without being looked up first (``None`` for a longer one: it is looked up
    before it is compressed, see :func:`store_value`)."""
    if len(text) >= blobs.COMPRESS_MIN_BYTES:
        return None
    return blobs.digest(text), blobs.PLAIN, text


def write(
    tx: Writing,
    run_pk: int,
    view: View,
    layout: Layout,
    ids_digest: bytes,
    now: int,
    state_patches: tuple[int, list[Any]] | None = None,
    *,
    run_hash: bytes | None,
    anchor_address: bytes | None = None,
    stored_state: tuple[int, bytes, int] | None = None,
) -> tuple[int, bytes]:
    """Store a run's checkpoint, its message list laid out as ``layout`` (its blobs stored
    already: see ``derivation.message_chunks``); returns the size of the JSON text its
    state is stored as, and that text's address.

    Args:
        ids_digest: the digest of the view's lineage ids (:func:`hash_ids`).
        state_patches: ``(state base, patches)`` to store the state as the patches that
            turn that checkpoint's (whole) state into ``view.state``.
        run_hash: the run's hash now (what the checkpoint is derived from).
        anchor_address: the address of the state base's (whole) state, when the caller
            knows it (else it is read).
        stored_state: ``(blob id, address, size)`` of the :func:`state_text` the caller
            stored already (else it is stored here).
    """
    state_base = state_patches[0] if state_patches is not None else None
    if stored_state is not None:
        state, state_addr, state_size = stored_state
    else:
        text = state_text(view, state_patches)
        state, state_addr = store_text(tx, text)
        state_size = len(text)
    interrupts = warnings = None
    interrupts_addr = warnings_addr = anchor_addr = None
    if view.interrupts:
        interrupts, interrupts_addr = store_text(tx, ingest.canonical_bytes(view.interrupts))
    if view.warnings:
        warnings, warnings_addr = store_text(tx, ingest.canonical_bytes(view.warnings))
    if state_base is not None:
        anchor_addr = anchor_address or tx.state_address(state_base)
    view_hash = hashing.view_digest(
        layout.digest(), state_addr, anchor_addr, interrupts_addr, warnings_addr
    )
    tx.insert_checkpoint(
        NewCheckpoint(
            run=run_pk,
            length=len(view.messages),
            manifest=layout.manifest,
            tail=ingest.encode(list(zip(layout.tail_ids, layout.tail_counts))).decode(),
            state=state,
            interrupts=interrupts,
            warnings=warnings,
            ids_hash=ids_digest,
            created_at=now,
            state_base=state_base,
            run_hash=run_hash,
            view_hash=view_hash,
        )
    )
    return state_size, state_addr
