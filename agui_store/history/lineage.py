"""Lineage ids and their digests: which messages a run's view holds, as lineage rule 3
compares them (a new run whose input resends a run's messages continues that run), and the
sha256 over them that the store keeps per run to find such a run by one lookup.

Pure functions over plain values: intake, placement, derivation, the cached views and
``check()`` share them, and none touches storage.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from agui_store.codec import ingest
from agui_store.errors import InvalidEventError

_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def lineage_ids(messages: Iterable[Any]) -> list[Any]:
    """The message ids lineage rule 3 compares: activity messages left out, as clients strip
    them from the input they send (``prepareRunAgentInput``)."""
    if type(messages) is list and set(map(type, messages)) == {dict}:
        # The common list, in C: a resent history is thousands of messages long.
        ids = list(map(dict.get, messages, itertools.repeat("id")))
        roles = list(map(dict.get, messages, itertools.repeat("role")))
        if "activity" not in roles:
            return ids
        return [mid for mid, role in zip(ids, roles) if role != "activity"]
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
        texts = _RAW_LIST.decode(ingest.canonical_bytes(ids))
    except (InvalidEventError, msgspec.DecodeError):  # lone surrogates: one at a time
        texts = None
    if texts is not None:
        out.update(b"\x00".join(map(bytes, texts)) + b"\x00")
        return out
    for mid in ids:
        out.update(ingest.canonical_bytes(mid) + b"\x00")
    return out


#: Ids between two digest states of :func:`hash_marks`.
HASH_MARK = 64


def hash_marks(ids: Sequence[Any], marks: Sequence[Any] = ()) -> list[Any]:
    """The states of :func:`hash_ids` over the first 0, ``HASH_MARK``, 2 ``HASH_MARK``...
    of ``ids``, going on from ``marks`` (the first of them, which are kept): with them the
    digest of any first ids costs the ids after the last mark (:func:`hash_from_marks`)."""
    out = list(marks) or [hash_ids([])]
    for end in range(HASH_MARK * len(out), len(ids) + 1, HASH_MARK):
        out.append(hash_ids(ids[end - HASH_MARK : end], out[-1]))
    return out


def hash_from_marks(ids: Sequence[Any], marks: Sequence[Any]) -> Any:
    """``hash_ids(ids)``, going on from the last of ``marks`` (:func:`hash_marks` of ids
    that ``ids`` begins with) within ``ids``."""
    last = min(len(marks) - 1, len(ids) // HASH_MARK)
    return hash_ids(ids[HASH_MARK * last :], marks[last])


def prefix_digests(ids: Sequence[Any], hasher: Any = None, done: int = 0) -> dict[bytes, int]:
    """The digest of ``ids[:n]`` (as :func:`hash_ids` computes it) for every n, in one
    pass: digest -> n. Given ``hasher`` holding the first ``done`` ids, for every longer n."""
    digest = hasher.copy() if hasher is not None else hashlib.sha256()
    out = {}
    for n, mid in enumerate(ids[done:], start=done + 1):
        digest.update(ingest.canonical_bytes(mid) + b"\x00")
        out[digest.copy().digest()] = n
    return out
