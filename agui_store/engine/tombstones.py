"""Tombstones: what a store keeps of an erased thread or pydantic-ai conversation, hashes of
their ids (and of the entries an erased conversation reached) with the time of the erasure,
holding no content and no id (:mod:`agui_store.engine.erasure` lays them). ``copy`` and
``import_archive`` leave what they cover behind, ``check()`` tells an erasure from a loss by
them, and a verb asked for an erased thread says when it was erased.
"""

from __future__ import annotations

import hashlib

from agui_store.engine import port


def thread_hash(thread_id: str) -> bytes:
    """A thread's tombstone: the sha256 of its id, tagged. The same in every store, so that
    two stores compare tombstones without holding the id; a plain hash, so an id that can
    be guessed can be confirmed by hashing the guess (the docs say so)."""
    return hashlib.sha256(
        b"agui-store erased thread 1\x00" + thread_id.encode("utf-8", "surrogatepass")
    ).digest()


def conversation_hash(conversation_id: str) -> bytes:
    """An erased pydantic-ai conversation's tombstone, tagged apart from a thread's (the
    two kept in one table, a conversation often named by its thread's id)."""
    return hashlib.sha256(
        b"agui-store erased conversation 1\x00"
        + conversation_id.encode("utf-8", "surrogatepass")
    ).digest()


def entry_stone(conversation_id: str, entry_id: str) -> bytes:
    """The tombstone of an entry an erased conversation reached: the tagged sha256 of the
    conversation's id and the entry's. A version of that conversation holding such an
    entry is the erased one, or one continued from it elsewhere; one saved anew under the
    id holds none. Another conversation holding the entry (a fork) is not covered: what
    another conversation reaches stays with it."""
    named = conversation_id.encode("utf-8", "surrogatepass")
    return hashlib.sha256(
        b"agui-store erased conversation entry 1\x00"
        + len(named).to_bytes(8, "big") + named
        + entry_id.encode("utf-8", "surrogatepass")
    ).digest()


def entries_stone(conversation_id: str) -> bytes:
    """Marks an erased conversation whose entries have tombstones (:func:`entry_stone`). A
    conversation erased before entries had tombstones has its id's alone, which covers the
    id whatever the time in a store that erased it (:func:`agui_store.engine.replication.
    leave_erased_conversation`)."""
    return hashlib.sha256(
        b"agui-store erased conversation entries 1\x00"
        + conversation_id.encode("utf-8", "surrogatepass")
    ).digest()


def covers(erased_at: int, created_at: int) -> bool:
    """Whether a tombstone laid at ``erased_at`` covers a thread of its id created at
    ``created_at`` (milliseconds since the epoch, as copies keep it): the thread erased, or
    a copy of it, was created at or before its erasure; a thread written under the id
    afterwards is another one."""
    return created_at <= erased_at


def thread_erased_at(tx: port.Reading, thread_id: str) -> int | None:
    """When the store last erased a thread of id ``thread_id`` (milliseconds since the
    epoch), from its tombstone; ``None`` when it keeps none."""
    stone = thread_hash(thread_id)
    return tx.tombstoned([stone]).get(stone)


__all__ = [
    "conversation_hash", "covers", "entries_stone", "entry_stone", "thread_erased_at",
    "thread_hash",
]
