"""Every public definition of the package says what it is: the API reference renders these
docstrings, and a reader of the source meets them first.

Public means: every module (a package by its ``__init__.py``, a private module such as
``_x.py`` aside); every class and function at a module's top level whose name does not start
with ``_``; and every method of such a class (properties, ``@overload`` signatures and
``Protocol`` methods included) whose name does not start with ``_``, with the public classes
nested in it. Definitions under a top-level ``if``/``try`` (``TYPE_CHECKING``, an optional
import) count as top-level. Dunder methods are left out: the class docstring documents its
construction (the reference merges ``__init__`` into the class).

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


def _undocumented_in_class(cls: ast.ClassDef, qualname: str) -> Iterator[str]:
    for node in _top_level(cls.body):
        if not _is_public(node.name):
            continue
        name = f"{qualname}.{node.name}"
        if ast.get_docstring(node) is None:
            yield name
        if isinstance(node, ast.ClassDef):
            yield from _undocumented_in_class(node, name)


def undocumented_in_source(source: str, module: str) -> list[str]:
    """The public definitions of one module's source that have no docstring, by qualified
    name (``module``, ``module.Class``, ``module.Class.method``). A name defined twice (an
    overload, a property's setter) is listed once per definition that lacks one."""
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
            missing.extend(_undocumented_in_class(node, name))
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
    return [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _public_modules()
        for name in undocumented_in_source(path.read_text(encoding="utf-8"),
                                           _module_name(path))
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
