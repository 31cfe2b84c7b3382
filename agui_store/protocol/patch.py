"""RFC 6902 JSON Patch, applied exactly as the official AG-UI client applies it.

``@ag-ui/client`` 1.0.0 applies every ``STATE_DELTA`` (in its reducer and in ``compactEvents``)
with ``fast-json-patch`` 3.1.1 as ``applyPatch(state, delta, validate=true,
mutateDocument=false)``: the document is cloned, the operations are applied one by one, and
the first failing operation throws, which the client catches and treats as "patch skipped,
state unchanged". :func:`apply_patch` reproduces that answer — the same document, or a
:class:`PatchError` exactly when the client's patch throws — so a state replayed here equals
the state the client holds.

Where fast-json-patch departs from the RFC, the client's behaviour wins, because that is what
users see. The departures that matter in practice:

* array indexes are read with ``~~key``: ``"01"`` is index 1 and ``""`` is index 0 for
  ``add`` and ``test`` (``replace``/``remove`` first require the exact key to exist, so they
  fail); indexes wrap at 2**32 (``"4294967296"`` is 0, ``"4294967295"`` is -1);
* ``copy``/``move`` to an array index past the end append instead of failing;
* a ``move``/``copy`` whose ``from`` names an array's ``length`` (or an ``Array.prototype``
  method) reads that property: ``length`` copies the array length, a method copies a value
  that JSON drops, and ``move`` removes element 0;
* a ``from`` without a leading ``/`` is not rejected: its first segment is ignored;
* root operations (``path == ""``) are not checked: ``copy``/``move`` to the root from a
  missing path yields JS ``undefined`` (see :data:`UNDEFINED`);
* keys inherited from ``Object.prototype`` count as present (``replace /constructor`` on
  ``{}`` succeeds, ``remove /toString`` is a no-op), while ``__proto__`` and
  ``constructor/prototype`` anywhere in a path are refused;
* ``test`` compares with JS strict deep equality: ``1 == 1.0`` but ``1 != true``; an object
  value with an own ``hasOwnProperty`` key never compares equal;
* on a document that is a string, number or boolean, writes are silently ignored (the
  library runs in sloppy mode) and reads see JS properties (``"abc"`` has ``/length`` 3 and
  ``/0`` ``"a"``); on a falsy document (``0``, ``""``, ``false``) only the shape of each
  operation is checked, not whether its paths exist.

The python ``jsonpatch`` package follows the RFC in all of these places, so it cannot serve as
the engine; this module interprets fast-json-patch's algorithm directly over a small model of
JS values and is checked differentially against the official client (``tests/test_patch.py``).

Known divergences (all need patches no producer writes):

* an ``op`` that is not one of the six RFC names or ``_get`` is rejected; fast-json-patch
  also "runs" ``Object.prototype`` method names (``"op": "toString"``) and one-element arrays
  (``"op": ["add"]``) with effects that make no sense;
* a patch whose result contains itself is rejected: ``{"op": "move", "from": "", "path":
  "/x"}`` on an object or array makes the client set a child of the document to the document
  itself, a state it holds but JSON cannot write out. (The cycle is modelled while the patch
  runs: a later operation that replaces the root or cuts the cycle gives the client's
  result.)
* properties of inherited JS functions (``/toString/length``, ``/constructor/name``) read
  as ``undefined`` here, and a document that *is* a function (the root copied from
  ``/toString``) is returned as :data:`UNDEFINED`.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from typing import Any, Final

from agui_store.errors import AguiStoreError
from agui_store.protocol.js import UNDEFINED, as_double, truthy, utf16_units

# UNDEFINED is JavaScript's ``undefined`` of :mod:`agui_store.protocol.js`, also exported here
# because apply_patch returns it: only a root ``copy``/``move`` from a path that does not exist
# gets there. The client then keeps showing the previous state while the next patch starts
# from ``null``; passing UNDEFINED back to apply_patch as the document does the same.
__all__ = ["UNDEFINED", "PatchError", "apply_patch"]


class PatchError(AguiStoreError, ValueError):
    """A JSON Patch that the official client refuses to apply (state left unchanged).

    Attributes:
        index: position of the failing operation in the patch (``None`` when the patch as a
            whole is unusable, e.g. not a list).
        code: fast-json-patch's error name (``OPERATION_PATH_UNRESOLVABLE``,
            ``TEST_OPERATION_FAILED``, ...) or ``TypeError`` for a JS type error.
        operation: the failing operation as given.
        reason: what is wrong, without the location prefix.
    """

    def __init__(
        self,
        reason: str,
        *,
        index: int | None = None,
        code: str = "",
        operation: Any = None,
    ) -> None:
        self.reason = reason
        self.index = index
        self.code = code
        self.operation = operation
        where = "JSON Patch"
        if index is not None:
            where += f" operation {index}"
            if isinstance(operation, dict):
                where += f" ({operation.get('op')!r} at {operation.get('path')!r})"
        super().__init__(f"{where}: {reason}")


class _Builtin:
    """A JS function inherited from a prototype (``{}.toString``): present, not JSON."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Array(list[Any]):
    """A JS array: elements plus the named properties JS lets an array carry."""

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self.props: dict[str, Any] = {}


class _Ref:
    """A value an internal operation inserts as it is (fast-json-patch inserts by reference)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Fail(Exception):
    """A throw inside fast-json-patch: a ``JsonPatchError`` (by name) or a JS ``TypeError``."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _patch_error(code: str, reason: str) -> _Fail:
    return _Fail(code, reason)


def _type_error(reason: str) -> _Fail:
    return _Fail("TypeError", reason)


def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Property names JS values inherit (Node 20): present on every value of that kind.
_OBJECT_PROTO: Final = _names(
    "constructor __defineGetter__ __defineSetter__ hasOwnProperty __lookupGetter__ "
    "__lookupSetter__ isPrototypeOf propertyIsEnumerable toString valueOf __proto__ "
    "toLocaleString"
)
_ARRAY_PROTO: Final = _OBJECT_PROTO | _names(
    "at concat copyWithin fill find findIndex findLast findLastIndex lastIndexOf pop push "
    "reverse shift unshift slice sort splice includes indexOf join keys entries values "
    "forEach filter flat flatMap map every some reduce reduceRight toReversed toSorted "
    "toSpliced with"
)
_STRING_PROTO: Final = _OBJECT_PROTO | _names(
    "anchor at big blink bold charAt charCodeAt codePointAt concat endsWith fontcolor "
    "fontsize fixed includes indexOf isWellFormed italics lastIndexOf link localeCompare "
    "match matchAll normalize padEnd padStart repeat replace replaceAll search slice "
    "small split strike sub substr substring sup startsWith toWellFormed trim trimStart "
    "trimLeft trimEnd trimRight toLocaleLowerCase toLocaleUpperCase toLowerCase "
    "toUpperCase"
)
_NUMBER_PROTO: Final = _OBJECT_PROTO | _names("toExponential toFixed toPrecision")
_BOOLEAN_PROTO: Final = _OBJECT_PROTO
_FUNCTION_PROTO: Final = _OBJECT_PROTO | _names("apply bind call")

_OPS: Final = frozenset({"add", "remove", "replace", "move", "copy", "test", "_get"})
_MAX_INDEX: Final = 2**32 - 2  # the largest JS array index


# --------------------------------------------------------------------------- JS value model


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_js_object(value: Any) -> bool:
    """``typeof value === "object" && value !== null`` (functions are not objects)."""
    return isinstance(value, (dict, list))


def _canonical_index(key: int | str) -> int | None:
    """The array index a property key denotes, or ``None`` for a named property."""
    if isinstance(key, int):
        return key if 0 <= key <= _MAX_INDEX else None
    if key == "0" or (key[:1] in "123456789" and key.isascii() and key.isdigit()):
        number = int(key) if key else -1
        return number if 0 <= number <= _MAX_INDEX else None
    return None


def _property_key(key: int | str | None) -> int | str:
    return "undefined" if key is None else key


def _get(obj: Any, key: int | str | None) -> Any:
    """``obj[key]``, for the kinds of values a patched document can hold."""
    if obj is None or obj is UNDEFINED:
        raise _type_error(f"Cannot read properties of {_js_name(obj)} (reading '{key}')")
    key = _property_key(key)
    if isinstance(obj, dict):
        name = str(key)
        if name in obj:
            return obj[name]
        return _Builtin(name) if name in _OBJECT_PROTO else UNDEFINED
    if isinstance(obj, _Array):
        index = _canonical_index(key)
        if index is not None:
            return obj[index] if index < len(obj) else UNDEFINED
        name = str(key)
        if name == "length":
            return len(obj)
        if name in obj.props:
            return obj.props[name]
        return _Builtin(name) if name in _ARRAY_PROTO else UNDEFINED
    if isinstance(obj, str):
        units = utf16_units(obj)
        index = _canonical_index(key)
        if index is not None:
            return units[index] if index < len(units) else UNDEFINED
        if key == "length":
            return len(units)
        return _Builtin(str(key)) if key in _STRING_PROTO else UNDEFINED
    if isinstance(obj, bool):
        return _Builtin(str(key)) if key in _BOOLEAN_PROTO else UNDEFINED
    if _is_number(obj):
        return _Builtin(str(key)) if key in _NUMBER_PROTO else UNDEFINED
    if isinstance(obj, _Builtin):
        # What every function inherits; its own `name` and `length` are not modelled.
        return _Builtin(str(key)) if key in _FUNCTION_PROTO else UNDEFINED
    return UNDEFINED


def _set(obj: Any, key: int | str | None, value: Any) -> None:
    """``obj[key] = value`` in sloppy mode: writes to primitives vanish silently."""
    if obj is None or obj is UNDEFINED:
        raise _type_error(f"Cannot set properties of {_js_name(obj)} (setting '{key}')")
    key = _property_key(key)
    if isinstance(obj, dict):
        obj[str(key)] = value
    elif isinstance(obj, _Array):
        index = _canonical_index(key)
        if index is not None:
            if index >= len(obj):
                obj.extend([UNDEFINED] * (index + 1 - len(obj)))
            obj[index] = value
        elif key == "length":
            _set_length(obj, value)
        else:
            obj.props[str(key)] = value
    # Strings, numbers, booleans and functions: ignored (sloppy mode) or not modelled.


def _set_length(array: _Array, value: Any) -> None:
    """``array.length = value`` (only reachable through an unchecked ``move`` or ``copy``)."""
    if value is None or isinstance(value, bool):
        number = float(bool(value))
    elif isinstance(value, str):
        number = _to_number(value)
    elif _is_number(value):
        number = as_double(value)
    else:
        number = math.nan  # an object's ToNumber is not modelled
    if not math.isfinite(number) or number != int(number) or not 0 <= number <= _MAX_INDEX + 1:
        raise _Fail("RangeError", "Invalid array length")
    length = int(number)
    if length < len(array):
        del array[length:]
    else:
        array.extend([UNDEFINED] * (length - len(array)))


def _delete(obj: Any, key: int | str | None) -> None:
    """``delete obj[key]`` on a non-array (sloppy mode: never throws once ``obj`` exists)."""
    if isinstance(obj, dict):
        obj.pop(str(_property_key(key)), None)


def _js_name(value: Any) -> str:
    return "undefined" if value is UNDEFINED else "null"


_JS_NUMBER: Final = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_JS_WHITESPACE: Final = " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"  # noqa: E501


def _to_number(text: str) -> float:
    """JS ``Number(text)``."""
    text = text.strip(_JS_WHITESPACE)
    if text == "":
        return 0.0
    if text in ("Infinity", "+Infinity"):
        return math.inf
    if text == "-Infinity":
        return -math.inf
    for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
        if text[:2].lower() == prefix:
            try:
                return float(int(text[2:], base)) if text[2:].isalnum() else math.nan
            except ValueError:
                return math.nan
    if _JS_NUMBER.fullmatch(text):
        return float(text)
    return math.nan


def _is_integer(key: int | str | None) -> bool:
    """fast-json-patch's ``isInteger``: every character an ASCII digit (``""`` included)."""
    if key is None:
        raise _type_error("Cannot read properties of undefined (reading 'length')")
    if isinstance(key, int):
        return True
    return all("0" <= char <= "9" for char in key)


def _to_int32(key: int | str) -> int:
    """JS ``~~key`` for a key made of digits."""
    number = as_double(int(key)) if isinstance(key, int) else float(key or "0")
    if math.isinf(number):
        return 0
    wrapped = int(number) % 2**32
    return wrapped - 2**32 if wrapped >= 2**31 else wrapped


def _splice(array: _Array, start: int | str, delete_count: int, *items: Any) -> list[Any]:
    """``Array.prototype.splice`` (its start is converted and clamped the JS way)."""
    number = _to_number(start) if isinstance(start, str) else float(start)
    length = len(array)
    if math.isnan(number):
        begin = 0
    elif number < 0:
        begin = 0 if math.isinf(number) else max(length + int(number), 0)
    else:
        begin = length if math.isinf(number) else min(int(number), length)
    count = max(min(delete_count, length - begin), 0)
    removed = array[begin : begin + count]
    array[begin : begin + count] = items
    return removed


def _is_dropped(value: Any) -> bool:
    return value is UNDEFINED or isinstance(value, _Builtin)


def _json_round_trip(value: Any, array: Callable[[Any], Any] = _Array) -> Any:
    """``JSON.parse(JSON.stringify(value))`` below the top level."""
    if isinstance(value, dict):
        return {
            key: _json_round_trip(item, array)
            for key, item in value.items()
            if not _is_dropped(item)
        }
    if isinstance(value, (list, tuple)):
        return array(None if _is_dropped(item) else _json_round_trip(item, array) for item in value)
    return value


def _has_undefined(value: Any) -> bool:
    if value is UNDEFINED:
        return True
    if isinstance(value, dict):
        return any(_has_undefined(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_undefined(item) for item in value)
    return False


def _operation_value(operation: dict[str, Any]) -> Any:
    """The value an operation inserts: a fresh copy of a caller's value, an internal as is."""
    value = operation["value"]
    return value.value if isinstance(value, _Ref) else _json_round_trip(value)


def _deep_clone(value: Any) -> Any:
    """fast-json-patch's ``_deepClone``: a JSON round trip for objects, ``undefined`` → null."""
    if value is UNDEFINED:
        return None
    return _json_round_trip(value)


def _js_equal(doc_value: Any, value: Any) -> bool:
    """fast-json-patch's ``_areEquals(doc_value, value)``; a throw counts as "not equal"."""
    if isinstance(doc_value, bool) or isinstance(value, bool):
        return doc_value is value
    if _is_number(doc_value) and _is_number(value):
        return as_double(doc_value) == as_double(value)
    if isinstance(doc_value, str) and isinstance(value, str):
        return doc_value == value
    if doc_value is None or value is None:
        return doc_value is None and value is None
    if isinstance(doc_value, list) and isinstance(value, list):
        return len(doc_value) == len(value) and all(
            _js_equal(a, b) for a, b in zip(doc_value, value, strict=True)
        )
    if isinstance(doc_value, dict) and isinstance(value, dict):
        # `b.hasOwnProperty(key)` throws when b owns a (non-function) "hasOwnProperty".
        return (
            len(doc_value) == len(value)
            and "hasOwnProperty" not in value
            and all(key in value for key in doc_value)
            and all(_js_equal(item, value[key]) for key, item in doc_value.items())
        )
    return False


# --------------------------------------------------------------------------- fast-json-patch


def _validate(operation: Any, document: Any = UNDEFINED, fragment: str | None = None) -> None:
    """fast-json-patch's ``validator``; the document checks run only for a truthy document."""
    if not isinstance(operation, dict):
        raise _patch_error("OPERATION_NOT_AN_OBJECT", "the operation is not an object")
    op = operation.get("op")
    if not isinstance(op, str) or op not in _OPS:
        raise _patch_error(
            "OPERATION_OP_INVALID",
            f"'op' {op!r} is not one of add, remove, replace, move, copy, test",
        )
    path = operation.get("path")
    if not isinstance(path, str):
        raise _patch_error("OPERATION_PATH_INVALID", "'path' is not a string")
    if path and not path.startswith("/"):
        raise _patch_error("OPERATION_PATH_INVALID", "'path' must be empty or start with '/'")
    if op in ("move", "copy") and not isinstance(operation.get("from"), str):
        raise _patch_error("OPERATION_FROM_REQUIRED", f"'{op}' needs a string 'from'")
    if op in ("add", "replace", "test") and _has_undefined(operation.get("value", UNDEFINED)):
        raise _patch_error("OPERATION_VALUE_REQUIRED", f"'{op}' needs a (JSON) 'value'")
    if fragment is None or not truthy(document):
        return
    if op == "add":
        depth, existing = len(path.split("/")), len(fragment.split("/"))
        if depth not in (existing, existing + 1):
            raise _patch_error(
                "OPERATION_PATH_CANNOT_ADD", f"the parent of {path!r} does not exist"
            )
    elif op in ("replace", "remove", "_get"):
        if path != fragment:
            raise _patch_error("OPERATION_PATH_UNRESOLVABLE", f"{path!r} does not exist")
    elif op in ("move", "copy") and _from_error(document, operation["from"]) == (
        "OPERATION_PATH_UNRESOLVABLE"
    ):
        raise _patch_error(
            "OPERATION_FROM_UNRESOLVABLE", f"'from' {operation['from']!r} does not exist"
        )


def _from_error(document: Any, source: str) -> str | None:
    """The name of the error ``validate([{op: "_get", path: from}], document)`` returns.

    Only ``OPERATION_PATH_UNRESOLVABLE`` stops a move or copy; other errors (a ``from``
    without a leading slash, an array's ``length``) let it go ahead, and a ``TypeError``
    (``__proto__`` in ``from``) propagates.
    """
    probe = {"op": "_get", "path": source}
    try:
        if truthy(document):
            _apply_operation(_deep_clone(document), probe, validate=True)
        else:
            _validate(probe)
    except _Fail as error:
        if error.code in ("TypeError", "RangeError"):
            raise
        return error.code
    return None


def _value_at(document: Any, pointer: str) -> Any:
    """fast-json-patch's ``getValueByPointer``: an unvalidated read."""
    if pointer == "":
        return document
    return _apply_operation(document, {"op": "_get", "path": pointer}, validate=False)[1]


def _apply_operation(
    document: Any, operation: dict[str, Any], *, validate: bool
) -> tuple[Any, Any]:
    """fast-json-patch's ``applyOperation`` (document mutated in place).

    Returns ``(new_document, removed_or_read_value)``.
    """
    if validate:
        _validate(operation)
    op = operation["op"]
    path = operation["path"]
    if path == "":
        return _apply_at_root(document, operation)

    keys = path.split("/")
    obj = document
    step = 1
    fragment: str | None = None
    while True:
        key: int | str | None = keys[step] if step < len(keys) else None
        if isinstance(key, str) and "~" in key:
            key = key.replace("~1", "/").replace("~0", "~")
        if key == "__proto__" or (key == "prototype" and keys[step - 1] == "constructor"):
            raise _type_error("modifying `__proto__` or `constructor/prototype` is banned")
        if validate and fragment is None:
            if _get(obj, key) is UNDEFINED:
                fragment = "/".join(keys[:step])
            elif step == len(keys) - 1:
                fragment = path
            if fragment is not None:
                _validate(operation, document, fragment)
        step += 1
        if isinstance(obj, _Array):
            if key == "-":
                key = len(obj)
            elif validate and not _is_integer(key):
                raise _patch_error(
                    "OPERATION_PATH_ILLEGAL_ARRAY_INDEX",
                    f"{key!r} in {path!r} is not an array index",
                )
            elif _is_integer(key):
                assert key is not None  # _is_integer raised for it
                key = _to_int32(key)
            assert key is not None
            if step >= len(keys):
                if validate and op == "add" and isinstance(key, int) and key > len(obj):
                    raise _patch_error(
                        "OPERATION_VALUE_OUT_OF_BOUNDS",
                        f"index {key} is past the end of the array (length {len(obj)})",
                    )
                return _apply_in_array(document, obj, key, operation)
        elif step >= len(keys):
            return _apply_in_object(document, obj, key, operation)
        obj = _get(obj, key)
        if validate and step < len(keys) and not _is_js_object(obj):
            raise _patch_error(
                "OPERATION_PATH_UNRESOLVABLE", f"cannot reach {path!r}: not a container"
            )


def _apply_at_root(document: Any, operation: dict[str, Any]) -> tuple[Any, Any]:
    op = operation["op"]
    if op in ("add", "replace"):
        return _operation_value(operation), document
    if op in ("move", "copy"):
        return _value_at(document, operation["from"]), document
    if op == "test":
        if not _js_equal(document, operation["value"]):
            raise _patch_error("TEST_OPERATION_FAILED", "the document is not equal to 'value'")
        return document, None
    if op == "remove":
        return None, document
    return document, document  # _get


def _apply_in_array(
    document: Any, array: _Array, key: int | str, operation: dict[str, Any]
) -> tuple[Any, Any]:
    op = operation["op"]
    if op == "add":
        value = _operation_value(operation)
        if _is_integer(key):
            _splice(array, key, 0, value)
        else:
            _set(array, key, value)
        return document, None
    if op == "remove":
        removed = _splice(array, key, 1)
        return document, removed[0] if removed else UNDEFINED
    if op == "replace":
        removed = _get(array, key)
        _set(array, key, _operation_value(operation))
        return document, removed
    return _apply_in_object(document, array, key, operation)


def _apply_in_object(
    document: Any, obj: Any, key: int | str | None, operation: dict[str, Any]
) -> tuple[Any, Any]:
    op = operation["op"]
    if op == "add":
        _set(obj, key, _operation_value(operation))
        return document, None
    if op == "remove":
        removed = _get(obj, key)
        _delete(obj, key)
        return document, removed
    if op == "replace":
        removed = _get(obj, key)
        _set(obj, key, _operation_value(operation))
        return document, removed
    if op == "move":
        source = operation["from"]
        moved = _apply_operation(document, {"op": "remove", "path": source}, validate=False)[1]
        _apply_operation(
            document,
            {"op": "add", "path": operation["path"], "value": _Ref(moved)},
            validate=False,
        )
        return document, None
    if op == "copy":
        copied = _deep_clone(_value_at(document, operation["from"]))
        _apply_operation(
            document,
            {"op": "add", "path": operation["path"], "value": _Ref(copied)},
            validate=False,
        )
        return document, None
    if op == "test":
        if not _js_equal(_get(obj, key), operation["value"]):
            raise _patch_error(
                "TEST_OPERATION_FAILED", f"the value at {operation['path']!r} is not equal"
            )
        return document, None
    return document, _get(obj, key)  # _get


def _apply_js(document: Any, operations: Any) -> Any:
    """``applyPatch(document, operations, true, false).newDocument`` as an internal value.

    Raises:
        PatchError: where ``applyPatch`` throws.
    """
    if not isinstance(operations, list):
        raise PatchError("the patch must be a list of operations", code="SEQUENCE_NOT_AN_ARRAY")
    current = _deep_clone(document)
    cyclic_at = None  # the last operation that moved the whole document into itself
    for index, operation in enumerate(operations):
        try:
            current = _apply_operation(current, operation, validate=True)[0]
            if _moves_root_into_itself(operation, current):
                cyclic_at = index
        except _Fail as error:
            raise PatchError(
                error.reason, index=index, code=error.code, operation=operation
            ) from None
        except RecursionError:
            raise PatchError(
                "the document is nested too deeply",
                index=index,
                code="RangeError",
                operation=operation,
            ) from None
    if cyclic_at is not None and _is_cyclic(current):
        # The client holds a document that contains itself, which JSON cannot write out
        # (a later operation can still replace the root or cut the cycle: then it can).
        raise PatchError(
            "moves the whole document into itself: the result contains itself",
            index=cyclic_at,
            code="OPERATION_PATH_CYCLIC",
            operation=operations[cyclic_at],
        )
    return current


def _moves_root_into_itself(operation: dict[str, Any], document: Any) -> bool:
    """A ``move`` from the root to a path below it: the client then sets a child of the
    document to the document itself (fast-json-patch does not refuse it, as the RFC does)."""
    return (
        operation["op"] == "move"
        and operation["from"] == ""
        and operation["path"] != ""
        and _is_js_object(document)
    )


def _is_cyclic(value: Any) -> bool:
    """Whether a container holds itself, at any depth (walked without recursion)."""
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            continue
        if not isinstance(item, (dict, list, tuple)):
            continue
        if id(item) in on_path:
            return True
        on_path.add(id(item))
        stack.append((item, True))
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, False) for child in children)
    return False


def _to_json(value: Any) -> Any:
    """The JSON a JS value serializes to; :data:`UNDEFINED` when it serializes to nothing."""
    if _is_dropped(value):
        return UNDEFINED
    return _json_round_trip(value, list)


# --------------------------------------------------------------------------- fast path
#
# Most patches are plain: a document of JSON values (dict, list, str, int, float, bool, None)
# and operations whose paths exist (or append/insert within bounds), with no inherited names,
# no array quirks and nothing that fails. For those, fast-json-patch's answer is what the RFC
# says, and it can be computed by path copying: a container is shallow-copied (once per call)
# before the first write under it, together with the chain of containers above it, and every
# untouched subtree is shared with the input, which is never written to. Anything else --
# including every operation that would fail -- makes the fast path give up (``_Fallback``)
# before it has touched the input, and :func:`_apply_js` answers from scratch, so errors and
# quirks keep exactly the exact engine's behaviour.


class _Fallback(Exception):
    """The fast path cannot vouch for this patch: the exact engine answers instead."""


_PLAIN_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_INDEX_DIGITS: Final = 9  # a canonical index below 10**9 < 2**31: ``~~key`` leaves it as is


def _is_plain(value: Any) -> bool:
    """Whether ``value`` is made of JSON values only (exact types, no ``UNDEFINED``)."""
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            for child in item.values():
                if type(child) not in _PLAIN_SCALARS:
                    push(child)
        elif kind is list:
            for child in item:
                if type(child) not in _PLAIN_SCALARS:
                    push(child)
        elif kind not in _PLAIN_SCALARS:
            return False
    return True


def _plain_copy(value: Any) -> Any:
    """A deep copy of a plain JSON value (what ``_json_round_trip`` then ``_to_json`` give)."""
    kind = type(value)
    if kind is dict:
        return {
            key: item if type(item) in _PLAIN_SCALARS else _plain_copy(item)
            for key, item in value.items()
        }
    if kind is list:
        return [item if type(item) in _PLAIN_SCALARS else _plain_copy(item) for item in value]
    if kind in _PLAIN_SCALARS:
        return value
    raise _Fallback


def _plain_keys(pointer: Any) -> list[str]:
    """The keys of a pointer whose every key means the same in JS as in the RFC."""
    if type(pointer) is not str or not pointer.startswith("/"):
        raise _Fallback
    keys = pointer.split("/")[1:]
    for i, key in enumerate(keys):
        if "~" in key:
            key = keys[i] = key.replace("~1", "/").replace("~0", "~")
        # Inherited names (and the `__proto__` / `constructor/prototype` guards).
        if key in _OBJECT_PROTO or key == "prototype":
            raise _Fallback
    return keys


def _plain_index(key: str, limit: int) -> int:
    """A canonical array index no larger than ``limit`` (else the JS quirks apply)."""
    if (
        0 < len(key) <= _INDEX_DIGITS
        and key.isascii()
        and key.isdigit()
        and (key[0] != "0" or key == "0")
    ):
        index = int(key)
        if index <= limit:
            return index
    raise _Fallback


def _child_slot(node: Any, key: str) -> Any:
    """Where an existing child ``key`` of container ``node`` is (a dict key or a list index)."""
    if type(node) is dict:
        if key in node:
            return key
        raise _Fallback
    return _plain_index(key, len(node) - 1)


def _container(value: Any) -> Any:
    if type(value) is dict or type(value) is list:
        return value
    raise _Fallback


def _resolve(root: Any, keys: list[str]) -> Any:
    """The existing value at ``keys`` (all containers on the way plain dicts and lists)."""
    node = root
    for key in keys:
        node = _container(node)[_child_slot(node, key)]
    return node


def _check_target(root: Any, keys: list[str]) -> None:
    """The validated walk of a ``move``/``copy`` target: its parent exists and is plain."""
    parent = _container(_resolve(root, keys[:-1]))
    if type(parent) is list and keys[-1] != "-":
        _plain_index(keys[-1], 10**_INDEX_DIGITS)


class _CopyOnWrite:
    """A document being patched: containers copied (once) before the first write under them.

    ``owned`` holds the containers this call created, by id (they stay alive in it): only
    those are ever written to. It is keyed by the *copy*, not by the original, so an input
    subtree that appears twice in the input is copied separately at each place written to.
    """

    def __init__(self, root: Any) -> None:
        self.root = root
        self.owned: dict[int, Any] = {}

    def own(self, node: Any) -> Any:
        if id(node) in self.owned:
            return node
        copy = dict(node) if type(node) is dict else list(node)
        self.owned[id(copy)] = copy
        return copy

    def parent(self, keys: list[str]) -> Any:
        """The (writable) container holding the last key, copying the chain down to it."""
        node = self.root = self.own(_container(self.root))
        for key in keys[:-1]:
            slot = _child_slot(node, key)
            child = _container(node[slot])
            if id(child) not in self.owned:
                child = node[slot] = self.own(child)
            node = child
        return node

    def insert(self, keys: list[str], value: Any, *, clamp: bool) -> None:
        """``add`` (``clamp``: unvalidated, an index past the end appends)."""
        parent = self.parent(keys)
        key = keys[-1]
        if type(parent) is dict:
            parent[key] = value
        elif key == "-":
            parent.append(value)
        else:
            limit = 10**_INDEX_DIGITS if clamp else len(parent)
            parent.insert(_plain_index(key, limit), value)

    def remove(self, keys: list[str]) -> Any:
        parent = self.parent(keys)
        slot = _child_slot(parent, keys[-1])
        removed = parent[slot]
        del parent[slot]
        return removed

    def replace(self, keys: list[str], value: Any) -> None:
        parent = self.parent(keys)
        parent[_child_slot(parent, keys[-1])] = value


def _fast_apply(document: Any, operations: list[Any]) -> Any:
    """The patched document, sharing untouched subtrees with ``document`` (never written).

    ``document`` must be plain (see :func:`_is_plain`). Raises :class:`_Fallback` where the
    answer may differ from the RFC's (then nothing was written to ``document``).
    """
    doc = _CopyOnWrite(document)
    for operation in operations:
        if not isinstance(operation, dict):
            raise _Fallback
        op = operation.get("op")
        path = operation.get("path")
        if path == "" and type(path) is str:
            # At the root: the document is replaced, or compared (never checked for paths).
            if op in ("add", "replace") and "value" in operation:
                doc.root = _plain_copy(operation["value"])
            elif op == "test" and "value" in operation:
                value = operation["value"]
                if not _is_plain(value) or not _js_equal(doc.root, value):
                    raise _Fallback
            elif op == "remove":
                doc.root = None
            else:
                raise _Fallback
            continue
        keys = _plain_keys(path)
        _container(doc.root)  # a document that is not an object or array has its own rules
        if op == "add" and "value" in operation:
            doc.insert(keys, _plain_copy(operation["value"]), clamp=False)
        elif op == "replace" and "value" in operation:
            value = _plain_copy(operation["value"])
            doc.replace(keys, value)
        elif op == "remove":
            doc.remove(keys)
        elif op == "test" and "value" in operation:
            value = operation["value"]
            if not _is_plain(value) or not _js_equal(_resolve(doc.root, keys), value):
                raise _Fallback
        elif op in ("move", "copy"):
            source = _plain_keys(operation.get("from"))
            _check_target(doc.root, keys)
            found = _resolve(doc.root, source)
            moved = doc.remove(source) if op == "move" else _plain_copy(found)
            doc.insert(keys, moved, clamp=True)
        else:
            raise _Fallback
    root = doc.root
    if (type(root) is dict or type(root) is list) and id(root) not in doc.owned:
        root = doc.own(root)  # a fresh top level even when nothing was written
    return root


# Documents known to be plain: recent results (kept alive here, so their ids stay theirs).
# A document passed back in is assumed unchanged since it was returned.
_KNOWN_PLAIN: Final[dict[int, Any]] = {}
_KNOWN_PLAIN_SIZE: Final = 16
_KNOWN_PLAIN_LOCK: Final = threading.Lock()


def _takes_fast_path(document: Any, operations: Any) -> bool:
    """Whether :func:`apply_patch` tries its fast path: a list of operations on a plain
    document (an object or array of JSON values only)."""
    return (
        isinstance(operations, list)
        and (type(document) is dict or type(document) is list)
        and (_known_plain(document) or _is_plain(document))
    )


def _known_plain(document: Any) -> bool:
    if _KNOWN_PLAIN.get(id(document)) is not document:
        return False
    with _KNOWN_PLAIN_LOCK:  # least recently used first out
        _KNOWN_PLAIN.pop(id(document), None)
        _KNOWN_PLAIN[id(document)] = document
    return True


def _remember_plain(result: Any) -> None:
    if type(result) is not dict and type(result) is not list:
        return
    with _KNOWN_PLAIN_LOCK:
        _KNOWN_PLAIN[id(result)] = result
        while len(_KNOWN_PLAIN) > _KNOWN_PLAIN_SIZE:
            del _KNOWN_PLAIN[next(iter(_KNOWN_PLAIN))]


def known_plain(document: Any) -> Any:
    """``document``, remembered as plain: the caller has just decoded it from JSON, so it
    is made of JSON values only and :func:`apply_patch` need not walk it to find out (at
    tens of thousands of values, the walk costs more than the patch)."""
    _remember_plain(document)
    return document


def _apply_exact(document: Any, operations: Any) -> Any:
    """The exact engine: the whole document modelled as JS values, then written out."""
    return _to_json(_apply_js(document, operations))


def apply_patch(document: Any, operations: list[dict[str, Any]] | Any) -> Any:
    """Apply a JSON Patch the way ``@ag-ui/client`` 1.0.0 applies a ``STATE_DELTA``.

    Args:
        document: the current state (any JSON value; :data:`UNDEFINED` counts as ``null``).
        operations: the RFC 6902 operations, as in ``STATE_DELTA.delta``; anything but a
            list (a missing delta, say) fails as it does in the client.

    Returns:
        The new document. Neither ``document`` nor ``operations`` is touched; the values
        the patch writes are copies (nothing is shared with ``operations``), and the top
        level is always a new container, while subtrees the patch does not touch are
        shared with ``document`` (so a patch costs the size of the paths it touches, not
        of the document): treat both as immutable, or copy before editing in place.
        :data:`UNDEFINED` in the rare case where the client's result is JS ``undefined``
        (a root ``copy``/``move`` from a missing path).

    Raises:
        PatchError: exactly when the client's ``applyPatch`` throws; the patch is atomic,
            so the caller keeps its document (the client warns and keeps its state).

    Example:
        >>> apply_patch({"a": [1]}, [{"op": "add", "path": "/a/-", "value": 2}])
        {'a': [1, 2]}
    """
    # A plain document (JSON values only) takes the path-copying fast path, which gives up
    # (before writing anything) on every patch where fast-json-patch departs from the RFC or
    # throws; the exact engine then answers. Plainness is checked once per document: results
    # are remembered as plain, and a document passed back in is assumed unchanged.
    if _takes_fast_path(document, operations):
        try:
            result = _fast_apply(document, operations)
        except (_Fallback, RecursionError):
            pass
        else:
            _remember_plain(result)
            return result
    result = _apply_exact(document, operations)
    _remember_plain(result)
    return result
