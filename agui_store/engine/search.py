"""Full-text search over the store: the index rows a derived run adds, and the ``search``
verb that reads them.

A message is indexed once per thread, by the first run whose view holds it with that text
(:func:`index_run`, called where a run's view is derived, in the write's transaction): the
row names the thread, that run, the message's id, role and tool, the words of its text
(:mod:`agui_store.history.search`), and where a checkpoint holds the message (a chunk or
segment blob and the position in it), which is where a hit's snippet is read from. A
message a later run changes (a ``MESSAGES_SNAPSHOT``, a late content event) is indexed
again with its new text, by that run. The backend keeps the words in its own full-text
index (SQLite: FTS5; PostgreSQL: a ``tsvector``); :func:`search` asks it for candidates,
newest first, and checks what only the words' order decides (a phrase) here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec

from agui_store.codec import json
from agui_store.engine import checkpoints, port, verified
from agui_store.errors import InvalidArgumentError
from agui_store.history import blobs
from agui_store.history import search as rules
from agui_store.records import SearchHit, SearchHits, when

_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_MESSAGE = msgspec.json.Decoder(dict[str, Any])

#: The most hits one call returns.
MAX_LIMIT = 1000
#: Candidates asked of the database at a time when a phrase must be checked here.
PHRASE_PAGE = 200

#: An index row as :meth:`port.Writing.index_messages` takes it.
IndexRow = port.IndexRow


def message_key(message_id: str, text: str) -> int:
    """What tells one message text from another in a thread: 63 bits of the sha256 of the
    message id and its indexed text."""
    digest = hashlib.sha256(f"{message_id}\0{text}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def changed_positions(
    messages: Sequence[dict[str, Any]], start: int, held: Sequence[dict[str, Any]]
) -> list[int]:
    """The positions of a run's view its events may have added or changed: from ``start``
    (what the reducer reports unmoved, and what it held before the run) to the end, and
    where the messages the run's events named (``held``) stand before that."""
    return sorted([*range(start, len(messages)), *held_before(messages, start, held)])


def held_before(
    messages: Sequence[dict[str, Any]], start: int, held: Sequence[dict[str, Any]]
) -> list[int]:
    """Where the message objects ``held`` stand in ``messages[:start]``, newest first:
    searched from the end, since runs mostly reach recent messages; those at or past
    ``start`` are not looked for."""
    found: list[int] = []
    pending = {id(m) for m in held}
    for m in messages[start:]:
        pending.discard(id(m))
    at = start - 1
    while pending and at >= 0:
        if id(messages[at]) in pending:
            pending.discard(id(messages[at]))
            found.append(at)
        at -= 1
    return found


def in_layout(layout: checkpoints.Layout, position: int) -> tuple[int | None, int | None]:
    """The blob holding a position of a checkpoint's list, and the position in it."""
    full = len(layout.chunk_ids) * checkpoints.CHUNK
    if position < full:
        return layout.chunk_ids[position // checkpoints.CHUNK], position % checkpoints.CHUNK
    rest = position - full
    for blob_id, count in zip(layout.tail_ids, layout.tail_counts):
        if rest < count:
            return blob_id, rest
        rest -= count
    return None, None


def _calls_before(
    messages: Sequence[dict[str, Any]], position: int, message: dict[str, Any]
) -> dict[str, str]:
    """For a tool result, the name of the call it answers, as ``{call id: name}``: looked
    for from its position backwards (the call is nearly always just before it)."""
    call_id = message.get("toolCallId") if message.get("role") == "tool" else None
    if not isinstance(call_id, str):
        return {}
    for at in range(position - 1, -1, -1):
        m = messages[at]
        if isinstance(m, dict) and m.get("toolCalls"):
            names = rules.tool_names([m])
            if call_id in names:
                return names
    return {}


def _storable(text: str) -> bool:
    """Whether every backend's text column takes ``text``: valid Unicode (no lone
    surrogates), and no NUL, which PostgreSQL's text refuses."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\0" not in text


def index_rows(
    messages: Sequence[dict[str, Any]],
    positions: Sequence[int],
    layout: checkpoints.Layout | None,
) -> list[IndexRow]:
    """The index rows of the messages at ``positions`` of a view (those with an id and some
    text), each with where ``layout`` (the run's checkpoint, if it has one) holds it."""
    rows: list[IndexRow] = []
    for p in positions:
        m = messages[p]
        if not isinstance(m, dict):
            continue
        message_id = m.get("id")
        if not isinstance(message_id, str):
            continue
        text = rules.message_text(m)
        found = rules.index_text(text)
        if not found or found.isspace():  # no word to find it by
            continue
        tool = rules.tool_name(m, _calls_before(messages, p, m))
        if tool is not None and not _storable(tool):
            # A name with a lone surrogate or a NUL is legal JSON but not every backend's
            # text can hold it: the hit names no tool, and its words are still found.
            tool = None
        blob, at = in_layout(layout, p) if layout is not None else (None, None)
        rows.append((message_key(message_id, text), p, tool, found, blob, at))
    # A key once (one message object at two positions of a view is one text to find).
    return list({row[0]: row for row in reversed(rows)}.values())[::-1]


#: Whether derived runs are indexed: always, but for the benchmark that measures what the
#: index costs an append (:func:`agui_store.testing.without_search_index`).
INDEXING = [True]


def index_run(
    tx: port.Writing,
    thread_pk: int,
    run_pk: int,
    messages: Sequence[dict[str, Any]],
    positions: Sequence[int],
    layout: checkpoints.Layout | None,
) -> None:
    """Index the messages at ``positions`` of a run's view that the thread's index does not
    hold with the same text yet (the backend skips those), as recorded by ``run_pk``."""
    if not INDEXING[0]:
        return
    rows = index_rows(messages, positions, layout)
    if rows:
        tx.index_messages(thread_pk, run_pk, rows)


def indexed_words(
    tx: port.Reading, rows: Sequence[tuple[int, int, int, int | None, int | None]]
) -> list[str | None]:
    """The words each index row was given, as :func:`agui_store.history.search.index_text`
    gives them (``rows``: its key, run, position in the run's view, blob and position
    there), read back from the message it names: from the checkpoint blob, else from the
    run's view, whichever holds the text the row's key was made of (``None``: neither does
    any more). What a backend whose full-text index must be told a row's words to delete
    them exactly needs (SQLite's FTS5 with ``secure-delete``)."""
    wanted = sorted({int(r[3]) for r in rows if r[3] is not None})
    found: dict[int, list[Any]] = {}
    for blob_id, codec, data, _address in tx.blobs_in_order(wanted):
        found[int(blob_id)] = _blob_messages(blobs.unpack(codec, data))
    views: dict[int, list[Any]] = {}
    out: list[str | None] = []
    for key, run_pk, pos, blob, at in rows:
        held = found.get(int(blob)) if blob is not None else None
        text = None
        if held is not None and at is not None and 0 <= int(at) < len(held):
            text = _text_of(_held_message(held[int(at)]), int(key))
        if text is None:
            if run_pk not in views:
                views[run_pk] = verified.view(tx, run_pk).messages
            view = views[run_pk]
            if 0 <= pos < len(view) and isinstance(view[pos], dict):
                text = _text_of(view[pos], int(key))
        out.append(None if text is None else rules.index_text(text))
    return out


def _blob_messages(text: bytes) -> list[Any]:
    """The messages of a checkpoint blob, each left undecoded until it is read; all decoded
    at once, as ``checkout`` reads them, when the blob holds an escaped lone surrogate (half
    an emoji, as JavaScript producers split one), which msgspec refuses."""
    try:
        return _RAW_LIST.decode(text)
    except msgspec.DecodeError:
        messages = json.decode(text)
        return messages if isinstance(messages, list) else []


def _held_message(held: Any) -> dict[str, Any]:
    """One message of :func:`_blob_messages`."""
    message = _MESSAGE.decode(held) if isinstance(held, msgspec.Raw) else held
    return message if isinstance(message, dict) else {}


def holds(message: Any, key: int) -> bool:
    """Whether ``message`` is the message text an index row's ``key`` was made of."""
    return isinstance(message, dict) and _text_of(message, key) is not None


def _text_of(message: dict[str, Any], key: int) -> str | None:
    """The message's indexed text, if its key is ``key``."""
    message_id = message.get("id")
    if not isinstance(message_id, str):
        return None
    text = rules.message_text(message)
    return text if message_key(message_id, text) == key else None


#: The largest index row key, and so cursor: a signed 64-bit integer, as both backends
#: store it.
LARGEST_CURSOR = 2**63 - 1


def parse_cursor(cursor: Any) -> int | None:
    """``search(cursor=)``: ``None`` (the first page) or a page's ``next_cursor`` (a hit's
    ``cursor``), the index row key it names."""
    if cursor is None:
        return None
    digits = isinstance(cursor, str) and cursor.isascii() and cursor.isdigit()
    shown = repr(cursor)[:60] if isinstance(cursor, str) else type(cursor).__name__
    if not digits:
        raise InvalidArgumentError(
            f"cursor= must be None or a search page's next_cursor (digits), not {shown}"
        )
    if int(cursor) > LARGEST_CURSOR:
        raise InvalidArgumentError(
            f"cursor= {shown} is no search page's next_cursor: a cursor is at most "
            f"{LARGEST_CURSOR}"
        )
    return int(cursor)


def page_limit(limit: Any) -> int:
    """``search(limit=)``: a positive int, at most :data:`MAX_LIMIT`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(
            f"limit= must be an int from 1 to {MAX_LIMIT}, not {limit!r}"[:120]
        )
    return limit


def search(
    tx: port.Reading,
    query: rules.Query,
    thread_pk: int | None,
    scope: str | None,
    after: int | None,
    limit: int,
) -> SearchHits:
    """The hits of ``query``, newest first: in a thread (``None``: every thread), of an
    owner's threads (``scope``; ``None``: every owner), after the hit whose cursor is
    ``after``, at most ``limit``."""
    hits = SearchHits()
    # A hit past the limit is looked for, not kept: a page names a next one only when one
    # follows, so the last page of a count the limit divides is not followed by an empty one.
    more = False
    if not query.has_phrase:  # every candidate is a hit
        rows = tx.search_candidates(query, thread_pk, scope, after, limit + 1)
        kept, more = rows[:limit], len(rows) > limit
        hits.extend(_hit(r, m, query) for r, m in zip(kept, _messages(tx, kept), strict=True))
    page = max(limit + 1, PHRASE_PAGE)
    while query.has_phrase and not more:
        rows = tx.search_candidates(query, thread_pk, scope, after, page)
        for row, message in zip(rows, _messages(tx, rows), strict=True):
            after = row.id
            if not query.matches_text(rules.message_text(message)):
                continue
            if len(hits) == limit:
                more = True
                break
            hits.append(_hit(row, message, query))
        if len(rows) < page:
            break
    hits.next_cursor = hits[-1].cursor if more else None
    return hits


def _hit(row: port.SearchCandidate, message: dict[str, Any], query: rules.Query) -> SearchHit:
    role = message.get("role")
    return SearchHit(
        thread_id=str(row.thread_id),
        run_id=str(row.run_id),
        message_id=str(message.get("id")),
        role=role if isinstance(role, str) else "",
        tool_name=None if row.tool is None else str(row.tool),
        snippet=tuple(rules.snippet(rules.message_text(message), query)),
        recorded_at=when(int(row.recorded)) if row.recorded is not None else None,
        cursor=str(int(row.id)),
        position=int(row.position),
    )


def _messages(tx: port.Reading, rows: Sequence[port.SearchCandidate]) -> list[dict[str, Any]]:
    """The message of each candidate: read from the checkpoint blob the index row names
    (one statement for all), else from its run's view, at the position it names."""
    wanted = sorted({int(r.blob) for r in rows if r.blob is not None})
    found: dict[int, list[Any]] = {}
    for blob_id, codec, data, _address in tx.blobs_in_order(wanted):
        found[int(blob_id)] = _blob_messages(blobs.unpack(codec, data))
    out: list[dict[str, Any]] = []
    views: dict[int, list[Any]] = {}
    for row in rows:
        run_pk, pos, blob, at = int(row.run), int(row.position), row.blob, row.at
        held = found.get(int(blob)) if blob is not None else None
        if held is not None and at is not None and 0 <= int(at) < len(held):
            out.append(_held_message(held[int(at)]))
            continue
        if run_pk not in views:  # no checkpoint held it when it was indexed
            views[run_pk] = verified.view(tx, run_pk).messages
        view = views[run_pk]
        message = view[pos] if 0 <= pos < len(view) else None
        out.append(message if isinstance(message, dict) else {})
    return out


__all__ = [
    "INDEXING",
    "LARGEST_CURSOR",
    "MAX_LIMIT",
    "PHRASE_PAGE",
    "IndexRow",
    "changed_positions",
    "held_before",
    "holds",
    "in_layout",
    "index_rows",
    "index_run",
    "indexed_words",
    "message_key",
    "page_limit",
    "parse_cursor",
    "search",
]
