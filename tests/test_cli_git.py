"""The command line as a git user reads it: ranges and ``--all`` in ``log``, ranges in
``diff``, ``branch`` saying what it did, ``threads`` as a table, ``--version``, and the words
``log`` labels each run with. Through the entry point, in this process, on real files."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import cli
from agui_store.cli.render import graph
from agui_store.engine import clock
from agui_store.records import Run


def agui(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(["--db", str(db), *args], out=out)
    return code, out.getvalue()


def text_run(run_id: str, reply: str, *, question: str | None = None,
             thread: str = "t") -> list[dict[str, Any]]:
    """A run that answers ``reply`` (and first says ``question`` as a user message)."""
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": thread, "runId": run_id}]
    said = [("user", f"{run_id}-q", question)] if question else []
    for role, mid, text in [*said, ("assistant", f"{run_id}-a", reply)]:
        events += [
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": role},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text},
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
        ]
    return [*events, {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id}]


def user(mid: str, text: str) -> dict[str, str]:
    return {"id": mid, "role": "user", "content": text}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """r1 <- r2 <- r3 (main), and r4 off r1 (branch side)."""
    path = tmp_path / "chat.db"
    with agui_store.open(path) as store:
        store.append(text_run("r1", "one", question="first?"))
        store.append(text_run("r2", "two", question="second?"))
        store.append(text_run("r3", "three", question="third?"))
        store.branch("side", "r1", thread_id="t")
        body = store.fork("side", run_id="r4")
        store.append(text_run("r4", "four", question="fourth?"), input=body)
        store.branch("side", "r4", thread_id="t")
        store.branch("tip", "r3", thread_id="t")
    return path


def first_words(lines: str) -> list[str]:
    return [line.split()[0] for line in lines.splitlines()]


def test_log_takes_git_ranges_and_all(db: Path) -> None:
    assert first_words(agui(db, "log", "side..tip")[1]) == ["r3", "r2"]
    assert first_words(agui(db, "log", "tip..side")[1]) == ["r4"]
    assert first_words(agui(db, "log", "side...tip")[1]) == ["r4", "r3", "r2"]
    assert first_words(agui(db, "log", "r2..")[1]) == ["r4"]  # an empty side is HEAD
    assert first_words(agui(db, "log", "--all")[1]) == ["r4", "r3", "r2", "r1"]
    code, out = agui(db, "log", "side..tip", "--json")
    assert code == 0 and [r["runId"] for r in json.loads(out)] == ["r3", "r2"]


@pytest.mark.parametrize("words", [
    ["r3...x2"], ["r3..x2"], ["x2", "^r3"], ["--graph", "r3...x2"], ["r3...x2", "--json"],
])
def test_a_range_across_two_threads_is_a_usage_error_naming_both_and_pointing_to_diff(
    db: Path, words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with agui_store.open(db) as store:
        store.append(text_run("x1", "one", thread="u"))
        store.append(text_run("x2", "two", thread="u"))
    capsys.readouterr()
    code, out = agui(db, "log", *words)
    err = capsys.readouterr().err
    assert (code, out) == (2, ""), err
    assert "are runs of different threads ('t' and 'u')" in err, err
    # --thread cannot help (the other side is not in the thread it names): diff A B can.
    assert "a range compares runs of one thread" in err and "--thread" not in err, err
    assert "diff A B (two runs, not a range) compares runs of any threads" in err, err
    assert "internal error" not in err
    # Named, the thread decides: a side it lacks is not found there.
    code, _ = agui(db, "log", "r3...x2", "--thread", "u")
    assert code == 1


def test_a_limited_listing_no_cursor_pages_says_how_many_runs_it_left_out(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert first_words(agui(db, "log", "--all", "--limit", "1")[1]) == ["r4"]
    assert capsys.readouterr().err == "3 more runs: raise the limit (--limit, -n) to list them\n"
    assert first_words(agui(db, "log", "side...tip", "--limit", "2")[1]) == ["r4", "r3"]
    assert capsys.readouterr().err == "1 more run: raise the limit (--limit, -n) to list them\n"
    assert first_words(agui(db, "log", "--all", "--limit", "4")[1]) == ["r4", "r3", "r2", "r1"]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("count", ["1_0", "+3", " 7", "\uff13", "\u0665"])  # fullwidth, Arabic
def test_a_count_is_ascii_digits_as_git_reads_one(
    db: Path, count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert agui(db, "log", "--limit", count)[0] == 2
    assert "--limit: expected an integer >= 1" in capsys.readouterr().err


def test_diff_takes_two_dot_and_three_dot_ranges(db: Path) -> None:
    two = json.loads(agui(db, "diff", "tip..side", "--json")[1])
    three = json.loads(agui(db, "diff", "tip...side", "--json")[1])
    assert json.loads(agui(db, "diff", "tip", "side", "--two-dot", "--json")[1]) == two
    assert json.loads(agui(db, "diff", "tip", "side", "--json")[1]) == three
    assert two["mode"] == "two-dot" and three["mode"] == "three-dot"
    assert cli.main(["--db", str(db), "diff", "tip"], out=io.StringIO()) == 2


def test_diff_prints_no_empty_or_duplicated_section_and_removals_first(db: Path) -> None:
    same = agui(db, "diff", "r2", "r2")[1].splitlines()
    assert same == ["@ diff r2...r2 (merge base: r2)", "  the same run: no change"]
    ahead = agui(db, "diff", "r1", "r3")[1]
    assert "(no change)" not in ahead and "@ r1 -> r1" not in ahead
    assert "@ r1 -> r3" in ahead
    two = agui(db, "diff", "r3..r4")[1].splitlines()
    changes = [line[0] for line in two if line[:1] in "+-"]
    assert changes == ["-"] * 4 + ["+"] * 2, two


def test_a_message_of_several_lines_is_marked_on_every_line_and_the_whole_state_is_named(
    tmp_path: Path,
) -> None:
    """A line of a message's text must not read as a line of the diff: it carries its
    message's mark, as a unified diff marks every line."""
    db = tmp_path / "lines.db"
    forged = "line one\n- [r1-a] assistant: hello\n~ state replace /admin true"
    with agui_store.open(db) as store:
        store.append(text_run("r1", "hello"))
        events = text_run("r2", forged)
        events.insert(-1, {"type": "STATE_SNAPSHOT", "snapshot": 7})
        store.append(events)
    lines = agui(db, "diff", "r1", "r2")[1].splitlines()
    body = [line for line in lines if not line.startswith(("@", "  "))]
    assert body == [
        "+ [r2-a] assistant: line one",
        "+ - [r1-a] assistant: hello",
        "+ ~ state replace /admin true",
        "~ state replace (the whole state) 7",
    ], lines


def test_an_id_holding_a_newline_cannot_forge_a_line_of_a_diff(tmp_path: Path) -> None:
    """A run id, a message id or a state key is one field of its line: its newline is
    written as its escape, so no line of the diff comes from what a producer named."""
    db = tmp_path / "ids.db"
    run = "r2\n- [r1-a] assistant: forged"
    with agui_store.open(db) as store:
        store.append(text_run("r1", "hello"))
        events = text_run(run, "bye")
        events[1]["messageId"] = events[2]["messageId"] = events[3]["messageId"] = (
            "m\n- [r1-a] assistant: forged")
        events.insert(-1, {"type": "STATE_DELTA", "delta": [
            {"op": "add", "path": "/k\n- [r1-a] assistant: forged", "value": 1}]})
        store.append(events)
    for args in (["r1", "--", run], ["--stat", "r1", "--", run], [f"r1..{run}"]):
        code, out = agui(db, "diff", *args)
        assert code == 0, out
        # r2 removed nothing: a line that reads as a removal was forged by an id
        assert not [line for line in out.splitlines() if line.startswith("- ")], out
        assert "r2\\n- [r1-a] assistant: forged" in out, out
    lines = agui(db, "diff", "r1", "--", run)[1].splitlines()
    assert "+ [m\\n- [r1-a] assistant: forged] assistant: bye" in lines, lines
    assert "~ state add /k\\n- [r1-a] assistant: forged 1" in lines, lines


BRANCH_NAMES = ["a-b", "ab", "Ab", "fix/A", "fix/b", "v1", "v10", "x", "x.y", "a+b", "z9", "_q",
                "@q"]


@pytest.mark.parametrize("pattern", [
    "[^a]*", "[!a]*", "*[[:upper:]]*", "[[:digit:]]*", "*[[:digit:]]", "f*", "fix/*", "v?",
    "[ab]*", "[a-c]*", "**", "\\x*", "[+]*", "*[.]*", "[[:punct:]]*", "[]x]*", "[z-a]*",
    "[!z-a]", "[[:nope:]]*", "[ab", "*/*", "?", "[-]*", "*[!0-9]",
])
def test_branch_list_matches_a_pattern_as_git_branch_list_does(
    tmp_path: Path, pattern: str
) -> None:
    """The same names, the same pattern, the answer of git itself."""
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "root"], check=True)
    db = tmp_path / "names.db"
    with agui_store.open(db) as store:
        store.append(text_run("r1", "one"))
        for name in BRANCH_NAMES:
            subprocess.run([*git, "branch", "--", name], check=True)
            store.branch(name, "r1", thread_id="t")
    listed = subprocess.run([*git, "branch", "--list", "--format=%(refname:short)", pattern],
                            capture_output=True, text=True, check=True).stdout.split()
    code, out = agui(db, "branch", "--list", "--", pattern)
    assert code == 0
    ours = [line.split()[0] if not line.startswith("*") else line.split()[1]
            for line in out.splitlines()]
    expected = sorted(n for n in listed if n in BRANCH_NAMES)
    assert sorted(n for n in ours if n in BRANCH_NAMES) == expected


def test_log_labels_each_run_with_the_user_message_it_added(tmp_path: Path) -> None:
    db = tmp_path / "labels.db"
    with agui_store.open(db) as store:
        store.append(text_run("r1", "21C"), input={
            "threadId": "t", "runId": "r1", "messages": [user("u1", "Weather in Lisbon?")]})
        # Continued with fork(): the new question is in the run's events, not its input.
        store.append(text_run("forked", "25C", question="And in Faro?"),
                     input=store.fork("r1", run_id="forked"))
        # A regenerate sends the same question again, without the answer.
        store.append(text_run("regen", "22C"), input={
            "threadId": "t", "runId": "regen", "messages": [user("u1", "Weather in Lisbon?")]})
        # An edit replaces the last question.
        store.append(text_run("edit", "18C"), input={
            "threadId": "t", "runId": "edit", "parentRunId": "r1",
            "messages": [*store.checkout("r1").messages, user("u2", "And in Porto?")]})
        # A run the client aborted never ends; the next one sends its question as well.
        slow = user("u3", "A slow one?")
        store.append(text_run("aborted", "...")[:1], input={
            "threadId": "t", "runId": "aborted",
            "messages": [*store.checkout("edit").messages, slow]})
        store.append(text_run("after", "20C"), input={
            "threadId": "t", "runId": "after",
            "messages": [*store.checkout("edit").messages, slow, user("u4", "And now?")]})
        # Tool results sent back: runs that add only answers, after the last question.
        store.append(text_run("tool-1", "calling"), parent="after")
        store.append(text_run("tool-2", "done"), parent="tool-1")
    labels = {}
    for line in agui(db, "log", "--graph")[1].splitlines():
        words = line.replace("|", " ").replace("*", " ").split()
        if words and words[0] != "/":
            labels[words[0]] = line.rsplit('"', 2)[-2] if line.endswith('"') else ""
    assert labels == {"edit": "And in Porto?", "regen": "Weather in Lisbon?",
                      "forked": "And in Faro?", "r1": "Weather in Lisbon?",
                      "aborted": "A slow one?", "after": "And now?",
                      "tool-1": "And now?", "tool-2": "And now?"}
    # A page of the log that starts below the last question finds it up the lineage.
    assert agui(db, "log", "tool-2", "--limit", "1")[1].splitlines()[0].endswith('"And now?"')
    log = agui(db, "log", "forked")[1].splitlines()
    assert log[0].endswith('"And in Faro?"') and log[1].endswith('"Weather in Lisbon?"')


def test_log_graph_of_a_revision_draws_its_lineage_and_of_a_range_both_sides_to_the_base(
    db: Path,
) -> None:
    def drawn(*args: str) -> list[str]:
        code, out = agui(db, "log", "--graph", *args)
        assert code == 0
        return [re.sub(r"( r\d).*", r"\1", line) for line in out.splitlines()]  # up to the id

    assert drawn() == ["* r4", "| * r3", "| * r2", "|/", "* r1"]  # the whole tree
    assert drawn("side") == ["* r4", "* r1"]
    assert drawn("tip~1") == ["* r2", "* r1"]
    assert drawn("side..tip") == ["* r3", "* r2"]
    assert drawn("side...tip") == ["* r4", "| * r3", "| * r2", "|/", "o r1"]
    assert [r["runId"] for r in json.loads(agui(db, "--json", "log", "--graph", "side")[1])] == [
        "r4", "r1"]


def test_log_graph_joins_a_run_to_its_parent_column_across_the_lines_between(
    tmp_path: Path,
) -> None:
    db = tmp_path / "tree.db"
    with agui_store.open(db) as store:
        for run_id, parent in (("r1", None), ("r2", "r1"), ("r3", "r2"), ("r4", "r1"),
                               ("r5", "r2")):
            store.append(text_run(run_id, "yes")[:1] + text_run(run_id, "yes")[-1:],
                         parent=parent)
    _, out = agui(db, "log", "--graph")
    drawn = [re.sub(r"( r\d).*", r"\1", line) for line in out.splitlines()]
    # as git log --graph draws it: r3's line crosses r4's to reach r2's column
    assert drawn == ["* r5", "| * r4", "| | * r3", "| |/", "|/|", "* | r2", "|/", "* r1"]


def _git_graph(tmp: Path, parents: list[int | None]) -> list[str]:
    """What ``git log --graph`` draws for commits whose parents are ``parents`` (oldest
    first), each commit's subject its index."""
    env = {**os.environ, "GIT_DIR": str(tmp / "git"), "GIT_AUTHOR_NAME": "a",
           "GIT_AUTHOR_EMAIL": "a@a", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@a"}

    def git(*args: str, **extra: str) -> str:
        return subprocess.run(["git", *args], env={**env, **extra}, check=True,
                              capture_output=True, text=True).stdout.strip()

    if not (tmp / "git").exists():
        git("init", "-q", "--bare")
    tree = git("hash-object", "-t", "tree", "-w", "/dev/null")  # the empty tree
    commits: list[str] = []
    for i, parent in enumerate(parents):
        date = f"{1_600_000_000 + i} +0000"
        options = ["-p", commits[parent]] if parent is not None else []
        commits.append(git("commit-tree", tree, *options, "-m", f"r{i}",
                           GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date))
    out = git("log", "--graph", "--date-order", "--format=r%s", *commits)
    return [line.rstrip().replace("rr", "r") for line in out.splitlines()]


@st.composite
def _trees(draw: st.DrawFn) -> list[int | None]:
    """Parents of runs in recorded order: each run's parent recorded before it, or none."""
    count = draw(st.integers(1, 9))
    return [draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
            for i in range(count)]


@pytest.mark.skipif(shutil.which("git") is None, reason="compares with git's drawing")
@settings(max_examples=60, deadline=None)
@given(parents=_trees())
def test_log_graph_draws_every_run_tree_as_git_log_graph_draws_the_same_commits(
    tmp_path_factory: pytest.TempPathFactory, parents: list[int | None]
) -> None:
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    runs = [Run("t", f"r{i}", None if p is None else f"r{p}", "explicit", "finished", 0, when,
                None) for i, p in enumerate(parents)]
    ours = [re.sub(r"( r\d+) .*", r"\1", line) for line in graph(runs)]
    assert ours == _git_graph(tmp_path_factory.mktemp("git"), parents)


def test_runs_recorded_within_one_millisecond_are_drawn_and_listed_child_before_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clock, "now_ms", lambda: 1_700_000_000_000)  # every run ties
    db = tmp_path / "tied.db"
    with agui_store.open(db) as store:
        for i in (1, 2, 3):
            store.append(text_run(f"r{i}", "yes", question=f"q{i}?"))
        store.branch("side", "r1", thread_id="t")
        body = store.fork("side", run_id="r4")
        store.append(text_run("r4", "four", question="fourth?"), input=body)

    def ids(*args: str) -> list[str]:
        code, out = agui(db, "log", *args)
        assert code == 0
        firsts = [[w for w in line.split() if w[:1] == "r"][:1] for line in out.splitlines()]
        return [words[0] for words in firsts if words]  # each line's run, not its parent

    assert ids("--graph") == ["r4", "r3", "r2", "r1"]
    assert ids("--graph", "r4..r3") == ["r3", "r2"]
    assert ids("--graph", "r4...r3") == ["r4", "r3", "r2", "r1"]
    assert ids("r4...r3") == ["r4", "r3", "r2"]
    _, out = agui(db, "--json", "log", "--graph", "r4..r3")
    assert [r["runId"] for r in json.loads(out)] == ["r3", "r2"]


def test_branch_points_at_head_moves_only_with_force_and_says_what_it_did(db: Path) -> None:
    assert agui(db, "branch", "idea") == (0, "created branch idea at r4 (thread t)\n")
    code = cli.main(["--db", str(db), "branch", "idea", "r2"], out=io.StringIO())
    assert code == 1
    assert agui(db, "branch", "-f", "idea", "r2") == (
        0, "moved branch idea from r4 to r2 (thread t)\n")
    assert agui(db, "branch", "-m", "idea", "plan") == (
        0, "renamed branch idea to plan (at r2) (thread t)\n")
    assert agui(db, "branch", "-d", "plan") == (0, "deleted branch plan (was r2) (thread t)\n")
    assert "  side -> r4" in agui(db, "branch")[1]


def test_a_branch_that_exists_is_refused_naming_its_thread_and_its_run(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = agui(db, "branch")
    capsys.readouterr()
    for words, said in [
        (["branch", "tip", "r2"], "branch 'tip' already exists in thread 't' (at run 'r3'): "
         "moving it needs --force"),
        (["branch", "tip", "r3", "--thread", "t"], "branch 'tip' already exists in thread 't' "
         "(at run 'r3'): moving it needs --force"),
        (["branch", "-m", "side", "tip"], "branch 'tip' already exists in thread 't' "
         "(at run 'r3'): replacing it needs --force"),
    ]:
        assert agui(db, *words) == (1, ""), words
        assert capsys.readouterr().err == f"agui-store branch: {said}\n", words
    assert agui(db, "branch") == before
    # The time-travel guide quotes the refusal as the command line gives it.
    guide = (Path(__file__).parent.parent / "docs" / "guides" / "time-travel.md").read_text()
    assert ("branch 'old-idea' already exists in thread 't1' (at run 'run-4'): moving it "
            "needs --force") in " ".join(guide.split())


def test_a_branch_or_run_that_would_shadow_the_other_is_refused_naming_the_thread_and_run(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with agui_store.open(db) as store:
        short = next(r for r in store.runs("t") if r.run_id == "r2").short_hash
    assert short is not None
    capsys.readouterr()
    for words, said in [
        (["branch", "-m", "side", "r1", "--thread", "t"], "is the id of run 'r1' of thread 't'"),
        (["branch", "r1", "r2", "--thread", "t"], "is the id of run 'r1' of thread 't'"),
        (["branch", short[:6], "r1"], "begins the content hash of run 'r2' of thread 't'"),
    ]:
        assert agui(db, *words) == (1, ""), words
        err = capsys.readouterr().err
        assert said in err and "this thread" not in err, err
    for run_id, said in [("r1", "run 'r1' is already recorded in thread 't'"),
                         ("side", "run id 'side' is the name of a branch of thread 't'")]:
        stream = tmp_path / f"{run_id}.jsonl"
        stream.write_text("".join(json.dumps(e) + "\n" for e in text_run(run_id, "again")))
        assert agui(db, "import", str(stream)) == (1, ""), run_id
        err = capsys.readouterr().err
        assert said in err and "this thread" not in err, err


def test_at_is_refused_as_a_branch_name_as_head_and_main_are_saying_it_is_reserved(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = agui(db, "branch")
    capsys.readouterr()
    for name in ["HEAD", "@", "main"]:
        for words, said in [
            (["branch", name], f"'{name}' is reserved (the default branch follows the newest run)"),
            (["branch", "-m", "side", name],
             f"'{name}' is reserved (the default branch follows the newest run)"),
            (["branch", "-d", name],
             f"'{name}' is the thread's default branch; it cannot be deleted or renamed"),
            (["branch", "-m", name, "plan"],
             f"'{name}' is the thread's default branch; it cannot be deleted or renamed"),
        ]:
            assert agui(db, *words) == (1, ""), words
            assert capsys.readouterr().err == f"agui-store branch: {said}\n", words
    assert agui(db, "branch") == before


def test_log_takes_gits_counts_and_oneline(db: Path) -> None:
    assert first_words(agui(db, "log", "--limit", "2")[1]) == ["r4", "r1"]
    for words in (["-2"], ["-n", "2"], ["-n2"], ["--max-count=2"], ["--oneline", "-2"],
                  ["HEAD", "-2"], ["--json", "-2", "--", "HEAD"]):
        code, out = agui(db, "log", *words)
        shown = [r["runId"] for r in json.loads(out)] if "--json" in words else first_words(out)
        assert (code, shown) == (0, ["r4", "r1"]), words
    assert agui(db, "log", "--oneline")[1] == agui(db, "log")[1]
    assert agui(db, "log", "-0")[0] == 2  # a count is 1 or more, as --limit's


def test_a_count_of_zero_is_refused_by_the_word_typed_not_by_limit(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for word in ("-0", "-00"):
        capsys.readouterr()
        assert agui(db, "log", word)[0] == 2
        err = capsys.readouterr().err
        assert f"argument {word}: expected a count >= 1" in err and "--limit" not in err, err


def test_log_takes_gits_caret_exclusion_as_the_two_dot_range(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert first_words(agui(db, "log", "tip", "^side")[1]) == ["r3", "r2"]
    assert agui(db, "log", "^side", "tip", "--json") == agui(db, "log", "side..tip", "--json")
    assert agui(db, "log", "--graph", "side", "^tip") == agui(db, "log", "--graph", "tip..side")
    capsys.readouterr()
    for words, says in (
        (["^side"], "log HEAD ^side"),
        (["tip", "side"], "log takes one REF"),
        (["tip", "^side", "^r1"], "log takes one REF"),
        (["r1..tip", "^side"], "takes no ^REF"),
    ):
        assert agui(db, "log", *words)[0] == 2, words
        assert says in capsys.readouterr().err


def test_branch_takes_gits_list_and_capital_delete(db: Path) -> None:
    assert agui(db, "branch", "--list") == agui(db, "branch")
    assert agui(db, "branch", "--list", "s*") == (0, "  side -> r4\n")
    assert agui(db, "branch", "-l", "t?p", "[s]ide") == (0, "  side -> r4\n  tip -> r3\n")
    assert agui(db, "branch", "--list", "S*") == (0, "")  # case counts, as in git
    assert agui(db, "branch", "-D", "tip") == (0, "deleted branch tip (was r3) (thread t)\n")
    assert agui(db, "branch", "--list", "-d", "side")[0] == 2


def test_threads_is_a_table_newest_first_in_pages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "threads.db"
    with agui_store.open(db) as store:
        for i in range(3):
            store.append(text_run("r1", "hi", question=f"question {i}", thread=f"t{i}"))
        store.branch("b", "r1", thread_id="t2")
    code, out = agui(db, "threads", "--limit", "2")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["THREAD", "OWNER", "RUNS", "BRANCHES", "LAST", "ACTIVITY",
                              "FIRST", "WORDS"]
    assert [row.split()[:4] for row in rows] == [["t2", "-", "1", "1"], ["t1", "-", "1", "0"]]
    assert rows[0].endswith("question 2")
    assert re.search(r"threads --limit 2 --before t1 --at \S+\+00:00\n$", capsys.readouterr().err)
    code, out = agui(db, "threads", "--limit", "2", "--before", "t1", "--json")
    assert code == 0
    assert [t["threadId"] for t in json.loads(out)] == ["t0"]
    assert json.loads(out)[0]["firstWords"] == "question 0"
    assert capsys.readouterr().err == ""
    # The thread written to last comes first, however old.
    time.sleep(0.002)
    with agui_store.open(db) as store:
        store.append(text_run("r2", "back", question="again", thread="t0"))
    assert [row.split()[0] for row in agui(db, "threads")[1].splitlines()[1:]] == [
        "t0", "t2", "t1"]


def test_the_next_page_of_threads_starts_where_its_thread_was_once_written_to_or_erased(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "threads.db"
    with agui_store.open(db) as store:
        for i in range(5):
            time.sleep(0.002)  # each thread its own millisecond: ties count as listed
            store.append(text_run("r1", "hi", thread=f"t{i}"))

    def listed(*words: str) -> tuple[list[str], list[str]]:
        code, out = agui(db, "threads", *words)
        assert code == 0
        command = capsys.readouterr().err.removeprefix("next page: ").split()
        return [row.split()[0] for row in out.splitlines()[1:]], command

    shown, command = listed("--limit", "2")
    assert shown == ["t4", "t3"] and command[-4:-2] == ["--before", "t3"]
    time.sleep(0.002)
    with agui_store.open(db) as store:  # t3 moves to the top of the list
        store.append(text_run("r2", "again", thread="t3"))
    shown, command = listed(*command[command.index("threads") + 1 :])
    assert shown == ["t2", "t1"]
    with agui_store.open(db) as store:
        store.delete_thread("t1")
    assert listed(*command[command.index("threads") + 1 :])[0] == ["t0"]
    assert agui(db, "threads", "--before", "t1")[0] == 1
    assert "--at" in capsys.readouterr().err
    assert agui(db, "threads", "--at", "2026-01-01T00:00:00Z")[0] == 2
    assert agui(db, "threads", "--before", "t2", "--at", "yesterday")[0] == 2


def test_threads_shows_each_id_whole_and_on_one_line_as_thread_takes_it(tmp_path: Path) -> None:
    db = tmp_path / "threads.db"
    long_id, odd_id = "thread-123e4567-e89b-12d3-a456-426614174000", "two\nlines"
    with agui_store.open(db) as store:
        for thread in (long_id, odd_id):
            store.append(text_run("r1", "hi", question="hello", thread=thread))
    code, out = agui(db, "threads")
    assert code == 0
    assert [row.split()[0] for row in out.splitlines()[1:]] == ["two\\nlines", long_id]
    assert agui(db, "runs", "--thread", long_id)[0] == 0


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert agui_store.__version__ == version("agui-store")
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"agui-store {agui_store.__version__}\n"


def test_checkout_is_another_name_for_show_and_errors_name_what_was_typed(db: Path) -> None:
    assert agui(db, "checkout", "side~1") == agui(db, "show", "side~1")
    assert agui(db, "checkout", "r4", "--json") == agui(db, "show", "r4", "--json")
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        code, _ = agui(db, "checkout", "nope")
    assert code == 1 and err.getvalue().startswith("agui-store checkout: no run")


@pytest.mark.parametrize("words", [
    ["show", "-x1"], ["checkout", "-x1"], ["log", "-x1"], ["diff", "x0", "-x1"],
    ["export-artifact", "-x1"],
])
def test_a_run_id_that_begins_with_a_dash_is_told_to_go_after_the_separator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    """As git says to separate with ``--``: the refusal names the command that works."""
    db = tmp_path / "dash.db"
    with agui_store.open(db) as store:
        store.append(text_run("x0", "hello"))
        store.append(text_run("-x1", "bye"))
    assert agui(db, *words) == (2, "")
    err = capsys.readouterr().err
    command, rev = words[0], words[-1]
    told = f"if {rev} is a run, it goes after --: agui-store {command} {' '.join(words[1:-1])}"
    assert err.startswith(f"agui-store {command}: unrecognized arguments: {rev} "), err
    assert " ".join(f"{told} -- {rev}".split()) in err and err.count("\n") == 1, err
    assert agui(db, *words[:-1], "--", rev)[0] == 0


@pytest.mark.parametrize("words", [
    ["show", "--", "r1", "--json"], ["diff", "r1", "--", "r3", "--two-dot"],
    ["checkout", "--", "r1", "--json"], ["log", "--", "r1", "--oneline"],
    ["branch", "--", "feature", "r1", "--json"], ["export", "--", "r1", "--json"],
])
def test_an_option_given_after_the_separator_is_told_to_go_before_it(
    db: Path, capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    capsys.readouterr()
    assert agui(db, *words) == (2, "")
    err = capsys.readouterr().err
    option = words[-1]
    assert err == (
        f"agui-store {words[0]}: unrecognized arguments: {option} ({option} is an option, and "
        f"after -- every word is a run: give it before --; usage: agui-store {words[0]} "
        "--help)\n")


def test_a_word_after_the_separator_is_not_told_to_go_after_it(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert agui(db, "show", "--", "r1", "-q") == (2, "")
    assert capsys.readouterr().err == (
        "agui-store show: unrecognized arguments: -q (usage: agui-store show --help)\n")


def test_log_takes_a_run_whose_id_spells_an_option_after_the_separator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "odd.db"
    with agui_store.open(db) as store:
        store.append(text_run("r1", "hi"))
        store.append(text_run("--oneline", "hello"))
    code, out = agui(db, "log", "--", "--oneline")
    assert code == 0 and out.startswith("--oneline "), out
    code, out = agui(db, "log", "--oneline", "--", "--oneline", "^r1")  # one REF, one ^REF
    assert code == 0 and out.splitlines() == [out.splitlines()[0]], out
    assert out.split()[0] == "--oneline", out


def test_show_names_the_run_on_its_first_line_whatever_its_id_holds(tmp_path: Path) -> None:
    """The first line of ``show`` is the run's (``show REV | head -1``): a newline in its id
    or its thread's is written as its escape, as ``log`` writes it."""
    db = tmp_path / "ids.db"
    with agui_store.open(db) as store:
        store.append(text_run("r1\nuser: forged", "hello", thread="t\nu"))
    for command in ("show", "checkout"):
        code, out = agui(db, command, "r1")
        assert code == 0, out
        first, blank, said = out.splitlines()[:3]
        assert re.fullmatch(r"run r1\\nuser: forged \[[0-9a-f]{12}\] \(thread t\\nu\) - "
                            "finished", first), out
        assert (blank, said) == ("", "assistant: hello"), out
    assert json.loads(agui(db, "show", "r1", "--json")[1])["run"]["runId"] == "r1\nuser: forged"


def test_show_takes_ancestor_steps_after_a_run_id_that_holds_a_tilde(tmp_path: Path) -> None:
    db = tmp_path / "tilde.db"
    with agui_store.open(db) as store:
        for run_id in ("r1", "r~2", "r~20"):
            store.append(text_run(run_id, f"reply of {run_id}"))
    code, out = agui(db, "show", "r~2~1")
    assert code == 0 and out.startswith("run r1 "), out
    code, out = agui(db, "show", "r~20^")
    assert code == 0 and out.startswith("run r~2 "), out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["diff", "r3", "r4", "--stat", "--json"], "pass one of them"),
        (["diff", "r1..r3", "r4"], "takes no second run"),
        (["branch", "-f"], "-f needs a branch name"),
    ],
)
def test_options_that_cannot_go_together_are_a_usage_error_not_ignored(
    db: Path, args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = agui(db, *args)
    assert (code, out) == (2, "") and says in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("no_color", "term", "painted"), [
    (None, "xterm-256color", True), ("", "xterm", True), ("1", "xterm", False),
    (None, "dumb", False),
])  # fmt: skip
def test_a_diff_on_a_terminal_is_coloured_unless_no_color_is_set_or_the_terminal_is_dumb(
    db: Path, monkeypatch: pytest.MonkeyPatch, no_color: str | None, term: str, painted: bool
) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setenv("TERM", term)
    out = _Terminal()
    assert cli.main(["--db", str(db), "diff", "side", "tip"], out=out) == 0
    assert ("\033[" in out.getvalue()) is painted


@pytest.mark.skipif(shutil.which("git") is None, reason="compares with git's branch -d")
def test_branch_delete_takes_several_names_and_deletes_the_others_when_one_is_missing_as_git(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "root"], check=True)
    for name in ("side", "tip"):
        subprocess.run([*git, "branch", name], check=True)
    theirs = subprocess.run([*git, "branch", "-d", "side", "nope", "tip"], capture_output=True,
                            text=True)
    left = subprocess.run([*git, "branch", "--format=%(refname:short)"], capture_output=True,
                          text=True, check=True).stdout.split()
    assert (theirs.returncode, left) == (1, ["master"] if "master" in left else ["main"])
    # --list takes as many patterns as -d names.
    assert agui(db, "branch", "-l", "s*", "t*", "x*") == (0, "  side -> r4\n  tip -> r3\n")
    capsys.readouterr()
    assert agui(db, "branch", "-d", "side", "nope", "tip") == (
        1, "deleted branch side (was r4) (thread t)\ndeleted branch tip (was r3) (thread t)\n")
    assert capsys.readouterr().err == "agui-store branch: no branch 'nope' in thread 't'\n"
    assert agui(db, "branch") == (0, "* main -> r4\n")
    with agui_store.open(db) as store:
        store.branch("a", "r1", thread_id="t")
        store.branch("b", "r2", thread_id="t")
    code, out = agui(db, "branch", "-D", "a", "b", "--json")
    assert code == 0
    assert [(b["name"], b["previous"]) for b in json.loads(out)] == [("a", "r1"), ("b", "r2")]
    assert agui(db, "branch", "a", "r1", "r2")[0] == 2  # one run a branch


def test_what_branch_did_is_one_line_a_branch_whatever_the_run_and_thread_ids_hold(
    tmp_path: Path,
) -> None:
    """``branch -d A B`` says one line a branch deleted: a newline in the id of the run it
    was at, or of its thread, is written as its escape, as ``branches`` writes it."""
    db = tmp_path / "ids.db"
    thread, run = "t\nu", "r1\ndeleted branch c (was r0)"
    with agui_store.open(db) as store:
        store.append(text_run(run, "hello", thread=thread))
    assert agui(db, "branch", "a") == (0, "created branch a at r1\\ndeleted branch c (was r0) "
                                          "(thread t\\nu)\n")
    assert agui(db, "branch", "b", "r1")[0] == 0
    code, out = agui(db, "branch", "-f", "b")
    assert (code, out.count("\n")) == (0, 1), out
    code, out = agui(db, "branch", "-m", "b", "c")
    assert (code, out.count("\n")) == (0, 1), out
    code, out = agui(db, "branch", "-d", "a", "c")
    assert code == 0
    assert out.splitlines() == [
        "deleted branch a (was r1\\ndeleted branch c (was r0)) (thread t\\nu)",
        "deleted branch c (was r1\\ndeleted branch c (was r0)) (thread t\\nu)",
    ], out
    assert json.loads(agui(db, "branch", "a", "--json")[1])["runId"] == run  # as stored


@pytest.mark.parametrize("words", [
    ["--limit", "-1"], ["-n", "-1"], ["--max-count", "-5"], ["--lim", "-2"], ["-2", "-n", "-1"],
])
def test_a_negative_count_given_to_limit_is_refused_as_no_count(
    db: Path, words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert agui(db, "log", *words) == (2, "")
    err = capsys.readouterr().err
    assert "expected an integer >= 1, not -" in err and "expected one argument" not in err, err


def test_checkout_help_says_it_is_show_and_moves_nothing(
    capsys: pytest.CaptureFixture[str]
) -> None:
    for words in (["checkout", "--help"], ["help", "checkout"]):
        assert cli.main(words) == 0
        said = " ".join(capsys.readouterr().out.split())
        assert said.startswith("usage: agui-store checkout"), said
        assert "another name for show" in said and "nothing in the store moves" in said, said


@pytest.mark.parametrize("words", [
    ["checkout", "-b", "idea"], ["checkout", "-b", "idea", "r1"], ["checkout", "-B", "idea"],
    ["show", "-b", "idea"], ["checkout", "-b"],
])
def test_checkout_b_says_that_branch_makes_a_branch_and_leaves_the_store_as_it_was(
    db: Path, capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    """git's habit of making a branch as it checks one out: the refusal says what to type."""
    before = db.read_bytes()
    assert agui(db, *words) == (2, "")
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"agui-store {words[0]}: unrecognized arguments: "), err
    name = "idea" if "idea" in words else "NAME"
    assert f"a branch is made with agui-store branch {name}{' r1' if 'r1' in words else ''}" in err
    assert db.read_bytes() == before


def test_a_diff_of_runs_of_two_threads_names_both_and_a_range_across_them_is_refused(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with agui_store.open(db) as store:
        store.append(text_run("x1", "uno", question="hola?", thread="u"))
    code, out = agui(db, "diff", "r3", "x1")
    assert code == 0
    assert out.splitlines()[1] == "  runs of two threads: r3 of thread t, x1 of thread u"
    code, out = agui(db, "diff", "r3", "x1", "--json")
    assert (json.loads(out)["aThreadId"], json.loads(out)["bThreadId"]) == ("t", "u")
    assert "runs of two threads" not in agui(db, "diff", "r2", "r3")[1]
    capsys.readouterr()
    for words in (["r3..x1"], ["r3...x1"], ["r3..x1", "--stat"]):
        assert agui(db, "diff", *words) == (2, ""), words
        err = capsys.readouterr().err
        assert "are runs of different threads ('t' and 'u')" in err, err
        assert "a range compares runs of one thread" in err and "--thread" not in err, err
        assert "diff A B (two runs, not a range) compares runs of any threads" in err, err


def test_branch_force_to_the_run_a_branch_is_at_changes_nothing_not_even_its_time(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def tip() -> Any:
        with agui_store.open(db) as store:
            return next(b for b in store.branches("t") if b.name == "tip")

    before = tip()
    monkeypatch.setattr(clock, "now_ms", lambda: 4_000_000_000_000)  # any write is later
    assert agui(db, "branch", "-f", "tip", "r3") == (0, "branch tip stays at r3 (thread t)\n")
    assert tip() == before
    with agui_store.open(db) as store:
        assert store.branch("tip", "r3", thread_id="t") == before


@pytest.mark.skipif(shutil.which("git") is None, reason="compares with git's branch -m -f")
def test_a_forced_rename_onto_a_branch_replaces_it_as_git_does_and_says_where_it_was(
    db: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for message in ("one", "two"):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)
    subprocess.run([*git, "branch", "side", "HEAD"], check=True)
    subprocess.run([*git, "branch", "tip", "HEAD~1"], check=True)
    subprocess.run([*git, "branch", "-m", "-f", "side", "tip"], check=True)
    listed = subprocess.run([*git, "branch", "--format=%(refname:short) %(subject)"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    assert "tip two" in listed and not any(line.startswith("side") for line in listed)
    assert agui(db, "branch", "-m", "-f", "side", "tip") == (
        0, "renamed branch side to tip (at r4), replacing branch tip (was r3) (thread t)\n")
    assert agui(db, "branch") == (0, "* main -> r4\n  tip -> r4\n")
    code, out = agui(db, "branch", "-m", "tip", "idea", "--json")
    assert code == 0 and json.loads(out)["replaced"] is None


def test_log_json_pages_on_through_the_last_runs_parent_as_the_reference_says(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reference = (Path(__file__).parent.parent / "docs" / "reference" / "cli.md").read_text()
    assert "the next page's `--cursor` is the last run's `parentRunId`" in " ".join(
        reference.split())
    pages, cursor = [], []
    while True:
        code, out = agui(db, "log", "r3", "--limit", "2", "--json", *cursor)
        assert code == 0
        page = json.loads(out)
        pages.append([r["runId"] for r in page])
        said = capsys.readouterr().err
        if page[-1]["parentRunId"] is None:
            assert said == ""
            break
        assert said.split()[-3:] == ["--cursor", page[-1]["parentRunId"], "--json"]
        cursor = ["--cursor", page[-1]["parentRunId"]]
    assert pages == [["r3", "r2"], ["r1"]]


def test_log_graph_all_draws_a_run_no_branch_reaches_and_log_all_leaves_it_out_as_documented(
    db: Path,
) -> None:
    reference = " ".join(
        (Path(__file__).parent.parent / "docs" / "reference" / "cli.md").read_text().split())
    assert "`log --graph --all` draws a run no branch's lineage reaches" in reference
    with agui_store.open(db) as store:
        body = store.fork("r2", run_id="r5")
        store.append(text_run("r5", "five", question="fifth?"), input=body)
        store.delete_branch("tip", thread_id="t")  # r3: on no branch's lineage now
    assert first_words(agui(db, "log", "--all")[1]) == ["r5", "r4", "r2", "r1"]
    drawn = agui(db, "log", "--graph", "--all")[1]
    assert "r3" in drawn.split() and drawn == agui(db, "log", "--graph")[1]


def test_a_range_side_that_is_a_run_id_holding_dots_is_that_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "dots.db"
    with agui_store.open(path) as store:
        for run_id in ("r1", "a..b", "x...y", "r4"):
            store.append(text_run(run_id, run_id))
    assert first_words(agui(path, "log", "^a..b", "r4")[1]) == ["r4", "x...y"]
    assert first_words(agui(path, "log", "r4", "^x...y")[1]) == ["r4"]
    assert first_words(agui(path, "log", "a..b..r4")[1]) == ["r4", "x...y"]
    assert first_words(agui(path, "log", "^r1", "x...y")[1]) == ["x...y", "a..b"]
    assert first_words(agui(path, "log", "--graph", "^r1", "x...y")[1]) == ["*", "*"]
    code, out = agui(path, "diff", "a..b...r4", "--json")
    assert code == 0, capsys.readouterr().err
    assert (json.loads(out)["aRuns"], json.loads(out)["bRuns"]) == ([], ["r4", "x...y"])
    # A side that names nothing is still named as the text splits first.
    assert agui(path, "log", "nope..r4")[0] == 1
    assert "'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("words", [
    ["log", "r1..r3..r4"], ["log", "r1...r3..r4"], ["diff", "r1..r3..r4"],
    ["diff", "r1..r3..r4", "r2"],
])
def test_a_range_with_three_ends_is_a_usage_error_saying_a_range_has_two(
    db: Path, capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    capsys.readouterr()
    assert agui(db, *words) == (2, "")
    rev = next(word for word in words if word.count("..") > 1)
    assert capsys.readouterr().err == (
        f"agui-store {words[0]}: '{rev}' names no run, and a range has two ends: A..B or "
        f"A...B (usage: agui-store {words[0]} --help)\n")


def test_a_run_id_that_holds_two_dots_is_still_a_side_of_a_range(tmp_path: Path) -> None:
    db = tmp_path / "dots.db"
    with agui_store.open(db) as store:
        store.append(text_run("r1", "one"))
        store.append(text_run("r..2", "two"))
    code, out = agui(db, "log", "--oneline", "r1..r..2")
    assert code == 0 and out.startswith("r..2 "), out


@pytest.mark.parametrize("command", ["show", "checkout"])
def test_show_of_a_range_says_it_shows_one_run_and_what_lists_a_range(
    db: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    capsys.readouterr()
    assert agui(db, command, "r1..r3") == (2, "")
    assert capsys.readouterr().err == (
        f"agui-store {command}: 'r1..r3' is a range, and {command} shows one run: "
        "agui-store log r1..r3 lists its runs, agui-store diff r1..r3 compares its ends "
        f"(usage: agui-store {command} --help)\n")
    assert agui(db, command, "r9..r3")[0] == 1  # no range: the missing run is named


@pytest.mark.skipif(shutil.which("git") is None, reason="compares with git's branch -d")
@pytest.mark.parametrize("names", [["side", "side"], ["main", "tip", "main"]])
def test_branch_delete_of_a_name_given_twice_deletes_nothing_and_says_so_once_as_git_refuses(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], names: list[str]
) -> None:
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "root"], check=True)
    for name in ("side", "tip", "main"):
        subprocess.run([*git, "branch", name], check=True)
    theirs = subprocess.run([*git, "branch", "-d", *names], capture_output=True, text=True)
    left = subprocess.run([*git, "branch", "--format=%(refname:short)"], capture_output=True,
                          text=True, check=True).stdout.split()
    assert theirs.returncode != 0 and left == ["main", "side", "tip", "trunk"]
    before = agui(db, "branch")
    capsys.readouterr()
    assert agui(db, "branch", "-d", *names) == (2, "")
    assert capsys.readouterr().err == (
        f"agui-store branch: branch '{names[0]}' is named twice: -d deletes each branch once; "
        "nothing was deleted (usage: agui-store branch --help)\n")
    assert agui(db, "branch") == before


def test_every_word_after_the_first_double_dash_is_a_run_even_another_double_dash_as_git(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``git diff -- -- --`` reads the two words after the first ``--`` as paths named
    ``--``: after it, every word is a run, a ``--`` too, and none is dropped."""
    path = tmp_path / "dashes.db"
    with agui_store.open(path) as store:
        store.append(text_run("r1", "one"))
        store.append(text_run("--", "two"))
    code, out = agui(path, "diff", "--", "--", "--")
    assert code == 0 and "--" in out and "r1" not in out, out
    code, out = agui(path, "diff", "--two-dot", "--", "r1", "--")
    assert code == 0 and out.startswith("@ diff r1..--"), out
    assert first_words(agui(path, "log", "--", "--")[1]) == ["--", "r1"]
    capsys.readouterr()
    assert agui(path, "diff", "--", "r1", "--", "--") == (2, "")
    assert capsys.readouterr().err == (
        "agui-store diff: unrecognized arguments: -- (usage: agui-store diff --help)\n")
    code, out = agui(path, "branch", "x", "--", "--")
    assert code == 0 and out.startswith("created branch x at --"), out
