"""How JavaScript reads JSON values, where the official client's behaviour depends on it.

The ports of the client (``verify``, ``reducer``, ``compaction``, ``patch``) compare, print
and join values the way JavaScript does; these are the shared pieces. Pure.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import msgspec

#: Keys sorted: equal objects built in another key order still read as the same text.
_ENCODE = msgspec.json.Encoder(order="sorted").encode


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
