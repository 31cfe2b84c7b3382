"""The layering of the package, checked on its source: the folders are the layers.

From the bottom up (``docs/architecture.md`` says what each holds and why):

- ``errors`` and ``records``, at the root: leaves every layer may import;
- ``protocol/``: the official client's behaviour (model, JSON Patch, reducer, verifier,
  compaction), pure;
- ``codec/``: bytes and events, in and out;
- ``history/``: the store's rules on plain values (restore, normalize, hashes, diff);
- ``engine/``: the store's logic over the storage port, written once for every backend;
- ``backends/``: one package per database, each whole (connection, schema, migrations, SQL,
  error translation), beside the parts every backend shares;
- ``facade/``: ``Store``'s verbs, one class per concern, over the engine (it names no
  backend);
- the root and its families of edges: the public modules (``Store``, ``AsyncStore``,
  recording, ASGI, copy, the test hooks), ``exports/`` (the store in another shape) and
  ``cli/`` (the command line).

A module imports its own layer and the layers below it, never one above: every import
counts, late (inside a function) or under ``TYPE_CHECKING`` alike, since either only hides a
dependency from the interpreter.
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
    """Every module of the package by dotted name below it (``records``,
    ``backends.sqlite.schema``); a package by its folder's name."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _module_of(imported: str) -> str | None:
    """The package's module an import names (``agui_store.engine.port.Reading`` names
    ``engine.port``), or None outside the package."""
    if imported == "agui_store":
        return "__init__"
    if not imported.startswith("agui_store."):
        return None
    name = imported.removeprefix("agui_store.")
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


@functools.cache
def imports_of(module: str) -> frozenset[str]:
    """What a module imports, spelled in full (``agui_store.records``, ``apsw``): at the top,
    inside a function, or under ``if TYPE_CHECKING:``. A relative import is resolved."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
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
                # ``from agui_store.engine import port`` imports a module, not a name that
                # the package's __init__ defines.
                submodule = f"{name}.{alias.name}"
                found.add(submodule if submodule.removeprefix("agui_store.") in MODULES else name)
    return frozenset(found)


def graph() -> dict[str, set[str]]:
    """The package's import graph: each module and the package modules it imports."""
    return {
        module: {m for m in map(_module_of, imports_of(module)) if m is not None} - {module}
        for module in MODULES
    }


#: The leaves at the root: every layer hands back records and raises errors.
LEAVES = ("errors", "records")
#: The layers from the bottom up: a module imports its own layer and those below.
LAYERS = ("leaves", "protocol", "codec", "history", "engine", "backends", "facade", "edges")


def layer_of(module: str) -> str:
    if module in LEAVES:
        return "leaves"
    folder = module.split(".")[0]
    return folder if folder in LAYERS else "edges"


#: The database drivers.
DRIVERS = ("apsw", "sqlite3", "sqlite_utils", "psycopg", "psycopg.*")


def test_every_module_is_in_a_layer_and_every_layer_is_a_folder() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders >= set(LAYERS) - {"leaves", "edges"}
    # The root holds the edges and the leaves; any other folder is a layer named above (or
    # a package of edges, such as a viewer, that the edge rules cover).
    assert {m for m in MODULES if layer_of(m) == "edges" and "." in m} <= {
        m for m in MODULES if m.split(".")[0] not in LAYERS
    }


#: The edge modules the facade stands on, each with its reason. Each is a public module
#: (so it sits at the root or in a family of edges) that imports only layers below the
#: facade: a floor under it in all but its folder.
FACADE_FOUNDATIONS = {
    "recording": "Store.record hands the store to the recorder, which writes through the "
    "Appender interface it defines",
    "exports.targets": "the archive verbs read and write a path by the rules every export "
    "keeps: never over the store, never over a database",
}


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = sorted(
        f"{module} -> {imported}"
        for module, imported_modules in graph().items()
        for imported in imported_modules
        if LAYERS.index(layer_of(imported)) > LAYERS.index(layer_of(module))
        and not (layer_of(module) == "facade" and imported in FACADE_FOUNDATIONS)
    )
    assert upward == []


def test_what_the_facade_stands_on_imports_only_layers_below_it() -> None:
    """An edge the facade imports is one only by its place: it imports nothing of the
    facade's layer or above, so the facade stays a layer. Each is still needed."""
    below = set(LAYERS[: LAYERS.index("facade")])
    assert {
        foundation: sorted(m for m in graph()[foundation] if layer_of(m) not in below)
        for foundation in FACADE_FOUNDATIONS
        if any(layer_of(m) not in below for m in graph()[foundation])
    } == {}
    used = {m for module in MODULES if layer_of(module) == "facade" for m in graph()[module]}
    assert sorted(set(FACADE_FOUNDATIONS) - used) == []


def test_the_leaves_import_only_each_other() -> None:
    assert {
        leaf: sorted(graph()[leaf] - set(LEAVES)) for leaf in LEAVES if graph()[leaf] - set(LEAVES)
    } == {}
    assert graph()["records"] == set()


def test_a_backend_imports_no_other_backend() -> None:
    backends = {m.split(".")[1] for m in MODULES if m.startswith("backends.") and m.count(".") >= 1
                and (PACKAGE / "backends" / m.split(".")[1]).is_dir()}
    assert backends >= {"sqlite", "postgres"}
    crossing = sorted(
        f"{module} -> {imported}"
        for module, imported_modules in graph().items()
        if module.startswith("backends.") and module.split(".")[1] in backends
        for imported in imported_modules
        if imported.startswith("backends.")
        and imported.split(".")[1] in backends
        and imported.split(".")[1] != module.split(".")[1]
    )
    assert crossing == []


def test_the_package_has_no_import_cycle() -> None:
    """Late and ``TYPE_CHECKING`` imports count: they only hide a cycle from the interpreter."""
    assert [sorted(c) for c in _cycles(graph())] == []


def test_the_recorder_writes_through_an_appender_not_through_the_stores() -> None:
    """``Store.record`` imports the recorder downward; the recorder knows the stores only as
    the interfaces it defines (``Appender``, ``AsyncAppender``)."""
    stores = {"store", "aio", "_writer", "asgi", "__init__"} | {
        m for m in MODULES if layer_of(m) == "facade"
    }
    assert graph()["recording"] & stores == set()
    assert "recording" in graph()["facade.appends"]


@dataclass(frozen=True)
class Rule:
    """Modules matching ``modules`` import nothing matching ``forbidden``, except what
    ``allowed`` names, each with the reason it may: ``"module -> import"`` (patterns)."""

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
        return any(fnmatch.fnmatchcase(f"{module} -> {imported}", key) for key in self.allowed)


RULES = [
    Rule("the layers below the backends import no driver", ("protocol*", "codec*", "history*",
         "engine*", *LEAVES), DRIVERS, {}),
    Rule("the engine reaches a database through the port only", ("engine*",),
         ("agui_store.backends*",), {}),
    Rule("the facade names no backend: its verbs reach a database through the port", (
         "facade*",), ("agui_store.backends*",), {}),
    Rule("the store opens its backend through backends.open_backend, naming none of them",
         ("store",), ("agui_store.backends.*",), {}),
    Rule("only the SQLite backend talks to apsw", ("*",), ("apsw",), {
        "backends.sqlite* -> apsw": "the SQLite backend package",
        "exports.analysis -> apsw": "reads another file (an analysis export it may replace, "
        "read-only) to tell whether it wrote it: not the store",
    }),
    Rule("only the PostgreSQL backend talks to psycopg", ("*",), ("psycopg", "psycopg.*"), {
        "backends.postgres* -> psycopg*": "the PostgreSQL backend package",
    }),
    Rule("sqlite3 and sqlite-utils write analysis exports only (two SQLite libraries on one "
         "file in one process can corrupt it)", ("*",), ("sqlite3", "sqlite_utils"), {
        "exports.analysis -> sqlite3": "writes the analysis export, another file, with "
        "sqlite-utils",
        "exports.analysis -> sqlite_utils": "the same",
    }),
    Rule("jsonpatch is the tests' reference, not a dependency: the package never imports it",
         ("*",), ("jsonpatch", "jsonpatch.*", "jsonpointer"), {}),
    Rule("the ASGI recorder imports no web framework (pure ASGI: no runtime dependency "
         "beyond the store's own)", ("asgi",), ("*",), {
             f"asgi -> {name}": "the standard library, or a dependency of the store's own"
             for name in ["__future__", "asyncio", "contextlib", "logging", "re",
                          "collections.*", "dataclasses", "typing", "msgspec", "agui_store*"]
         }),
]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_the_layering_rule_holds_for_every_module(rule: Rule) -> None:
    broken = {module: sorted(rule.broken_by(module)) for module in MODULES}
    assert {module: found for module, found in broken.items() if found} == {}


def test_every_exception_to_a_rule_is_still_needed() -> None:
    """An exception outlives its reason silently; this says when one can go (a backend's
    own exceptions stand whatever it imports today)."""
    stale = []
    for rule in RULES:
        for exception in rule.allowed:
            if exception.split(" -> ")[0].endswith("*") or rule.modules == ("asgi",):
                continue
            used = any(
                fnmatch.fnmatchcase(f"{module} -> {imported}", exception)
                for module in MODULES
                for imported in imports_of(module)
            )
            if not used:
                stale.append((rule.name, exception))
    assert stale == []


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_checkers_catch_what_they_forbid() -> None:
    """The checkers themselves, on a made-up graph and on a real import."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert "agui_store.records" in imports_of("history.diff")
    assert Rule("x", ("history.diff",), ("agui_store.*",), {}).broken_by("history.diff") >= {
        "agui_store.records"
    }
    # TYPE_CHECKING imports count.
    assert "engine.cache" in graph()["engine.derivation"]
    assert layer_of("engine.port") == "engine" and layer_of("store") == "edges"
    assert layer_of("facade.base") == "facade"
    assert layer_of("errors") == "leaves" and layer_of("backends.sqlite.sql") == "backends"
    # Statements are found, built ones too, and prose is not.
    assert _statements("backends.sqlite.sql") and _statements("backends.postgres.sql")
    assert _statements("engine.integrity") == []


#: A string that is a statement (the package spells SQL's keywords in capitals).
_SQL = re.compile(
    r"\b(SELECT\b.*\bFROM|INSERT\s+INTO|UPDATE\b.*\bSET|DELETE\s+FROM|WITH\s+RECURSIVE"
    r"|PRAGMA\s+\w+|DROP\s+TRIGGER)\b",
    re.S,
)


def _statements(module: str) -> list[str]:
    """The statements a module spells: string constants and the f-strings that build one
    (docstrings aside: they may name a statement in prose)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in docstrings:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(
                part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if _SQL.search(text):
            found.append(text.strip()[:60])
    return found


@pytest.mark.parametrize("module", [m for m in MODULES if layer_of(m) == "engine"])
def test_the_engine_holds_no_sql(module: str) -> None:
    assert _statements(module) == []


#: Per backend, the modules that may spell statements: its SQL module, and the schema module's
#: DDL and migration scripts (which the schema check compares with what the database holds).
STATEMENT_MODULES = {"sql", "schema"}


@pytest.mark.parametrize("module", [m for m in MODULES if m.startswith("backends.")])
def test_every_statement_of_a_backend_is_in_its_sql_module(module: str) -> None:
    if module.rsplit(".", 1)[1] in STATEMENT_MODULES:
        return
    assert _statements(module) == []


@pytest.mark.parametrize(
    "module", [m for m in MODULES if layer_of(m) not in ("backends", "edges")]
)
def test_no_layer_below_the_backends_spells_a_statement(module: str) -> None:
    assert _statements(module) == []


def test_the_documented_import_paths_keep_working() -> None:
    """Moving a module into its layer leaves the paths users import unchanged."""
    import importlib

    import agui_store

    assert callable(agui_store.open) and agui_store.Store.__module__ == "agui_store.store"
    assert importlib.import_module("agui_store.aio").AsyncStore
    assert importlib.import_module("agui_store.asgi").Recorder
    assert importlib.import_module("agui_store.recording").Batcher
    assert importlib.import_module("agui_store.cli").main
    assert importlib.import_module("agui_store.testing").connection
    assert importlib.import_module("agui_store.errors").AguiStoreError is agui_store.AguiStoreError
    commands = importlib.import_module("agui_store.cli.commands")
    assert agui_store.cli.COMMANDS is commands.COMMANDS  # the commands' names read there too
    pytest.importorskip("psycopg")
    old = importlib.import_module("agui_store.postgres.schema")
    assert old is importlib.import_module("agui_store.backends.postgres.schema")


def test_importing_the_package_and_its_command_line_loads_none_of_the_store() -> None:
    """A public name's module loads when the name is first read: ``import agui_store`` is
    quick, and the command line can answer Ctrl+C while the store's modules load."""
    import importlib
    import subprocess
    import sys

    import agui_store

    code = ("import sys, agui_store.cli\n"
            "print(sorted(m for m in sys.modules if m.startswith('agui_store')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["['agui_store',", "'agui_store.cli']"], done.stderr
    # A submodule reads as an attribute after ``import agui_store`` alone, as when they all
    # loaded with it; so do the command line's.
    code = ("import agui_store\n"
            "assert agui_store.errors.StoreBusyError is agui_store.StoreBusyError\n"
            "assert agui_store.records.Run is agui_store.Run and agui_store.testing.connection\n"
            "assert agui_store.cli.render.graph and agui_store.cli.COMMANDS\n"
            "assert not hasattr(agui_store, 'no_such_module')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for name in agui_store.__all__:
        value = getattr(agui_store, name)
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and name != "__version__":
            assert getattr(importlib.import_module(home), name) is value, name
    assert set(agui_store.__all__) <= set(dir(agui_store))


#: The modules at the root: the public modules, the package's own two, the ``postgres``
#: alias and the writer process's module. Families of peers get a folder (``cli/``,
#: ``exports/``, ``ui/``, ``integrations/``) and each layer is one.
ROOT = {"__init__", "__main__", "store", "aio", "recording", "asgi", "sync", "testing",
        "errors", "records", "postgres", "_writer"}


def test_the_root_holds_the_public_modules_and_no_more_than_twelve() -> None:
    assert {m for m in MODULES if "." not in m and not (PACKAGE / m).is_dir()} == ROOT
    assert len(ROOT) <= 12


def test_a_moved_module_imports_by_its_old_path_with_a_deprecation() -> None:
    import subprocess
    import sys

    from agui_store import MOVED_MODULES

    assert {new.removeprefix("agui_store.") for new in MOVED_MODULES.values()} <= set(MODULES)
    # In a fresh interpreter: this one may have imported an old path already.
    code = (
        "import importlib, warnings, agui_store\n"
        "for old_path, new_path in agui_store.MOVED_MODULES.items():\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        old = importlib.import_module(old_path)\n"
        "    assert old is importlib.import_module(new_path), old\n"
        "    assert old.__spec__.name == new_path, old.__spec__\n"
        "    assert [w.category for w in caught] == [DeprecationWarning], caught\n"
        "    assert new_path in str(caught[0].message), caught[0]\n"
        "assert callable(agui_store.slim)  # the function, not the module of its old path\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_only_the_checks_use_the_inspection_operations_of_the_port() -> None:
    """The port's ``Reading`` is what the engine uses; ``Inspecting`` adds what ``check()``
    reads, so the engine's interface stays narrow and a backend sees which is which."""
    tree = ast.parse(MODULES["engine.port"].read_text(encoding="utf-8"))
    inspecting = next(
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Inspecting"
    )
    operations = {node.name for node in inspecting.body if isinstance(node, ast.FunctionDef)}
    assert len(operations) >= 10
    users = {
        module
        for module in MODULES
        if not module.startswith("backends.")
        and module != "engine.port"
        and any(
            f".{name}(" in MODULES[module].read_text(encoding="utf-8") for name in operations
        )
    }
    # engine.conversations: its check(), which integrity runs.
    assert users <= {"engine.integrity", "engine.log_hashes", "engine.conversations"}


def _state_of(module: str, class_name: str) -> set[str]:
    """The attributes a class's ``__init__`` sets on ``self``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    targets = [
        target
        for node in ast.walk(init)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
    ]
    return {
        target.attr
        for target in targets
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }


def _names_used(module: str) -> set[str]:
    """Every attribute and bare name a module spells."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} | {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
    }


def test_the_cache_keeps_its_state_behind_its_methods() -> None:
    """What a store remembers has one owner: ``engine.cache.Memory`` holds every cache in
    private attributes, and no other module names them, so each rule about when a fact may
    be trusted is written in one place."""
    state = _state_of("engine.cache", "Memory")
    # Its one public attribute is the store's option it was made with.
    assert {name for name in state if not name.startswith("_")} == {"derive_on_append"}
    private = {name for name in state if name.startswith("_")}
    assert len(private) >= 6
    # Nor does anything else reach the record of facts (``Known``) it keeps them in.
    owned = private | {"Known"}
    trespassers = {
        module: sorted(owned & _names_used(module))
        for module in MODULES
        if module != "engine.cache" and owned & _names_used(module)
    }
    assert trespassers == {}


#: The classes whose private members are theirs alone: each is reached from other modules
#: through its public methods (``Store.reading()``, ``Store.writing()``,
#: ``AsyncStore.append_batch`` ...), never through a private name.
OWNERS = {"Store": "store", "AsyncStore": "aio", "Recorder": "asgi"}
#: The package an owner is composed of: ``Store`` is its verb classes, each in a module of
#: ``facade/``, so what they define is ``Store``'s, and theirs to name.
COMPOSED_OF = {"store": "facade"}


def _parts_of(module: str) -> list[str]:
    """The modules that make up an owner's module: itself and its package's."""
    package = COMPOSED_OF.get(module)
    return [module, *(m for m in MODULES if package and m.startswith(f"{package}."))]

#: Who may name one anyway (``module: member``), each with its reason: the test hooks, whose
#: job is to reach inside (each hook is documented in ``agui_store.testing``).
PRIVATE_MEMBER_EXCEPTIONS = {
    "testing: _backend": "testing.connection and on_write_locked: the database underneath",
    "testing: _resolve": "testing.replayed_view takes a revision as the verbs do",
    "testing: _lock": "testing.forget: the cold start, under the store's lock",
    "testing: _writes": "testing.forget, read_bodies_whole and remembered_bodies",
    "testing: _writer_process": "testing.writer_process",
    "testing: _closed": "testing.closed",
    "testing: _forwarder": "testing.stop_threads",
    "testing: _worker": "testing.stop_threads",
    "testing: _batchers": "testing.recording",
    "testing: _store": "testing.recorder_store",
}


def _private_members() -> dict[str, set[str]]:
    """Per owning module, the private names its owner classes define: methods, class
    attributes (annotated ones too) and what any method sets on ``self``; for ``Store``,
    those of every class in ``facade/`` as well."""
    found: dict[str, set[str]] = {}
    for class_name, module in OWNERS.items():
        classes = [
            node
            for part in _parts_of(module)
            for node in ast.parse(MODULES[part].read_text(encoding="utf-8")).body
            if isinstance(node, ast.ClassDef) and (part != module or node.name == class_name)
        ]
        assert any(cls.name == class_name for cls in classes), class_name
        names = found.setdefault(module, set())
        # What the base only declares (``_backend: port.Backend``) is named too.
        names.update(
            node.target.id
            for cls in classes
            for node in cls.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        )
        for node in (node for cls in classes for node in ast.walk(cls)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id == "self"
            ):
                names.add(node.attr)
        names.intersection_update({n for n in names if n.startswith("_") and
                                   not n.startswith("__")})
    return found


def _private_uses(module: str, private: set[str]) -> set[str]:
    """The names of ``private`` a module reaches on an object other than its own ``self``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in private
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    }


def test_no_module_names_a_private_member_of_the_stores_or_the_recorder() -> None:
    """``Store``, ``AsyncStore`` and ``Recorder`` are reached through their public doors;
    only the test hooks reach inside, each named in ``PRIVATE_MEMBER_EXCEPTIONS``."""
    members = _private_members()
    assert {"_backend", "_writes", "_lock", "_resolve", "_erase"} <= members["store"]
    assert {"_batchers", "_writer_process"} <= members["aio"]
    every = set().union(*members.values())
    own = {part: members[owner] for owner in members for part in _parts_of(owner)}
    found = {
        f"{module}: {name}"
        for module in MODULES
        for name in _private_uses(module, every - own.get(module, set()))
    }
    assert sorted(found - set(PRIVATE_MEMBER_EXCEPTIONS)) == []
    assert sorted(set(PRIVATE_MEMBER_EXCEPTIONS) - found) == []  # each still needed


def test_the_verb_classes_share_private_helpers_through_the_facade_base_alone() -> None:
    """A private helper one verb module of ``facade/`` defines is named by no other module:
    one that several concerns share is defined in ``facade/base.py``, so each concern reads
    on its own and the base says what they have in common."""
    verb_modules = [m for m in _parts_of("store") if m.startswith("facade.")
                    and m != "facade.base"]
    assert len(verb_modules) >= 1
    defined = {
        module: {
            node.name
            for cls in ast.parse(MODULES[module].read_text(encoding="utf-8")).body
            if isinstance(cls, ast.ClassDef)
            for node in cls.body
            if isinstance(node, ast.FunctionDef)
            and node.name.startswith("_") and not node.name.startswith("__")
        }
        for module in verb_modules
    }
    shared = {
        f"{other} names {module}'s {name}"
        for module, names in defined.items()
        for other in _parts_of("store")
        if other != module
        for name in names & _names_used(other)
    }
    assert sorted(shared) == []


def test_no_test_file_has_the_name_of_a_contract_test() -> None:
    """A behaviour runs on every backend from ``tests/contract``; a file outside it holds
    what is one backend's, or no store's, and says so in its name."""
    tests = Path(__file__).resolve().parent
    contract = {p.name for p in (tests / "contract").glob("test_*.py")}
    assert contract and sorted(contract & {p.name for p in tests.glob("test_*.py")}) == []


def test_no_operation_of_the_port_passes_untyped_rows() -> None:
    # The engine reads every row by name or by an exact tuple type that mypy checks; only the
    # driver's connection, which agui_store.testing hands to tests, is left untyped.
    tree = ast.parse((PACKAGE / "engine" / "port.py").read_text())
    untyped = [
        f"{cls.name}.{fn.name}"
        for cls in tree.body if isinstance(cls, ast.ClassDef)
        for fn in cls.body if isinstance(fn, ast.FunctionDef) and fn.name != "connection"
        if "Any" in ast.unparse(fn.args) + ast.unparse(fn.returns or ast.Constant(None))
    ]
    assert untyped == []
