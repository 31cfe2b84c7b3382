"""Content addressing: JSON values as blobs named by the sha256 of their canonical encoding.

Pure (no storage). The canonical encoding is JSON with keys sorted and compact separators
(:func:`agui_store.codec.ingest.canonical_bytes`), so equal values share one blob whatever their key
order. Blobs big enough to gain are kept zlib-compressed: zlib is in the standard library and
decompresses at hundreds of MB/s; ``benchmarks/bench_compression.py`` measures it against the
alternatives on real message blobs.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from agui_store.codec.ingest import canonical_bytes

#: ``blobs.codec`` values.
PLAIN = 0
ZLIB = 1

#: Below this size compression does not pay: a view whose message blobs are all plain is
#: assembled inside SQLite in one piece, and small messages gain little from zlib (the
#: LangGraph benchmark measured checkout 54 -> 20 ms for 2% more file with no compressed
#: messages). Large states and tool results still compress.
COMPRESS_MIN_BYTES = 4096
#: Keep the compressed form only when it saves at least this fraction.
COMPRESS_MIN_SAVING = 0.15


def digest(text: bytes) -> bytes:
    """The address of a canonical encoding."""
    return hashlib.sha256(text).digest()


def pack(value: Any) -> tuple[bytes, int, bytes]:
    """``(hash, codec, data)`` for a JSON value."""
    text = canonical_bytes(value)
    return digest(text), *compress(text)


def compress(text: bytes) -> tuple[int, bytes]:
    """``(codec, data)``: zlib when the text is long enough and shrinks enough, else as it is."""
    if len(text) >= COMPRESS_MIN_BYTES:
        packed = zlib.compress(text, 6)
        if len(packed) <= len(text) * (1 - COMPRESS_MIN_SAVING):
            return ZLIB, packed
    return PLAIN, text


def unpack(codec: int, data: bytes) -> bytes:
    """The canonical JSON text of a stored blob."""
    if codec == PLAIN:
        return bytes(data)
    if codec == ZLIB:
        return zlib.decompress(data)
    raise ValueError(f"unknown blob codec {codec}")
