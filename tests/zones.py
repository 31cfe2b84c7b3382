"""Time zones the tests hand to the store, beyond those ``datetime`` has."""

from __future__ import annotations

import datetime


class NoOffset(datetime.tzinfo):
    """A zone that knows no offset: a datetime in it is naive, as Python counts it."""

    def utcoffset(self, dt: datetime.datetime | None) -> None:
        return None

    def dst(self, dt: datetime.datetime | None) -> None:
        return None
