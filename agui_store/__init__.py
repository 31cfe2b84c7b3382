"""agui-store: AG-UI agent conversations in one SQLite file, or in PostgreSQL, kept like git
keeps code."""

from __future__ import annotations

import importlib as _importlib
import importlib.abc as _importlib_abc
import importlib.machinery as _importlib_machinery
import importlib.util as _importlib_util
import sys as _sys
import types as _types
import warnings as _warnings
from collections.abc import Sequence as _Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as mypy and the API reference read them
    from agui_store.engine.archive import ArchiveResult
    from agui_store.errors import (
        AguiStoreError,
        AmbiguousRunError,
        ArgumentTypeError,
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
    from agui_store.exports.artifact import (
        ArtifactError,
        export_artifact,
        load_artifact,
        validate_artifact,
    )
    from agui_store.exports.slim import PRESETS as SLIM_PRESETS
    from agui_store.exports.slim import slim
    from agui_store.protocol.compaction import compact_events
    from agui_store.protocol.model import EVENT_TYPES, LEGACY_EVENT_TYPES
    from agui_store.protocol.verify import SequenceVerifier, verify_events
    from agui_store.records import (
        AppendResult,
        Branch,
        Checkout,
        Diff,
        ErasureReceipt,
        ImportResult,
        Log,
        LoggedErasure,
        MessageChange,
        Run,
        SearchHit,
        SearchHits,
        Thread,
        ViewChange,
    )
    from agui_store.store import Store, open
    from agui_store.sync import CopyResult, copy

    __version__: str

#: Where each public name lives. A name's module is imported when the name is first read, so
#: that ``import agui_store`` costs little, and the command line answers Ctrl+C from its
#: first moment instead of dying in an import with a traceback.
_HOMES: dict[str, tuple[str, ...]] = {
    "agui_store.engine.archive": ("ArchiveResult",),
    "agui_store.errors": (
        "AguiStoreError", "AmbiguousRunError", "ArgumentTypeError", "BranchError",
        "CorruptStoreError",
        "HashMismatchError", "IntegrityError", "InternalError", "InvalidArgumentError",
        "InvalidEventError", "NotAStoreError", "OpenRunsError", "OutOfMemoryError",
        "RunNotFoundError", "SchemaVersionError", "ScopeError", "SequenceError",
        "StorageError", "StorageFullError", "StoreBusyError", "SyncConflictError",
    ),
    "agui_store.exports.artifact": (
        "ArtifactError", "export_artifact", "load_artifact", "validate_artifact",
    ),
    "agui_store.exports.slim": ("slim",),
    "agui_store.protocol.compaction": ("compact_events",),
    "agui_store.protocol.model": ("EVENT_TYPES", "LEGACY_EVENT_TYPES"),
    "agui_store.protocol.verify": ("SequenceVerifier", "verify_events"),
    "agui_store.records": (
        "AppendResult", "Branch", "Checkout", "Diff", "ErasureReceipt", "ImportResult", "Log",
        "LoggedErasure", "MessageChange", "Run", "SearchHit", "SearchHits", "Thread",
        "ViewChange",
    ),
    "agui_store.store": ("Store", "open"),
    "agui_store.sync": ("CopyResult", "copy"),
}
#: Public name -> (its module, its name there).
_HOME_OF = {name: (module, name) for module, names in _HOMES.items() for name in names}
_HOME_OF["SLIM_PRESETS"] = ("agui_store.exports.slim", "PRESETS")

__all__ = [
    "EVENT_TYPES",
    "LEGACY_EVENT_TYPES",
    "SLIM_PRESETS",
    "AguiStoreError",
    "AmbiguousRunError",
    "AppendResult",
    "ArchiveResult",
    "ArgumentTypeError",
    "ArtifactError",
    "Branch",
    "BranchError",
    "Checkout",
    "CopyResult",
    "CorruptStoreError",
    "Diff",
    "ErasureReceipt",
    "HashMismatchError",
    "ImportResult",
    "IntegrityError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidEventError",
    "Log",
    "LoggedErasure",
    "MessageChange",
    "NotAStoreError",
    "OpenRunsError",
    "OutOfMemoryError",
    "Run",
    "RunNotFoundError",
    "SchemaVersionError",
    "ScopeError",
    "SearchHit",
    "SearchHits",
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
    home = _HOME_OF.get(name)
    if home is not None:
        module, attribute = home
        value = getattr(_importlib.import_module(module), attribute)
        globals()[name] = value  # read once; the next reading is the module's own
        return value
    if name == "__version__":
        # The installed distribution's version (``agui-store --version`` prints it).
        import importlib.metadata

        try:
            version = importlib.metadata.version("agui-store")
        except importlib.metadata.PackageNotFoundError:  # a source tree, not installed
            version = "0+unknown"
        globals()[name] = version
        return version
    # A submodule, as after ``import agui_store`` when every module loaded with it
    # (``agui_store.errors.StoreBusyError``); ``agui_store.aio`` without importing asyncio
    # for every user of the sync store.
    if not name.startswith("_"):
        try:
            return _importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'agui_store' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# --- modules that moved into a folder: the old import paths warn, then work ---------------

#: Old module path -> where the module lives now.
MOVED_MODULES = {
    "agui_store.render": "agui_store.cli.render",
    "agui_store.demo": "agui_store.cli.demo",
    "agui_store.analysis": "agui_store.exports.analysis",
    "agui_store.artifact": "agui_store.exports.artifact",
    "agui_store.slim": "agui_store.exports.slim",
    "agui_store.targets": "agui_store.exports.targets",
    "agui_store.writer": "agui_store._writer",
}


class _MovedModules(_importlib_abc.MetaPathFinder, _importlib_abc.Loader):
    """Imports a moved module by its old path: a DeprecationWarning naming the new one, and
    the new module itself (one module object, whichever path imported it)."""

    def find_spec(
        self,
        name: str,
        path: _Sequence[str] | None = None,
        target: _types.ModuleType | None = None,
    ) -> _importlib_machinery.ModuleSpec | None:
        if name not in MOVED_MODULES:
            return None
        return _importlib_util.spec_from_loader(name, self)

    def create_module(self, spec: _importlib_machinery.ModuleSpec) -> _types.ModuleType:
        old = spec.name
        _warnings.warn(
            f"{old} moved to {MOVED_MODULES[old]}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        module = _importlib.import_module(MOVED_MODULES[old])
        self.specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: _types.ModuleType) -> None:
        """The new module ran when it was imported; it keeps its own spec (the import system
        gives it the old path's)."""
        module.__spec__ = self.specs[module.__name__]

    specs: dict[str, _importlib_machinery.ModuleSpec | None] = {}


class _Package(_types.ModuleType):
    """This package: importing ``agui_store.slim`` (the old path of a module) leaves the
    name ``agui_store.slim`` the function it is, not the module."""

    def __setattr__(self, name: str, value: object) -> None:
        if (
            f"agui_store.{name}" in MOVED_MODULES
            and isinstance(value, _types.ModuleType)
            and name in _HOME_OF
        ):
            return
        super().__setattr__(name, value)


_sys.meta_path.insert(0, _MovedModules())  # before any finder that could see an old file
_sys.modules[__name__].__class__ = _Package
