"""JSON text and values, exactly: the store's encoder and decoder of events' JSON.

:func:`encode` and :func:`canonical_bytes` (keys sorted: what hashes cover) write JSON,
:func:`decode` and :func:`decode_many` read it, with the edge cases decided so that a value
reads back equal to what was given (:mod:`agui_store.codec.ingest` lists them): integers of
any size, ``-0.0``, escaped lone surrogates (through the standard library, which msgspec
refuses), and nesting far deeper than any recursion limit refused with the path of the first
too-deep value. The scanners that find that path, and that word a syntax error with its byte
offset, are here too: the ingest codec's readers share them.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable
from typing import Any

import msgspec

from agui_store.errors import InvalidEventError
from agui_store.protocol.validate import render_path

__all__ = ["canonical_bytes", "decode", "decode_many", "encode"]

ENCODER = msgspec.json.Encoder()
_CANONICAL = msgspec.json.Encoder(order="sorted")
DECODER = msgspec.json.Decoder()
RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_LIST_DECODER = msgspec.json.Decoder(list[Any])

#: What a text may begin with (a UTF-8 byte-order mark), and JSON's whitespace.
BOM = b"\xef\xbb\xbf"
WHITESPACE = b" \t\r\n"
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_STRING_OR_NUMBER = re.compile(
    rb'"[^"\\]*(?:\\.[^"\\]*)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?', re.S
)
#: Where msgspec says a syntax error is, in its message.
BYTE_AT = re.compile(r"\(byte (\d+)\)")


# A JSON token scanner for error locations: strings (skipped whole) and structural characters.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}:,]', re.S)


def encode(obj: Any) -> bytes:
    """Compact JSON of a JSON value (or a msgspec struct).

    Raises:
        InvalidEventError: for values JSON cannot hold (NaN, infinities, non-JSON types).
    """
    return _encode_with(ENCODER, obj, canonical=False)


def canonical_bytes(obj: Any) -> bytes:
    """Canonical JSON for content addressing: keys sorted, compact separators, UTF-8.

    Equal JSON values (as ``==`` on decoded JSON) give equal bytes, whatever their key order.
    """
    return _encode_with(_CANONICAL, obj, canonical=True)


def _encode_with(encoder: msgspec.json.Encoder, obj: Any, *, canonical: bool) -> bytes:
    try:
        out = encoder.encode(obj)
    except UnicodeEncodeError:
        out = encode_surrogates(obj, canonical=canonical)
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


def encode_surrogates(obj: Any, *, canonical: bool) -> bytes:
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
    return decode_value(buf)


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
        return [decode_value(item) for item in items]
    return values


def decode_value(buf: bytes) -> Any:
    """:func:`decode` of bytes already in hand; a refusal raises ``InvalidEventError``."""
    try:
        return DECODER.decode(buf)
    except RecursionError:
        raise InvalidEventError("JSON is nested too deeply to decode") from None
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        if refused_utf8(exc):
            raise InvalidEventError(f"invalid UTF-8 at byte {utf8_error_offset(buf)}") from None
        if isinstance(exc, msgspec.DecodeError) and SURROGATE_ESCAPE.search(buf):
            value, ok = decode_stdlib(buf)
            if ok:
                return value
        reason, path = syntax_problem(buf, exc)
        raise InvalidEventError(reason, path=path) from None


def refused_utf8(exc: Exception) -> bool:
    """Whether msgspec refused its input as invalid UTF-8: up to msgspec 0.22 it raises
    ``UnicodeDecodeError``, from 0.23 a ``DecodeError`` that says so."""
    if isinstance(exc, UnicodeDecodeError):
        return True
    return isinstance(exc, msgspec.DecodeError) and "invalid utf-8" in str(exc).lower()


def utf8_error_offset(buf: bytes) -> int:
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


def decode_stdlib(buf: bytes) -> tuple[Any, bool]:
    """The standard library's reading, for escaped lone surrogates only."""
    try:
        text = buf.decode("utf-8")
        return json.loads(text, parse_constant=_reject_constant, parse_float=_parse_float), True
    except (ValueError, RecursionError):
        return None, False


def decode_error_reason(buf: bytes, exc: Exception) -> str:
    """Why ``buf`` is not JSON, in words that name the place (``exc``: the decoder's error)."""
    message = str(exc)
    match = BYTE_AT.search(message)
    offset = int(match.group(1)) if match else len(buf)
    line = buf.count(b"\n", 0, offset) + 1
    column = offset - (buf.rfind(b"\n", 0, offset) + 1) + 1
    message = BYTE_AT.sub("", message).strip()
    return f"malformed JSON at line {line}, column {column} (byte {offset}): {message}"


def _key_text(token: bytes) -> str:
    try:
        value = json.loads(token.decode("utf-8", "surrogateescape"))
    except ValueError:
        return token.decode("utf-8", "replace").strip('"')
    return value if isinstance(value, str) else str(value)


def scan(
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


#: Texts longer than this have their brackets counted in the skeleton (see deeper_than):
#: two counts over a short text cost less than making its skeleton.
_COUNT_IN_SKELETON_FROM = 4096


def deeper_than(raw: bytes, max_depth: int) -> bool:
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


def syntax_problem(raw: bytes, exc: Exception) -> tuple[str, str]:
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
        _, segments, _ = scan(raw, top_array=False, stop_at=offset)
        return reason, render_path(segments)
    match = BYTE_AT.search(str(exc))
    offset = int(match.group(1)) if match else len(raw)
    _, segments, _ = scan(raw, top_array=False, stop_at=offset)
    return decode_error_reason(raw, exc), render_path(segments)
