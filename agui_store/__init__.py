"""agui-store: AG-UI agent conversations in one SQLite file, kept like git keeps code."""

from __future__ import annotations

from agui_store.errors import (
    AguiStoreError,
    AmbiguousRunError,
    BranchError,
    IntegrityError,
    InvalidEventError,
    RunNotFoundError,
    SchemaVersionError,
    SequenceError,
    StoreBusyError,
)

__all__ = [
    "AguiStoreError",
    "AmbiguousRunError",
    "BranchError",
    "IntegrityError",
    "InvalidEventError",
    "RunNotFoundError",
    "SchemaVersionError",
    "SequenceError",
    "StoreBusyError",
]
