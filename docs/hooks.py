"""MkDocs hooks: the CLI reference, generated from the parser, and optional pages.

* ``reference/cli.md`` holds the marker ``<!-- cli-reference -->``; it is replaced by every
  command's help as ``agui-store COMMAND -h`` prints it, read from
  :func:`agui_store.cli.build_parser`, so the reference cannot drift from the program.
* ``reference/errors.md`` holds ``<!-- error-tree -->``, replaced by the exception classes
  ``agui_store`` exports, drawn as a tree from their bases.
* Some pages are written alongside the package (the architecture page, the pydantic-ai
  integration). Until such a page exists in ``docs/``, its nav entry is left out and links to
  it are shown as plain text, so the strict build stays clean; once it exists, it is built
  and every link to it is checked like any other.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.agui_store")

CLI_MARKER = "<!-- cli-reference -->"
ERROR_TREE_MARKER = "<!-- error-tree -->"
OPTIONAL_PAGES = ("architecture.md", "pydantic-ai.md")
#: Screenshots of the viewer, taken by its own tests.
OPTIONAL_IMAGES = ("images/ui-tree.png", "images/ui-diff.png")
_missing: set[str] = set()


def cli_reference() -> str:
    """Markdown for the program and every subcommand, in the order the program lists them."""
    from agui_store.cli import COMMANDS

    os.environ["COLUMNS"] = "90"  # argparse wraps help to the terminal; pin it for the page
    parts = ["## agui-store", "", "```text", command_help(), "```", ""]
    for name in COMMANDS:
        parts += [f"## {name}", "", "```text", command_help(name), "```", ""]
    return "\n".join(parts)


def command_help(*command: str) -> str:
    """What ``agui-store [COMMAND] -h`` prints."""
    from agui_store.cli import build_parser

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args([*command, "-h"])
    return out.getvalue().rstrip()


def error_tree() -> str:
    """The exception classes ``agui_store`` exports, as a tree under ``AguiStoreError``, each
    with the builtin exceptions it also is."""
    import agui_store

    errors = [getattr(agui_store, name) for name in agui_store.__all__]
    errors = [e for e in errors if isinstance(e, type) and issubclass(e, BaseException)]
    lines: list[str] = []

    def walk(cls: type, depth: int) -> None:
        builtins = [b.__name__ for b in cls.__bases__ if b.__module__ == "builtins"]
        also = f"  (also {', '.join(builtins)})" if builtins and depth else ""
        lines.append("    " * depth + cls.__name__ + also)
        for child in errors:
            if cls in child.__bases__:
                walk(child, depth + 1)

    walk(agui_store.AguiStoreError, 0)
    return "\n".join(["```text", *lines, "```"])


def _drop_missing(items: list[Any], docs_dir: Path) -> list[Any]:
    kept = []
    for item in items:
        if isinstance(item, dict):
            (title, value), = item.items()
            if isinstance(value, list):
                kept.append({title: _drop_missing(value, docs_dir)})
                continue
            if value in OPTIONAL_PAGES and not (docs_dir / value).exists():
                _missing.add(value)
                log.info("nav: %s is not written yet; left out", value)
                continue
        kept.append(item)
    return kept


def on_config(config: Any) -> Any:
    _missing.clear()
    docs_dir = Path(config["docs_dir"])
    config["nav"] = _drop_missing(config["nav"], docs_dir)
    for image in OPTIONAL_IMAGES:
        if not (docs_dir / image).exists():
            _missing.add(image)
            log.info("%s is not there yet; left out", image)
    return config


#: Sphinx cross-reference roles some docstrings use (``:func:`open```); mkdocstrings renders
#: the name as code and leaves the role in front of it as text.
_SPHINX_ROLE = re.compile(r":(?:func|meth|class|mod|attr|data|exc|obj):(?=<code>)")
#: Sphinx's ``~module.Name`` (show the last name only), left as text the same way.
_SPHINX_TILDE = re.compile(r"~agui_store(?:\.\w+)*\.(\w+)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return _SPHINX_TILDE.sub(r"\1", _SPHINX_ROLE.sub("", html))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if ERROR_TREE_MARKER in markdown:
        markdown = markdown.replace(ERROR_TREE_MARKER, error_tree())
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    for name in _missing:
        # ![alt](../images/x.png) -> nothing, [text](../architecture.md#anchor) -> text, while
        # the file is absent.
        link = r"\((?:\.\./)*" + re.escape(name) + r"(?:#[^)]*)?\)"
        markdown = re.sub(r"!\[[^\]]*\]" + link, "", markdown)
        markdown = re.sub(r"\[([^\]]+)\]" + link, r"\1", markdown)
    return markdown
