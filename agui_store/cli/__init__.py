"""The ``agui-store`` command line (:mod:`agui_store.cli.commands`), the text it draws
(:mod:`agui_store.cli.render`) and the demo it records (:mod:`agui_store.cli.demo`).

``agui_store.cli.main`` is the console script's entry point, as before the command line
became a folder; every public name of the commands module reads here too.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["main"]

#: The exit code of a command the user interrupted (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; its exit code (see :func:`agui_store.cli.commands.main`).

    The commands load here, not when this module is imported, so that Ctrl+C in the moment
    they take to load ends the command with one line, like Ctrl+C at any later moment.
    """
    try:
        commands = importlib.import_module("agui_store.cli.commands")
        return int(commands.main(argv, out))
    except KeyboardInterrupt:  # before the command began, or after it ended
        sys.stderr.write("agui-store: interrupted\n")
        return EXIT_INTERRUPTED


def __getattr__(name: str) -> object:
    """A module of the command line (``agui_store.cli.render``), or a public name of the
    commands module, loaded when first read."""
    if name.startswith("_"):
        raise AttributeError(f"module 'agui_store.cli' has no attribute {name!r}")
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
    commands = importlib.import_module("agui_store.cli.commands")
    try:
        return getattr(commands, name)
    except AttributeError:
        raise AttributeError(f"module 'agui_store.cli' has no attribute {name!r}") from None
