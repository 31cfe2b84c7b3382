"""Run every benchmark and write their tables to benchmarks/RESULTS.md.

    python -m benchmarks.run_all [--quick]

The figures are same-run ratios (each next to its baseline); absolute numbers move with the
machine, the ratios much less.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHMARKS = [
    ("append", ["benchmarks.bench_append"], ["--runs", "100", "--repeat", "3"]),
    ("checkout", ["benchmarks.bench_checkout"], ["--depths", "10,100", "--repeat", "3"]),
    ("file size", ["benchmarks.bench_file_size"], ["--runs", "200"]),
    ("HttpAgent appends", ["benchmarks.bench_http_agent"], ["--runs", "200"]),
    ("compression", ["benchmarks.bench_compression"], []),
    ("LangGraph SqliteSaver", ["benchmarks.bench_langgraph"], ["--runs", "200"]),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = parser.parse_args()
    out = [
        "# Benchmark results",
        "",
        f"Written by `python -m benchmarks.run_all` on {datetime.date.today()}.",
        "",
    ]
    for title, module, quick_args in BENCHMARKS:
        if module[0].endswith("langgraph") and importlib.util.find_spec("langgraph") is None:
            out += [
                f"## {title}",
                "",
                "skipped: `pip install langgraph-checkpoint-sqlite` first",
                "",
            ]
            continue
        argv = [sys.executable, "-m", *module, *(quick_args if args.quick else [])]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=HERE.parent)
        out += [f"## {title}", "", f"`{' '.join(['python', '-m', *argv[2:]])}`", ""]
        out += [proc.stdout.strip() or proc.stderr.strip(), ""]
        print(proc.stdout, proc.stderr, sep="\n", flush=True)
    (HERE / "RESULTS.md").write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
