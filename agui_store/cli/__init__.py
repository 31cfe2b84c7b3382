"""The ``agui-store`` command line (:mod:`agui_store.cli.commands`), the text it draws
(:mod:`agui_store.cli.render`) and the demo it records (:mod:`agui_store.cli.demo`).

``agui_store.cli.main`` is the console script's entry point, as before the command line
became a folder; every public name of the commands module reads here too.
"""

from agui_store.cli.commands import *  # noqa: F403 (the module's public names, as before)
from agui_store.cli.commands import main

__all__ = ["main"]
