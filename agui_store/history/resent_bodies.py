"""Request bodies that resend what an earlier body sent: read only what is new.

A client like ``HttpAgent`` posts the whole conversation with every run, serialized the same
way each time: the messages array of body n begins with the messages of body n - 1, byte for
byte, followed by what was added since (a client that changed its last messages repeats the
ones before them). Everything an append derives from a message of an input (that it is JSON
within the depth limit, that it is a valid message, its decoded value, the address of the
chunk it belongs to, its lineage id, whether its id was seen before it) is a function of the
JSON text of that message and of those before it. So a store that remembers, for a body it
read, the text of its messages array and what it derived from those messages, reads the
next body of the thread by comparing bytes (``memcmp``) and decoding the rest: the body with
the repeated messages cut out.

What is remembered is content only, checked against the text it was derived from (the
thread id is only where to look): it stays true whatever any store or process writes
meanwhile, and a body that repeats none of it is read whole. Pure: no storage.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import msgspec

from agui_store.history.normalize import SentChunks

#: How many bytes of remembered messages a store keeps (estimated: see ``Seen.weight``):
#: the least recently read threads are forgotten first. The text it holds is at most a
#: third of it.
BUDGET_BYTES = 64 * 1024 * 1024
#: The estimate of what a remembered messages array holds: per byte of its JSON text (the
#: text, its decoded strings) and per message (its objects, its id's place, its lineage
#: id, where it ends). Fitted with ``tracemalloc`` on the benchmark's conversation (3.4 MB
#: held for 0.66 MB of text and 4,000 messages: 3.8 MB estimated) and on short and long
#: user messages (tests/test_resent_body_memo.py). Content made of many small objects takes
#: more: an empty object is 2 bytes of text and 64 of memory.
BYTES_PER_BYTE = 3
BYTES_PER_MESSAGE = 450
#: Bodies with fewer messages are read whole: there is little to gain.
MIN_MESSAGES = 64

_ENVELOPE = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ELEMENTS = msgspec.json.Decoder(list[msgspec.Raw])
_KEY = msgspec.json.Encoder()


@dataclass
class Seen:
    """An earlier body's messages array: its text, and what was derived from the messages.

    Shared by the appends that read bodies repeating it: nobody modifies ``messages`` (the
    list, or the messages in it), ``ids`` or what is derived; a reader gets its own list.
    A body read whole is remembered with ``ends``, ``marks`` and ``places`` left ``None``:
    they are derived when the next body repeats it (most bodies of a client that resends
    nothing are never repeated), each the same whoever derives it, so two threads doing it
    at once is harmless.
    """

    text: bytes  # the array's JSON text, written compactly: b'[{...},{...}]'
    messages: list[Any]  # the array decoded
    ids: list[Any]  # the messages' lineage ids (``checkpoints.lineage_ids``)
    chunks: SentChunks  # the addresses of its full chunks, by (start, size)
    # Where message i's text ends in ``text`` (a ',' or the ']' is there): element_ends;
    # empty when the array is not written compactly (then nothing is repeated).
    ends: array[int] | None = None
    # The sha256 states of ``checkpoints.hash_ids`` over the first 0, 64, 128... ids, to copy
    # and go on with: the digest of any first ids costs the ids after the last mark.
    marks: list[Any] | None = None
    places: dict[str, int] | None = None  # where each string id is first: ``id_places``
    distinct: int = 0  # how many leading messages have string ids, none repeated

    @property
    def weight(self) -> int:
        """The memory it holds, estimated."""
        return BYTES_PER_BYTE * len(self.text) + BYTES_PER_MESSAGE * len(self.messages)

    def message_ends(self) -> array[int]:
        """Where each message of the remembered body ends in its text (found once)."""
        if self.ends is None:
            self.ends = element_ends(self.text) or array("q")
        return self.ends

    def id_index(self) -> tuple[dict[str, int], int]:
        """``places`` and ``distinct``."""
        places = self.places
        if places is None:
            places, distinct = id_places(self.messages)
            self.distinct = distinct  # before places: a reader seeing places sees it
            self.places = places
        return places, self.distinct

    def places_before(self, count: int) -> dict[str, int]:
        """``places`` of the first ``count`` messages (the remembered dict when that is all
        of them): a copy without the ids first found at ``count`` or later, which costs the
        messages after ``count`` (a body that changed the last few)."""
        places = self.id_index()[0]
        if count >= len(self.messages):
            return places
        out = dict(places)
        for message in self.messages[count:]:
            mid = message.get("id") if type(message) is dict else None
            if type(mid) is str and out.get(mid, -1) >= count:
                del out[mid]
        return out


@dataclass(frozen=True)
class Envelope:
    """A request body read as its members' JSON texts, when it is written compactly (no
    whitespace between members, each key as msgspec writes it, no key twice): then the
    texts, joined back, are the body, and where each begins is known."""

    body: bytes
    thread: str | None  # the threadId member when it is a string (where to look)
    messages_at: int  # where the messages array's text begins in ``body``
    messages: bytes  # that text


def envelope(body: bytes) -> Envelope | None:
    """``body`` as an :class:`Envelope`, or ``None`` when it is anything else (not a JSON
    object, not compact, a key twice, no messages array): such a body is read whole."""
    if body[:1] != b"{" or b"\n" in body or b"\r" in body:
        return None  # JSON Lines (or pretty-printed): the parser decides what it is
    try:
        members = _ENVELOPE.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    raw_messages = members.get("messages")
    if raw_messages is None:
        return None
    parts = [b"{"]
    at = 1
    messages_at = -1
    for key, value in members.items():
        if len(parts) > 1:
            parts.append(b",")
            at += 1
        spelled = _KEY.encode(key) + b":"
        if key == "messages":
            messages_at = at + len(spelled)
        parts += (spelled, value)  # joined from its buffer, uncopied
        at += len(spelled) + len(value)
    parts.append(b"}")
    if at + 1 != len(body) or b"".join(parts) != body:
        return None  # whitespace, a key spelled otherwise, or a member given twice
    messages = body[messages_at : messages_at + len(raw_messages)]
    if messages[:1] != b"[":
        return None
    thread = members.get("threadId")
    thread_id = _decode(thread) if thread is not None and len(thread) < 4096 else None
    return Envelope(body, thread_id if isinstance(thread_id, str) else None, messages_at, messages)


def _decode(raw: msgspec.Raw) -> Any:
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def element_ends(text: bytes, offset: int = 0) -> array[int] | None:
    """Where each element of the JSON array ``text`` ends: the place of the ',' or ']' after
    it, plus ``offset``; when the array is written compactly (no whitespace), else ``None``."""
    try:
        elements = _ELEMENTS.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    # Element i ends after the '[', the first i + 1 elements and the i commas between them.
    sizes = itertools.accumulate(map(len, elements))
    ends = array("q", map(operator.add, sizes, range(1, 1 + len(elements))))
    if len(text) != (ends[-1] + 1 if elements else 2):
        return None
    if offset:
        ends = array("q", map(offset.__add__, ends))
    return ends


def shared(found: Envelope, seen: Seen) -> int:
    """How many of ``seen``'s messages lead the body's messages array, byte for byte."""
    new, ends = found.messages, seen.message_ends()
    common = _common_prefix(new, seen.text)
    count = bisect.bisect_right(ends, common)
    # A message whose text is repeated and then followed by another separator (or nothing)
    # is not repeated: count only those followed by ',' or ']' in the body too.
    while count and new[ends[count - 1] : ends[count - 1] + 1] not in (b",", b"]"):
        count -= 1
    return count


def without_shared(found: Envelope, seen: Seen, count: int) -> tuple[bytes, int]:
    """The body with ``seen``'s first ``count`` messages cut out of its messages array (they
    lead it: :func:`shared`), and where the messages after them begin in the array's text."""
    end = seen.message_ends()[count - 1]
    start = end + 1 if found.messages[end : end + 1] == b"," else end
    at = found.messages_at
    return found.body[:at] + b"[" + found.body[at + start :], start


def id_places(
    messages: list[Any], start: int = 0, places: dict[str, int] | None = None, distinct: int = 0
) -> tuple[dict[str, int], int]:
    """Where each string id of ``messages`` is first, and how many leading messages are
    objects with string ids, none repeated; going on from ``messages[:start]``'s (``places``
    holding only places before ``start``; ``distinct`` at most ``start``), which are not
    modified."""
    if not start and set(map(type, messages)) == {dict}:
        found = _distinct_places(list(map(dict.get, messages, itertools.repeat("id"))))
        if found is not None:
            return found
    out = dict(places) if places else {}
    growing = distinct == start
    for at in range(start, len(messages)):
        message = messages[at]
        mid = message.get("id") if type(message) is dict else None
        if type(mid) is not str or mid in out:
            growing = False
        else:
            out[mid] = at
        if growing:
            distinct = at + 1
    return out, distinct


def _distinct_places(ids: list[Any]) -> tuple[dict[str, int], int] | None:
    """:func:`id_places` in C when the ids are strings, none repeated; else ``None``."""
    if ids and set(map(type, ids)) != {str}:
        return None
    # Each id's first place wins, being the last one assigned in reverse order.
    first = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1)))
    return (first, len(ids)) if len(first) == len(ids) else None


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of ``a`` and ``b``: a binary search of
    ranged compares in C, none copied, about ``2 * len`` bytes compared in all."""
    n = min(len(a), len(b))
    view = memoryview(b)
    if a.startswith(view[:n]):
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a.startswith(view[lo:mid], lo):
            lo = mid
        else:
            hi = mid
    return lo


class Memo:
    """The last body's messages of the threads read most recently, at most
    :data:`BUDGET_BYTES` (estimated) in all: safe to share between threads."""

    def __init__(self, budget: int = BUDGET_BYTES) -> None:
        self.budget = budget
        self._seen: OrderedDict[str, Seen] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, thread: str | None) -> Seen | None:
        """What was remembered of a thread's last body, or ``None``."""
        if thread is None:
            return None
        with self._lock:
            seen = self._seen.get(thread)
            if seen is not None:
                self._seen.move_to_end(thread)
            return seen

    def put(self, thread: str | None, seen: Seen) -> None:
        """Remember ``seen`` as ``thread``'s (in place of what was), forgetting the least
        recently read threads over the budget; a body heavier than the budget alone is
        not kept."""
        if thread is None:
            return
        with self._lock:
            old = self._seen.pop(thread, None)
            if old is not None:
                self._weight -= old.weight
            if seen.weight > self.budget:
                return
            self._seen[thread] = seen
            self._weight += seen.weight
            while self._weight > self.budget:
                _, dropped = self._seen.popitem(last=False)
                self._weight -= dropped.weight

    @property
    def weight(self) -> int:
        """The estimated bytes held now (at most ``budget``)."""
        return self._weight

    def __len__(self) -> int:
        return len(self._seen)

    def clear(self) -> None:
        """Forget every body."""
        with self._lock:
            self._seen.clear()
            self._weight = 0

    def after_fork(self) -> None:
        """In a forked child: a lock another thread of the parent held stays held there."""
        self._lock = threading.Lock()
