"""Reading a moment written in ISO 8601 (the command line's time options), the same on every
Python the package supports."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_store.engine import clock

UTC = datetime.timezone.utc


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-01-31", datetime.datetime(2026, 1, 31, tzinfo=UTC)),
        ("2026-01-31T09", datetime.datetime(2026, 1, 31, 9, tzinfo=UTC)),
        ("2026-01-31 09:30", datetime.datetime(2026, 1, 31, 9, 30, tzinfo=UTC)),
        ("2026-01-31T09:30:05Z", datetime.datetime(2026, 1, 31, 9, 30, 5, tzinfo=UTC)),
        ("2026-01-31t09:30:05z", datetime.datetime(2026, 1, 31, 9, 30, 5, tzinfo=UTC)),
        ("2026-01-31T09:30:05.1Z", datetime.datetime(2026, 1, 31, 9, 30, 5, 100_000, UTC)),
        ("2026-01-31T09:30:05,25+00:00", datetime.datetime(2026, 1, 31, 9, 30, 5, 250_000, UTC)),
        ("2026-01-31T09:30:05.1234567", datetime.datetime(2026, 1, 31, 9, 30, 5, 123_456, UTC)),
        ("2026-01-31T09:30+0530", datetime.datetime(
            2026, 1, 31, 9, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30)))),
        ("2026-01-31T09:30-08", datetime.datetime(
            2026, 1, 31, 9, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=-8)))),
    ],
)
def test_a_moment_people_write_reads_the_same_on_every_python(
    text: str, moment: datetime.datetime
) -> None:
    read = clock.parse_moment(text)
    assert read == moment and read.utcoffset() == moment.utcoffset()


@pytest.mark.parametrize("text", ["2026-13-01", "2026-01-31T25:00", "yesterday", "2026-01-31T"])
def test_what_is_no_moment_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        clock.parse_moment(text)


@given(
    st.datetimes(timezones=st.just(UTC)),
    st.sampled_from(["hours", "minutes", "seconds", "milliseconds", "microseconds"]),
)
def test_any_moment_python_writes_reads_back_as_that_moment(
    moment: datetime.datetime, timespec: str
) -> None:
    written = moment.isoformat(timespec=timespec)
    assert clock.parse_moment(written) == datetime.datetime.fromisoformat(written)
