"""Revisions on random run trees: what ``X~n``, ``X^`` and their chains name is the run n
lineage parents up from X, whatever X is (a run id, a prefix, a branch, ``HEAD``), and every
verb that takes a revision (``get_run``, ``log``, ``checkout``, ``diff``, ``show``) reads the
run the revision names as it reads that run by its id. Branch names are held to git's own
``check-ref-format``. Real SQLite files, through the public API and the CLI's entry point."""

from __future__ import annotations

import io
import re
import shutil
import string
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agui_store
from agui_store import cli
from agui_store.errors import BranchError, RunNotFoundError
from tests.test_cli_git import text_run


@st.composite
def _trees(draw: st.DrawFn) -> dict[str, Any]:
    """Parents of runs ``r0``, ``r1``... (each run's parent recorded before it; ``r0`` the
    root), and branches: name -> index of the run it points at."""
    count = draw(st.integers(1, 8))
    parents = [None] + [draw(st.integers(0, i - 1)) for i in range(1, count)]
    names = st.sampled_from(["idea", "feature/x", "fix-1", "a.b", "v2", "s@t", "x+y"])
    branches = draw(st.dictionaries(names, st.integers(0, count - 1), max_size=3))
    return {"parents": parents, "branches": branches}


def _run_id(i: int) -> str:
    """Run ``i``'s id, ``r3-3``: ``r3`` and ``r3-`` begin it and no other run's id."""
    return f"r{i}-{i}"


def _build(path: Path, tree: dict[str, Any]) -> agui_store.Store:
    store = agui_store.open(path)
    for i, parent in enumerate(tree["parents"]):
        run_id = _run_id(i)
        if parent is None:
            store.append(text_run(run_id, f"answer {i}", question=f"question {i}"))
        else:
            body = store.fork(_run_id(parent), thread_id="t", run_id=run_id)
            store.append(text_run(run_id, f"answer {i}", question=f"question {i}"), input=body)
    for name, at in tree["branches"].items():
        store.branch(name, _run_id(at), thread_id="t")
    return store


def _names(tree: dict[str, Any]) -> dict[str, int]:
    """Every name of a run of the tree's thread, and the index of the run it names: each run
    id, each branch, ``HEAD``, ``@`` and ``main`` (the newest run), and each prefix of a run id
    that begins no other run's id and is no other name (a branch wins over a prefix). The
    prefixes begin with ``r``, so none can begin a short content hash (hex digits)."""
    count = len(tree["parents"])
    names = {_run_id(i): i for i in range(count)}
    names.update(tree["branches"])
    names.update({"HEAD": count - 1, "@": count - 1, "main": count - 1})
    for i in range(count):
        for end in range(1, len(_run_id(i))):
            prefix = _run_id(i)[:end]
            fits = [j for j in range(count) if _run_id(j).startswith(prefix)]
            if fits == [i] and prefix not in names:
                names[prefix] = i
    return names


def _lineage(tree: dict[str, Any], i: int) -> list[int]:
    """Run ``i`` and its lineage ancestors, by the tree's parents."""
    chain = [i]
    while (parent := tree["parents"][chain[-1]]) is not None:
        chain.append(parent)
    return chain


def _first_parents(store: agui_store.Store, run_id: str) -> list[str]:
    """``run_id`` and its lineage ancestors, walked one parent at a time."""
    chain = [run_id]
    while (run := store.get_run(chain[-1], thread_id="t")) and run.parent_run_id is not None:
        chain.append(run.parent_run_id)
    return chain


def _steps(draw: st.DrawFn) -> tuple[str, int]:
    """A chain of ``~n``, ``~`` and ``^`` steps, and how many parents it climbs."""
    text, total = "", 0
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["~n", "~", "^", "^1", "~0"]))
        n = {"~": 1, "^": 1, "^1": 1, "~0": 0}.get(kind)
        if n is None:
            n = draw(st.integers(0, 5))
            text += f"~{draw(st.sampled_from(['', '0', '00']))}{n}"
        else:
            text += kind
        total += n
    return text, total


@given(tree=_trees(), data=st.data())
def test_ancestor_steps_after_any_name_of_a_run_climb_that_many_lineage_parents(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, Any], data: st.DataObject
) -> None:
    with _build(tmp_path_factory.mktemp("rev") / "chat.db", tree) as store:
        names = _names(tree)
        base = data.draw(st.sampled_from(sorted(names)))
        steps, n = _steps(data.draw)
        chain = _first_parents(store, _run_id(names[base]))
        rev = base + steps
        if n >= len(chain):
            assert store.get_run(rev, thread_id="t") is None
            with pytest.raises(RunNotFoundError, match="no ancestor that far back"):
                store.checkout(rev, thread_id="t")
            return
        expected = chain[n]
        run = store.get_run(rev, thread_id="t")
        assert run is not None and run.run_id == expected
        # the same run by every other spelling of the same climb
        assert store.get_run(f"{base}~{n}", thread_id="t").run_id == expected  # type: ignore[union-attr]
        assert store.get_run(base + "^" * n, thread_id="t").run_id == expected  # type: ignore[union-attr]
        # log lists exactly the first-parent ancestors, in order
        assert [r.run_id for r in store.log(rev, thread_id="t")] == chain[n:]
        # checkout of a revision is checkout of the run it names
        by_rev, by_id = store.checkout(rev, thread_id="t"), store.checkout(expected, thread_id="t")
        assert (by_rev.run.run_id, by_rev.messages, by_rev.state) == (
            by_id.run.run_id, by_id.messages, by_id.state)
        # a run compared with itself has changed nothing, by any name
        same = store.diff(rev, expected, thread_id="t")
        assert not same.changes.messages and not same.changes.state_patch
        assert not same.a_runs and not same.b_runs
        two_dot = store.diff(rev, expected, thread_id="t", mode="two-dot")
        assert not two_dot.messages and not two_dot.state_patch


@given(tree=_trees(), data=st.data())
def test_show_and_log_of_a_revision_print_what_they_print_for_the_run_it_names(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, Any], data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("rev") / "chat.db"
    _build(path, tree).close()
    names = _names(tree)
    base = data.draw(st.sampled_from(sorted(names)))
    steps, n = _steps(data.draw)
    chain = _lineage(tree, names[base])

    def agui(*args: str) -> tuple[int, str]:
        out = io.StringIO()
        return cli.main(["--db", str(path), *args], out=out), out.getvalue()

    code, shown = agui("show", base + steps)
    if n >= len(chain):  # past the root: an error, and nothing on stdout
        assert code != 0 and shown == ""
        return
    assert code == 0
    run_id = shown.split()[1]
    assert run_id == _run_id(chain[n])
    assert agui("show", run_id) == (0, shown)
    assert agui("log", base + steps) == agui("log", run_id)


_BRANCH_CHARACTERS = set(string.ascii_letters + string.digits + "._/@+-")


def _git_accepts(name: str) -> bool:
    """Whether git takes the name for a branch: a valid ref under ``refs/heads`` not
    beginning with ``-``, but for the names of the newest run (``HEAD``, and ``@``, which
    git reads as ``HEAD`` too), which the store documents it refuses."""
    done = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], capture_output=True)
    return done.returncode == 0 and not name.startswith("-") and name not in ("HEAD", "@")


@pytest.mark.skipif(shutil.which("git") is None, reason="compares with git's check-ref-format")
@given(name=st.text(alphabet="ab.-/@+_~^:?*[\\ {}", min_size=1, max_size=8)
       | st.sampled_from(["a.lock", "a/.b", "a..b", "@", "a@{b", "-a", "a/", "/a", "a.", "x",
                          "HEAD", "a/@/b", "@a", "a@", "a/@"]))
def test_a_branch_name_is_taken_exactly_when_git_takes_it(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    path = tmp_path_factory.mktemp("rev") / "chat.db"
    with agui_store.open(path) as store:
        store.append(text_run("r1", "one", question="first?"))
        try:
            store.branch(name, "r1", thread_id="t")
        except BranchError:
            taken = False
        else:
            taken = True
            assert store.get_run(name, thread_id="t").run_id == "r1"  # type: ignore[union-attr]
    # The store takes fewer characters than git (those that read and quote safely on a
    # command line), and among them exactly git's names.
    assert taken == (_git_accepts(name) and set(name) <= _BRANCH_CHARACTERS)


def _documented_run(
    runs: dict[str, str | None], branches: dict[str, str], rev: str
) -> str | None:
    """The run ``rev`` names by docs/reference/cli.md's rule, among run ids that may hold
    ``~`` and ``^`` themselves: a whole run id names its run; else the steps go to the
    longest name before them that is a run id or a branch, else to the name before the
    first step, which may be a unique prefix. ``None``: it names none."""

    def exact(name: str) -> str | None:
        return name if name in runs else branches.get(name)

    def climb(run: str | None, steps: str) -> str | None:
        for count in re.findall(r"[~^]([0-9]*)", steps):
            for _ in range(int(count or 1)):
                run = runs[run] if run is not None else None
        return run

    if rev in runs:
        return rev
    first = re.search(r"[~^]", rev)
    splits = [i for i in range(len(rev)) if rev[i] in "~^" and re.fullmatch(
        r"(?:[~^][0-9]*)+", rev[i:]) and i > 0]
    for i in sorted(splits, reverse=True):
        if exact(rev[:i]) is not None:
            return climb(exact(rev[:i]), rev[i:])
    base = rev if first is None or not splits else rev[:min(splits)]
    steps = "" if base == rev else rev[len(base):]
    fits = [run for run in runs if run.startswith(base)]
    found = exact(base) or (fits[0] if len(fits) == 1 else None)
    return climb(found, steps) if found is not None else None


@given(ids=st.lists(st.text(alphabet="r~^12", min_size=1, max_size=5)
                    .filter(lambda s: not re.search(r"\^[0-9]*[2-9]", s)),
                    min_size=1, max_size=6, unique=True),
       data=st.data())
def test_a_run_id_that_holds_steps_is_named_as_the_reference_says(
    tmp_path_factory: pytest.TempPathFactory, ids: list[str], data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("rev") / "chat.db"
    parents: dict[str, str | None] = {}
    with agui_store.open(path) as store:
        for i, run_id in enumerate(ids):
            parent = data.draw(st.sampled_from(ids[:i])) if i else None
            body = store.fork(parent, thread_id="t", run_id=run_id) if parent else None
            store.append(text_run(run_id, "answer"), input=body)
            parents[run_id] = parent
        rev = data.draw(st.sampled_from(ids)) + _steps(data.draw)[0]
        expected = _documented_run(parents, {}, rev)
        run = store.get_run(rev, thread_id="t")
        assert (run.run_id if run else None) == expected
