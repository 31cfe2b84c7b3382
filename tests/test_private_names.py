"""The package uses other distributions through their public API only, checked on its source.

A private name (one with a leading underscore) of a dependency can change in any release
without notice; a copy of its internals pinned to one version broke ``diff`` for every user
whose pip resolved a newer one. Names of the standard library and of the package itself are
not checked here.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

from tests.conftest import PYDANTIC_AI

PACKAGE = Path(__file__).resolve().parents[1] / "agui_store"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_foreign(module: str) -> bool:
    top = module.split(".")[0]
    return bool(top) and top != "agui_store" and top not in sys.stdlib_module_names


def _dotted(node: ast.expr, bound: dict[str, str]) -> str:
    """The full dotted name of a base class written ``alias.Name`` or ``Name``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    assert isinstance(node, ast.Name)
    return ".".join([bound[node.id], *reversed(parts)])


def _members(dotted: str) -> set[str]:
    """The attributes of a foreign class, found by importing it. A class that cannot be
    imported here (its optional dependency is missing) counts as having every name: then
    each private name a subclass uses is reported."""
    module, _, name = dotted.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return _EVERY_NAME
    return set(dir(found))


class _EveryName(set):  # type: ignore[type-arg]
    def __contains__(self, item: object) -> bool:
        return True


_EVERY_NAME = _EveryName()


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def private_uses(source: str) -> list[str]:
    """Each place where ``source`` imports, subclasses, reads or calls a private name of a
    module outside the package and the standard library, as ``line: name``."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # a local name -> the foreign module it stands for
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _is_foreign(alias.name):
                    continue
                if any(_is_private(part) for part in alias.name.split(".")):
                    found.append(f"{node.lineno}: import {alias.name}")
                local = alias.asname or alias.name.split(".")[0]
                bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not _is_foreign(node.module):
                continue
            if any(_is_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                else:
                    # A public name may be a module or a class: its private members count too.
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        # An object a foreign call makes is foreign too: its private members count.
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and (root := _root_name(node.value.func)) in bound
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = f"{bound[root]}(...)"
        # A subclass of a foreign class that overrides or calls its private members (its own
        # private helpers are its own business).
        if isinstance(node, ast.ClassDef):
            foreign = [
                _dotted(base, bound) for base in node.bases if _root_name(base) in bound
            ]
            members = [_members(name) for name in foreign]
            inherited = next(
                (m for m in members if isinstance(m, _EveryName)), set().union(*members)
            )
            if foreign:
                for inner in ast.walk(node):
                    if inner is node or not (
                        (isinstance(inner, ast.FunctionDef) and inner.name in inherited)
                        or (isinstance(inner, ast.Attribute) and inner.attr in inherited)
                    ):
                        continue
                    if isinstance(inner, ast.FunctionDef) and _is_private(inner.name):
                        found.append(f"{inner.lineno}: {node.name}.{inner.name} overrides "
                                     "a foreign class's private member")
                    elif (
                        isinstance(inner, ast.Attribute)
                        and _is_private(inner.attr)
                        and isinstance(inner.value, ast.Name)
                        and inner.value.id == "self"
                    ):
                        found.append(f"{inner.lineno}: self.{inner.attr} in a subclass of "
                                     "a foreign class")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{node.lineno}: {bound[root.id]}...{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in bound
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
        ):
            found.append(f"{node.lineno}: {node.func.id}({bound[node.args[0].id]}, "
                         f"{node.args[1].value!r})")
    return found


#: The modules whose foreign classes cannot be imported where pydantic-ai cannot run (it
#: needs Python 3.11): there each private name of theirs would be reported, so they are
#: checked on 3.11+ alone.
NEEDS_PYDANTIC_AI = {"agui_store/integrations/pydantic_ai.py"}


def test_the_package_uses_no_private_name_of_another_distribution() -> None:
    offences = {
        str(path.relative_to(PACKAGE.parent)): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if (uses := private_uses(path.read_text(encoding="utf-8")))
    }
    if not PYDANTIC_AI:
        offences = {path: uses for path, uses in offences.items() if path not in NEEDS_PYDANTIC_AI}
    assert offences == {}


def test_the_check_finds_a_subclassed_builder_and_its_private_helpers() -> None:
    source = (
        "import jsonpatch\n"
        "from jsonpatch import DiffBuilder, _path_join\n"
        "import msgspec._core as core\n"
        "class B(jsonpatch.DiffBuilder):\n"
        "    def _compare_dicts(self):\n"
        "        self._compare_values('', None, 1, 2)\n"
        "        return jsonpatch._path_join('', 1), DiffBuilder._item_added\n"
        "ok = hasattr(jsonpatch, '_path_join') and jsonpatch.__version__\n"
        "builder = DiffBuilder({}, {})\n"
        "builder._compare_values('', None, {}, {})\n"
    )
    assert sorted(private_uses(source)) == sorted([
        "2: from jsonpatch import _path_join",
        "3: import msgspec._core",
        "7: jsonpatch..._path_join",
        "7: jsonpatch.DiffBuilder..._item_added",
        "8: hasattr(jsonpatch, '_path_join')",
        "10: jsonpatch.DiffBuilder(...)..._compare_values",
        "5: B._compare_dicts overrides a foreign class's private member",
        "6: self._compare_values in a subclass of a foreign class",
    ])


def test_the_check_leaves_the_standard_library_and_the_package_alone() -> None:
    source = (
        "import sys, os\n"
        "from agui_store.protocol.js import _json_equal\n"
        "frame = sys._getframe(0)\n"
        "os._exit\n"
    )
    assert private_uses(source) == []
