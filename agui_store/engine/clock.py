"""The clock the engine stamps rows with: milliseconds since the epoch.

One function, read at each call, so that every timestamp a store writes comes from one place
(and a test that needs two stores to agree can fix it there).
"""

from __future__ import annotations

import datetime
import re
import time

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def now_ms() -> int:
    """Milliseconds since the epoch, as every ``created_at`` and ``appended_at`` column holds."""
    return time.time_ns() // 1_000_000


def in_utc_if_naive(when: datetime.datetime) -> datetime.datetime:
    """``when``, aware: a time Python counts as naive (no zone, or a zone that gives no
    offset) is taken as UTC, as every time the API takes is."""
    return when.replace(tzinfo=datetime.timezone.utc) if when.utcoffset() is None else when


def ms_before(when: datetime.datetime) -> int:
    """The first whole millisecond since the epoch not before ``when`` (an aware datetime):
    a time the store holds (whole milliseconds) is before ``when`` exactly when it is before
    this."""
    return ms_at_or_after(micros(when))


def micros(when: datetime.datetime) -> int:
    """Microseconds since the epoch of ``when`` (an aware datetime), as a conversation's
    ``updated_at`` holds them. In integers: a float of the timestamp loses the microseconds
    of dates far enough from the epoch."""
    since = when - _EPOCH
    return (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds


def ms_at_or_after(micros: int) -> int:
    """The first whole millisecond not before ``micros`` microseconds since the epoch."""
    return -(-micros // 1000)


def shown(ms: int) -> str:
    """Milliseconds since the epoch as a message shows them (UTC, to the millisecond)."""
    return (_EPOCH + datetime.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")


#: ISO 8601's extended form, as people write a moment: a date, then optionally a time (hours,
#: minutes, seconds, a fraction after ``.`` or ``,``) after ``T`` or a space, then a zone
#: (``Z``, or an offset of hours with or without minutes).
_ISO_MOMENT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?)?"
    r"(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?",
    re.ASCII,
)


def parse_moment(text: str) -> datetime.datetime:
    """The moment ``text`` writes in ISO 8601 (``Z`` or an offset for its zone; none: UTC),
    the same on every Python: 3.10's ``fromisoformat`` takes fewer forms than 3.11's (no
    ``Z``, fractions of 3 or 6 digits only). Forms outside the extended one (3.11's basic
    ``20260131T0930``, week dates) go to ``fromisoformat`` as it is.

    Raises:
        ValueError: not a moment (a 13th month included).
    """
    found = _ISO_MOMENT.fullmatch(text)
    if found is None:
        moment = datetime.datetime.fromisoformat(text)
    else:
        year, month, day, hour, minute, second, fraction, _z, sign, off_h, off_m = found.groups()
        zone = datetime.timezone.utc  # "Z", and no zone
        if sign is not None:
            offset = datetime.timedelta(hours=int(off_h), minutes=int(off_m or 0))
            zone = datetime.timezone(-offset if sign == "-" else offset)
        moment = datetime.datetime(
            int(year), int(month), int(day), int(hour or 0), int(minute or 0),
            int(second or 0), int((fraction or "0").ljust(6, "0")[:6]), zone,
        )
    return in_utc_if_naive(moment)
