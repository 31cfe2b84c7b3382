"""Every example in the README and the docs runs, and shows what it prints.

The pages follow four conventions, which this module enforces:

* A ```` ```python ```` block runs. The blocks of one page run in order, in one namespace, in a
  fresh working directory of their own (so ``agui_store.open("chat.db")`` makes a new file).
* A ```` ```text title="Output" ```` block right after a Python block is what that block
  prints; ``...`` stands for any text (a content hash, a time, a random id).
* A ```` ```console ```` block runs in the same directory, each ``$ `` line through bash with
  the ``agui-store`` this interpreter installed; the lines after a command, if any, are what it
  prints on stdout and stderr, as a terminal shows them (``...`` as above). A command must
  exit 0.
* ``<!-- postgres -->`` on the line before a block runs it on a PostgreSQL database of the
  test's own, every ``postgresql://`` URL in it replaced by that database's (the test skips
  without a server locally, and fails in CI).
* ``<!-- skip: why -->`` on the line before a block leaves it out, saying why; every skip is
  listed by ``test_the_pages_skip_few_examples_and_say_why``.

The TypeScript reconnect code is not copied into the docs: the page includes
``tests/oracle/reconnecting_agent.mjs``, the file the end-to-end tests run
(``tests/test_asgi_e2e.py`` checks that it still does).
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import needs_pydantic_ai

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")], key=lambda p: str(p.relative_to(ROOT))
)
FENCE = re.compile(r"^```(\S*)(.*)$")
SKIP = re.compile(r"^<!-- skip: (.+) -->$")
POSTGRES_MARK = "<!-- postgres -->"
URL = re.compile(r"postgres(?:ql)?://[^\s\"']+")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    info: str
    code: str
    skip: str | None = None
    postgres: bool = False
    output: str | None = None  # the Output block that follows a Python block


@dataclass
class Page:
    path: Path
    blocks: list[Block] = field(default_factory=list)


def parse(path: Path) -> Page:
    lines = path.read_text(encoding="utf-8").splitlines()
    page = Page(path)
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i].strip()) if lines[i].startswith("```") else None
        if not match or not match.group(1):
            i += 1
            continue
        start = i
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        skip = SKIP.match(lines[start - 1]) if start else None
        block = Block(
            path, start + 1, match.group(1), match.group(2).strip(),
            "\n".join(lines[start + 1 : end]) + "\n", skip.group(1) if skip else None,
            postgres=start > 0 and lines[start - 1] == POSTGRES_MARK,
        )
        if block.lang == "text" and 'title="Output"' in block.info:
            previous = page.blocks[-1] if page.blocks else None
            assert previous and previous.lang == "python", f"{path}:{start + 1}: output of what?"
            previous.output = block.code
        else:
            page.blocks.append(block)
        i = end + 1
    return page


def runnable(page: Page) -> list[Block]:
    return [b for b in page.blocks if b.lang in ("python", "console")]


def matches(expected: str, got: str) -> bool:
    """doctest's comparison: ``...`` matches anything; runs of whitespace, blank lines
    included, compare equal."""
    lines = expected.rstrip("\n").split("\n")
    expected = "\n".join(line if line.strip() else "<BLANKLINE>" for line in lines) + "\n"
    checker = doctest.OutputChecker()
    return checker.check_output(expected, got, doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)


def run_console(block: Block, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "100"
    commands: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
        else:
            raise AssertionError(f"{block.page}:{block.line}: output before any command")
    for command, shown in commands:
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=300,
        )
        where = f"{block.page.relative_to(ROOT)}:{block.line}: $ {command}"
        assert proc.returncode == 0, f"{where}\n{proc.stdout}"
        if shown:
            expected = "\n".join(shown) + "\n"
            assert matches(expected, proc.stdout), (
                f"{where}\nexpected:\n{expected}got:\n{proc.stdout}"
            )


def run_python(block: Block, namespace: dict[str, object]) -> None:
    where = f"{block.page.relative_to(ROOT)}:{block.line}"
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(block.code, where, "exec"), namespace)
    if block.output is not None:
        assert matches(block.output, out.getvalue()), (
            f"{where}\nexpected:\n{block.output}got:\n{out.getvalue()}"
        )


def run_page(path: Path, cwd: Path, postgres: str | None) -> None:
    namespace: dict[str, object] = {"__name__": "__docs__"}
    try:
        for block in runnable(parse(path)):
            if block.skip or (block.postgres and postgres is None):
                continue
            if block.postgres:
                url = shlex.quote(postgres) if block.lang == "console" else postgres
                block.code = URL.sub(lambda _, url=url: url, block.code)
            if block.lang == "python":
                run_python(block, namespace)
            else:
                run_console(block, cwd)
    finally:
        for value in namespace.values():  # stores a page left open
            close = getattr(value, "close", None)
            if type(value).__name__ == "Store" and callable(close):
                close()


PAGES_WITH_EXAMPLES = [p for p in PAGES if runnable(parse(p))]
PAGES_ON_POSTGRES = [p for p in PAGES if any(b.postgres for b in parse(p).blocks)]


@pytest.mark.parametrize(
    "path", PAGES_WITH_EXAMPLES, ids=[str(p.relative_to(ROOT)) for p in PAGES_WITH_EXAMPLES]
)
def test_the_examples_of_a_page_run_and_print_what_it_shows(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_where_pydantic_ai_cannot_run(path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGUI_STORE_DB", raising=False)
    run_page(path, tmp_path, postgres=None)


@pytest.mark.parametrize(
    "path", PAGES_ON_POSTGRES, ids=[str(p.relative_to(ROOT)) for p in PAGES_ON_POSTGRES]
)
def test_the_postgresql_examples_of_a_page_run_on_a_real_server(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_database: str
) -> None:
    skip_where_pydantic_ai_cannot_run(path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGUI_STORE_DB", raising=False)
    run_page(path, tmp_path, postgres=postgres_database)


def test_the_pages_skip_few_examples_and_say_why() -> None:
    skipped = [
        (str(b.page.relative_to(ROOT)), b.line, b.skip)
        for p in PAGES for b in runnable(parse(p)) if b.skip
    ]
    ran = sum(1 for p in PAGES for b in runnable(parse(p)) if not b.skip)
    assert ran >= 4 * len(skipped), skipped
    assert all(len(why) > 10 for *_, why in skipped), skipped


def test_every_block_names_its_language() -> None:
    for path in PAGES:
        text = path.read_text(encoding="utf-8").splitlines()
        inside = False
        for n, line in enumerate(text, 1):
            if line.startswith("```"):
                if not inside:
                    assert line.strip() != "```", f"{path.relative_to(ROOT)}:{n}: a bare fence"
                inside = not inside


def test_the_readmes_links_into_the_docs_name_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)
    assert links
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_the_error_page_says_when_each_error_is_raised() -> None:
    import agui_store

    page = (ROOT / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    errors = [
        name for name in agui_store.__all__
        if isinstance(getattr(agui_store, name), type)
        and issubclass(getattr(agui_store, name), BaseException)
    ]
    assert [name for name in errors if f"| `{name}` |" not in page] == []


def test_the_error_page_names_the_error_a_missing_branch_raises(tmp_path: Path) -> None:
    """A branch the thread does not have is a branch operation refused, not a missing run:
    the row of the error ``delete_branch`` and ``rename_branch`` raise for it names them."""
    import agui_store

    page = (ROOT / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", page, re.MULTILINE))
    with agui_store.open(tmp_path / "chat.db") as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t1", "runId": "run-1"},
            {"type": "RUN_FINISHED", "threadId": "t1", "runId": "run-1"},
        ])
        for call, verb in (
            (lambda: store.delete_branch("gone", thread_id="t1"), "delete_branch"),
            (lambda: store.rename_branch("gone", "new", thread_id="t1"), "rename_branch"),
        ):
            with pytest.raises(agui_store.AguiStoreError) as raised:
                call()
            assert f"`{verb}`" in rows[type(raised.value).__name__], verb


def public_keywords() -> set[str]:
    """The parameter names of every public callable a page documents: ``Store``'s and
    ``AsyncStore``'s methods, what ``agui_store`` exports, the recorders, the viewer's app
    and, where pydantic-ai runs, the ``ConversationStore``."""
    import inspect

    import agui_store
    import agui_store.aio
    import agui_store.asgi
    import agui_store.recording
    import agui_store.ui

    callables: list[object] = [
        agui_store.aio.open, agui_store.asgi.Recorder, agui_store.recording.Batcher,
        agui_store.recording.AsyncBatcher, agui_store.ui.app,
        *(getattr(agui_store, name) for name in agui_store.__all__),
    ]
    classes: list[type] = [agui_store.Store, agui_store.aio.AsyncStore]
    with contextlib.suppress(ImportError):  # Python 3.10: no pydantic-ai, nor its pages
        from agui_store.integrations.pydantic_ai import ConversationStore

        classes.append(ConversationStore)
    for cls in classes:
        callables += [cls, *(getattr(cls, n) for n in dir(cls) if not n.startswith("_"))]
        # A method that passes **options on (the ConversationStore's, to pydantic-ai's)
        # takes the keywords of the method it overrides.
        callables += [
            getattr(base, n) for base in cls.__mro__[1:] for n in vars(base)
            if not n.startswith("_")
        ]
    names: set[str] = set()
    for obj in callables:
        if callable(obj):
            with contextlib.suppress(TypeError, ValueError):  # no signature to read
                names.update(inspect.signature(obj).parameters)
    return names


def test_every_keyword_a_page_names_is_one_the_api_takes() -> None:
    """A page that writes `` `after=` `` or `` `scope=` `` in its prose names a keyword some
    public call takes: a keyword no call has is a promise the code does not keep."""
    keywords = public_keywords()
    pydantic_ai = importlib.util.find_spec("pydantic_ai") is not None
    named = [
        (str(path.relative_to(ROOT)), keyword)
        for path in PAGES if path.name != "changelog.md"
        and (pydantic_ai or not uses_pydantic_ai(path))
        for keyword in re.findall(r"`([a-z_]+)=`", path.read_text(encoding="utf-8"))
    ]
    assert len(named) > 10
    assert [(where, keyword) for where, keyword in named if keyword not in keywords] == []


#: Commands whose help example is not run here: ``ui`` serves until it is stopped (the
#: viewer's tests run it), and ``copy`` names a PostgreSQL server (the test below runs it).
NOT_RUN_HERE = {"ui", "copy"}


def help_examples(tmp_path: Path) -> list[tuple[str, str]]:
    """Each command's help example, in the parser's order, and the files they need: a
    recording of thread t1 (runs run-1 and run-2) to import first."""
    from agui_store.cli import EXAMPLES

    events = []
    for run_id in ("run-1", "run-2"):
        events += [
            {"type": "RUN_STARTED", "threadId": "t1", "runId": run_id},
            {"type": "TEXT_MESSAGE_START", "messageId": f"{run_id}-a", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run_id}-a", "delta": "Hello"},
            {"type": "TEXT_MESSAGE_END", "messageId": f"{run_id}-a"},
            {"type": "RUN_FINISHED", "threadId": "t1", "runId": run_id},
        ]
    (tmp_path / "recording.sse").write_text(
        "".join(f"data: {json.dumps(e)}\n\n" for e in events), encoding="utf-8"
    )
    return list(EXAMPLES.items())


def run_example(command: str, cwd: Path) -> None:
    block = Block(ROOT / "agui_store" / "cli.py", 0, "console", "", f"$ {command}\n")
    run_console(block, cwd)
    # The examples name the store as chat.db or local.db too: the same store.
    for name in ("chat.db", "local.db"):
        if (cwd / "agui-store.db").exists() and not (cwd / name).exists():
            shutil.copy(cwd / "agui-store.db", cwd / name)


def test_the_example_in_every_commands_help_runs(tmp_path: Path) -> None:
    for name, command in help_examples(tmp_path):
        if name not in NOT_RUN_HERE:
            run_example(command, tmp_path)


def test_the_copy_example_in_its_help_runs_on_a_real_server(
    tmp_path: Path, postgres_database: str
) -> None:
    examples = dict(help_examples(tmp_path))
    run_example(examples["import"], tmp_path)
    run_example(URL.sub(lambda _: shlex.quote(postgres_database), examples["copy"]), tmp_path)


def test_every_cli_example_is_in_a_block_that_runs() -> None:
    """``agui-store`` commands are shown in console blocks, which run; a shell block may hold
    installs and the viewer's server only."""
    shown_only = [
        (str(b.page.relative_to(ROOT)), b.line, line)
        for p in PAGES for b in parse(p).blocks if b.lang in ("sh", "bash", "shell")
        for line in b.code.splitlines()
        if re.match(r"(\w+=\S+ )*agui-store (?!ui\b)", line.strip())
    ]
    assert shown_only == []


#: Extras for working on the project (its tests, linters, docs site), not for using it: a
#: page that names them in a contributor's setup line does not install them for its examples.
CONTRIBUTOR_EXTRAS = {"test", "dev", "docs"}
PIP_INSTALL = re.compile(r"\bpip install\s+(.*)")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def page_installs(page: Page) -> set[tuple[str, frozenset[str]]]:
    """What the page's ``pip install`` lines install: ``(distribution, extras)``; agui-store
    itself always (the page is about it)."""
    installs: set[tuple[str, frozenset[str]]] = {("agui-store", frozenset())}
    for block in page.blocks:
        if block.lang not in ("sh", "bash", "shell", "console"):
            continue
        for line in block.code.splitlines():
            match = PIP_INSTALL.search(line.split("#", 1)[0])
            if not match:
                continue
            for word in shlex.split(match.group(1).split("&&", 1)[0]):
                if word.startswith("-"):
                    continue
                name, _, extras = word.partition("[")
                chosen = frozenset(e.strip() for e in extras.rstrip("]").split(",") if e.strip())
                if name in (".", "agui-store"):
                    if chosen & CONTRIBUTOR_EXTRAS:
                        continue
                    name = "agui-store"
                name = re.split(r"[<>=!~;]", name, maxsplit=1)[0]
                installs.add((_normal(name), chosen))
    return installs


def _requirements(name: str) -> list[str]:
    """A distribution's requirements: agui-store's from this checkout's pyproject.toml (the
    truth, whatever version is installed), any other's from its installed metadata."""
    if name == "agui-store":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
            import tomli as tomllib

        project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
        return [*project["dependencies"], *(
            # A requirement's own marker (python_version >= '3.11') and its extra's, both.
            f"{req.split(';')[0]}; ({req.split(';')[1]}) and extra == '{extra}'" if ";" in req
            else f"{req}; extra == '{extra}'"
            for extra, reqs in project["optional-dependencies"].items() for req in reqs
        )]
    from importlib.metadata import requires

    return requires(name) or []


def pip_closure(installs: set[tuple[str, frozenset[str]]]) -> set[tuple[str, str]]:
    """Every distribution pip installs for ``installs``, from the requirements' metadata:
    ``(distribution, "")`` and ``(distribution, extra)`` for each extra it is installed with."""
    from packaging.requirements import Requirement

    seen: set[tuple[str, frozenset[str]]] = set()
    todo = list(installs)
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for text in _requirements(name):
            req = Requirement(text)
            if req.marker is not None and not any(
                req.marker.evaluate({"extra": extra}) for extra in {"", *extras}
            ):
                continue
            todo.append((_normal(req.name), frozenset(req.extras)))
    return {(name, extra) for name, extras in seen for extra in {"", *extras}}


#: An import of pydantic-ai, or of the integration that wraps it, in an example.
PYDANTIC_AI_IMPORT = re.compile(r"^\s*(?:from|import)\s+[\w.]*\bpydantic_ai\b", re.MULTILINE)


def skip_where_pydantic_ai_cannot_run(path: Path) -> None:
    """A page that installs pydantic-ai, or whose examples import it, is checked where
    pydantic-ai runs: it needs Python 3.11 (tests/conftest.py), and pip finds none on 3.10."""
    if uses_pydantic_ai(path):
        needs_pydantic_ai()


def uses_pydantic_ai(path: Path) -> bool:
    """Whether the page installs pydantic-ai or its examples import it."""
    page = parse(path)
    installs = page_installs(page)
    return (
        any(name == "pydantic-ai-slim" for name, _ in installs)
        or any(name == "agui-store" and "pydantic-ai" in extras for name, extras in installs)
        or any(b.lang == "python" and PYDANTIC_AI_IMPORT.search(b.code) for b in page.blocks)
    )


#: Servers a page may tell its reader to run its app with: the distribution of each.
SERVERS = {"uvicorn": "uvicorn", "hypercorn": "hypercorn", "gunicorn": "gunicorn"}


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_a_page_that_says_to_serve_an_app_with_a_server_installs_that_server(
    path: Path,
) -> None:
    """"Serve it with uvicorn" after an install line that leaves uvicorn out ends in a
    missing command: the page's own installs bring every server it tells the reader to use."""
    skip_where_pydantic_ai_cannot_run(path)
    text = path.read_text(encoding="utf-8")
    told = {
        SERVERS[name] for name in SERVERS
        if re.search(rf"\b[Ss]erves?\b[^.\n]*\b{name}\b|`{name} \S+`", text)
    }
    installed = {name for name, _ in pip_closure(page_installs(parse(path)))}
    assert told - installed == set(), f"{path.relative_to(ROOT)} installs none of {told}"


#: Modules that import more than their distribution installs by itself: the extra of it
#: that brings the rest (``pydantic_ai.ui.ag_ui`` imports ``ag_ui`` and starlette).
NEEDS_EXTRA = {"pydantic_ai.ui.ag_ui": ("pydantic-ai-slim", "ag-ui")}


def imported_distributions(page: Page) -> dict[str, str]:
    """``{module: distribution}`` of the third-party modules the page's Python imports."""
    import ast
    from importlib.metadata import packages_distributions

    owners = packages_distributions()
    found: dict[str, str] = {}
    for block in page.blocks:
        if block.lang != "python":
            continue
        for node in ast.walk(ast.parse(block.code)):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module] if isinstance(node, ast.ImportFrom) and node.module
                and not node.level else []
            )
            for dotted in names:
                if dotted in NEEDS_EXTRA:
                    found[dotted] = "[".join(NEEDS_EXTRA[dotted]) + "]"
            for module in (n.split(".")[0] for n in names):
                if module in sys.stdlib_module_names or module == "agui_store":
                    continue
                where = page.path.relative_to(ROOT)
                assert module in owners or _installed(module), (
                    f"{where}: {module} is installed by nothing"
                )
                found[module] = _normal(owners[module][0] if module in owners else module)
    return found


def _installed(distribution: str) -> bool:
    """Whether a distribution of that name is installed: Python 3.10's
    ``packages_distributions`` reads only ``top_level.txt``, which some wheels (fastapi's)
    leave out, so it maps no module to them."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import distribution as found

    try:
        found(distribution)
    except PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize(
    "path", PAGES_WITH_EXAMPLES, ids=[str(p.relative_to(ROOT)) for p in PAGES_WITH_EXAMPLES]
)
def test_what_a_pages_examples_import_is_installed_by_the_extras_the_page_names(
    path: Path,
) -> None:
    """In a fresh virtual environment, ``pip install`` of what the page names brings every
    module its examples import: computed from the requirements pip would resolve (this
    checkout's extras, the installed packages' metadata), so no example fails at import."""
    skip_where_pydantic_ai_cannot_run(path)
    page = parse(path)
    installed = pip_closure(page_installs(page))
    wanted = {m: (d.split("[")[0], d.partition("[")[2].rstrip("]"))
              for m, d in imported_distributions(page).items()}
    missing = {m: d for m, d in wanted.items() if d not in installed}
    assert missing == {}, f"{path.relative_to(ROOT)} names {sorted(page_installs(page))}"


def commands_taking(option: str) -> set[str]:
    """The commands whose parser takes ``option``."""
    import argparse

    from agui_store.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name for name, sub in commands.choices.items()
        if any(option in action.option_strings for action in sub._actions)
    }


def test_the_pages_that_say_which_commands_take_owner_name_every_one() -> None:
    """"The CLI is the operator" paragraphs list the commands that narrow to one owner: each
    command whose parser takes ``--owner`` is named there."""
    takers = commands_taking("--owner")
    assert "search" in takers
    said = [
        (str(path.relative_to(ROOT)), " ".join(part.split()))
        for path in PAGES if path.name != "changelog.md"
        for part in re.split(r"\n(?:- |\n)", path.read_text(encoding="utf-8"))
        if re.search(r"(?:CLI|command line) is the operator", part)
    ]
    assert len(said) >= 2
    missing = [
        (where, name) for where, text in said for name in sorted(takers)
        if not re.search(rf"`{name}\b", text)
    ]
    assert missing == []
