"""How JavaScript reads JSON values, where the official client's behaviour depends on it.

The ports of the client (``verify``, ``reducer``, ``compaction``, ``patch``) compare, print
and join values the way JavaScript does; these are the shared pieces, each written once:
:data:`UNDEFINED` (a missing value, as opposed to ``null``), :func:`js_string` (``String()``),
:func:`js_join` (``Array.prototype.join``). Pure.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Final

import msgspec

#: Keys sorted: equal objects built in another key order still read as the same text.
_ENCODE = msgspec.json.Encoder(order="sorted").encode


class Undefined(enum.Enum):
    """The type of :data:`UNDEFINED`, its only value.

    An enum member is a singleton that pickles and copies as itself, and a type checker
    narrows ``value is UNDEFINED`` to it.
    """

    UNDEFINED = "undefined"

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __str__(self) -> str:
        # What a template literal makes of it, should one meet it unconverted.
        return "undefined"

    def __bool__(self) -> bool:
        # Falsy, as ``undefined`` is in JavaScript.
        return False


UNDEFINED: Final = Undefined.UNDEFINED
"""JavaScript's ``undefined``: a property that is not there, as opposed to JSON ``null``.

``event.get("delta", UNDEFINED)`` reads a field the way the client's code reads it, and
:func:`~agui_store.protocol.patch.apply_patch` returns it when the client's result is
``undefined``.
"""


class ToPrimitiveError(TypeError):
    """JavaScript's ``TypeError: Cannot convert object to primitive value``: ``String()`` of
    an object that owns a ``toString`` key (a JSON value, so not a function JS could call)."""

    def __init__(self, obj: dict[str, Any]) -> None:
        super().__init__("Cannot convert object to primitive value")
        #: The object that owns ``toString`` (the value itself, or one inside its arrays).
        self.obj = obj


def js_string(value: Any) -> str:
    """``String(value)`` for a JSON value, and for :data:`UNDEFINED`, as JavaScript spells it
    (template literals and ``+`` with a string spell values the same way).

    ``null`` is ``"null"``, :data:`UNDEFINED` ``"undefined"``, booleans ``"true"`` and
    ``"false"``, numbers as :func:`number_to_string` prints them, an array as
    :func:`js_join` with ``","`` joins it, and an object ``"[object Object]"``.

    An object that owns ``toString`` makes JavaScript throw; that takes a ``toString`` call
    the ports other than compaction do not model, so here it prints as any object does;
    :func:`check_stringable` tells where JavaScript throws.
    """
    if isinstance(value, str):
        return str(value)
    if value is None:
        return "null"
    if value is UNDEFINED:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number_to_string(as_double(value))
    if isinstance(value, list | tuple):
        return js_join(value, ",")
    return "[object Object]"


def js_join(values: Iterable[Any], separator: str) -> str:
    """``Array.prototype.join``: :func:`js_string` of each element, except that ``null``
    and ``undefined`` elements become empty (``String(null)`` is ``"null"``)."""
    return separator.join(
        "" if value is None or value is UNDEFINED else js_string(value) for value in values
    )


def check_stringable(value: Any) -> None:
    """Raise :class:`ToPrimitiveError` where JavaScript's ``String(value)`` throws: the value
    is, or its arrays hold at any depth, an object that owns ``toString``."""
    unconvertible = _owner_of_to_string(value)
    if unconvertible is not None:
        raise ToPrimitiveError(unconvertible)


def _owner_of_to_string(value: Any) -> dict[str, Any] | None:
    """The first object ``String(value)`` meets that owns ``toString``, or ``None``. Only
    arrays are looked into: an object prints without reading its values."""
    if isinstance(value, dict):
        return value if "toString" in value else None
    if isinstance(value, list | tuple):
        for item in value:
            found = _owner_of_to_string(item)
            if found is not None:
                return found
    return None


def truthy(value: Any) -> bool:
    """JavaScript truthiness of a JSON value: ``null``, ``undefined``, ``false``, ``0`` and
    ``""`` are falsy; an empty list or object is truthy."""
    if value is None or value is UNDEFINED or value is False:
        return False
    kind = type(value)
    if kind is str or kind is int or kind is float:
        return bool(value)
    return True


def as_double(value: int | float) -> float:
    """A JSON number as JavaScript holds it: a double (beyond its range: ±Infinity)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def number_to_string(x: float) -> str:
    """``String(x)`` for a double (ECMAScript Number::toString, radix 10): shortest
    round-trip digits, plain notation from 1e-6 up to 1e21, exponent notation outside."""
    if x == 0:
        return "0"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if math.isnan(x):
        return "NaN"
    sign = "-" if x < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int)
    k = len(digits)
    n = k + exponent  # the value is 0.<digits> * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return sign + text


def utf16_units(text: str) -> list[str]:
    """A JS string's elements: UTF-16 code units (a non-BMP character is two of them)."""
    if text.isascii():
        return list(text)
    raw = text.encode("utf-16-le", "surrogatepass")
    return [raw[i : i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(raw), 2)]


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as JavaScript sees them: numbers by value (``1 == 1.0``), but
    ``true`` is not ``1`` (Python's ``==`` says it is)."""
    if a is b:
        return True
    # JavaScript-equal values are Python-equal, so ``!=`` (in C) settles most inequalities;
    # equal containers with the same JSON text (keys sorted) are equal, and only the rest (a
    # boolean meeting a number, 1 meeting 1.0) need the walk.
    if a != b:
        return False
    if type(a) is dict or type(a) is list:
        try:
            if _ENCODE(a) == _ENCODE(b):
                return True
        except (TypeError, ValueError, OverflowError):
            pass
    return _json_equal(a, b)


def _json_equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        numbers = (int, float)
        return (
            isinstance(a, numbers) and isinstance(b, numbers)
            and not isinstance(a, bool) and not isinstance(b, bool)
            and a == b
        )
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


# --- JSON values as the client's reducer handles them: copies, identity, coercions -------

#: The types of JSON scalars (shared, never copied).
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def clone_value(value: Any) -> Any:
    """A deep copy of a JSON value (dicts and lists copied, scalars shared)."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else clone_value(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else clone_value(v) for v in value]
    return value


def clone_messages(messages: Iterable[Any]) -> list[Any]:
    """Copy a message list, keeping a message that sits at two positions one object.

    ``structuredClone`` preserves shared references, and the client can hold one message
    object twice (a snapshot maps two local copies of an id onto one message), so a copy
    that split them would diverge at the next in-place update.
    """
    seen: dict[int, Any] = {}
    out = []
    for m in messages:
        cloned = seen.get(id(m))
        if cloned is None:
            cloned = seen[id(m)] = clone_value(m)
        out.append(cloned)
    return out


def identity_key(value: Any) -> Any:
    """A dict key that is equal exactly when the client's ``===`` says the ids are equal.

    Strings, ``None`` and an absent id are their own keys; numbers and booleans are tagged
    (``True == 1`` in Python, not in JavaScript). A container compares by reference, as in
    JavaScript: parsed events never share one, but the events ``transformChunks`` makes
    from one chunk do. (The indexed message holds the object, so its ``id()`` stays its own.)
    """
    kind = type(value)
    if kind is str or value is None or value is UNDEFINED:
        return value
    if kind is bool:
        return ("bool", value)
    if kind is int or kind is float:
        return ("number", value)
    return ("reference", id(value))


def strict_equal(a: Any, b: Any) -> bool:
    """JavaScript ``a === b`` for JSON values."""
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is str or tb is str:
        return ta is tb and bool(a == b)
    if ta in (int, float) and tb in (int, float):
        return bool(a == b)
    return False


def js_plus(a: Any, b: Any) -> Any:
    """JavaScript ``a + b`` on JSON values (``function.arguments += delta``)."""
    if type(a) is str and type(b) is str:
        return a + b
    if isinstance(a, (str, list, dict)) or isinstance(b, (str, list, dict)):
        return js_string(a) + js_string(b)

    def number(v: Any) -> float:
        if v is None or v is False:
            return 0.0
        if v is True:
            return 1.0
        if v is UNDEFINED:
            return float("nan")
        return float(v)

    total = number(a) + number(b)
    if total != total or total in (float("inf"), float("-inf")):
        return None  # NaN and Infinity serialize as null
    return int(total) if total.is_integer() and abs(total) < 2**53 else total


def spread(value: Any, *, clone: bool) -> dict[str, Any]:
    """``{...value}``: the own enumerable properties of a JSON value, as a new dict."""
    kind = type(value)
    if kind is dict:
        if clone:
            return {k: v if type(v) in _SCALARS else clone_value(v) for k, v in value.items()}
        return dict(value)
    if kind is list:
        return {str(i): clone_value(v) if clone else v for i, v in enumerate(value)}
    if kind is str:
        return {str(i): ch for i, ch in enumerate(value)}
    return {}
