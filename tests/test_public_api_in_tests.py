"""The tests reach the package through its public names and the documented hooks of
``agui_store.testing``, nothing else, checked on their source.

A test that imports a private function, or reads a store's private attributes, pins the
package's insides: a refactor that keeps every behaviour breaks it, and it tests what no
user can call. What a test truly needs from inside a store is a hook in ``agui_store.testing``,
documented there.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: Names tests give to stores and other objects of the package (a store's private attributes
#: are the ones worth catching: its backend, lock, cache and transactions).
STORE_NAMES = frozenset({"store", "astore", "source", "target", "opened", "reopened"})


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str) -> list[str]:
    """What a test module's source reaches of the package's private names: imports of them,
    ``module._name`` of a module of the package, and ``store._name`` of a store."""
    tree = ast.parse(source)
    modules: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(
                alias.asname or alias.name.split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] == "agui_store"
            )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agui_store":
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    continue
                modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _is_private(node.attr)
            and isinstance(node.value, ast.Name)
            and (node.value.id in modules or node.value.id in STORE_NAMES)
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return sorted(found, key=lambda use: int(use.split(":")[0].removeprefix("line ")))


def test_no_test_reaches_a_private_name_of_the_package() -> None:
    uses = {
        str(path.relative_to(TESTS)): private_uses(path.read_text(encoding="utf-8"))
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != Path(__file__).name
    }
    assert {name: found for name, found in uses.items() if found} == {}


def test_the_check_finds_private_imports_module_attributes_and_store_insides() -> None:
    source = (
        "from agui_store.protocol.js import _json_equal, json_equal\n"
        "from agui_store.codec import ingest\n"
        "import agui_store.store as store_module\n"
        "ingest._deeper_than(1, 2)\n"
        "store_module._OPEN_STORES\n"
        "store._memory.forget()\n"
        "ingest.parse_events\n"
        "self._helper()\n"
    )
    assert private_uses(source) == [
        "line 1: from agui_store.protocol.js import _json_equal",
        "line 4: ingest._deeper_than",
        "line 5: store_module._OPEN_STORES",
        "line 6: store._memory",
    ]
