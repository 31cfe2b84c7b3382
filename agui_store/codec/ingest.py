"""The ingest codec: everything a user hands to ``append`` becomes events with their JSON bytes.

The JSON codec itself (``encode``, ``decode``, ``decode_many``, ``canonical_bytes``) is
:mod:`agui_store.codec.json`; its names read here too.

:func:`parse_events` reads dicts, pydantic models (``ag_ui.core``; anything with
``model_dump``), msgspec structs, and JSON / JSON Lines / SSE text, bytes, files and paths. Each
event comes back as an :class:`IncomingEvent`: ``data`` (a dict) and ``raw`` (its JSON text — the
producer's bytes, verbatim, when the input was text; a compact encoding otherwise). It guarantees
``decode(raw) == data`` and that ``data`` is a JSON object; it does not check event shapes
(``validate.validate_event`` does).

JSON edge cases, decided so that an event reads back equal to what was given:

* integers of any size are kept exactly (msgspec and ``json`` agree);
* a number that overflows a double (``1e400``) is refused: it would read back as infinity, which
  JSON cannot write; ``NaN``/``Infinity`` literals are not JSON and are refused, and so are
  non-finite floats in a dict (msgspec would silently write them as ``null``);
* duplicate keys: the last one wins, as in ``json.loads`` and ``JSON.parse``; ``raw`` keeps both;
* ``-0.0`` stays ``-0.0``;
* an escaped lone surrogate (``"\\ud83d"``, which JavaScript producers emit when they split an
  emoji) is accepted as ``json.loads`` and ``JSON.parse`` accept it; msgspec refuses it, so those
  payloads take a slower standard-library path. Raw (unescaped) surrogate bytes are invalid
  UTF-8 and refused;
* nesting deeper than ``max_depth`` is refused with the path of the first too-deep value, even
  for a million brackets (no ``RecursionError`` escapes).
"""

from __future__ import annotations

import codecs
import contextlib
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec

from agui_store.codec.json import (
    BOM,
    BYTE_AT,
    DECODER,
    ENCODER,
    RAW_LIST_DECODER,
    SURROGATE_ESCAPE,
    WHITESPACE,
    canonical_bytes,
    decode,
    decode_error_reason,
    decode_many,
    decode_stdlib,
    decode_value,
    deeper_than,
    encode,
    encode_surrogates,
    refused_utf8,
    scan,
    syntax_problem,
    utf8_error_offset,
)
from agui_store.codec.sse import SSEParser
from agui_store.errors import InvalidEventError, StorageError
from agui_store.protocol.validate import kind_of, render_path

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_EVENT_BYTES",
    "IncomingEvent",
    "canonical_bytes",
    "decode",
    "decode_many",
    "encode",
    "foreign_file",
    "iter_events",
    "parse_events",
]

DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024
"""Largest accepted event, in bytes of JSON text (8 MiB)."""

DEFAULT_MAX_DEPTH = 64
"""Deepest accepted nesting of objects and arrays; the event object itself is depth 1."""


class IncomingEvent(msgspec.Struct):
    """One event of a batch: the decoded object and its JSON text."""

    data: dict[str, Any]
    raw: bytes

    @property
    def type(self) -> str | None:
        """The event's ``type`` when it is a string."""
        value = self.data.get("type")
        return value if isinstance(value, str) else None


_SSE_FIRST_LINE = re.compile(rb"^(?::|(?:data|event|id|retry)(?::|$))")

#: The first bytes of the files a user hands to an import instead of the text it reads (a
#: compressed export, a store itself): what each is, and how to read it.
_FOREIGN = (
    (b"\x1f\x8b", "gzip-compressed", "decompress it first (gzip -dc FILE | agui-store import -)"),
    (b"(\xb5/\xfd", "zstd-compressed", "decompress it first (zstd -dc FILE | agui-store import -)"),
    (b"\xfd7zXZ\x00", "xz-compressed", "decompress it first (xz -dc FILE | agui-store import -)"),
    (b"BZh", "bzip2-compressed", "decompress it first (bzip2 -dc FILE | agui-store import -)"),
    (b"PK\x03\x04", "a zip file", "take the file out of it first (unzip -p ZIP FILE | "
     "agui-store import -)"),
    (b"SQLite format 3\x00", "a SQLite database", "to bring a store's threads into this one, "
     "copy them (agui-store copy FILE DESTINATION) or import its export (agui-store --db FILE "
     "export --all)"),
)  # fmt: skip


def foreign_file(head: bytes) -> str | None:
    """What a file starting with ``head`` is when it is a compressed file or a database, not
    text an import reads (JSON, JSON Lines, SSE or an archive), and how to read it; ``None``
    for any other start. Said instead of the binary bytes it starts with."""
    for magic, what, advice in _FOREIGN:
        if head.startswith(magic):
            return f"input is {what}, not JSON, JSON Lines, SSE or an archive: {advice}"
    return None


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Locating problems in JSON text without recursion
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# parse_events
# --------------------------------------------------------------------------------------------


class _Limits:
    __slots__ = ("max_depth", "max_event_bytes")

    def __init__(self, max_event_bytes: int, max_depth: int) -> None:
        self.max_event_bytes = max_event_bytes
        self.max_depth = max_depth


def parse_events(
    source: Any,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> list[IncomingEvent]:
    """Turn whatever a user hands to ``append`` into a list of events with their JSON bytes.

    Args:
        source: a dict; a pydantic model (``model_dump``) or msgspec struct; a list, tuple or
            iterator of those (mixed, and ``str``/``bytes`` items holding one JSON event each);
            ``str``/``bytes`` holding one JSON event, a JSON array, JSON Lines or SSE (detected
            from the content; CRLF, CR or LF; optional BOM); a text or binary file object; an
            ``os.PathLike`` path to such a file.
        max_event_bytes: largest accepted event (its JSON text).
        max_depth: deepest accepted nesting (the event object is depth 1).

    Returns:
        The events in order: ``data`` is a dict, ``raw`` its JSON text with
        ``decode(raw) == data``.

    Raises:
        InvalidEventError: naming the event's index in the batch (with the line and record in
            the reason for JSON Lines and SSE), its type when known and the JSON path.
    """
    limits = _Limits(max_event_bytes, max_depth)
    if isinstance(source, dict):
        return [_from_object(source, 0, limits)]
    if isinstance(source, (str, bytes, bytearray, memoryview)):
        return _from_text(_as_bytes(source, None), limits)
    if isinstance(source, os.PathLike):
        try:
            with open(source, "rb") as handle:
                data = handle.read()
        except OSError as e:
            shown = os.fsdecode(source)
            raise StorageError(
                f"cannot read events from {shown}: {e.strerror or e}", path=shown, errno=e.errno
            ) from e
        return _from_text(data, limits)
    if isinstance(source, msgspec.Struct) or _is_model(source):
        return [_from_object(source, 0, limits)]
    if hasattr(source, "read"):
        start = _byte_position(source)
        try:
            content = source.read()
        except UnicodeDecodeError as exc:
            raise _undecodable(source, exc, start) from None
        if not isinstance(content, (str, bytes, bytearray, memoryview)):
            raise InvalidEventError(f"file object returned {kind_of(content)}, not text")
        return _from_text(_as_bytes(content, None), limits)
    if isinstance(source, Mapping):
        return [_from_object(dict(source), 0, limits)]
    if isinstance(source, Iterable):
        items = source if isinstance(source, list) else list(source)
        fast = _from_dicts(items, limits)
        if fast is not None:
            return fast
        return [_from_item(item, i, limits) for i, item in enumerate(items)]
    raise InvalidEventError(
        f"cannot read events from {type(source).__name__}: pass dicts, events, JSON, "
        "JSON Lines or SSE text, bytes, a file or a path"
    )


def _is_model(value: Any) -> bool:
    return callable(getattr(value, "model_dump", None)) and not isinstance(value, type)


def _as_bytes(source: str | bytes | bytearray | memoryview, index: int | None) -> bytes:
    if isinstance(source, str):
        try:
            return source.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidEventError(
                f"text is not valid Unicode: a lone surrogate at character {exc.start}",
                index=index,
            ) from None
    return bytes(source)


def _from_dicts(items: list[Any], limits: _Limits) -> list[IncomingEvent] | None:
    """A batch of plain dicts in a few C calls: encoded as one array, read back whole (the
    round trip proves every value is plain JSON, as :func:`_from_object` does per event) and
    cut into each event's bytes. ``None`` when anything is unusual: the per-event path then
    accepts it or names the problem."""
    if not all(type(item) is dict for item in items):
        return None
    try:
        # Each event's bytes as encoded alone are its slice of the array's text: encoding
        # them one by one spares cutting the array apart again.
        texts = list(map(ENCODER.encode, items))
    except (UnicodeEncodeError, RecursionError, TypeError, ValueError, OverflowError):
        return None
    whole = b"[" + b",".join(texts) + b"]"
    data = DECODER.decode(whole)
    if data != items:  # equal to the dicts, so dicts themselves
        return None
    if deeper_than(whole, limits.max_depth + 1):  # + 1: the array around the events
        return None
    if max(map(len, texts), default=0) > limits.max_event_bytes:
        return None
    return list(map(IncomingEvent, data, texts))


def _from_array_text(
    whole: bytes, data: Any, expected: list[Any] | None, limits: _Limits
) -> list[IncomingEvent] | None:
    """Events from the text of a JSON array and its decoded value, when every element is an
    object (equal to ``expected``'s, when given) within the limits; else ``None``."""
    if not isinstance(data, list) or (expected is not None and data != expected):
        return None
    if not all(type(item) is dict for item in data):
        return None
    if deeper_than(whole, limits.max_depth + 1):  # + 1: the array around the events
        return None
    raws = RAW_LIST_DECODER.decode(whole)
    out = []
    for item, raw in zip(data, raws):
        text = bytes(raw)
        if len(text) > limits.max_event_bytes:
            return None
        out.append(IncomingEvent(data=item, raw=text))
    return out


def _from_item(item: Any, index: int, limits: _Limits) -> IncomingEvent:
    if isinstance(item, (str, bytes, bytearray, memoryview)):
        buf = _as_bytes(item, index).strip(WHITESPACE)
        if buf.startswith(BOM):
            buf = buf[len(BOM) :].strip(WHITESPACE)
        return _event_from_bytes(buf, index, limits, where="")
    if isinstance(item, (dict, msgspec.Struct)) or _is_model(item):
        return _from_object(item, index, limits)
    raise InvalidEventError(
        f"an event must be a JSON object, got {kind_of(item)}", index=index, path="$"
    )


def _from_object(obj: Any, index: int, limits: _Limits) -> IncomingEvent:
    """A dict, struct or pydantic model: encode it compactly, read it back, check it is JSON."""
    if isinstance(obj, msgspec.Struct):
        obj = msgspec.to_builtins(obj)
    elif not isinstance(obj, dict) and _is_model(obj):
        try:
            obj = obj.model_dump(mode="json", by_alias=True, warnings=False)
        except (ValueError, TypeError, RecursionError) as exc:  # pydantic's own limits
            raise InvalidEventError(
                f"the model could not be dumped to JSON: {str(exc)[:200]}",
                index=index,
                event_type=getattr(obj, "type", None) if isinstance(
                    getattr(obj, "type", None), str) else None,
            ) from None
    if not isinstance(obj, dict):
        raise InvalidEventError(
            f"an event must be a JSON object, got {kind_of(obj)}", index=index, path="$"
        )
    event_type = obj.get("type")
    event_type = event_type if isinstance(event_type, str) else None
    raw: bytes | None
    try:
        raw = ENCODER.encode(obj)
    except (UnicodeEncodeError, RecursionError, TypeError, ValueError, OverflowError):
        raw = None  # lone surrogates, or not JSON: the walk below tells which
    data: Any = DECODER.decode(raw) if raw is not None else None
    # Fast path: msgspec wrote it and read back the same thing, and it cannot nest too deeply.
    if raw is None or data != obj or deeper_than(raw, limits.max_depth):
        problem = _check_json_value(obj, limits.max_depth)
        if problem is not None:
            raise InvalidEventError(
                problem[0], index=index, event_type=event_type, path=render_path(problem[1])
            )
        if raw is None:
            try:
                raw = encode_surrogates(obj, canonical=False)
                data = decode_value(raw)
            except InvalidEventError as exc:
                raise InvalidEventError(
                    exc.reason, index=index, event_type=event_type, path=exc.path
                ) from None
    if len(raw) > limits.max_event_bytes:
        raise InvalidEventError(
            f"event is {len(raw)} bytes of JSON, over the limit of {limits.max_event_bytes}",
            index=index,
            event_type=event_type,
        )
    return IncomingEvent(data=data, raw=raw)


def _check_json_value(obj: Any, max_depth: int) -> tuple[str, list[str | int]] | None:
    """Why a Python value is not plain JSON (or nests too deeply), with its path; or None."""
    stack: list[tuple[Any, int, list[str | int]]] = [(obj, 1, [])]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, dict):
            if depth > max_depth:
                return f"nested deeper than {max_depth} levels", path
            for key, entry in value.items():
                if not isinstance(key, str):
                    return f"object key {key!r} is {kind_of(key)}, not a string", path
                stack.append((entry, depth + 1, [*path, key]))
        elif isinstance(value, (list, tuple)):
            if depth > max_depth:
                return f"nested deeper than {max_depth} levels", path
            stack.extend((entry, depth + 1, [*path, i]) for i, entry in enumerate(value))
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"{value!r} is not a JSON number", path
        elif value is None or isinstance(value, (str, int)):
            continue
        else:
            return f"{kind_of(value)} is not a JSON value", path
    return None


def _from_text(buf: bytes, limits: _Limits) -> list[IncomingEvent]:
    if buf.startswith(BOM):
        buf = buf[len(BOM) :]
    body = buf.lstrip(WHITESPACE)
    if body[:1] == b"[":
        # In memory, one msgspec call reads the whole array (much faster than splitting it).
        return _parse_array(body.rstrip(WHITESPACE), limits)
    return list(_events_of_text(iter(()), buf, limits))


def _events_of_text(
    chunks: Iterator[bytes], head: bytes, limits: _Limits
) -> Iterator[IncomingEvent]:
    """The events of a JSON array, one JSON object, JSON Lines or SSE, detected from the
    content: ``head`` is the start (without its BOM), ``chunks`` the rest."""
    body = head.lstrip(WHITESPACE)
    if not body:
        return
    first = body[0]
    if first == 0x5B:  # [
        yield from _stream_array(chunks, body, limits)
    elif first == 0x7B:  # {
        yield from _object_or_lines(chunks, body, limits)
    else:
        first_line = body.split(b"\n", 1)[0].split(b"\r", 1)[0]
        if not _SSE_FIRST_LINE.match(first_line):
            foreign = foreign_file(body)
            if foreign is not None:
                raise InvalidEventError(foreign)
            shown = first_line[:40].decode("utf-8", "replace")
            raise InvalidEventError(
                f"input is not a JSON object or array, JSON Lines or SSE (it starts with {shown!r})"
            )
        yield from _stream_sse(chunks, head, limits)


def _parse_array(body: bytes, limits: _Limits) -> list[IncomingEvent]:
    with contextlib.suppress(msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        fast = _from_array_text(body, DECODER.decode(body), None, limits)
        if fast is not None:
            return fast
    try:
        items = RAW_LIST_DECODER.decode(body)
    except RecursionError:
        element, path, too_deep = scan(body, top_array=True, max_depth=limits.max_depth)
        reason = (
            f"nested deeper than {limits.max_depth} levels"
            if too_deep
            else "JSON is nested too deeply to decode"
        )
        raise InvalidEventError(reason, index=element, path=render_path(path)) from None
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        if refused_utf8(exc):
            raise _utf8_refused_in_array(body) from None
        if isinstance(exc, msgspec.DecodeError) and SURROGATE_ESCAPE.search(body):
            # msgspec refuses escaped lone surrogates, which JSON.parse and json.loads take
            # (JS producers split emoji): read the array element by element instead, each
            # keeping its bytes (the standard library reads the ones with surrogates), and
            # a problem elsewhere named at its own element.
            return list(_stream_array(iter(()), body, limits))
        match = BYTE_AT.search(str(exc))
        offset = int(match.group(1)) if match else len(body)
        element, path, _ = scan(body, top_array=True, stop_at=offset)
        raise InvalidEventError(
            decode_error_reason(body, exc), index=element, path=render_path(path)
        ) from None
    return [_event_from_bytes(bytes(item), i, limits, where="") for i, item in enumerate(items)]


# --------------------------------------------------------------------------------------------
# Streaming: a file read a chunk at a time, each event's bytes cut out as it completes
# --------------------------------------------------------------------------------------------

READ_BYTES = 1024 * 1024
"""How much :func:`iter_events` reads from a file at a time."""

# Slack over ``max_event_bytes`` for what surrounds an event's JSON in a file (whitespace, an
# SSE field name): a line or record longer than the limit plus this is refused unread.
_SLACK = 64 * 1024

_WS_RUN = re.compile(rb"[ \t\r\n]*")
# From a place outside any string, everything up to the next bracket (or comma, at the top
# level), whole strings included; it stops early at a string the buffer cuts short.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_TO_BRACKET = re.compile(rb'[^"\[\]{}]*(?:' + _STRING + rb'[^"\[\]{}]*)*', re.S)
_TO_BRACKET_OR_COMMA = re.compile(rb'[^"\[\]{},]*(?:' + _STRING + rb'[^"\[\]{},]*)*', re.S)


class _Overlong(Exception):
    """A line longer than the caller's limit (the caller says where)."""


def iter_events(
    source: Any,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    read_bytes: int = READ_BYTES,
) -> Iterator[IncomingEvent]:
    """The events of a JSON array, JSON Lines or SSE file, read incrementally.

    Memory stays bounded by one event and one read, whatever the file's size: the file is
    read ``read_bytes`` at a time, each event's bytes are cut out as soon as they are
    complete and decoded alone. Each event's ``raw`` is its JSON text exactly as the file
    spells it (escapes, number spellings, whitespace inside the event): a JSON array's
    element without the separators around it; a JSON Lines line without its line end and
    surrounding whitespace; an SSE record's ``data:`` values joined with LF (the field name,
    the one space after its colon, and a CR of CRLF are not part of the event), without
    surrounding whitespace. What :func:`parse_events` accepts as text, this accepts, with
    the same events and errors naming the event's index in the file.

    Args:
        source: a binary (or text) file object, or an ``os.PathLike`` path.
        max_event_bytes: largest accepted event (its JSON text).
        max_depth: deepest accepted nesting (the event object is depth 1).
        read_bytes: how much to read at a time.

    Raises:
        InvalidEventError: as :func:`parse_events`; the events before it were yielded.
    """
    limits = _Limits(max_event_bytes, max_depth)
    if isinstance(source, os.PathLike):
        with open(source, "rb") as handle:
            yield from _events_of_stream(_chunks(handle, read_bytes), limits)
        return
    if not hasattr(source, "read"):
        raise InvalidEventError(
            f"cannot stream events from {type(source).__name__}: pass a file or a path"
        )
    yield from _events_of_stream(_chunks(source, read_bytes), limits)


def _chunks(handle: Any, read_bytes: int) -> Iterator[bytes]:
    start = _byte_position(handle)
    while True:
        try:
            chunk = handle.read(read_bytes)
        except UnicodeDecodeError as exc:
            raise _undecodable(handle, exc, start) from None
        if not chunk:
            return
        if not isinstance(chunk, (str, bytes, bytearray, memoryview)):
            raise InvalidEventError(f"file object returned {kind_of(chunk)}, not text")
        yield _as_bytes(chunk, None)


def _byte_position(handle: Any) -> int | None:
    """Where a text file object stands in its bytes, when that can be known: it is seekable
    and has a binary ``buffer`` (a text file's ``tell()`` is a byte offset at a clean start)."""
    if getattr(handle, "buffer", None) is None:
        return None
    try:
        return int(handle.tell()) if handle.seekable() else None
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def _undecodable(handle: Any, exc: UnicodeDecodeError, start: int | None) -> InvalidEventError:
    """The error for a text file object whose bytes do not decode.

    The decoder's own position counts from whatever buffer it was handed, so the file's
    bytes are decoded again from where reading began, a block at a time, to name the byte
    offset in the file. Nothing has been recorded: the caller has read no event yet, or
    rolls back what it read.
    """
    offset = None
    raw = getattr(handle, "buffer", None)
    if start is not None and raw is not None:
        with contextlib.suppress(OSError, ValueError, LookupError, AttributeError):
            raw.seek(start)
            decoder = codecs.getincrementaldecoder(exc.encoding)()
            done = start
            while offset is None:
                block = raw.read(1 << 16)
                pending = len(decoder.getstate()[0])
                try:
                    decoder.decode(block, final=not block)
                except UnicodeDecodeError as again:
                    offset = done - pending + again.start
                if not block:
                    break
                done += len(block)
    where = f"at byte {offset}" if offset is not None else "(at an offset this file object hides)"
    return InvalidEventError(
        f"the file is not valid {exc.encoding} text: {exc.reason} {where}; open it in "
        "binary mode ('rb') to have the event that holds it named"
    )


def _events_of_stream(chunks: Iterator[bytes], limits: _Limits) -> Iterator[IncomingEvent]:
    """Read enough of the start to tell the format (the first line, for SSE), then stream."""
    head = b""
    for chunk in chunks:
        head += chunk
        start = head[len(BOM) :] if head.startswith(BOM) else head
        body = start.lstrip(WHITESPACE)
        if len(head) >= len(BOM) and body and (
            body[0] in b"[{" or b"\n" in body or b"\r" in body
        ):
            break
        if len(start) > limits.max_event_bytes + _SLACK:
            if not body:
                raise InvalidEventError(
                    f"no event in the first {len(start)} bytes: the input is only whitespace"
                )
            break
    if head.startswith(BOM):
        head = head[len(BOM) :]
    yield from _events_of_text(chunks, head, limits)


def _lines(chunks: Iterator[bytes], buf: bytes, limit: int) -> Iterator[bytes]:
    """The lines of ``buf`` then ``chunks``, ended by LF, CR or CRLF (``bytes.splitlines``),
    without their ends. Raises :class:`_Overlong` when a line passes ``limit`` bytes unended."""
    for chunk in chunks:
        buf = buf + chunk if buf else chunk
        end = max(buf.rfind(b"\n"), buf.rfind(b"\r"))
        if end == len(buf) - 1 and buf[end] == 0x0D:
            # Perhaps the CR of a CRLF the read cut in two: wait for the next byte.
            end = max(buf.rfind(b"\n", 0, end), buf.rfind(b"\r", 0, end))
        if end >= 0:
            yield from buf[: end + 1].splitlines()
            buf = buf[end + 1 :]
        if len(buf) > limit:
            raise _Overlong
    yield from buf.splitlines()


def _object_or_lines(
    chunks: Iterator[bytes], body: bytes, limits: _Limits
) -> Iterator[IncomingEvent]:
    """One JSON object (possibly pretty-printed over many lines), or JSON Lines."""
    limit = limits.max_event_bytes + _SLACK
    ended = False
    while body.find(b"\n") < 0 and body.find(b"\r") < 0 and len(body) <= limit:
        chunk = next(chunks, None)
        if chunk is None:
            ended = True
            break
        body += chunk
    # bytes.find is memchr: a request body of a few MB holds no newline in the common case.
    ends = [at for at in (body.find(b"\n"), body.find(b"\r")) if at >= 0]
    if not ends and ended:
        yield _event_from_bytes(body.strip(WHITESPACE), 0, limits, where="")
        return
    first_line = body[: min(ends)].strip(WHITESPACE) if ends else body
    # JSON Lines when the first line is a complete JSON value by itself.
    if ends and len(first_line) <= limits.max_event_bytes:
        try:
            DECODER.decode(first_line)
            complete = True
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
            complete = bool(SURROGATE_ESCAPE.search(first_line)) and decode_stdlib(first_line)[1]
    else:
        complete = True  # let the per-line size check report it
    if not complete:
        # One object over many lines: it is read whole, as far as the limit allows.
        for chunk in chunks:
            body += chunk
            if len(body) > limit:
                raise InvalidEventError(
                    f"event is more than {len(body)} bytes of JSON, over the limit of "
                    f"{limits.max_event_bytes}",
                    index=0,
                )
        yield _event_from_bytes(body.strip(WHITESPACE), 0, limits, where="")
        return
    index = lineno = 0
    try:
        for lineno, line in enumerate(_lines(chunks, body, limit), 1):
            line = line.strip(WHITESPACE)
            if not line:
                continue
            yield _event_from_bytes(line, index, limits, where=f"JSON Lines line {lineno}")
            index += 1
    except _Overlong:
        raise InvalidEventError(
            f"JSON Lines line {lineno + 1}: the line is longer than the limit of "
            f"{limits.max_event_bytes} bytes for an event",
            index=index,
        ) from None


def _stream_sse(chunks: Iterator[bytes], buf: bytes, limits: _Limits) -> Iterator[IncomingEvent]:
    """Server-sent events, read by :class:`~agui_store.codec.sse.SSEParser` line by line: the
    lines are split here, as for JSON Lines, so that an error names the line."""
    limit = limits.max_event_bytes + _SLACK
    parser = SSEParser(max_event_bytes=limit)
    index = lineno = start = 0
    read = parser.line
    try:
        for lineno, line in enumerate(_lines(chunks, buf, limit), 1):
            if not line:  # the end of an event
                payload = read(line)
                if payload is not None:
                    yield _sse_event(payload, index, start, limits)
                    index += 1
                continue
            held = parser.held
            read(line)
            if parser.held != held:  # a data line
                if not held:
                    start = lineno
                if parser.held > limit:
                    raise InvalidEventError(
                        f"SSE record {index} (data from line {start}): event is more than "
                        f"{parser.held} bytes of JSON, over the limit of {limits.max_event_bytes}",
                        index=index,
                    )
    except _Overlong:
        raise InvalidEventError(
            f"SSE line {lineno + 1} is longer than the limit of {limits.max_event_bytes} "
            "bytes for an event",
            index=index,
        ) from None
    # A last record without its blank line (as the official client reads it).
    payload = parser.line(b"")
    if payload is not None:
        yield _sse_event(payload, index, start, limits)


def _sse_event(payload: bytes, index: int, start: int, limits: _Limits) -> IncomingEvent:
    where = f"SSE record {index} (data from line {start})"
    payload = payload.strip(WHITESPACE)
    if not payload:
        raise InvalidEventError(f"{where}: the data is empty, not a JSON event", index=index)
    return _event_from_bytes(payload, index, limits, where=where)


def _stream_array(
    chunks: Iterator[bytes], buf: bytes, limits: _Limits
) -> Iterator[IncomingEvent]:
    """The elements of a JSON array (``buf`` starts with its ``[``), each cut out by counting
    brackets outside strings as soon as it is complete, then decoded alone (which checks it
    is well-formed: the cut is right for every element that is)."""
    limit = limits.max_event_bytes + _SLACK
    base = 0  # the input's offset of buf[0], for messages
    pos = 1
    index = 0
    fast_failed = -1  # where the buffer ended when _whole_elements last found nothing
    while True:
        # Whitespace, then an element, or the array's end.
        pos = _WS_RUN.match(buf, pos).end()  # type: ignore[union-attr]
        while pos == len(buf):
            chunk = next(chunks, None)
            if chunk is None:
                raise InvalidEventError(
                    f"the input is truncated inside the JSON array, before event {index} (it "
                    f"ends at byte {base + pos})",
                    index=index,
                )
            base += len(buf)
            buf, pos = chunk, 0
            pos = _WS_RUN.match(buf, pos).end()  # type: ignore[union-attr]
        if index == 0 and buf[pos] == 0x5D:  # ]: an empty array
            _expect_end(chunks, buf, pos + 1, base, None)
            return
        fast = None
        if len(buf) - pos >= _FAST_BYTES and base + len(buf) > fast_failed:
            fast = _whole_elements(buf, pos, limits)
            if fast is None:
                fast_failed = base + len(buf)  # not again before more is read
        if fast is not None:
            events, p = fast
            yield from events
            index += len(events)
        else:
            start = p = pos
            depth = 0
            while True:
                scan = _TO_BRACKET if depth else _TO_BRACKET_OR_COMMA
                p = scan.match(buf, p).end()  # type: ignore[union-attr]
                if p < len(buf) and buf[p] != 0x22:
                    c = buf[p]
                    if c == 0x7B or c == 0x5B:  # { [
                        depth += 1
                    elif c == 0x7D or c == 0x5D:  # } ]
                        if depth == 0:
                            break  # the array's end after a value that is not an object
                        depth -= 1
                        if depth == 0:
                            p += 1
                            break
                    else:  # a comma at the top level, after a value that is not an object
                        break
                    p += 1
                    continue
                # The read ends inside this element (perhaps inside a string): read on.
                if p - start > limit:
                    raise InvalidEventError(
                        f"event is more than {p - start} bytes of JSON, over the limit of "
                        f"{limits.max_event_bytes}",
                        index=index,
                    )
                chunk = next(chunks, None)
                if chunk is None:
                    raise InvalidEventError(
                        f"the input is truncated inside event {index} of the JSON array (it ends "
                        f"at byte {base + len(buf)})",
                        index=index,
                    )
                base += start
                buf = buf[start:] + chunk
                p -= start
                pos = start = 0
            element = buf[start:p].rstrip(WHITESPACE)
            if not element:
                raise InvalidEventError(
                    f"malformed JSON at byte {base + start}: expected an event, found "
                    f"{buf[start : start + 1].decode('utf-8', 'replace')!r}",
                    index=index,
                )
            yield _event_from_bytes(element, index, limits, where="")
            index += 1
        # A comma and the next element, or the array's end.
        pos = _WS_RUN.match(buf, p).end()  # type: ignore[union-attr]
        while pos == len(buf):
            chunk = next(chunks, None)
            if chunk is None:
                raise InvalidEventError(
                    f"the input is truncated after event {index - 1} of the JSON array (no "
                    "closing ']')",
                    index=index - 1,
                )
            base += len(buf)
            buf, pos = chunk, 0
            pos = _WS_RUN.match(buf, pos).end()  # type: ignore[union-attr]
        if buf[pos] == 0x5D:  # ]
            _expect_end(chunks, buf, pos + 1, base, index - 1)
            return
        if buf[pos] != 0x2C:  # ,
            shown = buf[pos : pos + 20].decode("utf-8", "replace")
            raise InvalidEventError(
                f"malformed JSON at byte {base + pos}: expected ',' or ']' after event "
                f"{index - 1}, found {shown!r}",
                index=index - 1,
            )
        pos += 1


#: A JSON array's elements are first tried many at a time, in one msgspec call, when this
#: much of the array is in memory.
_FAST_BYTES = 64 * 1024


def _whole_elements(
    buf: bytes, pos: int, limits: _Limits
) -> tuple[list[IncomingEvent], int] | None:
    """The elements of ``buf`` from ``pos`` (the start of an element) to the last ``}``, in
    one msgspec call, and where they end; ``None`` when that is not a run of whole events.

    Decoding ``[`` + that text + ``]`` succeeds only when the ``}`` ends an element of the
    array: JSON is read the same way from the same start, so a ``}`` inside an element
    would leave a string or a container open. Anything unusual (a lone surrogate, an
    element that is not an object, too deep, too large) is left to the element scanner,
    which names the problem."""
    end = len(buf)
    for _ in range(8):  # the last "}" that a comma or the array's "]" follows
        end = buf.rfind(b"}", pos, end)
        if end < 0:
            return None
        if buf[end + 1 : end + 65].lstrip(WHITESPACE)[:1] in (b",", b"]"):
            break
    else:
        return None
    end += 1
    whole = b"[" + buf[pos:end] + b"]"
    try:
        data = DECODER.decode(whole)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
        return None
    events = _from_array_text(whole, data, None, limits)
    return (events, end) if events else None


def _expect_end(
    chunks: Iterator[bytes], buf: bytes, pos: int, base: int, last: int | None
) -> None:
    """Only whitespace may follow a JSON array."""
    while True:
        rest = buf[pos:].lstrip(WHITESPACE)
        if rest:
            shown = rest[:20].decode("utf-8", "replace")
            at = base + len(buf) - len(rest)
            raise InvalidEventError(
                f"malformed JSON at byte {at}: {shown!r} after the end of the JSON array",
                index=last,
            )
        chunk = next(chunks, None)
        if chunk is None:
            return
        base += len(buf)
        buf, pos = chunk, 0


def _utf8_refused_in_array(body: bytes) -> InvalidEventError:
    """The error for a JSON array of events holding invalid UTF-8: where, and in which event."""
    offset = utf8_error_offset(body)
    element, path, _ = scan(body, top_array=True, stop_at=offset)
    return InvalidEventError(
        f"invalid UTF-8 at byte {offset}", index=element, path=render_path(path)
    )


def _utf8_refused_in_event(raw: bytes, index: int, prefix: str) -> InvalidEventError:
    """The error for one event's JSON holding invalid UTF-8: where in it."""
    offset = utf8_error_offset(raw)
    _, at, _ = scan(raw, top_array=False, stop_at=offset)
    return InvalidEventError(
        f"{prefix}invalid UTF-8 at byte {offset}", index=index, path=render_path(at)
    )


def _event_from_bytes(raw: bytes, index: int, limits: _Limits, *, where: str) -> IncomingEvent:
    prefix = f"{where}: " if where else ""
    if len(raw) > limits.max_event_bytes:
        raise InvalidEventError(
            f"{prefix}event is {len(raw)} bytes of JSON, over the limit of "
            f"{limits.max_event_bytes}",
            index=index,
        )
    data: Any = None
    too_deep_to_decode = False
    try:
        data = DECODER.decode(raw)
    except RecursionError:
        too_deep_to_decode = True
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        if refused_utf8(exc):
            raise _utf8_refused_in_event(raw, index, prefix) from None
        data, ok = decode_stdlib(raw) if SURROGATE_ESCAPE.search(raw) else (None, False)
        if not ok:
            reason, where_in = syntax_problem(raw, exc)
            raise InvalidEventError(f"{prefix}{reason}", index=index, path=where_in) from None
    if too_deep_to_decode or deeper_than(raw, limits.max_depth):
        _, path, too_deep = scan(raw, top_array=False, max_depth=limits.max_depth)
        if too_deep or too_deep_to_decode:
            event_type = data.get("type") if isinstance(data, dict) else None
            reason = (
                f"nested deeper than {limits.max_depth} levels"
                if too_deep
                else "JSON is nested too deeply to decode"
            )
            raise InvalidEventError(
                f"{prefix}{reason}",
                index=index,
                event_type=event_type if isinstance(event_type, str) else None,
                path=render_path(path),
            )
    if not isinstance(data, dict):
        raise InvalidEventError(
            f"{prefix}an event must be a JSON object, got {kind_of(data)}", index=index, path="$"
        )
    return IncomingEvent(data=data, raw=raw)


