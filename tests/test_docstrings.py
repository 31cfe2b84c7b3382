"""Every public definition of the package says what it is: the API reference renders these
docstrings, and a reader of the source meets them first.

Public means: every module (a package by its ``__init__.py``, a private module such as
``_x.py`` aside); every class and function at a module's top level whose name does not start
with ``_``; and every method of such a class (properties, ``@overload`` signatures and
``Protocol`` methods included) whose name does not start with ``_``, with the public classes
nested in it. Definitions under a top-level ``if``/``try`` (``TYPE_CHECKING``, an optional
import) count as top-level. Dunder methods are left out: the class docstring documents its
construction (the reference merges ``__init__`` into the class).

A class that implements the storage port says so in its docstring (it names
``agui_store.engine.port``): its methods that are port operations are documented once, on the
port's ``Protocol``, as an inherited docstring is, and need none of their own.

The check reads the source with :mod:`ast`, so it imports nothing and needs no extras.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agui_store"

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _is_public(name: str) -> bool:
    return not name.startswith("_")


def _top_level(body: list[ast.stmt]) -> Iterator[Definition]:
    """The definitions of a module's body, looking into top-level ``if`` and ``try`` blocks."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node
        elif isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse,
                          node.finalbody):
                yield from _top_level(block)


PORT = PACKAGE / "engine" / "port.py"


def port_operations(source: str) -> set[str]:
    """The names of the operations the port's ``Protocol`` classes declare with a docstring."""
    return {
        node.name
        for cls in ast.parse(source).body if isinstance(cls, ast.ClassDef)
        for node in cls.body
        if isinstance(node, ast.FunctionDef) and ast.get_docstring(node) is not None
    }


def _implements_port(cls: ast.ClassDef) -> bool:
    return "agui_store.engine.port" in (ast.get_docstring(cls) or "")


def _undocumented_in_class(
    cls: ast.ClassDef, qualname: str, inherited: frozenset[str] = frozenset()
) -> Iterator[str]:
    documented_on_port = inherited if _implements_port(cls) else frozenset()
    for node in _top_level(cls.body):
        if not _is_public(node.name):
            continue
        name = f"{qualname}.{node.name}"
        if ast.get_docstring(node) is None and node.name not in documented_on_port:
            yield name
        if isinstance(node, ast.ClassDef):
            yield from _undocumented_in_class(node, name)


def undocumented_in_source(
    source: str, module: str, port: frozenset[str] = frozenset()
) -> list[str]:
    """The public definitions of one module's source that have no docstring, by qualified
    name (``module``, ``module.Class``, ``module.Class.method``). A name defined twice (an
    overload, a property's setter) is listed once per definition that lacks one. ``port``:
    the port's operations, which a class implementing the port need not document again."""
    tree = ast.parse(source)
    missing = []
    if ast.get_docstring(tree) is None:
        missing.append(module)
    for node in _top_level(tree.body):
        if not _is_public(node.name):
            continue
        name = f"{module}.{node.name}"
        if ast.get_docstring(node) is None:
            missing.append(name)
        if isinstance(node, ast.ClassDef):
            missing.extend(_undocumented_in_class(node, name, port))
    return missing


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _public_modules() -> list[Path]:
    """The package's modules, a private module (``_x.py``, or one in a ``_x`` package) aside."""
    return [
        path for path in sorted(PACKAGE.rglob("*.py"))
        if all(_is_public(part) or part in ("__init__", "__main__")
               for part in path.relative_to(ROOT).with_suffix("").parts)
    ]


def undocumented() -> list[str]:
    """Every public definition of the package without a docstring, by file and name."""
    port = frozenset(port_operations(PORT.read_text(encoding="utf-8")))
    return [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _public_modules()
        for name in undocumented_in_source(path.read_text(encoding="utf-8"),
                                           _module_name(path), port)
    ]


def test_the_checker_finds_what_is_undocumented_and_passes_what_is_private() -> None:
    source = '''
from typing import Protocol, overload

class Shown:
    """Documented."""

    def documented(self) -> None:
        """Documented."""

    def bare(self) -> None: ...

    @property
    def value(self) -> int:
        return 1

    def _private(self) -> None: ...

    def __repr__(self) -> str:
        return ""

    class Inner:
        pass

class Port(Protocol):
    """Documented."""

    def read(self) -> int: ...

@overload
def pick(x: int) -> int: ...
@overload
def pick(x: str) -> str: ...
def pick(x):
    """Documented."""
    return x

async def fetch() -> None:
    pass

class _Hidden:
    def bare(self) -> None: ...

def _helper() -> None: ...

try:
    import fast
except ImportError:
    def fallback() -> None: ...
'''
    assert undocumented_in_source(source, "m") == [
        "m", "m.Shown.bare", "m.Shown.value", "m.Shown.Inner", "m.Port.read", "m.pick",
        "m.pick", "m.fetch", "m.fallback",
    ]


def test_the_checker_sees_every_module_of_the_package() -> None:
    names = {_module_name(path) for path in _public_modules()}
    assert {"agui_store", "agui_store.store", "agui_store.backends.sqlite.transaction",
            "agui_store.protocol.model"} <= names


def test_every_public_definition_has_a_docstring() -> None:
    missing = undocumented()
    assert not missing, f"{len(missing)} public definitions lack a docstring:\n" + "\n".join(
        missing)


def test_a_port_implementation_leaves_the_ports_operations_to_the_port() -> None:
    source = '''"""A module."""

class Transaction:
    """Reads and writes; each operation is the port's (:mod:`agui_store.engine.port`)."""

    def thread(self) -> int: ...

    def helper(self) -> int: ...

class Elsewhere:
    """Not a port implementation."""

    def thread(self) -> int: ...
'''
    assert undocumented_in_source(source, "m", frozenset({"thread"})) == [
        "m.Transaction.helper", "m.Elsewhere.thread",
    ]


def test_every_operation_of_the_port_is_documented_on_the_port() -> None:
    tree = ast.parse(PORT.read_text(encoding="utf-8"))
    declared = {
        node.name
        for cls in tree.body if isinstance(cls, ast.ClassDef)
        for node in cls.body if isinstance(node, ast.FunctionDef)
    }
    assert declared == port_operations(PORT.read_text(encoding="utf-8"))


API_PAGE = ROOT / "docs" / "reference" / "api.md"


def _public_members_of_store() -> set[str]:
    """What ``Store`` offers: the public methods and properties of its class in ``store.py``
    and of the verb classes of ``facade/`` it is composed of."""
    sources = [PACKAGE / "store.py", *sorted((PACKAGE / "facade").glob("*.py"))]
    return {
        node.name
        for path in sources
        for cls in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(cls, ast.ClassDef) and (path.name != "store.py" or cls.name == "Store")
        for node in cls.body
        if isinstance(node, ast.FunctionDef) and _is_public(node.name)
    }


def test_the_api_reference_shows_every_public_member_of_the_store() -> None:
    """The reference lists ``Store``'s members by hand, in the order a reader meets them
    (its verb classes live in several modules, whose source order means nothing to a
    reader): a verb missing from the list would be missing from the reference."""
    page = API_PAGE.read_text(encoding="utf-8")
    block = page.split("::: agui_store.Store\n", 1)[1].split("\n\n", 1)[0]
    listed = [line.strip().removeprefix("- ") for line in block.splitlines()
              if line.strip().startswith("- ")]
    expected = _public_members_of_store()
    assert len(expected) >= 30  # the enumeration itself works
    assert sorted(set(listed) ^ expected) == []
    assert len(listed) == len(set(listed))
