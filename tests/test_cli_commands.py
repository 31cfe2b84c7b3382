"""Every subcommand, walked: each takes ``--json`` (and prints JSON, or refuses it in one
line), each exits 0 on success, 1 on a store error and 2 on a usage error, and each error is
one line on stderr, however long the value it names. Adding a subcommand without a row here
fails the walk.

The walk calls the entry point in this process (``agui_store.cli.main``), on real files;
``tests/test_exit_codes.py`` drives ``python -m agui_store`` in a process of its own."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import agui_store
from agui_store import cli

#: A successful ``--json`` call of each subcommand (``{db}``, ``{tmp}``: the store and a
#: folder of files). ``ui`` serves web pages, so it refuses ``--json`` instead.
JSON_CALLS: dict[str, list[str]] = {
    "threads": ["threads"],
    "runs": ["runs"],
    "log": ["log", "--graph"],
    "show": ["show", "porto"],
    "branch": ["branch", "idea", "porto"],
    "branches": ["branches"],
    "diff": ["diff", "porto...fahrenheit"],
    "fork": ["fork", "run-1"],
    "compact": ["compact"],
    "rebuild": ["rebuild"],
    "export": ["export", "porto"],
    "check": ["check"],
    "analyze": ["analyze", "{tmp}/analysis.db"],
    "export-artifact": ["export-artifact", "porto"],
    "validate-artifact": ["validate-artifact", "{tmp}/artifact.json"],
    "slim": ["slim", "porto"],
    "search": ["search", "Lisbon"],
    "delete": ["delete", "--owner", "nobody", "--dry-run"],
    "prune": ["prune", "--older-than", "90d", "--yes"],
    "purge": ["purge"],
    "copy": ["copy", "{db}", "{tmp}/copy.db"],
    # Last: each adds a thread, and the calls above infer the store's only one.
    "demo": ["demo"],
    "import": ["import", "{tmp}/recording.jsonl"],
}
REFUSE_JSON = {"ui": ["ui", "--no-browser", "--port", "0"]}

#: A store error of each subcommand: exit 1, one line.
STORE_ERRORS: dict[str, list[str]] = {
    "import": ["import", "{tmp}/missing.jsonl"],
    "threads": ["threads", "--before", "nope"],
    "runs": ["runs", "--thread", "nope"],
    "log": ["log", "nope"],
    "show": ["show", "HEAD~9"],
    "branch": ["branch", "idea", "nope"],
    "branches": ["branches", "--thread", "nope"],
    "diff": ["diff", "porto", "nope"],
    "fork": ["fork", "run-1", "--run-id", "run-2"],
    "compact": ["compact", "nope"],
    "rebuild": ["rebuild", "--thread", "nope"],
    "export": ["export", "nope"],
    "check": ["--db", "{tmp}/missing.db", "check"],
    "demo": ["--db", "{tmp}/no/such/folder.db", "demo"],
    "analyze": ["analyze", "{db}"],
    "export-artifact": ["export-artifact", "nope"],
    "validate-artifact": ["validate-artifact", "{tmp}/missing.json"],
    "slim": ["slim", "nope"],
    "search": ["search", "Lisbon", "--thread", "nope"],
    "delete": ["delete", "--thread", "nope", "--yes"],
    "prune": ["--db", "{tmp}/missing.db", "prune", "--older-than", "90d", "--yes"],
    "purge": ["--db", "{tmp}/missing.db", "purge"],
    "copy": ["copy", "{tmp}/missing.db", "{tmp}/copy.db"],
    "ui": ["ui", "{tmp}/missing.db", "--no-browser"],
}


def call(argv: list[str], db: Path, tmp: Path,
         capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``agui-store --db DB ARGV`` (``copy`` names both its stores, without ``--db``):
    (exit code, stdout, stderr)."""
    words = [w.format(db=db, tmp=tmp) for w in argv]
    if "--db" not in words and words[0] != "copy":
        words = ["--db", str(db), *words]
    out = io.StringIO()
    code = cli.main(words, out=out)
    return code, out.getvalue(), capsys.readouterr().err


@pytest.fixture
def files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A store holding the demo (one thread), and the files the calls read."""
    db, tmp = tmp_path / "chat.db", tmp_path / "files"
    tmp.mkdir()
    assert call(["demo"], db, tmp, capsys)[0] == 0
    (tmp / "recording.jsonl").write_text(
        '{"type": "RUN_STARTED", "threadId": "other", "runId": "o1"}\n'
        '{"type": "RUN_FINISHED", "threadId": "other", "runId": "o1"}\n', encoding="utf-8")
    code, artifact, _ = call(["export-artifact", "porto"], db, tmp, capsys)
    assert code == 0
    (tmp / "artifact.json").write_text(artifact, encoding="utf-8")
    return db, tmp


def test_the_walk_covers_every_subcommand() -> None:
    assert set(JSON_CALLS) | set(REFUSE_JSON) == set(cli.COMMANDS)
    assert set(STORE_ERRORS) == set(cli.COMMANDS)


def test_every_subcommand_prints_json_with_json_or_refuses_it_in_one_line(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, tmp = files
    printed = {}
    for name, argv in JSON_CALLS.items():
        code, out, err = call([*argv, "--json"], db, tmp, capsys)
        assert code == 0, (name, err)
        printed[name] = json.loads(out)  # one JSON document
    assert isinstance(printed["export"], list) and printed["export"][0]["type"] == "RUN_STARTED"
    assert printed["import"]["newRuns"] == 1
    assert printed["branch"]["action"] == "created"
    assert [t["threadId"] for t in printed["threads"]] == [printed["runs"][0]["threadId"]]
    for name, argv in REFUSE_JSON.items():
        code, out, err = call([*argv, "--json"], db, tmp, capsys)
        assert (code, out) == (2, ""), name
        assert err.count("\n") == 1 and "--json is not available" in err, err


#: Subcommands whose ``--json`` is a format of its own: the artifact, whose fields its
#: specification names (``thread_id_ref``, ``terminal_event``).
OWN_FORMAT = {"export-artifact"}


def _keys(value: object) -> list[str]:
    """Every key of every object in a JSON document."""
    if isinstance(value, dict):
        return [k for key, item in value.items() for k in (key, *_keys(item))]
    if isinstance(value, list):
        return [k for item in value for k in _keys(item)]
    return []


def test_every_subcommands_json_names_its_fields_in_camel_case_as_ag_ui_does(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, tmp = files
    for name, argv in JSON_CALLS.items():
        if name in OWN_FORMAT:
            continue
        code, out, err = call([*argv, "--json"], db, tmp, capsys)
        assert code == 0, (name, err)
        assert sorted({k for k in _keys(json.loads(out)) if "_" in k}) == [], name


def test_every_subcommand_exits_1_on_a_store_error_and_2_on_a_usage_error_in_one_line(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, tmp = files
    for name, argv in STORE_ERRORS.items():
        code, _, err = call(argv, db, tmp, capsys)
        assert code == 1, (name, err)
        assert err.count("\n") == 1 and err.startswith(f"agui-store {name}: "), (name, err)
    for name in cli.COMMANDS:
        code, out, err = call([name, "--no-such-option"], db, tmp, capsys)
        assert (code, out) == (2, ""), name
        assert err.count("\n") == 1 and f"agui-store {name}: " in err, (name, err)
        assert f"(usage: agui-store {name} --help)" in err


@pytest.mark.parametrize(
    "argv",
    [["runs", "--thread", "x" * (3 << 20)], ["runs", "x" * (3 << 20)],
     ["show", "y" * (3 << 20)], ["log", "--limit", "9" * 100_000], ["frob" * 100_000],
     ["branch", "-d", "z" * (3 << 20)]],
    ids=["an option", "a positional thread", "a revision", "a number", "a command",
         "a branch"],
)
def test_an_error_naming_a_huge_value_is_one_short_line(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    db, tmp = files
    code, out, err = call(argv, db, tmp, capsys)
    assert code in (1, 2) and out == ""
    assert err.count("\n") == 1 and len(err) <= cli.MAX_MESSAGE + 40, err[:200]


def test_commands_that_need_a_thread_infer_it_and_say_thread_when_they_cannot(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, tmp = files
    needing = [["runs"], ["branches"], ["log", "--all"], ["log", "--graph"], ["log"],
               ["show"], ["diff", "porto", "fahrenheit"], ["fork"], ["export"], ["slim"],
               ["export-artifact"], ["export", "--all", "--format", "jsonl"], ["branch", "x"],
               ["branch", "-m", "x", "y"], ["branch", "-d", "y"]]
    for argv in needing:  # one thread: inferred
        code, _, err = call(argv, db, tmp, capsys)
        assert code == 0, (argv, err)
    call(["demo"], db, tmp, capsys)
    for argv in needing:  # two threads: named with --thread, in the command line's words
        code, _, err = call(argv, db, tmp, capsys)
        assert code == 1 and "--thread" in err and "thread_id" not in err, (argv, err)


class _Terminal(io.StringIO):
    """What the CLI writes to a terminal, kept."""

    def isatty(self) -> bool:
        return True


def _store_of_control_characters(db: Path) -> str:
    """A store whose thread id and message hold an escape sequence, a bell and a newline."""
    import agui_store
    from tests.streams import run, say

    thread = "evil\x1b[31mRED\nline"
    with agui_store.open(db) as store:
        store.append(run(thread, "r1", *say("m1", "hello \x1b[2J\x07 bell", "user")))
    return thread


def test_a_search_hit_stays_one_line_whatever_its_thread_id_holds(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _store_of_control_characters(db)
    out = io.StringIO()
    assert cli.main(["--db", str(db), "search", "hello"], out=out) == 0
    assert out.getvalue() == "evil\\x1b[31mRED\\nline  r1  user  [hello] \\x1b[2J\\x07 bell\n"


@pytest.mark.parametrize("args", [["search", "hello"], ["threads"], ["log"]])
def test_stored_control_characters_reach_a_terminal_as_escapes(
    tmp_path: Path, args: list[str]
) -> None:
    db = tmp_path / "s.db"
    thread = _store_of_control_characters(db)
    if args[0] == "log":
        args = ["log", "--thread", thread]
    out = _Terminal()
    assert cli.main(["--db", str(db), *args], out=out) == 0
    text = out.getvalue()
    assert "\\x1b[2J\\x07" in text and "\x07" not in text
    assert "\x1b[2J" not in text and "\x1b[31m" not in text
    if args[0] == "search":  # its own bold stays
        assert "\x1b[1mhello\x1b[0m" in text


def test_bidirectional_overrides_reach_a_terminal_and_a_hit_line_as_escapes(
    tmp_path: Path,
) -> None:
    import agui_store
    from tests.streams import run, say

    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        store.append(run("t", "r1", *say("m1", "refund approved \u202edesufer", "user")))
    for out in (_Terminal(), io.StringIO()):  # a search hit line escapes it even in a pipe
        assert cli.main(["--db", str(db), "search", "refund"], out=out) == 0
        assert "\u202e" not in out.getvalue() and "\\u202e" in out.getvalue()


def test_an_error_quoting_a_query_escapes_its_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    _store_of_control_characters(db)
    assert cli.main(["--db", str(db), "search", "\x1b]0;pwned\x07*x"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["show", "fahrenheit"], ["diff", "porto", "fahrenheit"], ["search", "Porto"],
    ["export", "porto"], ["fork", "porto"], ["slim", "porto"], ["export-artifact", "porto"],
    ["show", "porto", "--json"], ["demo"],
])
def test_output_an_ascii_stdout_cannot_hold_never_fails_a_command(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    db = files[0]
    raw = io.BytesIO()
    stdout = io.TextIOWrapper(raw, encoding="ascii", errors="strict", write_through=True)
    code = cli.main(["--db", str(db), *argv], out=stdout)
    assert code == 0, capsys.readouterr().err
    written = raw.getvalue().decode("utf-8")
    if argv[0] in ("export", "fork", "slim", "export-artifact") or "--json" in argv:
        for document in written.splitlines() if argv[0] == "export" else [written]:
            json.loads(document)
        assert "\\xb0" not in written  # data is written as UTF-8 (or JSON's own escapes)
    else:  # text for people: what ASCII lacks shows as its escape
        assert "\\xb0C" in written and written.isascii()
    assert stdout.encoding == "ascii"  # the stream is given back as it came


def test_a_store_that_fails_to_open_leaves_no_file_the_command_began_to_create(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_store import sync
    from agui_store.errors import StorageError

    class FailsAfterCreating(sync.Store):
        def __init__(self, path: str, **_: object) -> None:
            Path(path).touch()
            raise StorageError(f"cannot open {path}")

    monkeypatch.setattr(sync, "Store", FailsAfterCreating)
    db = tmp_path / "new.db"
    assert cli.main(["--db", str(db), "demo"]) == 1
    assert "cannot open" in capsys.readouterr().err
    assert not db.exists()


def test_commands_to_paste_give_a_value_beginning_with_a_dash_as_the_option_s_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    import agui_store
    from tests.streams import run

    db = tmp_path / "dash.db"
    with agui_store.open(db) as store:
        store.append(run("-t", "r1"))
        store.append(run("-u", "r2"))
    assert cli.main(["--db", str(db), "threads", "--limit", "1"], out=io.StringIO()) == 0
    command = capsys.readouterr().err.removeprefix("next page: ").strip()
    assert re.search(r" --before=-u --at \S+$", command), command
    out = io.StringIO()
    assert cli.main(shlex.split(command)[1:], out=out) == 0
    assert out.getvalue().splitlines()[1].startswith("-t ")
    assert cli.main(["--db", str(db), "runs", "--", "-t"], out=io.StringIO()) == 0
    note = capsys.readouterr().err
    assert note.endswith("use agui-store runs --thread=-t\n"), note


@pytest.mark.parametrize(("argv", "option"), [
    (["fork", "--run-id="], "--run-id"), (["--busy-timeout", "2147483648", "log"],
                                          "--busy-timeout"),
    (["log", "--busy-timeout", "99999999999999999999"], "--busy-timeout"),
])
def test_an_option_value_no_command_can_use_is_a_usage_error_naming_the_option(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], argv: list[str], option: str
) -> None:
    code, out, err = call(argv, *files, capsys)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and f"argument {option}:" in err, err


def test_a_search_query_of_words_to_leave_out_is_taken_quoted_or_after_options_and_dashes(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A quoted query that begins with a -word is never an option's name, whatever its
    first letter; and the words after -- are the query's wherever the options stand."""
    code, expected, err = call(["search", "--limit", "5", "Porto", "--", "-hotel"], *files, capsys)
    assert code == 0 and "Porto" in expected, err
    for argv in (
        ["search", "-hotel Porto", "--limit", "5"],
        ["search", "Porto", "--limit", "5", "--", "-hotel"],
    ):
        code, out, err = call(argv, *files, capsys)
        assert (code, err) == (0, ""), argv
        assert out == expected, argv


def test_a_search_word_to_leave_out_beginning_with_h_says_where_it_goes(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = call(["search", "Porto", "-hotel"], *files, capsys)
    assert (code, out) == (2, "")
    assert err == ("agui-store search: unrecognized arguments: -hotel (a -word to leave out "
                   "goes after --: agui-store search porto -- -hotel)\n")
    code, out, _ = call(["search", "Porto", "--", "-hotel"], *files, capsys)
    assert code == 0 and "Porto" in out
    code, out, _ = call(["search", "-h"], *files, capsys)
    assert code == 0
    code, out, err = call(["search", "-porto"], *files, capsys)  # no word but the -word
    assert (code, out) == (2, "")
    assert err == ("agui-store search: unrecognized arguments: -porto (a -word to leave out "
                   "goes after --: agui-store search porto -- -hotel)\n")
    code, out, err = call(["search"], *files, capsys)
    assert (code, out) == (2, "") and "give the words to find" in err


def test_a_store_named_by_a_file_uri_opens_and_a_missing_one_is_named_in_the_command_s_words(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, tmp = files
    code, out, err = call(["--db", f"file:{db}?mode=ro", "log"], db, tmp, capsys)
    assert code == 0 and "run-3" in out, err
    missing = f"file:{tmp}/missing.db?mode=ro"
    code, out, err = call(["--db", missing, "log"], db, tmp, capsys)
    assert (code, out) == (1, "")
    assert err.startswith(f"agui-store log: no store at {missing}: the file does not exist")
    assert "copy" not in err


@pytest.mark.parametrize(("argv", "said"), [
    (["--bogus", "log"], "agui-store: unrecognized arguments: --bogus"),
    (["-v"], "agui-store: unrecognized arguments: -v"),
    (["log", "--bogus"], "agui-store log: unrecognized arguments: --bogus"),
])
def test_an_unknown_option_is_named_where_it_was_given(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert cli.main(argv, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith(said + " (usage: agui-store") and err.count("\n") == 1, err


@pytest.mark.parametrize("argv", [
    ["diff", "porto"], ["branch", "-m"], ["log", "--all", "porto"], ["export", "--replace"],
    ["delete"], ["delete", "--owner", "nobody"], ["show", "--json", "--bogus"],
])
def test_a_usage_error_a_command_finds_says_where_its_help_is_as_argparse_s_do(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO())  # no terminal to ask on
    code, out, err = call(argv, *files, capsys)
    assert (code, out) == (2, ""), err
    assert err.endswith(f" (usage: agui-store {argv[0]} --help)\n") and err.count("\n") == 1


def test_messages_of_the_library_name_the_command_line_s_options_not_python_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, tmp = tmp_path / "w.db", tmp_path
    (tmp / "late.jsonl").write_text(
        '{"type": "RUN_STARTED", "threadId": "t", "runId": "a1"}\n'
        '{"type": "RUN_FINISHED", "threadId": "t", "runId": "a1"}\n'
        '{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}\n',
        encoding="utf-8")
    (tmp / "feat.jsonl").write_text(
        '{"type": "RUN_STARTED", "threadId": "t", "runId": "feat"}\n'
        '{"type": "RUN_FINISHED", "threadId": "t", "runId": "feat"}\n', encoding="utf-8")
    assert call(["import", "--no-sequence-check", f"{tmp}/late.jsonl"], db, tmp, capsys)[0] == 0
    code, out, _ = call(["check"], db, tmp, capsys)
    assert code == 0 and "only import --no-sequence-check records that" in out, out
    assert call(["branch", "feat"], db, tmp, capsys)[0] == 0
    code, _, err = call(["import", f"{tmp}/feat.jsonl"], db, tmp, capsys)
    assert code == 1 and "(branch -d NAME, or branch -m NAME NEW)" in err, err
    assert "check_sequence" not in out + err and "delete_branch" not in err


@pytest.mark.parametrize("owner", ["a\x00b", "x" * 3000, "\udcff"])
@pytest.mark.parametrize("argv", [
    ["rebuild"], ["search", "Lisbon"], ["delete", "--yes"],
    ["prune", "--older-than", "1d", "--yes"],
])
def test_an_owner_no_store_can_hold_is_refused_as_the_owner_option_not_as_a_scope(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], argv: list[str], owner: str
) -> None:
    db, tmp = files
    before = db.read_bytes()
    code, out, err = call([*argv, "--owner", owner], db, tmp, capsys)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and "argument --owner: " in err, err
    assert "surrogate" not in err, err
    assert "scope" not in err, err
    assert db.read_bytes() == before


def test_a_thread_the_owner_does_not_hold_is_said_to_be_missing_for_that_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "o.db"
    with agui_store.open(db) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
                      {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}], scope="alice")
    for argv in (["rebuild"], ["search", "Lisbon"]):
        code, out, err = call([*argv, "--thread", "t1", "--owner", "bob"], db, tmp_path, capsys)
        assert (code, out) == (1, ""), err
        assert err == f"agui-store {argv[0]}: no thread 't1' of owner 'bob' (--owner) in {db}\n"
        assert call([*argv, "--thread", "t1", "--owner", "alice"], db, tmp_path, capsys)[0] == 0


def test_the_threads_table_lines_up_wide_and_combining_characters_by_the_cells_they_take(
    tmp_path: Path,
) -> None:
    import unicodedata

    import agui_store
    from tests.streams import run

    db = tmp_path / "wide.db"
    with agui_store.open(db) as store:
        for thread in ("\u65e5\u672c\u8a9e", "plain", "e\u0301te\u0301"):  # CJK, combining
            store.append(run(thread, f"r-{thread}"))
    out = io.StringIO()
    assert cli.main(["--db", str(db), "threads"], out=out) == 0

    def cells(text: str) -> int:
        return sum(2 if unicodedata.east_asian_width(c) == "W" else
                   0 if unicodedata.combining(c) else 1 for c in text)

    lines = out.getvalue().splitlines()
    owner_at = {cells(line[: line.index(" -  ") + 1]) for line in lines[1:]}
    assert owner_at == {cells(lines[0][: lines[0].index("OWNER")])}, lines


@pytest.mark.parametrize("argv", [["log"], ["runs"], ["branches"], ["log", "--graph"],
                                  ["log", "--all"]])
def test_a_run_id_holding_a_newline_stays_on_its_run_s_one_line_in_a_pipe(
    tmp_path: Path, argv: list[str]
) -> None:
    import agui_store
    from tests.streams import run

    db = tmp_path / "nl.db"
    with agui_store.open(db) as store:
        store.append(run("t", "a\nb"))
        store.append(run("t", "c\rd"))
    out = io.StringIO()
    assert cli.main(["--db", str(db), *argv], out=out) == 0
    lines = out.getvalue().splitlines()
    ids = ["c\\rd"] if argv == ["branches"] else ["a\\nb", "c\\rd"]  # main is at c\rd
    assert len(lines) == len(ids), lines
    assert all(any(i in line for line in lines) for i in ids), lines
    out = io.StringIO()  # --json gives the ids as they are
    assert cli.main(["--db", str(db), "--json", *argv], out=out) == 0
    assert "c\rd" in [item["runId"] for item in json.loads(out.getvalue())]


def test_export_artifact_to_a_file_with_json_prints_one_document_saying_what_it_wrote(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, tmp = files
    code, out, err = call(["export-artifact", "porto", "-o", f"{tmp}/a.json", "--json"], db,
                          tmp, capsys)
    assert code == 0, err
    said = json.loads(out)
    assert (said["output"], said["runId"]) == (f"{tmp}/a.json", "run-2")
    assert said["bytes"] == (tmp / "a.json").stat().st_size


def test_checkout_s_help_and_errors_name_checkout_as_typed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["checkout", "--help"])
    assert capsys.readouterr().out.startswith("usage: agui-store checkout [-h]")
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["show", "--help"])
    assert capsys.readouterr().out.startswith("usage: agui-store show [-h]")


@pytest.mark.parametrize(("typed", "said"), [
    ("lgo", "the most similar command is log"),
    ("shwo", "the most similar command is show"),
    ("checkotu", "the most similar command is checkout"),
    ("branchs", "the most similar commands are branches, branch"),
])
def test_a_mistyped_command_names_the_commands_most_like_it_as_git_does(
    capsys: pytest.CaptureFixture[str], typed: str, said: str
) -> None:
    assert cli.main([typed, "--thread", "t1"], out=io.StringIO()) == 2
    assert capsys.readouterr().err == (
        f"agui-store: '{typed}' is not an agui-store command; {said} (usage: agui-store --help)\n"
    )


def test_a_word_like_no_command_is_answered_with_the_list_of_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["--db", "x.db", "frobnicate"], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith("agui-store: 'frobnicate' is not an agui-store command: choose from "
                          "import, threads, runs, log, show, checkout, ")
    assert err.endswith(" (usage: agui-store --help)\n") and err.count("\n") == 1


def test_help_names_the_command_whose_help_to_print_as_git_help_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["help", "log"], out=io.StringIO()) == 0
    assert capsys.readouterr().out.startswith("usage: agui-store log ")
    assert cli.main(["help"], out=io.StringIO()) == 0
    assert capsys.readouterr().out.startswith("usage: agui-store [-h]")
    assert cli.main(["help", "lgo"], out=io.StringIO()) == 2
    assert "the most similar command is log" in capsys.readouterr().err


def test_version_as_a_command_prints_the_version_as_git_version_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["version"], out=io.StringIO()) == 0
    assert capsys.readouterr().out == f"agui-store {agui_store.__version__}\n"


@pytest.mark.parametrize(("argv", "said"), [
    (["--thread", "t1", "log"], "agui-store: unrecognized arguments: --thread (an option of log "
                                "goes after it: agui-store log --thread ...; usage: agui-store "
                                "log --help)"),
    (["--owner=al", "--limit", "3", "search", "porto"],
     "agui-store: unrecognized arguments: --owner=al --limit (options of search go after it: "
     "agui-store search --owner=al --limit ...; usage: agui-store search --help)"),
    (["--grpah", "log"], "agui-store: unrecognized arguments: --grpah (usage: agui-store --help)"),
])
def test_a_commands_option_given_before_it_is_told_to_go_after_it(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert cli.main(argv, out=io.StringIO()) == 2
    assert capsys.readouterr().err == said + "\n"


@pytest.mark.parametrize(("argv", "said"), [
    (["log", "--grpah"], "agui-store log: unrecognized arguments: --grpah (did you mean "
                         "--graph? usage: agui-store log --help)"),
    (["diff", "a", "b", "--two-dto"], "agui-store diff: unrecognized arguments: --two-dto "
                                      "(did you mean --two-dot? usage: agui-store diff --help)"),
    (["show", "--thraed=t1"], "agui-store show: unrecognized arguments: --thraed=t1 (did you "
                              "mean --thread? usage: agui-store show --help)"),
])
def test_a_mistyped_option_names_the_option_most_like_it(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert cli.main(argv, out=io.StringIO()) == 2
    assert capsys.readouterr().err == said + "\n"


@pytest.mark.parametrize(("argv", "said"), [
    (["delete", "t1"], "agui-store delete: unrecognized arguments: t1 (delete takes the thread "
                       "as --thread T: agui-store delete --thread t1; usage: agui-store delete "
                       "--help)"),
    (["delete", "--", "-t1"], "agui-store delete: unrecognized arguments: -- -t1 (delete takes "
                              "the thread as --thread T: agui-store delete --thread=-t1; usage: "
                              "agui-store delete --help)"),
    (["rebuild", "--json", "-t"], "agui-store rebuild: unrecognized arguments: -t (usage: "
                                  "agui-store rebuild --help)"),
    (["rebuild", "--json", "x y"], "agui-store rebuild: unrecognized arguments: x y (rebuild "
                                   "takes the thread as --thread T: agui-store rebuild --json "
                                   "--thread 'x y'; usage: agui-store rebuild --help)"),
    (["delete", "--thread", "t1", "t2"], "agui-store delete: unrecognized arguments: t2 (usage: "
                                         "agui-store delete --help)"),
    # delete takes --thread or --owner: with --owner, --thread would be refused in turn
    (["delete", "--owner", "alice", "t1"], "agui-store delete: unrecognized arguments: t1 "
                                           "(usage: agui-store delete --help)"),
    (["show", "r1", "r2"], "agui-store show: unrecognized arguments: r2 (usage: agui-store show "
                           "--help)"),
    (["check", "t1"], "agui-store check: unrecognized arguments: t1 (usage: agui-store check "
                      "--help)"),
])
def test_a_thread_given_as_a_word_to_a_command_that_takes_it_as_an_option_is_told_so(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert cli.main(argv, out=io.StringIO()) == 2
    assert capsys.readouterr().err == said + "\n"
