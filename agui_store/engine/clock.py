"""The clock the engine stamps rows with: milliseconds since the epoch.

One function, read at each call, so that every timestamp a store writes comes from one place
(and a test that needs two stores to agree can fix it there).
"""

from __future__ import annotations

import datetime
import time

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def now_ms() -> int:
    """Milliseconds since the epoch, as every ``created_at`` and ``appended_at`` column holds."""
    return time.time_ns() // 1_000_000


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
