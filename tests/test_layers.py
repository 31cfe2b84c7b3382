"""The pure core never touches SQL: a PostgreSQL backend or an async facade can reuse it as is.

Checked on the source: the core modules import neither a database driver nor the storage
modules, and lower layers never import higher ones.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agui_store"

#: Pure logic, no I/O and no SQL.
CORE = ["errors", "js", "model", "codec", "verify", "patch", "nesting", "reducer", "restore",
        "compaction", "diff", "normalize", "blobs", "hashing", "records", "render", "interchange",
        "slim", "artifact", "arguments", "port"]
#: What the core must not import.
STORAGE = {"apsw", "sqlite3", "sqlite_utils", "agui_store.database", "agui_store.schema",
           "agui_store.store", "agui_store.checkpoints", "agui_store.integrity",
           "agui_store.analysis", "agui_store.cli", "agui_store.targets",
           "agui_store.ledger", "agui_store.recording", "agui_store.aio",
           "agui_store.writer", "agui_store.asgi", "agui_store.testing",
           "agui_store.sqlite"}


def imports_of(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    # Imports only for type checkers (``if TYPE_CHECKING:``) never run.
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            if node.module == "agui_store":
                found.update(f"agui_store.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("module", CORE)
def test_the_pure_core_imports_no_database_and_no_storage_module(module: str) -> None:
    assert imports_of(module) & STORAGE == set()


def test_every_module_of_the_package_is_placed_in_a_layer() -> None:
    placed = set(CORE) | {m.split(".")[1] for m in STORAGE if m.startswith("agui_store.")}
    placed |= {"__init__", "__main__", "demo"}
    assert {p.stem for p in PACKAGE.glob("*.py")} <= placed


def test_the_asgi_recorder_imports_no_web_framework() -> None:
    """Pure ASGI: no runtime dependency beyond the store's own."""
    outside = {name.split(".")[0] for name in imports_of("asgi")} - {"agui_store"}
    assert outside <= {"__future__", "asyncio", "contextlib", "logging", "re", "collections",
                       "dataclasses", "typing", "msgspec"}


#: Modules of the engine that speak to the database only through the storage port.
ENGINE = ["store"]
#: A string that is a statement: SQL stays in the backends' packages.
_SQL = re.compile(
    r"\b(SELECT\b.*\bFROM|INSERT\s+INTO|UPDATE\b.*\bSET|DELETE\s+FROM|WITH\s+RECURSIVE)\b",
    re.S | re.I,
)


def _is_statement(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and bool(_SQL.search(node.value))
    )


@pytest.mark.parametrize("module", ENGINE)
def test_the_engine_holds_no_sql_and_imports_no_driver(module: str) -> None:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    statements = [
        node.value
        for node in ast.walk(tree)
        if _is_statement(node) and not str(node.value).lstrip().startswith(("The ", "A ", "An "))
    ]
    assert statements == []
    assert imports_of(module) & {"apsw", "sqlite3", "psycopg", "agui_store.schema"} == set()


def test_every_statement_of_the_sqlite_backend_is_a_named_constant() -> None:
    """The SQLite backend's transaction runs the constants of its sql module, never text
    built on the spot."""
    tree = ast.parse((PACKAGE / "sqlite" / "transaction.py").read_text(encoding="utf-8"))
    built = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, (ast.JoinedStr, ast.BinOp)) and "execute" not in ast.unparse(node)
        and _SQL.search(ast.unparse(node))
    ]
    inline = [
        node.value
        for node in ast.walk(tree)
        if _is_statement(node)
    ]
    assert built == [] and inline == []
