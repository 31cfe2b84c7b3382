"""agui-store: AG-UI agent conversations in one SQLite file, or in PostgreSQL, kept like git
keeps code."""

from __future__ import annotations

import importlib.metadata as _metadata

from agui_store.artifact import ArtifactError, export_artifact, load_artifact, validate_artifact
from agui_store.errors import (
    AguiStoreError,
    AmbiguousRunError,
    BranchError,
    CorruptStoreError,
    HashMismatchError,
    IntegrityError,
    InternalError,
    InvalidArgumentError,
    InvalidEventError,
    NotAStoreError,
    OpenRunsError,
    OutOfMemoryError,
    RunNotFoundError,
    SchemaVersionError,
    ScopeError,
    SequenceError,
    StorageError,
    StorageFullError,
    StoreBusyError,
    SyncConflictError,
)
from agui_store.protocol.compaction import compact_events
from agui_store.protocol.model import EVENT_TYPES, LEGACY_EVENT_TYPES
from agui_store.protocol.verify import SequenceVerifier, verify_events
from agui_store.records import (
    AppendResult,
    Branch,
    Checkout,
    Diff,
    ImportResult,
    Log,
    MessageChange,
    Run,
    Thread,
    ViewChange,
)
from agui_store.slim import PRESETS as SLIM_PRESETS
from agui_store.slim import slim
from agui_store.store import Store, open
from agui_store.sync import CopyResult, copy

try:
    #: The installed distribution's version (``agui-store --version`` prints it).
    __version__: str = _metadata.version("agui-store")
except _metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "EVENT_TYPES",
    "LEGACY_EVENT_TYPES",
    "SLIM_PRESETS",
    "AguiStoreError",
    "AmbiguousRunError",
    "AppendResult",
    "ArtifactError",
    "Branch",
    "BranchError",
    "Checkout",
    "CopyResult",
    "CorruptStoreError",
    "Diff",
    "HashMismatchError",
    "ImportResult",
    "IntegrityError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidEventError",
    "Log",
    "MessageChange",
    "NotAStoreError",
    "OpenRunsError",
    "OutOfMemoryError",
    "Run",
    "RunNotFoundError",
    "SchemaVersionError",
    "ScopeError",
    "SequenceError",
    "SequenceVerifier",
    "StorageError",
    "StorageFullError",
    "Store",
    "StoreBusyError",
    "SyncConflictError",
    "Thread",
    "ViewChange",
    "__version__",
    "compact_events",
    "copy",
    "export_artifact",
    "load_artifact",
    "open",
    "slim",
    "validate_artifact",
    "verify_events",
]


def __getattr__(name: str) -> object:
    # ``agui_store.aio`` without importing asyncio for every user of the sync store.
    if name == "aio":
        import importlib

        return importlib.import_module("agui_store.aio")
    raise AttributeError(f"module 'agui_store' has no attribute {name!r}")
