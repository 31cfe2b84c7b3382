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
from agui_store.records import AppendResult, Branch, Checkout, Run
from agui_store.store import Store, open

__all__ = [
    "AguiStoreError",
    "AmbiguousRunError",
    "AppendResult",
    "Branch",
    "BranchError",
    "Checkout",
    "IntegrityError",
    "InvalidEventError",
    "Run",
    "RunNotFoundError",
    "SchemaVersionError",
    "SequenceError",
    "Store",
    "StoreBusyError",
    "open",
]
