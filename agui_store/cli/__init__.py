"""The ``agui-store`` command line (:mod:`agui_store.cli.commands`), the text it draws
(:mod:`agui_store.cli.render`) and the demo it records (:mod:`agui_store.cli.demo`).

``agui_store.cli.main`` is the console script's entry point, as before the command line
became a folder; every public name of the commands module reads here too.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import TextIO

__all__ = ["main"]

#: The exit code of a command the user interrupted (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130

#: The signals that end a command as Ctrl-C does: ``kill``, ``timeout``, a closed terminal.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the command is, as Ctrl-C raises KeyboardInterrupt:
    the command ends as Ctrl-C ends it (a write rolled back, a temporary output file
    removed) instead of dying where it stands, and exits 128 + the signal's number, the
    code a shell reports for a process the signal ended."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        """The signal's name, ``SIGTERM`` or ``SIGHUP``, as the command's last line says it."""
        return signal.Signals(self.signum).name


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """The exit code of a command ``interrupt`` ended."""
    return 128 + interrupt.signum if isinstance(interrupt, Terminated) else EXIT_INTERRUPTED


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _ending_as_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` while the command runs, where nothing
    else handles them already (a program that calls ``main`` keeps its own handlers)."""
    installed = []
    if threading.current_thread() is threading.main_thread():
        for signum in TERMINATING:
            if signal.getsignal(signum) is signal.SIG_DFL:
                signal.signal(signum, _terminate)
                installed.append(signum)
    try:
        yield
    finally:
        for signum in installed:
            signal.signal(signum, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; its exit code (see :func:`agui_store.cli.commands.main`).

    The commands load here, not when this module is imported, so that Ctrl+C in the moment
    they take to load ends the command with one line, like Ctrl+C at any later moment.
    """
    try:
        with _ending_as_ctrl_c():
            commands = importlib.import_module("agui_store.cli.commands")
            return int(commands.main(argv, out))
    except KeyboardInterrupt as e:  # before the command began, or after it ended
        said = f"terminated ({e.name})" if isinstance(e, Terminated) else "interrupted"
        sys.stderr.write(f"agui-store: {said}\n")
        return exit_code(e)


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
