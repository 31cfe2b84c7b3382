"""A full disk, for real: the error is a store error, nothing acknowledged is lost, and the
same ``Store`` object works again once there is room.

Two real ways to run out of room, each in a child process (``tests/workers/fullness.py``):
RLIMIT_FSIZE just above the store's files (a write past it fails with EFBIG), and a small
tmpfs filled up to its last byte (ENOSPC; needs root to mount it, skipped otherwise).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agui_store
from tests.workers.harness import ROOT, worker_env


def fill_and_recover(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.workers.fullness", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=worker_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def assert_full_and_recovered(report: dict[str, Any], db: Path) -> None:
    failures = report["failures"]
    assert failures, "the limit was never reached"
    for failure in failures:
        assert failure["type"] == "StorageFullError", failure
        assert {"AguiStoreError", "OSError"} <= set(failure["mro"])
        assert failure["errno"] in (27, 28, 122), failure  # EFBIG, ENOSPC, EDQUOT
        assert str(db) in failure["message"]
        assert "free space and retry" in failure["message"]
    failed = {f["run"] for f in failures}
    # Every acknowledged batch is there, no failed one is, and after room was made the same
    # Store appended again and found the file clean.
    assert report["present"] == report["acked"] + report["after"]
    assert not failed & set(report["present"])
    assert report["check_ok"], report["problems"]
    # And another process, opening the file fresh, sees exactly the same.
    with agui_store.open(db) as store:
        assert [r.run_id for r in store.runs("full")] == report["present"]
        for run_id in report["present"]:
            assert len(store.events(run_id)) == 5
        assert store.check().ok


def test_a_file_size_limit_is_a_store_error_and_the_store_recovers(tmp_path: Path) -> None:
    db = tmp_path / "limited.db"
    report = fill_and_recover("rlimit", str(db))
    assert {f["errno"] for f in report["failures"]} == {27}  # EFBIG
    assert_full_and_recovered(report, db)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the RLIMIT_FSIZE test covers a full disk")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount_point)],
        capture_output=True, text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_file_system_is_a_store_error_and_the_store_recovers(small_tmpfs: Path) -> None:
    db = small_tmpfs / "store.db"
    report = fill_and_recover("tmpfs", str(db), str(small_tmpfs / "filler"))
    assert {f["errno"] for f in report["failures"]} <= {28}  # ENOSPC
    assert_full_and_recovered(report, db)
