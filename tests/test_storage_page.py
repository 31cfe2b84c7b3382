"""The storage design page names the SQLite schema version this release writes (PostgreSQL's
version: tests/test_postgres_schema.py)."""

from __future__ import annotations

from pathlib import Path

from agui_store.backends.sqlite import schema as sqlite_schema

PAGE = Path(__file__).resolve().parents[1] / "docs" / "design" / "storage.md"


def test_the_storage_page_names_the_sqlite_schema_version_files_are_written_at() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert f"`PRAGMA user_version` ({sqlite_schema.SCHEMA_VERSION} in this release)" in text
    assert f"| {sqlite_schema.SCHEMA_VERSION} | " in text  # its row in the versions table

