"""Input normalization (docs/design/behaviour.md#compaction): a run's input names what its lineage
already holds by reference instead of repeating it.

A client like ``HttpAgent`` sends the whole history, and its state, with every run, so storing
inputs as sent grows a thread quadratically. Here an input's message list becomes a mix of
``[start, count]`` ranges into the lineage parent's view and literal messages, and a state
equal to the parent's is named instead of copied; expanding against that same view gives back
the input as sent. Pure: no storage.

The stored form is ``(rest, refs)``: ``rest`` is the input without the keys ``refs`` stands
for; ``refs`` is ``{"messages": [...]}`` and/or ``{"state": "parent"}``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agui_store.codec.ingest import canonical_bytes
from agui_store.errors import RUN_CHECK, CorruptStoreError, InvalidEventError
from agui_store.history.blobs import digest
from agui_store.protocol.js import json_equal

#: A normalized message list: ranges of the parent's view, and messages as sent.
Refs = list[Any]


#: Where a base list holds a message with a string id first: its position, or ``None``.
Finder = Callable[[str], "int | None"]
#: Addresses of pieces of a sent list, by ``(start, count)``: the
#: :func:`agui_store.history.blobs.digest` of the canonical JSON array of those messages.
SentChunks = Mapping[tuple[int, int], bytes]
#: A base list as stored: consecutive pieces of it, each ``(address, count)``: the address
#: (:func:`agui_store.history.blobs.digest`) of the canonical JSON array of its next ``count``
#: messages (a checkpoint's chunks and tail segments).
Pieces = Sequence[tuple[bytes, int]]


def normalize(
    sent: Sequence[Any],
    base: Sequence[dict[str, Any]],
    find: Finder | None = None,
    pieces: Pieces | None = None,
    sent_chunks: SentChunks | None = None,
    distinct: int = 0,
) -> Refs | None:
    """``sent`` as references into ``base`` where a message is the one at that place of
    ``base`` (JSON-equal as the client sees it); ``None`` when nothing is shared.

    What the caller knows of ``base`` spares a pass over it, so that an input costs what
    was sent, not the length of ``base`` (a store keeps both for the view it derived last):
    ``find``, where ``base`` holds an id first (without it the ids of ``base`` are indexed
    here); ``pieces``, the addresses ``base`` is stored under, to compare a resent history
    against (without them, or when they differ, the two lists are compared);
    ``sent_chunks``, addresses of pieces of ``sent`` the caller has already computed
    (:func:`full_chunk_addresses`): those pieces are not encoded again; ``distinct``,
    how many of the first messages of ``sent`` the caller knows to be objects with string
    ids, none repeated: they are not checked again."""
    out: Refs = []
    shared = _shared_prefix(sent, base, pieces, sent_chunks, distinct)
    if shared:
        # What HttpAgent sends: the whole history, then the new messages.
        out.append([0, shared])
    rest = sent[shared:]
    if not rest:
        return out or None
    if find is None:
        find = _first_positions(base).get
    for m in rest:
        mid = m.get("id") if isinstance(m, dict) else None
        at = find(mid) if isinstance(mid, str) else None
        if at is not None and (base[at] is m or _same(base[at], m)):
            last = out[-1] if out else None
            if isinstance(last, list) and last[0] + last[1] == at:
                last[1] += 1
            else:
                out.append([at, 1])
            shared += 1
        else:
            out.append(m)
    return out if shared else None


def _first_positions(base: Sequence[Any]) -> dict[str, int]:
    """The first position of each string id of ``base``."""
    where: dict[str, int] = {}
    for j, m in enumerate(base):
        mid = m.get("id") if isinstance(m, dict) else None
        if isinstance(mid, str):
            where.setdefault(mid, j)
    return where


def normalize_input(
    sent: dict[str, Any],
    base_messages: Sequence[dict[str, Any]],
    base_state: Any,
    find: Finder | None = None,
    pieces: Pieces | None = None,
    sent_chunks: SentChunks | None = None,
    distinct: int = 0,
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(rest, refs)`` for an input against its parent's view; ``None`` if nothing is shared
    (``find``, ``pieces``, ``sent_chunks`` and ``distinct``: see :func:`normalize`)."""
    refs: dict[str, Any] = {}
    messages = sent.get("messages")
    if isinstance(messages, list) and messages:
        shared = normalize(messages, base_messages, find, pieces, sent_chunks, distinct)
        if shared is not None:
            refs["messages"] = shared
    if "state" in sent and _same(sent["state"], base_state):
        refs["state"] = "parent"
    if not refs:
        return None
    return {k: v for k, v in sent.items() if k not in refs}, refs


def expand_input(
    rest: dict[str, Any],
    refs: dict[str, Any],
    base_messages: Sequence[dict[str, Any]],
    base_state: Any,
) -> dict[str, Any]:
    """The input as sent, from its stored form and the same parent view."""
    out = dict(rest)
    if "messages" in refs:
        out["messages"] = expand(refs["messages"], base_messages)
    if "state" in refs:
        out["state"] = base_state
    return out


def _same(a: Any, b: Any) -> bool:
    return json_equal(a, b)


def _shared_prefix(
    sent: Sequence[Any],
    base: Sequence[dict[str, Any]],
    pieces: Pieces | None = None,
    sent_chunks: SentChunks | None = None,
    distinct: int = 0,
) -> int:
    """How many of ``sent``'s first messages are ``base``'s first ones, JSON-equal, when
    they all are: ``0`` unless the whole of ``base`` leads ``sent`` (the message-by-message
    path decides the rest). The checks run over whole lists, in C, and over what was sent:
    where ``pieces`` (the addresses ``base`` is stored under) match, ``base`` itself is not
    read at all (its objects are old, scattered in memory: reading them all costs more
    than encoding and hashing the fresh ones)."""
    n = len(base)
    if not n or len(sent) < n:
        return 0
    prefix = list(sent[:n])
    # The message-by-message path refers to messages with string ids, each at its id's
    # first place: with every id a string, and none repeated, that place is its own (equal
    # lists hold equal ids: checking those sent checks those of ``base``).
    if n > distinct:
        if set(map(type, prefix)) != {dict}:
            return 0
        ids = list(map(dict.get, prefix, itertools.repeat("id")))
        if set(map(type, ids)) != {str} or len(set(ids)) != n:
            return 0
    if pieces is not None and _matches(prefix, pieces, sent_chunks):
        return n
    return n if json_equal(prefix, list(base)) else 0


def _matches(
    messages: list[Any], pieces: Pieces, sent_chunks: SentChunks | None = None
) -> bool:
    """Whether ``messages`` is, piece by piece, the canonical text ``pieces`` address: then
    it is JSON-equal to the list stored under them (equal canonical texts are equal values;
    a text that differs may still be equal, ``1`` and ``1.0``: the caller compares then).
    A piece whose address is in ``sent_chunks`` is not encoded again."""
    known = sent_chunks or {}
    at = 0
    try:
        for address, count in pieces:
            if count <= 0:
                return False
            mine = known.get((at, count))  # a fresh dict's lookup: no encoding
            if mine is None:
                mine = digest(canonical_bytes(messages[at : at + count]))
            if mine != address:
                return False
            at += count
    except InvalidEventError:  # not encodable as JSON: the exact comparison says why not
        return False
    return at == len(messages)


def full_chunk_addresses(
    messages: Sequence[Any], size: int, first: int = 0
) -> dict[tuple[int, int], bytes]:
    """The addresses of ``messages``' full chunks of ``size`` (positions 0 to size - 1, then
    size to 2 size - 1...; the rest is left out), by ``(start, size)``, as a checkpoint
    stores its list's chunks; those from position ``first`` on (a multiple of ``size``)
    when given. Empty when a message is not encodable as JSON (a lone surrogate): whoever
    needs them then encodes what it needs and says why not."""
    out: dict[tuple[int, int], bytes] = {}
    try:
        for start in range(first, len(messages) - size + 1, size):
            out[start, size] = digest(canonical_bytes(messages[start : start + size]))
    except InvalidEventError:
        return {}
    return out


def refs_problem(refs: Any) -> str | None:
    """What keeps ``refs`` from being a stored form :func:`expand_input` reads
    (``{"messages": [...]}`` and/or ``{"state": "parent"}``, each range ``[start, count]``
    of ints, ``start >= 0``, ``count >= 1``), in words; ``None`` when it is one. Whether the
    ranges fall inside the parent's view is the view's to say."""
    if not isinstance(refs, dict) or not refs or not set(refs) <= {"messages", "state"}:
        return 'it is not {"messages": [...]} and/or {"state": "parent"}'
    if "state" in refs and refs["state"] != "parent":
        return f'its "state" is {refs["state"]!r}, not "parent"'
    messages = refs.get("messages", [None])
    if not isinstance(messages, list) or not messages:
        return 'its "messages" is not a list of ranges and messages'
    for item in messages:
        if isinstance(item, list) and not (
            len(item) == 2
            and all(type(n) is int for n in item)
            and item[0] >= 0
            and item[1] >= 1
        ):
            return f"the range {item!r} is not [start, count] (start >= 0, count >= 1)"
    return None


def expand(refs: Refs, base: Sequence[dict[str, Any]]) -> list[Any]:
    """The message list ``refs`` stands for, against the same ``base`` it was made from.

    Referenced messages are ``base``'s own objects (the caller decides whether to copy).
    A reference past ``base``'s end raises :class:`CorruptStoreError`.
    """
    out: list[Any] = []
    for item in refs:
        if isinstance(item, list):
            start, count = item
            if start < 0 or start + count > len(base):
                # A store writes no such reference: one came in by an archive written by
                # hand, or an edit of the store.
                raise CorruptStoreError(
                    f"input reference [{start}, {count}] is outside the parent's view of "
                    f"{len(base)} messages",
                    advice=RUN_CHECK,
                )
            out.extend(base[start : start + count])
        else:
            out.append(item)
    return out
