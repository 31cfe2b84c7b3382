"""The benchmarks page lists every benchmark, with the figures its script last wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import run_all

ROOT = Path(__file__).resolve().parents[1]


def test_every_benchmark_script_is_described_and_nothing_else() -> None:
    assert run_all.discovered() == sorted(run_all.BENCHMARKS)


def test_each_benchmark_says_what_it_measures_against_what_and_how_to_run_it() -> None:
    for name, bench in run_all.BENCHMARKS.items():
        assert bench.title and bench.what and bench.baseline, name
        assert run_all.command(name)[:3] == ["python", "-m", f"benchmarks.{name}"]


def test_every_benchmark_has_figures() -> None:
    missing = [n for n in run_all.BENCHMARKS if not (run_all.RESULTS / f"{n}.md").exists()]
    assert not missing


def test_the_page_is_what_the_script_writes() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert page == run_all.render(), "run: python -m benchmarks.run_all --render"
    for name in run_all.BENCHMARKS:
        assert f"{{ #{name} }}" in page


def test_the_error_benchmark_opens_its_store_as_a_store_does(tmp_path: Path) -> None:
    from agui_store.backends import DEFAULT_BUSY_TIMEOUT_MS
    from benchmarks import bench_errors

    conn = bench_errors.connect(str(tmp_path / "store.db"))
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == DEFAULT_BUSY_TIMEOUT_MS
    finally:
        conn.close()


def test_the_import_benchmarks_baseline_writes_every_event_of_the_recording(
    tmp_path: Path,
) -> None:
    import subprocess

    import apsw

    from benchmarks import bench_import

    recording = tmp_path / "recording.jsonl"
    events = bench_import.write_recording(recording, 20_000, "jsonl")
    subprocess.run(bench_import.raw_import_cmd(recording, tmp_path / "raw.db"), check=True)
    conn = apsw.Connection(str(tmp_path / "raw.db"))
    try:
        assert conn.execute("SELECT count(*) FROM event_log").fetchone()[0] == events
    finally:
        conn.close()


def test_the_read_back_benchmark_runs_the_checks_append_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import bench_readback_checks

    bench_readback_checks.measure("a deep run", bench_readback_checks.deep_patch_run(5), 1)
    assert capsys.readouterr().out.startswith("a deep run: nesting checks ")


def test_the_compression_benchmarks_baseline_reads_every_byte_into_a_new_buffer() -> None:
    from benchmarks import bench_compression

    blobs = [b"x" * 600, b'{"role": "user"}' * 40]
    copies = bench_compression.plain_copies(blobs)
    assert [bytes(c) for c in copies] == blobs
    assert all(c is not b for c, b in zip(copies, blobs))


def test_the_search_benchmark_refuses_a_store_too_small_to_hold_its_rare_word() -> None:
    import subprocess
    import sys

    from benchmarks import bench_search

    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_search", "--threads", "10",
         "--append-runs", "1", "--repeat", "1", "--backends", "sqlite"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"--threads must be at least {bench_search.RARE_THREAD + 1}" in done.stderr


def test_the_async_benchmark_names_the_snapshot_by_the_size_it_was_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import bench_async

    bench_async.conversion_rows(bench_async.big_state(20_000), 0.02)
    assert "| the 0.02 MB snapshot |" in capsys.readouterr().out
