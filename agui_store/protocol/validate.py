"""Validation of AG-UI events and run inputs against the model (:mod:`agui_store.protocol.model`),
as the official client's schemas decide, and the conversions between structs and wire dicts.

Fast path: ``msgspec.convert`` into the event's struct (well under a microsecond for a small
event). It is exact in one direction: whatever it accepts is valid. When it refuses, a walker
compiled from the same structs (``msgspec.inspect``) decides, because a few things are valid
that the struct types cannot express (an unknown union member, an integral float such as
``1.0`` for an integer) and because the walker words the error and names the JSON path. The
leniency rules are the model's (its module notes).
"""

import json
import re
from collections.abc import Callable
from typing import Any, NoReturn

import msgspec
import msgspec.inspect as mi

from agui_store.errors import InvalidEventError
from agui_store.protocol.js import UNDEFINED
from agui_store.protocol.model import (
    EVENT_STRUCTS,
    Event,
    RunAgentInput,
)

__all__ = [
    "check_event_slow",
    "from_dict",
    "kind_of",
    "render_path",
    "to_dict",
    "validate_event",
    "validate_events",
    "validate_input",
]



_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")

_PathSeg = str | int


def render_path(segments: list[_PathSeg] | tuple[_PathSeg, ...]) -> str:
    """``["messages", 2, "role"]`` → ``$.messages[2].role`` (odd keys as ``["a b"]``)."""
    out = ["$"]
    for seg in segments:
        if isinstance(seg, int):
            out.append(f"[{seg}]")
        elif _IDENT.match(seg):
            out.append(f".{seg}")
        else:
            try:
                quoted = msgspec.json.encode(seg).decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:  # a key holding a lone surrogate
                quoted = json.dumps(seg)
            out.append(f"[{quoted}]")
    return "".join(out)


def kind_of(value: object) -> str:
    """The JSON kind of a value, worded for an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


class _Problem(Exception):
    """Raised inside the walker; carries the reason and the path (innermost segment last)."""

    def __init__(self, reason: str, path: list[_PathSeg]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path


_Check = Callable[[Any, list[_PathSeg]], None]


def _fail(reason: str, path: list[_PathSeg]) -> NoReturn:
    raise _Problem(reason, list(path))


def _is_integral(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


_NON_NULL_KINDS = {mi.DictType, mi.ListType, mi.StrType, mi.IntType, mi.FloatType, mi.BoolType}


def _describe(t: mi.Type) -> str:
    if isinstance(t, mi.StrType):
        return "a string"
    if isinstance(t, mi.IntType):
        return "an integer"
    if isinstance(t, mi.FloatType):
        return "a number"
    if isinstance(t, mi.BoolType):
        return "a boolean"
    if isinstance(t, mi.NoneType):
        return "null"
    if isinstance(t, mi.ListType):
        return "an array"
    if isinstance(t, (mi.DictType, mi.StructType)):
        return "an object"
    if isinstance(t, mi.LiteralType):
        return " or ".join(repr(v) for v in t.values)
    if isinstance(t, mi.UnionType):
        kinds = {type(u) for u in t.types}
        if kinds >= _NON_NULL_KINDS and mi.NoneType not in kinds:
            return "a JSON value other than null"
        return " or ".join(_describe(u) for u in t.types)
    return "a JSON value"


def _compile(t: mi.Type) -> _Check:
    if isinstance(t, mi.AnyType):
        return lambda value, path: None
    if isinstance(t, mi.StrType):
        pattern = re.compile(t.pattern) if t.pattern else None

        def check_str(value: Any, path: list[_PathSeg]) -> None:
            if not isinstance(value, str):
                _fail(f"expected a string, got {kind_of(value)}", path)
            if pattern is not None and not pattern.search(value):
                _fail(f"expected a JSON Pointer (RFC 6901), got {value!r}", path)

        return check_str
    if isinstance(t, mi.IntType):
        lo, hi = t.ge, t.le

        def check_int(value: Any, path: list[_PathSeg]) -> None:
            if not _is_integral(value):
                _fail(f"expected an integer, got {kind_of(value)}", path)
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                _fail(f"expected an integer in [{lo}, {hi}], got {value!r}", path)

        return check_int
    if isinstance(t, mi.FloatType):

        def check_float(value: Any, path: list[_PathSeg]) -> None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                _fail(f"expected a number, got {kind_of(value)}", path)

        return check_float
    if isinstance(t, mi.BoolType):

        def check_bool(value: Any, path: list[_PathSeg]) -> None:
            if not isinstance(value, bool):
                _fail(f"expected a boolean, got {kind_of(value)}", path)

        return check_bool
    if isinstance(t, mi.NoneType):

        def check_none(value: Any, path: list[_PathSeg]) -> None:
            if value is not None:
                _fail(f"expected null, got {kind_of(value)}", path)

        return check_none
    if isinstance(t, mi.LiteralType):
        allowed = t.values
        wording = ", ".join(repr(v) for v in allowed)

        def check_literal(value: Any, path: list[_PathSeg]) -> None:
            if not isinstance(value, str) or value not in allowed:
                shown = repr(value) if isinstance(value, str) else kind_of(value)
                if len(allowed) == 1:
                    _fail(f"expected {wording}, got {shown}", path)
                _fail(f"expected one of {wording}, got {shown}", path)

        return check_literal
    if isinstance(t, mi.ListType):
        item = _compile(t.item_type)
        min_length = t.min_length

        def check_list(value: Any, path: list[_PathSeg]) -> None:
            if not isinstance(value, list):
                _fail(f"expected an array, got {kind_of(value)}", path)
            if min_length is not None and len(value) < min_length:
                _fail(f"expected at least {min_length} item(s), got {len(value)}", path)
            for i, entry in enumerate(value):
                path.append(i)
                item(entry, path)
                path.pop()

        return check_list
    if isinstance(t, mi.DictType):
        values = _compile(t.value_type)

        def check_dict(value: Any, path: list[_PathSeg]) -> None:
            if not isinstance(value, dict):
                _fail(f"expected an object, got {kind_of(value)}", path)
            for key, entry in value.items():
                path.append(key)
                values(entry, path)
                path.pop()

        return check_dict
    if isinstance(t, mi.StructType):
        return _compile_struct(t)
    if isinstance(t, mi.UnionType):
        return _compile_union(t)
    raise TypeError(f"no validator for {t!r}")  # pragma: no cover - model uses none other


def _compile_struct(t: mi.StructType) -> _Check:
    fields = [(f.encode_name, f.required, _compile(f.type)) for f in t.fields]

    def check_struct(value: Any, path: list[_PathSeg]) -> None:
        if not isinstance(value, dict):
            _fail(f"expected an object, got {kind_of(value)}", path)
        for name, required, check in fields:
            if name in value:
                path.append(name)
                check(value[name], path)
                path.pop()
            elif required:
                path.append(name)
                _fail(f"missing required field {name!r}", path)

    return check_struct


def _compile_union(t: mi.UnionType) -> _Check:
    structs = [u for u in t.types if isinstance(u, mi.StructType)]
    others = [u for u in t.types if not isinstance(u, mi.StructType)]
    if structs:
        tag_field = structs[0].tag_field
        assert tag_field is not None and all(s.tag_field == tag_field for s in structs)
        by_tag = {s.tag: _compile_struct(s) for s in structs}
        known = ", ".join(repr(k) for k in by_tag)
        rest = _compile_union(mi.UnionType(tuple(others))) if others else None

        def check_tagged(value: Any, path: list[_PathSeg]) -> None:
            if not isinstance(value, dict):
                if rest is not None:
                    rest(value, path)
                    return
                _fail(f"expected an object, got {kind_of(value)}", path)
            if tag_field not in value:
                path.append(tag_field)
                _fail(f"missing required field {tag_field!r} (one of {known})", path)
            tag = value[tag_field]
            if not isinstance(tag, str):
                path.append(tag_field)
                _fail(f"expected a string (one of {known}), got {kind_of(tag)}", path)
            check = by_tag.get(tag)
            # An unknown member (a newer protocol's part, role, op or outcome) is accepted
            # unread, as the official client strips it instead of failing.
            if check is not None:
                check(value, path)

        return check_tagged

    checks = [(u, _compile(u)) for u in others]
    wording = _describe(t)

    def check_union(value: Any, path: list[_PathSeg]) -> None:
        first: _Problem | None = None
        depth = len(path)
        for u, check in checks:
            if not _same_kind(u, value):
                continue
            try:
                check(value, path)
                return
            except _Problem as problem:
                first = first or problem
                del path[depth:]
        if first is not None:
            raise first
        _fail(f"expected {wording}, got {kind_of(value)}", path)

    return check_union


def _same_kind(t: mi.Type, value: Any) -> bool:
    """Whether ``value`` is of the basic JSON kind of ``t`` (the union member to try)."""
    if isinstance(t, mi.AnyType):
        return True
    if isinstance(t, (mi.StrType, mi.LiteralType)):
        return isinstance(value, str)
    if isinstance(t, mi.BoolType):
        return isinstance(value, bool)
    if isinstance(t, (mi.IntType, mi.FloatType)):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(t, mi.NoneType):
        return value is None
    if isinstance(t, mi.ListType):
        return isinstance(value, list)
    if isinstance(t, (mi.DictType, mi.StructType)):
        return isinstance(value, dict)
    return True  # pragma: no cover


def _struct_info(cls: type[msgspec.Struct]) -> mi.StructType:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return info


_EVENT_CHECKS: dict[str, _Check] = {
    name: _compile_struct(_struct_info(cls)) for name, cls in EVENT_STRUCTS.items()
}
_INPUT_CHECK: _Check = _compile_struct(_struct_info(RunAgentInput))


def _walk(check: _Check, obj: Any) -> _Problem | None:
    try:
        check(obj, [])
    except _Problem as problem:
        return problem
    return None


def check_event_slow(obj: dict[str, Any]) -> tuple[str, str] | None:
    """The walker's verdict alone: ``(reason, path)`` or ``None``. For tests and diagnostics."""
    check = _EVENT_CHECKS.get(obj.get("type"))  # type: ignore[arg-type]
    if check is None:
        return None
    problem = _walk(check, obj)
    return None if problem is None else (problem.reason, render_path(problem.path))


def validate_event(obj: Any, *, index: int | None = None) -> str:
    """Check one event against its 1.0 shape and return its ``type``.

    Args:
        obj: the event as decoded JSON (a dict).
        index: its position in the batch, carried into the error.

    Returns:
        The event's ``type`` (also for unknown types, which are accepted).

    Raises:
        InvalidEventError: naming ``index``, the type and the JSON path of the bad value, when
            the event is not an object, has no string ``type``, or is of a known type and breaks
            its shape (missing required field, wrong kind, value outside its enum).
    """
    if not isinstance(obj, dict):
        raise InvalidEventError(
            f"an event must be a JSON object, got {kind_of(obj)}", index=index, path="$"
        )
    event_type = obj.get("type", UNDEFINED)
    if not isinstance(event_type, str):
        if event_type is UNDEFINED:
            raise InvalidEventError("missing required field 'type'", index=index, path="$.type")
        raise InvalidEventError(
            f"'type' must be a string, got {kind_of(event_type)}", index=index, path="$.type"
        )
    cls = EVENT_STRUCTS.get(event_type)
    if cls is None:
        if not event_type:
            raise InvalidEventError("'type' must not be empty", index=index, path="$.type")
        return event_type  # a newer protocol's event: kept as it is
    try:
        msgspec.convert(obj, cls)
    except msgspec.ValidationError as exc:
        problem = _walk(_EVENT_CHECKS[event_type], obj)
        if problem is not None:
            raise InvalidEventError(
                problem.reason,
                index=index,
                event_type=event_type,
                path=render_path(problem.path),
            ) from exc
    return event_type


def validate_events(objs: list[Any]) -> list[str]:
    """:func:`validate_event` for a batch (``index`` is the position in ``objs``).

    The common batch (known types, all valid) takes a tight loop of msgspec conversions;
    any other is checked event by event, which accepts unknown types and names the problem.
    (One conversion of the whole list into a tagged union measured slower.)
    """
    structs, convert = EVENT_STRUCTS, msgspec.convert
    try:
        for obj in objs:
            convert(obj, structs[obj["type"]])
    except (msgspec.ValidationError, KeyError, TypeError):
        return [validate_event(obj, index=i) for i, obj in enumerate(objs)]
    return [obj["type"] for obj in objs]


def validate_input(obj: Any) -> None:
    """Check a ``RunAgentInput`` (a request body); errors name the JSON path (``$.messages[0]``).

    Raises:
        InvalidEventError: when the input breaks its 1.0 shape.
    """
    if not isinstance(obj, dict):
        raise InvalidEventError(f"a RunAgentInput must be a JSON object, got {kind_of(obj)}")
    try:
        msgspec.convert(obj, RunAgentInput)
    except msgspec.ValidationError as exc:
        problem = _walk(_INPUT_CHECK, obj)
        if problem is not None:
            raise InvalidEventError(
                f"RunAgentInput: {problem.reason}", path=render_path(problem.path)
            ) from exc


# --------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------


def to_dict(struct: msgspec.Struct) -> dict[str, Any]:
    """The camelCase wire dict of a struct (unset optionals omitted, ``type`` included)."""
    out = msgspec.to_builtins(struct)
    assert isinstance(out, dict)
    return out


def from_dict(obj: Any, *, index: int | None = None) -> Event:
    """The struct of an event dict (unknown fields are dropped from the view).

    Raises:
        InvalidEventError: when the event is invalid, or valid but not representable by this
            model: an unknown event type, an unknown union member inside it, or an integral
            float where the model holds an int.
    """
    event_type = validate_event(obj, index=index)
    cls = EVENT_STRUCTS.get(event_type)
    if cls is None:
        raise InvalidEventError(
            f"unknown event type {event_type!r} has no struct in this model",
            index=index,
            event_type=event_type,
            path="$.type",
        )
    try:
        result: Event = msgspec.convert(obj, cls)  # type: ignore[assignment]
    except msgspec.ValidationError as exc:
        raise InvalidEventError(
            f"valid, but not representable by the struct model: {exc}",
            index=index,
            event_type=event_type,
        ) from exc
    return result
