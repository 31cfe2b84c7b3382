"""Content-addressed checkpoints: the restored view at the end of a run, kept as blobs.

A checkpoint holds a run's final view (messages, state, pending interrupts, warnings). Each
message is its own blob (sha256 of its canonical JSON), so branches that share history share
storage, and the message list itself is stored as a delta: the first ``keep`` messages of the
base checkpoint (the nearest one up the lineage: the parent's, with a checkpoint per run)
followed by the run's own rows. Every ``MAX_CHAIN`` checkpoints a full list is written
instead, so rebuilding a list walks a bounded chain.

Every complete run also has a lineage digest (``lineage_digests``: the sha256 of its view's
message ids, what lineage rule 3 compares), with or without a checkpoint.

Both are derived data: they can be dropped and rebuilt from the raw log at any time, and
``checkout`` from a checkpoint equals a full replay (hypothesis state machines check it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from agui_store import blobs, codec, hashing
from agui_store.database import Conn
from agui_store.errors import CorruptStoreError, HashMismatchError, InvalidEventError
from agui_store.patch import PatchError, apply_patch
from agui_store.restore import View

_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])

#: Longest run of delta checkpoints before a full message list is written again.
MAX_CHAIN = 64

#: A run's ancestors up to (and including) the nearest one with a checkpoint, newest first.
#: ``stop`` is 1 on the row that has a checkpoint.
NEAREST = """
WITH RECURSIVE chain(id, depth, stop) AS (
    SELECT ?1, 0, EXISTS (SELECT 1 FROM checkpoints WHERE checkpoints.run = ?1)
    UNION ALL
    SELECT runs.parent, chain.depth + 1,
           EXISTS (SELECT 1 FROM checkpoints WHERE checkpoints.run = runs.parent)
    FROM chain JOIN runs ON runs.id = chain.id
    WHERE chain.stop = 0 AND runs.parent IS NOT NULL
)
SELECT id, stop FROM chain ORDER BY depth
"""

#: The checkpoints whose rows make up a checkpoint's message list (base chain), root first.
BASE_CHAIN = """
WITH RECURSIVE cps(run, base, keep) AS (
    SELECT run, base, keep FROM checkpoints WHERE run = ?
    UNION ALL
    SELECT checkpoints.run, checkpoints.base, checkpoints.keep
    FROM cps JOIN checkpoints ON checkpoints.run = cps.base
)
"""
CHAIN_KEEPS = BASE_CHAIN + "SELECT run, keep FROM cps ORDER BY run"
#: Their message rows with the blobs, in the same order.
MESSAGE_ROWS = (
    BASE_CHAIN
    + """
SELECT cps.run, cm.message, blobs.codec, blobs.data
FROM cps CROSS JOIN checkpoint_messages AS cm ON cm.run = cps.run
CROSS JOIN blobs ON blobs.id = cm.message
ORDER BY cps.run, cm.pos
"""
)

#: The surviving message rows of a checkpoint's list: a row of checkpoint c at position p
#: survives when every later checkpoint in the base chain keeps at least p + 1 messages.
#: In (run, pos) order they are the final list, in order.
SURVIVING = """
WITH RECURSIVE cps(run, base, keep, lim) AS (
    SELECT run, base, keep, length FROM checkpoints WHERE run = ?
    UNION ALL
    SELECT checkpoints.run, checkpoints.base, checkpoints.keep, min(cps.lim, cps.keep)
    FROM cps JOIN checkpoints ON checkpoints.run = cps.base
)
"""
#: Each checkpoint of the base chain with how many of its rows survive, root first.
SURVIVING_LIMITS = SURVIVING + "SELECT run, lim FROM cps ORDER BY run"

#: The message texts of a list in list order, from ``[[run, lim], ...]`` root first: json_each
#: walks that array in order, so the rows come out in list order without a sort, each an
#: integer-key probe into blobs (neighbouring pages: blobs written together sit together).
MESSAGE_TEXTS = f"""
SELECT iif(blobs.codec = {blobs.PLAIN}, blobs.data, agui_inflate(blobs.data))
FROM json_each(?) AS chain
CROSS JOIN checkpoint_messages AS cm
    ON cm.run = chain.value ->> 0 AND cm.pos < chain.value ->> 1
CROSS JOIN blobs ON blobs.id = cm.message
"""

SELECT_CHECKPOINT = """
SELECT c.keep, c.base, c.length, c.chain, s.codec, s.data, i.codec, i.data, w.codec, w.data,
       c.state_base, s.hash, i.hash, w.hash, c.view_hash,
       -- whether the run hash it was derived at is one of the run's (its newest, usually)
       CASE WHEN c.run_hash = (SELECT b.hash FROM batches b WHERE b.run = c.run
                               ORDER BY b.id DESC LIMIT 1) THEN 1
            ELSE EXISTS (SELECT 1 FROM batches b WHERE b.run = c.run AND b.hash = c.run_hash)
       END
FROM checkpoints c JOIN blobs s ON s.id = c.state
LEFT JOIN blobs i ON i.id = c.interrupts
LEFT JOIN blobs w ON w.id = c.warnings
WHERE c.run = ?
"""

#: Store a blob unless its hash is there already; either way, its id (the no-op update makes
#: RETURNING answer for an existing row too).
UPSERT_BLOB = (
    "INSERT INTO blobs(hash, codec, data) VALUES (?, ?, ?) "
    "ON CONFLICT(hash) DO UPDATE SET hash = excluded.hash RETURNING id"
)


#: A checkpoint's own blobs' addresses, the whole state it patches (if it does), and what
#: it recorded: the view digest and the run hash it was derived at.
SELECT_ADDRESSES = """
SELECT s.hash, i.hash, w.hash, a.hash, c.view_hash, c.run_hash
FROM checkpoints c JOIN blobs s ON s.id = c.state
LEFT JOIN blobs i ON i.id = c.interrupts
LEFT JOIN blobs w ON w.id = c.warnings
LEFT JOIN checkpoints ac ON ac.run = c.state_base
LEFT JOIN blobs a ON a.id = ac.state
WHERE c.run = ?
"""

#: A checkpoint's state is stored as patches on its state base's while they number at most
#: ``MAX_STATE_PATCHES`` and their JSON text is at most 1/``STATE_PATCH_SHARE`` of the base
#: state's: loading one applies them all, and beyond that the whole state is smaller.
MAX_STATE_PATCHES = 64
STATE_PATCH_SHARE = 4

#: The whole state a checkpoint's state is patched from.
SELECT_STATE = """
SELECT c.state_base, s.codec, s.data, s.hash FROM checkpoints c JOIN blobs s ON s.id = c.state
WHERE c.run = ?
"""


@dataclass
class Snapshot:
    """A checkpoint loaded: the view, its messages' blob ids (aligned), its chain length,
    and where its state comes from: the checkpoint whose state is stored whole
    (``state_anchor``, itself when ``state_patches`` is None) and the patches since."""

    view: View
    blob_ids: list[int]
    chain: int
    #: sha256 state over the message texts (hashing.messages_hasher), for the next delta
    texts_hasher: Any = None
    state_anchor: int = 0
    state_patches: list[Any] | None = None
    state_bytes: int = 0  # the JSON text of the anchor's whole state


def store_blob(conn: Conn, packed: tuple[bytes, int, bytes]) -> int:
    """The id of a packed blob ``(hash, codec, data)``, storing it unless it is there."""
    return int(conn.execute(UPSERT_BLOB, packed).fetchone()[0])


def store_value(conn: Conn, value: Any) -> int:
    """The id of a JSON value's blob, storing it unless it is there. Looked up before it is
    compressed: a run that leaves a large state as it was costs no compression."""
    return store_text(conn, codec.canonical_bytes(value))[0]


def store_text(conn: Conn, text: bytes) -> tuple[int, bytes]:
    """:func:`store_value` of a value already in its canonical encoding; with its address."""
    digest = blobs.digest(text)
    row = conn.execute("SELECT id FROM blobs WHERE hash = ?", (digest,)).fetchone()
    if row is not None:
        return int(row[0]), digest
    return store_blob(conn, (digest, *blobs.compress(text))), digest


def store_blobs(conn: Conn, packed: list[tuple[bytes, int, bytes]]) -> dict[bytes, int]:
    """The ids of packed blobs by hash, storing those that are not there: two statements
    however many blobs (a checkpoint stores every new message of the runs since the last)."""
    if not packed:
        return {}
    ids = {
        bytes(h): int(i)
        for i, h in conn.executemany(
            "INSERT INTO blobs(hash, codec, data) VALUES (?, ?, ?) "
            "ON CONFLICT(hash) DO NOTHING RETURNING id, hash",
            packed,
        )
    }
    there = [p[0] for p in packed if p[0] not in ids]  # stored before: look them up
    for at in range(0, len(there), 500):  # well under SQLite's limit on parameters
        hashes = there[at : at + 500]
        marks = ",".join("?" * len(hashes))
        for i, h in conn.execute(f"SELECT id, hash FROM blobs WHERE hash IN ({marks})", hashes):
            ids[bytes(h)] = int(i)
    return ids


def has_checkpoint(conn: Conn, run_pk: int) -> bool:
    return conn.execute("SELECT 1 FROM checkpoints WHERE run = ?", (run_pk,)).fetchone() is not None


def nearest(conn: Conn, run_pk: int) -> tuple[int | None, list[int]]:
    """The nearest ancestor (or the run itself) with a checkpoint, and the runs after it,
    root first."""
    rows = conn.execute(NEAREST, (run_pk,)).fetchall()
    found = int(rows[-1][0]) if rows and rows[-1][1] else None
    after = [int(r[0]) for r in rows if not r[1]]
    after.reverse()
    return found, after


def load(conn: Conn, run_pk: int, *, with_hashes: bool = True, verify: bool = True) -> Snapshot:
    """Decode a checkpoint into fresh objects (the caller may mutate them).

    ``with_hashes=False`` (a plain checkout) skips the blob ids and reads the message blobs
    in list order with one query, decoded as one JSON array.

    ``verify`` (the default) checks what is read against what the checkpoint recorded, at the
    cost of one pass over the bytes read: the message texts, state, interrupts and warnings
    give its view digest (so a blob edited, forged with its address recomputed, or a row
    pointed at another blob, all fail), and the run hash it was derived at is one of its
    run's. A failure raises :class:`HashMismatchError` (naming the run by key only: the
    caller knows its names).
    """
    row = conn.execute(SELECT_CHECKPOINT, (run_pk,)).fetchone()
    if row is None:
        raise CorruptStoreError(f"run {run_pk} has no checkpoint")
    (_, _, length, chain, s_codec, s_data, i_codec, i_data, w_codec, w_data, state_base,
     s_addr, i_addr, w_addr, view_hash, run_hash_ok) = row
    if verify and not run_hash_ok:
        raise _mismatch(
            run_pk,
            "its checkpoint was derived from other events than the run now holds (the run "
            "hash it recorded is none of the run's)",
        )
    text = blobs.unpack(s_codec, s_data)
    checked = [(text, s_addr)]
    state = codec.decode(text)
    patches: list[Any] | None = None
    state_bytes = len(text)
    anchor_addr = None
    if state_base is not None:
        patches = state
        state, state_bytes, anchor_addr = _patched_state(
            conn, run_pk, int(state_base), patches, verify=verify
        )
    interrupts, warnings = [], []
    if i_data is not None:
        text = blobs.unpack(i_codec, i_data)
        checked.append((text, i_addr))
        interrupts = codec.decode(text)
    if w_data is not None:
        text = blobs.unpack(w_codec, w_data)
        checked.append((text, w_addr))
        warnings = codec.decode(text)
    anchor = int(state_base or run_pk)
    others = (s_addr, anchor_addr, i_addr, w_addr)
    if not with_hashes:
        limits = conn.execute(SURVIVING_LIMITS, (run_pk,)).fetchall()
        parts = [
            r[0]
            for r in conn.execute(
                MESSAGE_TEXTS, (codec.encode([list(r) for r in limits]).decode(),)
            )
        ]
        if len(parts) != length:
            raise _mismatch(run_pk, f"its checkpoint holds {len(parts)} messages, not {length}")
        array = _json_array(parts)
        if verify:
            inside = memoryview(array)[1:-1]
            _verify(run_pk, checked, hashing.joined_messages_hasher(inside), view_hash, others)
        view = View(codec.decode(array), state, interrupts, warnings)
        return Snapshot(view, [], int(chain), state_anchor=anchor, state_patches=patches,
                        state_bytes=state_bytes)
    own: dict[int, list[tuple[int, bytes]]] = {}
    for cp_run, blob_id, b_codec, b_data in conn.execute(MESSAGE_ROWS, (run_pk,)):
        own.setdefault(cp_run, []).append((blob_id, blobs.unpack(b_codec, b_data)))
    ids: list[int] = []
    texts: list[bytes] = []
    # Root checkpoint first: each keeps a prefix of the list so far, then adds its own rows.
    for cp_run, keep in conn.execute(CHAIN_KEEPS, (run_pk,)):
        del ids[keep:]
        del texts[keep:]
        for blob_id, text in own.get(cp_run, ()):
            ids.append(blob_id)
            texts.append(text)
    if len(ids) != length:
        raise _mismatch(run_pk, f"its checkpoint holds {len(ids)} messages, not {length}")
    hasher = hashing.messages_hasher(texts)
    if verify:
        _verify(run_pk, checked, hasher, view_hash, others)
    view = View(codec.decode(_json_array(texts)), state, interrupts, warnings)
    return Snapshot(view, ids, int(chain), hasher, anchor, patches, state_bytes)


def _mismatch(run_pk: int, what: str) -> HashMismatchError:
    error = HashMismatchError(what)
    error.run_pk = run_pk  # type: ignore[attr-defined]  # the caller names the run
    return error


def _verify(
    run_pk: int,
    checked: list[tuple[bytes, Any]],
    messages: Any,
    view_hash: Any,
    others: tuple[Any, Any, Any, Any],
) -> None:
    """A checkpoint's single blobs (state, interrupts, warnings) as read against their
    addresses, and its content against the digest the checkpoint recorded."""
    for text, address in checked:
        if blobs.digest(text) != address:
            raise _mismatch(
                run_pk,
                f"a blob of its checkpoint does not hash to its address "
                f"{bytes(address).hex()[:hashing.SHORT]}",
            )
    if view_hash is None or hashing.view_digest(messages.digest(), *others) != view_hash:
        raise _mismatch(
            run_pk,
            "its checkpoint holds other content than it was written with (a message blob "
            "edited or forged, or a row pointed at another blob)",
        )


def stored_view_digest(conn: Conn, run_pk: int) -> tuple[bytes, bytes | None, bytes | None]:
    """``(view digest of the content held now, the digest recorded, the run hash
    recorded)`` of a checkpoint: what a migration writes and what a check compares."""
    limits = conn.execute(SURVIVING_LIMITS, (run_pk,)).fetchall()
    texts = [
        bytes(r[0])
        for r in conn.execute(MESSAGE_TEXTS, (codec.encode([list(r) for r in limits]).decode(),))
    ]
    row = conn.execute(SELECT_ADDRESSES, (run_pk,)).fetchone()
    s_addr, i_addr, w_addr, a_addr, recorded, run_hash = row
    digest = hashing.view_digest(
        hashing.messages_hasher(texts).digest(), s_addr, a_addr, i_addr, w_addr
    )
    return digest, recorded, run_hash


def _json_array(parts: list[bytes]) -> bytes:
    """The JSON array of JSON texts (``parts`` is consumed). The brackets go on the end
    pieces: one copy of a view's texts, not three."""
    if not parts:
        return b"[]"
    parts[0] = b"[" + parts[0]
    parts[-1] += b"]"
    return b",".join(parts)


def _patched_state(
    conn: Conn, run_pk: int, state_base: int, patches: Any, *, verify: bool = True
) -> tuple[Any, int, bytes]:
    """The state a checkpoint stores as patches (its state base's, patched; they all applied
    when they were recorded, so they apply as one), the size of the base state's text, and
    its address."""
    row = conn.execute(SELECT_STATE, (state_base,)).fetchone()
    if row is None or row[0] is not None:
        raise CorruptStoreError(
            f"checkpoint of run {run_pk}: its state base {state_base} is not a checkpoint "
            "whose state is stored whole"
        )
    text = blobs.unpack(row[1], row[2])
    if verify and blobs.digest(text) != row[3]:
        raise _mismatch(
            run_pk,
            f"the state its checkpoint patches does not hash to its address "
            f"{bytes(row[3]).hex()[:hashing.SHORT]}",
        )
    try:
        state = apply_patch(codec.decode(text), [op for patch in patches for op in patch])
    except (PatchError, TypeError) as e:
        raise CorruptStoreError(
            f"checkpoint of run {run_pk}: its state patches do not apply: {e}"
        ) from e
    return state, len(text), bytes(row[3])


def lineage_ids(messages: Iterable[Any]) -> list[Any]:
    """The message ids lineage rule 3 compares: activity messages left out, as clients strip
    them from the input they send (``prepareRunAgentInput``)."""
    return [m.get("id") for m in messages if isinstance(m, dict) and m.get("role") != "activity"]


def hash_ids(ids: Iterable[Any], hasher: Any = None) -> Any:
    """A sha256 over lineage ids (:func:`lineage_ids`), continuing ``hasher`` (which is
    copied) when given: digests of id lists that grow by appending extend cheaply."""
    out = hasher.copy() if hasher is not None else hashlib.sha256()
    ids = list(ids)
    if not ids:
        return out
    try:
        # Each id's canonical JSON, as one array encoded and cut apart in C: the digest is
        # over "id\0id\0...", the same bytes the loop below feeds one id at a time.
        texts = _RAW_LIST.decode(codec.canonical_bytes(ids))
    except (InvalidEventError, msgspec.DecodeError):  # lone surrogates: one at a time
        texts = None
    if texts is not None:
        out.update(b"\x00".join(map(bytes, texts)) + b"\x00")
        return out
    for mid in ids:
        out.update(codec.canonical_bytes(mid) + b"\x00")
    return out


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # the usual case (a list that grew), compared in C
        return n
    keep = 0
    while a[keep] == b[keep]:
        keep += 1
    return keep


def prefix_digests(ids: Sequence[Any], hasher: Any = None, done: int = 0) -> dict[bytes, int]:
    """The digest of ``ids[:n]`` (as :func:`hash_ids` computes it) for every n, in one
    pass: digest -> n. Given ``hasher`` holding the first ``done`` ids, for every longer n."""
    digest = hasher.copy() if hasher is not None else hashlib.sha256()
    out = {}
    for n, mid in enumerate(ids[done:], start=done + 1):
        digest.update(codec.canonical_bytes(mid) + b"\x00")
        out[digest.copy().digest()] = n
    return out


def write(
    conn: Conn,
    run_pk: int,
    view: View,
    blob_ids: list[int],
    base: tuple[int, list[int], int] | None,
    ids_digest: bytes,
    now: int,
    state_patches: tuple[int, list[Any]] | None = None,
    *,
    messages_digest: bytes,
    run_hash: bytes | None,
) -> tuple[int, int]:
    """Store a run's checkpoint; returns its chain length, and the size of the JSON text its
    state is stored as.

    Args:
        blob_ids: the blob of each message of ``view``; ``messages_digest`` the digest of
            their texts (:func:`hashing.messages_hasher`).
        base: ``(base run, its blob ids, its chain length)`` to store the list as a delta.
        ids_digest: the digest of the view's lineage ids (:func:`hash_ids`).
        state_patches: ``(state base, patches)`` to store the state as the patches that
            turn that checkpoint's (whole) state into ``view.state``.
        run_hash: the run's hash now (what the checkpoint is derived from).
    """
    keep, base_run, chain = 0, None, 1
    if base is not None and base[2] < MAX_CHAIN:
        keep = common_prefix(base[1], blob_ids)
        if keep:
            base_run, chain = base[0], base[2] + 1
    state_base = state_patches[0] if state_patches is not None else None
    state_text = codec.canonical_bytes(
        state_patches[1] if state_patches is not None else view.state
    )
    state, state_addr = store_text(conn, state_text)
    interrupts = warnings = None
    interrupts_addr = warnings_addr = anchor_addr = None
    if view.interrupts:
        interrupts, interrupts_addr = store_text(conn, codec.canonical_bytes(view.interrupts))
    if view.warnings:
        warnings, warnings_addr = store_text(conn, codec.canonical_bytes(view.warnings))
    if state_base is not None:
        anchor_addr = bytes(
            conn.execute(
                "SELECT blobs.hash FROM checkpoints JOIN blobs ON blobs.id = checkpoints.state "
                "WHERE checkpoints.run = ?",
                (state_base,),
            ).fetchone()[0]
        )
    view_hash = hashing.view_digest(
        messages_digest, state_addr, anchor_addr, interrupts_addr, warnings_addr
    )
    conn.execute(
        "INSERT INTO checkpoints(run, base, keep, length, chain, state, interrupts, warnings, "
        "ids_hash, created_at, state_base, run_hash, view_hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_pk,
            base_run,
            keep,
            len(blob_ids),
            chain,
            state,
            interrupts,
            warnings,
            ids_digest,
            now,
            state_base,
            run_hash,
            view_hash,
        ),
    )
    conn.executemany(
        "INSERT INTO checkpoint_messages(run, pos, message) VALUES (?, ?, ?)",
        [(run_pk, pos, blob_ids[pos]) for pos in range(keep, len(blob_ids))],
    )
    return chain, len(state_text)


def drop_from(conn: Conn, run_pk: int) -> list[int]:
    """Drop the checkpoints and lineage digests of a run and of every run below it (their
    views derive from it); returns those runs.

    Only needed when a complete run receives view-changing events, which sequence checks
    forbid; with ``check_sequence=False`` it can happen.
    """
    below = [
        int(r[0])
        for r in conn.execute(
            "WITH RECURSIVE sub(id) AS (SELECT ? UNION ALL SELECT runs.id FROM runs "
            "JOIN sub ON runs.parent = sub.id) SELECT id FROM sub",
            (run_pk,),
        )
    ]
    for pk in sorted(below, reverse=True):
        conn.execute("DELETE FROM checkpoint_messages WHERE run = ?", (pk,))
        conn.execute("DELETE FROM checkpoints WHERE run = ?", (pk,))
    # Keyed by digest, so this scans the table: fine for a path only sequence-unchecked
    # recording reaches.
    conn.execute(
        "DELETE FROM lineage_digests WHERE run IN (SELECT value FROM json_each(?))",
        (codec.encode(below).decode(),),
    )
    return below
