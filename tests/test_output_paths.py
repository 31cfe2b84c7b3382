"""A command's output path is never replaced unless it is a regular file or new: a device
and a FIFO are written to as streams, ``-`` is stdout, and a symlink is written through.

Each command that writes a file is tried on a null device node made in a temporary folder
(``os.mknod``, which needs root: skipped without it), a FIFO with a reader on the other end,
and symlinks to a file and to the device."""

from __future__ import annotations

import io
import os
import stat
import threading
from pathlib import Path

import pytest

from agui_store import cli

#: Every command that writes a file, with ``{out}`` where its output path goes.
WRITERS = {
    "export -o": ["export", "porto", "-o", "{out}"],
    "export-artifact -o": ["export-artifact", "porto", "-o", "{out}"],
    "analyze OUT": ["analyze", "{out}"],
    "export --sqlite OUT": ["export", "--sqlite", "{out}"],
}


def run(db: Path, argv: list[str], out: str) -> tuple[int, str]:
    stdout = io.StringIO()
    code = cli.main(["--db", str(db), *(w.format(out=out) for w in argv)], out=stdout)
    return code, stdout.getvalue()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "chat.db"
    assert cli.main(["--db", str(path), "demo", "--json"], out=io.StringIO()) == 0
    return path


def null_device(folder: Path) -> Path:
    node = folder / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return node


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_device_is_written_to_and_stays_a_device(
    db: Path, tmp_path: Path, command: str
) -> None:
    node = null_device(tmp_path)
    before = os.stat(node)
    code, _ = run(db, WRITERS[command], str(node))
    assert code == 0
    after = os.stat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert (after.st_ino, sorted(os.listdir(tmp_path))) == (before.st_ino, ["null"])


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_fifo_gets_the_output_as_a_stream(db: Path, tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    code, _ = run(db, WRITERS[command], str(fifo))
    reader.join(timeout=60)
    assert code == 0 and stat.S_ISFIFO(os.stat(fifo).st_mode)
    data = received[0]
    if "analyze" in command or "sqlite" in command:
        assert data.startswith(b"SQLite format 3\x00")
    else:
        assert data.lstrip().startswith(b"{")
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_symlink_is_written_through_and_stays_a_link(
    db: Path, tmp_path: Path, command: str
) -> None:
    real = tmp_path / "real.out"
    link = tmp_path / "link.out"
    link.symlink_to(real)
    assert run(db, WRITERS[command], str(link))[0] == 0
    assert link.is_symlink() and real.stat().st_size > 0
    device_link = tmp_path / "device-link"
    device_link.symlink_to(null_device(tmp_path))
    assert run(db, WRITERS[command], str(device_link))[0] == 0
    assert device_link.is_symlink() and stat.S_ISCHR(os.stat(device_link).st_mode)


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_dash_writes_to_stdout(
    db: Path, command: str, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    code, text = run(db, WRITERS[command], "-")
    captured = capfdbinary.readouterr().out
    assert code == 0
    written = text.encode() + captured
    if "analyze" in command or "sqlite" in command:
        assert written.startswith(b"SQLite format 3\x00")
    else:
        assert written.lstrip().startswith(b"{")


@pytest.mark.parametrize("command", [*WRITERS, "export --all -o"])
@pytest.mark.parametrize("character", ["n", "é"])
def test_a_file_name_as_long_as_the_file_system_takes_is_written(
    db: Path, tmp_path: Path, command: str, character: str
) -> None:
    longest = os.pathconf(tmp_path, "PC_NAME_MAX")
    name = character * (longest // len(character.encode()))
    (tmp_path / name).write_bytes(b"")  # the file system takes the name: so does the command
    code, _ = run(db, WRITERS.get(command, ["export", "--all", "-o", "{out}"]),
                  str(tmp_path / name))
    assert code == 0
    assert os.listdir(tmp_path) == [name] and (tmp_path / name).stat().st_size > 0


@pytest.mark.parametrize(
    "argv", [WRITERS["export -o"], ["export", "--all", "-o", "{out}"]], ids=["events", "archive"]
)
def test_a_device_that_refuses_the_write_is_named_in_the_error(
    db: Path, tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # as /dev/full
    except PermissionError:
        pytest.skip("making a device node needs root")
    code, _ = run(db, argv, str(node))
    error = capsys.readouterr().err
    assert code == 1 and error == f"agui-store export: {node}: No space left on device\n"
    assert sorted(os.listdir(tmp_path)) == ["full"]
