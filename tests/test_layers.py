"""The layering of the package, checked on its source.

The pure core never touches SQL, so that a PostgreSQL backend or an async facade can reuse it
as is; the records every layer hands back are a leaf; only the SQLite backend talks to the
driver. Each rule is one line of ``RULES``: which modules, which imports they may not make,
the exceptions, and why.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agui_store"


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name below it (``records``, ``sqlite.schema``):
    subpackages included, so a backend package is checked as soon as it exists."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _module_of(imported: str) -> str:
    return "__init__" if imported == "agui_store" else imported.removeprefix("agui_store.")


@functools.cache
def imports_of(module: str) -> frozenset[str]:
    """What a module imports, at run time: at the top or inside a function (a late import
    is a dependency all the same), not under ``if TYPE_CHECKING:`` (never runs). Names in
    the package are spelled in full (``agui_store.records``); a relative import is resolved."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []
    package = ["agui_store", *module.split(".")]
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                # ``from agui_store import records`` imports a module, not a name that
                # the package's __init__ (which imports the store) defines.
                submodule = f"{name}.{alias.name}"
                found.add(submodule if _module_of(submodule) in MODULES else name)
    return frozenset(found)


#: Pure logic, no I/O and no SQL (``port`` is the storage port's typed interface: no I/O).
CORE = ["errors", "js", "model", "codec", "verify", "patch", "nesting", "reducer", "restore",
        "compaction", "diff", "normalize", "blobs", "hashing", "records", "render", "interchange",
        "slim", "artifact", "arguments", "port", "collector", "resent"]
#: The backends: a package each, with its SQL, schema, connection and error translation.
BACKENDS = ["sqlite", "sqlite.*", "postgres", "postgres.*"]
#: The storage edge and everything built on it: what the core must not import.
STORAGE = ["database", "schema", "store", "memory", "intake", "placement", "checkpoints",
           "derivation", "reads", "revisions", "integrity", "analysis", "cli", "targets", "ledger",
           "recording", "aio", "writer", "asgi", "testing", "sync", "queries", "conversations",
           *BACKENDS]
#: Modules of the engine that speak to the database only through the storage port.
ENGINE = ["store", "memory", "intake", "placement", "derivation", "integrity", "conversations"]
#: Modules that are neither: entry points, the demo conversation, and the backends the store
#: gives other libraries (optional extras).
TOP = ["__init__", "__main__", "demo", "integrations", "integrations.*"]

#: The database drivers.
DRIVERS = ["apsw", "sqlite3", "sqlite_utils", "psycopg", "psycopg.*"]


@dataclass(frozen=True)
class Rule:
    """Modules matching ``modules`` import nothing matching ``forbidden``, except what
    ``allowed`` names, each with the reason it may: an import (``msgspec``, or a top-level
    package, which covers its modules) or ``"module -> import"`` (patterns allowed)."""

    name: str
    modules: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: dict[str, str]

    def broken_by(self, module: str) -> set[str]:
        if not any(fnmatch.fnmatchcase(module, pattern) for pattern in self.modules):
            return set()
        return {
            imported
            for imported in imports_of(module)
            if any(fnmatch.fnmatchcase(imported, pattern) for pattern in self.forbidden)
            and not self.allows(module, imported)
        }

    def allows(self, module: str, imported: str) -> bool:
        return any(
            imported.split(".")[0] == key
            or fnmatch.fnmatchcase(f"{module} -> {imported}", key)
            for key in self.allowed
        )


def _package(names: list[str]) -> tuple[str, ...]:
    return tuple(f"agui_store.{name}" for name in names)


RULES = [
    Rule("the pure core imports no driver and no storage module (nor the package, which "
         "imports them)", tuple(CORE), (*DRIVERS, "agui_store", *_package(STORAGE)), {}),
    Rule("records is a leaf: every layer hands its records back", ("records",),
         ("agui_store.*",), {}),
    Rule("only the SQLite backend talks to apsw", ("*",), ("apsw",), {
        "database -> apsw": "the SQLite connection, transactions and error translation, "
        "under the sqlite package (which it will join)",
        "sqlite* -> apsw": "the SQLite backend package",
        "analysis -> apsw": "reads another file (an analysis export it may replace, "
        "read-only) to tell whether it wrote it: not the store",
    }),
    Rule("only the PostgreSQL backend talks to psycopg", ("*",), ("psycopg", "psycopg.*"), {
        "postgres* -> psycopg*": "the PostgreSQL backend package",
    }),
    Rule("the engine reaches a database through the port only", tuple(ENGINE),
         ("apsw", "sqlite3", "psycopg", "psycopg.*", "agui_store.schema"), {}),
    Rule("the store's checks are written once for every backend: they read through the port",
         ("integrity", "ledger"), ("agui_store.sqlite*", "agui_store.postgres*",
                                   "agui_store.database", *DRIVERS), {}),
    Rule("sqlite3 and sqlite-utils write analysis exports only (two SQLite libraries on one "
         "file in one process can corrupt it)", ("*",), ("sqlite3", "sqlite_utils"), {
        "analysis -> sqlite3": "writes the analysis export, another file, with sqlite-utils",
        "analysis -> sqlite_utils": "the same",
    }),
    Rule("the ASGI recorder imports no web framework (pure ASGI: no runtime dependency "
         "beyond the store's own)", ("asgi",), ("*",), dict.fromkeys(
             ["__future__", "asyncio", "contextlib", "logging", "re", "collections",
              "dataclasses", "typing", "msgspec", "agui_store"],
             "the standard library, or a dependency of the store's own")),
]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_the_layering_rule_holds_for_every_module(rule: Rule) -> None:
    broken = {module: sorted(rule.broken_by(module)) for module in MODULES}
    assert {module: found for module, found in broken.items() if found} == {}


def test_every_exception_to_a_rule_is_still_needed() -> None:
    """An exception outlives its reason silently; this says when one can go (the backends'
    own exceptions stand for packages that may not exist yet)."""
    stale = []
    for rule in RULES:
        for exception in rule.allowed:
            if " -> " not in exception or exception.split(" -> ")[0].endswith("*"):
                continue
            used = any(
                fnmatch.fnmatchcase(f"{module} -> {imported}", exception)
                for module in MODULES
                for imported in imports_of(module)
            )
            if not used:
                stale.append((rule.name, exception))
    assert stale == []


def test_every_module_of_the_package_is_placed_in_a_layer() -> None:
    placed = [*CORE, *STORAGE, *TOP]
    unplaced = [m for m in MODULES if not any(fnmatch.fnmatchcase(m, p) for p in placed)]
    assert unplaced == []


#: Import cycles that are known, each with its reason (a set of modules in one cycle).
KNOWN_CYCLES = {
    frozenset({"database", "ledger", "checkpoints"}): "migration 8 (database) hashes the log "
    "with ledger, whose checkpoint check imports checkpoints, which types its connections "
    "as database.Conn; the migrations move into the SQLite backend package (issue 10)",
}


def test_the_package_has_no_import_cycle_but_the_known_ones() -> None:
    """Late imports (inside a function) count: they only hide a cycle from the interpreter."""
    graph = {m: {_module_of(i) for i in imports_of(m)} & MODULES.keys() for m in MODULES}
    assert {frozenset(c) for c in _cycles(graph)} <= KNOWN_CYCLES.keys()


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                out.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_a_rule_catches_what_it_forbids() -> None:
    """The checker itself: records importing render would break the leaf rule."""
    leaf = next(rule for rule in RULES if rule.modules == ("records",))
    assert imports_of("diff") >= {"agui_store.records"}
    assert leaf.broken_by("records") == set()
    assert Rule("x", ("diff",), ("agui_store.*",), {}).broken_by("diff") >= {
        "agui_store.records"
    }


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
def test_the_engine_holds_no_sql(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    statements = [
        node.value
        for node in ast.walk(tree)
        if _is_statement(node) and not str(node.value).lstrip().startswith(("The ", "A ", "An "))
    ]
    assert statements == []


def test_every_statement_of_the_sqlite_backend_is_a_named_constant() -> None:
    """The SQLite backend's transaction runs the constants of its sql module, never text
    built on the spot."""
    tree = ast.parse(MODULES["sqlite.transaction"].read_text(encoding="utf-8"))
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
