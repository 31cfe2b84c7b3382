"""The storage design page names the schema versions this release writes."""

from __future__ import annotations

from pathlib import Path

from agui_store.backends.sqlite import schema as sqlite_schema

PAGE = Path(__file__).resolve().parents[1] / "docs" / "design" / "storage.md"


def test_the_storage_page_names_the_sqlite_schema_version_files_are_written_at() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert f"`PRAGMA user_version` ({sqlite_schema.SCHEMA_VERSION} in this release)" in text
    assert f"| {sqlite_schema.SCHEMA_VERSION} | " in text  # its row in the versions table


def test_the_storage_page_names_the_postgresql_schema_version() -> None:
    # Read from the module's source: the PostgreSQL backend needs psycopg to import.
    source = (PAGE.parents[2] / "agui_store" / "backends" / "postgres" / "schema.py").read_text(
        encoding="utf-8"
    )
    version = next(
        line.split("=")[1].strip() for line in source.splitlines()
        if line.startswith("SCHEMA_VERSION =")
    )
    assert f"its own version ({version} in this release)" in PAGE.read_text(encoding="utf-8")
