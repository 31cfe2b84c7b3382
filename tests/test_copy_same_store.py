"""A copy whose source and destination are one store, whatever spells each: refused,
naming both, before anything is read or written."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import agui_store
from tests.backends import dump
from tests.test_sync import locations, record_run

__all__ = ["locations"]  # the fixture the tests take


def _refused_as_one(src: str, dst: str) -> None:
    before = dump(src)
    with pytest.raises(agui_store.InvalidArgumentError, match="are the same store") as caught:
        agui_store.copy(src, dst)
    assert dst.split("?")[0] in str(caught.value)  # the spelling given, named
    assert dump(src) == before


def test_a_store_reached_by_a_hard_link_or_a_file_uri_is_not_copied_onto_itself(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.db"
    with agui_store.open(path) as store:
        record_run(store, "t1", "r1")
    os.link(path, tmp_path / "b.db")
    _refused_as_one(str(path), str(tmp_path / "b.db"))
    _refused_as_one(str(path), f"file:{path}?cache=private")


def test_a_database_reached_by_another_url_is_not_copied_onto_itself(
    locations: Callable[[str], str],
) -> None:
    url = locations("postgres")
    with agui_store.open(url) as store:
        record_run(store, "t1", "r1")
    other = url + ("&" if "?" in url else "?") + "application_name=another-spelling"
    _refused_as_one(url, other)
