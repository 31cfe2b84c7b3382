"""The ingest codec: everything a user hands to ``append`` becomes events with their JSON bytes.

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
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec

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


_ENCODER = msgspec.json.Encoder()
_CANONICAL = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder()
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_LIST_DECODER = msgspec.json.Decoder(list[Any])

_BOM = b"\xef\xbb\xbf"
_WS = b" \t\r\n"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_STRING_OR_NUMBER = re.compile(
    rb'"[^"\\]*(?:\\.[^"\\]*)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?', re.S
)
_BYTE_AT = re.compile(r"\(byte (\d+)\)")
_SSE_FIRST_LINE = re.compile(rb"^(?::|(?:data|event|id|retry)(?::|$))")
# A JSON token scanner for error locations: strings (skipped whole) and structural characters.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}:,]', re.S)


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def encode(obj: Any) -> bytes:
    """Compact JSON of a JSON value (or a msgspec struct).

    Raises:
        InvalidEventError: for values JSON cannot hold (NaN, infinities, non-JSON types).
    """
    return _encode_with(_ENCODER, obj, canonical=False)


def canonical_bytes(obj: Any) -> bytes:
    """Canonical JSON for content addressing: keys sorted, compact separators, UTF-8.

    Equal JSON values (as ``==`` on decoded JSON) give equal bytes, whatever their key order.
    """
    return _encode_with(_CANONICAL, obj, canonical=True)


def _encode_with(encoder: msgspec.json.Encoder, obj: Any, *, canonical: bool) -> bytes:
    try:
        out = encoder.encode(obj)
    except UnicodeEncodeError:
        out = _encode_surrogates(obj, canonical=canonical)
    except RecursionError:
        raise InvalidEventError("value is nested too deeply to encode") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidEventError(f"value is not JSON: {exc}") from None
    if b"null" in out:
        # msgspec writes NaN and infinities as null; a walk tells them from real nulls.
        problem = _find_non_finite(obj)
        if problem is not None:
            raise InvalidEventError(problem[0], path=problem[1])
    return out


def _encode_surrogates(obj: Any, *, canonical: bool) -> bytes:
    """Encode a value holding lone surrogates (msgspec refuses them) with them escaped."""
    if isinstance(obj, msgspec.Struct):
        obj = msgspec.to_builtins(obj)
    try:
        text = json.dumps(
            obj,
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
            sort_keys=canonical,
        )
    except (TypeError, ValueError) as exc:
        raise InvalidEventError(f"value is not JSON: {exc}") from None
    text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8")


def _find_non_finite(obj: Any) -> tuple[str, str] | None:
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(obj, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return f"{value!r} is not a JSON number", render_path(path)
        elif isinstance(value, dict):
            stack.extend((v, (*path, str(k))) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
        elif isinstance(value, msgspec.Struct):
            stack.append((msgspec.to_builtins(value), path))
    return None


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def decode(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode one JSON value, agreeing with ``json.loads`` (see the module notes).

    Raises:
        InvalidEventError: for malformed JSON, invalid UTF-8, numbers out of range or
            nesting too deep to decode.
    """
    if isinstance(data, str):
        try:
            buf = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidEventError(f"text is not valid Unicode: {exc.reason}") from None
    else:
        buf = bytes(data)
    return _decode_value(buf)


def decode_many(payloads: Iterable[bytes | bytearray | memoryview | str]) -> list[Any]:
    """Decode many JSON texts at once (joined into one array: one call into msgspec).

    Each payload must be one complete JSON value, as ``IncomingEvent.raw`` is.
    """
    items = [p.encode("utf-8") if isinstance(p, str) else bytes(p) for p in payloads]
    if not items:
        return []
    try:
        values = _LIST_DECODER.decode(b"[" + b",".join(items) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
        values = None
    if values is None or len(values) != len(items):
        return [_decode_value(item) for item in items]
    return values


def _decode_value(buf: bytes) -> Any:
    try:
        return _DECODER.decode(buf)
    except RecursionError:
        raise InvalidEventError("JSON is nested too deeply to decode") from None
    except UnicodeDecodeError:
        raise InvalidEventError(f"invalid UTF-8 at byte {_utf8_error_offset(buf)}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        if isinstance(exc, msgspec.DecodeError) and _SURROGATE_ESCAPE.search(buf):
            value, ok = _decode_stdlib(buf)
            if ok:
                return value
        reason, path = _syntax_problem(buf, exc)
        raise InvalidEventError(reason, path=path) from None


def _utf8_error_offset(buf: bytes) -> int:
    """Where UTF-8 decoding of ``buf`` fails (msgspec reports an offset inside the string)."""
    try:
        buf.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return len(buf)  # pragma: no cover - only called after a decoding error


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of range")
    return value


def _decode_stdlib(buf: bytes) -> tuple[Any, bool]:
    """The standard library's reading, for escaped lone surrogates only."""
    try:
        text = buf.decode("utf-8")
        return json.loads(text, parse_constant=_reject_constant, parse_float=_parse_float), True
    except (ValueError, RecursionError):
        return None, False


def _decode_error_reason(buf: bytes, exc: Exception) -> str:
    message = str(exc)
    match = _BYTE_AT.search(message)
    offset = int(match.group(1)) if match else len(buf)
    line = buf.count(b"\n", 0, offset) + 1
    column = offset - (buf.rfind(b"\n", 0, offset) + 1) + 1
    message = _BYTE_AT.sub("", message).strip()
    return f"malformed JSON at line {line}, column {column} (byte {offset}): {message}"


# --------------------------------------------------------------------------------------------
# Locating problems in JSON text without recursion
# --------------------------------------------------------------------------------------------


def _key_text(token: bytes) -> str:
    try:
        value = json.loads(token.decode("utf-8", "surrogateescape"))
    except ValueError:
        return token.decode("utf-8", "replace").strip('"')
    return value if isinstance(value, str) else str(value)


def _scan(
    buf: bytes, *, top_array: bool, max_depth: int | None = None, stop_at: int | None = None
) -> tuple[int | None, list[str | int], bool]:
    """Walk JSON text with a flat token scanner (no recursion, so any nesting is safe).

    Returns ``(element, path, too_deep)``: the index of the top-level array element reached
    (``None`` unless ``top_array``), the JSON path there (inside the element), and whether a
    container deeper than ``max_depth`` was found (the scan stops at the first one). Without
    ``max_depth`` the scan stops at byte ``stop_at`` (the place of a syntax error).
    """
    # Each open container: [is_object, current key or index].
    stack: list[list[Any]] = []
    element = 0
    pending: bytes | None = None
    base = 1 if top_array else 0
    for match in _TOKEN.finditer(buf):
        if stop_at is not None and match.start() >= stop_at:
            break
        token = match.group()
        first = token[0]
        if first == 0x22:  # a string
            pending = token
            continue
        if first in (0x7B, 0x5B):  # { [
            stack.append([first == 0x7B, None if first == 0x7B else 0])
            if max_depth is not None and len(stack) - base > max_depth:
                return (element if top_array else None), _path_of(stack[base:-1]), True
        elif first in (0x7D, 0x5D):  # } ]
            if stop_at is not None and match.start() >= stop_at - 1:
                break  # msgspec may place a syntax error one byte past the closer it tripped on
            if stack:
                stack.pop()
        elif first == 0x3A:  # :
            if stack and stack[-1][0] and pending is not None:
                stack[-1][1] = _key_text(pending)
        elif first == 0x2C and stack:  # ,
            top = stack[-1]
            if not top[0]:
                top[1] += 1
                if top_array and len(stack) == 1:
                    element += 1
            else:
                top[1] = None
        pending = None
    return (element if top_array else None), _path_of(stack[base:]), False


_BRACKETS_ONLY = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
#: What may follow a backslash in JSON text (``\\``, ``\"``, ``\/``, ``\b`` ... ``\u``).
_ESCAPED = b'"\\/bfnrtu'
_NOT_STRUCTURE_OR_ESCAPE = bytes(b for b in range(256) if b not in b"[]{}" + _ESCAPED)
_ESCAPE_LEFTOVERS = b"\\/bfnrtu"
#: Texts longer than this have their brackets counted in the skeleton (see _deeper_than):
#: two counts over a short text cost less than making its skeleton.
_COUNT_IN_SKELETON_FROM = 4096


def _deeper_than(raw: bytes, max_depth: int) -> bool:
    """Whether well-formed JSON text nests deeper than ``max_depth``, at C speed.

    Everything but brackets and quotes is deleted, strings dropped (every other piece
    between quotes), and innermost ``[]`` pairs removed one level per pass: passes count the
    depth. Escapes are cut first (pairs of backslashes first, so ``\\\\`` and ``\\"``
    read right), on a skeleton that still holds every character an escape can put after
    its backslash: each escape stays a pair there, as in the text, and the copies made to
    cut them are a fraction of the text's size.
    """
    long_text = len(raw) > _COUNT_IN_SKELETON_FROM
    if not long_text:
        brackets = raw.count(b"{")
        if brackets <= max_depth:
            brackets += raw.count(b"[")
            if brackets <= max_depth:
                return False
    escaped = b"\\" in raw
    skeleton = raw.translate(
        _BRACKETS_ONLY, _NOT_STRUCTURE_OR_ESCAPE if escaped else _NOT_STRUCTURE
    )
    # A long text (a request body resending the history) has its brackets counted in the
    # skeleton, a fraction of its size, where both kinds are "[": the same count.
    if long_text and skeleton.count(b"[") <= max_depth:
        return False
    if escaped:
        skeleton = skeleton.replace(b"\\\\", b"").replace(b'\\"', b"")
        skeleton = skeleton.translate(None, _ESCAPE_LEFTOVERS)
    if b'"' in skeleton:
        # Most strings hold no bracket and are left as '""'. Cutting adjacent quote pairs
        # first leaves every bracket with as many quotes before it, odd or even, so the
        # strings are the same every-other pieces, of a skeleton a fraction of the size.
        skeleton = skeleton.replace(b'""', b"")
        if b'"' in skeleton:
            skeleton = b"".join(skeleton.split(b'"')[::2])
    for _ in range(max_depth):
        if not skeleton:
            return False
        skeleton = skeleton.replace(b"[]", b"")
    return bool(skeleton)


def _path_of(stack: list[list[Any]]) -> list[str | int]:
    return [entry[1] for entry in stack if entry[1] is not None]


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
        texts = list(map(_ENCODER.encode, items))
    except (UnicodeEncodeError, RecursionError, TypeError, ValueError, OverflowError):
        return None
    whole = b"[" + b",".join(texts) + b"]"
    data = _DECODER.decode(whole)
    if data != items:  # equal to the dicts, so dicts themselves
        return None
    if _deeper_than(whole, limits.max_depth + 1):  # + 1: the array around the events
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
    if _deeper_than(whole, limits.max_depth + 1):  # + 1: the array around the events
        return None
    raws = _RAW_LIST_DECODER.decode(whole)
    out = []
    for item, raw in zip(data, raws):
        text = bytes(raw)
        if len(text) > limits.max_event_bytes:
            return None
        out.append(IncomingEvent(data=item, raw=text))
    return out


def _from_item(item: Any, index: int, limits: _Limits) -> IncomingEvent:
    if isinstance(item, (str, bytes, bytearray, memoryview)):
        buf = _as_bytes(item, index).strip(_WS)
        if buf.startswith(_BOM):
            buf = buf[len(_BOM) :].strip(_WS)
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
        raw = _ENCODER.encode(obj)
    except (UnicodeEncodeError, RecursionError, TypeError, ValueError, OverflowError):
        raw = None  # lone surrogates, or not JSON: the walk below tells which
    data: Any = _DECODER.decode(raw) if raw is not None else None
    # Fast path: msgspec wrote it and read back the same thing, and it cannot nest too deeply.
    if raw is None or data != obj or _deeper_than(raw, limits.max_depth):
        problem = _check_json_value(obj, limits.max_depth)
        if problem is not None:
            raise InvalidEventError(
                problem[0], index=index, event_type=event_type, path=render_path(problem[1])
            )
        if raw is None:
            try:
                raw = _encode_surrogates(obj, canonical=False)
                data = _decode_value(raw)
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
    if buf.startswith(_BOM):
        buf = buf[len(_BOM) :]
    body = buf.lstrip(_WS)
    if body[:1] == b"[":
        # In memory, one msgspec call reads the whole array (much faster than splitting it).
        return _parse_array(body.rstrip(_WS), limits)
    return list(_events_of_text(iter(()), buf, limits))


def _events_of_text(
    chunks: Iterator[bytes], head: bytes, limits: _Limits
) -> Iterator[IncomingEvent]:
    """The events of a JSON array, one JSON object, JSON Lines or SSE, detected from the
    content: ``head`` is the start (without its BOM), ``chunks`` the rest."""
    body = head.lstrip(_WS)
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
            shown = first_line[:40].decode("utf-8", "replace")
            raise InvalidEventError(
                f"input is not a JSON object or array, JSON Lines or SSE (it starts with {shown!r})"
            )
        yield from _stream_sse(chunks, head, limits)


def _parse_array(body: bytes, limits: _Limits) -> list[IncomingEvent]:
    with contextlib.suppress(msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        fast = _from_array_text(body, _DECODER.decode(body), None, limits)
        if fast is not None:
            return fast
    try:
        items = _RAW_LIST_DECODER.decode(body)
    except RecursionError:
        element, path, too_deep = _scan(body, top_array=True, max_depth=limits.max_depth)
        reason = (
            f"nested deeper than {limits.max_depth} levels"
            if too_deep
            else "JSON is nested too deeply to decode"
        )
        raise InvalidEventError(reason, index=element, path=render_path(path)) from None
    except UnicodeDecodeError:
        offset = _utf8_error_offset(body)
        element, path, _ = _scan(body, top_array=True, stop_at=offset)
        raise InvalidEventError(
            f"invalid UTF-8 at byte {offset}", index=element, path=render_path(path)
        ) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        if isinstance(exc, msgspec.DecodeError) and _SURROGATE_ESCAPE.search(body):
            # msgspec refuses escaped lone surrogates, which JSON.parse and json.loads take
            # (JS producers split emoji): read the array element by element instead, each
            # keeping its bytes (the standard library reads the ones with surrogates), and
            # a problem elsewhere named at its own element.
            return list(_stream_array(iter(()), body, limits))
        match = _BYTE_AT.search(str(exc))
        offset = int(match.group(1)) if match else len(body)
        element, path, _ = _scan(body, top_array=True, stop_at=offset)
        raise InvalidEventError(
            _decode_error_reason(body, exc), index=element, path=render_path(path)
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
        start = head[len(_BOM) :] if head.startswith(_BOM) else head
        body = start.lstrip(_WS)
        if len(head) >= len(_BOM) and body and (
            body[0] in b"[{" or b"\n" in body or b"\r" in body
        ):
            break
        if len(start) > limits.max_event_bytes + _SLACK:
            if not body:
                raise InvalidEventError(
                    f"no event in the first {len(start)} bytes: the input is only whitespace"
                )
            break
    if head.startswith(_BOM):
        head = head[len(_BOM) :]
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
        yield _event_from_bytes(body.strip(_WS), 0, limits, where="")
        return
    first_line = body[: min(ends)].strip(_WS) if ends else body
    # JSON Lines when the first line is a complete JSON value by itself.
    if ends and len(first_line) <= limits.max_event_bytes:
        try:
            _DECODER.decode(first_line)
            complete = True
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
            complete = bool(_SURROGATE_ESCAPE.search(first_line)) and _decode_stdlib(first_line)[1]
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
        yield _event_from_bytes(body.strip(_WS), 0, limits, where="")
        return
    index = lineno = 0
    try:
        for lineno, line in enumerate(_lines(chunks, body, limit), 1):
            line = line.strip(_WS)
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
    payload = payload.strip(_WS)
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
            element = buf[start:p].rstrip(_WS)
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
        if buf[end + 1 : end + 65].lstrip(_WS)[:1] in (b",", b"]"):
            break
    else:
        return None
    end += 1
    whole = b"[" + buf[pos:end] + b"]"
    try:
        data = _DECODER.decode(whole)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
        return None
    events = _from_array_text(whole, data, None, limits)
    return (events, end) if events else None


def _expect_end(
    chunks: Iterator[bytes], buf: bytes, pos: int, base: int, last: int | None
) -> None:
    """Only whitespace may follow a JSON array."""
    while True:
        rest = buf[pos:].lstrip(_WS)
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
        data = _DECODER.decode(raw)
    except RecursionError:
        too_deep_to_decode = True
    except UnicodeDecodeError:
        offset = _utf8_error_offset(raw)
        _, at, _ = _scan(raw, top_array=False, stop_at=offset)
        raise InvalidEventError(
            f"{prefix}invalid UTF-8 at byte {offset}", index=index, path=render_path(at)
        ) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        data, ok = _decode_stdlib(raw) if _SURROGATE_ESCAPE.search(raw) else (None, False)
        if not ok:
            reason, where_in = _syntax_problem(raw, exc)
            raise InvalidEventError(f"{prefix}{reason}", index=index, path=where_in) from None
    if too_deep_to_decode or _deeper_than(raw, limits.max_depth):
        _, path, too_deep = _scan(raw, top_array=False, max_depth=limits.max_depth)
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


def _syntax_problem(raw: bytes, exc: Exception) -> tuple[str, str]:
    """Reason and JSON path of a msgspec decoding error in one event's text."""
    if isinstance(exc, msgspec.ValidationError):
        # A number out of range (msgspec's own path for it is "$[...]"): find it.
        offset, reason = len(raw), f"number out of range ({exc})"
        for number in _STRING_OR_NUMBER.finditer(raw):
            token = number.group()
            if token[0] == 0x22:
                continue
            shown = token[:24].decode("ascii") + ("..." if len(token) > 24 else "")
            if not any(c in token for c in b".eE"):
                if len(token.lstrip(b"-")) > sys.get_int_max_str_digits() > 0:
                    offset = number.start()
                    reason = (
                        f"integer {shown} has {len(token.lstrip(b'-'))} digits, over Python's "
                        f"limit of {sys.get_int_max_str_digits()} (json.loads refuses it too)"
                    )
                    break
            elif math.isinf(float(token)):
                offset = number.start()
                reason = f"{shown} is out of the range of a double (it would read back as infinity)"
                break
        _, segments, _ = _scan(raw, top_array=False, stop_at=offset)
        return reason, render_path(segments)
    match = _BYTE_AT.search(str(exc))
    offset = int(match.group(1)) if match else len(raw)
    _, segments, _ = _scan(raw, top_array=False, stop_at=offset)
    return _decode_error_reason(raw, exc), render_path(segments)
